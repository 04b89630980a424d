//! `causalbench submit` and `causalbench check`: a leaderboard entry as one folder
//! (baselines/PROTOCOL.md, "Getting onto the leaderboard").
//!
//! `submit` is `run` with only the entry's command, on a published split, into the
//! entry's folder, plus `metadata.json` (ground_truth::submission). `check` trusts
//! nothing in the folder but its explanations: it re-derives every view from the
//! bundles the metadata names (each verified by hash and against the split), checks
//! each explanation against its view, re-scores them and compares with the submitted
//! scores; `--rerun` runs the command again and records whether it reproduced them.

use crate::entry::{entry_file, mark_public, material, tempdir};
use crate::external::Externals;
use crate::manifest::{sha256_file, Manifest, VIEW_KEY_FILE};
use crate::run::{label_verdict, record_key, RunArgs};
use crate::{BackendArg, CollectorsArg, Failure};
use evaluator::CaseScore;
use ground_truth::io::write_atomic;
use ground_truth::submission::{
    BundleFile, Machine, Reproduction, SplitDraw, Submission, METADATA_FILE, REPRODUCTION_FILE,
    SUBMISSION_SCHEMA_VERSION,
};
use ground_truth::{Bundle, Collectors, Explanation, Readable, ViewSpec};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `causalbench submit`'s options.
#[derive(clap::Args)]
pub struct SubmitArgs {
    /// The entry's profiler, `NAME=CMD` (CMD names `{view}` and `{out}`, baselines/PROTOCOL.md).
    #[arg(long, value_name = "NAME=CMD")]
    pub profiler: String,
    /// The entry's folder (created; a rerun into it resumes).
    #[arg(long)]
    pub out: PathBuf,
    /// The published split: `dev` (fixed seed) or `test` (`--split-seed`, else a fresh one).
    #[arg(long, default_value = "dev", value_parser = ["dev", "test"])]
    pub suite: String,
    /// Scenarios of the split (whole family instances; default 300).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub cases: Option<u64>,
    /// The test split's seed, to reproduce an entry (recorded in metadata.json).
    #[arg(long)]
    pub split_seed: Option<u64>,
    /// Repetitions per scenario (default: each scenario's own).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(ground_truth::scenario::MAX_REPETITIONS)))]
    pub reps: Option<u32>,
    /// The profiler's own version, recorded in metadata.json.
    #[arg(long, default_value = "unversioned")]
    pub profiler_version: String,
    /// Collectors whose views the profiler needs, comma-separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub collectors: Vec<CollectorsArg>,
    /// Backend that records the split (`sim`: deterministic, what `check` compares against).
    #[arg(long, value_enum, default_value = "sim")]
    pub backend: BackendArg,
    /// Worker threads (default: available cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// On a kernel without Landlock, run the command unisolated (recorded in metadata.json).
    #[arg(long)]
    pub allow_unisolated: bool,
    /// Show no progress (without it: a bar on a terminal, one line per stage in a log).
    #[arg(long)]
    pub quiet: bool,
    /// Wall-clock limit of one run of the command on one view, in seconds.
    #[arg(long, default_value_t = 300)]
    pub profiler_timeout: u64,
}

/// `causalbench check`'s options.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// The entry's folder, as `submit` wrote it.
    pub dir: PathBuf,
    /// Run the entry's command again on every view and mark the entry reproduced
    /// (`reproduction.json`) when every explanation is the same.
    #[arg(long)]
    pub rerun: bool,
    /// With `--rerun`, on a kernel without Landlock: run the command unisolated.
    #[arg(long, requires = "rerun")]
    pub allow_unisolated: bool,
    /// Show no progress (without it: a bar on a terminal, one line per stage in a log).
    #[arg(long)]
    pub quiet: bool,
    /// With `--rerun`: wall-clock limit of one run of the command on one view, in seconds.
    #[arg(long, default_value_t = 300, requires = "rerun")]
    pub profiler_timeout: u64,
}

