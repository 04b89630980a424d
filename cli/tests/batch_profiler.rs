//! `run` with a batch (server) profiler (baselines/PROTOCOL.md, "Batch form") and
//! `--collectors`/`--modes`: the batch form scores exactly as the per-view form of the
//! same program, a server's failure on a view is its crash on that case only, and the
//! narrowing flags choose the views external profilers are run on (a bad value lists
//! the valid ones, exit 2). The progress a log gets: one line per stage.

mod common;

use common::{causalbench, pair_suite as suite, python3_confined};
use std::path::{Path, PathBuf};

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
        "causal-graph",
        "--profiler-timeout",
        "20",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, _, err) = causalbench(&args);
    (code, err)
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/profilers/minimal.py")
}

/// Score rows of `profiler`, without timing and name, sorted.
fn rows(out: &Path, profiler: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("scores.jsonl")).unwrap();
    let mut rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["profiler"] == profiler)
        .map(|mut v| {
            let o = v.as_object_mut().unwrap();
            for field in ["analysis_ms", "invocation", "profiler"] {
                o.remove(field);
            }
            v
        })
        .collect();
    rows.sort_by_key(|v| v.to_string());
    rows
}

/// The minimal example's batch form, crashing on closed targeted-loss views.
const CRASHING_SERVER: &str = r#"import json, runpy, sys
minimal = runpy.run_path(sys.argv[1])
for line in sys.stdin:
    view = json.load(open(json.loads(line)["view"]))
    spec = view["spec"]
    if spec["mode"] == "closed" and spec.get("loss", {}).get("kind") == "targeted":
        sys.exit(3)
    sys.stdout.write(json.dumps(minimal["explain"](json.loads(line)["view"])) + "\n")
    sys.stdout.flush()
"#;

#[test]
fn a_batch_profiler_scores_as_its_per_view_form_and_fails_only_its_own_views() {
    if !python3_confined() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let server = tools.path().join("crashing.py");
    std::fs::write(&server, CRASHING_SERVER).unwrap();
    let out = dir.path().join("out");
    let per_view = format!("per-view=python3 {} {{view}} {{out}}", example().display());
    let batch = format!("batch=serve: python3 {} --serve", example().display());
    // Warm-started (PROTOCOL.md "Warm start"): forked from the harness's zygote.
    let warm = format!(
        "warm=serve[python]: python3 {} --serve",
        example().display()
    );
    let crashing = format!(
        "crashing=serve[python]: python3 {} {}",
        server.display(),
        example().display()
    );
    let (code, err) = run(
        dir.path(),
        &out,
        &[
            "--profiler",
            &per_view,
            "--profiler",
            &batch,
            "--profiler",
            &warm,
            "--profiler",
            &crashing,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let per_view = rows(&out, "per-view");
    assert!(!per_view.is_empty());
    assert_eq!(rows(&out, "batch"), per_view);
    assert_eq!(rows(&out, "warm"), per_view);
    // The crashing server: its crash on exactly the views it chose, answers elsewhere.
    let crashing = rows(&out, "crashing");
    assert_eq!(crashing.len(), per_view.len());
    let case = |r: &serde_json::Value| format!("{} {}", r["bundle"], r["view"]);
    for row in &crashing {
        let chosen = row["view"].as_str().unwrap().ends_with("closed-targeted");
        if chosen {
            let why = row["crashed"].as_str().unwrap_or_default();
            assert!(why.contains("stopped answering"), "{row}");
        } else {
            let good = per_view.iter().find(|g| case(g) == case(row)).unwrap();
            assert_eq!(row, good);
        }
    }
    assert!(crashing.iter().any(|r| !r["crashed"].is_null()));
    // Every answer was measured by the harness.
    let text = std::fs::read_to_string(out.join("scores.jsonl")).unwrap();
    for line in text.lines().filter(|l| l.contains("\"batch\"")) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["invocation"]["wall_ms"].as_f64().unwrap() > 0.0, "{v}");
    }
    // stderr is not a terminal here: one line per stage, with the views per profiler.
    assert!(err.contains("causalbench: bundles: 2 to do"), "{err}");
    assert!(err.contains("views explained: batch "), "{err}");
}

#[test]
fn collectors_and_modes_narrow_the_external_profilers_views() {
    if !python3_confined() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let batch = format!("batch=serve: python3 {} --serve", example().display());
    let (code, err) = run(
        dir.path(),
        &out,
        &[
            "--profiler",
            &batch,
            "--collectors",
            "cupti,host",
            "--modes",
            "closed",
            "--quiet",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("to do"), "--quiet shows no progress: {err}");
    let views: Vec<String> = rows(&out, "batch")
        .iter()
        .map(|r| r["view"].as_str().unwrap().to_string())
        .collect();
    assert!(!views.is_empty());
    assert!(
        views
            .iter()
            .all(|v| v.starts_with("cupti-closed") || v.starts_with("host-closed")),
        "{views:?}"
    );
    // The built-in profilers still read every view.
    assert!(rows(&out, "causal-graph").iter().any(|r| r["view"]
        .as_str()
        .unwrap()
        .starts_with("combined-instrumented")));
    // A bad value lists the valid ones and is an input error.
    let (code, err) = run(dir.path(), &out, &["--collectors", "cupti,gpu"]);
    assert_eq!(code, 2, "{err}");
    for valid in ["cupti", "host", "combined", "kineto", "kineto+host"] {
        assert!(err.contains(valid), "{err}");
    }
    let (code, err) = run(dir.path(), &out, &["--modes", "open"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("instrumented") && err.contains("closed"),
        "{err}"
    );
}

#[test]
fn a_warm_start_without_its_preload_set_starts_cold_and_an_unknown_set_is_refused() {
    if !python3_confined() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let suite = suite(dir.path());
    let warm = format!("warm=serve[hta]: python3 {} --serve", example().display());
    // HTA is not where the harness looks: the zygote cannot preload it.
    let nowhere = dir.path().join("no-hta");
    std::fs::create_dir_all(&nowhere).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .env("CAUSALBENCH_HTA_DIR", &nowhere)
        .args(["run", "--backend", "sim", "--suite"])
        .arg(&suite)
        .args(["--reps", "1", "--profilers", "causal-graph", "--quiet"])
        .args([
            "--collectors",
            "cupti",
            "--modes",
            "closed",
            "--profiler",
            &warm,
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("no warm start for"), "{err}");
    let answered = rows(&out, "warm");
    assert!(!answered.is_empty());
    assert!(
        answered.iter().all(|r| r["crashed"].is_null()),
        "{answered:?}"
    );
    let bad = format!("bad=serve[numpy]: python3 {} --serve", example().display());
    let (code, err) = run(dir.path(), &dir.path().join("bad"), &["--profiler", &bad]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("python, hta"), "{err}");
}

#[test]
fn measure_profiler_cost_starts_fresh_runs_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("builtin")).unwrap();
    let out = dir.path().to_str().unwrap();
    let (code, _, err) = causalbench(&[
        "measure",
        "profiler-cost",
        "--profiler",
        "mine=serve: python3 mine.py",
        "--out",
        out,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("must start fresh"), "{err}");
}
