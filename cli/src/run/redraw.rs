//! The re-draw stage of a recorded split: an instance with a variant whose label the
//! check dropped on this backend is replaced by another instance of its family
//! (`scenario_space::redrawn_instance`, docs/scenario-space.md "Cases that survive the
//! noise"), recorded and scored like the rest, at most `MAX_REDRAWS` times over. The
//! dropped cases keep their verdicts in `labels.json`, with what replaced them
//! (`crate::redraw`).

use super::plan::Job;
use super::resume::label_path;
use crate::redraw::Redrawn;
use ground_truth::graph::LabelVerdict;
use std::path::Path;

/// The record jobs that replace every instance of `jobs` with a case the label check
/// dropped (its verdict kept under `out`), and which instance each replaces
/// (`crate::redraw::replacements`).
pub(super) fn replacements(
    out: &Path,
    backend: &str,
    split: scenario_space::Split,
    seed: u64,
    jobs: &[Job],
) -> (Vec<Job>, Vec<Redrawn>) {
    let recorded = jobs.iter().filter_map(|job| match job {
        Job::Record {
            scenario,
            repetition,
        } => {
            let verdict = std::fs::read_to_string(label_path(out, &job.key(backend)))
                .ok()
                .and_then(|v| LabelVerdict::parse(v.trim()));
            Some((scenario, *repetition, verdict))
        }
        Job::Replay { .. } => None,
    });
    let (more, redrawn) = crate::redraw::replacements(split, seed, recorded);
    let jobs = more
        .into_iter()
        .map(|(scenario, repetition)| Job::Record {
            scenario,
            repetition,
        })
        .collect();
    (jobs, redrawn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redraw::instance_name;
    use scenario_space::Split;

    /// A dropped variant re-draws its whole instance once (every variant, so its pair
    /// stays whole), in the same family; a kept case re-draws nothing.
    #[test]
    fn a_dropped_variant_redraws_its_instance_in_the_same_family() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cases")).unwrap();
        let scenarios = scenario_space::generate(Split::Dev, scenario_space::DEV_SEED, 4);
        let jobs: Vec<Job> = scenarios
            .iter()
            .map(|sc| Job::Record {
                scenario: sc.clone(),
                repetition: 0,
            })
            .collect();
        for (i, job) in jobs.iter().enumerate() {
            let verdict = if i == 1 { "dropped" } else { "kept" };
            std::fs::write(label_path(dir.path(), &job.key("sim")), verdict).unwrap();
        }
        let (more, redrawn) = replacements(
            dir.path(),
            "sim",
            Split::Dev,
            scenario_space::DEV_SEED,
            &jobs,
        );
        assert_eq!(redrawn.len(), 1);
        assert_eq!(redrawn[0].dropped, instance_name(&scenarios[1]));
        // A whole instance: a pair at least (its variants depend on what was sampled).
        let family = &scenarios[1].family;
        assert!(more.len() >= 2, "{} cases", more.len());
        for job in &more {
            let Job::Record { scenario, .. } = job else {
                panic!("a re-draw records")
            };
            assert_eq!(&scenario.family, family);
            assert_eq!(instance_name(scenario), redrawn[0].replacement);
            assert_ne!(scenario.name, scenarios[1].name);
        }
        // Nothing dropped: nothing re-drawn.
        for job in &jobs {
            std::fs::write(label_path(dir.path(), &job.key("sim")), "kept").unwrap();
        }
        let (more, redrawn) = replacements(
            dir.path(),
            "sim",
            Split::Dev,
            scenario_space::DEV_SEED,
            &jobs,
        );
        assert!(more.is_empty() && redrawn.is_empty());
    }
}
