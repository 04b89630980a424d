//! The report stage: the run's results written (scores, leaderboard, plots, the
//! PyTorch track's completeness and the megakernel track's sections, the HTML site),
//! the leaderboard printed, and the label check's verdicts and the failures summed up.

use super::args::RunArgs;
use super::plan::{Inputs, Job};
use super::resume::label_path;
use super::workers::Ran;
use crate::Failure;
use ground_truth::io::write_atomic;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// Writes and prints the results of a run whose cases `ran`.
pub(super) fn report(
    args: &RunArgs,
    inputs: &Inputs,
    jobs: &[Job],
    ran: Ran,
    started: Instant,
) -> Result<(), Failure> {
    let Inputs {
        backend,
        record,
        corpus,
        kineto_corpus,
        ..
    } = inputs;
    let out = &args.out;
    let Ran {
        mut scores,
        failures,
        resumed,
        redrawn,
    } = ran;
    // Which cases were scored on a hidden split (baselines/PROTOCOL.md, "Hidden splits").
    let recorded = jobs.iter().filter_map(|job| match job {
        Job::Record {
            scenario,
            repetition,
        } => Some((scenario.name.as_str(), *repetition)),
        Job::Replay { .. } => None,
    });
    let suite = inputs.suite.as_str();
    crate::submit::mark_hidden(
        &mut scores,
        suite,
        args.split_seed,
        recorded,
        backend.name(),
    );
    let shard = args.shard.unwrap_or(crate::shard::Shard::WHOLE);
    crate::costs::take_costs(args.costs.as_deref(), corpus.as_deref(), out)?;
    let report = evaluator::write_results(out, &scores).map_err(crate::commands::eval_failure)?;
    let replayed: Vec<&Path> = corpus
        .iter()
        .chain(kineto_corpus)
        .map(|p| p.as_path())
        .collect();
    crate::torch::completeness_section(&replayed, out)?;
    let track = crate::track::in_run(
        out,
        backend.name(),
        *record,
        corpus.as_deref(),
        args.megakernel_reps,
        shard,
    )?;
    crate::manifest::mark_leaderboard(out)?;
    crate::commands::write_site(out, &out.join("html"), &report.leaderboard)?;
    if !args.quiet {
        outln!("{}", report.leaderboard.summary(out));
        if let Some(rows) = &track {
            outln!("{}", crate::track::section(rows));
        }
    }
    let keys: Vec<String> = jobs.iter().map(|j| j.key(backend.name())).collect();
    eprintln!("causalbench: {}", label_summary(out, &keys, &redrawn)?);
    eprintln!(
        "causalbench: {} bundles ({} resumed), {} case scores in {:.1} s; results in {}",
        jobs.len(),
        resumed,
        scores.len(),
        started.elapsed().as_secs_f64(),
        out.display()
    );
    if failures.is_empty() {
        Ok(())
    } else {
        for f in &failures {
            eprintln!("causalbench: failed: {f}");
        }
        Err(Failure::failed(format!(
            "{} of {} bundles failed",
            failures.len(),
            jobs.len()
        )))
    }
}

/// The label check's verdicts over a run's cases: counted for the summary and
/// written to `labels.json` with the keys of the cases that lost their label.
fn label_summary(
    out: &Path,
    keys: &[String],
    redrawn: &[crate::redraw::Redrawn],
) -> Result<String, Failure> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut changed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // The yield of each family (issue "Real program shapes"): how many of its
    // cases each verdict took.
    let mut by_family: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for key in keys {
        let Ok(verdict) = std::fs::read_to_string(label_path(out, key)) else {
            continue;
        };
        let verdict = verdict.trim().to_string();
        *by_family
            .entry(family_of_key(key).to_string())
            .or_default()
            .entry(verdict.clone())
            .or_default() += 1;
        if ground_truth::graph::LabelVerdict::parse(&verdict).is_some_and(|v| v.changed_label()) {
            changed
                .entry(verdict.clone())
                .or_default()
                .push(key.clone());
        }
        *counts.entry(verdict).or_default() += 1;
    }
    let text = serde_json::to_string_pretty(&serde_json::json!({
        "counts": counts,
        "by_family": by_family,
        "cases": changed,
        // Instance with a dropped variant → the instance drawn in its place.
        "redrawn": redrawn
            .iter()
            .map(|r| (r.dropped.clone(), r.replacement.clone()))
            .collect::<BTreeMap<_, _>>(),
    }))
    .expect("label summary serializes");
    let path = out.join("labels.json");
    write_atomic(&path, text.as_bytes())
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))?;
    let n = |v: &str| counts.get(v).copied().unwrap_or(0);
    let checked: usize = counts.values().sum();
    // Each family's scored share of its timing cases (kept or relabelled `none`).
    let yields: Vec<String> = by_family
        .iter()
        .filter_map(|(family, v)| {
            let of = |k: &str| v.get(k).copied().unwrap_or(0);
            let scored = of("kept") + of("relabelled_none");
            let timing = scored + of("dropped") + of("indeterminate");
            (timing > 0).then(|| format!("{family} {scored}/{timing}"))
        })
        .collect();
    Ok(format!(
        "labels checked against the truth: {} kept, {} relabelled none, {} dropped and {} indeterminate (not scored), {} not timing questions, {} recorded before the check{}{}",
        n("kept"),
        n("relabelled_none"),
        n("dropped"),
        n("indeterminate"),
        n("not_applicable"),
        keys.len().saturating_sub(checked),
        if yields.is_empty() {
            String::new()
        } else {
            format!("\ncausalbench: timing cases scored per family: {}", yields.join(", "))
        },
        if redrawn.is_empty() {
            String::new()
        } else {
            format!(
                "\ncausalbench: {} instances re-drawn for a dropped variant (labels.json, `redrawn`)",
                redrawn.len()
            )
        }
    ))
}

/// The family of a case key (`BACKEND-FAMILY.…` or `corpus-FAMILY.…`): backend
/// names carry no `-`, family names no `.`.
fn family_of_key(key: &str) -> &str {
    let mut rest = key;
    for prefix in ["corpus-", "sim-", "cuda-", "torch-"] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    rest.split('.').next().unwrap_or(rest)
}
