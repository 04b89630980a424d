mod common;

use common::*;
use evaluator::{
    diff, read_scores, report, score_case, write_results, write_scores, CaseScore, Leaderboard,
    CSV_COLUMNS, PLOTS, SCORES_FILE,
};
use ground_truth::view::LossSpec;
use ground_truth::{CauseLabel, Collectors, Mode, RankedCause};

/// A small result set: one pair family × 2 views × 2 profilers, plus a loss sweep.
fn result_set(good_b: bool) -> Vec<CaseScore> {
    let mut out = Vec::new();
    for (variant, cause) in [
        ("a", CauseLabel::StreamBacklog),
        ("b", CauseLabel::OccupancyPressure),
    ] {
        let f = Fixture::with(
            Rids::DENSE,
            "late-launch-vs-device-queueing",
            variant,
            cause,
            0,
        );
        for mode in [Mode::Instrumented, Mode::Closed] {
            for (loss, drop) in [
                (LossSpec::None, vec![]),
                (
                    LossSpec::Uniform {
                        rate: 0.01,
                        seed: 1,
                    },
                    vec![],
                ),
                (
                    LossSpec::Uniform {
                        rate: 0.05,
                        seed: 1,
                    },
                    vec![60],
                ),
                (LossSpec::Uniform { rate: 0.2, seed: 1 }, vec![20, 60]),
            ] {
                let mut view = f.view(&drop, loss);
                view.spec.mode = mode;
                let perfect = f.perfect("causal-graph");
                let mut lazy = f.perfect("timestamp-join");
                lazy.diagnoses[0].causes = vec![RankedCause {
                    label: CauseLabel::StreamBacklog,
                    score: 1.0,
                }];
                lazy.edges.truncate(3);
                let mut ref_x = perfect.clone();
                if !good_b && variant == "b" && mode == Mode::Closed {
                    ref_x.diagnoses[0].causes = vec![RankedCause {
                        label: CauseLabel::CpuDeschedule,
                        score: 1.0,
                    }];
                }
                if !drop.is_empty() {
                    ref_x.diagnoses[0].complete = false;
                    ref_x.diagnoses[0].first_unresolved = Some(f.r(40));
                    ref_x.diagnoses[1].complete = false;
                    ref_x.diagnoses[1].first_unresolved = Some(f.r(50));
                }
                out.push(score_case(&f.bundle, &view, &ref_x));
                out.push(score_case(&f.bundle, &view, &lazy));
            }
        }
    }
    out
}

#[test]
fn scores_jsonl_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(SCORES_FILE);
    let scores = result_set(true);
    write_scores(&p, &scores).unwrap();
    let back = read_scores(&p).unwrap();
    assert_eq!(back, scores);
    let text = std::fs::read_to_string(&p).unwrap();
    assert_eq!(text.lines().count(), scores.len());
}

#[test]
fn malformed_line_is_reported_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(SCORES_FILE);
    let scores = result_set(true);
    let mut text = evaluator::scores_to_jsonl(&scores[..2]);
    text.push_str("\n{\"bundle\": 3}\n");
    std::fs::write(&p, &text).unwrap();
    let err = read_scores(&p).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("scores.jsonl"), "{msg}");
    assert!(msg.contains("line 4"), "{msg}");
    assert!(msg.contains("bundle"), "{msg}");
    // Garbage and truncation too.
    for bad in ["not json", "{\"bundle\":", "[]", "\u{0}"] {
        std::fs::write(
            &p,
            format!("{}{bad}\n", evaluator::scores_to_jsonl(&scores[..1])),
        )
        .unwrap();
        let e = read_scores(&p).unwrap_err().to_string();
        assert!(e.contains("line 2"), "{bad:?}: {e}");
    }
    // A missing file is an error, not a panic.
    assert!(read_scores(&dir.path().join("nope.jsonl")).is_err());
}

