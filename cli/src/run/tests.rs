//! `run`'s stages on the simulator, recording in batches like the GPU.

use super::case::{run_case, Shared};
use super::plan::{profiler_names, Job};
use super::record::{bundle_path, record_in_batches, recorded_bundle, RECORD_BATCH};
use crate::external::Externals;
use crate::manifest::RunManifest;
use crate::progress::{Report, Stage};
use generator::sim::SimBackend;
use generator::{Backend, RecordError};
use ground_truth::{Bundle, Scenario};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The simulator, recording in batches like the GPU, counting its calls.
#[derive(Default)]
struct BatchingSim {
    sim: SimBackend,
    singles: AtomicUsize,
    batches: AtomicUsize,
}

impl Backend for BatchingSim {
    fn name(&self) -> &'static str {
        "sim"
    }
    fn record(&self, scenario: &Scenario, repetition: u32) -> Result<Bundle, RecordError> {
        self.singles.fetch_add(1, Ordering::SeqCst);
        self.sim.record(scenario, repetition)
    }
    fn record_many(&self, items: &[(Scenario, u32)]) -> Vec<Result<Bundle, RecordError>> {
        self.batches.fetch_add(1, Ordering::SeqCst);
        items.iter().map(|(s, r)| self.sim.record(s, *r)).collect()
    }
    fn records_in_batches(&self) -> bool {
        true
    }
}

fn record_jobs(count: usize) -> Vec<Job> {
    let suite = crate::catalog::load_suite(crate::catalog::DEFAULT_SUITE, None).unwrap();
    suite
        .into_iter()
        .flat_map(|scenario| (0..3).map(move |repetition| (scenario.clone(), repetition)))
        .take(count)
        .map(|(scenario, repetition)| Job::Record {
            scenario,
            repetition,
        })
        .collect()
}

fn names(arg: &str) -> Vec<String> {
    profiler_names(arg).unwrap_or_else(|f| panic!("{}", f.message))
}

#[test]
fn profiler_sets_and_names_combine_in_order_each_once() {
    let builtin: Vec<String> = baselines::builtin_names()
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(names("builtin"), builtin);
    let probes = names("probes");
    assert_eq!(probes, baselines::probe_names());
    assert!(probes.iter().all(|p| evaluator::is_probe(p)));
    assert!(builtin.iter().all(|p| !evaluator::is_probe(p)));
    let both = names("causal-graph,builtin,probes");
    assert_eq!(both[0], "causal-graph");
    assert_eq!(both.len(), builtin.len() + probes.len());
    let err = profiler_names("builtin,nope").expect_err("unknown name");
    assert_eq!(err.code, 2);
    assert!(err.message.contains("`nope`"), "{}", err.message);
}

/// Fingerprints that match no finished case: these tests are about recorded bundles.
fn unfinished(jobs: &[Job]) -> Vec<Result<String, String>> {
    jobs.iter().map(|_| Err("not scored".to_string())).collect()
}

#[test]
fn a_batching_backend_records_each_bundle_once_batch_by_batch() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = record_jobs(RECORD_BATCH + 3);
    let backend = BatchingSim::default();
    let manifest = RunManifest::open(dir.path()).unwrap();
    let failures = record_in_batches(
        &jobs,
        &unfinished(&jobs),
        &backend,
        dir.path(),
        &manifest,
        Report::Quiet,
    );
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(backend.batches.load(Ordering::SeqCst), 2);
    let profilers = vec!["causal-graph".to_string()];
    let (view_key, externals) = (views::ViewKey::random(), Externals::none());
    let shared = Shared {
        view_threads: 1,
        manifest: &manifest,
        view_key: &view_key,
        externals: &externals,
    };
    let quiet = Stage::start(Report::Quiet, jobs.len(), "bundles");
    for job in &jobs {
        let key = job.key(backend.name());
        let scores =
            run_case(job, &backend, dir.path(), &key, &profilers, &shared, &quiet).unwrap();
        assert!(!scores.is_empty(), "{key}");
    }
    // Every job found its recorded bundle: none was recorded again.
    assert_eq!(backend.singles.load(Ordering::SeqCst), 0);
    // A second pass (a resumed run) records nothing.
    assert!(record_in_batches(
        &jobs,
        &unfinished(&jobs),
        &backend,
        dir.path(),
        &manifest,
        Report::Quiet
    )
    .is_empty());
    assert_eq!(backend.batches.load(Ordering::SeqCst), 2);
}

#[test]
fn a_recorded_bundle_is_reused_only_for_its_own_scenario_and_repetition() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = record_jobs(1);
    let Job::Record {
        scenario,
        repetition,
    } = &jobs[0]
    else {
        unreachable!()
    };
    let backend = BatchingSim::default();
    let key = jobs[0].key(backend.name());
    let manifest = RunManifest::open(dir.path()).unwrap();
    assert!(record_in_batches(
        &jobs,
        &unfinished(&jobs),
        &backend,
        dir.path(),
        &manifest,
        Report::Quiet
    )
    .is_empty());
    assert!(recorded_bundle(dir.path(), &key, &backend, scenario, *repetition).is_some());
    assert!(recorded_bundle(dir.path(), &key, &backend, scenario, repetition + 1).is_none());
    let mut reseeded = scenario.clone();
    reseeded.seed += 1;
    assert!(recorded_bundle(dir.path(), &key, &backend, &reseeded, *repetition).is_none());
    // A damaged file is recorded again, not trusted.
    std::fs::write(bundle_path(dir.path(), &key), b"{").unwrap();
    assert!(recorded_bundle(dir.path(), &key, &backend, scenario, *repetition).is_none());
}

#[test]
fn failed_recordings_are_reported_by_job() {
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = record_jobs(2);
    if let Job::Record { scenario, .. } = &mut jobs[1] {
        scenario.programs.clear();
    }
    let backend = BatchingSim::default();
    let manifest = RunManifest::open(dir.path()).unwrap();
    let failures = record_in_batches(
        &jobs,
        &unfinished(&jobs),
        &backend,
        dir.path(),
        &manifest,
        Report::Quiet,
    );
    let failed_key = jobs[1].key(backend.name());
    assert_eq!(failures.keys().collect::<Vec<_>>(), vec![&failed_key]);
    assert!(bundle_path(dir.path(), &jobs[0].key(backend.name())).is_file());
}
