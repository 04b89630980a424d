//! The one truth builder: a backend-neutral step log ([`super::log`]) turned
//! into the ground truth through the per-step rules ([`super::steps`]), for
//! every backend that executes scenarios outside the simulator. It orders the
//! host events, makes each request, task, handoff, call, stall and device op
//! its node, carries a blocking copy into the thread's next operation and an
//! injected stall into the call or push it delayed, replays graph launches,
//! and attributes injected work (`record::faults`, `record::contention`).
//!
//! What a backend measured is its own: an [`Observer`] gives each call's name
//! and span and each device op's times, and adds the records its collectors
//! made (CUPTI's, bound by correlation id; Kineto's events) to the nodes they
//! observe.

use super::contention::{contention_edges, memcpy_node_name};
use super::faults::{finish_plan, stretch_injection, FAULT_END_TOLERANCE_NS};
use super::log::{DevRef, HostEvent, Item, Op, OpKind, StepLog};
use super::{DeviceOp, DeviceTimes, NodeInfo, Pickup, RunBuilder};
use crate::keys::{remember, skey_step_id, Keys, StepKey};
use crate::plan::Plan;
use ground_truth::graph::{InjectionRecord, NodeId, NodeKind};
use ground_truth::scenario::Scenario;
use ground_truth::trace::Record;
use ground_truth::{Mode, Ns};
use std::collections::HashMap;

/// How a backend measured a kernel, copy or memset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measured {
    /// A collector's times (or the backend's own fallback for a lost record):
    /// queued and submitted where it gave them, else from the call and from
    /// stream order.
    Recorded {
        queued: Option<Ns>,
        submitted: Option<Ns>,
        start: Ns,
        end: Ns,
    },
    /// The work's own time stamps (0: missing): work without a start, or
    /// ending before it started, is placed where stream order let it start.
    SelfTimed { start: Ns, end: Ns },
}

/// A backend's measurements and records of the ops of a [`StepLog`]. Every
/// method gets the neutral op; the backend finds its own by `op.id`.
pub trait Observer {
    /// The call's node name and its (start, end): its recorded call where
    /// the collector has one, else the executor's measurement.
    fn call(&mut self, op: &Op) -> (String, (Ns, Ns));
    /// The records of the call, owned by its node `call` (or by none).
    fn call_records(&mut self, b: &mut RunBuilder, op: &Op, call: NodeId);
    /// The times of a kernel, copy or memset whose call ended at `call_end`.
    fn device_times(&mut self, op: &Op, call_end: Ns) -> Measured;
    /// The records of the device node `dev` of a kernel, copy or memset.
    fn device_records(&mut self, b: &mut RunBuilder, op: &Op, dev: NodeId);
    /// When the stream reached an event record queued at `queued` (`None`:
    /// not measured; it completed when stream order let it).
    fn event_reached(&mut self, op: &Op, queued: Ns) -> Option<Ns>;
    /// The records of the event record's device node `dev`.
    fn event_records(&mut self, b: &mut RunBuilder, op: &Op, dev: NodeId, queued: Ns);
    /// The records of the stream wait's device node `dev`.
    fn wait_records(&mut self, b: &mut RunBuilder, op: &Op, dev: NodeId);
    /// The (start, end) of node `node` of graph `graph` in the launch `op`,
    /// the graph's `replay`-th; `ready` is when the node could start.
    fn graph_node_times(
        &mut self,
        op: &Op,
        graph: usize,
        node: usize,
        replay: usize,
        ready: Ns,
    ) -> (Ns, Ns);
    /// The records of that graph node's device node `dev` (step key `key`).
    fn graph_node_records(
        &mut self,
        b: &mut RunBuilder,
        op: &Op,
        node: usize,
        dev: NodeId,
        key: Option<&StepKey>,
    );
    /// The records of a synchronization's node `call`.
    fn sync_records(&mut self, b: &mut RunBuilder, op: &Op, call: NodeId);
    /// Records no node owns, added once every event is built.
    fn leftover_records(&mut self, _b: &mut RunBuilder) {}
}

