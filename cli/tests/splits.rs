//! `causalbench run --suite dev|test`: the dev split is fixed, every test run draws
//! its own seed and records it, a resumed test run keeps its seed, and every
//! recorded case's label check is counted in the summary and `labels.json`
//! (docs/scenario-space.md).

use std::path::Path;
use std::process::Command;

fn run(out: &Path, extra: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args([
            "run",
            "--backend",
            "sim",
            "--profilers",
            "causal-graph",
            "--megakernel-reps",
            "0",
            "--quiet",
            "--out",
        ])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

fn split(out: &Path) -> serde_json::Value {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    m["split"].clone()
}

#[test]
fn test_runs_draw_their_own_seed_and_dev_is_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, dev) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("dev"),
    );
    for out in [&a, &b] {
        let (code, err) = run(out, &["--suite", "test", "--cases", "6"]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("the test split, seed"), "{err}");
    }
    let (sa, sb) = (split(&a), split(&b));
    assert_eq!(sa["split"], "test");
    assert_eq!(sa["cases"], 6);
    assert_ne!(sa["seed"], sb["seed"], "two test runs drew the same seed");

    // A resumed test run keeps the seed its directory recorded, and so resumes.
    let (code, err) = run(&a, &["--suite", "test", "--cases", "6"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(split(&a), sa);
    assert!(err.contains("resumed"), "{err}");
    let bundles = |d: &Path| std::fs::read_dir(d.join("bundles")).unwrap().count();
    let first = bundles(&a);
    assert!(
        err.contains(&format!("{first} bundles ({first} resumed)")),
        "{err}"
    );

    let (code, err) = run(&dev, &["--suite", "dev", "--cases", "6"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(split(&dev)["seed"], scenario_space::DEV_SEED);
}

#[test]
fn every_case_s_label_check_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let (code, err) = run(&out, &["--suite", "dev", "--cases", "14"]);
    assert_eq!(code, 0, "{err}");
    let labels: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("labels.json")).unwrap()).unwrap();
    let counted: u64 = labels["counts"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    let bundles = std::fs::read_dir(out.join("bundles")).unwrap().count() as u64;
    assert_eq!(counted, bundles, "{labels}");
    assert!(err.contains("labels checked against the truth:"), "{err}");
    // A dropped case is listed and has no scores.
    for key in labels["cases"]["dropped"].as_array().into_iter().flatten() {
        let scores = std::fs::read_to_string(
            out.join("cases")
                .join(format!("{}.jsonl", key.as_str().unwrap())),
        )
        .unwrap();
        assert!(scores.trim().is_empty(), "{key} was scored");
    }
}
