//! Formats of the megakernel track (docs/design.md, "The megakernel track").
//!
//! A megakernel case is recorded as a standard run [`crate::Bundle`] — what
//! kernel-level CUPTI sees (one launch call, one long kernel), the ground truth
//! with one [`crate::NodeKind::Task`] node per task and `graph` / `event` edges
//! between them, the injected fault, and two symptoms on the kernel (its cause,
//! and the task class affected, asked as an `operator` question) — plus a
//! sidecar [`TaskTelemetry`] holding what each device monitor captured of the
//! same work, the truth about tasks that profilers must not see
//! ([`TaskTruth`]), and the scenario. A profiler of this track reads a
//! [`TaskView`]: the standard trace view of the bundle plus at most one
//! monitor's [`Capture`] (no truth).
//!
//! Task classes have stable ids (their position in [`CLASSES`]); hook kinds
//! have stable ids ([`HookKind::id`]); both are the device ABI's values.

use crate::labels::CauseLabel;
use crate::view::TraceView;
use crate::Ns;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Version of the device hook ABI these formats describe (`MK_ABI_VERSION`).
pub const HOOK_ABI_VERSION: u32 = 1;

/// Task classes, by stable id.
pub const CLASSES: [&str; 4] = ["attention", "gemm", "communication", "sampling"];

/// The stable id of a task class name.
pub fn class_id(name: &str) -> Option<u32> {
    CLASSES.iter().position(|c| *c == name).map(|i| i as u32)
}

/// Name of a class id (`class<N>` for ids past [`CLASSES`]).
pub fn class_name(id: u32) -> String {
    CLASSES
        .get(id as usize)
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("class{id}"))
}

/// The sampling hash of the device (`mk_hash`, "lowbias32"). A task is sampled
/// by a monitor of period N and seed S iff `sample_hash(task ^ S) % N == 0`.
pub fn sample_hash(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// Whether `task` is sampled by a monitor with this period and seed.
#[allow(clippy::manual_is_multiple_of)] // `is_multiple_of` is newer than rust-version 1.85
pub fn sampled(task: u32, period: u32, seed: u32) -> bool {
    period <= 1 || sample_hash(task ^ seed) % period == 0
}

/// Histogram bucket of a span (`mk_bucket`): bucket b ≥ 1 holds
/// [2^(b+8), 2^(b+9)) ns, bucket 0 holds [0, 512) ns, the last one is open.
pub fn bucket(ns: u64) -> usize {
    if ns < 512 {
        return 0;
    }
    let b = 63 - ns.leading_zeros() as usize - 8;
    b.min(BUCKETS - 1)
}

/// Lower bound (ns) of a histogram bucket.
pub fn bucket_floor(b: usize) -> u64 {
    if b == 0 {
        0
    } else {
        1u64 << (b + 8)
    }
}

/// Histogram buckets per phase.
pub const BUCKETS: usize = 24;

/// The four phases of a task, in order: dispatch latency (ready − its
/// dependency event's completion), queueing (taken up − ready), dependency
/// wait (wait end − wait begin), execution (end − start).
pub const PHASES: [&str; 4] = ["notify", "queue", "wait", "exec"];

/// A hook kind, with its stable device id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookKind {
    Ready,
    Assigned,
    Start,
    End,
    WaitBegin,
    WaitEnd,
    QueuePressure,
}

impl HookKind {
    pub const ALL: [HookKind; 7] = [
        HookKind::Ready,
        HookKind::Assigned,
        HookKind::Start,
        HookKind::End,
        HookKind::WaitBegin,
        HookKind::WaitEnd,
        HookKind::QueuePressure,
    ];
    pub fn id(self) -> u32 {
        self as u32
    }
    pub fn from_id(id: u32) -> Option<HookKind> {
        Self::ALL.get(id as usize).copied()
    }
}

