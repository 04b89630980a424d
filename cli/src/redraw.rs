//! Re-drawing what the label check dropped (docs/scenario-space.md, "Cases that survive
//! the noise"): an instance of a generated split with a variant whose label did not
//! hold on the backend that recorded it is replaced by another instance of its family
//! (`scenario_space::redrawn_instance`), recorded like the rest, at most
//! [`MAX_REDRAWS`] times over. `run` (`run/redraw.rs`) and `corpus record` re-draw
//! through this; the dropped cases keep their verdicts, listed beside what replaced
//! them.

use ground_truth::graph::LabelVerdict;
use ground_truth::Scenario;
use std::collections::BTreeMap;

/// How many rounds of re-draws a recording makes: a family whose instances still drop
/// after that keeps its drops, and its yield says so.
pub const MAX_REDRAWS: u32 = 2;

/// One re-drawn instance: the instance whose variant dropped, the one drawn in its
/// place (both `FAMILY.SPLITNNNNN`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Redrawn {
    pub dropped: String,
    pub replacement: String,
}

/// The instance a generated scenario belongs to: its name without the variant.
pub fn instance_name(sc: &Scenario) -> &str {
    sc.name.rsplit_once('.').map_or(&sc.name, |(i, _)| i)
}

/// What replaces, in `split` drawn from `seed`, every instance of `recorded` (a
/// scenario, a repetition, its label verdict) with a case the label check dropped:
/// each such instance once, every variant of its replacement with as many
/// repetitions as its cases had. Scenarios not of a generated split are never
/// re-drawn.
pub fn replacements<'a>(
    split: scenario_space::Split,
    seed: u64,
    recorded: impl IntoIterator<Item = (&'a Scenario, u32, Option<LabelVerdict>)>,
) -> (Vec<(Scenario, u32)>, Vec<Redrawn>) {
    // Instance → (its index, the repetitions recorded of it).
    let mut dropped: BTreeMap<String, (u64, u32)> = BTreeMap::new();
    for (scenario, repetition, verdict) in recorded {
        let Some(index) = scenario_space::instance_index(scenario) else {
            continue;
        };
        if verdict == Some(LabelVerdict::Dropped) {
            let entry = dropped
                .entry(instance_name(scenario).to_string())
                .or_insert((index, 0));
            entry.1 = entry.1.max(repetition + 1);
        }
    }
    let mut more = Vec::new();
    let mut redrawn = Vec::new();
    for (name, (index, repetitions)) in dropped {
        let scenarios = scenario_space::redrawn_instance(split, seed, index);
        let Some(first) = scenarios.first() else {
            continue;
        };
        redrawn.push(Redrawn {
            dropped: name,
            replacement: instance_name(first).to_string(),
        });
        for scenario in scenarios {
            for repetition in 0..repetitions {
                more.push((scenario.clone(), repetition));
            }
        }
    }
    (more, redrawn)
}
