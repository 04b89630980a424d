//! `hta-idle-time` and `hta-launch-stats` (HTA's idle-time breakdown and kernel-launch
//! statistics, baselines/src/hta_analyses.rs) on the native Kineto traces of the
//! committed PyTorch corpus (results/corpus/h200-580-kineto): they read loss-free
//! `kineto` views from the native trace only, answer `cause` questions about device
//! ops only, abstain everywhere else, and are scored like any profiler. The HTA part is
//! skipped (with a message) when HTA is not installed, unless CAUSALBENCH_REQUIRE_HTA=1.

use baselines::hta_analyses;
use ground_truth::trace::Record;
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::Question;
use ground_truth::{Bundle, Collectors, Mode, Readable, TraceView};
use std::collections::HashMap;
use std::path::PathBuf;

fn corpus() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../results/corpus/h200-580-kineto");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: {} is not committed", dir.display());
        None
    }
}

fn kineto_view(mode: Mode) -> ViewSpec {
    ViewSpec {
        collectors: Collectors::Kineto,
        mode,
        loss: LossSpec::None,
    }
}

#[test]
fn the_analyses_are_registered_and_read_native_traces_only() {
    for name in hta_analyses::NAMES {
        assert!(baselines::builtin(name).is_some(), "{name}");
        assert!(baselines::row_notes().iter().any(|(n, _)| n == name));
        assert!(baselines::reads_view(name, &kineto_view(Mode::Closed)));
        let lossy = ViewSpec {
            loss: LossSpec::Targeted { seed: 1 },
            ..kineto_view(Mode::Closed)
        };
        assert!(!baselines::reads_view(name, &lossy));
        let cupti = ViewSpec {
            collectors: Collectors::Cupti,
            ..kineto_view(Mode::Closed)
        };
        assert!(!baselines::reads_view(name, &cupti));
        // Without the native trace beside the bundle, no profiler for the view.
        assert!(baselines::profiler_for(name, &kineto_view(Mode::Closed), None).is_none());
    }
    assert_eq!(
        baselines::optional_names().contains(&hta_analyses::IDLE_TIME),
        baselines::hta_available()
    );
}

/// What the view's record of each rid is: a host call, a kernel (with its launch
/// call's name) or another device op.
fn kinds(view: &TraceView) -> HashMap<u64, (&'static str, String)> {
    let calls: HashMap<u32, String> = view
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Api {
                correlation_id,
                name,
                ..
            } => Some((*correlation_id, name.to_string())),
            _ => None,
        })
        .collect();
    view.records
        .iter()
        .filter_map(|r| {
            let (kind, correlation) = match r {
                Record::Api { .. } => ("call", None),
                Record::Kernel { correlation_id, .. } => ("kernel", Some(correlation_id)),
                Record::Memcpy { correlation_id, .. } => ("memcpy", Some(correlation_id)),
                Record::Memset { correlation_id, .. } => ("memset", Some(correlation_id)),
                _ => return None,
            };
            let call = correlation
                .and_then(|c| calls.get(c).cloned())
                .unwrap_or_default();
            Some((r.rid(), (kind, call)))
        })
        .collect()
}

#[test]
fn the_analyses_answer_cause_questions_about_device_ops_and_abstain_elsewhere() {
    let Some(dir) = corpus() else { return };
    if !baselines::hta_available() {
        let msg =
            "SKIPPED: HolisticTraceAnalysis is not importable (bash baselines/hta/setup-hta.sh)";
        if std::env::var("CAUSALBENCH_REQUIRE_HTA").is_ok_and(|v| v == "1") {
            panic!("{msg}");
        }
        eprintln!("{msg}");
        return;
    }
    // A kernel symptom, a copy symptom and an operator question.
    let bundles = [
        "late-launch-vs-device-queueing.stream-backlog.r0",
        "implicit-synchronization.slow-transfer.r0",
        "operator-attribution-under-async.launched-in-mlp.r0",
    ];
    let (mut answered, mut abstained) = (HashMap::new(), HashMap::new());
    for id in bundles {
        let bundle_path = dir.join(format!("{id}.bundle.json.gz"));
        let bundle = Bundle::read(&bundle_path).unwrap();
        let spec = kineto_view(Mode::Instrumented);
        let view = views::derive(&bundle, spec).view;
        let kinds = kinds(&view);
        for name in hta_analyses::NAMES {
            // Without the file the analysis says why instead of answering.
            let x = baselines::builtin(name).unwrap().explain(&view);
            let failure = x.meta.failure.as_deref().unwrap_or_default();
            assert!(failure.contains("no native Kineto trace"), "{failure}");

            let p = baselines::profiler_for(name, &spec, Some(&bundle_path)).unwrap();
            let x = p.explain(&view);
            assert!(
                x.meta.failure.is_none(),
                "{name} {id}: {:?}",
                x.meta.failure
            );
            assert_eq!(x.meta.profiler, *name);
            x.check_against(&bundle_path, &view).unwrap();
            assert!(x.edges.is_empty(), "{name} claims no edge");
            for (d, q) in x.diagnoses.iter().zip(&view.queries) {
                assert!(!d.complete && d.critical_path.is_empty(), "{name}: no path");
                let (kind, call) = kinds[&q.rid].clone();
                let outside = q.question != Question::Cause
                    || kind == "call"
                    || (*name == hta_analyses::LAUNCH_STATS
                        && !matches!(
                            call.as_str(),
                            "cudaLaunchKernel"
                                | "cudaLaunchKernelExC"
                                | "cudaMemcpyAsync"
                                | "cudaMemsetAsync"
                        ));
                if outside {
                    assert!(d.causes.is_empty(), "{name} {id} {}: abstains", q.id);
                    *abstained.entry(*name).or_insert(0) += 1;
                    continue;
                }
                if !d.causes.is_empty() {
                    *answered.entry(*name).or_insert(0) += 1;
                    let total: f64 = d.causes.iter().map(|c| c.score).sum();
                    assert!((total - 1.0).abs() < 0.01, "{name}: scores sum to {total}");
                }
            }
            let s = evaluator::score_case(&bundle, &view, &x);
            assert_eq!(s.profiler, *name);
        }
    }
    eprintln!("answered {answered:?}, abstained {abstained:?}");
    // Idle time answers the kernel and the copy symptom; launch stats the copy only
    // (the kernels are CuPy's, launched by cuLaunchKernel, which HTA does not list).
    assert!(answered[hta_analyses::IDLE_TIME] >= 2);
    assert!(answered[hta_analyses::LAUNCH_STATS] >= 1);
    assert!(abstained[hta_analyses::LAUNCH_STATS] > abstained[hta_analyses::IDLE_TIME]);
}
