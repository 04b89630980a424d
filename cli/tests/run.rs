//! `causalbench run` end to end on the simulator: every file docs/cli.md names,
//! the exact leaderboard columns, the megakernel track's own section, and
//! resuming into the same directory.

use std::process::Command;

const COLUMNS: &str = "profiler,collectors,mode,cases,pair_accuracy,root_cause_top1,root_cause_top3,edge_precision,edge_recall,edge_f1,false_causal_edges,request_correct,request_wrong,request_abstained,critical_path_fidelity,unresolved_recall,false_confidence_rate,brier,analysis_ms";

fn run(out: &std::path::Path, extra: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args([
            "run",
            "--backend",
            "sim",
            "--profilers",
            "builtin",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ])
        .args(extra)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

#[test]
fn run_writes_every_file_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let (code, _, err) = run(&out, &["--reps", "1", "--megakernel-reps", "1"]);
    assert_eq!(code, 0, "{err}");
    for f in [
        "leaderboard.md",
        "leaderboard.csv",
        "leaderboard.json",
        "scores.jsonl",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    for p in [
        "pair_accuracy_by_family.png",
        "edge_f1_by_type.png",
        "loss_sweep.png",
        "case_heatmap.png",
    ] {
        assert!(out.join("plots").join(p).is_file(), "plots/{p} missing");
    }
    for d in ["bundles", "views", "explanations"] {
        assert!(
            std::fs::read_dir(out.join(d)).unwrap().count() > 0,
            "{d}/ is empty"
        );
    }
    let csv = std::fs::read_to_string(out.join("leaderboard.csv")).unwrap();
    assert!(
        csv.lines().next().unwrap().starts_with(COLUMNS),
        "header: {}",
        csv.lines().next().unwrap()
    );
    let track = track_rows(&out);
    check_track(&out, &track);
    let first = std::fs::read(out.join("scores.jsonl")).unwrap();
    let lines = first.iter().filter(|&&b| b == b'\n').count();
    // 27 scenarios × 30 views × 5 profilers.
    assert_eq!(lines, 27 * 30 * 5);

    // Lose one finished bundle's scores: a rerun redoes only that one and gives the same result.
    let cases = out.join("cases");
    let victim = std::fs::read_dir(&cases)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(&victim).unwrap();
    let (code, _, err) = run(&out, &["--reps", "1", "--megakernel-reps", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("(26 resumed)"), "{err}");
    let strip = |bytes: &[u8]| -> Vec<serde_json::Value> {
        String::from_utf8_lossy(bytes)
            .lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                // Analysis time is a measurement, not a verdict.
                v.as_object_mut().unwrap().remove("analysis_ms");
                v
            })
            .collect()
    };
    assert_eq!(
        strip(&std::fs::read(out.join("scores.jsonl")).unwrap()),
        strip(&first),
        "same verdicts after resume"
    );
    // The track resumed from its packs: same verdicts, section still there.
    assert_eq!(strip_timing(track_rows(&out)), strip_timing(track.clone()));
    check_track(&out, &track);

    // `report` rebuilds the section from the track's scores; `megakernel
    // report` scores the packs `run` kept to the same verdicts.
    succeeds(&["report", "--results", out.to_str().unwrap()]);
    check_track(&out, &track);
    let packs = out.join("megakernel");
    let rescored = dir.path().join("rescored");
    succeeds(&[
        "megakernel",
        "report",
        "--packs",
        packs.to_str().unwrap(),
        "--out",
        rescored.to_str().unwrap(),
    ]);
    assert_eq!(strip_timing(track_rows(&rescored)), strip_timing(track));
}

fn succeeds(args: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
}

