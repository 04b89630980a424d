//! A verified program set attached at the hooks: its maps, its coverage
//! counters (per class: `eligible` hook events the set has a program for,
//! `observed` runs that completed, `dropped` escalations refused by a full
//! ring or runs that faulted) and what the runs cost. Swapping in another set
//! is what the host does between task epochs on the device: the maps start
//! zeroed and the generation advances.

use super::abi::{Context, Hook, MapKind, ProgramSet, ProgramType, RING_HEADER};
use super::interp::{self, Maps, RunStats};
use super::verifier::{verify, Rejection};
use crate::monitor::MAX_CLASSES;

#[derive(Debug, Clone)]
pub struct Attachment {
    pub set: ProgramSet,
    pub maps: Maps,
    /// Advances with every swap (the word the device polls).
    pub generation: u32,
    pub eligible: [u64; MAX_CLASSES],
    pub observed: [u64; MAX_CLASSES],
    pub dropped: [u64; MAX_CLASSES],
    pub faults: u64,
    /// Instructions and helper calls executed, over every run.
    pub insns: u64,
    pub helper_calls: u64,
    /// Nanoseconds the device spent in the hooks with a program, summed over
    /// workers (`mk_bpf_slot.hook_ns`; 0 off the GPU).
    pub device_hook_ns: u64,
    /// Of which in the device interpreter's dispatch loop (`mk_bpf_slot.exec_ns`; 0 compiled).
    pub device_exec_ns: u64,
    /// When `Some`, every hook context the set ran on, in order (the
    /// recorded task events the compiled translation is checked against).
    pub recorded: Option<Vec<(Hook, Context)>>,
}

impl Attachment {
    /// Verifies `set` as an observation program set and attaches it.
    pub fn new(set: ProgramSet) -> Result<Attachment, Rejection> {
        verify(&set, ProgramType::Observation)?;
        Ok(Attachment {
            maps: Maps::new(&set),
            set,
            generation: 1,
            eligible: [0; MAX_CLASSES],
            observed: [0; MAX_CLASSES],
            dropped: [0; MAX_CLASSES],
            faults: 0,
            insns: 0,
            helper_calls: 0,
            device_hook_ns: 0,
            device_exec_ns: 0,
            recorded: None,
        })
    }

    /// Replaces the attached set with `set` (verified first; on rejection the old set stays).
    pub fn swap(&mut self, set: ProgramSet) -> Result<(), Rejection> {
        let generation = self.generation + 1;
        *self = Attachment::new(set)?;
        self.generation = generation;
        Ok(())
    }

    /// Runs the program for `hook`, if the set has one.
    pub fn hook(&mut self, hook: Hook, ctx: &Context) -> Option<RunStats> {
        let prog = self.set.program(hook)?;
        if let Some(r) = self.recorded.as_mut() {
            r.push((hook, *ctx));
        }
        let cls = (ctx.class_id as usize).min(MAX_CLASSES - 1);
        self.eligible[cls] += 1;
        match interp::run(&self.set, &prog.code, ctx, &mut self.maps) {
            Ok(st) => {
                self.observed[cls] += 1;
                self.dropped[cls] += st.ring_dropped;
                self.insns += st.insns;
                self.helper_calls += st.helper_calls;
                Some(st)
            }
            Err(_) => {
                self.faults += 1;
                self.dropped[cls] += 1;
                None
            }
        }
    }

    /// Bytes the monitor exports: every array map whole, each ring's header
    /// and the records written, and the coverage counters.
    pub fn exported_bytes(&self) -> u64 {
        let mut b = (MAX_CLASSES * 3 * 8) as u64;
        for (i, m) in self.set.maps.iter().enumerate() {
            b += match m.kind {
                MapKind::Array => m.storage_bytes() as u64,
                MapKind::Ring => {
                    let (n, _) = self.maps.ring_counts(&self.set, i);
                    (RING_HEADER as u64) + n as u64 * m.value_size as u64
                }
            };
        }
        b
    }
}
