//! Builds the ground truth and the trace of one real run from what the
//! executor knows by construction (which call created which op on which
//! stream, which record each wait targeted, graph dependencies, handoffs) and
//! what CUPTI measured, bound by correlation id: every generator call carried
//! a recorder-private external correlation id (CUSTOM0 = op id), so each CUPTI
//! API record, and through its correlation id each device record, belongs to
//! exactly one op. Node kinds, edges, rid ownership and the records per step
//! follow the simulator (`sim/engine.rs`, docs/records.md), so both backends
//! mean the same thing.

use super::cupti::{self, Raw};
use super::exec::{graph_op_id, DevRef, HostEv, Op, RunLog, What};
use super::plan::Plan;
use crate::keys::{skey_step_id, Keys, StepKey};
use crate::record::faults::finish_plan;
use crate::record::steps::Observed;
use crate::record::{DeviceOp, DeviceTimes, NodeInfo, RunBuilder};
use ground_truth::bundle::LossAccounting;
use ground_truth::graph::{InjectionRecord, NodeId, NodeKind};
use ground_truth::scenario::{InjectionKind, KernelKind, Scenario, SyncTarget};
use ground_truth::trace::{CopyDirection, Record, Rid};
use ground_truth::{Mode, Ns};
use recorder_cupti::convert::{
    CallFacts, SYNC_CONTEXT_SYNCHRONIZE, SYNC_EVENT_SYNCHRONIZE, SYNC_STREAM_SYNCHRONIZE,
    SYNC_STREAM_WAIT_EVENT,
};
use std::collections::{HashMap, HashSet};

/// CUPTI vs `%globaltimer` agreement of the kernels of one run.
#[derive(Debug, Clone, Default)]
pub struct ClockCheck {
    pub kernels: usize,
    /// Median (CUPTI start − globaltimer start): the clock offset.
    pub offset_ns: i64,
    pub max_start_dev_ns: i64,
    pub max_end_dev_ns: i64,
    /// Share of kernels whose start and end both agree within 2 µs.
    pub within_2us: f64,
    /// Every kernel's worst deviation (ns), for aggregation.
    pub devs: Vec<i64>,
}

/// What a run measured about itself (not part of the bundle format).
#[derive(Debug, Clone, Default)]
pub struct RunStats {
    pub scenario: String,
    pub twin: bool,
    /// Kernels, copies, memsets and graph-node kernels the run issued.
    pub device_ops: usize,
    /// Of those, how many a CUPTI device record was bound to by correlation id.
    pub bound: usize,
    pub unbound: Vec<String>,
    pub api_ops: usize,
    pub api_bound: usize,
    pub clock: ClockCheck,
    /// Spin kernels of ≥ 100 µs: (requested ns, CUPTI duration ns).
    pub spin: Vec<(u64, u64)>,
    pub records: usize,
    /// CUPTI records not bound to any generator call (harness work), not kept.
    pub harness_records: usize,
    pub unknown_records: u64,
    pub cupti_dropped: u64,
    pub errors: Vec<String>,
    pub wall_ns: u64,
    /// The eBPF host collector's part of the run (None: not recorded).
    pub host: Option<super::host::HostStats>,
}

pub struct Output {
    pub builder: RunBuilder,
    pub keys: Keys,
    pub loss: LossAccounting,
    pub injections: Vec<InjectionRecord>,
    pub stats: RunStats,
    pub origin: Ns,
}

#[derive(Default, Clone, Copy)]
struct ThreadState {
    task: Option<NodeId>,
    prev: Option<NodeId>,
}

struct Builder<'a> {
    sc: &'a Scenario,
    log: &'a RunLog,
    plan: Option<&'a Plan>,
    rec: &'a cupti::Recorder,
    b: RunBuilder,
    keys: Keys,
    instrumented: bool,
    ops: HashMap<u64, &'a Op>,
    corrs: HashMap<u64, Vec<u32>>,
    by_corr: HashMap<u32, Vec<usize>>,
    tokens: HashMap<u32, Vec<u64>>,
    used: HashSet<usize>,
    threads: Vec<ThreadState>,
    requests: Vec<Option<NodeId>>,
    handoffs: HashMap<u64, NodeId>,
    faults: HashMap<usize, NodeId>,
    api_nodes: HashMap<u64, NodeId>,
    dev_nodes: HashMap<DevRef, NodeId>,
    loss: LossAccounting,
    injections: Vec<InjectionRecord>,
    stats: RunStats,
    clock_offset: Option<i64>,
    injected_devs: Vec<NodeId>,
}

