//! The HTA adapter on simulator views of catalog scenarios: a valid explanation, scored
//! by the evaluator like any profiler. Skipped (with a message) when HTA is not
//! installed, unless CAUSALBENCH_REQUIRE_HTA=1 (CI).

use baselines::hta::{self, HtaCriticalPath};
use baselines::Profiler;
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Collectors, Mode, Readable, Scenario};
use std::path::PathBuf;

fn bundle(name: &str) -> ground_truth::Bundle {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../catalog/{name}.yaml"));
    let sc = Scenario::read(&p).unwrap();
    generator::select_backend(generator::BackendKind::Sim)
        .unwrap()
        .record(&sc, 0)
        .unwrap()
}

fn available() -> bool {
    if hta::hta_available() {
        return true;
    }
    let msg = format!(
        "SKIPPED: HolisticTraceAnalysis is not importable by `{}` (looked in {}); install with \
         `bash baselines/hta/setup-hta.sh` (CAUSALBENCH_REQUIRE_HTA=1 turns this skip into a failure)",
        hta::python(),
        hta::hta_dir().display()
    );
    if std::env::var("CAUSALBENCH_REQUIRE_HTA").is_ok_and(|v| v == "1") {
        panic!("{msg}");
    }
    eprintln!("{msg}");
    false
}

#[test]
fn hta_adapter_explains_and_is_scored() {
    if !available() {
        return;
    }
    assert!(baselines::optional_names().contains(&hta::NAME));
    let p = HtaCriticalPath::default();
    // (scenario, whether HTA's answer is expected right)
    let cases = [
        ("dependency-vs-overlap.event-edge", Some(true)),
        ("late-launch-vs-device-queueing.stream-backlog", Some(true)),
        ("late-launch-vs-device-queueing.occupancy-hog", None),
        // HTA does not know cudaGraphLaunch: it raises on a graph-only trace, and the
        // crash is reported as one (meta.failure, the case score's `crashed`).
        ("graph-replay-vs-direct-launch.graph-replay", Some(false)),
    ];
    for (name, expect) in cases {
        let b = bundle(name);
        for mode in [Mode::Instrumented, Mode::Closed] {
            let spec = ViewSpec {
                collectors: Collectors::Cupti,
                mode,
                loss: LossSpec::None,
            };
            assert!(baselines::reads_view(hta::NAME, &spec));
            let view = views::derive(&b, spec).view;
            let x = p.explain(&view);
            // A valid explanation: it round-trips through the format's reader.
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("x.json");
            x.write(&path).unwrap();
            let x = ground_truth::Explanation::read(&path).unwrap();
            assert_eq!(x.meta.profiler, hta::NAME);
            assert_eq!(x.diagnoses.len(), view.queries.len());
            let s = evaluator::score_case(&b, &view, &x);
            assert_eq!(s.profiler, hta::NAME);
            let correct = s.symptoms.iter().all(|y| y.correct);
            eprintln!(
                "{name} {mode:?}: {} edges, precision {:?}, correct {correct}, claimed {:?}, {:.0} ms",
                x.edges.len(),
                s.edges.precision,
                s.symptoms.first().and_then(|y| y.claimed_cause),
                x.meta.wall_ms
            );
            match expect {
                Some(true) => {
                    assert!(correct, "{name}: HTA's answer changed: {:?}", x.diagnoses);
                    assert!(!x.edges.is_empty());
                    assert!(x.diagnoses.iter().all(|d| d.complete));
                }
                Some(false) => {
                    assert!(!correct);
                    assert!(x
                        .diagnoses
                        .iter()
                        .all(|d| !d.complete && d.causes.is_empty()));
                    let message = x.meta.failure.as_deref().expect("a crash says so");
                    assert!(message.starts_with("HTA raised "), "{message}");
                    assert_eq!(s.crashed.as_deref(), Some(message));
                }
                None => assert!(x.meta.failure.is_none(), "{:?}", x.meta.failure),
            }
        }
    }
    let host = ViewSpec {
        collectors: Collectors::Host,
        mode: Mode::Instrumented,
        loss: LossSpec::None,
    };
    assert!(!baselines::reads_view(hta::NAME, &host));
}