/// The truth of one run.
pub struct Truth {
    pub builder: RunBuilder,
    pub keys: Keys,
    pub injections: Vec<InjectionRecord>,
}

/// Builds the truth of `log` (injected by `plan`), with `observer`'s times
/// and records; records are kept when `keep_records`.
pub fn build(
    sc: &Scenario,
    log: &StepLog,
    plan: Option<&Plan>,
    observer: &mut dyn Observer,
    keep_records: bool,
) -> Truth {
    let mut b = RunBuilder::new(keep_records);
    b.declare_queues(&sc.queues);
    b.reserve(log.ops.len() + log.requests.len() * 4);
    let mut run = Run {
        sc,
        log,
        plan,
        observer,
        b,
        keys: HashMap::new(),
        instrumented: sc.mode == Mode::Instrumented,
        ops: log.ops.iter().map(|o| (o.id, o)).collect(),
        threads: vec![ThreadState::default(); log.threads.len()],
        requests: vec![None; log.requests.len()],
        handoffs: HashMap::new(),
        faults: HashMap::new(),
        api_nodes: HashMap::new(),
        dev_nodes: HashMap::new(),
        replays: vec![0; sc.graphs.len()],
        injections: Vec::new(),
        injected_devs: Vec::new(),
    };
    for item in log.build_order() {
        match item {
            Item::Arrival(i) => run.arrival(i),
            Item::Host(ti, ei) => run.host_event(ti, &log.threads[ti].events[ei]),
        }
    }
    run.observer.leftover_records(&mut run.b);
    if let Some(plan) = plan {
        let injected = std::mem::take(&mut run.injected_devs);
        if let Some(record) = finish_plan(&mut run.b, plan, &run.keys, &injected) {
            run.injections.push(record);
        }
    }
    contention_edges(&mut run.b);
    Truth {
        builder: run.b,
        keys: run.keys,
        injections: run.injections,
    }
}

/// A host thread's current task and its previous host operation.
#[derive(Default, Clone, Copy)]
struct ThreadState {
    task: Option<NodeId>,
    prev: Option<NodeId>,
}

struct Run<'a, 'o> {
    sc: &'a Scenario,
    log: &'a StepLog,
    plan: Option<&'a Plan>,
    observer: &'o mut dyn Observer,
    b: RunBuilder,
    keys: Keys,
    instrumented: bool,
    ops: HashMap<u64, &'a Op>,
    threads: Vec<ThreadState>,
    requests: Vec<Option<NodeId>>,
    handoffs: HashMap<u64, NodeId>,
    /// Stall index → its injected fault node.
    faults: HashMap<usize, NodeId>,
    api_nodes: HashMap<u64, NodeId>,
    dev_nodes: HashMap<DevRef, NodeId>,
    /// Per graph: its replays so far.
    replays: Vec<usize>,
    injections: Vec<InjectionRecord>,
    injected_devs: Vec<NodeId>,
}

