//! The megakernel track end to end on the simulator: every catalog family ×
//! two repetitions, recorded, packed, read back, viewed, profiled and scored.
//! These are the acceptance claims, checked where CI can check them.

use evaluator::megakernel::TrackRow;
use ground_truth::megakernel::{HookKind, TaskTelemetry};
use ground_truth::{NodeKind, Readable};
use megakernel::case::{run_family, FamilyOptions};
use megakernel::pack::{self, PackedCase};
use megakernel::{catalog, signature, track, SimExecutor};
use std::sync::OnceLock;

struct Run {
    cases: Vec<PackedCase>,
    /// (family, rep, kernel ns of each variant)
    pairs: Vec<(String, u32, Vec<u64>)>,
    rows: Vec<TrackRow>,
    scores: Vec<evaluator::megakernel::TrackCase>,
}

fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        let all = catalog::load().expect("the catalog parses");
        // Fewer workers than an H200's 132 keep the test quick; the task graph,
        // injections and monitors are the same.
        let mut ex = SimExecutor {
            workers: 48,
            ..Default::default()
        };
        let mut cases = Vec::new();
        let mut pairs = Vec::new();
        for (family, variants) in catalog::families(&all) {
            for rep in 0..2 {
                let opt = FamilyOptions {
                    repetition: rep,
                    ..Default::default()
                };
                let res = run_family(&mut ex, &variants, &opt).expect("the family runs");
                assert_eq!(res.len(), variants.len());
                pairs.push((
                    family.clone(),
                    rep,
                    res.iter().map(|c| c.kernel_ns).collect(),
                ));
                cases.extend(res.into_iter().map(|c| PackedCase {
                    bundle: c.bundle,
                    telemetry: c.telemetry,
                }));
            }
        }
        let (scores, rows) = track::leaderboard(&cases);
        Run {
            cases,
            pairs,
            rows,
            scores,
        }
    })
}

fn row(p: &str, m: &str) -> &'static TrackRow {
    run()
        .rows
        .iter()
        .find(|r| r.profiler == p && r.monitor == m)
        .unwrap_or_else(|| panic!("no row {p} × {m}"))
}

#[test]
fn catalog_has_four_families_covering_every_injection() {
    let all = catalog::load().unwrap();
    let fams = catalog::families(&all);
    assert_eq!(fams.len(), 4);
    let mut kinds: Vec<_> = all.iter().map(|s| s.injection.kind).collect();
    kinds.sort_by_key(|k| format!("{k:?}"));
    kinds.dedup();
    assert_eq!(
        kinds.len(),
        5,
        "every task-level injection is used: {kinds:?}"
    );
    for (_, v) in &fams {
        assert_eq!(v.len(), 2);
        assert_ne!(v[0].cause, v[1].cause, "a pair's variants differ in cause");
    }
}

#[test]
fn pairs_have_the_same_outer_kernel_time_within_5_percent() {
    for (family, rep, k) in &run().pairs {
        let (a, b) = (k[0] as f64, k[1] as f64);
        let diff = (a - b).abs() / ((a + b) / 2.0);
        assert!(
            diff < 0.05,
            "{family} r{rep}: {a} vs {b} ns ({:.2} %)",
            diff * 100.0
        );
    }
}

#[test]
fn the_internal_cause_differs_measurably_in_the_task_log() {
    let r = run();
    for pair in r.cases.chunks(2) {
        let sig: Vec<signature::Signature> = pair
            .iter()
            .map(|c| signature::of_task_log(&c.bundle, &c.telemetry).expect("a task-log capture"))
            .collect();
        let differs = (0..4).any(|c| {
            (sig[0].exec_mean_us[c] - sig[1].exec_mean_us[c]).abs() > 1.0
                || (sig[0].wait_max_us[c] - sig[1].wait_max_us[c]).abs() > 20.0
                || (sig[0].queue_max_us[c] - sig[1].queue_max_us[c]).abs() > 20.0
                || (sig[0].worker_skew[c] - sig[1].worker_skew[c]).abs() > 0.05
        }) || sig[0].pressure_events != sig[1].pressure_events;
        assert!(
            differs,
            "{} vs {}: {:?} / {:?}",
            pair[0].bundle.id(),
            pair[1].bundle.id(),
            sig[0],
            sig[1]
        );
    }
}

#[test]
fn kernel_level_cupti_cannot_beat_chance_on_pairs() {
    let r = row("mk-kernel-cupti", "none");
    assert_eq!(r.pair_accuracy, Some(0.0));
    assert_eq!(r.class_accuracy, 0.0);
    assert!(r.pairs >= 8);
}

#[test]
fn the_aggregation_monitor_reaches_0_9_pair_accuracy_with_10x_fewer_bytes() {
    let agg = row("mk-aggregate", "aggregate");
    let log = row("mk-task-log", "task-log");
    assert!(agg.pair_accuracy.unwrap() >= 0.9, "{agg:?}");
    assert!(log.pair_accuracy.unwrap() >= 0.9, "{log:?}");
    assert!(
        log.mean_bytes_exported >= 10.0 * agg.mean_bytes_exported,
        "task log {} B vs aggregate {} B",
        log.mean_bytes_exported,
        agg.mean_bytes_exported
    );
    // Its perturbation is measured (and smaller than the full log's).
    assert!(agg.perturbation_pct > 0.0);
    assert!(agg.perturbation_pct < log.perturbation_pct);
}

