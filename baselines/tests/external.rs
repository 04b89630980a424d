//! The external-profiler runner: the example Python profiler, timeouts, failures,
//! size limits and invalid output.

use baselines::synth::{ViewBuilder, US};
use baselines::{ExternalCommand, ExternalError};
use ground_truth::{CauseLabel, EdgeType, Evidence, Question, Readable};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn python3() -> bool {
    std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/profilers/minimal.py")
}

fn small_view(dir: &Path) -> (PathBuf, u64, u64) {
    let mut b = ViewBuilder::new();
    let mut ops = vec![];
    for r in 0..4u64 {
        let t = 1_000_000 + r * 10_000_000;
        let hog = if r == 0 { Some(t + 3_000 * US) } else { None };
        let l = b.launch_at(
            10,
            "cudaLaunchKernel",
            t,
            1,
            "k",
            None,
            hog,
            50 * US,
            "a.py:1",
        );
        b.ext(l.corr, r);
        ops.push(l);
    }
    b.query("q", ops[0].op, Question::Cause);
    let v = b.build();
    let p = dir.join("view.json");
    v.write(&p).unwrap();
    (p, ops[0].api, ops[0].op)
}

#[test]
fn runs_the_example_python_profiler() {
    if !python3() {
        eprintln!("skipped: python3 is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (view, api, op) = small_view(dir.path());
    let out = dir.path().join("out dir/expl.json");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let cmd = ExternalCommand::new(format!("python3 {} {{view}} {{out}}", example().display()));
    let e = cmd.run(&view, &out).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(e.meta.profiler, "minimal.py");
    assert!(e.edges.iter().any(|x| x.src == api
        && x.dst == op
        && x.kind == EdgeType::Launch
        && x.evidence == Evidence::Explicit));
    assert_eq!(e.diagnoses.len(), 1);
    assert_eq!(
        e.diagnoses[0].causes[0].label,
        CauseLabel::OccupancyPressure
    );
    assert!(e
        .attribution
        .iter()
        .any(|a| a.rid == op && a.request == "0"));
}

#[test]
fn kills_on_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let err = ExternalCommand::new("sleep 30; echo {view} {out}")
        .with_timeout(Duration::from_millis(300))
        .run(&dir.path().join("v.json"), &dir.path().join("o.json"))
        .unwrap_err();
    assert!(matches!(err, ExternalError::Timeout { .. }), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "the sleeping child was killed"
    );
    assert!(err.to_string().contains("timed out"));
}

#[test]
fn reports_exit_status_and_stderr_tail() {
    let dir = tempfile::tempdir().unwrap();
    let err = ExternalCommand::new("echo 'cannot parse view' >&2; exit 3; true {view} {out}")
        .run(&dir.path().join("v.json"), &dir.path().join("o.json"))
        .unwrap_err();
    match &err {
        ExternalError::Failed {
            code, stderr_tail, ..
        } => {
            assert_eq!(*code, Some(3));
            assert!(stderr_tail.contains("cannot parse view"));
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("cannot parse view"));
    let err = ExternalCommand::new("true")
        .run(&dir.path().join("v.json"), &dir.path().join("o.json"))
        .unwrap_err();
    assert!(matches!(err, ExternalError::NoOutput { .. }), "{err}");
}

#[test]
fn rejects_oversized_and_invalid_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.json");
    let err = ExternalCommand::new("head -c 5000 /dev/zero > {out}; true {view}")
        .with_max_output(1000)
        .run(&dir.path().join("v.json"), &out)
        .unwrap_err();
    assert!(
        matches!(
            err,
            ExternalError::TooLarge {
                size: 5000,
                limit: 1000,
                ..
            }
        ),
        "{err}"
    );
    let script = dir.path().join("bad.sh");
    std::fs::write(
        &script,
        r#"printf '{"schema_version":1,"meta":{"profiler":"x","version":"1","view":{"collectors":"combined","mode":"closed"},"wall_ms":1},"edges":[{"src":1,"dst":2,"type":"launch","evidence":"sometimes","confidence":1}]}' > "$2""#,
    )
    .unwrap();
    let err = ExternalCommand::new(format!("sh {} {{view}} {{out}}", script.display()))
        .run(&dir.path().join("v.json"), &out)
        .unwrap_err();
    match &err {
        ExternalError::Invalid(f) => {
            assert_eq!(f.file, out);
            assert_eq!(f.path, ".edges[0].evidence", "{f}");
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("o.json"), "{err}");
}

#[test]
fn a_small_gzip_stream_does_not_get_past_the_output_limit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.json");
    // About 30 bytes on disk, 3000 once decompressed.
    let err = ExternalCommand::new("head -c 3000 /dev/zero | gzip > {out}; true {view}")
        .with_max_output(1000)
        .run(&dir.path().join("v.json"), &out)
        .unwrap_err();
    match &err {
        ExternalError::Invalid(f) => {
            assert!(f.message.contains("input limit of 1000 bytes"), "{f}")
        }
        other => panic!("{other}"),
    }
}
