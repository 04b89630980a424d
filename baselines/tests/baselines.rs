//! Each baseline on small hand-built views where the right answer is obvious,
//! including the known failures of existing analyzers (docs/analyzer-failures.md).

use baselines::synth::{ViewBuilder, US};
use baselines::{builtin, builtin_names, why_late};
use ground_truth::trace::{CopyDirection, HostMemory, MarkerPhase, SwitchReason, SyncType};
use ground_truth::view::LossSpec;
use ground_truth::{
    CauseLabel, ClaimedEdge, EdgeType, Evidence, Explanation, Mode, Question, Readable, TraceView,
};

const MS: u64 = 1_000_000;

fn run(name: &str, v: &TraceView) -> Explanation {
    let p = builtin(name).expect("builtin");
    let e = p.explain(v);
    assert_eq!(e.meta.profiler, name);
    assert_eq!(e.meta.view, v.spec);
    assert_eq!(
        e.diagnoses.len(),
        v.queries.len(),
        "{name}: one diagnosis per query"
    );
    // The output is a valid explanation file.
    let bytes = serde_json::to_vec(&e).unwrap();
    Explanation::parse(std::path::Path::new("e.json"), &bytes)
        .unwrap_or_else(|err| panic!("{name}: {err}"));
    // ... and one that answers this view (the checker of `score` and `run`).
    assert_eq!(e.problem_against(v), None, "{name}: answers its view");
    for ed in &e.edges {
        if ed.evidence == Evidence::Inferred {
            assert!(
                ed.confidence < 1.0,
                "{name}: inferred edge with confidence 1: {ed:?}"
            );
        }
    }
    e
}

fn has_edge(e: &Explanation, src: u64, dst: u64, kind: EdgeType) -> Option<ClaimedEdge> {
    e.edges
        .iter()
        .copied()
        .find(|x| x.src == src && x.dst == dst && x.kind == kind)
}

fn top(e: &Explanation, q: &str) -> CauseLabel {
    e.diagnoses
        .iter()
        .find(|d| d.query == q)
        .expect("diagnosis")
        .causes[0]
        .label
}

fn request_of(e: &Explanation, rid: u64) -> &str {
    &e.attribution
        .iter()
        .find(|a| a.rid == rid)
        .expect("attributed")
        .request
}

#[test]
fn names_resolve() {
    for n in builtin_names() {
        let p = builtin(n).unwrap();
        assert_eq!(p.name(), *n);
        assert!(!p.version().is_empty());
    }
    assert!(builtin("nope").is_none());
}

#[test]
fn probes_resolve_apart_from_the_builtin_set_and_answer_every_query() {
    let v = baselines::synth::synthetic_view(2_000);
    for n in baselines::probe_names() {
        assert!(n.starts_with("probe-"), "{n}");
        assert!(
            !builtin_names().contains(n),
            "{n} is not a built-in baseline"
        );
        let e = run(n, &v);
        assert_eq!(e.meta.profiler, *n);
        assert_eq!(e.diagnoses.len(), v.queries.len());
        // No causal reasoning: no edges, no request identity.
        assert!(e.edges.is_empty());
        assert!(e.attribution.iter().all(|a| a.request == "unknown"));
    }
}

#[test]
fn every_baseline_handles_every_view_shape() {
    let v = baselines::synth::synthetic_view(5_000);
    assert!(!v.queries.is_empty());
    for n in builtin_names() {
        run(n, &v);
    }
    // Host-only and closed-mode views of the same records.
    let mut host = v.clone();
    host.spec.collectors = ground_truth::Collectors::Host;
    host.records
        .retain(|r| r.source() != ground_truth::trace::Source::Cupti);
    host.queries.clear();
    let mut closed = v.clone();
    closed.spec.mode = Mode::Closed;
    closed
        .records
        .retain(|r| r.source() != ground_truth::trace::Source::App);
    for n in builtin_names() {
        run(n, &host);
        let e = run(n, &closed);
        if *n == "causal-graph" {
            assert!(
                e.attribution.iter().all(|a| a.is_unknown()),
                "closed mode: abstain"
            );
        }
    }
    // An empty view.
    let empty = ViewBuilder::new().build();
    for n in builtin_names() {
        run(n, &empty);
    }
}

