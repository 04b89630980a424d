//! One contestant changes only its own rows (issue 34): an external profiler that
//! fails, hangs or writes an invalid explanation on views it chooses gets its own
//! crash on those cases, and every other profiler's scores are what they are
//! without it; what an invocation cost is the harness's measurement.

mod common;

use common::{causalbench, pair_suite as suite, python3_confined};
use std::path::Path;

fn run(dir: &Path, out: &Path, extra: &[&str]) -> (i32, String) {
    let suite = suite(dir);
    let mut args = vec![
        "run",
        "--backend",
        "sim",
        "--suite",
        suite.to_str().unwrap(),
        "--reps",
        "1",
        "--profilers",
        "causal-graph,timestamp-join,cupti-correlation",
        "--quiet",
        "--profiler-timeout",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, _, err) = causalbench(&args);
    (code, err)
}

/// Fails on closed views, hangs on host views, answers another view on lossy
/// combined views, and claims 1 ms after sleeping 200 ms on the rest.
const CHOOSY_PY: &str = r#"import json, sys, time
view = json.load(open(sys.argv[1]))
spec = view["spec"]
if spec["mode"] == "closed":
    sys.exit(3)
if spec["collectors"] == "host":
    time.sleep(1000)
if spec["collectors"] == "combined" and spec.get("loss", {}).get("kind", "none") != "none":
    spec = dict(spec, mode="closed")
time.sleep(0.2)
with open(sys.argv[2], "w") as f:
    json.dump({"schema_version": 1,
               "meta": {"profiler": "x", "version": "1", "view": spec, "wall_ms": 1.0},
               "edges": [], "attribution": [], "diagnoses": []}, f)
"#;

/// The rows of `profiler`'s scores, or of every other profiler's, without timing.
fn rows(out: &Path, of: impl Fn(&str) -> bool) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("scores.jsonl")).unwrap();
    let mut rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| of(v["profiler"].as_str().unwrap()))
        .map(|mut v| {
            v.as_object_mut().unwrap().remove("analysis_ms");
            v
        })
        .collect();
    rows.sort_by_key(|v| v.to_string());
    rows
}

