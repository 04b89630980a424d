//! The leaderboard's statistics (evaluator/METRICS.md, "Pair accuracy", "Confidence
//! intervals", "Per-axis breakdown"): pair units, cluster-bootstrap intervals and the
//! per-axis tables, on hand-built case scores of generated and catalog scenarios.

mod common;

use common::*;
use evaluator::{parse_scores, score_case, CaseScore, Interval, Leaderboard, LeaderboardRow};
use ground_truth::scenario::AxisValue;
use std::collections::BTreeMap;
use std::path::Path;

/// A scored case to copy: the fixture's perfect explanation (combined, instrumented).
fn base() -> CaseScore {
    let f = Fixture::new(Rids::DENSE);
    score_case(&f.bundle, &f.full_view(), &f.perfect("causal-graph"))
}

/// One case of `family`'s `instance` (None: a catalog scenario), every symptom right or wrong.
fn case(
    family: &str,
    instance: Option<u64>,
    variant: &str,
    repetition: u32,
    right: bool,
    axes: &[(&str, AxisValue)],
) -> CaseScore {
    let mut c = base();
    let name = match instance {
        Some(i) => format!("{family}.i{i}.{variant}"),
        None => format!("{family}.{variant}"),
    };
    c.bundle = format!("{name}.r{repetition}");
    c.scenario = name;
    c.family = family.into();
    c.variant = variant.into();
    c.repetition = repetition;
    c.instance = instance;
    c.axes = axes
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    for s in &mut c.symptoms {
        s.correct = right;
        s.top1 = right;
    }
    c
}

fn num(x: f64) -> AxisValue {
    AxisValue::Number(x)
}

/// `instances` generated instances with variants a and b, `reps` repetitions each;
/// instance i is told apart iff `right(i)`.
fn generated(instances: u64, reps: u32, right: impl Fn(u64) -> bool) -> Vec<CaseScore> {
    let mut out = Vec::new();
    for i in 0..instances {
        let magnitude = if i % 2 == 0 { 0.1 } else { 2.0 };
        let axes = [
            ("magnitude_ratio", num(magnitude)),
            ("gating_depth", num((i % 8 + 1) as f64)),
            ("peers", AxisValue::Category("clean".into())),
        ];
        for rep in 0..reps {
            out.push(case("gen", Some(i), "a", rep, true, &axes));
            out.push(case("gen", Some(i), "b", rep, right(i), &axes));
        }
    }
    out
}

fn row(lb: &Leaderboard) -> &LeaderboardRow {
    assert_eq!(lb.rows.len(), 1, "one profiler × view");
    &lb.rows[0]
}

fn ci(r: &LeaderboardRow, metric: &str) -> Interval {
    *r.ci
        .get(metric)
        .unwrap_or_else(|| panic!("no interval for {metric}: {:?}", r.ci))
}

fn width(i: Interval) -> f64 {
    i.high - i.low
}

#[test]
fn a_generated_instance_is_one_pair_and_repetitions_are_averaged() {
    // Instance 0 told apart, instance 1 not: two independent pairs.
    let scores = generated(2, 1, |i| i == 0);
    let lb = Leaderboard::from_scores(&scores);
    assert_eq!(row(&lb).pairs, 2);
    assert_eq!(row(&lb).pair_accuracy, Some(0.5));
    // A catalog family run 5 times is one pair; its score is the share of
    // repetitions told apart (3 of 5).
    let mut catalog = Vec::new();
    for rep in 0..5 {
        catalog.push(case("cat", None, "a", rep, true, &[]));
        catalog.push(case("cat", None, "b", rep, rep < 3, &[]));
    }
    let lb = Leaderboard::from_scores(&catalog);
    assert_eq!(row(&lb).pairs, 1);
    assert_eq!(row(&lb).pair_accuracy, Some(0.6));
    assert_eq!(lb.families_pooled[0].pairs, 1);
    assert_eq!(lb.families_pooled[0].pairs_correct, 0.6);
    assert!(
        lb.to_markdown().contains("| cat | 0.600 (0.6/1) |"),
        "{}",
        lb.to_markdown()
    );
    // Variants of different instances are never paired with each other.
    let lone = vec![
        case("gen", Some(1), "a", 0, true, &[]),
        case("gen", Some(2), "b", 0, true, &[]),
    ];
    assert_eq!(row(&Leaderboard::from_scores(&lone)).pairs, 0);
}

