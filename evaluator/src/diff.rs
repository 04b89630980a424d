//! What changed between two result sets: per-symptom verdicts of the cases both
//! sides scored, leaderboard metrics that moved, and cases only one side has.

use crate::diff_evidence::{changes, Evidence, RecordChange};
use crate::leaderboard::{Leaderboard, CSV_COLUMNS};
use crate::output::{read_scores, scores_in};
use crate::score::CaseScore;
use ground_truth::{CauseLabel, Collectors, FormatError, Mode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Metric values closer than this are "unchanged".
pub const EPSILON: f64 = 1e-9;

/// Identity of a case within a result set.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct CaseKey {
    pub bundle: String,
    pub backend: String,
    pub profiler: String,
    pub view: String,
}

impl CaseKey {
    pub fn of(c: &CaseScore) -> CaseKey {
        CaseKey {
            bundle: c.bundle.clone(),
            backend: c.backend.clone(),
            profiler: c.profiler.clone(),
            view: c.view.clone(),
        }
    }
}

/// One symptom whose verdict differs (or that only one side scored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerdictChange {
    #[serde(flatten)]
    pub case: CaseKey,
    /// The scenario family of the case (empty in diffs written before it was kept).
    #[serde(default)]
    pub family: String,
    pub symptom: String,
    /// `null`: the symptom was not scored on that side.
    pub before: Option<bool>,
    pub after: Option<bool>,
    pub before_cause: Option<CauseLabel>,
    pub after_cause: Option<CauseLabel>,
}

impl VerdictChange {
    /// correct → wrong.
    pub fn is_regression(&self) -> bool {
        self.before == Some(true) && self.after == Some(false)
    }
    /// wrong → correct.
    pub fn is_fix(&self) -> bool {
        self.before == Some(false) && self.after == Some(true)
    }
}

/// A leaderboard metric that moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricChange {
    pub profiler: String,
    pub collectors: Collectors,
    pub mode: Mode,
    pub metric: String,
    pub before: Option<f64>,
    pub after: Option<f64>,
    /// `after − before` when both are defined.
    pub delta: Option<f64>,
    /// Each side's value lies outside the other side's 95 % interval.
    #[serde(default)]
    pub beyond_interval: bool,
    /// Noise, hidden unless asked for (`diff --all`): a rate that moved within the
    /// intervals (each side's value inside the other's 95 % interval, or one inside),
    /// or the analysis time, which has no interval and follows the machine's load.
    /// A count (cases, pairs, ...) or a rate that became defined or undefined is
    /// never noise.
    #[serde(default)]
    pub noise: bool,
}

/// One profiler's versions and command on each side; listed first, since a changed
/// profiler explains the rest of a diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfilerChange {
    pub profiler: String,
    /// The `explanation.meta.version`s of the side's case scores; empty: the
    /// profiler is not on that side.
    pub before_versions: Vec<String>,
    pub after_versions: Vec<String>,
    /// The external command template (the result set's `manifest.json`); `null` for
    /// a built-in profiler or where the result set does not say.
    pub before_command: Option<String>,
    pub after_command: Option<String>,
}

impl ProfilerChange {
    /// Whether its version or command differs between the sides.
    pub fn changed(&self) -> bool {
        self.before_versions != self.after_versions || self.before_command != self.after_command
    }
}

/// The key of a bundle in [`Diff::causes`]: backend and bundle id (a simulated and a
/// recorded bundle of one scenario share the id).
pub fn bundle_key(case: &CaseKey) -> String {
    format!("{}/{}", case.backend, case.bundle)
}

