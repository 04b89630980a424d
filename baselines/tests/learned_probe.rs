//! Standing audit (issue 34, docs/integrity.md "A learned probe"): a probe that learns
//! surface statistics instead of analysing — nearest centroid per cause over a
//! query's record counts and durations (`baselines::probes::LearnedSurface`) — is
//! fitted on the dev split and scored on a fresh split. Its pair accuracy there must
//! stay under the leakage ceiling: above it, the views' surface gives the answer away
//! in a way a trained model can pick up even when no hand-written rule does.

use baselines::probes::{surface_features, LearnedSurface};
use baselines::Profiler;
use ground_truth::{Bundle, Collectors, Mode, Question};
use scenario_space::Split;

/// The leakage ceiling of cli/tests/leakage.rs and docs/integrity.md ("Chance level
/// and the ceiling"): chance plus one family of the twelve.
const CEILING: f64 = 0.25;
/// Scenarios of each split: whole family instances, every family several times, and
/// seconds of simulation (CI time stays flat).
const CASES: usize = 200;
/// The fresh split's seed: fixed, so that CI is reproducible, and not the dev split's.
const FRESH_SEED: u64 = 0x7e57_1ea4_ed00_0001;

/// The split's bundles, each with its label verdict kept (as `run` keeps them).
fn recorded(split: Split, seed: u64) -> Vec<Bundle> {
    let backend = generator::select_backend(generator::BackendKind::Sim).unwrap();
    scenario_space::generate(split, seed, CASES)
        .iter()
        .map(|sc| backend.record(sc, 0).unwrap())
        .filter(|b| {
            b.ground_truth
                .symptoms
                .first()
                .and_then(|s| s.label.as_ref())
                .is_none_or(|l| l.verdict.is_scored())
        })
        .collect()
}

/// The view the leaderboard ranks by: combined collectors, instrumented, no loss.
fn headline_view(b: &Bundle) -> ground_truth::TraceView {
    let spec = views::standard_specs(0)
        .into_iter()
        .find(|s| {
            s.collectors == Collectors::Combined
                && s.mode == Mode::Instrumented
                && s.loss.label() == "none"
        })
        .unwrap();
    views::derive(b, spec).view
}

#[test]
fn a_probe_trained_on_the_dev_split_stays_under_the_ceiling_on_a_fresh_split() {
    let mut examples = Vec::new();
    for b in recorded(Split::Dev, scenario_space::DEV_SEED) {
        let view = headline_view(&b);
        for q in view
            .queries
            .iter()
            .filter(|q| q.question == Question::Cause)
        {
            if let Some(s) = b.ground_truth.symptoms.iter().find(|s| s.id == q.id) {
                examples.push((surface_features(&view, q), s.cause));
            }
        }
    }
    assert!(examples.len() >= CASES / 2, "{} examples", examples.len());
    let probe = LearnedSurface::fit(&examples);
    let fitted = examples
        .iter()
        .filter(|(f, label)| probe.predict(f) == *label)
        .count() as f64
        / examples.len() as f64;

    let scores: Vec<evaluator::CaseScore> = recorded(Split::Test, FRESH_SEED)
        .iter()
        .map(|b| {
            let view = headline_view(b);
            evaluator::score_case(b, &view, &probe.explain(&view))
        })
        .collect();
    let lb = evaluator::Leaderboard::from_scores(&scores);
    let (pairs, correct) = lb
        .families_pooled
        .iter()
        .filter(|f| f.profiler == "probe-learned")
        .fold((0u64, 0.0), |(n, c), f| (n + f.pairs, c + f.pairs_correct));
    assert!(pairs >= 10, "only {pairs} pairs on the fresh split");
    let accuracy = correct / pairs as f64;
    eprintln!(
        "probe-learned: {:.3} of its {} dev examples fitted; pair accuracy on a fresh split \
         {accuracy:.3} ({correct}/{pairs}), ceiling {CEILING}",
        fitted,
        examples.len()
    );
    assert!(
        accuracy <= CEILING,
        "surface statistics separate a fresh split's pairs: {accuracy:.3} > {CEILING}"
    );
}
