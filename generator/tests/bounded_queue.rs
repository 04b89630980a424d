//! Bounded queues (`QueueDecl::capacity`; docs/records.md, the `backpressure`
//! edge): a data loader hands batches to a slower main thread through a queue
//! of one or two places, so each push waits until the main thread takes the
//! batch `capacity` places ahead. The truth has the edge from that very take,
//! the push is stamped when it got room, a delay of the consumer reaches a
//! symptom downstream of the blocked producer with the label the convention
//! gives (docs/scenario-space.md, "Labels across requests") and the label
//! check keeps it; without a capacity nothing changes.

mod common;

use common::{assert_kept, assert_moved_by, parse, path_edges, record, scenario};
use ground_truth::graph::{EdgeType, GroundTruth, NodeId, NodeKind};
use ground_truth::labels::CauseLabel;

/// A loader (decode, upload on its own stream) feeding a main thread (forward
/// kernel, a pageable loss readback) four times slower, through a queue of
/// `CAPACITY` places. The symptom is a later batch's upload: the loader makes
/// it only after its previous push, which waited for the main thread.
const LOADER: &str = r#"
cause: implicit_sync
seed: 21
threads:
  - name: loader
  - name: main
queues:
  - name: batches
    consumer: main
    capacity: CAPACITY
streams:
  - name: copies
  - name: compute
programs:
  - name: train_step
    start: loader
    requests: 8
    interval_us: 1
    steps:
      - {op: host_work, id: decode, duration_us: 100}
      - {op: copy, id: upload, stream: copies, direction: h2d, bytes: 65536, memory: pinned}
      - {op: handoff, queue: batches}
      - {op: host_work, id: collate, duration_us: 20}
      - {op: kernel, id: forward, stream: compute, name: forward, duration_us: 400, grid: 16}
      - {op: copy, id: loss, stream: compute, direction: d2h, bytes: 4, memory: pageable}
injection:
  kind: kernel_slowdown
  target: forward
  request: 2
  magnitude_us: 1000
symptom:
  step: upload
  request: 6
"#;

fn loader(capacity: u32) -> String {
    LOADER.replace("CAPACITY", &capacity.to_string())
}

fn unbounded() -> String {
    LOADER.replace("    capacity: CAPACITY\n", "")
}

/// A node's request as its arrival index (tokens are 1, 2, … in arrival order).
fn request_of(t: &GroundTruth, n: NodeId) -> i64 {
    let token = t.nodes[n as usize].request.as_deref().expect("a request");
    token.parse::<i64>().expect("a numeric token") - 1
}

fn backpressure(t: &GroundTruth) -> Vec<(NodeId, NodeId)> {
    t.edges
        .iter()
        .filter(|e| e.kind == EdgeType::Backpressure)
        .map(|e| (e.src, e.dst))
        .collect()
}

#[test]
fn a_push_onto_a_full_queue_waits_for_the_take_capacity_places_ahead() {
    for capacity in [1, 2] {
        let b = record(&scenario(&loader(capacity)));
        let t = &b.ground_truth;
        let edges = backpressure(t);
        // The loader runs four times faster: every push after the first
        // `capacity` + 1 (the main thread takes the first at once) waits.
        assert!(
            edges.len() >= 8 - capacity as usize - 2,
            "capacity {capacity}: {} pushes waited",
            edges.len()
        );
        for (src, dst) in edges {
            let (taker, push) = (&t.nodes[src as usize], &t.nodes[dst as usize]);
            assert_eq!(taker.kind, NodeKind::HostTask);
            assert_eq!(&*taker.name, "task after batches");
            assert_eq!(push.kind, NodeKind::QueueHandoff);
            assert_ne!(taker.detail.thread, push.detail.thread);
            assert_eq!(
                request_of(t, dst) - request_of(t, src),
                capacity as i64,
                "capacity {capacity}: a push waits for the batch {capacity} places ahead"
            );
            // Stamped when it got room: when the main thread took that batch.
            assert_eq!(push.start, taker.start, "capacity {capacity}");
            // Backpressure gates at the take, the push's own time.
            assert_eq!(t.gating_time(src, dst, EdgeType::Backpressure), push.start);
        }
    }
}

#[test]
fn a_blocked_producers_next_batch_waits_through_backpressure() {
    for capacity in [1, 2] {
        let b = record(&scenario(&loader(capacity)));
        let edges = path_edges(&b.ground_truth);
        let at = |k: EdgeType| edges.iter().position(|&e| e == k);
        let pushed = at(EdgeType::Backpressure).expect("backpressure on the path");
        // The consumer's readback held it (`sync`) before, and the loader
        // took the symptom's batch up after the push (`busy`).
        assert!(at(EdgeType::Sync).is_some_and(|i| i < pushed), "{edges:?}");
        assert!(edges[pushed..].contains(&EdgeType::Busy), "{edges:?}");
    }
}

