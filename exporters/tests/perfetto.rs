//! Perfetto export: decoded by the Perfetto project's own protos (the `perfetto` PyPI
//! package, see perfetto_decode.py) with the expected tracks, slices and flows; and a
//! Rust-side round trip of the same bytes.

mod common;

use exporters::perfetto::{self, proto};
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Collectors, Mode, Readable};
use prost::Message;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

const SCENARIOS: &[&str] = &[
    "dependency-vs-overlap.event-edge",
    "graph-replay-vs-direct-launch.graph-replay",
    "request-identity-through-handoffs.hops-3",
    "host-page-fault-vs-cpu-stall.preempted",
];

fn spec(collectors: Collectors, mode: Mode, loss: LossSpec) -> ViewSpec {
    ViewSpec {
        collectors,
        mode,
        loss,
    }
}

/// Every flow id is started once and ended once, not earlier; slices nest per track.
fn check_bytes(bytes: &[u8], stats: perfetto::ModelStats) {
    let t = proto::Trace::decode(bytes).expect("decodes");
    let mut starts: HashMap<u64, u64> = HashMap::new();
    let mut ends: HashMap<u64, u64> = HashMap::new();
    let mut depth: HashMap<u64, i64> = HashMap::new();
    let (mut tracks, mut begins, mut instants) = (0, 0, 0);
    for p in &t.packet {
        if p.track_descriptor.is_some() {
            tracks += 1;
        }
        if let Some(e) = &p.track_event {
            let d = depth.entry(e.track_uuid.unwrap()).or_default();
            match e.r#type {
                Some(proto::TYPE_SLICE_BEGIN) => {
                    begins += 1;
                    *d += 1
                }
                Some(proto::TYPE_SLICE_END) => {
                    *d -= 1;
                    assert!(*d >= 0, "end without begin");
                }
                Some(proto::TYPE_INSTANT) => instants += 1,
                other => panic!("unexpected type {other:?}"),
            }
            for f in &e.flow_ids {
                assert!(starts.insert(*f, p.timestamp.unwrap()).is_none());
            }
            for f in &e.terminating_flow_ids {
                assert!(ends.insert(*f, p.timestamp.unwrap()).is_none());
            }
        }
    }
    assert!(depth.values().all(|&d| d == 0), "slices left open");
    assert_eq!(tracks, stats.tracks);
    assert_eq!(begins, stats.slices);
    assert_eq!(instants, stats.instants);
    assert_eq!(starts.len(), stats.flows);
    assert_eq!(ends.len(), stats.flows);
    for (f, s) in &starts {
        assert!(ends[f] >= *s, "flow {f} ends before it starts");
    }
}

