//! Views never contain a removed rid, keep every query, and are deterministic.

use generator::Backend;
use ground_truth::io::Readable;
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Bundle, Collectors, Mode};
use proptest::prelude::*;
use std::collections::HashSet;
use std::sync::OnceLock;

fn bundles() -> &'static Vec<Bundle> {
    static B: OnceLock<Vec<Bundle>> = OnceLock::new();
    B.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalog");
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        let be = generator::sim::SimBackend::default();
        paths
            .iter()
            .map(|p| {
                be.record(&ground_truth::Scenario::read(p).unwrap(), 0)
                    .unwrap()
            })
            .collect()
    })
}

fn spec_strategy() -> impl Strategy<Value = ViewSpec> {
    (
        prop::sample::select(Collectors::ALL.to_vec()),
        prop::sample::select(vec![Mode::Instrumented, Mode::Closed]),
        prop_oneof![
            Just(LossSpec::None),
            (0.0f64..1.0, any::<u64>()).prop_map(|(rate, seed)| LossSpec::Uniform { rate, seed }),
            any::<u64>().prop_map(|seed| LossSpec::Targeted { seed }),
        ],
    )
        .prop_map(|(collectors, mode, loss)| ViewSpec {
            collectors,
            mode,
            loss,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn taking_the_trace_derives_the_same_view(i in 0usize..27, spec in spec_strategy()) {
        let b = &bundles()[i];
        let key = views::ViewKey::random();
        let copied = views::derive_with_key(b, spec, &key);
        let mut owned = b.clone();
        let taken = views::derive_taking_trace(&mut owned, spec, &key);
        prop_assert!(owned.trace.is_empty());
        prop_assert_eq!(&taken.view, &copied.view);
        prop_assert_eq!(&taken.removed, &copied.removed);
    }

    #[test]
    fn views_hide_what_they_removed(i in 0usize..27, spec in spec_strategy()) {
        let b = &bundles()[i];
        let d = views::derive(b, spec);
        let rids: HashSet<u64> = d.view.records.iter().map(|r| r.rid()).collect();
        for r in &d.removed {
            prop_assert!(!rids.contains(r), "removed rid {} is in the view", r);
        }
        // Only records of the chosen collectors and mode are there.
        for r in &d.view.records {
            prop_assert!(ViewSpec::keeps(spec.collectors, spec.mode, r));
        }
        // Every query survives and points at a record of the view.
        prop_assert_eq!(d.view.queries.len(), b.ground_truth.symptoms.len());
        for q in &d.view.queries {
            prop_assert!(rids.contains(&q.rid));
        }
        // Deterministic.
        let again = views::derive(b, spec);
        prop_assert_eq!(&again.view, &d.view);
        prop_assert_eq!(&again.removed, &d.removed);
        // Targeted loss removes exactly one record per symptom, on its true path.
        if let LossSpec::Targeted { .. } = spec.loss {
            let owner = b.ground_truth.rid_owner();
            prop_assert!(d.removed.len() <= b.ground_truth.symptoms.len());
            for r in &d.removed {
                let n = owner[r];
                prop_assert!(b.ground_truth.symptoms.iter().any(|s| s.critical_path.contains(&n)));
            }
        }
    }
}

#[test]
fn closed_mode_strips_application_identity() {
    for b in bundles() {
        let v = views::derive(
            b,
            ViewSpec {
                collectors: Collectors::Combined,
                mode: Mode::Closed,
                loss: LossSpec::None,
            },
        )
        .view;
        assert!(v
            .records
            .iter()
            .all(|r| r.source() != ground_truth::trace::Source::App));
        assert!(
            !v.bundle.contains(&b.manifest.scenario.family),
            "the view must not name its scenario"
        );
    }
}
