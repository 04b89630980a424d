//! Candidate delays in what can reach a symptom, each measured by the
//! counterfactual (`counterfactual.rs`): the cause is the candidate whose
//! removal makes the symptom finish earliest (issue 35).
//!
//! A candidate is a delay the records show against one norm:
//! - a device op of the symptom's ancestors that ran longer than its peers
//!   (the same operation at the same place in other requests of the same
//!   size, `peers.rs`) beyond its execution floor;
//! - a device op that waited longer than its peers to start once its stream
//!   let it go (the SMs or the copy engine held by other work);
//! - device work of no request where requests carry tokens, or of an
//!   operation no repetition of the program has without them (all of it is
//!   delay: the norm of work that is not there is none);
//! - a thread's stall records in the gap before a host record;
//! - a launch call that came later after its thread's previous call than its
//!   peers' calls did, the thread on the CPU meanwhile (grown host work),
//!   named by whose request it was.
//!
//! Each is removed in turn and the graph's finish times re-evaluated; a delay
//! another gate absorbed moves nothing. Candidates are tried largest first,
//! and one no larger than the best effect so far is not tried (an effect
//! never exceeds its delay), so a symptom costs its cone plus a few
//! re-evaluations.
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
    MAX_REPETITION_CALLS, NOISE_NS, STALL_NS,
};
use crate::analysis::{self, EXECUTION_PHASE, START_PHASE};
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
    /// A device op waited longer than its peers to start once its stream let
    /// it go: the SMs or the copy engine were held by other work.
    HeldResource,
    /// A launch call started later after its thread's previous call than its
    /// peers' calls did, by time on the CPU that no stall record explains:
    /// host work grew before it.
    HostGap,
}

impl DelayKind {
    /// How far removing this delay must move the symptom to name it, given
    /// `norm_floor` ([`Graph::counterfactual_floor`]): the noise of how the
    /// delay was measured. A delay read against a norm (an op's excess over
    /// its peers, a gap longer than theirs, work no repetition has) carries
    /// that norm's noise, which grows with the work measured, and must pass
    /// the share of the symptom's normal latency. A stall is a record: the
    /// scheduler timed it, the device timed what it moved, and only the
    /// host's own jitter ([`NOISE_NS`]) blurs its effect. A serving loop's
    /// 390 µs preemption before a launch whose stream was still busy moved a
    /// 400 µs kernel 47 µs, under its share floor of 100 µs
    /// (`continuous-batching.own-launch-descheduled`, dev split on the
    /// simulator, read `none`).
    fn effect_floor(self, norm_floor: f64) -> f64 {
        match self {
            DelayKind::Stall(_) => NOISE_NS.min(norm_floor),
            _ => norm_floor,
        }
    }
}

