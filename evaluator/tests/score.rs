mod common;

use common::*;
use evaluator::{path_fidelity, phase_error, score_case, Leaderboard};
use ground_truth::view::LossSpec;
use ground_truth::{Attribution, CauseLabel, Diagnosis, EdgeType, Evidence, Phases, RankedCause};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn perfect_explanation_scores_one_everywhere() {
    for rids in [Rids::DENSE, Rids::SPARSE] {
        let f = Fixture::new(rids);
        let s = score_case(&f.bundle, &f.full_view(), &f.perfect("p"));
        let e = &s.edges;
        assert_eq!(
            (e.counts.claims, e.counts.true_positives, e.counts.truth),
            (6, 6, 6)
        );
        assert_eq!(
            (e.precision, e.recall, e.f1),
            (Some(1.0), Some(1.0), Some(1.0))
        );
        assert_eq!(e.brier, Some(0.0));
        assert_eq!(e.false_causal_edges, 0);
        assert_eq!(e.by_type.len(), 4);
        assert!(e.by_type.iter().all(|t| t.f1 == Some(1.0)));
        assert_eq!(
            (
                s.request.eligible,
                s.request.correct,
                s.request.correct_rate
            ),
            (3, 3, Some(1.0))
        );
        assert_eq!(s.symptoms.len(), 2);
        for sym in &s.symptoms {
            assert!(sym.correct && sym.top1 && sym.top3, "{sym:?}");
            assert_eq!(sym.path_fidelity, 1.0);
            assert_eq!(sym.phase_error, 0.0);
            assert!(!sym.unresolved && !sym.false_confident);
        }
        assert_eq!(s.bundle, "fam.a.r0");
        assert_eq!((s.family.as_str(), s.variant.as_str()), ("fam", "a"));
        assert_eq!(s.view, "combined-instrumented-none");
        assert_eq!(s.loss_rate, Some(0.0));
        assert_eq!(s.analysis_ms, 1.5);
        assert_eq!((s.nodes_present, s.nodes_total), (7, 7));
    }
}

#[test]
fn empty_explanation_recall_zero_precision_undefined() {
    let f = Fixture::new(Rids::DENSE);
    let s = score_case(&f.bundle, &f.full_view(), &empty("p"));
    assert_eq!(s.edges.precision, None);
    assert_eq!(s.edges.recall, Some(0.0));
    assert_eq!(s.edges.f1, Some(0.0));
    assert_eq!(s.edges.brier, None);
    assert_eq!(
        (s.request.abstained, s.request.correct, s.request.wrong),
        (3, 0, 0)
    );
    assert!(s
        .symptoms
        .iter()
        .all(|x| !x.correct && !x.top1 && !x.top3 && !x.diagnosed));
    assert!(s
        .symptoms
        .iter()
        .all(|x| x.path_fidelity == 0.0 && x.phase_error <= 1.0));
    // Symptom 2 has zero true phases and no claim: error 0.
    assert_eq!(s.symptoms[1].phase_error, 0.0);
    assert_eq!(s.symptoms[0].phase_error, 1.0);
}

#[test]
fn claims_naming_rids_outside_the_view_are_false_positives() {
    let f = Fixture::new(Rids::DENSE);
    // Drop kernel A (rid 20): its node is absent, edges touching it leave the truth.
    let view = f.view(
        &[20],
        LossSpec::Uniform {
            rate: 0.05,
            seed: 1,
        },
    );
    let mut x = f.perfect("p");
    // A rid owned by nobody.
    x.edges.push(ground_truth::ClaimedEdge {
        src: 999_999,
        dst: f.r(40),
        kind: EdgeType::Event,
        evidence: Evidence::Explicit,
        confidence: 0.5,
    });
    let s = score_case(&f.bundle, &view, &x);
    // Truth present: request 0→1, host_order 1→3, launch 3→4, launch 6→5.
    assert_eq!(s.edges.counts.truth, 4);
    // Claims: 6 + 1; those touching rid 20 (2) and rid 999999 (1) are unmapped.
    assert_eq!(s.edges.unmapped_claims, 3);
    assert_eq!(s.edges.counts.claims, 7);
    assert_eq!(s.edges.counts.true_positives, 4);
    assert_eq!(s.edges.precision, Some(4.0 / 7.0));
    assert_eq!(s.edges.recall, Some(1.0));
    // The unmapped explicit/observed claims are false causal edges.
    assert_eq!(s.edges.false_causal_edges, 3);
    // Brier: 4 hits at 1.0 → 0; two misses at 1.0 → 1 each; one at 0.5 → 0.25.
    assert!(close(s.edges.brier.unwrap(), 2.25 / 7.0));
    assert_eq!(s.loss, "5pct");
    assert_eq!(s.loss_rate, Some(0.05));
    assert_eq!(s.nodes_present, 6);
}

