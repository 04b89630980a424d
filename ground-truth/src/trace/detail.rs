//! A device activity's rarely read fields, kept behind one shared pointer
//! (`crate::shared_detail`) so that a record of any kind is at most 64 bytes in memory
//! (docs/records.md "Memory of a large case"). A launch-bound trace repeats the same few
//! kernels, copies and memsets millions of times: equal details made on one thread share
//! one allocation, as `SharedStr` shares names. A ground-truth node's detail
//! (`crate::graph::NodeDetail`) is shared the same way.

use crate::shared_detail::shareable;
use crate::SharedStr;

/// What a kernel activity carries besides its rid, stream, correlation id and times.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KernelDetail {
    pub name: SharedStr,
    pub context: u32,
    pub device: u32,
    pub graph_id: u32,
    pub graph_node_id: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub channel: u32,
}

/// What a copy activity carries besides its rid, direction, memory, stream, correlation
/// id and times.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CopyDetail {
    pub bytes: u64,
    pub context: u32,
    pub device: u32,
    pub graph_id: u32,
    pub graph_node_id: u64,
    pub channel: u32,
}

/// What a memset activity carries besides its rid, stream, correlation id and times.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemsetDetail {
    pub bytes: u64,
    pub context: u32,
    pub device: u32,
}

shareable!(
    KernelDetail => KERNEL_DETAILS,
    CopyDetail => COPY_DETAILS,
    MemsetDetail => MEMSET_DETAILS
);