#[test]
fn a_lengthened_consumer_kernel_is_implicit_sync_at_the_producer() {
    for capacity in [1, 2] {
        let b = record(&scenario(&loader(capacity)));
        assert_kept(&b, CauseLabel::ImplicitSync);
        assert_moved_by(&b, 1000.0);
    }
}

#[test]
fn grown_consumer_host_work_is_handoff_queueing_at_the_producer() {
    for capacity in [1, 2] {
        let body = loader(capacity)
            .replace("cause: implicit_sync", "cause: handoff_queueing")
            .replace("kind: kernel_slowdown", "kind: host_delay");
        let b = record(&scenario(&body));
        assert_kept(&b, CauseLabel::HandoffQueueing);
        assert_moved_by(&b, 1000.0);
    }
}

#[test]
fn without_room_to_wait_for_the_truth_is_the_unbounded_queues() {
    // A queue that never fills and one with no capacity record the same run.
    let bounded = record(&scenario(&loader(8)));
    let unbounded = record(&scenario(&unbounded()));
    assert!(backpressure(&bounded.ground_truth).is_empty());
    assert_eq!(
        json(&bounded.ground_truth),
        json(&unbounded.ground_truth),
        "the truth"
    );
    assert_eq!(json(&bounded.trace), json(&unbounded.trace), "the records");
    // An unbounded queue writes no `capacity`: its scenario reads as before.
    let written = serde_json::to_value(&unbounded.manifest.scenario.queues).unwrap();
    assert_eq!(
        written,
        serde_json::json!([{"name": "batches", "kind": "channel", "consumer": "main", "randomized": false}])
    );
}

#[test]
fn capacity_zero_and_a_queue_its_own_consumer_fills_are_rejected() {
    let e = parse(&loader(0)).expect_err("capacity 0");
    assert!(e.to_string().contains("queues[0].capacity"), "{e}");
    // The main thread pushing onto the queue it alone drains could wait forever.
    let cycle = loader(1).replace(
        "      - {op: host_work, id: collate, duration_us: 20}\n",
        "      - {op: host_work, id: collate, duration_us: 20}\n      - {op: handoff, queue: batches}\n",
    );
    let e = parse(&cycle).expect_err("a cycle of bounded queues");
    assert!(e.to_string().contains("programs[0].steps[4].queue"), "{e}");
    assert!(e.to_string().contains("could wait forever"), "{e}");
}

/// What a bundle holds, serialized, to compare two runs byte for byte.
fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("serializable")
}

/// A loader and a main thread whose step logs the two tests below hold.
const LOGGED: &str = r#"
cause: none
threads: [{name: loader}, {name: main}]
queues: [{name: batches, consumer: main, capacity: 1}]
streams: [{name: s0}]
programs:
  - name: step
    start: loader
    requests: 3
    steps:
      - {op: host_work, duration_us: 100}
      - {op: handoff, queue: batches}
      - {op: host_work, duration_us: 1000}
      - {op: sync, id: done, target: device}
symptom: {step: done}
"#;

/// The one truth builder of the GPU and PyTorch backends (`record::truth::build`)
/// from a step log as their executors write it: the loader's third push was
/// ready at 400 µs and got room at 1 251 µs, just after the main thread took
/// the second batch; its second push found room (the first batch was taken
/// at 250 µs, before it was ready at 300 µs).
#[test]
fn the_step_log_of_a_gpu_run_gives_the_same_edge() {
    use generator::record::log::{Arrival, HostEvent, Request, StepLog, ThreadLog};
    let sc = scenario(LOGGED);
    let us = |t: u64| t * 1_000;
    let task = |t, request, handoff: Option<u64>, thread_free| HostEvent::TaskBegin {
        t: us(t),
        thread_free: us(thread_free),
        pending: None,
        request,
        handoff,
        queue: if handoff.is_some() { "batches" } else { "" }.into(),
    };
    let push = |ready, t, request, id| HostEvent::Handoff {
        t: us(t),
        ready: us(ready),
        id,
        queue: "batches".into(),
        request,
        pending: None,
        fault: None,
    };
    let log = StepLog {
        requests: (0..3)
            .map(|i| Request {
                program: 0,
                index: i,
                token: i as u64 + 1,
            })
            .collect(),
        arrivals: (0..3)
            .map(|i| Arrival {
                request: i,
                t: us(100),
                tid: 1,
            })
            .collect(),
        threads: vec![
            ThreadLog {
                tid: 1,
                injector: false,
                events: vec![
                    task(100, 0, None, 0),
                    push(200, 200, 0, 1),
                    task(210, 1, None, 200),
                    push(300, 300, 1, 2),
                    task(310, 2, None, 300),
                    push(400, 1251, 2, 3),
                ],
            },
            ThreadLog {
                tid: 2,
                injector: false,
                events: vec![
                    task(250, 0, Some(1), 0),
                    task(1250, 1, Some(2), 1250),
                    task(2250, 2, Some(3), 2250),
                ],
            },
        ],
        ops: vec![],
        stalls: vec![],
    };
    let truth = generator::record::truth::build(&sc, &log, None, &mut NoOps, false);
    let t = &truth.builder.truth;
    let edges = backpressure(t);
    assert_eq!(edges.len(), 1, "only the third push waited");
    let (src, dst) = edges[0];
    assert_eq!((request_of(t, src), request_of(t, dst)), (1, 2));
    assert_eq!(t.nodes[src as usize].start, us(1250), "the second take");
    assert_eq!(
        t.nodes[dst as usize].start,
        us(1251),
        "pushed when it got room"
    );
}

