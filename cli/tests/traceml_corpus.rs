//! TraceML on the PyTorch track's training steps (docs/third-party-tools.md, "Scored:
//! TraceML"): the committed H200 recording `results/corpus/h200-580-kineto-traceml`
//! (the dev split's training-step shapes run as real training loops traced by
//! `traceml.trace_step`, `torch record --train-loop`) replays without a GPU, and
//! without TraceML (its verdicts were recorded beside the bundles), to exactly the
//! committed leaderboard, which has the `traceml-step` row and its note.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::verdicts;

const CORPUS: &str = "results/corpus/h200-580-kineto-traceml";
const RESULTS: &str = "results/h200-580-kineto-traceml";
/// The rows of the committed replay (its `run.log` has the command).
const PROFILERS: &str = "builtin,kineto-flows,traceml-step";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn traceml_corpus_replays_to_the_committed_leaderboard_with_its_row() {
    let root = root();
    if !root.join(CORPUS).is_dir() {
        eprintln!("skipped: {CORPUS} is not committed");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let args = [
        "run",
        "--corpus",
        CORPUS,
        "--profilers",
        PROFILERS,
        "--quiet",
        "--out",
    ];
    let mut args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    args.push(out.path().as_os_str());
    common::causalbench_ok_in(&root, &args);
    let committed = root.join(RESULTS).join("leaderboard.json");
    assert!(
        verdicts(&out.path().join("leaderboard.json")) == verdicts(&committed),
        "replaying {CORPUS} no longer gives {RESULTS}/leaderboard.json"
    );
    let name = baselines::traceml::NAME;
    for md in [
        std::fs::read_to_string(out.path().join("leaderboard.md")).unwrap(),
        std::fs::read_to_string(root.join(RESULTS).join("leaderboard.md")).unwrap(),
    ] {
        assert!(
            md.contains(&format!("| {name} |")) && md.contains(&format!("- `{name}`:")),
            "no `{name}` row or note in a leaderboard.md of {CORPUS}"
        );
    }
}

/// Every bundle of the corpus has TraceML's verdict beside it, and it reads.
#[test]
fn every_bundle_has_its_traceml_verdict_and_it_reads() {
    let dir = root().join(CORPUS);
    if !dir.is_dir() {
        eprintln!("skipped: {CORPUS} is not committed");
        return;
    }
    let mut bundles = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if !ground_truth::io::is_bundle_file(&p) {
            continue;
        }
        bundles += 1;
        let verdict = baselines::traceml::verdict_beside(&p)
            .unwrap_or_else(|| panic!("{}: no TraceML verdict beside it", p.display()));
        baselines::traceml::read_verdict(&verdict)
            .unwrap_or_else(|e| panic!("{}: {e}", verdict.display()));
    }
    assert!(bundles > 0, "{CORPUS} has no bundles");
}

/// The row's plumbing without a GPU: a committed H200 training-step bundle of the
/// PyTorch track (`results/corpus/h200-580-kineto-shapes`, an implicit-sync case),
/// copied beside a verdict file written here in the recorder's format (a test
/// fixture, not a TraceML result), replays with a `traceml-step` row that answers
/// the case's cause question from the verdict, and shows an inconclusive verdict as
/// the analyzer's failure with TraceML's words.
#[test]
fn traceml_step_answers_from_the_verdict_beside_the_bundle() {
    const SHAPES: &str = "results/corpus/h200-580-kineto-shapes";
    const CASE: &str = "training-step.dev00009.previous-step-fence.r0";
    let bundle = root().join(SHAPES).join(format!("{CASE}.bundle.json.gz"));
    if !bundle.is_file() {
        eprintln!("skipped: {} is not committed", bundle.display());
        return;
    }
    let replay = |kind: &str| -> (serde_json::Value, String) {
        let dir = tempfile::tempdir().unwrap();
        let corpus = dir.path().join("corpus");
        std::fs::create_dir(&corpus).unwrap();
        std::fs::copy(&bundle, corpus.join(format!("{CASE}.bundle.json.gz"))).unwrap();
        let verdict = serde_json::json!({"tool": "traceml-ai", "version": "0.5.0",
            "final_summary": {"step_time": {"diagnosis": {"kind": kind, "summary": "fixture"}}}});
        std::fs::write(
            corpus.join(format!("{CASE}.traceml.json")),
            verdict.to_string(),
        )
        .unwrap();
        let out = dir.path().join("out");
        let args = ["run", "--profilers", "traceml-step", "--quiet", "--corpus"];
        let mut args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        args.extend([corpus.as_os_str(), "--out".as_ref(), out.as_os_str()]);
        common::causalbench_ok_in(dir.path(), &args);
        let board: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("leaderboard.json")).unwrap()).unwrap();
        let row = board["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["profiler"] == "traceml-step" && r["mode"] == "instrumented")
            .cloned()
            .unwrap_or_else(|| panic!("no traceml-step row: {board}"));
        (
            row,
            std::fs::read_to_string(out.join("leaderboard.md")).unwrap(),
        )
    };
    // RESIDUAL_HEAVY (host_compute, cpu_deschedule, implicit_sync): the fence's
    // implicit_sync is in its top three, not first.
    let (row, md) = replay("RESIDUAL_HEAVY");
    assert_eq!(row["cases"], 1, "{row}");
    assert_eq!(row["root_cause_top1"], 0.0, "{row}");
    assert_eq!(row["root_cause_top3"], 1.0, "{row}");
    assert!(md.contains("- `traceml-step`:"), "the row's note is listed");
    // COMPUTE_BOUND names device-side causes only.
    let (row, _) = replay("COMPUTE_BOUND");
    assert_eq!(row["root_cause_top3"], 0.0, "{row}");
    // WARMUP: TraceML concluded nothing; that is its outcome, shown with its words.
    let (_, md) = replay("WARMUP");
    assert!(
        md.contains("TraceML concluded nothing: WARMUP: fixture"),
        "{md}"
    );
}

/// `torch record --train-loop` without a GPU: scenarios that are not a training step
/// are skipped with the reason, and a training step's executor is the training-loop
/// runner, which compiles the executor's own source under `<string>` (the traceback of
/// its failure to start here runs through it).
#[test]
fn train_loop_records_training_steps_only_through_the_runner() {
    if !common::python3() {
        eprintln!("skipped: no python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("corpus");
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args([
            "torch",
            "record",
            "--suite",
            "dev",
            "--reps",
            "1",
            "--train-loop",
        ])
        .args([
            "--only",
            "training-step.dev00009",
            "--only",
            "continuous-batching.dev00007",
        ])
        .arg("--out")
        .arg(&out)
        .env("CAUSALBENCH_PYTHON", "python3")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("recording-summary.json")).unwrap())
            .unwrap();
    let skipped: Vec<(String, String)> = summary["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["scenario"].as_str().unwrap().to_string(),
                s["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        skipped
            .iter()
            .any(|(sc, why)| sc == "continuous-batching.dev00007.harmless"
                && why.contains("a training loop runs one program")),
        "{skipped:?}"
    );
    assert!(
        !skipped
            .iter()
            .any(|(sc, _)| sc == "training-step.dev00009.previous-step-fence"),
        "{skipped:?}"
    );
    if o.status.success() {
        // A machine with a GPU, torch, CuPy and TraceML recorded it.
        return;
    }
    assert!(
        stderr.contains("File \"<string>\""),
        "the runner's executor failed elsewhere: {stderr}"
    );
}