/// HTA issue 117: an event recorded on a different stream than the preceding
/// launch. The event's predecessor is the last op of *its* stream.
/// Kineto issue 904: the waiting stream has no kernel before the wait.
fn event_on_other_stream() -> (TraceView, u64, u64, u64, u64, u64) {
    let mut b = ViewBuilder::new();
    let t = 10 * MS;
    let k0 = b.launch(10, t, 1, "producer", 3 * MS); // long, stream 1
    let k1 = b.launch(10, t + 20 * US, 2, "other", 50 * US); // later launch, stream 2
    let (_, c) = b.api(10, "cudaEventRecord", t + 40 * US, t + 42 * US);
    let k0_end = t + 2 * US + 5 * US + 3 * MS;
    let ev = b.cuda_event(c, 1, 0xE0, 5, k0_end);
    let (_, c) = b.api(10, "cudaStreamWaitEvent", t + 50 * US, t + 52 * US);
    let w = b.sync(
        c,
        SyncType::StreamWaitEvent,
        3,
        0xE0,
        5,
        t + 50 * US,
        k0_end,
    );
    let k2 = b.launch_at(
        10,
        "cudaLaunchKernel",
        t + 60 * US,
        3,
        "consumer",
        Some(k0_end + US),
        None,
        40 * US,
        "app.py:20",
    );
    b.query("q", k2.op, Question::Cause);
    let _ = k1;
    (b.build(), k0.op, k1.op, ev, w, k2.op)
}

#[test]
fn event_joins_its_own_stream_hta_117() {
    let (v, k0, k1, ev, w, k2) = event_on_other_stream();
    let e = run("causal-graph", &v);
    assert!(
        has_edge(&e, k0, ev, EdgeType::StreamOrder).is_some(),
        "event follows the producer on its own stream"
    );
    assert!(
        has_edge(&e, k1, ev, EdgeType::StreamOrder).is_none(),
        "not the thread's preceding launch"
    );
    let ed = has_edge(&e, ev, w, EdgeType::Event).expect("event edge by sync id");
    assert_eq!(ed.evidence, Evidence::Explicit);
    assert_eq!(top(&e, "q"), CauseLabel::EventWait);
    let d = &e.diagnoses[0];
    assert!(d.complete);
    assert_eq!(d.critical_path.last(), Some(&k2));
    for r in [k0, ev, w] {
        assert!(
            d.critical_path.contains(&r),
            "path {:?} misses {r}",
            d.critical_path
        );
    }
}

#[test]
fn wait_before_any_kernel_of_its_stream_kineto_904() {
    let (v, _, _, _, w, k2) = event_on_other_stream();
    let e = run("causal-graph", &v);
    // The wait is the first item of stream 3 and still gates the consumer.
    let ed = has_edge(&e, w, k2, EdgeType::StreamOrder).expect("wait → consumer");
    assert_eq!(ed.evidence, Evidence::Observed);
    assert!(
        e.edges.iter().all(|x| x.evidence != Evidence::Missing),
        "nothing is missing: {:?}",
        e.edges
    );
}

/// HTA PR 271: `cuLaunchKernelEx` launches are launches.
#[test]
fn launch_kernel_ex_is_a_launch_hta_271() {
    let mut b = ViewBuilder::new();
    let mut ops = vec![];
    for r in 0..4u64 {
        let t = 10 * MS + r * 2 * MS;
        b.marker(
            10,
            MarkerPhase::RequestBegin,
            "",
            &r.to_string(),
            t - 30 * US,
        );
        b.marker(10, MarkerPhase::TaskBegin, "", &r.to_string(), t - 30 * US);
        let l = b.launch_at(
            10,
            "cuLaunchKernelEx",
            t,
            1,
            "gemm",
            None,
            Some(t + 40 * US),
            100 * US,
            "model.py:7",
        );
        b.ext(l.corr, r);
        // An unrelated, non-launch driver call on another thread right before the kernel starts.
        b.api(20, "cuCtxGetCurrent", t + 30 * US, t + 31 * US);
        ops.push(l);
    }
    b.query("q", ops[2].op, Question::Cause);
    let v = b.build();
    for n in ["causal-graph", "cupti-correlation", "nvtx-enclosure"] {
        let e = run(n, &v);
        for l in &ops {
            let ed = has_edge(&e, l.api, l.op, EdgeType::Launch)
                .unwrap_or_else(|| panic!("{n}: launch edge"));
            assert_eq!(ed.evidence, Evidence::Explicit);
        }
        // No fake device delay: nothing is late, so `none` leads or (causal-graph,
        // which also explains timing by its gate) follows the host-side cause.
        let c = &e.diagnoses[0].causes;
        assert!(
            c.iter().take(2).any(|x| x.label == CauseLabel::None),
            "{n}: {c:?}"
        );
        assert!(
            !matches!(
                c[0].label,
                CauseLabel::StreamBacklog | CauseLabel::OccupancyPressure
            ),
            "{n}: {c:?}"
        );
    }
    let e = run("timestamp-join", &v);
    for l in &ops {
        let ed = has_edge(&e, l.api, l.op, EdgeType::Launch)
            .expect("timestamp-join picks the Ex launch, not the nearer non-launch call");
        assert_eq!(ed.evidence, Evidence::Inferred);
    }
    let e = run("ebpf-host", &v);
    for l in &ops {
        assert!(
            has_edge(&e, l.uprobe, l.op, EdgeType::Launch).is_some(),
            "ebpf-host joins the Ex uprobe"
        );
    }
    let e = run("causal-graph", &v);
    assert!(e.diagnoses[0].complete);
    assert_eq!(request_of(&e, ops[1].op), "1");
}

