//! Run bundle (docs/design.md): manifest, ground truth, trace and loss accounting.
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
    /// The recorder's own agreement checks on this run (real backends only;
    /// the simulator leaves it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_check: Option<CrossCheck>,
    /// What the CUPTI this run loaded could and could not observe (real
    /// backends only; bundles recorded before it was written leave it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cupti_capabilities: Option<CuptiCapabilities>,
}

/// The CUPTI a recording loaded and what it could see: the activity kinds it
/// enabled, the ones it could not, and record fields its layout lacks
/// (docs/cupti-versions.md). Evidence it could not see is counted in
/// [`LossAccounting::cupti_unobservable`], never silently absent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CuptiCapabilities {
    /// `cuptiGetVersion`: 18–28 for CUDA 12.x, `major·10000 + minor·100 + patch` from 13.0.
    pub api_version: u32,
    /// The CUDA release that API version belongs to (`12.4`, `13.0`).
    pub release: String,
    /// The library file the recorder loaded.
    pub library: String,
    /// The record layout decoded (`cupti-12.0`, `cupti-12.8`, `cupti-13.0`).
    pub record_layout: String,
    /// Which clock record timestamps are in and how they got there.
    pub clock: String,
    /// Activity kinds enabled.
    pub kinds: Vec<String>,
    /// What this CUPTI cannot observe: activity kinds it refused and record
    /// fields its layout does not have.
    pub unobservable: Vec<Unobservable>,
}

/// The CUDA release of a `cuptiGetVersion` API version (`12.4`, `13.0`).
pub fn cupti_release(api_version: u32) -> String {
    match api_version {
        130_000.. => format!("{}.{}", api_version / 10_000, api_version / 100 % 100),
        18 => "12.0/12.1".into(),
        19 => "12.1".into(),
        20 => "12.2".into(),
        21 => "12.3".into(),
        22 => "12.4".into(),
        23 => "12.5".into(),
        24 => "12.6".into(),
        25 | 26 => "12.8".into(),
        27 | 28 => "12.9".into(),
        v => format!("API version {v}"),
    }
}

impl Manifest {
    /// The CUPTI release a real-GPU bundle was recorded with (`12.4`), read from
    /// its capabilities or, in bundles recorded before them, from the
    /// `cupti` text's API version; empty for the simulator.
    pub fn cupti_release(&self) -> String {
        if let Some(c) = &self.cupti_capabilities {
            return c.release.clone();
        }
        if self.backend == "sim" {
            return String::new();
        }
        self.cupti
            .rsplit("API version ")
            .next()
            .and_then(|v| v.trim_end_matches(')').trim().parse().ok())
            .map(cupti_release)
            .unwrap_or_else(|| self.cupti.clone())
    }
}

/// One kind or field a CUPTI version cannot observe, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Unobservable {
    /// `CUDA_EVENT` (an activity kind) or `CUDA_EVENT.deviceTimestamp` (a field).
    pub what: String,
    pub reason: String,
}

/// Self-checks a real-GPU recording made of itself, so a bundle says how far its
/// timestamps and bindings can be trusted.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrossCheck {
    /// Kernels whose CUPTI times were compared with the kernel's own
    /// `%globaltimer` log.
    pub kernels: u64,
    /// Median (CUPTI start − `%globaltimer` start) in ns: the offset between the
    /// two clocks, removed before the differences below.
    pub clock_offset_ns: i64,
    /// Largest |CUPTI start − `%globaltimer` start| after the offset, ns.
    pub max_start_diff_ns: i64,
    /// Largest |CUPTI end − `%globaltimer` end| after the offset, ns.
    pub max_end_diff_ns: i64,
    /// Measured block launch + teardown of a spin kernel (CUPTI duration minus
    /// requested spin, median); spin kernels are shortened by it.
    pub spin_overhead_ns: u64,
    /// Device operations (kernels, copies, memsets, graph-node kernels) the run issued.
    pub device_ops: u64,
    /// Of those, how many a CUPTI device record was bound to by correlation id.
    pub device_ops_bound: u64,
    /// Launch API records (`*Launch*`) whose host stack (eBPF uprobe) was joined
    /// to them exactly: same thread, intervals nested. 0 without the eBPF collector.
    pub call_sites_exact: u64,
    /// Of those, how many a nearest-timestamp join (any thread, nearest entry)
    /// would have given a different stack.
    pub call_sites_nearest_wrong: u64,
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
    /// Device operations whose CUPTI record the loaded CUPTI version cannot
    /// produce at all (an activity kind it lacks: the manifest's
    /// `cupti_capabilities` names it). The ground truth still holds them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cupti_unobservable: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl LossAccounting {
    /// Every record a collector lost or could not produce.
    pub fn total(&self) -> u64 {
        self.cupti_dropped
            + self.cupti_timestamps_dropped
            + self.ringbuffer_dropped
            + self.cupti_unobservable
    }
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
