//! The cause upstream on the symptom's critical path: when
//! the op asked about finished late though none of its own phases explains
//! it, the walk reads the ops before it on the path, and a kernel there that
//! ran long is named by the gate it passed its delay through.

use super::diagnosis::dominant_late;
use super::graph::Graph;
use super::thresholds::{
    CLOCK_NS, HOST_COMPUTE_ALTERNATIVE, LATENESS_SHARE, MAX_HOPS, NOISE_NS, SPREAD_MARGIN,
};
use crate::analysis::{self, dominant, EXECUTION_PHASE, QUEUE_PHASE};
use crate::index::Pos;
use ground_truth::trace::{Record, SyncType};
use ground_truth::{CauseLabel, EdgeType, Phases};

impl Graph<'_> {
    /// Whether a device kernel's lateness is its own execution running long
    /// (not waiting for SMs, its launch or its gate): what delays the work after
    /// it is then named by the gate it passes the delay through.
    pub(super) fn ran_long(&self, x: Pos, phases: &Phases) -> bool {
        matches!(self.ix.rec(x), Record::Kernel { .. }) && dominant(phases).0 == EXECUTION_PHASE
    }

    /// Whether op `x`, whose dominant late phase is `phase`, waited in its
    /// stream behind a kernel of its own thread (and request) that ran longer
    /// than its peers: the kernel's
    /// delay, which reached `x` by stream order and goes on from `x` along the
    /// path, is named as the kernel's own would be (`gate_after`), not by the
    /// stream `x` waited in (and a blocking call that waited for `x` passes
    /// the kernel's delay on: `late_blocking_predecessor`). `ran_long_upstream` and the walk below name a
    /// kernel on the path that ran long itself; where its finish lay within
    /// its peers' spread of finishes (a closed view, whose peers are batches
    /// of every size) the walk read the op behind it instead, and its stream
    /// wait as `stream_backlog`.
    pub(super) fn queued_behind_a_long_kernel(&self, x: Pos, phase: usize) -> bool {
        if phase != QUEUE_PHASE {
            return false;
        }
        let (up, kinds, lost) = self.gating_chain(x);
        let Some(u) = up.filter(|_| !lost && kinds == [EdgeType::StreamOrder]) else {
            return false;
        };
        // The program's own kernel, launched where `x` was (its thread, its
        // request where tokens show them): other work ahead in the stream
        // (a backlog another thread queued) is the stream's own mechanism.
        if !matches!(self.ix.rec(u), Record::Kernel { .. })
            || self.launching_thread(u) != self.launching_thread(x)
            || self.token(u) != self.token(x)
        {
            return false;
        }
        let peers = self.device_peers(u);
        let (ph, _) = self.device_phases(u, &peers);
        let behind = dominant_late(&ph, &self.phase_floors(&peers)).0 == EXECUTION_PHASE;
        if behind {
            cov_mark::hit!(queued_behind_a_long_kernel);
        }
        behind
    }

    /// The label of a kernel on `path` (at `i`) that ran long and so delayed
    /// what follows it: the first gate after it on the way to the path's end
    /// (an event wait, a graph edge, a host synchronization; otherwise the next
    /// op waited behind it in its stream).
    pub(super) fn gate_after(&self, path: &[Pos], i: usize) -> CauseLabel {
        let ix = &self.ix;
        let own_token = path.last().and_then(|&p| self.token(p));
        for w in path[i..].windows(2) {
            // Work of another origin in a row (concurrent copies one after the
            // other): the gate that matters is where it meets the symptom's own.
            if own_token.is_some()
                && ix.rec(w[1]).is_device_op()
                && self.token(w[1]) != own_token
                && self.token(w[0]) == self.token(w[1])
            {
                continue;
            }
            let kinds: Vec<EdgeType> = self
                .incoming(w[1])
                .into_iter()
                .filter(|e| e.src == w[0])
                .map(|e| e.kind)
                .collect();
            // Work of another stream holding the resource the next op needed.
            if kinds.contains(&EdgeType::Fault) && ix.rec(w[1]).is_device_op() {
                let copy = matches!(ix.rec(w[1]), Record::Memcpy { .. });
                return super::structural::contention(copy);
            }
            if kinds.contains(&EdgeType::Event) {
                return CauseLabel::EventWait;
            }
            if kinds.contains(&EdgeType::Graph) {
                return CauseLabel::GraphDependency;
            }
            if kinds.contains(&EdgeType::Sync) {
                return CauseLabel::ImplicitSync;
            }
            // A pageable copy queued behind the work: its call held the host
            // until the stream drained (docs/gpu-facts.md), an implicit fence.
            if kinds.contains(&EdgeType::StreamOrder)
                && matches!(
                    ix.rec(w[1]),
                    Record::Memcpy {
                        memory: ground_truth::trace::HostMemory::Pageable,
                        ..
                    }
                )
            {
                return CauseLabel::ImplicitSync;
            }
            // Past event records and waits the gate is still to come; any other
            // op ends the search.
            let passthrough = matches!(
                ix.rec(w[1]),
                Record::CudaEvent { .. }
                    | Record::Sync {
                        sync_type: SyncType::StreamWaitEvent,
                        ..
                    }
            );
            if !passthrough {
                break;
            }
        }
        CauseLabel::StreamBacklog
    }

    /// When `p` finished later after its request began than its peers did although
    /// none of its own phases is late, the delay lies upstream on its critical
    /// path: a scheduler or page-fault record on the path explaining at least
    /// half of it names it; else the first device op on the path that was late
    /// for a reason of its own passes that reason on. (the causes, the lateness)
    pub(super) fn late_since_request(
        &self,
        p: Pos,
        peers: &[Pos],
        depth: u32,
    ) -> Option<(Vec<(CauseLabel, f64)>, f64)> {
        if depth >= MAX_HOPS || peers.is_empty() {
            return None;
        }
        let ix = &self.ix;
        // The finish stands against how far the peers' own finishes stray, not
        // against the symptom's own floor: a delay upstream shows at the symptom
        // diminished by whatever slack the path had (a 60 µs hold of a 100 µs
        // root makes the 1 ms kernel behind it 60 µs late, rule 7b), and the
        // walk below names only an op whose own phase is late beyond its peers'
        // floors.
        let (late, spread) = self.finish_since_request(p, peers)?;
        let execution_floor = self.phase_floors(peers)[EXECUTION_PHASE];
        let floor = if depth == 0 {
            CLOCK_NS.max(spread.min(execution_floor))
        } else {
            execution_floor
        };
        if depth == 0 {
            if let Some(found) = self.ran_long_upstream(p, late, execution_floor) {
                return Some(found);
            }
        }
        if late <= floor {
            return None;
        }
        if depth == 0 && late <= execution_floor {
            // Rule 7b: late only beyond the peers' spread, under the symptom's
            // own execution floor.
            cov_mark::hit!(small_lateness_beyond_spread);
        }
        let weak = late <= NOISE_NS.max(SPREAD_MARGIN * spread);
        let (path, _) = self.critical_path(p);
        if let Some((label, size)) = (0..path.len())
            .filter_map(|i| self.path_stall(&path, i))
            .max_by(|a, b| a.1.total_cmp(&b.1))
        {
            if size >= LATENESS_SHARE * late {
                return Some((
                    vec![
                        (label, late),
                        (CauseLabel::HostCompute, late * HOST_COMPUTE_ALTERNATIVE),
                    ],
                    late,
                ));
            }
        }
        let own_token = self.token(p);
        for (i, &x) in path.iter().enumerate() {
            // Only an op of the symptom's own request with peers of its own can be
            // late against them: work of another origin on the path (concurrent
            // work, another request's) is what delayed it, not a late op on it.
            if x == p
                || !ix.rec(x).is_device_op()
                || (own_token.is_some() && self.token(x) != own_token)
                || self.device_peers(x).is_empty()
            {
                continue;
            }
            let (causes, phases, _) = self.device_causes(x, depth + 1);
            let (phase, excess) = dominant(&phases);
            // A finish within the margin over the peers' spread is weak evidence
            // of lateness: only a delay the device timed upstream explains it. A
            // late launch upstream carries the threads' wake-up jitter, like the
            // symptom's own host phase (`SPREAD_MARGIN`) — unless the
            // launch's own host gap stands out against the same gap in the
            // peers by that margin and accounts for the lateness: the peers'
            // finishes then stray for reasons of their own (a pool member taking
            // another path), while this one gap held the symptom's chain
            // (baselines/README.md, rule 7c).
            if excess > 0.0 && (phase != 0 || !weak || self.held_by_gap(x, late, spread)) {
                if self.ran_long(x, &phases) || self.queued_behind_a_long_kernel(x, phase) {
                    return Some((vec![(self.gate_after(&path, i), late)], late));
                }
                return Some((causes, late));
            }
        }
        None
    }

    /// Rule 7d: an op of `p`'s own request upstream on its critical path that
    /// ran longer than its peers (a phase the device timed) and delayed `p` by
    /// more than `p`'s execution floor, as far as the path's slack lets the
    /// excess through (the counterfactual, [`Graph::effect`]: the graph's finish
    /// times re-evaluated without the excess): the cause, named by the gate it
    /// passed the delay through (a copy: its own transfer). The peers' finishes
    /// are no reference then: on the H200 the handoff chains before the op make
    /// them stray by hundreds of µs, which hid a 690 µs longer side kernel
    /// behind a 918 µs late symptom.
    fn ran_long_upstream(
        &self,
        p: Pos,
        late: f64,
        floor: f64,
    ) -> Option<(Vec<(CauseLabel, f64)>, f64)> {
        let ix = &self.ix;
        let (path, unresolved) = self.critical_path(p);
        if unresolved.is_some() {
            return None;
        }
        let own_token = self.token(p)?;
        let cone = self.cone(p);
        let mut best: Option<(usize, f64)> = None;
        for (i, &x) in path.iter().enumerate() {
            if x == p || !ix.rec(x).is_device_op() || self.token(x).as_ref() != Some(&own_token) {
                continue;
            }
            let peers = self.device_peers(x);
            let Some(own) = super::readings::dev_phases(ix, x) else {
                continue;
            };
            let peer_runs: Vec<f64> = peers
                .iter()
                .filter_map(|&k| super::readings::dev_phases(ix, k))
                .map(|d| d.execution)
                .collect();
            if peer_runs.is_empty() {
                continue;
            }
            let excess = analysis::excess(Some(own.execution), peer_runs, 0.0);
            if excess <= self.phase_floors(&peers)[EXECUTION_PHASE] {
                continue;
            }
            let reached = self.effect(&cone, x, excess);
            if best.is_none_or(|(_, r)| reached > r) {
                best = Some((i, reached));
            }
        }
        let (i, reached) = best?;
        if reached <= floor.max(NOISE_NS) || reached < LATENESS_SHARE * late {
            return None;
        }
        cov_mark::hit!(upstream_op_ran_long);
        let x = path[i];
        let label = match ix.rec(x) {
            Record::Memcpy { .. } => {
                let (start, end) = (ix.start(x), ix.end(x));
                let shared = analysis::overlap_by_others(ix, x, start, end, |o| {
                    matches!(o, Record::Memcpy { .. })
                });
                if shared > 0.0 {
                    CauseLabel::PcieContention
                } else {
                    CauseLabel::SlowCopy
                }
            }
            _ => self.gate_after(&path, i),
        };
        Some((vec![(label, reached)], reached))
    }
}