/// HTA issue 290: graph-launched kernels share one correlation id; they are all
/// launched by the graph launch and told apart by graph node id.
#[test]
fn graph_kernels_share_a_correlation_id_hta_290() {
    let mut b = ViewBuilder::new();
    let mut launches = vec![];
    for r in 0..3u64 {
        let t = 10 * MS + r * 5 * MS;
        let (api, c) = b.api(10, "cudaGraphLaunch", t, t + 10 * US);
        b.ext(c, r);
        let slow = if r == 2 { 2 * MS } else { 0 };
        let a0 = t + 20 * US;
        let n1 = b.graph_kernel(c, 4, "g_a", 77, 1, a0, a0 + 100 * US);
        let n2 = b.graph_kernel(c, 4, "g_b", 77, 2, a0 + 103 * US, a0 + 203 * US + slow);
        let n3 = b.graph_kernel(
            c,
            4,
            "g_c",
            77,
            3,
            a0 + 206 * US + slow,
            a0 + 306 * US + slow,
        );
        launches.push((api, n1, n2, n3));
    }
    let (_, _, late_pred, late) = launches[2];
    b.query("q", late, Question::Cause);
    let v = b.build();
    let e = run("causal-graph", &v);
    for &(api, n1, n2, n3) in &launches {
        for n in [n1, n2, n3] {
            assert_eq!(
                has_edge(&e, api, n, EdgeType::Launch)
                    .expect("launch edge")
                    .evidence,
                Evidence::Explicit
            );
        }
        let g12 = has_edge(&e, n1, n2, EdgeType::Graph).expect("graph edge 1→2");
        assert_eq!(g12.evidence, Evidence::Inferred);
        assert!(g12.confidence < 1.0);
        assert!(has_edge(&e, n2, n3, EdgeType::Graph).is_some());
    }
    assert!(e.edges.iter().all(|x| x.evidence != Evidence::Missing));
    let d = &e.diagnoses[0];
    assert_eq!(d.causes[0].label, CauseLabel::GraphDependency);
    assert!(
        d.critical_path.ends_with(&[late_pred, late]),
        "{:?}",
        d.critical_path
    );
    assert_eq!(request_of(&e, late), "2");
    // The CUPTI-only baseline at least attributes every node to the launch.
    let e = run("cupti-correlation", &v);
    for &(api, n1, n2, n3) in &launches {
        for n in [n1, n2, n3] {
            assert!(has_edge(&e, api, n, EdgeType::Launch).is_some());
        }
    }
}

