//! Aggregation of case scores into the leaderboard and its side tables.
//! Rules are written out in `evaluator/METRICS.md` ("Aggregation").

use crate::axes::{breakdown, AxisRow, HeadlineRow};
use crate::bootstrap::{intervals, seed_of, Interval, Tally};
use crate::pairs::{InstanceKey, PairCount};
use crate::score::{type_index, CaseScore, EdgeCounts};
use ground_truth::{Collectors, EdgeType, Mode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

mod tally;

/// Columns of `leaderboard.csv`, in order. The first 19 are the docs/cli.md contract.
pub const CSV_COLUMNS: &[&str] = &[
    "profiler",
    "collectors",
    "mode",
    "cases",
    "pair_accuracy",
    "root_cause_top1",
    "root_cause_top3",
    "edge_precision",
    "edge_recall",
    "edge_f1",
    "false_causal_edges",
    "request_correct",
    "request_wrong",
    "request_abstained",
    "critical_path_fidelity",
    "unresolved_recall",
    "false_confidence_rate",
    "brier",
    "analysis_ms",
    "pairs",
    "symptoms",
    "symptom_accuracy",
    "phase_blame_error",
    "lossy_cases",
    "unresolved_symptoms",
];

/// The rates that carry a 95 % bootstrap interval (evaluator/METRICS.md,
/// "Confidence intervals"), in the order of their `*_ci_low`, `*_ci_high` columns.
pub const CI_METRICS: [&str; 15] = [
    "pair_accuracy",
    "root_cause_top1",
    "root_cause_top3",
    "edge_precision",
    "edge_recall",
    "edge_f1",
    "request_correct",
    "request_wrong",
    "request_abstained",
    "critical_path_fidelity",
    "unresolved_recall",
    "false_confidence_rate",
    "brier",
    "symptom_accuracy",
    "phase_blame_error",
];

/// Every column of `leaderboard.csv`: [`CSV_COLUMNS`], then `M_ci_low`, `M_ci_high`
/// for each M of [`CI_METRICS`].
pub fn csv_header() -> Vec<String> {
    CSV_COLUMNS
        .iter()
        .map(|c| c.to_string())
        .chain(
            CI_METRICS
                .iter()
                .flat_map(|m| [format!("{m}_ci_low"), format!("{m}_ci_high")]),
        )
        .collect()
}

pub(crate) use crate::rounding::round6;

/// A metric, when there is one, rounded to 6 decimals ([`round6`]).
fn round_to_6_places(x: Option<f64>) -> Option<f64> {
    x.map(round6)
}

/// One leaderboard row: one profiler × collectors × mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaderboardRow {
    pub profiler: String,
    pub collectors: Collectors,
    pub mode: Mode,
    /// Loss-free cases (the ones accuracy metrics are computed on).
    pub cases: u64,
    pub pair_accuracy: Option<f64>,
    pub root_cause_top1: Option<f64>,
    pub root_cause_top3: Option<f64>,
    pub edge_precision: Option<f64>,
    pub edge_recall: Option<f64>,
    pub edge_f1: Option<f64>,
    /// Sum over loss-free cases.
    pub false_causal_edges: u64,
    pub request_correct: Option<f64>,
    pub request_wrong: Option<f64>,
    pub request_abstained: Option<f64>,
    pub critical_path_fidelity: Option<f64>,
    pub unresolved_recall: Option<f64>,
    pub false_confidence_rate: Option<f64>,
    pub brier: Option<f64>,
    pub analysis_ms: Option<f64>,
    /// Pair groups counted by `pair_accuracy`.
    pub pairs: u64,
    /// Loss-free symptoms.
    pub symptoms: u64,
    /// Loss-free symptoms answered correctly / all loss-free symptoms.
    pub symptom_accuracy: Option<f64>,
    pub phase_blame_error: Option<f64>,
    /// Cases of lossy views (they count only for unresolved recall, false confidence, Brier, time).
    pub lossy_cases: u64,
    /// Unresolved symptoms over all views (the denominator of the two loss metrics).
    pub unresolved_symptoms: u64,
    /// 95 % cluster-bootstrap interval of each rate of [`CI_METRICS`] that is defined.
    /// Absent in leaderboards written before intervals existed.
    #[serde(default)]
    pub ci: BTreeMap<String, Interval>,
    /// Cases, over all views, on which the analyzer crashed (evaluator/METRICS.md,
    /// "Crashes"); their messages are in [`Leaderboard::crashes`]. Written only when
    /// non-zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub crashed: u64,
    /// What the row was scored on ([`Material`]); `public` in leaderboards written
    /// before it was kept.
    #[serde(default)]
    pub material: Material,
}

