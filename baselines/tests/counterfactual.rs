//! The reference's counterfactual reading (`src/causal_graph/candidates.rs`,
//! `counterfactual.rs`; baselines/README.md, "The algorithm" step 6) on the
//! pipelined micro-batches of the dev split recorded on the simulator: a slow
//! stage 2 of an earlier micro-batch reaches the asked stage 1 through the
//! events between them, so every later micro-batch is late with it and the
//! symptom's peers show no lateness; removing the slow stage from the graph
//! moves the symptom, and the event it passed through names it. In the
//! harmless variant of the same instance (unrelated work on a stream of its
//! own) no candidate moves the symptom.

use baselines::builtin;
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Bundle, CauseLabel, Collectors, Mode, Scenario};
use scenario_space::{generate, Split, DEV_SEED};

const COMBINED: ViewSpec = ViewSpec {
    collectors: Collectors::Combined,
    mode: Mode::Instrumented,
    loss: LossSpec::None,
};

fn record(sc: &Scenario) -> Bundle {
    generator::select_backend(generator::BackendKind::Sim)
        .unwrap()
        .record(sc, 0)
        .unwrap()
}

/// The dev split's first pipelined micro-batches instance, by variant name.
fn pipeline_variant(variant: &str) -> Scenario {
    generate(Split::Dev, DEV_SEED, 300)
        .into_iter()
        .find(|s| s.name.starts_with("pipelined-microbatches.") && s.name.ends_with(variant))
        .expect("the dev split has a pipelined micro-batches instance")
}

/// (the symptom's true cause, causal-graph's top cause) in the combined
/// instrumented view.
fn verdict(sc: &Scenario) -> (CauseLabel, CauseLabel) {
    let bundle = record(sc);
    let view = views::derive(&bundle, COMBINED).view;
    let explanation = builtin("causal-graph").unwrap().explain(&view);
    let score = evaluator::score_case(&bundle, &view, &explanation);
    let truth = score.symptoms[0].true_cause;
    (truth, explanation.diagnoses[0].causes[0].label)
}

#[test]
fn a_slow_stage_upstream_is_found_by_removing_it() {
    let sc = pipeline_variant(".upstream-stage-slow");
    let (truth, claimed) = {
        cov_mark::check!(counterfactual_root);
        verdict(&sc)
    };
    assert_eq!(truth, CauseLabel::EventWait, "{}", sc.name);
    assert_eq!(claimed, CauseLabel::EventWait, "{}", sc.name);
}

/// Must not: the harmless variant's unrelated work, on a stream of its own,
/// gates nothing the symptom waits for, so no candidate moves it and the
/// counterfactual names nothing (what the rules before it read stands: in
/// this instance the simulator's jitter makes them read `event_wait`, a
/// failure of theirs that baselines/README.md lists).
#[test]
fn unrelated_work_moves_nothing() {
    let sc = pipeline_variant(".harmless");
    cov_mark::check_count!(counterfactual_root, 0);
    let (truth, _) = verdict(&sc);
    assert_eq!(truth, CauseLabel::None, "{}", sc.name);
}

const CLOSED: ViewSpec = ViewSpec {
    collectors: Collectors::Combined,
    mode: Mode::Closed,
    loss: LossSpec::None,
};

/// The dev split's first training-step instance, by variant name.
fn training_step_variant(variant: &str) -> Scenario {
    generate(Split::Dev, DEV_SEED, 300)
        .into_iter()
        .find(|s| s.name.starts_with("training-step.") && s.name.ends_with(variant))
        .expect("the dev split has a training-step instance")
}

/// (the symptom's true cause, causal-graph's top cause) in the combined
/// closed view: no request tokens, no markers; the host collector's records
/// join the main thread's calls by thread and time.
fn closed_verdict(sc: &Scenario) -> (CauseLabel, CauseLabel) {
    let bundle = record(sc);
    let view = views::derive(&bundle, CLOSED).view;
    let explanation = builtin("causal-graph").unwrap().explain(&view);
    let score = evaluator::score_case(&bundle, &view, &explanation);
    (
        score.symptoms[0].true_cause,
        explanation.diagnoses[0].causes[0].label,
    )
}

/// Closed mode: the previous step's loss readback (a pageable copy, blocking
/// its launch call) waited for a kernel the injection lengthened, and this
/// step's work was launched only after that call returned. The call returns
/// when its copy ends, so removing the kernel's excess moves the symptom
/// through the call (the blocked call's coupling in `counterfactual.rs`), and
/// the `sync` the delay passed through names it.
#[test]
fn closed_mode_finds_the_previous_steps_fence_through_the_blocked_call() {
    let sc = training_step_variant(".previous-step-fence");
    let (truth, claimed) = {
        cov_mark::check!(counterfactual_blocked_call);
        closed_verdict(&sc)
    };
    assert_eq!(truth, CauseLabel::ImplicitSync, "{}", sc.name);
    assert_eq!(claimed, CauseLabel::ImplicitSync, "{}", sc.name);
}

/// Must not: in the harmless variant of the same instance nothing upstream
/// ran long against its peers, and the symptom's launch is joined to the
/// thread's previous call (its host gap measured), so `none` comes first.
#[test]
fn closed_mode_reads_none_where_every_measured_phase_is_clean() {
    let sc = training_step_variant(".harmless");
    let (truth, claimed) = closed_verdict(&sc);
    assert_eq!(truth, CauseLabel::None, "{}", sc.name);
    assert_eq!(claimed, CauseLabel::None, "{}", sc.name);
}
