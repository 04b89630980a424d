//! What the end-to-end tests that run external profilers share (each test
//! binary uses only part of it).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs the binary: (exit code, stdout, stderr).
pub fn causalbench(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// Whether the confined Python profilers of these tests can run here: `python3` and a
/// kernel with Landlock (else the test is skipped, saying so).
pub fn python3_confined() -> bool {
    let ok = python3() && baselines::sandbox::detect(false).is_ok();
    if !ok {
        eprintln!("skipped: needs python3 and a kernel with Landlock");
    }
    ok
}

/// Whether `python3` runs here (the external profilers of these tests are Python).
pub fn python3() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs the binary in `dir`; asserts it exited 0.
pub fn causalbench_ok_in(dir: &Path, args: &[&std::ffi::OsStr]) {
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Copies the directory tree `from` to `to` (a results folder to damage or resume).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// leaderboard.json without the timing fields.
pub fn verdicts(path: &Path) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("analysis_ms");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

/// A suite of the two scenarios of one pair family (late launch vs device
/// queueing), in `dir/suite`: the smallest run that still scores a pair.
pub fn pair_suite(dir: &Path) -> PathBuf {
    let suite = dir.join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalog");
    for name in [
        "late-launch-vs-device-queueing.stream-backlog.yaml",
        "late-launch-vs-device-queueing.occupancy-hog.yaml",
    ] {
        std::fs::copy(catalog.join(name), suite.join(name)).unwrap();
    }
    suite
}

/// `--profiler` for the repository's minimal example profiler (per-view form).
pub fn minimal_profiler() -> String {
    let minimal = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/profilers/minimal.py");
    format!("minimal=python3 {} {{view}} {{out}}", minimal.display())
}

/// A small entry of the minimal profiler in `entry` (two dev cases, one
/// repetition, CUPTI views, no isolation needed): (exit code, stdout, stderr).
pub fn submit_minimal(entry: &Path) -> (i32, String, String) {
    let profiler = minimal_profiler();
    causalbench(&[
        "submit",
        "--profiler",
        &profiler,
        "--cases",
        "2",
        "--reps",
        "1",
        "--collectors",
        "cupti",
        "--allow-unisolated",
        "--out",
        entry.to_str().unwrap(),
    ])
}

/// `cargo metadata` of the workspace's own crates (no dependencies, offline).
pub fn workspace_metadata(root: &Path) -> serde_json::Value {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}
