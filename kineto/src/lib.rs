//! Reader of Kineto's Chrome traces (what `torch.profiler` exports with
//! `export_chrome_trace`), for the PyTorch track (docs/torch-track.md).
//!
//! [`read`] parses a trace within the project's input limits (README
//! "Limits"; gzip-compressed files too) and [`Activities::from_trace`] types
//! the events causalbench uses: CPU operators and annotations, CUDA runtime
//! and driver calls, kernels, copies, memsets, CUDA synchronization events
//! and flow events, with times in nanoseconds of Kineto's own clock
//! (`baseTimeNanoseconds` plus `ts` in microseconds). Every error names the
//! file and the JSON path of the bad value; nothing panics on bad input.
//!
//! Architecture invariant: depends only on `ground-truth` (its readers'
//! limits and error type); it reads the trace format and knows nothing of
//! scenarios, bundles or ground truth.

mod activities;
pub use activities::{
    Activities, Annotation, DeviceActivity, DeviceKind, Flow, FlowPhase, HostCall, SyncActivity,
};

use ground_truth::io::{read_input, FormatError, InputLimits};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::Path;

/// The largest Kineto trace a reader accepts: the committed corpus's traces
/// are under a megabyte each; a long training step's trace can reach a few
/// hundred megabytes.
pub const MAX_TRACE_BYTES: u64 = 1 << 30;

/// Most trace events a reader accepts.
pub const MAX_EVENTS: usize = 10_000_000;

/// One Kineto trace as exported: its header fields and its events.
#[derive(Debug, Clone, Deserialize)]
pub struct KinetoTrace {
    #[serde(rename = "traceEvents")]
    pub events: Vec<Map<String, Value>>,
    #[serde(rename = "baseTimeNanoseconds", default)]
    pub base_time_ns: Option<u64>,
    #[serde(default)]
    pub cupti_version: Option<Value>,
    #[serde(default)]
    pub cuda_runtime_version: Option<Value>,
    #[serde(rename = "schemaVersion", default)]
    pub schema_version: Option<Value>,
}

/// Reads a Kineto trace file within the default input limits and
/// [`MAX_TRACE_BYTES`].
pub fn read(file: &Path) -> Result<KinetoTrace, FormatError> {
    read_within(file, &InputLimits::DEFAULT.at_most(MAX_TRACE_BYTES))
}

/// [`read`] within `limits`.
pub fn read_within(file: &Path, limits: &InputLimits) -> Result<KinetoTrace, FormatError> {
    let bytes = read_input(file, "Kineto trace", limits)?;
    parse(file, &bytes)
}

/// Parses the bytes of a Kineto trace as if read from `file`.
pub fn parse(file: &Path, bytes: &[u8]) -> Result<KinetoTrace, FormatError> {
    let trace: KinetoTrace = ground_truth::io::from_json(file, bytes)?;
    if trace.events.len() > MAX_EVENTS {
        return Err(FormatError::new(
            file,
            ".traceEvents",
            format!(
                "{} events, over the limit of {MAX_EVENTS}",
                trace.events.len()
            ),
        ));
    }
    Ok(trace)
}

/// Reads and types a trace in one call.
pub fn read_activities(file: &Path) -> Result<Activities, FormatError> {
    let trace = read(file)?;
    Activities::from_trace(file, &trace)
}
