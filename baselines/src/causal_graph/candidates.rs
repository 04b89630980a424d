//! Candidate delays in what can reach a symptom, each measured by the
//! counterfactual (`counterfactual.rs`): the cause is the candidate whose
//! removal makes the symptom finish earliest (issue 35).
//!
//! A candidate is a delay the records show against one norm: a device op of
//! the symptom's ancestors that ran longer than its peers (the same operation
//! at the same place in other requests of the same size, `peers.rs`) beyond
//! its execution floor, device work of no request where requests carry
//! tokens (all of it is delay: the norm of work that is not there is none).
//! Host stalls stay with the rules before this reading (see `candidates`). Each is removed in turn and the graph's finish times
//! re-evaluated; a delay another gate absorbed moves nothing. Candidates are
//! tried largest first, and one no larger than the best effect so far is not
//! tried (an effect never exceeds its delay), so a symptom costs its cone plus
//! a few re-evaluations.
//!
//! This reading is what a symptom gets whose own phases and request say
//! nothing is late: in a pipeline or a batch whose earlier request held it,
//! the symptom's peers are late with it and lateness against them reads
//! nothing, while the delay's root is still late against its own peers.

use super::counterfactual::Cone;
use super::graph::{Graph, InferredEdge};
use super::readings;
use super::structural::contention;
use super::thresholds::{
    CLOCK_NS, COUNTERFACTUAL_NONE, DEVICE_SHARE, MAX_CANDIDATE_INSTANCES, MAX_CANDIDATE_OPS,
    NOISE_NS, STALL_NS,
};
use crate::analysis::{self, EXECUTION_PHASE};
use crate::index::{FastMap, Pos};
use ground_truth::trace::{HostMemory, Record};
use ground_truth::{CauseLabel, EdgeType, SharedStr};

/// One delay the records show: where, how long (ns), and what it is.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    at: Pos,
    delay: f64,
    kind: DelayKind,
}

#[derive(Debug, Clone, Copy)]
enum DelayKind {
    /// A device op ran longer than its peers.
    RanLong,
    /// Device work of no request, in a view whose requests carry tokens; or,
    /// without tokens (closed mode), of an operation the view runs once while
    /// the symptom's recurs: work no repetition of the program has. All of it is
    /// delay to the work it held.
    NoRequest,
    /// A thread's scheduler or page-fault records in the gap before a host
    /// record: the stall, all of it delay to that record.
    Stall(CauseLabel),
}

