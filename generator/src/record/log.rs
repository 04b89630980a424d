//! The backend-neutral step log: what a backend's executor did by
//! construction — requests, each host thread's events in the order they
//! happened, every call's op with its stream order and waits, injected host
//! stalls — in one form for every backend. A backend converts its own log
//! (the GPU backend's `cuda::exec::RunLog`, the PyTorch executor's
//! `torch::log::StepLog`) into it; [`super::truth::build`] turns it into the
//! truth through the per-step rules ([`super::steps`]).

use crate::keys::StepKey;
use ground_truth::scenario::InjectionKind;
use ground_truth::trace::CopyDirection;
use ground_truth::{Ns, SharedStr};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepLog {
    pub requests: Vec<Request>,
    pub arrivals: Vec<Arrival>,
    pub threads: Vec<ThreadLog>,
    /// Every call the executor made, on any thread.
    pub ops: Vec<Op>,
    /// Injected host stalls, indexed by [`HostEvent::Stall`] and the `fault` of
    /// calls and pushes.
    pub stalls: Vec<Stall>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Index of its program in the scenario.
    pub program: usize,
    /// Its index among the program's requests.
    pub index: u32,
    pub token: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    pub request: usize,
    pub t: Ns,
    pub tid: u32,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadLog {
    pub tid: u32,
    /// The injector thread: its calls are no step of the application's tasks
    /// (no `host_order` edges, `record::steps` `call`).
    pub injector: bool,
    pub events: Vec<HostEvent>,
}

/// One host-side event of a thread, in the order it happened. `pending` is
/// the blocking (pageable) copy whose call the thread's previous host
/// operation was: the event waited for it when the copy ended no later than
/// its call returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEvent {
    TaskBegin {
        t: Ns,
        /// When the thread finished its previous task and turned to its queue
        /// (0 for its first task): the `busy` edge compares it with when the
        /// task's work was ready.
        thread_free: Ns,
        pending: Option<u64>,
        request: usize,
        /// The push (its id) that handed this task over, if any.
        handoff: Option<u64>,
        queue: String,
    },
    Handoff {
        /// When the item was pushed.
        t: Ns,
        /// When the thread reached the push: earlier than `t` when it waited
        /// for room on a full bounded queue (`QueueDecl::capacity`).
        ready: Ns,
        id: u64,
        queue: String,
        request: usize,
        pending: Option<u64>,
        /// An injected host stall (index into the stalls) before the host work
        /// that preceded this push.
        fault: Option<usize>,
    },
    /// The op of this id was called.
    Api {
        op: u64,
        /// An injected host stall right before the call.
        fault: Option<usize>,
        pending: Option<u64>,
    },
    Stall {
        index: usize,
    },
    /// A popped NVTX range.
    Nvtx {
        name: String,
        t0: Ns,
        t1: Ns,
    },
}

/// A device op (or the `graph_node`-th node of a graph launch) as a stream
/// predecessor or a waited-for op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DevRef {
    pub op: u64,
    pub graph_node: Option<u32>,
}

impl DevRef {
    pub fn op(op: u64) -> DevRef {
        DevRef {
            op,
            graph_node: None,
        }
    }
}

/// What a call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpKind {
    Kernel { name: SharedStr },
    Copy { direction: CopyDirection },
    Memset,
    EventRecord,
    StreamWait,
    GraphLaunch { graph: usize },
    Sync,
    Recreate,
}

/// One call the executor made.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub id: u64,
    /// Index of its request (`None` for injected work).
    pub request: Option<usize>,
    pub skey: Option<StepKey>,
    pub kind: OpKind,
    /// When the executor made the call (CLOCK_MONOTONIC): it places the call
    /// among the host events (its span is the observer's, `Observer::call`).
    pub t0: Ns,
    /// The calling thread (`None`: the thread whose event made the call).
    pub tid: Option<u32>,
    /// The stream as the records name it (`None`: no stream, a synchronization).
    pub stream: Option<u32>,
    pub generation: u32,
    pub call_site: Option<SharedStr>,
    pub operator: Option<SharedStr>,
    /// The device ops it follows on its stream (the stream's tail when enqueued).
    pub prev: Vec<DevRef>,
    /// Stream waits: the event record op waited on.
    pub event_src: Option<u64>,
    /// Synchronizations: the device ops waited for.
    pub waited: Vec<DevRef>,
    /// Injected work called outside the application's host order (its call
    /// is no step of the thread's tasks, as on the injector thread).
    pub outside_host_order: bool,
    /// Injected device work that delays the plan's target: the candidates of
    /// its `fault` edge (`record::faults::finish_plan`).
    pub delays_target: bool,
}

/// An injected host stall that happened just before a step's call.
#[derive(Debug, Clone, PartialEq)]
pub struct Stall {
    pub tid: u32,
    pub t0: Ns,
    pub t1: Ns,
    pub kind: InjectionKind,
    pub mechanism: String,
    pub requested_ns: u64,
    /// Longest interval the victim saw itself switched out (cpu_deschedule).
    pub switched_out_ns: Option<u64>,
    /// The step whose call the stall delayed, when the stall is an injected
    /// fault node of its own (`None`: the application's own host work grew).
    pub fault_before: Option<StepKey>,
}

/// One item of the log in the order the truth is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    Arrival(usize),
    /// (thread, event) indices.
    Host(usize, usize),
}

impl StepLog {
    /// Arrivals and every thread's host events in global time order: by time,
    /// then arrivals before host events, then by thread and by event index (a
    /// call at its measured start, a stall at its start, an NVTX range at its end).
    pub fn build_order(&self) -> Vec<Item> {
        let t0_of: std::collections::HashMap<u64, Ns> =
            self.ops.iter().map(|o| (o.id, o.t0)).collect();
        let mut order: Vec<(Ns, usize, usize, Item)> = Vec::new();
        for (i, a) in self.arrivals.iter().enumerate() {
            order.push((a.t, 0, i, Item::Arrival(i)));
        }
        for (ti, t) in self.threads.iter().enumerate() {
            for (ei, ev) in t.events.iter().enumerate() {
                let at = match ev {
                    HostEvent::TaskBegin { t, .. } | HostEvent::Handoff { t, .. } => *t,
                    HostEvent::Api { op, .. } => t0_of.get(op).copied().unwrap_or(0),
                    HostEvent::Stall { index } => self.stalls.get(*index).map_or(0, |s| s.t0),
                    HostEvent::Nvtx { t1, .. } => *t1,
                };
                order.push((at, ti + 1, ei, Item::Host(ti, ei)));
            }
        }
        order.sort_by_key(|o| (o.0, o.1, o.2));
        order.into_iter().map(|o| o.3).collect()
    }
}
