//! `causalbench run`: the whole benchmark in one command. Each bundle is one
//! unit of work (record or replay → standard views → every built-in profiler →
//! scores); its scores land atomically in `cases/`, so a rerun into the same
//! directory resumes where an interrupted one stopped. Bundles are hashed into
//! `manifest.json` as the harness writes or reads them, and a resumed case whose
//! bundle changed since is refused (`docs/integrity.md`).

use crate::external::Externals;
use crate::manifest::{Known, RunManifest};
use crate::{BackendArg, Failure};
use evaluator::CaseScore;
use ground_truth::io::{write_atomic, Readable};
use ground_truth::{Bundle, Scenario};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// `causalbench run`'s options.
#[derive(clap::Args)]
pub struct RunArgs {
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// `catalog` (the embedded suite, the default), a generated split of the scenario
    /// space (`dev`: fixed seeds, what tests and CI run; `test`: a fresh seed per run,
    /// recorded in manifest.json; docs/scenario-space.md) or a directory of scenario files.
    #[arg(long)]
    pub suite: Option<String>,
    /// Scenarios of a generated split (whole family instances, so a few more may
    /// run; default 300).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub cases: Option<u64>,
    /// The test split's seed, to reproduce a run (default: the seed an earlier run
    /// into `--out` recorded, else a fresh one).
    #[arg(long)]
    pub split_seed: Option<u64>,
    /// Replay the bundles (`*.bundle.json`, `*.bundle.json.gz`) of a recorded corpus directory. Alone it
    /// replaces recording; with `--suite` it comes in addition. Without either, `auto`
    /// on a machine without a GPU records the catalog on the simulator and replays
    /// the shipped corpus (results/corpus/h200-580).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
    /// Repetitions per scenario (default: each scenario's own `repetitions`), at least 1
    /// (a run of none would score nothing) and at most the scenario-size limit of repetitions.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(ground_truth::scenario::MAX_REPETITIONS)))]
    pub reps: Option<u32>,
    /// Overrides every scenario's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Worker threads (default: available cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Do not print the leaderboard at the end.
    #[arg(long)]
    pub quiet: bool,
    /// Profilers to run, a comma list of names and sets: `all` (default: the built-in
    /// ones plus the third-party adapters whose tool is installed, `hta-critical-path`),
    /// `builtin` (the built-in ones only), `probes` (the leakage probes,
    /// `docs/integrity.md`), `none` (only the `--profiler` commands), e.g.
    /// `builtin,probes`.
    #[arg(long, default_value = "all")]
    pub profilers: String,
    /// Repetitions of each megakernel-track family, recorded with the suite and
    /// scored into the track's own leaderboard section (0: leave the track out).
    /// A run that only replays `--corpus` replays the corpus's `megakernel/` packs instead.
    #[arg(long, default_value_t = 3)]
    pub megakernel_reps: u32,
    /// An external profiler scored beside the built-in ones, `NAME=CMD` (repeatable; CMD
    /// names `{view}` and `{out}`, baselines/PROTOCOL.md). Each run is isolated by Landlock.
    #[arg(long = "profiler", value_name = "NAME=CMD")]
    pub external: Vec<String>,
    /// On a kernel without Landlock, run external profilers unisolated instead of refusing
    /// (a loud warning, recorded in manifest.json and leaderboard.md).
    #[arg(long)]
    pub allow_unisolated: bool,
    /// Wall-clock limit of one external profiler run on one view, in seconds.
    #[arg(long, default_value_t = 300)]
    pub profiler_timeout: u64,
    /// Collector costs (`causalbench measure collectors`) to show beside the
    /// accuracy of each view ("Accuracy against cost" in leaderboard.md). Replaying
    /// the shipped corpus, the shipped measurement is used unless this names another.
    #[arg(long, value_name = "FILE")]
    pub costs: Option<PathBuf>,
    /// Record and score only part K of N of the suite (cases split by their key, so a
    /// case keeps its shard when the suite grows); `report --merge` joins the shards
    /// (docs/scale-out.md).
    #[arg(long, value_name = "K/N")]
    pub shard: Option<crate::shard::Shard>,
}

/// What every job of a run shares besides the backend.
struct Shared<'a> {
    /// Threads one job may spread its views over.
    view_threads: usize,
    manifest: &'a RunManifest,
    view_key: &'a views::ViewKey,
    externals: &'a Externals,
}

