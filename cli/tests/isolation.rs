//! Integrity of a results directory (`docs/integrity.md`): external profilers
//! scored by `run --profiler`, isolated from the results; bundle hashes in
//! `manifest.json`; opaque view ids.

mod common;

use common::{causalbench, python3};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A suite of one scenario, in `dir`.
fn one_scenario_suite(dir: &Path) -> PathBuf {
    let suite = dir.join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalog");
    let name = "late-launch-vs-device-queueing.stream-backlog.yaml";
    std::fs::copy(catalog.join(name), suite.join(name)).unwrap();
    suite
}

fn run_one(dir: &Path, out: &Path, extra: &[&str]) -> (i32, String, String) {
    let suite = one_scenario_suite(dir);
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
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    causalbench(&args)
}

fn landlock() -> bool {
    baselines::sandbox::kernel_abi().is_some_and(|a| a >= baselines::sandbox::MIN_ABI)
}

/// A profiler that answers nothing, after trying to list the results directory (`$3`).
const MY_PY: &str = r#"import json, os, sys
view = json.load(open(sys.argv[1]))
try:
    os.listdir(sys.argv[3])
    print("listed the results", file=sys.stderr)
except OSError as e:
    print(f"my.py: {e}", file=sys.stderr)
with open(sys.argv[2], "w") as f:
    json.dump({"schema_version": 1,
               "meta": {"profiler": "causal-graph", "version": "1", "view": view["spec"], "wall_ms": 1.0},
               "edges": [], "attribution": [], "diagnoses": []}, f)
"#;

/// `--profiler mine=python3 TOOLS/my.py {view} {out} RESULTS`, its script written into `tools`.
fn mine(tools: &Path, results: &Path) -> String {
    let script = tools.join("my.py");
    std::fs::write(&script, MY_PY).unwrap();
    format!(
        "mine=python3 {} {{view}} {{out}} {}",
        script.display(),
        results.display()
    )
}