/// What a row was scored on (baselines/PROTOCOL.md, "Hidden splits"): public material
/// a profiler can memorize (the catalog, the dev split, a corpus, a split whose seed
/// was given), or a hidden split, whose seed only the harness held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Material {
    #[default]
    Public,
    Hidden,
}

impl Material {
    /// How the pages mark a row of this material.
    pub fn mark(self) -> &'static str {
        match self {
            Material::Public => "public — memorizable",
            Material::Hidden => "hidden split",
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How often one analyzer crashed with one message on one collectors × mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrashRow {
    pub profiler: String,
    pub collectors: Collectors,
    pub mode: Mode,
    /// `explanation.meta.failure`, as the analyzer gave it.
    pub message: String,
    /// Cases (all views) that ended with this message.
    pub cases: u64,
    /// Families of those cases, sorted.
    pub families: Vec<String>,
}

/// Pair accuracy of one family for one profiler × collectors × mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FamilyRow {
    pub family: String,
    pub profiler: String,
    /// `null` in the pooled table (all collectors × modes together).
    pub collectors: Option<Collectors>,
    pub mode: Option<Mode>,
    /// Pair units counted (family instances × backend × view; repetitions are one unit).
    pub pairs: u64,
    /// Sum of the pair units' scores (each the share of its repetitions right).
    pub pairs_correct: f64,
    pub pair_accuracy: Option<f64>,
}

/// Edge metrics of one edge type (loss-free views).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EdgeTypeRow {
    pub profiler: String,
    /// `null` in the pooled table.
    pub collectors: Option<Collectors>,
    pub mode: Option<Mode>,
    #[serde(rename = "type")]
    pub kind: EdgeType,
    #[serde(flatten)]
    pub counts: EdgeCounts,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub f1: Option<f64>,
}

/// Metrics of the views with one loss setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LossRow {
    pub profiler: String,
    /// `null` in the pooled table.
    pub collectors: Option<Collectors>,
    pub mode: Option<Mode>,
    /// Loss label (`none`, `5pct`, `targeted`).
    pub loss: String,
    /// `null` for targeted loss.
    pub loss_rate: Option<f64>,
    pub cases: u64,
    pub symptoms: u64,
    pub unresolved_symptoms: u64,
    pub unresolved_recall: Option<f64>,
    pub false_confidence_rate: Option<f64>,
    pub brier: Option<f64>,
    pub edge_f1: Option<f64>,
    pub root_cause_top1: Option<f64>,
    pub symptom_accuracy: Option<f64>,
}

/// Leakage probes (`docs/integrity.md`) are the profilers named `probe-…`: the
/// markdown leaderboard shows them in an appendix, as the floor, not among the
/// profilers (`evaluator/METRICS.md`).
pub const PROBE_PREFIX: &str = "probe-";

/// Whether a profiler is a leakage probe ([`PROBE_PREFIX`]).
pub fn is_probe(profiler: &str) -> bool {
    profiler.starts_with(PROBE_PREFIX)
}