/// The observer of a step log without calls.
struct NoOps;

impl generator::record::truth::Observer for NoOps {
    fn call(&mut self, _: &generator::record::log::Op) -> (String, (u64, u64)) {
        unreachable!("no calls")
    }
    fn call_records(
        &mut self,
        _: &mut generator::record::RunBuilder,
        _: &generator::record::log::Op,
        _: NodeId,
    ) {
    }
    fn device_times(
        &mut self,
        _: &generator::record::log::Op,
        _: u64,
    ) -> generator::record::truth::Measured {
        unreachable!("no device ops")
    }
    fn device_records(
        &mut self,
        _: &mut generator::record::RunBuilder,
        _: &generator::record::log::Op,
        _: NodeId,
    ) {
    }
    fn event_reached(&mut self, _: &generator::record::log::Op, _: u64) -> Option<u64> {
        None
    }
    fn event_records(
        &mut self,
        _: &mut generator::record::RunBuilder,
        _: &generator::record::log::Op,
        _: NodeId,
        _: u64,
    ) {
    }
    fn wait_records(
        &mut self,
        _: &mut generator::record::RunBuilder,
        _: &generator::record::log::Op,
        _: NodeId,
    ) {
    }
    fn graph_node_times(
        &mut self,
        _: &generator::record::log::Op,
        _: usize,
        _: usize,
        _: usize,
        _: u64,
    ) -> (u64, u64) {
        unreachable!("no graphs")
    }
    fn graph_node_records(
        &mut self,
        _: &mut generator::record::RunBuilder,
        _: &generator::record::log::Op,
        _: usize,
        _: NodeId,
        _: Option<&generator::keys::StepKey>,
    ) {
    }
    fn sync_records(
        &mut self,
        _: &mut generator::record::RunBuilder,
        _: &generator::record::log::Op,
        _: NodeId,
    ) {
    }
}

/// The PyTorch executor's log of the same run (`executor.py`: a handoff's fifth
/// field is when a push onto a bounded queue was ready; a push without it, as
/// every push of an unbounded queue and of logs written before, did not wait)
/// gives the same edge through its own conversion.
#[test]
fn the_pytorch_executors_log_gives_the_same_edge() {
    let log = r#"{
 "origin": 0, "end": 3000000,
 "arrivals": [{"request": 0, "t": 100000, "tid": 1}, {"request": 1, "t": 100000, "tid": 1},
              {"request": 2, "t": 100000, "tid": 1}],
 "requests": [{"program": 0, "index": 0, "at_rel": 0, "token": 1}, {"program": 0, "index": 1, "at_rel": 0, "token": 2},
              {"program": 0, "index": 2, "at_rel": 0, "token": 3}],
 "threads": [
  {"tid": 1, "ops": [], "events": [
    {"task": [100000, 0, null, "", 0]}, {"handoff": [200000, 1, "batches", 0, 200000]},
    {"task": [210000, 1, null, "", 200000]}, {"handoff": [300000, 2, "batches", 1]},
    {"task": [310000, 2, null, "", 300000]}, {"handoff": [1251000, 3, "batches", 2, 400000]}]},
  {"tid": 2, "ops": [], "events": [
    {"task": [250000, 0, 1, "batches", 0]}, {"task": [1250000, 1, 2, "batches", 1250000]},
    {"task": [2250000, 2, 3, "batches", 2250000]}]}],
 "injector": null, "kernels": [], "stamps": [], "graph_kernels": [], "graph_tags": [], "errors": [],
 "clock": {"offset_ns": 0, "spread_ns": [0, 0], "realtime_minus_monotonic_ns": [0, 0]},
 "device": {"name": "test GPU", "sms": 132, "capability": [9, 0]},
 "versions": {"torch": "2.11.0", "cuda": "13.0", "cupy": "14.2.0", "python": "3.12.3"}
}"#;
    let log: generator::torch::log::StepLog = serde_json::from_str(log).expect("a step log");
    let out = generator::torch::truth::build(&scenario(LOGGED), &log, None, None);
    let t = &out.builder.truth;
    let edges = backpressure(t);
    assert_eq!(edges.len(), 1, "only the third push waited");
    let (src, dst) = edges[0];
    assert_eq!((request_of(t, src), request_of(t, dst)), (1, 2));
    assert_eq!(
        t.nodes[dst as usize].start, 1_251_000,
        "pushed when it got room"
    );
}
