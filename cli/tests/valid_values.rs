//! A wrong label is bad input (exit 2), and the error lists every valid label, wrapped
//! onto lines, none cut: in a scenario's `cause:`, in an explanation given to `score`, and
//! in the explanation an external profiler writes (`profile --cmd`), where the author of
//! the profiler reads it.

mod common;

use common::{causalbench, python3};
use ground_truth::CauseLabel;
use std::path::Path;

fn catalog(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../catalog")
        .join(name)
}

/// Exit 2, the wrong label named, every valid label listed, no line past 80 columns
/// after the first, no `…` (nothing cut).
fn assert_lists_every_label(code: i32, err: &str) {
    assert_eq!(code, 2, "exit code: {err}");
    assert!(err.contains("`occupancy`"), "names the wrong label: {err}");
    for label in CauseLabel::ALL {
        assert!(
            err.contains(&format!("`{}`", label.as_str())),
            "{} not listed: {err}",
            label.as_str()
        );
    }
    assert!(!err.contains('…'), "cut: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let list: Vec<&str> = err.lines().skip(1).filter(|l| !l.is_empty()).collect();
    assert!(list.len() > 1, "wrapped: {err}");
    assert!(
        list.iter().all(|l| l.chars().count() <= 80),
        "wrapped at 80 columns: {err}"
    );
}

const SCENARIO: &str = "late-launch-vs-device-queueing.occupancy-hog.yaml";

#[test]
fn an_unknown_cause_in_a_scenario_lists_every_label() {
    let d = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(catalog(SCENARIO)).unwrap();
    assert!(text.contains("cause: occupancy_pressure"));
    let bad = d.path().join("bad.yaml");
    std::fs::write(
        &bad,
        text.replace("cause: occupancy_pressure", "cause: occupancy"),
    )
    .unwrap();
    let out = d.path().join("b.json");
    let (code, _, err) = causalbench(&[
        "record",
        "--scenario",
        bad.to_str().unwrap(),
        "--backend",
        "sim",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_lists_every_label(code, &err);
    assert!(err.contains("bad.yaml"), "{err}");
}

/// A recorded bundle, its view and the reference profiler's explanation, the first
/// cause label of the explanation replaced by `occupancy`.
fn bad_explanation(dir: &Path) -> (String, String, String) {
    let p = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let (b, v, e) = (p("b.json"), p("v.json"), p("e.json"));
    let sc = catalog(SCENARIO);
    for args in [
        vec![
            "record",
            "--scenario",
            sc.to_str().unwrap(),
            "--backend",
            "sim",
            "--out",
            &b,
        ],
        vec![
            "view",
            "--bundle",
            &b,
            "--collectors",
            "combined",
            "--mode",
            "instrumented",
            "--out",
            &v,
        ],
        vec![
            "profile",
            "--profiler",
            "causal-graph",
            "--view",
            &v,
            "--out",
            &e,
        ],
    ] {
        let (code, _, err) = causalbench(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    let mut x: serde_json::Value = serde_json::from_slice(&std::fs::read(&e).unwrap()).unwrap();
    x["diagnoses"][0]["causes"][0]["label"] = "occupancy".into();
    std::fs::write(&e, serde_json::to_vec(&x).unwrap()).unwrap();
    (b, v, e)
}

#[test]
fn an_unknown_cause_in_an_explanation_lists_every_label() {
    let d = tempfile::tempdir().unwrap();
    let (b, v, e) = bad_explanation(d.path());
    let (code, _, err) = causalbench(&["score", "--bundle", &b, "--view", &v, "--explanation", &e]);
    assert_lists_every_label(code, &err);
}

#[test]
fn an_external_profiler_writing_an_unknown_cause_is_bad_input_with_every_label() {
    if !python3() {
        eprintln!("skipped: needs python3");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (_, v, e) = bad_explanation(d.path());
    // The program writes the damaged explanation, carried in its own text (the sandbox
    // lets it read nothing else of ours).
    let text = std::fs::read_to_string(&e).unwrap();
    let program = d.path().join("writes_a_wrong_label.py");
    std::fs::write(
        &program,
        format!(
            "import sys\nopen(sys.argv[2], 'w').write({})\n",
            serde_json::to_string(&text).unwrap()
        ),
    )
    .unwrap();
    let cmd = format!("python3 {} {{view}} {{out}}", program.display());
    let out = d.path().join("out.json");
    let (code, _, err) = causalbench(&[
        "profile",
        "--cmd",
        &cmd,
        "--allow-unisolated",
        "--view",
        &v,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_lists_every_label(code, &err);
}