#[test]
fn the_diagnosis_program_is_scored_like_the_aggregation_monitor_within_its_budget() {
    let ebpf = row("mk-aggregate", "ebpf");
    let agg = row("mk-aggregate", "aggregate");
    eprintln!("ebpf: {ebpf:?}\naggregate: {agg:?}");
    assert_eq!(ebpf.cases, agg.cases, "every case has an ebpf capture");
    assert!(ebpf.pair_accuracy.unwrap() >= 0.9, "{ebpf:?}");
    assert!(
        ebpf.cause_accuracy >= 0.9 && ebpf.class_accuracy >= 0.9,
        "{ebpf:?}"
    );
    assert!(
        ebpf.mean_bytes_exported <= agg.mean_bytes_exported,
        "ebpf {} B over the aggregation monitor's {} B",
        ebpf.mean_bytes_exported,
        agg.mean_bytes_exported
    );
    // The interpreter's modelled cost is charged to the run.
    assert!(ebpf.perturbation_pct > 0.0);
    // Nothing is dropped on the catalog, so nothing is under-covered.
    assert_eq!(ebpf.under_covered, 0);
    assert_eq!(ebpf.mean_coverage, 1.0);
}

#[test]
fn under_a_telemetry_budget_results_carry_coverage_and_stay_honest() {
    for (p, m) in [
        ("mk-task-log", "task-log-budget"),
        ("mk-aggregate", "aggregate-sampled"),
        ("mk-aggregate", "ebpf-sampled"),
    ] {
        let r = row(p, m);
        assert!(r.budgeted);
        assert!(
            r.under_covered > 0,
            "{p} × {m}: the budget dropped evidence"
        );
        assert!(r.mean_coverage < 1.0);
        assert!(
            r.false_confidence_rate.unwrap() <= 0.05,
            "{p} × {m}: false confidence {:?}",
            r.false_confidence_rate
        );
    }
    // Every budgeted result carries its coverage.
    for s in run().scores.iter().filter(|s| s.budgeted) {
        assert!(
            s.coverage < 1.0,
            "{} {} {}",
            s.bundle,
            s.profiler,
            s.monitor
        );
    }
    // The MPK-style recorder has no drop count: it is confidently wrong.
    let mpk = row("mk-mpk-style", "task-log-budget");
    assert!(mpk.false_confidence_rate.unwrap() > 0.5, "{mpk:?}");
}

#[test]
fn spans_that_hide_waits_confuse_a_late_notification_with_a_slow_class() {
    let mpk = row("mk-mpk-style", "task-log");
    let log = row("mk-task-log", "task-log");
    assert!(mpk.pair_accuracy.unwrap() < log.pair_accuracy.unwrap());
    let wrong = run()
        .scores
        .iter()
        .filter(|s| {
            s.profiler == "mk-mpk-style"
                && s.monitor == "task-log"
                && s.family == "mk-exec-vs-notify"
                && s.variant == "late-notify"
        })
        .all(|s| s.claimed_cause == Some(ground_truth::CauseLabel::TaskClassDelay));
    assert!(wrong);
}

#[test]
fn bundles_and_sidecars_round_trip_through_a_pack_and_their_readers() {
    let r = run();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.cases.jsonl.gz");
    pack::write(&path, &r.cases[..4]).unwrap();
    let back = pack::read(&path).unwrap();
    assert_eq!(back.len(), 4);
    assert_eq!(back[0].bundle, r.cases[0].bundle);
    assert_eq!(back[0].telemetry, r.cases[0].telemetry);
    let files = pack::unpack(&back, &dir.path().join("cases")).unwrap();
    let b = ground_truth::Bundle::read(&files[0]).unwrap();
    let t = TaskTelemetry::read(&files[1]).unwrap();
    assert_eq!(b.ground_truth.symptoms.len(), 2);
    assert_eq!(t.truth.task_nodes.len(), t.tasks as usize);
    // Task-level truth in the standard bundle: task nodes and their edges.
    let tasks = b
        .ground_truth
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Task)
        .count();
    assert_eq!(tasks, t.tasks as usize);
    assert!(b
        .ground_truth
        .edges
        .iter()
        .any(|e| e.kind == ground_truth::EdgeType::Fault));
    // Every hook timestamp is a 64-bit device time, every task logged once per hook.
    let log = t
        .captures
        .iter()
        .find(|c| c.config.name == "task-log")
        .unwrap();
    let starts = log.events_of(HookKind::Start);
    assert_eq!(starts, t.tasks as usize);
}

#[test]
fn same_seed_same_bundle() {
    let all = catalog::load().unwrap();
    let fam = &catalog::families(&all)[0].1;
    let mut ex = SimExecutor {
        workers: 16,
        ..Default::default()
    };
    let a = run_family(&mut ex, fam, &FamilyOptions::default()).unwrap();
    let b = run_family(&mut ex, fam, &FamilyOptions::default()).unwrap();
    assert_eq!(
        serde_json::to_string(&a[1].bundle).unwrap(),
        serde_json::to_string(&b[1].bundle).unwrap()
    );
    assert_eq!(a[1].telemetry, b[1].telemetry);
}