fn collectors_of(args: &[CollectorsArg]) -> Vec<Collectors> {
    let mut out: Vec<Collectors> = args
        .iter()
        .map(|c| match c {
            CollectorsArg::Cupti => Collectors::Cupti,
            CollectorsArg::Host => Collectors::Host,
            CollectorsArg::Combined => Collectors::Combined,
            CollectorsArg::Kineto => Collectors::Kineto,
            CollectorsArg::KinetoHost => Collectors::KinetoHost,
        })
        .collect();
    if out.is_empty() {
        out = Collectors::ALL.to_vec();
    }
    out.sort_by_key(|c| c.as_str());
    out.dedup();
    out
}

/// The labels of the standard views of these collectors, in the standard order.
fn view_labels(collectors: &[Collectors]) -> Vec<String> {
    views::standard_specs(0)
        .into_iter()
        .filter(|s| collectors.contains(&s.collectors))
        .map(|s| s.label())
        .collect()
}

/// The machine this runs on, as far as the process can tell without privileges.
pub fn machine() -> Machine {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu_model = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    Machine {
        hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
        os: std::env::consts::OS.to_string(),
        arch: std::env::consts::ARCH.to_string(),
        cpu_model,
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
    }
}

pub fn submit(args: SubmitArgs) -> Result<(), Failure> {
    let collectors = collectors_of(&args.collectors);
    let mut externals = Externals::new(
        std::slice::from_ref(&args.profiler),
        args.allow_unisolated,
        Duration::from_secs(args.profiler_timeout),
    )?;
    externals.collectors = collectors.clone();
    let profiler = externals.profilers[0].clone();
    // A split an earlier run into this folder drew is material the submitter has seen:
    // drawn again from the same seed, as given, so that its rows are marked public.
    let earlier = Manifest::read(&args.out)?.split;
    let drawn_before = earlier.is_some();
    let split_seed = args.split_seed.or(earlier
        .filter(|s| s.split == args.suite && args.cases.is_none_or(|c| c as usize == s.cases))
        .map(|s| s.seed));
    let run = RunArgs {
        backend: args.backend,
        suite: Some(args.suite.clone()),
        cases: args.cases,
        split_seed,
        corpus: None,
        out: args.out.clone(),
        reps: args.reps,
        seed: None,
        jobs: args.jobs,
        quiet: true,
        profilers: "none".into(),
        megakernel_reps: 0,
        external: vec![args.profiler.clone()],
        allow_unisolated: args.allow_unisolated,
        profiler_timeout: args.profiler_timeout,
        // `externals` holds the views it is run on (its collectors, above).
        collectors: Vec::new(),
        modes: Vec::new(),
        progress: Some(crate::progress::Report::choose(args.quiet)),
        costs: None,
        shard: None,
    };
    // A run with failed cases still leaves an entry to look at; `check` rejects it.
    let ran = crate::run::run_with(run, externals);
    if matches!(&ran, Err(f) if f.code == 2) {
        return ran;
    }
    let manifest = Manifest::read(&args.out)?;
    let split = manifest.split.clone().ok_or_else(|| {
        Failure::failed(format!(
            "{}: the run recorded no split",
            args.out.join(crate::manifest::MANIFEST_FILE).display()
        ))
    })?;
    let backend = match args.backend {
        BackendArg::Sim => "sim",
        BackendArg::Cuda => "cuda",
        BackendArg::Auto if generator::backend::gpu_present() => "cuda",
        BackendArg::Auto => "sim",
    }
    .to_string();
    let metadata = Submission {
        schema_version: SUBMISSION_SCHEMA_VERSION,
        name: profiler.name.clone(),
        version: args.profiler_version.clone(),
        command: profiler.template.clone(),
        views: view_labels(&collectors),
        collectors,
        machine: machine(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        isolation: manifest.isolation.clone().unwrap_or_default(),
        backend,
        split: SplitDraw {
            public: split.split != "test" || args.split_seed.is_some() || drawn_before,
            split: split.split,
            seed: split.seed,
            cases: split.cases,
        },
        reps: args.reps,
        bundles: manifest
            .bundles
            .iter()
            .map(|(key, h)| {
                (
                    key.clone(),
                    BundleFile {
                        path: h.path.clone(),
                        sha256: h.sha256.clone(),
                    },
                )
            })
            .collect(),
    };
    let path = args.out.join(METADATA_FILE);
    write_json(&path, &metadata)?;
    mark_public(&args.out, &metadata.split)?;
    if ran.is_ok() {
        // The built-in rows of the same split beside the entry's (cli/src/submit_beside.rs).
        crate::submit_beside::score_builtins(&args.out, args.jobs)?;
        if let Some(leaderboard) = crate::submit_beside::with_builtins(&args.out)? {
            crate::commands::write_site(&args.out, &args.out.join("html"), &leaderboard)?;
        }
    }
    eprintln!(
        "causalbench: submission `{}` in {} ({} bundles, {}); verify it with `causalbench check {}`",
        metadata.name,
        args.out.display(),
        metadata.bundles.len(),
        material(&metadata.split),
        args.out.display()
    );
    ran
}

/// Marks the cases a run recorded from a hidden split ([`CaseScore::hidden`],
/// baselines/PROTOCOL.md "Hidden splits"): the `test` split when its seed was drawn by
/// the harness (`split_seed` not given), each case one of the run's `recorded`
/// scenario repetitions on `backend`. Everything else (the catalog, the dev split, a
/// corpus, a split whose seed was given) is public material.
pub fn mark_hidden<'a>(
    scores: &mut [CaseScore],
    suite: &str,
    split_seed: Option<u64>,
    recorded: impl IntoIterator<Item = (&'a str, u32)>,
    backend: &str,
) {
    let drawn = matches!(
        scenario_space::Split::parse(suite),
        Some(scenario_space::Split::Test)
    ) && split_seed.is_none();
    let recorded: BTreeSet<(&str, u32)> = recorded.into_iter().collect();
    for score in scores {
        score.hidden = drawn
            && score.backend == backend
            && recorded.contains(&(score.scenario.as_str(), score.repetition));
    }
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value).expect("submission formats serialize") + "\n";
    write_atomic(path, text.as_bytes())
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
}

