//! `causalbench torch record`: scenarios executed through PyTorch (the
//! embedded executor of `generator::torch`), every run recorded by
//! torch.profiler, into a corpus directory: `ID.bundle.json.gz` per bundle,
//! Kineto's native trace `ID.kineto.json.gz` next to it, `completeness.json`
//! (how much of each run's truth Kineto's trace holds) and
//! `recording-summary.json` (docs/torch-track.md).

use crate::Failure;
use generator::torch::{completeness, TorchBackend};
use generator::Backend;
use ground_truth::io::Readable;
use ground_truth::Scenario;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Subcommand)]
pub enum TorchCommand {
    /// Record scenarios through PyTorch (needs python3 with torch, CuPy and a GPU).
    Record(RecordArgs),
    /// The Python function that forced each implicit-sync fence of a torch corpus, as
    /// Kineto's stacks and the eBPF host stacks name it, scored against the truth.
    FenceLines(crate::torch_fences::FenceLinesArgs),
    /// Operator attribution of a torch.compile'd model's kernels (CUPTI correlation,
    /// NVTX enclosure, Inductor's metadata) from a compile probe's output, scored
    /// against Inductor's provenance.
    Attribution(crate::torch_attribution::AttributionArgs),
}

#[derive(clap::Args)]
pub struct RecordArgs {
    /// Corpus directory (created).
    #[arg(long)]
    pub out: PathBuf,
    /// One scenario file instead of a suite.
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// `catalog` (the embedded suite) or a directory of scenario files.
    #[arg(long, default_value = crate::catalog::DEFAULT_SUITE)]
    pub suite: String,
    /// Record only the scenarios whose name contains one of these texts.
    #[arg(long)]
    pub only: Vec<String>,
    /// Repetitions per scenario (default: each scenario's own).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(ground_truth::scenario::MAX_REPETITIONS)))]
    pub reps: Option<u32>,
    /// Keep each injected run's step log (`ID.steplog.json`: what the executor
    /// did and measured, the truth's only source) beside its trace.
    #[arg(long)]
    pub keep_logs: bool,
    /// Also record each injected run with the eBPF host recorder attached to the
    /// executor (started as `python3 -X perf`: Python 3.12+ names its frames in the
    /// stacks; root or CAP_BPF+CAP_PERFMON): the bundles get `kineto+host` views.
    /// Where the recorder cannot run, it says why once and records without.
    #[arg(long)]
    pub host: bool,
    /// Run training-step programs as real training loops (a DataLoader, an
    /// nn.Module, autograd, an optimizer) traced by TraceML (`traceml-ai`, importable
    /// by the executor's python), one executor and one TraceML run per bundle; its
    /// end-of-run verdict is kept as `ID.traceml.json.gz`. Other scenarios are
    /// skipped (docs/torch-track.md, "TraceML on the training step").
    #[arg(long)]
    pub train_loop: bool,
}

pub fn torch(command: TorchCommand) -> Result<(), Failure> {
    match command {
        TorchCommand::Record(args) => record(&args),
        TorchCommand::FenceLines(args) => crate::torch_fences::fence_lines(&args),
        TorchCommand::Attribution(args) => crate::torch_attribution::attribution(&args),
    }
}

fn gzip(src: &Path, dst: &Path) -> std::io::Result<()> {
    let bytes = std::fs::read(src)?;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(&bytes)?;
    std::fs::write(dst, enc.finish()?)?;
    std::fs::remove_file(src)
}

