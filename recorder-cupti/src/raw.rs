//! What CUPTI's activity buffers hold, as this recorder copies it out: the activity
//! kinds it enables, the external correlation kinds it pushes, and one owned record.

/// Activity kinds (CUpti_ActivityKind values).
pub const KIND_MEMCPY: u32 = 1;
pub const KIND_MEMSET: u32 = 2;
pub const KIND_DRIVER: u32 = 4;
pub const KIND_RUNTIME: u32 = 5;
pub const KIND_CONCURRENT_KERNEL: u32 = 10;
pub const KIND_CUDA_EVENT: u32 = 36;
pub const KIND_SYNCHRONIZATION: u32 = 38;
pub const KIND_EXTERNAL_CORRELATION: u32 = 39;

/// External correlation kinds: the recorder-private op binding and the request token.
pub const EXT_OP: u32 = 3; // CUSTOM0
pub const EXT_REQUEST: u32 = 4; // CUSTOM1

/// One activity record, copied out of a CUPTI buffer.
#[derive(Debug, Clone, PartialEq)]
pub enum Raw {
    Api {
        driver: bool,
        cbid: u32,
        start: u64,
        end: u64,
        tid: u32,
        corr: u32,
    },
    Kernel {
        name: String,
        device: u32,
        context: u32,
        stream: u32,
        corr: u32,
        graph_id: u32,
        graph_node_id: u64,
        queued: u64,
        submitted: u64,
        start: u64,
        end: u64,
        grid: [u32; 3],
        block: [u32; 3],
        channel: u32,
    },
    Memcpy {
        copy_kind: u8,
        src_kind: u8,
        dst_kind: u8,
        bytes: u64,
        start: u64,
        end: u64,
        device: u32,
        context: u32,
        stream: u32,
        corr: u32,
        graph_id: u32,
        graph_node_id: u64,
        channel: u32,
    },
    Memset {
        bytes: u64,
        start: u64,
        end: u64,
        device: u32,
        context: u32,
        stream: u32,
        corr: u32,
    },
    Sync {
        sync_type: u32,
        start: u64,
        end: u64,
        corr: u32,
        stream: u32,
        event_id: u32,
        sync_id: u64,
    },
    CudaEvent {
        corr: u32,
        stream: u32,
        event_id: u32,
        ts: u64,
        sync_id: u64,
    },
    ExtCorr {
        ext_kind: u32,
        ext_id: u64,
        corr: u32,
    },
}
