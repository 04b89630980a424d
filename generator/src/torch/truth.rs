//! The ground truth and trace of one PyTorch run, through the one recording
//! path (`crate::record`, docs/records.md): the nodes and edges of every step
//! come from its rules, with structure from the executor's step log (which
//! call made which op on which stream, what each wait and sync waited for,
//! handoffs), host times from the executor's CLOCK_MONOTONIC and device times
//! from the work's own `%globaltimer` measurements. Kineto's records
//! ([`super::observe`]) are attached to the nodes they observe; they decide no
//! time of the truth.

use super::log::{HostEvent, Op, StepLog, What};
use super::observe::{self, Binding};
use crate::keys::{remember, skey_step_id, Keys, StepKey};
use crate::plan::Plan;
use crate::record::contention::{contention_edges, memcpy_node_name};
use crate::record::faults::{finish_plan, FAULT_END_TOLERANCE_NS};
use crate::record::{DeviceOp, DeviceTimes, NodeInfo, Pickup, RunBuilder};
use ground_truth::graph::{InjectionRecord, NodeId, NodeKind};
use ground_truth::scenario::Scenario;
use ground_truth::trace::{HostMemory, Record};
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

struct Builder<'a> {
    sc: &'a Scenario,
    log: &'a StepLog,
    plan: Option<&'a Plan>,
    acts: Option<(&'a Activities, &'a Binding)>,
    b: RunBuilder,
    keys: Keys,
    instrumented: bool,
    ops: HashMap<u64, &'a Op>,
    /// Per thread: its current task and previous host operation.
    task: Vec<Option<NodeId>>,
    prev: Vec<Option<NodeId>>,
    /// Per thread: a blocking (pageable) copy whose call just returned.
    pending: Vec<Option<u64>>,
    requests: Vec<Option<NodeId>>,
    handoffs: HashMap<u64, NodeId>,
    api_nodes: HashMap<u64, NodeId>,
    dev_nodes: HashMap<(u64, Option<usize>), NodeId>,
    /// Per graph: its replays so far (the k-th launch takes the k-th run of each node).
    replays: Vec<usize>,
    graph_sinks: HashMap<u64, Vec<NodeId>>,
    graph_runs: HashMap<u64, Vec<(Ns, Ns)>>,
    injections: Vec<InjectionRecord>,
    injected_devs: Vec<NodeId>,
    stats: RunStats,
    /// Per kernel both saw: (Kineto − self-timed) start and end.
    kernel_diffs: Vec<(i64, i64)>,
    start_thread_of_request: HashMap<usize, u32>,
}

/// Builds the truth of `log`; with Kineto's `acts` bound to it, the trace too.
pub fn build(
    sc: &Scenario,
    log: &StepLog,
    plan: Option<&Plan>,
    acts: Option<(&Activities, &Binding)>,
) -> Output {
    let ops: HashMap<u64, &Op> = log
        .threads
        .iter()
        .flat_map(|t| t.ops.iter())
        .map(|o| (o.id, o))
        .collect();
    let mut graph_runs: HashMap<u64, Vec<(Ns, Ns)>> = HashMap::new();
    for [tag, start, end] in &log.graph_kernels {
        graph_runs.entry(*tag).or_default().push((*start, *end));
    }
    for runs in graph_runs.values_mut() {
        runs.sort_unstable();
    }
    let n = log.threads.len();
    let mut bld = Builder {
        sc,
        log,
        plan,
        acts,
        b: RunBuilder::new(acts.is_some()),
        keys: HashMap::new(),
        instrumented: sc.mode == Mode::Instrumented,
        ops,
        task: vec![None; n],
        prev: vec![None; n],
        pending: vec![None; n],
        requests: vec![None; log.requests.len()],
        handoffs: HashMap::new(),
        api_nodes: HashMap::new(),
        dev_nodes: HashMap::new(),
        replays: vec![0; sc.graphs.len()],
        graph_sinks: HashMap::new(),
        graph_runs,
        injections: Vec::new(),
        injected_devs: Vec::new(),
        stats: RunStats::default(),
        kernel_diffs: Vec::new(),
        start_thread_of_request: log.arrivals.iter().map(|a| (a.request, a.tid)).collect(),
    };
    bld.replay();
    if let Some(plan) = plan {
        let injected = std::mem::take(&mut bld.injected_devs);
        if let Some(record) = finish_plan(&mut bld.b, plan, &bld.keys, &injected) {
            bld.injections.push(record);
        }
    }
    contention_edges(&mut bld.b);
    bld.event_completeness();
    bld.clock_check();
    Output {
        builder: bld.b,
        keys: bld.keys,
        injections: bld.injections,
        stats: bld.stats,
        origin: log.origin,
    }
}

