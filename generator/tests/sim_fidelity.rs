//! The simulator's device model against what the H200 did (docs/gpu-facts.md;
//! issues 33 item 4 and 40 items 3, 4 and 7): injected SM-holding work holds
//! what was asked whether or not the SMs are busy, copies move at the measured
//! bandwidths, each direction's copy engine serves the copies its streams have
//! let go, PCIe contention delays a gated copy by what was asked, and harmless
//! work fits in the SMs its target leaves spare.

use generator::sim::{NoiseParams, SimBackend};
use generator::Backend;
use ground_truth::graph::{GroundTruth, Node, NodeKind};
use ground_truth::io::Readable;
use ground_truth::trace::Record;
use ground_truth::{Bundle, Scenario};

/// A scenario of this file: `body` after the fields every one shares.
fn scenario(body: &str) -> Scenario {
    let yaml = format!(
        "schema_version: 1\nname: fidelity-test\nfamily: test\nvariant: case\n\
         description: \"a device behaviour measured on the H200\"\n\
         mode: instrumented\nrepetitions: 1\nseed: 11\n{body}"
    );
    Scenario::parse(std::path::Path::new("test.yaml"), yaml.as_bytes()).expect("scenario")
}

/// A simulator on a perfectly quiet host, so a lateness is the model's alone.
fn quiet() -> SimBackend {
    SimBackend {
        noise: NoiseParams::quiet(),
        ..SimBackend::default()
    }
}

fn record(sc: &Scenario) -> Bundle {
    quiet().record(sc, 0).expect("recorded")
}

/// The device node of the step with id `step` (first request).
fn op<'t>(truth: &'t GroundTruth, step: &str) -> &'t Node {
    truth
        .nodes
        .iter()
        .find(|n| n.step.as_deref() == Some(step) && n.kind != NodeKind::ApiCall)
        .unwrap_or_else(|| panic!("a device node of step {step}"))
}

fn lateness_us(b: &Bundle) -> f64 {
    b.ground_truth.symptoms[0].lateness_ns / 1000.0
}

fn assert_within_tenth(what: &str, delivered_us: f64, asked_us: f64) {
    assert!(
        (delivered_us - asked_us).abs() <= 0.1 * asked_us,
        "{what}: {delivered_us:.1} µs delivered for {asked_us} µs asked"
    );
}

/// Six 100-SM kernels back to back on `bg` (3 µs dispatch gaps between them,
/// when every SM is free for an instant); `victim` needs 64 SMs, so it cannot
/// run beside them. `{BUSY}` is whether the background work runs at all.
const SMS_BUSY: &str = r#"
cause: occupancy_pressure
threads: [{name: host}]
streams: [{name: bg}, {name: s}]
programs:
  - name: p
    start: host
    requests: 1
    steps:
      - {op: kernel, id: bg1, stream: {BUSY}, name: fill, duration_us: 120, grid: 100}
      - {op: kernel, id: bg2, stream: {BUSY}, name: fill, duration_us: 120, grid: 100}
      - {op: kernel, id: bg3, stream: {BUSY}, name: fill, duration_us: 120, grid: 100}
      - {op: kernel, id: bg4, stream: {BUSY}, name: fill, duration_us: 120, grid: 100}
      - {op: kernel, id: bg5, stream: {BUSY}, name: fill, duration_us: 120, grid: 100}
      - {op: kernel, id: bg6, stream: {BUSY}, name: fill, duration_us: 120, grid: 100}
      - {op: host_work, duration_us: 20}
      - {op: kernel, id: victim, stream: s, name: victim, duration_us: 50, grid: 64}
      - {op: sync, target: device}
injection:
  kind: {KIND}
  target: victim
  magnitude_us: {MAG}
symptom:
  step: victim
"#;