fn track_rows(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("track-leaderboard.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Rows without the analysis time (a measurement, not a verdict).
fn strip_timing(mut rows: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    for r in &mut rows {
        r.as_object_mut().unwrap().remove("mean_analysis_ms");
    }
    rows
}

/// The megakernel track's files and section, with the simulator's verdicts
/// that megakernel/README.md reports: the full task log tells every pair
/// apart, kernel-level CUPTI none.
fn check_track(out: &std::path::Path, rows: &[serde_json::Value]) {
    assert!(out.join("track-scores.jsonl").is_file());
    assert!(out.join("track-leaderboard.md").is_file());
    let packs = std::fs::read_dir(out.join("megakernel")).unwrap().count();
    assert_eq!(packs, 4, "one case pack per megakernel family");
    let md = std::fs::read_to_string(out.join("leaderboard.md")).unwrap();
    assert_eq!(md.matches("## Megakernel track").count(), 1, "{md}");
    let row = |p: &str, m: &str| {
        rows.iter()
            .find(|r| r["profiler"] == p && r["monitor"] == m)
            .unwrap_or_else(|| panic!("no track row {p} × {m}"))
    };
    assert_eq!(row("mk-task-log", "task-log")["pair_accuracy"], 1.0);
    assert_eq!(row("mk-kernel-cupti", "none")["pair_accuracy"], 0.0);
    // The diagnosis monitor program, read by the aggregate profiler.
    assert_eq!(row("mk-aggregate", "ebpf")["pair_accuracy"], 1.0);
    assert!(md.contains("| mk-task-log | task-log |"), "{md}");
    assert!(
        md.contains("| eBPF monitors | 1.000 | 1.000 | 1.000 | 0.000 (ebpf-sampled) |"),
        "{md}"
    );
}

/// A finished case is reused only while everything that determines it is the same: a
/// rerun into the same directory with another seed, another profiler set, a changed
/// scenario file or another build of `causalbench` scores the case again instead of
/// keeping stale scores.
#[test]
fn a_rerun_with_other_settings_scores_again() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let scenario = suite.join("one.yaml");
    std::fs::copy(
        root.join("catalog/concurrent-work.harmless.yaml"),
        &scenario,
    )
    .unwrap();
    let out = dir.path().join("results");
    let base = [
        "--suite",
        suite.to_str().unwrap(),
        "--reps",
        "1",
        "--megakernel-reps",
        "0",
    ];
    let resumed_by = |exe: &std::path::Path, extra: &[&str], profilers: &str| {
        let o = Command::new(exe)
            .args(["run", "--backend", "sim", "--quiet", "--out"])
            .arg(&out)
            .args(base)
            .args(["--profilers", profilers])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(0), "{err}");
        let csv = std::fs::read_to_string(out.join("leaderboard.csv")).unwrap();
        (err, csv)
    };
    let resumed = |extra: &[&str], profilers: &str| -> (String, String) {
        resumed_by(
            std::path::Path::new(env!("CARGO_BIN_EXE_causalbench")),
            extra,
            profilers,
        )
    };
    let (err, _) = resumed(&[], "timestamp-join");
    assert!(err.contains("(0 resumed)"), "{err}");
    let (err, _) = resumed(&[], "timestamp-join");
    assert!(err.contains("(1 resumed)"), "the same run resumes: {err}");
    let (err, csv) = resumed(&[], "builtin");
    assert!(err.contains("(0 resumed)"), "another profiler set: {err}");
    assert!(csv.contains("\ncausal-graph,"), "{csv}");
    let (err, _) = resumed(&["--seed", "7"], "builtin");
    assert!(err.contains("(0 resumed)"), "another seed: {err}");
    let text = std::fs::read_to_string(&scenario).unwrap();
    std::fs::write(
        &scenario,
        text.replace("magnitude_us: 2000", "magnitude_us: 2500"),
    )
    .unwrap();
    let (err, _) = resumed(&["--seed", "7"], "builtin");
    assert!(
        err.contains("(0 resumed)"),
        "a changed scenario file: {err}"
    );
    let (err, _) = resumed(&["--seed", "7"], "builtin");
    assert!(err.contains("(1 resumed)"), "{err}");
    // Another build: the same program with one byte more after its end (the loader
    // ignores it), as a rebuilt binary of the same version differs.
    let rebuilt = dir.path().join("causalbench-rebuilt");
    let mut bytes = std::fs::read(env!("CARGO_BIN_EXE_causalbench")).unwrap();
    bytes.push(0);
    std::fs::write(&rebuilt, bytes).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&rebuilt, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (err, _) = resumed_by(&rebuilt, &["--seed", "7"], "builtin");
    assert!(err.contains("(0 resumed)"), "another build: {err}");
}

/// A finished case's scores file cut at a line boundary still parses; it must not be
/// taken as finished (its hash is kept beside its fingerprint).
#[test]
fn a_cut_cases_file_is_scored_again() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::copy(
        root.join("catalog/concurrent-work.harmless.yaml"),
        suite.join("one.yaml"),
    )
    .unwrap();
    let out = dir.path().join("results");
    let run = || {
        let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
            .args(["run", "--backend", "sim", "--quiet", "--reps", "1"])
            .args(["--megakernel-reps", "0", "--profilers", "builtin"])
            .arg("--suite")
            .arg(&suite)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0));
        (
            String::from_utf8_lossy(&o.stderr).to_string(),
            std::fs::read_to_string(out.join("scores.jsonl")).unwrap(),
        )
    };
    let (_, full) = run();
    let case = std::fs::read_dir(out.join("cases"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let text = std::fs::read_to_string(&case).unwrap();
    let first_line = text.lines().next().unwrap();
    std::fs::write(&case, format!("{first_line}\n")).unwrap();
    let (err, again) = run();
    assert!(err.contains("(0 resumed)"), "{err}");
    assert_eq!(again.lines().count(), full.lines().count());
}
