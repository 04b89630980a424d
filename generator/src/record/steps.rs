//! What each scenario step produces: its nodes, the edges that wire them (the
//! ground-truth conventions of docs/records.md) and who owns its records.
//! Backends compute the times and supply the records their collectors made;
//! the rules here are the same for all of them.
//!
//! Only the order of nodes, of edges and of records is part of a bundle (each
//! is its own array), so every rule creates its node first, then its edges in
//! a fixed order; a backend adds the records it observed before or after.

use super::builder::{NodeInfo, RunBuilder};
use ground_truth::bundle::LossAccounting;
use ground_truth::graph::{EdgeType, NodeId, NodeKind};
use ground_truth::scenario::InjectionKind;
use ground_truth::trace::{MarkerPhase, Record, Rid};
use ground_truth::{Ns, SharedStr};

/// A device op's times: queued in the call, submitted when stream order and
/// waits allowed it, then its execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceTimes {
    pub queued: Ns,
    pub submitted: Ns,
    pub start: Ns,
    pub end: Ns,
}

impl DeviceTimes {
    /// An op that takes no time once its stream reaches it (an event record).
    pub fn instant(queued: Ns, done: Ns) -> Self {
        DeviceTimes {
            queued,
            submitted: done,
            start: done,
            end: done,
        }
    }
}

/// When a host task's work was ready for its thread, and when the thread was
/// free of its earlier work to take it up (both CLOCK_MONOTONIC ns): a task
/// whose thread was free only after its work was ready waited for the thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pickup {
    /// The request's arrival, or for a handed-off task when the item reached
    /// the consumer's queue.
    pub ready: Ns,
    /// When the thread finished its previous task (0: it had none).
    pub thread_free: Ns,
    /// The blocking copy (a pageable readback) that ended the thread's previous
    /// task: its call returned only when the copy finished, so this task, the
    /// thread's next host operation, waited for it (`sync`, as any next
    /// operation after a blocking copy does).
    pub blocked_by: Option<NodeId>,
}

/// One device-side node: a kernel, copy, memset, event record, stream wait
/// or graph node.
pub struct DeviceOp<'p> {
    pub kind: NodeKind,
    pub name: SharedStr,
    pub info: NodeInfo,
    pub times: DeviceTimes,
    /// The API call that created it (`launch` edge).
    pub launch: NodeId,
    /// The device nodes it follows on its stream object (`stream_order`
    /// edges): the stream's tail. A graph node follows it only as a root.
    pub after: &'p [NodeId],
    /// A stream wait: the event record it waited on (`event` edge).
    pub waited_record: Option<NodeId>,
}

/// What the recorder made of one op.
pub enum Observed<F> {
    /// Its record, made once its rid is known.
    Record(F),
    /// The recorder lost it: absent from the trace, counted in `cupti_dropped`.
    Lost,
    /// No record (the collector never delivered one).
    Nothing,
}

impl RunBuilder {
    /// A request arriving at `at` on thread `tid`: an instant node and, in
    /// instrumented runs, its request-begin marker.
    pub fn request(
        &mut self,
        name: String,
        token: SharedStr,
        tid: u32,
        at: Ns,
        instrumented: bool,
    ) -> NodeId {
        let info = NodeInfo {
            request: Some(token.clone()),
            thread: Some(tid),
            ..Default::default()
        };
        let node = self.node(NodeKind::Request, name, info, at, at);
        if instrumented {
            self.record(Some(node), |rid| Record::Marker {
                rid,
                tid,
                phase: MarkerPhase::RequestBegin,
                queue: SharedStr::default(),
                token,
                ts: at,
            });
        }
        node
    }

