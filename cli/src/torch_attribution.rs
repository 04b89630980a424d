//! `causalbench torch attribution`: the operator attribution of a compiled
//! model's kernels by CUPTI correlation, NVTX enclosure and Inductor's metadata,
//! scored against Inductor's provenance (`generator::torch::attribution`,
//! docs/torch-track.md "The compiled case").

use crate::Failure;
use generator::torch::attribution::{self, ProbeFiles};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct AttributionArgs {
    /// The output directory of `scripts/torch-device/compile_probe.py`.
    #[arg(long)]
    pub probe: PathBuf,
    /// Also write the report as JSON here (atomically).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn attribution(args: &AttributionArgs) -> Result<(), Failure> {
    let files = ProbeFiles::find(&args.probe)?;
    let report = attribution::score(&files)?;
    out!("{}", attribution::markdown(&report));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| Failure::input(format!("serializing the report: {e}")))?;
        ground_truth::io::write_atomic(path, format!("{text}\n").as_bytes())
            .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}
