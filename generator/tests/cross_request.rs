//! Real program shapes in which one request waits behind another's work
//! (docs/records.md, "Ground-truth conventions", the `busy` edge; issue
//! "Real program shapes"): the truth has the edge, the symptom's true critical
//! path goes through it, and the label check keeps the case instead of
//! dropping it. Each scenario is the minimal form of a shape real serving,
//! decoding and pipelined programs have.

mod common;

use common::{assert_kept, assert_moved_by, path_edges, record, scenario};
use ground_truth::graph::{EdgeType, GroundTruth, NodeKind};
use ground_truth::labels::CauseLabel;
use ground_truth::Bundle;

/// The requests whose nodes lie on the symptom's true critical path.
fn path_requests(t: &GroundTruth) -> Vec<String> {
    let mut r: Vec<String> = t.symptoms[0]
        .critical_path
        .iter()
        .filter_map(|&n| t.nodes[n as usize].request.as_deref().map(str::to_string))
        .collect();
    r.dedup();
    r
}

/// A single-thread stage (a tokenizer or launcher) serving requests in
/// arrival order: request 1 waits while the thread works for request 0.
const SINGLE_THREAD_STAGE: &str = r#"
cause: handoff_queueing
seed: 11
threads:
  - name: stage
streams:
  - name: s0
programs:
  - name: serve
    start: stage
    requests: 3
    interval_us: 20
    steps:
      - {op: host_work, id: tokenize, duration_us: 150}
      - {op: kernel, id: infer, stream: s0, name: infer, duration_us: 100}
      - {op: sync, id: done, target: stream, stream: s0}
injection:
  kind: host_delay
  target: infer
  request: 0
  magnitude_us: 1500
symptom:
  step: infer
  request: 1
"#;

#[test]
fn a_request_behind_another_on_a_single_thread_stage_waits_through_a_busy_edge() {
    let b = record(&scenario(SINGLE_THREAD_STAGE));
    let t = &b.ground_truth;
    assert!(
        path_edges(t).contains(&EdgeType::Busy),
        "the path {:?} goes through the thread request 0 held",
        path_edges(t)
    );
    assert!(path_requests(t).len() >= 2, "two requests on the path");
    assert_kept(&b, CauseLabel::HandoffQueueing);
    assert_moved_by(&b, 1500.0);
}

#[test]
fn the_quiet_twin_of_a_stage_has_busy_edges_only_where_a_task_waited() {
    // Requests spaced far apart never wait for the thread: no `busy` edge.
    let spaced = SINGLE_THREAD_STAGE.replace("interval_us: 20", "interval_us: 5000");
    let b = record(&scenario(&spaced));
    let busy = |b: &Bundle| {
        b.ground_truth
            .edges
            .iter()
            .filter(|e| e.kind == EdgeType::Busy)
            .count()
    };
    assert_eq!(busy(&b), 0, "spaced requests never wait for the stage");
    let b = record(&scenario(SINGLE_THREAD_STAGE));
    assert_eq!(busy(&b), 2, "requests 1 and 2 each waited for the stage");
    for e in b
        .ground_truth
        .edges
        .iter()
        .filter(|e| e.kind == EdgeType::Busy)
    {
        let (s, d) = (
            &b.ground_truth.nodes[e.src as usize],
            &b.ground_truth.nodes[e.dst as usize],
        );
        assert_eq!(d.kind, NodeKind::HostTask);
        assert_ne!(
            s.request, d.request,
            "the stage was busy with another request"
        );
        assert_eq!(s.detail.thread, d.detail.thread, "on the same thread");
    }
}

/// A saturated pool: four requests handed to a pool of two; the third and
/// fourth wait for a member to finish an earlier request.
const SATURATED_POOL: &str = r#"
cause: handoff_queueing
seed: 12
threads:
  - name: ingress
  - name: pool
    count: 2
queues:
  - name: work
    kind: thread_pool
    consumer: pool
streams:
  - name: s0
  - name: s1
programs:
  - name: serve
    start: ingress
    requests: 4
    interval_us: 10
    steps:
      - {op: host_work, duration_us: 20}
      - {op: handoff, queue: work}
      - {op: host_work, id: prep, duration_us: 200}
      - {op: kernel, id: infer, stream: s0, name: infer, duration_us: 100, grid: 16}
      - {op: sync, id: done, target: stream, stream: s0}