/// Leaderboard row identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RowKey {
    pub profiler: String,
    pub collectors: Collectors,
    pub mode: Mode,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Diff {
    /// Labels of the two sides (directories).
    pub a: String,
    pub b: String,
    /// Cases scored on both sides.
    pub cases_compared: u64,
    pub verdicts: Vec<VerdictChange>,
    pub metrics: Vec<MetricChange>,
    pub only_in_a: Vec<CaseKey>,
    pub only_in_b: Vec<CaseKey>,
    pub rows_only_in_a: Vec<RowKey>,
    pub rows_only_in_b: Vec<RowKey>,
    /// Case keys that appear more than once on one side (the first occurrence is used).
    pub duplicate_keys: Vec<CaseKey>,
    /// Per bundle with a changed verdict, by [`bundle_key`]: how its records differ
    /// between the two sides (filled by [`Diff::attach_causes`] when both bundles are
    /// at hand).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub causes: BTreeMap<String, Vec<RecordChange>>,
    /// Every profiler of either side, its versions and command on each
    /// ([`Diff::attach_commands`] adds the commands).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profilers: Vec<ProfilerChange>,
    /// Metric changes left out as noise ([`Diff::hide_noise`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hidden_metrics: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Each profiler's versions in `scores`, sorted.
fn versions(scores: &[CaseScore]) -> BTreeMap<String, Vec<String>> {
    let mut v: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for s in scores {
        v.entry(s.profiler.clone())
            .or_default()
            .insert(s.profiler_version.clone());
    }
    v.into_iter()
        .map(|(p, set)| (p, set.into_iter().collect()))
        .collect()
}

fn by_key<'a>(
    scores: &'a [CaseScore],
    dups: &mut Vec<CaseKey>,
) -> BTreeMap<CaseKey, &'a CaseScore> {
    let mut m = BTreeMap::new();
    for s in scores {
        let k = CaseKey::of(s);
        match m.entry(k) {
            std::collections::btree_map::Entry::Occupied(e) => dups.push(e.key().clone()),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(s);
            }
        }
    }
    m
}

fn differs(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => (x - y).abs() > EPSILON,
        (None, None) => false,
        _ => true,
    }
}

impl Diff {
    /// Compares two result sets given as case scores.
    pub fn from_scores(a_label: &str, a: &[CaseScore], b_label: &str, b: &[CaseScore]) -> Diff {
        let mut d = Diff {
            a: a_label.to_string(),
            b: b_label.to_string(),
            ..Diff::default()
        };
        let ma = by_key(a, &mut d.duplicate_keys);
        let mb = by_key(b, &mut d.duplicate_keys);
        d.duplicate_keys.sort();
        d.duplicate_keys.dedup();
        for (k, ca) in &ma {
            let Some(cb) = mb.get(k) else {
                d.only_in_a.push(k.clone());
                continue;
            };
            d.cases_compared += 1;
            let sa: BTreeMap<&str, _> = ca.symptoms.iter().map(|s| (s.id.as_str(), s)).collect();
            let sb: BTreeMap<&str, _> = cb.symptoms.iter().map(|s| (s.id.as_str(), s)).collect();
            let ids: std::collections::BTreeSet<&str> =
                sa.keys().chain(sb.keys()).copied().collect();
            for id in ids {
                let (x, y) = (sa.get(id), sb.get(id));
                let before = x.map(|s| s.correct);
                let after = y.map(|s| s.correct);
                if before != after {
                    d.verdicts.push(VerdictChange {
                        case: k.clone(),
                        family: ca.family.clone(),
                        symptom: id.to_string(),
                        before,
                        after,
                        before_cause: x.and_then(|s| s.claimed_cause),
                        after_cause: y.and_then(|s| s.claimed_cause),
                    });
                }
            }
        }
        d.only_in_b = mb
            .keys()
            .filter(|k| !ma.contains_key(*k))
            .cloned()
            .collect();

        let (la, lb) = (Leaderboard::from_scores(a), Leaderboard::from_scores(b));
        let key = |r: &crate::leaderboard::LeaderboardRow| RowKey {
            profiler: r.profiler.clone(),
            collectors: r.collectors,
            mode: r.mode,
        };
        let ra: BTreeMap<RowKey, _> = la.rows.iter().map(|r| (key(r), r)).collect();
        let rb: BTreeMap<RowKey, _> = lb.rows.iter().map(|r| (key(r), r)).collect();
        for (k, x) in &ra {
            let Some(y) = rb.get(k) else {
                d.rows_only_in_a.push(k.clone());
                continue;
            };
            for &col in &CSV_COLUMNS[3..] {
                let (before, after) = (Leaderboard::metric(x, col), Leaderboard::metric(y, col));
                if differs(before, after) {
                    let outside = |v: Option<f64>, row: &crate::leaderboard::LeaderboardRow| {
                        v.zip(row.ci.get(col))
                            .is_some_and(|(v, i)| v < i.low - EPSILON || v > i.high + EPSILON)
                    };
                    let beyond_interval = outside(after, x) && outside(before, y);
                    let has_interval = x.ci.contains_key(col) && y.ci.contains_key(col);
                    let noise = before.is_some()
                        && after.is_some()
                        && ((has_interval && !beyond_interval) || col == "analysis_ms");
                    d.metrics.push(MetricChange {
                        beyond_interval,
                        noise,
                        profiler: k.profiler.clone(),
                        collectors: k.collectors,
                        mode: k.mode,
                        metric: col.to_string(),
                        before,
                        after,
                        delta: before
                            .zip(after)
                            .map(|(p, q)| crate::leaderboard::round6(q - p)),
                    });
                }
            }
        }
        d.rows_only_in_b = rb
            .keys()
            .filter(|k| !ra.contains_key(*k))
            .cloned()
            .collect();
        let (va, vb) = (versions(a), versions(b));
        let names: std::collections::BTreeSet<&String> = va.keys().chain(vb.keys()).collect();
        d.profilers = names
            .into_iter()
            .map(|p| ProfilerChange {
                profiler: p.clone(),
                before_versions: va.get(p).cloned().unwrap_or_default(),
                after_versions: vb.get(p).cloned().unwrap_or_default(),
                before_command: None,
                after_command: None,
            })
            .collect();
        d
    }

