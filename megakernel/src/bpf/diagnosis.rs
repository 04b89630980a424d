//! The track's diagnosis as a monitor program (`megakernel/monitors/diagnose.bpf.c`):
//! attached at the task-end hook, its maps (per-class phase histograms,
//! sums and maxima, per-worker class counts and queue-pressure state, a
//! bounded ring of escalated raw events) are turned here into the same
//! [`Aggregates`] the fixed aggregation monitor exports, with the program's
//! coverage (eligible hook events, runs observed, runs or escalations
//! dropped), so the track's aggregate profiler reads the `ebpf` capture by
//! the same path as the `aggregate` one (megakernel/README.md, "The
//! diagnosis as a program").

use super::abi::{ProgramSet, RING_HEADER};
use super::attach::Attachment;
use super::{load, programs};
use crate::monitor::{aggregates_from, coverage_from, COVERAGE_BYTES, MAX_CLASSES};
use ground_truth::megakernel::{Capture, MonitorConfig, BUCKETS, CLASSES, PHASES};

/// One diagnosis program: its object under `megakernel/monitors/`, the
/// monitor name of its captures, and the sampling it does (as a fixed
/// configuration's `sample_period` / `sample_seed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Diagnosis {
    pub program: &'static str,
    pub monitor: &'static str,
    pub sample_period: u32,
    pub sample_seed: u32,
}

/// Every task aggregated.
pub const FULL: Diagnosis = Diagnosis {
    program: "diagnose",
    monitor: "ebpf",
    sample_period: 1,
    sample_seed: 0,
};

/// One task in 8 aggregated (the `aggregate-sampled` configuration's sampling): the budgeted one.
pub const SAMPLED: Diagnosis = Diagnosis {
    program: "diagnose_sampled",
    monitor: "ebpf-sampled",
    sample_period: 8,
    sample_seed: 0x5eed,
};

/// The diagnosis programs every case is captured with, in order.
pub const ALL: [Diagnosis; 2] = [FULL, SAMPLED];

/// Bytes of one `struct class_stats` (four sums, four maxima).
const STATS_BYTES: usize = 2 * PHASES.len() * 8;
/// Bytes of one `struct worker_state`.
const WORKER_BYTES: usize = 16;
/// Bytes of one `struct escalation`.
const ESCALATION_BYTES: usize = 16;

impl Diagnosis {
    /// The configuration it launches with: the fixed monitors off (what is
    /// recorded is the program's maps), named after it, with its sampling
    /// stated so that its coverage is read as partial by design.
    pub fn config(&self) -> MonitorConfig {
        MonitorConfig {
            name: self.monitor.into(),
            sample_period: self.sample_period,
            sample_seed: self.sample_seed,
            ..MonitorConfig::none()
        }
    }

    /// The program loaded, verified and attached with zeroed maps.
    pub fn attach(&self) -> Result<Attachment, String> {
        if let Some(why) = programs::unavailable() {
            return Err(why.into());
        }
        let elf = programs::object(self.program)
            .ok_or_else(|| format!("program {} was not built", self.program))?;
        let set = load(self.program, elf).map_err(|e| e.to_string())?;
        Attachment::new(set).map_err(|e| e.to_string())
    }
}

fn bytes_of<'a>(att: &'a Attachment, name: &str) -> Result<(&'a [u8], u32), String> {
    let set: &ProgramSet = &att.set;
    let m = set
        .map_index(name)
        .ok_or_else(|| format!("{}: no map `{name}`", set.name))?;
    let def = &set.maps[m];
    let at = att.maps.offsets[m];
    Ok((
        &att.maps.arena[at..at + def.storage_bytes()],
        def.max_entries,
    ))
}

