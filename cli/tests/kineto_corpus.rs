//! The PyTorch track's committed corpus (results/corpus/h200-580-kineto,
//! docs/torch-track.md): it replays to exactly the committed leaderboard (its
//! `hta-critical-path`, `hta-idle-time` and `hta-launch-stats` rows, HTA on the native
//! traces, where HTA is installed; required in CI by CAUSALBENCH_REQUIRE_HTA=1), every
//! native Kineto trace beside a bundle reads, and the completeness table in the
//! committed leaderboard is the one its `completeness.json` gives.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::verdicts;

const CORPUS: &str = "results/corpus/h200-580-kineto";
const RESULTS: &str = "results/h200-580-kineto";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs the binary in the repository root; asserts it exited 0.
fn causalbench_ok(args: &[&std::ffi::OsStr]) {
    common::causalbench_ok_in(&root(), args);
}

#[test]
fn kineto_corpus_replays_to_the_committed_leaderboard() {
    let root = root();
    if !root.join(CORPUS).is_dir() {
        eprintln!("skipped: {CORPUS} is not committed");
        return;
    }
    let committed = root.join(RESULTS).join("leaderboard.json");
    assert!(
        committed.is_file(),
        "{} must be committed",
        committed.display()
    );
    // HTA is optional: without it the rest must still be exactly the committed rows.
    let with_hta = baselines::hta_available();
    if !with_hta {
        let msg = "HolisticTraceAnalysis is not importable: the hta-critical-path, hta-idle-time \
                   and hta-launch-stats rows are not compared (bash baselines/hta/setup-hta.sh)";
        assert!(
            !std::env::var("CAUSALBENCH_REQUIRE_HTA").is_ok_and(|v| v == "1"),
            "{msg}"
        );
        eprintln!("partly skipped: {msg}");
    }
    let profilers = if with_hta {
        "builtin,kineto-flows,hta-critical-path,hta-idle-time,hta-launch-stats"
    } else {
        "builtin,kineto-flows"
    };
    let out = tempfile::tempdir().unwrap();
    let args = [
        "run",
        "--corpus",
        CORPUS,
        "--profilers",
        profilers,
        "--quiet",
        "--out",
    ];
    let mut args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    args.push(out.path().as_os_str());
    causalbench_ok(&args);
    let fresh = verdicts(&out.path().join("leaderboard.json"));
    let mut committed_verdicts = verdicts(&committed);
    if !with_hta {
        without_profiler(&mut committed_verdicts, baselines::hta::NAME);
        for name in baselines::hta_analyses::NAMES {
            without_profiler(&mut committed_verdicts, name);
        }
    }
    assert!(
        fresh == committed_verdicts,
        "replaying {CORPUS} no longer gives {RESULTS}/leaderboard.json"
    );
    let md = std::fs::read_to_string(out.path().join("leaderboard.md")).unwrap();
    let committed_md = std::fs::read_to_string(root.join(RESULTS).join("leaderboard.md")).unwrap();
    // HTA's three analyses each have their rows, and their notes say what they abstain on.
    for name in std::iter::once(&baselines::hta::NAME).chain(baselines::hta_analyses::NAMES) {
        assert!(
            committed_md.contains(&format!("| {name} |"))
                && committed_md.contains(&format!("- `{name}`:")),
            "{RESULTS}/leaderboard.md has no `{name}` rows or note"
        );
    }
    // The completeness table, up to the next section (the third-party rows' notes
    // follow it only where HTA ran).
    let section = |t: &str| {
        t.find("## Kineto's completeness").map(|at| {
            let rest = &t[at..];
            let end = rest[1..].find("\n## ").map_or(rest.len(), |e| e + 1);
            rest[..end].trim_end().to_string()
        })
    };
    assert!(
        section(&md).is_some(),
        "the replay's leaderboard.md has the completeness table"
    );
    assert_eq!(section(&md), section(&committed_md));
}

/// Leaderboard JSON without the entries of one profiler (in every table).
fn without_profiler(v: &mut serde_json::Value, name: &str) {
    match v {
        serde_json::Value::Object(m) => m.values_mut().for_each(|x| without_profiler(x, name)),
        serde_json::Value::Array(a) => {
            a.retain(|x| x.get("profiler").and_then(|p| p.as_str()) != Some(name));
            a.iter_mut().for_each(|x| without_profiler(x, name));
        }
        _ => {}
    }
}

#[test]
fn every_bundle_has_its_native_kineto_trace_and_it_reads() {
    let dir = root().join(CORPUS);
    if !dir.is_dir() {
        eprintln!("skipped: {CORPUS} is not committed");
        return;
    }
    let mut bundles = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let Some(id) = name.strip_suffix(".bundle.json.gz") else {
            continue;
        };
        bundles += 1;
        let trace = dir.join(format!("{id}.kineto.json.gz"));
        let acts =
            kineto::read_activities(&trace).unwrap_or_else(|e| panic!("{}: {e}", trace.display()));
        assert!(
            !acts.device.is_empty(),
            "{}: no device activity",
            trace.display()
        );
    }
    assert!(
        bundles >= 40,
        "{bundles} bundles: the track needs 8 families x 5 repetitions"
    );
}

