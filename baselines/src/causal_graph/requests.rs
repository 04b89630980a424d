//! Cross-request holds (issue 35): a request whose host thread was still busy
//! with earlier requests when it arrived is late by whatever held those
//! requests, and its peers (the same ops of the other requests) are late by the
//! same delay, so lateness against them reads nothing. Here the held chain is
//! read instead: the requests the thread served back to back before the
//! symptom's (each one's work was ready, by the enqueue its task was handed off
//! by or its `request_begin` marker, before the thread's previous request's
//! last call returned: the `busy` edge of docs/records.md)
//! and the symptom's own request up to the symptom. Each of their device ops is
//! judged by its own phases against its own peers, which a delay propagating
//! from request to request leaves untouched (a host gap, a stall, an execution
//! do not grow because the op started late). The largest late phase is the root,
//! labelled as docs/scenario-space.md "Labels across requests" says.
//!
//! Cost: the chain can be every request of a busy thread (a launch-bound
//! loop whose requests all arrived at once holds each behind all earlier
//! ones), so each step is constant: the requests' arrivals are read from one
//! pass over the thread's markers, and an op of an operation with more than
//! [`MAX_CANDIDATE_INSTANCES`] instances, whose peers alone would cost a scan
//! of them all per op, is left unread; a chain with ops left unread and no
//! late phase found is no finding (the rest of the diagnosis judges the
//! symptom), as with records lost.

use super::graph::Graph;
use super::readings;
use super::thresholds::{CROSS_REQUEST_ALTERNATIVE, CROSS_REQUEST_CLEAN, MAX_CANDIDATE_INSTANCES};
use crate::analysis::{EXECUTION_PHASE, HOST_PHASE};
use crate::index::{FastMap, Pos};
use ground_truth::trace::{MarkerPhase, Record};
use ground_truth::{CauseLabel, EdgeType, SharedStr};

/// A request's calls on the thread: (token, first call, last call) as indices
/// into the thread's calls.
type Run = (SharedStr, usize, usize);