pub fn build(
    sc: &Scenario,
    log: &RunLog,
    plan: Option<&Plan>,
    rec: &cupti::Recorder,
    keep_records: bool,
) -> Output {
    let raws = &log.flushed.records;
    let mut op_of_corr: HashMap<u32, u64> = HashMap::new();
    let mut tokens: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut by_corr: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, r) in raws.iter().enumerate() {
        match r {
            Raw::ExtCorr {
                ext_kind,
                ext_id,
                corr,
            } => {
                if *ext_kind == cupti::EXT_OP {
                    op_of_corr.insert(*corr, *ext_id);
                } else if *ext_kind == cupti::EXT_REQUEST {
                    tokens.entry(*corr).or_default().push(*ext_id);
                }
            }
            r => by_corr.entry(r.corr()).or_default().push(i),
        }
    }
    let mut corrs: HashMap<u64, Vec<u32>> = HashMap::new();
    for (&c, &op) in &op_of_corr {
        corrs.entry(op).or_default().push(c);
    }
    for v in corrs.values_mut() {
        v.sort_unstable();
    }
    let harness = raws
        .iter()
        .filter(|r| !matches!(r, Raw::ExtCorr { .. }) && !op_of_corr.contains_key(&r.corr()))
        .count();
    let ops: HashMap<u64, &Op> = log
        .threads
        .iter()
        .flat_map(|t| t.ops.iter())
        .map(|o| (o.id, o))
        .collect();
    let mut bld = Builder {
        sc,
        log,
        plan,
        rec,
        b: RunBuilder::new(keep_records),
        keys: HashMap::new(),
        instrumented: sc.mode == Mode::Instrumented,
        ops,
        corrs,
        by_corr,
        tokens,
        used: HashSet::new(),
        threads: vec![ThreadState::default(); log.threads.len()],
        requests: vec![None; log.requests.len()],
        handoffs: HashMap::new(),
        faults: HashMap::new(),
        api_nodes: HashMap::new(),
        dev_nodes: HashMap::new(),
        loss: LossAccounting {
            cupti_dropped: log.flushed.dropped,
            ..Default::default()
        },
        injections: Vec::new(),
        stats: RunStats {
            scenario: sc.name.clone(),
            harness_records: harness,
            unknown_records: log.flushed.unknown,
            cupti_dropped: log.flushed.dropped,
            errors: log.errors.clone(),
            wall_ns: log.end.saturating_sub(log.origin),
            ..Default::default()
        },
        clock_offset: None,
        injected_devs: Vec::new(),
    };
    bld.b.reserve(bld.ops.len() + log.requests.len() * 4);
    bld.clock_check();
    bld.replay();
    bld.leftovers();
    bld.finish_faults();
    bld.stats.records = bld.b.trace.len();
    Output {
        builder: bld.b,
        keys: bld.keys,
        loss: bld.loss,
        injections: bld.injections,
        stats: bld.stats,
        origin: log.origin,
    }
}

fn median(mut v: Vec<i64>) -> i64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

impl<'a> Builder<'a> {
    fn token(&self, request: Option<usize>) -> Option<String> {
        request.map(|r| self.log.requests[r].token.to_string())
    }

    /// Raw records bound to `op` (by its correlation ids), not yet consumed.
    fn raws_of(&self, op: u64) -> Vec<usize> {
        let mut v = Vec::new();
        if let Some(cs) = self.corrs.get(&op) {
            for c in cs {
                if let Some(ix) = self.by_corr.get(c) {
                    v.extend(ix.iter().copied());
                }
            }
        }
        v
    }

