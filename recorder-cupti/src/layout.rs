//! The byte layouts of the activity records each supported CUPTI release
//! writes, and the decoding of one record from its bytes.
//!
//! CUPTI writes the newest struct version of each activity kind it knows:
//! CUDA 12.0–12.6 write `CUpti_ActivitySynchronization` and
//! `CUpti_ActivityCudaEvent` (no event sync id, no device timestamp), 12.8 and
//! 12.9 the `…2` versions, and 13.x `CUpti_ActivityKernel10` (12.x:
//! `Kernel9`). Later versions append fields, so the offsets below are those of
//! the first version of each struct that has the field; what changes per
//! layout is which fields exist and how long a record is
//! (docs/cupti-versions.md). The tests check every offset and size against
//! the structs generated from the CUPTI headers.
//!
//! Decoding reads a byte slice, never a struct, so a record of an older
//! layout is never read past its end and a value this build does not know
//! stays a plain integer.

use crate::raw::{
    Raw, KIND_CONCURRENT_KERNEL, KIND_CUDA_EVENT, KIND_DRIVER, KIND_EXTERNAL_CORRELATION,
    KIND_MEMCPY, KIND_MEMSET, KIND_RUNTIME, KIND_SYNCHRONIZATION,
};

/// The record layouts this recorder decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordLayout {
    /// CUDA 12.0–12.6 (CUPTI API versions 18–24).
    Cupti12_0,
    /// CUDA 12.8–12.9 (API versions 26–28).
    Cupti12_8,
    /// CUDA 13.x (API versions from 130000).
    Cupti13_0,
}

/// Offsets shared by every supported layout (checked against each struct
/// version in the tests).
mod at {
    pub mod api {
        pub const CBID: usize = 4;
        pub const START: usize = 8;
        pub const END: usize = 16;
        pub const THREAD: usize = 28;
        pub const CORR: usize = 32;
        pub const SIZE: usize = 40;
    }
    pub mod kernel {
        pub const START: usize = 16;
        pub const END: usize = 24;
        pub const DEVICE: usize = 40;
        pub const CONTEXT: usize = 44;
        pub const STREAM: usize = 48;
        pub const GRID: usize = 52;
        pub const BLOCK: usize = 64;
        pub const CORR: usize = 92;
        pub const NAME: usize = 104;
        pub const QUEUED: usize = 120;
        pub const SUBMITTED: usize = 128;
        pub const GRAPH_NODE: usize = 144;
        pub const GRAPH: usize = 156;
        pub const CHANNEL: usize = 168;
    }
    pub mod memcpy {
        pub const COPY_KIND: usize = 4;
        pub const SRC_KIND: usize = 5;
        pub const DST_KIND: usize = 6;
        pub const BYTES: usize = 8;
        pub const START: usize = 16;
        pub const END: usize = 24;
        pub const DEVICE: usize = 32;
        pub const CONTEXT: usize = 36;
        pub const STREAM: usize = 40;
        pub const CORR: usize = 44;
        pub const GRAPH_NODE: usize = 64;
        pub const GRAPH: usize = 72;
        pub const CHANNEL: usize = 76;
    }
    pub mod memset {
        pub const BYTES: usize = 8;
        pub const START: usize = 16;
        pub const END: usize = 24;
        pub const DEVICE: usize = 32;
        pub const CONTEXT: usize = 36;
        pub const STREAM: usize = 40;
        pub const CORR: usize = 44;
        pub const SIZE: usize = 88;
    }
    pub mod sync {
        pub const TYPE: usize = 4;
        pub const START: usize = 8;
        pub const END: usize = 16;
        pub const CORR: usize = 24;
        pub const STREAM: usize = 32;
        pub const EVENT: usize = 36;
        /// `CUpti_ActivitySynchronization2` only.
        pub const SYNC_ID: usize = 40;
    }
    pub mod event {
        pub const CORR: usize = 4;
        pub const STREAM: usize = 12;
        pub const EVENT: usize = 16;
        /// `CUpti_ActivityCudaEvent2` only.
        pub const DEVICE_TS: usize = 40;
        /// `CUpti_ActivityCudaEvent2` only.
        pub const SYNC_ID: usize = 48;
    }
    pub mod ext {
        pub const KIND: usize = 4;
        pub const ID: usize = 8;
        pub const CORR: usize = 16;
        pub const SIZE: usize = 24;
    }
}

