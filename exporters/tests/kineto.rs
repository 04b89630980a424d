//! Kineto export sanity: the JSON parses, every ac2g flow end has its start (same id =
//! correlation, start first, on the launching call), device events carry stream and
//! correlation, event waits name the waited stream and the cudaEventRecord correlation,
//! and one ProfilerStep annotation covers every event.

mod common;

use exporters::kineto::{to_kineto_string, KinetoOptions, RID_ARG, STEP_NAME};
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Collectors, Mode};
use serde_json::Value;
use std::collections::HashMap;

fn export(name: &str, collectors: Collectors, loss: LossSpec) -> (ground_truth::TraceView, Value) {
    let bundle = common::bundle(name);
    let view = views::derive(
        &bundle,
        ViewSpec {
            collectors,
            mode: Mode::Instrumented,
            loss,
        },
    )
    .view;
    let text = to_kineto_string(&view, &KinetoOptions::default());
    let v: Value = serde_json::from_str(&text).expect("valid JSON");
    (view, v)
}

#[test]
fn kineto_round_trip() {
    for name in [
        "dependency-vs-overlap.event-edge",
        "slow-copy-vs-blocked-consumer.own-copy-contended",
        "graph-replay-vs-direct-launch.graph-replay",
        "stale-identity.reused-event",
    ] {
        for loss in [LossSpec::None, LossSpec::Uniform { rate: 0.2, seed: 1 }] {
            let (view, v) = export(name, Collectors::Combined, loss);
            assert_eq!(v["schemaVersion"], 1);
            assert!(v["deviceProperties"]
                .as_array()
                .is_some_and(|d| !d.is_empty()));
            assert_eq!(v["distributedInfo"]["rank"], 0);
            let ev = v["traceEvents"].as_array().unwrap();
            // ac2g flows pair up.
            let mut starts: HashMap<u64, f64> = HashMap::new();
            for e in ev.iter().filter(|e| e["cat"] == "ac2g" && e["ph"] == "s") {
                assert!(starts
                    .insert(e["id"].as_u64().unwrap(), e["ts"].as_f64().unwrap())
                    .is_none());
            }
            let mut ends = 0;
            for e in ev.iter().filter(|e| e["cat"] == "ac2g" && e["ph"] == "f") {
                let s = starts[&e["id"].as_u64().unwrap()];
                assert!(
                    e["ts"].as_f64().unwrap() >= s,
                    "{name}: flow ends before it starts"
                );
                assert_eq!(e["bp"], "e");
                ends += 1;
            }
            let device: Vec<&Value> = ev
                .iter()
                .filter(|e| {
                    matches!(
                        e["cat"].as_str(),
                        Some("kernel" | "gpu_memcpy" | "gpu_memset")
                    )
                })
                .collect();
            assert!(!device.is_empty());
            let runtime_corr: std::collections::HashSet<u64> = ev
                .iter()
                .filter(|e| matches!(e["cat"].as_str(), Some("cuda_runtime" | "cuda_driver")))
                .map(|e| e["args"]["correlation"].as_u64().unwrap())
                .collect();
            // One flow end per device op whose launching call is in the view.
            let launched = device
                .iter()
                .filter(|e| runtime_corr.contains(&e["args"]["correlation"].as_u64().unwrap()))
                .count();
            assert_eq!(ends, launched, "{name}");
            for e in &device {
                assert_eq!(e["tid"], e["args"]["stream"]);
                assert!(e["args"]["correlation"].is_u64());
                assert!(e["args"][RID_ARG].is_u64());
            }
            // Event waits carry the waited stream and the record's correlation (or -1).
            let event_corr: HashMap<u64, (u64, u64)> = view
                .records
                .iter()
                .filter_map(|r| match r {
                    ground_truth::Record::CudaEvent {
                        event_sync_id,
                        correlation_id,
                        stream,
                        ..
                    } => Some((*event_sync_id, (*correlation_id as u64, *stream as u64))),
                    _ => None,
                })
                .collect();
            for r in &view.records {
                if let ground_truth::Record::Sync {
                    rid,
                    sync_type: ground_truth::trace::SyncType::StreamWaitEvent,
                    event_sync_id,
                    ..
                } = r
                {
                    let e = ev
                        .iter()
                        .find(|e| e["args"][RID_ARG].as_u64() == Some(*rid))
                        .expect("stream wait exported");
                    assert_eq!(e["cat"], "cuda_sync");
                    assert_eq!(e["name"], "Stream Wait Event");
                    match event_corr.get(event_sync_id) {
                        Some(&(c, s)) => {
                            assert_eq!(e["args"]["wait_on_cuda_event_record_corr_id"], c);
                            assert_eq!(e["args"]["wait_on_stream"], s);
                        }
                        None => assert_eq!(e["args"]["wait_on_cuda_event_record_corr_id"], -1),
                    }
                }
            }
            // The step annotation covers everything.
            let step = ev.iter().find(|e| e["name"] == STEP_NAME).expect("step");
            let (s0, s1) = (
                step["ts"].as_f64().unwrap(),
                step["ts"].as_f64().unwrap() + step["dur"].as_f64().unwrap(),
            );
            for e in ev.iter().filter(|e| e["ph"] == "X") {
                let (a, b) = (
                    e["ts"].as_f64().unwrap(),
                    e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap(),
                );
                assert!(a >= s0 && b <= s1 + 1e-6, "{name}: {e} outside the step");
            }
        }
    }
}

#[test]
fn host_view_has_no_device_events() {
    let (_, v) = export(
        "dependency-vs-overlap.event-edge",
        Collectors::Host,
        LossSpec::None,
    );
    let ev = v["traceEvents"].as_array().unwrap();
    assert!(!ev
        .iter()
        .any(|e| e["cat"] == "kernel" || e["cat"] == "cuda_runtime"));
}
