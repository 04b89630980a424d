//! Where a profiler loses, per collectors × mode (the HTML leaderboard's "why it loses"):
//! its loss-free symptoms tallied by family and by question type, and the phase its
//! wrong phase blame lands on (`overblamed_phase`, evaluator/METRICS.md §1.5). Computed
//! from case scores alone.

use crate::score::CaseScore;
use ground_truth::{Collectors, Mode};
use std::collections::BTreeMap;

/// Loss-free symptoms of one group and how many were answered correctly.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tally {
    /// The family, question type or phase the symptoms share.
    pub key: String,
    pub symptoms: u64,
    pub correct: u64,
}

impl Tally {
    /// Correct / symptoms; `None` without symptoms.
    pub fn accuracy(&self) -> Option<f64> {
        crate::score::ratio(self.correct, self.symptoms)
    }
    /// Symptoms answered wrongly.
    pub fn wrong(&self) -> u64 {
        self.symptoms - self.correct
    }
}

/// Where one profiler × collectors × mode loses, over loss-free cases.
#[derive(Debug, Clone, PartialEq)]
pub struct Shortfall {
    pub profiler: String,
    pub collectors: Collectors,
    pub mode: Mode,
    /// Per family, in name order.
    pub by_family: Vec<Tally>,
    /// Per question type (`cause`, `request`, `call_site`, `operator`), in name order.
    pub by_question: Vec<Tally>,
    /// Per phase: symptoms whose claim put the most excess blame on it (`symptoms`) and
    /// how many of those were still answered correctly (`correct`), most blamed first.
    pub overblamed: Vec<Tally>,
}

impl Shortfall {
    /// All loss-free symptoms of the group.
    pub fn total(&self) -> Tally {
        let mut t = Tally {
            key: "all".into(),
            ..Tally::default()
        };
        for f in &self.by_family {
            t.symptoms += f.symptoms;
            t.correct += f.correct;
        }
        t
    }
}

/// Question type name as written in `scores.jsonl`.
pub fn question_name(q: ground_truth::Question) -> String {
    serde_json::to_value(q)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{q:?}"))
}

/// One [`Shortfall`] per profiler × collectors × mode with loss-free cases, in that order.
pub fn shortfalls(scores: &[CaseScore]) -> Vec<Shortfall> {
    type Group = (String, Collectors, Mode);
    type Tallies = [BTreeMap<String, Tally>; 3];
    let mut groups: BTreeMap<Group, Tallies> = BTreeMap::new();
    let add = |map: &mut BTreeMap<String, Tally>, key: &str, correct: bool| {
        let t = map.entry(key.to_string()).or_insert_with(|| Tally {
            key: key.to_string(),
            ..Tally::default()
        });
        t.symptoms += 1;
        t.correct += u64::from(correct);
    };
    for c in scores.iter().filter(|c| c.is_loss_free()) {
        let [families, questions, phases] = groups
            .entry((c.profiler.clone(), c.collectors, c.mode))
            .or_default();
        for s in &c.symptoms {
            add(families, &c.family, s.correct);
            add(questions, &question_name(s.question), s.correct);
            if let Some(phase) = &s.overblamed_phase {
                add(phases, phase, s.correct);
            }
        }
    }
    groups
        .into_iter()
        .map(
            |((profiler, collectors, mode), [families, questions, phases])| {
                let mut overblamed: Vec<Tally> = phases.into_values().collect();
                overblamed.sort_by(|a, b| b.symptoms.cmp(&a.symptoms).then(a.key.cmp(&b.key)));
                Shortfall {
                    profiler,
                    collectors,
                    mode,
                    by_family: families.into_values().collect(),
                    by_question: questions.into_values().collect(),
                    overblamed,
                }
            },
        )
        .collect()
}