/// One hook event (32 bytes on the device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskEvent {
    /// 64-bit device timestamp (ns; `%globaltimer` on a GPU, never wraps).
    pub ts: Ns,
    pub kind: HookKind,
    pub task: u32,
    /// Stable class id (index into [`CLASSES`]).
    pub class: u32,
    /// The worker the event is about (the queue's owner for ready / assigned / pressure).
    pub worker: u32,
    /// ready / wait: the event id; assigned / pressure: the queue depth.
    pub aux: u32,
    pub task_gen: u32,
    pub req_gen: u32,
}

/// Coverage of one task class: events (log) or tasks (aggregation) the
/// configuration asked for, those recorded, those lost for lack of room. The
/// rest of `eligible` was left out by sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Coverage {
    pub class: u32,
    pub eligible: u64,
    pub observed: u64,
    pub dropped: u64,
}

impl Coverage {
    /// observed / eligible (1 when nothing was eligible).
    pub fn ratio(&self) -> f64 {
        if self.eligible == 0 {
            1.0
        } else {
            self.observed as f64 / self.eligible as f64
        }
    }
}

/// A monitor configuration (what the device reads at launch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MonitorConfig {
    /// Monitor name (`none`, `task-log`, `aggregate`, `task-log-budget`, `aggregate-sampled`, …).
    pub name: String,
    /// Hook ABI version (must be [`HOOK_ABI_VERSION`]).
    pub version: u32,
    pub log: bool,
    pub aggregate: bool,
    /// Bit c: class c is eligible.
    pub class_mask: u32,
    /// Bit k: hook kind k is logged.
    pub event_mask: u32,
    pub req_gen_min: u32,
    pub req_gen_max: u32,
    /// 1: every task; N: one task in N (by [`sampled`]).
    pub sample_period: u32,
    pub sample_seed: u32,
    /// End / wait-end events are logged only for spans at least this long.
    pub min_span_ns: u64,
    /// Events per worker ring (the telemetry budget of a log).
    pub ring_capacity: u32,
    /// Queue depth whose upward crossing emits a queue-pressure event (0: off).
    pub pressure_threshold: u32,
}

impl MonitorConfig {
    fn base(name: &str) -> MonitorConfig {
        MonitorConfig {
            name: name.to_string(),
            version: HOOK_ABI_VERSION,
            log: false,
            aggregate: false,
            class_mask: u32::MAX,
            event_mask: (1 << HookKind::ALL.len()) - 1,
            req_gen_min: 0,
            req_gen_max: u32::MAX,
            sample_period: 1,
            sample_seed: 0,
            min_span_ns: 0,
            ring_capacity: u32::MAX,
            pressure_threshold: 4,
        }
    }
    /// Hooks compiled in, nothing recorded.
    pub fn none() -> MonitorConfig {
        Self::base("none")
    }
    /// Every hook event of every task (the compiler-native full task log).
    pub fn task_log(ring_capacity: u32) -> MonitorConfig {
        MonitorConfig {
            log: true,
            ring_capacity,
            ..Self::base("task-log")
        }
    }
    /// Per-class phase histograms, per-class worker counts, queue pressure.
    pub fn aggregate() -> MonitorConfig {
        MonitorConfig {
            aggregate: true,
            ..Self::base("aggregate")
        }
    }
    /// A log under a telemetry budget: `ring_capacity` events per worker.
    pub fn task_log_budget(ring_capacity: u32) -> MonitorConfig {
        MonitorConfig {
            log: true,
            ring_capacity,
            ..Self::base("task-log-budget")
        }
    }
    /// Aggregation of one task in `period`.
    pub fn aggregate_sampled(period: u32, seed: u32) -> MonitorConfig {
        MonitorConfig {
            aggregate: true,
            sample_period: period,
            sample_seed: seed,
            ..Self::base("aggregate-sampled")
        }
    }
    /// Whether this configuration's coverage is partial by design (a budget or sampling).
    pub fn is_budgeted(&self) -> bool {
        self.sample_period > 1 || (self.log && self.ring_capacity != u32::MAX)
    }
}

/// Per-class aggregates of one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhaseAggregate {
    /// Counts per [`bucket`].
    pub hist: Vec<u32>,
    pub sum_ns: u64,
    pub max_ns: u64,
    /// The task with the longest span.
    pub max_task: u32,
}