/// Why a submission is refused: bad input, exit 2.
fn reject(dir: &Path, why: impl std::fmt::Display) -> Failure {
    Failure::input(format!("check {}: REJECTED: {why}", dir.display()))
}

/// One explained view of the entry: its bundle (an index into the verified bundles),
/// the view's spec and where its explanation is.
struct Explained {
    bundle: usize,
    spec: ViewSpec,
    explanation: PathBuf,
}

pub fn check(args: CheckArgs) -> Result<(), Failure> {
    let dir = &args.dir;
    let metadata = entry_file(dir, METADATA_FILE, SMALL_FILE).map_err(|why| reject(dir, why))?;
    let metadata = Submission::read(&metadata).map_err(|e| reject(dir, e))?;
    if let Some(problem) = ground_truth::identifier::identifier_problem(&metadata.name) {
        return Err(reject(dir, format!("{METADATA_FILE}: name: {problem}")));
    }
    let key_path = entry_file(dir, VIEW_KEY_FILE, SMALL_FILE).map_err(|why| reject(dir, why))?;
    let view_key = std::fs::read_to_string(&key_path)
        .map_err(|e| e.to_string())
        .and_then(|text| views::ViewKey::from_hex(&text))
        .map_err(|e| reject(dir, format!("{}: {e}", key_path.display())))?;
    let bundles = verified_bundles(dir, &metadata)?;
    let mut explained = Vec::new();
    let mut scores: Vec<CaseScore> = Vec::new();
    for (index, (key, bundle)) in bundles.iter().enumerate() {
        if label_verdict(bundle).is_some_and(|v| !v.is_scored()) {
            continue;
        }
        for spec in views::standard_specs_of(bundle) {
            let label = spec.label();
            if !metadata.views.contains(&label) {
                continue;
            }
            let view = views::derive_with_key(bundle, spec, &view_key).view;
            let relative = Path::new("explanations")
                .join(key)
                .join(&label)
                .join(format!("{}.json", metadata.name));
            let path = entry_file(dir, &relative, baselines::external::DEFAULT_MAX_OUTPUT)
                .map_err(|why| match why.strip_prefix("no file at ") {
                    Some(at) => reject(dir, format!("{key}: {label}: no explanation at {at}")),
                    None => reject(dir, format!("{key}: {label}: {why}")),
                })?;
            // The limit `run` holds an explanation to, for its decompressed size too.
            let limits = ground_truth::io::InputLimits::DEFAULT
                .at_most(baselines::external::DEFAULT_MAX_OUTPUT);
            let explanation = Explanation::read_within(&path, &limits)
                .map_err(|e| reject(dir, format!("{key}: {e}")))?;
            explanation
                .check_against(&path, &view)
                .map_err(|e| reject(dir, format!("{key}: {e}")))?;
            if explanation.meta.profiler != metadata.name {
                return Err(reject(
                    dir,
                    format!(
                        "{}: meta.profiler is `{}`, the entry is `{}`",
                        path.display(),
                        explanation.meta.profiler,
                        metadata.name
                    ),
                ));
            }
            let mut score = evaluator::score_case(bundle, &view, &explanation);
            // As `run` marked it (mark_hidden): the entry's one split, as stated.
            score.hidden = !metadata.split.public;
            scores.push(score);
            explained.push(Explained {
                bundle: index,
                spec,
                explanation: path,
            });
        }
    }
    let expected: BTreeSet<&Path> = explained.iter().map(|e| e.explanation.as_path()).collect();
    if let Some(foreign) = foreign_file(&dir.join("explanations"), &expected) {
        return Err(reject(
            dir,
            format!(
                "{}: not an explanation of `{}` on one of its views (baselines/PROTOCOL.md: \
                 a foreign explanation)",
                foreign.display(),
                metadata.name
            ),
        ));
    }
    compare_scores(dir, &metadata, &scores)?;
    // What the entry shows must be what its scores give (written, then read back).
    let written = entry_file(dir, evaluator::SCORES_FILE, SMALL_FILE)
        .map_err(|why| reject(dir, why))
        .and_then(|path| evaluator::read_scores(&path).map_err(|e| reject(dir, e)))?;
    let published =
        crate::published::verify(dir, &written, &metadata.split, |why| reject(dir, why))?;
    outln!(
        "check {}: accepted `{}` {}: {} bundles verified by hash, {} explanations re-scored, \
         scores match, {published} published files regenerated and the same; {}",
        dir.display(),
        metadata.name,
        metadata.version,
        bundles.len(),
        explained.len(),
        if metadata.split.public {
            material(&metadata.split)
        } else {
            // The folder is the submitter's: only a maintainer's own `submit` run makes
            // a split hidden (baselines/PROTOCOL.md, "Hidden splits").
            format!("{}, as {METADATA_FILE} states", material(&metadata.split))
        }
    );
    // What no file of the folder can prove (baselines/PROTOCOL.md, "Getting onto the
    // leaderboard"): shown as the submitter's statement.
    outln!(
        "check {}: stated by the submitter, not verified: machine `{}` ({} CPUs, {}), \
         isolation `{}`, causalbench {}, and each case's measured `invocation`",
        dir.display(),
        metadata.machine.hostname,
        metadata.machine.cpus,
        metadata.machine.cpu_model,
        metadata.isolation,
        metadata.tool_version
    );
    if args.rerun {
        return rerun(&args, &metadata, &view_key, &bundles, &explained);
    }
    if dir.join(REPRODUCTION_FILE).exists() {
        let counted = crate::reproduction::reproduction_of(dir)?.is_some();
        outln!(
            "check {}: {REPRODUCTION_FILE} {}: only `check --rerun` verifies that the command \
             reproduces the explanations",
            dir.display(),
            if counted {
                "describes these explanations, as the submitter's statement"
            } else {
                "is IGNORED (it describes other explanations, or `check --rerun` never wrote \
                 it) and shown nowhere"
            }
        );
    }
    Ok(())
}