impl<'a> Builder<'a> {
    fn token(&self, request: Option<usize>) -> Option<String> {
        request.map(|r| self.log.requests[r].token.to_string())
    }

    fn replay(&mut self) {
        #[derive(Clone, Copy)]
        enum Item {
            Arrival(usize),
            Host(usize, usize),
        }
        let mut order: Vec<(Ns, usize, usize, Item)> = Vec::new();
        for (i, a) in self.log.arrivals.iter().enumerate() {
            order.push((a.t, 0, i, Item::Arrival(i)));
        }
        for (ti, t) in self.log.threads.iter().enumerate() {
            for (ei, ev) in t.events.iter().enumerate() {
                let at = match ev {
                    HostEvent::Task(t, ..) | HostEvent::Handoff(t, ..) => *t,
                    HostEvent::Api(op) => self.ops.get(op).map_or(0, |o| o.t0),
                    HostEvent::Nvtx(_, _, end) => *end,
                    HostEvent::HostDelay(start, _) => *start,
                };
                order.push((at, ti + 1, ei, Item::Host(ti, ei)));
            }
        }
        order.sort_by_key(|o| (o.0, o.1, o.2));
        for (_, _, _, item) in order {
            match item {
                Item::Arrival(i) => self.arrival(i),
                Item::Host(ti, ei) => {
                    let ev = self.log.threads[ti].events[ei].clone();
                    self.host_event(ti, ev);
                }
            }
        }
    }

    fn arrival(&mut self, i: usize) {
        let a = &self.log.arrivals[i];
        let Some(r) = self.log.requests.get(a.request) else {
            return;
        };
        let Some(p) = self.sc.programs.get(r.program) else {
            return;
        };
        let name = format!("{}#{}", p.name, r.index);
        let node = self.b.request(
            name,
            r.token.to_string().into(),
            a.tid,
            a.t,
            self.instrumented,
        );
        self.requests[a.request] = Some(node);
    }

    fn host_event(&mut self, ti: usize, ev: HostEvent) {
        let tid = self.log.threads[ti].tid;
        match ev {
            HostEvent::Task(t, request, handoff, queue, thread_free) => {
                let token = self.token(Some(request)).unwrap_or_default();
                let handoff = handoff.and_then(|h| self.handoffs.get(&h).copied());
                let req = self.requests.get(request).copied().flatten();
                // The work was ready when it was pushed, or when the request arrived.
                let ready = handoff
                    .or(req)
                    .map(|n| self.b.truth.nodes[n as usize].start);
                let blocked_by = self.blocking_copy(ti);
                let pickup = ready.map(|ready| Pickup {
                    ready,
                    thread_free,
                    blocked_by,
                });
                let task = self.b.host_task(
                    &token,
                    tid,
                    queue,
                    t,
                    self.instrumented,
                    req,
                    handoff,
                    pickup,
                );
                self.task[ti] = Some(task);
                self.prev[ti] = Some(task);
                self.pending[ti] = None;
            }
            HostEvent::Handoff(t, id, queue, request) => {
                let token = self.token(Some(request)).unwrap_or_default();
                let blocked_by = self.blocking_copy(ti);
                let h = self.b.handoff(
                    queue.into(),
                    token.into(),
                    tid,
                    t,
                    self.instrumented,
                    self.task[ti],
                    self.prev[ti],
                    blocked_by,
                );
                self.handoffs.insert(id, h);
                self.task[ti] = None;
                self.prev[ti] = None;
            }
            HostEvent::Nvtx(name, start, end) => {
                if self.instrumented {
                    self.b.record(None, |rid| Record::Nvtx {
                        rid,
                        tid,
                        name: name.into(),
                        start,
                        end,
                    });
                }
            }
            HostEvent::HostDelay(start, end) => {
                if let Some(p) = self.plan {
                    self.injections.push(InjectionRecord {
                        kind: p.kind.as_str().into(),
                        mechanism: "the executor's own host work before the call grew (a busy Python thread)".into(),
                        requested_us: p.magnitude_ns as f64 / 1000.0,
                        measured_us: end.saturating_sub(start) as f64 / 1000.0,
                        fault_node: None,
                        off_cpu_us: None,
                    });
                }
            }
            HostEvent::Api(op) => {
                let Some(&o) = self.ops.get(&op) else { return };
                let blocked_by = self.blocking_copy(ti);
                let node = self.api_op(ti, o);
                self.b.call_waited(node, None, blocked_by);
                let blocking = matches!(
                    o.what,
                    What::Copy {
                        memory: HostMemory::Pageable,
                        ..
                    }
                );
                self.pending[ti] = blocking.then_some(o.id);
            }
        }
    }

