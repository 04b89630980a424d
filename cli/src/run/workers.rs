//! The run's cases over worker threads: each case finished by an earlier run with the
//! same fingerprint is resumed, every other one runs through the stages (`case`) and its
//! scores are kept (`resume`).

use super::case::{run_case, Shared};
use super::plan::Job;
use super::record::record_in_batches;
use super::resume::{case_fingerprint, finished_scores, keep_scores};
use crate::manifest::Known;
use crate::progress::{Report, Stage};
use evaluator::CaseScore;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What the cases of a run came to.
pub(super) struct Ran {
    pub scores: Vec<CaseScore>,
    /// One line per failed case.
    pub failures: Vec<String>,
    /// Cases an earlier run had finished.
    pub resumed: usize,
    /// Instances re-drawn because a variant's label dropped (`redraw`).
    pub redrawn: Vec<crate::redraw::Redrawn>,
}

impl Ran {
    /// Adds what a further round of cases came to.
    pub(super) fn absorb(&mut self, more: Ran) {
        self.scores.extend(more.scores);
        self.failures.extend(more.failures);
        self.resumed += more.resumed;
        self.redrawn.extend(more.redrawn);
    }
}

/// Runs every job on `workers` threads (a backend that records in batches records
/// first, batch by batch).
pub(super) fn run_cases(
    jobs: &[Job],
    backend: &dyn generator::Backend,
    out: &Path,
    profilers: &[String],
    shared: &Shared,
    workers: usize,
    report: Report,
) -> Ran {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<CaseScore>> = Mutex::new(Vec::new());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let resumed = AtomicUsize::new(0);
    let fingerprints: Vec<Result<String, String>> = jobs
        .iter()
        .map(|job| case_fingerprint(job, backend.name(), profilers, shared.externals))
        .collect();
    let recording_failures = if backend.records_in_batches() {
        record_in_batches(jobs, &fingerprints, backend, out, shared.manifest, report)
    } else {
        HashMap::new()
    };
    let bar = Stage::start(report, jobs.len(), "bundles");
    std::thread::scope(|s| {
        for _ in 0..workers.min(jobs.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { break };
                let key = job.key(backend.name());
                bar.set_item(key.clone());
                let fingerprint = match &fingerprints[i] {
                    Ok(f) => f,
                    Err(e) => {
                        failures.lock().unwrap().push(format!("{key}: {e}"));
                        bar.inc();
                        continue;
                    }
                };
                // Finished scores count only while their fingerprint is this run's and their
                // bundle is the one the harness hashed.
                let finished = finished_scores(out, &key, fingerprint)
                    .map(|scores| shared.manifest.verify(&key).map(|k| (k, scores)));
                let outcome = match finished {
                    Some(Ok((Known::Intact, scores))) => {
                        resumed.fetch_add(1, Ordering::SeqCst);
                        Ok(scores)
                    }
                    Some(Err(tampered)) => Err(tampered),
                    _ if recording_failures.contains_key(&key) => {
                        Err(recording_failures[&key].clone())
                    }
                    _ => run_case(job, backend, out, &key, profilers, shared, &bar).and_then(
                        |scores| keep_scores(out, &key, fingerprint, &scores).map(|()| scores),
                    ),
                };
                match outcome {
                    Ok(scores) => results.lock().unwrap().extend(scores),
                    Err(e) => failures.lock().unwrap().push(e),
                }
                bar.inc();
            });
        }
    });
    bar.finish();
    Ran {
        scores: results.into_inner().unwrap(),
        failures: failures.into_inner().unwrap(),
        resumed: resumed.into_inner(),
        redrawn: Vec::new(),
    }
}
