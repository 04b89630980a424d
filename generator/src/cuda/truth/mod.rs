//! Builds the ground truth and the trace of one real run from what the
//! executor knows by construction (which call created which op on which
//! stream, which record each wait targeted, graph dependencies, handoffs) and
//! what CUPTI measured, bound by correlation id: every generator call carried
//! a recorder-private external correlation id (CUSTOM0 = op id), so each CUPTI
//! API record, and through its correlation id each device record, belongs to
//! exactly one op. Node kinds, edges and rid ownership come from the one
//! recording path (`crate::record`, docs/records.md) the simulator records
//! through too, so both backends mean the same thing.

mod binding;
mod clock;
mod device;

use super::cupti::{self, Raw};
use super::exec::{graph_op_id, DevRef, HostEv, Op, RunLog, What};
use super::plan::Plan;
use crate::keys::{skey_step_id, Keys, StepKey};
use crate::record::contention::contention_edges;
use crate::record::faults::{finish_plan, FAULT_END_TOLERANCE_NS};
use crate::record::steps::Observed;
use crate::record::{DeviceOp, DeviceTimes, NodeInfo, Pickup, RunBuilder};
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
                thread_free,
                pending,
                request,
                handoff,
                queue,
            } => {
                let token = self.token(Some(request)).unwrap_or_default();
                let handoff = handoff.and_then(|h| self.handoffs.get(&h).copied());
                // The work was ready when it was pushed, or when the request arrived.
                let ready = handoff
                    .or(self.requests[request])
                    .map(|n| self.b.truth.nodes[n as usize].start);
                let blocked_by = self.blocking_copy(pending);
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
                    self.requests[request],
                    handoff,
                    pickup,
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
                fault,
            } => {
                let token = self.token(Some(request)).unwrap_or_default();
                let (task, blocked_by) = (self.threads[ti].task, self.blocking_copy(pending));
                let fault = fault.and_then(|f| self.faults.get(&f).copied());
                let prev = self.threads[ti].prev;
                let h = self.b.handoff(
                    queue.into(),
                    token.into(),
                    tid,
                    t,
                    self.instrumented,
                    task,
                    prev,
                    blocked_by,
                );
                self.b.call_waited(h, fault, None);
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
                    off_cpu_us: s.switched_out_ns.map(|ns| ns as f64 / 1000.0),
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
    /// copy finished, so the next host operation waited for it (its end is
    /// stamped no later than the return, within the device clock's
    /// granularity, `record::faults::FAULT_END_TOLERANCE_NS`).
    fn blocking_copy(&self, pending: Option<u64>) -> Option<NodeId> {
        let op = pending?;
        let d = *self.dev_nodes.get(&DevRef { op, gnode: None })?;
        let a = *self.api_nodes.get(&op)?;
        let (dn, an) = (
            &self.b.truth.nodes[d as usize],
            &self.b.truth.nodes[a as usize],
        );
        (dn.end <= an.end + FAULT_END_TOLERANCE_NS).then_some(d)
    }

    fn node_of(&self, r: &DevRef) -> Option<NodeId> {
        self.dev_nodes.get(r).copied()
    }

    fn end_of(&self, n: NodeId) -> Ns {
        self.b.truth.nodes[n as usize].end
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

    /// The injection record of device-side work and its `fault` edge
    /// (`record::faults`, the same rule as the simulator's).
    /// Then the contention of all other work (`record::contention`, the same rule too).
    fn finish_faults(&mut self) {
        if let Some(plan) = self.plan {
            let injected = std::mem::take(&mut self.injected_devs);
            if let Some(record) = finish_plan(&mut self.b, plan, &self.keys, &injected) {
                self.injections.push(record);
            }
        }
        contention_edges(&mut self.b);
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
mod tests;