/// Aggregates of one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassAggregate {
    pub class: u32,
    pub tasks: u64,
    /// One per phase of [`PHASES`].
    pub phases: Vec<PhaseAggregate>,
    /// Tasks of this class each worker ran.
    pub worker_tasks: Vec<u32>,
}

/// What an aggregation monitor exports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Aggregates {
    pub classes: Vec<ClassAggregate>,
    /// Upward crossings of the queue-pressure threshold per worker.
    pub pressure_crossings: Vec<u32>,
    /// Deepest queue per worker.
    pub max_depth: Vec<u32>,
}

/// What CUPTI PC sampling produced (or why it could not run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PcSampling {
    pub available: bool,
    /// Why not, or what was collected.
    pub detail: String,
    /// Samples per task class, attributed through the task body's code range
    /// (simulated runs) — empty when unavailable.
    #[serde(default)]
    pub class_samples: Vec<u64>,
    /// Samples in the (shared) dependency-wait loop.
    #[serde(default)]
    pub wait_samples: u64,
    /// Samples in the scheduler's idle loop (empty queue, or a held task).
    #[serde(default)]
    pub idle_samples: u64,
}

/// One monitor's capture of one launch of the megakernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Capture {
    pub config: MonitorConfig,
    /// The launch's outer kernel duration with this monitor (ns).
    pub kernel_ns: Ns,
    /// Logged events (empty for aggregation-only monitors), sorted by time.
    #[serde(default)]
    pub events: Vec<TaskEvent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregates: Option<Aggregates>,
    /// Per-class coverage.
    pub coverage: Vec<Coverage>,
    /// Bytes the host copied back for this monitor (rings as written, or the aggregates).
    pub bytes_exported: u64,
    /// Time to apply this configuration to a loaded kernel (copy + sync), ns.
    pub config_apply_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pc_sampling: Option<PcSampling>,
}

/// One task's times in a task log (device clock; a time whose event was not
/// logged stays 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskTimes {
    pub class: u32,
    pub ready: u64,
    pub wait_begin: u64,
    pub wait_end: u64,
    pub start: u64,
    pub end: u64,
    pub worker: u32,
    /// Whether any event of the task was logged.
    pub seen: bool,
}

impl Capture {
    /// The times of tasks `0..tasks` from the logged events (events of other
    /// tasks are ignored).
    pub fn task_times(&self, tasks: usize) -> Vec<TaskTimes> {
        let mut v = vec![TaskTimes::default(); tasks];
        for e in &self.events {
            let Some(t) = v.get_mut(e.task as usize) else {
                continue;
            };
            t.class = e.class;
            t.seen = true;
            match e.kind {
                HookKind::Ready => t.ready = e.ts,
                HookKind::WaitBegin => t.wait_begin = e.ts,
                HookKind::WaitEnd => t.wait_end = e.ts,
                HookKind::Start => {
                    t.start = e.ts;
                    t.worker = e.worker;
                }
                HookKind::End => t.end = e.ts,
                HookKind::Assigned | HookKind::QueuePressure => {}
            }
        }
        v
    }

    /// Pooled coverage over every class.
    pub fn total_coverage(&self) -> Coverage {
        let mut c = Coverage {
            class: u32::MAX,
            ..Default::default()
        };
        for x in &self.coverage {
            c.eligible += x.eligible;
            c.observed += x.observed;
            c.dropped += x.dropped;
        }
        c
    }

    /// How many logged events are of `kind`.
    pub fn events_of(&self, kind: HookKind) -> usize {
        self.events.iter().filter(|e| e.kind == kind).count()
    }
}

/// Kinds of task-level injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MkInjectionKind {
    /// Every task of one class runs longer.
    ClassDelay,
    /// The routing puts extra tasks of one class on one worker, in every op of that class.
    RoutingSkew,
    /// One dependency event's notification reaches its waiters late.
    LateNotification,
    /// One worker's queue receives a burst of one op's tasks.
    QueueOversubscription,
    /// One ready task is not taken up until late.
    ReadyStarvation,
}

