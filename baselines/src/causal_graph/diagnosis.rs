//! Diagnosis of one query: critical path, ranked causes, phase excess and the
//! unresolved boundary.

use super::graph::{Graph, Verdict};
use super::thresholds::{
    FENCED_COPY_CAUSE, HOST_COMPUTE_ALTERNATIVE, LATENESS_SHARE, MAX_BLOCKING_DEPTH, MAX_HOPS,
    NOISE_NS, NONE_WHEN_CLEAN, NONE_WHEN_UNSURE, NOT_LATE_GATE, SECONDARY_PHASE, SPREAD_MARGIN,
    UNGATED_RECORD_BACKLOG, UNGATED_RECORD_NONE, UNGATED_SYNC, UNKNOWN_GATE,
    UNSEEN_CONTENTION_SLOW_COPY, UNSEEN_HOST_DESCHEDULE, UNSEEN_HOST_PAGE_FAULT,
    UNSEEN_LINK_CONTENTION, UNSEEN_SM_CONTENTION, WAIT_RECORD_BACKLOG, WAIT_RECORD_EVENT,
};
use crate::analysis::{
    self, dominant, ranked, EXECUTION_PHASE, HOST_PHASE, PHASE_COUNT, QUEUE_PHASE, START_PHASE,
};
use crate::index::{call_site_frame, Pos};
use ground_truth::trace::{Record, SyncType};
use ground_truth::{CauseLabel, Diagnosis, EdgeType, Evidence, Phases, Query, Question};

/// A record's ranked causes, phase excess and peer count.

/// The diagnosis of one query and the number of peers its verdict was read against.
pub(crate) struct QueryDiagnosis {
    pub diagnosis: Diagnosis,
    pub peers: usize,
}