/// Resolves `--profilers` to names, in the order given, each once.
fn profiler_names(arg: &str) -> Result<Vec<String>, Failure> {
    let mut names: Vec<String> = Vec::new();
    for item in arg.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let set: Vec<&str> = match item {
            "builtin" => baselines::builtin_names().to_vec(),
            "all" => baselines::builtin_names()
                .iter()
                .copied()
                .chain(baselines::optional_names())
                .collect(),
            "probes" => baselines::probe_names().to_vec(),
            "none" => Vec::new(),
            name if baselines::builtin(name).is_some() => vec![name],
            name => {
                return Err(Failure::input(format!(
                    "--profilers: no profiler or set named `{name}` (sets: all, builtin, probes, none; \
                     profilers: {}, {}, {})",
                    baselines::builtin_names().join(", "),
                    baselines::optional_names().join(", "),
                    baselines::probe_names().join(", ")
                )))
            }
        };
        for name in set {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
    }
    Ok(names)
}

/// Says which third-party adapter of the `all` set is left out here, and why.
fn note_missing_adapters(arg: &str) {
    let asked_all = arg.split(',').any(|item| item.trim() == "all");
    if asked_all && !baselines::optional_names().contains(&baselines::hta::NAME) {
        eprintln!(
            "causalbench: {} is left out: HolisticTraceAnalysis is not importable by `{}` \
             (install it with `bash baselines/hta/setup-hta.sh`)",
            baselines::hta::NAME,
            baselines::hta::python()
        );
    }
}

/// Where the shipped corpus lives, relative to the working directory.
/// The catalog recorded on the H200 with the toolkit's CUPTI; the per-version corpora
/// beside it (`results/corpus/h200-580-cupti*`) are for `diff --versions`, not the default run.
pub const SHIPPED_CORPUS: &str = "results/corpus/h200-580";

/// The PyTorch track's corpus (docs/torch-track.md), replayed by the default run beside
/// [`SHIPPED_CORPUS`]; its bundles' keys are prefixed so they never meet that corpus's.
pub const SHIPPED_KINETO_CORPUS: &str = "results/corpus/h200-580-kineto";
const KINETO_KEY_PREFIX: &str = "kineto~";

enum Job {
    Record {
        scenario: Scenario,
        repetition: u32,
    },
    /// A bundle of a corpus, with its key (unique within the corpus, see `corpus_files`).
    Replay {
        path: PathBuf,
        key: String,
    },
}

impl Job {
    /// File-name-safe key of the unit of work.
    fn key(&self, backend: &str) -> String {
        match self {
            Job::Record {
                scenario,
                repetition,
            } => record_key(backend, &scenario.name, *repetition),
            Job::Replay { key, .. } => format!("corpus-{key}"),
        }
    }
}

/// The key of a recorded bundle's unit of work: backend, scenario, repetition.
pub fn record_key(backend: &str, scenario: &str, repetition: u32) -> String {
    format!("{backend}-{scenario}.r{repetition}")
}

/// The label check's verdict of a bundle's first symptom (docs/scenario-space.md).
pub fn label_verdict(bundle: &Bundle) -> Option<ground_truth::graph::LabelVerdict> {
    bundle
        .ground_truth
        .symptoms
        .first()
        .and_then(|s| s.label.as_ref())
        .map(|l| l.verdict)
}