    /// A host task beginning at `at` on thread `tid` for request `token`, after a
    /// handoff through `queue` (empty for the request's first task): the node, its
    /// task-begin marker (instrumented runs), and its `request` and `handoff` edges.
    /// The handoff node ends when the task begins. When the thread was still busy
    /// with earlier work once this task's work was ready (`pickup`), the thread's
    /// last host operation held the task: a `busy` edge from it (docs/records.md).
    #[allow(clippy::too_many_arguments)]
    pub fn host_task(
        &mut self,
        token: impl Into<SharedStr>,
        tid: u32,
        queue: impl Into<SharedStr>,
        at: Ns,
        instrumented: bool,
        request: Option<NodeId>,
        handoff: Option<NodeId>,
        pickup: Option<Pickup>,
    ) -> NodeId {
        let queue = queue.into();
        let name = if queue.is_empty() {
            "task".to_string()
        } else {
            format!("task after {queue}")
        };
        let token = token.into();
        let info = NodeInfo {
            request: Some(token.clone()),
            thread: Some(tid),
            ..Default::default()
        };
        let task = self.node(NodeKind::HostTask, name, info, at, at);
        if instrumented {
            self.record(Some(task), |rid| Record::Marker {
                rid,
                tid,
                phase: MarkerPhase::TaskBegin,
                queue: queue.clone(),
                token,
                ts: at,
            });
        }
        if let Some(r) = request {
            self.edge(r, task, EdgeType::Request);
        }
        if let Some(h) = handoff {
            self.truth.nodes[h as usize].end = at;
            self.edge(h, task, EdgeType::Handoff);
        }
        let held = pickup.filter(|p| p.thread_free > p.ready);
        if let Some(&busy) = held.and(self.last_on_thread.get(&tid)) {
            self.edge(busy, task, EdgeType::Busy);
        }
        if let Some(copy) = pickup.and_then(|p| p.blocked_by) {
            self.edge(copy, task, EdgeType::Sync);
        }
        if handoff.is_some() {
            if let Some(q) = self.bounded.get_mut(&queue) {
                q.takes.push(task);
            }
        }
        self.last_on_thread.insert(tid, task);
        task
    }

    /// A push onto `queue` at `at` by the task `task` of thread `tid`: the
    /// handoff node (ended when the consumer's task begins, `host_task`), its
    /// enqueue marker, the `handoff` edge from the task, the `host_order` edge
    /// from the thread's previous host operation `prev` (a call that returned
    /// late, such as a synchronization, delays the push) and, when the push
    /// waited for a blocking copy, the `sync` edge from that copy.
    ///
    /// On a bounded queue (`QueueDecl::capacity`, [`RunBuilder::declare_queues`])
    /// the `k`-th push (in push order) needs the room the `(k - capacity)`-th take
    /// (in take order: for one consumer, the item `capacity` places ahead) made;
    /// when that take came after the producer reached the push (`ready`), the
    /// push waited for it, and `at` is when it got the room: a `backpressure`
    /// edge from the consumer task that took it (docs/records.md).
    #[allow(clippy::too_many_arguments)]
    pub fn handoff(
        &mut self,
        queue: SharedStr,
        token: SharedStr,
        tid: u32,
        (ready, at): (Ns, Ns),
        instrumented: bool,
        task: Option<NodeId>,
        prev: Option<NodeId>,
        blocked_by: Option<NodeId>,
    ) -> NodeId {
        let freed_by = self.bounded.get_mut(&queue).and_then(|q| {
            let k = q.pushes;
            q.pushes += 1;
            let freeing = k.checked_sub(u64::from(q.capacity))?;
            q.takes.get(freeing as usize).copied()
        });
        let info = NodeInfo {
            request: Some(token.clone()),
            thread: Some(tid),
            ..Default::default()
        };
        let node = self.node(NodeKind::QueueHandoff, queue.clone(), info, at, at);
        if instrumented {
            self.record(Some(node), |rid| Record::Marker {
                rid,
                tid,
                phase: MarkerPhase::Enqueue,
                queue,
                token,
                ts: at,
            });
        }
        if let Some(task) = task {
            self.edge(task, node, EdgeType::Handoff);
        }
        // The task itself is already linked by `handoff`.
        if let Some(p) = prev.filter(|&p| Some(p) != task) {
            self.edge(p, node, EdgeType::HostOrder);
        }
        if let Some(copy) = blocked_by {
            self.edge(copy, node, EdgeType::Sync);
        }
        if let Some(taker) = freed_by.filter(|&t| self.truth.nodes[t as usize].start > ready) {
            self.edge(taker, node, EdgeType::Backpressure);
        }
        self.last_on_thread.insert(tid, node);
        node
    }

    /// An API call (or graph launch, or synchronization) on a host thread:
    /// its node, `host_order` after the thread's previous operation `prev`,
    /// which the call then becomes. Calls of the injector thread pass `None`:
    /// injected work is no step of the application's tasks. The backend adds
    /// the call's records with the node as owner.
    pub fn call(
        &mut self,
        kind: NodeKind,
        name: impl Into<SharedStr>,
        info: NodeInfo,
        (start, end): (Ns, Ns),
        prev: Option<&mut Option<NodeId>>,
    ) -> NodeId {
        let thread = info.thread;
        let node = self.node(kind, name, info, start, end);
        if let Some(prev) = prev {
            if let Some(p) = *prev {
                self.edge(p, node, EdgeType::HostOrder);
            }
            *prev = Some(node);
            if let Some(tid) = thread {
                self.last_on_thread.insert(tid, node);
            }
        }
        node
    }

