//! The "Accuracy against cost" part of a results directory: the section appended to
//! `leaderboard.md` and its plot, when the directory holds collector costs
//! (`costs` computes, `plots` draws).

use crate::costs;
use crate::leaderboard::Leaderboard;
use crate::EvalError;
use std::path::{Path, PathBuf};

/// Appends the section to `dir/leaderboard.md` and draws its plot, when `dir`
/// holds collector costs. Returns the files written.
pub fn write(dir: &Path, lb: &Leaderboard) -> Result<Vec<PathBuf>, EvalError> {
    let Some(costs) = costs::read_in(dir)? else {
        return Ok(Vec::new());
    };
    let text = costs::section(lb, &costs);
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let md = dir.join(crate::LEADERBOARD_MD);
    let mut body = std::fs::read_to_string(&md).map_err(|e| EvalError::Io {
        path: md.clone(),
        source: e,
    })?;
    body.push_str(&text);
    ground_truth::io::write_atomic(&md, body.as_bytes()).map_err(|e| EvalError::Io {
        path: md.clone(),
        source: e,
    })?;
    let plot = dir.join("plots").join(costs::COSTS_PLOT);
    crate::plots::accuracy_vs_cost(&plot, &costs::points(lb, &costs))?;
    Ok(vec![plot])
}
