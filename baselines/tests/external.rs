//! The external-profiler runner: the example Python profiler, timeouts, failures,
//! size limits, invalid output, commands without a shell, process groups, and
//! kernel isolation (`docs/integrity.md`).

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

/// A view file for tests whose program never reads it.
fn any_view(dir: &Path) -> PathBuf {
    let p = dir.join("v.json");
    std::fs::write(&p, "{}").unwrap();
    p
}

#[test]
fn kills_on_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let err = ExternalCommand::new("sh -c 'sleep 30' sh {view} {out}")
        .with_timeout(Duration::from_millis(300))
        .run(&any_view(dir.path()), &dir.path().join("o.json"))
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
    let err = ExternalCommand::new("sh -c 'echo cannot parse view >&2; exit 3' sh {view} {out}")
        .run(&any_view(dir.path()), &dir.path().join("o.json"))
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
        .run(&any_view(dir.path()), &dir.path().join("o.json"))
        .unwrap_err();
    assert!(matches!(err, ExternalError::NoOutput { .. }), "{err}");
}

#[test]
fn rejects_oversized_and_invalid_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.json");
    let err = ExternalCommand::new("sh -c 'head -c 5000 /dev/zero > \"$1\"' sh {out} {view}")
        .with_max_output(1000)
        .run(&any_view(dir.path()), &out)
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
        .run(&any_view(dir.path()), &out)
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

/// Writes `body` as a shell script in `dir` and returns its path.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

/// A valid explanation for the small view (a spec of its own, no records
/// named), written by a script to `$2`.
const VALID: &str = r#"printf '{"schema_version":1,"meta":{"profiler":"x","version":"1","view":{"collectors":"combined","mode":"instrumented"},"wall_ms":1},"edges":[],"attribution":[],"diagnoses":[]}' > "$2""#;

