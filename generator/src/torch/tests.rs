//! The PyTorch backend's truth from a step log and Kineto's records bound to
//! it, on a hand-made log and trace (no GPU, no torch).

use super::log::StepLog;
use super::{observe, truth};
use ground_truth::graph::{EdgeType, NodeKind};
use ground_truth::trace::Record;
use ground_truth::Scenario;
use std::path::Path;

const SCENARIO: &str = r#"
schema_version: 1
name: t.event-edge
family: t
variant: event-edge
cause: event_wait
mode: instrumented
threads: [{name: host}]
streams: [{name: s1}, {name: s2}]
events: [{name: ready}]
programs:
  - name: serve
    start: host
    steps:
      - {op: kernel, id: producer, stream: s1, name: producer, duration_us: 100}
      - {op: event_record, event: ready, stream: s1}
      - {op: stream_wait, stream: s2, event: ready}
      - {op: kernel, id: consumer, stream: s2, name: consumer, duration_us: 50}
      - {op: sync, target: device}
symptom: {step: consumer}
"#;

// Host times are CLOCK_MONOTONIC ns; device times too (already converted by the executor).
const LOG: &str = r#"{
 "origin": 1000000, "end": 2000000,
 "arrivals": [{"request": 0, "t": 1000000, "tid": 42}],
 "requests": [{"program": 0, "index": 0, "at_rel": 0, "token": 1000}],
 "threads": [{"tid": 42, "events": [
    {"task": [1000100, 0, null, "", 0]}, {"api": 1}, {"api": 2}, {"api": 3}, {"api": 4}, {"api": 5}],
  "ops": [
   {"id": 1, "thread": 0, "request": 0, "step": 0, "what": {"kind": "kernel", "name": "producer", "dur_ns": 100000, "extra_ns": 0},
    "t0": 1001000, "t1": 1005000, "stream": 0, "stream_id": 3, "generation": 0, "prev": [], "tid": 42, "slot": 0},
   {"id": 2, "thread": 0, "request": 0, "step": 1, "what": {"kind": "event_record", "event": 0},
    "t0": 1006000, "t1": 1007000, "stream": 0, "stream_id": 3, "prev": [1], "tid": 42, "stamps": [0]},
   {"id": 3, "thread": 0, "request": 0, "step": 2, "what": {"kind": "stream_wait", "event": 0},
    "t0": 1008000, "t1": 1009000, "stream": 1, "stream_id": 4, "prev": [], "tid": 42, "stamps": [1], "event_src": 2},
   {"id": 4, "thread": 0, "request": 0, "step": 3, "what": {"kind": "kernel", "name": "consumer", "dur_ns": 50000, "extra_ns": 0},
    "t0": 1010000, "t1": 1014000, "stream": 1, "stream_id": 4, "prev": [3], "tid": 42, "slot": 1},
   {"id": 5, "thread": 0, "request": 0, "step": 4, "what": {"kind": "sync", "target": "device"},
    "t0": 1015000, "t1": 1180000, "tid": 42, "waited": [2, 4]}
  ]}],
 "injector": null,
 "kernels": [[1010000, 1110000], [1112000, 1162000]],
 "stamps": [1111000, 1111500],
 "graph_kernels": [], "graph_tags": [], "errors": [],
 "clock": {"offset_ns": 5, "spread_ns": [-100, 100], "realtime_minus_monotonic_ns": [500000, 500000]},
 "device": {"name": "test GPU", "sms": 132, "capability": [9, 0]},
 "versions": {"torch": "2.11.0", "cuda": "13.0", "cupy": "14.2.0", "python": "3.12.3"}
}"#;

