//! Exporters: causalbench's formats in the formats other tools read.
//!
//! - [`kineto`]: a trace view as a Kineto-format Chrome trace (what the PyTorch profiler
//!   writes), with the fields Holistic Trace Analysis' critical-path analysis reads:
//!   runtime and kernel/memcpy/memset events carrying `args.correlation` and
//!   `args.stream`, `ac2g` flows, `cuda_sync` events naming the waited stream and the
//!   `cudaEventRecord` correlation, one `ProfilerStep#1` annotation, `deviceProperties`
//!   and `distributedInfo`.
//! - [`perfetto`]: a bundle (optionally restricted to one view) and optionally an
//!   explanation as Perfetto's native protobuf trace (`TracePacket` stream): one track per
//!   host thread and per stream, a slice for every record with an interval, a flow for
//!   every true edge (or, in the "claimed" file, for every claimed edge, named by evidence
//!   class and marked right or wrong), the symptom and the injected fault marked; and the
//!   same model as Chrome JSON.
//!
//! Depends only on `ground-truth`: an exporter reads formats, never another stage's code.

pub mod kineto;
pub mod perfetto;

/// Writes `bytes` to `path` atomically (temp file + rename), creating parent directories.
pub fn write_file(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    ground_truth::io::write_atomic(path, bytes)
}

/// Streams a file's content from `fill` into `path` atomically, creating parent
/// directories: a large export is never held in memory whole.
pub fn write_file_with(
    path: &std::path::Path,
    fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    ground_truth::io::write_atomic_streaming(path, fill)
}