fn record(args: &RecordArgs) -> Result<(), Failure> {
    let scenarios: Vec<Scenario> = match &args.scenario {
        Some(file) => vec![Scenario::read(file).map_err(Failure::input)?],
        None => crate::catalog::load_suite(&args.suite, None).map_err(Failure::input)?,
    };
    let mut items = Vec::new();
    let mut skipped = Vec::new();
    for sc in scenarios {
        if !args.only.is_empty() && !args.only.iter().any(|o| sc.name.contains(o.as_str())) {
            continue;
        }
        if let Err(why) = generator::torch::supported(&sc) {
            skipped.push(json!({"scenario": sc.name, "reason": why}));
            continue;
        }
        if let (true, Err(why)) = (
            args.train_loop,
            generator::torch::runs_as_training_loop(&sc),
        ) {
            skipped.push(json!({"scenario": sc.name, "reason": why}));
            continue;
        }
        for rep in 0..args.reps.unwrap_or(sc.repetitions) {
            items.push((sc.clone(), rep));
        }
    }
    if items.is_empty() {
        return Err(Failure::input(
            "no scenario to record (see --only, --scenario)",
        ));
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", args.out.display())))?;
    let mut backend = TorchBackend::new(Some(args.out.clone()));
    backend.keep_logs = args.keep_logs;
    backend.host_recorder = args.host;
    backend.train_loop = args.train_loop;
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut bundles = Vec::new();
    for (sc, rep) in &items {
        let t = Instant::now();
        match backend.record(sc, *rep) {
            Ok(b) => {
                let id = b.id();
                let plain = args.out.join(format!("{id}.bundle.json"));
                let written = b
                    .write(&plain)
                    .and_then(|_| gzip(&plain, &args.out.join(format!("{id}.bundle.json.gz"))));
                let trace = args.out.join(TorchBackend::trace_file_name(&sc.name, *rep));
                let written = written.and_then(|_| gzip(&trace, &trace.with_extension("json.gz")));
                let steplog = args.out.join(format!("{id}.steplog.json"));
                let written = written.and_then(|_| match args.keep_logs {
                    true => gzip(&steplog, &steplog.with_extension("json.gz")),
                    false => Ok(()),
                });
                let verdict = args
                    .out
                    .join(generator::torch::traceml_file_name(&sc.name, *rep));
                let written = written.and_then(|_| match args.train_loop {
                    true => gzip(&verdict, &verdict.with_extension("json.gz")),
                    false => Ok(()),
                });
                if let Err(e) = written {
                    failures.push(json!({"bundle": id, "error": format!("write: {e}")}));
                    continue;
                }
                let check = b.manifest.cross_check.clone().unwrap_or_default();
                let symptom = b.ground_truth.symptoms.first();
                eprintln!(
                    "ok {id}: {} records, {}/{} device ops in Kineto, Kineto vs globaltimer max {} / {} ns, lateness {:.1} us ({:.1} s)",
                    b.trace.len(),
                    check.device_ops_bound,
                    check.device_ops,
                    check.max_start_diff_ns,
                    check.max_end_diff_ns,
                    symptom.map_or(0.0, |s| s.lateness_ns / 1000.0),
                    t.elapsed().as_secs_f64()
                );
                bundles.push(json!({"bundle": id, "records": b.trace.len(),
                    "cause": symptom.map(|s| s.cause), "lateness_ns": symptom.map(|s| s.lateness_ns),
                    "label": symptom.and_then(|s| s.label.as_ref()).map(|l| l.verdict),
                    "cross_check": check}));
            }
            Err(e) => {
                eprintln!("FAIL {} r{rep}: {e}", sc.name);
                failures
                    .push(json!({"bundle": format!("{}.r{rep}", sc.name), "error": e.to_string()}));
            }
        }
        // Written after every bundle: a recording cut short keeps what it made.
        crate::gpu::write_json(
            &args.out.join(completeness::COMPLETENESS_FILE),
            &json!(backend.completeness()),
        )?;
        let summary = json!({
            "bundles_ok": bundles.len(),
            "failures": failures,
            "skipped": skipped,
            "record_seconds": started.elapsed().as_secs_f64(),
            "bundles": bundles,
        });
        crate::gpu::write_json(&args.out.join("recording-summary.json"), &summary)?;
    }
    if bundles.is_empty() {
        // Nothing recorded: this machine cannot do the job (no GPU, no torch or CuPy).
        let first = failures
            .first()
            .and_then(|f| f["error"].as_str())
            .unwrap_or("")
            .to_string();
        return Err(Failure::unavailable(format!(
            "torch record: no bundle recorded (first failure: {first})"
        )));
    }
    outln!(
        "recorded {} bundles into {} ({} failed, {} scenarios the executor cannot run)",
        bundles.len(),
        args.out.display(),
        failures.len(),
        skipped.len()
    );
    Ok(())
}

/// Appends to `out/leaderboard.md` the section of what Kineto's traces held of the
/// truth, per family, from the `completeness.json` of every replayed corpus that has
/// one ([`generator::torch::completeness`]), so a reader sees whether a wrong answer
/// came from the collector or the analyzer (docs/torch-track.md, "Completeness").
/// Nothing when no corpus has one.
pub fn completeness_section(corpora: &[&Path], out: &Path) -> Result<(), Failure> {
    let Some(section) = completeness::section(corpora).map_err(Failure::input)? else {
        return Ok(());
    };
    let path = out.join(evaluator::LEADERBOARD_MD);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Failure::failed(format!("cannot read {}: {e}", path.display())))?;
    let text = completeness::with_section(&text, &section);
    ground_truth::io::write_atomic(&path, text.as_bytes())
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
}
