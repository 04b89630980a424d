//! The ground truth is complete on the structures a scenario generator samples
//! (docs/records.md, "Ground-truth conventions"): the true critical path of a
//! symptom passes through what actually delayed it, including application work.

use generator::sim::SimBackend;
use generator::Backend;
use ground_truth::graph::{EdgeType, GroundTruth, NodeId, NodeKind};
use ground_truth::io::Readable;
use ground_truth::{Bundle, Scenario};

/// A scenario of this file: `body` (its cause, seed and structure) after
/// the fields every one shares.
fn scenario(body: &str) -> Scenario {
    let yaml = format!(
        "schema_version: 1\nname: truth-test\nfamily: test\nvariant: case\n\
         description: \"a structure the truth must be complete on\"\n\
         mode: instrumented\nrepetitions: 1\n{body}"
    );
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
cause: implicit_sync
seed: 7
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

/// The device node of the step with id `step`.
fn device_node<'t>(truth: &'t GroundTruth, step: &str) -> &'t ground_truth::graph::Node {
    truth
        .nodes
        .iter()
        .find(|n| n.kind.is_device_op() && n.step.as_deref() == Some(step))
        .unwrap_or_else(|| panic!("a device node of step {step}"))
}

/// One thread launches, in this order: `hold` (every SM for 1 ms) on `other`,
/// then `low` on stream `lo`, then `high` on stream `hi`; `low` and `high`
/// need every SM too, so both wait for `hold`.
fn priorities(hi: i32, lo: i32) -> String {
    format!(
        r#"
cause: none
seed: 3
threads:
  - name: host
streams:
  - name: other
  - name: lo
    priority: {lo}
  - name: hi
    priority: {hi}
programs:
  - name: serve
    start: host
    requests: 1
    steps:
      - {{op: kernel, id: hold, stream: other, name: hold, duration_us: 1000}}
      - {{op: kernel, id: low, stream: lo, name: low, duration_us: 100}}
      - {{op: kernel, id: high, stream: hi, name: high, duration_us: 100}}
      - {{op: sync, target: device}}
symptom:
  step: high
"#
    )
}

#[test]
fn a_higher_priority_stream_gets_the_sms_first_without_preempting_running_work() {
    // Equal priorities: first come, first served.
    let b = record(&scenario(&priorities(0, 0)));
    let t = &b.ground_truth;
    let (hold, low, high) = (
        device_node(t, "hold"),
        device_node(t, "low"),
        device_node(t, "high"),
    );
    assert!(low.start >= hold.end && high.start >= low.end);
    // `hi` has the higher priority (lower number): `high` takes the SMs when
    // `hold` releases them, `low` runs after it, and `hold` ran to its end.
    let b = record(&scenario(&priorities(-1, 0)));
    let t = &b.ground_truth;
    let (hold, low, high) = (
        device_node(t, "hold"),
        device_node(t, "low"),
        device_node(t, "high"),
    );
    assert!(high.start >= hold.end, "no preemption of running work");
    assert!(
        high.start < low.start,
        "high {} low {}",
        high.start,
        low.start
    );
    assert!(low.start >= high.end);
    // The kernel record says what the node says.
    let owner = t.rid_owner();
    for n in [low, high] {
        let rec = b
            .trace
            .iter()
            .find(|r| owner.get(&r.rid()) == Some(&n.id) && r.kind_name() == "kernel")
            .expect("kernel record");
        assert_eq!(
            rec.device_times().map(|d| (d.2, d.3)),
            Some((n.start, n.end))
        );
    }
}

/// One thread on streams `s0`, `s1`, `s2` issues `steps`, then a device
/// synchronize; the symptom is step `symptom`.
fn one_thread(cause: &str, steps: &[&str], symptom: &str) -> String {
    let steps: String = steps.iter().map(|s| format!("      - {s}\n")).collect();
    format!(
        "cause: {cause}\nseed: 5\nthreads:\n  - name: host\nstreams:\n  - name: s0\n  \
         - name: s1\n  - name: s2\nprograms:\n  - name: serve\n    start: host\n    \
         requests: 1\n    steps:\n{steps}      - {{op: sync, target: device}}\n\
         symptom:\n  step: {symptom}\n"
    )
}

/// `first` on `s0`, then a 64 MiB D2D copy on `s1` and a 64 MiB memset on `s2`.
fn device_copies(first: &str) -> String {
    let d2d = "{op: copy, id: d2d, stream: s1, direction: d2d, bytes: 67108864, memory: pinned}";
    let fill = "{op: memset, id: fill, stream: s2, bytes: 67108864}";
    one_thread("none", &[first, d2d, fill], "d2d")
}

#[test]
fn device_to_device_copies_and_memsets_run_on_the_sms_not_the_copy_engine() {
    // Beside a 256 MiB pinned host-to-device copy (about 5 ms on the copy
    // engine) they start at once, as measured on the H200.
    let b = record(&scenario(&device_copies(
        "{op: copy, id: first, stream: s0, direction: h2d, bytes: 268435456, memory: pinned}",
    )));
    let t = &b.ground_truth;
    let h2d = device_node(t, "first");
    for step in ["d2d", "fill"] {
        let n = device_node(t, step);
        assert!(n.end < h2d.end, "{step} ran beside the host copy");
        assert!(n.start - n.submitted < 20_000, "{step} did not queue");
    }
    // While a kernel holds every SM they wait for it.
    let b = record(&scenario(&device_copies(
        "{op: kernel, id: first, stream: s0, name: hold, duration_us: 1000}",
    )));
    let t = &b.ground_truth;
    let hold = device_node(t, "first");
    for step in ["d2d", "fill"] {
        assert!(
            device_node(t, step).start >= hold.end,
            "{step} waited for SMs"
        );
    }
}

/// One thread issues the application's `first` op on `s0`, then `victim`
/// on `s1`, which needs the resource `first` holds.
fn contention(first: &str, victim: &str) -> String {
    one_thread("occupancy_pressure", &[first, victim], "victim")
}

#[test]
fn application_work_holding_the_sms_or_the_copy_engine_is_on_the_true_critical_path() {
    let cases = [
        // A kernel holding every SM, a kernel that needs them.
        (
            "{op: kernel, id: first, stream: s0, name: big, duration_us: 2000}",
            "{op: kernel, id: victim, stream: s1, name: small, duration_us: 100}",
        ),
        // A memset waits for SMs too.
        (
            "{op: kernel, id: first, stream: s0, name: big, duration_us: 2000}",
            "{op: memset, id: victim, stream: s1, bytes: 1048576}",
        ),
        // A 256 MiB copy holding the copy engine, a small copy behind it.
        (
            "{op: copy, id: first, stream: s0, direction: h2d, bytes: 268435456, memory: pinned}",
            "{op: copy, id: victim, stream: s1, direction: h2d, bytes: 1048576, memory: pinned}",
        ),
    ];
    for (first, victim) in cases {
        let b = record(&scenario(&contention(first, victim)));
        let t = &b.ground_truth;
        let (holder, late) = (device_node(t, "first"), device_node(t, "victim"));
        assert!(late.start >= holder.end, "{victim} waited");
        assert!(
            t.edges
                .iter()
                .any(|e| e.src == holder.id && e.dst == late.id && e.kind == EdgeType::Fault),
            "{victim}: a fault edge from the holder"
        );
        assert!(
            path(t).contains(&holder.id),
            "{victim}: holder on {:?}",
            path(t)
        );
    }
}