impl<'a> Run<'a, '_> {
    fn token(&self, request: Option<usize>) -> Option<String> {
        request.map(|r| self.log.requests[r].token.to_string())
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
        let token = r.token.to_string().into();
        let node = self.b.request(name, token, a.tid, a.t, self.instrumented);
        self.requests[a.request] = Some(node);
    }

    fn host_event(&mut self, ti: usize, ev: &'a HostEvent) {
        let tid = self.log.threads[ti].tid;
        match ev {
            HostEvent::TaskBegin {
                t,
                thread_free,
                pending,
                request,
                handoff,
                queue,
            } => {
                let token = self.token(Some(*request)).unwrap_or_default();
                let handoff = handoff.and_then(|h| self.handoffs.get(&h).copied());
                let req = self.requests.get(*request).copied().flatten();
                // The work was ready when it was pushed, or when the request arrived.
                let ready = handoff
                    .or(req)
                    .map(|n| self.b.truth.nodes[n as usize].start);
                let blocked_by = self.blocking_copy(*pending);
                let pickup = ready.map(|ready| Pickup {
                    ready,
                    thread_free: *thread_free,
                    blocked_by,
                });
                let task = self.b.host_task(
                    &token,
                    tid,
                    queue.as_str(),
                    *t,
                    self.instrumented,
                    req,
                    handoff,
                    pickup,
                );
                self.threads[ti] = ThreadState {
                    task: Some(task),
                    prev: Some(task),
                };
            }
            HostEvent::Handoff {
                t,
                ready,
                id,
                queue,
                request,
                pending,
                fault,
            } => {
                let token = self.token(Some(*request)).unwrap_or_default();
                let blocked_by = self.blocking_copy(*pending);
                let fault = fault.and_then(|f| self.faults.get(&f).copied());
                let ThreadState { task, prev } = self.threads[ti];
                let h = self.b.handoff(
                    queue.as_str().into(),
                    token.into(),
                    tid,
                    (*ready, *t),
                    self.instrumented,
                    task,
                    prev,
                    blocked_by,
                );
                self.b.call_waited(h, fault, None);
                self.handoffs.insert(*id, h);
                self.threads[ti] = ThreadState::default();
            }
            HostEvent::Stall { index } => self.stall(*index),
            HostEvent::Nvtx { name, t0, t1 } => {
                if self.instrumented {
                    self.b.record(None, |rid| Record::Nvtx {
                        rid,
                        tid,
                        name: name.as_str().into(),
                        start: *t0,
                        end: *t1,
                    });
                }
            }
            HostEvent::Api { op, fault, pending } => {
                let Some(&o) = self.ops.get(op) else { return };
                let blocked_by = self.blocking_copy(*pending);
                let node = self.call(ti, o);
                let fault = fault.and_then(|f| self.faults.get(&f).copied());
                self.b.call_waited(node, fault, blocked_by);
            }
        }
    }

    /// An injected host stall: its fault node (unless it is the
    /// application's own host work grown) and its injection record.
    fn stall(&mut self, index: usize) {
        let Some(s) = self.log.stalls.get(index) else {
            return;
        };
        let fault_node = s.fault_before.as_ref().map(|k| {
            let step = skey_step_id(self.sc, k);
            let f = self.b.injected_fault(s.kind, s.tid, step, (s.t0, s.t1));
            self.faults.insert(index, f);
            f
        });
        self.injections.push(InjectionRecord {
            kind: s.kind.as_str().into(),
            mechanism: s.mechanism.clone(),
            requested_us: s.requested_ns as f64 / 1000.0,
            measured_us: s.t1.saturating_sub(s.t0) as f64 / 1000.0,
            fault_node,
            off_cpu_us: s.switched_out_ns.map(|ns| ns as f64 / 1000.0),
        });
    }

    /// The device node of a pageable copy whose call returned only after the
    /// copy finished, so the thread's next host operation waited for it (its
    /// end is stamped no later than the return, within the device clock's
    /// granularity, `record::faults::FAULT_END_TOLERANCE_NS`).
    fn blocking_copy(&self, pending: Option<u64>) -> Option<NodeId> {
        let op = pending?;
        let d = *self.dev_nodes.get(&DevRef::op(op))?;
        let a = *self.api_nodes.get(&op)?;
        (self.b.end_of(d) <= self.b.end_of(a) + FAULT_END_TOLERANCE_NS).then_some(d)
    }

    /// A call: its node (an API call, graph launch or synchronization), its
    /// records, what it did on the device, and its step keys.
    fn call(&mut self, ti: usize, o: &'a Op) -> NodeId {
        let kind = match o.kind {
            OpKind::GraphLaunch { .. } => NodeKind::GraphLaunch,
            OpKind::Sync => NodeKind::Synchronization,
            _ => NodeKind::ApiCall,
        };
        let step_id = o.skey.as_ref().and_then(|k| skey_step_id(self.sc, k));
        let info = NodeInfo {
            request: self.token(o.request).map(Into::into),
            step: step_id.clone(),
            thread: Some(o.tid.unwrap_or(self.log.threads[ti].tid)),
            stream: o.stream,
            call_site: o.call_site.clone(),
            operator: o.operator.clone(),
            generation: if o.stream.is_some() { o.generation } else { 0 },
        };
        let (name, span) = self.observer.call(o);
        let in_host_order = !self.log.threads[ti].injector && !o.outside_host_order;
        let prev = in_host_order.then_some(&mut self.threads[ti].prev);
        let node = self.b.call(kind, name, info.clone(), span, prev);
        self.api_nodes.insert(o.id, node);
        self.observer.call_records(&mut self.b, o, node);
        let queued = span.0;
        match &o.kind {
            OpKind::Kernel { .. } | OpKind::Copy { .. } | OpKind::Memset => {
                self.device_op(o, node, info, queued)
            }
            OpKind::EventRecord => self.event_record(o, node, info, queued),
            OpKind::StreamWait => self.stream_wait(o, node, info, queued),
            OpKind::GraphLaunch { graph } => self.graph_launch(o, *graph, node, info, queued),
            OpKind::Sync => {
                let waited = self.nodes_of(&o.waited);
                self.b.sync_waits(node, &waited);
                self.observer.sync_records(&mut self.b, o, node);
            }
            OpKind::Recreate => {}
        }
        if let (Some(k), Some(_)) = (&o.skey, &step_id) {
            let api = StepKey {
                api: true,
                ..k.clone()
            };
            self.keys.insert(api, node);
            if matches!(o.kind, OpKind::GraphLaunch { .. } | OpKind::Sync) {
                self.keys.insert(k.clone(), node);
            }
        }
        node
    }

    /// The device nodes of `refs` built so far: an op's stream predecessors,
    /// or the device ops a synchronization waited for.
    fn nodes_of(&self, refs: &[DevRef]) -> Vec<NodeId> {
        refs.iter()
            .filter_map(|r| self.dev_nodes.get(r).copied())
            .collect()
    }

    /// When stream order let work queued at `queued` after `after` start.
    fn ready(&self, queued: Ns, after: &[NodeId]) -> Ns {
        after
            .iter()
            .map(|&n| self.b.end_of(n))
            .fold(queued, Ns::max)
    }

    /// `dev` is the device node of `o` (not a graph launch): a stream
    /// predecessor of later ops, and the node of its step.
    fn placed(&mut self, o: &Op, dev: NodeId) {
        self.dev_nodes.insert(DevRef::op(o.id), dev);
        if let Some(k) = &o.skey {
            remember(&mut self.keys, self.sc, k, dev);
        }
    }

    /// Injection record of a lengthened target: the measured extra duration.
    fn stretch_record(&mut self, k: &StepKey, start: Ns, end: Ns) {
        let record = self.plan.and_then(|p| stretch_injection(p, k, start, end));
        self.injections.extend(record);
    }

    fn device_op(&mut self, o: &'a Op, api: NodeId, info: NodeInfo, call_start: Ns) {
        let mut after = self.nodes_of(&o.prev);
        after.sort_unstable();
        after.dedup();
        let measured = self.observer.device_times(o, self.b.end_of(api));
        let times = match measured {
            Measured::Recorded {
                queued,
                submitted,
                start,
                end,
            } => {
                let queued = queued.unwrap_or(call_start);
                let ready = self.ready(queued, &after);
                DeviceTimes {
                    queued,
                    submitted: submitted.unwrap_or(ready.min(start.max(queued))),
                    start,
                    end,
                }
            }
            Measured::SelfTimed { start, end } => {
                let queued = call_start;
                let ready = self.ready(queued, &after);
                let (start, end) = if start == 0 || end < start {
                    (ready, ready.max(end))
                } else {
                    (start, end)
                };
                DeviceTimes {
                    queued,
                    submitted: ready.min(start.max(queued)),
                    start,
                    end,
                }
            }
        };
        let (kind, name) = match &o.kind {
            OpKind::Kernel { name } => (NodeKind::Kernel, name.clone()),
            OpKind::Copy { direction } => (NodeKind::Memcpy, memcpy_node_name(*direction).into()),
            _ => (NodeKind::Memset, "memset".into()),
        };
        let dev = self.b.device_op(DeviceOp {
            kind,
            name,
            info,
            times,
            launch: api,
            after: &after,
            waited_record: None,
        });
        self.placed(o, dev);
        if o.delays_target {
            self.injected_devs.push(dev);
        }
        if let Some(k) = &o.skey {
            self.stretch_record(k, times.start, times.end);
        }
        self.observer.device_records(&mut self.b, o, dev);
    }

    fn event_record(&mut self, o: &'a Op, api: NodeId, info: NodeInfo, queued: Ns) {
        let after = self.nodes_of(&o.prev);
        let ready = self.ready(queued, &after);
        let reached = self.observer.event_reached(o, queued);
        let done = reached.map_or(ready, |t| t.max(queued));
        let dev = self.b.device_op(DeviceOp {
            kind: NodeKind::EventRecord,
            name: "event record".into(),
            info,
            times: DeviceTimes::instant(queued, done),
            launch: api,
            after: &after,
            waited_record: None,
        });
        self.placed(o, dev);
        self.observer.event_records(&mut self.b, o, dev, queued);
    }

    fn stream_wait(&mut self, o: &'a Op, api: NodeId, info: NodeInfo, queued: Ns) {
        let after = self.nodes_of(&o.prev);
        let start = self.ready(queued, &after);
        let src = o
            .event_src
            .and_then(|e| self.dev_nodes.get(&DevRef::op(e)).copied());
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
        self.placed(o, dev);
        self.observer.wait_records(&mut self.b, o, dev);
    }

    /// A graph launch: one device node per declared node, each after its
    /// dependencies, the roots after the stream's tail.
    fn graph_launch(&mut self, o: &'a Op, gi: usize, api: NodeId, info: NodeInfo, queued: Ns) {
        let Some(decl) = self.sc.graphs.get(gi) else {
            return;
        };
        let replay = self.replays[gi];
        self.replays[gi] += 1;
        let after = self.nodes_of(&o.prev);
        let base = self.ready(queued, &after);
        let step_id = o.skey.as_ref().and_then(|k| skey_step_id(self.sc, k));
        let mut ids: Vec<NodeId> = Vec::new();
        for (ni, n) in decl.nodes.iter().enumerate() {
            let nkey = o.skey.as_ref().map(|k| StepKey {
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
            let (start, end) = self.observer.graph_node_times(o, gi, ni, replay, ready);
            let mut node_info = info.clone();
            node_info.step =
                Some(format!("{}/{}", step_id.clone().unwrap_or_default(), n.id).into());
            let roots_after = if n.after.is_empty() {
                after.clone()
            } else {
                Vec::new()
            };
            let dev = self.b.graph_node(
                DeviceOp {
                    kind: NodeKind::GraphNode,
                    name: n.kernel.name.as_str().into(),
                    info: node_info,
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
            let node_ref = DevRef {
                op: o.id,
                graph_node: Some(ni as u32),
            };
            self.dev_nodes.insert(node_ref, dev);
            if let Some(k) = &nkey {
                if step_id.is_some() {
                    self.keys.insert(k.clone(), dev);
                }
                self.stretch_record(k, start, end);
            }
            self.observer
                .graph_node_records(&mut self.b, o, ni, dev, nkey.as_ref());
        }
    }
}

/// The sinks of graph `gi` of `sc` launched by op `op`: the nodes no other
/// node depends on, where the launch's stream continues.
pub fn graph_sinks(sc: &Scenario, gi: usize, op: u64) -> Vec<DevRef> {
    let Some(decl) = sc.graphs.get(gi) else {
        return Vec::new();
    };
    decl.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !decl.nodes.iter().any(|m| m.after.contains(&n.id)))
        .map(|(ni, _)| DevRef {
            op,
            graph_node: Some(ni as u32),
        })
        .collect()
}