impl Graph<'_> {
    /// The cause of `p` read as the candidate delay whose removal moves `p`'s
    /// finish most, beyond the noise floor and a quarter of `p`'s normal
    /// latency ([`DEVICE_SHARE`]: the benchmark scores lateness from 0.3× it,
    /// docs/design.md), a stall record beyond the noise floor alone
    /// ([`DelayKind::effect_floor`]); `None` when no candidate moves it that
    /// far. The runner-up candidates stay ranked with their effects, `none`
    /// beside them at the weight of the floor the strongest one passed.
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
        // Grown host work is read from a gap alone: it names the cause only
        // where it moves the symptom further than every delay a record shows
        // (a lengthened op, a stall), which explain the same wait otherwise.
        let mut grown: Vec<(CauseLabel, f64)> = Vec::new();
        let mut recorded_best = 0.0_f64;
        // The floor the strongest effect passed: `none` ranks at it.
        let mut none_at = floor;
        for c in candidates {
            if c.delay <= NOISE_NS || c.delay <= best {
                break;
            }
            let passes = c.kind.effect_floor(floor);
            if c.delay <= passes {
                continue;
            }
            let (effect, route) = self.effect_and_route(&cone, c.at, c.delay);
            if effect <= passes {
                continue;
            }
            if effect <= floor {
                cov_mark::hit!(recorded_stall_under_the_share_floor);
            }
            if effect > best {
                none_at = passes;
            }
            best = best.max(effect);
            let label = match c.kind {
                DelayKind::RanLong => self.lengthened_op_label(c.at, &route, p),
                DelayKind::NoRequest => self.added_work_label(p, &route),
                DelayKind::Stall(label) => label,
                DelayKind::HostGap => self.host_gap_label(c.at, p),
                DelayKind::HeldResource => {
                    cov_mark::hit!(resource_held_by_other_work);
                    let copy = matches!(self.ix.rec(c.at), Record::Memcpy { .. });
                    analysis::phase_cause(START_PHASE, copy).unwrap_or(CauseLabel::None)
                }
            };
            if matches!(c.kind, DelayKind::HostGap) {
                grown.push((label, effect));
            } else {
                recorded_best = recorded_best.max(effect);
                effects.push((label, effect));
            }
        }
        effects.extend(grown.into_iter().filter(|g| g.1 > recorded_best));
        if effects.is_empty() {
            effects.extend(self.small_delays_together(&cone, &small, floor, p));
        }
        if effects.is_empty() {
            return None;
        }
        cov_mark::hit!(counterfactual_root);
        effects.push((CauseLabel::None, none_at * COUNTERFACTUAL_NONE));
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
        p: Pos,
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
        Some((self.lengthened_op_label(first, &route, p), effect))
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
            if self.added_work(x, with_requests, repeated) || self.works_alone(x, p) {
                out.push(Candidate {
                    at: x,
                    delay: ix.end(x).saturating_sub(ix.start(x)) as f64,
                    kind: DelayKind::NoRequest,
                });
                continue;
            }
            let peers = self.peers_of_the_same_size(x);
            out.extend(self.grown_host_gap(x, &peers));
            let Some(own) = readings::dev_phases(ix, x) else {
                continue;
            };
            let peer_phases: Vec<_> = peers
                .iter()
                .filter_map(|&k| readings::dev_phases(ix, k))
                .collect();
            if peer_phases.is_empty() {
                continue;
            }
            let floors = self.phase_floors(&peers);
            let start_waits: Vec<f64> = peer_phases
                .iter()
                .filter_map(|d| d.submitted_to_start)
                .collect();
            let held = analysis::excess(own.submitted_to_start, start_waits, 0.0);
            if held > floors[START_PHASE] {
                out.push(Candidate {
                    at: x,
                    delay: held,
                    kind: DelayKind::HeldResource,
                });
            }
            let runs: Vec<f64> = peer_phases.iter().map(|d| d.execution).collect();
            let spread = analysis::peer_spread(&runs);
            let excess = analysis::excess(Some(own.execution), runs, 0.0);

            let candidate = Candidate {
                at: x,
                delay: excess,
                kind: DelayKind::RanLong,
            };
            if excess > floors[EXECUTION_PHASE] {
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

    /// The host work that grew before device op `x`'s launch call: the call's
    /// gap since its thread's previous call, less the time the thread was off
    /// the CPU (stalled: [`Graph::stall_before`]'s candidates; blocked: waiting
    /// for work, which is idle time, not delay), beyond the same gaps of its
    /// `peers`' launch calls (every peer's where none of `peers` times its
    /// gap), their spread, what any host has ([`STALL_NS`],
    /// as for a stall: a host's own jitter is tens of microseconds) and a share
    /// of the peers' gap (`readings::host_jitter`: a thread waiting
    /// milliseconds for its next task waits a varying time, in proportion).
    /// Read the same way with and without request tokens: the thread's own
    /// records time it.
    fn grown_host_gap(&self, x: Pos, peers: &[Pos]) -> Option<Candidate> {
        // Without the host collector nothing says the thread was on the CPU:
        // a gap may be a stall or a wait for work the view cannot show. With
        // records lost, a gap may hold a call that is not in the view.
        if !self.has_ebpf || self.loss_plausible {
            return None;
        }
        let ix = &self.ix;
        let call = ix.launch_api(x)?;
        let (own, stalled) = self.gap_on_the_cpu(call)?;
        // A gap that holds a stall beyond what any host has is the stall's
        // ([`Graph::stall_before`]), whatever host work ran beside it.
        if stalled >= STALL_NS {
            return None;
        }
        let gaps_of = |peers: &[Pos]| -> Vec<f64> {
            peers
                .iter()
                .filter_map(|&k| ix.launch_api(k))
                .filter_map(|c| self.gap_on_the_cpu(c).map(|g| g.0))
                .collect()
        };
        let mut gaps = gaps_of(peers);
        // No peer of the same size times its gap (the first request of its
        // size in the view has no call before it): every peer's gap is the
        // norm. The calls a request makes are the same whatever its batch,
        // and the host work between them grows little with it, unlike the
        // kernels they launch.
        if gaps.is_empty() {
            gaps = gaps_of(&self.device_peers(x));
            if !gaps.is_empty() {
                cov_mark::hit!(host_gap_norm_of_every_size);
            }
        }
        // One peer gives no spread: its gap stands for it (host gaps vary from
        // request to request; a thread's wait for its next task is no work of
        // its own), so only a gap more than twice the peer's is grown.
        let spread = match gaps.as_slice() {
            [] => return None,
            [only] => *only,
            _ => analysis::peer_spread(&gaps),
        };
        let norm = crate::index::median(gaps).unwrap_or(0.0);
        readings::grown_gap(own, norm, spread).map(|excess| Candidate {
            at: call,
            delay: excess,
            kind: DelayKind::HostGap,
        })
    }

    /// The time on the CPU between host call `call` and its thread's previous
    /// call (its program-order predecessor): the gap less the thread's
    /// scheduler, page-fault and blocked time in it; and the scheduler and
    /// page-fault time alone (the stall).
    pub(super) fn gap_on_the_cpu(&self, call: Pos) -> Option<(f64, f64)> {
        let ix = &self.ix;
        let m = self.host_measure(call);
        let gap = m.gap?;
        let tid = ix.rec(call).tid()?;
        let st = readings::host_stalls(ix, tid, m.ready, ix.start(call));
        let stalled = st.desched_ns + st.fault_ns;
        Some(((gap - stalled - st.blocked_ns).max(0.0), stalled))
    }

    /// Grown host work before `call`, named by whose it was (docs/scenario-space.md,
    /// "Labels across requests"): another request's, which held the thread the
    /// symptom `p`'s request waited for, is `handoff_queueing`; the symptom's
    /// own request's is `host_compute`.
    fn host_gap_label(&self, call: Pos, p: Pos) -> CauseLabel {
        if self.same_repetition(call, p) {
            cov_mark::hit!(host_gap_of_the_own_request);
            CauseLabel::HostCompute
        } else {
            cov_mark::hit!(host_gap_of_another_request);
            CauseLabel::HandoffQueueing
        }
    }

    /// Whether launch call `call` belongs to the same request as `p`: by their
    /// tokens where both carry one; without tokens (closed mode), by the
    /// program's repetition on the thread: another request's call is one
    /// whose operation the thread launched again before it launched `p`
    /// (a serving loop's next request starts with the same launches). A call
    /// on another thread is judged the symptom's own: no thread the symptom's
    /// request waited for is shown.
    fn same_repetition(&self, call: Pos, p: Pos) -> bool {
        let ix = &self.ix;
        let ops = self.launched_ops(call);
        if let (Some(op), Some(mine)) = (ops.first(), self.token(p)) {
            if let Some(theirs) = self.token(*op) {
                return theirs == mine;
            }
        }
        let Some(asked) = self.call_of(p) else {
            return true;
        };
        let (Some(tid), Some(asked_tid)) = (ix.rec(call).tid(), ix.rec(asked).tid()) else {
            return true;
        };
        let Some(calls) = ix.thread(tid).map(|t| &t.calls) else {
            return true;
        };
        if tid != asked_tid {
            return true;
        }
        let keys: Vec<_> = ops
            .iter()
            .filter_map(|&o| analysis::peer_key(ix.rec(o)))
            .collect();
        let from =
            calls.partition_point(|&c| (ix.start(c), ix.rid(c)) <= (ix.start(call), ix.rid(call)));
        let to = calls
            .partition_point(|&c| (ix.start(c), ix.rid(c)) <= (ix.start(asked), ix.rid(asked)));
        let between = &calls[from..to.max(from)];
        if between.len() > MAX_REPETITION_CALLS {
            return false;
        }
        !between.iter().any(|&c| {
            self.launched_ops(c)
                .iter()
                .any(|&o| analysis::peer_key(ix.rec(o)).is_some_and(|k| keys.contains(&k)))
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
    /// order; `None` without a request ([`Graph::work_unit`]) or without
    /// sized records.
    fn request_size(&self, x: Pos) -> Option<&[u64]> {
        let unit = self.work_unit(x)?;
        let sizes = self.request_sizes.get_or_init(|| {
            let ix = &self.ix;
            let mut by_unit: FastMap<SharedStr, Vec<(u64, u64, u64)>> = FastMap::default();
            for &op in &ix.device_ops {
                let bytes = match ix.rec(op) {
                    Record::Memcpy { detail, .. } => detail.bytes,
                    Record::Memset { detail, .. } => detail.bytes,
                    _ => continue,
                };
                if let Some(u) = self.work_unit(op) {
                    by_unit
                        .entry(u)
                        .or_default()
                        .push((self.enqueue_key(op), ix.rid(op), bytes));
                }
            }
            by_unit
                .into_iter()
                .map(|(u, mut v)| {
                    v.sort_unstable();
                    (u, v.into_iter().map(|(_, _, b)| b).collect())
                })
                .collect()
        });
        sizes.get(&unit).map(Vec::as_slice)
    }

    /// The request device op `x` belongs to, as a key: its request token;
    /// without request identity (closed mode), the stretch of its launching
    /// thread's calls that ends with a call waiting for the device (a
    /// synchronize, or a copy that returned only when its transfer ended):
    /// a serving or training loop's requests each end by waiting for their
    /// results, and the sizes of a stretch's copies are its request's size.
    fn work_unit(&self, x: Pos) -> Option<SharedStr> {
        if !self.lacks_request_identity() {
            return self.token(x);
        }
        let ix = &self.ix;
        let call = ix.launch_api(x)?;
        let stretch = self.stretches.get_or_init(|| {
            let mut out: FastMap<Pos, u32> = FastMap::default();
            for th in ix.threads.values() {
                let mut k = 0u32;
                for &c in &th.calls {
                    out.insert(c, k);
                    if self.waits_for_the_device(c) {
                        k += 1;
                    }
                }
            }
            out
        });
        let k = stretch.get(&call)?;
        cov_mark::hit!(closed_mode_request_by_stretch);
        Some(SharedStr::from(format!("{}:{k}", ix.rec(call).tid()?)))
    }

    /// Whether host call `c` waited for the device: a synchronize, or a call
    /// that returned only when an op it launched ended (a pageable copy).
    fn waits_for_the_device(&self, c: Pos) -> bool {
        let ix = &self.ix;
        ix.call_kind(c) == crate::index::CallKind::Synchronize
            || self.launched_ops(c).iter().any(|&a| ix.end(c) >= ix.end(a))
    }

    /// A lengthened op's label (docs/scenario-space.md, "Labelling
    /// convention"): a copy is its own transfer (`pcie_contention` when
    /// other copies shared the link meanwhile, else `slow_copy`); a kernel is
    /// named by the first gate after it on the `route` its delay travelled
    /// other than stream order (an event, a graph edge, a blocking call, the
    /// fence of a pageable copy, another stream's work holding the resource),
    /// and is `stream_backlog` when stream order alone carried it, or carried
    /// it into the work of the symptom `p`'s own launch from another
    /// thread's (`entered_the_launch_by_stream_order`: a thread handoffs join
    /// to the program, whose work `works_alone` does not take for added work).
    fn lengthened_op_label(&self, x: Pos, route: &[InferredEdge], p: Pos) -> CauseLabel {
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
        if self.entered_the_launch_by_stream_order(x, route, p) {
            return CauseLabel::StreamBacklog;
        }
        self.gate_label(route)
    }

    /// Whether the delay of op `x` reached the work of the symptom `p`'s own
    /// launch call (a graph launch's nodes) by stream order, from work
    /// another thread launched, before any other gate on `route`: the
    /// launch's work queued behind that thread's work in its stream, and the
    /// gates between the launch's own ops (graph edges) only passed the
    /// wait on. A gate names a lengthened op where the op's mechanism works
    /// through it (docs/scenario-space.md, "Labelling convention"); what held
    /// this launch is the stream it shares with another thread's work, which
    /// no gate of its own ordered it after: a backlog. Read by thread, so the
    /// same with and without request tokens (with tokens, work of no request
    /// is named by `added_work_label` before it gets here).
    fn entered_the_launch_by_stream_order(&self, x: Pos, route: &[InferredEdge], p: Pos) -> bool {
        let ix = &self.ix;
        let Some(call) = ix.launch_api(p) else {
            return false;
        };
        let theirs = self.launching_thread(x);
        if theirs.is_none() || theirs == ix.rec(call).tid() {
            return false;
        }
        let Some(gate) = route.iter().find(|e| e.kind != EdgeType::StreamOrder) else {
            return false;
        };
        let entered = ix.launch_api(gate.src) == Some(call);
        if entered {
            cov_mark::hit!(entered_the_launch_by_stream_order);
        }
        entered
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

    /// The thread whose call launched device op `x`.
    pub(super) fn launching_thread(&self, x: Pos) -> Option<u32> {
        let ix = &self.ix;
        ix.launch_api(x).and_then(|c| ix.rec(c).tid())
    }

    /// Without tokens: whether device op `x` was launched by a thread other
    /// than the one that launched the symptom `p`, which no handoff joins to
    /// any other thread: a thread working alone beside the program, whose
    /// work is no request's the symptom waited for (`NoRequest`: all of it is
    /// delay to what it held), as tokens would say of work of no request.
    fn works_alone(&self, x: Pos, p: Pos) -> bool {
        let ix = &self.ix;
        if self.token(p).is_some() {
            return false;
        }
        let (Some(mine), Some(theirs)) = (self.launching_thread(p), self.launching_thread(x))
        else {
            return false;
        };
        let joined = self.handoff_threads.get_or_init(|| {
            self.edges
                .iter()
                .filter(|e| e.kind == EdgeType::Handoff)
                .flat_map(|e| [ix.rec(e.src).tid(), ix.rec(e.dst).tid()])
                .flatten()
                .collect()
        });
        let alone = theirs != mine && !joined.contains(&theirs);
        if alone {
            cov_mark::hit!(work_of_a_thread_alone);
        }
        alone
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
