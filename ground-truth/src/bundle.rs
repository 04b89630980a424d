//! Run bundle (SPEC §2): manifest, ground truth, trace and loss accounting.
//! Self-contained: everything the evaluator needs about one recorded run.

use crate::graph::GroundTruth;
use crate::scenario::Scenario;
use crate::trace::Record;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Scenario as it was run (embedded so a bundle is self-contained).
    pub scenario: Scenario,
    pub seed: u64,
    /// Repetition index within the scenario's repetitions.
    pub repetition: u32,
    /// `sim` or `cuda`.
    pub backend: String,
    pub gpu: String,
    pub driver: String,
    pub cuda: String,
    pub cupti: String,
    pub tool_version: String,
    pub host: String,
    /// Collectors that were active while recording (`cupti`, `ebpf`, `app`).
    pub collectors: Vec<String>,
}

/// Records the recorder itself lost, as it counted them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LossAccounting {
    /// CUPTI records dropped for lack of a buffer (`cuptiActivityGetNumDroppedRecords`).
    pub cupti_dropped: u64,
    /// CUPTI records kept but with their timestamps dropped.
    pub cupti_timestamps_dropped: u64,
    /// eBPF ring-buffer records lost.
    pub ringbuffer_dropped: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    pub schema_version: u32,
    pub manifest: Manifest,
    pub ground_truth: crate::GroundTruth,
    pub trace: Vec<Record>,
    pub loss: LossAccounting,
}

impl Bundle {
    /// A stable id for file names: `scenario.rN`.
    pub fn id(&self) -> String {
        format!(
            "{}.r{}",
            self.manifest.scenario.name, self.manifest.repetition
        )
    }

    pub fn truth(&self) -> &GroundTruth {
        &self.ground_truth
    }
}