fn sms_busy(kind: &str, busy: bool, magnitude_us: f64) -> Scenario {
    // Without background work the fill kernels run on the victim's own
    // stream before it: the SMs are free when the injected work is issued.
    let stream = if busy { "bg" } else { "s" };
    scenario(
        &SMS_BUSY
            .replace("{BUSY}", stream)
            .replace("{KIND}", kind)
            .replace("{MAG}", &magnitude_us.to_string()),
    )
}

#[test]
fn an_injected_sm_hold_delays_its_target_by_what_was_asked_when_the_sms_are_busy() {
    for busy in [true, false] {
        for kind in ["occupancy_pressure", "stream_backlog"] {
            for mag in [150.0, 300.0, 1000.0] {
                let b = record(&sms_busy(kind, busy, mag));
                assert_within_tenth(&format!("{kind}, SMs busy: {busy}"), lateness_us(&b), mag);
            }
        }
    }
}

const ONE_COPY: &str = r#"
cause: none
threads: [{name: host}]
streams: [{name: s}]
programs:
  - name: p
    start: host
    requests: 1
    steps:
      - {op: copy, id: c, stream: s, direction: {DIR}, bytes: 268435456, memory: {MEM}}
      - {op: sync, target: device}
symptom:
  step: c
"#;

#[test]
fn host_copies_move_at_the_bandwidth_measured_on_the_h200() {
    // docs/gpu-facts.md, "Host↔device copy engines": 256 MiB pinned took
    // 4.84 ms (H2D) and 4.85 ms (D2H), 8 MiB 154 µs; SPEC §9: 256 MiB
    // pageable ≈ 80 ms (the figure the model keeps for now).
    for (dir, mem, bytes, measured_ms, within) in [
        ("h2d", "pinned", 256 << 20, 4.84, 0.03),
        ("d2h", "pinned", 256 << 20, 4.85, 0.03),
        ("h2d", "pinned", 8 << 20, 0.154, 0.03),
        ("h2d", "pageable", 256 << 20, 80.0, 0.03),
    ] {
        let sc = scenario(
            &ONE_COPY
                .replace("{DIR}", dir)
                .replace("{MEM}", mem)
                .replace("268435456", &bytes.to_string()),
        );
        let b = record(&sc);
        let c = op(&b.ground_truth, "c");
        let ms = (c.end - c.start) as f64 / 1e6;
        assert!(
            (ms - measured_ms).abs() <= within * measured_ms,
            "{dir} {mem} {bytes} bytes: {ms:.3} ms, measured {measured_ms} ms"
        );
    }
}

/// Stream `a` holds its copy `gated` behind a 1 ms kernel; `ready` on stream
/// `b` is issued after it and can move at once. `{FIRST}` and `{SECOND}` are
/// their directions.
const GATED_THEN_READY: &str = r#"
cause: none
threads: [{name: host}]
streams: [{name: a}, {name: b}]
programs:
  - name: p
    start: host
    requests: 1
    steps:
      - {op: kernel, id: k, stream: a, name: k, duration_us: 1000, grid: 8}
      - {op: copy, id: gated, stream: a, direction: {FIRST}, bytes: 8388608, memory: pinned}
      - {op: copy, id: ready, stream: b, direction: {SECOND}, bytes: 8388608, memory: pinned}
      - {op: sync, target: device}
symptom:
  step: ready
"#;

#[test]
fn a_ready_copy_does_not_wait_behind_a_copy_its_stream_still_holds() {
    for (first, second) in [("d2h", "h2d"), ("h2d", "h2d"), ("h2d", "d2h")] {
        let sc = scenario(
            &GATED_THEN_READY
                .replace("{FIRST}", first)
                .replace("{SECOND}", second),
        );
        let b = record(&sc);
        let t = &b.ground_truth;
        let (k, gated, ready) = (op(t, "k"), op(t, "gated"), op(t, "ready"));
        // On the H200 the ready copy started while the kernel ran (47 µs after
        // submission in issue 40's program; docs/gpu-facts.md).
        assert!(
            ready.start < ready.submitted + 10_000,
            "{first} then {second}: the ready copy waited {} µs",
            (ready.start - ready.submitted) / 1000
        );
        assert!(
            ready.end < k.end,
            "{first} then {second}: it ran beside the kernel"
        );
        assert!(gated.start >= k.end, "the gated copy waits for its kernel");
    }
}

