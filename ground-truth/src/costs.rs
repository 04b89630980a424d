//! What each collector configuration costs the workload it records
//! (`causalbench measure collectors` writes it; the leaderboard's "Accuracy
//! against cost" section reads it; `causalbench schema collector-costs`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Version of the collector-cost format.
pub const COSTS_SCHEMA_VERSION: u32 = 1;

/// One `measure collectors` study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CollectorCosts {
    pub schema_version: u32,
    /// The GPU, driver and CUPTI the study ran on, and the tool version.
    pub machine: String,
    /// Interleaved repetitions of every configuration on every workload.
    pub reps: u32,
    pub workloads: Vec<WorkloadCost>,
    /// Why the study could not measure everything (then `workloads` holds
    /// what it did measure).
    #[serde(default)]
    pub error: Option<String>,
}

/// One workload run under every collector configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadCost {
    /// `launch-bound` (empty kernels back to back) or `realistic` (kernels of
    /// 10–100 µs with copies and a sync per request).
    pub workload: String,
    pub description: String,
    /// Host API calls the workload makes per run (the "operation" of the
    /// per-operation figures).
    pub operations: u64,
    pub configurations: Vec<ConfigurationCost>,
}

/// One collector configuration on one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigurationCost {
    /// `none`, `cupti`, `ebpf` or `cupti+ebpf`.
    pub collectors: String,
    /// The standard view that models what this configuration records
    /// (none for `none`).
    #[serde(default)]
    pub view: Option<String>,
    /// Wall time of each repetition's run, from the first call to the device
    /// having finished, ns.
    pub wall_ns: Vec<u64>,
    /// Each repetition's wall time over the same repetition's `none` run.
    pub ratios: Vec<f64>,
    /// Median of `ratios` (1.0 for `none`).
    pub overhead_median: f64,
    pub overhead_min: f64,
    pub overhead_max: f64,
    /// Records this configuration's collectors produced per operation, and
    /// their size in the bundle's JSON, per operation (medians over repetitions).
    pub records_per_op: f64,
    pub bytes_per_op: f64,
}

impl crate::io::Readable for CollectorCosts {
    const WHAT: &'static str = "collector costs";
    fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.schema_version != COSTS_SCHEMA_VERSION {
            out.push((
                "schema_version".into(),
                format!(
                    "expected schema_version {COSTS_SCHEMA_VERSION}, found {}",
                    self.schema_version
                ),
            ));
        }
        for (w, wl) in self.workloads.iter().enumerate() {
            for (c, cfg) in wl.configurations.iter().enumerate() {
                let at = format!("workloads[{w}].configurations[{c}]");
                if cfg.wall_ns.len() != cfg.ratios.len() {
                    out.push((
                        format!("{at}.ratios"),
                        format!("{} ratios for {} runs", cfg.ratios.len(), cfg.wall_ns.len()),
                    ));
                }
                let figures = [
                    cfg.overhead_median,
                    cfg.overhead_min,
                    cfg.overhead_max,
                    cfg.records_per_op,
                    cfg.bytes_per_op,
                ];
                if figures
                    .iter()
                    .chain(&cfg.ratios)
                    .any(|x| !x.is_finite() || *x < 0.0)
                {
                    out.push((at, "figures must be finite and non-negative".into()));
                }
            }
        }
        out
    }
}

/// Median of `values` (0 when empty).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}
