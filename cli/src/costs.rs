//! `run --costs`: the collector costs a leaderboard shows ("Accuracy against
//! cost", evaluator/src/costs.rs), copied into the results directory.

use crate::Failure;
use std::path::{Path, PathBuf};

/// The H200 measurement of what each collector costs, shown with the shipped corpus.
pub const SHIPPED_COSTS: &str = "results/h200-580/measurements/collector-costs.json";

/// Copies the collector costs the leaderboard shows into `out` (checked first:
/// a malformed file is an input error, exit 2).
pub fn take_costs(costs: Option<&Path>, corpus: Option<&Path>, out: &Path) -> Result<(), Failure> {
    let source = match costs {
        Some(f) => f.to_path_buf(),
        None if corpus == Some(Path::new(crate::run::SHIPPED_CORPUS))
            && Path::new(SHIPPED_COSTS).is_file() =>
        {
            PathBuf::from(SHIPPED_COSTS)
        }
        None => return Ok(()),
    };
    use ground_truth::io::Readable;
    let costs = ground_truth::costs::CollectorCosts::read(&source)
        .map_err(|e| Failure::input(e.to_string()))?;
    let dest = out.join(evaluator::costs::COSTS_FILE);
    let text = serde_json::to_string_pretty(&costs).map_err(Failure::failed)?;
    ground_truth::io::write_atomic(&dest, text.as_bytes())
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", dest.display())))
}