/// Reused event handles are joined by event_sync_id; reused stream handles are
/// told apart by CUPTI stream id.
#[test]
fn reused_event_and_stream_handles() {
    let mut b = ViewBuilder::new();
    let t = 10 * MS;
    // Two records of the same raw event handle, then a wait on the first one.
    let k0 = b.launch(10, t, 1, "first", 1 * MS);
    let (_, c) = b.api(10, "cudaEventRecord", t + 10 * US, t + 12 * US);
    let e1 = b.cuda_event(c, 1, 0xAA, 101, t + 1007 * US);
    let k1 = b.launch(10, t + 20 * US, 2, "second", 3 * MS);
    let (_, c) = b.api(10, "cudaEventRecord", t + 30 * US, t + 32 * US);
    let e2 = b.cuda_event(c, 2, 0xAA, 102, t + 3027 * US);
    let (_, c) = b.api(10, "cudaStreamWaitEvent", t + 40 * US, t + 42 * US);
    let w = b.sync(
        c,
        SyncType::StreamWaitEvent,
        3,
        0xAA,
        101,
        t + 40 * US,
        t + 1007 * US,
    );
    // Stream handle 0x5007 used by stream 7, destroyed, recreated as stream 9.
    let a = b.launch_at(
        11,
        "cudaLaunchKernel",
        t + 100 * US,
        7,
        "old",
        None,
        None,
        10 * US,
        "a.py:1",
    );
    let bb = b.launch_at(
        11,
        "cudaLaunchKernel",
        t + 200 * US,
        9,
        "new",
        None,
        None,
        10 * US,
        "a.py:1",
    );
    b.query("q", w, Question::Cause);
    let v = b.build();
    let e = run("causal-graph", &v);
    assert!(
        has_edge(&e, e1, w, EdgeType::Event).is_some(),
        "joined by sync id"
    );
    assert!(
        has_edge(&e, e2, w, EdgeType::Event).is_none(),
        "not by the reused handle"
    );
    assert!(
        has_edge(&e, a.op, bb.op, EdgeType::StreamOrder).is_none(),
        "different stream objects"
    );
    assert!(has_edge(&e, k0.op, e1, EdgeType::StreamOrder).is_some());
    assert!(has_edge(&e, k1.op, e2, EdgeType::StreamOrder).is_some());
}

/// A kernel whose launch API record is missing: `missing` claim, incomplete,
/// first unresolved = that kernel.
#[test]
fn missing_launch_record_is_claimed_missing() {
    let mut b = ViewBuilder::new();
    let t = 10 * MS;
    let k0 = b.launch(10, t, 1, "k", 100 * US);
    let lost = b.launch(10, t + 200 * US, 1, "k", 100 * US);
    b.query("q", lost.op, Question::Cause);
    b.loss.cupti_dropped = 1;
    // With its uprobe surviving, eBPF still saw the call: an inferred launch.
    let mut with_uprobe = b.clone();
    with_uprobe.records.retain(|r| r.rid() != lost.api);
    let e = run("causal-graph", &with_uprobe.build());
    assert_eq!(
        has_edge(&e, lost.uprobe, lost.op, EdgeType::Launch)
            .expect("uprobe launch")
            .evidence,
        Evidence::Inferred
    );
    b.records
        .retain(|r| r.rid() != lost.api && r.rid() != lost.uprobe);
    let v = b.build();
    let e = run("causal-graph", &v);
    let m = has_edge(&e, lost.op, lost.op, EdgeType::Launch).expect("missing claim");
    assert_eq!(m.evidence, Evidence::Missing);
    let d = &e.diagnoses[0];
    assert!(!d.complete);
    assert_eq!(d.first_unresolved, Some(lost.op));
    assert!(has_edge(&e, k0.op, lost.op, EdgeType::StreamOrder).is_some());
    // Naive stitching never admits a gap.
    let e = run("timestamp-join", &v);
    assert!(e.diagnoses[0].complete);
}

/// A launch whose activity record was lost: the next op on its stream has a
/// missing stream predecessor (found through the uprobe's stream handle).
#[test]
fn lost_activity_flags_the_next_op_of_its_stream() {
    let mut b = ViewBuilder::new();
    b.spec.loss = LossSpec::Uniform {
        rate: 0.05,
        seed: 1,
    };
    let t = 10 * MS;
    let k0 = b.launch(10, t, 1, "a", 100 * US);
    let gone = b.launch_at(
        10,
        "cudaLaunchKernel",
        t + 20 * US,
        1,
        "backlog",
        Some(t + 207 * US),
        None,
        3 * MS,
        "x.py:1",
    );
    let gone_end = t + 212 * US + 3 * MS;
    let k2 = b.launch_at(
        10,
        "cudaLaunchKernel",
        t + 40 * US,
        1,
        "victim",
        Some(gone_end + US),
        None,
        50 * US,
        "x.py:2",
    );
    b.records.retain(|r| r.rid() != gone.op);
    b.query("q", k2.op, Question::Cause);
    let v = b.build();
    let e = run("causal-graph", &v);
    assert_eq!(
        has_edge(&e, k2.op, k2.op, EdgeType::StreamOrder)
            .expect("missing stream pred")
            .evidence,
        Evidence::Missing
    );
    let so = has_edge(&e, k0.op, k2.op, EdgeType::StreamOrder).expect("visible order kept");
    assert!(
        so.confidence < 0.8,
        "the visible predecessor is not the gating one: {so:?}"
    );
    let d = &e.diagnoses[0];
    assert!(!d.complete);
    assert_eq!(d.first_unresolved, Some(k2.op));
}

