//! Scenario language (docs/design.md). A scenario declares host threads and queues,
//! streams, events and graphs, one or more request programs, an injection and
//! the symptom asked about. Unknown keys are rejected by serde; impossible
//! references by [`Scenario::check`].

use crate::labels::{CauseLabel, Mode, Question};
use crate::trace::{CopyDirection, HostMemory};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

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

    /// A push onto a bounded queue that could wait for room forever: its
    /// thread waits for the queue's consumer to take an item, and that thread
    /// itself waits, through pushes onto bounded queues, for the first (its
    /// own consumer included). The path of the push and why.
    fn bounded_queue_cycle(&self) -> Option<(String, String)> {
        // (pushing thread, consumer thread, path, queue) of every push onto a bounded queue.
        let mut waits: Vec<(&str, &str, String, &str)> = Vec::new();
        for (pi, p) in self.programs.iter().enumerate() {
            let mut on = p.start.as_str();
            for (si, s) in p.steps.iter().enumerate() {
                let Step::Handoff { queue } = s else { continue };
                let Some(decl) = self.queues.iter().find(|q| &q.name == queue) else {
                    break;
                };
                if decl.capacity.is_some() {
                    let path = format!("programs[{pi}].steps[{si}].queue");
                    waits.push((on, decl.consumer.as_str(), path, queue.as_str()));
                }
                on = decl.consumer.as_str();
            }
        }
        for (from, to, path, queue) in &waits {
            let mut seen = HashSet::new();
            let mut stack = vec![*to];
            while let Some(t) = stack.pop() {
                if t == *from {
                    return Some((
                        path.clone(),
                        format!(
                            "thread `{from}` pushes onto bounded queue `{queue}`, whose consumer `{to}` \
                             waits for room that only `{from}` makes (through bounded queues): \
                             both could wait forever"
                        ),
                    ));
                }
                if seen.insert(t) {
                    stack.extend(waits.iter().filter(|w| w.0 == t).map(|w| w.1));
                }
            }
        }
        None
    }

    /// Checks references and invariants that the types can't express.
    pub fn check(&self) -> Vec<ScenarioProblem> {
        let mut out = Vec::new();
        let mut bad = |path: String, message: String| out.push(ScenarioProblem { path, message });
        if self.schema_version != crate::SCHEMA_VERSION {
            bad(
                "schema_version".into(),
                format!(
                    "expected {}, found {}",
                    crate::SCHEMA_VERSION,
                    self.schema_version
                ),
            );
        }
        let names = |it: &mut dyn Iterator<Item = &str>,
                     what: &str,
                     path: &str,
                     bad: &mut dyn FnMut(String, String)| {
            let mut seen = HashSet::new();
            for (i, n) in it.enumerate() {
                if !seen.insert(n.to_string()) {
                    bad(
                        format!("{path}[{i}].name"),
                        format!("duplicate {what} name `{n}`"),
                    );
                }
            }
            seen
        };
        let threads = names(
            &mut self.threads.iter().map(|t| t.name.as_str()),
            "thread",
            "threads",
            &mut bad,
        );
        let queues = names(
            &mut self.queues.iter().map(|t| t.name.as_str()),
            "queue",
            "queues",
            &mut bad,
        );
        let streams = names(
            &mut self.streams.iter().map(|t| t.name.as_str()),
            "stream",
            "streams",
            &mut bad,
        );
        let events = names(
            &mut self.events.iter().map(|t| t.name.as_str()),
            "event",
            "events",
            &mut bad,
        );
        for (i, e) in self.events.iter().enumerate() {
            if !(1..=MAX_EVENT_RING).contains(&e.count) {
                bad(
                    format!("events[{i}].count"),
                    format!("an event ring holds 1 to {MAX_EVENT_RING} events"),
                );
            }
        }
        let graphs = names(
            &mut self.graphs.iter().map(|t| t.name.as_str()),
            "graph",
            "graphs",
            &mut bad,
        );
        // Program names are only checked for duplicates.
        names(
            &mut self.programs.iter().map(|t| t.name.as_str()),
            "program",
            "programs",
            &mut bad,
        );
        if self.repetitions == 0 {
            bad("repetitions".into(), "must be at least 1".into());
        }
        if self.programs.is_empty() {
            bad("programs".into(), "at least one program is required".into());
        }
        for (i, t) in self.threads.iter().enumerate() {
            if t.count == 0 {
                bad(
                    format!("threads[{i}].count"),
                    "a thread pool needs at least one thread".into(),
                );
            }
        }
        for (i, q) in self.queues.iter().enumerate() {
            if !threads.contains(&q.consumer) {
                bad(
                    format!("queues[{i}].consumer"),
                    format!("no thread named `{}`", q.consumer),
                );
            }
            if q.capacity == Some(0) {
                bad(
                    format!("queues[{i}].capacity"),
                    "a bounded queue holds at least one item (leave `capacity` out for an unbounded one)".into(),
                );
            }
        }
        if let Some((path, message)) = self.bounded_queue_cycle() {
            bad(path, message);
        }
        for (gi, g) in self.graphs.iter().enumerate() {
            let mut ids: Vec<&str> = Vec::new();
            for (ni, n) in g.nodes.iter().enumerate() {
                if ids.contains(&n.id.as_str()) {
                    bad(
                        format!("graphs[{gi}].nodes[{ni}].id"),
                        format!("duplicate graph node id `{}`", n.id),
                    );
                }
                for (ai, a) in n.after.iter().enumerate() {
                    // Dependencies must name earlier nodes: this makes cycles impossible.
                    if !ids.contains(&a.as_str()) {
                        bad(
                            format!("graphs[{gi}].nodes[{ni}].after[{ai}]"),
                            format!("`{a}` is not an earlier node of graph `{}` (dependencies must be acyclic)", g.name),
                        );
                    }
                }
                check_kernel(
                    &n.kernel,
                    &format!("graphs[{gi}].nodes[{ni}].kernel"),
                    &mut bad,
                );
                ids.push(&n.id);
            }
            if g.nodes.is_empty() {
                bad(
                    format!("graphs[{gi}].nodes"),
                    "a graph needs at least one node".into(),
                );
            }
        }
        let mut step_ids: Vec<(String, String)> = Vec::new();
        for (pi, p) in self.programs.iter().enumerate() {
            if !threads.contains(&p.start) {
                bad(
                    format!("programs[{pi}].start"),
                    format!("no thread named `{}`", p.start),
                );
            }
            if p.requests == 0 {
                bad(
                    format!("programs[{pi}].requests"),
                    "must be at least 1".into(),
                );
            }
            limits::check_time(
                p.interval_us,
                &format!("programs[{pi}].interval_us"),
                &mut bad,
            );
            limits::check_time(p.offset_us, &format!("programs[{pi}].offset_us"), &mut bad);
            let mut depth = 0i32;
            for (si, s) in p.steps.iter().enumerate() {
                let path = format!("programs[{pi}].steps[{si}]");
                if let Some(id) = s.id() {
                    if step_ids
                        .iter()
                        .any(|(prog, sid)| prog == &p.name && sid == id)
                    {
                        bad(
                            format!("{path}.id"),
                            format!("duplicate step id `{id}` in program `{}`", p.name),
                        );
                    }
                    step_ids.push((p.name.clone(), id.to_string()));
                }
                let stream_ref = |s: &str, bad: &mut dyn FnMut(String, String)| {
                    if !streams.contains(s) {
                        bad(format!("{path}.stream"), format!("no stream named `{s}`"));
                    }
                };
                let event_ref = |e: &str, bad: &mut dyn FnMut(String, String)| {
                    if !events.contains(e) {
                        bad(format!("{path}.event"), format!("no event named `{e}`"));
                    }
                };
                match s {
                    Step::HostWork { duration_us, .. } => {
                        limits::check_time(*duration_us, &format!("{path}.duration_us"), &mut bad)
                    }
                    Step::Handoff { queue } => {
                        if !queues.contains(queue) {
                            bad(format!("{path}.queue"), format!("no queue named `{queue}`"));
                        }
                    }
                    Step::Kernel { stream, .. } => {
                        stream_ref(stream, &mut bad);
                        check_kernel(&s.kernel_spec().expect("kernel step"), &path, &mut bad);
                    }
                    Step::Copy { stream, bytes, .. } => {
                        stream_ref(stream, &mut bad);
                        if *bytes == 0 {
                            bad(
                                format!("{path}.bytes"),
                                "a copy needs at least one byte".into(),
                            );
                        }
                        limits::check_bytes(*bytes, &format!("{path}.bytes"), &mut bad);
                    }
                    Step::Memset { stream, bytes, .. } => {
                        stream_ref(stream, &mut bad);
                        limits::check_bytes(*bytes, &format!("{path}.bytes"), &mut bad);
                    }
                    Step::EventRecord {
                        event,
                        stream,
                        request_offset,
                        ..
                    }
                    | Step::StreamWait {
                        event,
                        stream,
                        request_offset,
                        ..
                    } => {
                        stream_ref(stream, &mut bad);
                        event_ref(event, &mut bad);
                        let count = self
                            .events
                            .iter()
                            .find(|e| &e.name == event)
                            .map_or(1, |e| e.count);
                        if request_offset.unsigned_abs() >= count {
                            bad(
                                format!("{path}.request_offset"),
                                format!("{request_offset} reaches past the {count} event(s) of `{event}`: a ring of N events reaches at most N - 1 requests away"),
                            );
                        }
                    }
                    Step::GraphLaunch { graph, stream, .. } => {
                        stream_ref(stream, &mut bad);
                        if !graphs.contains(graph) {
                            bad(format!("{path}.graph"), format!("no graph named `{graph}`"));
                        }
                    }
                    Step::Sync {
                        target,
                        stream,
                        event,
                        ..
                    } => match target {
                        SyncTarget::Stream => match stream {
                            Some(s) => stream_ref(s, &mut bad),
                            None => bad(
                                format!("{path}.stream"),
                                "a stream sync needs `stream`".into(),
                            ),
                        },
                        SyncTarget::Event => match event {
                            Some(e) => event_ref(e, &mut bad),
                            None => bad(
                                format!("{path}.event"),
                                "an event sync needs `event`".into(),
                            ),
                        },
                        SyncTarget::Device => {}
                    },
                    Step::NvtxPush { .. } => depth += 1,
                    Step::NvtxPop => {
                        depth -= 1;
                        if depth < 0 {
                            bad(path.clone(), "nvtx_pop without a matching nvtx_push".into());
                        }
                    }
                    Step::Recreate { object, name } => {
                        let known = match object {
                            ObjectKind::Stream => &streams,
                            ObjectKind::Event => &events,
                            ObjectKind::Graph => &graphs,
                        };
                        if !known.contains(name) {
                            bad(
                                format!("{path}.name"),
                                format!("no {object:?} named `{name}`").to_lowercase(),
                            );
                        }
                    }
                }
            }
        }
        let find_step =
            |program: &Option<String>, step: &str, request: u32| -> Result<&Step, String> {
                let p = self.program(program.as_deref()).ok_or_else(|| {
                    format!(
                        "no program named `{}`",
                        program.as_deref().unwrap_or("<first>")
                    )
                })?;
                if request >= p.requests {
                    return Err(format!(
                        "program `{}` has {} requests; request {request} does not exist",
                        p.name, p.requests
                    ));
                }
                p.steps
                    .iter()
                    .find(|s| s.id() == Some(step))
                    .ok_or_else(|| format!("no step with id `{step}` in program `{}`", p.name))
            };
        match find_step(
            &self.symptom.program,
            &self.symptom.step,
            self.symptom.request,
        ) {
            Ok(s) => {
                if !(s.is_device_op() || matches!(s, Step::Sync { .. } | Step::Copy { .. })) {
                    bad(
                        "symptom.step".into(),
                        format!(
                            "a symptom must be a device operation or a blocking call, not `{}`",
                            s.op_name()
                        ),
                    );
                }
            }
            Err(m) => bad("symptom.step".into(), m),
        }
        if matches!(
            self.symptom.question,
            Question::CallSite | Question::Operator
        ) && self.symptom.answer.is_none()
        {
            bad(
                "symptom.answer".into(),
                "call_site and operator questions need an expected `answer`".into(),
            );
        }
        for (i, n) in self.names.iter().enumerate() {
            if n.is_empty() {
                bad(
                    format!("names[{i}]"),
                    "a kernel name cannot be empty".into(),
                );
            }
        }
        if let Some(inj) = &self.injection {
            limits::check_time(inj.magnitude_us, "injection.magnitude_us", &mut bad);
            let in_graph = inj.kind == InjectionKind::GraphDependency
                && self
                    .graphs
                    .iter()
                    .any(|g| g.nodes.iter().any(|n| n.id == inj.target));
            if !in_graph {
                if let Err(m) = find_step(&inj.program, &inj.target, inj.request) {
                    bad("injection.target".into(), m);
                }
            }
        }
        // Totals last: a value past the limit on its own is reported at its path.
        limits::size_problems(self, &mut bad);
        out
    }
}

fn check_kernel(k: &KernelSpec, path: &str, bad: &mut dyn FnMut(String, String)) {
    limits::check_time(k.duration_us, &format!("{path}.duration_us"), bad);
    limits::check_shape(k.grid, k.block, path, bad);
}
