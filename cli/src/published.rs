//! What a submitted entry shows, as `check` verifies it (baselines/PROTOCOL.md,
//! "Getting onto the leaderboard"): every published file (`leaderboard.md`,
//! `leaderboard.csv`, `axes.csv`, `html/`) is regenerated from the entry's verified
//! case scores by the writers `run` and `submit` use, into a scratch folder, and must
//! be byte-for-byte the one in the entry; and `reproduction.json` counts only when
//! it describes the entry's explanations as they are ([`explanations_sha256`]).

use crate::manifest::{sha256_file, MANIFEST_FILE};
use crate::Failure;
use evaluator::CaseScore;
use ground_truth::submission::{Reproduction, SplitDraw, REPRODUCTION_FILE};
use ground_truth::Readable;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The published files besides `leaderboard.json` (which `check` compares first) and
/// the site's folder, relative to the entry.
const PUBLISHED: [&str; 3] = [
    evaluator::LEADERBOARD_MD,
    evaluator::LEADERBOARD_CSV,
    evaluator::AXES_CSV,
];
const SITE: &str = "html";
/// The built-in rows kept beside an entry (cli/src/submit_beside.rs).
const BUILTIN_SCORES: &str = "builtin-scores.jsonl";

/// One digest of every regular file under `dir/explanations` (each file's sha256 by
/// its path inside the folder): what `check --rerun` compared, recorded in
/// `reproduction.json`, so that a reproduction of other explanations is ignored.
pub fn explanations_sha256(dir: &Path) -> String {
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut stack = vec![dir.join("explanations")];
    while let Some(at) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() => {
                    let name = path
                        .strip_prefix(dir)
                        .unwrap_or(&path)
                        .display()
                        .to_string();
                    files.insert(name, sha256_file(&path).unwrap_or_else(|e| e));
                }
                _ => {}
            }
        }
    }
    let mut h = Sha256::new();
    for (name, sha) in &files {
        h.update(format!("{name}\0{sha}\n").as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The entry's `reproduction.json` when `check --rerun` wrote it for the explanations
/// the entry holds now; `None` when there is none, or it describes other explanations
/// (edited since, or a file `check --rerun` never wrote).
pub fn reproduction_of(dir: &Path) -> Result<Option<Reproduction>, Failure> {
    let path = dir.join(REPRODUCTION_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let r = Reproduction::read(&path).map_err(|e| Failure::input(e.to_string()))?;
    Ok((r.explanations_sha256 == explanations_sha256(dir)).then_some(r))
}

/// The entry's published files regenerated from its case scores `scores` into
/// `scratch`, as `run` and then `submit` wrote them.
fn regenerate(
    dir: &Path,
    scratch: &Path,
    scores: &[CaseScore],
    split: &SplitDraw,
) -> Result<(), Failure> {
    let report =
        evaluator::write_results(scratch, scores).map_err(crate::commands::eval_failure)?;
    // The warning line of an unisolated run comes from the manifest (as stated).
    if let Ok(manifest) = crate::submit::entry_file(dir, MANIFEST_FILE, 1 << 30) {
        std::fs::copy(&manifest, scratch.join(MANIFEST_FILE))
            .map_err(|e| Failure::failed(format!("cannot copy {}: {e}", manifest.display())))?;
    }
    crate::manifest::mark_leaderboard(scratch)?;
    crate::submit::mark_public(scratch, split)?;
    let mut leaderboard = report.leaderboard;
    if let Ok(builtin) = crate::submit::entry_file(dir, BUILTIN_SCORES, 1 << 30) {
        std::fs::copy(&builtin, scratch.join(BUILTIN_SCORES))
            .map_err(|e| Failure::failed(format!("cannot copy {}: {e}", builtin.display())))?;
        crate::submit_beside::mark_leaderboard(scratch)?;
        if let Some(with) = crate::submit_beside::with_builtins(scratch)? {
            leaderboard = with;
        }
    }
    // The site reads the entry's bundles and cases from the entry itself (verified
    // by then) and writes into the scratch folder only.
    crate::site::write(dir, &scratch.join(SITE), &leaderboard)?;
    Ok(())
}

/// Every file under `root`, by its path relative to `root`.
fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(at) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else if let Ok(relative) = path.strip_prefix(root) {
                found.push(relative.to_path_buf());
            }
        }
    }
    found.sort();
    found
}

/// Refuses (exit 2, naming the file) an entry whose published files are not the
/// ones its case scores `scores` give, or whose site holds a file they do not.
pub fn verify(
    dir: &Path,
    scores: &[CaseScore],
    split: &SplitDraw,
    reject: impl Fn(String) -> Failure,
) -> Result<usize, Failure> {
    let scratch = crate::submit::tempdir()?;
    let verified = compare(dir, &scratch, scores, split, reject);
    let _ = std::fs::remove_dir_all(&scratch);
    verified
}

/// [`verify`] with its scratch folder.
fn compare(
    dir: &Path,
    scratch: &Path,
    scores: &[CaseScore],
    split: &SplitDraw,
    reject: impl Fn(String) -> Failure,
) -> Result<usize, Failure> {
    regenerate(dir, scratch, scores, split)?;
    let mut expected: Vec<PathBuf> = PUBLISHED.iter().map(PathBuf::from).collect();
    let site = Path::new(SITE);
    expected.extend(
        files_under(&scratch.join(SITE))
            .into_iter()
            .map(|f| site.join(f)),
    );
    for relative in &expected {
        let fresh = std::fs::read(scratch.join(relative)).map_err(|e| {
            Failure::failed(format!(
                "cannot read the regenerated {}: {e}",
                relative.display()
            ))
        })?;
        let published = crate::submit::entry_file(dir, relative, 1 << 30).map_err(&reject)?;
        let bytes = std::fs::read(&published)
            .map_err(|e| reject(format!("cannot read {}: {e}", published.display())))?;
        if bytes != fresh {
            return Err(reject(format!(
                "{} is not what the entry's case scores give (regenerated by check): \
                 a published file was edited",
                published.display()
            )));
        }
    }
    let fresh: std::collections::BTreeSet<PathBuf> = expected.iter().cloned().collect();
    if let Some(extra) = files_under(&dir.join(SITE))
        .into_iter()
        .map(|f| site.join(f))
        .find(|f| !fresh.contains(f))
    {
        return Err(reject(format!(
            "{}: the entry's case scores give no such page",
            dir.join(extra).display()
        )));
    }
    Ok(expected.len())
}