/// Same symptom (kernel starts ~5 ms late), different causes.
fn late_kernel(variant: &str) -> (TraceView, Vec<u64>) {
    let mut b = ViewBuilder::new();
    let mut ops = vec![];
    for r in 0..4u64 {
        let tok = r.to_string();
        let base = 10 * MS + r * 20 * MS;
        b.marker(10, MarkerPhase::RequestBegin, "", &tok, base);
        b.marker(10, MarkerPhase::TaskBegin, "", &tok, base + US);
        let mut t = base + 20 * US;
        let mut start = None;
        let mut submitted = None;
        if r == 0 {
            match variant {
                "deschedule" => {
                    b.sched(10, t - 5 * US, t + 5 * MS, SwitchReason::Preempted);
                    t += 5 * MS;
                }
                "faults" => {
                    for i in 0..1000 {
                        b.fault(10, t + i * 5 * US, 4 * US, false);
                    }
                    t += 5 * MS;
                }
                "occupancy" => {
                    // Holds the SMs until the victim starts.
                    let h = b.launch(20, t - 100 * US, 2, "hog", 5 * MS + 93 * US);
                    let _ = h;
                    start = Some(t + 5 * MS);
                }
                "backlog" => {
                    let h = b.launch(20, t - 100 * US, 1, "backlog", 5 * MS + 95 * US);
                    let _ = h;
                    submitted = Some(t + 5 * MS);
                }
                _ => {}
            }
        }
        let l = b.launch_at(
            10,
            "cudaLaunchKernel",
            t,
            1,
            "victim",
            submitted,
            start,
            80 * US,
            "svc.py:33",
        );
        b.ext(l.corr, r);
        ops.push(l.op);
    }
    b.query("q", ops[0], Question::Cause);
    (b.build(), ops)
}

#[test]
fn causal_graph_tells_late_launch_from_device_queueing() {
    for (variant, want) in [
        ("deschedule", CauseLabel::CpuDeschedule),
        ("faults", CauseLabel::HostPageFault),
        ("occupancy", CauseLabel::OccupancyPressure),
        ("backlog", CauseLabel::StreamBacklog),
        ("none", CauseLabel::None),
    ] {
        let (v, ops) = late_kernel(variant);
        let e = run("causal-graph", &v);
        let d = &e.diagnoses[0];
        if want == CauseLabel::None {
            // Nothing late vs peers: `none`, the timing's gate as the alternative.
            assert_eq!(
                d.causes[0].label,
                CauseLabel::None,
                "{variant}: {:?}",
                d.causes
            );
        } else {
            assert_eq!(d.causes[0].label, want, "{variant}: {:?}", d.causes);
        }
        assert!(d.complete, "{variant}");
        assert_eq!(request_of(&e, ops[0]), "0");
        assert_eq!(request_of(&e, ops[3]), "3");
        if variant == "deschedule" {
            assert!(d.phases.host_enqueue > 4.0 * MS as f64, "{:?}", d.phases);
            assert!(e
                .edges
                .iter()
                .any(|x| x.kind == EdgeType::Fault && x.evidence == Evidence::Observed));
        }
        if variant == "occupancy" {
            assert!(
                d.phases.submitted_to_start > 4.0 * MS as f64,
                "{:?}",
                d.phases
            );
        }
        println!("why-late ({variant}):\n{}", why_late(&v, ops[0]));
    }
}

#[test]
fn host_and_device_only_baselines_see_half_of_the_pair() {
    let (v, _) = late_kernel("deschedule");
    assert_eq!(top(&run("ebpf-host", &v), "q"), CauseLabel::CpuDeschedule);
    assert_eq!(
        top(&run("cupti-correlation", &v), "q"),
        CauseLabel::None,
        "no host evidence"
    );
    let (v, _) = late_kernel("faults");
    assert_eq!(top(&run("ebpf-host", &v), "q"), CauseLabel::HostPageFault);
    let (v, _) = late_kernel("occupancy");
    assert_eq!(
        top(&run("cupti-correlation", &v), "q"),
        CauseLabel::OccupancyPressure
    );
    assert_ne!(
        top(&run("ebpf-host", &v), "q"),
        CauseLabel::OccupancyPressure,
        "host causes only"
    );
    let (v, _) = late_kernel("backlog");
    assert_eq!(
        top(&run("cupti-correlation", &v), "q"),
        CauseLabel::StreamBacklog
    );
}

