//! Cluster bootstrap of the leaderboard's rates (evaluator/METRICS.md, "Confidence
//! intervals"). Every rate is a ratio of two sums over cases or pair units; the
//! independent unit resampled is the family instance (a cluster), so repetitions of
//! one run and the variants of one instance never count as independent evidence.

use ground_truth::seed::mix;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Resamples per interval.
pub const RESAMPLES: usize = 2000;
/// Two-sided level of the intervals.
pub const LEVEL: f64 = 0.95;

/// A 95 % percentile bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

/// One cluster's contribution to K rates: rate i = Σ num[i] / Σ den[i] over clusters.
pub(crate) type Tally<const K: usize> = [(f64, f64); K];

/// A seed that depends only on the data: the text naming what is resampled (row,
/// axis, bucket) and the clusters' keys in their canonical order.
pub(crate) fn seed_of<'a>(label: &str, cluster_keys: impl IntoIterator<Item = &'a str>) -> u64 {
    let mut h = fold(0x6361_7573_616c_6231, label);
    for k in cluster_keys {
        h = fold(mix(h), k);
    }
    h
}

fn fold(mut h: u64, text: &str) -> u64 {
    for chunk in text.as_bytes().chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = mix(h ^ u64::from_le_bytes(word));
    }
    mix(h ^ text.len() as u64)
}

/// Percentile intervals of K rates: [`RESAMPLES`] draws of `clusters.len()` clusters
/// with replacement, each draw's rate i = Σ num / Σ den (draws where Σ den = 0 are
/// left out of that rate's distribution). `None` where no draw defines the rate.
/// Deterministic in (`clusters`, `seed`).
pub(crate) fn intervals<const K: usize>(clusters: &[Tally<K>], seed: u64) -> [Option<Interval>; K] {
    let n = clusters.len();
    let mut draws: [Vec<f64>; K] = std::array::from_fn(|_| Vec::with_capacity(RESAMPLES));
    if n == 0 {
        return [None; K];
    }
    let mut state = seed;
    for _ in 0..RESAMPLES {
        let mut sum: Tally<K> = [(0.0, 0.0); K];
        for _ in 0..n {
            state = mix(state);
            // Multiply-shift maps 64 random bits onto 0..n without a modulo's bias.
            let pick = ((u128::from(state) * n as u128) >> 64) as usize;
            for (s, c) in sum.iter_mut().zip(&clusters[pick]) {
                s.0 += c.0;
                s.1 += c.1;
            }
        }
        for (d, (num, den)) in draws.iter_mut().zip(sum) {
            if den > 0.0 {
                d.push(num / den);
            }
        }
    }
    draws.map(|mut d| percentile_interval(&mut d))
}

/// Nearest-rank percentiles: of m sorted values, the ⌈m·α/2⌉-th and the ⌈m·(1 − α/2)⌉-th.
fn percentile_interval(values: &mut [f64]) -> Option<Interval> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let m = values.len() as f64;
    let tail = (1.0 - LEVEL) / 2.0;
    let rank = |q: f64| ((m * q).ceil() as usize).clamp(1, values.len()) - 1;
    Some(Interval {
        low: values[rank(tail)],
        high: values[rank(1.0 - tail)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_clusters_give_a_point_interval() {
        let c = [[(1.0, 2.0)]; 5];
        let [i] = intervals(&c, 7);
        assert_eq!(
            i,
            Some(Interval {
                low: 0.5,
                high: 0.5
            })
        );
    }

    #[test]
    fn no_denominator_no_interval() {
        let c = [[(0.0, 0.0)]; 3];
        assert_eq!(intervals(&c, 1), [None]);
        assert_eq!(intervals::<1>(&[], 1), [None]);
    }

    #[test]
    fn the_seed_depends_on_label_and_keys() {
        let a = seed_of("row", ["x", "y"]);
        assert_eq!(a, seed_of("row", ["x", "y"]));
        assert_ne!(a, seed_of("row", ["y", "x"]));
        assert_ne!(a, seed_of("other", ["x", "y"]));
        assert_ne!(seed_of("ab", ["c"]), seed_of("a", ["bc"]));
    }
}