/// The bundles the metadata names, each read only after its bytes matched the recorded
/// hash, and all together exactly the split's scenarios and repetitions.
fn verified_bundles(dir: &Path, metadata: &Submission) -> Result<Vec<(String, Bundle)>, Failure> {
    let split = scenario_space::Split::parse(&metadata.split.split).ok_or_else(|| {
        reject(
            dir,
            format!(
                "{METADATA_FILE}: split `{}` is not a published split (dev, test)",
                metadata.split.split
            ),
        )
    })?;
    let mut expected = BTreeMap::new();
    for scenario in scenario_space::generate(split, metadata.split.seed, metadata.split.cases) {
        for repetition in 0..metadata.reps.unwrap_or(scenario.repetitions) {
            let key = record_key(&metadata.backend, &scenario.name, repetition);
            expected.insert(key, (scenario.clone(), repetition));
        }
    }
    let named: BTreeSet<&String> = metadata.bundles.keys().collect();
    if let Some(key) = expected.keys().find(|k| !named.contains(k)) {
        return Err(reject(
            dir,
            format!(
                "the {} split (seed {}) has bundle {key}, which {METADATA_FILE} does not name",
                metadata.split.split, metadata.split.seed
            ),
        ));
    }
    let mut out = Vec::new();
    for (key, file) in &metadata.bundles {
        let Some((scenario, repetition)) = expected.get(key) else {
            return Err(reject(
                dir,
                format!(
                    "{METADATA_FILE} names bundle {key}, which is not part of the {} split (seed {})",
                    metadata.split.split, metadata.split.seed
                ),
            ));
        };
        let path = entry_file(
            dir,
            Path::new(&file.path),
            ground_truth::io::InputLimits::DEFAULT.max_bytes,
        )
        .map_err(|why| reject(dir, format!("{key}: {why}")))?;
        let sha256 = sha256_file(&path).map_err(|e| reject(dir, e))?;
        if sha256 != file.sha256 {
            return Err(reject(
                dir,
                format!(
                    "{key}: {} does not have the bytes {METADATA_FILE} names (sha256 {}, found {sha256}): \
                     the bundle was swapped or edited",
                    path.display(),
                    file.sha256
                ),
            ));
        }
        let bundle = Bundle::read(&path).map_err(|e| reject(dir, e))?;
        let m = &bundle.manifest;
        if m.scenario != *scenario || m.repetition != *repetition || m.backend != metadata.backend {
            return Err(reject(
                dir,
                format!(
                    "{key}: {} is not a {} recording of the split's scenario `{}` repetition {repetition}",
                    path.display(),
                    metadata.backend,
                    scenario.name
                ),
            ));
        }
        if let Some(problem) = impossible_device_time(&bundle) {
            return Err(reject(dir, format!("{key}: {}: {problem}", path.display())));
        }
        out.push((key.clone(), bundle));
    }
    Ok(out)
}