// Kineto's view of the same run: times are the monotonic ones plus 500 µs
// (its clock is CLOCK_REALTIME), in µs. The consumer kernel is absent, as
// if Kineto had dropped it; the wait names no event record (-1).
const KINETO: &str = r#"{"baseTimeNanoseconds": 500000, "traceEvents": [
 {"ph": "X", "cat": "user_annotation", "name": "cb:op:1:1000", "pid": 1, "tid": 42, "ts": 1000.9, "dur": 4.2},
 {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 1, "tid": 42, "ts": 1001.5, "dur": 3.0,
  "args": {"cbid": 307, "correlation": 10}},
 {"ph": "X", "cat": "kernel", "name": "producer", "pid": 0, "tid": 7, "ts": 1010.2, "dur": 100.0,
  "args": {"device": 0, "context": 1, "stream": 7, "correlation": 10, "grid": [132,1,1], "block": [128,1,1]}},
 {"ph": "X", "cat": "user_annotation", "name": "cb:h", "pid": 1, "tid": 42, "ts": 1005.5, "dur": 0.4},
 {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 1, "tid": 42, "ts": 1005.6, "dur": 0.2,
  "args": {"cbid": 307, "correlation": 11}},
 {"ph": "X", "cat": "user_annotation", "name": "cb:op:2:1000", "pid": 1, "tid": 42, "ts": 1005.9, "dur": 1.2},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "pid": 1, "tid": 42, "ts": 1006.2, "dur": 0.5,
  "args": {"cbid": 135, "correlation": 12}},
 {"ph": "X", "cat": "user_annotation", "name": "cb:op:3:1000", "pid": 1, "tid": 42, "ts": 1007.9, "dur": 1.2},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 1, "tid": 42, "ts": 1008.2, "dur": 0.5,
  "args": {"cbid": 147, "correlation": 13}},
 {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 8, "ts": 1008.3, "dur": 0.0,
  "args": {"stream": 8, "correlation": 13, "wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": -1}},
 {"ph": "X", "cat": "user_annotation", "name": "cb:op:4:1000", "pid": 1, "tid": 42, "ts": 1009.9, "dur": 4.2},
 {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 1, "tid": 42, "ts": 1010.5, "dur": 3.0,
  "args": {"cbid": 307, "correlation": 14}},
 {"ph": "X", "cat": "user_annotation", "name": "cb:op:5:1000", "pid": 1, "tid": 42, "ts": 1014.9, "dur": 165.2},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 42, "ts": 1015.2, "dur": 164.5,
  "args": {"cbid": 165, "correlation": 15}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaGetDevice", "pid": 1, "tid": 42, "ts": 1200.0, "dur": 0.1,
  "args": {"cbid": 17, "correlation": 16}}
]}"#;

fn inputs() -> (Scenario, StepLog, kineto::Activities) {
    let sc: Scenario =
        ground_truth::io::from_yaml(Path::new("t.yaml"), SCENARIO.as_bytes()).unwrap();
    assert!(sc.check().is_empty(), "{:?}", sc.check());
    let log: StepLog = ground_truth::io::from_json(Path::new("log.json"), LOG.as_bytes()).unwrap();
    let file = Path::new("kineto.json");
    let trace = kineto::parse(file, KINETO.as_bytes()).unwrap();
    let acts = kineto::Activities::from_trace(file, &trace).unwrap();
    (sc, log, acts)
}

#[test]
fn binding_takes_calls_inside_the_executor_annotations_only() {
    let (_, _, acts) = inputs();
    let b = observe::bind(&acts, 500_000, &[]);
    assert_eq!(b.harness_calls, 1);
    assert_eq!(b.other_calls, 1, "cudaGetDevice is no op's call");
    assert_eq!(b.calls[&1].len(), 1);
    assert_eq!(b.device[&1].len(), 1);
    assert!(
        !b.device.contains_key(&4),
        "the consumer kernel is not in the trace"
    );
    assert_eq!(b.syncs[&3].len(), 1);
    assert_eq!(b.time(acts.calls[0].start), 1_001_500);
}