#[test]
fn duplicate_claims_are_counted_once_with_max_confidence() {
    let f = Fixture::new(Rids::DENSE);
    let x = explanation(
        "p",
        vec![
            f.edge(10, 20, EdgeType::Launch, Evidence::Inferred, 0.2),
            // Same nodes: rid 11 is node 1 too.
            f.edge(11, 20, EdgeType::Launch, Evidence::Inferred, 0.6),
            f.edge(10, 20, EdgeType::Launch, Evidence::Inferred, 0.4),
            // Wrong edge, twice: once inferred, once explicit → one false causal edge.
            f.edge(40, 50, EdgeType::Sync, Evidence::Inferred, 0.9),
            f.edge(40, 50, EdgeType::Sync, Evidence::Explicit, 0.3),
            // Same pair, other type: a different claim.
            f.edge(10, 20, EdgeType::StreamOrder, Evidence::Inferred, 0.0),
        ],
        vec![],
        vec![],
    );
    let s = score_case(&f.bundle, &f.full_view(), &x);
    assert_eq!(s.edges.raw_claims, 6);
    assert_eq!(s.edges.duplicate_claims, 3);
    assert_eq!(s.edges.counts.claims, 3);
    assert_eq!(s.edges.counts.true_positives, 1);
    assert_eq!(s.edges.false_causal_edges, 1);
    // (0.6 − 1)² + 0.9² + 0² over 3.
    assert!(close(s.edges.brier.unwrap(), (0.16 + 0.81) / 3.0));
    let launch = s
        .edges
        .by_type
        .iter()
        .find(|t| t.kind == EdgeType::Launch)
        .unwrap();
    assert_eq!(
        (
            launch.counts.claims,
            launch.counts.true_positives,
            launch.counts.truth
        ),
        (1, 1, 3)
    );
}

#[test]
fn abstaining_profiler_is_never_correct() {
    let f = Fixture::new(Rids::DENSE);
    let attribution = [20, 40, 50]
        .iter()
        .map(|&n| Attribution {
            rid: f.r(n),
            request: "unknown".into(),
        })
        .collect();
    let s = score_case(
        &f.bundle,
        &f.full_view(),
        &explanation("p", vec![], attribution, vec![]),
    );
    assert_eq!(s.request.abstained_rate, Some(1.0));
    assert_eq!(s.request.correct_rate, Some(0.0));
    assert_eq!(s.request.wrong_rate, Some(0.0));
    assert!(!s.symptoms[1].correct);
    assert_eq!(s.symptoms[1].claimed_answer.as_deref(), Some("unknown"));
}

#[test]
fn wrong_attribution_is_wrong_not_abstained() {
    let f = Fixture::new(Rids::DENSE);
    let attribution = vec![
        Attribution {
            rid: f.r(20),
            request: "7".into(),
        },
        Attribution {
            rid: f.r(40),
            request: "8".into(),
        },
        // First attribution of a rid wins.
        Attribution {
            rid: f.r(40),
            request: "7".into(),
        },
        // Not a device op: ignored for attribution rates.
        Attribution {
            rid: f.r(10),
            request: "7".into(),
        },
    ];
    let s = score_case(
        &f.bundle,
        &f.full_view(),
        &explanation("p", vec![], attribution, vec![]),
    );
    assert_eq!(
        (
            s.request.eligible,
            s.request.correct,
            s.request.wrong,
            s.request.abstained
        ),
        (3, 1, 1, 1)
    );
}

