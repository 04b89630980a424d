//! How `run --corpus DIR` walks a corpus: every bundle once, each under its own key
//! (same file names in two sub-directories, a file beside its gzip-compressed twin), link
//! loops ended, and an `--out` inside the corpus refused.

use std::path::Path;
use std::process::Command;

fn causalbench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args(args)
        .output()
        .unwrap()
}

/// Records one small simulator bundle at `path`.
fn record(path: &Path, repetition: &str) {
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalog/concurrent-work.harmless.yaml");
    let o = causalbench(&[
        "record",
        "--backend",
        "sim",
        "--scenario",
        scenario.to_str().unwrap(),
        "--repetition",
        repetition,
        "--out",
        path.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn replay(corpus: &Path, out: &Path) -> std::process::Output {
    causalbench(&[
        "run",
        "--corpus",
        corpus.to_str().unwrap(),
        "--profilers",
        "timestamp-join",
        "--megakernel-reps",
        "0",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ])
}

#[test]
fn every_corpus_bundle_is_replayed_once_under_its_own_key() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    for sub in ["a", "b"] {
        std::fs::create_dir_all(corpus.join(sub)).unwrap();
    }
    record(&corpus.join("a/x.bundle.json"), "0");
    record(&corpus.join("b/x.bundle.json"), "1");
    record(&corpus.join("y.bundle.json"), "2");
    // y's gzip-compressed twin beside it.
    let gz = std::process::Command::new("gzip")
        .args(["-k", corpus.join("y.bundle.json").to_str().unwrap()])
        .status();
    if !gz.is_ok_and(|s| s.success()) {
        eprintln!("SKIP: gzip is not available here");
        return;
    }
    // A link loop: corpus/a/loop -> corpus.
    std::os::unix::fs::symlink(&corpus, corpus.join("a/loop")).unwrap();
    let out = dir.path().join("results");
    let o = replay(&corpus, &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("4 bundles (0 resumed)"), "{err}");
    let mut cases: Vec<String> = std::fs::read_dir(out.join("cases"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    cases.sort();
    assert_eq!(
        cases,
        [
            "corpus-a~x.bundle.jsonl",
            "corpus-b~x.bundle.jsonl",
            "corpus-y.bundle-gz.jsonl",
            "corpus-y.bundle.jsonl",
        ]
    );
    // A rerun resumes all four, and replaces none with another's copy.
    let o = replay(&corpus, &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("4 bundles (4 resumed)"), "{err}");
}

#[test]
fn an_out_inside_the_corpus_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    record(&corpus.join("y.bundle.json"), "0");
    let o = replay(&corpus, &corpus.join("results"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("is inside --corpus"), "{err}");
    assert!(!corpus.join("results").exists());
}
