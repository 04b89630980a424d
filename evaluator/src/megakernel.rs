//! Metrics of the megakernel track (`METRICS.md` §5).
//!
//! A track case is one bundle × one monitor capture × one profiler. Whether
//! the cause (`q0`) and the task class (`q1`) are right is decided by
//! [`crate::score_case`] exactly as for every other case; this module adds
//! what the track asks beyond that: whether the capture covered the evidence
//! of the injected cause (from the sidecar's task truth), false confidence on
//! under-covered captures, telemetry bytes, perturbation of the megakernel's
//! run time, and the time to apply a monitor configuration.

use crate::score::{score_case, CaseScore};
use ground_truth::megakernel::{sampled, Capture, HookKind, TaskTelemetry, TaskView};
use ground_truth::{Bundle, CauseLabel, Explanation, Question};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// A claim at least this sure is confident (as for edges, `CONFIDENT`).
pub const CONFIDENT_SCORE: f64 = 0.8;

/// One profiler's answer on one capture of one case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrackCase {
    pub bundle: String,
    pub family: String,
    pub variant: String,
    pub repetition: u32,
    pub backend: String,
    pub profiler: String,
    /// The capture's monitor (`none` for kernel-level only).
    pub monitor: String,
    /// The monitor's coverage is partial by design (budget or sampling).
    pub budgeted: bool,
    pub true_cause: CauseLabel,
    pub claimed_cause: Option<CauseLabel>,
    pub cause_correct: bool,
    pub true_class: String,
    pub claimed_class: Option<String>,
    pub class_correct: bool,
    /// The diagnosis claimed the whole answer resolved.
    pub complete: bool,
    /// Highest cause score of any diagnosis.
    pub top_score: f64,
    /// Every record of the injected cause's evidence is in the capture.
    pub evidence_covered: bool,
    /// Not covered, yet claimed complete or scored ≥ [`CONFIDENT_SCORE`].
    pub false_confident: bool,
    /// Lowest per-class coverage of the capture (1 for none).
    pub coverage: f64,
    pub bytes_exported: u64,
    /// The capture's outer kernel duration and the same case's unmonitored one, ns.
    pub kernel_ns: u64,
    pub unmonitored_kernel_ns: u64,
    pub config_apply_ns: u64,
    pub analysis_ms: f64,
}

/// Whether `capture` holds the evidence of the injected cause: for a log,
/// every injected task's start and end, and the event that shows the cause
/// (ready for queueing causes, wait end for a late notification, at least one
/// queue-pressure event for an oversubscription); for aggregates (the fixed
/// monitor's or a monitor program's), every injected task sampled and nothing dropped; PC sampling is statistical and
/// drops nothing. No capture covers nothing.
pub fn evidence_covered(t: &TaskTelemetry, capture: Option<&Capture>) -> bool {
    let Some(c) = capture else {
        return false;
    };
    if let Some(pc) = &c.pc_sampling {
        return pc.available;
    }
    let dropped: u64 = c.coverage.iter().map(|x| x.dropped).sum();
    // Aggregates from the fixed monitor or from a monitor program (`ebpf`).
    if c.aggregates.is_some() && !c.config.log {
        return dropped == 0
            && t.truth
                .injected_tasks
                .iter()
                .all(|&task| sampled(task, c.config.sample_period, c.config.sample_seed));
    }
    if !c.config.log {
        return false;
    }
    let cause = t.truth.cause;
    let needs: &[HookKind] = match cause {
        CauseLabel::LateNotification => &[HookKind::Start, HookKind::End, HookKind::WaitEnd],
        CauseLabel::ReadyStarvation | CauseLabel::RoutingSkew => {
            &[HookKind::Start, HookKind::End, HookKind::Ready]
        }
        CauseLabel::QueueOversubscription => &[HookKind::Start, HookKind::End, HookKind::Ready],
        _ => &[HookKind::Start, HookKind::End],
    };
    let have: HashSet<(u32, HookKind)> = c.events.iter().map(|e| (e.task, e.kind)).collect();
    let tasks_ok = t
        .truth
        .injected_tasks
        .iter()
        .all(|&task| needs.iter().all(|&k| have.contains(&(task, k))));
    let pressure_ok = cause != CauseLabel::QueueOversubscription
        || c.events.iter().any(|e| e.kind == HookKind::QueuePressure);
    tasks_ok && pressure_ok
}

