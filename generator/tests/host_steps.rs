//! A host-side injection on a step that makes no CUDA call (tokenization,
//! pre-processing) delays the thread's next host operation, and the truth
//! says so (issue "Truth, simulator and injector defects", item 6): the
//! injected stall links by `fault` to that operation (a call or a push onto a
//! queue), and the label check keeps the case.

mod common;

use common::{record, scenario};
use ground_truth::graph::{EdgeType, LabelVerdict, NodeKind};
use ground_truth::labels::CauseLabel;

const TOKENIZE_THEN_LAUNCH: &str = r#"
cause: CAUSE
seed: 21
threads:
  - name: main
streams:
  - name: s0
programs:
  - name: serve
    start: main
    requests: 1
    steps:
      - {op: host_work, id: tokenize, duration_us: 120}
      - {op: kernel, id: infer, stream: s0, name: infer, duration_us: 100}
      - {op: sync, target: stream, stream: s0}
injection:
  kind: KIND
  target: tokenize
  magnitude_us: 800
symptom:
  step: infer
"#;

const TOKENIZE_THEN_HANDOFF: &str = r#"
cause: CAUSE
seed: 22
threads:
  - name: tokenizer
  - name: worker
queues:
  - name: q
    consumer: worker
streams:
  - name: s0
programs:
  - name: serve
    start: tokenizer
    requests: 1
    steps:
      - {op: host_work, id: tokenize, duration_us: 120}
      - {op: handoff, queue: q}
      - {op: kernel, id: infer, stream: s0, name: infer, duration_us: 100}
      - {op: sync, target: stream, stream: s0}
injection:
  kind: KIND
  target: tokenize
  magnitude_us: 800
symptom:
  step: infer
"#;

#[test]
fn a_host_injection_on_host_work_delays_the_next_call_or_push() {
    let kinds = [
        ("cpu_deschedule", CauseLabel::CpuDeschedule),
        ("host_page_fault_minor", CauseLabel::HostPageFault),
        ("host_delay", CauseLabel::HostCompute),
    ];
    for shape in [TOKENIZE_THEN_LAUNCH, TOKENIZE_THEN_HANDOFF] {
        for (kind, cause) in kinds {
            let text = shape.replace("KIND", kind).replace("CAUSE", cause.as_str());
            let b = record(&scenario(&text));
            let t = &b.ground_truth;
            let s = &t.symptoms[0];
            let check = s.label.as_ref().expect("checked");
            assert_eq!(
                check.verdict,
                LabelVerdict::Kept,
                "{kind}: {}",
                check.reason
            );
            assert_eq!(s.cause, cause);
            if kind != "host_delay" {
                let fault = t
                    .nodes
                    .iter()
                    .find(|n| n.kind == NodeKind::InjectedFault)
                    .expect("a fault node");
                let delayed: Vec<_> = t
                    .edges
                    .iter()
                    .filter(|e| e.src == fault.id && e.kind == EdgeType::Fault)
                    .map(|e| t.nodes[e.dst as usize].kind)
                    .collect();
                assert_eq!(delayed.len(), 1, "{kind}: one delayed operation");
                assert!(
                    matches!(delayed[0], NodeKind::ApiCall | NodeKind::QueueHandoff),
                    "{kind}: {delayed:?}"
                );
            }
            let late_us = s.lateness_ns / 1e3;
            assert!(
                (late_us - 800.0).abs() <= 80.0,
                "{kind}: {late_us:.1} µs late"
            );
        }
    }
}
