//! The on-disk form of a [`super::Record`]: every field of every kind at the top level, as
//! docs/records.md documents it. The in-memory record keeps a device activity's rarely read
//! fields behind one shared pointer (`super::detail`); reading and writing go through this
//! type so that the JSON, the MessagePack and the schema stay exactly what they were.

use super::Record as InMemory;
use super::{
    ApiDomain, CopyDetail, CopyDirection, HostMemory, KernelDetail, MarkerPhase, MemsetDetail, Rid,
    SwitchReason, SyncType,
};
use crate::{Ns, SharedStack, SharedStr};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One record of the trace. Device timestamps of 0 mean "not provided" (as in
/// CUPTI, e.g. `submitted` of graph-launched kernels).
// Strings are shared: a trace repeats a few names (APIs, kernels, stack
// frames) millions of times.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
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
        name: SharedStr,
        stream: u32,
        context: u32,
        device: u32,
        correlation_id: u32,
        #[serde(default)]
        graph_id: u32,
        #[serde(default)]
        graph_node_id: u64,
        queued: Ns,
        submitted: Ns,
        start: Ns,
        end: Ns,
        grid: [u32; 3],
        block: [u32; 3],
        channel: u32,
    },
    Memcpy {
        rid: Rid,
        direction: CopyDirection,
        memory: HostMemory,
        bytes: u64,
        stream: u32,
        context: u32,
        device: u32,
        correlation_id: u32,
        #[serde(default)]
        graph_id: u32,
        #[serde(default)]
        graph_node_id: u64,
        queued: Ns,
        submitted: Ns,
        start: Ns,
        end: Ns,
        channel: u32,
    },
    Memset {
        rid: Rid,
        bytes: u64,
        stream: u32,
        context: u32,
        device: u32,
        correlation_id: u32,
        queued: Ns,
        submitted: Ns,
        start: Ns,
        end: Ns,
    },
    /// SYNCHRONIZATION activity.
    Sync {
        rid: Rid,
        sync_type: SyncType,
        stream: u32,
        /// Raw event handle (reused after destroy; not an identity).
        #[serde(default)]
        event: u64,
        /// The join key between an event record and the waits on it.
        #[serde(default)]
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
        #[serde(default)]
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

/// Converts between the two forms: the device kinds by the arms given, every other
/// kind field for field (its fields are the same in memory and on disk).
macro_rules! convert {
    ($value:expr, $from:ident => $to:ident, { $($device:tt)* }) => {
        convert!(@arms $value, $from, $to, { $($device)* },
            Api { rid, domain, cbid, name, tid, start, end, correlation_id },
            Sync { rid, sync_type, stream, event, event_sync_id, correlation_id, start, end },
            CudaEvent { rid, event, event_sync_id, stream, correlation_id, ts },
            ExternalCorrelation { rid, external_kind, external_id, correlation_id },
            Nvtx { rid, tid, name, start, end },
            Marker { rid, tid, phase, queue, token, ts },
            Uprobe { rid, tid, function, enter, exit, handle, stack },
            Sched { rid, tid, cpu, switch_out, switch_in, reason },
            PageFault { rid, tid, ts, duration, address, major }
        )
    };
    (@arms $value:expr, $from:ident, $to:ident, { $($device:tt)* },
        $($kind:ident { $($field:ident),* }),*) => {
        match $value {
            $($device)*
            $( $from::$kind { $($field),* } => $to::$kind { $($field),* }, )*
        }
    };
}

impl From<Record> for InMemory {
    fn from(record: Record) -> Self {
        convert!(record, Record => InMemory, {
            Record::Kernel {
                rid,
                name,
                stream,
                context,
                device,
                correlation_id,
                graph_id,
                graph_node_id,
                queued,
                submitted,
                start,
                end,
                grid,
                block,
                channel,
            } => InMemory::Kernel {
                rid,
                stream,
                correlation_id,
                queued,
                submitted,
                start,
                end,
                detail: KernelDetail {
                    name,
                    context,
                    device,
                    graph_id,
                    graph_node_id,
                    grid,
                    block,
                    channel,
                }
                .into(),
            },
            Record::Memcpy {
                rid,
                direction,
                memory,
                bytes,
                stream,
                context,
                device,
                correlation_id,
                graph_id,
                graph_node_id,
                queued,
                submitted,
                start,
                end,
                channel,
            } => InMemory::Memcpy {
                rid,
                direction,
                memory,
                stream,
                correlation_id,
                queued,
                submitted,
                start,
                end,
                detail: CopyDetail {
                    bytes,
                    context,
                    device,
                    graph_id,
                    graph_node_id,
                    channel,
                }
                .into(),
            },
            Record::Memset {
                rid,
                bytes,
                stream,
                context,
                device,
                correlation_id,
                queued,
                submitted,
                start,
                end,
            } => InMemory::Memset {
                rid,
                stream,
                correlation_id,
                queued,
                submitted,
                start,
                end,
                detail: MemsetDetail {
                    bytes,
                    context,
                    device,
                }
                .into(),
            },
        })
    }
}

impl From<&InMemory> for Record {
    fn from(record: &InMemory) -> Self {
        convert!(record.clone(), InMemory => Record, {
            InMemory::Kernel {
                rid,
                stream,
                correlation_id,
                queued,
                submitted,
                start,
                end,
                detail,
            } => Record::Kernel {
                rid,
                name: detail.name.clone(),
                stream,
                context: detail.context,
                device: detail.device,
                correlation_id,
                graph_id: detail.graph_id,
                graph_node_id: detail.graph_node_id,
                queued,
                submitted,
                start,
                end,
                grid: detail.grid,
                block: detail.block,
                channel: detail.channel,
            },
            InMemory::Memcpy {
                rid,
                direction,
                memory,
                stream,
                correlation_id,
                queued,
                submitted,
                start,
                end,
                detail,
            } => Record::Memcpy {
                rid,
                direction,
                memory,
                bytes: detail.bytes,
                stream,
                context: detail.context,
                device: detail.device,
                correlation_id,
                graph_id: detail.graph_id,
                graph_node_id: detail.graph_node_id,
                queued,
                submitted,
                start,
                end,
                channel: detail.channel,
            },
            InMemory::Memset {
                rid,
                stream,
                correlation_id,
                queued,
                submitted,
                start,
                end,
                detail,
            } => Record::Memset {
                rid,
                bytes: detail.bytes,
                stream,
                context: detail.context,
                device: detail.device,
                correlation_id,
                queued,
                submitted,
                start,
                end,
            },
        })
    }
}

crate::wire_form::through_wire_form!(super::Record => Record);
