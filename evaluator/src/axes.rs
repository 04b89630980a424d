//! The per-axis breakdown (evaluator/METRICS.md, "Per-axis breakdown"): where in the
//! scenario space each profiler breaks. Generated scenarios carry their sampled axes
//! (`manifest.scenario.space`); numeric axes are put in the documented bins, category
//! axes are their own buckets. Catalog cases have no axes and appear in no bucket.

use crate::bootstrap::{intervals, seed_of, Interval, Tally};
use crate::buckets::{bucket, headline_class, Bucket, HEADLINE_AXIS};
use crate::pairs::{InstanceKey, PairCount, PairKey, PairUnit};
use crate::rounding::round6;
use crate::score::{ratio, CaseScore};
use ground_truth::{Collectors, Mode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Pair accuracy and top-1 of one profiler × collectors × mode on one bucket of one axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AxisRow {
    pub profiler: String,
    pub collectors: Collectors,
    pub mode: Mode,
    pub axis: String,
    pub bucket: String,
    /// Family instances (the bootstrap's independent units) with a case in the bucket.
    pub instances: u64,
    /// Loss-free cases in the bucket.
    pub cases: u64,
    /// Pair units in the bucket.
    pub pairs: u64,
    pub pair_accuracy: Option<f64>,
    pub pair_accuracy_ci: Option<Interval>,
    /// Loss-free symptoms in the bucket.
    pub symptoms: u64,
    pub root_cause_top1: Option<f64>,
    pub root_cause_top1_ci: Option<Interval>,
}

/// The acceptance headline: pair accuracy of a profiler on one backend, combined
/// collectors, instrumented, on pairs with magnitude ratio below or at/above 0.3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeadlineRow {
    pub profiler: String,
    pub backend: String,
    /// `<0.3` or `>=0.3` (`mixed`: the pair's variants sit on both sides).
    pub magnitude_ratio: String,
    pub pairs: u64,
    pub pair_accuracy: Option<f64>,
    pub pair_accuracy_ci: Option<Interval>,
}

/// Counts of one bucket within one instance.
#[derive(Default)]
struct Cell {
    cases: u64,
    symptoms: u64,
    top1: u64,
    pairs: PairCount,
}

/// (collectors, mode, axis, bucket, profiler): rows come out in bucket order per axis.
type AxisKey = (Collectors, Mode, String, Bucket, String);

fn rounded(i: Option<Interval>) -> Option<Interval> {
    i.map(|i| Interval {
        low: round6(i.low),
        high: round6(i.high),
    })
}

