//! The shipped H200 corpus replays to exactly the committed leaderboard: the
//! evaluation is deterministic (analysis times aside, which are measurements).

use std::path::Path;
use std::process::Command;

const CORPUS: &str = "results/corpus/h200-580";
const RESULTS: &str = "results/h200-580";

/// leaderboard.json without the timing fields.
fn verdicts(path: &Path) -> serde_json::Value {
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

#[test]
fn corpus_replays_to_the_committed_leaderboard() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let committed = root.join(RESULTS).join("leaderboard.json");
    assert!(
        committed.is_file(),
        "{} must be committed",
        committed.display()
    );
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .current_dir(&root)
        .args([
            "run",
            "--corpus",
            CORPUS,
            "--profilers",
            "builtin",
            "--quiet",
            "--out",
        ])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let fresh = verdicts(&out.path().join("leaderboard.json"));
    assert!(
        fresh == verdicts(&committed),
        "replaying {CORPUS} no longer gives {RESULTS}/leaderboard.json"
    );
}