/// Everything that determines a finished case's scores: the tool's version, the backend,
/// the scenario as run (its seed override applied) and the repetition, or the replayed
/// bundle's bytes, and the profilers (built-in names, external templates). A finished case
/// is reused only while its fingerprint is the same, so a rerun with another seed,
/// profiler set, scenario file or build scores the case again instead of keeping stale
/// scores.
fn case_fingerprint(
    job: &Job,
    backend: &str,
    profilers: &[String],
    externals: &Externals,
) -> Result<String, String> {
    use sha2::{Digest, Sha256};
    let work = match job {
        Job::Record {
            scenario,
            repetition,
        } => serde_json::json!({
            "scenario": scenario,
            "repetition": repetition,
        }),
        Job::Replay { path, .. } => serde_json::json!({
            "bundle_sha256": crate::manifest::sha256_file(path)?,
        }),
    };
    let identity = serde_json::json!({
        "tool_version": env!("CARGO_PKG_VERSION"),
        "backend": backend,
        "work": work,
        "profilers": profilers,
        // The programs' content too: changed code is scored again.
        "external_profilers": externals.programs(),
    });
    let digest = Sha256::digest(identity.to_string().as_bytes());
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// Where the fingerprint of a finished case is kept, beside its scores.
fn fingerprint_path(out: &Path, key: &str) -> PathBuf {
    out.join("cases").join(format!("{key}.fingerprint"))
}

pub fn run(args: RunArgs) -> Result<(), Failure> {
    let externals = Externals::new(
        &args.external,
        args.allow_unisolated,
        std::time::Duration::from_secs(args.profiler_timeout),
    )?;
    run_with(args, externals)
}

/// [`run`] with its external profilers already decided (`submit` restricts their views).
pub fn run_with(args: RunArgs, externals: Externals) -> Result<(), Failure> {
    let started = Instant::now();
    let profilers = profiler_names(&args.profilers)?;
    if profilers.is_empty() && externals.profilers.is_empty() {
        return Err(Failure::input(
            "--profilers: no profiler named, and no --profiler command given",
        ));
    }
    note_missing_adapters(&args.profilers);
    let mut jobs = Vec::new();
    let mut corpus = args.corpus.clone();
    let mut kineto_corpus = None;
    // An explicit corpus alone means "replay it"; the suite is recorded unless so.
    let record = args.suite.is_some() || args.corpus.is_none();
    let suite = args
        .suite
        .clone()
        .unwrap_or_else(|| crate::catalog::DEFAULT_SUITE.to_string());
    let backend = match args.backend {
        BackendArg::Auto if !generator::backend::gpu_present() => {
            if corpus.is_none() && Path::new(SHIPPED_CORPUS).is_dir() {
                corpus = Some(PathBuf::from(SHIPPED_CORPUS));
                kineto_corpus = Some(PathBuf::from(SHIPPED_KINETO_CORPUS))
                    .filter(|d| d.is_dir() && args.suite.is_none());
            }
            if record {
                eprintln!(
                    "causalbench: no GPU here: recording the suite on the simulator{}",
                    corpus
                        .as_ref()
                        .map(|c| format!(" and replaying the corpus in {}", c.display()))
                        .unwrap_or_default()
                );
            }
            crate::commands::open_backend(BackendArg::Sim)?
        }
        b => crate::commands::open_backend(b)?,
    };
    let out = &args.out;
    if let Some(dir) = corpus.as_ref().filter(|dir| inside(out, dir)) {
        return Err(Failure::input(format!(
            "--out {} is inside --corpus {}: the run would replay its own output",
            out.display(),
            dir.display()
        )));
    }
    std::fs::create_dir_all(out.join("cases"))
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", out.display())))?;
    let manifest = RunManifest::open(out)?;
    if record {
        let cases = args.cases.map(|c| c as usize);
        // A test split resumed into the same directory keeps the seed it drew.
        let earlier = manifest
            .split()
            .filter(|r| r.split == suite && cases.is_none_or(|c| c == r.cases))
            .map(|r| r.seed);
        let scenarios = match crate::catalog::split_draw(&suite, cases, args.split_seed.or(earlier))
        {
            Some(draw) => {
                manifest
                    .set_split(crate::manifest::SplitRecord {
                        split: draw.split.as_str().into(),
                        seed: draw.seed,
                        cases: draw.cases,
                    })
                    .map_err(Failure::failed)?;
                crate::catalog::load_split(draw)
            }
            None => crate::catalog::load_suite(&suite, None)?,
        };
        for mut sc in scenarios {
            if let Some(s) = args.seed {
                sc.seed = s;
            }
            for repetition in 0..args.reps.unwrap_or(sc.repetitions) {
                jobs.push(Job::Record {
                    scenario: sc.clone(),
                    repetition,
                });
            }
        }
    }
    if let Some(dir) = &corpus {
        let files = corpus_files(dir)?;
        if files.is_empty() {
            return Err(Failure::input(format!(
                "--corpus {}: no bundle files (*.bundle.json, *.bundle.json.gz) in it or below: \
                 a run of none would score nothing",
                dir.display()
            )));
        }
        for (path, key) in files {
            jobs.push(Job::Replay { path, key });
        }
    }
    if let Some(dir) = &kineto_corpus {
        for (path, key) in corpus_files(dir)? {
            let key = format!("{KINETO_KEY_PREFIX}{key}");
            jobs.push(Job::Replay { path, key });
        }
    }
    if jobs.is_empty() {
        return Err(Failure::input(format!(
            "suite `{suite}` has no scenario to record: a run of none would score nothing"
        )));
    }
    let shard = args.shard.unwrap_or(crate::shard::Shard::WHOLE);
    jobs.retain(|job| shard.holds(&job.key(backend.name())));
    manifest.set_shard(args.shard).map_err(Failure::failed)?;
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
    let shared = Shared {
        // Cores left over by the bundle workers go to the views of each bundle.
        view_threads: (workers / jobs.len().max(1)).max(1),
        manifest: &manifest,
        view_key: &view_key,
        externals: &externals,
    };
    let shared = &shared;
    let bar = progress_bar(jobs.len(), "bundles {msg}");
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<CaseScore>> = Mutex::new(Vec::new());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let resumed = AtomicUsize::new(0);
    let backend = &*backend;
    let fingerprints: Vec<Result<String, String>> = jobs
        .iter()
        .map(|job| case_fingerprint(job, backend.name(), &profilers, &externals))
        .collect();
    let recording_failures = if backend.records_in_batches() {
        record_in_batches(&jobs, &fingerprints, backend, out, &manifest)
    } else {
        HashMap::new()
    };
    std::thread::scope(|s| {
        for _ in 0..workers.min(jobs.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { break };
                let key = job.key(backend.name());
                bar.set_message(key.clone());
                let done = scores_path(out, &key);
                let fingerprint = match &fingerprints[i] {
                    Ok(f) => f,
                    Err(e) => {
                        failures.lock().unwrap().push(format!("{key}: {e}"));
                        bar.inc(1);
                        continue;
                    }
                };
                // Finished scores count only while their fingerprint is this run's and their
                // bundle is the one the harness hashed.
                let finished = finished_scores(out, &key, fingerprint)
                    .map(|scores| manifest.verify(&key).map(|k| (k, scores)));
                let outcome = match finished {
                    Some(Ok((Known::Intact, scores))) => {
                        resumed.fetch_add(1, Ordering::SeqCst);
                        Ok(scores)
                    }
                    Some(Err(tampered)) => Err(tampered),
                    _ if recording_failures.contains_key(&key) => {
                        Err(recording_failures[&key].clone())
                    }
                    _ => run_job(job, backend, out, &key, &profilers, shared).and_then(|scores| {
                        write_atomic(&done, evaluator::scores_to_jsonl(&scores).as_bytes())
                            .map_err(|e| format!("{key}: cannot write {}: {e}", done.display()))?;
                        // Written last: scores without it are never taken as finished, and
                        // it holds the scores' own hash, so a cut or edited scores file is
                        // scored again.
                        let stamp = fingerprint_path(out, &key);
                        let scores_sha = crate::manifest::sha256_file(&done)?;
                        let text = format!("{fingerprint}\n{scores_sha}\n");
                        write_atomic(&stamp, text.as_bytes())
                            .map_err(|e| format!("{key}: cannot write {}: {e}", stamp.display()))?;
                        Ok(scores)
                    }),
                };
                match outcome {
                    Ok(scores) => results.lock().unwrap().extend(scores),
                    Err(e) => failures.lock().unwrap().push(e),
                }
                bar.inc(1);
            });
        }
    });
    bar.finish_and_clear();
    let scores = results.into_inner().unwrap();
    crate::costs::take_costs(args.costs.as_deref(), corpus.as_deref(), out)?;
    let report = evaluator::write_results(out, &scores).map_err(crate::commands::eval_failure)?;
    let replayed: Vec<&Path> = corpus
        .iter()
        .chain(&kineto_corpus)
        .map(|p| p.as_path())
        .collect();
    crate::torch::completeness_section(&replayed, out)?;
    let track = crate::track::in_run(
        out,
        backend.name(),
        record,
        corpus.as_deref(),
        args.megakernel_reps,
        shard,
    )?;
    crate::manifest::mark_leaderboard(out)?;
    crate::commands::write_site(out, &out.join("html"), &report.leaderboard)?;
    if !args.quiet {
        println!("{}", report.leaderboard.summary(out));
        if let Some(rows) = &track {
            println!("{}", crate::track::section(rows));
        }
    }
    let keys: Vec<String> = jobs.iter().map(|j| j.key(backend.name())).collect();
    eprintln!("causalbench: {}", label_summary(out, &keys)?);
    let resumed = resumed.into_inner();
    eprintln!(
        "causalbench: {} bundles ({} resumed), {} case scores in {:.1} s; results in {}",
        jobs.len(),
        resumed,
        scores.len(),
        started.elapsed().as_secs_f64(),
        out.display()
    );
    let failures = failures.into_inner().unwrap();
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