symptom:
  step: infer
  request: 3
"#;

#[test]
fn a_request_handed_to_a_saturated_pool_waits_for_a_member_through_a_busy_edge() {
    let b = record(&scenario(SATURATED_POOL));
    let t = &b.ground_truth;
    assert!(
        path_edges(t).contains(&EdgeType::Busy),
        "the path {:?} goes through the member an earlier request held",
        path_edges(t)
    );
}

/// A closed decode loop on one thread: each step samples, reads the token
/// back with a pageable copy (`.item()`), then the next step begins.
const DECODE_LOOP: &str = r#"
cause: implicit_sync
seed: 13
threads:
  - name: decode
streams:
  - name: s0
programs:
  - name: step
    start: decode
    requests: 3
    interval_us: 1
    steps:
      - {op: kernel, id: sample, stream: s0, name: sample, duration_us: 80}
      - {op: copy, id: token, stream: s0, direction: d2h, bytes: 4096, memory: pageable}
      - {op: host_work, id: detokenize, duration_us: 30}
injection:
  kind: sync_wait
  target: sample
  request: 0
  magnitude_us: 400
symptom:
  step: sample
  request: 1
"#;

#[test]
fn a_decode_step_waits_for_the_previous_steps_readback() {
    let b = record(&scenario(DECODE_LOOP));
    let t = &b.ground_truth;
    let edges = path_edges(t);
    // The thread turned to step 1 when step 0's readback returned: the path
    // crosses from step 0's copy to step 1's task by that `sync`.
    assert!(
        edges.contains(&EdgeType::Sync),
        "through the readback: {edges:?}"
    );
    assert_eq!(path_requests(t).len(), 2, "{edges:?}");
    assert_kept(&b, CauseLabel::ImplicitSync);
    assert_moved_by(&b, 400.0);
}

/// Issue "Truth, simulator and injector defects", item 1: a kernel launched
/// after a blocking pageable readback and some host work waited for the
/// readback, and through it for the kernel the readback followed.
const READBACK_THEN_LAUNCH: &str = r#"
cause: implicit_sync
seed: 14
threads:
  - name: main
streams:
  - name: s0
programs:
  - name: serve
    start: main
    requests: 1
    steps:
      - {op: kernel, id: sample, stream: s0, name: sample, duration_us: 100}
      - {op: copy, id: readback, stream: s0, direction: d2h, bytes: 4096, memory: pageable}
      - {op: host_work, duration_us: 50}
      - {op: kernel, id: next, stream: s0, name: next, duration_us: 100}
      - {op: sync, target: stream, stream: s0}
injection:
  kind: sync_wait
  target: sample
  magnitude_us: 300
symptom:
  step: next
"#;

#[test]
fn a_launch_after_a_blocking_readback_waits_through_the_readback() {
    let b = record(&scenario(READBACK_THEN_LAUNCH));
    let t = &b.ground_truth;
    let path = &t.symptoms[0].critical_path;
    let names: Vec<&str> = path.iter().map(|&n| &*t.nodes[n as usize].name).collect();
    assert!(
        names.contains(&"sample"),
        "the lengthened kernel is on the path: {names:?}"
    );
    assert!(
        path.iter()
            .any(|&n| t.nodes[n as usize].kind == NodeKind::Memcpy),
        "the readback is on the path: {names:?}"
    );
    assert_kept(&b, CauseLabel::ImplicitSync);
    assert_moved_by(&b, 300.0);
}

/// Pipelined micro-batches: each waits, on its first stream, for the event
/// the previous micro-batch recorded when its second stage finished.
const PIPELINE: &str = r#"
cause: event_wait
seed: 15
threads:
  - name: main
streams:
  - name: s0
  - name: s1
events:
  - name: stage_done
programs:
  - name: microbatch
    start: main
    requests: 3
    interval_us: 1
    steps:
      - {op: stream_wait, id: wait_prev, stream: s0, event: stage_done}
      - {op: kernel, id: stage1, stream: s0, name: stage1, duration_us: 100, grid: 32}
      - {op: kernel, id: stage2, stream: s1, name: stage2, duration_us: 150, grid: 32}
      - {op: event_record, id: mark, event: stage_done, stream: s1}