#[test]
fn every_interval_contains_its_point_estimate() {
    let scores = generated(40, 2, |i| i % 3 != 0);
    let lb = Leaderboard::from_scores(&scores);
    let r = row(&lb);
    assert!(!r.ci.is_empty());
    for (metric, i) in &r.ci {
        let point = Leaderboard::metric(r, metric).unwrap();
        assert!(
            i.low <= point && point <= i.high,
            "{metric}: {point} outside [{}, {}]",
            i.low,
            i.high
        );
        assert!(i.low >= 0.0 && i.high <= 1.0, "{metric}: {i:?}");
    }
    // The pair accuracy is not certain: 2 of 3 instances told apart.
    assert!(width(ci(r, "pair_accuracy")) > 0.05);
    for a in &lb.axes {
        for (point, i) in [
            (a.pair_accuracy, a.pair_accuracy_ci),
            (a.root_cause_top1, a.root_cause_top1_ci),
        ] {
            if let (Some(p), Some(i)) = (point, i) {
                assert!(i.low <= p && p <= i.high, "{a:?}");
            }
        }
    }
    for h in &lb.headline {
        let (p, i) = (h.pair_accuracy.unwrap(), h.pair_accuracy_ci.unwrap());
        assert!(i.low <= p && p <= i.high, "{h:?}");
    }
}

#[test]
fn more_independent_pairs_narrow_the_interval() {
    let pattern = |i: u64| i % 10 < 7;
    let few = Leaderboard::from_scores(&generated(10, 1, pattern));
    let many = Leaderboard::from_scores(&generated(200, 1, pattern));
    assert_eq!(row(&few).pair_accuracy, Some(0.7));
    assert_eq!(row(&many).pair_accuracy, Some(0.7));
    let (w_few, w_many) = (
        width(ci(row(&few), "pair_accuracy")),
        width(ci(row(&many), "pair_accuracy")),
    );
    assert!(w_many < w_few / 2.0, "{w_few} vs {w_many}");
}

#[test]
fn repetitions_of_one_instance_do_not_narrow_the_interval() {
    let pattern = |i: u64| i % 10 < 7;
    let once = Leaderboard::from_scores(&generated(10, 1, pattern));
    let tenfold = Leaderboard::from_scores(&generated(10, 10, pattern));
    let (a, b) = (row(&once), row(&tenfold));
    assert_eq!(a.pairs, 10);
    assert_eq!(b.pairs, 10, "repetitions are not pairs");
    assert_eq!(b.cases, 10 * a.cases);
    assert_eq!(a.pair_accuracy, b.pair_accuracy);
    for metric in ["pair_accuracy", "root_cause_top1", "symptom_accuracy"] {
        assert_eq!(ci(a, metric), ci(b, metric), "{metric}");
    }
}

#[test]
fn the_same_scores_give_the_same_intervals_in_any_order() {
    let scores = generated(30, 3, |i| i % 4 != 1);
    let lb = Leaderboard::from_scores(&scores);
    let mut reversed = scores.clone();
    reversed.reverse();
    let again = Leaderboard::from_scores(&reversed);
    assert_eq!(lb, again);
    assert_eq!(lb.to_csv(), again.to_csv());
    assert_eq!(lb.to_axes_csv(), again.to_axes_csv());
}

