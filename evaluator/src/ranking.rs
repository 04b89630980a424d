//! The one ranking rule of `leaderboard.md`, the summary `run` prints and the HTML site:
//! profilers are ranked by pair accuracy in the headline view, and profilers whose 95 %
//! intervals overlap share a rank (evaluator/METRICS.md, "Ranking").

use crate::leaderboard::{is_probe, Leaderboard, LeaderboardRow};
use ground_truth::{Collectors, Mode};

/// The rule, as the pages state it.
pub const RANK_RULE: &str = "Ranked by pair accuracy; profilers whose 95 % intervals \
    overlap (directly or through a chain of overlapping intervals) share a rank, one more \
    than the number of profilers ranked above them; an undefined pair accuracy ranks last.";

/// The view a profiler is ranked by, in order of preference: every collector the bundle
/// has (combined, or Kineto's with the host's on the PyTorch track), then one collector
/// alone; instrumented before closed. The first that has a row is the headline view.
pub const HEADLINE_VIEWS: [(Collectors, Mode); 10] = [
    (Collectors::Combined, Mode::Instrumented),
    (Collectors::KinetoHost, Mode::Instrumented),
    (Collectors::Kineto, Mode::Instrumented),
    (Collectors::Cupti, Mode::Instrumented),
    (Collectors::Host, Mode::Instrumented),
    (Collectors::Combined, Mode::Closed),
    (Collectors::KinetoHost, Mode::Closed),
    (Collectors::Kineto, Mode::Closed),
    (Collectors::Cupti, Mode::Closed),
    (Collectors::Host, Mode::Closed),
];

/// A row with its rank (1 = best; equal ranks are ties).
#[derive(Debug, Clone, Copy)]
pub struct Ranked<'a> {
    pub rank: usize,
    pub row: &'a LeaderboardRow,
}

/// The pair-accuracy interval a row is compared by: its bootstrap interval, or the
/// value itself where the interval is undefined (one family instance).
fn span(row: &LeaderboardRow) -> Option<(f64, f64)> {
    let value = row.pair_accuracy?;
    Some(
        row.ci
            .get("pair_accuracy")
            .map_or((value, value), |i| (i.low.min(value), i.high.max(value))),
    )
}

/// Ranks `rows` (one view's) by [`RANK_RULE`]. Sorted by pair accuracy, then root-cause
/// accuracy (top-1), then name, higher first; an undefined rate sorts last.
pub fn rank_rows<'a>(mut rows: Vec<&'a LeaderboardRow>) -> Vec<Ranked<'a>> {
    let key = |x: Option<f64>| x.unwrap_or(f64::NEG_INFINITY);
    rows.sort_by(|a, b| {
        key(b.pair_accuracy)
            .total_cmp(&key(a.pair_accuracy))
            .then(key(b.root_cause_top1).total_cmp(&key(a.root_cause_top1)))
            .then(a.profiler.cmp(&b.profiler))
    });
    // Groups of overlapping intervals: merged by descending upper end, each group's
    // union a segment disjoint from the others. Every value lies in its own interval,
    // so the groups follow the sorted order and each is a run of it.
    let mut by_high: Vec<(f64, f64)> = rows.iter().filter_map(|r| span(r)).collect();
    by_high.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut lows: Vec<f64> = Vec::new();
    for (low, high) in by_high {
        match lows.last_mut() {
            Some(group_low) if high >= *group_low => *group_low = group_low.min(low),
            _ => lows.push(low),
        }
    }
    // A row's group: the first whose lower end its value reaches; undefined: last.
    let group_of = |r: &LeaderboardRow| {
        r.pair_accuracy.map_or(lows.len(), |v| {
            lows.iter().position(|&low| v >= low).unwrap_or(lows.len())
        })
    };
    let mut ranked: Vec<Ranked> = Vec::with_capacity(rows.len());
    for (i, row) in rows.into_iter().enumerate() {
        let rank = match ranked.last() {
            Some(prev) if group_of(prev.row) == group_of(row) => prev.rank,
            _ => i + 1,
        };
        ranked.push(Ranked { rank, row });
    }
    ranked
}

impl Leaderboard {
    /// The view profilers are ranked by: the first of [`HEADLINE_VIEWS`] with a row.
    pub fn headline_view(&self) -> Option<(Collectors, Mode)> {
        HEADLINE_VIEWS.into_iter().find(|&(c, m)| {
            self.rows
                .iter()
                .any(|r| r.collectors == c && r.mode == m && !is_probe(&r.profiler))
        })
    }