#[test]
fn copy_engine_queueing_vs_slow_copy() {
    for variant in ["contention", "slow"] {
        let mut b = ViewBuilder::new();
        let mut copies = vec![];
        for r in 0..4u64 {
            let t = 10 * MS + r * 30 * MS;
            let (_, c) = b.api(10, "cudaMemcpyAsync", t, t + 5 * US);
            let q = t + 2 * US;
            let (st, dur) = match (r, variant) {
                (0, "contention") => {
                    let (_, hc) = b.api(20, "cudaMemcpyAsync", t - 50 * US, t - 45 * US);
                    b.memcpy(
                        hc,
                        5,
                        CopyDirection::H2d,
                        HostMemory::Pinned,
                        1 << 28,
                        [t - 48 * US, t - 48 * US, t - 40 * US, t + 5 * MS],
                    );
                    (t + 5 * MS + US, 1 * MS)
                }
                (0, _) => (q + 5 * US, 6 * MS),
                _ => (q + 5 * US, 1 * MS),
            };
            copies.push(b.memcpy(
                c,
                1,
                CopyDirection::H2d,
                HostMemory::Pinned,
                1 << 26,
                [q, q, st, st + dur],
            ));
        }
        b.query("q", copies[0], Question::Cause);
        let v = b.build();
        let want = if variant == "contention" {
            CauseLabel::PcieContention
        } else {
            CauseLabel::SlowCopy
        };
        assert_eq!(top(&run("causal-graph", &v), "q"), want, "{variant}");
        assert_eq!(top(&run("cupti-correlation", &v), "q"), want, "{variant}");
    }
}

#[test]
fn request_identity_through_handoffs() {
    // Request 1 is handed from thread 10 to pool thread 12; request 2 (a
    // confounder) runs on thread 11 and interleaves in time.
    let mut b = ViewBuilder::new();
    let t = 10 * MS;
    b.marker(10, MarkerPhase::RequestBegin, "", "1", t);
    b.marker(10, MarkerPhase::TaskBegin, "", "1", t);
    b.marker(10, MarkerPhase::Enqueue, "q1", "1", t + 10 * US);
    b.marker(11, MarkerPhase::RequestBegin, "", "2", t + 20 * US);
    b.marker(11, MarkerPhase::TaskBegin, "", "2", t + 20 * US);
    let l2 = b.launch(11, t + 30 * US, 2, "k", 50 * US);
    b.ext(l2.corr, 2);
    b.marker(12, MarkerPhase::TaskBegin, "q1", "1", t + 25 * US);
    let l1 = b.launch(12, t + 40 * US, 1, "k", 50 * US);
    b.ext(l1.corr, 1);
    b.query("q", l1.op, Question::Request);
    let v = b.build();
    let e = run("causal-graph", &v);
    assert_eq!(request_of(&e, l1.op), "1");
    assert_eq!(request_of(&e, l2.op), "2");
    let enq = v
        .records
        .iter()
        .find(|r| {
            matches!(
                r,
                ground_truth::trace::Record::Marker {
                    phase: MarkerPhase::Enqueue,
                    ..
                }
            )
        })
        .unwrap()
        .rid();
    let tb = v
        .records
        .iter()
        .find(|r| {
            matches!(
                r,
                ground_truth::trace::Record::Marker {
                    phase: MarkerPhase::TaskBegin,
                    tid: 12,
                    ..
                }
            )
        })
        .unwrap()
        .rid();
    assert_eq!(
        has_edge(&e, enq, tb, EdgeType::Handoff)
            .expect("handoff")
            .evidence,
        Evidence::Observed
    );
    assert!(has_edge(&e, tb, l1.api, EdgeType::HostOrder).is_some());
    // Closed mode: no tokens, causal-graph abstains.
    let mut closed = v.clone();
    closed.spec.mode = Mode::Closed;
    closed
        .records
        .retain(|r| r.source() != ground_truth::trace::Source::App);
    let e = run("causal-graph", &closed);
    assert_eq!(request_of(&e, l1.op), "unknown");
    // cupti-correlation: last token seen on the launching thread.
    let e = run("cupti-correlation", &v);
    assert_eq!(request_of(&e, l1.op), "1");
    // timestamp-join: the token of the task on the parent call's thread.
    let e = run("timestamp-join", &v);
    assert_eq!(request_of(&e, l1.op), "1");
}

