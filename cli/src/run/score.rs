//! The score stage: each explanation of a view scored against its bundle's truth by the
//! evaluator (`evaluator::score_case`), what the harness measured of an external
//! command's run kept beside its scores.

use super::profile::Explained;
use evaluator::CaseScore;
use ground_truth::{Bundle, TraceView};

/// The case scores of one view's explanations, in their order.
pub(super) fn score_explanations(
    bundle: &Bundle,
    view: &TraceView,
    explained: Vec<Explained>,
) -> Vec<CaseScore> {
    explained
        .into_iter()
        .map(
            |Explained {
                 explanation,
                 invocation,
             }| {
                let mut score = evaluator::score_case(bundle, view, &explanation);
                score.invocation = invocation;
                score
            },
        )
        .collect()
}