#[test]
fn the_truth_follows_the_log_and_kineto_only_observes() {
    let (sc, log, acts) = inputs();
    let b = observe::bind(&acts, 500_000, &[]);
    let out = truth::build(&sc, &log, None, Some((&acts, &b)));
    let t = &out.builder.truth;
    let kernel = |name: &str| {
        t.nodes
            .iter()
            .find(|n| n.kind == NodeKind::Kernel && &*n.name == name)
            .unwrap()
    };
    // Device times are the self-timed ones, not Kineto's (which are 200 ns later).
    let producer = kernel("producer");
    assert_eq!((producer.start, producer.end), (1_010_000, 1_110_000));
    let consumer = kernel("consumer");
    assert_eq!((consumer.start, consumer.end), (1_112_000, 1_162_000));
    // The wait ends when the record completed; the event edge comes from the log.
    let wait = t
        .nodes
        .iter()
        .find(|n| n.kind == NodeKind::StreamWait)
        .unwrap();
    let record = t
        .nodes
        .iter()
        .find(|n| n.kind == NodeKind::EventRecord)
        .unwrap();
    assert_eq!(record.end, 1_111_000);
    assert_eq!(wait.end, 1_111_000);
    let has = |src: u32, dst: u32, kind: EdgeType| {
        t.edges
            .iter()
            .any(|e| e.src == src && e.dst == dst && e.kind == kind)
    };
    assert!(has(record.id, wait.id, EdgeType::Event));
    assert!(has(wait.id, consumer.id, EdgeType::StreamOrder));
    assert!(has(producer.id, record.id, EdgeType::StreamOrder));
    let sync = t
        .nodes
        .iter()
        .find(|n| n.kind == NodeKind::Synchronization)
        .unwrap();
    assert!(has(consumer.id, sync.id, EdgeType::Sync));
    // Kineto's records are owned by the nodes they observe; the dropped kernel has none.
    assert_eq!(producer.rids.len(), 1);
    assert!(consumer.rids.is_empty());
    let kinds: Vec<&str> = out.builder.trace.iter().map(|r| r.kind_name()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "kernel").count(), 1);
    assert!(out
        .builder
        .trace
        .iter()
        .all(|r| !matches!(r, Record::Api { name, .. } if &**name == "cudaGetDevice")));
    // Instrumented: each call of a request carries its token.
    assert!(out.builder.trace.iter().any(|r| matches!(
        r,
        Record::ExternalCorrelation {
            external_id: 1000,
            ..
        }
    )));
    let c = &out.stats.completeness;
    assert_eq!(
        (c.device_ops, c.device_ops_seen, c.device_ops_linked),
        (2, 1, 1)
    );
    assert_eq!(
        (c.event_edges, c.event_edges_seen, c.event_edges_linked),
        (1, 1, 0)
    );
    assert_eq!(out.stats.kernels_compared, 1);
    assert_eq!(out.stats.clock_offset_ns, 200);
    assert_eq!(out.stats.max_start_diff_ns, 0);
}

#[test]
fn without_kineto_the_truth_is_the_same() {
    let (sc, log, acts) = inputs();
    let b = observe::bind(&acts, 500_000, &[]);
    let with = truth::build(&sc, &log, None, Some((&acts, &b)));
    let without = truth::build(&sc, &log, None, None);
    let strip = |t: &ground_truth::graph::GroundTruth| {
        let mut t = t.clone();
        for n in &mut t.nodes {
            n.rids.clear();
            n.detail.edit(|d| d.stream = None);
        }
        t
    };
    assert_eq!(strip(&with.builder.truth), strip(&without.builder.truth));
    assert!(without.builder.trace.is_empty());
}

/// `torch record --host` copies stacks on every probed driver call (the Python
/// frames lie above libtorch's and CPython's frame-pointer-less code); the GPU
/// backend's recorder keeps the frame-pointer walk alone.
#[test]
fn the_host_recorder_of_the_executor_copies_stacks() {
    let torch = super::host_recorder_config(4242);
    let cuda = ebpf_recorder::RecorderConfig::cuda(4242);
    assert_eq!(torch.pid, 4242);
    assert_eq!(torch.functions, cuda.functions);
    assert_eq!(torch.stack_copy_bytes, super::HOST_STACK_COPY_BYTES);
    assert!(torch.stack_copy_bytes >= 16 * 1024);
    assert!(torch.ringbuf_bytes / (torch.stack_copy_bytes + 48) >= 4096);
    assert_eq!(cuda.stack_copy_bytes, 0);
}
