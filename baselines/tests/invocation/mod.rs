//! What the sandbox and cgroup tests share: a small view, profiler scripts,
//! and finding the processes an invocation left behind.

#![allow(dead_code)]

use baselines::synth::{ViewBuilder, US};
use ground_truth::{Question, Readable, TraceView};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A view with one launched kernel and one cause question about it, written
/// to `dir/view.json`.
pub fn small_view(dir: &Path) -> (PathBuf, TraceView) {
    let mut b = ViewBuilder::new();
    let l = b.launch_at(
        10,
        "cudaLaunchKernel",
        1_000_000,
        1,
        "k",
        None,
        None,
        50 * US,
        "a.py:1",
    );
    b.query("q", l.op, Question::Cause);
    let v = b.build();
    let p = dir.join("view.json");
    v.write(&p).unwrap();
    (p, v)
}

/// A shell line writing a valid explanation of `small_view` to `$2`, claiming 1 ms.
pub const VALID: &str = r#"printf '{"schema_version":1,"meta":{"profiler":"x","version":"1","view":{"collectors":"combined","mode":"instrumented"},"wall_ms":1},"edges":[],"attribution":[],"diagnoses":[]}' > "$2""#;

/// A profiler script `dir/name` holding `body`.
pub fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

/// Whether python3 runs here (a test that needs it is skipped, saying so).
pub fn python3() -> bool {
    let there = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !there {
        eprintln!("skipped: python3 is not installed");
    }
    there
}

/// Host processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            found.push(format!("{}: {cmdline}", name.to_string_lossy()));
        }
    }
    found
}

/// Waits (60 s at most, which no busy machine misses) until no process with
/// `marker` is left, and says which are.
pub fn none_left(marker: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = processes_with(marker);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