/// Largest metadata, view key, scores or leaderboard file `check` reads.
const SMALL_FILE: u64 = 1 << 30;

/// The first thing under `explanations` that is not one of the `expected` files (each
/// a directory on the way to one, or the file itself): another file, a link, a FIFO.
fn foreign_file(explanations: &Path, expected: &BTreeSet<&Path>) -> Option<PathBuf> {
    let mut stack = vec![explanations.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Some(dir);
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() && expected.iter().any(|e| e.starts_with(&path)) => {
                    stack.push(path)
                }
                Ok(t) if t.is_file() && expected.contains(path.as_path()) => {}
                _ => return Some(path),
            }
        }
    }
    None
}

/// A device activity no clock can have recorded: ending before it started, or at the
/// largest timestamp (an overflow a profiler's arithmetic would trip on).
fn impossible_device_time(bundle: &Bundle) -> Option<String> {
    bundle.trace.iter().find_map(|r| {
        let (queued, submitted, start, end) = r.device_times()?;
        let rid = r.rid();
        if [queued, submitted, start, end].contains(&u64::MAX) {
            Some(format!("record {rid} has a device time of 2^64-1"))
        } else if start > 0 && end > 0 && end < start {
            Some(format!(
                "record {rid} ends ({end}) before it starts ({start})"
            ))
        } else {
            None
        }
    })
}