#[test]
fn two_scores_on_one_line_are_an_error_with_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(SCORES_FILE);
    let scores = result_set(true);
    let first = evaluator::scores_to_jsonl(&scores[..1]);
    let two = evaluator::scores_to_jsonl(&scores[1..3]).replace('\n', " ");
    std::fs::write(&p, format!("{first}{two}\n")).unwrap();
    let e = read_scores(&p).unwrap_err();
    assert_eq!(
        e.line.as_deref().map(|l| l.starts_with("line 2,")),
        Some(true),
        "{e}"
    );
    assert!(e.message.contains("trailing characters"), "{e}");
}

#[test]
fn a_huge_wrong_typed_value_is_not_echoed_whole() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(SCORES_FILE);
    std::fs::write(&p, format!("\"{}\"\n", "y".repeat(1 << 20))).unwrap();
    let shown = read_scores(&p).unwrap_err().to_string();
    assert!(shown.len() < 1000, "{} bytes", shown.len());
    let p = dir.path().join("unknown-key.jsonl");
    std::fs::write(&p, format!("{{\"{}\": 3}}\n", "k".repeat(1 << 20))).unwrap();
    let shown = read_scores(&p).unwrap_err().to_string();
    // The key is cut (in the path and the message); the list of valid fields is whole.
    assert!(shown.len() < 2000, "{} bytes", shown.len());
    assert!(shown.contains("`crashed`"), "{shown}");
}

#[test]
fn report_writes_every_file_deterministically() {
    let dir = tempfile::tempdir().unwrap();
    let scores = result_set(false);
    let rep = write_results(dir.path(), &scores).unwrap();
    assert_eq!(rep.cases, scores.len());
    for f in [
        "scores.jsonl",
        "leaderboard.md",
        "leaderboard.csv",
        "leaderboard.json",
    ] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    for p in PLOTS {
        let path = dir.path().join("plots").join(p);
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{p}");
    }
    let csv = std::fs::read_to_string(dir.path().join("leaderboard.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(&header[..19], &CSV_COLUMNS[..19]);
    assert_eq!(
        header[..19].join(","),
        "profiler,collectors,mode,cases,pair_accuracy,root_cause_top1,root_cause_top3,edge_precision,edge_recall,\
         edge_f1,false_causal_edges,request_correct,request_wrong,request_abstained,critical_path_fidelity,\
         unresolved_recall,false_confidence_rate,brier,analysis_ms"
    );
    // 2 profilers × 1 collectors × 2 modes.
    assert_eq!(csv.lines().count(), 5);
    let md = std::fs::read_to_string(dir.path().join("leaderboard.md")).unwrap();
    assert!(md.contains("| late-launch-vs-device-queueing |"), "{md}");

    // `report` rebuilds the same bytes from scores.jsonl, whatever the input order.
    let before: Vec<Vec<u8>> = ["leaderboard.md", "leaderboard.csv", "leaderboard.json"]
        .iter()
        .map(|f| std::fs::read(dir.path().join(f)).unwrap())
        .collect();
    let mut shuffled = scores.clone();
    shuffled.reverse();
    write_scores(&dir.path().join(SCORES_FILE), &shuffled).unwrap();
    report(dir.path()).unwrap();
    let after: Vec<Vec<u8>> = ["leaderboard.md", "leaderboard.csv", "leaderboard.json"]
        .iter()
        .map(|f| std::fs::read(dir.path().join(f)).unwrap())
        .collect();
    assert_eq!(before, after);

    // Leaderboard JSON round-trips through its own type.
    let lb: Leaderboard = serde_json::from_slice(&after[2]).unwrap();
    assert_eq!(lb, Leaderboard::from_scores(&scores));
    let cg = lb
        .rows
        .iter()
        .find(|r| r.profiler == "causal-graph" && r.mode == Mode::Closed)
        .unwrap();
    assert_eq!(cg.collectors, Collectors::Combined);
    assert_eq!(cg.pair_accuracy, Some(0.0));
    let cg = lb
        .rows
        .iter()
        .find(|r| r.profiler == "causal-graph" && r.mode == Mode::Instrumented)
        .unwrap();
    assert_eq!(cg.pair_accuracy, Some(1.0));
    assert_eq!(cg.unresolved_recall, Some(1.0));
    assert_eq!(cg.false_confidence_rate, Some(0.0));
    let tj = lb
        .rows
        .iter()
        .find(|r| r.profiler == "timestamp-join" && r.mode == Mode::Instrumented)
        .unwrap();
    assert_eq!(tj.pair_accuracy, Some(0.0));
    assert_eq!(tj.false_confidence_rate, Some(1.0));
    // Loss sweep: 0, 1, 5, 20 %.
    let rates: Vec<Option<f64>> = lb
        .loss_pooled
        .iter()
        .filter(|r| r.profiler == "causal-graph")
        .map(|r| r.loss_rate)
        .collect();
    assert_eq!(rates, vec![Some(0.0), Some(0.01), Some(0.05), Some(0.2)]);
}

#[test]
fn report_on_bad_scores_is_a_format_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(SCORES_FILE), "{}\n").unwrap();
    match report(dir.path()) {
        Err(evaluator::EvalError::Format(e)) => assert!(e.to_string().contains("line 1"), "{e}"),
        other => panic!("expected a format error, got {other:?}"),
    }
}

