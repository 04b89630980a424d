//! Where the critical path was held, from the records of one run alone: the
//! reading for an op without peers (one request, or its name launched only
//! from other contexts), where no normal timing exists to be late against.
//!
//! Walking the path from its root, the first element that held it names the
//! root cause (docs/scenario-space.md, "Labelling convention"):
//! - a scheduler or page-fault stall of a launching thread on the path that is
//!   not small beside the work it delayed: the host stall;
//! - else the first device op on the path. Work of another origin (another
//!   request, or work no request launched) holding the path: the gate it held
//!   it through (SMs or copy engine: occupancy or PCIe contention; the stream:
//!   backlog). A host call on the path whose time on the CPU before it
//!   exceeds the path's other host gaps beyond their spread and what any host
//!   has: the request's host work (the run's own host pace is the norm a
//!   peerless op has). Otherwise the request's first op ran as long as it
//!   did, and the gate right after it names the delay.
//! - before the first device op: a copy asked about whose own transfer took
//!   most of the path's time, longer than any device op before it, or that
//!   is longer than anything else on the path (every other device op and
//!   every wait of one to start), held the path itself (slow, or sharing the
//!   link with other streams' copies).

use super::graph::Graph;
use super::readings;
use super::thresholds::{
    HANDOFF_MAX_LAG_NS, HOST_COMPUTE_ALTERNATIVE, LINK_SHARED_SHARE, MAX_HANDOFF_LINKS, NOISE_NS,
    OVERLAP_SCAN_OPS, STALL_LOOKBACK_NS, STALL_NS, STALL_WORK_SHARE, START_WAIT_WORK_SHARE,
    STRUCTURAL_NONE, TRANSFER_MARGIN, TRANSFER_SHARE, TRANSFER_SHARE_CLEARLY_LONGEST,
};
use crate::index::Pos;
use ground_truth::trace::Record;
use ground_truth::{CauseLabel, Ns};

