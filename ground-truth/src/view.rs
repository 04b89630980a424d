//! Trace view (docs/design.md): what one profiler is allowed to see. It carries no
//! answers: which records were removed is re-derived by the evaluator from the
//! bundle and the view's spec, never stored where a profiler could read it.

use crate::bundle::LossAccounting;
use crate::labels::{Collectors, Mode, Question};
use crate::trace::{Record, Rid, Source};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Synthetic loss applied to a view.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum LossSpec {
    #[default]
    None,
    /// Each record removed independently with probability `rate`.
    Uniform { rate: f64, seed: u64 },
    /// One record on the true critical path of each symptom removed (chosen by seed).
    Targeted { seed: u64 },
}

impl LossSpec {
    /// Short label used in file names and reports (`0`, `5pct`, `targeted`).
    pub fn label(&self) -> String {
        match self {
            LossSpec::None => "none".into(),
            LossSpec::Uniform { rate, .. } => format!("{}pct", (rate * 100.0).round() as u32),
            LossSpec::Targeted { .. } => "targeted".into(),
        }
    }
    pub fn rate(&self) -> f64 {
        match self {
            LossSpec::None => 0.0,
            LossSpec::Uniform { rate, .. } => *rate,
            LossSpec::Targeted { .. } => f64::NAN,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ViewSpec {
    pub collectors: Collectors,
    pub mode: Mode,
    #[serde(default)]
    pub loss: LossSpec,
}

impl ViewSpec {
    /// File-name-safe label: `combined-instrumented-none`.
    pub fn label(&self) -> String {
        format!(
            "{}-{}-{}",
            self.collectors.as_str(),
            self.mode.as_str(),
            self.loss.label()
        )
    }
}

impl ViewSpec {
    /// Does a view with these collectors and mode keep `record`? (Loss is applied separately.)
    pub fn keeps(collectors: Collectors, mode: Mode, record: &Record) -> bool {
        match record.source() {
            Source::Cupti => collectors.keeps_device_records(),
            Source::Ebpf => collectors.keeps_host_records(),
            Source::App => mode == Mode::Instrumented,
        }
    }
}

/// One question a profiler must answer about the view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Query {
    pub id: String,
    /// The record of the operation asked about.
    pub rid: Rid,
    pub question: Question,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceView {
    pub schema_version: u32,
    /// Opaque id of the bundle this view was derived from.
    pub bundle: String,
    pub spec: ViewSpec,
    pub queries: Vec<Query>,
    /// The loss counters of the collectors this view includes.
    pub collector_loss: LossAccounting,
    pub records: Vec<Record>,
}
