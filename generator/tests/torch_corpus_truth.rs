//! The PyTorch track's committed corpus (results/corpus/h200-580-kineto, kept
//! with `torch record --keep-logs`): each bundle's truth rebuilds from its
//! step log and its native Kineto trace through the one truth builder
//! (`generator::record::truth`), node for node and edge for edge. Left out:
//! what the recording run had besides those files — the rids of nodes (the
//! eBPF host records it attached), `fault` edges and injection records (the
//! plan, sized from a no-injection twin that is not kept).

use generator::torch::{log::StepLog, observe, truth};
use ground_truth::io::{read_input, InputLimits, Readable};
use ground_truth::{Bundle, GroundTruth};
use serde_json::Value;
use std::path::{Path, PathBuf};

const CORPUS: &str = "../results/corpus/h200-580-kineto";

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(CORPUS)
}

/// The ids of the bundles whose step log is kept.
fn kept_runs(dir: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".steplog.json.gz").map(str::to_string))
        .collect();
    ids.sort();
    ids
}

/// The truth of run `id` rebuilt from its step log and Kineto trace, as the
/// backend built it (`TorchBackend::record_one`, without the plan).
fn rebuilt(dir: &Path, id: &str, bundle: &Bundle) -> GroundTruth {
    let file = dir.join(format!("{id}.steplog.json.gz"));
    let bytes = read_input(&file, "step log", &InputLimits::DEFAULT).unwrap();
    let log: StepLog = ground_truth::io::from_json(&file, &bytes).unwrap();
    let acts = kineto::read_activities(&dir.join(format!("{id}.kineto.json.gz"))).unwrap();
    let [before, after] = log.clock.realtime_minus_monotonic_ns;
    let calls: Vec<observe::TimedCall> = log
        .threads
        .iter()
        .flat_map(|t| {
            t.ops
                .iter()
                .map(move |o| (o.id, o.tid.unwrap_or(t.tid), o.t0, o.t1, o.api_key()))
        })
        .collect();
    let binding = observe::bind(&acts, (before + after) / 2, &calls);
    let sc = &bundle.manifest.scenario;
    let out = truth::build(sc, &log, None, Some((&acts, &binding)));
    out.builder.finish(0).0
}

fn nodes_without_rids(t: &GroundTruth) -> Vec<Value> {
    let v = serde_json::to_value(t).unwrap();
    let mut nodes = v["nodes"].as_array().unwrap().clone();
    for n in &mut nodes {
        n.as_object_mut().unwrap().remove("rids");
    }
    nodes
}

fn edges_but_fault(t: &GroundTruth) -> Vec<Value> {
    let v = serde_json::to_value(t).unwrap();
    let edges = v["edges"].as_array().unwrap();
    edges
        .iter()
        .filter(|e| e["type"] != "fault")
        .cloned()
        .collect()
}

#[test]
fn the_committed_torch_corpus_truth_rebuilds_from_its_step_logs() {
    let dir = corpus();
    if !dir.is_dir() {
        eprintln!("skipped: {CORPUS} is not committed");
        return;
    }
    let ids = kept_runs(&dir);
    assert!(!ids.is_empty(), "no step log kept in {CORPUS}");
    for id in &ids {
        let bundle = Bundle::read(&dir.join(format!("{id}.bundle.json.gz"))).unwrap();
        let truth = rebuilt(&dir, id, &bundle);
        let committed = &bundle.ground_truth;
        assert_eq!(
            nodes_without_rids(&truth),
            nodes_without_rids(committed),
            "{id}: nodes"
        );
        assert_eq!(
            edges_but_fault(&truth),
            edges_but_fault(committed),
            "{id}: edges"
        );
    }
}
