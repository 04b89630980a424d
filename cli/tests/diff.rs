//! `causalbench diff A B` as a person uses it on two runs: every flip's bundles are found
//! (in either folder), metric changes within their interval are hidden unless `--all`,
//! and a changed profiler version or command leads the summary.

mod common;

use common::{causalbench, copy_dir};
use std::path::{Path, PathBuf};

/// A simulator run of two catalog scenarios (one family, so verdicts can flip between
/// seeds), built-in profilers, into `dir/NAME`.
fn run(dir: &Path, name: &str, seed: &str) -> PathBuf {
    let suite = dir.join("suite");
    if !suite.exists() {
        std::fs::create_dir_all(&suite).unwrap();
        let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalog");
        for v in ["event-edge", "independent"] {
            let f = format!("dependency-vs-overlap.{v}.yaml");
            std::fs::copy(catalog.join(&f), suite.join(&f)).unwrap();
        }
    }
    let out = dir.join(name);
    let (code, _, err) = causalbench(&[
        "run",
        "--backend",
        "sim",
        "--quiet",
        "--reps",
        "2",
        "--megakernel-reps",
        "0",
        "--profilers",
        "builtin",
        "--seed",
        seed,
        "--suite",
        suite.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    out
}

fn diff(a: &Path, b: &Path, extra: &[&str]) -> String {
    let mut args = vec!["diff", a.to_str().unwrap(), b.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (code, out, err) = causalbench(&args);
    assert_eq!(code, 0, "{err}");
    out
}

/// The number before `what` in the summary's counts line.
fn count(summary: &str, what: &str) -> usize {
    let at = summary
        .find(what)
        .unwrap_or_else(|| panic!("no `{what}`: {summary}"));
    summary[..at]
        .split_whitespace()
        .last()
        .unwrap()
        .trim_start_matches('(')
        .parse()
        .unwrap()
}

#[test]
fn diff_finds_bundles_hides_noise_and_leads_with_changed_profilers() {
    let dir = tempfile::tempdir().unwrap();
    let a = run(dir.path(), "a", "1");
    let b = run(dir.path(), "b", "7");

    let summary = diff(&a, &b, &[]);
    let flips = count(&summary, "verdicts correct→wrong") + count(&summary, "wrong→correct");
    assert!(flips > 0, "the seeds should flip a verdict: {summary}");
    assert!(
        !summary.contains("bundles not at hand"),
        "both folders hold their bundles: {summary}"
    );
    // Timing noise is hidden, and said to be.
    let hidden = count(&summary, "more within their 95 % interval");
    assert!(hidden > 0, "{summary}");
    let shown = count(&summary, "leaderboard metrics moved");
    let all = diff(&a, &b, &["--all"]);
    assert_eq!(
        count(&all, "leaderboard metrics moved"),
        shown + hidden,
        "{all}"
    );
    assert!(!all.contains("hidden"), "{all}");
    let details = std::fs::read_to_string(b.join("diff-details.md")).unwrap();
    assert!(
        details.contains("analysis_ms"),
        "--all lists the timing: {details}"
    );
    diff(&a, &b, &[]);
    let details = std::fs::read_to_string(b.join("diff-details.md")).unwrap();
    assert!(!details.contains("| analysis_ms |"), "{details}");

    // B's bundles moved away: A's stand for them where B's manifest records the same
    // bytes (here none do: another seed), so B's side is not at hand, and says so.
    let moved = dir.path().join("b-without-bundles");
    copy_dir(&b, &moved);
    std::fs::remove_dir_all(moved.join("bundles")).unwrap();
    assert!(diff(&a, &moved, &[]).contains("bundles not at hand"));
    // The same run twice, one copy without its bundles: the other's serve both sides.
    let same = dir.path().join("a-without-bundles");
    copy_dir(&a, &same);
    std::fs::remove_dir_all(same.join("bundles")).unwrap();
    let mut scores = std::fs::read_to_string(same.join("scores.jsonl")).unwrap();
    // One verdict flipped by hand, so that there is a flip to explain.
    let line = scores
        .lines()
        .find(|l| l.contains("\"correct\":true"))
        .unwrap()
        .to_string();
    scores = scores.replacen(
        &line,
        &line.replacen("\"correct\":true", "\"correct\":false", 1),
        1,
    );
    std::fs::write(same.join("scores.jsonl"), &scores).unwrap();
    let s = diff(&a, &same, &[]);
    assert!(
        s.contains("none (1)") && !s.contains("bundles not at hand"),
        "{s}"
    );

    // A new version of a profiler and an external command that changed lead the summary.
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(same.join("manifest.json")).unwrap()).unwrap();
    manifest["external_profilers"] = serde_json::json!({"mine": "python3 mine.py {view} {out}"});
    std::fs::write(same.join("manifest.json"), manifest.to_string()).unwrap();
    let version = scores
        .lines()
        .find(|l| l.contains("\"profiler\":\"causal-graph\""))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["profiler_version"].as_str().unwrap().to_string())
        .unwrap();
    let from = format!("\"profiler_version\":\"{version}\"");
    let scores: String = scores
        .lines()
        .map(|l| {
            if l.contains("\"profiler\":\"causal-graph\"") {
                l.replace(&from, "\"profiler_version\":\"9.9.9\"") + "\n"
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(same.join("scores.jsonl"), scores).unwrap();
    let s = diff(&a, &same, &[]);
    let lead = s.find("## Profilers that changed").expect(&s);
    assert!(
        lead < s.find("## Verdict flips").unwrap_or(usize::MAX),
        "{s}"
    );
    assert!(
        s.contains(&format!("| causal-graph | {version} | 9.9.9 |")),
        "{s}"
    );
    assert!(
        s.contains("| mine | absent | absent | - | `python3 mine.py {view} {out}` |"),
        "{s}"
    );
}
