//! The ground truth and trace of one PyTorch run, through the one truth
//! builder (`crate::record::truth`, docs/records.md): the executor's step log
//! (which call made which op on which stream, what each wait and sync waited
//! for, handoffs) converted into the backend-neutral step log, host times from
//! the executor's CLOCK_MONOTONIC and device times from the work's own
//! `%globaltimer` measurements. Kineto's records ([`super::observe`]) are
//! attached to the nodes they observe; they decide no time of the truth.

use super::log::{HostEvent, Op, StepLog, What};
use super::observe::{self, Binding};
use crate::keys::{Keys, StepKey};
use crate::plan::Plan;
use crate::record::log::{self as neutral, DevRef, Item, OpKind};
use crate::record::truth::{graph_sinks, Measured, Observer};
use crate::record::RunBuilder;
use ground_truth::graph::{InjectionRecord, NodeId};
use ground_truth::scenario::Scenario;
use ground_truth::trace::{CopyDirection, HostMemory, Record};
use ground_truth::{Mode, Ns};
use kineto::Activities;
use std::collections::HashMap;

/// What the run's self-measurements and Kineto agree on, and how much of the
/// run Kineto saw (docs/torch-track.md, "Completeness").
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RunStats {
    /// Kernels whose Kineto times were compared with their own `%globaltimer`.
    pub kernels_compared: u64,
    pub clock_offset_ns: i64,
    pub max_start_diff_ns: i64,
    pub max_end_diff_ns: i64,
    pub completeness: Completeness,
}

/// Share of the truth Kineto's trace has (counts; the table divides).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Completeness {
    pub device_ops: u64,
    pub device_ops_seen: u64,
    /// Of those seen, with their launch call seen too (same correlation id).
    pub device_ops_linked: u64,
    pub event_edges: u64,
    /// The wait has a Kineto "Stream Wait Event" record.
    pub event_edges_seen: u64,
    /// ... naming the correlation of the very event record it waited on.
    pub event_edges_linked: u64,
    pub graph_kernels: u64,
    pub graph_kernels_seen: u64,
    pub graph_kernels_linked: u64,
    /// Calls made on threads other than the request's first thread.
    pub other_thread_ops: u64,
    pub other_thread_ops_seen: u64,
    pub other_thread_ops_linked: u64,
}

pub struct Output {
    pub builder: RunBuilder,
    pub keys: Keys,
    pub injections: Vec<InjectionRecord>,
    pub stats: RunStats,
    pub origin: Ns,
}

/// Builds the truth of `log`; with Kineto's `acts` bound to it, the trace too.
pub fn build(
    sc: &Scenario,
    log: &StepLog,
    plan: Option<&Plan>,
    acts: Option<(&Activities, &Binding)>,
) -> Output {
    let steps = neutral_log(sc, log, plan, acts);
    let mut kineto = KinetoObserver::new(sc, log, acts);
    let truth = crate::record::truth::build(sc, &steps, plan, &mut kineto, acts.is_some());
    kineto.event_completeness();
    kineto.clock_check();
    Output {
        builder: truth.builder,
        keys: truth.keys,
        injections: truth.injections,
        stats: kineto.stats,
        origin: log.origin,
    }
}

/// What the plan's host delay is, as the executor runs it.
const HOST_DELAY_MECHANISM: &str =
    "the executor's own host work before the call grew (a busy Python thread)";