fn cause_only(f: &Fixture, label: CauseLabel) -> ground_truth::Explanation {
    let mut x = f.perfect("p");
    x.diagnoses[0].causes = vec![RankedCause { label, score: 1.0 }];
    x
}

#[test]
fn pair_accuracy_needs_every_variant_right() {
    let a = Fixture::with(Rids::DENSE, "fam", "a", CauseLabel::StreamBacklog, 0);
    let b = Fixture::with(Rids::DENSE, "fam", "b", CauseLabel::OccupancyPressure, 0);
    // A profiler that always answers stream_backlog: right on a, wrong on b.
    let same = [
        score_case(
            &a.bundle,
            &a.full_view(),
            &cause_only(&a, CauseLabel::StreamBacklog),
        ),
        score_case(
            &b.bundle,
            &b.full_view(),
            &cause_only(&b, CauseLabel::StreamBacklog),
        ),
    ];
    let lb = Leaderboard::from_scores(&same);
    assert_eq!(lb.rows.len(), 1);
    assert_eq!(lb.rows[0].pair_accuracy, Some(0.0));
    assert_eq!(lb.rows[0].pairs, 1);
    assert_eq!(lb.rows[0].root_cause_top1, Some(0.75));
    // One that tells them apart.
    let good = [
        score_case(
            &a.bundle,
            &a.full_view(),
            &cause_only(&a, CauseLabel::StreamBacklog),
        ),
        score_case(
            &b.bundle,
            &b.full_view(),
            &cause_only(&b, CauseLabel::OccupancyPressure),
        ),
    ];
    let lb = Leaderboard::from_scores(&good);
    assert_eq!(lb.rows[0].pair_accuracy, Some(1.0));
    assert_eq!(lb.families_pooled.len(), 1);
    assert_eq!(lb.families_pooled[0].pair_accuracy, Some(1.0));
    // A lone variant is not a pair.
    let lb = Leaderboard::from_scores(&good[..1]);
    assert_eq!(lb.rows[0].pair_accuracy, None);
    assert_eq!(lb.rows[0].pairs, 0);
}

#[test]
fn top3_counts_a_lower_ranked_right_cause() {
    let f = Fixture::new(Rids::DENSE);
    let mut x = f.perfect("p");
    x.diagnoses[0].causes = [
        CauseLabel::EventWait,
        CauseLabel::CpuDeschedule,
        CauseLabel::StreamBacklog,
        CauseLabel::None,
    ]
    .iter()
    .map(|&label| RankedCause { label, score: 0.5 })
    .collect();
    let s = score_case(&f.bundle, &f.full_view(), &x);
    let s1 = &s.symptoms[0];
    assert!(!s1.correct && !s1.top1 && s1.top3);
    assert_eq!(s1.claimed_cause, Some(CauseLabel::EventWait));
}

#[test]
fn lcs_fidelity_example() {
    // truth a b c; claimed a x c b: LCS 2 (a c or a b), union {a b c x} = 4.
    assert_eq!(path_fidelity(&[1, 9, 3, 2], &[1, 2, 3]), 0.5);
    assert_eq!(path_fidelity(&[], &[]), 1.0);
    assert_eq!(path_fidelity(&[1, 2], &[]), 0.0);
    assert_eq!(path_fidelity(&[1, 1, 2, 2, 3], &[1, 2, 3]), 1.0);
    // Reversed path: LCS 1 of 3.
    assert!(close(path_fidelity(&[3, 2, 1], &[1, 2, 3]), 1.0 / 3.0));
}