/// The leaderboard and its side tables (`leaderboard.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Leaderboard {
    pub rows: Vec<LeaderboardRow>,
    /// Per family × profiler × collectors × mode.
    pub families: Vec<FamilyRow>,
    /// Per family × profiler, all collectors × modes pooled (the plot's data).
    pub families_pooled: Vec<FamilyRow>,
    pub edge_types: Vec<EdgeTypeRow>,
    /// Per profiler × edge type, all loss-free views pooled (the plot's data).
    pub edge_types_pooled: Vec<EdgeTypeRow>,
    pub loss: Vec<LossRow>,
    /// Per profiler × loss setting, all collectors × modes pooled (the plot's data).
    pub loss_pooled: Vec<LossRow>,
    /// Pair accuracy per backend × profiler × collectors × mode (rows above pool backends).
    #[serde(default)]
    pub backends: Vec<BackendRow>,
    /// Per family × profiler × collectors × mode, the pair accuracy on each backend.
    #[serde(default)]
    pub families_by_backend: Vec<BackendFamilyRow>,
    /// Pair accuracy per CUPTI version × profiler × collectors × mode, only when
    /// the scores mix GPU recordings of several CUPTI versions (`""`: the simulator).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<VersionRow>,
    /// Sim-to-real agreement per profiler (only when `sim` and `cuda` cases were both scored).
    #[serde(default)]
    pub sim_to_real: Vec<SimToRealRow>,
    /// Per profiler × collectors × mode × axis × bucket, generated cases only (`axes.csv`).
    #[serde(default)]
    pub axes: Vec<AxisRow>,
    /// Pair accuracy below and at/above magnitude ratio 0.3, per profiler × backend,
    /// combined collectors, instrumented.
    #[serde(default)]
    pub headline: Vec<HeadlineRow>,
    /// Analyzer crashes by profiler × collectors × mode × message (evaluator/METRICS.md,
    /// "Crashes"). Written only when there was one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crashes: Vec<CrashRow>,
}

/// Pair accuracy of one profiler × collectors × mode on one backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendRow {
    pub backend: String,
    pub profiler: String,
    pub collectors: Collectors,
    pub mode: Mode,
    pub pairs: u64,
    pub pair_accuracy: Option<f64>,
}

/// Pair accuracy of one profiler × collectors × mode on recordings of one CUPTI version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VersionRow {
    pub cupti: String,
    pub profiler: String,
    pub collectors: Collectors,
    pub mode: Mode,
    pub pairs: u64,
    pub pair_accuracy: Option<f64>,
}

/// Pair accuracy of one family for one profiler × collectors × mode, per backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendFamilyRow {
    pub family: String,
    pub profiler: String,
    pub collectors: Collectors,
    pub mode: Mode,
    pub backend: String,
    pub pairs: u64,
    pub pair_accuracy: Option<f64>,
}

/// Does the simulator give the same verdict as the GPU? A verdict is "the profiler
/// separates this family" (pair accuracy ≥ 0.5) for one family × collectors × mode;
/// agreement is the share of groups scored on both backends whose verdicts match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SimToRealRow {
    pub profiler: String,
    pub groups: u64,
    pub agreeing: u64,
    pub agreement: Option<f64>,
}

/// Accumulator for one group of cases.
#[derive(Default, Clone)]
struct Agg {
    cases: u64,
    lossy_cases: u64,
    // Accuracy part (cases added with `accuracy = true`).
    symptoms: u64,
    correct: u64,
    top1: u64,
    top3: u64,
    fidelity_sum: f64,
    phase_sum: f64,
    edges: EdgeCounts,
    by_type: [EdgeCounts; EdgeType::ALL.len()],
    false_causal: u64,
    req_eligible: u64,
    req_correct: u64,
    req_wrong: u64,
    req_abstained: u64,
    // Pooled part (every case).
    unresolved: u64,
    hits: u64,
    false_confident: u64,
    brier_sum: f64,
    brier_n: u64,
    ms_sum: f64,
    all_cases: u64,
    crashed: u64,
}

impl Agg {
    fn add(&mut self, c: &CaseScore, accuracy: bool) {
        self.all_cases += 1;
        self.crashed += u64::from(c.crashed.is_some());
        self.ms_sum += c.analysis_ms;
        self.brier_sum += c.edges.brier_sum;
        self.brier_n += c.edges.counts.claims;
        for s in c.symptoms.iter().filter(|s| s.unresolved) {
            self.unresolved += 1;
            self.hits += u64::from(s.unresolved_hit);
            self.false_confident += u64::from(s.false_confident);
        }
        if !accuracy {
            self.lossy_cases += 1;
            return;
        }
        self.cases += 1;
        for s in &c.symptoms {
            self.symptoms += 1;
            self.correct += u64::from(s.correct);
            self.top1 += u64::from(s.top1);
            self.top3 += u64::from(s.top3);
            self.fidelity_sum += s.path_fidelity;
            self.phase_sum += s.phase_error;
        }
        self.edges.add(&c.edges.counts);
        for t in &c.edges.by_type {
            self.by_type[type_index(t.kind)].add(&t.counts);
        }
        self.false_causal += c.edges.false_causal_edges;
        self.req_eligible += c.request.eligible;
        self.req_correct += c.request.correct;
        self.req_wrong += c.request.wrong;
        self.req_abstained += c.request.abstained;
    }