/// Whether `path` is `dir` or lies below it (compared as canonical paths, so `..` and
/// links cannot hide it; a path that does not exist yet is judged by its parent).
fn inside(path: &Path, dir: &Path) -> bool {
    let canonical = |p: &Path| {
        p.canonicalize().ok().or_else(|| {
            let parent = p.parent()?;
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            Some(parent.canonicalize().ok()?.join(p.file_name()?))
        })
    };
    match (canonical(path), dir.canonicalize().ok()) {
        (Some(p), Some(d)) => p.starts_with(d),
        _ => false,
    }
}

/// Bundle files of a corpus directory (`*.bundle.json`, gzip-compressed
/// `*.bundle.json.gz`), recursively, sorted, each with a key unique within the corpus:
/// its path below the directory without the bundle suffix, sub-directories joined by
/// `~`, and `-gz` on a compressed file whose uncompressed twin is there too. Links are
/// followed, but every directory and file is visited once (a link loop ends the walk of
/// that branch, and a file reached twice counts once).
fn corpus_files(dir: &Path) -> Result<Vec<(PathBuf, String)>, Failure> {
    let mut files = Vec::new();
    let mut seen_dirs = std::collections::HashSet::new();
    let mut seen_files = std::collections::HashSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(canonical) = d.canonicalize() else {
            continue;
        };
        if !seen_dirs.insert(canonical) {
            continue;
        }
        let entries = std::fs::read_dir(&d).map_err(|e| {
            Failure::input(format!(
                "{}: cannot read corpus directory: {e}",
                d.display()
            ))
        })?;
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if ground_truth::io::is_bundle_file(&p) {
                if p.canonicalize().is_ok_and(|c| seen_files.insert(c)) {
                    files.push(p);
                }
            }
        }
    }
    files.sort();
    let stem = |p: &Path| -> String {
        let relative = p
            .strip_prefix(dir)
            .unwrap_or(p)
            .to_string_lossy()
            .to_string();
        let relative = relative
            .strip_suffix(".gz")
            .unwrap_or(&relative)
            .trim_end_matches(".json")
            .to_string();
        relative.replace(std::path::MAIN_SEPARATOR, "~")
    };
    let plain: std::collections::HashSet<String> = files
        .iter()
        .filter(|p| !p.to_string_lossy().ends_with(".gz"))
        .map(|p| stem(p))
        .collect();
    Ok(files
        .into_iter()
        .map(|p| {
            let mut key = stem(&p);
            if p.to_string_lossy().ends_with(".gz") && plain.contains(&key) {
                key.push_str("-gz");
            }
            (p, key)
        })
        .collect())
}