impl Graph<'_> {
    /// The causes of `p` when its request was held by earlier requests on its
    /// thread; `None` when it was not (or the view has no request identity), and
    /// the rest of the diagnosis judges it.
    pub(super) fn held_by_other_requests(&self, p: Pos) -> Option<Vec<(CauseLabel, f64)>> {
        let ix = &self.ix;
        let own = self.token(p)?;
        // Only a symptom whose critical path leaves its request through its
        // thread waited on the thread; one that another request's device work
        // held through a stream or an event is read along that gating chain.
        let (path, _) = self.critical_path(p);
        let left_by_device = path
            .iter()
            .rev()
            .find(|&&x| self.token(x).is_some_and(|t| t != own))
            .is_some_and(|&x| {
                !matches!(self.ix.rec(x), Record::Api { .. } | Record::Uprobe { .. })
            });
        if left_by_device {
            return None;
        }
        let call = self.call_of(p)?;
        let tid = ix.rec(call).tid()?;
        let calls = &ix.thread(tid)?.calls;
        let mut runs: Vec<Run> = Vec::new();
        for (i, &c) in calls.iter().enumerate() {
            // A thread that also makes calls outside any request is no request
            // server: its order between requests says nothing.
            let t = self.token(c)?;
            match runs.last_mut() {
                Some(run) if run.0 == t => run.2 = i,
                _ => runs.push((t, i, i)),
            }
        }
        let mine = runs.iter().position(|r| r.0 == own)?;
        let arrivals = self.arrivals(tid);
        let mut first = mine;
        while first > 0 {
            let arrival = *arrivals.get(&runs[first].0)?;
            if arrival >= ix.end(calls[runs[first - 1].2]) {
                break;
            }
            first -= 1;
        }
        if first == mine {
            return None;
        }
        cov_mark::hit!(held_by_earlier_request);
        // A late phase in the chain is a cause only as far as removing it
        // moves the symptom (the counterfactual, `counterfactual.rs`): the
        // thread may have had slack, or the symptom waited on something else.
        let floor = self.counterfactual_floor(p);
        let cone = self.cone(p);
        let mut best: Option<(CauseLabel, f64)> = None;
        let mut unread = false;
        for (k, run) in runs[first..=mine].iter().enumerate() {
            let is_own = first + k == mine;
            for &c in &calls[run.1..=run.2] {
                if is_own && ix.start(c) > ix.start(call) {
                    break;
                }
                for x in self.launched_ops(c) {
                    if self.peers.instances(ix.rec(x)) > MAX_CANDIDATE_INSTANCES {
                        unread = true;
                        continue;
                    }
                    let Some((label, excess, at)) = self.late_in_chain(x, is_own, run, calls)
                    else {
                        continue;
                    };
                    let effect = self.effect(&cone, at, excess);
                    if effect <= floor {
                        cov_mark::hit!(held_chain_delay_moved_too_little);
                        continue;
                    }
                    if best.is_none_or(|b| effect > b.1) {
                        best = Some((label, effect));
                    }
                }
            }
        }
        match best {
            Some((label, excess)) => Some(vec![
                (label, excess),
                (CauseLabel::None, excess * CROSS_REQUEST_ALTERNATIVE),
            ]),
            // With records lost, the one that shows a late phase in the chain
            // may be gone: a clean chain is then no finding, and the rest of the
            // diagnosis judges the symptom.
            None if self.loss_plausible => None,
            // Ops left unread may hold the late phase: no finding either.
            None if unread => {
                cov_mark::hit!(held_chain_unread);
                None
            }
            None => {
                cov_mark::hit!(held_chain_clean);
                Some(vec![(CauseLabel::None, CROSS_REQUEST_CLEAN)])
            }
        }
    }

    /// When each request's work was ready for `tid`, by token: the enqueue its
    /// task on the thread was handed off by, else the request's arrival (the
    /// `request_begin` its task follows, or one on the thread itself). A
    /// request with neither marker on the thread is absent. The first marker of
    /// each phase and token counts, read in one pass over the thread's markers.
    fn arrivals(&self, tid: u32) -> FastMap<SharedStr, u64> {
        let ix = &self.ix;
        let Some(thread) = ix.thread(tid) else {
            return FastMap::default();
        };
        let mut first: FastMap<SharedStr, (Option<Pos>, Option<Pos>)> = FastMap::default();
        for &m in &thread.markers {
            if let Record::Marker { phase, token, .. } = ix.rec(m) {
                let (task, begin) = first.entry(token.clone()).or_default();
                let slot = match phase {
                    MarkerPhase::TaskBegin => task,
                    MarkerPhase::RequestBegin => begin,
                    _ => continue,
                };
                slot.get_or_insert(m);
            }
        }
        first
            .into_iter()
            .filter_map(|(token, (task, begin))| {
                let readied = task.and_then(|t| {
                    self.incoming_of(t, EdgeType::Handoff)
                        .or_else(|| self.incoming_of(t, EdgeType::Request))
                });
                let at = match readied {
                    Some(e) => ix.start(e.src),
                    None => ix.start(begin?),
                };
                Some((token, at))
            })
            .collect()
    }

    /// The device ops a host call launched.
    pub(super) fn launched_ops(&self, c: Pos) -> Vec<Pos> {
        let ix = &self.ix;
        let Some(corr) = ix.rec(c).correlation_id() else {
            return Vec::new();
        };
        ix.activities(corr)
            .map(|v| {
                v.iter()
                    .copied()
                    .filter(|&a| ix.rec(a).is_device_op())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `x`'s own late phase against its own peers, labelled by how it reached
    /// the symptom: (label, excess ns, the record it delayed: the launch call
    /// for a late launch, `x` for its execution). Only phases a delay
    /// propagating from request to request leaves alone count: the host gap
    /// before the launch (not the wait since the request arrived, which grows
    /// down the chain) and, in another request, the device execution.
    fn late_in_chain(
        &self,
        x: Pos,
        is_own: bool,
        run: &Run,
        calls: &[Pos],
    ) -> Option<(CauseLabel, f64, Pos)> {
        let ix = &self.ix;
        let peers = self.peers_of_the_same_size(x);
        if peers.is_empty() {
            return None;
        }
        let floors = self.phase_floors(&peers);
        let (ph, _) = self.device_phases(x, &peers);
        let mut found: Option<(CauseLabel, f64, Pos)> = None;
        if let Some((label, gap_x)) = self.late_gap(x, &peers, is_own) {
            if gap_x > floors[HOST_PHASE] {
                found = ix.launch_api(x).map(|call| (label, gap_x, call));
            }
        }
        let execution_x = ph.execution - floors[EXECUTION_PHASE];
        if !is_own && execution_x > 0.0 && found.is_none_or(|f| ph.execution > f.1) {
            // Another request's device op ran long: named by the gate it held
            // the thread through: a call of its request that was running when it
            // ended and returned after it blocked on it (`implicit_sync`).
            let blocking = calls[run.1..=run.2]
                .iter()
                .any(|&c| ix.start(c) <= ix.end(x) && ix.end(c) >= ix.end(x));
            let label = if blocking {
                CauseLabel::ImplicitSync
            } else {
                CauseLabel::StreamBacklog
            };
            found = Some((label, ph.execution, x));
        }
        found
    }

    /// The host gap before `x`'s launch call beyond its peers' gaps (and their
    /// spread): a stall record on the thread names its own cause; another
    /// request's unexplained gap is `handoff_queueing` (docs/scenario-space.md,
    /// "Labels across requests"); the symptom's own request's, `host_compute`;
    /// either only beyond what any host has (`readings::host_jitter`).
    fn late_gap(&self, x: Pos, peers: &[Pos], is_own: bool) -> Option<(CauseLabel, f64)> {
        let ix = &self.ix;
        let call = ix.launch_api(x)?;
        let against = self.launch_gap_against_peers(call, peers);
        let gap_x = against.excess;
        if gap_x <= against.spread {
            return None;
        }
        let tid = ix.rec(call).tid()?;
        let ready = self.host_measure(call).ready;
        let st = readings::host_stalls(ix, tid, ready, ix.start(call));
        let label = if st.desched_ns.max(st.fault_ns) > 0.0 {
            readings::larger_stall(&st).0
        } else if gap_x <= readings::host_jitter(against.median) {
            // Host work grown by less than any host's own jitter, as for a
            // stall (the counterfactual's grown host work, `candidates.rs`).
            cov_mark::hit!(held_chain_gap_within_host_jitter);
            return None;
        } else if is_own {
            CauseLabel::HostCompute
        } else {
            CauseLabel::HandoffQueueing
        };
        Some((label, gap_x))
    }
}
