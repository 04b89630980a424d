//! The PyTorch executor's step log (`executor.py`'s answer to one request):
//! what it did by construction and what the work measured of itself. Read
//! with the project's JSON reader, so a bad answer is an error naming the
//! JSON path, never a panic.

use ground_truth::Ns;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub struct StepLog {
    pub origin: Ns,
    pub end: Ns,
    pub arrivals: Vec<Arrival>,
    pub requests: Vec<Request>,
    pub threads: Vec<ThreadLog>,
    /// Index in `threads` of the injector thread, if the plan needed one.
    pub injector: Option<usize>,
    /// Per direct-launch accumulator slot: [start, end] (CLOCK_MONOTONIC, 0 = not run).
    pub kernels: Vec<[Ns; 2]>,
    /// Time stamps of the stamp kernels (CLOCK_MONOTONIC, 0 = not run).
    pub stamps: Vec<Ns>,
    /// Graph-node kernel runs: [tag, start, end], in the order they finished.
    pub graph_kernels: Vec<[u64; 3]>,
    /// Per graph: the tag of each node (declaration order).
    pub graph_tags: Vec<Vec<u64>>,
    pub errors: Vec<String>,
    pub clock: Clock,
    pub device: DeviceInfo,
    pub versions: Versions,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Clock {
    /// `%globaltimer` + offset = CLOCK_MONOTONIC.
    pub offset_ns: i64,
    /// Smallest and largest calibration round, relative to the median.
    pub spread_ns: [i64; 2],
    /// CLOCK_REALTIME − CLOCK_MONOTONIC before and after the run (Kineto's clock is the former).
    pub realtime_minus_monotonic_ns: [i64; 2],
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeviceInfo {
    pub name: String,
    pub sms: u32,
    pub capability: [u32; 2],
}

#[derive(Debug, Clone, Deserialize)]
pub struct Versions {
    pub torch: String,
    pub cuda: Option<String>,
    pub cupy: String,
    pub python: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Arrival {
    pub request: usize,
    pub t: Ns,
    pub tid: u32,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Request {
    pub program: usize,
    pub index: u32,
    pub at_rel: Ns,
    pub token: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ThreadLog {
    pub tid: u32,
    pub events: Vec<HostEvent>,
    pub ops: Vec<Op>,
}

/// One host-side event of a thread, in the order it happened.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostEvent {
    /// [t, request, handoff id, queue, when the thread finished its previous
    /// task (0: none)].
    Task(Ns, usize, Option<u64>, String, #[serde(default)] Ns),
    /// [t, handoff id, queue, request, when the thread reached the push (a
    /// push onto a full bounded queue waited for room until `t`; 0 or absent:
    /// it did not wait)].
    Handoff(Ns, u64, String, usize, #[serde(default)] Ns),
    /// The op of this id was called.
    Api(u64),
    /// [name, start, end] of a popped range.
    Nvtx(String, Ns, Ns),
    /// [start, end] of the plan's host delay before the next call.
    HostDelay(Ns, Ns),
}

#[derive(Debug, Clone, Deserialize)]
pub struct Op {
    pub id: u64,
    pub thread: usize,
    pub request: Option<usize>,
    pub step: Option<usize>,
    pub what: What,
    pub t0: Ns,
    pub t1: Ns,
    #[serde(default)]
    pub stream: Option<i64>,
    #[serde(default)]
    pub stream_id: Option<i64>,
    #[serde(default)]
    pub generation: u32,
    #[serde(default)]
    pub prev: Vec<u64>,
    #[serde(default)]
    pub tid: Option<u32>,
    #[serde(default)]
    pub slot: Option<usize>,
    #[serde(default)]
    pub stamps: Vec<usize>,
    #[serde(default)]
    pub event_src: Option<u64>,
    #[serde(default)]
    pub waited: Vec<u64>,
    /// The innermost NVTX range open on the thread at the call.
    #[serde(default)]
    pub operator: Option<String>,
    #[serde(default)]
    pub injected: bool,
    #[serde(default)]
    pub delays_target: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum What {
    Kernel {
        name: String,
        dur_ns: u64,
        extra_ns: u64,
    },
    Copy {
        direction: ground_truth::trace::CopyDirection,
        memory: ground_truth::trace::HostMemory,
        bytes: u64,
        extra_bytes: u64,
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
    },
    Sync {
        target: ground_truth::scenario::SyncTarget,
    },
    Recreate,
}

impl Op {
    /// What the name of the op's working call contains, whichever variant
    /// Kineto records (`cudaEventRecordWithFlags`, `cuLaunchKernel`).
    pub fn api_key(&self) -> &'static str {
        match &self.what {
            What::Kernel { .. } => "LaunchKernel",
            What::Copy { .. } => "Memcpy",
            What::Memset { .. } => "Memset",
            What::EventRecord { .. } => "EventRecord",
            What::StreamWait { .. } => "StreamWaitEvent",
            What::GraphLaunch { .. } => "GraphLaunch",
            What::Sync { .. } => "Synchronize",
            What::Recreate => "recreate",
        }
    }

    /// The API the executor's call reaches (names an API node without a record).
    pub fn api_name(&self) -> &'static str {
        use ground_truth::scenario::SyncTarget;
        match &self.what {
            // CuPy launches through the driver API.
            What::Kernel { .. } => "cuLaunchKernel",
            What::Copy { .. } => "cudaMemcpyAsync",
            What::Memset { .. } => "cudaMemsetAsync",
            What::EventRecord { .. } => "cudaEventRecord",
            What::StreamWait { .. } => "cudaStreamWaitEvent",
            What::GraphLaunch { .. } => "cudaGraphLaunch",
            What::Sync {
                target: SyncTarget::Stream,
            } => "cudaStreamSynchronize",
            What::Sync {
                target: SyncTarget::Event,
            } => "cudaEventSynchronize",
            What::Sync {
                target: SyncTarget::Device,
            } => "cudaDeviceSynchronize",
            What::Recreate => "recreate",
        }
    }
}