/// Compares the re-scored cases with `scores.jsonl`, and `leaderboard.json` with the
/// leaderboard of those scores. Scores are compared as the JSON they are written as, so
/// a number that went through the file compares equal to itself.
fn compare_scores(
    dir: &Path,
    metadata: &Submission,
    rescored: &[CaseScore],
) -> Result<(), Failure> {
    let path =
        entry_file(dir, evaluator::SCORES_FILE, SMALL_FILE).map_err(|why| reject(dir, why))?;
    // Read (and validated) as scores, compared as the JSON of each line.
    let submitted = evaluator::read_scores(&path).map_err(|e| reject(dir, e))?;
    let text = std::fs::read_to_string(&path)
        .map_err(|e| reject(dir, format!("cannot read {}: {e}", path.display())))?;
    let sort_key = |v: &serde_json::Value| -> Vec<String> {
        ["bundle", "backend", "profiler", "view"]
            .iter()
            .map(|k| v[*k].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let mut written: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| reject(dir, format!("{}: {e}", path.display())))?;
    // What the submitter's harness measured of each run cannot be derived from the
    // explanations: the submitter's statement, not compared (`check --rerun` runs again).
    for line in &mut written {
        if let Some(score) = line.as_object_mut() {
            score.remove("invocation");
        }
    }
    written.sort_by_key(sort_key);
    let mut fresh: Vec<serde_json::Value> = rescored
        .iter()
        .map(|score| {
            let line = serde_json::to_string(score).expect("scores serialize");
            serde_json::from_str(&line).expect("a written score parses")
        })
        .collect();
    fresh.sort_by_key(sort_key);
    let version_note = if metadata.tool_version == env!("CARGO_PKG_VERSION") {
        String::new()
    } else {
        format!(
            " (scored by causalbench {}, checked by {})",
            metadata.tool_version,
            env!("CARGO_PKG_VERSION")
        )
    };
    if written.len() != fresh.len() {
        return Err(reject(
            dir,
            format!(
                "{}: has {} case scores, its explanations give {}{version_note}",
                path.display(),
                written.len(),
                fresh.len()
            ),
        ));
    }
    for (old, new) in written.iter().zip(&fresh) {
        if let Some(field) = first_difference(old, new, "") {
            return Err(reject(
                dir,
                format!(
                    "{}: the score of {} {} differs from its explanation's at `{field}`{version_note}",
                    path.display(),
                    new["bundle"].as_str().unwrap_or_default(),
                    new["view"].as_str().unwrap_or_default()
                ),
            ));
        }
    }
    let board =
        entry_file(dir, evaluator::LEADERBOARD_JSON, SMALL_FILE).map_err(|why| reject(dir, why))?;
    let written = std::fs::read_to_string(&board)
        .map_err(|e| reject(dir, format!("cannot read {}: {e}", board.display())))?;
    if written != evaluator::Leaderboard::from_scores(&submitted).to_json() {
        return Err(reject(
            dir,
            format!(
                "{} is not the leaderboard of its case scores{version_note}",
                board.display()
            ),
        ));
    }
    Ok(())
}

/// The JSON path of the first place two values differ.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, at: &str) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(p), Some(q)) => first_difference(p, q, &format!("{at}.{k}")),
                _ => Some(format!("{at}.{k}")),
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{at}[{i}]"))),
        _ => (a != b).then(|| at.to_string()),
    }
}