#[test]
fn phase_blame_example() {
    let p = |a, b, c, d| Phases {
        host_enqueue: a,
        queued_to_submitted: b,
        submitted_to_start: c,
        execution: d,
    };
    // Shares (.5, 0, 0, .5) vs (0, 0, .5, .5): half of the lateness on the wrong phase.
    assert_eq!(
        phase_error(&p(10.0, 0.0, 0.0, 10.0), &p(0.0, 0.0, 20.0, 20.0)),
        0.5
    );
    // Scale does not matter; negative parts are ignored.
    assert_eq!(
        phase_error(&p(1.0, -5.0, 0.0, 0.0), &p(3e6, 0.0, 0.0, 0.0)),
        0.0
    );
    assert_eq!(
        phase_error(&p(0.0, 0.0, 0.0, 0.0), &p(1.0, 0.0, 0.0, 0.0)),
        1.0
    );
    assert_eq!(
        phase_error(&p(1.0, 0.0, 0.0, 0.0), &p(0.0, 0.0, 0.0, 0.0)),
        1.0
    );
    assert_eq!(
        phase_error(&p(0.0, 0.0, 0.0, 0.0), &p(0.0, 0.0, 0.0, 0.0)),
        0.0
    );
    assert_eq!(
        phase_error(&p(f64::NAN, 0.0, 0.0, 1.0), &p(0.0, 0.0, 0.0, 2.0)),
        0.0
    );
}

#[test]
fn unresolved_boundary_and_false_confidence() {
    let f = Fixture::new(Rids::DENSE);
    // Kernel A (rid 20) lost: s1's path 0,1,2,4 breaks at 2→4 (stream_order).
    let view = f.view(&[20], LossSpec::Targeted { seed: 3 });
    let truth_boundary = f
        .bundle
        .ground_truth
        .first_unresolved(&[0, 1, 2, 4], |n| n != 2);

    // 1. Flags incomplete at the right record: a hit, not false-confident.
    let mut x = f.perfect("p");
    x.edges.clear();
    x.diagnoses[0].complete = false;
    x.diagnoses[0].first_unresolved = Some(f.r(40));
    let s = score_case(&f.bundle, &view, &x);
    let s1 = &s.symptoms[0];
    assert!(s1.unresolved);
    assert_eq!(s1.boundary, truth_boundary);
    assert_eq!(s1.boundary.unwrap().kind, EdgeType::StreamOrder);
    assert!(s1.unresolved_hit && !s1.false_confident);
    assert!(!s.symptoms[1].unresolved);
    assert_eq!(s.loss_rate, None);

    // 2. Incomplete at the wrong record, but a missing claim names the right dst: a hit.
    x.diagnoses[0].first_unresolved = Some(f.r(30));
    x.edges = vec![f.edge(40, 40, EdgeType::StreamOrder, Evidence::Missing, 0.0)];
    let s = score_case(&f.bundle, &view, &x);
    assert!(s.symptoms[0].unresolved_hit);
    assert_eq!(s.edges.missing_claims, 1);
    assert_eq!(s.edges.counts.claims, 0);

    // 3. Claims complete: false-confident, no hit.
    let mut y = x.clone();
    y.diagnoses[0].complete = true;
    let s = score_case(&f.bundle, &view, &y);
    assert!(!s.symptoms[0].unresolved_hit && s.symptoms[0].false_confident);

    // 4. Incomplete, but a confident invented edge into the boundary's dst: false-confident.
    let mut z = x.clone();
    z.edges
        .push(f.edge(50, 40, EdgeType::StreamOrder, Evidence::Inferred, 0.85));
    let s = score_case(&f.bundle, &view, &z);
    assert!(s.symptoms[0].unresolved_hit && s.symptoms[0].false_confident);

    // 5. A confident *true* edge into that node (its launch) is not false confidence,
    //    nor is a low-confidence guess.
    let mut w = x.clone();
    w.edges
        .push(f.edge(30, 40, EdgeType::Launch, Evidence::Explicit, 1.0));
    w.edges
        .push(f.edge(50, 40, EdgeType::StreamOrder, Evidence::Inferred, 0.5));
    let s = score_case(&f.bundle, &view, &w);
    assert!(!s.symptoms[0].false_confident);

    // 6. No diagnosis at all: not a hit; not false-confident either.
    let s = score_case(&f.bundle, &view, &empty("p"));
    assert!(
        s.symptoms[0].unresolved && !s.symptoms[0].unresolved_hit && !s.symptoms[0].false_confident
    );

    // Leaderboard: lossy cases count for the loss metrics only.
    let full = score_case(&f.bundle, &f.full_view(), &f.perfect("p"));
    let lossy_hit = score_case(&f.bundle, &view, &x);
    let lossy_conf = score_case(&f.bundle, &view, &y);
    let lb = Leaderboard::from_scores(&[full, lossy_hit, lossy_conf]);
    let r = &lb.rows[0];
    assert_eq!((r.cases, r.lossy_cases, r.unresolved_symptoms), (1, 2, 2));
    assert_eq!(r.unresolved_recall, Some(0.5));
    assert_eq!(r.false_confidence_rate, Some(0.5));
    assert_eq!(r.root_cause_top1, Some(1.0));
    assert_eq!(lb.loss_pooled.len(), 2);
    assert_eq!(lb.loss_pooled[1].loss, "targeted");
}