impl MkInjectionKind {
    pub fn cause(self) -> CauseLabel {
        match self {
            MkInjectionKind::ClassDelay => CauseLabel::TaskClassDelay,
            MkInjectionKind::RoutingSkew => CauseLabel::RoutingSkew,
            MkInjectionKind::LateNotification => CauseLabel::LateNotification,
            MkInjectionKind::QueueOversubscription => CauseLabel::QueueOversubscription,
            MkInjectionKind::ReadyStarvation => CauseLabel::ReadyStarvation,
        }
    }
}

/// The injection of a megakernel scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MkInjection {
    pub kind: MkInjectionKind,
    /// The affected task class.
    pub class: String,
    /// Requested lateness of the whole kernel, µs. Ignored when `match_variant` is set.
    #[serde(default)]
    pub magnitude_us: f64,
    /// Size this injection so the kernel is as late as this variant of the same
    /// family (the pair's outer kernel durations then agree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_variant: Option<String>,
    /// Decode step (global, 0-based) of point injections (default: the middle one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
}

/// Body of a task class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum TaskBody {
    /// Timed spin on the device clock (exact cost).
    #[default]
    Spin,
    /// Memory-bound copy over the worker's scratch slice.
    Memory,
}

/// A task class of the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    pub name: String,
    /// Tasks per operator instance (0: one per worker).
    #[serde(default)]
    pub tiles: u32,
    #[serde(default)]
    pub body: TaskBody,
    /// Cost of one task, µs (a memory body is sized to take about this long).
    pub cost_us: f64,
    /// Memory body: KiB copied per pass.
    #[serde(default)]
    pub kib: u32,
}

/// A megakernel scenario (`megakernel/catalog/*.yaml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MkScenario {
    pub schema_version: u32,
    /// `family.variant`.
    pub name: String,
    pub family: String,
    pub variant: String,
    pub cause: CauseLabel,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub seed: u64,
    #[serde(default = "three")]
    pub repetitions: u32,
    /// Workers (persistent blocks); 0: one per SM (the simulator uses 132).
    #[serde(default)]
    pub workers: u32,
    /// Request generations, run one after the other.
    #[serde(default = "two")]
    pub requests: u32,
    /// Decode steps per request (each a task generation).
    #[serde(default = "four")]
    pub decode_steps: u32,
    /// Layers per decode step (each: attention → gemm → communication); a step ends with sampling.
    #[serde(default = "two")]
    pub layers: u32,
    /// The four classes, by name; defaults when empty.
    #[serde(default)]
    pub classes: Vec<ClassSpec>,
    pub injection: MkInjection,
}

fn two() -> u32 {
    2
}
fn three() -> u32 {
    3
}
fn four() -> u32 {
    4
}

/// The problem every megakernel format reports when its `schema_version` is
/// not the one this build reads (wording shared by the three formats).
fn schema_version_problem(found: u32) -> Option<(String, String)> {
    (found != crate::SCHEMA_VERSION).then(|| {
        (
            "schema_version".into(),
            format!("expected {}, found {found}", crate::SCHEMA_VERSION),
        )
    })
}

