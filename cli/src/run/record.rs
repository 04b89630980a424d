//! The record stage: each job's bundle, recorded on the backend (in batches where the
//! backend records batches cheaper) or replayed from a corpus, hashed into the
//! manifest as it is written or read, and the label check's verdict kept.

use super::plan::Job;
use super::resume::{finished_scores, label_path};
use crate::manifest::{Known, RunManifest};
use crate::progress::{Report, Stage};
use ground_truth::io::{write_atomic, Readable};
use ground_truth::{Bundle, Scenario};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The label check's verdict of a bundle's first symptom (docs/scenario-space.md).
pub fn label_verdict(bundle: &Bundle) -> Option<ground_truth::graph::LabelVerdict> {
    bundle
        .ground_truth
        .symptoms
        .first()
        .and_then(|s| s.label.as_ref())
        .map(|l| l.verdict)
}

/// The bundle of one job: recorded (or the one an earlier run recorded, while its bytes
/// are the ones the harness hashed) or replayed.
pub(super) fn bundle_of(
    job: &Job,
    backend: &dyn generator::Backend,
    out: &Path,
    key: &str,
    manifest: &RunManifest,
) -> Result<Bundle, String> {
    let bundle = match job {
        Job::Record {
            scenario,
            repetition,
        } => {
            // A bundle on disk is reused only when its bytes are the ones the harness hashed.
            let reusable = match recorded_bundle(out, key, backend, scenario, *repetition) {
                Some(b) => matches!(manifest.verify(key)?, Known::Intact).then_some(b),
                None => None,
            };
            match reusable {
                Some(b) => b,
                None => {
                    let b = backend
                        .record(scenario, *repetition)
                        .map_err(|e| format!("{key}: {e}"))?;
                    write_bundle(out, key, &b, manifest)?;
                    b
                }
            }
        }
        Job::Replay { path, .. } => {
            manifest.verify(key)?;
            let b = Bundle::read(path).map_err(|e| e.to_string())?;
            manifest.record(key, path)?;
            b
        }
    };
    Ok(bundle)
}

/// Keeps the bundle's label verdict beside its scores and says whether the case is
/// scored.
pub(super) fn keep_label_verdict(out: &Path, key: &str, bundle: &Bundle) -> Result<bool, String> {
    // The label check's verdict (docs/scenario-space.md): kept for the run's
    // summary; a dropped or indeterminate case has no label that holds, so it
    // is not scored.
    let verdict = label_verdict(bundle);
    if let Some(v) = verdict {
        let path = label_path(out, key);
        write_atomic(&path, v.as_str().as_bytes())
            .map_err(|e| format!("{key}: cannot write {}: {e}", path.display()))?;
    }
    Ok(!verdict.is_some_and(|v| !v.is_scored()))
}

/// Where a recorded bundle of the run is kept.
pub(super) fn bundle_path(out: &Path, key: &str) -> PathBuf {
    out.join("bundles").join(format!("{key}.bundle.json"))
}

/// Writes a recorded bundle and hashes it into the manifest.
pub(super) fn write_bundle(
    out: &Path,
    key: &str,
    bundle: &Bundle,
    manifest: &RunManifest,
) -> Result<(), String> {
    let path = bundle_path(out, key);
    bundle
        .write(&path)
        .map_err(|e| format!("{key}: cannot write {}: {e}", path.display()))?;
    manifest.record(key, &path)
}

/// The bundle an earlier (or interrupted) run recorded for this job, when it
/// is a recording of exactly this scenario and repetition on this backend.
pub(super) fn recorded_bundle(
    out: &Path,
    key: &str,
    backend: &dyn generator::Backend,
    scenario: &Scenario,
    repetition: u32,
) -> Option<Bundle> {
    let path = bundle_path(out, key);
    if !path.is_file() {
        return None;
    }
    let b = Bundle::read(&path).ok()?;
    let m = &b.manifest;
    (m.backend == backend.name() && m.repetition == repetition && m.scenario == *scenario)
        .then_some(b)
}

/// Bundles recorded per batch on backends that record batches much cheaper
/// than single runs: large enough to spread the GPU's eBPF recorder attach and
/// drain, small enough that an interrupted run keeps most of what it recorded.
pub(super) const RECORD_BATCH: usize = 32;

/// Records, batch by batch, the bundles of `jobs` that are neither scored nor
/// recorded yet, and writes each batch's bundles as it finishes; `run_job` then
/// finds them. Returns the recordings that failed, by job key.
pub(super) fn record_in_batches(
    jobs: &[Job],
    fingerprints: &[Result<String, String>],
    backend: &dyn generator::Backend,
    out: &Path,
    manifest: &RunManifest,
    report: Report,
) -> HashMap<String, String> {
    let pending: Vec<(String, (Scenario, u32))> = jobs
        .iter()
        .zip(fingerprints)
        .filter_map(|(job, fingerprint)| match job {
            Job::Record {
                scenario,
                repetition,
            } => {
                let key = job.key(backend.name());
                let finished = fingerprint
                    .as_ref()
                    .is_ok_and(|f| finished_scores(out, &key, f).is_some());
                (!finished).then(|| (key, (scenario.clone(), *repetition)))
            }
            Job::Replay { .. } => None,
        })
        .filter(|(key, (scenario, repetition))| {
            recorded_bundle(out, key, backend, scenario, *repetition).is_none()
        })
        .collect();
    let mut failures = HashMap::new();
    if pending.is_empty() {
        return failures;
    }
    let bar = Stage::start(
        report,
        pending.len(),
        &format!("bundles recorded on {}", backend.name()),
    );
    for batch in pending.chunks(RECORD_BATCH) {
        let items: Vec<(Scenario, u32)> = batch.iter().map(|(_, item)| item.clone()).collect();
        for ((key, _), recorded) in batch.iter().zip(backend.record_many(&items)) {
            let written = recorded
                .map_err(|e| format!("{key}: {e}"))
                .and_then(|b| write_bundle(out, key, &b, manifest));
            if let Err(e) = written {
                failures.insert(key.clone(), e);
            }
            bar.inc();
        }
    }
    bar.finish();
    failures
}