#[test]
fn cupti_correlation_keeps_the_last_token_of_the_thread() {
    let mut b = ViewBuilder::new();
    let t = 10 * MS;
    let a = b.launch(10, t, 1, "k", 10 * US);
    b.ext(a.corr, 5);
    let c = b.launch(10, t + 50 * US, 1, "k", 10 * US); // no external correlation of its own
    let d = b.launch(11, t + 60 * US, 2, "k", 10 * US); // another thread, nothing seen
    let v = b.build();
    let e = run("cupti-correlation", &v);
    assert_eq!(request_of(&e, a.op), "5");
    assert_eq!(request_of(&e, c.op), "5");
    assert_eq!(request_of(&e, d.op), "unknown");
    let e = run("causal-graph", &v);
    assert_eq!(request_of(&e, c.op), "unknown", "explicit tokens only");
}

#[test]
fn operator_at_launch_time_vs_execution_time() {
    let mut b = ViewBuilder::new();
    let t = 10 * MS;
    b.nvtx(10, "attention", t, t + 20 * US);
    let blocker = b.launch(10, t - 10 * US, 1, "blocker", 2 * MS);
    let l = b.launch_at(
        10,
        "cudaLaunchKernel",
        t + 5 * US,
        1,
        "softmax",
        Some(t + 2 * MS),
        None,
        50 * US,
        "model.py:88",
    );
    b.nvtx(10, "mlp", t + 1 * MS, t + 3 * MS);
    b.query("op", l.op, Question::Operator);
    b.query("site", l.op, Question::CallSite);
    let _ = blocker;
    let v = b.build();
    let e = run("causal-graph", &v);
    let op = e.diagnoses.iter().find(|d| d.query == "op").unwrap();
    assert_eq!(op.answer.as_deref(), Some("attention"));
    let site = e.diagnoses.iter().find(|d| d.query == "site").unwrap();
    assert_eq!(site.answer.as_deref(), Some("model.py:88"));
    let e = run("nvtx-enclosure", &v);
    let op = e.diagnoses.iter().find(|d| d.query == "op").unwrap();
    assert_eq!(
        op.answer.as_deref(),
        Some("attention"),
        "launch-time enclosure, as operator profilers do, not the range open at execution"
    );
    let e = run("ebpf-host", &v);
    let site = e.diagnoses.iter().find(|d| d.query == "site").unwrap();
    assert_eq!(site.answer.as_deref(), Some("model.py:88"));
}

#[test]
fn pageable_copy_fence_is_implicit_sync() {
    let mut b = ViewBuilder::new();
    let mut copies = vec![];
    for r in 0..3u64 {
        let t = 10 * MS + r * 20 * MS;
        let long = if r == 0 { 5 * MS } else { 100 * US };
        let k = b.launch(10, t, 1, "producer", long);
        let kend = t + 7 * US + long;
        let (api, c) = b.api(10, "cudaMemcpy", t + 10 * US, kend + 1 * MS);
        b.sync(c, SyncType::ImplicitCopyFence, 1, 0, 0, t + 12 * US, kend);
        let cp = b.memcpy(
            c,
            1,
            CopyDirection::D2h,
            HostMemory::Pageable,
            1 << 20,
            [t + 12 * US, kend, kend + 2 * US, kend + 900 * US],
        );
        copies.push((k, api, cp));
    }
    b.query("q", copies[0].2, Question::Cause);
    let v = b.build();
    let e = run("causal-graph", &v);
    assert_eq!(top(&e, "q"), CauseLabel::ImplicitSync);
    let (k, api, _) = copies[0];
    assert!(
        has_edge(&e, k.op, api, EdgeType::Sync).is_some(),
        "the fenced device work → the blocking call"
    );
}

/// What CUPTI gives on a real GPU: a pageable copy without queued/submitted
/// and no implicit-fence sync record, the call returning after the copy ended.
/// The call's return must not be read as when the copy was enqueued (that
/// made the copy look gated by its own launch: `host_compute`).
#[test]
fn blocking_copy_without_queue_timestamps_is_gated_by_its_stream() {
    let mut b = ViewBuilder::new();
    let mut copies = vec![];
    for r in 0..3u64 {
        let t = 10 * MS + r * 20 * MS;
        let long = if r == 0 { 3 * MS } else { 300 * US };
        b.launch(10, t, 1, "compute", long);
        let kend = t + 7 * US + long;
        let (_, c) = b.api(10, "cuMemcpyDtoHAsync_v2", t + 20 * US, kend + 800 * US);
        copies.push(b.memcpy(
            c,
            1,
            CopyDirection::D2h,
            HostMemory::Pageable,
            1 << 23,
            [0, 0, kend + 3 * US, kend + 700 * US],
        ));
    }
    b.query("q", copies[0], Question::Cause);
    let e = run("causal-graph", &b.build());
    assert_eq!(top(&e, "q"), CauseLabel::ImplicitSync);
}

