//! The reference profiler off the catalog's region: scenarios written along other axes
//! (deep gating chains, a short host stall before a long kernel, one request, kernels
//! sharing a name across call sites, a graph with fan-in), recorded on the simulator and
//! scored by the evaluator in the combined/instrumented view.

use baselines::builtin;
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Bundle, Collectors, EdgeType, Evidence, Mode, Readable, Scenario};
use std::path::PathBuf;

fn scenario_path(name: &str) -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let own = here.join(format!("tests/scenarios/{name}.yaml"));
    if own.exists() {
        own
    } else {
        here.join(format!("../catalog/{name}.yaml"))
    }
}

fn scenario(name: &str) -> Scenario {
    Scenario::read(&scenario_path(name)).unwrap()
}

fn record(sc: &Scenario, rep: u32) -> Bundle {
    generator::select_backend(generator::BackendKind::Sim)
        .unwrap()
        .record(sc, rep)
        .unwrap()
}

const COMBINED: ViewSpec = ViewSpec {
    collectors: Collectors::Combined,
    mode: Mode::Instrumented,
    loss: LossSpec::None,
};

/// Scores `causal-graph` on every repetition of `sc`; returns the failures, described.
fn failures(sc: &Scenario) -> Vec<String> {
    let p = builtin("causal-graph").unwrap();
    let mut out = Vec::new();
    for rep in 0..sc.repetitions {
        let b = record(sc, rep);
        let view = views::derive(&b, COMBINED).view;
        let x = p.explain(&view);
        let s = evaluator::score_case(&b, &view, &x);
        assert!(!s.symptoms.is_empty(), "{}: no symptom", sc.name);
        for y in &s.symptoms {
            if !y.correct {
                let d = x.diagnoses.iter().find(|d| d.query == y.id);
                out.push(format!(
                    "{} r{rep}: true {:?}, claimed {:?} ({:?})",
                    sc.name,
                    y.true_cause,
                    y.claimed_cause,
                    d.map(|d| (&d.causes, d.phases))
                ));
            }
        }
    }
    out
}

fn assert_right(names: &[&str]) {
    let bad: Vec<String> = names.iter().flat_map(|n| failures(&scenario(n))).collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn a_cause_propagates_along_the_whole_gating_chain() {
    assert_right(&["pipeline-depth.hops-5", "pipeline-depth.hops-8"]);
}

#[test]
fn a_host_stall_record_is_evidence_whatever_the_device_op_length() {
    assert_right(&[
        "host-stall-before-long-kernel.deschedule",
        "host-stall-before-long-kernel.page-fault",
    ]);
}

#[test]
fn peers_from_other_call_sites_are_not_peers() {
    assert_right(&["polluted-peers.deschedule", "polluted-peers.occupancy"]);
}

#[test]
fn a_graph_with_fan_in_keeps_every_predecessor_and_labels_them_inferred() {
    assert_right(&["graph-fan-in.node-slow", "graph-fan-in.host-late"]);
    let p = builtin("causal-graph").unwrap();
    for name in ["graph-fan-in.node-slow", "graph-fan-in.host-late"] {
        let b = record(&scenario(name), 0);
        let view = views::derive(&b, COMBINED).view;
        let x = p.explain(&view);
        let graph: Vec<_> = x
            .edges
            .iter()
            .filter(|e| e.kind == EdgeType::Graph)
            .collect();
        assert!(!graph.is_empty(), "{name}: no graph edges");
        for e in &graph {
            assert_eq!(e.evidence, Evidence::Inferred, "{name}: {e:?}");
            assert!(e.confidence < 0.8, "{name}: {e:?}");
        }
        let s = evaluator::score_case(&b, &view, &x);
        assert_eq!(
            s.edges.false_causal_edges, 0,
            "{name}: observed or explicit edges not in the truth"
        );
        // Fan-in: n5 has three predecessors and n8 two in each of the 3 launches.
        let recall = s
            .edges
            .by_type
            .iter()
            .find(|t| t.kind == EdgeType::Graph)
            .and_then(|t| t.recall)
            .unwrap_or(0.0);
        assert!(recall >= 0.9, "{name}: graph edge recall {recall}");
    }
}

/// One request: no peers, so the diagnosis reasons from the run's own records.
#[test]
fn a_single_request_is_diagnosed_from_its_own_records() {
    let names = [
        "late-launch-vs-device-queueing.host-deschedule",
        "late-launch-vs-device-queueing.occupancy-hog",
        "late-launch-vs-device-queueing.stream-backlog",
        "host-page-fault-vs-cpu-stall.page-fault",
        "host-page-fault-vs-cpu-stall.preempted",
        "dependency-vs-overlap.event-edge",
        "dependency-vs-overlap.independent",
        "graph-replay-vs-direct-launch.graph-replay",
        "graph-replay-vs-direct-launch.direct-launch",
        "slow-copy-vs-blocked-consumer.blocked-elsewhere",
        "slow-copy-vs-blocked-consumer.own-copy-contended",
        "pipeline-depth.hops-5",
        "host-stall-before-long-kernel.deschedule",
        "graph-fan-in.node-slow",
    ];
    let mut bad = Vec::new();
    for n in names {
        let mut sc = scenario(n);
        for p in &mut sc.programs {
            p.requests = 1;
        }
        if let Some(i) = sc.injection.as_mut() {
            i.request = 0;
        }
        sc.symptom.request = 0;
        bad.extend(failures(&sc));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