#[test]
fn run_scores_an_external_profiler_isolated_from_the_results() {
    if !python3() || !landlock() {
        eprintln!("skipped: needs python3 and a kernel with Landlock");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let profiler = mine(tools.path(), &out);
    let (code, _, err) = run_one(dir.path(), &out, &["--profiler", &profiler]);
    assert_eq!(code, 0, "{err}");
    let csv = std::fs::read_to_string(out.join("leaderboard.csv")).unwrap();
    assert!(csv.lines().any(|l| l.starts_with("mine,")), "{csv}");
    // The harness named the row, whatever the profiler wrote into meta.profiler.
    let scores = std::fs::read_to_string(out.join("scores.jsonl")).unwrap();
    assert_eq!(
        scores
            .lines()
            .filter(|l| l.contains("\"profiler\":\"mine\""))
            .count(),
        30
    );
    // Its attempt to reach the results was denied by the kernel, and the log shows it.
    let logs: Vec<String> = stderr_logs(&out.join("logs"))
        .into_iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert_eq!(logs.len(), 30);
    assert!(
        logs.iter().all(|l| l.contains("Permission denied")),
        "{:?}",
        logs[0]
    );
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(manifest.contains("landlock (ABI"), "{manifest}");
}

#[test]
fn without_landlock_run_refuses_unless_allowed_and_then_says_so() {
    if !python3() {
        eprintln!("skipped: needs python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let profiler = mine(tools.path(), &out);
    let suite = one_scenario_suite(dir.path());
    let run = |extra: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
            .env(baselines::sandbox::PRETEND_NO_LANDLOCK, "1")
            .args([
                "run",
                "--backend",
                "sim",
                "--reps",
                "1",
                "--profilers",
                "causal-graph",
            ])
            .args(["--quiet", "--suite", suite.to_str().unwrap()])
            .args(["--out", out.to_str().unwrap(), "--profiler", &profiler])
            .args(extra)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--allow-unisolated"), "{err}");
    assert!(!out.join("scores.jsonl").exists());
    let (code, err) = run(&["--allow-unisolated"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("UNISOLATED"), "{err}");
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(manifest.contains("UNISOLATED"), "{manifest}");
    let csv = std::fs::read_to_string(out.join("leaderboard.csv")).unwrap();
    assert!(csv.lines().any(|l| l.starts_with("mine,")), "{csv}");
    // Unconfined, the profiler could list the results: exactly what the warning says.
    let logs = stderr_logs(&out.join("logs"));
    assert!(std::fs::read_to_string(&logs[0])
        .unwrap()
        .contains("listed the results"));
    for _ in 0..2 {
        let md = std::fs::read_to_string(out.join("leaderboard.md")).unwrap();
        assert!(md.starts_with("> **WARNING: UNISOLATED"), "{md}");
        assert_eq!(md.matches("WARNING").count(), 1, "{md}");
        // `report` rebuilds the leaderboard with the warning.
        let (code, _, err) = causalbench(&["report", "--results", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
    }
}

#[test]
fn run_refuses_a_bad_profiler_argument() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let (code, _, err) = run_one(dir.path(), &out, &["--profiler", "no-equals-sign"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("NAME=CMD"), "{err}");
}

/// The profilers' stderr logs (their cost files lie beside them).
fn stderr_logs(dir: &Path) -> Vec<PathBuf> {
    let mut logs = walk(dir);
    logs.retain(|p| p.to_string_lossy().ends_with(".stderr.log"));
    logs
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn a_bundle_changed_after_the_run_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let (code, _, err) = run_one(dir.path(), &out, &[]);
    assert_eq!(code, 0, "{err}");
    let bundle = walk(&out.join("bundles")).remove(0);
    let view = walk(&out.join("views")).remove(0);
    let case = view.parent().unwrap().file_name().unwrap();
    let label = view.file_stem().unwrap();
    let explanation = out
        .join("explanations")
        .join(case)
        .join(label)
        .join("causal-graph.json");
    let (b, v, e) = (
        bundle.to_str().unwrap(),
        view.to_str().unwrap(),
        explanation.to_str().unwrap(),
    );
    let (code, _, err) = causalbench(&["score", "--bundle", b, "--view", v, "--explanation", e]);
    assert_eq!(code, 0, "{err}");
    // The truth is rewritten (same JSON, other bytes): nothing downstream accepts it.
    let mut bytes = std::fs::read(&bundle).unwrap();
    bytes.push(b' ');
    std::fs::write(&bundle, bytes).unwrap();
    let (code, _, err) = causalbench(&["score", "--bundle", b, "--view", v, "--explanation", e]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("was modified after the harness recorded it"),
        "{err}"
    );
    let (code, _, err) = causalbench(&["report", "--results", out.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("was modified"), "{err}");
    // A resumed run does not take the finished case's scores either.
    let (code, _, err) = run_one(dir.path(), &out, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("was modified"), "{err}");
}

/// The identity attack of docs/integrity.md: a view's id was a fixed hash of the public `<scenario>.r<rep>`.
fn public_hash(bundle_id: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bundle_id.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

#[test]
fn view_ids_cannot_be_looked_up() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let (code, _, err) = run_one(dir.path(), &out, &[]);
    assert_eq!(code, 0, "{err}");
    let bundle = walk(&out.join("bundles")).remove(0);
    let id = <ground_truth::Bundle as ground_truth::Readable>::read(&bundle)
        .unwrap()
        .id();
    let ids: Vec<String> = walk(&out.join("views"))
        .iter()
        .map(|p| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
            v["bundle"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(ids.iter().all(|v| v == &ids[0]), "one id per bundle");
    assert_ne!(ids[0], public_hash(&id));
    assert!(!ids[0].contains(&id));
    // Standalone views draw a fresh key each time unless given one.
    let view = |key: Option<&Path>, name: &str| {
        let p = dir.path().join(name);
        let mut args = vec![
            "view",
            "--bundle",
            bundle.to_str().unwrap(),
            "--collectors",
            "combined",
            "--mode",
            "closed",
            "--out",
            p.to_str().unwrap(),
        ];
        if let Some(k) = key {
            args.extend(["--view-key", k.to_str().unwrap()]);
        }
        let (code, _, err) = causalbench(&args);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        v["bundle"].as_str().unwrap().to_string()
    };
    let (a, b2) = (view(None, "a.json"), view(None, "b.json"));
    assert_ne!(a, b2);
    assert_ne!(a, public_hash(&id));
    let key = dir.path().join("my.key");
    assert_eq!(view(Some(&key), "c.json"), view(Some(&key), "d.json"));
}
