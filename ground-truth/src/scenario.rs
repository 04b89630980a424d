//! Scenario language (docs/design.md). A scenario declares host threads and queues,
//! streams, events and graphs, one or more request programs, an injection and
//! the symptom asked about. Unknown keys are rejected by serde; impossible
//! references by [`Scenario::check`].

use crate::labels::{CauseLabel, Mode, Question};
use crate::trace::{CopyDirection, HostMemory};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod check;
mod limits;
mod space;
pub use limits::{
    MAX_BLOCK_THREADS, MAX_GRID_BLOCKS, MAX_HOST_THREADS, MAX_REPETITIONS, MAX_SCENARIO_OPS,
    MAX_SCENARIO_TIME_US, MAX_TRANSFER_BYTES,
};
pub use space::{AxisValue, SpacePoint};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub schema_version: u32,
    /// Unique name, `family.variant` by convention.
    pub name: String,
    pub family: String,
    pub variant: String,
    /// The true cause of the symptom (what this variant injects).
    pub cause: CauseLabel,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    pub seed: u64,
    #[serde(default = "one")]
    pub repetitions: u32,
    /// Host threads; a thread with `count > 1` is a pool.
    pub threads: Vec<ThreadDecl>,
    #[serde(default)]
    pub queues: Vec<QueueDecl>,
    pub streams: Vec<StreamDecl>,
    #[serde(default)]
    pub events: Vec<EventDecl>,
    #[serde(default)]
    pub graphs: Vec<GraphDecl>,
    /// Request programs. Each instance of a program is one request.
    pub programs: Vec<Program>,
    #[serde(default)]
    pub injection: Option<Injection>,
    pub symptom: SymptomDecl,
    /// Kernel names that application-like work draws from: injected kernels
    /// (hogs, backlog, concurrent work) take a seeded draw from this pool, so
    /// nothing in a view names the injector or the cause. Empty (the default):
    /// the scenario's own kernel names, with their multiplicity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// A generated scenario's place in the scenario space (its split, family
    /// instance and axes); `None` for a hand-written one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space: Option<SpacePoint>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThreadDecl {
    pub name: String,
    /// Pool size (1 = a single thread).
    #[serde(default = "one")]
    pub count: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    #[default]
    Channel,
    ThreadPool,
    Future,
    Callback,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueDecl {
    pub name: String,
    #[serde(default)]
    pub kind: QueueKind,
    /// Thread (or pool) that consumes the queue.
    pub consumer: String,
    /// Pool thread choice: seeded random (`true`) or round robin.
    #[serde(default)]
    pub randomized: bool,
    /// The most items the queue holds (pushed, not yet taken up by a consumer
    /// task); a push onto a full queue waits until a consumer takes an item
    /// (backpressure, docs/records.md). Absent: unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub capacity: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamDecl {
    pub name: String,
    /// Lower is higher priority, as in CUDA.
    #[serde(default)]
    pub priority: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventDecl {
    pub name: String,
    /// Events in the ring (1: a single event). A ring is what a double-buffered
    /// pipeline keeps, one CUDA event per buffer: a record or wait of request
    /// `i` uses slot `(i + request_offset) mod count`, so a request can wait on
    /// the event an earlier request recorded even after later requests recorded
    /// theirs (docs/scenario-space.md, "Scenario language").
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
}

/// The most events one ring holds (a pipeline's buffers, not a pool).
pub const MAX_EVENT_RING: u32 = 64;

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum GraphBuild {
    /// Captured from a stream.
    #[default]
    Captured,
    /// Built node by node with the graph API.
    Built,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GraphDecl {
    pub name: String,
    #[serde(default)]
    pub build: GraphBuild,
    pub nodes: Vec<GraphNodeDecl>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GraphNodeDecl {
    pub id: String,
    pub kernel: KernelSpec,
    /// Ids of graph nodes this one depends on.
    #[serde(default)]
    pub after: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum KernelKind {
    /// Spins on %globaltimer for exactly `duration_us`.
    #[default]
    Spin,
    MemoryBound,
    ComputeBound,
    Empty,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum LaunchApi {
    /// cudaLaunchKernel (runtime).
    #[default]
    Runtime,
    /// cuLaunchKernel (driver).
    Driver,
    /// cuLaunchKernelEx (driver, extensible config).
    DriverEx,
}

/// Which API an event record or a stream wait is called through, as [`LaunchApi`] says
/// for a launch: the runtime (`cudaEventRecord`, `cudaStreamWaitEvent`) or the driver
/// (`cuEventRecord`, `cuStreamWaitEvent`). Analyzers that know only one family of
/// names see different traces (baselines/README.md, `hta-critical-path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum EventApi {
    #[default]
    Runtime,
    Driver,
}

impl EventApi {
    fn is_runtime(&self) -> bool {
        *self == EventApi::Runtime
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KernelSpec {
    pub name: String,
    #[serde(default)]
    pub kind: KernelKind,
    pub duration_us: f64,
    /// Blocks; a grid smaller than the SM count leaves SMs for co-running kernels.
    #[serde(default = "default_grid")]
    pub grid: u32,
    #[serde(default = "default_block")]
    pub block: u32,
}

fn default_grid() -> u32 {
    132
}
fn default_block() -> u32 {
    128
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SyncTarget {
    Stream,
    Event,
    Device,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    Stream,
    Event,
    Graph,
}

/// One operation of a request program, executed in order by whichever host
/// thread currently carries the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Host computation of a fixed duration.
    HostWork {
        #[serde(default)]
        id: Option<String>,
        duration_us: f64,
    },
    /// Hand the request to a queue; its consumer thread continues the program.
    Handoff {
        queue: String,
    },
    Kernel {
        #[serde(default)]
        id: Option<String>,
        stream: String,
        name: String,
        #[serde(default)]
        kind: KernelKind,
        duration_us: f64,
        #[serde(default = "default_grid")]
        grid: u32,
        #[serde(default = "default_block")]
        block: u32,
        #[serde(default)]
        launch: LaunchApi,
        #[serde(default)]
        call_site: Option<String>,
    },
    Copy {
        #[serde(default)]
        id: Option<String>,
        stream: String,
        direction: CopyDirection,
        bytes: u64,
        #[serde(default)]
        memory: HostMemory,
        #[serde(default)]
        call_site: Option<String>,
    },
    Memset {
        #[serde(default)]
        id: Option<String>,
        stream: String,
        bytes: u64,
    },
    EventRecord {
        #[serde(default)]
        id: Option<String>,
        event: String,
        stream: String,
        /// Runtime (default) or driver API call.
        #[serde(default, skip_serializing_if = "EventApi::is_runtime")]
        api: EventApi,
        /// For an event ring (`EventDecl::count` > 1): whose slot, relative to
        /// this step's request (0: its own; -1: the previous request's).
        #[serde(default, skip_serializing_if = "is_zero")]
        request_offset: i32,
    },
    StreamWait {
        #[serde(default)]
        id: Option<String>,
        stream: String,
        event: String,
        /// Runtime (default) or driver API call.
        #[serde(default, skip_serializing_if = "EventApi::is_runtime")]
        api: EventApi,
        /// For an event ring (`EventDecl::count` > 1): whose slot, relative to
        /// this step's request (-1: the event the previous request recorded).
        /// A slot no request has recorded yet gates nothing, as a wait on a
        /// never-recorded CUDA event does.
        #[serde(default, skip_serializing_if = "is_zero")]
        request_offset: i32,
    },
    GraphLaunch {
        #[serde(default)]
        id: Option<String>,
        graph: String,
        stream: String,
    },
    Sync {
        #[serde(default)]
        id: Option<String>,
        target: SyncTarget,
        #[serde(default)]
        stream: Option<String>,
        #[serde(default)]
        event: Option<String>,
    },
    NvtxPush {
        name: String,
    },
    NvtxPop,
    /// Destroy and recreate an object: its raw handle repeats, its generation advances.
    Recreate {
        object: ObjectKind,
        name: String,
    },
}

impl Step {
    pub fn id(&self) -> Option<&str> {
        match self {
            Step::HostWork { id, .. }
            | Step::Kernel { id, .. }
            | Step::Copy { id, .. }
            | Step::Memset { id, .. }
            | Step::EventRecord { id, .. }
            | Step::StreamWait { id, .. }
            | Step::GraphLaunch { id, .. }
            | Step::Sync { id, .. } => id.as_deref(),
            _ => None,
        }
    }

    pub fn op_name(&self) -> &'static str {
        match self {
            Step::HostWork { .. } => "host_work",
            Step::Handoff { .. } => "handoff",
            Step::Kernel { .. } => "kernel",
            Step::Copy { .. } => "copy",
            Step::Memset { .. } => "memset",
            Step::EventRecord { .. } => "event_record",
            Step::StreamWait { .. } => "stream_wait",
            Step::GraphLaunch { .. } => "graph_launch",
            Step::Sync { .. } => "sync",
            Step::NvtxPush { .. } => "nvtx_push",
            Step::NvtxPop => "nvtx_pop",
            Step::Recreate { .. } => "recreate",
        }
    }

    /// The kernel a kernel step launches.
    pub fn kernel_spec(&self) -> Option<KernelSpec> {
        match self {
            Step::Kernel {
                name,
                kind,
                duration_us,
                grid,
                block,
                ..
            } => Some(KernelSpec {
                name: name.clone(),
                kind: *kind,
                duration_us: *duration_us,
                grid: *grid,
                block: *block,
            }),
            _ => None,
        }
    }

    /// Does the step issue a device operation (and so have a launch edge)?
    pub fn is_device_op(&self) -> bool {
        matches!(
            self,
            Step::Kernel { .. }
                | Step::Copy { .. }
                | Step::Memset { .. }
                | Step::GraphLaunch { .. }
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Program {
    pub name: String,
    /// Thread where each request of this program begins.
    pub start: String,
    /// How many requests (instances) run.
    #[serde(default = "one")]
    pub requests: u32,
    /// Arrival spacing between requests.
    #[serde(default)]
    pub interval_us: f64,
    /// Arrival of the first request.
    #[serde(default)]
    pub offset_us: f64,
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InjectionKind {
    /// Preempt the thread about to issue the target call.
    CpuDeschedule,
    /// The application's own host work before the target call grows (a late
    /// launch with the thread running: no preemption, no faults).
    HostDelay,
    /// Minor page faults in the target thread just before the call.
    HostPageFaultMinor,
    /// Major page faults in the target thread just before the call.
    HostPageFaultMajor,
    /// Concurrent bulk copies on other streams queued ahead of the target copy.
    PcieContention,
    /// A co-running hog kernel holding the SMs when the target becomes ready.
    OccupancyPressure,
    /// Extra work enqueued on the target's stream just before it.
    StreamBacklog,
    /// Lengthen the target producer, which gates its consumer through an event.
    EventWait,
    /// Lengthen the target graph node, which gates its dependants.
    GraphDependency,
    /// Lengthen the target device op that a host call implicitly synchronizes with.
    SyncWait,
    /// Lengthen the target kernel (slower device work), delaying what follows it in its stream.
    KernelSlowdown,
    /// Slow the target copy's own transfer.
    DelayedMemcpy,
    /// Unrelated concurrent work that does not touch the target (negative control).
    UnrelatedWork,
    /// Lose the target's device record in the recorder.
    RecordLoss,
}

impl InjectionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            InjectionKind::CpuDeschedule => "cpu_deschedule",
            InjectionKind::HostDelay => "host_delay",
            InjectionKind::KernelSlowdown => "kernel_slowdown",
            InjectionKind::HostPageFaultMinor => "host_page_fault_minor",
            InjectionKind::HostPageFaultMajor => "host_page_fault_major",
            InjectionKind::PcieContention => "pcie_contention",
            InjectionKind::OccupancyPressure => "occupancy_pressure",
            InjectionKind::StreamBacklog => "stream_backlog",
            InjectionKind::EventWait => "event_wait",
            InjectionKind::GraphDependency => "graph_dependency",
            InjectionKind::SyncWait => "sync_wait",
            InjectionKind::DelayedMemcpy => "delayed_memcpy",
            InjectionKind::UnrelatedWork => "unrelated_work",
            InjectionKind::RecordLoss => "record_loss",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Injection {
    pub kind: InjectionKind,
    /// Step id the injection applies to (graph node id for `graph_dependency`).
    pub target: String,
    /// Program of the target step (default: the first program).
    #[serde(default)]
    pub program: Option<String>,
    /// Request instance of the target (default 0).
    #[serde(default)]
    pub request: u32,
    /// Requested delay.
    #[serde(default)]
    pub magnitude_us: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SymptomDecl {
    /// Step id of the operation asked about.
    pub step: String,
    /// For a `graph_launch` step: the graph node asked about.
    #[serde(default)]
    pub graph_node: Option<String>,
    #[serde(default)]
    pub program: Option<String>,
    #[serde(default)]
    pub request: u32,
    #[serde(default)]
    pub question: Question,
    /// Expected answer for call-site / operator questions.
    #[serde(default)]
    pub answer: Option<String>,
}

/// A semantic problem with a scenario, with the path of the offending field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioProblem {
    pub path: String,
    pub message: String,
}

impl Scenario {
    pub fn program(&self, name: Option<&str>) -> Option<&Program> {
        match name {
            Some(n) => self.programs.iter().find(|p| p.name == n),
            None => self.programs.first(),
        }
    }
}