/// Copies issued together on two streams: `{FIRST}` then `{SECOND}`.
const TWO_COPIES: &str = r#"
cause: none
threads: [{name: host}]
streams: [{name: a}, {name: b}]
programs:
  - name: p
    start: host
    requests: 1
    steps:
      - {op: copy, id: one, stream: a, direction: {FIRST}, bytes: 268435456, memory: pinned}
      - {op: copy, id: two, stream: b, direction: {SECOND}, bytes: 268435456, memory: pinned}
      - {op: sync, target: device}
symptom:
  step: two
"#;

#[test]
fn copies_of_one_direction_take_turns_and_opposite_directions_overlap() {
    let run = |first: &str, second: &str| {
        let sc = scenario(
            &TWO_COPIES
                .replace("{FIRST}", first)
                .replace("{SECOND}", second),
        );
        let b = record(&sc);
        let t = &b.ground_truth;
        (op(t, "one").clone(), op(t, "two").clone())
    };
    // SPEC §9: concurrent same-direction copies were serialized.
    let (one, two) = run("h2d", "h2d");
    assert!(two.start >= one.end, "same direction: one after the other");
    let (one, two) = run("d2h", "d2h");
    assert!(two.start >= one.end, "same direction: one after the other");
    // docs/gpu-facts.md: an H2D and a D2H on two streams ran together.
    let (one, two) = run("h2d", "d2h");
    assert!(two.start < one.end, "opposite directions overlap");
}

/// Sixteen 8 MiB copies on stream `a`, then a 1 MiB copy on `b` behind a
/// 300 µs kernel that ends while `a`'s copies run.
const COPIES_THEN_GATED: &str = r#"
cause: none
threads: [{name: host}]
streams: [{name: a}, {name: b}]
programs:
  - name: p
    start: host
    requests: 1
    steps:
{COPIES}
      - {op: kernel, id: k, stream: b, name: k, duration_us: 300, grid: 8}
      - {op: copy, id: tiny, stream: b, direction: h2d, bytes: 1048576, memory: pinned}
      - {op: sync, target: device}
symptom:
  step: tiny
"#;

#[test]
fn a_streams_back_to_back_copies_keep_their_turn() {
    let copies: String = (0..16)
        .map(|i| {
            format!(
                "      - {{op: copy, id: c{i}, stream: a, direction: h2d, bytes: 8388608, \
                 memory: pinned}}\n"
            )
        })
        .collect();
    let sc = scenario(&COPIES_THEN_GATED.replace("{COPIES}\n", &copies));
    let b = record(&sc);
    let t = &b.ground_truth;
    let (k, tiny, last) = (op(t, "k"), op(t, "tiny"), op(t, "c15"));
    // docs/gpu-facts.md: on the H200 the gated copy ran after all sixteen.
    assert!(k.end < last.start, "the kernel ends while stream a copies");
    assert!(
        tiny.start >= last.end,
        "the gated copy waits for all of them"
    );
}

/// `input` waits on stream `upload` for an event of `side`'s 800 µs kernel:
/// it is issued long before it can move. The application's own copies are
/// 16 MiB (≈ 300 µs), what injected copies imitate.
const GATED_COPY: &str = r#"
cause: pcie_contention
threads: [{name: host}]
streams: [{name: upload}, {name: side}, {name: bulk}]
events: [{name: side_done}]
programs:
  - name: p
    start: host
    requests: 1
    steps:
      - {op: copy, id: warm, stream: bulk, direction: h2d, bytes: 16777216, memory: pinned}
      - {op: kernel, id: side_work, stream: side, name: side_work, duration_us: 800, grid: 32}
      - {op: event_record, event: side_done, stream: side}
      - {op: stream_wait, stream: upload, event: side_done}
      - {op: copy, id: input, stream: upload, direction: h2d, bytes: 4194304, memory: pinned}
      - {op: kernel, id: consume, stream: upload, name: consume, duration_us: 100, grid: 64}
      - {op: sync, target: device}
