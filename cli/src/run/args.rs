//! `causalbench run`'s options, as clap parses them.

use crate::{BackendArg, CollectorsArg, ModeArg};
use std::path::PathBuf;

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
    /// Do not print the leaderboard at the end, nor progress (without it: a bar on a
    /// terminal, one line per stage in a log).
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
    /// Run the `--profiler` commands only on views of these collectors, comma-separated
    /// (default: all); the built-in profilers still read every view.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub collectors: Vec<CollectorsArg>,
    /// Run the `--profiler` commands only on views of these modes, comma-separated
    /// (default: both); the built-in profilers still read every view.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub modes: Vec<ModeArg>,
    /// How progress is shown (default: as `--quiet` and stderr decide,
    /// [`crate::progress::Report::choose`]); `submit` sets its own.
    #[arg(skip)]
    pub progress: Option<crate::progress::Report>,
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

impl RunArgs {
    /// The collectors `--collectors` names (none: every one).
    pub fn collectors(&self) -> Vec<ground_truth::Collectors> {
        use ground_truth::Collectors;
        let mut chosen: Vec<Collectors> = self
            .collectors
            .iter()
            .map(|c| match c {
                CollectorsArg::Cupti => Collectors::Cupti,
                CollectorsArg::Host => Collectors::Host,
                CollectorsArg::Combined => Collectors::Combined,
                CollectorsArg::Kineto => Collectors::Kineto,
                CollectorsArg::KinetoHost => Collectors::KinetoHost,
            })
            .collect();
        chosen.sort();
        chosen.dedup();
        chosen
    }

    /// The modes `--modes` names (none: both).
    pub fn modes(&self) -> Vec<ground_truth::Mode> {
        use ground_truth::Mode;
        let mut chosen: Vec<Mode> = self
            .modes
            .iter()
            .map(|m| match m {
                ModeArg::Instrumented => Mode::Instrumented,
                ModeArg::Closed => Mode::Closed,
            })
            .collect();
        chosen.sort();
        chosen.dedup();
        chosen
    }
}
