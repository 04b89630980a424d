//! Small vocabularies shared by every format.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The true cause of a symptom's lateness (or, for structural questions, of the
/// symptom's timing). Every variant of a family has a different label.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CauseLabel {
    /// The launching host thread was descheduled (preempted) before the API call.
    CpuDeschedule,
    /// The launching host thread took page faults before the API call.
    HostPageFault,
    /// The application's own host work delayed the call: launch timing, no edge.
    HostCompute,
    /// The request waited in a host queue / thread pool before reaching CUDA.
    HandoffQueueing,
    /// Submitted on time but other kernels held the SMs.
    OccupancyPressure,
    /// Waited behind earlier work in its own stream.
    StreamBacklog,
    /// Gated by a cross-stream event wait on slower work.
    EventWait,
    /// Gated by a dependency inside a replayed CUDA graph.
    GraphDependency,
    /// A copy queued behind concurrent bulk copies on the copy engine.
    PcieContention,
    /// The copy's own transfer was slow (size, pageable memory).
    SlowCopy,
    /// A host call blocked because it implicitly synchronized with device work.
    ImplicitSync,
    /// No lateness beyond noise (negative control).
    None,
    /// Megakernel track: every task of one class ran longer (execution).
    TaskClassDelay,
    /// Megakernel track: the routing concentrated one class's tasks on one worker.
    RoutingSkew,
    /// Megakernel track: a dependency notification reached its waiters late.
    LateNotification,
    /// Megakernel track: one worker's queue received a burst beyond its share.
    QueueOversubscription,
    /// Megakernel track: a ready task was not taken up (starved).
    ReadyStarvation,
}

impl CauseLabel {
    pub const ALL: [CauseLabel; 17] = [
        CauseLabel::CpuDeschedule,
        CauseLabel::HostPageFault,
        CauseLabel::HostCompute,
        CauseLabel::HandoffQueueing,
        CauseLabel::OccupancyPressure,
        CauseLabel::StreamBacklog,
        CauseLabel::EventWait,
        CauseLabel::GraphDependency,
        CauseLabel::PcieContention,
        CauseLabel::SlowCopy,
        CauseLabel::ImplicitSync,
        CauseLabel::None,
        CauseLabel::TaskClassDelay,
        CauseLabel::RoutingSkew,
        CauseLabel::LateNotification,
        CauseLabel::QueueOversubscription,
        CauseLabel::ReadyStarvation,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CauseLabel::CpuDeschedule => "cpu_deschedule",
            CauseLabel::HostPageFault => "host_page_fault",
            CauseLabel::HostCompute => "host_compute",
            CauseLabel::HandoffQueueing => "handoff_queueing",
            CauseLabel::OccupancyPressure => "occupancy_pressure",
            CauseLabel::StreamBacklog => "stream_backlog",
            CauseLabel::EventWait => "event_wait",
            CauseLabel::GraphDependency => "graph_dependency",
            CauseLabel::PcieContention => "pcie_contention",
            CauseLabel::SlowCopy => "slow_copy",
            CauseLabel::ImplicitSync => "implicit_sync",
            CauseLabel::None => "none",
            CauseLabel::TaskClassDelay => "task_class_delay",
            CauseLabel::RoutingSkew => "routing_skew",
            CauseLabel::LateNotification => "late_notification",
            CauseLabel::QueueOversubscription => "queue_oversubscription",
            CauseLabel::ReadyStarvation => "ready_starvation",
        }
    }
}

impl fmt::Display for CauseLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a symptom query asks, beyond the cause label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Question {
    /// Why is this operation late? Answered by the top-ranked cause.
    #[default]
    Cause,
    /// Which request does this operation belong to? Answered by request attribution.
    Request,
    /// Which call site launched it? Answered by `Diagnosis::answer`.
    CallSite,
    /// Which operator (NVTX range at launch time) does it belong to? `Diagnosis::answer`.
    Operator,
}

/// Whether application identity (request tokens, external correlation, NVTX,
/// handoff markers) is present in what a profiler sees.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
    Default,
    PartialOrd,
    Ord,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    Instrumented,
    Closed,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Instrumented => "instrumented",
            Mode::Closed => "closed",
        }
    }
}

/// Which collectors' records a view keeps.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, PartialOrd, Ord,
)]
#[serde(rename_all = "snake_case")]
pub enum Collectors {
    /// CUPTI activity and API records only.
    Cupti,
    /// Host-side records only (eBPF uprobes, scheduler, page faults, app markers).
    Host,
    /// Both.
    Combined,
    /// Kineto's records (torch.profiler: CUPTI inside the PyTorch process) of a
    /// `torch` bundle, where they stand in CUPTI's place (docs/torch-track.md).
    Kineto,
    /// Kineto's records and the eBPF host recorder's of a `torch` bundle recorded
    /// with both (docs/torch-track.md, "kineto+host").
    #[serde(rename = "kineto+host")]
    KinetoHost,
}

impl Collectors {
    pub const ALL: [Collectors; 3] = [Collectors::Cupti, Collectors::Host, Collectors::Combined];
    pub fn as_str(self) -> &'static str {
        match self {
            Collectors::Cupti => "cupti",
            Collectors::Host => "host",
            Collectors::Combined => "combined",
            Collectors::Kineto => "kineto",
            Collectors::KinetoHost => "kineto+host",
        }
    }

    /// Whether the view keeps the device-side collector's records (CUPTI's, or Kineto's).
    pub fn keeps_device_records(self) -> bool {
        self != Collectors::Host
    }

    /// Whether the view keeps the eBPF host collector's records.
    pub fn keeps_host_records(self) -> bool {
        matches!(
            self,
            Collectors::Host | Collectors::Combined | Collectors::KinetoHost
        )
    }
}

/// How a profiler knows an edge.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, PartialOrd, Ord,
)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// Stated by a record's semantics (correlation id, event sync id, graph node id, token).
    Explicit,
    /// Seen directly (same-stream order, an observed handoff, a scheduler switch).
    Observed,
    /// Guessed (timestamps, proximity); must carry a confidence below 1.
    Inferred,
    /// A record the semantics require is absent from the view.
    Missing,
}

impl Evidence {
    /// Claims of these classes assert the edge as fact; a wrong one is a false causal edge.
    pub fn is_asserted(self) -> bool {
        matches!(self, Evidence::Explicit | Evidence::Observed)
    }
}
