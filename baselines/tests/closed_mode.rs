//! The reference in closed mode (no request identity, no NVTX or task markers):
//! a thread's program order is joined by thread and time from the host
//! collector, and a host stall joined to the symptom's critical path is judged
//! by its counterfactual effect (baselines/README.md, step 4c). Must: the
//! stall scenarios read their stall in the combined/closed view. Must not: a
//! view without host records (nothing to join), an instrumented view (the
//! rules have the request's beginning) and a negative control.

use baselines::builtin;
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Bundle, CauseLabel, Collectors, EdgeType, Evidence, Mode, Readable, Scenario};
use std::path::PathBuf;

fn scenario(name: &str) -> Scenario {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let own = here.join(format!("tests/scenarios/{name}.yaml"));
    let path = if own.exists() {
        own
    } else {
        here.join(format!("../catalog/{name}.yaml"))
    };
    Scenario::read(&path).unwrap()
}

fn record(name: &str) -> Bundle {
    generator::select_backend(generator::BackendKind::Sim)
        .unwrap()
        .record(&scenario(name), 0)
        .unwrap()
}

fn view(collectors: Collectors, mode: Mode) -> ViewSpec {
    ViewSpec {
        collectors,
        mode,
        loss: LossSpec::None,
    }
}

/// (true cause, claimed top cause) of every symptom of `name` in `spec`.
fn verdicts(name: &str, spec: ViewSpec) -> Vec<(CauseLabel, Option<CauseLabel>)> {
    let b = record(name);
    let v = views::derive(&b, spec).view;
    let x = builtin("causal-graph").unwrap().explain(&v);
    let s = evaluator::score_case(&b, &v, &x);
    assert!(!s.symptoms.is_empty(), "{name}: no symptom");
    s.symptoms
        .iter()
        .map(|y| (y.true_cause, y.claimed_cause))
        .collect()
}

const STALLS: [&str; 4] = [
    "host-page-fault-vs-cpu-stall.page-fault",
    "host-page-fault-vs-cpu-stall.preempted",
    "host-stall-before-long-kernel.deschedule",
    "host-stall-before-long-kernel.page-fault",
];

#[test]
fn a_stall_joined_by_thread_and_time_names_the_cause_in_closed_mode() {
    cov_mark::check!(closed_mode_joined_stall);
    for name in STALLS {
        for (truth, claimed) in verdicts(name, view(Collectors::Combined, Mode::Closed)) {
            assert_eq!(Some(truth), claimed, "{name}, combined/closed");
        }
    }
}

#[test]
fn without_host_records_nothing_is_joined() {
    cov_mark::check_count!(closed_mode_joined_stall, 0);
    for name in STALLS {
        let b = record(name);
        let v = views::derive(&b, view(Collectors::Cupti, Mode::Closed)).view;
        let x = builtin("causal-graph").unwrap().explain(&v);
        for d in &x.diagnoses {
            let top = d.causes.first().map(|c| c.label);
            assert!(
                !matches!(
                    top,
                    Some(CauseLabel::CpuDeschedule | CauseLabel::HostPageFault)
                ) || !d.complete,
                "{name}, cupti/closed: a host stall named with no host record: {d:?}"
            );
        }
    }
}

#[test]
fn instrumented_views_keep_their_own_reading() {
    cov_mark::check_count!(closed_mode_joined_stall, 0);
    for name in STALLS {
        for (truth, claimed) in verdicts(name, view(Collectors::Combined, Mode::Instrumented)) {
            assert_eq!(Some(truth), claimed, "{name}, combined/instrumented");
        }
    }
}

#[test]
fn unrelated_work_is_no_stall() {
    // A negative control: no stall is injected, the natural ones are small.
    cov_mark::check_count!(closed_mode_joined_stall, 0);
    let _ = verdicts(
        "concurrent-work.harmless",
        view(Collectors::Combined, Mode::Closed),
    );
}

#[test]
fn joined_program_order_stays_inferred_below_observed_confidence() {
    let b = record("host-page-fault-vs-cpu-stall.page-fault");
    let v = views::derive(&b, view(Collectors::Combined, Mode::Closed)).view;
    let x = builtin("causal-graph").unwrap().explain(&v);
    let host_order: Vec<_> = x
        .edges
        .iter()
        .filter(|e| e.kind == EdgeType::HostOrder)
        .collect();
    assert!(!host_order.is_empty());
    for e in host_order {
        assert_eq!(e.evidence, Evidence::Inferred, "{e:?}");
        assert!(e.confidence < 0.8, "{e:?}");
    }
}
