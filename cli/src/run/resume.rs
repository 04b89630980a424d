//! What a run keeps in `cases/` so that a rerun into the same directory resumes:
//! each finished case's scores, the fingerprint of what produced them (with the
//! scores' own hash), and the label check's verdict.

use super::plan::Job;
use crate::external::Externals;
use evaluator::CaseScore;
use ground_truth::io::write_atomic;
use std::path::{Path, PathBuf};

/// Everything that determines a finished case's scores: the tool's version and build (the
/// running executable's hash, [`build_identity`]), the backend,
/// the scenario as run (its seed override applied) and the repetition, or the replayed
/// bundle's bytes, and the profilers (built-in names, external templates). A finished case
/// is reused only while its fingerprint is the same, so a rerun with another seed,
/// profiler set, scenario file or build scores the case again instead of keeping stale
/// scores.
pub(super) fn case_fingerprint(
    job: &Job,
    backend: &str,
    profilers: &[String],
    externals: &Externals,
) -> Result<String, String> {
    use sha2::{Digest, Sha256};
    let work = match job {
        Job::Record {
            scenario,
            repetition,
        } => serde_json::json!({
            "scenario": scenario,
            "repetition": repetition,
        }),
        Job::Replay { path, .. } => serde_json::json!({
            "bundle_sha256": crate::manifest::sha256_file(path)?,
        }),
    };
    let identity = serde_json::json!({
        "tool_version": env!("CARGO_PKG_VERSION"),
        "build": build_identity(),
        "backend": backend,
        "work": work,
        "profilers": profilers,
        // The programs' content too: changed code is scored again.
        "external_profilers": externals.programs(),
    });
    let digest = Sha256::digest(identity.to_string().as_bytes());
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// The build that scores: the sha256 of the running executable's bytes, read once per
/// process. The package version stays the same from one build to the next, so without it
/// a rebuilt `causalbench` whose profilers read differently resumed the old build's
/// scores. Empty where the executable cannot be read (then the version alone keys it).
fn build_identity() -> &'static str {
    static BUILD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BUILD.get_or_init(|| {
        std::env::current_exe()
            .ok()
            .and_then(|exe| crate::manifest::sha256_file(&exe).ok())
            .unwrap_or_default()
    })
}

/// Where the fingerprint of a finished case is kept, beside its scores.
pub(super) fn fingerprint_path(out: &Path, key: &str) -> PathBuf {
    out.join("cases").join(format!("{key}.fingerprint"))
}

/// Where a bundle's scores are kept once it is finished.
pub(super) fn scores_path(out: &Path, key: &str) -> PathBuf {
    out.join("cases").join(format!("{key}.jsonl"))
}

/// The scores of a bundle an earlier (or interrupted) run finished with the same
/// fingerprint, as they were written (a scores file cut at a line boundary parses, so its
/// hash, kept beside the fingerprint, decides).
pub(super) fn finished_scores(out: &Path, key: &str, fingerprint: &str) -> Option<Vec<CaseScore>> {
    let stamp = std::fs::read_to_string(fingerprint_path(out, key)).ok()?;
    let mut lines = stamp.lines();
    if lines.next() != Some(fingerprint) {
        return None;
    }
    let path = scores_path(out, key);
    if lines.next() != crate::manifest::sha256_file(&path).ok().as_deref() {
        return None;
    }
    // Only a case no label holds for (dropped or indeterminate,
    // docs/scenario-space.md) finishes with no scores.
    let dropped = std::fs::read_to_string(label_path(out, key)).is_ok_and(|v| {
        ground_truth::graph::LabelVerdict::parse(v.trim()).is_some_and(|v| !v.is_scored())
    });
    evaluator::read_scores(&path)
        .ok()
        .filter(|scores| !scores.is_empty() || dropped)
}

/// The label check's verdict of a case (docs/scenario-space.md).
pub(super) fn label_path(out: &Path, key: &str) -> PathBuf {
    out.join("cases").join(format!("{key}.label"))
}

/// Writes a finished case's scores, then its fingerprint stamp.
pub(super) fn keep_scores(
    out: &Path,
    key: &str,
    fingerprint: &str,
    scores: &[CaseScore],
) -> Result<(), String> {
    let done = scores_path(out, key);
    write_atomic(&done, evaluator::scores_to_jsonl(&scores).as_bytes())
        .map_err(|e| format!("{key}: cannot write {}: {e}", done.display()))?;
    // Written last: scores without it are never taken as finished, and
    // it holds the scores' own hash, so a cut or edited scores file is
    // scored again.
    let stamp = fingerprint_path(out, &key);
    let scores_sha = crate::manifest::sha256_file(&done)?;
    let text = format!("{fingerprint}\n{scores_sha}\n");
    write_atomic(&stamp, text.as_bytes())
        .map_err(|e| format!("{key}: cannot write {}: {e}", stamp.display()))?;
    Ok(())
}