    fn mean(sum: f64, n: u64) -> Option<f64> {
        (n > 0).then(|| sum / n as f64)
    }

    /// (numerator, denominator) of each rate of [`CI_METRICS`], in its order.
    fn tally(&self, pairs: &PairCount) -> Tally<{ CI_METRICS.len() }> {
        let f = |x: u64| x as f64;
        let e = &self.edges;
        [
            (pairs.score_sum, f(pairs.pairs)),
            (f(self.top1), f(self.symptoms)),
            (f(self.top3), f(self.symptoms)),
            (f(e.true_positives), f(e.claims)),
            (f(e.true_positives), f(e.truth)),
            (f(2 * e.true_positives), f(e.claims + e.truth)),
            (f(self.req_correct), f(self.req_eligible)),
            (f(self.req_wrong), f(self.req_eligible)),
            (f(self.req_abstained), f(self.req_eligible)),
            (self.fidelity_sum, f(self.symptoms)),
            (f(self.hits), f(self.unresolved)),
            (f(self.false_confident), f(self.unresolved)),
            (self.brier_sum, f(self.brier_n)),
            (f(self.correct), f(self.symptoms)),
            (self.phase_sum, f(self.symptoms)),
        ]
    }
}

/// The intervals of one row from its per-instance accumulators.
fn row_intervals(
    (profiler, collectors, mode): &RowKey,
    by_instance: &BTreeMap<InstanceKey, (Agg, PairCount)>,
) -> BTreeMap<String, Interval> {
    let tallies: Vec<Tally<{ CI_METRICS.len() }>> =
        by_instance.values().map(|(a, p)| a.tally(p)).collect();
    let labels: Vec<String> = by_instance.keys().map(InstanceKey::label).collect();
    let seed = seed_of(
        &format!("row {profiler} {} {}", collectors.as_str(), mode.as_str()),
        labels.iter().map(String::as_str),
    );
    CI_METRICS
        .iter()
        .zip(intervals(&tallies, seed))
        .filter_map(|(m, i)| {
            i.map(|i| {
                (
                    m.to_string(),
                    Interval {
                        low: round6(i.low),
                        high: round6(i.high),
                    },
                )
            })
        })
        .collect()
}

type RowKey = (String, Collectors, Mode);

/// Sort key for loss settings: by rate (targeted last), then label.
fn loss_order(rate: Option<f64>, label: &str) -> (u64, String) {
    (
        rate.map(|r| (r * 1e9).round() as u64).unwrap_or(u64::MAX),
        label.to_string(),
    )
}

impl Leaderboard {
    /// Aggregates case scores. The result depends only on the multiset of scores
    /// (rows are sorted; sums run in a canonical order), so the written files are
    /// byte-for-byte reproducible. Where hidden-split cases ([`CaseScore::hidden`])
    /// and public ones are mixed, every table comes from the hidden cases; the public
    /// cases' rows follow, each marked [`Material::Public`].
    pub fn from_scores(scores: &[CaseScore]) -> Leaderboard {
        let hidden = scores.iter().filter(|s| s.hidden).count();
        if hidden == 0 || hidden == scores.len() {
            let material = if hidden == 0 {
                Material::Public
            } else {
                Material::Hidden
            };
            return Leaderboard::of_material(scores, material);
        }
        let (hidden, public): (Vec<CaseScore>, Vec<CaseScore>) =
            scores.iter().cloned().partition(|s| s.hidden);
        let mut lb = Leaderboard::of_material(&hidden, Material::Hidden);
        let public = Leaderboard::of_material(&public, Material::Public);
        lb.rows.extend(public.rows);
        lb
    }