/// The executor's step log in the backend-neutral form: its ops with step
/// keys, streams (Kineto's ids where Kineto saw the op's device work) and
/// call sites, a graph launch's stream successors after its sinks, the plan's
/// host delay as a stall, and each thread's blocking copies carried into its
/// next host operation.
pub fn neutral_log(
    sc: &Scenario,
    log: &StepLog,
    plan: Option<&Plan>,
    acts: Option<(&Activities, &Binding)>,
) -> neutral::StepLog {
    let own: HashMap<u64, &Op> = own_ops(log);
    let mut stalls = Vec::new();
    let mut threads = Vec::new();
    for t in &log.threads {
        let mut events = Vec::new();
        for ev in &t.events {
            events.push(match ev {
                HostEvent::Task(at, request, handoff, queue, thread_free) => {
                    neutral::HostEvent::TaskBegin {
                        t: *at,
                        thread_free: *thread_free,
                        pending: None,
                        request: *request,
                        handoff: *handoff,
                        queue: queue.clone(),
                    }
                }
                HostEvent::Handoff(at, id, queue, request, ready) => neutral::HostEvent::Handoff {
                    t: *at,
                    ready: if *ready == 0 { *at } else { *ready },
                    id: *id,
                    queue: queue.clone(),
                    request: *request,
                    pending: None,
                    fault: None,
                },
                HostEvent::Api(op) => neutral::HostEvent::Api {
                    op: *op,
                    fault: None,
                    pending: None,
                },
                HostEvent::Nvtx(name, start, end) => neutral::HostEvent::Nvtx {
                    name: name.clone(),
                    t0: *start,
                    t1: *end,
                },
                HostEvent::HostDelay(start, end) => {
                    let Some(p) = plan else { continue };
                    stalls.push(neutral::Stall {
                        tid: t.tid,
                        t0: *start,
                        t1: *end,
                        kind: p.kind,
                        mechanism: HOST_DELAY_MECHANISM.into(),
                        requested_ns: p.magnitude_ns,
                        switched_out_ns: None,
                        fault_before: None,
                    });
                    neutral::HostEvent::Stall {
                        index: stalls.len() - 1,
                    }
                }
            });
        }
        threads.push(neutral::ThreadLog {
            tid: t.tid,
            injector: false,
            events,
        });
    }
    let ops = log
        .threads
        .iter()
        .flat_map(|t| t.ops.iter())
        .map(|o| neutral_op(sc, log, o, &own, acts))
        .collect();
    let mut steps = neutral::StepLog {
        requests: log
            .requests
            .iter()
            .map(|r| neutral::Request {
                program: r.program,
                index: r.index,
                token: r.token,
            })
            .collect(),
        arrivals: log
            .arrivals
            .iter()
            .map(|a| neutral::Arrival {
                request: a.request,
                t: a.t,
                tid: a.tid,
            })
            .collect(),
        threads,
        ops,
        stalls,
    };
    carry_blocking_copies(&mut steps, &own);
    steps
}

fn own_ops(log: &StepLog) -> HashMap<u64, &Op> {
    log.threads
        .iter()
        .flat_map(|t| t.ops.iter())
        .map(|o| (o.id, o))
        .collect()
}

/// The executor's log names no blocking copy: a pageable copy's call returns
/// once the copy is done, so the thread's next task, push or call (in build
/// order) waited for it.
fn carry_blocking_copies(steps: &mut neutral::StepLog, own: &HashMap<u64, &Op>) {
    let mut pending: Vec<Option<u64>> = vec![None; steps.threads.len()];
    for item in steps.build_order() {
        let Item::Host(ti, ei) = item else { continue };
        match &mut steps.threads[ti].events[ei] {
            neutral::HostEvent::TaskBegin { pending: p, .. }
            | neutral::HostEvent::Handoff { pending: p, .. } => *p = pending[ti].take(),
            neutral::HostEvent::Api { op, pending: p, .. } => {
                let Some(o) = own.get(op) else { continue };
                *p = pending[ti].take();
                let blocking = matches!(
                    o.what,
                    What::Copy {
                        memory: HostMemory::Pageable,
                        ..
                    }
                );
                pending[ti] = blocking.then_some(o.id);
            }
            _ => {}
        }
    }
}

