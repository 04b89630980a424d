//! `causalbench run`: the whole benchmark in one command. Each bundle is one
//! unit of work (record or replay → standard views → every built-in profiler →
//! scores); its scores land atomically in `cases/`, so a rerun into the same
//! directory resumes where an interrupted one stopped. Bundles are hashed into
//! `manifest.json` as the harness writes or reads them, and a resumed case whose
//! bundle changed since is refused (`docs/integrity.md`).
//!
//! [`run_with`] is the driver; each stage is a file of `run/`:
//! `plan` (profilers, backend, inputs, jobs) → `record` (a job's bundle, recorded or
//! replayed) → `view` (the standard views) → `profile` (each profiler's explanation) →
//! `score` (the evaluator's case scores) → `report` (results written and printed).
//! `case` takes one bundle through record → score, `workers` runs the cases over
//! threads, and `resume` keeps what lets a rerun resume.

mod args;
mod case;
mod plan;
mod profile;
mod record;
mod redraw;
mod report;
mod resume;
mod score;
#[cfg(test)]
mod tests;
mod view;
mod workers;

pub use args::RunArgs;
pub use plan::{record_key, SHIPPED_CORPUS};
pub use record::label_verdict;

use crate::external::Externals;
use crate::manifest::RunManifest;
use crate::Failure;
use std::time::Instant;

pub fn run(args: RunArgs) -> Result<(), Failure> {
    let mut externals = Externals::new(
        &args.external,
        args.allow_unisolated,
        std::time::Duration::from_secs(args.profiler_timeout),
    )?;
    externals.collectors = args.collectors();
    externals.modes = args.modes();
    run_with(args, externals)
}

/// [`run`] with its external profilers already decided (`submit` restricts their views).
pub fn run_with(args: RunArgs, externals: Externals) -> Result<(), Failure> {
    let started = Instant::now();
    let profilers = plan::profiler_names(&args.profilers)?;
    if profilers.is_empty() && externals.profilers.is_empty() {
        return Err(Failure::input(
            "--profilers: no profiler named, and no --profiler command given",
        ));
    }
    plan::note_missing_adapters(&args.profilers);
    let inputs = plan::inputs(&args)?;
    let out = &args.out;
    std::fs::create_dir_all(out.join("cases"))
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", out.display())))?;
    let manifest = RunManifest::open(out)?;
    let jobs = plan::jobs(&args, &inputs, &manifest)?;
    manifest
        .set_external(
            externals.isolation.map(|i| i.describe()),
            externals.templates(),
        )
        .map_err(Failure::failed)?;
    let view_key = crate::manifest::view_key(out)?;
    let workers = args
        .jobs
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1);
    let shared = case::Shared {
        // Cores left over by the bundle workers go to the views of each bundle.
        view_threads: (workers / jobs.len().max(1)).max(1),
        manifest: &manifest,
        view_key: &view_key,
        externals: &externals,
    };
    let report = args
        .progress
        .unwrap_or_else(|| crate::progress::Report::choose(args.quiet));
    let run_cases = |jobs: &[plan::Job]| {
        workers::run_cases(
            jobs,
            &*inputs.backend,
            out,
            &profilers,
            &shared,
            workers,
            report,
        )
    };
    let mut ran = run_cases(&jobs);
    let mut jobs = jobs;
    // A recorded split re-draws the instances whose label dropped (`redraw`).
    let split = manifest
        .split()
        .filter(|_| inputs.record)
        .and_then(|r| Some((scenario_space::Split::parse(&r.split)?, r.seed)));
    if let Some((split, seed)) = split {
        let mut round_from = 0;
        for _ in 0..crate::redraw::MAX_REDRAWS {
            let (more, redrawn) =
                redraw::replacements(out, inputs.backend.name(), split, seed, &jobs[round_from..]);
            if more.is_empty() {
                break;
            }
            round_from = jobs.len();
            // Not filtered by `--shard`: the shard that saw the drop records the
            // replacement, so the shards together re-draw what one run would.
            ran.absorb(run_cases(&more));
            ran.redrawn.extend(redrawn);
            jobs.extend(more);
        }
    }
    report::report(&args, &inputs, &jobs, ran, started)
}
