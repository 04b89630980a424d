use super::*;
use crate::cuda::exec::{Arrival, GraphMeta, ReqInfo, Tail, ThreadLog};
use ground_truth::graph::EdgeType;
use ground_truth::scenario::LaunchApi;

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
      - {op: kernel, id: producer, stream: s1, name: producer, duration_us: 2000}
      - {op: event_record, event: ready, stream: s1}
      - {op: stream_wait, stream: s2, event: ready}
      - {op: kernel, id: consumer, stream: s2, name: consumer, duration_us: 300, grid: 64}
      - {op: sync, target: device}
symptom: {step: consumer}
"#;

fn op(id: u64, step: usize, what: What, t0: Ns, stream: Option<usize>, prev: Vec<u64>) -> Op {
    Op {
        id,
        thread: 0,
        tid: 77,
        request: Some(0),
        skey: Some(StepKey {
            program: 0,
            request: 0,
            step,
            graph_node: None,
            api: false,
        }),
        what,
        t0,
        t1: t0 + 5_000,
        stream,
        stream_cupti: stream.map(|s| 13 + s as u32).unwrap_or(0),
        handle: 0xE0,
        generation: 0,
        prev: Tail::from_vec(
            prev.into_iter()
                .map(|op| DevRef { op, gnode: None })
                .collect(),
        ),
        event_src: None,
        waited: Vec::new(),
        operator: None,
        call_site: None,
        slot: None,
        entry: None,
        injected: false,
        delays_target: false,
        error: None,
    }
}

fn kernel(name: &str, dur: u64) -> What {
    What::Kernel {
        name: std::sync::Arc::from(name),
        kind: KernelKind::Spin,
        dur_ns: dur,
        extra_ns: 0,
        grid: 64,
        block: 128,
        launch: LaunchApi::Runtime,
        kernel: kernels::Kernel::Spin,
    }
}

fn api(corr: u32, cbid: u32, start: Ns) -> Raw {
    Raw::Api {
        driver: true,
        cbid,
        start,
        end: start + 4_000,
        tid: 77,
        corr,
    }
}

fn kernel_rec(corr: u32, name: &str, stream: u32, q: Ns, s: Ns, st: Ns, en: Ns) -> Raw {
    Raw::Kernel {
        name: name.into(),
        device: 0,
        context: 1,
        stream,
        corr,
        graph_id: 0,
        graph_node_id: 0,
        queued: q,
        submitted: s,
        start: st,
        end: en,
        grid: [64, 1, 1],
        block: [128, 1, 1],
        channel: 3,
    }
}

