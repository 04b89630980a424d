//! What held an operation back: the gating chain through waits and event records,
//! and the causes its kind implies.

use super::diagnosis::dominant_late;
use super::graph::Graph;
use super::thresholds::{
    CLOSED_MODE_QUEUEING, LOST_GATE_ALTERNATIVE, MAX_GATE_LINKS, MAX_HOPS, PASSED_ON_REASON,
    UNKNOWN_GATE,
};
use crate::analysis::{self, EXECUTION_PHASE, HOST_PHASE, QUEUE_PHASE};
use crate::index::Pos;
use ground_truth::trace::{Record, SyncType};
use ground_truth::{CauseLabel, EdgeType};

impl Graph<'_> {
    /// Walks the gating chain back from a device op through waits and event
    /// records to the first device op or host call that held it back:
    /// (that record, edge kinds crossed, whether a required record is missing).
    pub(super) fn gating_chain(&self, p: Pos) -> (Option<Pos>, Vec<EdgeType>, bool) {
        let ix = &self.ix;
        let mut kinds = Vec::new();
        let mut cur = p;
        for _ in 0..MAX_GATE_LINKS {
            if cur != p && self.missing_at.contains_key(&cur) {
                return (Some(cur), kinds, true);
            }
            let Some(e) = self.gating_edge(cur) else {
                return (None, kinds, false);
            };
            kinds.push(e.kind);
            cur = e.src;
            match ix.rec(cur) {
                Record::CudaEvent { .. }
                | Record::Sync {
                    sync_type: SyncType::StreamWaitEvent,
                    ..
                } => continue,
                _ => return (Some(cur), kinds, false),
            }
        }
        (Some(cur), kinds, false)
    }

    /// What held a device op back, from the kind of its gating chain and, when
    /// the gate was itself late, the upstream op's own cause.
    pub(super) fn gating_causes(&self, p: Pos, v: f64, depth: u32) -> Vec<(CauseLabel, f64)> {
        let ix = &self.ix;
        let r = ix.rec(p);
        let is_copy = matches!(r, Record::Memcpy { .. });
        let (up, kinds, lost) = self.gating_chain(p);
        let first = kinds.first().copied();
        let base = if kinds.contains(&EdgeType::Event) {
            CauseLabel::EventWait
        } else if first == Some(EdgeType::Graph) {
            CauseLabel::GraphDependency
        } else if first == Some(EdgeType::Fault) {
            super::structural::contention(is_copy)
        } else if first == Some(EdgeType::Launch) || first.is_none() {
            // Started as soon as it was launched: the host decided its timing.
            return match ix.launch_api(p) {
                Some(a) => self
                    .host_structural(a)
                    .into_iter()
                    .map(|(l, x)| (l, x * v.max(1.0)))
                    .collect(),
                None => vec![
                    (CauseLabel::StreamBacklog, v * UNKNOWN_GATE),
                    (CauseLabel::EventWait, v * UNKNOWN_GATE),
                ],
            };
        } else if self.is_fenced_copy(p) {
            CauseLabel::ImplicitSync
        } else {
            CauseLabel::StreamBacklog
        };
        let mut out = vec![(base, v)];
        if self.missing_at.contains_key(&p) || lost {
            // The gate is behind a lost record: its kind is a guess.
            let alt = if base == CauseLabel::EventWait {
                CauseLabel::StreamBacklog
            } else {
                CauseLabel::EventWait
            };
            out.push((alt, v * LOST_GATE_ALTERNATIVE));
        }
        // A gate that was itself late for a reason of its own passes that reason on.
        // The chain is followed to its root, however many hops: each step goes to a
        // record that completed earlier, so the walk ends; the bound only guards
        // against a malformed view.
        if let Some(u) = up.filter(|&u| ix.rec(u).is_device_op() && depth < MAX_HOPS && !lost) {
            let upeers = self.device_peers(u);
            let ufloors = self.phase_floors(&upeers);
            let (mut uph, uhost) = self.device_phases(u, &upeers);
            // A gate that waited in its stream or on an event after its launch
            // was not held by the host: its launch came late, but it would have
            // waited anyway, so only its device phases pass a reason on.
            if self
                .gating_edge(u)
                .is_some_and(|e| e.kind != EdgeType::Launch)
            {
                if uph.host_enqueue > 0.0 {
                    // Rule 6b: its late launch passes nothing on.
                    cov_mark::hit!(gate_waited_after_its_launch);
                }
                uph.host_enqueue = 0.0;
            }
            let (ud, uv) = dominant_late(&uph, &ufloors);
            if uv > 0.0 {
                let ucopy = matches!(ix.rec(u), Record::Memcpy { .. });
                let passed: Vec<(CauseLabel, f64)> = match ud {
                    HOST_PHASE => uhost,
                    QUEUE_PHASE => self.gating_causes(u, 1.0, depth + 1),
                    // A kernel that ran long upstream passes nothing on: the
                    // gate it delayed the rest through names it (rule 5a).
                    EXECUTION_PHASE if !ucopy => vec![],
                    phase => analysis::phase_cause(phase, ucopy)
                        .map(|l| (l, 1.0))
                        .into_iter()
                        .collect(),
                };
                if let Some(&(l, _)) = passed.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
                    if l != base {
                        out.insert(0, (l, v * PASSED_ON_REASON));
                    }
                }
            }
        }
        out
    }

    /// Why a call happened when it did, from its host-side chain (no peers).
    pub(super) fn host_structural(&self, call: Pos) -> Vec<(CauseLabel, f64)> {
        let ix = &self.ix;
        let m = self.host_measure(call);
        let tid = ix.rec(call).tid().unwrap_or(0);
        let st = super::readings::host_stalls(ix, tid, m.ready.min(ix.start(call)), ix.start(call));
        let wait = m.queue_wait.unwrap_or(0.0);
        let since = m.since_request.unwrap_or(0.0);
        let in_task = (since - wait).max(m.gap.unwrap_or(0.0)).max(0.0);
        let mut v = vec![
            (CauseLabel::CpuDeschedule, st.desched_ns),
            (CauseLabel::HostPageFault, st.fault_ns),
            (CauseLabel::HandoffQueueing, wait),
            (
                CauseLabel::HostCompute,
                (in_task - st.desched_ns - st.fault_ns).max(0.0),
            ),
        ];
        v.retain(|x| x.1 > 0.0);
        let total: f64 = v.iter().map(|x| x.1).sum();
        let mut out: Vec<(CauseLabel, f64)> = if total <= 0.0 {
            vec![(CauseLabel::HostCompute, 1.0)]
        } else {
            v.into_iter().map(|(l, x)| (l, x / total)).collect()
        };
        if ix.view.spec.mode == ground_truth::Mode::Closed {
            // Queues are invisible without markers: queueing stays a candidate.
            out.push((CauseLabel::HandoffQueueing, CLOSED_MODE_QUEUEING));
        }
        out
    }
}
