//! The profile stage: every built-in profiler and every external command explains one
//! view; each explanation is written under `explanations/` (an external command's
//! stderr under `logs/`).

use crate::external::Externals;
use evaluator::InvocationCost;
use ground_truth::io::Readable;
use ground_truth::{Explanation, TraceView, ViewSpec};
use std::path::Path;

/// One profiler's explanation of a view, with what the harness measured of an external
/// command's run (none for a built-in profiler).
pub(super) struct Explained {
    pub explanation: Explanation,
    pub invocation: Option<InvocationCost>,
}

/// Where one view of one case lies, and what was recorded beside its bundle.
pub(super) struct ViewAt<'a> {
    pub out: &'a Path,
    pub key: &'a str,
    pub spec: ViewSpec,
    /// The view's file, which external commands read.
    pub path: &'a Path,
    /// A replayed bundle's file: what was recorded beside it (a torch bundle's native
    /// Kineto trace, read by `hta-critical-path`) lies next to it.
    pub bundle_file: Option<&'a Path>,
    /// The lane of its bundle, where server profilers answer it
    /// ([`Externals::lane_of`]).
    pub lane: u32,
}

/// The explanations of `view` by the built-in `profilers` (in order), then by the
/// external commands that read views of its collectors.
pub(super) fn explain_view(
    view: &TraceView,
    at: &ViewAt,
    profilers: &[String],
    externals: &Externals,
) -> Result<Vec<Explained>, String> {
    let ViewAt {
        out,
        key,
        spec,
        path: vpath,
        bundle_file,
        lane,
    } = *at;
    let label = spec.label();
    let mut explained = Vec::new();
    for name in profilers {
        let Some(profiler) = baselines::profiler_for(name, &spec, bundle_file) else {
            continue;
        };
        let explanation = profiler.explain(view);
        let epath = out
            .join("explanations")
            .join(key)
            .join(&label)
            .join(format!("{name}.json"));
        explanation
            .write(&epath)
            .map_err(|e| format!("{key}: cannot write {}: {e}", epath.display()))?;
        explained.push(Explained {
            explanation,
            invocation: None,
        });
    }
    for external in externals
        .profilers
        .iter()
        .filter(|_| externals.reads_view(&spec))
    {
        let case = out.join("explanations").join(key).join(&label);
        let epath = case.join(format!("{}.json", external.name));
        let log = out
            .join("logs")
            .join(key)
            .join(&label)
            .join(format!("{}.stderr.log", external.name));
        let (explanation, invocation) = externals
            .explain(external, view, vpath, &epath, log, out, lane)
            .map_err(|e| format!("{key}: {label}: {e}"))?;
        explanation
            .write(&epath)
            .map_err(|e| format!("{key}: cannot write {}: {e}", epath.display()))?;
        explained.push(Explained {
            explanation,
            invocation,
        });
    }
    Ok(explained)
}
