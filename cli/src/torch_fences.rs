//! `causalbench torch fence-lines`: for every implicit-sync fence of a torch corpus,
//! the Python function that forced it as Kineto's `with_stack` events and the eBPF
//! host recorder's stacks name it, scored against the truth
//! (`generator::torch::fence_lines`, docs/torch-track.md "The Python line of an
//! implicit sync").

use crate::Failure;
use generator::torch::fence_lines::{self, FenceScore};
use ground_truth::io::Readable;
use ground_truth::Bundle;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct FenceLinesArgs {
    /// A torch corpus (`torch record --out`): `ID.bundle.json.gz` with Kineto's
    /// native trace `ID.kineto.json.gz` beside each.
    #[arg(long)]
    pub corpus: PathBuf,
    /// Also write the scores as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// The fences of a corpus, scored per source: (Kineto's stacks, eBPF host stacks,
/// bundles with fences).
pub fn score_corpus(dir: &Path) -> Result<(FenceScore, FenceScore, usize), Failure> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Failure::input(format!("{}: cannot read the corpus: {e}", dir.display())))?;
    let mut bundles: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| ground_truth::io::is_bundle_file(p))
        .collect();
    bundles.sort();
    let truth = fence_lines::truth_frame();
    let (mut kineto, mut host, mut with_fences) = (FenceScore::default(), FenceScore::default(), 0);
    for path in bundles {
        let bundle = Bundle::read(&path)?;
        if bundle.manifest.backend != "torch" {
            continue;
        }
        let fences = fence_lines::fences(&bundle);
        if fences.is_empty() {
            continue;
        }
        with_fences += 1;
        let trace = baselines::hta_native::native_trace_beside(&path).ok_or_else(|| {
            Failure::input(format!(
                "{}: no native Kineto trace (ID.kineto.json.gz) beside it",
                path.display()
            ))
        })?;
        let activities = kineto::read_activities(&trace)?;
        let has_host_records = bundle
            .trace
            .iter()
            .any(|r| matches!(r, ground_truth::trace::Record::Uprobe { .. }));
        for fence in &fences {
            kineto.add(
                fence_lines::from_kineto_stacks(fence, &activities).as_ref(),
                &truth,
            );
            // Bundles without host records (recorded without the eBPF recorder) say
            // nothing about its stacks: not counted as unanswered.
            if has_host_records {
                host.add(
                    fence_lines::from_host_stacks(fence, &bundle.trace).as_ref(),
                    &truth,
                );
            }
        }
    }
    Ok((kineto, host, with_fences))
}

pub fn fence_lines(args: &FenceLinesArgs) -> Result<(), Failure> {
    let (kineto, host, bundles) = score_corpus(&args.corpus)?;
    let truth = fence_lines::truth_frame();
    let share = |s: &FenceScore| {
        s.share().map_or("n/a (no host records)".to_string(), |x| {
            format!("{:.1} %", 100.0 * x)
        })
    };
    outln!(
        "implicit-sync fences: {} in {bundles} bundles of {}; truth: `{}` line {} (the executor's copy)",
        kineto.fences,
        args.corpus.display(),
        truth.function,
        truth.line.map_or("?".into(), |l| l.to_string())
    );
    outln!("| source | fences | with a program frame | right function | share |");
    outln!("| --- | ---: | ---: | ---: | ---: |");
    for (name, s) in [
        ("Kineto with_stack", &kineto),
        ("eBPF host stacks (-X perf)", &host),
    ] {
        outln!(
            "| {name} | {} | {} | {} | {} |",
            s.fences,
            s.answered,
            s.correct,
            share(s)
        );
    }
    if let Some(path) = &args.json {
        let value = serde_json::json!({
            "corpus": args.corpus,
            "bundles_with_fences": bundles,
            "truth": {"file": truth.file, "function": truth.function, "line": truth.line},
            "kineto_stacks": kineto,
            "host_stacks": host,
        });
        ground_truth::io::write_atomic(path, value.to_string().as_bytes())
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}