impl MkScenario {
    /// Semantic problems (path, message).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        out.extend(schema_version_problem(self.schema_version));
        if let Some(message) = crate::identifier::identifier_problem(&self.name) {
            out.push(("name".into(), message));
        }
        if self.name != format!("{}.{}", self.family, self.variant) {
            out.push((
                "name".into(),
                format!("expected `{}.{}`", self.family, self.variant),
            ));
        }
        if self.cause != self.injection.kind.cause() {
            out.push((
                "cause".into(),
                format!(
                    "the injection `{:?}` causes `{}`",
                    self.injection.kind,
                    self.injection.kind.cause()
                ),
            ));
        }
        if class_id(&self.injection.class).is_none() {
            out.push((
                "injection.class".into(),
                format!(
                    "unknown task class `{}`, expected one of {CLASSES:?}",
                    self.injection.class
                ),
            ));
        }
        if self.injection.match_variant.is_none()
            && !(self.injection.magnitude_us.is_finite() && self.injection.magnitude_us > 0.0)
        {
            out.push((
                "injection.magnitude_us".into(),
                "must be a positive number of µs (or set match_variant)".into(),
            ));
        }
        for (f, v) in [
            ("requests", self.requests),
            ("decode_steps", self.decode_steps),
            ("layers", self.layers),
            ("repetitions", self.repetitions),
        ] {
            if v == 0 {
                out.push((f.into(), "must be at least 1".into()));
            }
        }
        if let Some(s) = self.injection.step {
            // In u64: the product of two u32 counts does not overflow.
            let steps = u64::from(self.requests) * u64::from(self.decode_steps);
            if u64::from(s) >= steps {
                out.push((
                    "injection.step".into(),
                    format!("step {s} out of range (the run has {steps} decode steps)"),
                ));
            }
        }
        for (i, c) in self.classes.iter().enumerate() {
            if class_id(&c.name) != Some(i as u32) {
                out.push((
                    format!("classes[{i}].name"),
                    format!(
                        "expected `{}` (classes are listed by stable id)",
                        class_name(i as u32)
                    ),
                ));
            }
            if !(c.cost_us.is_finite() && c.cost_us > 0.0) {
                out.push((format!("classes[{i}].cost_us"), "must be positive".into()));
            }
        }
        if !self.classes.is_empty() && self.classes.len() != CLASSES.len() {
            out.push((
                "classes".into(),
                format!("list all {} classes or none", CLASSES.len()),
            ));
        }
        out
    }

    /// The class table, with defaults filled in.
    pub fn class_specs(&self) -> Vec<ClassSpec> {
        if !self.classes.is_empty() {
            return self.classes.clone();
        }
        vec![
            ClassSpec {
                name: "attention".into(),
                tiles: 0,
                body: TaskBody::Spin,
                cost_us: 20.0,
                kib: 0,
            },
            ClassSpec {
                name: "gemm".into(),
                tiles: 0,
                body: TaskBody::Memory,
                cost_us: 25.0,
                kib: 128,
            },
            ClassSpec {
                name: "communication".into(),
                tiles: 0,
                body: TaskBody::Spin,
                cost_us: 8.0,
                kib: 0,
            },
            ClassSpec {
                name: "sampling".into(),
                tiles: 2,
                body: TaskBody::Spin,
                cost_us: 15.0,
                kib: 0,
            },
        ]
    }
}

impl crate::io::Readable for MkScenario {
    const WHAT: &'static str = "megakernel scenario";
    fn problems(&self) -> Vec<(String, String)> {
        MkScenario::problems(self)
    }
}

/// The truth about tasks that only the evaluator reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskTruth {
    pub cause: CauseLabel,
    /// The task class the injection affected.
    pub affected_class: String,
    /// Tasks the injection acted on (the evidence a monitor must cover).
    pub injected_tasks: Vec<u32>,
    /// Ground-truth node of each task (`nodes[task]`).
    pub task_nodes: Vec<u32>,
    /// Requested and measured lateness of the kernel against its no-injection twin, µs.
    pub requested_us: f64,
    pub measured_us: f64,
    /// Injection parameters as realised (e.g. per-task delay, tasks moved, hold).
    pub realised: String,
}

/// The sidecar of a megakernel bundle (`tasks.json` beside `bundle.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskTelemetry {
    pub schema_version: u32,
    /// `Bundle::id()` of the bundle this belongs to.
    pub bundle: String,
    pub scenario: MkScenario,
    pub workers: u32,
    pub tasks: u32,
    /// `sim` or `cuda`.
    pub backend: String,
    /// One capture per monitor configuration run on this case.
    pub captures: Vec<Capture>,
    /// The same monitors' captures of the no-injection twin (a known-good run
    /// of the same work, what a profiler compares against), same order.
    #[serde(default)]
    pub reference: Vec<Capture>,
    pub truth: TaskTruth,
}

