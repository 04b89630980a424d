//! The log model: what the executor records about a run that the device
//! cannot tell (which call created which op on which stream, each stream's
//! previous ops, waits, host-side events), for the ground-truth builder.

use crate::keys::StepKey;
use ground_truth::scenario::{InjectionKind, KernelKind, LaunchApi, SyncTarget};
use ground_truth::trace::{CopyDirection, HostMemory};
use ground_truth::Ns;
use kernels::Kernel;
use recorder_cupti as cupti;
use std::sync::Arc;

/// A device op (or one node of a graph launch) as a stream predecessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DevRef {
    pub op: u64,
    pub gnode: Option<u32>,
}

/// A stream's last ops (one, except after a graph launch): no allocation
/// in the common case, since every enqueue replaces it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Tail {
    #[default]
    Empty,
    One(DevRef),
    Many(Vec<DevRef>),
}

impl Tail {
    pub fn as_slice(&self) -> &[DevRef] {
        match self {
            Tail::Empty => &[],
            Tail::One(d) => std::slice::from_ref(d),
            Tail::Many(v) => v,
        }
    }

    pub fn from_vec(mut v: Vec<DevRef>) -> Tail {
        match v.len() {
            0 => Tail::Empty,
            1 => Tail::One(v.pop().expect("one element")),
            _ => Tail::Many(v),
        }
    }

    pub(super) fn one(op: u64) -> Tail {
        Tail::One(DevRef { op, gnode: None })
    }
}

/// What an op did (the full request, kept for diagnostics).
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub enum What {
    Kernel {
        name: Arc<str>,
        kind: KernelKind,
        /// Requested duration, injected stretch included.
        dur_ns: u64,
        extra_ns: u64,
        grid: u32,
        block: u32,
        launch: LaunchApi,
        /// Injector kernels: hog / backlog / unrelated.
        kernel: Kernel,
    },
    Copy {
        direction: CopyDirection,
        bytes: u64,
        extra_bytes: u64,
        memory: HostMemory,
    },
    Memset {
        bytes: u64,
        extra_bytes: u64,
    },
    EventRecord {
        event: usize,
    },
    StreamWait {
        event: usize,
    },
    GraphLaunch {
        graph: usize,
        extra_ns: u64,
    },
    Sync {
        target: SyncTarget,
    },
    Recreate,
}

/// One CUDA call the executor made.
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub struct Op {
    /// The recorder-private external correlation id (CUSTOM0).
    pub id: u64,
    pub thread: usize,
    pub tid: u32,
    /// Run request index (`None` for injector work).
    pub request: Option<usize>,
    pub skey: Option<StepKey>,
    pub what: What,
    /// Host-measured call interval (CLOCK_MONOTONIC).
    pub t0: Ns,
    pub t1: Ns,
    pub stream: Option<usize>,
    pub stream_cupti: u32,
    pub handle: u64,
    pub generation: u32,
    /// The stream's previous ops when this op was enqueued.
    pub prev: Tail,
    /// Stream waits: the event record op waited on.
    pub event_src: Option<u64>,
    /// Synchronizations: the device ops waited for.
    pub waited: Vec<DevRef>,
    pub operator: Option<Arc<str>>,
    pub call_site: Option<Arc<str>>,
    /// Device log slot (kernels).
    pub slot: Option<u32>,
    /// The name CUPTI reports for the kernel's entry point.
    pub entry: Option<String>,
    pub injected: bool,
    pub delays_target: bool,
    pub error: Option<String>,
}

/// An injected host stall that happened just before a step's call.
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub struct Stall {
    pub kind: InjectionKind,
    pub thread: usize,
    pub tid: u32,
    pub skey: StepKey,
    pub t0: Ns,
    pub t1: Ns,
    pub mechanism: String,
    pub requested_ns: u64,
    /// Longest interval the victim saw itself switched out (cpu_deschedule).
    pub switched_out_ns: Option<u64>,
}

/// One host-side event of a thread, in the order it happened: the executor
/// logs the recording path's own form (`record::log`), so its truth reads it as is.
pub use crate::record::log::HostEvent as HostEv;

#[derive(Debug, Default)]
pub struct ThreadLog {
    pub tid: u32,
    pub events: Vec<HostEv>,
    pub ops: Vec<Op>,
    pub(crate) nvtx: Vec<(Arc<str>, Ns)>,
    pub(crate) pending: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Arrival {
    pub request: usize,
    pub t: Ns,
    pub tid: u32,
}

#[derive(Debug, Clone)]
pub struct ReqInfo {
    pub program: usize,
    pub index: u32,
    pub token: u64,
    /// Planned arrival, relative to the run's origin.
    pub at_rel: Ns,
}

/// Per graph: the kernel entry names and log slot arguments of its nodes
/// (decl order).
#[derive(Debug, Clone)]
pub struct GraphMeta {
    pub entries: Vec<String>,
    /// Each node's `slot` kernel argument: a ring with an entry per replay
    /// (`kernels::LogRing`), or one plain slot that every replay overwrites.
    pub slots: Vec<u32>,
}

impl GraphMeta {
    /// The log entry node `ni`'s replay `replay` wrote: its ring entry, or
    /// the plain slot when `last` (the replay a plain slot holds).
    pub fn replay_slot(&self, ni: usize, replay: usize, last: bool) -> Option<u32> {
        let arg = *self.slots.get(ni)?;
        match kernels::LogRing::from_slot_arg(arg) {
            Some(ring) => ring.entry(replay),
            None => last.then_some(arg),
        }
    }

    /// Every log entry node `ni` may have written, by replay (a plain slot:
    /// one entry, the last replay's).
    pub fn node_slots(&self, ni: usize) -> Vec<u32> {
        let Some(&arg) = self.slots.get(ni) else {
            return Vec::new();
        };
        match kernels::LogRing::from_slot_arg(arg) {
            Some(ring) => (0..ring.capacity as usize)
                .filter_map(|r| ring.entry(r))
                .collect(),
            None => vec![arg],
        }
    }
}

/// Everything one execution produced.
pub struct RunLog {
    pub origin: Ns,
    pub arrivals: Vec<Arrival>,
    pub threads: Vec<ThreadLog>,
    pub requests: Vec<ReqInfo>,
    pub graphs: Vec<GraphMeta>,
    pub stalls: Vec<Stall>,
    pub errors: Vec<String>,
    pub injector: Option<usize>,
    pub device_log: Vec<kernels::LogEntry>,
    pub flushed: cupti::Flushed,
    pub end: Ns,
}

/// The op id graph node kernels are captured with (never a real op id).
pub fn graph_op_id(gi: usize, ni: usize) -> u64 {
    0xC0DE_0000_0000_0000 | ((gi as u64) << 24) | ni as u64
}
