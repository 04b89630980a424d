//! `run --costs FILE`: the measured collector costs appear beside each view's
//! accuracy ("Accuracy against cost" in leaderboard.md, with its plot), and a
//! malformed costs file is an input error.

use std::path::Path;
use std::process::Command;

mod common;

fn costs_json(launch_bound_ebpf: f64) -> serde_json::Value {
    let config = |collectors: &str, view: Option<&str>, ratio: f64| {
        serde_json::json!({
            "collectors": collectors, "view": view,
            "wall_ns": [100, 101, 99, 100, 102],
            "ratios": [ratio, ratio, ratio, ratio, ratio],
            "overhead_median": ratio, "overhead_min": ratio, "overhead_max": ratio,
            "records_per_op": 1.5, "bytes_per_op": 180.0,
        })
    };
    let workload = |name: &str, ebpf: f64| {
        serde_json::json!({
            "workload": name, "description": "test", "operations": 1000,
            "configurations": [
                config("none", None, 1.0),
                config("cupti", Some("cupti"), 1.05),
                config("ebpf", Some("host"), ebpf),
                config("cupti+ebpf", Some("combined"), ebpf + 0.05),
            ],
        })
    };
    serde_json::json!({
        "schema_version": 1, "machine": "test machine", "reps": 5,
        "workloads": [workload("launch-bound", launch_bound_ebpf), workload("realistic", 1.01)],
    })
}

fn run(suite: &Path, out: &Path, costs: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args(["run", "--backend", "sim", "--quiet", "--reps", "1"])
        .args(["--megakernel-reps", "0", "--profilers", "builtin"])
        .arg("--suite")
        .arg(suite)
        .arg("--out")
        .arg(out)
        .arg("--costs")
        .arg(costs)
        .output()
        .unwrap()
}

#[test]
fn costs_appear_beside_accuracy_and_bad_costs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for v in ["event-edge", "independent"] {
        let f = format!("dependency-vs-overlap.{v}.yaml");
        std::fs::copy(root.join("catalog").join(&f), suite.join(&f)).unwrap();
    }
    let costs = dir.path().join("costs.json");
    std::fs::write(&costs, costs_json(1.2).to_string()).unwrap();
    let out = dir.path().join("results");
    let o = run(&suite, &out, &costs);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let md = std::fs::read_to_string(out.join("leaderboard.md")).unwrap();
    let section = md
        .split("## Accuracy against cost")
        .nth(1)
        .unwrap_or_else(|| panic!("no cost section in\n{md}"));
    // Every built-in profiler has a row per measured view, with the view's overheads.
    assert!(
        section.contains("| causal-graph | combined | cupti+ebpf |"),
        "{section}"
    );
    assert!(
        section.contains("| causal-graph | host | ebpf |"),
        "{section}"
    );
    assert!(section.contains("×1.200 [1.200, 1.200]"), "{section}");
    assert!(section.contains("×1.010"), "{section}");
    assert!(section.contains("★"), "a frontier is marked: {section}");
    assert!(out.join("plots/accuracy_vs_cost.png").is_file());
    assert!(out.join("collector-costs.json").is_file());

    // Rebuilding the report from the directory keeps the section.
    common::causalbench_ok_in(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        &["report".as_ref(), "--results".as_ref(), out.as_os_str()],
    );
    let md = std::fs::read_to_string(out.join("leaderboard.md")).unwrap();
    assert_eq!(md.matches("## Accuracy against cost").count(), 1, "{md}");

    // A negative overhead is refused with its place, exit 2.
    std::fs::write(&costs, costs_json(-1.0).to_string()).unwrap();
    let o = run(&suite, &dir.path().join("bad"), &costs);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("workloads[0].configurations[2]"), "{err}");
}
