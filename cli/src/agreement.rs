//! `causalbench agreement`: how far two backends agree on the same generated
//! scenarios; the metric is the evaluator's (`evaluator::agreement`), this reads the two
//! results directories, prints the report and writes it.

use crate::Failure;
use std::path::PathBuf;

/// `causalbench agreement`'s options.
#[derive(clap::Args)]
pub struct AgreementArgs {
    /// Results directory of the first backend (e.g. `run --suite dev --backend sim`).
    #[arg(long)]
    pub a: PathBuf,
    /// Its bundles (default: A/bundles).
    #[arg(long)]
    pub a_bundles: Option<PathBuf>,
    /// Results directory of the second backend (e.g. `run --corpus` of a GPU corpus).
    #[arg(long)]
    pub b: PathBuf,
    /// Its bundles (default: B/bundles; for a replayed corpus, the corpus directory).
    #[arg(long)]
    pub b_bundles: Option<PathBuf>,
    /// Write the report here as well as printing it.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn agreement(args: &AgreementArgs) -> Result<(), Failure> {
    use evaluator::agreement::{compare, profiler_verdicts, sides};
    let input = |e: evaluator::EvalError| Failure::input(e.to_string());
    let a = sides(args.a_bundles.as_deref().unwrap_or(&args.a.join("bundles"))).map_err(input)?;
    let b = sides(args.b_bundles.as_deref().unwrap_or(&args.b.join("bundles"))).map_err(input)?;
    let verdicts_a = profiler_verdicts(&args.a).map_err(input)?;
    let verdicts_b = profiler_verdicts(&args.b).map_err(input)?;
    let agreement = compare(&a, &b, &verdicts_a, &verdicts_b);
    if agreement.matched == 0 {
        return Err(Failure::input(format!(
            "no scenario is in both {} and {}: nothing to compare",
            args.a.display(),
            args.b.display()
        )));
    }
    let text = agreement.render();
    outln!("{text}");
    if let Some(out) = &args.out {
        ground_truth::io::write_atomic(out, text.as_bytes())
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", out.display())))?;
    }
    Ok(())
}