/// Scores one explanation of a task view.
pub fn score_track_case(
    bundle: &Bundle,
    telemetry: &TaskTelemetry,
    view: &TaskView,
    explanation: &Explanation,
) -> (TrackCase, CaseScore) {
    let cs = score_case(bundle, &view.base, explanation);
    let q = |question: Question| cs.symptoms.iter().find(|s| s.question == question);
    let cause = q(Question::Cause);
    let class = q(Question::Operator);
    let capture = view.capture.as_ref();
    let covered = evidence_covered(telemetry, capture);
    let complete = explanation.diagnoses.iter().any(|d| d.complete);
    let top_score = explanation
        .diagnoses
        .iter()
        .flat_map(|d| d.causes.iter().map(|c| c.score))
        .filter(|s| s.is_finite())
        .fold(0.0, f64::max);
    let unmonitored = telemetry
        .captures
        .iter()
        .find(|c| c.config.name == "none")
        .map(|c| c.kernel_ns)
        .unwrap_or(0);
    let tc = TrackCase {
        bundle: bundle.id(),
        family: telemetry.scenario.family.clone(),
        variant: telemetry.scenario.variant.clone(),
        repetition: bundle.manifest.repetition,
        backend: bundle.manifest.backend.clone(),
        profiler: explanation.meta.profiler.clone(),
        monitor: capture
            .map(|c| c.config.name.clone())
            .unwrap_or_else(|| "none".into()),
        budgeted: capture.is_some_and(|c| c.config.is_budgeted()),
        true_cause: telemetry.truth.cause,
        claimed_cause: cause.and_then(|s| s.claimed_cause),
        cause_correct: cause.is_some_and(|s| s.correct),
        true_class: telemetry.truth.affected_class.clone(),
        claimed_class: class.and_then(|s| s.claimed_answer.clone()),
        class_correct: class.is_some_and(|s| s.correct),
        complete,
        top_score,
        evidence_covered: covered,
        false_confident: !covered && (complete || top_score >= CONFIDENT_SCORE),
        coverage: capture
            .map(|c| {
                c.coverage
                    .iter()
                    .filter(|x| x.eligible > 0)
                    .map(|x| x.ratio())
                    .fold(1.0, f64::min)
            })
            .unwrap_or(1.0),
        bytes_exported: capture.map(|c| c.bytes_exported).unwrap_or(0),
        kernel_ns: capture.map(|c| c.kernel_ns).unwrap_or(unmonitored),
        unmonitored_kernel_ns: unmonitored,
        config_apply_ns: capture.map(|c| c.config_apply_ns).unwrap_or(0),
        analysis_ms: cs.analysis_ms,
    };
    (tc, cs)
}

/// One row of the track's leaderboard: profiler × monitor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrackRow {
    pub profiler: String,
    pub monitor: String,
    pub budgeted: bool,
    pub cases: u64,
    pub cause_accuracy: f64,
    pub class_accuracy: f64,
    /// Null when no pair group.
    pub pair_accuracy: Option<f64>,
    pub pairs: u64,
    /// Cases whose capture did not cover the injected cause's evidence.
    pub under_covered: u64,
    /// false_confident / under_covered (null when none was under-covered).
    pub false_confidence_rate: Option<f64>,
    pub mean_coverage: f64,
    pub mean_bytes_exported: f64,
    /// Median over cases of kernel_ns / unmonitored_kernel_ns − 1, in percent.
    pub perturbation_pct: f64,
    pub median_config_apply_us: f64,
    pub mean_analysis_ms: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Rounds to 6 decimals, as the track's rows are written.