fn neutral_op(
    sc: &Scenario,
    log: &StepLog,
    o: &Op,
    own: &HashMap<u64, &Op>,
    acts: Option<(&Activities, &Binding)>,
) -> neutral::Op {
    let skey = o.request.zip(o.step).map(|(r, step)| {
        let r = &log.requests[r];
        StepKey {
            program: r.program,
            request: r.index,
            step,
            graph_node: None,
            api: false,
        }
    });
    let call_site =
        skey.as_ref()
            .and_then(|k| match sc.programs.get(k.program)?.steps.get(k.step)? {
                ground_truth::scenario::Step::Kernel { call_site, .. }
                | ground_truth::scenario::Step::Copy { call_site, .. } => call_site.clone(),
                _ => None,
            });
    let on_stream = !matches!(o.what, What::Sync { .. } | What::Recreate);
    // A graph launch's stream continues from its sinks.
    let prev = o
        .prev
        .iter()
        .flat_map(|&p| match own.get(&p).map(|q| &q.what) {
            Some(What::GraphLaunch { graph }) => graph_sinks(sc, *graph, p),
            _ => vec![DevRef::op(p)],
        })
        .collect();
    neutral::Op {
        id: o.id,
        request: o.request,
        skey,
        kind: match &o.what {
            What::Kernel { name, .. } => OpKind::Kernel {
                name: name.as_str().into(),
            },
            What::Copy { direction, .. } => OpKind::Copy {
                direction: *direction,
            },
            What::Memset { .. } => OpKind::Memset,
            What::EventRecord { .. } => OpKind::EventRecord,
            What::StreamWait { .. } => OpKind::StreamWait,
            What::GraphLaunch { graph } => OpKind::GraphLaunch { graph: *graph },
            What::Sync { .. } => OpKind::Sync,
            What::Recreate => OpKind::Recreate,
        },
        t0: o.t0,
        tid: o.tid,
        stream: on_stream.then(|| stream_of(o, acts)),
        generation: o.generation,
        call_site: call_site.map(Into::into),
        operator: o.operator.as_deref().map(Into::into),
        prev,
        event_src: o.event_src,
        waited: o.waited.iter().map(|&w| DevRef::op(w)).collect(),
        outside_host_order: o.injected,
        delays_target: o.injected && o.delays_target,
    }
}

/// Kineto's stream id where Kineto saw the op's device work, so truth and
/// records name a stream alike; else the executor's id.
fn stream_of(o: &Op, acts: Option<(&Activities, &Binding)>) -> u32 {
    if let Some((acts, bind)) = acts {
        if let Some(d) = bind.device.get(&o.id).and_then(|v| v.first()) {
            return acts.device[*d].stream;
        }
    }
    o.stream_id.unwrap_or(0) as u32
}

/// The self-timed device times of the executor's log, and Kineto's records
/// bound to its ops, with what Kineto saw of the run.
struct KinetoObserver<'a> {
    log: &'a StepLog,
    acts: Option<(&'a Activities, &'a Binding)>,
    instrumented: bool,
    ops: HashMap<u64, &'a Op>,
    graph_runs: HashMap<u64, Vec<(Ns, Ns)>>,
    /// The graph launch whose nodes take Kineto's kernels now, and those taken.
    graph_records_used: (u64, Vec<usize>),
    stats: RunStats,
    /// Per kernel both saw: (Kineto − self-timed) start and end.
    kernel_diffs: Vec<(i64, i64)>,
    start_thread_of_request: HashMap<usize, u32>,
}

impl<'a> KinetoObserver<'a> {
    fn new(sc: &Scenario, log: &'a StepLog, acts: Option<(&'a Activities, &'a Binding)>) -> Self {
        let mut graph_runs: HashMap<u64, Vec<(Ns, Ns)>> = HashMap::new();
        for [tag, start, end] in &log.graph_kernels {
            graph_runs.entry(*tag).or_default().push((*start, *end));
        }
        for runs in graph_runs.values_mut() {
            runs.sort_unstable();
        }
        KinetoObserver {
            log,
            acts,
            instrumented: sc.mode == Mode::Instrumented,
            ops: own_ops(log),
            graph_runs,
            graph_records_used: (u64::MAX, Vec::new()),
            stats: RunStats::default(),
            kernel_diffs: Vec::new(),
            start_thread_of_request: log.arrivals.iter().map(|a| (a.request, a.tid)).collect(),
        }
    }