    /// Adds each side's external commands (profiler → command template).
    pub fn attach_commands(&mut self, a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) {
        for name in a.keys().chain(b.keys()) {
            if !self.profilers.iter().any(|p| p.profiler == *name) {
                self.profilers.push(ProfilerChange {
                    profiler: name.clone(),
                    before_versions: Vec::new(),
                    after_versions: Vec::new(),
                    before_command: None,
                    after_command: None,
                });
            }
        }
        self.profilers.sort_by(|x, y| x.profiler.cmp(&y.profiler));
        for p in &mut self.profilers {
            p.before_command = a.get(&p.profiler).cloned();
            p.after_command = b.get(&p.profiler).cloned();
        }
    }

    /// The profilers whose version or command differs between the sides.
    pub fn changed_profilers(&self) -> Vec<&ProfilerChange> {
        self.profilers.iter().filter(|p| p.changed()).collect()
    }

    /// Leaves out the metric changes that are noise ([`MetricChange::noise`]),
    /// counting them in [`Diff::hidden_metrics`].
    pub fn hide_noise(&mut self) {
        let before = self.metrics.len();
        self.metrics.retain(|m| !m.noise);
        self.hidden_metrics += (before - self.metrics.len()) as u64;
    }

    /// Explains each changed verdict by the differences between the records
    /// of its bundle on the two sides; `a_bundle` / `b_bundle` give the bundle of
    /// a case (its `bundle` and `backend`), `None` when that side's is not at hand.
    pub fn attach_causes(
        &mut self,
        mut a_bundle: impl FnMut(&CaseKey) -> Option<ground_truth::Bundle>,
        mut b_bundle: impl FnMut(&CaseKey) -> Option<ground_truth::Bundle>,
    ) {
        let mut cases: BTreeMap<String, CaseKey> = BTreeMap::new();
        for v in &self.verdicts {
            cases
                .entry(bundle_key(&v.case))
                .or_insert_with(|| v.case.clone());
        }
        for (key, case) in cases {
            if let (Some(a), Some(b)) = (a_bundle(&case), b_bundle(&case)) {
                self.causes
                    .insert(key, changes(&Evidence::of(&a), &Evidence::of(&b)));
            }
        }
    }

    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.verdicts.is_empty()
            && self.metrics.is_empty()
            && self.only_in_a.is_empty()
            && self.only_in_b.is_empty()
            && self.rows_only_in_a.is_empty()
            && self.rows_only_in_b.is_empty()
            && self.changed_profilers().is_empty()
    }

    pub fn regressions(&self) -> usize {
        self.verdicts.iter().filter(|v| v.is_regression()).count()
    }

    pub fn fixes(&self) -> usize {
        self.verdicts.iter().filter(|v| v.is_fix()).count()
    }

    /// Markdown (also readable as plain text).
    pub fn to_markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# causalbench diff\n");
        let _ = writeln!(md, "- A: `{}`\n- B: `{}`", self.a, self.b);
        let _ = writeln!(
            md,
            "- {} cases compared; {} verdicts correct→wrong, {} wrong→correct, {} other verdict changes; \
             {} leaderboard metrics moved{}; {} cases only in A, {} only in B.\n",
            self.cases_compared,
            self.regressions(),
            self.fixes(),
            self.verdicts.len() - self.regressions() - self.fixes(),
            self.metrics.len(),
            self.hidden_note(),
            self.only_in_a.len(),
            self.only_in_b.len()
        );
        if self.is_empty() {
            let _ = writeln!(md, "No differences.");
            return md;
        }
        self.profilers_markdown(&mut md);
        let verdict = |v: Option<bool>| match v {
            Some(true) => "correct",
            Some(false) => "wrong",
            None => "not scored",
        };
        let cause = |c: Option<CauseLabel>| c.map_or("-".to_string(), |c| c.to_string());
        if !self.verdicts.is_empty() {
            let _ = writeln!(md, "## Verdicts that changed\n");
            let _ = writeln!(md, "| bundle | backend | profiler | view | symptom | A | B | A top cause | B top cause | what differs in the records |");
            let _ = writeln!(
                md,
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
            );
            for v in &self.verdicts {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    v.case.bundle,
                    v.case.backend,
                    v.case.profiler,
                    v.case.view,
                    v.symptom,
                    verdict(v.before),
                    verdict(v.after),
                    cause(v.before_cause),
                    cause(v.after_cause),
                    self.cause_text(&v.case, usize::MAX)
                );
            }
            md.push('\n');
        }
        if !self.metrics.is_empty() {
            let num = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{v:.4}"));
            let _ = writeln!(md, "## Leaderboard metrics that moved\n");
            let _ = writeln!(md, "| profiler | collectors | mode | metric | A | B | Δ |");
            let _ = writeln!(md, "| --- | --- | --- | --- | ---: | ---: | ---: |");
            for m in &self.metrics {
                let delta = m.delta.map_or("n/a".to_string(), |d| format!("{d:+.4}"));
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    m.profiler,
                    m.collectors.as_str(),
                    m.mode.as_str(),
                    m.metric,
                    num(m.before),
                    num(m.after),
                    delta
                );
            }
            md.push('\n');
        }
        for (title, keys) in [
            ("Cases only in A", &self.only_in_a),
            ("Cases only in B", &self.only_in_b),
        ] {
            if !keys.is_empty() {
                let _ = writeln!(md, "## {title}\n");
                for k in keys {
                    let _ = writeln!(
                        md,
                        "- {} ({}) × {} × {}",
                        k.bundle, k.backend, k.profiler, k.view
                    );
                }
                md.push('\n');
            }
        }
        for (title, keys) in [
            ("Leaderboard rows only in A", &self.rows_only_in_a),
            ("Leaderboard rows only in B", &self.rows_only_in_b),
        ] {
            if !keys.is_empty() {
                let _ = writeln!(md, "## {title}\n");
                for k in keys {
                    let _ = writeln!(
                        md,
                        "- {} / {} / {}",
                        k.profiler,
                        k.collectors.as_str(),
                        k.mode.as_str()
                    );
                }
                md.push('\n');
            }
        }
        if !self.duplicate_keys.is_empty() {
            let _ = writeln!(md, "## Warning: duplicate cases (first occurrence used)\n");
            for k in &self.duplicate_keys {
                let _ = writeln!(
                    md,
                    "- {} ({}) × {} × {}",
                    k.bundle, k.backend, k.profiler, k.view
                );
            }
        }
        md
    }
}

/// Compares the result sets in two directories (their `scores.jsonl`).
pub fn diff(a_dir: &Path, b_dir: &Path) -> Result<Diff, FormatError> {
    let a = read_scores(&scores_in(a_dir))?;
    let b = read_scores(&scores_in(b_dir))?;
    Ok(Diff::from_scores(
        &a_dir.display().to_string(),
        &a,
        &b_dir.display().to_string(),
        &b,
    ))
}