fn python_check(dir: &Path, args: &[&Path]) -> Option<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto_decode.py");
    let out = Command::new(baselines::hta::python())
        .arg(&script)
        .args(args)
        .current_dir(dir)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            common::skip(&format!("cannot run python3: {e}"));
            return None;
        }
    };
    match out.status.code() {
        Some(0) => Some(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        Some(3) => {
            common::skip("the `perfetto` package's protos are not importable");
            None
        }
        _ => panic!(
            "perfetto_decode.py failed on {:?}:\n{}{}",
            args,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

#[test]
fn perfetto_export_decodes_with_perfettos_protos() {
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for name in SCENARIOS {
        let bundle = common::bundle(name);
        let bpath = tmp.path().join(format!("{name}.bundle.json"));
        bundle.write(&bpath).unwrap();
        // The whole bundle; a loss-free view; a lossy closed view with the reference
        // profiler's claims (lost records leave unrecorded nodes and undrawable claims).
        let cases = [
            None,
            Some(spec(Collectors::Cupti, Mode::Instrumented, LossSpec::None)),
            Some(spec(
                Collectors::Combined,
                Mode::Closed,
                LossSpec::Uniform { rate: 0.2, seed: 7 },
            )),
            Some(spec(
                Collectors::Host,
                Mode::Closed,
                LossSpec::Targeted { seed: 3 },
            )),
        ];
        for (k, s) in cases.iter().enumerate() {
            let view = s.map(|s| views::derive(&bundle, s).view);
            let x = view
                .as_ref()
                .map(|v| baselines::builtin("causal-graph").unwrap().explain(v));
            let dir = tmp.path().join(format!("{name}-{k}"));
            let w = perfetto::export_case(&bundle, view.as_ref(), x.as_ref(), &dir).unwrap();
            assert_eq!(w.truth.flows, bundle.ground_truth.edges.len());
            check_bytes(
                &std::fs::read(dir.join("truth.perfetto-trace")).unwrap(),
                w.truth,
            );
            let vpath = dir.join("view.json");
            let xpath = dir.join("explanation.json");
            let truth = dir.join("truth.perfetto-trace");
            let mut args: Vec<&Path> = vec![&bpath, &truth];
            let vflag = Path::new("--view");
            if let Some(v) = &view {
                v.write(&vpath).unwrap();
                args.extend([vflag, vpath.as_path()]);
            }
            let Some(summary) = python_check(&dir, &args) else {
                return;
            };
            eprintln!("{name} case {k} truth: {summary}");
            if let Some(x) = &x {
                check_bytes(
                    &std::fs::read(dir.join("claimed.perfetto-trace")).unwrap(),
                    w.claimed.unwrap(),
                );
                x.write(&xpath).unwrap();
                let claimed = dir.join("claimed.perfetto-trace");
                let xflag = Path::new("--explanation");
                let args: Vec<&Path> = vec![&bpath, &claimed, vflag, &vpath, xflag, &xpath];
                let summary = python_check(&dir, &args).unwrap();
                eprintln!("{name} case {k} claimed: {summary}");
            }
            // Chrome JSON of the same: parses, one s and one f per flow.
            let j: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join("truth.json")).unwrap()).unwrap();
            let ev = j["traceEvents"].as_array().unwrap();
            let s = ev.iter().filter(|e| e["ph"] == "s").count();
            let f = ev.iter().filter(|e| e["ph"] == "f").count();
            assert_eq!((s, f), (w.truth.flows, w.truth.flows));
            checked += 1;
        }
    }
    assert_eq!(checked, SCENARIOS.len() * 4);
}

#[test]
fn truth_marks_symptom_and_injection() {
    let bundle = common::bundle("dependency-vs-overlap.event-edge");
    let m = perfetto::truth_model(&bundle, None);
    assert!(m.slices.iter().any(|s| s.name.starts_with("SYMPTOM q0")));
    assert!(m
        .slices
        .iter()
        .any(|s| s.name.starts_with("INJECTED event_wait")));
    assert!(m.slices.iter().any(|s| s.name.starts_with("⚠ ")));
    assert!(m.slices.iter().any(|s| s.name.starts_with("💉 ")));
    let st = m.stats();
    assert_eq!(st.thread_tracks, 1);
    assert_eq!(st.stream_tracks, 2);
}

/// The streaming writers write exactly the bytes of the whole-message encoders
/// they replaced: the `Trace` message encoded at once by prost, and the Chrome
/// JSON value serialized at once (so an export is byte-identical, only its
/// memory peak fell).
#[test]
fn streamed_exports_are_the_whole_message_bytes() {
    for name in SCENARIOS {
        let bundle = common::bundle(name);
        let m = perfetto::truth_model(&bundle, None);
        let mut streamed = Vec::new();
        perfetto::write_perfetto(&m, &mut streamed).unwrap();
        let whole = proto::Trace::decode(streamed.as_slice())
            .unwrap()
            .encode_to_vec();
        assert_eq!(streamed, whole, "{name}: protobuf");
        let mut streamed = Vec::new();
        perfetto::write_chrome_json(&m, &mut streamed).unwrap();
        let whole = serde_json::to_vec(&perfetto::to_chrome_json(&m)).unwrap();
        assert_eq!(streamed, whole, "{name}: Chrome JSON");
    }
}