/// A producer kernel, an event record, a stream wait on it, a consumer
/// kernel and a device synchronization, with every CUPTI record.
fn event_edge_run() -> (Scenario, RunLog) {
    let sc: Scenario =
        ground_truth::io::from_yaml(std::path::Path::new("t.yaml"), SCENARIO.as_bytes()).unwrap();
    assert!(sc.check().is_empty(), "{:?}", sc.check());
    let mut ops = vec![
        op(
            1,
            0,
            kernel("producer", 2_000_000),
            100_000,
            Some(0),
            vec![],
        ),
        op(
            2,
            1,
            What::EventRecord { event: 0 },
            110_000,
            Some(0),
            vec![1],
        ),
        op(
            3,
            2,
            What::StreamWait { event: 0 },
            120_000,
            Some(1),
            vec![],
        ),
        op(4, 3, kernel("consumer", 300_000), 130_000, Some(1), vec![3]),
        op(
            5,
            4,
            What::Sync {
                target: SyncTarget::Device,
            },
            140_000,
            None,
            vec![],
        ),
    ];
    ops[2].event_src = Some(2);
    ops[4].waited = vec![DevRef { op: 2, gnode: None }, DevRef { op: 4, gnode: None }];
    let events = vec![
        HostEv::TaskBegin {
            t: 90_000,
            thread_free: 0,
            pending: None,
            request: 0,
            handoff: None,
            queue: String::new(),
        },
        HostEv::Api {
            op: 1,
            fault: None,
            pending: None,
        },
        HostEv::Api {
            op: 2,
            fault: None,
            pending: None,
        },
        HostEv::Api {
            op: 3,
            fault: None,
            pending: None,
        },
        HostEv::Api {
            op: 4,
            fault: None,
            pending: None,
        },
        HostEv::Api {
            op: 5,
            fault: None,
            pending: None,
        },
    ];
    let mut records = Vec::new();
    for (i, cb) in [(1u32, 307u32), (2, 0x3A), (3, 0x3B), (4, 307), (5, 0x1B)] {
        let corr = 100 + i;
        records.push(Raw::ExtCorr {
            ext_kind: cupti::EXT_OP,
            ext_id: i as u64,
            corr,
        });
        records.push(Raw::ExtCorr {
            ext_kind: cupti::EXT_REQUEST,
            ext_id: 1,
            corr,
        });
        records.push(api(corr, cb, 100_000 + 10_000 * (i as u64 - 1)));
    }
    records.push(Raw::ExtCorr {
        ext_kind: cupti::EXT_OP,
        ext_id: 999,
        corr: 7,
    });
    records.push(api(7, 1, 1)); // harness call bound to an op id nobody made: dropped
    records.push(kernel_rec(
        101, "producer", 13, 101_000, 101_500, 103_000, 2_103_000,
    ));
    records.push(Raw::CudaEvent {
        corr: 102,
        stream: 13,
        event_id: 1,
        ts: 2_103_500,
        sync_id: 5,
    });
    records.push(Raw::Sync {
        sync_type: 2,
        start: 120_000,
        end: 124_000,
        corr: 103,
        stream: 14,
        event_id: 1,
        sync_id: 5,
    });
    records.push(kernel_rec(
        104, "consumer", 14, 131_000, 2_103_600, 2_105_000, 2_405_000,
    ));
    records.push(Raw::Sync {
        sync_type: 4,
        start: 140_000,
        end: 2_406_000,
        corr: 105,
        stream: 0,
        event_id: 0,
        sync_id: 0,
    });
    records.push(api(55, 1, 1)); // unbound harness record
    let log = RunLog {
        origin: 50_000,
        arrivals: vec![Arrival {
            request: 0,
            t: 80_000,
            tid: 77,
        }],
        threads: vec![ThreadLog {
            tid: 77,
            events,
            ops,
            ..Default::default()
        }],
        requests: vec![ReqInfo {
            program: 0,
            index: 0,
            token: 1,
            at_rel: 0,
        }],
        graphs: Vec::<GraphMeta>::new(),
        stalls: vec![],
        errors: vec![],
        injector: None,
        device_log: vec![],
        flushed: cupti::Flushed {
            records,
            dropped: 0,
            unknown: 0,
        },
        end: 3_000_000,
    };
    (sc, log)
}

#[test]
fn event_edge_run_gets_the_simulators_graph() {
    let (sc, log) = event_edge_run();
    let rec = cupti::Recorder::offline(&[(true, 307, "cuLaunchKernel")]);
    let out = build(&sc, &log, None, &rec, true);
    assert_eq!(out.loss.cupti_unobservable, 0);
    assert_eq!(out.stats.device_ops, 2);
    assert_eq!(out.stats.bound, 2);
    assert_eq!(out.stats.harness_records, 1);
    let t = &out.builder.truth;
    let kinds: Vec<NodeKind> = t.nodes.iter().map(|n| n.kind).collect();
    assert_eq!(
        kinds,
        vec![
            NodeKind::Request,
            NodeKind::HostTask,
            NodeKind::ApiCall,
            NodeKind::Kernel,
            NodeKind::ApiCall,
            NodeKind::EventRecord,
            NodeKind::ApiCall,
            NodeKind::StreamWait,
            NodeKind::ApiCall,
            NodeKind::Kernel,
            NodeKind::Synchronization,
        ]
    );
    let has = |s: usize, d: usize, k: EdgeType| {
        t.edges
            .iter()
            .any(|e| e.src == s as u32 && e.dst == d as u32 && e.kind == k)
    };
    assert!(has(0, 1, EdgeType::Request));
    assert!(has(1, 2, EdgeType::HostOrder));
    assert!(has(2, 3, EdgeType::Launch));
    assert!(has(3, 5, EdgeType::StreamOrder));
    assert!(has(5, 7, EdgeType::Event));
    assert!(has(7, 9, EdgeType::StreamOrder));
    assert!(has(9, 10, EdgeType::Sync));
    assert!(has(8, 10, EdgeType::HostOrder));
    // The wait is satisfied when the record completes; the consumer follows.
    assert_eq!(t.nodes[7].end, 2_103_500);
    assert_eq!(t.nodes[9].submitted, 2_103_600);
    assert_eq!(t.nodes[2].name, "cuLaunchKernel");
    assert_eq!(t.nodes[3].detail.stream, Some(13));
    let consumer = out.keys[&StepKey {
        program: 0,
        request: 0,
        step: 3,
        graph_node: None,
        api: false,
    }];
    assert_eq!(consumer, 9);
    let path = t.critical_path(consumer);
    assert_eq!(path, vec![0, 1, 2, 3, 5, 7, 9]);
    // Records: marker ×2, api ×5, ext ×5, kernel ×2, event, sync ×2.
    let count = |k: &str| {
        out.builder
            .trace
            .iter()
            .filter(|r| r.kind_name() == k)
            .count()
    };
    assert_eq!(count("marker"), 2);
    assert_eq!(count("api"), 5);
    assert_eq!(count("external_correlation"), 5);
    assert_eq!(count("kernel"), 2);
    assert_eq!(count("cuda_event"), 1);
    assert_eq!(count("sync"), 2);
    let (truth, trace) = out.builder.finish(7);
    let sym = crate::answers::symptom(
        &sc,
        &truth,
        &trace,
        consumer,
        &truth.nodes[consumer as usize].clone(),
    )
    .unwrap();
    assert_eq!(sym.lateness_ns, 0.0);
    assert_eq!(sym.critical_path, path);
}