impl crate::io::Readable for TaskTelemetry {
    const WHAT: &'static str = "megakernel task telemetry";
    fn problems(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .scenario
            .problems()
            .into_iter()
            .map(|(p, m)| (format!("scenario.{p}"), m))
            .collect();
        out.extend(schema_version_problem(self.schema_version));
        if self.truth.task_nodes.len() != self.tasks as usize {
            out.push((
                "truth.task_nodes".into(),
                format!(
                    "{} entries for {} tasks",
                    self.truth.task_nodes.len(),
                    self.tasks
                ),
            ));
        }
        for (i, c) in self.captures.iter().enumerate() {
            if c.config.version != HOOK_ABI_VERSION {
                out.push((
                    format!("captures[{i}].config.version"),
                    format!("hook ABI {} is not {HOOK_ABI_VERSION}", c.config.version),
                ));
            }
            if let Some(j) = c.events.iter().position(|e| e.task >= self.tasks) {
                out.push((
                    format!("captures[{i}].events[{j}].task"),
                    format!(
                        "task {} out of range ({} tasks)",
                        c.events[j].task, self.tasks
                    ),
                ));
            }
            if let Some(a) = &c.aggregates {
                for (k, ca) in a.classes.iter().enumerate() {
                    if ca.phases.len() != PHASES.len()
                        || ca.phases.iter().any(|p| p.hist.len() != BUCKETS)
                    {
                        out.push((
                            format!("captures[{i}].aggregates.classes[{k}].phases"),
                            format!("expected {} phases of {BUCKETS} buckets", PHASES.len()),
                        ));
                    }
                }
            }
        }
        for (j, &t) in self.truth.injected_tasks.iter().enumerate() {
            if t >= self.tasks {
                out.push((
                    format!("truth.injected_tasks[{j}]"),
                    format!("task {t} out of range"),
                ));
            }
        }
        out
    }
}

/// What a profiler of this track reads: the bundle's standard view plus at
/// most one monitor's capture (no truth).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskView {
    pub schema_version: u32,
    pub base: TraceView,
    pub workers: u32,
    pub tasks: u32,
    /// `None`: kernel-level records only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<Capture>,
    /// The same monitor's capture of a known-good run of the same work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<Capture>,
    /// The known-good run's outer kernel duration (ns), as kernel-level CUPTI saw it.
    #[serde(default)]
    pub reference_kernel_ns: u64,
}

