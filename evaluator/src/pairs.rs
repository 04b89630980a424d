//! Pair units (evaluator/METRICS.md, "Pair accuracy"): the variants of one family
//! instance, on one backend and one view, with their repetitions. A pair unit is one
//! independent pair however often it was run: its score is the share of its
//! repetitions in which every variant was diagnosed right.

use crate::buckets::Bucket;
use crate::score::CaseScore;
use ground_truth::scenario::AxisValue;
use ground_truth::{Collectors, Mode};
use std::collections::{BTreeMap, BTreeSet};

/// The independent unit of the leaderboard's statistics: a generated family
/// instance, or a whole catalog family (its scenarios carry no instance, and all
/// of its variants and repetitions share one hand-written structure).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct InstanceKey {
    pub family: String,
    pub instance: Option<u64>,
}

impl InstanceKey {
    pub fn of(c: &CaseScore) -> InstanceKey {
        InstanceKey {
            family: c.family.clone(),
            instance: c.instance,
        }
    }

    /// The text the bootstrap seed is derived from: `family` or `family#instance`.
    pub fn label(&self) -> String {
        match self.instance {
            Some(i) => format!("{}#{i}", self.family),
            None => self.family.clone(),
        }
    }
}

/// Which pair unit a loss-free case belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PairKey {
    pub unit: InstanceKey,
    pub backend: String,
    /// Recordings under different CUPTI versions are different pair units.
    pub cupti: String,
    pub profiler: String,
    pub collectors: Collectors,
    pub mode: Mode,
}

impl PairKey {
    pub fn of(c: &CaseScore) -> PairKey {
        PairKey {
            unit: InstanceKey::of(c),
            backend: c.backend.clone(),
            cupti: c.cupti.clone(),
            profiler: c.profiler.clone(),
            collectors: c.collectors,
            mode: c.mode,
        }
    }
}

/// The cases of one pair unit: repetition → variant → every symptom right; and the
/// axis values of its cases.
#[derive(Default)]
pub(crate) struct PairUnit {
    reps: BTreeMap<u32, BTreeMap<String, bool>>,
    axes: BTreeMap<String, Vec<AxisValue>>,
}

impl PairUnit {
    /// Adds a loss-free case; a case with no scored symptom says nothing about the pair.
    pub fn add(&mut self, c: &CaseScore) {
        if c.symptoms.is_empty() {
            return;
        }
        let ok = self
            .reps
            .entry(c.repetition)
            .or_default()
            .entry(c.variant.clone())
            .or_insert(true);
        *ok &= c.all_correct();
        for (axis, value) in &c.axes {
            let values = self.axes.entry(axis.clone()).or_default();
            if !values.contains(value) {
                values.push(value.clone());
            }
        }
    }

    /// The share of repetitions (those with ≥ 2 variants scored) in which every
    /// variant was right; `None` when no repetition is a pair.
    pub fn score(&self) -> Option<f64> {
        let verdicts: Vec<bool> = self
            .reps
            .values()
            .filter(|variants| variants.len() >= 2)
            .map(|variants| variants.values().all(|&ok| ok))
            .collect();
        (!verdicts.is_empty())
            .then(|| verdicts.iter().filter(|&&ok| ok).count() as f64 / verdicts.len() as f64)
    }

    /// The unit's bucket of `axis` under `bins`: the one its cases share,
    /// [`Bucket::mixed`] when its variants fall in different buckets, `None` when no
    /// case has a binnable value of the axis.
    pub fn bucket_of(
        &self,
        axis: &str,
        bins: impl Fn(&str, &AxisValue) -> Option<Bucket>,
    ) -> Option<Bucket> {
        let set: BTreeSet<Bucket> = self
            .axes
            .get(axis)?
            .iter()
            .filter_map(|v| bins(axis, v))
            .collect();
        match set.len() {
            0 => None,
            1 => set.into_iter().next(),
            _ => Some(Bucket::mixed()),
        }
    }

    /// Every axis some case of the unit has.
    pub fn axes(&self) -> impl Iterator<Item = &str> {
        self.axes.keys().map(String::as_str)
    }
}

/// Pair units counted and the sum of their scores.
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct PairCount {
    pub pairs: u64,
    pub score_sum: f64,
}

impl PairCount {
    pub fn add(&mut self, score: Option<f64>) {
        if let Some(s) = score {
            self.pairs += 1;
            self.score_sum += s;
        }
    }
    pub fn accuracy(&self) -> Option<f64> {
        (self.pairs > 0).then(|| self.score_sum / self.pairs as f64)
    }
}