/// CUPTI 12.x refuses the CUDA_EVENT kind: the event record stays in the
/// ground truth with its edges, its record is missing from the trace, and the
/// missing record is accounted loss rather than silence.
#[test]
fn a_kind_the_cupti_lacks_degrades_to_accounted_loss() {
    let (sc, mut log) = event_edge_run();
    log.flushed
        .records
        .retain(|r| !matches!(r, Raw::CudaEvent { .. }));
    use cupti::activity::*;
    let observed: Vec<(u32, &'static str)> = [
        (KIND_RUNTIME, "RUNTIME"),
        (KIND_DRIVER, "DRIVER"),
        (KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"),
        (KIND_MEMCPY, "MEMCPY"),
        (KIND_MEMSET, "MEMSET"),
        (KIND_SYNCHRONIZATION, "SYNCHRONIZATION"),
        (KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION"),
    ]
    .into();
    let rec = cupti::Recorder::offline_observing(&[(true, 307, "cuLaunchKernel")], &observed);
    assert!(!rec.observes(KIND_CUDA_EVENT));
    let out = build(&sc, &log, None, &rec, true);
    assert_eq!(out.loss.cupti_unobservable, 1);
    assert_eq!(out.loss.cupti_dropped, 0);
    let t = &out.builder.truth;
    assert_eq!(t.nodes[5].kind, NodeKind::EventRecord);
    assert!(t
        .edges
        .iter()
        .any(|e| e.src == 5 && e.dst == 7 && e.kind == EdgeType::Event));
    assert!(!out
        .builder
        .trace
        .iter()
        .any(|r| r.kind_name() == "cuda_event"));

    // The same records with a CUPTI that has the kind: a missing record there
    // is not this version's blind spot, so it is not counted as such.
    let rec = cupti::Recorder::offline(&[(true, 307, "cuLaunchKernel")]);
    assert_eq!(
        build(&sc, &log, None, &rec, true).loss.cupti_unobservable,
        0
    );
}

/// The executor of the PyTorch backend's answer for the run of
/// [`event_edge_run`]: the same calls at the same times on the same thread,
/// its kernels self-timed at CUPTI's times and the event record stamped when
/// CUPTI saw it complete.
const TORCH_EVENT_EDGE_LOG: &str = r#"{
 "origin": 50000, "end": 3000000,
 "arrivals": [{"request": 0, "t": 80000, "tid": 77}],
 "requests": [{"program": 0, "index": 0, "at_rel": 0, "token": 1}],
 "threads": [{"tid": 77, "events": [
    {"task": [90000, 0, null, "", 0]}, {"api": 1}, {"api": 2}, {"api": 3}, {"api": 4}, {"api": 5}],
  "ops": [
   {"id": 1, "thread": 0, "request": 0, "step": 0,
    "what": {"kind": "kernel", "name": "producer", "dur_ns": 2000000, "extra_ns": 0},
    "t0": 100000, "t1": 104000, "stream": 0, "stream_id": 13, "prev": [], "tid": 77, "slot": 0},
   {"id": 2, "thread": 0, "request": 0, "step": 1, "what": {"kind": "event_record", "event": 0},
    "t0": 110000, "t1": 114000, "stream": 0, "stream_id": 13, "prev": [1], "tid": 77, "stamps": [0]},
   {"id": 3, "thread": 0, "request": 0, "step": 2, "what": {"kind": "stream_wait", "event": 0},
    "t0": 120000, "t1": 124000, "stream": 1, "stream_id": 14, "prev": [], "tid": 77, "event_src": 2},
   {"id": 4, "thread": 0, "request": 0, "step": 3,
    "what": {"kind": "kernel", "name": "consumer", "dur_ns": 300000, "extra_ns": 0},
    "t0": 130000, "t1": 134000, "stream": 1, "stream_id": 14, "prev": [3], "tid": 77, "slot": 1},
   {"id": 5, "thread": 0, "request": 0, "step": 4, "what": {"kind": "sync", "target": "device"},
    "t0": 140000, "t1": 144000, "tid": 77, "waited": [2, 4]}
  ]}],
 "injector": null,
 "kernels": [[103000, 2103000], [2105000, 2405000]],
 "stamps": [2103500],
 "graph_kernels": [], "graph_tags": [], "errors": [],
 "clock": {"offset_ns": 0, "spread_ns": [0, 0], "realtime_minus_monotonic_ns": [0, 0]},
 "device": {"name": "test GPU", "sms": 132, "capability": [9, 0]},
 "versions": {"torch": "2.11.0", "cuda": "13.0", "cupy": "14.2.0", "python": "3.12.3"}
}"#;

/// One run as the GPU backend's executor logs it and as the PyTorch
/// backend's does: both convert to the same backend-neutral step log, and the
/// one truth builder gives both the same nodes, edges and step keys (CUPTI's
/// queued and submitted stamps left out: the self-timed kernels have none, so
/// both take them from the call and stream order).
#[test]
fn a_cuda_and_a_torch_log_of_one_run_build_one_truth() {
    let (sc, mut log) = event_edge_run();
    for r in &mut log.flushed.records {
        if let Raw::Kernel {
            queued, submitted, ..
        } = r
        {
            (*queued, *submitted) = (0, 0);
        }
    }
    let torch_log: crate::torch::log::StepLog = ground_truth::io::from_json(
        std::path::Path::new("torch.json"),
        TORCH_EVENT_EDGE_LOG.as_bytes(),
    )
    .unwrap();
    let from_cuda = neutral::step_log(&log);
    let from_torch = crate::torch::truth::neutral_log(&sc, &torch_log, None, None);
    assert_eq!(from_cuda, from_torch);
    assert_eq!(from_cuda.ops.len(), 5);

    let rec = cupti::Recorder::offline(&[(true, 307, "cuLaunchKernel")]);
    let cuda = build(&sc, &log, None, &rec, true);
    let torch = crate::torch::truth::build(&sc, &torch_log, None, None);
    // Names of calls are each collector's (CUPTI's callback names, the
    // runtime API the executor calls); records are each collector's too.
    let graph = |t: &ground_truth::graph::GroundTruth| {
        let nodes: Vec<String> = t
            .nodes
            .iter()
            .map(|n| {
                let call = matches!(n.kind, NodeKind::ApiCall | NodeKind::Synchronization);
                let name = if call { "" } else { n.name.as_str() };
                format!(
                    "{:?} {name} {:?} {:?} {:?} g{} {}..{} q{} s{}",
                    n.kind,
                    n.request,
                    n.step,
                    n.detail,
                    n.generation,
                    n.start,
                    n.end,
                    n.queued,
                    n.submitted
                )
            })
            .collect();
        (nodes, t.edges.clone())
    };
    assert_eq!(graph(&cuda.builder.truth), graph(&torch.builder.truth));
    assert_eq!(cuda.builder.truth.nodes.len(), 11);
    assert_eq!(cuda.keys, torch.keys);
    let consumer = cuda.keys[&StepKey {
        program: 0,
        request: 0,
        step: 3,
        graph_node: None,
        api: false,
    }];
    assert_eq!(
        torch.builder.truth.critical_path(consumer),
        vec![0, 1, 2, 3, 5, 7, 9]
    );
}

/// The run of [`event_edge_run`] as `causalbench workload` records it
/// without CUPTI: the kernels' `%globaltimer` log entries, CUDA events around
/// the stream wait, and a clock offset that drifts 3 µs over the run, measured
/// before and after it. Every time lands in CLOCK_MONOTONIC on the line
/// through both samples, and the wait gets a record of its own.
#[test]
fn stamps_become_truth_on_the_two_point_clock_fit() {
    let (sc, mut log) = event_edge_run();
    log.flushed.records.clear();
    let before = ClockSample {
        offset_ns: -1_000_000_000,
        at_ns: 50_000,
        round_trip_ns: 1_500,
        pings: 100,
    };
    let after = ClockSample {
        offset_ns: -1_000_000_000 + 3_000,
        at_ns: 3_050_000,
        ..before
    };
    // CLOCK_MONOTONIC − %globaltimer at `t`, as the device drifted.
    let offset = |t: Ns| -1_000_000_000 + (3_000 * (t as i64 - 50_000)) / 3_000_000;
    let g = |t: Ns| (t as i64 - offset(t)) as Ns;
    let entry = |op_id: u64, start: Ns, end: Ns| kernels::LogEntry {
        op_id,
        start_ns: g(start),
        end_ns: g(end),
        smid: 0,
        blocks: 64,
        last_end_ns: g(end),
    };
    log.threads[0].ops[0].slot = Some(0);
    log.threads[0].ops[3].slot = Some(1);
    log.device_log = vec![entry(1, 103_000, 2_103_000), entry(4, 2_105_000, 2_405_000)];
    let stamps = |clock: ClockFit| Stamps {
        clock,
        copies: [(3u64, (g(125_000), g(2_103_500)))].into(),
    };
    let out = build_stamped(
        &sc,
        &log,
        None,
        &stamps(ClockFit::between(before, after)),
        true,
    );
    let t = &out.builder.truth;
    let near = |a: Ns, b: Ns| a.abs_diff(b) <= 1;
    assert_eq!(t.nodes[3].kind, NodeKind::Kernel);
    assert!(near(t.nodes[3].start, 103_000), "{}", t.nodes[3].start);
    assert!(near(t.nodes[3].end, 2_103_000), "{}", t.nodes[3].end);
    assert!(near(t.nodes[9].start, 2_105_000), "{}", t.nodes[9].start);
    assert!(near(t.nodes[9].end, 2_405_000), "{}", t.nodes[9].end);
    assert_eq!(out.stats.bound, 2);
    // The wait's record: the events around it, on the wait's stream.
    assert_eq!(t.nodes[7].kind, NodeKind::StreamWait);
    let waits: Vec<&Record> = out
        .builder
        .trace
        .iter()
        .filter(|r| {
            matches!(
                r,
                Record::Sync {
                    sync_type: ground_truth::trace::SyncType::StreamWaitEvent,
                    ..
                }
            )
        })
        .collect();
    assert_eq!(waits.len(), 1);
    match waits[0] {
        Record::Sync {
            sync_type,
            stream,
            start,
            end,
            rid,
            ..
        } => {
            assert_eq!(*sync_type, ground_truth::trace::SyncType::StreamWaitEvent);
            assert_eq!(*stream, 14);
            assert!(near(*start, 125_000), "{start}");
            assert!(near(*end, 2_103_500), "{end}");
            assert!(t.nodes[7].rids.contains(rid));
        }
        r => panic!("{r:?}"),
    }
    // The device synchronization's record spans its call, on its node.
    assert_eq!(t.nodes[10].kind, NodeKind::Synchronization);
    let syncs: Vec<&Record> = out
        .builder
        .trace
        .iter()
        .filter(|r| t.nodes[10].rids.contains(&r.rid()))
        .collect();
    assert!(
        syncs.iter().any(|r| matches!(
            r,
            Record::Sync {
                sync_type: ground_truth::trace::SyncType::ContextSynchronize,
                start,
                end,
                ..
            } if (*start, *end) == (t.nodes[10].start, t.nodes[10].end)
        )),
        "{syncs:?}"
    );
    // The offset of the run's start alone puts the producer's end 2 µs off.
    let constant = build_stamped(&sc, &log, None, &stamps(ClockFit::constant(before)), true);
    let end = constant.builder.truth.nodes[3].end;
    assert_eq!(end.abs_diff(2_103_000), 2_053);
}

const GRAPH_SCENARIO: &str = r#"
schema_version: 1
name: t.graph-replays
family: t
variant: graph-replays
cause: graph_dependency
mode: instrumented
threads: [{name: host}]
streams: [{name: s1}]
graphs:
  - name: block
    build: captured
    nodes:
      - {id: gemm, kernel: {name: gemm, duration_us: 500}}
      - {id: norm, kernel: {name: layer_norm, duration_us: 200}, after: [gemm]}
programs:
  - name: serve
    start: host
    requests: 2
    interval_us: 1000
    steps:
      - {op: graph_launch, id: step, graph: block, stream: s1}
      - {op: sync, target: stream, stream: s1}
symptom: {step: step, graph_node: norm, request: 1}
"#;

/// A graph launched by two requests, its nodes logging into per-replay rings
/// (`kernels::LogRing`): without CUPTI, each replay's nodes take their own
/// replay's stamps, so the second replay's slow gemm does not stretch the
/// first's (a graph's log used to hold its last replay only).
#[test]
fn each_graph_replay_is_timed_by_its_own_ring_entry() {
    let sc: Scenario =
        ground_truth::io::from_yaml(std::path::Path::new("t.yaml"), GRAPH_SCENARIO.as_bytes())
            .unwrap();
    assert!(sc.check().is_empty(), "{:?}", sc.check());
    let launch = |id: u64, request: u32, t0: Ns| {
        let mut o = op(
            id,
            0,
            What::GraphLaunch {
                graph: 0,
                extra_ns: 0,
            },
            t0,
            Some(0),
            vec![],
        );
        o.request = Some(request as usize);
        o.skey.as_mut().unwrap().request = request;
        o
    };
    let sync = |id: u64, request: u32, t0: Ns, launched: u64| {
        let what = What::Sync {
            target: SyncTarget::Stream,
        };
        let mut o = op(id, 1, what, t0, Some(0), vec![]);
        o.request = Some(request as usize);
        o.skey.as_mut().unwrap().request = request;
        o.waited = vec![DevRef {
            op: launched,
            gnode: Some(1),
        }];
        o
    };
    let ops = vec![
        launch(1, 0, 100_000),
        sync(2, 0, 110_000, 1),
        launch(3, 1, 1_100_000),
        sync(4, 1, 1_110_000, 3),
    ];
    let mut events = Vec::new();
    for (request, t, first) in [(0usize, 90_000, 1u64), (1, 1_090_000, 3)] {
        events.push(HostEv::TaskBegin {
            t,
            thread_free: 0,
            pending: None,
            request,
            handoff: None,
            queue: String::new(),
        });
        for op in [first, first + 1] {
            events.push(HostEv::Api {
                op,
                fault: None,
                pending: None,
            });
        }
    }
    let ring = |header: u32| {
        kernels::LogRing {
            header,
            capacity: 2,
        }
        .slot_arg()
        .unwrap()
    };
    let entry = |op_id: u64, start: Ns, end: Ns| kernels::LogEntry {
        op_id,
        start_ns: start,
        end_ns: end,
        smid: 0,
        blocks: 1,
        last_end_ns: end,
    };
    let header = kernels::LogEntry {
        blocks: 2,
        ..Default::default()
    };
    let (gemm, norm) = (graph_op_id(0, 0), graph_op_id(0, 1));
    let device_log = vec![
        header,
        entry(gemm, 106_000, 606_000),
        entry(gemm, 1_106_000, 4_106_000),
        header,
        entry(norm, 607_000, 807_000),
        entry(norm, 4_107_000, 4_307_000),
    ];
    let log = RunLog {
        origin: 50_000,
        arrivals: vec![
            Arrival {
                request: 0,
                t: 80_000,
                tid: 77,
            },
            Arrival {
                request: 1,
                t: 1_080_000,
                tid: 77,
            },
        ],
        threads: vec![ThreadLog {
            tid: 77,
            events,
            ops,
            ..Default::default()
        }],
        requests: (0..2)
            .map(|index| ReqInfo {
                program: 0,
                index,
                token: index as u64 + 1,
                at_rel: index as Ns * 1_000_000,
            })
            .collect(),
        graphs: vec![GraphMeta {
            entries: vec!["gemm".into(), "layer_norm".into()],
            slots: vec![ring(0), ring(3)],
        }],
        stalls: vec![],
        errors: vec![],
        injector: None,
        device_log,
        flushed: Default::default(),
        end: 5_000_000,
    };
    let sample = ClockSample {
        offset_ns: 0,
        at_ns: 0,
        round_trip_ns: 1_000,
        pings: 10,
    };
    let stamps = Stamps {
        clock: ClockFit::between(sample, sample),
        copies: HashMap::new(),
    };
    let out = build_stamped(&sc, &log, None, &stamps, true);
    let times: Vec<(Ns, Ns)> = out
        .builder
        .truth
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::GraphNode)
        .map(|n| (n.start, n.end))
        .collect();
    assert_eq!(
        times,
        vec![
            (106_000, 606_000),
            (607_000, 807_000),
            (1_106_000, 4_106_000),
            (4_107_000, 4_307_000),
        ]
    );
    assert_eq!(out.stats.bound, 4);
}