/// Record fields a layout lacks, as the manifest names them.
pub const NO_SYNC_ID: &str = "SYNCHRONIZATION.cudaEventSyncId";
pub const NO_EVENT_TIMESTAMP: &str = "CUDA_EVENT.deviceTimestamp";
pub const NO_EVENT_SYNC_ID: &str = "CUDA_EVENT.cudaEventSyncId";

impl RecordLayout {
    /// The layout of a `cuptiGetVersion` API version, or why it is not supported.
    pub fn of_api_version(version: u32) -> Result<RecordLayout, String> {
        match version {
            130_000.. => Ok(RecordLayout::Cupti13_0),
            26..=129_999 => Ok(RecordLayout::Cupti12_8),
            18..=25 => Ok(RecordLayout::Cupti12_0),
            _ => Err(format!(
                "CUPTI API version {version} is older than CUDA 12.0 (18): its activity records are not decoded"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RecordLayout::Cupti12_0 => "cupti-12.0",
            RecordLayout::Cupti12_8 => "cupti-12.8",
            RecordLayout::Cupti13_0 => "cupti-13.0",
        }
    }

    /// Fields of the records this recorder reads that this layout does not have.
    pub fn missing_fields(self) -> &'static [&'static str] {
        match self {
            RecordLayout::Cupti12_0 => &[NO_SYNC_ID, NO_EVENT_TIMESTAMP, NO_EVENT_SYNC_ID],
            RecordLayout::Cupti12_8 | RecordLayout::Cupti13_0 => &[],
        }
    }

    fn has_sync_ids(self) -> bool {
        self != RecordLayout::Cupti12_0
    }

    /// The length of a record of `kind` in this layout (the bytes a decoder
    /// may read), `None` for kinds the recorder does not decode.
    pub fn record_size(self, kind: u32) -> Option<usize> {
        let later = self.has_sync_ids();
        Some(match kind {
            KIND_DRIVER | KIND_RUNTIME => at::api::SIZE,
            // Kernel9 (12.x) / Kernel10 (13.x, one more byte and padding).
            KIND_CONCURRENT_KERNEL if self == RecordLayout::Cupti13_0 => 216,
            KIND_CONCURRENT_KERNEL => 208,
            // Memcpy5 (12.0–12.6) / Memcpy6 (12.8 on, `copyCount` appended).
            KIND_MEMCPY if later => 96,
            KIND_MEMCPY => 88,
            KIND_MEMSET => at::memset::SIZE,
            KIND_SYNCHRONIZATION if later => 56,
            KIND_SYNCHRONIZATION => 40,
            KIND_CUDA_EVENT if later => 56,
            KIND_CUDA_EVENT => 24,
            KIND_EXTERNAL_CORRELATION => at::ext::SIZE,
            _ => return None,
        })
    }
}

/// Why a record was not decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undecoded {
    /// A kind the recorder does not use.
    UnknownKind(u32),
    /// Fewer bytes than this layout's record of that kind.
    Truncated { kind: u32, len: usize },
}