#[test]
fn old_scores_without_instance_or_axes_still_aggregate() {
    let c = case("cat", None, "a", 0, true, &[]);
    let line = serde_json::to_string(&c).unwrap();
    assert!(!line.contains("\"instance\"") && !line.contains("\"axes\""));
    let mut text = line.clone();
    text.push('\n');
    text.push_str(&serde_json::to_string(&case("cat", None, "b", 0, true, &[])).unwrap());
    let scores = parse_scores(Path::new("old/scores.jsonl"), text.as_bytes()).unwrap();
    assert!(scores
        .iter()
        .all(|s| s.instance.is_none() && s.axes.is_empty()));
    let lb = Leaderboard::from_scores(&scores);
    assert_eq!(row(&lb).pair_accuracy, Some(1.0));
    assert!(lb.axes.is_empty() && lb.headline.is_empty());
    assert!(lb.to_markdown().contains("No generated cases"));
    // A leaderboard.json written before intervals and axes existed still reads.
    let mut json: serde_json::Value = serde_json::from_str(&lb.to_json()).unwrap();
    let obj = json.as_object_mut().unwrap();
    obj.remove("axes");
    obj.remove("headline");
    for r in obj["rows"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("ci");
    }
    let old: Leaderboard = serde_json::from_value(json).unwrap();
    assert!(old.rows[0].ci.is_empty());
    assert_eq!(
        Leaderboard::metric(&old.rows[0], "pair_accuracy_ci_low"),
        None
    );
}

#[test]
fn intervals_are_columns_of_the_csv_after_the_contract() {
    let lb = Leaderboard::from_scores(&generated(20, 1, |i| i % 2 == 0));
    let csv = lb.to_csv();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        &header[..evaluator::CSV_COLUMNS.len()],
        evaluator::CSV_COLUMNS
    );
    let cells: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(cells.len(), header.len());
    let at = |name: &str| cells[header.iter().position(|h| *h == name).unwrap()];
    for m in evaluator::CI_METRICS {
        assert!(header.contains(&format!("{m}_ci_low").as_str()), "{m}");
        assert!(header.contains(&format!("{m}_ci_high").as_str()), "{m}");
    }
    let (low, high): (f64, f64) = (
        at("pair_accuracy_ci_low").parse().unwrap(),
        at("pair_accuracy_ci_high").parse().unwrap(),
    );
    assert!(low <= 0.5 && 0.5 <= high && low < high, "{low} {high}");
    let md = lb.to_markdown();
    assert!(md.contains(&format!("0.500 [{low:.3}, {high:.3}]")), "{md}");
}

#[test]
fn the_axis_breakdown_buckets_pairs_and_gives_the_headline() {
    // Even instances: magnitude 0.1, not told apart; odd: magnitude 2.0, told apart.
    let scores = generated(20, 2, |i| i % 2 == 1);
    let lb = Leaderboard::from_scores(&scores);
    let by: BTreeMap<(&str, &str), &evaluator::AxisRow> = lb
        .axes
        .iter()
        .map(|a| ((a.axis.as_str(), a.bucket.as_str()), a))
        .collect();
    let low = by[&("magnitude_ratio", "<0.3")];
    let high = by[&("magnitude_ratio", "1-3")];
    assert_eq!((low.pairs, low.instances, low.cases), (10, 10, 40));
    assert_eq!(low.pair_accuracy, Some(0.0));
    assert_eq!(high.pair_accuracy, Some(1.0));
    assert_eq!(by[&("peers", "clean")].pairs, 20);
    let depths: Vec<&str> = lb
        .axes
        .iter()
        .filter(|a| a.axis == "gating_depth")
        .map(|a| a.bucket.as_str())
        .collect();
    assert_eq!(depths, ["1", "2", "3-4", "5-8"]);
    let head: BTreeMap<&str, f64> = lb
        .headline
        .iter()
        .map(|h| (h.magnitude_ratio.as_str(), h.pair_accuracy.unwrap()))
        .collect();
    assert_eq!(head, BTreeMap::from([("<0.3", 0.0), (">=0.3", 1.0)]));
    let csv = lb.to_axes_csv();
    assert!(csv.starts_with("profiler,collectors,mode,axis,bucket,instances,cases,pairs,"));
    assert!(
        csv.contains("causal-graph,combined,instrumented,magnitude_ratio,<0.3,10,40,10,0.000000,"),
        "{csv}"
    );
    let md = lb.to_markdown();
    assert!(
        md.contains("## Headline: pair accuracy by injection magnitude"),
        "{md}"
    );
    assert!(md.contains("### gating_depth"), "{md}");
    // A pair whose variants fall in different buckets is counted as `mixed`.
    let mixed = [
        case("gen", Some(1), "a", 0, true, &[("gating_depth", num(1.0))]),
        case("gen", Some(1), "b", 0, true, &[("gating_depth", num(6.0))]),
    ];
    let lb = Leaderboard::from_scores(&mixed);
    let pairs: Vec<(&str, u64)> = lb
        .axes
        .iter()
        .map(|a| (a.bucket.as_str(), a.pairs))
        .collect();
    assert_eq!(pairs, [("1", 0), ("5-8", 0), ("mixed", 1)]);
}