    /// The rows of one view, probes left out, ranked by [`RANK_RULE`]: the hidden
    /// split's rows only wherever there are any ([`Leaderboard::headline_material`]).
    pub fn ranked_view(&self, collectors: Collectors, mode: Mode) -> Vec<Ranked<'_>> {
        let material = self.headline_material();
        rank_rows(
            self.rows
                .iter()
                .filter(|r| r.collectors == collectors && r.mode == mode && !is_probe(&r.profiler))
                .filter(|r| r.material == material)
                .collect(),
        )
    }

    /// Every profiler that is not a probe, in ranking order: by its rank in the headline
    /// view, then the profilers without a row in it (rank `None`), by name.
    pub fn ranked_profilers(&self) -> Vec<(Option<usize>, String)> {
        let mut out: Vec<(Option<usize>, String)> = self
            .headline_view()
            .map(|(c, m)| {
                self.ranked_view(c, m)
                    .into_iter()
                    .map(|r| (Some(r.rank), r.row.profiler.clone()))
                    .collect()
            })
            .unwrap_or_default();
        for p in self.profilers() {
            if !is_probe(&p) && !out.iter().any(|(_, q)| *q == p) {
                out.push((None, p));
            }
        }
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bootstrap::Interval;

    /// A combined/instrumented row with only its pair accuracy and interval set.
    pub(crate) fn row(
        profiler: &str,
        value: Option<f64>,
        ci: Option<(f64, f64)>,
    ) -> LeaderboardRow {
        LeaderboardRow {
            profiler: profiler.into(),
            collectors: Collectors::Combined,
            mode: Mode::Instrumented,
            cases: 0,
            pair_accuracy: value,
            root_cause_top1: None,
            root_cause_top3: None,
            edge_precision: None,
            edge_recall: None,
            edge_f1: None,
            false_causal_edges: 0,
            request_correct: None,
            request_wrong: None,
            request_abstained: None,
            critical_path_fidelity: None,
            unresolved_recall: None,
            false_confidence_rate: None,
            brier: None,
            analysis_ms: None,
            pairs: 0,
            symptoms: 0,
            symptom_accuracy: None,
            phase_blame_error: None,
            lossy_cases: 0,
            unresolved_symptoms: 0,
            ci: ci
                .map(|(low, high)| {
                    [("pair_accuracy".to_string(), Interval { low, high })]
                        .into_iter()
                        .collect()
                })
                .unwrap_or_default(),
            crashed: 0,
            material: Default::default(),
        }
    }

    fn ranks(rows: &[LeaderboardRow]) -> Vec<(usize, &str)> {
        rank_rows(rows.iter().collect())
            .into_iter()
            .map(|r| (r.rank, r.row.profiler.as_str()))
            .collect()
    }

    #[test]
    fn ties_share_a_rank() {
        // Five profilers at 0.00 with overlapping intervals are one tie, not ranks 2–6.
        let mut rows = vec![row("best", Some(0.9), Some((0.8, 1.0)))];
        for name in ["e", "d", "c", "b", "a"] {
            rows.push(row(name, Some(0.0), Some((0.0, 0.1))));
        }
        assert_eq!(
            ranks(&rows),
            [
                (1, "best"),
                (2, "a"),
                (2, "b"),
                (2, "c"),
                (2, "d"),
                (2, "e")
            ]
        );
    }

    #[test]
    fn overlap_chains_and_separate_groups_rank_by_competition() {
        let rows = vec![
            row("a", Some(0.9), Some((0.85, 0.95))),
            row("b", Some(0.8), Some((0.7, 0.88))),
            // c overlaps b only, and with it joins a's group.
            row("c", Some(0.6), Some((0.5, 0.72))),
            row("d", Some(0.3), Some((0.2, 0.4))),
            // No interval: compared by its value alone.
            row("e", Some(0.1), None),
            row("f", None, None),
            row("g", None, None),
        ];
        assert_eq!(
            ranks(&rows),
            [
                (1, "a"),
                (1, "b"),
                (1, "c"),
                (4, "d"),
                (5, "e"),
                (6, "f"),
                (6, "g")
            ]
        );
    }

    #[test]
    fn a_wide_interval_below_joins_groups_above_it() {
        // c's value is lowest, but its interval reaches both a's and b's: one tie.
        let rows = vec![
            row("a", Some(0.7), Some((0.6, 0.8))),
            row("b", Some(0.5), Some((0.45, 0.55))),
            row("c", Some(0.4), Some((0.1, 0.9))),
        ];
        assert_eq!(ranks(&rows), [(1, "a"), (1, "b"), (1, "c")]);
    }

    #[test]
    fn the_headline_view_is_combined_instrumented_else_the_next_present() {
        let mut lb = Leaderboard::default();
        let mut host = row("x", Some(0.5), None);
        host.collectors = Collectors::Host;
        lb.rows.push(host);
        assert_eq!(
            lb.headline_view(),
            Some((Collectors::Host, Mode::Instrumented))
        );
        lb.rows.push(row("y", Some(0.2), None));
        assert_eq!(
            lb.headline_view(),
            Some((Collectors::Combined, Mode::Instrumented))
        );
        // x has no combined row: after the ranked ones, unranked.
        assert_eq!(
            lb.ranked_profilers(),
            [(Some(1), "y".to_string()), (None, "x".to_string())]
        );
    }
}
