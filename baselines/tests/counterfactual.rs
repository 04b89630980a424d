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