impl crate::io::Readable for TaskView {
    const WHAT: &'static str = "megakernel task view";
    fn problems(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = crate::io::Readable::problems(&self.base)
            .into_iter()
            .map(|(p, m)| (format!("base.{p}"), m))
            .collect();
        out.extend(schema_version_problem(self.schema_version));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_log2_from_512ns() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(511), 0);
        assert_eq!(bucket(512), 1);
        assert_eq!(bucket(1023), 1);
        assert_eq!(bucket(1024), 2);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        for b in 1..BUCKETS {
            assert_eq!(bucket(bucket_floor(b)), b);
        }
    }

    #[test]
    fn sampling_hash_is_lowbias32() {
        assert_eq!(sample_hash(0), 0);
        assert_ne!(sample_hash(1), 1);
        assert_eq!(sample_hash(12345), sample_hash(12345));
        let n = (0..10_000).filter(|&t| sampled(t, 8, 7)).count();
        assert!((1000..1500).contains(&n), "{n} of 10000 sampled at 1/8");
        assert!((0..100).all(|t| sampled(t, 1, 0)));
    }

    #[test]
    fn class_ids_are_stable() {
        assert_eq!(class_id("attention"), Some(0));
        assert_eq!(class_id("sampling"), Some(3));
        assert_eq!(class_name(2), "communication");
        assert_eq!(class_name(9), "class9");
        for (i, k) in HookKind::ALL.iter().enumerate() {
            assert_eq!(HookKind::from_id(i as u32), Some(*k));
        }
    }

    fn yaml(extra: &str) -> String {
        format!(
            "schema_version: 1\nname: f.v\nfamily: f\nvariant: v\ncause: task_class_delay\n{extra}"
        )
    }

    #[test]
    fn huge_counts_and_paths_in_names_are_refused_without_a_panic() {
        use crate::io::Readable;
        let p = std::path::Path::new("s.yaml");
        let e = MkScenario::parse(
            p,
            yaml(
                "requests: 4000000000\ndecode_steps: 4000000000\n\
                 injection: {kind: class_delay, class: gemm, magnitude_us: 100, step: 1}\n",
            )
            .as_bytes(),
        );
        assert!(e.is_ok() || !e.unwrap_err().message.is_empty());
        let bad_name = yaml("injection: {kind: class_delay, class: gemm, magnitude_us: 100}\n")
            .replace("name: f.v", "name: ../f.v");
        let e = MkScenario::parse(p, bad_name.as_bytes()).unwrap_err();
        assert_eq!(e.path, ".name", "{e}");
    }

    #[test]
    fn scenario_reader_names_the_bad_field() {
        use crate::io::Readable;
        let p = std::path::Path::new("s.yaml");
        let ok = yaml("injection: {kind: class_delay, class: gemm, magnitude_us: 100}\n");
        assert!(MkScenario::parse(p, ok.as_bytes()).is_ok());
        let e = MkScenario::parse(
            p,
            yaml("injection: {kind: class_delay, class: softmax, magnitude_us: 100}\n").as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(".injection.class") && e.contains("softmax"),
            "{e}"
        );
        let e = MkScenario::parse(
            p,
            yaml("injection: {kind: cosmic_rays, class: gemm, magnitude_us: 1}\n").as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cosmic_rays") && e.contains("line"), "{e}");
        let e = MkScenario::parse(
            p,
            yaml("injection: {kind: late_notification, class: gemm, magnitude_us: 1}\n").as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(".cause"), "{e}");
        let e = MkScenario::parse(
            p,
            yaml("injection: {kind: class_delay, class: gemm}\n").as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("magnitude_us"), "{e}");
    }

    #[test]
    fn telemetry_reader_rejects_out_of_range_tasks_and_other_abis() {
        use crate::io::Readable;
        let sc: MkScenario = serde_norway::from_str(&yaml(
            "injection: {kind: class_delay, class: gemm, magnitude_us: 100}\n",
        ))
        .unwrap();
        let ev = TaskEvent {
            ts: 1,
            kind: HookKind::Start,
            task: 5,
            class: 0,
            worker: 0,
            aux: 0,
            task_gen: 0,
            req_gen: 0,
        };
        let cap = Capture {
            config: MonitorConfig::task_log(u32::MAX),
            kernel_ns: 1,
            events: vec![ev],
            aggregates: None,
            coverage: vec![],
            bytes_exported: 32,
            config_apply_ns: 1,
            pc_sampling: None,
        };
        let mut t = TaskTelemetry {
            schema_version: 1,
            bundle: "f.v.r0".into(),
            scenario: sc,
            workers: 1,
            tasks: 2,
            backend: "sim".into(),
            captures: vec![cap],
            reference: vec![],
            truth: TaskTruth {
                cause: CauseLabel::TaskClassDelay,
                affected_class: "gemm".into(),
                injected_tasks: vec![],
                task_nodes: vec![0, 1],
                requested_us: 1.0,
                measured_us: 1.0,
                realised: String::new(),
            },
        };
        let p = std::path::Path::new("t.json");
        let text = serde_json::to_vec(&t).unwrap();
        let e = TaskTelemetry::parse(p, &text).unwrap_err().to_string();
        assert!(e.contains(".captures[0].events[0].task"), "{e}");
        t.captures[0].events[0].task = 1;
        t.captures[0].config.version = 99;
        let e = TaskTelemetry::parse(p, &serde_json::to_vec(&t).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("hook ABI 99"), "{e}");
        t.captures[0].config.version = HOOK_ABI_VERSION;
        assert!(TaskTelemetry::parse(p, &serde_json::to_vec(&t).unwrap()).is_ok());
        assert!(TaskTelemetry::parse(p, b"{\"schema_version\": 1").is_err());
    }
}
