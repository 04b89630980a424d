//! The steps of [`Leaderboard::from_scores`] for cases of one material: what each case
//! adds to its row, loss setting, crash and pair unit ([`CaseTallies`]), what each pair
//! unit adds to the tables of pair accuracy ([`PairTallies`]), and each table's rows
//! made from those tallies. Every map is a `BTreeMap`, so rows come out sorted and the
//! written files do not depend on the order of the scores.

use super::{
    loss_order, round_to_6_places, row_intervals, type_row, Agg, BackendFamilyRow, BackendRow,
    CrashRow, FamilyRow, Leaderboard, LeaderboardRow, LossRow, Material, RowKey, SimToRealRow,
    VersionRow,
};
use crate::pairs::{InstanceKey, PairCount, PairKey, PairUnit};
use crate::rounding::round6;
use crate::score::{ratio, type_index, CaseScore, EdgeCounts};
use ground_truth::{Collectors, EdgeType, Mode};
use std::collections::{BTreeMap, BTreeSet};

/// Cases in a canonical order, so that float sums do not depend on input order.
pub(super) fn canonical_order(scores: &[CaseScore]) -> Vec<&CaseScore> {
    let mut order: Vec<&CaseScore> = scores.iter().collect();
    order.sort_by(|a, b| {
        (
            &a.profiler,
            a.collectors,
            a.mode,
            &a.bundle,
            &a.view,
            &a.backend,
        )
            .cmp(&(
                &b.profiler,
                b.collectors,
                b.mode,
                &b.bundle,
                &b.view,
                &b.backend,
            ))
            .then(a.analysis_ms.total_cmp(&b.analysis_ms))
    });
    order
}

/// (profiler, collectors?, mode?, (rate order, label)): one loss setting of one row, or
/// of one profiler with every collectors × mode pooled.
type LossKey = (String, Option<Collectors>, Option<Mode>, (u64, String));

/// What the cases add up to, before pair units are scored.
pub(super) struct CaseTallies<'a> {
    rows: BTreeMap<RowKey, Agg>,
    pooled_types: BTreeMap<String, [EdgeCounts; EdgeType::ALL.len()]>,
    /// Each loss setting's cases, with its rate.
    loss: BTreeMap<LossKey, (Agg, Option<f64>)>,
    /// Pair units: family instance × backend × view (evaluator/src/pairs.rs).
    pub(super) groups: BTreeMap<PairKey, PairUnit>,
    /// Each row's cases per family instance, the bootstrap's clusters.
    clusters: BTreeMap<RowKey, BTreeMap<InstanceKey, (Agg, PairCount)>>,
    pub(super) loss_free: Vec<&'a CaseScore>,
    crashes: BTreeMap<(RowKey, String), (u64, BTreeSet<String>)>,
}

