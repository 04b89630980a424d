//! Rates of a part of the case scores (one family, one question type) per leaderboard
//! row, with the cluster-bootstrap intervals the leaderboard gives its own rates
//! (evaluator/METRICS.md, "Confidence intervals"): what the HTML site's family and
//! question pages show.

use crate::bootstrap::{intervals, seed_of, Interval, Tally};
use crate::leaderboard::round6;
use crate::pairs::{InstanceKey, PairCount, PairKey, PairUnit};
use crate::score::{CaseScore, SymptomScore};
use ground_truth::{Collectors, Mode};
use std::collections::BTreeMap;

/// Loss-free rates of one row on the part.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartRates {
    /// Pair units counted and their accuracy (evaluator/METRICS.md, "Pair accuracy").
    pub pairs: u64,
    pub pair_accuracy: Option<f64>,
    pub pair_accuracy_ci: Option<Interval>,
    /// Symptoms kept, of them answered right, and their share.
    pub symptoms: u64,
    pub correct: u64,
    pub symptom_accuracy: Option<f64>,
    pub symptom_accuracy_ci: Option<Interval>,
}

/// Per (profiler, collectors, mode): the rates of the loss-free cases that pass
/// `keep_case`, symptom accuracy over their symptoms that pass `keep_symptom`. The
/// resampled unit is the family instance, as in the leaderboard; `part` names the
/// part in the bootstrap's seed, so that each part's intervals are reproducible.
pub fn part_rates(
    scores: &[CaseScore],
    part: &str,
    keep_case: impl Fn(&CaseScore) -> bool,
    keep_symptom: impl Fn(&SymptomScore) -> bool,
) -> BTreeMap<(String, Collectors, Mode), PartRates> {
    type Row = (String, Collectors, Mode);
    // Row → instance → (pairs, symptoms right, symptoms).
    let mut cells: BTreeMap<Row, BTreeMap<InstanceKey, (PairCount, u64, u64)>> = BTreeMap::new();
    let mut units: BTreeMap<PairKey, PairUnit> = BTreeMap::new();
    for c in scores.iter().filter(|c| c.is_loss_free() && keep_case(c)) {
        units.entry(PairKey::of(c)).or_default().add(c);
        let cell = cells
            .entry((c.profiler.clone(), c.collectors, c.mode))
            .or_default()
            .entry(InstanceKey::of(c))
            .or_default();
        for s in c.symptoms.iter().filter(|s| keep_symptom(s)) {
            cell.1 += u64::from(s.correct);
            cell.2 += 1;
        }
    }
    for (key, unit) in &units {
        if let Some(cell) = cells
            .get_mut(&(key.profiler.clone(), key.collectors, key.mode))
            .and_then(|by| by.get_mut(&key.unit))
        {
            cell.0.add(unit.score());
        }
    }
    cells
        .into_iter()
        .map(|(row, by_instance)| {
            let tallies: Vec<Tally<2>> = by_instance
                .values()
                .map(|(p, right, n)| [(p.score_sum, p.pairs as f64), (*right as f64, *n as f64)])
                .collect();
            let labels: Vec<String> = by_instance.keys().map(InstanceKey::label).collect();
            let seed = seed_of(
                &format!("{part} {} {} {}", row.0, row.1.as_str(), row.2.as_str()),
                labels.iter().map(String::as_str),
            );
            let [pair_ci, symptom_ci] = intervals(&tallies, seed);
            let rounded = |i: Option<Interval>| {
                i.map(|i| Interval {
                    low: round6(i.low),
                    high: round6(i.high),
                })
            };
            let (mut pairs, mut pair_sum, mut right, mut symptoms) = (0, 0.0, 0, 0);
            for (p, r, n) in by_instance.values() {
                pairs += p.pairs;
                pair_sum += p.score_sum;
                right += r;
                symptoms += n;
            }
            let rates = PartRates {
                pairs,
                pair_accuracy: (pairs > 0).then(|| round6(pair_sum / pairs as f64)),
                pair_accuracy_ci: rounded(pair_ci),
                symptoms,
                correct: right,
                symptom_accuracy: (symptoms > 0).then(|| round6(right as f64 / symptoms as f64)),
                symptom_accuracy_ci: rounded(symptom_ci),
            };
            (row, rates)
        })
        .collect()
}