/// The per-axis rows and the headline, from the loss-free cases (in canonical order)
/// and the pair units.
pub(crate) fn breakdown(
    loss_free: &[&CaseScore],
    units: &BTreeMap<PairKey, PairUnit>,
) -> (Vec<AxisRow>, Vec<HeadlineRow>) {
    let mut cells: BTreeMap<AxisKey, BTreeMap<InstanceKey, Cell>> = BTreeMap::new();
    for c in loss_free {
        for (axis, value) in &c.axes {
            let Some(b) = bucket(axis, value) else {
                continue;
            };
            let cell = cells
                .entry((c.collectors, c.mode, axis.clone(), b, c.profiler.clone()))
                .or_default()
                .entry(InstanceKey::of(c))
                .or_default();
            cell.cases += 1;
            cell.symptoms += c.symptoms.len() as u64;
            cell.top1 += c.symptoms.iter().filter(|s| s.top1).count() as u64;
        }
    }
    let mut headline: BTreeMap<(String, String, Bucket), BTreeMap<InstanceKey, PairCount>> =
        BTreeMap::new();
    for (key, unit) in units {
        let score = unit.score();
        if score.is_none() {
            continue;
        }
        for axis in unit.axes() {
            let Some(b) = unit.bucket_of(axis, bucket) else {
                continue;
            };
            cells
                .entry((
                    key.collectors,
                    key.mode,
                    axis.to_string(),
                    b,
                    key.profiler.clone(),
                ))
                .or_default()
                .entry(key.unit.clone())
                .or_default()
                .pairs
                .add(score);
        }
        if key.collectors == Collectors::Combined && key.mode == Mode::Instrumented {
            if let Some(class) = unit.bucket_of(HEADLINE_AXIS, headline_class) {
                headline
                    .entry((key.profiler.clone(), key.backend.clone(), class))
                    .or_default()
                    .entry(key.unit.clone())
                    .or_default()
                    .add(score);
            }
        }
    }

    let mut rows = Vec::new();
    for ((collectors, mode, axis, b, profiler), by_instance) in &cells {
        let tallies: Vec<Tally<2>> = by_instance
            .values()
            .map(|c| {
                [
                    (c.pairs.score_sum, c.pairs.pairs as f64),
                    (c.top1 as f64, c.symptoms as f64),
                ]
            })
            .collect();
        let labels: Vec<String> = by_instance.keys().map(InstanceKey::label).collect();
        let seed = seed_of(
            &format!(
                "axis {profiler} {} {} {axis} {}",
                collectors.as_str(),
                mode.as_str(),
                b.label
            ),
            labels.iter().map(String::as_str),
        );
        let [pair_ci, top1_ci] = intervals(&tallies, seed);
        let mut pairs = PairCount::default();
        let (mut cases, mut symptoms, mut top1) = (0, 0, 0);
        for c in by_instance.values() {
            pairs.pairs += c.pairs.pairs;
            pairs.score_sum += c.pairs.score_sum;
            cases += c.cases;
            symptoms += c.symptoms;
            top1 += c.top1;
        }
        rows.push(AxisRow {
            profiler: profiler.clone(),
            collectors: *collectors,
            mode: *mode,
            axis: axis.clone(),
            bucket: b.label.clone(),
            instances: by_instance.len() as u64,
            cases,
            pairs: pairs.pairs,
            pair_accuracy: pairs.accuracy().map(round6),
            pair_accuracy_ci: rounded(pair_ci),
            symptoms,
            root_cause_top1: ratio(top1, symptoms).map(round6),
            root_cause_top1_ci: rounded(top1_ci),
        });
    }

    let mut heads = Vec::new();
    for ((profiler, backend, class), by_instance) in &headline {
        let tallies: Vec<Tally<1>> = by_instance
            .values()
            .map(|p| [(p.score_sum, p.pairs as f64)])
            .collect();
        let labels: Vec<String> = by_instance.keys().map(InstanceKey::label).collect();
        let seed = seed_of(
            &format!("headline {profiler} {backend} {}", class.label),
            labels.iter().map(String::as_str),
        );
        let [ci] = intervals(&tallies, seed);
        let mut total = PairCount::default();
        for p in by_instance.values() {
            total.pairs += p.pairs;
            total.score_sum += p.score_sum;
        }
        heads.push(HeadlineRow {
            profiler: profiler.clone(),
            backend: backend.clone(),
            magnitude_ratio: class.label.clone(),
            pairs: total.pairs,
            pair_accuracy: total.accuracy().map(round6),
            pair_accuracy_ci: rounded(ci),
        });
    }
    (rows, heads)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ground_truth::scenario::AxisValue;

    fn label(axis: &str, x: f64) -> String {
        bucket(axis, &AxisValue::Number(x)).unwrap().label
    }

    #[test]
    fn numeric_axes_fall_in_the_documented_bins() {
        let gating: Vec<String> = [1.0, 2.0, 3.0, 4.0, 5.0, 8.0, 9.0]
            .iter()
            .map(|&x| label("gating_depth", x))
            .collect();
        assert_eq!(gating, ["1", "2", "3-4", "3-4", "5-8", "5-8", "9+"]);
        let magnitude: Vec<String> = [0.1, 0.29, 0.3, 0.99, 1.0, 2.9, 3.0, 10.0]
            .iter()
            .map(|&x| label("magnitude_ratio", x))
            .collect();
        assert_eq!(
            magnitude,
            ["<0.3", "<0.3", "0.3-1", "0.3-1", "1-3", "1-3", ">=3", ">=3"]
        );
        assert_eq!(label("graph_nodes", 0.0), "0");
        assert_eq!(label("graph_nodes", 2.0), "2-4");
        assert_eq!(label("graph_nodes", 16.0), "9-16");
        assert_eq!(label("requests", 3.0), "2-3");
        assert_eq!(label("requests", 8.0), "4-8");
        assert!(bucket("requests", &AxisValue::Number(f64::NAN)).is_none());
    }

    #[test]
    fn buckets_order_numbers_then_categories_then_mixed() {
        let one = bucket("gating_depth", &AxisValue::Number(1.0)).unwrap();
        let nine = bucket("gating_depth", &AxisValue::Number(9.0)).unwrap();
        let clean = bucket("peers", &AxisValue::Category("clean".into())).unwrap();
        let none = bucket("peers", &AxisValue::Category("none".into())).unwrap();
        assert!(one < nine && clean < none && none < Bucket::mixed());
    }
}
