//! The built-in profilers beside a submitted entry (baselines/PROTOCOL.md, "Getting onto
//! the leaderboard"): `submit` replays the entry's own `bundles/` with the built-in
//! profilers, keeps their case scores on the entry's views in `builtin-scores.jsonl`,
//! and the entry's `leaderboard.md` and site rank its row among theirs. `scores.jsonl`
//! and `leaderboard.json` stay the entry's own: what `check` verifies.

use crate::Failure;
use evaluator::{CaseScore, Leaderboard};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The built-in profilers' case scores on an entry's bundles and views.
pub const BUILTIN_SCORES: &str = "builtin-scores.jsonl";

/// The heading of the section of `leaderboard.md` that ranks the entry among them.
const HEADING: &str = "## Beside the built-in profilers";

/// Scores the built-in profilers on the entry in `out` (its bundles, its views) into
/// `out/builtin-scores.jsonl`, then ranks the entry among them in its `leaderboard.md`.
pub fn score_builtins(out: &Path, jobs: Option<usize>) -> Result<(), Failure> {
    let entry = evaluator::read_scores(&out.join(evaluator::SCORES_FILE))?;
    let views: BTreeSet<&str> = entry.iter().map(|s| s.view.as_str()).collect();
    let scratch = out.join(".builtin-run");
    let _ = std::fs::remove_dir_all(&scratch);
    // The built-ins as `run` scores them: a replay of the entry's recorded bundles, in a
    // process of its own (its own leaderboard and site are not the entry's).
    let exe = std::env::current_exe()
        .map_err(|e| Failure::failed(format!("cannot find this binary: {e}")))?;
    let mut run = Command::new(exe);
    run.arg("run")
        .arg("--corpus")
        .arg(out.join("bundles"))
        .args(["--profilers", "builtin", "--quiet", "--out"])
        .arg(&scratch);
    if let Some(jobs) = jobs {
        run.args(["--jobs", &jobs.to_string()]);
    }
    let o = run
        .output()
        .map_err(|e| Failure::failed(format!("cannot run the built-in profilers: {e}")))?;
    if !o.status.success() {
        return Err(Failure::failed(format!(
            "the built-in profilers' replay of {} failed: {}",
            out.join("bundles").display(),
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    // Scored on the entry's bundles, so on its material: a replay alone reads as public.
    let hidden: BTreeSet<&str> = entry
        .iter()
        .filter(|s| s.hidden)
        .map(|s| s.bundle.as_str())
        .collect();
    let builtin: Vec<CaseScore> = evaluator::read_scores(&scratch.join(evaluator::SCORES_FILE))?
        .into_iter()
        .filter(|s| views.contains(s.view.as_str()))
        .map(|mut s| {
            s.hidden = hidden.contains(s.bundle.as_str());
            s
        })
        .collect();
    evaluator::write_scores(&out.join(BUILTIN_SCORES), &builtin)
        .map_err(|e| Failure::failed(e.to_string()))?;
    let _ = std::fs::remove_dir_all(&scratch);
    mark_leaderboard(out)
}

/// The built-in profilers' case scores kept beside the entry in `results`, if any.
pub fn builtin_scores(results: &Path) -> Result<Option<Vec<CaseScore>>, Failure> {
    let path = results.join(BUILTIN_SCORES);
    if !path.is_file() {
        return Ok(None);
    }
    Ok(Some(evaluator::read_scores(&path)?))
}

/// The leaderboard of the entry's and the built-ins' case scores together.
pub fn with_builtins(results: &Path) -> Result<Option<Leaderboard>, Failure> {
    let Some(builtin) = builtin_scores(results)? else {
        return Ok(None);
    };
    let mut scores = evaluator::read_scores(&results.join(evaluator::SCORES_FILE))?;
    scores.extend(builtin);
    Ok(Some(Leaderboard::from_scores(&scores)))
}

/// Appends (once) the ranking of the entry among the built-in profilers to its
/// `leaderboard.md`.
pub(crate) fn mark_leaderboard(out: &Path) -> Result<(), Failure> {
    let Some(leaderboard) = with_builtins(out)? else {
        return Ok(());
    };
    let path = out.join(evaluator::LEADERBOARD_MD);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Failure::failed(format!("cannot read {}: {e}", path.display())))?;
    let text = match text.find(&format!("\n{HEADING}\n")) {
        Some(at) => text[..at].to_string(),
        None => text,
    };
    let marked = format!(
        "{}\n\n{HEADING}\n\nThe entry's row ranked among the built-in profilers' on the same \
         bundles and views (the built-ins replayed on this folder's `bundles/`; their case \
         scores are in `{BUILTIN_SCORES}`, not in `scores.jsonl`, which `check` verifies).\n\n{}",
        text.trim_end(),
        leaderboard.ranking_markdown()
    );
    ground_truth::io::write_atomic(&path, marked.as_bytes())
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
}