impl<'a> CaseTallies<'a> {
    /// Adds up `order` (in that order).
    pub(super) fn of(order: &[&'a CaseScore]) -> CaseTallies<'a> {
        let mut t = CaseTallies {
            rows: BTreeMap::new(),
            pooled_types: BTreeMap::new(),
            loss: BTreeMap::new(),
            groups: BTreeMap::new(),
            clusters: BTreeMap::new(),
            loss_free: Vec::new(),
            crashes: BTreeMap::new(),
        };
        for c in order {
            t.add(c);
        }
        t
    }

    fn add(&mut self, c: &'a CaseScore) {
        if let Some(message) = &c.crashed {
            let (cases, families) = self
                .crashes
                .entry(((c.profiler.clone(), c.collectors, c.mode), message.clone()))
                .or_default();
            *cases += 1;
            families.insert(c.family.clone());
        }
        let lf = c.is_loss_free();
        let row = (c.profiler.clone(), c.collectors, c.mode);
        self.clusters
            .entry(row.clone())
            .or_default()
            .entry(InstanceKey::of(c))
            .or_default()
            .0
            .add(c, lf);
        self.rows.entry(row).or_default().add(c, lf);
        if lf {
            self.loss_free.push(c);
            let t = self.pooled_types.entry(c.profiler.clone()).or_default();
            for ts in &c.edges.by_type {
                t[type_index(ts.kind)].add(&ts.counts);
            }
            self.groups.entry(PairKey::of(c)).or_default().add(c);
        }
        let lo = loss_order(c.loss_rate, &c.loss);
        for (col, mode) in [(Some(c.collectors), Some(c.mode)), (None, None)] {
            let e = self
                .loss
                .entry((c.profiler.clone(), col, mode, lo.clone()))
                .or_insert_with(|| (Agg::default(), c.loss_rate));
            e.0.add(c, true);
        }
    }

    /// Analyzer crashes by row and message, with the families they hit.
    pub(super) fn crash_rows(&mut self) -> Vec<CrashRow> {
        std::mem::take(&mut self.crashes)
            .into_iter()
            .map(
                |(((profiler, collectors, mode), message), (cases, families))| CrashRow {
                    profiler,
                    collectors,
                    mode,
                    message,
                    cases,
                    families: families.into_iter().collect(),
                },
            )
            .collect()
    }

    /// The leaderboard's rows (with their intervals) and each row's edge types.
    pub(super) fn push_rows(&self, pairs: &PairTallies, material: Material, lb: &mut Leaderboard) {
        for ((profiler, collectors, mode), a) in &self.rows {
            let p = pairs
                .row_pairs
                .get(&(profiler.clone(), *collectors, *mode))
                .copied()
                .unwrap_or_default();
            lb.rows.push(LeaderboardRow {
                profiler: profiler.clone(),
                collectors: *collectors,
                mode: *mode,
                cases: a.cases,
                pair_accuracy: round_to_6_places(p.accuracy()),
                root_cause_top1: round_to_6_places(ratio(a.top1, a.symptoms)),
                root_cause_top3: round_to_6_places(ratio(a.top3, a.symptoms)),
                edge_precision: round_to_6_places(a.edges.precision()),
                edge_recall: round_to_6_places(a.edges.recall()),
                edge_f1: round_to_6_places(a.edges.f1()),
                false_causal_edges: a.false_causal,
                request_correct: round_to_6_places(ratio(a.req_correct, a.req_eligible)),
                request_wrong: round_to_6_places(ratio(a.req_wrong, a.req_eligible)),
                request_abstained: round_to_6_places(ratio(a.req_abstained, a.req_eligible)),
                critical_path_fidelity: round_to_6_places(Agg::mean(a.fidelity_sum, a.symptoms)),
                unresolved_recall: round_to_6_places(ratio(a.hits, a.unresolved)),
                false_confidence_rate: round_to_6_places(ratio(a.false_confident, a.unresolved)),
                brier: round_to_6_places(Agg::mean(a.brier_sum, a.brier_n)),
                analysis_ms: round_to_6_places(Agg::mean(a.ms_sum, a.all_cases)),
                pairs: p.pairs,
                symptoms: a.symptoms,
                symptom_accuracy: round_to_6_places(ratio(a.correct, a.symptoms)),
                phase_blame_error: round_to_6_places(Agg::mean(a.phase_sum, a.symptoms)),
                lossy_cases: a.lossy_cases,
                unresolved_symptoms: a.unresolved,
                ci: self
                    .clusters
                    .get(&(profiler.clone(), *collectors, *mode))
                    .map(|by| row_intervals(&(profiler.clone(), *collectors, *mode), by))
                    .unwrap_or_default(),
                crashed: a.crashed,
                material,
            });
            for (i, &t) in EdgeType::ALL.iter().enumerate() {
                let c = a.by_type[i];
                if c.claims > 0 || c.truth > 0 {
                    lb.edge_types
                        .push(type_row(profiler, Some(*collectors), Some(*mode), t, c));
                }
            }
        }
    }

    /// Each profiler's edge types, all loss-free views pooled.
    pub(super) fn push_pooled_edge_types(&self, lb: &mut Leaderboard) {
        for (profiler, counts) in &self.pooled_types {
            for (i, &t) in EdgeType::ALL.iter().enumerate() {
                let c = counts[i];
                if c.claims > 0 || c.truth > 0 {
                    lb.edge_types_pooled
                        .push(type_row(profiler, None, None, t, c));
                }
            }
        }
    }

    /// Each loss setting's rows: per collectors × mode, and pooled.
    pub(super) fn push_loss_rows(&self, lb: &mut Leaderboard) {
        for ((profiler, col, mode, (_, label)), (a, rate)) in &self.loss {
            let row = LossRow {
                profiler: profiler.clone(),
                collectors: *col,
                mode: *mode,
                loss: label.clone(),
                loss_rate: round_to_6_places(*rate),
                cases: a.cases,
                symptoms: a.symptoms,
                unresolved_symptoms: a.unresolved,
                unresolved_recall: round_to_6_places(ratio(a.hits, a.unresolved)),
                false_confidence_rate: round_to_6_places(ratio(a.false_confident, a.unresolved)),
                brier: round_to_6_places(Agg::mean(a.brier_sum, a.brier_n)),
                edge_f1: round_to_6_places(a.edges.f1()),
                root_cause_top1: round_to_6_places(ratio(a.top1, a.symptoms)),
                symptom_accuracy: round_to_6_places(ratio(a.correct, a.symptoms)),
            };
            if col.is_some() {
                lb.loss.push(row);
            } else {
                lb.loss_pooled.push(row);
            }
        }
    }
}

/// (family, profiler, collectors, mode, backend).
type BackendKey = (String, String, Collectors, Mode, String);

/// Pair accuracy per row, per family × row, per family pooled, and by backend and
/// CUPTI version.
pub(super) struct PairTallies {
    row_pairs: BTreeMap<RowKey, PairCount>,
    fam_pairs: BTreeMap<(String, String, Collectors, Mode), PairCount>,
    fam_pooled: BTreeMap<(String, String), PairCount>,
    fam_backend: BTreeMap<BackendKey, PairCount>,
    row_backend: BTreeMap<(String, String, Collectors, Mode), PairCount>,
    row_version: BTreeMap<(String, String, Collectors, Mode), PairCount>,
}

impl PairTallies {
    /// Scores every pair unit of `cases` and adds it where it counts, the bootstrap's
    /// clusters of `cases` included.
    pub(super) fn of(cases: &mut CaseTallies) -> PairTallies {
        let mut t = PairTallies {
            row_pairs: BTreeMap::new(),
            fam_pairs: BTreeMap::new(),
            fam_pooled: BTreeMap::new(),
            fam_backend: BTreeMap::new(),
            row_backend: BTreeMap::new(),
            row_version: BTreeMap::new(),
        };
        for (key, unit) in &cases.groups {
            let v = unit.score();
            let PairKey {
                unit: InstanceKey { family, .. },
                backend,
                cupti,
                profiler,
                collectors: col,
                mode,
            } = key;
            t.row_version
                .entry((cupti.clone(), profiler.clone(), *col, *mode))
                .or_default()
                .add(v);
            if let Some(cell) = cases
                .clusters
                .get_mut(&(profiler.clone(), *col, *mode))
                .and_then(|by| by.get_mut(&key.unit))
            {
                cell.1.add(v);
            }
            t.fam_backend
                .entry((
                    family.clone(),
                    profiler.clone(),
                    *col,
                    *mode,
                    backend.clone(),
                ))
                .or_default()
                .add(v);
            t.row_backend
                .entry((backend.clone(), profiler.clone(), *col, *mode))
                .or_default()
                .add(v);
            t.row_pairs
                .entry((profiler.clone(), *col, *mode))
                .or_default()
                .add(v);
            t.fam_pairs
                .entry((family.clone(), profiler.clone(), *col, *mode))
                .or_default()
                .add(v);
            t.fam_pooled
                .entry((family.clone(), profiler.clone()))
                .or_default()
                .add(v);
        }
        t
    }

    /// Families per row, and pooled over every collectors × mode.
    pub(super) fn push_family_rows(&self, lb: &mut Leaderboard) {
        for ((family, profiler, col, mode), p) in &self.fam_pairs {
            lb.families.push(FamilyRow {
                family: family.clone(),
                profiler: profiler.clone(),
                collectors: Some(*col),
                mode: Some(*mode),
                pairs: p.pairs,
                pairs_correct: round6(p.score_sum),
                pair_accuracy: round_to_6_places(p.accuracy()),
            });
        }
        for ((family, profiler), p) in &self.fam_pooled {
            lb.families_pooled.push(FamilyRow {
                family: family.clone(),
                profiler: profiler.clone(),
                collectors: None,
                mode: None,
                pairs: p.pairs,
                pairs_correct: round6(p.score_sum),
                pair_accuracy: round_to_6_places(p.accuracy()),
            });
        }
    }

    /// Each row per backend, and per CUPTI version where the results mix versions.
    pub(super) fn push_backend_and_version_rows(&self, lb: &mut Leaderboard) {
        for ((backend, profiler, collectors, mode), p) in &self.row_backend {
            lb.backends.push(BackendRow {
                backend: backend.clone(),
                profiler: profiler.clone(),
                collectors: *collectors,
                mode: *mode,
                pairs: p.pairs,
                pair_accuracy: round_to_6_places(p.accuracy()),
            });
        }
        // Only where results mix CUPTI versions (docs/cupti-versions.md).
        let versions: BTreeSet<&str> = self
            .row_version
            .keys()
            .map(|(v, ..)| v.as_str())
            .filter(|v| !v.is_empty())
            .collect();
        if versions.len() > 1 {
            for ((cupti, profiler, collectors, mode), p) in &self.row_version {
                lb.versions.push(VersionRow {
                    cupti: cupti.clone(),
                    profiler: profiler.clone(),
                    collectors: *collectors,
                    mode: *mode,
                    pairs: p.pairs,
                    pair_accuracy: round_to_6_places(p.accuracy()),
                });
            }
        }
    }

    /// Each family × row per backend, and from those the sim-to-real agreement.
    pub(super) fn push_backend_family_rows(&self, lb: &mut Leaderboard) {
        let mut agreement: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for ((family, profiler, collectors, mode, backend), p) in &self.fam_backend {
            lb.families_by_backend.push(BackendFamilyRow {
                family: family.clone(),
                profiler: profiler.clone(),
                collectors: *collectors,
                mode: *mode,
                backend: backend.clone(),
                pairs: p.pairs,
                pair_accuracy: round_to_6_places(p.accuracy()),
            });
            if backend == "sim" {
                let real = self.fam_backend.get(&(
                    family.clone(),
                    profiler.clone(),
                    *collectors,
                    *mode,
                    "cuda".to_string(),
                ));
                if let (Some(sim), Some(real)) = (p.accuracy(), real.and_then(|r| r.accuracy())) {
                    let a = agreement.entry(profiler.clone()).or_default();
                    a.0 += 1;
                    a.1 += u64::from((sim >= 0.5) == (real >= 0.5));
                }
            }
        }
        for (profiler, (groups, agreeing)) in agreement {
            lb.sim_to_real.push(SimToRealRow {
                profiler,
                groups,
                agreeing,
                agreement: round_to_6_places(ratio(agreeing, groups)),
            });
        }
    }
}