    fn raw(&self, i: usize) -> &'a Raw {
        &self.log.flushed.records[i]
    }

    fn kernel_records(&self, op: u64) -> Vec<usize> {
        self.raws_of(op)
            .into_iter()
            .filter(|&i| matches!(self.raw(i), Raw::Kernel { .. }))
            .collect()
    }

    /// CUPTI vs %globaltimer, offset-calibrated (kernels with a record and a log entry).
    fn clock_check(&mut self) {
        let mut pairs: Vec<(i64, i64)> = Vec::new();
        let entry = |slot: u32, id: u64| {
            self.log
                .device_log
                .get(slot as usize)
                .filter(|e| e.is_written_for(id))
                .copied()
        };
        let mut last_graph_launch: HashMap<usize, (Ns, u64)> = HashMap::new();
        for op in self.ops.values() {
            match &op.what {
                What::Kernel { .. } => {
                    let (Some(slot), Some(&k)) = (op.slot, self.kernel_records(op.id).first())
                    else {
                        continue;
                    };
                    if let (Raw::Kernel { start, end, .. }, Some(e)) =
                        (self.raw(k), entry(slot, op.id))
                    {
                        pairs.push((
                            *start as i64 - e.start_ns as i64,
                            *end as i64 - e.last_end_ns.max(e.end_ns) as i64,
                        ));
                    }
                }
                What::GraphLaunch { graph, .. } => {
                    let l = last_graph_launch.entry(*graph).or_insert((0, 0));
                    if op.t0 >= l.0 {
                        *l = (op.t0, op.id);
                    }
                }
                _ => {}
            }
        }
        // A graph's log slots hold its last replay only.
        for (&gi, &(_, op)) in &last_graph_launch {
            let recs = self.graph_assignment(gi, op);
            for (ni, r) in recs.into_iter().enumerate() {
                let Some(r) = r else { continue };
                let slot = self.log.graphs[gi].slots[ni];
                if let (Raw::Kernel { start, end, .. }, Some(e)) =
                    (self.raw(r), entry(slot, graph_op_id(gi, ni)))
                {
                    pairs.push((
                        *start as i64 - e.start_ns as i64,
                        *end as i64 - e.last_end_ns.max(e.end_ns) as i64,
                    ));
                }
            }
        }
        if pairs.is_empty() {
            return;
        }
        let off = median(pairs.iter().map(|p| p.0).collect());
        let devs: Vec<i64> = pairs
            .iter()
            .map(|&(s, e)| (s - off).abs().max((e - off).abs()))
            .collect();
        self.stats.clock = ClockCheck {
            kernels: pairs.len(),
            offset_ns: off,
            max_start_dev_ns: pairs.iter().map(|p| (p.0 - off).abs()).max().unwrap_or(0),
            max_end_dev_ns: pairs.iter().map(|p| (p.1 - off).abs()).max().unwrap_or(0),
            within_2us: devs.iter().filter(|&&d| d <= 2_000).count() as f64 / devs.len() as f64,
            devs,
        };
        self.clock_offset = Some(off);
    }

    /// The kernel record of each node of graph `gi` for launch `op`, matched
    /// by entry name (ties in start order, in declaration order).
    fn graph_assignment(&self, gi: usize, op: u64) -> Vec<Option<usize>> {
        let meta = &self.log.graphs[gi];
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for r in self.kernel_records(op) {
            if let Raw::Kernel { name, .. } = self.raw(r) {
                by_name.entry(name.as_str()).or_default().push(r);
            }
        }
        for v in by_name.values_mut() {
            v.sort_by_key(|&r| match self.raw(r) {
                Raw::Kernel { start, .. } => *start,
                _ => 0,
            });
            v.reverse();
        }
        meta.entries
            .iter()
            .map(|e| by_name.get_mut(e.as_str()).and_then(|v| v.pop()))
            .collect()
    }

    fn replay(&mut self) {
        #[derive(Clone, Copy)]
        enum E {
            Arrival(usize),
            Host(usize, usize),
        }
        let mut order: Vec<(Ns, usize, usize, E)> = Vec::new();
        for (i, a) in self.log.arrivals.iter().enumerate() {
            order.push((a.t, 0, i, E::Arrival(i)));
        }
        for (ti, t) in self.log.threads.iter().enumerate() {
            for (ei, ev) in t.events.iter().enumerate() {
                let at = match ev {
                    HostEv::TaskBegin { t, .. } | HostEv::Handoff { t, .. } => *t,
                    HostEv::Api { op, .. } => self.ops.get(op).map(|o| o.t0).unwrap_or(0),
                    HostEv::Stall { index } => self.log.stalls[*index].t0,
                    HostEv::Nvtx { t1, .. } => *t1,
                };
                order.push((at, ti + 1, ei, E::Host(ti, ei)));
            }
        }
        order.sort_by_key(|o| (o.0, o.1, o.2));
        for (_, _, _, e) in order {
            match e {
                E::Arrival(i) => self.arrival(i),
                E::Host(ti, ei) => {
                    let ev = self.log.threads[ti].events[ei].clone();
                    self.host_event(ti, ev);
                }
            }
        }
    }

    fn arrival(&mut self, i: usize) {
        let a = &self.log.arrivals[i];
        let r = &self.log.requests[a.request];
        let p = &self.sc.programs[r.program];
        let token = r.token.to_string().into();
        let name = format!("{}#{}", p.name, r.index);
        let node = self.b.request(name, token, a.tid, a.t, self.instrumented);
        self.requests[a.request] = Some(node);
    }

    fn host_event(&mut self, ti: usize, ev: HostEv) {
        let tid = self.log.threads[ti].tid;
        match ev {
            HostEv::TaskBegin {
                t,
                request,
                handoff,
                queue,
            } => {
                let token = self.token(Some(request)).unwrap_or_default();
                let handoff = handoff.and_then(|h| self.handoffs.get(&h).copied());
                let task = self.b.host_task(
                    &token,
                    tid,
                    queue,
                    t,
                    self.instrumented,
                    self.requests[request],
                    handoff,
                );
                self.threads[ti] = ThreadState {
                    task: Some(task),
                    prev: Some(task),
                };
            }
            HostEv::Handoff {
                t,
                id,
                queue,
                request,
                pending,
            } => {
                let token = self.token(Some(request)).unwrap_or_default();
                let (task, blocked_by) = (self.threads[ti].task, self.blocking_copy(pending));
                let h = self.b.handoff(
                    queue.into(),
                    token.into(),
                    tid,
                    t,
                    self.instrumented,
                    task,
                    blocked_by,
                );
                self.handoffs.insert(id, h);
                self.threads[ti] = ThreadState::default();
            }
            HostEv::Stall { index } => {
                let s = &self.log.stalls[index];
                let measured = (s.t1 - s.t0) as f64 / 1000.0;
                let fault_node = if s.kind == InjectionKind::HostDelay {
                    None
                } else {
                    let step = skey_step_id(self.sc, &s.skey);
                    let f = self.b.injected_fault(s.kind, s.tid, step, (s.t0, s.t1));
                    self.faults.insert(index, f);
                    Some(f)
                };
                self.injections.push(InjectionRecord {
                    kind: s.kind.as_str().into(),
                    mechanism: s.mechanism.clone(),
                    requested_us: s.requested_ns as f64 / 1000.0,
                    measured_us: measured,
                    fault_node,
                });
            }
            HostEv::Nvtx { name, t0, t1 } => {
                if self.instrumented {
                    self.b.record(None, |rid| Record::Nvtx {
                        rid,
                        tid,
                        name: name.into(),
                        start: t0,
                        end: t1,
                    });
                }
            }
            HostEv::Api { op, fault, pending } => {
                let Some(&o) = self.ops.get(&op) else { return };
                let injector = self.log.injector == Some(ti);
                let node = self.api_op(ti, o, injector);
                let fault = fault.and_then(|f| self.faults.get(&f).copied());
                let blocked_by = self.blocking_copy(pending);
                self.b.call_waited(node, fault, blocked_by);
            }
        }
    }

    /// The device node of a pageable copy whose call returned only after the
    /// copy finished (so the next host operation waited for it).
    fn blocking_copy(&self, pending: Option<u64>) -> Option<NodeId> {
        let op = pending?;
        let d = *self.dev_nodes.get(&DevRef { op, gnode: None })?;
        let a = *self.api_nodes.get(&op)?;
        let (dn, an) = (
            &self.b.truth.nodes[d as usize],
            &self.b.truth.nodes[a as usize],
        );
        (dn.end <= an.end + 2_000).then_some(d)
    }

    fn node_of(&self, r: &DevRef) -> Option<NodeId> {
        self.dev_nodes.get(r).copied()
    }

    fn end_of(&self, n: NodeId) -> Ns {
        self.b.truth.nodes[n as usize].end
    }

    /// When stream order and waits let `op`'s work start: its predecessors' completion.
    fn ready(&self, queued: Ns, prev: &[DevRef]) -> Ns {
        prev.iter()
            .filter_map(|p| self.node_of(p))
            .map(|n| self.end_of(n))
            .fold(queued, Ns::max)
    }

    /// The device nodes `op` follows on its stream (its `stream_order` predecessors).
    fn after(&self, prev: &[DevRef]) -> Vec<NodeId> {
        prev.iter().filter_map(|p| self.node_of(p)).collect()
    }

    /// What the recorder made of a bound record `rec` of `o` (lost when the
    /// plan drops the record of `key`).
    fn observed(
        &mut self,
        rec: Option<usize>,
        o: &Op,
        key: Option<&StepKey>,
    ) -> Observed<impl FnOnce(Rid) -> Record> {
        let Some(i) = rec else {
            return Observed::Nothing;
        };
        self.used.insert(i);
        if self.lost(key) {
            return Observed::Lost;
        }
        match self.convert(i, o) {
            Some(r) => Observed::Record(move |rid| with_rid(r, rid)),
            None => Observed::Nothing,
        }
    }

    fn lost(&self, k: Option<&StepKey>) -> bool {
        match (self.plan.and_then(|p| p.lose.as_ref()), k) {
            (Some(l), Some(k)) => l == k,
            _ => false,
        }
    }

    fn api_op(&mut self, ti: usize, o: &'a Op, injector: bool) -> NodeId {
        let raws = self.raws_of(o.id);
        let mut apis: Vec<usize> = raws
            .iter()
            .copied()
            .filter(|&i| matches!(self.raw(i), Raw::Api { .. }))
            .collect();
        apis.sort_by_key(|&i| match self.raw(i) {
            Raw::Api { start, .. } => *start,
            _ => 0,
        });
        let primary = apis.first().map(|&i| self.raw(i));
        let (start, end) = match primary {
            Some(Raw::Api { start, end, .. }) => (*start, *end),
            _ => (o.t0, o.t1),
        };
        self.stats.api_ops += 1;
        if primary.is_some() {
            self.stats.api_bound += 1;
        }
        let name = match primary {
            Some(Raw::Api { driver, cbid, .. }) => self.rec.api_name(*driver, *cbid),
            _ => expected_api(&o.what).to_string(),
        };
        let kind = match o.what {
            What::GraphLaunch { .. } => NodeKind::GraphLaunch,
            What::Sync { .. } => NodeKind::Synchronization,
            _ => NodeKind::ApiCall,
        };
        let step_id = o.skey.as_ref().and_then(|k| skey_step_id(self.sc, k));
        let on_stream = !matches!(o.what, What::Sync { .. });
        let info = NodeInfo {
            request: self.token(o.request).map(Into::into),
            step: step_id.clone(),
            thread: Some(o.tid),
            stream: on_stream.then_some(o.stream_cupti),
            call_site: o.call_site.clone().map(Into::into),
            operator: o.operator.clone().map(Into::into),
            generation: if on_stream { o.generation } else { 0 },
        };
        let prev = (!injector).then_some(&mut self.threads[ti].prev);
        let node = self.b.call(kind, name, info.clone(), (start, end), prev);
        self.api_nodes.insert(o.id, node);
        for &i in &apis {
            self.used.insert(i);
            if let Some(r) = self.convert(i, o) {
                self.b.record(Some(node), |rid| with_rid(r, rid));
            }
        }
        self.request_records(o.id);
        let queued_default = start;
        match &o.what {
            What::Kernel { .. } | What::Copy { .. } | What::Memset { .. } => {
                self.device_op(o, node, info, queued_default);
            }
            What::EventRecord { .. } => self.event_record(o, node, info, queued_default),
            What::StreamWait { .. } => self.stream_wait(o, node, info, queued_default),
            What::GraphLaunch { graph, .. } => {
                self.graph_launch(o, *graph, node, info, queued_default)
            }
            What::Sync { target } => self.sync(o, *target, node),
            What::Recreate => {}
        }
        if let Some(k) = &o.skey {
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
        node
    }

    /// External correlation records carrying the request token.
    fn request_records(&mut self, op: u64) {
        if !self.instrumented {
            return;
        }
        let cs = self.corrs.get(&op).cloned().unwrap_or_default();
        for c in cs {
            for id in self.tokens.get(&c).cloned().unwrap_or_default() {
                self.b.record(None, |rid| Record::ExternalCorrelation {
                    rid,
                    external_kind: "request".into(),
                    external_id: id,
                    correlation_id: c,
                });
            }
        }
    }

    fn fallback_times(&self, slot: Option<u32>, id: u64, api_end: Ns) -> (Ns, Ns) {
        let e = slot
            .and_then(|s| self.log.device_log.get(s as usize))
            .filter(|e| e.is_written_for(id));
        match (e, self.clock_offset) {
            (Some(e), Some(off)) => (
                (e.start_ns as i64 + off).max(0) as Ns,
                (e.last_end_ns.max(e.end_ns) as i64 + off).max(0) as Ns,
            ),
            _ => (api_end, api_end),
        }
    }

    fn device_op(&mut self, o: &'a Op, api: NodeId, info: NodeInfo, queued_default: Ns) {
        let raws = self.raws_of(o.id);
        let rec = raws.iter().copied().find(|&i| {
            matches!(
                (self.raw(i), &o.what),
                (Raw::Kernel { .. }, What::Kernel { .. })
                    | (Raw::Memcpy { .. }, What::Copy { .. })
                    | (Raw::Memset { .. }, What::Memset { .. })
            )
        });
        self.stats.device_ops += 1;
        if rec.is_some() {
            self.stats.bound += 1;
        } else if self.stats.unbound.len() < 20 {
            self.stats.unbound.push(format!(
                "op {} ({}) on thread {}{}",
                o.id,
                expected_api(&o.what),
                o.tid,
                o.error
                    .as_ref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ));
        }
        let api_end = self.b.truth.nodes[api as usize].end;
        let (q, sub, st, en) = match rec.map(|i| self.raw(i)) {
            Some(Raw::Kernel {
                queued,
                submitted,
                start,
                end,
                ..
            }) => (*queued, *submitted, *start, *end),
            Some(Raw::Memcpy { start, end, .. }) | Some(Raw::Memset { start, end, .. }) => {
                (0, 0, *start, *end)
            }
            _ => {
                let (s, e) = self.fallback_times(o.slot, o.id, api_end);
                (0, 0, s, e)
            }
        };
        let queued = if q > 0 { q } else { queued_default };
        let ready = self.ready(queued, o.prev.as_slice());
        let submitted = if sub > 0 {
            sub
        } else {
            ready.min(st.max(queued))
        };
        let (kind, name) = match &o.what {
            What::Kernel { name, .. } => (NodeKind::Kernel, name.to_string()),
            What::Copy { direction, .. } => (
                NodeKind::Memcpy,
                format!("memcpy {direction:?}").to_lowercase(),
            ),
            _ => (NodeKind::Memset, "memset".to_string()),
        };
        let after = self.after(o.prev.as_slice());
        let dev = self.b.device_op(DeviceOp {
            kind,
            name: name.into(),
            info,
            times: DeviceTimes {
                queued,
                submitted,
                start: st,
                end: en,
            },
            launch: api,
            after: &after,
            waited_record: None,
        });
        self.dev_nodes.insert(
            DevRef {
                op: o.id,
                gnode: None,
            },
            dev,
        );
        if o.injected && o.delays_target {
            self.injected_devs.push(dev);
        }
        if let (
            Some(_),
            What::Kernel {
                kind: KernelKind::Spin,
                dur_ns,
                ..
            },
        ) = (&o.skey, &o.what)
        {
            if *dur_ns >= 100_000 && rec.is_some() {
                self.stats.spin.push((*dur_ns, en.saturating_sub(st)));
            }
        }
        if let Some(k) = &o.skey {
            crate::keys::remember(&mut self.keys, self.sc, k, dev);
            self.stretch_record(k, st, en);
        }
        let observed = self.observed(rec, o, o.skey.as_ref());
        self.b.observe(dev, observed, &mut self.loss);
    }

    /// Injection record of a lengthened target: the measured extra duration.
    fn stretch_record(&mut self, k: &StepKey, st: Ns, en: Ns) {
        let Some(p) = self.plan else { return };
        let Some((sk, _)) = &p.stretch else { return };
        if sk != k {
            return;
        }
        let measured = match p.twin_target_ns {
            Some(t) => (en.saturating_sub(st) as f64 - t as f64) / 1000.0,
            None => p.magnitude_ns as f64 / 1000.0,
        };
        self.injections.push(InjectionRecord {
            kind: p.kind.as_str().into(),
            mechanism: p.mechanism.clone(),
            requested_us: p.magnitude_ns as f64 / 1000.0,
            measured_us: measured,
            fault_node: None,
        });
    }

    fn event_record(&mut self, o: &'a Op, api: NodeId, info: NodeInfo, queued: Ns) {
        let raws = self.raws_of(o.id);
        let rec = raws
            .iter()
            .copied()
            .find(|&i| matches!(self.raw(i), Raw::CudaEvent { .. }));
        let ready = self.ready(queued, o.prev.as_slice());
        let ts = match rec.map(|i| self.raw(i)) {
            Some(Raw::CudaEvent { ts, .. }) => *ts,
            _ => 0,
        };
        // The device timestamp, when CUPTI gave one in the host clock domain.
        let ts_ok = ts > 0 && ts + 1_000_000 >= queued && ts <= self.log.end + 10_000_000_000;
        let done = if ts_ok { ts.max(queued) } else { ready };
        let after = self.after(o.prev.as_slice());
        let dev = self.b.device_op(DeviceOp {
            kind: NodeKind::EventRecord,
            name: "event record".into(),
            info,
            times: DeviceTimes::instant(queued, done),
            launch: api,
            after: &after,
            waited_record: None,
        });
        self.dev_nodes.insert(
            DevRef {
                op: o.id,
                gnode: None,
            },
            dev,
        );
        if let Some(k) = &o.skey {
            crate::keys::remember(&mut self.keys, self.sc, k, dev);
        }
        let record = rec.and_then(|i| {
            self.used.insert(i);
            self.convert(i, o)
        });
        let observed = match record {
            Some(mut r) => {
                // A timestamp outside the host clock domain is "not provided".
                if let (false, Record::CudaEvent { ts, .. }) = (ts_ok, &mut r) {
                    *ts = 0;
                }
                Observed::Record(move |rid| with_rid(r, rid))
            }
            None => Observed::Nothing,
        };
        self.b.observe(dev, observed, &mut self.loss);
    }

    fn stream_wait(&mut self, o: &'a Op, api: NodeId, info: NodeInfo, queued: Ns) {
        let raws = self.raws_of(o.id);
        let rec = raws.iter().copied().find(|&i| {
            matches!(self.raw(i), Raw::Sync { sync_type, .. } if *sync_type == SYNC_STREAM_WAIT_EVENT)
        });
        let start = self.ready(queued, o.prev.as_slice());
        let src = o
            .event_src
            .and_then(|e| self.node_of(&DevRef { op: e, gnode: None }));
        let end = self.b.wait_end(start, src);
        let after = self.after(o.prev.as_slice());
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
        self.dev_nodes.insert(
            DevRef {
                op: o.id,
                gnode: None,
            },
            dev,
        );
        if let Some(k) = &o.skey {
            crate::keys::remember(&mut self.keys, self.sc, k, dev);
        }
        let observed = self.observed(rec, o, None);
        self.b.observe(dev, observed, &mut self.loss);
    }

    fn graph_launch(&mut self, o: &'a Op, gi: usize, api: NodeId, info: NodeInfo, queued: Ns) {
        let decl = &self.sc.graphs[gi];
        let assigned = self.graph_assignment(gi, o.id);
        let base = self.ready(queued, o.prev.as_slice());
        let skey = o.skey.clone();
        let step_id = skey.as_ref().and_then(|k| skey_step_id(self.sc, k));
        let mut ids: Vec<NodeId> = Vec::new();
        for (ni, n) in decl.nodes.iter().enumerate() {
            let nkey = skey.as_ref().map(|k| StepKey {
                graph_node: Some(n.id.clone()),
                ..k.clone()
            });
            let deps: Vec<NodeId> = n
                .after
                .iter()
                .filter_map(|a| decl.nodes.iter().position(|m| &m.id == a))
                .filter_map(|j| ids.get(j).copied())
                .collect();
            let ready = self.b.graph_ready(base, &deps);
            let rec = assigned.get(ni).copied().flatten();
            self.stats.device_ops += 1;
            let (st, en) = match rec.map(|i| self.raw(i)) {
                Some(Raw::Kernel { start, end, .. }) => {
                    self.stats.bound += 1;
                    (*start, *end)
                }
                _ => {
                    if self.stats.unbound.len() < 20 {
                        self.stats.unbound.push(format!(
                            "graph {} node {} of launch op {}",
                            decl.name, n.id, o.id
                        ));
                    }
                    let slot = self.log.graphs[gi].slots[ni];
                    self.fallback_times(Some(slot), graph_op_id(gi, ni), ready)
                }
            };
            let mut inf = info.clone();
            inf.step = Some(format!("{}/{}", step_id.clone().unwrap_or_default(), n.id).into());
            let after = if n.after.is_empty() {
                self.after(o.prev.as_slice())
            } else {
                Vec::new()
            };
            let op = DeviceOp {
                kind: NodeKind::GraphNode,
                name: n.kernel.name.as_str().into(),
                info: inf,
                times: DeviceTimes {
                    queued,
                    submitted: ready.min(st.max(queued)),
                    start: st,
                    end: en,
                },
                launch: api,
                after: &after,
                waited_record: None,
            };
            let dev = self.b.graph_node(op, &deps);
            ids.push(dev);
            self.dev_nodes.insert(
                DevRef {
                    op: o.id,
                    gnode: Some(ni as u32),
                },
                dev,
            );
            if let Some(k) = &nkey {
                if step_id.is_some() {
                    self.keys.insert(k.clone(), dev);
                }
                self.stretch_record(k, st, en);
            }
            let observed = self.observed(rec, o, nkey.as_ref());
            self.b.observe(dev, observed, &mut self.loss);
        }
    }

    fn sync(&mut self, o: &'a Op, target: SyncTarget, node: NodeId) {
        let raws = self.raws_of(o.id);
        let want = match target {
            SyncTarget::Stream => SYNC_STREAM_SYNCHRONIZE,
            SyncTarget::Event => SYNC_EVENT_SYNCHRONIZE,
            SyncTarget::Device => SYNC_CONTEXT_SYNCHRONIZE,
        };
        let rec = raws
            .iter()
            .copied()
            .find(|&i| matches!(self.raw(i), Raw::Sync { sync_type, .. } if *sync_type == want));
        let waited = self.after(&o.waited);
        self.b.sync_waits(node, &waited);
        if let Some(i) = rec {
            self.used.insert(i);
            if let Some(r) = self.convert(i, o) {
                self.b.record(Some(node), |rid| with_rid(r, rid));
            }
        }
    }

    /// Bound records no node consumed (e.g. the calls of a recreate step):
    /// kept in the trace, owned by no node.
    fn leftovers(&mut self) {
        let mut ops: Vec<&Op> = self.ops.values().copied().collect();
        ops.sort_by_key(|o| o.id);
        for o in ops {
            if matches!(o.what, What::Recreate) {
                self.request_records(o.id);
            }
            for i in self.raws_of(o.id) {
                if self.used.contains(&i) {
                    continue;
                }
                self.used.insert(i);
                let r = self.convert(i, o);
                if let Some(r) = r {
                    self.b.record(None, |rid| with_rid(r, rid));
                }
            }
        }
    }

    /// A bound CUPTI record as a trace record (rid 0), with what the op knows
    /// and CUPTI does not (the raw event handle, the copy it asked for).
    fn convert(&self, i: usize, o: &Op) -> Option<Record> {
        let copy = match &o.what {
            What::Copy {
                direction, memory, ..
            } => (*direction, *memory),
            _ => CallFacts::default().copy,
        };
        let facts = CallFacts {
            event_handle: o.handle,
            copy,
        };
        recorder_cupti::to_record(self.raw(i), &facts, self.rec)
    }

    /// The injection record of device-side work and its `fault` edge
    /// (`record::faults`, the same rule as the simulator's).
    fn finish_faults(&mut self) {
        let Some(plan) = self.plan else { return };
        let injected = std::mem::take(&mut self.injected_devs);
        if let Some(record) = finish_plan(&mut self.b, plan, &self.keys, &injected) {
            self.injections.push(record);
        }
    }
}