fn six_decimals(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// Aggregates track cases into rows (sorted by profiler, then monitor).
pub fn track_leaderboard(cases: &[TrackCase]) -> Vec<TrackRow> {
    let mut groups: BTreeMap<(String, String), Vec<&TrackCase>> = BTreeMap::new();
    for c in cases {
        groups
            .entry((c.profiler.clone(), c.monitor.clone()))
            .or_default()
            .push(c);
    }
    groups
        .into_iter()
        .map(|((profiler, monitor), v)| {
            let n = v.len() as f64;
            // Pairs: (family, backend, repetition) with ≥ 2 variants.
            let mut pg: BTreeMap<(String, String, u32), BTreeMap<String, bool>> = BTreeMap::new();
            for c in &v {
                let e = pg
                    .entry((c.family.clone(), c.backend.clone(), c.repetition))
                    .or_default()
                    .entry(c.variant.clone())
                    .or_insert(true);
                *e &= c.cause_correct && c.class_correct;
            }
            let pairs: Vec<bool> = pg
                .values()
                .filter(|m| m.len() >= 2)
                .map(|m| m.values().all(|&x| x))
                .collect();
            let under: Vec<&&TrackCase> = v.iter().filter(|c| !c.evidence_covered).collect();
            TrackRow {
                profiler,
                monitor,
                budgeted: v.iter().any(|c| c.budgeted),
                cases: v.len() as u64,
                cause_accuracy: six_decimals(
                    v.iter().filter(|c| c.cause_correct).count() as f64 / n,
                ),
                class_accuracy: six_decimals(
                    v.iter().filter(|c| c.class_correct).count() as f64 / n,
                ),
                pair_accuracy: (!pairs.is_empty()).then(|| {
                    six_decimals(pairs.iter().filter(|&&x| x).count() as f64 / pairs.len() as f64)
                }),
                pairs: pairs.len() as u64,
                under_covered: under.len() as u64,
                false_confidence_rate: (!under.is_empty()).then(|| {
                    six_decimals(
                        under.iter().filter(|c| c.false_confident).count() as f64
                            / under.len() as f64,
                    )
                }),
                mean_coverage: six_decimals(v.iter().map(|c| c.coverage).sum::<f64>() / n),
                mean_bytes_exported: six_decimals(
                    v.iter().map(|c| c.bytes_exported as f64).sum::<f64>() / n,
                ),
                perturbation_pct: six_decimals(median(
                    v.iter()
                        .filter(|c| c.unmonitored_kernel_ns > 0)
                        .map(|c| {
                            (c.kernel_ns as f64 / c.unmonitored_kernel_ns as f64 - 1.0) * 100.0
                        })
                        .collect(),
                )),
                median_config_apply_us: six_decimals(median(
                    v.iter().map(|c| c.config_apply_ns as f64 / 1e3).collect(),
                )),
                mean_analysis_ms: six_decimals(v.iter().map(|c| c.analysis_ms).sum::<f64>() / n),
            }
        })
        .collect()
}

/// The rows as a Markdown table.
pub fn track_markdown(rows: &[TrackRow]) -> String {
    let f = |x: Option<f64>| x.map(|v| format!("{v:.3}")).unwrap_or_else(|| "n/a".into());
    let mut s = String::from(
        "| profiler | monitor | cases | cause acc | class acc | pair acc | under-covered | false conf | coverage | bytes | perturbation % | config apply µs |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {:.3} | {:.3} | {} | {} | {} | {:.3} | {:.0} | {:.2} | {:.1} |\n",
            r.profiler,
            r.monitor,
            r.cases,
            r.cause_accuracy,
            r.class_accuracy,
            f(r.pair_accuracy),
            r.under_covered,
            f(r.false_confidence_rate),
            r.mean_coverage,
            r.mean_bytes_exported,
            r.perturbation_pct,
            r.median_config_apply_us
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(variant: &str, rep: u32, right: bool, covered: bool, complete: bool) -> TrackCase {
        TrackCase {
            bundle: format!("f.{variant}.r{rep}"),
            family: "f".into(),
            variant: variant.into(),
            repetition: rep,
            backend: "sim".into(),
            profiler: "p".into(),
            monitor: "m".into(),
            budgeted: !covered,
            true_cause: CauseLabel::TaskClassDelay,
            claimed_cause: Some(CauseLabel::TaskClassDelay),
            cause_correct: right,
            true_class: "gemm".into(),
            claimed_class: Some("gemm".into()),
            class_correct: true,
            complete,
            top_score: if complete { 0.9 } else { 0.5 },
            evidence_covered: covered,
            false_confident: !covered && complete,
            coverage: if covered { 1.0 } else { 0.1 },
            bytes_exported: 100,
            kernel_ns: 1010,
            unmonitored_kernel_ns: 1000,
            config_apply_ns: 3000,
            analysis_ms: 1.0,
        }
    }

    #[test]
    fn a_pair_counts_only_when_every_variant_is_right() {
        let rows = track_leaderboard(&[
            case("a", 0, true, true, true),
            case("b", 0, true, true, true),
            case("a", 1, true, true, true),
            case("b", 1, false, true, true),
        ]);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].pairs, 2);
        assert_eq!(rows[0].pair_accuracy, Some(0.5));
        assert_eq!(rows[0].cause_accuracy, 0.75);
        assert_eq!(rows[0].false_confidence_rate, None);
        assert!((rows[0].perturbation_pct - 1.0).abs() < 1e-9);
        assert!((rows[0].median_config_apply_us - 3.0).abs() < 1e-9);
    }

    #[test]
    fn false_confidence_is_over_under_covered_cases() {
        let rows = track_leaderboard(&[
            case("a", 0, true, false, true),
            case("b", 0, true, false, false),
            case("a", 1, true, true, true),
        ]);
        assert_eq!(rows[0].under_covered, 2);
        assert_eq!(rows[0].false_confidence_rate, Some(0.5));
    }
}