impl Graph<'_> {
    /// Diagnoses one query.
    pub(crate) fn diagnose(&self, q: &Query) -> QueryDiagnosis {
        let ix = &self.ix;
        let Some(p) = ix.pos(q.rid) else {
            return QueryDiagnosis {
                diagnosis: Diagnosis {
                    query: q.id.clone(),
                    causes: ranked(vec![(CauseLabel::None, 1.0)]),
                    critical_path: vec![],
                    phases: Phases::default(),
                    complete: false,
                    first_unresolved: None,
                    answer: None,
                },
                peers: 0,
            };
        };
        let (mut path, mut unresolved) = self.critical_path(p);
        self.asked_latency.set(self.normal_latency_of(p));
        self.upstream_readings.borrow_mut().clear();
        let (mut causes, phases, npeers) = self.causes(p, 0);
        if let Some(held) = self.held_by_other_requests(p) {
            causes = held;
        }
        // Nothing late against the symptom's own norms: its peers may be late
        // with it (a pipeline, a batch an earlier request held), so the delays
        // the records show upstream are each removed in turn (`candidates.rs`).
        // In closed mode the rules rank a gate above `none` when nothing is
        // late but an unjoined host gap longer than the peers' may hide the
        // delay (rule 8): nothing late is then read from the phases themselves.
        let nothing_late = top_cause(&causes) == Some(CauseLabel::None)
            || (self.lacks_request_identity() && dominant(&phases).1 <= 0.0);
        let mut device_effect = 0.0_f64;
        if nothing_late {
            if let Some(found) = self.counterfactual_root(p) {
                // A stall record joined by time outranks host work read as
                // grown from a gap alone (both explain the same gap; the
                // record is evidence of what filled it).
                device_effect = found
                    .iter()
                    .filter(|c| {
                        !matches!(
                            c.0,
                            CauseLabel::None
                                | CauseLabel::HostCompute
                                | CauseLabel::HandoffQueueing
                        )
                    })
                    .fold(0.0, |m, c| m.max(c.1));
                causes = found;
            }
        }
        // Without request identity or task markers (closed mode) the norms
        // above lack the request's beginning: the host collector's stall
        // records joined to the path by thread and time are judged by their
        // counterfactual effect instead (`joined_stall_root`).
        if self.lacks_request_identity() {
            if let Some(found) = self.joined_stall_root(p, &path, &causes, device_effect) {
                causes = found;
            }
        }
        self.asked_latency.set(f64::INFINITY);
        self.upstream_readings.borrow_mut().clear();
        let call = self.call_of(p);
        // The launch call was late and nothing visible on the host explains it:
        // without the eBPF collector (or with host records lost) the stall that
        // delayed it is not in this view.
        let (d, v) = dominant(&phases);
        let host_late = d == 0
            && v > NOISE_NS
            && causes
                .first()
                .is_some_and(|c| c.0 == CauseLabel::HostCompute);
        if host_late && (!self.has_ebpf || self.loss_plausible) {
            if let Some(c) = call {
                // Rule 9: the stall that delayed the launch is not in this view.
                cov_mark::hit!(host_stall_not_in_view);
                if unresolved.is_none() {
                    unresolved = Some(c);
                    if let Some(i) = path.iter().position(|&x| x == c) {
                        path.drain(..i);
                    }
                }
                if !self.has_ebpf {
                    causes.push((CauseLabel::CpuDeschedule, v * UNSEEN_HOST_DESCHEDULE));
                    causes.push((CauseLabel::HostPageFault, v * UNSEEN_HOST_PAGE_FAULT));
                }
            }
        }
        // Host-only view: the device side of a call's work is never visible.
        if !self.has_cupti
            && unresolved.is_none()
            && call.is_some_and(|c| {
                let k = ix.call_kind(c);
                k.launches_work() || k == crate::index::CallKind::Synchronize
            })
        {
            unresolved = Some(p);
        }
        let answer = match q.question {
            Question::CallSite => self
                .call_of(p)
                .and_then(|c| ix.stack(c))
                .and_then(call_site_frame)
                .map(str::to_string),
            Question::Operator => self.call_of(p).and_then(|c| {
                let r = ix.rec(c);
                ix.nvtx_enclosing_on(r.tid()?, r.interval().0)
                    .map(|n| match ix.rec(n) {
                        Record::Nvtx { name, .. } => name.to_string(),
                        _ => String::new(),
                    })
            }),
            _ => None,
        };
        QueryDiagnosis {
            diagnosis: Diagnosis {
                query: q.id.clone(),
                causes: ranked(causes),
                critical_path: path.iter().map(|&x| ix.rid(x)).collect(),
                phases,
                complete: unresolved.is_none(),
                first_unresolved: unresolved.map(|x| ix.rid(x)),
                answer,
            },
            peers: npeers,
        }
    }

    /// Whether the view lacks what ties work to requests and tasks: request
    /// tokens and task markers (closed mode, docs/design.md). The critical
    /// path then crosses a thread's program order only where the host
    /// collector's records join it (`host::joined_by_thread_and_time`).
    pub(crate) fn lacks_request_identity(&self) -> bool {
        self.ix.markers.is_empty() && self.ix.view.spec.mode == ground_truth::Mode::Closed
    }

    /// The host call behind a record: its launch API for device activities, the
    /// record itself for calls.
    pub(super) fn call_of(&self, p: Pos) -> Option<Pos> {
        match self.ix.rec(p) {
            Record::Api { .. } | Record::Uprobe { .. } => Some(self.ix.canonical_call(p)),
            _ => self.ix.launch_api(p),
        }
    }

    /// Ranked causes, phase excess and peer count for record `p`.
    pub(super) fn causes(&self, p: Pos, depth: u32) -> (Vec<(CauseLabel, f64)>, Phases, usize) {
        let ix = &self.ix;
        let r = ix.rec(p);
        match r {
            Record::Kernel { .. } | Record::Memcpy { .. } | Record::Memset { .. } => {
                self.device_causes(p, 0)
            }
            Record::Sync { sync_type, .. } if *sync_type != SyncType::StreamWaitEvent => {
                self.blocking_causes(p, depth)
            }
            Record::Api { correlation_id, .. } => {
                // A blocking call seen through its API record.
                let acts = ix.activities(*correlation_id);
                if let Some(s) = acts.and_then(|v| {
                    v.iter().copied().find(|&a| matches!(ix.rec(a), Record::Sync { sync_type, .. } if *sync_type != SyncType::StreamWaitEvent))
                }) {
                    return self.blocking_causes(s, depth);
                }
                if let Some(d) =
                    acts.and_then(|v| v.iter().copied().find(|&a| ix.rec(a).is_device_op()))
                {
                    return self.device_causes(d, 0);
                }
                self.host_causes(p)
            }
            Record::Uprobe { .. } => self.host_causes(ix.canonical_call(p)),
            Record::Sync { .. } | Record::CudaEvent { .. } => {
                // Wait or event record: judged by what gated it.
                let inc = self.incoming(p);
                if inc.iter().any(|e| e.kind == EdgeType::Event) {
                    (
                        vec![
                            (CauseLabel::EventWait, WAIT_RECORD_EVENT),
                            (CauseLabel::StreamBacklog, WAIT_RECORD_BACKLOG),
                        ],
                        Phases::default(),
                        0,
                    )
                } else {
                    (
                        vec![
                            (CauseLabel::StreamBacklog, UNGATED_RECORD_BACKLOG),
                            (CauseLabel::None, UNGATED_RECORD_NONE),
                        ],
                        Phases::default(),
                        0,
                    )
                }
            }
            _ => (vec![(CauseLabel::None, 1.0)], Phases::default(), 0),
        }
    }

    /// Host-only diagnosis of a call (no device record to judge).
    pub(super) fn host_causes(&self, call: Pos) -> (Vec<(CauseLabel, f64)>, Phases, usize) {
        let peers = self.call_peers(call);
        let (host, v) = self.host_excess(call, &peers);
        let ph = Phases {
            host_enqueue: host,
            ..Phases::default()
        };
        if host <= NOISE_NS {
            return (
                vec![
                    (CauseLabel::None, 1.0),
                    (CauseLabel::HostCompute, HOST_COMPUTE_ALTERNATIVE),
                ],
                Phases::default(),
                peers.len(),
            );
        }
        (v, ph, peers.len())
    }

    /// The reading of device op `p` (its causes, its phases against its peers,
    /// how many peers), asked at `depth` ops down from the symptom. Below the
    /// symptom (`depth` ≥ 1) an op's reading depends only on the op and the
    /// asked latency, so it is read once per diagnosis (`upstream_readings`):
    /// each upstream op's own walk (`late_since_request`,
    /// `late_blocking_predecessor`) reads the ops its path shares with the
    /// others', and read afresh every time that is exponential in the path's
    /// depth (over a minute for one 162-record view of a serving loop).
    pub(super) fn device_causes(&self, p: Pos, depth: u32) -> Verdict {
        if depth == 0 {
            return self.read_device_op(p, depth);
        }
        if let Some(known) = self.upstream_readings.borrow().get(&p) {
            cov_mark::hit!(upstream_reading_reused);
            return known.clone();
        }
        let found = self.read_device_op(p, depth);
        self.upstream_readings.borrow_mut().insert(p, found.clone());
        found
    }

    fn read_device_op(&self, p: Pos, depth: u32) -> Verdict {
        let ix = &self.ix;
        let r = ix.rec(p);
        let peers = self.device_peers(p);
        let floors = self.phase_floors(&peers);
        let (mut ph, host_causes) = self.device_phases(p, &peers);
        if self.late_launch_delayed_nothing(p, &ph) {
            ph.host_enqueue = 0.0;
        }
        let is_copy = matches!(r, Record::Memcpy { .. });
        let (d, v) = dominant_late(&ph, &floors);
        // A phase's excess is lateness only if the op itself finished late: an op
        // launched late that still waited for its gate ran on time.
        let finish_late = self.finish_since_request(p, &peers);
        let mut on_time = self.finished_on_time(p, d, depth, finish_late);
        if depth == 0 && d == QUEUE_PHASE && v > 0.0 && !on_time {
            match self.gate_wait_root(p) {
                GateWait::Explained(found) => return (found, ph, peers.len()),
                GateWait::Structural => on_time = true,
            }
        }
        if depth == 0 && v > 0.0 && !on_time {
            if let Some(found) = self.own_phase_explains_too_little(p, &peers, v, finish_late) {
                return found;
            }
        }
        // Without peers nothing is late against a norm: the records of this one
        // run say where the path was held (`structural`).
        if peers.is_empty() {
            if let Some(causes) = self.structural_root(p) {
                return (causes, ph, 0);
            }
        }
        if v <= 0.0 || on_time {
            // Launched on time after a blocking call that returned late: the
            // device work that call waited for passes its own cause on.
            if let Some((causes, wait)) = self.late_blocking_predecessor(p, &peers, depth) {
                let ph = Phases {
                    host_enqueue: wait,
                    ..Phases::default()
                };
                return (causes, ph, peers.len());
            }
            if let Some((causes, late)) = self.late_since_request(p, &peers, depth) {
                let ph = Phases {
                    host_enqueue: late,
                    ..Phases::default()
                };
                return (causes, ph, peers.len());
            }
            // Nothing is late. With peers, no lost records and every phase measured
            // that is a finding:
            // `none` first, what gated the op as the alternatives. Without peers
            // there is no normal timing to be late against, and with records lost
            // the one that shows the lateness may be gone: the op's timing is then
            // explained by what gated it, `none` the close second.
            // In closed mode a launch whose program-order predecessor the host
            // collector's records do not join (`host::joined_by_thread_and_time`)
            // has an unexplained gap before it: the thread may have idled until
            // another task's work arrived, or worked. Its peers' launches had
            // the same kind of gap, so their lengths are the norm: a gap no
            // longer than theirs hid nothing late, and `none` is the finding as
            // with a measured gap (`unjoined_gap_beyond_peers`).
            let host_unsure = ix
                .launch_api(p)
                .is_some_and(|a| self.unjoined_gap_beyond_peers(a, &peers));
            let none = if peers.is_empty() || self.loss_plausible || host_unsure {
                NONE_WHEN_UNSURE
            } else {
                NONE_WHEN_CLEAN
            };
            // An alternative's weight is capped: a gate passing on its own
            // excess (nanoseconds, not a share) outranked `none` here.
            let mut out: Vec<(CauseLabel, f64)> = self
                .gating_causes(p, 1.0, depth)
                .into_iter()
                .map(|(l, x)| (l, NOT_LATE_GATE * x.min(1.0)))
                .collect();
            out.push((CauseLabel::None, none));
            // Not late: no lateness to split.
            return (out, Phases::default(), peers.len());
        }
        let mut out: Vec<(CauseLabel, f64)> = Vec::new();
        match d {
            HOST_PHASE => {
                // A wait for a handoff (a task queued behind other work) is
                // lateness only as far as no delay upstream explains it, like
                // a wait for a device gate (`gate_wait_root`); also for an op
                // the walk reached upstream of the symptom (a kernel on time
                // behind the copy whose launch waited for the batch): the
                // wait is the same wait whichever op asked about it.
                if top_cause(&host_causes) == Some(CauseLabel::HandoffQueueing) {
                    if let Some(found) = self.counterfactual_root(p) {
                        cov_mark::hit!(handoff_wait_explained_upstream);
                        return (found, ph, peers.len());
                    }
                }
                out.extend(host_causes.iter().copied())
            }
            QUEUE_PHASE => out.extend(self.gating_causes(p, v, depth)),
            phase => {
                // Waiting to start names contention only as strongly as other
                // work was seen holding the resource meanwhile.
                let unseen = phase == START_PHASE && !self.held_by_other_work(p, is_copy);
                out.extend(
                    analysis::phase_causes(phase, is_copy)
                        .iter()
                        .map(|&(l, w)| {
                            (l, v * w * if unseen { unseen_contention(l) } else { 1.0 })
                        }),
                );
            }
        }
        // Secondary significant phases as lower-ranked alternatives.
        if d != 0 && ph.host_enqueue > floors[0] {
            out.extend(host_causes.iter().map(|&(l, s)| (l, s * SECONDARY_PHASE)));
        }
        if d != 1 && ph.queued_to_submitted > floors[1] {
            out.extend(self.gating_causes(p, ph.queued_to_submitted * SECONDARY_PHASE, depth));
        }
        (out, ph, peers.len())
    }

    /// Whether launch call `call` follows a program-order predecessor the host
    /// collector's records do not join (closed mode: the gap between them is
    /// idle time or work, unknown which) by a gap longer than its peers'
    /// launches followed theirs, beyond the peers' own spread of gaps and the
    /// host's jitter (`readings::host_gap_floor`, above the noise). Such a gap
    /// may hold the delay; one within the peers' gaps held nothing they were
    /// not held by too.
    fn unjoined_gap_beyond_peers(&self, call: Pos, peers: &[Pos]) -> bool {
        let unjoined = self
            .incoming_of(call, EdgeType::HostOrder)
            .is_some_and(|e| e.ev == Evidence::Inferred && !self.joined(&e));
        if !unjoined {
            return false;
        }
        let against = self.launch_gap_against_peers(call, peers);
        if against.peer_gaps == 0 {
            return true;
        }
        // Beyond what any host's gaps stray by too, as a measured gap's
        // excess is read (`readings::host_gap_floor`).
        let within_spread = against.excess <= NOISE_NS.max(against.spread);
        let beyond =
            against.excess > super::readings::host_gap_floor(against.median, against.spread);
        if !within_spread && !beyond {
            cov_mark::hit!(unjoined_gap_within_host_jitter);
        }
        if beyond {
            cov_mark::hit!(unjoined_gap_longer_than_the_peers);
        } else {
            cov_mark::hit!(unjoined_gap_within_peers);
        }
        beyond
    }

    /// Whether other streams' work of `p`'s kind (copies for a copy, kernels
    /// otherwise) ran while `p` waited to start after its stream let it go.
    fn held_by_other_work(&self, p: Pos, copy: bool) -> bool {
        let ix = &self.ix;
        let Some((q, s, st, _)) = super::readings::device_times(ix, p) else {
            return false;
        };
        let from = if s > 0 { s } else { q };
        let held = analysis::overlap_by_others(ix, p, from, st, |o| {
            if copy {
                matches!(o, Record::Memcpy { .. })
            } else {
                matches!(o, Record::Kernel { .. })
            }
        });
        held > 0.0
    }

    /// Rule 7e, a late launch that still waited for its stream delayed
    /// nothing: the op's stream predecessor or event let it go more than
    /// [`NOISE_NS`] after its launch did, so launched earlier it would have
    /// started just as late, and its host excess is no lateness. Failure it
    /// handles: on the H200 an injected backlog also slows the launching
    /// thread's driver calls, so a memset queued behind the backlog, launched
    /// 240 µs later than its peers, read `handoff_queueing`.
    fn late_launch_delayed_nothing(&self, p: Pos, ph: &Phases) -> bool {
        let delayed_nothing = ph.host_enqueue > 0.0 && self.waited_after_launch(p) > NOISE_NS;
        if delayed_nothing {
            cov_mark::hit!(late_launch_delayed_nothing);
        }
        delayed_nothing
    }

    /// A phase's excess is lateness only if the op
    /// finished late: whether `p`, read `depth` ops down from the symptom,
    /// whose dominant late phase is `d`, finished within its peers' spread of
    /// finishes (`finish_late`: its lateness and that spread,
    /// [`Graph::finish_since_request`]). A host-side excess carries the
    /// threads' wake-up jitter, of which the peers' spread is one sample:
    /// like the label check, the op must then finish later by
    /// [`SPREAD_MARGIN`] times that spread; device phases are timed by the
    /// device and stand against the spread itself. Failure it handles: an op
    /// launched late that still waited for its gate ran on time. Unless the
    /// op's own launch gap holds the chain ([`Graph::held_by_gap`], rule 7c).
    ///
    /// The asked op's own execution beyond its placed peers' is lateness
    /// whatever its finish (`own_execution_is_lateness`): execution is the
    /// op's last phase, so nothing after it can absorb the excess, and the
    /// device times it, without the host jitter that spreads the peers'
    /// finishes (a readback 79 µs longer than five peers of 1 µs spread, in
    /// requests whose finishes spread over 200 µs, read `none`:
    /// `implicit-synchronization.slow-transfer` on the fresh H200 splits).
    /// Only with request identity: without it the peers are every op of the
    /// name at the call site, not the same place in a request of the same
    /// size, and a longer execution among them is a larger batch as often as
    /// a slower op (7 closed `continuous-batching` symptoms per H200 split
    /// read a cause there).
    fn finished_on_time(
        &self,
        p: Pos,
        d: usize,
        depth: u32,
        finish_late: Option<(f64, f64)>,
    ) -> bool {
        let margin = if d == HOST_PHASE { SPREAD_MARGIN } else { 1.0 };
        let within_spread = finish_late.is_some_and(|(late, spread)| {
            late <= NOISE_NS.max(margin * spread)
                && !(d == HOST_PHASE && self.held_by_gap(p, late, spread))
        });
        if within_spread && depth == 0 && d == EXECUTION_PHASE && !self.lacks_request_identity() {
            cov_mark::hit!(own_execution_is_lateness);
            return false;
        }
        within_spread
    }

    /// A wait for a gate longer than the peers' (without peers: at all) is
    /// lateness only as far as a delay upstream made the gate release late:
    /// the counterfactual over the candidates the records show
    /// (`candidates.rs`) names it. Where no
    /// candidate moves the op, the longer wait is the op's place in the
    /// program (a micro-batch deeper in a pipeline waits for every stage
    /// ahead of it, its peers at other depths for fewer) and nothing is late.
    /// With request tokens the peers are matched by place and size and work of
    /// no request is known for what it is; without them (closed mode) the
    /// peers are every op of the name at the call site, and added work is
    /// named by the op it lengthened (baselines/README.md, known failures).
    fn gate_wait_root(&self, p: Pos) -> GateWait {
        match self.counterfactual_root(p) {
            Some(found) => GateWait::Explained(found),
            None => {
                cov_mark::hit!(gate_wait_is_the_place);
                GateWait::Structural
            }
        }
    }

    /// Rule 7a, a cause must explain the lateness: a late phase of the op's own
    /// (`v`) under [`LATENESS_SHARE`] of how much later it finished than its
    /// peers is not what made it late, and the cause lies upstream on its
    /// critical path ([`Graph::late_since_request`]). Only for the op asked
    /// about: the ops the walk visits upstream are judged by their own phases.
    /// Failure it handles: an op at the end of an eight-link chain whose root
    /// launch was preempted for 9 ms waits 45 µs longer in its queue from the
    /// jitter of the ops ahead; that read `event_wait`.
    fn own_phase_explains_too_little(
        &self,
        p: Pos,
        peers: &[Pos],
        v: f64,
        finish_late: Option<(f64, f64)>,
    ) -> Option<Verdict> {
        let (late, _) = finish_late.filter(|&(late, _)| v < LATENESS_SHARE * late)?;
        let (causes, _) = self.late_since_request(p, peers, 0)?;
        cov_mark::hit!(own_phase_explains_too_little);
        let ph = Phases {
            host_enqueue: late,
            ..Phases::default()
        };
        Some((causes, ph, peers.len()))
    }

    /// When the host-order predecessor of `p`'s launch call is a blocking call
    /// (it has a `sync` edge from the device work it waited for) that waited longer
    /// than the same call before `p`'s peers (or, without peers, at all), and the
    /// device op it waited for was itself late: that op's causes, and the excess wait.
    pub(super) fn late_blocking_predecessor(
        &self,
        p: Pos,
        peers: &[Pos],
        depth: u32,
    ) -> Option<(Vec<(CauseLabel, f64)>, f64)> {
        if depth >= MAX_HOPS {
            return None;
        }
        let ix = &self.ix;
        let blocking_before = |op: Pos| -> Option<(Pos, Pos)> {
            let call = ix.launch_api(op)?;
            let pred = self.incoming_of(call, EdgeType::HostOrder)?.src;
            let waited = self.incoming_of(pred, EdgeType::Sync)?.src;
            ix.rec(waited).is_device_op().then_some((pred, waited))
        };
        let wait = |c: Pos| ix.end(c).saturating_sub(ix.start(c)) as f64;
        let (pred, waited) = blocking_before(p)?;
        let peer_waits: Vec<f64> = peers
            .iter()
            .filter_map(|&k| blocking_before(k))
            .map(|(c, _)| wait(c))
            .collect();
        let excess = analysis::excess(Some(wait(pred)), peer_waits, 0.0);
        if excess <= NOISE_NS {
            return None;
        }
        let (causes, phases, _) = self.device_causes(waited, depth + 1);
        if dominant(&phases).1 <= 0.0 {
            return None;
        }
        // The device work the call waited for ran long itself, or waited in
        // its stream behind a kernel of its own thread that did (a serving
        // loop's readback behind its lengthened MLP): a host call blocked on
        // slower work (docs/scenario-space.md, "Labelling convention"), the
        // blocking call the first gate other than stream order on the
        // kernel's way to the symptom, as `gate_after` names it.
        let ran_long = self.ran_long(waited, &phases);
        let behind_long =
            !ran_long && self.queued_behind_a_long_kernel(waited, dominant(&phases).0);
        if behind_long {
            cov_mark::hit!(blocking_call_waited_behind_a_long_kernel);
        }
        let causes = if ran_long || behind_long {
            vec![(CauseLabel::ImplicitSync, excess)]
        } else {
            causes
        };
        cov_mark::hit!(late_blocking_predecessor);
        Some((causes, excess))
    }

    /// How long after its launch let it go `p` still waited for the gate that
    /// released it last (its stream predecessor, an event): 0 when the launch was
    /// that gate, or without a launch edge.
    fn waited_after_launch(&self, p: Pos) -> f64 {
        let incoming = self.incoming(p);
        let Some(launch) = incoming.iter().find(|e| e.kind == EdgeType::Launch) else {
            return 0.0;
        };
        let launched = self.effective(launch);
        incoming
            .iter()
            .filter(|e| e.kind != EdgeType::Launch)
            .map(|e| self.effective(e))
            .max()
            .map_or(0.0, |released| released.saturating_sub(launched) as f64)
    }

    /// Whether `x`'s launch gap held the op that finished `late` after its
    /// request began against its peers' `spread` (rule 7c): the symptom finished
    /// later than its peers beyond their spread (and [`NOISE_NS`]), and
    /// the gap's outlying part accounts for all of that: the finish lies within
    /// the host margin, so the gap must explain the whole lateness, not half as
    /// elsewhere (a 63 µs gap behind a 76 µs lateness, with peers straying by
    /// 41 µs, is the jitter the margin is for).
    pub(super) fn held_by_gap(&self, x: Pos, late: f64, spread: f64) -> bool {
        let held =
            late > NOISE_NS.max(spread) && self.host_gap_outlier(x).is_some_and(|gap| gap >= late);
        if held {
            cov_mark::hit!(host_gap_holds_the_chain);
        }
        held
    }

    /// How much longer the host gap before `x`'s launch call was than the same
    /// gap in `x`'s peers (ns), when that excess passes both [`NOISE_NS`]
    /// and [`SPREAD_MARGIN`] times the peers' own spread of the gap;
    /// `None` otherwise, for a gap to an inferred predecessor (closed mode:
    /// maybe another task's call) and outside a task whose begin the view
    /// shows. What held the gap (a stall record or the thread's own work) is
    /// for `host_excess` to say.
    fn host_gap_outlier(&self, x: Pos) -> Option<f64> {
        let ix = &self.ix;
        let call = ix.launch_api(x)?;
        let own = self.host_measure(call);
        // Only inside a task the view shows begin (its markers): without them the
        // gap may be the thread idling until a handoff brought the work.
        if own.gap_inferred || self.task_of(call).is_none() {
            return None;
        }
        let peer_gaps: Vec<f64> = self
            .device_peers(x)
            .iter()
            .filter_map(|&k| ix.launch_api(k))
            .filter_map(|c| self.host_measure(c).gap)
            .collect();
        if peer_gaps.is_empty() {
            return None;
        }
        let spread = analysis::peer_spread(&peer_gaps);
        let excess = analysis::excess(own.gap, peer_gaps, 0.0);
        (excess > NOISE_NS.max(SPREAD_MARGIN * spread)).then_some(excess)
    }

    /// How much later after its request began `p` finished than its peers did, and
    /// how far the peers themselves spread (`None` without peers or request markers):
    /// an op that finished within that range finished on time; whether one of its
    /// phases was late is asked of each phase against its own floor.
    pub(super) fn finish_since_request(&self, p: Pos, peers: &[Pos]) -> Option<(f64, f64)> {
        let ix = &self.ix;
        let since = |op: Pos| -> Option<f64> {
            let call = ix.launch_api(op)?;
            let m = self.host_measure(call);
            Some(m.since_request? + ix.end(op).saturating_sub(ix.start(call)) as f64)
        };
        let own = since(p)?;
        let base: Vec<f64> = peers.iter().filter_map(|&k| since(k)).collect();
        let m = crate::index::median(base.clone())?;
        Some(((own - m).max(0.0), analysis::peer_spread(&base)))
    }

    /// A blocking host call (stream/event/context synchronize, implicit fence).
    pub(super) fn blocking_causes(
        &self,
        s: Pos,
        depth: u32,
    ) -> (Vec<(CauseLabel, f64)>, Phases, usize) {
        let ix = &self.ix;
        let Record::Sync {
            sync_type,
            correlation_id,
            ..
        } = ix.rec(s)
        else {
            return (vec![(CauseLabel::None, 1.0)], Phases::default(), 0);
        };
        let copy = ix
            .activities(*correlation_id)
            .and_then(|v| v.iter().copied().find(|&a| ix.rec(a).is_device_op()));
        if *sync_type == SyncType::ImplicitCopyFence {
            let mut v = vec![(CauseLabel::ImplicitSync, 1.0)];
            let mut ph = Phases::default();
            let mut n = 0;
            if let Some(c) = copy {
                let (cv, cph, cn) = self.device_causes(c, 1);
                ph = cph;
                n = cn;
                v.extend(
                    cv.into_iter()
                        .filter(|x| x.0 != CauseLabel::ImplicitSync)
                        .map(|(l, x)| (l, x.min(1.0) * FENCED_COPY_CAUSE)),
                );
            }
            return (v, ph, n);
        }
        // Judge the device work the call waited for.
        let host_call = ix.api_of_corr(*correlation_id).unwrap_or(s);
        let gating = self.incoming_of(host_call, EdgeType::Sync);
        match gating {
            Some(e) if depth < MAX_BLOCKING_DEPTH && ix.rec(e.src).is_device_op() => {
                let (v, ph, n) = self.causes(e.src, depth + 1);
                (v, ph, n)
            }
            Some(_) => (
                vec![
                    (CauseLabel::EventWait, UNKNOWN_GATE),
                    (CauseLabel::StreamBacklog, UNKNOWN_GATE),
                ],
                Phases::default(),
                0,
            ),
            None => (
                vec![
                    (CauseLabel::None, UNGATED_SYNC),
                    (CauseLabel::ImplicitSync, UNGATED_SYNC),
                ],
                Phases::default(),
                0,
            ),
        }
    }
}

