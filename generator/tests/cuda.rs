//! The `cuda` backend. Without a GPU (or without libcuda, CUPTI or NVRTC) the
//! GPU tests print why they are skipped and pass; the unavailability tests
//! check that nothing panics and the message says what is missing.

use generator::backend::{gpu_present, select_backend, BackendKind};
use generator::cuda::CudaBackend;
use generator::{Backend, RecordError};
use ground_truth::graph::NodeKind;
use ground_truth::io::Readable;
use ground_truth::Scenario;

fn catalog(name: &str) -> Scenario {
    let mut p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../catalog")
        .join(format!("{name}.yaml"));
    if !p.exists() {
        // A test binary run from the repository root elsewhere (GPU host).
        p = std::path::Path::new("catalog").join(format!("{name}.yaml"));
    }
    Scenario::read(&p).expect("catalog scenario")
}

fn backend(test: &str) -> Option<CudaBackend> {
    match CudaBackend::new() {
        Ok(b) => Some(b),
        Err(e) => {
            eprintln!("SKIP {test}: {e}");
            None
        }
    }
}

#[test]
fn unavailable_backend_is_an_error_not_a_panic() {
    match CudaBackend::new() {
        Ok(_) => eprintln!("a GPU backend is available here; nothing to check"),
        Err(RecordError::Unavailable(name, msg)) => {
            assert_eq!(name, "cuda");
            assert!(!msg.is_empty());
            if !gpu_present() {
                assert!(msg.contains("/dev/nvidiactl"), "{msg}");
            }
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

#[test]
fn auto_falls_back_to_the_simulator_without_a_gpu() {
    let b = select_backend(BackendKind::Auto).expect("auto always yields a backend");
    if CudaBackend::new().is_err() {
        assert_eq!(b.name(), "sim");
        assert!(select_backend(BackendKind::Cuda).is_err());
    } else {
        assert_eq!(b.name(), "cuda");
    }
}

#[test]
fn gpu_records_an_event_edge_scenario() {
    let Some(be) = backend("gpu_records_an_event_edge_scenario") else {
        return;
    };
    let sc = catalog("dependency-vs-overlap.event-edge");
    let b = be.record(&sc, 0).expect("record on the GPU");
    assert_eq!(b.manifest.backend, "cuda");
    let stats = be.take_stats();
    let run = stats.iter().rev().find(|s| !s.twin).expect("run stats");
    assert_eq!(run.bound, run.device_ops, "unbound: {:?}", run.unbound);
    let sym = &b.ground_truth.symptoms[0];
    // The producer was lengthened by 3 ms; the consumer waits for it.
    assert!(sym.lateness_ns > 2.0e6, "lateness {}", sym.lateness_ns);
    let kinds: Vec<NodeKind> = sym
        .critical_path
        .iter()
        .map(|&n| b.ground_truth.nodes[n as usize].kind)
        .collect();
    assert!(kinds.contains(&NodeKind::StreamWait), "{kinds:?}");
    assert!(run.clock.kernels > 0);
}
