mod common;

use common::*;
use evaluator::{score_case, CaseScore, Leaderboard};
use ground_truth::view::LossSpec;
use ground_truth::{
    Attribution, CauseLabel, ClaimedEdge, Diagnosis, EdgeType, Evidence, Phases, RankedCause,
};
use proptest::prelude::*;

fn in_unit(x: Option<f64>) -> bool {
    x.is_none_or(|v| (0.0..=1.0).contains(&v))
}

fn check(s: &CaseScore) {
    let e = &s.edges;
    for v in [e.precision, e.recall, e.f1, e.brier] {
        assert!(in_unit(v), "{v:?}");
    }
    for t in &e.by_type {
        assert!(in_unit(t.precision) && in_unit(t.recall) && in_unit(t.f1));
    }
    assert!(e.counts.true_positives <= e.counts.claims.min(e.counts.truth));
    let r = &s.request;
    assert_eq!(r.correct + r.wrong + r.abstained, r.eligible);
    for v in [r.correct_rate, r.wrong_rate, r.abstained_rate] {
        assert!(in_unit(v));
    }
    for sym in &s.symptoms {
        assert!(
            (0.0..=1.0).contains(&sym.path_fidelity),
            "{}",
            sym.path_fidelity
        );
        assert!(
            (0.0..=1.0).contains(&sym.phase_error),
            "{}",
            sym.phase_error
        );
        assert!(!sym.top1 || sym.top3);
        assert!(sym.unresolved || (!sym.unresolved_hit && !sym.false_confident));
    }
}

fn edge_type() -> impl Strategy<Value = EdgeType> {
    prop::sample::select(EdgeType::ALL.to_vec())
}

fn evidence() -> impl Strategy<Value = Evidence> {
    prop::sample::select(vec![
        Evidence::Explicit,
        Evidence::Observed,
        Evidence::Inferred,
        Evidence::Missing,
    ])
}

fn cause() -> impl Strategy<Value = CauseLabel> {
    prop::sample::select(CauseLabel::ALL.to_vec())
}

/// Rids near the fixture's (so many hit) plus arbitrary ones.
fn rid() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..70, any::<u64>()]
}

fn conf() -> impl Strategy<Value = f64> {
    prop_oneof![0.0f64..=1.0, any::<f64>()]
}

fn phases() -> impl Strategy<Value = Phases> {
    (any::<f64>(), -1e9f64..1e9, 0.0f64..1e9, any::<f64>()).prop_map(|(a, b, c, d)| Phases {
        host_enqueue: a,
        queued_to_submitted: b,
        submitted_to_start: c,
        execution: d,
    })
}

fn diagnosis() -> impl Strategy<Value = Diagnosis> {
    (
        prop::sample::select(vec!["s1", "s2", "zz"]),
        prop::collection::vec(cause(), 0..5),
        prop::collection::vec(rid(), 0..12),
        phases(),
        any::<bool>(),
        prop::option::of(rid()),
        prop::option::of(prop::sample::select(vec!["7", "8", "x"])),
    )
        .prop_map(
            |(q, causes, path, phases, complete, fu, answer)| Diagnosis {
                query: q.into(),
                causes: causes
                    .into_iter()
                    .map(|label| RankedCause { label, score: 0.5 })
                    .collect(),
                critical_path: path,
                phases,
                complete,
                first_unresolved: fu,
                answer: answer.map(Into::into),
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn scores_stay_in_unit_interval(
        edges in prop::collection::vec((rid(), rid(), edge_type(), evidence(), conf()), 0..40),
        attrs in prop::collection::vec((rid(), prop::sample::select(vec!["7", "8", "unknown", "9"])), 0..20),
        diags in prop::collection::vec(diagnosis(), 0..4),
        drop in prop::collection::vec(prop::sample::select(vec![1u64, 10, 11, 20, 30, 40, 50, 60]), 0..4),
        sparse in any::<bool>(),
        wall in any::<f64>(),
    ) {
        let f = Fixture::new(if sparse { Rids::SPARSE } else { Rids::DENSE });
        let map = |r: u64| if r < 70 { f.r(r) } else { r };
        let edges = edges.into_iter().map(|(s, d, kind, evidence, confidence)| ClaimedEdge { src: map(s), dst: map(d), kind, evidence, confidence }).collect();
        let attribution = attrs.into_iter().map(|(r, t)| Attribution { rid: map(r), request: t.into() }).collect();
        let diags = diags.into_iter().map(|mut d| { d.critical_path = d.critical_path.into_iter().map(map).collect(); d.first_unresolved = d.first_unresolved.map(map); d }).collect();
        let mut x = explanation("p", edges, attribution, diags);
        x.meta.wall_ms = wall;
        let view = f.view(&drop, if drop.is_empty() { LossSpec::None } else { LossSpec::Uniform { rate: 0.2, seed: 0 } });
        let s = score_case(&f.bundle, &view, &x);
        check(&s);
        prop_assert!(s.analysis_ms.is_finite());
        // Aggregation stays in range too, and the JSON line round-trips.
        let lb = Leaderboard::from_scores(std::slice::from_ref(&s));
        for r in &lb.rows {
            for v in [r.pair_accuracy, r.root_cause_top1, r.root_cause_top3, r.edge_precision, r.edge_recall, r.edge_f1,
                      r.request_correct, r.request_wrong, r.request_abstained, r.critical_path_fidelity,
                      r.unresolved_recall, r.false_confidence_rate, r.brier] {
                prop_assert!(in_unit(v));
            }
        }
        let line = serde_json::to_string(&s).unwrap();
        let back: CaseScore = serde_json::from_str(&line).unwrap();
        prop_assert_eq!(back, s);
    }

    #[test]
    fn arbitrary_truth_references_never_panic(
        path in prop::collection::vec(0u32..20, 0..8),
        edges in prop::collection::vec((0u32..20, 0u32..20, edge_type()), 0..10),
        claims in prop::collection::vec((rid(), rid(), edge_type(), evidence(), conf()), 0..10),
    ) {
        // Ground truth that the reader would reject (dangling ids): still no panic.
        let mut f = Fixture::new(Rids::DENSE);
        f.bundle.ground_truth.symptoms[0].critical_path = path;
        f.bundle.ground_truth.symptoms[0].node = 99;
        f.bundle.ground_truth.edges.extend(edges.into_iter().map(|(src, dst, kind)| ground_truth::Edge { src, dst, kind }));
        let edges = claims.into_iter().map(|(s, d, kind, evidence, confidence)| ClaimedEdge { src: s, dst: d, kind, evidence, confidence }).collect();
        let s = score_case(&f.bundle, &f.view(&[20], LossSpec::None), &explanation("p", edges, vec![], vec![]));
        check(&s);
    }
}
