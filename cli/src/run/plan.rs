//! The run's plan: which profilers, which backend, which inputs (a suite recorded,
//! a corpus replayed) and the units of work (jobs) they make.

use crate::manifest::RunManifest;
use crate::{BackendArg, Failure};
use ground_truth::Scenario;
use std::path::{Path, PathBuf};

use super::args::RunArgs;

/// Resolves `--profilers` to names, in the order given, each once.
pub(super) fn profiler_names(arg: &str) -> Result<Vec<String>, Failure> {
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
pub(super) fn note_missing_adapters(arg: &str) {
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

pub(super) enum Job {
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
    pub(super) fn key(&self, backend: &str) -> String {
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

/// What a run reads: the backend it records on, the suite it records (when it records)
/// and the corpora it replays.
pub(super) struct Inputs {
    pub backend: Box<dyn generator::Backend>,
    /// Whether the suite is recorded (an explicit corpus alone means "replay it").
    pub record: bool,
    pub suite: String,
    pub corpus: Option<PathBuf>,
    /// The PyTorch track's corpus, replayed beside the shipped one by the default run.
    pub kineto_corpus: Option<PathBuf>,
}

/// Decides the backend and the corpora of a run, and refuses an output directory
/// inside a replayed corpus.
pub(super) fn inputs(args: &RunArgs) -> Result<Inputs, Failure> {
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
    Ok(Inputs {
        backend,
        record,
        suite,
        corpus,
        kineto_corpus,
    })
}

/// The run's jobs: the suite's scenarios × repetitions (its split's seed kept in the
/// manifest), then the corpora's bundles, restricted to the run's shard.
pub(super) fn jobs(
    args: &RunArgs,
    inputs: &Inputs,
    manifest: &RunManifest,
) -> Result<Vec<Job>, Failure> {
    let Inputs {
        backend,
        record,
        suite,
        corpus,
        kineto_corpus,
    } = inputs;
    let mut jobs = Vec::new();
    if *record {
        let cases = args.cases.map(|c| c as usize);
        // A test split resumed into the same directory keeps the seed it drew.
        let earlier = manifest
            .split()
            .filter(|r| r.split == *suite && cases.is_none_or(|c| c == r.cases))
            .map(|r| r.seed);
        let scenarios = match crate::catalog::split_draw(suite, cases, args.split_seed.or(earlier))
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
            None => crate::catalog::load_suite(suite, None)?,
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
    if let Some(dir) = corpus {
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
    if let Some(dir) = kineto_corpus {
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
    Ok(jobs)
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
pub(super) fn corpus_files(dir: &Path) -> Result<Vec<(PathBuf, String)>, Failure> {
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