impl Graph<'_> {
    /// The cause of `p` read as the candidate delay whose removal moves `p`'s
    /// finish most, beyond the noise floor and a quarter of `p`'s normal
    /// latency ([`DEVICE_SHARE`]: the benchmark scores lateness from 0.3× it,
    /// docs/design.md); `None` when no candidate moves it that far. The
    /// runner-up candidates stay ranked with their effects, `none` beside them
    /// at the floor's weight.
    pub(super) fn counterfactual_root(&self, p: Pos) -> Option<Vec<(CauseLabel, f64)>> {
        let floor = self.counterfactual_floor(p);
        if !floor.is_finite() {
            return None;
        }
        let cone = self.cone(p);
        let (mut candidates, small) = self.candidates(&cone, p);
        candidates.sort_by(|a, b| b.delay.total_cmp(&a.delay));
        let mut effects: Vec<(CauseLabel, f64)> = Vec::new();
        let mut best = 0.0_f64;
        for c in candidates {
            if c.delay <= floor || c.delay <= best {
                break;
            }
            let (effect, route) = self.effect_and_route(&cone, c.at, c.delay);
            if effect <= floor {
                continue;
            }
            best = best.max(effect);
            let label = match c.kind {
                DelayKind::RanLong => self.lengthened_op_label(c.at, &route),
                DelayKind::NoRequest => self.added_work_label(p, &route),
                DelayKind::Stall(label) => label,
            };
            effects.push((label, effect));
        }
        if effects.is_empty() {
            effects.extend(self.small_delays_together(&cone, &small, floor));
        }
        if effects.is_empty() {
            return None;
        }
        cov_mark::hit!(counterfactual_root);
        effects.push((CauseLabel::None, floor * COUNTERFACTUAL_NONE));
        Some(effects)
    }

    /// How far removing a delay must move `p`'s finish to name it: the noise
    /// floor, and a quarter of `p`'s normal latency ([`DEVICE_SHARE`]: the
    /// benchmark scores lateness from 0.3× it, docs/design.md); infinite
    /// for what has no normal latency.
    pub(super) fn counterfactual_floor(&self, p: Pos) -> f64 {
        NOISE_NS.max(DEVICE_SHARE * self.normal_latency_of(p))
    }

    /// Ops upstream that each ran longer than their peers by less than their
    /// floor, removed together (`small`): several such delays in a row add
    /// up (three kernels ahead of the symptom each 100 µs over their 1 ms
    /// peers hold it 300 µs). Their joint effect, when it passes `floor`,
    /// named as the delay that reached the symptom last would be.
    fn small_delays_together(
        &self,
        cone: &Cone,
        small: &[Candidate],
        floor: f64,
    ) -> Option<(CauseLabel, f64)> {
        if small.len() < 2 || small.iter().map(|c| c.delay).sum::<f64>() <= floor {
            return None;
        }
        let delays: Vec<(Pos, f64)> = small.iter().map(|c| (c.at, c.delay)).collect();
        let (effect, route) = self.joint_effect_and_route(cone, &delays);
        if effect <= floor {
            return None;
        }
        let first = route.first()?.src;
        cov_mark::hit!(small_delays_add_up);
        Some((self.lengthened_op_label(first, &route), effect))
    }

    /// The delays the records show in `cone` (other than `p` itself), and
    /// the ops that ran longer than their peers beyond the peers' own spread
    /// and the clock ([`CLOCK_NS`]) but within their floor (each alone is no
    /// cause, `small_delays_together`).
    fn candidates(&self, cone: &Cone, p: Pos) -> (Vec<Candidate>, Vec<Candidate>) {
        let ix = &self.ix;
        let with_requests = self.token(p).is_some();
        let repeated = self.peers.instances(ix.rec(p)) > 1;
        let mut out = Vec::new();
        let mut small = Vec::new();
        let mut ops_read = 0;
        for &x in cone.nearest_first() {
            if x == p {
                continue;
            }
            if ops_read >= MAX_CANDIDATE_OPS {
                break;
            }
            let r = ix.rec(x);
            if !r.is_device_op() {
                out.extend(self.stall_before(x));
                continue;
            }
            ops_read += 1;
            if self.peers.instances(r) > MAX_CANDIDATE_INSTANCES {
                continue;
            }
            if self.added_work(x, with_requests, repeated) {
                out.push(Candidate {
                    at: x,
                    delay: ix.end(x).saturating_sub(ix.start(x)) as f64,
                    kind: DelayKind::NoRequest,
                });
                continue;
            }
            let peers = self.peers_of_the_same_size(x);
            let Some(own) = readings::dev_phases(ix, x) else {
                continue;
            };
            let runs: Vec<f64> = peers
                .iter()
                .filter_map(|&k| readings::dev_phases(ix, k))
                .map(|d| d.execution)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let spread = analysis::peer_spread(&runs);
            let excess = analysis::excess(Some(own.execution), runs, 0.0);
            let candidate = Candidate {
                at: x,
                delay: excess,
                kind: DelayKind::RanLong,
            };
            if excess > self.phase_floors(&peers)[EXECUTION_PHASE] {
                out.push(candidate);
            } else if excess > CLOCK_NS.max(spread) {
                small.push(candidate);
            }
        }
        (out, small)
    }

    /// The stall a thread's records show in the gap before host record `x`
    /// (since the record before it on its thread that gates it ended): the
    /// larger of its scheduler and page-fault time, when it passes what any
    /// host has
    /// ([`STALL_NS`]). A stall inside a task is delay by construction: the
    /// work it interrupted resumes where it stopped (docs/records.md).
    fn stall_before(&self, x: Pos) -> Option<Candidate> {
        let ix = &self.ix;
        let r = ix.rec(x);
        if !matches!(
            r,
            Record::Api { .. } | Record::Uprobe { .. } | Record::Marker { .. }
        ) {
            return None;
        }
        let tid = r.tid()?;
        // The record before it on its thread that gates it: its program-order
        // predecessor, the task marker a handoff edge ties it to, or the work
        // that kept the thread busy (not the stall records' own edges).
        let from = self
            .incoming(x)
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EdgeType::HostOrder | EdgeType::Handoff | EdgeType::Busy
                ) && ix.rec(e.src).tid() == Some(tid)
            })
            .map(|e| ix.end(e.src))
            .max()?;
        let to = ix.start(x);
        if to <= from {
            return None;
        }
        let st = readings::host_stalls(ix, tid, from, to);
        let (label, delay) = readings::larger_stall(&st);
        (delay >= STALL_NS).then_some(Candidate {
            at: x,
            delay,
            kind: DelayKind::Stall(label),
        })
    }

    /// `x`'s peers (`device_peers`) whose requests have the size of `x`'s,
    /// the norm of every op judged upstream of a symptom (here and in the
    /// held chain, `requests.rs`),
    /// where the records give sizes: the bytes of each request's copies and
    /// memsets, in order. A serving loop's batches of several sizes run the
    /// same kernels, longer with the batch (docs/scenario-space.md, the real
    /// program shapes), and only a batch of the same size is their norm.
    /// Without sizes, or with no peer of the same size, every peer.
    pub(super) fn peers_of_the_same_size(&self, x: Pos) -> Vec<Pos> {
        let peers = self.device_peers(x);
        let Some(own) = self.request_size(x) else {
            return peers;
        };
        let same: Vec<Pos> = peers
            .iter()
            .copied()
            .filter(|&k| self.request_size(k) == Some(own))
            .collect();
        if same.is_empty() {
            peers
        } else {
            same
        }
    }

    /// The bytes of the copies and memsets of `x`'s request, in enqueue
    /// order; `None` without a request token or without sized records.
    fn request_size(&self, x: Pos) -> Option<&[u64]> {
        let token = self.token(x)?;
        let sizes = self.request_sizes.get_or_init(|| {
            let ix = &self.ix;
            let mut by_token: FastMap<SharedStr, Vec<(u64, u64, u64)>> = FastMap::default();
            for &op in &ix.device_ops {
                let bytes = match ix.rec(op) {
                    Record::Memcpy { detail, .. } => detail.bytes,
                    Record::Memset { detail, .. } => detail.bytes,
                    _ => continue,
                };
                if let Some(t) = self.token(op) {
                    by_token
                        .entry(t)
                        .or_default()
                        .push((self.enqueue_key(op), ix.rid(op), bytes));
                }
            }
            by_token
                .into_iter()
                .map(|(t, mut v)| {
                    v.sort_unstable();
                    (t, v.into_iter().map(|(_, _, b)| b).collect())
                })
                .collect()
        });
        sizes.get(&token).map(Vec::as_slice)
    }

    /// A lengthened op's label (docs/scenario-space.md, "Labelling
    /// convention"): a copy is its own transfer (`pcie_contention` when
    /// other copies shared the link meanwhile, else `slow_copy`); a kernel is
    /// named by the first gate after it on the `route` its delay travelled
    /// other than stream order (an event, a graph edge, a blocking call, the
    /// fence of a pageable copy, another stream's work holding the resource),
    /// and is `stream_backlog` when stream order alone carried it.
    fn lengthened_op_label(&self, x: Pos, route: &[InferredEdge]) -> CauseLabel {
        let ix = &self.ix;
        if matches!(ix.rec(x), Record::Memcpy { .. }) {
            let shared = analysis::overlap_by_others(ix, x, ix.start(x), ix.end(x), |o| {
                matches!(o, Record::Memcpy { .. })
            });
            return if shared > 0.0 {
                CauseLabel::PcieContention
            } else {
                CauseLabel::SlowCopy
            };
        }
        self.gate_label(route)
    }

    /// Work added ahead of the symptom (docs/scenario-space.md, "Labelling
    /// convention": a backlog is its own mechanism, whatever gate it then
    /// passes through), named by how it met the requests' work (the first
    /// edge on the `route` into an op of a request, past the added work's own
    /// chain): the resource's contention where it held that op by sharing
    /// the SMs or the link, `stream_backlog` otherwise (ahead of it in its
    /// stream).
    fn added_work_label(&self, p: Pos, route: &[InferredEdge]) -> CauseLabel {
        let ix = &self.ix;
        let with_requests = self.token(p).is_some();
        // Without tokens the program's ops are not told from the added work's
        // own: the added work met the program where its route first left
        // stream order.
        let own_chain = |e: &&InferredEdge| {
            if with_requests {
                self.added_work(e.dst, true, false)
            } else {
                e.kind == EdgeType::StreamOrder
            }
        };
        match route.iter().find(|e| !own_chain(e)) {
            Some(e) if e.kind == EdgeType::Fault && ix.rec(e.dst).is_device_op() => {
                contention(matches!(ix.rec(e.dst), Record::Memcpy { .. }))
            }
            _ => CauseLabel::StreamBacklog,
        }
    }

    /// Whether device op `x` is work outside the program's requests: of no
    /// request where requests carry tokens (`with_requests`, the symptom's);
    /// without tokens (closed mode), where the symptom's operation recurs
    /// (`repeated`: the program's repetitions show as the recurring
    /// operations), of an operation that recurs nowhere, graph nodes aside.
    fn added_work(&self, x: Pos, with_requests: bool, repeated: bool) -> bool {
        let r = self.ix.rec(x);
        if !r.is_device_op() {
            return false;
        }
        if with_requests {
            return self.token(x).is_none();
        }
        // A graph's nodes run once per launch of their graph, whose launch call
        // is the program's: their count says nothing of repetition.
        let graph_node = matches!(r, Record::Kernel { detail, .. } if detail.graph_node_id != 0);
        let once = repeated && !graph_node && self.peers.instances(r) == 1;
        if once {
            cov_mark::hit!(closed_mode_work_of_no_repetition);
        }
        once
    }

    /// The first gate other than stream order on `route` (module doc of
    /// [`Graph::lengthened_op_label`]); `stream_backlog` when stream order
    /// alone carried the delay.
    fn gate_label(&self, route: &[InferredEdge]) -> CauseLabel {
        let ix = &self.ix;
        for e in route {
            match e.kind {
                EdgeType::Event => return CauseLabel::EventWait,
                EdgeType::Graph => return CauseLabel::GraphDependency,
                EdgeType::Sync => return CauseLabel::ImplicitSync,
                EdgeType::Fault if ix.rec(e.dst).is_device_op() => {
                    return contention(matches!(ix.rec(e.dst), Record::Memcpy { .. }));
                }
                EdgeType::StreamOrder
                    if matches!(
                        ix.rec(e.dst),
                        Record::Memcpy {
                            memory: HostMemory::Pageable,
                            ..
                        }
                    ) =>
                {
                    return CauseLabel::ImplicitSync;
                }
                _ => {}
            }
        }
        CauseLabel::StreamBacklog
    }
}