/// The Python function of each implicit-sync fence (docs/torch-track.md): the
/// committed corpus has 30 fences; the eBPF host stacks name all 30, Kineto's
/// `with_stack` events none of them (its Python tracer followed only the executor's
/// main thread; the copies are made on its worker threads). A bad corpus is an
/// input error.
#[test]
fn fence_lines_of_the_committed_corpus() {
    let root = root();
    if !root.join(CORPUS).is_dir() {
        eprintln!("skipped: {CORPUS} is not committed");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("fences.json");
    let args = ["torch", "fence-lines", "--corpus", CORPUS, "--json"];
    let mut args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    args.push(json.as_os_str());
    causalbench_ok(&args);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["kineto_stacks"]["fences"], 30, "{v}");
    assert_eq!(v["kineto_stacks"]["answered"], 0, "{v}");
    // The eBPF host stacks (copied and unwound through libtorch and CPython to
    // the `-X perf` trampolines) name the function of every fence, and rightly;
    // the committed `fence-lines.json` is this command's output.
    assert_eq!(v["host_stacks"]["fences"], 30, "{v}");
    assert_eq!(v["host_stacks"]["correct"], 30, "{v}");
    let committed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(CORPUS).join("fence-lines.json")).unwrap())
            .unwrap();
    for key in [
        "kineto_stacks",
        "host_stacks",
        "truth",
        "bundles_with_fences",
    ] {
        assert_eq!(v[key], committed[key], "{key}");
    }
    assert_eq!(v["truth"]["function"], "copy");
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args(["torch", "fence-lines", "--corpus"])
        .arg(out.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// Where python3 cannot import torch and CuPy (CI, this machine), `torch record`
/// records nothing and exits 2, naming the first failure; it never panics.
#[test]
fn torch_record_without_torch_exits_2() {
    let have_torch = Command::new("python3")
        .args(["-c", "import torch, cupy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if have_torch {
        eprintln!("skipped: python3 has torch and CuPy here");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .current_dir(root())
        .args([
            "torch",
            "record",
            "--only",
            "dependency-vs-overlap.event-edge",
            "--reps",
            "1",
        ])
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no bundle recorded"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // With the host recorder asked for (the executor as `python3 -X perf`): the same.
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .current_dir(root())
        .args([
            "torch",
            "record",
            "--host",
            "--only",
            "dependency-vs-overlap.event-edge",
        ])
        .args(["--reps", "1", "--out"])
        .arg(out.path().join("host"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

const COMPILE_PROBE: &str = "results/corpus/h200-580-compile";

/// The compiled case's committed probe scores to exactly the committed report
/// (docs/torch-track.md, "The compiled case").
#[test]
fn compile_probe_scores_to_the_committed_attribution() {
    let root = root();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("attribution.json");
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .current_dir(&root)
        .args(["torch", "attribution", "--probe", COMPILE_PROBE, "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let committed =
        std::fs::read_to_string(root.join(COMPILE_PROBE).join("attribution.json")).unwrap();
    assert_eq!(std::fs::read_to_string(&json).unwrap(), committed);
    let markdown =
        std::fs::read_to_string(root.join(COMPILE_PROBE).join("attribution.md")).unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), markdown);
    let report: serde_json::Value = serde_json::from_str(&committed).unwrap();
    let methods = report["methods"].as_array().unwrap();
    assert_eq!(methods.len(), 3);
    for m in methods {
        let (attributed, right) = (
            m["attributed_share"].as_f64().unwrap(),
            m["right_share"].as_f64().unwrap(),
        );
        assert!(
            (0.0..=1.0).contains(&right) && right <= attributed + 1e-12,
            "{m}"
        );
    }
}

/// A probe directory without its trace, or with a trace that is not whole steps
/// of the compiled graph, is refused with exit 2 and the file named.
#[test]
fn a_broken_compile_probe_is_refused_naming_the_file() {
    let root = root();
    let dir = tempfile::tempdir().unwrap();
    let run = |probe: &Path| {
        Command::new(env!("CARGO_BIN_EXE_causalbench"))
            .current_dir(&root)
            .args(["torch", "attribution", "--probe"])
            .arg(probe)
            .output()
            .unwrap()
    };
    let o = run(dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("compiled.kineto.json"));
    // The committed probe with one kernel event dropped from its trace.
    let copy = dir.path().join("probe");
    copy_dir(&root.join(COMPILE_PROBE), &copy);
    let trace = copy.join("compiled.kineto.json.gz");
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&trace).unwrap()),
        &mut text,
    )
    .unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = doc["traceEvents"].as_array_mut().unwrap();
    let first_kernel = events.iter().position(|e| e["cat"] == "kernel").unwrap();
    events.remove(first_kernel);
    std::fs::remove_file(&trace).unwrap();
    std::fs::write(copy.join("compiled.kineto.json"), doc.to_string()).unwrap();
    let o = run(&copy);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("compiled.kineto.json") && err.contains("not whole steps"),
        "{err}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}
