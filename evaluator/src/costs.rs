//! The leaderboard's "Accuracy against cost" section: each collector
//! configuration's measured cost (`causalbench measure collectors`, a
//! `ground_truth::costs::CollectorCosts` saved in the results directory as
//! [`COSTS_FILE`]) beside the pair accuracy each profiler reaches on the view
//! that models that configuration (evaluator/METRICS.md, "Accuracy against cost").

use crate::leaderboard::{is_probe, Leaderboard};
use crate::EvalError;
use ground_truth::costs::{CollectorCosts, ConfigurationCost};
use ground_truth::io::Readable;
use ground_truth::{Collectors, Mode};
use std::path::Path;

/// Where a results directory keeps the collector costs its leaderboard shows.
pub const COSTS_FILE: &str = "collector-costs.json";
/// The plot of the section.
pub const COSTS_PLOT: &str = "accuracy_vs_cost.png";

/// One point of the section: a profiler on the view of one configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct CostPoint {
    pub profiler: String,
    pub collectors: Collectors,
    /// The configuration's name in the cost study (`cupti`, `ebpf`, `cupti+ebpf`).
    pub configuration: String,
    pub pair_accuracy: f64,
    pub ci: Option<(f64, f64)>,
    /// Median wall-time ratio on the launch-bound and the realistic workload.
    pub launch_bound: Option<Overhead>,
    pub realistic: Option<Overhead>,
}

/// A configuration's cost on one workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Overhead {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub records_per_op: f64,
    pub bytes_per_op: f64,
}

impl From<&ConfigurationCost> for Overhead {
    fn from(c: &ConfigurationCost) -> Self {
        Overhead {
            median: c.overhead_median,
            min: c.overhead_min,
            max: c.overhead_max,
            records_per_op: c.records_per_op,
            bytes_per_op: c.bytes_per_op,
        }
    }
}

/// The costs saved in `dir`, if any; a damaged file is an error, not a silent omission.
pub fn read_in(dir: &Path) -> Result<Option<CollectorCosts>, EvalError> {
    let path = dir.join(COSTS_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    CollectorCosts::read(&path)
        .map(Some)
        .map_err(EvalError::Format)
}

/// The section's points: every profiler (leakage probes aside) × every
/// measured configuration whose view the leaderboard scored, instrumented mode.
pub fn points(lb: &Leaderboard, costs: &CollectorCosts) -> Vec<CostPoint> {
    let cost_of = |workload: &str, view: &str| -> Option<(String, Overhead)> {
        costs
            .workloads
            .iter()
            .find(|w| w.workload == workload)?
            .configurations
            .iter()
            .find(|c| c.view.as_deref() == Some(view))
            .map(|c| (c.collectors.clone(), Overhead::from(c)))
    };
    let mut out = Vec::new();
    for row in &lb.rows {
        if is_probe(&row.profiler) || row.mode != Mode::Instrumented {
            continue;
        }
        let Some(accuracy) = row.pair_accuracy else {
            continue;
        };
        let view = row.collectors.as_str();
        let launch_bound = cost_of("launch-bound", view);
        let realistic = cost_of("realistic", view);
        let Some(configuration) = launch_bound
            .as_ref()
            .or(realistic.as_ref())
            .map(|(name, _)| name.clone())
        else {
            continue;
        };
        out.push(CostPoint {
            profiler: row.profiler.clone(),
            collectors: row.collectors,
            configuration,
            pair_accuracy: accuracy,
            ci: row.ci.get("pair_accuracy").map(|i| (i.low, i.high)),
            launch_bound: launch_bound.map(|(_, o)| o),
            realistic: realistic.map(|(_, o)| o),
        });
    }
    out.sort_by(|a, b| {
        b.pair_accuracy
            .total_cmp(&a.pair_accuracy)
            .then_with(|| a.profiler.cmp(&b.profiler))
            .then_with(|| a.configuration.cmp(&b.configuration))
    });
    out
}

/// Whether no other point is at least as accurate and at most as costly
/// (launch-bound overhead), and strictly better in one of the two.
pub fn on_frontier(p: &CostPoint, all: &[CostPoint]) -> bool {
    let cost = |q: &CostPoint| q.launch_bound.map(|o| o.median).unwrap_or(f64::INFINITY);
    !all.iter().any(|q| {
        q.pair_accuracy >= p.pair_accuracy
            && cost(q) <= cost(p)
            && (q.pair_accuracy > p.pair_accuracy || cost(q) < cost(p))
    })
}

fn overhead_cell(o: Option<Overhead>) -> String {
    match o {
        Some(o) => format!("×{:.3} [{:.3}, {:.3}]", o.median, o.min, o.max),
        None => "—".into(),
    }
}

/// The markdown section (empty when no point could be formed).
pub fn section(lb: &Leaderboard, costs: &CollectorCosts) -> String {
    let points = points(lb, costs);
    if points.is_empty() {
        return String::new();
    }
    let mut s = String::from("\n## Accuracy against cost\n\n");
    s.push_str(&format!(
        "What each collector configuration costs the workload it records ({}; {} interleaved \
         repetitions; ratio = wall time with the collectors over the same repetition without any; \
         `causalbench measure collectors`), beside the pair accuracy each profiler reaches on the \
         view that models it (instrumented; 95 % interval). ★: on the Pareto frontier \
         (no other row is as accurate for less launch-bound overhead). Plot: \
         `plots/{COSTS_PLOT}`.\n\n",
        costs.machine, costs.reps
    ));
    s.push_str(
        "| profiler | view | collectors | pair accuracy | launch-bound overhead | realistic overhead | records/op (launch-bound) | bytes/op (launch-bound) | |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for p in &points {
        let ci =
            p.ci.map(|(l, h)| format!(" [{l:.3}, {h:.3}]"))
                .unwrap_or_default();
        s.push_str(&format!(
            "| {} | {} | {} | {:.3}{} | {} | {} | {} | {} | {} |\n",
            p.profiler,
            p.collectors.as_str(),
            p.configuration,
            p.pair_accuracy,
            ci,
            overhead_cell(p.launch_bound),
            overhead_cell(p.realistic),
            p.launch_bound
                .map(|o| format!("{:.2}", o.records_per_op))
                .unwrap_or_else(|| "—".into()),
            p.launch_bound
                .map(|o| format!("{:.0}", o.bytes_per_op))
                .unwrap_or_else(|| "—".into()),
            if on_frontier(p, &points) { "★" } else { "" },
        ));
    }
    if let Some(e) = &costs.error {
        s.push_str(&format!("\nThe cost study stopped early: {e}\n"));
    }
    s
}
