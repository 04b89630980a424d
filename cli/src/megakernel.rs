//! `causalbench megakernel run|report`: the megakernel track's experiment (on
//! the GPU, or the simulator) and its scoring from case packs. The experiment
//! itself is `megakernel_run.rs`; the track's files are written by `track.rs`.

use crate::Failure;
use std::path::PathBuf;

/// `causalbench megakernel`'s subcommands.
#[derive(clap::Subcommand)]
pub enum MegakernelCommand {
    /// The track's experiment: every family × repetitions under five monitors,
    /// the pairs, scoring, perturbation, configuration-apply vs rebuild time,
    /// and on a GPU the kernel-per-operator and CUDA-graph controls and CUPTI
    /// PC sampling. Writes `summary.json` (after every step), one case pack per
    /// family and the track's leaderboard; stops starting new work after `--budget-s`.
    Run(crate::megakernel_run::RunArgs),
    /// Score the track from case packs (what `megakernel run` wrote):
    /// `track-scores.jsonl`, `track-leaderboard.{json,md}`.
    Report(ReportArgs),
    /// The track's monitor programs (eBPF, verified, run at the kernel's
    /// hooks): load + verify, the unsafe programs' rejections, the
    /// program-only queries against the fixed configuration's best attempt,
    /// perturbation, and on a GPU the hooks' register / shared-memory cost,
    /// swap vs rebuild time and a swap while the kernel runs.
    Bpf(crate::megakernel_bpf::BpfArgs),
}

/// `causalbench megakernel report`'s options.
#[derive(clap::Args)]
pub struct ReportArgs {
    /// Directory of case packs (`FAMILY.cases.jsonl.gz`).
    #[arg(long)]
    pub packs: PathBuf,
    /// Where the scores and leaderboard go (default: the pack directory).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write every case as `OUT/cases/ID.bundle.json` + `ID.tasks.json`
    /// (readable by `causalbench score`, `export`, …).
    #[arg(long)]
    pub unpack: bool,
}

pub fn megakernel(command: MegakernelCommand) -> Result<(), Failure> {
    match command {
        MegakernelCommand::Run(args) => crate::megakernel_run::run(args),
        MegakernelCommand::Report(args) => report(&args),
        MegakernelCommand::Bpf(args) => crate::megakernel_bpf::run(args),
    }
}

fn report(args: &ReportArgs) -> Result<(), Failure> {
    let files = crate::track::pack_files(&args.packs)?;
    if files.is_empty() {
        return Err(Failure::input(format!(
            "{}: no case packs (*.cases.jsonl.gz)",
            args.packs.display()
        )));
    }
    let mut cases = Vec::new();
    for f in &files {
        cases.extend(megakernel::pack::read(f)?);
    }
    let out = args.out.clone().unwrap_or_else(|| args.packs.clone());
    std::fs::create_dir_all(&out)
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", out.display())))?;
    if args.unpack {
        let dir = out.join("cases");
        megakernel::pack::unpack(&cases, &dir)
            .map_err(|e| Failure::failed(format!("cannot unpack into {}: {e}", dir.display())))?;
    }
    let (_, rows) = crate::track::write(&out, &cases)?;
    outln!(
        "{} cases from {} packs\n\n{}",
        cases.len(),
        files.len(),
        evaluator::megakernel::track_markdown(&rows)
    );
    Ok(())
}