fn u8_at(b: &[u8], at: usize) -> u8 {
    b[at]
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The kind of the record starting at `bytes` (every record starts with it).
pub fn kind_of(bytes: &[u8]) -> Option<u32> {
    (bytes.len() >= 4).then(|| u32_at(bytes, 0))
}

/// Decodes one record. `shift` moves CUPTI timestamps into the trace clock
/// (0 when CUPTI already reports CLOCK_MONOTONIC; a 0 timestamp, "not
/// provided", stays 0); `name_at` reads the kernel name a record points to.
pub fn decode(
    bytes: &[u8],
    layout: RecordLayout,
    shift: i64,
    name_at: impl FnOnce(u64) -> String,
) -> Result<Raw, Undecoded> {
    let kind = kind_of(bytes).ok_or(Undecoded::Truncated {
        kind: 0,
        len: bytes.len(),
    })?;
    let size = layout
        .record_size(kind)
        .ok_or(Undecoded::UnknownKind(kind))?;
    if bytes.len() < size {
        return Err(Undecoded::Truncated {
            kind,
            len: bytes.len(),
        });
    }
    let b = &bytes[..size];
    let ts = |at: usize| match u64_at(b, at) {
        0 => 0,
        t => t.saturating_add_signed(shift),
    };
    Ok(match kind {
        KIND_DRIVER | KIND_RUNTIME => Raw::Api {
            driver: kind == KIND_DRIVER,
            cbid: u32_at(b, at::api::CBID),
            start: ts(at::api::START),
            end: ts(at::api::END),
            tid: u32_at(b, at::api::THREAD),
            corr: u32_at(b, at::api::CORR),
        },
        KIND_CONCURRENT_KERNEL => {
            use at::kernel as k;
            let dim = |at: usize| [0, 4, 8].map(|i| i32_at(b, at + i).max(0) as u32);
            Raw::Kernel {
                name: name_at(u64_at(b, k::NAME)),
                device: u32_at(b, k::DEVICE),
                context: u32_at(b, k::CONTEXT),
                stream: u32_at(b, k::STREAM),
                corr: u32_at(b, k::CORR),
                graph_id: u32_at(b, k::GRAPH),
                graph_node_id: u64_at(b, k::GRAPH_NODE),
                queued: ts(k::QUEUED),
                submitted: ts(k::SUBMITTED),
                start: ts(k::START),
                end: ts(k::END),
                grid: dim(k::GRID),
                block: dim(k::BLOCK),
                channel: u32_at(b, k::CHANNEL),
            }
        }
        KIND_MEMCPY => {
            use at::memcpy as m;
            Raw::Memcpy {
                copy_kind: u8_at(b, m::COPY_KIND),
                src_kind: u8_at(b, m::SRC_KIND),
                dst_kind: u8_at(b, m::DST_KIND),
                bytes: u64_at(b, m::BYTES),
                start: ts(m::START),
                end: ts(m::END),
                device: u32_at(b, m::DEVICE),
                context: u32_at(b, m::CONTEXT),
                stream: u32_at(b, m::STREAM),
                corr: u32_at(b, m::CORR),
                graph_id: u32_at(b, m::GRAPH),
                graph_node_id: u64_at(b, m::GRAPH_NODE),
                channel: u32_at(b, m::CHANNEL),
            }
        }
        KIND_MEMSET => {
            use at::memset as m;
            Raw::Memset {
                bytes: u64_at(b, m::BYTES),
                start: ts(m::START),
                end: ts(m::END),
                device: u32_at(b, m::DEVICE),
                context: u32_at(b, m::CONTEXT),
                stream: u32_at(b, m::STREAM),
                corr: u32_at(b, m::CORR),
            }
        }
        KIND_SYNCHRONIZATION => {
            use at::sync as s;
            Raw::Sync {
                sync_type: u32_at(b, s::TYPE),
                start: ts(s::START),
                end: ts(s::END),
                corr: u32_at(b, s::CORR),
                stream: u32_at(b, s::STREAM),
                event_id: u32_at(b, s::EVENT),
                // "Not provided" in the record contract (docs/records.md).
                sync_id: if layout.has_sync_ids() {
                    u64_at(b, s::SYNC_ID)
                } else {
                    0
                },
            }
        }
        KIND_CUDA_EVENT => {
            use at::event as e;
            let later = layout.has_sync_ids();
            Raw::CudaEvent {
                corr: u32_at(b, e::CORR),
                stream: u32_at(b, e::STREAM),
                event_id: u32_at(b, e::EVENT),
                ts: if later { ts(e::DEVICE_TS) } else { 0 },
                sync_id: if later { u64_at(b, e::SYNC_ID) } else { 0 },
            }
        }
        KIND_EXTERNAL_CORRELATION => Raw::ExtCorr {
            ext_kind: u32_at(b, at::ext::KIND),
            ext_id: u64_at(b, at::ext::ID),
            corr: u32_at(b, at::ext::CORR),
        },
        _ => return Err(Undecoded::UnknownKind(kind)),
    })
}

#[cfg(test)]
mod tests;
