//! `causalbench run` with HTA installed: `hta-critical-path` is scored on every view it
//! can read (cupti, combined; not host) and has its leaderboard rows. Skipped with a
//! message when HTA is not installed, unless CAUSALBENCH_REQUIRE_HTA=1 (CI).

use std::process::Command;

#[test]
fn run_scores_hta_on_the_views_it_reads() {
    if !baselines::hta_available() {
        let msg =
            "SKIPPED: HolisticTraceAnalysis is not installed (bash baselines/hta/setup-hta.sh); \
                   CAUSALBENCH_REQUIRE_HTA=1 turns this skip into a failure";
        if std::env::var("CAUSALBENCH_REQUIRE_HTA").is_ok_and(|v| v == "1") {
            panic!("{msg}");
        }
        eprintln!("{msg}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    let catalog = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalog");
    for v in ["event-edge", "independent"] {
        let f = format!("dependency-vs-overlap.{v}.yaml");
        std::fs::copy(catalog.join(&f), suite.join(&f)).unwrap();
    }
    // Two real H200 bundles of the same family, replayed beside the simulated ones.
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    let shipped =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/corpus/h200-580");
    for v in ["event-edge", "independent"] {
        let f = format!("dependency-vs-overlap.{v}.r0.bundle.json.gz");
        std::fs::copy(shipped.join(&f), corpus.join(&f)).unwrap();
    }
    let out = dir.path().join("results");
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args([
            "run",
            "--backend",
            "sim",
            "--quiet",
            "--reps",
            "1",
            "--profilers",
            "all",
            // The megakernel track has no HTA reading; cli/tests/run.rs covers it.
            "--megakernel-reps",
            "0",
            "--suite",
        ])
        .arg(&suite)
        .arg("--corpus")
        .arg(&corpus)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lb: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("leaderboard.json")).unwrap()).unwrap();
    let rows: Vec<(String, String)> = lb["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["profiler"] == "hta-critical-path")
        .map(|r| {
            (
                r["collectors"].as_str().unwrap().to_string(),
                r["mode"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut want = Vec::new();
    for c in ["cupti", "combined"] {
        for m in ["instrumented", "closed"] {
            want.push((c.to_string(), m.to_string()));
        }
    }
    let mut got = rows.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "hta-critical-path rows");
    let csv = std::fs::read_to_string(out.join("leaderboard.csv")).unwrap();
    assert!(csv
        .lines()
        .any(|l| l.starts_with("hta-critical-path,cupti,")));
    // HTA was scored on the real (cuda) bundles too.
    let scores = std::fs::read_to_string(out.join("scores.jsonl")).unwrap();
    assert!(scores
        .lines()
        .any(|l| l.contains("\"profiler\":\"hta-critical-path\"")
            && l.contains("\"backend\":\"cuda\"")));
}