impl Graph<'_> {
    /// The root cause of `p`'s timing read from its critical path; `None` when
    /// the path is not complete in the view (a guess would hide the gap).
    pub(super) fn structural_root(&self, p: Pos) -> Option<Vec<(CauseLabel, f64)>> {
        let ix = &self.ix;
        let (path, unresolved) = self.structural_path(p);
        let open_root = self.request_begin_unseen(&path, unresolved);
        if unresolved.is_some() && !open_root {
            return None;
        }
        let first_device = path.iter().position(|&x| ix.rec(x).is_device_op());
        let device_work = first_device.map_or(0.0, |i| {
            ix.end(path[i]).saturating_sub(ix.start(path[i])) as f64
        });
        // The largest stall of a launching thread before a call on the path,
        // and on the path to what let a stall at its root begin.
        let searched = self.past_the_root_stall(&path);
        let mut stall: Option<(CauseLabel, f64)> = None;
        for (i, &x) in searched.iter().enumerate() {
            let mut keep = |found: (CauseLabel, f64)| {
                if found.1 > stall.map_or(0.0, |s| s.1) {
                    stall = Some(found);
                }
            };
            // A stall record on the path itself (its `fault` edge into a call).
            if let Some(found) = self.path_stall(&searched, i) {
                keep(found);
                continue;
            }
            if !matches!(ix.rec(x), Record::Api { .. } | Record::Uprobe { .. }) {
                continue;
            }
            let Some(tid) = ix.rec(x).tid() else { continue };
            let from = match i.checked_sub(1) {
                Some(j) => ix.end(searched[j]),
                // The unseen beginning of the request, its thread's first call:
                // the thread's records before it may hold a stall.
                None if open_root => ix.start(x).saturating_sub(STALL_LOOKBACK_NS),
                None => ix.start(x).saturating_sub(1),
            };
            let st = readings::host_stalls(ix, tid, from.min(ix.start(x)), ix.start(x));
            keep((CauseLabel::CpuDeschedule, st.desched_ns));
            keep((CauseLabel::HostPageFault, st.fault_ns));
        }
        if let Some((label, size)) = stall {
            if size >= STALL_NS || size >= STALL_WORK_SHARE * device_work {
                cov_mark::hit!(structural_host_stall);
                return Some(vec![
                    (label, 1.0),
                    (CauseLabel::HostCompute, HOST_COMPUTE_ALTERNATIVE),
                ]);
            }
        }
        if let Some(label) = self.own_transfer_held(p, &path) {
            return Some(vec![(label, 1.0), (CauseLabel::None, STRUCTURAL_NONE)]);
        }
        let Some(i) = first_device else {
            // Host work only: the host chain decided the timing.
            return ix.launch_api(p).map(|a| self.host_structural(a));
        };
        let d = path[i];
        if d == p {
            return ix.launch_api(p).map(|a| self.host_structural(a));
        }
        // The first op waited to start after its launch while other streams'
        // work of its kind ran: it waited for the copy engine or the SMs.
        if let Some((q, _, st, _)) = readings::device_times(ix, d) {
            let ready = ix.launch_api(d).map_or(q, |a| ix.end(a).max(q));
            let copy = matches!(ix.rec(d), Record::Memcpy { .. });
            if st > ready
                && (st - ready) as f64 >= NOISE_NS.max(START_WAIT_WORK_SHARE * device_work)
            {
                let o = crate::analysis::overlap_by_others(ix, d, ready, st, |o| {
                    matches!(o, Record::Memcpy { .. }) == copy && o.is_device_op()
                });
                if o > 0.0
                    && self
                        .incoming_of(d, ground_truth::EdgeType::StreamOrder)
                        .is_none_or(|e| ix.end(e.src) < ready)
                {
                    return Some(vec![
                        (contention(copy), 1.0),
                        (CauseLabel::None, STRUCTURAL_NONE),
                    ]);
                }
            }
        }
        if let Some(call) = self.host_gap_that_held(&path) {
            return Some(self.host_structural(call));
        }
        let gate = self.gate_after(&path, i);
        if self.foreign_work_held_nothing(p, &path[i..]) {
            cov_mark::hit!(foreign_work_beside_the_path_held_nothing);
            return Some(vec![(CauseLabel::None, 1.0), (gate, STRUCTURAL_NONE)]);
        }
        Some(vec![(gate, 1.0), (CauseLabel::None, STRUCTURAL_NONE)])
    }

    /// `p`'s critical path and where it stops unresolved.
    /// [`Graph::critical_path`] walks it; in closed mode the structural
    /// reading (an op without peers: a program run once) goes on where that
    /// walk stops at a host call:
    /// - across the call's program-order gap the host collector's records do
    ///   not join: the join bound keeps a serving loop's next request from
    ///   being read as the previous one's continuation, and a program run
    ///   once has no next request (`host_gap_that_held` then reads the gap
    ///   as any other of the path);
    /// - across the one handoff the timing of this run shows: a thread whose
    ///   first call in the view starts within a wake-up
    ///   ([`HANDOFF_MAX_LAG_NS`]) of the end of one other thread's call, and
    ///   of no third thread's, was handed its work by that thread, or by
    ///   none. `handoff_inference` reads the same hypothesis over a thread's
    ///   recurring resumes; a program that runs once has only this one.
    fn structural_path(&self, p: Pos) -> (Vec<Pos>, Option<Pos>) {
        let (mut path, mut unresolved) = self.critical_path(p);
        if !self.lacks_request_identity() {
            return (path, unresolved);
        }
        for _ in 0..MAX_HANDOFF_LINKS {
            let Some(u) = unresolved.filter(|&u| self.stopped_at_host_root(&path, u)) else {
                break;
            };
            let before_it = match self.incoming_of(u, ground_truth::EdgeType::HostOrder) {
                Some(e) => {
                    cov_mark::hit!(structural_unjoined_gap_crossed);
                    e.src
                }
                None => {
                    let [handed_by] = self.calls_just_ended_before(u)[..] else {
                        break;
                    };
                    cov_mark::hit!(structural_sole_handoff);
                    handed_by
                }
            };
            let (mut upstream, before) = self.critical_path(before_it);
            if upstream.iter().any(|x| path.contains(x)) {
                break;
            }
            upstream.append(&mut path);
            (path, unresolved) = (upstream, before);
        }
        (path, unresolved)
    }

    /// `path`, and where a stall record is its root, the critical path to
    /// the program-order predecessor of the call that stall delayed before
    /// it: the stall happened on that call's thread inside the work the
    /// thread was doing, so what let that work begin lies upstream, and a
    /// larger stall there (a thread preempted before it handed the work on)
    /// is the larger stall of the path. The critical path ends at the stall
    /// because its record ended after the work arrived: an untimed minor
    /// fault 2 µs after a task began read `host_page_fault` where the thread
    /// that handed that task on had been preempted for 1.7 ms (an H200
    /// page-fault/preempted pair, `h200-580-20261205`). Only the stall search
    /// reads further: the device work a stall is weighed against stays the
    /// path's own. Not past an unjoined gap, where closed mode's walk stops.
    fn past_the_root_stall(&self, path: &[Pos]) -> Vec<Pos> {
        let ix = &self.ix;
        let before = match (path.first(), path.get(1)) {
            (Some(&root), Some(&call)) if stall_of(ix.rec(root)).is_some() => self
                .incoming_of(call, ground_truth::EdgeType::HostOrder)
                .filter(|e| e.ev != ground_truth::Evidence::Inferred || self.joined(e)),
            _ => None,
        };
        let Some(e) = before else {
            return path.to_vec();
        };
        let (mut upstream, _) = self.critical_path(e.src);
        if upstream.iter().any(|x| path.contains(x)) {
            return path.to_vec();
        }
        cov_mark::hit!(structural_walk_past_a_stall);
        upstream.extend_from_slice(path);
        upstream
    }

    /// Of the path's host calls, the one whose time on the CPU in its gap
    /// since its thread's previous call (stalls and blocked time taken off:
    /// [`Graph::gap_on_the_cpu`]) exceeds the same gaps of the path's other
    /// host calls most, beyond their spread and what any host has
    /// ([`readings::host_jitter`]): host work of the request held the path
    /// there. Without peers the run's own host calls are the norm of its host
    /// pace, as a launch's peers are for `grown_host_gap`; a gap no longer
    /// than the others' was the host's usual pace, and the path was held
    /// elsewhere. Read alike in every view: closed mode crosses gaps its host
    /// records do not join (`structural_path`) and reads them here too.
    ///
    /// Only a gap between two calls of a thread can have held the path: the
    /// gap before a task's (or request's) first call counts from its begin
    /// marker and holds the thread's wake-up and the task's setup (a harmless
    /// serving step's first launch came 113 µs after its task began where its
    /// calls followed one another by 6–19 µs: read as host work, in the CUPTI
    /// 13.0 replay of `results/corpus`). It still sets the pace the others
    /// are read against: a path of one task whose launches follow its first
    /// has no other gap to read them by.
    fn host_gap_that_held(&self, path: &[Pos]) -> Option<Pos> {
        let ix = &self.ix;
        let is_call = |c: Pos| matches!(ix.rec(c), Record::Api { .. } | Record::Uprobe { .. });
        let after_a_call = |c: Pos| {
            self.incoming_of(c, ground_truth::EdgeType::HostOrder)
                .is_some_and(|e| is_call(e.src))
        };
        let gaps: Vec<(Pos, f64)> = path
            .iter()
            .filter(|&&c| is_call(c))
            .filter_map(|&c| self.gap_on_the_cpu(c).map(|g| (c, g.0)))
            .collect();
        let excess = |&(call, gap): &(Pos, f64)| {
            let usual: Vec<f64> = gaps.iter().filter(|g| g.0 != call).map(|g| g.1).collect();
            let spread = crate::analysis::peer_spread(&usual);
            let norm = crate::index::median(usual)?;
            readings::grown_gap(gap, norm, spread).map(|excess| (call, excess))
        };
        let (call, _) = gaps
            .iter()
            .filter(|g| after_a_call(g.0))
            .filter_map(excess)
            .max_by(|a, b| a.1.total_cmp(&b.1))?;
        cov_mark::hit!(structural_host_gap_held_the_path);
        Some(call)
    }

    /// Whether `u`, where the walk stopped, is the root of `path`: a host
    /// call with no record the semantics require missing there (only its
    /// host predecessor, or none, stopped the walk).
    fn stopped_at_host_root(&self, path: &[Pos], u: Pos) -> bool {
        path.first() == Some(&u)
            && !self.missing_at.contains_key(&u)
            && matches!(self.ix.rec(u), Record::Api { .. } | Record::Uprobe { .. })
    }

    /// Whether `u`, where the walk stopped at the root of `path`, is its
    /// thread's first call in the view (no program-order predecessor).
    fn first_call_of_its_thread(&self, path: &[Pos], u: Pos) -> bool {
        self.stopped_at_host_root(path, u)
            && self
                .incoming_of(u, ground_truth::EdgeType::HostOrder)
                .is_none()
    }

    /// The calls of other threads than `u`'s that ended within a wake-up
    /// ([`HANDOFF_MAX_LAG_NS`]) before host call `u` started, one per thread
    /// (a thread's calls follow one another: the last to start before `u`
    /// is the one that ended last). Each may have handed `u`'s thread its
    /// work through a queue the view cannot see.
    fn calls_just_ended_before(&self, u: Pos) -> Vec<Pos> {
        let ix = &self.ix;
        let (own, at) = (ix.rec(u).tid(), ix.start(u));
        let since = at.saturating_sub(HANDOFF_MAX_LAG_NS as Ns);
        let mut found: Vec<Pos> = ix
            .threads
            .iter()
            .filter(|(&tid, _)| Some(tid) != own)
            .filter_map(|(_, th)| {
                let k = th.calls.partition_point(|&c| ix.start(c) < at);
                let last = *th.calls.get(k.checked_sub(1)?)?;
                (since..=at).contains(&ix.end(last)).then_some(last)
            })
            .collect();
        found.sort_unstable_by_key(|&c| ix.rid(c));
        found
    }

    /// Whether the walk from the symptom stopped only where the request's
    /// beginning is not in the view: closed mode, at the path's root, the
    /// first call of its thread, where no other thread's call ended within a
    /// wake-up before it (nothing handed it work). The path from there on is
    /// complete: an instrumented view of the same run reaches the same call
    /// from its request's beginning marker, and the structural reading walks
    /// it the same way.
    fn request_begin_unseen(&self, path: &[Pos], unresolved: Option<Pos>) -> bool {
        let open = self.lacks_request_identity()
            && unresolved.is_some_and(|u| {
                self.first_call_of_its_thread(path, u) && self.calls_just_ended_before(u).is_empty()
            });
        if open {
            cov_mark::hit!(structural_request_begin_unseen);
        }
        open
    }

    /// Work no request launched ran beside the path's device ops (`path`
    /// from its first device op on), none of it on the path, and none of the
    /// path's ops waited to start while it ran: the one outside influence the
    /// run shows held nothing, so without peers nothing says the path was
    /// late at all (docs/scenario-space.md, "Labelling convention": a symptom
    /// not late beyond the noise is `none`, whatever ran beside it). Only
    /// where tokens say which work no request launched: another request's
    /// work is the program's own, and without tokens the view cannot tell
    /// the program's work from an outsider's.
    fn foreign_work_held_nothing(&self, p: Pos, path: &[Pos]) -> bool {
        let ix = &self.ix;
        // A lost correlation record leaves work of a request without its token.
        if self.loss_plausible || self.token(p).is_none() {
            return false;
        }
        let foreign = |q: Pos| self.token(q).is_none();
        if path.iter().any(|&x| ix.rec(x).is_device_op() && foreign(x)) {
            return false;
        }
        let (Some(&first), lo_end) = (path.first(), ix.end(p)) else {
            return false;
        };
        let lo = ix.start(first);
        let ran_beside = |from: Ns, to: Ns, copy: Option<bool>| {
            let k = ix.device_ops.partition_point(|&q| ix.start(q) < to);
            ix.device_ops[..k]
                .iter()
                .rev()
                .take(OVERLAP_SCAN_OPS)
                .any(|&q| {
                    !path.contains(&q)
                        && ix.end(q) > from
                        && copy.is_none_or(|c| matches!(ix.rec(q), Record::Memcpy { .. }) == c)
                        && foreign(q)
                })
        };
        if !ran_beside(lo, lo_end, None) {
            return false;
        }
        // Each op of the path was let go by the one before it on the path (the
        // gate that held it last): a start later than that is a wait for the
        // SMs or the copy engine.
        path.windows(2)
            .filter(|w| ix.rec(w[1]).is_device_op())
            .all(|w| {
                let Some((_, _, st, _)) = readings::device_times(ix, w[1]) else {
                    return true;
                };
                let ready = self.done(w[0]);
                let copy = matches!(ix.rec(w[1]), Record::Memcpy { .. });
                (st.saturating_sub(ready) as f64) < NOISE_NS || !ran_beside(ready, st, Some(copy))
            })
    }
}