#[test]
fn empty_result_set_still_reports() {
    let dir = tempfile::tempdir().unwrap();
    let rep = write_results(dir.path(), &[]).unwrap();
    assert!(rep.leaderboard.rows.is_empty());
    let csv = std::fs::read_to_string(dir.path().join("leaderboard.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1);
}

#[test]
fn diff_names_changed_verdicts_metrics_and_one_sided_cases() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let good = result_set(true);
    let mut bad = result_set(false);
    let extra = bad.pop().unwrap();
    write_results(a.path(), &good).unwrap();
    write_results(b.path(), &bad).unwrap();
    let d = diff(a.path(), b.path()).unwrap();
    // Variant b, closed mode, causal-graph, 4 loss settings: s1 correct → wrong.
    assert_eq!(d.regressions(), 4);
    assert_eq!(d.fixes(), 0);
    assert!(d.verdicts.iter().all(|v| v.case.profiler == "causal-graph"
        && v.symptom == "s1"
        && v.case.view.starts_with("combined-closed")));
    assert_eq!(d.only_in_a.len(), 1);
    assert_eq!(d.only_in_a[0].view, extra.view);
    assert!(d.only_in_b.is_empty());
    let moved: Vec<&str> = d
        .metrics
        .iter()
        .filter(|m| m.profiler == "causal-graph")
        .map(|m| m.metric.as_str())
        .collect();
    assert!(
        moved.contains(&"pair_accuracy") && moved.contains(&"root_cause_top1"),
        "{moved:?}"
    );
    let pa = d
        .metrics
        .iter()
        .find(|m| m.profiler == "causal-graph" && m.metric == "pair_accuracy")
        .unwrap();
    assert_eq!(
        (pa.before, pa.after, pa.delta),
        (Some(1.0), Some(0.0), Some(-1.0))
    );
    let md = d.to_markdown();
    assert!(
        md.contains("correct→wrong")
            && md.contains("| pair_accuracy |")
            && md.contains("Cases only in A"),
        "{md}"
    );
    // Same sets: empty diff.
    let same = diff(a.path(), a.path()).unwrap();
    assert!(same.is_empty());
    assert!(same.to_markdown().contains("No differences."));
}

/// The summary leads with flips per profiler × family and names, for each
/// flip, what differs in its bundle's records; here the B bundle lost its
/// kernels' queue timestamps (a field no longer provided) and a record.
#[test]
fn diff_summary_groups_flips_and_names_their_cause_in_the_records() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_results(a.path(), &result_set(true)).unwrap();
    write_results(b.path(), &result_set(false)).unwrap();
    let mut d = diff(a.path(), b.path()).unwrap();
    let before = Fixture::with(
        Rids::DENSE,
        "late-launch-vs-device-queueing",
        "b",
        CauseLabel::OccupancyPressure,
        0,
    )
    .bundle;
    let mut after = before.clone();
    for r in &mut after.trace {
        if let ground_truth::Record::Kernel { queued, .. } = r {
            *queued = 0;
        }
    }
    let api = after
        .trace
        .iter()
        .position(|r| r.kind_name() == "api")
        .unwrap();
    after.trace.remove(api);
    d.attach_causes(|_| Some(before.clone()), |_| Some(after.clone()));
    let groups = d.flip_groups();
    let g = &groups[&(
        "causal-graph".to_string(),
        "late-launch-vs-device-queueing".to_string(),
    )];
    assert_eq!((g.regressions, g.fixes), (4, 0));
    assert_eq!(g.causes.get("kernel.queued no longer provided"), Some(&4));
    assert_eq!(g.causes.get("api count changes"), Some(&4));
    let summary = d.summary_markdown(Some("details.md"));
    assert!(
        summary.contains("| causal-graph | late-launch-vs-device-queueing | 4 | 0 |")
            && summary.contains("kernel.queued no longer provided (4)")
            && summary.contains("details.md"),
        "{summary}"
    );
    assert!(summary.lines().count() < 40, "one screen:\n{summary}");
    // The details name the cause on every flip's row.
    assert!(d.to_markdown().contains("kernel.queued provided by"));
    // Identical records: the flip is said to have no cause in the records.
    let mut same = diff(a.path(), b.path()).unwrap();
    same.attach_causes(|_| Some(before.clone()), |_| Some(before.clone()));
    assert!(same.summary_markdown(None).contains("none (4)"));
}

