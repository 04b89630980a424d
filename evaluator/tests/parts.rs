//! The rates of a part of the scores (the HTML site's family and question pages) agree
//! with the leaderboard's where the part is everything, and carry an interval.

mod common;

use common::*;
use evaluator::{part_rates, score_case, Leaderboard};
use ground_truth::view::LossSpec;
use ground_truth::{CauseLabel, RankedCause};

#[test]
fn the_whole_as_a_part_has_the_leaderboard_rates_and_intervals_around_them() {
    let mut scores = Vec::new();
    for (variant, cause) in [
        ("a", CauseLabel::StreamBacklog),
        ("b", CauseLabel::OccupancyPressure),
    ] {
        for repetition in 0..3 {
            let f = Fixture::with(
                Rids::DENSE,
                "late-launch-vs-device-queueing",
                variant,
                cause,
                repetition,
            );
            let view = f.view(&[], LossSpec::None);
            scores.push(score_case(&f.bundle, &view, &f.perfect("causal-graph")));
            let mut lazy = f.perfect("timestamp-join");
            lazy.diagnoses[0].causes = vec![RankedCause {
                label: CauseLabel::StreamBacklog,
                score: 1.0,
            }];
            scores.push(score_case(&f.bundle, &view, &lazy));
        }
    }
    let lb = Leaderboard::from_scores(&scores);
    let parts = part_rates(&scores, "all", |_| true, |_| true);
    assert_eq!(parts.len(), lb.rows.len());
    for row in &lb.rows {
        let p = &parts[&(row.profiler.clone(), row.collectors, row.mode)];
        assert_eq!(p.pair_accuracy, row.pair_accuracy, "{}", row.profiler);
        assert_eq!(p.symptom_accuracy, row.symptom_accuracy, "{}", row.profiler);
        assert_eq!(p.pairs, row.pairs);
        for (v, ci) in [
            (p.pair_accuracy, p.pair_accuracy_ci),
            (p.symptom_accuracy, p.symptom_accuracy_ci),
        ] {
            let (v, ci) = (v.unwrap(), ci.unwrap());
            assert!(ci.low <= v && v <= ci.high, "{v} outside {ci:?}");
        }
    }
    // A part that keeps nothing has no row.
    assert!(part_rates(&scores, "none", |c| c.family == "other", |_| true).is_empty());
}