/// Runs the entry's command again on every view and records whether it wrote the same
/// explanations (`meta.wall_ms` aside) in `reproduction.json`.
fn rerun(
    args: &CheckArgs,
    metadata: &Submission,
    view_key: &views::ViewKey,
    bundles: &[(String, Bundle)],
    explained: &[Explained],
) -> Result<(), Failure> {
    let dir = &args.dir;
    let externals = Externals::new(
        &[format!("{}={}", metadata.name, metadata.command)],
        args.allow_unisolated,
        Duration::from_secs(args.profiler_timeout),
    )?;
    let profiler = &externals.profilers[0];
    let scratch = tempdir()?;
    let mut first_difference = None;
    let progress = crate::progress::Stage::start(
        crate::progress::Report::choose(args.quiet),
        explained.len(),
        "views explained again",
    );
    for (i, case) in explained.iter().enumerate() {
        progress.set_item(case.spec.label());
        let (key, bundle) = &bundles[case.bundle];
        let view = views::derive_with_key(bundle, case.spec, view_key).view;
        let view_path = scratch.join(format!("{i}.view.json"));
        view.write(&view_path)
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", view_path.display())))?;
        let again = externals.explain(
            profiler,
            &view,
            &view_path,
            &scratch.join(format!("{i}.explanation.json")),
            scratch.join(format!("{i}.stderr.log")),
            dir,
            externals.lane_of(bundle),
        );
        progress.viewed(&profiler.name);
        progress.inc();
        let submitted = Explanation::read(&case.explanation)?;
        let same = match &again {
            Ok((x, _)) => without_time(x) == without_time(&submitted),
            Err(_) => false,
        };
        if !same {
            first_difference = Some(match again {
                Ok(_) => format!(
                    "{key}: {}: the command wrote another explanation",
                    case.explanation.display()
                ),
                Err(e) => format!("{key}: {}: {e}", case.spec.label()),
            });
            break;
        }
    }
    progress.finish();
    let _ = std::fs::remove_dir_all(&scratch);
    let reproduction = Reproduction {
        schema_version: SUBMISSION_SCHEMA_VERSION,
        reproduced: first_difference.is_none(),
        compared: explained.len(),
        first_difference: first_difference.clone(),
        machine: machine(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        explanations_sha256: crate::reproduction::explanations_sha256(dir),
    };
    write_json(&dir.join(REPRODUCTION_FILE), &reproduction)?;
    // The entry's site shows the reproduction from now on (as check regenerates it).
    let mut scores = evaluator::read_scores(&dir.join(evaluator::SCORES_FILE))?;
    if let Some(builtin) = crate::submit_beside::builtin_scores(dir)? {
        scores.extend(builtin);
    }
    crate::site::write(
        dir,
        &dir.join("html"),
        &evaluator::Leaderboard::from_scores(&scores),
    )?;
    match first_difference {
        None => {
            outln!(
                "check {}: reproduced: the command wrote the same {} explanations again",
                dir.display(),
                explained.len()
            );
            Ok(())
        }
        Some(why) => Err(Failure::failed(format!(
            "check {}: NOT reproduced: {why}",
            dir.display()
        ))),
    }
}

/// An explanation with its measured time left out: the only part a rerun may change.
fn without_time(x: &Explanation) -> Explanation {
    let mut x = x.clone();
    x.meta.wall_ms = 0.0;
    x
}