    /// The material the headline ranks: the hidden split's rows wherever there are any.
    pub fn headline_material(&self) -> Material {
        if self.rows.iter().any(|r| r.material == Material::Hidden) {
            Material::Hidden
        } else {
            Material::Public
        }
    }

    /// [`Leaderboard::from_scores`] of cases all of one material: the cases tallied in
    /// a canonical order, their pair units scored, then each table made from the tallies.
    fn of_material(scores: &[CaseScore], material: Material) -> Leaderboard {
        let order = tally::canonical_order(scores);
        let mut cases = tally::CaseTallies::of(&order);
        let pairs = tally::PairTallies::of(&mut cases);
        let mut lb = Leaderboard {
            crashes: cases.crash_rows(),
            ..Leaderboard::default()
        };
        cases.push_rows(&pairs, material, &mut lb);
        cases.push_pooled_edge_types(&mut lb);
        pairs.push_family_rows(&mut lb);
        pairs.push_backend_and_version_rows(&mut lb);
        pairs.push_backend_family_rows(&mut lb);
        cases.push_loss_rows(&mut lb);
        (lb.axes, lb.headline) = breakdown(&cases.loss_free, &cases.groups);
        lb
    }

    /// Pair units (counted, sum of scores) of one profiler, every family, collectors
    /// and mode pooled.
    pub fn pooled_pairs(&self, profiler: &str) -> (u64, f64) {
        let (pairs, correct) = self
            .families_pooled
            .iter()
            .filter(|f| f.profiler == profiler)
            .fold((0, 0.0), |(pairs, correct), f| {
                (pairs + f.pairs, correct + f.pairs_correct)
            });
        (pairs, round6(correct))
    }

    /// Profilers in the leaderboard, sorted.
    pub fn profilers(&self) -> Vec<String> {
        self.rows
            .iter()
            .map(|r| r.profiler.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// The value of a numeric leaderboard column (`None` if undefined or not numeric).
    pub fn metric(row: &LeaderboardRow, column: &str) -> Option<f64> {
        match column {
            "cases" => Some(row.cases as f64),
            "pair_accuracy" => row.pair_accuracy,
            "root_cause_top1" => row.root_cause_top1,
            "root_cause_top3" => row.root_cause_top3,
            "edge_precision" => row.edge_precision,
            "edge_recall" => row.edge_recall,
            "edge_f1" => row.edge_f1,
            "false_causal_edges" => Some(row.false_causal_edges as f64),
            "request_correct" => row.request_correct,
            "request_wrong" => row.request_wrong,
            "request_abstained" => row.request_abstained,
            "critical_path_fidelity" => row.critical_path_fidelity,
            "unresolved_recall" => row.unresolved_recall,
            "false_confidence_rate" => row.false_confidence_rate,
            "brier" => row.brier,
            "analysis_ms" => row.analysis_ms,
            "pairs" => Some(row.pairs as f64),
            "symptoms" => Some(row.symptoms as f64),
            "symptom_accuracy" => row.symptom_accuracy,
            "phase_blame_error" => row.phase_blame_error,
            "lossy_cases" => Some(row.lossy_cases as f64),
            "unresolved_symptoms" => Some(row.unresolved_symptoms as f64),
            _ => {
                let (metric, high) = column
                    .strip_suffix("_ci_low")
                    .map(|m| (m, false))
                    .or_else(|| column.strip_suffix("_ci_high").map(|m| (m, true)))?;
                let i = row.ci.get(metric)?;
                Some(if high { i.high } else { i.low })
            }
        }
    }
}

fn type_row(
    profiler: &str,
    collectors: Option<Collectors>,
    mode: Option<Mode>,
    kind: EdgeType,
    c: EdgeCounts,
) -> EdgeTypeRow {
    EdgeTypeRow {
        profiler: profiler.to_string(),
        collectors,
        mode,
        kind,
        counts: c,
        precision: round_to_6_places(c.precision()),
        recall: round_to_6_places(c.recall()),
        f1: round_to_6_places(c.f1()),
    }
}