/// Bundles recorded per batch on backends that record batches much cheaper
/// than single runs: large enough to spread the GPU's eBPF recorder attach and
/// drain, small enough that an interrupted run keeps most of what it recorded.
const RECORD_BATCH: usize = 32;

/// Records, batch by batch, the bundles of `jobs` that are neither scored nor
/// recorded yet, and writes each batch's bundles as it finishes; `run_job` then
/// finds them. Returns the recordings that failed, by job key.
fn record_in_batches(
    jobs: &[Job],
    fingerprints: &[Result<String, String>],
    backend: &dyn generator::Backend,
    out: &Path,
    manifest: &RunManifest,
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
    let bar = progress_bar(pending.len(), "bundles recorded on {msg}");
    bar.set_message(backend.name());
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    for batch in pending.chunks(RECORD_BATCH) {
        let items: Vec<(Scenario, u32)> = batch.iter().map(|(_, item)| item.clone()).collect();
        for ((key, _), recorded) in batch.iter().zip(backend.record_many(&items)) {
            let written = recorded
                .map_err(|e| format!("{key}: {e}"))
                .and_then(|b| write_bundle(out, key, &b, manifest));
            if let Err(e) = written {
                failures.insert(key.clone(), e);
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    failures
}

/// A progress bar of `len` bundles, `what` after the count.
fn progress_bar(len: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} {what}"
        ))
        .expect("valid template"),
    );
    bar
}