injection:
  kind: event_wait
  target: stage2
  request: 0
  magnitude_us: 500
symptom:
  step: stage1
  request: 1
"#;

#[test]
fn a_micro_batch_waits_on_the_event_the_previous_one_recorded() {
    let b = record(&scenario(PIPELINE));
    let t = &b.ground_truth;
    assert!(
        path_edges(t).contains(&EdgeType::Event),
        "{:?}",
        path_edges(t)
    );
    let names: Vec<String> = t.symptoms[0]
        .critical_path
        .iter()
        .map(|&n| {
            format!(
                "{}@{:?}",
                t.nodes[n as usize].name, t.nodes[n as usize].request
            )
        })
        .collect();
    assert_eq!(
        path_requests(t).len(),
        2,
        "the cause is one request upstream: {names:?}"
    );
    assert_kept(&b, CauseLabel::EventWait);
}

/// Requests sharing one stream: request 1's kernel queues behind request 0's.
const SHARED_STREAM: &str = r#"
cause: stream_backlog
seed: 16
threads:
  - name: pool
    count: 2
streams:
  - name: s0
programs:
  - name: serve
    start: pool
    requests: 2
    interval_us: 5
    steps:
      - {op: kernel, id: infer, stream: s0, name: infer, duration_us: 120, grid: 32}
      - {op: sync, target: stream, stream: s0}
injection:
  kind: kernel_slowdown
  target: infer
  request: 0
  magnitude_us: 600
symptom:
  step: infer
  request: 1
"#;

#[test]
fn a_request_on_a_shared_stream_queues_behind_another_requests_kernel() {
    let b = record(&scenario(SHARED_STREAM));
    let t = &b.ground_truth;
    assert_eq!(
        path_edges(t).last(),
        Some(&EdgeType::StreamOrder),
        "{:?}",
        path_edges(t)
    );
    assert_kept(&b, CauseLabel::StreamBacklog);
}

/// A loader that runs ahead records one event per batch in a ring of four;
/// the consumer's wait for batch i waits on batch i's record, not on the
/// latest one (docs/scenario-space.md, "Scenario language": event rings).
const EVENT_RING: &str = r#"
cause: event_wait
seed: 17
threads:
  - name: loader
  - name: main
queues:
  - name: batches
    consumer: main
streams:
  - name: copy
  - name: compute
events:
  - name: ready
    count: RING
programs:
  - name: step
    start: loader
    requests: 4
    interval_us: 1
    steps:
      - {op: kernel, id: load, stream: copy, name: load, duration_us: 40, grid: 16}
      - {op: event_record, id: mark, event: ready, stream: copy}
      - {op: handoff, queue: batches}
      - {op: stream_wait, id: wait_batch, stream: compute, event: ready}
      - {op: kernel, id: train, stream: compute, name: train, duration_us: 300, grid: 64}
      - {op: sync, target: stream, stream: compute}
injection:
  kind: event_wait
  target: load
  request: 2
  magnitude_us: 800
symptom:
  step: train
  request: 2
"#;

#[test]
fn a_wait_on_an_event_ring_waits_for_its_own_requests_record() {
    let own_record = |ring: u32| {
        let b = record(&scenario(&EVENT_RING.replace("RING", &ring.to_string())));
        let t = &b.ground_truth;
        // Every wait's event edge comes from a record of the wait's own request.
        t.edges
            .iter()
            .filter(|e| e.kind == EdgeType::Event)
            .all(|e| t.nodes[e.src as usize].request == t.nodes[e.dst as usize].request)
    };
    assert!(
        own_record(4),
        "with a ring of four, batch i's wait targets batch i's record"
    );
    assert!(
        !own_record(1),
        "one event: the loader's later records win, as in CUDA"
    );
    let b = record(&scenario(&EVENT_RING.replace("RING", "4")));
    assert_kept(&b, CauseLabel::EventWait);
}

#[test]
fn a_ring_offset_past_the_ring_is_refused() {
    let text = EVENT_RING.replace("RING", "2").replace(
        "event: ready}\n      - {op: kernel, id: train",
        "event: ready, request_offset: -2}\n      - {op: kernel, id: train",
    );
    let err = common::parse(&text).expect_err("an offset past the ring is refused");
    assert!(err.to_string().contains("request_offset"), "{err}");
}
