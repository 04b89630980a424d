//! One rule names a lengthened device op at its symptom (docs/scenario-space.md,
//! "Labelling convention"; issue "Truth, simulator and injector defects", item
//! 5): the first gate after it on the true path other than stream order, or
//! `stream_backlog` when stream order alone carries the delay. The label check
//! keeps exactly that label and drops any other, whichever lengthening
//! injection was used.

mod common;

use ground_truth::graph::LabelVerdict;

fn verdict(cause: &str, kind: &str) -> LabelVerdict {
    // An upstream kernel, then stream order, then an event.
    let body = format!(
        r#"cause: {cause}
seed: 31
threads:
  - name: main
streams:
  - name: s0
  - name: s1
events:
  - name: ready
programs:
  - name: serve
    start: main
    requests: 1
    steps:
      - {{op: kernel, id: root, stream: s0, name: producer, duration_us: 150, grid: 32}}
      - {{op: kernel, id: middle, stream: s0, name: reshape, duration_us: 50, grid: 32}}
      - {{op: event_record, event: ready, stream: s0}}
      - {{op: stream_wait, stream: s1, event: ready}}
      - {{op: kernel, id: consumer, stream: s1, name: consumer, duration_us: 100, grid: 32}}
      - {{op: sync, target: device}}
injection:
  kind: {kind}
  target: root
  magnitude_us: 600
symptom:
  step: consumer
"#
    );
    let b = common::record(&common::scenario(&body));
    b.ground_truth.symptoms[0]
        .label
        .clone()
        .expect("checked")
        .verdict
}

#[test]
fn a_lengthened_root_behind_stream_order_then_an_event_is_an_event_wait() {
    for kind in ["event_wait", "kernel_slowdown"] {
        assert_eq!(verdict("event_wait", kind), LabelVerdict::Kept, "{kind}");
        assert_eq!(
            verdict("stream_backlog", kind),
            LabelVerdict::Dropped,
            "{kind}"
        );
        assert_eq!(
            verdict("implicit_sync", kind),
            LabelVerdict::Dropped,
            "{kind}"
        );
    }
}