/// An explanation that parses but answers another view, or names what its view
/// lacks, is invalid output: the case fails like a crashed profiler, naming the place.
#[test]
fn an_explanation_that_does_not_answer_its_view_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let (view, api, _) = small_view(dir.path());
    let out = dir.path().join("o.json");
    for (body, place) in [
        (VALID.replace("instrumented", "closed"), ".meta.view"),
        (
            VALID.replace(r#""diagnoses":[]"#, r#""diagnoses":[{"query":"nope","causes":[],"complete":false}]"#),
            ".diagnoses[0].query",
        ),
        (
            VALID.replace(
                r#""edges":[]"#,
                &format!(r#""edges":[{{"src":{api},"dst":987654321,"type":"launch","evidence":"explicit","confidence":1}}]"#),
            ),
            ".edges[0].dst",
        ),
        (VALID.replace(r#""wall_ms":1"#, r#""wall_ms":-1e308"#), ".meta.wall_ms"),
    ] {
        let s = script(dir.path(), "answers-another.sh", &body);
        let err = ExternalCommand::new(format!("sh {} {{view}} {{out}}", s.display()))
            .run(&view, &out)
            .unwrap_err();
        match &err {
            ExternalError::Invalid(f) => assert_eq!(f.path, place, "{f}"),
            other => panic!("{place}: {other}"),
        }
    }
}

#[test]
fn a_left_behind_child_does_not_hold_the_harness() {
    let dir = tempfile::tempdir().unwrap();
    let (view, ..) = small_view(dir.path());
    let out = dir.path().join("o.json");
    let leaves = script(dir.path(), "leaves.sh", &format!("sleep 40 &\n{VALID}\n"));
    let t0 = Instant::now();
    ExternalCommand::new(format!("sh {} {{view}} {{out}}", leaves.display()))
        .with_timeout(Duration::from_secs(5))
        .run(&view, &out)
        .unwrap_or_else(|e| panic!("{e}"));
    let failing = script(
        dir.path(),
        "fails.sh",
        "sleep 40 &\necho broken >&2\nexit 4\n",
    );
    let err = ExternalCommand::new(format!("sh {} {{view}} {{out}}", failing.display()))
        .run(&view, &out)
        .unwrap_err();
    assert!(err.to_string().contains("broken"), "{err}");
    let hangs = script(dir.path(), "hangs.sh", "sleep 40 &\nsleep 40\n");
    let err = ExternalCommand::new(format!("sh {} {{view}} {{out}}", hangs.display()))
        .with_timeout(Duration::from_secs(1))
        .run(&view, &out)
        .unwrap_err();
    assert!(matches!(err, ExternalError::Timeout { .. }), "{err}");
    // Each of the three would have held a pipe for 40 s.
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
}

#[test]
fn a_view_path_cannot_inject_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let (view, ..) = small_view(dir.path());
    let marker = dir.path().join("injected");
    let evil_dir = dir.path().join(format!(
        "{{out}} x; touch {}; '$(touch {})'",
        marker.display(),
        marker.display()
    ));
    std::fs::create_dir_all(&evil_dir).unwrap();
    let evil_view = evil_dir.join("v.json");
    std::fs::copy(&view, &evil_view).unwrap();
    let writes = script(dir.path(), "writes.sh", &format!("{VALID}\n"));
    let out = evil_dir.join("o.json");
    ExternalCommand::new(format!("sh {} '{{view}}' {{out}}", writes.display()))
        .run(&evil_view, &out)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.is_file());
    assert!(!marker.exists(), "a path ran as a command");
}

fn landlock() -> bool {
    if baselines::sandbox::kernel_abi().is_some_and(|a| a >= baselines::sandbox::MIN_ABI) {
        true
    } else {
        eprintln!("skipped: this kernel has no Landlock");
        false
    }
}

#[test]
fn an_isolated_profiler_cannot_read_the_results() {
    if !landlock() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    std::fs::create_dir_all(results.join("bundles")).unwrap();
    let bundle = results.join("bundles/secret.bundle.json");
    std::fs::write(&bundle, "{\"truth\": 1}").unwrap();
    let (view, ..) = small_view(&results);
    let tools = tempfile::tempdir().unwrap();
    let reads = script(
        tools.path(),
        "reads.sh",
        &format!("cat {} || exit 9\n{VALID}\n", bundle.display()),
    );
    let log = dir.path().join("logs/reads.log");
    let err = ExternalCommand::new(format!("sh {} {{view}} {{out}}", reads.display()))
        .protecting(&results)
        .with_stderr_log(&log)
        .run(&view, &dir.path().join("o.json"))
        .unwrap_err();
    assert!(
        matches!(err, ExternalError::Failed { code: Some(9), .. }),
        "{err}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("Permission denied"), "{logged}");
    // Writing anywhere but its output fails too; the legitimate profiler works.
    let writes = script(
        tools.path(),
        "writes.sh",
        &format!(
            "echo x > {}/planted || exit 8\n{VALID}\n",
            tools.path().display()
        ),
    );
    let err = ExternalCommand::new(format!("sh {} {{view}} {{out}}", writes.display()))
        .run(&view, &dir.path().join("o.json"))
        .unwrap_err();
    assert!(
        matches!(err, ExternalError::Failed { code: Some(8), .. }),
        "{err}"
    );
    assert!(!tools.path().join("planted").exists());
    let fine = script(
        tools.path(),
        "fine.sh",
        &format!("cat \"$1\" > /dev/null || exit 7\n{VALID}\n"),
    );
    ExternalCommand::new(format!("sh {} {{view}} {{out}}", fine.display()))
        .protecting(&results)
        .run(&view, &dir.path().join("o.json"))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_small_gzip_stream_does_not_get_past_the_output_limit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.json");
    // About 30 bytes on disk, 3000 once decompressed.
    let err =
        ExternalCommand::new("sh -c 'head -c 3000 /dev/zero | gzip > \"$1\"' sh {out} {view}")
            .with_max_output(1000)
            .run(&any_view(dir.path()), &out)
            .unwrap_err();
    match &err {
        ExternalError::Invalid(f) => {
            assert!(f.message.contains("input limit of 1000 bytes"), "{f}")
        }
        other => panic!("{other}"),
    }
}