#[test]
fn scoring_copies_the_space_point_from_the_manifest() {
    let mut f = Fixture::new(Rids::DENSE);
    let plain = score_case(&f.bundle, &f.full_view(), &f.perfect("causal-graph"));
    assert_eq!((plain.instance, plain.axes.len()), (None, 0));
    f.bundle.manifest.scenario.space = Some(ground_truth::scenario::SpacePoint {
        suite: "dev".into(),
        instance: 42,
        axes: BTreeMap::from([
            ("gating_depth".to_string(), num(3.0)),
            ("peers".to_string(), AxisValue::Category("polluted".into())),
        ]),
    });
    let c = score_case(&f.bundle, &f.full_view(), &f.perfect("causal-graph"));
    assert_eq!(c.instance, Some(42));
    assert_eq!(c.axes["gating_depth"], num(3.0));
    let line = evaluator::scores_to_jsonl(std::slice::from_ref(&c));
    let back = parse_scores(Path::new("scores.jsonl"), line.as_bytes()).unwrap();
    assert_eq!(back, vec![c]);
}

/// Writes a demonstration result set's leaderboard and plots when
/// `CAUSALBENCH_STATS_DEMO` names a directory (for looking at them; asserts nothing
/// beyond the files being written).
#[test]
fn demo_result_set() {
    let Some(dir) = std::env::var_os("CAUSALBENCH_STATS_DEMO") else {
        return;
    };
    let mut scores = generated(60, 2, |i| i % 2 == 1 || i % 5 == 0);
    let other: Vec<CaseScore> = generated(60, 2, |i| i % 3 == 0)
        .into_iter()
        .map(|mut c| {
            c.profiler = "timestamp-join".into();
            c
        })
        .collect();
    scores.extend(other);
    let rep = evaluator::write_results(Path::new(&dir), &scores).unwrap();
    assert!(rep.files.iter().all(|f| f.is_file()));
}

#[test]
fn crashes_are_counted_with_their_message_and_still_scored_as_unanswered() {
    let mut scores = Vec::new();
    for rep in 0..3 {
        scores.push(case("cat", None, "a", rep, true, &[]));
        let mut crashed = case("cat", None, "b", rep, false, &[]);
        if rep < 2 {
            crashed.crashed = Some("HTA raised KeyError: 0".into());
        }
        scores.push(crashed);
    }
    let lb = Leaderboard::from_scores(&scores);
    let r = row(&lb);
    assert_eq!(r.crashed, 2);
    // A crash is still a case that answered nothing: it stays in the denominators.
    assert_eq!(r.cases, 6);
    assert_eq!(lb.crashes.len(), 1);
    assert_eq!(lb.crashes[0].message, "HTA raised KeyError: 0");
    assert_eq!(lb.crashes[0].cases, 2);
    assert_eq!(lb.crashes[0].families, vec!["cat".to_string()]);
    let md = lb.to_markdown();
    assert!(md.contains("## Analyzer crashes"), "{md}");
    assert!(md.contains("`HTA raised KeyError: 0`"), "{md}");
    // Without a crash, neither the count nor the table is written.
    let json = Leaderboard::from_scores(&scores[..1]).to_json();
    assert!(!json.contains("crash"), "{json}");
    assert!(!Leaderboard::from_scores(&scores[..1])
        .to_markdown()
        .contains("Analyzer crashes"));
}