impl Graph<'_> {
    /// A copy asked about whose own transfer took most of the time since its
    /// path began, and longer than any other device op on the path: the
    /// transfer held the path, not the work before it. A copy's duration is
    /// its bytes over the link's rate, so no peer is needed to see that the
    /// path waited on it. It is PCIe contention when other streams' copies
    /// shared the link for a quarter of it or more, else the copy was slow.
    fn own_transfer_held(&self, p: Pos, path: &[Pos]) -> Option<CauseLabel> {
        let ix = &self.ix;
        if !matches!(ix.rec(p), Record::Memcpy { .. }) {
            return None;
        }
        let (_, _, start, end) = readings::device_times(ix, p)?;
        let transfer = end.saturating_sub(start) as f64;
        let begin = path.first().map_or(start, |&x| ix.start(x));
        let share = transfer / (end.saturating_sub(begin) as f64).max(1.0);
        let longest_other = path
            .iter()
            .filter(|&&x| x != p && ix.rec(x).is_device_op())
            .map(|&x| ix.end(x).saturating_sub(ix.start(x)) as f64)
            .fold(0.0, f64::max);
        // Most of the path's time, or a large part of it and clearly longer
        // than any other op on it (a copy about as long as the kernel before
        // it says nothing about which of them held the path).
        let held = (share >= TRANSFER_SHARE && transfer > longest_other)
            || (share >= TRANSFER_SHARE_CLEARLY_LONGEST
                && transfer >= TRANSFER_MARGIN * longest_other)
            || self.transfer_longest_on_path(p, path, transfer, longest_other);
        if !held {
            return None;
        }
        cov_mark::hit!(own_transfer_held_the_path);
        let shared = crate::analysis::overlap_by_others(ix, p, start, end, |o| {
            matches!(o, Record::Memcpy { .. })
        });
        Some(if shared >= LINK_SHARED_SHARE * transfer {
            CauseLabel::PcieContention
        } else {
            CauseLabel::SlowCopy
        })
    }

    /// Whether copy `p`'s transfer held its path longer than anything else on
    /// it: longer, beyond the noise ([`NOISE_NS`]), than every other device op
    /// on the path (`longest_other`) and than every wait of one to start after
    /// what let it go. Removing any other element of the path would move the
    /// symptom less: without peers this is step 4b's largest effect, read from
    /// durations alone, however small a part of a long path the copy is. Not
    /// where the path runs through work of another request or of none (tokens
    /// say so): that work held it, and the reading after this one names the
    /// gate it held it through.
    fn transfer_longest_on_path(
        &self,
        p: Pos,
        path: &[Pos],
        transfer: f64,
        longest_other: f64,
    ) -> bool {
        let ix = &self.ix;
        let symptom_token = self.token(p);
        let others = || {
            path.iter()
                .enumerate()
                .filter(|&(_, &x)| x != p && ix.rec(x).is_device_op())
        };
        if symptom_token.is_some() && others().any(|(_, &x)| self.token(x) != symptom_token) {
            return false;
        }
        let longest_wait = others()
            .filter_map(|(i, &x)| {
                let (_, _, start, _) = readings::device_times(ix, x)?;
                let launched = ix.launch_api(x).map_or(0, |a| ix.end(a));
                let ready = i
                    .checked_sub(1)
                    .map_or(launched, |j| launched.max(self.done(path[j])));
                Some(start.saturating_sub(ready) as f64)
            })
            .fold(0.0, f64::max);
        let longest = transfer - longest_other.max(longest_wait) > NOISE_NS;
        if longest {
            cov_mark::hit!(transfer_longest_on_path);
        }
        longest
    }

    /// The host stall a scheduler or page-fault record at `path[i]` stands for,
    /// and how long it held its thread (ns). A `fault` edge names only the
    /// thread's last stall record before the call it feeds (`host_edges`); the
    /// stall is every record of that kind on the thread between the call's
    /// program-order predecessor and the call (a run of back-to-back faults is
    /// one stall, not its last fault).
    pub(super) fn path_stall(&self, path: &[Pos], i: usize) -> Option<(CauseLabel, f64)> {
        let ix = &self.ix;
        let (label, own) = stall_of(ix.rec(path[i]))?;
        let Some(&call) = path
            .get(i + 1)
            .filter(|&&c| matches!(ix.rec(c), Record::Api { .. } | Record::Uprobe { .. }))
        else {
            return Some((label, own));
        };
        let Some(tid) = ix.rec(call).tid() else {
            return Some((label, own));
        };
        let from = self
            .incoming_of(call, ground_truth::EdgeType::HostOrder)
            .map(|e| ix.end(e.src))
            .unwrap_or_else(|| ix.start(call).saturating_sub(STALL_LOOKBACK_NS));
        let st = readings::host_stalls(ix, tid, from.min(ix.start(call)), ix.start(call));
        let total = match label {
            CauseLabel::CpuDeschedule => st.desched_ns,
            _ => st.fault_ns,
        };
        if total > own {
            // A run of stall records before the call is one stall of their sum.
            cov_mark::hit!(stall_run_is_one_stall);
        }
        Some((label, own.max(total)))
    }
}

/// The host cause a scheduler or page-fault record stands for, and how long it
/// held its thread (ns).
pub(super) fn stall_of(rec: &Record) -> Option<(CauseLabel, f64)> {
    match rec {
        Record::Sched {
            switch_out,
            switch_in,
            ..
        } => Some((
            CauseLabel::CpuDeschedule,
            switch_in.saturating_sub(*switch_out) as f64,
        )),
        Record::PageFault { duration, .. } => Some((CauseLabel::HostPageFault, *duration as f64)),
        _ => None,
    }
}

/// What another stream's work holding the resource an op needed is: the copy
/// engine for a copy, the SMs for anything else.
pub(super) fn contention(copy: bool) -> CauseLabel {
    if copy {
        CauseLabel::PcieContention
    } else {
        CauseLabel::OccupancyPressure
    }
}
