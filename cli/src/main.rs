//! `causalbench`: one binary for the whole pipeline (docs/cli.md).
//! Exit codes: 0 success; 1 a run completed but some case failed, or the
//! machine cannot do the job (a GPU subcommand without a usable GPU); 2 bad
//! input or usage.

/// `println!` for standard output that ends quietly when the reader has
/// gone (`stdout.rs`).
macro_rules! outln {
    () => {
        $crate::stdout::write(format_args!(""), true)
    };
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!($($arg)*), true)
    };
}

/// `print!` for standard output that ends quietly when the reader has gone.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!($($arg)*), false)
    };
}

mod agreement;
mod catalog;
mod collector;
mod commands;
mod corpus;
mod costs;
mod diff;
mod entry;
mod export;
mod external;
mod gpu;
mod manifest;
mod measure;
mod measure_large;
mod megakernel;
mod megakernel_bpf;
mod megakernel_run;
mod merge;
mod progress;
mod published;
mod redraw;
mod reproduction;
mod run;
mod shard;
mod site;
mod stdout;
mod submit;
mod submit_beside;
mod torch;
mod torch_attribution;
mod torch_fences;
mod track;
mod workload;

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "causalbench",
    version,
    about = "Adversarial host-device causality benchmark for GPU profilers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum BackendArg {
    /// The GPU when one is present, else the simulator (plus the shipped corpus for `run`).
    Auto,
    Cuda,
    Sim,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum CollectorsArg {
    Cupti,
    Host,
    Combined,
    /// Kineto's records of a `torch` bundle (docs/torch-track.md).
    Kineto,
    /// Kineto's and the eBPF host recorder's records of a `torch` bundle recorded
    /// with both (docs/torch-track.md, "kineto+host").
    #[value(name = "kineto+host")]
    KinetoHost,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ModeArg {
    Instrumented,
    Closed,
}

#[derive(Subcommand)]
enum Command {
    /// The main job: record every scenario of the suite (or replay a corpus), derive the
    /// standard views, run every built-in profiler, score and report.
    Run(run::RunArgs),
    /// Enter the leaderboard: run a profiler command over a published split and write
    /// the entry's folder (metadata, explanations, logs, scores; baselines/PROTOCOL.md).
    Submit(submit::SubmitArgs),
    /// Verify an entry's folder: bundles by hash, explanations against their views,
    /// scores re-computed (exit 2 with the reason when anything differs); `--rerun`
    /// runs the command again and marks the entry reproduced.
    Check(submit::CheckArgs),
    /// Record one run bundle.
    Record {
        #[arg(long)]
        scenario: PathBuf,
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendArg,
        #[arg(long, default_value_t = 0)]
        repetition: u32,
        #[arg(long)]
        seed: Option<u64>,
        #[arg(long)]
        out: PathBuf,
    },
    /// Derive a trace view from a bundle.
    View {
        #[arg(long)]
        bundle: PathBuf,
        #[arg(long, value_enum)]
        collectors: CollectorsArg,
        #[arg(long, value_enum)]
        mode: ModeArg,
        /// Uniform synthetic loss rate in [0, 1].
        #[arg(long)]
        loss: Option<f64>,
        /// Remove one record on each symptom's true path instead of uniform loss.
        #[arg(long, conflicts_with = "loss")]
        targeted_loss: bool,
        #[arg(long, default_value_t = 0)]
        loss_seed: u64,
        /// File holding the secret that names the view's bundle (created when absent);
        /// without it a random key is drawn (docs/integrity.md).
        #[arg(long)]
        view_key: Option<PathBuf>,
        #[arg(long)]
        out: PathBuf,
    },
    /// Run a built-in profiler or an external command on a view.
    Profile {
        #[arg(long, conflicts_with = "cmd", required_unless_present = "cmd")]
        profiler: Option<String>,
        /// External profiler: a command with `{view}` and `{out}` placeholders.
        #[arg(long)]
        cmd: Option<String>,
        /// External profiler timeout in seconds.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        /// On a kernel without Landlock, run the external profiler unisolated instead of refusing.
        #[arg(long, requires = "cmd")]
        allow_unisolated: bool,
        /// Kineto's native trace of the view's bundle (`ID.kineto.json.gz` beside
        /// `ID.bundle.json.gz`): `hta-critical-path` reads a `kineto` view from it
        /// (docs/torch-track.md).
        #[arg(long, requires = "profiler")]
        kineto_trace: Option<PathBuf>,
        #[arg(long)]
        view: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
    /// Score one explanation against a bundle and the view it answered.
    Score {
        #[arg(long)]
        bundle: PathBuf,
        #[arg(long)]
        view: PathBuf,
        #[arg(long)]
        explanation: PathBuf,
        /// Print the case score as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The reference profiler's answer for one late operation, as text.
    WhyLate {
        #[arg(long)]
        view: PathBuf,
        #[arg(long)]
        rid: u64,
    },
    /// Rebuild leaderboard and plots from DIR/scores.jsonl, and with `--html` the
    /// static HTML leaderboard (docs/cli.md, "The HTML leaderboard"); with `--merge`,
    /// join the result directories of `run --shard K/N` (every K once) into DIR
    /// (docs/scale-out.md).
    Report {
        /// The result set (a `run --out` directory).
        #[arg(long, default_value = "out")]
        results: PathBuf,
        /// Also write the browsable static leaderboard into this directory (open its
        /// `index.html` from disk; `run` writes it to `OUT/html` by itself).
        #[arg(long, value_name = "DIR")]
        html: Option<PathBuf>,
        #[arg(long, num_args = 1.., value_name = "SHARD_DIR")]
        merge: Vec<PathBuf>,
    },
    /// What changed between two result sets: a one-screen summary (verdict flips per
    /// profiler × family, metrics beyond their interval, what differs in the records
    /// behind each flip), the details in a file; or, with --versions, corpora recorded
    /// under several CUPTI versions compared at once.
    Diff(diff::DiffArgs),
    /// How far two backends agree on the same generated scenarios, per axis (label
    /// checks, lateness, each profiler's verdicts): the simulator against the GPU.
    Agreement(agreement::AgreementArgs),
    /// Print the JSON Schema of a format.
    Schema {
        /// scenario, bundle, view, explanation, scores, leaderboard, submission, reproduction
        name: String,
    },
    /// Export a case for other tools: Perfetto (truth and claimed edges) or Kineto (HTA's input).
    Export {
        /// Perfetto traces of a bundle (truth) and an explanation (claimed edges).
        #[arg(long, conflicts_with = "kineto")]
        perfetto: bool,
        /// A view as a Kineto (PyTorch profiler) trace.
        #[arg(long)]
        kineto: bool,
        #[arg(long)]
        bundle: Option<PathBuf>,
        #[arg(long)]
        view: Option<PathBuf>,
        #[arg(long)]
        explanation: Option<PathBuf>,
        /// Directory (--perfetto) or file (--kineto).
        #[arg(long)]
        out: PathBuf,
    },
    /// Record a corpus on the GPU (replayed by `run --corpus DIR`).
    #[command(subcommand)]
    Corpus(corpus::CorpusCommand),
    /// The PyTorch track: scenarios run through PyTorch, recorded by torch.profiler (docs/torch-track.md).
    #[command(subcommand)]
    Torch(torch::TorchCommand),
    /// The recorder and injector studies on the GPU (results/h200-580/MEASUREMENTS.md).
    #[command(subcommand)]
    Measure(measure::MeasureCommand),
    /// The megakernel track: its experiment (GPU or simulator) and its scoring from case packs.
    #[command(subcommand)]
    Megakernel(megakernel::MegakernelCommand),
    /// One scenario's (or a suite's) CUDA work as a standalone program for an
    /// external collector to wrap or attach to; truth without CUPTI
    /// (baselines/COLLECTORS.md).
    Workload(workload::WorkloadArgs),
    /// Bring your own collector: run it on the workload, convert, bind and score
    /// its records (baselines/COLLECTORS.md).
    #[command(subcommand)]
    Collector(collector::CollectorCommand),
    /// List scenarios, families (the megakernel track's too) and profilers.
    List {
        #[arg(long, default_value = catalog::DEFAULT_SUITE)]
        suite: String,
    },
}

/// A failure with its exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn input(message: impl std::fmt::Display) -> Self {
        Failure {
            code: 2,
            message: message.to_string(),
        }
    }
    /// The machine cannot do what was asked (no usable GPU for `--backend cuda`):
    /// exit 2 like bad input, since rerunning the same command here cannot succeed
    /// (docs/cli.md, exit codes).
    pub fn unavailable(message: impl std::fmt::Display) -> Self {
        Failure::input(message)
    }
    pub fn failed(message: impl std::fmt::Display) -> Self {
        Failure {
            code: 1,
            message: message.to_string(),
        }
    }
}

impl From<ground_truth::FormatError> for Failure {
    fn from(e: ground_truth::FormatError) -> Self {
        Failure::input(e)
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Submit(args) => submit::submit(args),
        Command::Check(args) => submit::check(args),
        Command::Record {
            scenario,
            backend,
            repetition,
            seed,
            out,
        } => commands::record(&scenario, backend, repetition, seed, &out),
        Command::View {
            bundle,
            collectors,
            mode,
            loss,
            targeted_loss,
            loss_seed,
            view_key,
            out,
        } => commands::view_spec(collectors, mode, loss, targeted_loss, loss_seed)
            .and_then(|spec| commands::view(&bundle, spec, view_key.as_deref(), &out)),
        Command::Profile {
            profiler,
            cmd,
            timeout,
            allow_unisolated,
            kineto_trace,
            view,
            out,
        } => commands::profile(
            profiler,
            cmd,
            timeout,
            allow_unisolated,
            kineto_trace,
            &view,
            &out,
        ),
        Command::Score {
            bundle,
            view,
            explanation,
            json,
        } => commands::score(&bundle, &view, &explanation, json),
        Command::WhyLate { view, rid } => commands::why_late(&view, rid),
        Command::Report {
            results,
            html,
            merge,
        } if merge.is_empty() => commands::report(&results, html.as_deref()),
        Command::Report { results, merge, .. } => merge::merge(&merge, &results),
        Command::Diff(args) => diff::diff(args),
        Command::Agreement(args) => agreement::agreement(&args),
        Command::Schema { name } => commands::schema(&name),
        Command::List { suite } => commands::list(&suite),
        Command::Corpus(command) => corpus::corpus(command),
        Command::Workload(args) => workload::workload(args),
        Command::Collector(command) => collector::collector(command),
        Command::Measure(command) => measure::measure(command),
        Command::Torch(command) => torch::torch(command),
        Command::Megakernel(command) => megakernel::megakernel(command),
        Command::Export {
            perfetto,
            kineto,
            bundle,
            view,
            explanation,
            out,
        } => export::export(export::ExportArgs {
            perfetto,
            kineto,
            bundle,
            view,
            explanation,
            out,
        }),
    };
    // Batch profilers' servers and zygotes end with the command, and their private
    // directories with them (a killed harness leaves those to the next one's sweep).
    baselines::external_server::stop_all();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("causalbench: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}