    fn own(&self, op: &neutral::Op) -> &'a Op {
        self.ops[&op.id]
    }

    fn stamp(&self, o: &Op, i: usize) -> Option<Ns> {
        let k = *o.stamps.get(i)?;
        self.log.stamps.get(k).copied().filter(|&t| t > 0)
    }

    /// The call Kineto recorded for the op that does its work (not a query
    /// such as `cudaStreamIsCapturing`), else the API it reaches.
    fn call_name(&self, o: &Op) -> String {
        if let Some((acts, bind)) = self.acts {
            let calls = bind.calls.get(&o.id).map(Vec::as_slice).unwrap_or(&[]);
            let key = o.api_key();
            if let Some(c) = calls.iter().find(|&&c| acts.calls[c].name.contains(key)) {
                return acts.calls[*c].name.clone();
            }
        }
        o.api_name().to_string()
    }

    /// Kineto's calls of the op, and its synchronization records that belong
    /// to the call (a synchronize, a pageable copy's fence), owned by the call's node.
    fn kineto_call_records(&mut self, b: &mut RunBuilder, o: &Op, node: NodeId) {
        let Some((acts, bind)) = self.acts else {
            return;
        };
        for &c in bind.calls.get(&o.id).into_iter().flatten() {
            let call = &acts.calls[c];
            b.record(Some(node), |rid| observe::call_record(bind, call, rid));
            if self.instrumented {
                if let Some(r) = o.request {
                    let token = self.log.requests[r].token;
                    b.record(None, |rid| Record::ExternalCorrelation {
                        rid,
                        external_kind: "request".into(),
                        external_id: token,
                        correlation_id: call.correlation as u32,
                    });
                }
            }
        }
        if matches!(o.what, What::StreamWait { .. }) {
            return;
        }
        for &s in bind.syncs.get(&o.id).into_iter().flatten() {
            if let Some(r) = observe::sync_record(bind, &acts.syncs[s], 0) {
                b.record(Some(node), |rid| with_rid(r, rid));
            }
        }
    }

    /// Kineto's device records of the op (the `node`-th of a graph launch's
    /// kernels, by nearest start), with the completeness counts.
    fn kineto_device_records(
        &mut self,
        b: &mut RunBuilder,
        o: &Op,
        dev: NodeId,
        graph_node: Option<&mut Vec<usize>>,
    ) {
        let graph = graph_node.is_some();
        let c = &mut self.stats.completeness;
        if graph {
            c.graph_kernels += 1;
        } else {
            c.device_ops += 1;
        }
        let Some((acts, bind)) = self.acts else {
            return;
        };
        // The op's own kind of activity (a neighbouring time stamp is not its record).
        let want = match o.what {
            What::Copy { .. } => kineto::DeviceKind::Memcpy,
            What::Memset { .. } => kineto::DeviceKind::Memset,
            _ => kineto::DeviceKind::Kernel,
        };
        let entry = match &o.what {
            What::Kernel { name, .. } => Some(observe::entry_name(name)),
            _ => None,
        };
        let candidates: Vec<usize> = bind
            .device
            .get(&o.id)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&i| acts.device[i].kind == want)
            // A kernel is named by its entry point (a time stamp is `cb_stamp`).
            .filter(|&i| entry.as_ref().is_none_or(|e| acts.device[i].name == *e))
            .collect();
        let start = b.truth.nodes[dev as usize].start;
        let pick = match graph_node {
            Some(used) => {
                let best = candidates
                    .iter()
                    .copied()
                    .filter(|i| !used.contains(i))
                    .min_by_key(|&i| (bind.time(acts.device[i].start) as i64 - start as i64).abs());
                if let Some(i) = best {
                    used.push(i);
                }
                best
            }
            None => candidates.first().copied(),
        };
        let Some(i) = pick else { return };
        let d = &acts.device[i];
        let linked = bind.calls.get(&o.id).is_some_and(|cs| {
            cs.iter()
                .any(|&c| acts.calls[c].correlation == d.correlation)
        });
        let c = &mut self.stats.completeness;
        if graph {
            c.graph_kernels_seen += 1;
            c.graph_kernels_linked += linked as u64;
        } else {
            c.device_ops_seen += 1;
            c.device_ops_linked += linked as u64;
        }
        if d.kind == kineto::DeviceKind::Kernel {
            let n = &b.truth.nodes[dev as usize];
            let (ks, ke) = (bind.time(d.start) as i64, bind.time(d.end) as i64);
            self.kernel_diffs
                .push((ks - n.start as i64, ke - n.end as i64));
        }
        b.record(Some(dev), |rid| observe::device_record(bind, d, rid));
    }

    /// Kineto's kernel times against the self-timed ones, as the CUDA
    /// backend checks CUPTI's: the median start difference is the clocks'
    /// offset (Kineto's device clock against the calibrated `%globaltimer`),
    /// the largest deviations from it are the disagreement.
    fn clock_check(&mut self) {
        let d = &self.kernel_diffs;
        self.stats.kernels_compared = d.len() as u64;
        if d.is_empty() {
            return;
        }
        let mut starts: Vec<i64> = d.iter().map(|x| x.0).collect();
        starts.sort_unstable();
        let offset = starts[starts.len() / 2];
        self.stats.clock_offset_ns = offset;
        self.stats.max_start_diff_ns = d.iter().map(|x| (x.0 - offset).abs()).max().unwrap_or(0);
        self.stats.max_end_diff_ns = d.iter().map(|x| (x.1 - offset).abs()).max().unwrap_or(0);
    }

    /// kineto#443: calls on a thread other than the one the request began on.
    fn other_thread(&mut self, o: &Op) {
        let Some(r) = o.request else { return };
        let Some(&first) = self.start_thread_of_request.get(&r) else {
            return;
        };
        if o.tid == Some(first) || o.tid.is_none() {
            return;
        }
        let c = &mut self.stats.completeness;
        c.other_thread_ops += 1;
        let Some((acts, bind)) = self.acts else {
            return;
        };
        let Some(calls) = bind.calls.get(&o.id) else {
            return;
        };
        let c = &mut self.stats.completeness;
        c.other_thread_ops_seen += 1;
        let device_linked = bind.device.get(&o.id).is_some_and(|ds| {
            ds.iter().any(|&d| {
                calls
                    .iter()
                    .any(|&k| acts.calls[k].correlation == acts.device[d].correlation)
            })
        });
        if device_linked
            || !matches!(
                o.what,
                What::Kernel { .. } | What::Copy { .. } | What::Memset { .. }
            )
        {
            c.other_thread_ops_linked += 1;
        }
    }

    /// kineto#904 / #1318: each true event edge, whether Kineto's wait record
    /// exists and names the correlation of the record's own call.
    fn event_completeness(&mut self) {
        let waits: Vec<&Op> = self
            .ops
            .values()
            .copied()
            .filter(|o| matches!(o.what, What::StreamWait { .. }) && o.event_src.is_some())
            .collect();
        for o in waits {
            let c = &mut self.stats.completeness;
            c.event_edges += 1;
            let Some((acts, bind)) = self.acts else {
                continue;
            };
            let Some(syncs) = bind.syncs.get(&o.id) else {
                continue;
            };
            let c = &mut self.stats.completeness;
            c.event_edges_seen += 1;
            let record_corrs: Vec<u64> = o
                .event_src
                .and_then(|e| bind.calls.get(&e))
                .into_iter()
                .flatten()
                .map(|&k| acts.calls[k].correlation)
                .collect();
            if syncs.iter().any(|&s| {
                acts.syncs[s]
                    .wait_on_event_record
                    .is_some_and(|r| record_corrs.contains(&r))
            }) {
                c.event_edges_linked += 1;
            }
        }
    }
}

