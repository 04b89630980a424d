//! The ground truth is complete on the structures a scenario generator samples
//! (docs/records.md, "Ground-truth conventions"): the true critical path of a
//! symptom passes through what actually delayed it, including application work.

use generator::sim::SimBackend;
use generator::Backend;
use ground_truth::graph::{EdgeType, GroundTruth, NodeId, NodeKind};
use ground_truth::io::Readable;
use ground_truth::{Bundle, Scenario};

fn scenario(yaml: &str) -> Scenario {
    Scenario::parse(std::path::Path::new("test.yaml"), yaml.as_bytes()).expect("scenario")
}

fn record(sc: &Scenario) -> Bundle {
    SimBackend::default().record(sc, 0).expect("recorded")
}

/// The nodes of the symptom's true critical path.
fn path(truth: &GroundTruth) -> Vec<NodeId> {
    truth.symptoms[0].critical_path.clone()
}

fn on_path(truth: &GroundTruth, pred: impl Fn(&ground_truth::graph::Node) -> bool) -> bool {
    path(truth).iter().any(|&n| pred(&truth.nodes[n as usize]))
}

const SYNC_THEN_HANDOFF: &str = r#"
schema_version: 1
name: sync-then-handoff
family: test
variant: sync-wait
cause: implicit_sync
description: "a device sync returns late just before a handoff to another thread"
mode: instrumented
seed: 7
repetitions: 1
threads:
  - name: producer
  - name: consumer
queues:
  - name: q
    kind: channel
    consumer: consumer
streams:
  - name: s0
  - name: s1
programs:
  - name: serve
    start: producer
    requests: 1
    steps:
      - {op: kernel, id: long, stream: s0, name: long, duration_us: 500}
      - {op: sync, id: wait, target: device}
      - {op: handoff, queue: q}
      - {op: kernel, id: after, stream: s1, name: after, duration_us: 50}
injection:
  kind: sync_wait
  target: long
  magnitude_us: 3000
symptom:
  step: after
"#;

#[test]
fn a_late_sync_before_a_handoff_is_on_the_true_critical_path() {
    for kind in ["sync_wait", "kernel_slowdown"] {
        let sc = scenario(&SYNC_THEN_HANDOFF.replace("kind: sync_wait", &format!("kind: {kind}")));
        let b = record(&sc);
        let t = &b.ground_truth;
        assert!(
            on_path(t, |n| n.kind == NodeKind::Synchronization),
            "{kind}: the sync is on the path {:?}",
            path(t)
        );
        assert!(
            on_path(t, |n| n.kind == NodeKind::Kernel && &*n.name == "long"),
            "{kind}: the lengthened kernel is on the path"
        );
        // The sync links to the handoff by program order on the producing thread.
        let handoff = t
            .nodes
            .iter()
            .find(|n| n.kind == NodeKind::QueueHandoff)
            .expect("a handoff node");
        assert!(t.edges.iter().any(|e| e.dst == handoff.id
            && e.kind == EdgeType::HostOrder
            && t.nodes[e.src as usize].kind == NodeKind::Synchronization));
    }
}
