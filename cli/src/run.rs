//! `causalbench run`: the whole benchmark in one command. Each bundle is one
//! unit of work (record or replay → standard views → every built-in profiler →
//! scores); its scores land atomically in `cases/`, so a rerun into the same
//! directory resumes where an interrupted one stopped.

use crate::commands::backend_kind;
use crate::{BackendArg, Failure};
use evaluator::CaseScore;
use ground_truth::io::{write_atomic, Readable};
use ground_truth::{Bundle, Scenario};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// `causalbench run`'s options.
#[derive(clap::Args)]
pub struct RunArgs {
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// `catalog` (the embedded suite, the default) or a directory of scenario files.
    #[arg(long)]
    pub suite: Option<String>,
    /// Replay the bundles (`*.bundle.json`, `*.bundle.json.gz`) of a recorded corpus directory. Alone it
    /// replaces recording; with `--suite` it comes in addition. Without either, `auto`
    /// on a machine without a GPU records the catalog on the simulator and replays
    /// the shipped corpus (results/corpus).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
    /// Repetitions per scenario (default: each scenario's own `repetitions`).
    #[arg(long)]
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
    /// Profilers to run: `builtin` (default), `all` (the built-in ones plus optional
    /// adapters such as `hta-critical-path` when their tool is installed; HTA costs
    /// 1–2 s per view, hours over the whole default suite), or a comma list.
    #[arg(long, default_value = "builtin")]
    pub profilers: String,
}

/// Resolves `--profilers` to names, built-in ones first.
fn profiler_names(arg: &str) -> Result<Vec<String>, Failure> {
    let builtin = baselines::builtin_names().iter().map(|s| s.to_string());
    let optional = baselines::optional_names()
        .into_iter()
        .map(|s| s.to_string());
    match arg {
        "all" => Ok(builtin.chain(optional).collect()),
        "builtin" => Ok(builtin.collect()),
        list => list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| {
                baselines::builtin(n).map(|_| n.to_string()).ok_or_else(|| {
                    Failure::input(format!(
                        "--profilers: no profiler named `{n}` (known: {}, {})",
                        baselines::builtin_names().join(", "),
                        baselines::optional_names().join(", ")
                    ))
                })
            })
            .collect(),
    }
}

/// Where the shipped corpus lives, relative to the working directory.
pub const SHIPPED_CORPUS: &str = "results/corpus";

enum Job {
    Record { scenario: Scenario, repetition: u32 },
    Replay { path: PathBuf },
}

impl Job {
    /// File-name-safe key of the unit of work.
    fn key(&self, backend: &str) -> String {
        match self {
            Job::Record {
                scenario,
                repetition,
            } => format!("{backend}-{}.r{repetition}", scenario.name),
            Job::Replay { path } => format!(
                "corpus-{}",
                path.file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .trim_end_matches(".json")
            ),
        }
    }
}

pub fn run(args: RunArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let profilers = profiler_names(&args.profilers)?;
    let mut jobs = Vec::new();
    let mut corpus = args.corpus.clone();
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
            generator::select_backend(generator::BackendKind::Sim).map_err(Failure::failed)?
        }
        b => generator::select_backend(backend_kind(b)).map_err(Failure::failed)?,
    };
    if record {
        for mut sc in crate::catalog::load_suite(&suite)? {
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
        for path in corpus_files(dir)? {
            jobs.push(Job::Replay { path });
        }
    }
    let out = &args.out;
    std::fs::create_dir_all(out.join("cases"))
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", out.display())))?;
    let bar = ProgressBar::new(jobs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} bundles {msg}",
        )
        .expect("valid template"),
    );
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<CaseScore>> = Mutex::new(Vec::new());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let resumed = AtomicUsize::new(0);
    let workers = args
        .jobs
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1);
    let backend = &*backend;
    std::thread::scope(|s| {
        for _ in 0..workers.min(jobs.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { break };
                let key = job.key(backend.name());
                bar.set_message(key.clone());
                let done = out.join("cases").join(format!("{key}.jsonl"));
                let outcome = match evaluator::read_scores(&done) {
                    Ok(scores) if !scores.is_empty() => {
                        resumed.fetch_add(1, Ordering::SeqCst);
                        Ok(scores)
                    }
                    _ => run_job(job, backend, out, &key, &profilers).and_then(|scores| {
                        write_atomic(&done, evaluator::scores_to_jsonl(&scores).as_bytes())
                            .map_err(|e| format!("{key}: cannot write {}: {e}", done.display()))?;
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
    let report = evaluator::write_results(out, &scores).map_err(crate::commands::eval_failure)?;
    if !args.quiet {
        println!("{}", report.leaderboard.to_markdown());
    }
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

/// Bundle files of a corpus directory (`*.bundle.json`, gzip-compressed `*.bundle.json.gz`), recursively, sorted.
fn corpus_files(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
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
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Records or replays one bundle, then views, profiles and scores it.
fn run_job(
    job: &Job,
    backend: &dyn generator::Backend,
    out: &Path,
    key: &str,
    profilers: &[String],
) -> Result<Vec<CaseScore>, String> {
    let bundle = match job {
        Job::Record {
            scenario,
            repetition,
        } => {
            let b = backend
                .record(scenario, *repetition)
                .map_err(|e| format!("{key}: {e}"))?;
            let path = out.join("bundles").join(format!("{key}.bundle.json"));
            b.write(&path)
                .map_err(|e| format!("{key}: cannot write {}: {e}", path.display()))?;
            b
        }
        Job::Replay { path } => Bundle::read(path).map_err(|e| e.to_string())?,
    };
    let mut scores = Vec::new();
    for spec in views::standard_specs(bundle.manifest.seed) {
        let view = views::derive(&bundle, spec).view;
        let label = spec.label();
        let vpath = out.join("views").join(key).join(format!("{label}.json"));
        view.write(&vpath)
            .map_err(|e| format!("{key}: cannot write {}: {e}", vpath.display()))?;
        for name in profilers.iter().filter(|n| baselines::reads_view(n, &spec)) {
            let profiler = baselines::builtin(name).expect("listed profiler exists");
            let explanation = profiler.explain(&view);
            let epath = out
                .join("explanations")
                .join(key)
                .join(&label)
                .join(format!("{name}.json"));
            explanation
                .write(&epath)
                .map_err(|e| format!("{key}: cannot write {}: {e}", epath.display()))?;
            scores.push(evaluator::score_case(&bundle, &view, &explanation));
        }
    }
    Ok(scores)
}
