//! `causalbench run --shard K/N` and `causalbench report --merge` on the simulator: the
//! shards of a suite, merged, give the leaderboard one unsharded run writes
//! (docs/scale-out.md).

mod common;

use common::copy_dir;
use std::path::{Path, PathBuf};
use std::process::Command;

const SCENARIOS: &[&str] = &[
    "concurrent-work.harmful",
    "concurrent-work.harmless",
    "stale-identity.reused-event",
    "stale-identity.stale-handle",
    "dependency-vs-overlap.event-edge",
    "dependency-vs-overlap.independent",
];

/// The files of a result directory that a merge must reproduce byte for byte.
const LEADERBOARD_FILES: &[&str] = &[
    "scores.jsonl",
    "leaderboard.md",
    "leaderboard.csv",
    "leaderboard.json",
    "axes.csv",
];

fn causalbench(args: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

fn run(suite: &Path, out: &Path, shard: Option<&str>) {
    let mut args = vec![
        "run",
        "--backend",
        "sim",
        "--quiet",
        "--profilers",
        "builtin",
        "--reps",
        "1",
        "--megakernel-reps",
        "1",
        "--suite",
        suite.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    if let Some(s) = shard {
        args.extend(["--shard", s]);
    }
    let (code, err) = causalbench(&args);
    assert_eq!(code, 0, "run {shard:?}: {err}");
}

fn merge(shards: &[PathBuf], out: &Path) -> (i32, String) {
    let mut args = vec!["report", "--results", out.to_str().unwrap(), "--merge"];
    args.extend(shards.iter().map(|s| s.to_str().unwrap()));
    causalbench(&args)
}

/// JSON with every `analysis_ms` (the wall time of an analysis, a measurement that
/// differs between any two runs) taken out.
fn without_timing(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| k != "analysis_ms" && k != "mean_analysis_ms")
                .map(|(k, v)| (k, without_timing(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_timing).collect()),
        other => other,
    }
}

fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| without_timing(serde_json::from_str(l).unwrap()))
        .collect()
}

fn json_file(path: &Path) -> serde_json::Value {
    without_timing(serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
}

#[test]
fn three_shards_merged_are_the_unsharded_leaderboard() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let suite = dir.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    for name in SCENARIOS {
        let file = format!("{name}.yaml");
        std::fs::copy(root.join("catalog").join(&file), suite.join(&file)).unwrap();
    }
    let whole = dir.path().join("whole");
    run(&suite, &whole, None);

    // Shards that resume the unsharded run's finished cases carry its measured analysis
    // times too: their merge must be the unsharded leaderboard byte for byte.
    let resumed: Vec<PathBuf> = (1..=3)
        .map(|k| {
            let shard = dir.path().join(format!("resumed-{k}"));
            copy_dir(&whole, &shard);
            run(&suite, &shard, Some(&format!("{k}/3")));
            shard
        })
        .collect();
    let shard_cases: usize = resumed
        .iter()
        .map(|s| json_lines(&s.join("scores.jsonl")).len())
        .sum();
    assert_eq!(
        shard_cases,
        json_lines(&whole.join("scores.jsonl")).len(),
        "every case score is in exactly one shard"
    );
    let merged = dir.path().join("merged-resumed");
    let (code, err) = merge(&resumed, &merged);
    assert_eq!(code, 0, "{err}");
    for file in LEADERBOARD_FILES {
        let a = std::fs::read(whole.join(file)).unwrap();
        let b = std::fs::read(merged.join(file)).unwrap();
        assert!(
            a == b,
            "{file} differs between the unsharded run and the merge"
        );
    }
    let md = std::fs::read_to_string(merged.join("leaderboard.md")).unwrap();
    assert_eq!(md.matches("## Megakernel track").count(), 1, "{md}");
    // `report` on the merged directory rebuilds the same leaderboard.
    let (code, err) = causalbench(&["report", "--results", merged.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(merged.join("leaderboard.md")).unwrap(),
        std::fs::read(whole.join("leaderboard.md")).unwrap()
    );

    // Fresh shards measure their own analysis times; everything else is the same.
    let fresh: Vec<PathBuf> = (1..=3)
        .map(|k| {
            let shard = dir.path().join(format!("fresh-{k}"));
            run(&suite, &shard, Some(&format!("{k}/3")));
            shard
        })
        .collect();
    let merged = dir.path().join("merged-fresh");
    let (code, err) = merge(&fresh, &merged);
    assert_eq!(code, 0, "{err}");
    for file in ["scores.jsonl", "track-scores.jsonl"] {
        assert_eq!(
            json_lines(&whole.join(file)),
            json_lines(&merged.join(file)),
            "{file}"
        );
    }
    for file in ["leaderboard.json", "track-leaderboard.json"] {
        assert_eq!(
            json_file(&whole.join(file)),
            json_file(&merged.join(file)),
            "{file}"
        );
    }
    assert_eq!(
        std::fs::read(whole.join("axes.csv")).unwrap(),
        std::fs::read(merged.join("axes.csv")).unwrap()
    );

    // A merge that is not every shard once is refused as bad input.
    let partial = dir.path().join("partial");
    let (code, err) = merge(&fresh[..2], &partial);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("shard 3/3 missing"), "{err}");
    let twice = [fresh[0].clone(), fresh[0].clone(), fresh[1].clone()];
    let (code, err) = merge(&twice, &partial);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("given twice"), "{err}");
    let (code, err) = merge(&fresh, &fresh[0]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("one of the shards"), "{err}");
}

#[test]
fn a_bad_shard_is_refused_as_usage() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for bad in ["0/3", "4/3", "three"] {
        let (code, err) = causalbench(&[
            "run",
            "--backend",
            "sim",
            "--shard",
            bad,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("K/N"), "{bad}: {err}");
    }
}
