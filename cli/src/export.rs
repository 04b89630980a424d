//! `causalbench export`: a case in the formats other tools read.
//!
//! - `--perfetto --bundle B [--view V] [--explanation E] --out DIR`: `truth.perfetto-trace`
//!   (+ `truth.json`, Chrome JSON of the same) and, with an explanation,
//!   `claimed.perfetto-trace` (+ `claimed.json`). Open the `.perfetto-trace` files in the
//!   Perfetto UI.
//! - `--kineto --view V --out F`: the view as a Kineto (PyTorch profiler) trace, the
//!   input of Holistic Trace Analysis.

use crate::Failure;
use ground_truth::io::Readable;
use ground_truth::{Bundle, Explanation, TraceView};
use std::path::{Path, PathBuf};

pub struct ExportArgs {
    pub perfetto: bool,
    pub kineto: bool,
    pub bundle: Option<PathBuf>,
    pub view: Option<PathBuf>,
    pub explanation: Option<PathBuf>,
    pub out: PathBuf,
}

pub fn export(a: ExportArgs) -> Result<(), Failure> {
    match (a.perfetto, a.kineto) {
        (true, false) => perfetto(&a),
        (false, true) => kineto(&a),
        _ => Err(Failure::input(
            "give exactly one of --perfetto (with --bundle) or --kineto (with --view)",
        )),
    }
}

fn perfetto(a: &ExportArgs) -> Result<(), Failure> {
    let bundle_path = a
        .bundle
        .as_deref()
        .ok_or_else(|| Failure::input("--perfetto needs --bundle B"))?;
    let bundle = Bundle::read(bundle_path)?;
    let view = a.view.as_deref().map(TraceView::read).transpose()?;
    if let (Some(v), Some(p)) = (&view, &a.view) {
        if !views::derived_from(v, &bundle) {
            return Err(Failure::input(format!(
                "{}: this view was not derived from bundle {}",
                p.display(),
                bundle_path.display()
            )));
        }
    }
    let explanation = a
        .explanation
        .as_deref()
        .map(Explanation::read)
        .transpose()?;
    let w = exporters::perfetto::export_case(&bundle, view.as_ref(), explanation.as_ref(), &a.out)
        .map_err(|e| Failure::failed(format!("cannot write into {}: {e}", a.out.display())))?;
    let s = w.truth;
    eprintln!(
        "truth: {} tracks ({} threads, {} streams), {} slices, {} instants, {} flows",
        s.tracks, s.thread_tracks, s.stream_tracks, s.slices, s.instants, s.flows
    );
    if let Some(c) = w.claimed {
        eprintln!(
            "claimed: {} flows ({} edges not drawn: an end is not in the view)",
            c.flows,
            w.skipped.len()
        );
    }
    for f in &w.files {
        outln!("{}", f.display());
    }
    Ok(())
}

fn kineto(a: &ExportArgs) -> Result<(), Failure> {
    let view_path: &Path = a
        .view
        .as_deref()
        .ok_or_else(|| Failure::input("--kineto needs --view V"))?;
    let view = TraceView::read(view_path)?;
    let stats = exporters::kineto::write_kineto(
        &view,
        &exporters::kineto::KinetoOptions::default(),
        &a.out,
    )
    .map_err(|e| Failure::failed(format!("cannot write {}: {e}", a.out.display())))?;
    eprintln!(
        "kineto: {} runtime, {} device, {} sync events, {} ac2g flows -> {}",
        stats.runtime_events,
        stats.device_events,
        stats.sync_events,
        stats.flows,
        a.out.display()
    );
    Ok(())
}
