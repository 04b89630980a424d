//! Trace records (docs/records.md): every record the reference recorder saw, each with a
//! stable record id. One clock domain: CLOCK_MONOTONIC nanoseconds.

mod detail;
mod wire;

pub use crate::shared_detail::SharedDetail;
pub use detail::{CopyDetail, KernelDetail, MemsetDetail};

use crate::{Ns, SharedStack, SharedStr};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::ids::Rid;

/// Which collector produced a record; views filter on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// CUPTI activity / callback records.
    Cupti,
    /// eBPF host records (uprobes, scheduler, page faults).
    Ebpf,
    /// Records the application itself emits when instrumented (handoff markers,
    /// external correlation, NVTX). Stripped from closed-mode views.
    App,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApiDomain {
    Runtime,
    Driver,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CopyDirection {
    H2d,
    D2h,
    D2d,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum HostMemory {
    #[default]
    Pinned,
    Pageable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SyncType {
    StreamWaitEvent,
    StreamSynchronize,
    EventSynchronize,
    ContextSynchronize,
    /// A blocking copy (pageable memory) that fenced the stream before it ran.
    ImplicitCopyFence,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MarkerPhase {
    /// A request enters the system.
    RequestBegin,
    /// Work is put on a host queue.
    Enqueue,
    /// A host task begins (after a dequeue, or the request's first task).
    TaskBegin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SwitchReason {
    /// Switched out while still runnable (preempted by another task).
    Preempted,
    /// Switched out because it blocked (sleep, lock, I/O).
    Blocked,
    /// Stopped by a tracer (ptrace interrupt).
    Traced,
}

/// One record of the trace. Device timestamps of 0 mean "not provided" (as in
/// CUPTI, e.g. `submitted` of graph-launched kernels).
// Strings are shared: a trace repeats a few names (APIs, kernels, stack
// frames) millions of times.
// A device activity keeps its rarely read fields behind one shared pointer, so that every
// kind fits 64 bytes; on disk (and in the schema) it is `wire::Record`, every field at the
// top level.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// CUDA runtime/driver API call (CUPTI callback / API activity).
    Api {
        rid: Rid,
        domain: ApiDomain,
        cbid: u32,
        name: SharedStr,
        tid: u32,
        start: Ns,
        end: Ns,
        correlation_id: u32,
    },
    Kernel {
        rid: Rid,
        stream: u32,
        correlation_id: u32,
        queued: Ns,
        submitted: Ns,
        start: Ns,
        end: Ns,
        detail: SharedDetail<KernelDetail>,
    },
    Memcpy {
        rid: Rid,
        direction: CopyDirection,
        memory: HostMemory,
        stream: u32,
        correlation_id: u32,
        queued: Ns,
        submitted: Ns,
        start: Ns,
        end: Ns,
        detail: SharedDetail<CopyDetail>,
    },
    Memset {
        rid: Rid,
        stream: u32,
        correlation_id: u32,
        queued: Ns,
        submitted: Ns,
        start: Ns,
        end: Ns,
        detail: SharedDetail<MemsetDetail>,
    },
    /// SYNCHRONIZATION activity.
    Sync {
        rid: Rid,
        sync_type: SyncType,
        stream: u32,
        /// Raw event handle (reused after destroy; not an identity).
        event: u64,
        /// The join key between an event record and the waits on it.
        event_sync_id: u64,
        correlation_id: u32,
        start: Ns,
        end: Ns,
    },
    /// CUDA_EVENT activity: an event record completed on the device.
    CudaEvent {
        rid: Rid,
        event: u64,
        event_sync_id: u64,
        stream: u32,
        correlation_id: u32,
        /// Device time at which the event completed.
        ts: Ns,
    },
    /// EXTERNAL_CORRELATION: ties an API call to an application id (request token).
    ExternalCorrelation {
        rid: Rid,
        external_kind: SharedStr,
        external_id: u64,
        correlation_id: u32,
    },
    /// NVTX push/pop range on a host thread.
    Nvtx {
        rid: Rid,
        tid: u32,
        name: SharedStr,
        start: Ns,
        end: Ns,
    },
    /// Host handoff marker written by the instrumented application.
    Marker {
        rid: Rid,
        tid: u32,
        phase: MarkerPhase,
        queue: SharedStr,
        token: SharedStr,
        ts: Ns,
    },
    /// eBPF uprobe entry/return on a libcuda entry point, with the user stack.
    Uprobe {
        rid: Rid,
        tid: u32,
        function: SharedStr,
        enter: Ns,
        exit: Ns,
        /// Raw first handle argument (stream or event or graph exec), 0 if none.
        handle: u64,
        /// Symbolized user stack, innermost frame first (shared: a call site's
        /// stack repeats in every call it makes).
        stack: SharedStack,
    },
    /// Scheduler switch-out/in interval of one thread.
    Sched {
        rid: Rid,
        tid: u32,
        cpu: u32,
        switch_out: Ns,
        switch_in: Ns,
        reason: SwitchReason,
    },
    /// A user page fault.
    PageFault {
        rid: Rid,
        tid: u32,
        ts: Ns,
        duration: Ns,
        address: u64,
        major: bool,
    },
}

impl Record {
    pub fn rid(&self) -> Rid {
        match self {
            Record::Api { rid, .. }
            | Record::Kernel { rid, .. }
            | Record::Memcpy { rid, .. }
            | Record::Memset { rid, .. }
            | Record::Sync { rid, .. }
            | Record::CudaEvent { rid, .. }
            | Record::ExternalCorrelation { rid, .. }
            | Record::Nvtx { rid, .. }
            | Record::Marker { rid, .. }
            | Record::Uprobe { rid, .. }
            | Record::Sched { rid, .. }
            | Record::PageFault { rid, .. } => *rid,
        }
    }

    /// The rid, for recorders that assign rids after collecting records.
    pub fn rid_mut(&mut self) -> &mut Rid {
        match self {
            Record::Api { rid, .. }
            | Record::Kernel { rid, .. }
            | Record::Memcpy { rid, .. }
            | Record::Memset { rid, .. }
            | Record::Sync { rid, .. }
            | Record::CudaEvent { rid, .. }
            | Record::ExternalCorrelation { rid, .. }
            | Record::Nvtx { rid, .. }
            | Record::Marker { rid, .. }
            | Record::Uprobe { rid, .. }
            | Record::Sched { rid, .. }
            | Record::PageFault { rid, .. } => rid,
        }
    }

    /// The collector that produced this record.
    pub fn source(&self) -> Source {
        match self {
            Record::Api { .. }
            | Record::Kernel { .. }
            | Record::Memcpy { .. }
            | Record::Memset { .. }
            | Record::Sync { .. }
            | Record::CudaEvent { .. } => Source::Cupti,
            Record::ExternalCorrelation { .. } | Record::Nvtx { .. } | Record::Marker { .. } => {
                Source::App
            }
            Record::Uprobe { .. } | Record::Sched { .. } | Record::PageFault { .. } => Source::Ebpf,
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            Record::Api { .. } => "api",
            Record::Kernel { .. } => "kernel",
            Record::Memcpy { .. } => "memcpy",
            Record::Memset { .. } => "memset",
            Record::Sync { .. } => "sync",
            Record::CudaEvent { .. } => "cuda_event",
            Record::ExternalCorrelation { .. } => "external_correlation",
            Record::Nvtx { .. } => "nvtx",
            Record::Marker { .. } => "marker",
            Record::Uprobe { .. } => "uprobe",
            Record::Sched { .. } => "sched",
            Record::PageFault { .. } => "page_fault",
        }
    }

    /// Correlation id for CUPTI records that carry one.
    pub fn correlation_id(&self) -> Option<u32> {
        match self {
            Record::Api { correlation_id, .. }
            | Record::Kernel { correlation_id, .. }
            | Record::Memcpy { correlation_id, .. }
            | Record::Memset { correlation_id, .. }
            | Record::Sync { correlation_id, .. }
            | Record::CudaEvent { correlation_id, .. }
            | Record::ExternalCorrelation { correlation_id, .. } => Some(*correlation_id),
            _ => None,
        }
    }

    /// Device stream of device-side records.
    pub fn stream(&self) -> Option<u32> {
        match self {
            Record::Kernel { stream, .. }
            | Record::Memcpy { stream, .. }
            | Record::Memset { stream, .. }
            | Record::Sync { stream, .. }
            | Record::CudaEvent { stream, .. } => Some(*stream),
            _ => None,
        }
    }

    /// Device of a device activity (kernel, copy, memset).
    pub fn device(&self) -> Option<u32> {
        match self {
            Record::Kernel { detail, .. } => Some(detail.device),
            Record::Memcpy { detail, .. } => Some(detail.device),
            Record::Memset { detail, .. } => Some(detail.device),
            _ => None,
        }
    }

    /// Is this a device activity (kernel, copy, memset)?
    pub fn is_device_op(&self) -> bool {
        matches!(
            self,
            Record::Kernel { .. } | Record::Memcpy { .. } | Record::Memset { .. }
        )
    }

    /// (queued, submitted, start, end) of a device activity.
    pub fn device_times(&self) -> Option<(Ns, Ns, Ns, Ns)> {
        match self {
            Record::Kernel {
                queued,
                submitted,
                start,
                end,
                ..
            }
            | Record::Memcpy {
                queued,
                submitted,
                start,
                end,
                ..
            }
            | Record::Memset {
                queued,
                submitted,
                start,
                end,
                ..
            } => Some((*queued, *submitted, *start, *end)),
            _ => None,
        }
    }

    /// The interval the record covers (a point for instantaneous records).
    pub fn interval(&self) -> (Ns, Ns) {
        match self {
            Record::Api { start, end, .. }
            | Record::Kernel { start, end, .. }
            | Record::Memcpy { start, end, .. }
            | Record::Memset { start, end, .. }
            | Record::Sync { start, end, .. }
            | Record::Nvtx { start, end, .. } => (*start, *end),
            Record::CudaEvent { ts, .. } | Record::Marker { ts, .. } => (*ts, *ts),
            Record::ExternalCorrelation { .. } => (0, 0),
            Record::Uprobe { enter, exit, .. } => (*enter, *exit),
            Record::Sched {
                switch_out,
                switch_in,
                ..
            } => (*switch_out, *switch_in),
            Record::PageFault { ts, duration, .. } => (*ts, ts + duration),
        }
    }

    /// Host thread of host-side records.
    pub fn tid(&self) -> Option<u32> {
        match self {
            Record::Api { tid, .. }
            | Record::Nvtx { tid, .. }
            | Record::Marker { tid, .. }
            | Record::Uprobe { tid, .. }
            | Record::Sched { tid, .. }
            | Record::PageFault { tid, .. } => Some(*tid),
            _ => None,
        }
    }
}

#[cfg(all(test, target_pointer_width = "64"))]
mod size_tests {
    /// docs/records.md "Memory of a large case" counts a large case's memory in these
    /// sizes (a record is its largest kind's size): a change shows here, and there.
    #[test]
    fn records_nodes_and_edges_keep_their_documented_sizes() {
        assert_eq!(std::mem::size_of::<super::Record>(), 64);
        assert_eq!(std::mem::size_of::<crate::graph::Node>(), 104);
        assert_eq!(std::mem::size_of::<crate::graph::Edge>(), 12);
    }
}