    /// What delayed a call from outside the device: the injected host stall
    /// right before it (`fault`), and the blocking copy the thread waited for
    /// before it could make the call (`sync`).
    pub fn call_waited(&mut self, call: NodeId, fault: Option<NodeId>, blocked_by: Option<NodeId>) {
        if let Some(f) = fault {
            self.edge(f, call, EdgeType::Fault);
        }
        if let Some(copy) = blocked_by {
            self.edge(copy, call, EdgeType::Sync);
        }
    }

    /// A device op on a stream: its node and times, `stream_order` after the
    /// stream's tail, the `event` edge of a stream wait, the `launch` edge
    /// from its call. The caller makes it the stream's new tail.
    pub fn device_op(&mut self, op: DeviceOp) -> NodeId {
        let t = op.times;
        let dev = self.node(op.kind, op.name, op.info, t.start, t.end);
        self.set_device_times(dev, t.queued, t.submitted, t.start, t.end);
        for &p in op.after {
            self.edge(p, dev, EdgeType::StreamOrder);
        }
        if let Some(record) = op.waited_record {
            self.edge(record, dev, EdgeType::Event);
        }
        self.edge(op.launch, dev, EdgeType::Launch);
        dev
    }

    /// When a stream wait is satisfied: once the stream reaches it (`start`)
    /// and the event record it waits on has completed.
    pub fn wait_end(&self, start: Ns, waited_record: Option<NodeId>) -> Ns {
        start.max(waited_record.map(|r| self.end_of(r)).unwrap_or(0))
    }

    /// When a graph node may start: after the launch let the graph's roots
    /// go (`base`) and after every node it depends on.
    pub fn graph_ready(&self, base: Ns, deps: &[NodeId]) -> Ns {
        deps.iter().map(|&d| self.end_of(d)).fold(base, Ns::max)
    }

    /// One node of a graph launch: its node and times, the `launch` edge from
    /// the launch call, `stream_order` after the stream's tail (roots only:
    /// `after` is empty for the others), `graph` edges from its dependencies.
    pub fn graph_node(&mut self, op: DeviceOp, deps: &[NodeId]) -> NodeId {
        let t = op.times;
        let dev = self.node(op.kind, op.name, op.info, t.start, t.end);
        self.set_device_times(dev, t.queued, t.submitted, t.start, t.end);
        self.edge(op.launch, dev, EdgeType::Launch);
        for &p in op.after {
            self.edge(p, dev, EdgeType::StreamOrder);
        }
        for &d in deps {
            self.edge(d, dev, EdgeType::Graph);
        }
        dev
    }

    /// A blocking host call (`sync` node `call`) waited for the device ops
    /// `waited`: each one still running when the call began is a `sync`
    /// predecessor of it.
    pub fn sync_waits(&mut self, call: NodeId, waited: &[NodeId]) {
        let start = self.truth.nodes[call as usize].start;
        for &w in waited {
            if self.end_of(w) > start {
                self.edge(w, call, EdgeType::Sync);
            }
        }
    }

    /// An injected host stall (preemption, page faults) of thread `tid` right
    /// before the call of step `step`; its records (`sched`, `page_fault`) are
    /// the backend's, owned by this node, and its `fault` edge goes to the
    /// call ([`RunBuilder::call_waited`]).
    pub fn injected_fault(
        &mut self,
        kind: InjectionKind,
        tid: u32,
        step: Option<SharedStr>,
        (start, end): (Ns, Ns),
    ) -> NodeId {
        let info = NodeInfo {
            thread: Some(tid),
            step,
            ..Default::default()
        };
        self.node(NodeKind::InjectedFault, kind.as_str(), info, start, end)
    }

    /// Adds what the recorder made of an op: its record owned by `owner`, or
    /// the loss of it.
    pub fn observe<F: FnOnce(Rid) -> Record>(
        &mut self,
        owner: NodeId,
        observed: Observed<F>,
        loss: &mut LossAccounting,
    ) {
        match observed {
            Observed::Record(make) => {
                self.record(Some(owner), make);
            }
            Observed::Lost => loss.cupti_dropped += 1,
            Observed::Nothing => {}
        }
    }

    pub fn end_of(&self, n: NodeId) -> Ns {
        self.truth.nodes[n as usize].end
    }
}