/// Where a bundle's scores are kept once it is finished.
/// The label check's verdict of a case (docs/scenario-space.md).
fn label_path(out: &Path, key: &str) -> PathBuf {
    out.join("cases").join(format!("{key}.label"))
}

/// The label check's verdicts over a run's cases: counted for the summary and
/// written to `labels.json` with the keys of the cases that lost their label.
fn label_summary(out: &Path, keys: &[String]) -> Result<String, Failure> {
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
        "labels checked against the truth: {} kept, {} relabelled none, {} dropped and {} indeterminate (not scored), {} not timing questions, {} recorded before the check{}",
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

fn scores_path(out: &Path, key: &str) -> PathBuf {
    out.join("cases").join(format!("{key}.jsonl"))
}

/// The scores of a bundle an earlier (or interrupted) run finished with the same
/// fingerprint, as they were written (a scores file cut at a line boundary parses, so its
/// hash, kept beside the fingerprint, decides).
fn finished_scores(out: &Path, key: &str, fingerprint: &str) -> Option<Vec<CaseScore>> {
    let stamp = std::fs::read_to_string(fingerprint_path(out, key)).ok()?;
    let mut lines = stamp.lines();
    if lines.next() != Some(fingerprint) {
        return None;
    }
    let path = scores_path(out, key);
    if lines.next() != crate::manifest::sha256_file(&path).ok().as_deref() {
        return None;
    }
    // Only a case no label holds for (dropped or indeterminate,
    // docs/scenario-space.md) finishes with no scores.
    let dropped = std::fs::read_to_string(label_path(out, key)).is_ok_and(|v| {
        ground_truth::graph::LabelVerdict::parse(v.trim()).is_some_and(|v| !v.is_scored())
    });
    evaluator::read_scores(&path)
        .ok()
        .filter(|scores| !scores.is_empty() || dropped)
}

/// Where a recorded bundle of the run is kept.
fn bundle_path(out: &Path, key: &str) -> PathBuf {
    out.join("bundles").join(format!("{key}.bundle.json"))
}

/// Writes a recorded bundle and hashes it into the manifest.
fn write_bundle(
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
fn recorded_bundle(
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

/// Records or replays one bundle, then views, profiles and scores it.
fn run_job(
    job: &Job,
    backend: &dyn generator::Backend,
    out: &Path,
    key: &str,
    profilers: &[String],
    shared: &Shared,
) -> Result<Vec<CaseScore>, String> {
    let bundle = match job {
        Job::Record {
            scenario,
            repetition,
        } => {
            // A bundle on disk is reused only when its bytes are the ones the harness hashed.
            let reusable = match recorded_bundle(out, key, backend, scenario, *repetition) {
                Some(b) => matches!(shared.manifest.verify(key)?, Known::Intact).then_some(b),
                None => None,
            };
            match reusable {
                Some(b) => b,
                None => {
                    let b = backend
                        .record(scenario, *repetition)
                        .map_err(|e| format!("{key}: {e}"))?;
                    write_bundle(out, key, &b, shared.manifest)?;
                    b
                }
            }
        }
        Job::Replay { path, .. } => {
            shared.manifest.verify(key)?;
            let b = Bundle::read(path).map_err(|e| e.to_string())?;
            shared.manifest.record(key, path)?;
            b
        }
    };
    // The label check's verdict (docs/scenario-space.md): kept for the run's
    // summary; a dropped or indeterminate case has no label that holds, so it
    // is not scored.
    let verdict = label_verdict(&bundle);
    if let Some(v) = verdict {
        let path = label_path(out, key);
        write_atomic(&path, v.as_str().as_bytes())
            .map_err(|e| format!("{key}: cannot write {}: {e}", path.display()))?;
    }
    if verdict.is_some_and(|v| !v.is_scored()) {
        return Ok(Vec::new());
    }
    // A replayed bundle's file: what was recorded beside it (a torch bundle's native
    // Kineto trace, read by `hta-critical-path`) lies next to it.
    let bundle_file = match job {
        Job::Replay { path, .. } => Some(path.as_path()),
        Job::Record { .. } => None,
    };
    let mut scores = Vec::new();
    // One view's cases: derived, written, explained by every profiler, scored.
    let one_view = |spec: ground_truth::view::ViewSpec| -> Result<Vec<CaseScore>, String> {
        let mut cases = Vec::new();
        let view = views::derive_with_key(&bundle, spec, shared.view_key).view;
        let label = spec.label();
        let vpath = out.join("views").join(key).join(format!("{label}.json"));
        view.write(&vpath)
            .map_err(|e| format!("{key}: cannot write {}: {e}", vpath.display()))?;
        for name in profilers {
            let Some(profiler) = baselines::profiler_for(name, &spec, bundle_file) else {
                continue;
            };
            let explanation = profiler.explain(&view);
            let epath = out
                .join("explanations")
                .join(key)
                .join(&label)
                .join(format!("{name}.json"));
            explanation
                .write(&epath)
                .map_err(|e| format!("{key}: cannot write {}: {e}", epath.display()))?;
            cases.push(evaluator::score_case(&bundle, &view, &explanation));
        }
        for external in shared
            .externals
            .profilers
            .iter()
            .filter(|_| shared.externals.reads_view(&spec))
        {
            let case = out.join("explanations").join(key).join(&label);
            let epath = case.join(format!("{}.json", external.name));
            let log = out
                .join("logs")
                .join(key)
                .join(&label)
                .join(format!("{}.stderr.log", external.name));
            let (explanation, invocation) = shared
                .externals
                .explain(external, &view, &vpath, &epath, log, out)
                .map_err(|e| format!("{key}: {label}: {e}"))?;
            explanation
                .write(&epath)
                .map_err(|e| format!("{key}: cannot write {}: {e}", epath.display()))?;
            // What the harness measured of the run goes beside its scores.
            let mut score = evaluator::score_case(&bundle, &view, &explanation);
            score.invocation = invocation;
            cases.push(score);
        }
        Ok(cases)
    };
    // The views of one bundle are independent: spread over the threads this
    // job may use (a run of few, large bundles would otherwise use one core).
    let specs = views::standard_specs_of(&bundle);
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<Vec<CaseScore>, String>>>> =
        specs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..shared.view_threads.clamp(1, specs.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(&spec) = specs.get(i) else { break };
                *results[i].lock().unwrap() = Some(one_view(spec));
            });
        }
    });
    for r in results {
        scores.extend(r.into_inner().unwrap().expect("every view ran")?);
    }
    Ok(scores)
}

