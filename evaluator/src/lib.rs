//! causalbench evaluator: scores a profiler's explanation of a trace view against
//! the bundle's ground truth (evaluator/METRICS.md), aggregates case scores into leaderboards,
//! draws plots and diffs two result sets.
//!
//! Every metric is defined in `evaluator/METRICS.md` precisely enough to recompute it.
//!
//! Entry points:
//! - [`score_case`]: one bundle × view × explanation → [`CaseScore`];
//! - [`write_results`]: `scores.jsonl` + leaderboard + plots for a result set;
//! - [`report`]: rebuild leaderboard + plots from `DIR/scores.jsonl`;
//! - [`diff`]: what changed between two result directories.

pub mod agreement;
mod axes;
mod bootstrap;
mod buckets;
mod cost_section;
pub mod costs;
mod diff;
mod diff_evidence;
mod diff_summary;
mod index;
mod leaderboard;
pub mod megakernel;
mod output;
mod pairs;
pub mod palette;
mod plots;
mod ranking;
mod rounding;
mod score;
mod shortfall;
mod subset;
mod summary;

pub use axes::{AxisRow, HeadlineRow};
pub use bootstrap::{Interval, LEVEL, RESAMPLES};
pub use buckets::{bucket, Bucket, HEADLINE_AXIS, HEADLINE_THRESHOLD};
pub use diff::{
    bundle_key, diff, CaseKey, Diff, MetricChange, ProfilerChange, RowKey, VerdictChange,
};
pub use diff_evidence::{ChangeKind, Evidence, RecordChange};
pub use leaderboard::{
    csv_header, is_probe, EdgeTypeRow, FamilyRow, Leaderboard, LeaderboardRow, LossRow, Material,
    CI_METRICS, CSV_COLUMNS, PROBE_PREFIX,
};
pub use output::{
    parse_scores, read_scores, scores_in, scores_to_jsonl, write_scores, AXES_CSV, LEADERBOARD_CSV,
    LEADERBOARD_JSON, LEADERBOARD_MD, SCORES_FILE,
};
pub use plots::{write_plots, PLOTS};
pub use ranking::{rank_rows, Ranked, HEADLINE_VIEWS, RANK_RULE};
pub use score::{
    overblamed_phase, path_fidelity, phase_error, score_case, CaseScore, EdgeCounts, EdgeScore,
    InvocationCost, RequestScore, SymptomScore, TypeScore, CONFIDENT, OVERBLAME_SHARE, PHASE_NAMES,
};
pub use shortfall::{question_name, shortfalls, Shortfall, Tally};
pub use subset::{part_rates, PartRates};

use ground_truth::FormatError;
use std::path::{Path, PathBuf};

/// Errors of the file-level entry points.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// Bad input (a malformed `scores.jsonl`): the CLI's exit code 2.
    #[error("{0}")]
    Format(#[from] FormatError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: cannot draw plot: {message}", path.display())]
    Plot { path: PathBuf, message: String },
}

/// What [`report`] / [`write_results`] produced.
#[derive(Debug, Clone)]
pub struct Report {
    pub leaderboard: Leaderboard,
    /// Case scores read or written.
    pub cases: usize,
    /// Files written (leaderboard files, plots, and `scores.jsonl` for `write_results`).
    pub files: Vec<PathBuf>,
}

/// Canonical order of case scores in `scores.jsonl`: bundle, backend, profiler, view.
pub fn sort_scores(scores: &mut [CaseScore]) {
    scores.sort_by(|a, b| {
        (&a.bundle, &a.backend, &a.profiler, &a.view).cmp(&(
            &b.bundle,
            &b.backend,
            &b.profiler,
            &b.view,
        ))
    });
}

fn write_report(
    dir: &Path,
    scores: &[CaseScore],
    mut files: Vec<PathBuf>,
) -> Result<Report, EvalError> {
    let leaderboard = Leaderboard::from_scores(scores);
    leaderboard.write(dir)?;
    files.extend(
        [LEADERBOARD_MD, LEADERBOARD_CSV, LEADERBOARD_JSON, AXES_CSV]
            .iter()
            .map(|f| dir.join(f)),
    );
    files.extend(write_plots(dir, scores, &leaderboard)?);
    files.extend(cost_section::write(dir, &leaderboard)?);
    Ok(Report {
        leaderboard,
        cases: scores.len(),
        files,
    })
}

/// Rebuilds `leaderboard.{md,csv,json}` and `plots/*.png` in `results_dir` from
/// `results_dir/scores.jsonl`.
pub fn report(results_dir: &Path) -> Result<Report, EvalError> {
    let scores = read_scores(&output::scores_in(results_dir))?;
    write_report(results_dir, &scores, Vec::new())
}

/// Writes a whole result set into `dir`: `scores.jsonl` (in canonical order),
/// leaderboard files and plots.
pub fn write_results(dir: &Path, scores: &[CaseScore]) -> Result<Report, EvalError> {
    let mut sorted = scores.to_vec();
    sort_scores(&mut sorted);
    let p = dir.join(SCORES_FILE);
    write_scores(&p, &sorted)?;
    write_report(dir, &sorted, vec![p])
}

/// Names accepted by [`schema`], with what each documents.
pub const SCHEMA_NAMES: &[(&str, &str)] = &[
    ("scores", "one line of scores.jsonl (a case score)"),
    ("leaderboard", "leaderboard.json"),
];

/// JSON Schema of an evaluator format, pretty-printed, or `None` for an unknown name.
pub fn schema(name: &str) -> Option<String> {
    let s = match name {
        "scores" | "score" | "case-score" => schemars::schema_for!(CaseScore),
        "leaderboard" => schemars::schema_for!(Leaderboard),
        _ => return None,
    };
    Some(serde_json::to_string_pretty(&s).expect("schemas serialize"))
}
