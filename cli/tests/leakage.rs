//! The leakage audit (`docs/integrity.md`): the probes that use no causal
//! reasoning (`baselines/src/probes.rs`) are run over the simulator catalog, and
//! none may separate the catalog's pairs better than chance plus a small margin.
//! A probe above the ceiling means names, record kinds or structure in the views
//! give the answer away.

use std::process::Command;

/// The highest pooled pair accuracy a probe may reach: chance (0.170 for a probe
/// that knows each family's causes but has no evidence, see `docs/integrity.md`)
/// plus one family of the twelve.
const CEILING: f64 = 0.25;

/// Pooled (pair units, sum of their scores) of every probe in a results directory's
/// leaderboard (evaluator/METRICS.md: a pair unit's score is the share of its
/// repetitions told apart).
fn probe_pairs(out: &std::path::Path) -> Vec<(String, u64, f64)> {
    let text = std::fs::read_to_string(out.join("leaderboard.json")).unwrap();
    let lb: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut pooled: std::collections::BTreeMap<String, (u64, f64)> = Default::default();
    for f in lb["families_pooled"].as_array().unwrap() {
        let profiler = f["profiler"].as_str().unwrap();
        if profiler.starts_with("probe-") {
            let e = pooled.entry(profiler.to_string()).or_default();
            e.0 += f["pairs"].as_u64().unwrap();
            e.1 += f["pairs_correct"].as_f64().unwrap();
        }
    }
    pooled.into_iter().map(|(p, (n, c))| (p, n, c)).collect()
}

/// Runs `causalbench run ARGS --profilers probes` and fails if any probe's pooled
/// pair accuracy is above the ceiling.
fn assert_probes_under_ceiling(args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .arg("run")
        .args(args)
        .args(["--profilers", "probes", "--megakernel-reps", "0"])
        .args(["--quiet", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let probes = probe_pairs(&out);
    assert_eq!(probes.len(), 4, "every probe is scored: {probes:?}");
    let mut above = Vec::new();
    for (probe, pairs, correct) in &probes {
        let accuracy = *correct / *pairs as f64;
        eprintln!("{probe}: pair accuracy {accuracy:.3} ({correct}/{pairs})");
        if accuracy > CEILING {
            above.push(format!("{probe} {accuracy:.3} ({correct}/{pairs})"));
        }
    }
    assert!(
        above.is_empty(),
        "probes above the ceiling {CEILING}: {}",
        above.join(", ")
    );
}

#[test]
fn no_probe_separates_the_catalog_better_than_chance() {
    // Two repetitions: enough pairs that one lucky family does not decide, and
    // the probes cost milliseconds per view (recording dominates).
    assert_probes_under_ceiling(&["--backend", "sim", "--reps", "2"]);
}

/// The same audit on the real recordings: the shipped H200 corpus (its injected
/// work recorded by the GPU backend, its host noise real).
#[test]
fn no_probe_separates_the_h200_corpus_better_than_chance() {
    assert_probes_under_ceiling(&["--corpus", "results/corpus/h200-580"]);
}

/// The same audit on the PyTorch track's corpus (docs/torch-track.md): Kineto's
/// records, the executor's injected work.
#[test]
fn no_probe_separates_the_kineto_corpus_better_than_chance() {
    assert_probes_under_ceiling(&["--corpus", "results/corpus/h200-580-kineto"]);
}

/// The same audit on the generated dev split (docs/scenario-space.md), where a
/// pair is one family instance: its variants share every declaration but the
/// injection, so names, kinds and structure must say nothing.
#[test]
fn no_probe_separates_the_generated_dev_split_better_than_chance() {
    assert_probes_under_ceiling(&["--backend", "sim", "--suite", "dev", "--cases", "60"]);
}

/// And on the dev split as the H200 recorded it: its first 70 family
/// instances (every variant of each), which keep the test's time flat.
#[test]
fn no_probe_separates_the_h200_dev_corpus_better_than_chance() {
    let corpus = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../results/dev-corpus/h200-580"
    ));
    let subset = tempfile::tempdir().unwrap();
    let mut copied = 0;
    for entry in std::fs::read_dir(corpus).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let instance = name
            .split('.')
            .find_map(|part| part.strip_prefix("dev").and_then(|n| n.parse::<u32>().ok()));
        if name.ends_with(".bundle.json.gz") && instance.is_some_and(|i| i < 70) {
            std::fs::copy(&path, subset.path().join(&name)).unwrap();
            copied += 1;
        }
    }
    assert!(copied >= 140, "only {copied} bundles of the dev corpus");
    assert_probes_under_ceiling(&["--corpus", subset.path().to_str().unwrap()]);
}