/// What made an op wait for its gate longer than its peers.
enum GateWait {
    /// A delay upstream, named by the counterfactual.
    Explained(Vec<(CauseLabel, f64)>),
    /// No delay upstream moves it: the wait is the op's place in the program.
    Structural,
}

/// The highest-weighted cause of an unranked list.
fn top_cause(causes: &[(CauseLabel, f64)]) -> Option<CauseLabel> {
    ranked(causes.to_vec()).first().map(|c| c.label)
}

/// The largest phase above its noise floor: (index, excess), or (0, 0) when none is.
pub(super) fn dominant_late(ph: &Phases, floors: &[f64; PHASE_COUNT]) -> (usize, f64) {
    ph.as_array()
        .iter()
        .zip(floors)
        .enumerate()
        .filter(|(_, (v, f))| **v > **f)
        .fold(
            (0, 0.0),
            |best, (i, (v, _))| if *v > best.1 { (i, *v) } else { best },
        )
}

/// The weight of a cause of a late start when no other work was seen holding
/// the resource meanwhile: contention reads weaker, a slow copy stronger.
fn unseen_contention(label: CauseLabel) -> f64 {
    match label {
        CauseLabel::PcieContention => UNSEEN_LINK_CONTENTION,
        CauseLabel::OccupancyPressure => UNSEEN_SM_CONTENTION,
        CauseLabel::SlowCopy => UNSEEN_CONTENTION_SLOW_COPY,
        _ => 1.0,
    }
}