injection:
  kind: pcie_contention
  target: input
  magnitude_us: {MAG}
symptom:
  step: consume
"#;

#[test]
fn pcie_contention_on_a_gated_copy_delays_it_by_what_was_asked() {
    // Injected copies are whole copies of the application's sizes (here
    // ≈ 304 µs and ≈ 78 µs), so the lateness can come only within half the
    // smallest of them (39 µs) of the magnitude; it must never shrink as the
    // magnitude grows.
    let mut last = 0.0;
    for mag in (100..=1200).step_by(25) {
        let sc = scenario(&GATED_COPY.replace("{MAG}", &mag.to_string()));
        let late = lateness_us(&record(&sc));
        eprintln!("pcie contention: {mag} µs asked, {late:.1} µs late");
        assert!(
            late >= last,
            "{mag} µs asked: {late:.1} µs, less than before ({last:.1})"
        );
        let within = (0.1 * mag as f64).max(45.0);
        assert!(
            (late - mag as f64).abs() <= within,
            "{mag} µs asked: {late:.1} µs delivered"
        );
        last = late;
    }
}

/// `big` fills every SM for 500 µs; harmless work is injected on it.
const FULL_KERNEL: &str = r#"
cause: none
threads: [{name: host}]
streams: [{name: s}]
programs:
  - name: p
    start: host
    requests: 1
    steps:
      - {op: kernel, id: prep, stream: s, name: prep, duration_us: 200, grid: 132}
      - {op: host_work, duration_us: 100}
      - {op: kernel, id: big, stream: s, name: big, duration_us: 500, grid: {GRID}}
      - {op: kernel, id: after, stream: s, name: after, duration_us: 50, grid: {GRID}}
      - {op: sync, target: device}
injection:
  kind: unrelated_work
  target: big
  magnitude_us: {MAG}
symptom:
  step: after
"#;

#[test]
fn harmless_work_delays_nothing_beside_a_kernel_that_uses_every_sm() {
    for grid in [132, 128, 88] {
        for mag in [100, 400, 2000] {
            let sc = scenario(
                &FULL_KERNEL
                    .replace("{GRID}", &grid.to_string())
                    .replace("{MAG}", &mag.to_string()),
            );
            let b = record(&sc);
            let big = op(&b.ground_truth, "big");
            // The injected kernels: the scenario's own grids are 132 and `grid`.
            let injected: Vec<(u32, u64, u64)> = b
                .trace
                .iter()
                .filter_map(|r| match r {
                    Record::Kernel {
                        start, end, detail, ..
                    } if detail.grid[0] != 132 && detail.grid[0] != grid => {
                        Some((detail.grid[0], *start, *end))
                    }
                    _ => None,
                })
                .collect();
            assert!(!injected.is_empty(), "grid {grid}: harmless work ran");
            for &(sms, start, end) in &injected {
                if grid == 132 {
                    assert!(
                        end <= big.start,
                        "grid {grid}: it ends before the full kernel"
                    );
                } else {
                    assert!(sms <= 132 - grid, "grid {grid}: {sms} SMs are not spare");
                }
                let _ = start;
            }
            if grid != 132 {
                assert!(
                    injected
                        .iter()
                        .any(|&(_, s, e)| s < big.end && e > big.start),
                    "grid {grid}: it runs beside the kernel"
                );
            }
            let late = lateness_us(&b);
            // The twin's jitter alone moves it a few µs; on the H200 the
            // symptom was 21–28 µs late (issue 40 item 7).
            assert!(
                late.abs() < 10.0,
                "grid {grid}, {mag} µs of harmless work: the symptom is {late:.1} µs late"
            );
        }
    }
}