    /// The device node of a pageable copy whose call returned only after the
    /// copy finished, so the thread's next host operation waited for it.
    fn blocking_copy(&mut self, ti: usize) -> Option<NodeId> {
        let op = self.pending[ti].take()?;
        let d = *self.dev_nodes.get(&(op, None))?;
        let a = *self.api_nodes.get(&op)?;
        let (dn, an) = (
            &self.b.truth.nodes[d as usize],
            &self.b.truth.nodes[a as usize],
        );
        (dn.end <= an.end + FAULT_END_TOLERANCE_NS).then_some(d)
    }

    fn skey(&self, o: &Op) -> Option<StepKey> {
        let r = &self.log.requests[o.request?];
        Some(StepKey {
            program: r.program,
            request: r.index,
            step: o.step?,
            graph_node: None,
            api: false,
        })
    }

    fn stream_of(&self, o: &Op) -> u32 {
        // Kineto's stream id where Kineto saw the op's device work, so truth
        // and records name a stream alike; else the executor's id.
        if let Some((acts, bind)) = self.acts {
            if let Some(d) = bind.device.get(&o.id).and_then(|v| v.first()) {
                return acts.device[*d].stream;
            }
        }
        o.stream_id.unwrap_or(0) as u32
    }

    fn api_op(&mut self, ti: usize, o: &'a Op) -> NodeId {
        let kind = match o.what {
            What::GraphLaunch { .. } => NodeKind::GraphLaunch,
            What::Sync { .. } => NodeKind::Synchronization,
            _ => NodeKind::ApiCall,
        };
        let skey = self.skey(o);
        let step_id = skey.as_ref().and_then(|k| skey_step_id(self.sc, k));
        let on_stream = !matches!(o.what, What::Sync { .. } | What::Recreate);
        let call_site = skey.as_ref().and_then(|k| {
            match self.sc.programs.get(k.program)?.steps.get(k.step)? {
                ground_truth::scenario::Step::Kernel { call_site, .. }
                | ground_truth::scenario::Step::Copy { call_site, .. } => call_site.clone(),
                _ => None,
            }
        });
        let info = NodeInfo {
            request: self.token(o.request).map(Into::into),
            step: step_id.clone(),
            thread: Some(o.tid.unwrap_or(self.log.threads[ti].tid)),
            stream: on_stream.then(|| self.stream_of(o)),
            call_site: call_site.map(Into::into),
            operator: o.operator.as_deref().map(Into::into),
            generation: if on_stream { o.generation } else { 0 },
        };
        let name = self.call_name(o);
        let prev = (!o.injected).then_some(&mut self.prev[ti]);
        let node = self.b.call(kind, name, info.clone(), (o.t0, o.t1), prev);
        self.api_nodes.insert(o.id, node);
        self.call_records(o, node);
        match &o.what {
            What::Kernel { .. } | What::Copy { .. } | What::Memset { .. } => {
                self.device_op(o, node, info, skey.as_ref())
            }
            What::EventRecord { .. } => self.event_record(o, node, info, skey.as_ref()),
            What::StreamWait { .. } => self.stream_wait(o, node, info, skey.as_ref()),
            What::GraphLaunch { graph } => self.graph_launch(o, *graph, node, info, skey.as_ref()),
            What::Sync { .. } => {
                let waited: Vec<NodeId> = o
                    .waited
                    .iter()
                    .filter_map(|w| self.dev_nodes.get(&(*w, None)).copied())
                    .collect();
                self.b.sync_waits(node, &waited);
            }
            What::Recreate => {}
        }
        if let Some(k) = &skey {
            if step_id.is_some() {
                self.keys.insert(
                    StepKey {
                        api: true,
                        ..k.clone()
                    },
                    node,
                );
                if matches!(o.what, What::GraphLaunch { .. } | What::Sync { .. }) {
                    self.keys.insert(k.clone(), node);
                }
            }
        }
        self.other_thread(o);
        node
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
    fn call_records(&mut self, o: &Op, node: NodeId) {
        let Some((acts, bind)) = self.acts else {
            return;
        };
        for &c in bind.calls.get(&o.id).into_iter().flatten() {
            let call = &acts.calls[c];
            self.b
                .record(Some(node), |rid| observe::call_record(bind, call, rid));
            if self.instrumented {
                if let Some(r) = o.request {
                    let token = self.log.requests[r].token;
                    self.b.record(None, |rid| Record::ExternalCorrelation {
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
                self.b.record(Some(node), |rid| with_rid(r, rid));
            }
        }
    }

    /// The device nodes an op follows on its stream: the ops before it, and
    /// a graph launch's sinks (the stream continues from them).
    fn after(&self, prev: &[u64]) -> Vec<NodeId> {
        let mut out = Vec::new();
        for p in prev {
            if let Some(&n) = self.dev_nodes.get(&(*p, None)) {
                out.push(n);
            }
            out.extend(self.graph_sinks.get(p).into_iter().flatten().copied());
        }
        out
    }

    fn ready(&self, queued: Ns, after: &[NodeId]) -> Ns {
        after
            .iter()
            .map(|&n| self.b.end_of(n))
            .fold(queued, Ns::max)
    }

    fn stamp(&self, o: &Op, i: usize) -> Option<Ns> {
        let k = *o.stamps.get(i)?;
        self.log.stamps.get(k).copied().filter(|&t| t > 0)
    }

    fn device_op(&mut self, o: &'a Op, api: NodeId, info: NodeInfo, skey: Option<&StepKey>) {
        let queued = o.t0;
        let mut after = self.after(&o.prev);
        after.sort_unstable();
        after.dedup();
        let ready = self.ready(queued, &after);
        let (kind, name, start, end) = match &o.what {
            What::Kernel { name, .. } => {
                let [s, e] = o
                    .slot
                    .and_then(|s| self.log.kernels.get(s).copied())
                    .unwrap_or([0, 0]);
                (NodeKind::Kernel, name.clone(), s, e)
            }
            What::Copy { direction, .. } => {
                let (s, e) = (self.stamp(o, 0), self.stamp(o, 1));
                (
                    NodeKind::Memcpy,
                    memcpy_node_name(*direction).to_string(),
                    s.unwrap_or(ready),
                    e.unwrap_or(0),
                )
            }
            _ => {
                let (s, e) = (self.stamp(o, 0), self.stamp(o, 1));
                (
                    NodeKind::Memset,
                    "memset".to_string(),
                    s.unwrap_or(ready),
                    e.unwrap_or(0),
                )
            }
        };
        let (start, end) = if start == 0 || end < start {
            (ready, ready.max(end))
        } else {
            (start, end)
        };
        let dev = self.b.device_op(DeviceOp {
            kind,
            name: name.into(),
            info,
            times: DeviceTimes {
                queued,
                submitted: ready.min(start.max(queued)),
                start,
                end,
            },
            launch: api,
            after: &after,
            waited_record: None,
        });
        self.placed(o, dev, skey);
        if o.injected && o.delays_target {
            self.injected_devs.push(dev);
        }
        if let Some(k) = skey {
            self.stretch_record(k, start, end);
        }
        self.device_records(o, dev, None);
    }

    fn placed(&mut self, o: &Op, dev: NodeId, skey: Option<&StepKey>) {
        self.dev_nodes.insert((o.id, None), dev);
        if let Some(k) = skey {
            remember(&mut self.keys, self.sc, k, dev);
        }
    }

    /// Kineto's device records of the op (the `node`-th of a graph launch's
    /// kernels, by nearest start), with the completeness counts.
    fn device_records(&mut self, o: &Op, dev: NodeId, graph_node: Option<&mut Vec<usize>>) {
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
        let start = self.b.truth.nodes[dev as usize].start;
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
            let n = &self.b.truth.nodes[dev as usize];
            let (ks, ke) = (bind.time(d.start) as i64, bind.time(d.end) as i64);
            self.kernel_diffs
                .push((ks - n.start as i64, ke - n.end as i64));
        }
        self.b
            .record(Some(dev), |rid| observe::device_record(bind, d, rid));
    }

    /// Injection record of a lengthened target: the measured extra duration.
    fn stretch_record(&mut self, k: &StepKey, start: Ns, end: Ns) {
        let record = self
            .plan
            .and_then(|p| crate::record::faults::stretch_injection(p, k, start, end));
        self.injections.extend(record);
    }

    fn event_record(&mut self, o: &'a Op, api: NodeId, info: NodeInfo, skey: Option<&StepKey>) {
        let queued = o.t0;
        let after = self.after(&o.prev);
        let ready = self.ready(queued, &after);
        // The stamp right before the record: when the stream reached it.
        let done = self.stamp(o, 0).map_or(ready, |t| t.max(queued));
        let dev = self.b.device_op(DeviceOp {
            kind: NodeKind::EventRecord,
            name: "event record".into(),
            info,
            times: DeviceTimes::instant(queued, done),
            launch: api,
            after: &after,
            waited_record: None,
        });
        self.placed(o, dev, skey);
    }

    fn stream_wait(&mut self, o: &'a Op, api: NodeId, info: NodeInfo, skey: Option<&StepKey>) {
        let queued = o.t0;
        let after = self.after(&o.prev);
        let start = self.ready(queued, &after);
        let src = o
            .event_src
            .and_then(|e| self.dev_nodes.get(&(e, None)).copied());
        let end = self.b.wait_end(start, src);
        let dev = self.b.device_op(DeviceOp {
            kind: NodeKind::StreamWait,
            name: "stream wait".into(),
            info,
            times: DeviceTimes {
                queued,
                submitted: start,
                start,
                end,
            },
            launch: api,
            after: &after,
            waited_record: src,
        });
        self.placed(o, dev, skey);
        if let Some((acts, bind)) = self.acts {
            for &s in bind.syncs.get(&o.id).into_iter().flatten() {
                if let Some(r) = observe::sync_record(bind, &acts.syncs[s], 0) {
                    self.b.record(Some(dev), |rid| with_rid(r, rid));
                }
            }
        }
    }

    fn graph_launch(
        &mut self,
        o: &'a Op,
        gi: usize,
        api: NodeId,
        info: NodeInfo,
        skey: Option<&StepKey>,
    ) {
        let Some(decl) = self.sc.graphs.get(gi) else {
            return;
        };
        let replay = self.replays[gi];
        self.replays[gi] += 1;
        let queued = o.t0;
        let after = self.after(&o.prev);
        let base = self.ready(queued, &after);
        let step_id = skey.and_then(|k| skey_step_id(self.sc, k));
        let tags = self.log.graph_tags.get(gi).cloned().unwrap_or_default();
        let mut ids: Vec<NodeId> = Vec::new();
        let mut used = Vec::new();
        for (ni, n) in decl.nodes.iter().enumerate() {
            let deps: Vec<NodeId> = n
                .after
                .iter()
                .filter_map(|a| decl.nodes.iter().position(|m| &m.id == a))
                .filter_map(|j| ids.get(j).copied())
                .collect();
            let ready = self.b.graph_ready(base, &deps);
            let run = tags
                .get(ni)
                .and_then(|t| self.graph_runs.get(t))
                .and_then(|runs| runs.get(replay))
                .copied();
            let (start, end) = run.unwrap_or((ready, ready));
            let mut inf = info.clone();
            inf.step = Some(format!("{}/{}", step_id.clone().unwrap_or_default(), n.id).into());
            let roots_after = if n.after.is_empty() {
                after.clone()
            } else {
                Vec::new()
            };
            let dev = self.b.graph_node(
                DeviceOp {
                    kind: NodeKind::GraphNode,
                    name: n.kernel.name.as_str().into(),
                    info: inf,
                    times: DeviceTimes {
                        queued,
                        submitted: ready.min(start.max(queued)),
                        start,
                        end,
                    },
                    launch: api,
                    after: &roots_after,
                    waited_record: None,
                },
                &deps,
            );
            ids.push(dev);
            self.dev_nodes.insert((o.id, Some(ni)), dev);
            if let Some(k) = skey {
                let nkey = StepKey {
                    graph_node: Some(n.id.clone()),
                    ..k.clone()
                };
                if step_id.is_some() {
                    self.keys.insert(nkey.clone(), dev);
                }
                self.stretch_record(&nkey, start, end);
            }
            self.device_records(o, dev, Some(&mut used));
        }
        let sinks = decl
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !decl.nodes.iter().any(|m| m.after.contains(&n.id)))
            .map(|(ni, _)| ids[ni])
            .collect();
        self.graph_sinks.insert(o.id, sinks);
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

fn with_rid(mut r: Record, rid: u64) -> Record {
    *r.rid_mut() = rid;
    r
}