#[test]
fn a_failing_contestant_leaves_every_other_row_as_it_was() {
    if !python3_confined() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let alone = dir.path().join("alone");
    let (code, err) = run(dir.path(), &alone, &[]);
    assert_eq!(code, 0, "{err}");
    let choosy = tools.path().join("choosy.py");
    std::fs::write(&choosy, CHOOSY_PY).unwrap();
    let with = dir.path().join("with");
    let profiler = format!("choosy=python3 {} {{view}} {{out}}", choosy.display());
    let (code, err) = run(dir.path(), &with, &["--profiler", &profiler]);
    // Its failures are its own: the run succeeds.
    assert_eq!(code, 0, "{err}");
    // In namespaces of its own wherever this kernel gives them (no silent fallback).
    if baselines::sandbox::namespaces_available().is_ok() {
        let manifest = std::fs::read_to_string(with.join("manifest.json")).unwrap();
        assert!(manifest.contains("namespaces: user, pid"), "{manifest}");
    }
    assert!(err.contains("counted as its crash"), "{err}");
    let builtin = |p: &str| p != "choosy";
    let others = rows(&with, builtin);
    assert!(!others.is_empty());
    assert_eq!(others, rows(&alone, builtin));
    assert_eq!(
        common::verdicts(&with.join("leaderboard.json"))["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["profiler"] != "choosy")
            .collect::<Vec<_>>(),
        common::verdicts(&alone.join("leaderboard.json"))["rows"]
            .as_array()
            .unwrap()
            .iter()
            .collect::<Vec<_>>()
    );
    // Each chosen view is its crash, with the reason, and stays in its denominators.
    let mine = rows(&with, |p| p == "choosy");
    let crashes: Vec<&str> = mine.iter().filter_map(|r| r["crashed"].as_str()).collect();
    assert!(crashes.contains(&"failed (exit status: 3)"), "{crashes:?}");
    assert!(
        crashes
            .iter()
            .any(|c| c.starts_with("timed out after 2.0 s")),
        "{crashes:?}"
    );
    assert!(
        crashes.iter().any(|c| c.contains("meta.view")),
        "{crashes:?}"
    );
    assert!(mine.iter().any(|r| r["crashed"].is_null()));
    let cases = |rows: &[serde_json::Value]| {
        let mut cases: Vec<String> = rows
            .iter()
            .map(|r| format!("{} {}", r["bundle"], r["view"]))
            .collect();
        cases.sort();
        cases.dedup();
        cases
    };
    assert_eq!(cases(&mine), cases(&others));
    let md = std::fs::read_to_string(with.join("leaderboard.md")).unwrap();
    assert!(md.contains("choosy"), "{md}");
    // Its cost is what the harness measured (it claims 1 ms; it slept 200), its claim beside.
    let text = std::fs::read_to_string(with.join("scores.jsonl")).unwrap();
    let answered: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["profiler"] == "choosy" && v["crashed"].is_null())
        .collect();
    assert!(!answered.is_empty());
    assert!(
        answered
            .iter()
            .all(|v| v["analysis_ms"].as_f64().unwrap() >= 200.0),
        "{answered:?}"
    );
    // Beside it, CPU time, peak memory and the profiler's claim, labelled as such.
    for v in &answered {
        let cost = &v["invocation"];
        assert_eq!(cost["wall_ms"], v["analysis_ms"], "{v}");
        assert_eq!(cost["reported_wall_ms"], 1.0, "{v}");
        assert!(cost["cpu_ms"].as_f64().is_some(), "{v}");
        assert!(cost["max_rss_kib"].as_u64().unwrap() > 0, "{v}");
    }
    assert!(mine.iter().all(|r| !r["invocation"].is_null()));
    // The built-in profilers' rows carry none.
    assert!(others.iter().all(|r| r["invocation"].is_null()));
}

/// A profiler whose behaviour lives in `helper.py` beside it: the directory is given
/// as its third argument.
const MAIN_PY: &str = r#"import json, sys
sys.path.insert(0, sys.argv[3])
import helper
view = json.load(open(sys.argv[1]))
if helper.FAIL:
    sys.exit(3)
with open(sys.argv[2], "w") as f:
    json.dump({"schema_version": 1,
               "meta": {"profiler": "x", "version": "1", "view": view["spec"], "wall_ms": 1.0},
               "edges": [], "attribution": [], "diagnoses": []}, f)
"#;

#[test]
fn changed_program_code_is_scored_again() {
    if !python3_confined() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let code_dir = tools.path().join("code");
    std::fs::create_dir_all(&code_dir).unwrap();
    std::fs::write(code_dir.join("main.py"), MAIN_PY).unwrap();
    std::fs::write(code_dir.join("helper.py"), "FAIL = True\n").unwrap();
    let profiler = format!(
        "mine=python3 {} {{view}} {{out}} {}",
        code_dir.join("main.py").display(),
        code_dir.display()
    );
    let out = dir.path().join("results");
    let crashed = |out: &Path| {
        rows(out, |p| p == "mine")
            .iter()
            .filter(|r| !r["crashed"].is_null())
            .count()
    };
    let (code, err) = run(dir.path(), &out, &["--profiler", &profiler]);
    assert_eq!(code, 0, "{err}");
    assert!(crashed(&out) > 0);
    // The same program again: every case resumed.
    let (code, err) = run(dir.path(), &out, &["--profiler", &profiler]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("(2 resumed)"), "{err}");
    // Only its helper module changed, the command line did not: scored again.
    std::fs::write(code_dir.join("helper.py"), "FAIL = False\n").unwrap();
    let (code, err) = run(dir.path(), &out, &["--profiler", &profiler]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("(0 resumed)"), "{err}");
    assert_eq!(crashed(&out), 0);
}