#[test]
fn boundary_matches_ground_truth_first_unresolved() {
    let f = Fixture::new(Rids::SPARSE);
    let gt = &f.bundle.ground_truth;
    for drop in [
        vec![],
        vec![1],
        vec![10, 11],
        vec![10],
        vec![20],
        vec![1, 20],
        vec![30],
        vec![60],
    ] {
        let view = f.view(&drop, LossSpec::None);
        let s = score_case(&f.bundle, &view, &empty("p"));
        let visible: Vec<bool> = gt
            .nodes
            .iter()
            .map(|n| {
                n.rids
                    .iter()
                    .any(|r| view.records.iter().any(|x| x.rid() == *r))
            })
            .collect();
        for (sym, score) in gt.symptoms.iter().zip(&s.symptoms) {
            assert_eq!(
                score.boundary,
                gt.first_unresolved(&sym.critical_path, |n| visible[n as usize]),
                "drop {drop:?}"
            );
        }
    }
}

#[test]
fn call_site_and_operator_answers() {
    let mut f = Fixture::new(Rids::DENSE);
    f.bundle.ground_truth.symptoms[0].question = ground_truth::Question::CallSite;
    f.bundle.ground_truth.symptoms[0].answer = Some("site_b".into());
    let mut x = f.perfect("p");
    x.diagnoses[0].answer = Some("site_b".into());
    assert!(score_case(&f.bundle, &f.full_view(), &x).symptoms[0].correct);
    x.diagnoses[0].answer = Some("site_a".into());
    let s = score_case(&f.bundle, &f.full_view(), &x);
    assert!(!s.symptoms[0].correct && s.symptoms[0].top1);
    x.diagnoses[0].answer = None;
    assert!(!score_case(&f.bundle, &f.full_view(), &x).symptoms[0].correct);
}

#[test]
fn symptoms_without_a_query_are_skipped() {
    let f = Fixture::new(Rids::DENSE);
    let mut view = f.full_view();
    view.queries.retain(|q| q.id == "s2");
    let s = score_case(&f.bundle, &view, &f.perfect("p"));
    assert_eq!(s.symptoms.len(), 1);
    assert_eq!(s.symptoms[0].id, "s2");
}

#[test]
fn diagnosis_for_an_unknown_query_is_ignored() {
    let f = Fixture::new(Rids::DENSE);
    let mut x = f.perfect("p");
    x.diagnoses.push(Diagnosis {
        query: "nope".into(),
        causes: vec![],
        critical_path: vec![u64::MAX],
        phases: Phases::default(),
        complete: true,
        first_unresolved: Some(u64::MAX),
        answer: None,
    });
    let s = score_case(&f.bundle, &f.full_view(), &x);
    assert!(s.symptoms.iter().all(|s| s.correct));
}