fn le(b: &[u8]) -> u64 {
    let mut v = [0u8; 8];
    v[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(v)
}

/// The capture of one launch with the diagnosis attached: `workers` workers,
/// the launch's outer kernel time and the time the program took to attach.
pub fn capture(
    d: &Diagnosis,
    att: &Attachment,
    workers: u32,
    kernel_ns: u64,
    attach_ns: u64,
) -> Result<Capture, String> {
    let classes = CLASSES.len();
    let phases = PHASES.len();
    let (hist_b, _) = bytes_of(att, "hist")?;
    let (stats_b, _) = bytes_of(att, "stats")?;
    let (workers_b, worker_entries) = bytes_of(att, "workers")?;
    if workers > worker_entries {
        return Err(format!(
            "{}: {workers} workers, but its `workers` map holds {worker_entries}",
            d.program
        ));
    }
    let mut hist = vec![[[0u32; BUCKETS]; 4]; MAX_CLASSES];
    let mut sum = vec![[0u64; 4]; MAX_CLASSES];
    let mut max_key = vec![[0u64; 4]; MAX_CLASSES];
    let mut tasks = vec![0u64; MAX_CLASSES];
    for c in 0..classes {
        for k in 0..phases {
            for (b, slot) in hist[c][k].iter_mut().enumerate() {
                let at = 4 * ((c * phases + k) * BUCKETS + b);
                *slot = le(&hist_b[at..at + 4]) as u32;
            }
            let at = c * STATS_BYTES + 8 * k;
            sum[c][k] = le(&stats_b[at..at + 8]);
            max_key[c][k] = le(&stats_b[at + 8 * phases..at + 8 * phases + 8]);
        }
        // Every task adds to each phase's histogram once: the execution one counts them.
        tasks[c] = hist[c][3].iter().map(|&n| n as u64).sum();
    }
    // An escalated span is the exact maximum of its (class, phase) when the
    // map's plain compare-and-store lost it to another worker.
    let ring = att.maps.ring(&att.set, "escalated");
    for r in &ring {
        let task = le(&r[0..4]) as u32;
        let (c, k) = (le(&r[4..6]) as usize, le(&r[6..8]) as usize);
        let span = le(&r[8..16]);
        if c < classes && k < phases {
            let key = (span << 20) | (task as u64 & 0xfffff);
            max_key[c][k] = max_key[c][k].max(key);
        }
    }
    let mut worker_class = vec![vec![0u32; workers as usize]; MAX_CLASSES];
    let mut crossings = vec![0u32; workers as usize];
    let mut max_depth = vec![0u32; workers as usize];
    for w in 0..workers as usize {
        let e = &workers_b[w * WORKER_BYTES..(w + 1) * WORKER_BYTES];
        let counts = le(&e[0..8]);
        for (c, wc) in worker_class.iter_mut().enumerate().take(classes) {
            wc[w] = ((counts >> (16 * c)) & 0xffff) as u32;
        }
        crossings[w] = le(&e[8..12]) as u32;
        max_depth[w] = le(&e[12..14]) as u32;
    }
    let aggregates = aggregates_from(
        classes,
        &hist,
        &sum,
        &max_key,
        &tasks,
        &worker_class,
        &crossings,
        &max_depth,
    );
    // Observed: tasks aggregated (a task left out by sampling is not), and
    // not a run whose escalation the full ring refused.
    let observed: Vec<u64> = (0..MAX_CLASSES)
        .map(|c| {
            tasks[c]
                .min(att.observed[c])
                .min(att.eligible[c].saturating_sub(att.dropped[c]))
        })
        .collect();
    let coverage = coverage_from(classes, &att.eligible, &observed, &att.dropped);
    Ok(Capture {
        config: d.config(),
        kernel_ns,
        events: Vec::new(),
        aggregates: Some(aggregates),
        coverage,
        bytes_exported: exported_bytes(att, workers, ring.len()),
        config_apply_ns: attach_ns,
        pc_sampling: None,
    })
}

/// Bytes the host reads back, in the compact form the aggregation monitor's
/// figure uses: the histograms and per-class statistics whole, the
/// per-worker entries of the workers that ran, the ring's header and the
/// records written, and the coverage counters.
pub fn exported_bytes(att: &Attachment, workers: u32, escalations: usize) -> u64 {
    let array = |name: &str| bytes_of(att, name).map_or(0, |(b, _)| b.len() as u64);
    COVERAGE_BYTES
        + array("hist")
        + array("stats")
        + (workers as usize * WORKER_BYTES + RING_HEADER + escalations * ESCALATION_BYTES) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::Context;
    use crate::bpf::Hook;
    use ground_truth::megakernel::bucket;

    #[test]
    fn the_maps_become_the_aggregates_of_the_hooks_it_saw() {
        if programs::unavailable().is_some() {
            eprintln!("SKIP the_maps_become_the_aggregates_of_the_hooks_it_saw: no programs built");
            return;
        }
        let mut att = FULL.attach().expect("the diagnosis program verifies");
        let end = |task: u32,
                   class_id: u32,
                   worker: u32,
                   exec: u64,
                   wait: u64,
                   queue: u64,
                   depth: u32| Context {
            task,
            class_id,
            worker,
            ts_start: 1_000_000,
            ts_end: 1_000_000 + exec,
            wait_ns: wait,
            queue_ns: queue,
            notify_ns: 100,
            queue_depth: depth,
            hook: Hook::TaskEnd as u32,
            ..Context::default()
        };
        for ctx in [
            end(0, 1, 0, 10_000, 0, 300, 0),
            end(1, 1, 0, 12_000, 50_000, 200, 5),
            end(2, 1, 1, 9_000, 2_000, 100, 4),
            end(3, 2, 1, 700, 0, 0, 6),
            end(4, 2, 1, 800, 0, 0, 2),
            end(5, 2, 1, 900, 0, 0, 4),
        ] {
            att.hook(Hook::TaskEnd, &ctx)
                .expect("a verified program runs");
        }
        eprintln!(
            "diagnose: {} instructions, {} helper calls per run",
            att.insns as f64 / 6.0,
            att.helper_calls as f64 / 6.0
        );
        let cap = capture(&FULL, &att, 2, 5_000, 0).unwrap();
        let a = cap.aggregates.as_ref().unwrap();
        let gemm = &a.classes[1];
        assert_eq!(gemm.tasks, 3);
        assert_eq!(gemm.worker_tasks, vec![2, 1]);
        assert_eq!(gemm.phases[3].sum_ns, 31_000);
        assert_eq!(gemm.phases[3].max_ns, 12_000);
        assert_eq!(gemm.phases[3].max_task, 1);
        assert_eq!(gemm.phases[2].max_ns, 50_000);
        assert_eq!(gemm.phases[2].hist[bucket(50_000)], 1);
        assert_eq!(gemm.phases[1].max_ns, 300);
        assert_eq!(a.classes[2].worker_tasks, vec![0, 3]);
        // Worker 0 saw depths 0, 5 (one crossing); worker 1 saw 4, 6, 2, 4 (two).
        assert_eq!(a.pressure_crossings, vec![1, 2]);
        assert_eq!(a.max_depth, vec![5, 6]);
        let cov: u64 = cap.coverage.iter().map(|c| c.observed).sum();
        assert_eq!(cov, 6);
        // The 50 µs wait more than doubled gemm's longest wait: escalated.
        let ring = att.maps.ring(&att.set, "escalated");
        assert!(ring
            .iter()
            .any(|r| le(&r[0..4]) == 1 && le(&r[6..8]) == 2 && le(&r[8..16]) == 50_000));
        assert_eq!(
            cap.bytes_exported,
            exported_bytes(&att, 2, ring.len()),
            "bytes are the compact form"
        );
    }

    #[test]
    fn the_sampled_program_aggregates_the_tasks_the_devices_hash_samples() {
        if programs::unavailable().is_some() {
            eprintln!("SKIP the_sampled_program_aggregates_the_tasks_the_devices_hash_samples: no programs built");
            return;
        }
        let mut att = SAMPLED
            .attach()
            .expect("the sampled diagnosis program verifies");
        for task in 0..200u32 {
            let ctx = Context {
                task,
                class_id: 2,
                ts_start: 10,
                ts_end: 2_000,
                hook: Hook::TaskEnd as u32,
                ..Context::default()
            };
            att.hook(Hook::TaskEnd, &ctx)
                .expect("a verified program runs");
        }
        let cap = capture(&SAMPLED, &att, 1, 5_000, 0).unwrap();
        let expect = (0..200u32)
            .filter(|&t| ground_truth::megakernel::sampled(t, 8, 0x5eed))
            .count() as u64;
        assert!(expect > 0 && expect < 200);
        assert_eq!(cap.aggregates.as_ref().unwrap().classes[2].tasks, expect);
        let c = cap.coverage[2];
        assert_eq!((c.eligible, c.observed, c.dropped), (200, expect, 0));
        assert!(cap.config.is_budgeted());
    }

    #[test]
    fn a_full_budget_stays_within_the_aggregation_monitors() {
        if programs::unavailable().is_some() {
            eprintln!(
                "SKIP a_full_budget_stays_within_the_aggregation_monitors: no programs built"
            );
            return;
        }
        let att = SAMPLED
            .attach()
            .expect("the sampled diagnosis program verifies");
        // Every ring record written, 132 workers (one H200): at most the
        // fixed aggregation monitor's 5,184 bytes for the same launch.
        let full = exported_bytes(&att, 132, 64);
        let agg = COVERAGE_BYTES
            + CLASSES.len() as u64 * (8 + (PHASES.len() * (BUCKETS * 4 + 16)) as u64 + 4 * 132)
            + 8 * 132;
        assert_eq!(agg, 5_184);
        assert!(full <= agg, "{full} > {agg}");
    }
}