/// The `combined` and `cupti` views of a bundle export the same Kineto events, so HTA
/// analyses them once: the second view gets the first's answer (the same `wall_ms`,
/// which two analyses would not give), under its own view spec.
#[test]
fn hta_analyses_one_export_once() {
    if !available() {
        return;
    }
    let b = bundle("dependency-vs-overlap.event-edge");
    let p = HtaCriticalPath::default();
    let spec = |collectors| ViewSpec {
        collectors,
        mode: Mode::Instrumented,
        loss: LossSpec::None,
    };
    let cupti = p.explain(&views::derive(&b, spec(Collectors::Cupti)).view);
    let combined = p.explain(&views::derive(&b, spec(Collectors::Combined)).view);
    assert!(cupti.meta.failure.is_none(), "{:?}", cupti.meta.failure);
    assert_eq!(combined.meta.view, spec(Collectors::Combined));
    assert_eq!(cupti.meta.view, spec(Collectors::Cupti));
    assert_eq!(combined.meta.wall_ms, cupti.meta.wall_ms, "analysed twice");
    assert_eq!(
        serde_json::to_value(&combined.diagnoses).unwrap(),
        serde_json::to_value(&cupti.diagnoses).unwrap()
    );
    assert_eq!(
        serde_json::to_value(&combined.edges).unwrap(),
        serde_json::to_value(&cupti.edges).unwrap()
    );
    // A view that exports other events (no NVTX ranges) is analysed on its own.
    let closed = ViewSpec {
        mode: Mode::Closed,
        ..spec(Collectors::Cupti)
    };
    let closed = p.explain(&views::derive(&b, closed).view);
    assert_ne!(closed.meta.wall_ms, cupti.meta.wall_ms);
}

#[test]
fn hta_abstains_when_not_installed() {
    // A view of nothing installed: the abstaining explanation is valid and claims nothing.
    let b = bundle("dependency-vs-overlap.event-edge");
    let view = views::derive(
        &b,
        ViewSpec {
            collectors: Collectors::Cupti,
            mode: Mode::Instrumented,
            loss: LossSpec::None,
        },
    )
    .view;
    let x = hta::abstain(&view, "unavailable", 0.0);
    assert!(x.edges.is_empty());
    assert!(x
        .diagnoses
        .iter()
        .all(|d| !d.complete && d.causes.is_empty()));
    let s = evaluator::score_case(&b, &view, &x);
    assert!(s.symptoms.iter().all(|y| !y.correct));
}

/// HTA 0.5 knows the runtime's event calls only: on the same scenario it finds the event
/// edge when the application records and waits through the runtime
/// (`cudaEventRecord`, `cudaStreamWaitEvent`) and none through the driver
/// (`cuEventRecord`, `cuStreamWaitEvent`, what the H200 recordings carry).
#[test]
fn hta_sees_event_edges_through_the_runtime_api_only() {
    if !available() {
        return;
    }
    use ground_truth::graph::EdgeType;
    use ground_truth::scenario::{EventApi, Step};
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../catalog/dependency-vs-overlap.event-edge.yaml");
    let runtime = Scenario::read(&p).unwrap();
    let mut driver = runtime.clone();
    let mut switched = 0;
    for program in &mut driver.programs {
        for step in &mut program.steps {
            if let Step::EventRecord { api, .. } | Step::StreamWait { api, .. } = step {
                *api = EventApi::Driver;
                switched += 1;
            }
        }
    }
    assert!(switched >= 2, "the scenario records and waits for an event");
    let backend = generator::select_backend(generator::BackendKind::Sim).unwrap();
    let spec = ViewSpec {
        collectors: Collectors::Cupti,
        mode: Mode::Instrumented,
        loss: LossSpec::None,
    };
    let event_edges = |sc: &Scenario| {
        let view = views::derive(&backend.record(sc, 0).unwrap(), spec).view;
        let names: Vec<String> = view
            .records
            .iter()
            .filter_map(|r| match r {
                ground_truth::Record::Api { name, .. } if name.contains("Event") => {
                    Some(name.to_string())
                }
                _ => None,
            })
            .collect();
        let x = HtaCriticalPath::default().explain(&view);
        assert!(x.meta.failure.is_none(), "{:?}", x.meta.failure);
        let n = x.edges.iter().filter(|e| e.kind == EdgeType::Event).count();
        (n, names)
    };
    let (with_runtime, runtime_names) = event_edges(&runtime);
    let (with_driver, driver_names) = event_edges(&driver);
    eprintln!(
        "event edges HTA finds: {with_runtime} via {runtime_names:?}, {with_driver} via {driver_names:?}"
    );
    assert!(runtime_names.iter().all(|n| n.starts_with("cuda")));
    assert!(driver_names
        .iter()
        .all(|n| n.starts_with("cu") && !n.starts_with("cuda")));
    assert!(with_runtime > 0);
    assert_eq!(with_driver, 0);
}