impl Observer for KinetoObserver<'_> {
    fn call(&mut self, op: &neutral::Op) -> (String, (Ns, Ns)) {
        let o = self.own(op);
        (self.call_name(o), (o.t0, o.t1))
    }

    fn call_records(&mut self, b: &mut RunBuilder, op: &neutral::Op, call: NodeId) {
        let o = self.own(op);
        self.kineto_call_records(b, o, call);
        self.other_thread(o);
    }

    fn device_times(&mut self, op: &neutral::Op, call_end: Ns) -> Measured {
        let o = self.own(op);
        let (start, end) = match &o.what {
            What::Kernel { .. } => {
                let [s, e] = o
                    .slot
                    .and_then(|s| self.log.kernels.get(s).copied())
                    .unwrap_or([0, 0]);
                (s, e)
            }
            // A readback into pageable memory returns only once the copy is
            // done (the CUDA runtime's documented behaviour), while the stamp
            // after it is a kernel the thread launched after that return: the
            // call's return bounds the copy's end more closely. Left at the
            // stamp, the copy ended up to 120 µs after its own call returned
            // (`training-step` on the H200), so the thread's next task did not
            // read as held by it (`record::truth`'s blocking copy).
            What::Copy {
                direction: CopyDirection::D2h,
                memory: HostMemory::Pageable,
                ..
            } if call_end > 0 => {
                let (s, e) = (self.stamp(o, 0).unwrap_or(0), self.stamp(o, 1).unwrap_or(0));
                (s, e.min(call_end).max(s))
            }
            _ => (self.stamp(o, 0).unwrap_or(0), self.stamp(o, 1).unwrap_or(0)),
        };
        Measured::SelfTimed { start, end }
    }

    fn device_records(&mut self, b: &mut RunBuilder, op: &neutral::Op, dev: NodeId) {
        let o = self.own(op);
        self.kineto_device_records(b, o, dev, None);
    }

    fn event_reached(&mut self, op: &neutral::Op, _queued: Ns) -> Option<Ns> {
        // The stamp right before the record: when the stream reached it.
        self.stamp(self.own(op), 0)
    }

    fn event_records(&mut self, _: &mut RunBuilder, _: &neutral::Op, _: NodeId, _: Ns) {}

    fn wait_records(&mut self, b: &mut RunBuilder, op: &neutral::Op, dev: NodeId) {
        let Some((acts, bind)) = self.acts else {
            return;
        };
        for &s in bind.syncs.get(&op.id).into_iter().flatten() {
            if let Some(r) = observe::sync_record(bind, &acts.syncs[s], 0) {
                b.record(Some(dev), |rid| with_rid(r, rid));
            }
        }
    }

    fn graph_node_times(
        &mut self,
        _op: &neutral::Op,
        graph: usize,
        node: usize,
        replay: usize,
        ready: Ns,
    ) -> (Ns, Ns) {
        self.log
            .graph_tags
            .get(graph)
            .and_then(|tags| tags.get(node))
            .and_then(|t| self.graph_runs.get(t))
            .and_then(|runs| runs.get(replay))
            .copied()
            .unwrap_or((ready, ready))
    }

    fn graph_node_records(
        &mut self,
        b: &mut RunBuilder,
        op: &neutral::Op,
        _node: usize,
        dev: NodeId,
        _key: Option<&StepKey>,
    ) {
        let o = self.own(op);
        if self.graph_records_used.0 != o.id {
            self.graph_records_used = (o.id, Vec::new());
        }
        let mut used = std::mem::take(&mut self.graph_records_used.1);
        self.kineto_device_records(b, o, dev, Some(&mut used));
        self.graph_records_used.1 = used;
    }

    /// A synchronize's records are its call's (`call_records`).
    fn sync_records(&mut self, _: &mut RunBuilder, _: &neutral::Op, _: NodeId) {}
}

fn with_rid(mut r: Record, rid: u64) -> Record {
    *r.rid_mut() = rid;
    r
}
