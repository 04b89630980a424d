//! A submitted entry beside the built-in profilers (baselines/PROTOCOL.md, "Getting onto
//! the leaderboard"; cli/src/submit_beside.rs): `submit` scores the built-ins on the
//! entry's own bundles and views, its `leaderboard.md` and its site rank the entry among
//! them, and `scores.jsonl`/`leaderboard.json`, which `check` verifies, stay its own.

mod common;

use common::{causalbench, python3, submit_minimal};
use std::collections::BTreeSet;
use std::path::Path;

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn field(scores: &[serde_json::Value], key: &str) -> BTreeSet<String> {
    scores
        .iter()
        .map(|s| s[key].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_submission_ranks_its_row_among_the_builtin_rows_of_its_split() {
    if !python3() {
        eprintln!("skipped: needs python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let entry = dir.path().join("entry");
    let (code, _, err) = submit_minimal(&entry);
    assert_eq!(code, 0, "{err}");

    // The built-ins on the entry's own bundles and views, kept apart from its scores.
    let own = lines(&entry.join("scores.jsonl"));
    let builtin = lines(&entry.join("builtin-scores.jsonl"));
    assert_eq!(field(&own, "profiler"), BTreeSet::from(["minimal".into()]));
    let builtin_names: BTreeSet<String> = ["timestamp-join", "cupti-correlation", "ebpf-host"]
        .into_iter()
        .chain(["nvtx-enclosure", "causal-graph"])
        .map(String::from)
        .collect();
    assert_eq!(field(&builtin, "profiler"), builtin_names);
    assert_eq!(field(&builtin, "view"), field(&own, "view"));
    assert_eq!(field(&builtin, "bundle"), field(&own, "bundle"));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(entry.join("leaderboard.json")).unwrap()).unwrap();
    let rows: BTreeSet<&str> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["profiler"].as_str().unwrap())
        .collect();
    assert_eq!(
        rows,
        BTreeSet::from(["minimal"]),
        "leaderboard.json is the entry's"
    );

    // leaderboard.md ranks the entry among them, once.
    let md = std::fs::read_to_string(entry.join("leaderboard.md")).unwrap();
    assert_eq!(md.matches("## Beside the built-in profilers").count(), 1);
    let beside = &md[md.find("## Beside the built-in profilers").unwrap()..];
    for name in builtin_names.iter().map(String::as_str).chain(["minimal"]) {
        assert!(beside.contains(&format!("| {name} ")), "{name}: {beside}");
    }
    // So does its site.
    let index = std::fs::read_to_string(entry.join("html/index.html")).unwrap();
    assert!(index.contains("causal-graph") && index.contains("minimal"));

    // `check` verifies the entry's own scores and accepts it.
    let (code, _, err) = causalbench(&["check", entry.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
}