fn with_rid(mut r: Record, rid: u64) -> Record {
    *r.rid_mut() = rid;
    r
}

/// The driver entry point an op calls (names an API node whose record was lost).
fn expected_api(w: &What) -> &'static str {
    match w {
        What::Kernel {
            launch: ground_truth::scenario::LaunchApi::DriverEx,
            ..
        } => "cuLaunchKernelEx",
        What::Kernel { .. } => "cuLaunchKernel",
        What::Copy { direction, .. } => match direction {
            CopyDirection::H2d => "cuMemcpyHtoDAsync_v2",
            CopyDirection::D2h => "cuMemcpyDtoHAsync_v2",
            CopyDirection::D2d => "cuMemcpyDtoDAsync_v2",
        },
        What::Memset { .. } => "cuMemsetD8Async",
        What::EventRecord { .. } => "cuEventRecord",
        What::StreamWait { .. } => "cuStreamWaitEvent",
        What::GraphLaunch { .. } => "cuGraphLaunch",
        What::Sync {
            target: SyncTarget::Stream,
        } => "cuStreamSynchronize",
        What::Sync {
            target: SyncTarget::Event,
        } => "cuEventSynchronize",
        What::Sync {
            target: SyncTarget::Device,
        } => "cuCtxSynchronize",
        What::Recreate => "recreate",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::exec::{Arrival, GraphMeta, ReqInfo, Tail, ThreadLog};
    use ground_truth::graph::EdgeType;
    use ground_truth::scenario::LaunchApi;

    const SCENARIO: &str = r#"
schema_version: 1
name: t.event-edge
family: t
variant: event-edge
cause: event_wait
mode: instrumented
threads: [{name: host}]
streams: [{name: s1}, {name: s2}]
events: [{name: ready}]
programs:
  - name: serve
    start: host
    steps:
      - {op: kernel, id: producer, stream: s1, name: producer, duration_us: 2000}
      - {op: event_record, event: ready, stream: s1}
      - {op: stream_wait, stream: s2, event: ready}
      - {op: kernel, id: consumer, stream: s2, name: consumer, duration_us: 300, grid: 64}
      - {op: sync, target: device}
symptom: {step: consumer}
"#;

    fn op(id: u64, step: usize, what: What, t0: Ns, stream: Option<usize>, prev: Vec<u64>) -> Op {
        Op {
            id,
            thread: 0,
            tid: 77,
            request: Some(0),
            skey: Some(StepKey {
                program: 0,
                request: 0,
                step,
                graph_node: None,
                api: false,
            }),
            what,
            t0,
            t1: t0 + 5_000,
            stream,
            stream_cupti: stream.map(|s| 13 + s as u32).unwrap_or(0),
            handle: 0xE0,
            generation: 0,
            prev: Tail::from_vec(
                prev.into_iter()
                    .map(|op| DevRef { op, gnode: None })
                    .collect(),
            ),
            event_src: None,
            waited: Vec::new(),
            operator: None,
            call_site: None,
            slot: None,
            entry: None,
            injected: false,
            delays_target: false,
            error: None,
        }
    }

    fn kernel(name: &str, dur: u64) -> What {
        What::Kernel {
            name: std::sync::Arc::from(name),
            kind: KernelKind::Spin,
            dur_ns: dur,
            extra_ns: 0,
            grid: 64,
            block: 128,
            launch: LaunchApi::Runtime,
            kernel: kernels::Kernel::Spin,
        }
    }

    fn api(corr: u32, cbid: u32, start: Ns) -> Raw {
        Raw::Api {
            driver: true,
            cbid,
            start,
            end: start + 4_000,
            tid: 77,
            corr,
        }
    }

    fn kernel_rec(corr: u32, name: &str, stream: u32, q: Ns, s: Ns, st: Ns, en: Ns) -> Raw {
        Raw::Kernel {
            name: name.into(),
            device: 0,
            context: 1,
            stream,
            corr,
            graph_id: 0,
            graph_node_id: 0,
            queued: q,
            submitted: s,
            start: st,
            end: en,
            grid: [64, 1, 1],
            block: [128, 1, 1],
            channel: 3,
        }
    }

    #[test]
    fn event_edge_run_gets_the_simulators_graph() {
        let sc: Scenario =
            ground_truth::io::from_yaml(std::path::Path::new("t.yaml"), SCENARIO.as_bytes())
                .unwrap();
        assert!(sc.check().is_empty(), "{:?}", sc.check());
        let mut ops = vec![
            op(
                1,
                0,
                kernel("producer", 2_000_000),
                100_000,
                Some(0),
                vec![],
            ),
            op(
                2,
                1,
                What::EventRecord { event: 0 },
                110_000,
                Some(0),
                vec![1],
            ),
            op(
                3,
                2,
                What::StreamWait { event: 0 },
                120_000,
                Some(1),
                vec![],
            ),
            op(4, 3, kernel("consumer", 300_000), 130_000, Some(1), vec![3]),
            op(
                5,
                4,
                What::Sync {
                    target: SyncTarget::Device,
                },
                140_000,
                None,
                vec![],
            ),
        ];
        ops[2].event_src = Some(2);
        ops[4].waited = vec![DevRef { op: 2, gnode: None }, DevRef { op: 4, gnode: None }];
        let events = vec![
            HostEv::TaskBegin {
                t: 90_000,
                request: 0,
                handoff: None,
                queue: String::new(),
            },
            HostEv::Api {
                op: 1,
                fault: None,
                pending: None,
            },
            HostEv::Api {
                op: 2,
                fault: None,
                pending: None,
            },
            HostEv::Api {
                op: 3,
                fault: None,
                pending: None,
            },
            HostEv::Api {
                op: 4,
                fault: None,
                pending: None,
            },
            HostEv::Api {
                op: 5,
                fault: None,
                pending: None,
            },
        ];
        let mut records = Vec::new();
        for (i, cb) in [(1u32, 307u32), (2, 0x3A), (3, 0x3B), (4, 307), (5, 0x1B)] {
            let corr = 100 + i;
            records.push(Raw::ExtCorr {
                ext_kind: cupti::EXT_OP,
                ext_id: i as u64,
                corr,
            });
            records.push(Raw::ExtCorr {
                ext_kind: cupti::EXT_REQUEST,
                ext_id: 1,
                corr,
            });
            records.push(api(corr, cb, 100_000 + 10_000 * (i as u64 - 1)));
        }
        records.push(Raw::ExtCorr {
            ext_kind: cupti::EXT_OP,
            ext_id: 999,
            corr: 7,
        });
        records.push(api(7, 1, 1)); // harness call bound to an op id nobody made: dropped
        records.push(kernel_rec(
            101, "producer", 13, 101_000, 101_500, 103_000, 2_103_000,
        ));
        records.push(Raw::CudaEvent {
            corr: 102,
            stream: 13,
            event_id: 1,
            ts: 2_103_500,
            sync_id: 5,
        });
        records.push(Raw::Sync {
            sync_type: 2,
            start: 120_000,
            end: 124_000,
            corr: 103,
            stream: 14,
            event_id: 1,
            sync_id: 5,
        });
        records.push(kernel_rec(
            104, "consumer", 14, 131_000, 2_103_600, 2_105_000, 2_405_000,
        ));
        records.push(Raw::Sync {
            sync_type: 4,
            start: 140_000,
            end: 2_406_000,
            corr: 105,
            stream: 0,
            event_id: 0,
            sync_id: 0,
        });
        records.push(api(55, 1, 1)); // unbound harness record
        let log = RunLog {
            origin: 50_000,
            arrivals: vec![Arrival {
                request: 0,
                t: 80_000,
                tid: 77,
            }],
            threads: vec![ThreadLog {
                tid: 77,
                events,
                ops,
                ..Default::default()
            }],
            requests: vec![ReqInfo {
                program: 0,
                index: 0,
                token: 1,
                at_rel: 0,
            }],
            graphs: Vec::<GraphMeta>::new(),
            stalls: vec![],
            errors: vec![],
            injector: None,
            device_log: vec![],
            flushed: cupti::Flushed {
                records,
                dropped: 0,
                unknown: 0,
            },
            end: 3_000_000,
        };
        let rec = cupti::Recorder::offline(&[(true, 307, "cuLaunchKernel")]);
        let out = build(&sc, &log, None, &rec, true);
        assert_eq!(out.stats.device_ops, 2);
        assert_eq!(out.stats.bound, 2);
        assert_eq!(out.stats.harness_records, 1);
        let t = &out.builder.truth;
        let kinds: Vec<NodeKind> = t.nodes.iter().map(|n| n.kind).collect();
        assert_eq!(
            kinds,
            vec![
                NodeKind::Request,
                NodeKind::HostTask,
                NodeKind::ApiCall,
                NodeKind::Kernel,
                NodeKind::ApiCall,
                NodeKind::EventRecord,
                NodeKind::ApiCall,
                NodeKind::StreamWait,
                NodeKind::ApiCall,
                NodeKind::Kernel,
                NodeKind::Synchronization,
            ]
        );
        let has = |s: usize, d: usize, k: EdgeType| {
            t.edges
                .iter()
                .any(|e| e.src == s as u32 && e.dst == d as u32 && e.kind == k)
        };
        assert!(has(0, 1, EdgeType::Request));
        assert!(has(1, 2, EdgeType::HostOrder));
        assert!(has(2, 3, EdgeType::Launch));
        assert!(has(3, 5, EdgeType::StreamOrder));
        assert!(has(5, 7, EdgeType::Event));
        assert!(has(7, 9, EdgeType::StreamOrder));
        assert!(has(9, 10, EdgeType::Sync));
        assert!(has(8, 10, EdgeType::HostOrder));
        // The wait is satisfied when the record completes; the consumer follows.
        assert_eq!(t.nodes[7].end, 2_103_500);
        assert_eq!(t.nodes[9].submitted, 2_103_600);
        assert_eq!(t.nodes[2].name, "cuLaunchKernel");
        assert_eq!(t.nodes[3].stream, Some(13));
        let consumer = out.keys[&StepKey {
            program: 0,
            request: 0,
            step: 3,
            graph_node: None,
            api: false,
        }];
        assert_eq!(consumer, 9);
        let path = t.critical_path(consumer);
        assert_eq!(path, vec![0, 1, 2, 3, 5, 7, 9]);
        // Records: marker ×2, api ×5, ext ×5, kernel ×2, event, sync ×2.
        let count = |k: &str| {
            out.builder
                .trace
                .iter()
                .filter(|r| r.kind_name() == k)
                .count()
        };
        assert_eq!(count("marker"), 2);
        assert_eq!(count("api"), 5);
        assert_eq!(count("external_correlation"), 5);
        assert_eq!(count("kernel"), 2);
        assert_eq!(count("cuda_event"), 1);
        assert_eq!(count("sync"), 2);
        let (truth, trace) = out.builder.finish(7);
        let sym = crate::answers::symptom(
            &sc,
            &truth,
            &trace,
            consumer,
            &truth.nodes[consumer as usize].clone(),
        )
        .unwrap();
        assert_eq!(sym.lateness_ns, 0.0);
        assert_eq!(sym.critical_path, path);
    }
}