/// A copy made slow by moving more bytes has no peer of the same shape; the
/// same transfer step on its stream in other requests is its reference.
#[test]
fn larger_transfer_is_a_slow_copy() {
    let mut b = ViewBuilder::new();
    let mut copies = vec![];
    for r in 0..3u64 {
        let t = 10 * MS + r * 20 * MS;
        b.launch(10, t, 1, "compute", 300 * US);
        let kend = t + 7 * US + 300 * US;
        let (bytes, dur) = if r == 0 {
            (5 << 23, 3700 * US)
        } else {
            (1 << 23, 700 * US)
        };
        let (_, c) = b.api(
            10,
            "cuMemcpyDtoHAsync_v2",
            t + 20 * US,
            kend + dur + 100 * US,
        );
        copies.push(b.memcpy(
            c,
            1,
            CopyDirection::D2h,
            HostMemory::Pageable,
            bytes,
            [0, 0, kend + 3 * US, kend + dur],
        ));
    }
    b.query("q", copies[0], Question::Cause);
    let e = run("causal-graph", &b.build());
    assert_eq!(top(&e, "q"), CauseLabel::SlowCopy);
}

#[test]
fn timestamp_join_claims_only_inferred_edges() {
    let (v, _) = late_kernel("none");
    let e = run("timestamp-join", &v);
    assert!(!e.edges.is_empty());
    assert!(e
        .edges
        .iter()
        .all(|x| x.evidence == Evidence::Inferred && x.confidence < 1.0));
    assert!(e.meta.wall_ms >= 0.0);
}

#[test]
fn why_late_prints_the_chain_and_boundary() {
    let (v, _, _, _, _, k2) = event_on_other_stream();
    let s = why_late(&v, k2);
    assert!(s.contains("event (explicit"), "{s}");
    assert!(s.contains("stream_order (observed"), "{s}");
    assert!(s.contains("complete"), "{s}");
    assert!(s.contains("event_wait"), "{s}");
    assert!(why_late(&v, 999_999_999).contains("not a record"));
}

/// Lost host markers: a call of request 2 running where no task of request 2
/// began (its task_begin was lost) has a missing program-order predecessor; in
/// closed mode the root of every host chain is unresolved.
#[test]
fn lost_task_marker_and_closed_mode_roots() {
    let mut b = ViewBuilder::new();
    let mut ls = vec![];
    for r in 1..=2u64 {
        let t = 10 * MS + r * MS;
        let tok = r.to_string();
        b.marker(10, MarkerPhase::RequestBegin, "", &tok, t);
        b.marker(10, MarkerPhase::TaskBegin, "", &tok, t);
        let l = b.launch(10, t + 10 * US, 1, "k", 50 * US);
        b.ext(l.corr, r);
        ls.push(l);
    }
    b.query("q", ls[1].op, Question::Cause);
    let full = b.build();
    let e = run("causal-graph", &full);
    assert!(e.diagnoses[0].complete, "{:?}", e.diagnoses[0]);
    let mut lossy = full.clone();
    let lost_tb = lossy
        .records
        .iter()
        .find(|r| matches!(r, ground_truth::trace::Record::Marker { phase: MarkerPhase::TaskBegin, token, .. } if token == "2"))
        .unwrap()
        .rid();
    lossy.records.retain(|r| r.rid() != lost_tb);
    lossy.spec.loss = LossSpec::Uniform {
        rate: 0.05,
        seed: 3,
    };
    let e = run("causal-graph", &lossy);
    assert_eq!(
        has_edge(&e, ls[1].api, ls[1].api, EdgeType::HostOrder)
            .expect("missing task")
            .evidence,
        Evidence::Missing
    );
    let d = &e.diagnoses[0];
    assert!(!d.complete);
    assert_eq!(d.first_unresolved, Some(ls[1].api));
    let mut closed = full.clone();
    closed.spec.mode = Mode::Closed;
    closed
        .records
        .retain(|r| r.source() != ground_truth::trace::Source::App);
    let e = run("causal-graph", &closed);
    let d = &e.diagnoses[0];
    assert!(
        !d.complete,
        "closed mode cannot see the task a call belongs to"
    );
    assert_eq!(d.first_unresolved, Some(ls[1].api));
}
