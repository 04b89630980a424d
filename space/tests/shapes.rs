//! The real-program-shape families (docs/scenario-space.md, "Real program
//! shapes"): valid, pairwise alike, and on the simulator their labels hold
//! through the cross-request edges of the truth (no case is dropped because the
//! truth lacks an edge).

use generator::Backend;
use ground_truth::graph::LabelVerdict;
use scenario_space::{shape_instance, Split, DEV_SEED, SHAPES};
use std::collections::BTreeMap;

/// Instances of every shape family, `per_family` each.
fn instances(per_family: u64) -> Vec<ground_truth::Scenario> {
    let mut out = Vec::new();
    for (f, family) in SHAPES.iter().enumerate() {
        for i in 0..per_family {
            out.extend(shape_instance(
                Split::Dev,
                DEV_SEED,
                1000 * (f as u64 + 1) + i,
                family,
            ));
        }
    }
    out
}

#[test]
fn shape_scenarios_are_valid_and_their_variants_differ_only_in_injection() {
    let scenarios = instances(6);
    for sc in &scenarios {
        assert!(sc.check().is_empty(), "{}: {:?}", sc.name, sc.check());
    }
    for pair in scenarios.windows(2) {
        if pair[0].space == pair[1].space {
            assert_eq!(pair[0].programs, pair[1].programs);
            assert_eq!(pair[0].symptom, pair[1].symptom);
            assert_ne!(pair[0].cause, pair[1].cause);
        }
    }
}

#[test]
fn shape_labels_hold_on_the_simulator() {
    let backend = generator::sim::SimBackend::default();
    let mut verdicts: BTreeMap<(String, String, &'static str), usize> = BTreeMap::new();
    let (mut dropped, mut unnamed) = (Vec::new(), Vec::new());
    for sc in instances(6) {
        let b = backend.record(&sc, 0).expect("recorded");
        let label = b.ground_truth.symptoms[0].label.clone().expect("checked");
        *verdicts
            .entry((
                sc.family.clone(),
                sc.variant.clone(),
                label.verdict.as_str(),
            ))
            .or_default() += 1;
        if label.verdict == LabelVerdict::Dropped {
            dropped.push(format!("{}: {}", sc.name, label.reason));
            // Moved by the injection with its mechanism off the true path: a
            // delay the truth has no edge for.
            if label.mechanism_on_path == Some(false) {
                unnamed.push(format!("{}: {}", sc.name, label.reason));
            }
        }
    }
    for (k, v) in &verdicts {
        eprintln!("{k:?}: {v}");
    }
    for d in &dropped {
        eprintln!("dropped {d}");
    }
    for family in SHAPES {
        for variant in family.variants {
            let kept = verdicts
                .get(&(family.name.to_string(), variant.name.to_string(), "kept"))
                .copied()
                .unwrap_or(0);
            assert!(
                kept >= 4,
                "{}.{}: kept in {kept} of 6 instances",
                family.name,
                variant.name
            );
        }
    }
    assert!(
        unnamed.is_empty(),
        "dropped because the truth lacks an edge: {unnamed:#?}"
    );
    assert!(dropped.len() <= 2, "{} dropped", dropped.len());
}

#[test]
fn the_dev_split_samples_every_shape_along_its_axes() {
    let scenarios = scenario_space::generate(Split::Dev, DEV_SEED, 600);
    let mut seen: BTreeMap<(String, String), std::collections::BTreeSet<String>> = BTreeMap::new();
    for sc in &scenarios {
        for (axis, value) in &sc.space.as_ref().unwrap().axes {
            seen.entry((sc.family.clone(), axis.clone()))
                .or_default()
                .insert(value.to_string());
        }
    }
    for family in SHAPES {
        let of = |axis: &str| seen.get(&(family.name.to_string(), axis.to_string()));
        assert!(
            of("upstream").is_some_and(|v| !v.is_empty()),
            "{}",
            family.name
        );
        assert!(
            of("magnitude_ratio").is_some_and(|v| v.len() >= 3),
            "{}",
            family.name
        );
    }
    let serving = |axis: &str| &seen[&("continuous-batching".to_string(), axis.to_string())];
    assert!(serving("upstream").len() >= 3, "1-3 requests upstream");
    assert_eq!(serving("symptom_position").len(), 2, "first and later ops");
    assert!(serving("batch_sizes").len() >= 2);
    let training = |axis: &str| &seen[&("training-step".to_string(), axis.to_string())];
    assert_eq!(
        training("loader_queue").len(),
        3,
        "unbounded and bounded loader queues"
    );
}
