//! Bring your own collector (baselines/COLLECTORS.md) without a GPU: the H200
//! recordings of `results/byo-collector-h200` replay. Each collector's native
//! output goes through its converter and `collector bind` onto the workload's
//! bundles, and the bound bundles score to the committed leaderboard; the
//! view-based bundles of the same scenarios (the normal backend's CUPTI
//! records) too. The trace-injection converter reads the sample's output.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::verdicts;

const ROOT: &str = "results/byo-collector-h200";
const SPLITS: [&str; 2] = ["catalog", "dev"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(ROOT)
}

fn run(args: &[&std::ffi::OsStr]) {
    common::causalbench_ok_in(Path::new(env!("CARGO_MANIFEST_DIR")), args);
}

/// Scores `bundles` as `collector run` does and compares with `committed`.
fn replays_to(bundles: &Path, committed: &Path) {
    let out = tempfile::tempdir().unwrap();
    run(&[
        "run".as_ref(),
        "--corpus".as_ref(),
        bundles.as_os_str(),
        "--out".as_ref(),
        out.path().as_os_str(),
        "--profilers".as_ref(),
        "builtin".as_ref(),
        "--megakernel-reps".as_ref(),
        "0".as_ref(),
        "--quiet".as_ref(),
    ]);
    assert!(
        verdicts(&out.path().join("leaderboard.json")) == verdicts(committed),
        "{} no longer scores to {}",
        bundles.display(),
        committed.display()
    );
}

fn gunzip(from: &Path, to: &Path) {
    use std::io::Read;
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(from).unwrap())
        .read_to_end(&mut text)
        .unwrap();
    std::fs::write(to, text).unwrap();
}

/// The collector's native output through `converter` (NATIVE_DIR OUT_DIR),
/// bound to the workload and scored.
fn collector_replays(name: &str, native_file: &str, converter: impl Fn(&Path, &Path)) {
    for split in SPLITS {
        let dir = root().join(name).join(split);
        let tmp = tempfile::tempdir().unwrap();
        let (native, converted, bound) = (
            tmp.path().join("native"),
            tmp.path().join("converted"),
            tmp.path().join("bundles"),
        );
        std::fs::create_dir_all(&native).unwrap();
        std::fs::create_dir_all(&converted).unwrap();
        gunzip(
            &dir.join("native").join(format!("{native_file}.gz")),
            &native.join(native_file),
        );
        converter(&native, &converted);
        run(&[
            "collector".as_ref(),
            "bind".as_ref(),
            "--workload".as_ref(),
            dir.join("workload").as_os_str(),
            "--records".as_ref(),
            converted.join("records.json").as_os_str(),
            "--out".as_ref(),
            bound.as_os_str(),
        ]);
        replays_to(&bound, &dir.join("results").join("leaderboard.json"));
    }
}

#[test]
fn the_trace_injection_samples_output_converts_binds_and_replays() {
    if !common::python3() {
        eprintln!("skipping: python3 is not installed (the converter is Python)");
        return;
    }
    let converter = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../baselines/collectors/cupti_trace_injection.py");
    collector_replays("cupti-trace-injection", "stdout.txt", |native, out| {
        let o = Command::new("python3")
            .arg(&converter)
            .arg(native.join("stdout.txt"))
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    });
}

#[test]
fn the_ebpf_recorders_records_bind_and_replay() {
    collector_replays("ebpf-host", "records.json", |native, out| {
        std::fs::copy(native.join("records.json"), out.join("records.json")).unwrap();
    });
}

#[test]
fn the_view_based_bundles_of_the_same_scenarios_replay() {
    for split in SPLITS {
        let dir = root().join("cupti-views").join(split);
        replays_to(&dir, &dir.join("results").join("leaderboard.json"));
    }
}

#[test]
fn collector_bind_refuses_records_of_another_format_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("records.json");
    std::fs::write(
        &bad,
        br#"{"schema_version": 1, "collector": "x", "records": 3}"#,
    )
    .unwrap();
    let (code, _, err) = common::causalbench(&[
        "collector",
        "bind",
        "--workload",
        tmp.path().to_str().unwrap(),
        "--records",
        bad.to_str().unwrap(),
        "--out",
        tmp.path().join("out").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("records.json"), "{err}");
}

#[test]
fn the_workload_and_collector_subcommands_have_help() {
    for sub in [
        &["workload"][..],
        &["collector"],
        &["collector", "run"],
        &["collector", "bind"],
        &["collector", "ebpf"],
        &["collector", "table"],
    ] {
        let mut args = sub.to_vec();
        args.push("--help");
        let (code, out, err) = common::causalbench(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(
            out.contains(&format!("Usage: causalbench {}", sub.join(" "))),
            "{args:?}:\n{out}"
        );
    }
}

#[test]
fn the_workload_without_a_gpu_says_so_and_writes_nothing() {
    if Path::new("/dev/nvidiactl").exists() {
        eprintln!("skipped: this machine has a GPU, so the workload would run on it");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w");
    let (code, _, err) = common::causalbench(&[
        "workload",
        "--scenario",
        "stale-identity.stale-handle",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("`workload` needs a GPU"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists(), "nothing is written without a GPU");
}