#[cfg(test)]
mod tests {
    use super::*;
    use generator::sim::SimBackend;
    use generator::{Backend, RecordError};

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
        let failures =
            record_in_batches(&jobs, &unfinished(&jobs), &backend, dir.path(), &manifest);
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
        for job in &jobs {
            let key = job.key(backend.name());
            let scores = run_job(job, &backend, dir.path(), &key, &profilers, &shared).unwrap();
            assert!(!scores.is_empty(), "{key}");
        }
        // Every job found its recorded bundle: none was recorded again.
        assert_eq!(backend.singles.load(Ordering::SeqCst), 0);
        // A second pass (a resumed run) records nothing.
        assert!(
            record_in_batches(&jobs, &unfinished(&jobs), &backend, dir.path(), &manifest)
                .is_empty()
        );
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
        assert!(
            record_in_batches(&jobs, &unfinished(&jobs), &backend, dir.path(), &manifest)
                .is_empty()
        );
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
        let failures =
            record_in_batches(&jobs, &unfinished(&jobs), &backend, dir.path(), &manifest);
        let failed_key = jobs[1].key(backend.name());
        assert_eq!(failures.keys().collect::<Vec<_>>(), vec![&failed_key]);
        assert!(bundle_path(dir.path(), &jobs[0].key(backend.name())).is_file());
    }
}