/// Recordings under two CUPTI versions: the pairs stay per version and the
/// leaderboard gains its version table; one version alone adds none.
#[test]
fn the_leaderboard_gains_a_version_column_where_versions_mix() {
    let one: Vec<CaseScore> = result_set(true)
        .into_iter()
        .map(|mut c| {
            c.backend = "cuda".into();
            c.cupti = "13.0".into();
            c
        })
        .collect();
    assert!(Leaderboard::from_scores(&one).versions.is_empty());
    let mut mixed = one.clone();
    mixed.extend(result_set(false).into_iter().map(|mut c| {
        c.backend = "cuda".into();
        c.cupti = "12.4".into();
        c
    }));
    let lb = Leaderboard::from_scores(&mixed);
    let row = |v: &str| {
        lb.versions
            .iter()
            .find(|r| {
                r.cupti == v
                    && r.profiler == "causal-graph"
                    && r.collectors == Collectors::Combined
                    && r.mode == Mode::Closed
            })
            .unwrap()
            .pair_accuracy
    };
    assert_eq!((row("13.0"), row("12.4")), (Some(1.0), Some(0.0)));
    let dir = tempfile::tempdir().unwrap();
    write_results(dir.path(), &mixed).unwrap();
    let md = std::fs::read_to_string(dir.path().join("leaderboard.md")).unwrap();
    assert!(
        md.contains("## By CUPTI version")
            && md.contains("| causal-graph | combined | closed | 12.4 |"),
        "{md}"
    );
}

#[test]
fn schemas_are_generated() {
    for (name, _) in evaluator::SCHEMA_NAMES {
        let s = evaluator::schema(name).unwrap();
        assert!(s.contains("\"properties\""), "{name}");
    }
    assert!(evaluator::schema("nope").is_none());
}

#[test]
fn probes_are_listed_in_the_appendix_not_among_the_profilers() {
    let mut scores = result_set(true);
    let probes: Vec<CaseScore> = scores
        .iter()
        .filter(|s| s.profiler == "timestamp-join")
        .map(|s| CaseScore {
            profiler: "probe-names".into(),
            ..s.clone()
        })
        .collect();
    scores.extend(probes);
    let lb = Leaderboard::from_scores(&scores);
    assert!(lb.rows.iter().any(|r| r.profiler == "probe-names"));
    let md = lb.to_markdown();
    let (main, appendix) = md
        .split_once("## Appendix — floor: probes that use no causal reasoning")
        .expect("an appendix when probes were scored");
    assert!(!main.contains("probe-names"), "{main}");
    assert!(main.contains("| timestamp-join |"), "{main}");
    let (pairs, correct) = lb.pooled_pairs("probe-names");
    assert!(pairs > 0);
    assert!(
        appendix.contains(&format!("| probe-names | {correct} | {pairs} |")),
        "{appendix}"
    );
    // Without probes there is no appendix.
    assert!(!Leaderboard::from_scores(&result_set(true))
        .to_markdown()
        .contains("Appendix"));
}
