//! The view stage: the standard views of one bundle, each derived with the run's view
//! key and written under `views/`, spread over the threads one case may use.

use ground_truth::io::Readable;
use ground_truth::{Bundle, TraceView, ViewSpec};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Derives one view of `bundle` and writes it; returns the view and its file.
pub(super) fn derive_and_write(
    bundle: &Bundle,
    spec: ViewSpec,
    view_key: &views::ViewKey,
    out: &Path,
    key: &str,
) -> Result<(TraceView, PathBuf), String> {
    let view = views::derive_with_key(bundle, spec, view_key).view;
    let label = spec.label();
    let path = out.join("views").join(key).join(format!("{label}.json"));
    view.write(&path)
        .map_err(|e| format!("{key}: cannot write {}: {e}", path.display()))?;
    Ok((view, path))
}

/// `per_view` on every standard view spec of `bundle`, the results joined in spec order
/// (the first failure in that order is the answer). The views of one bundle are
/// independent: spread over `threads` (a run of few, large bundles would otherwise use
/// one core).
pub(super) fn each_standard_view<T: Send>(
    bundle: &Bundle,
    threads: usize,
    per_view: impl Fn(ViewSpec) -> Result<Vec<T>, String> + Sync,
) -> Result<Vec<T>, String> {
    let specs = views::standard_specs_of(bundle);
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<Vec<T>, String>>>> =
        specs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, specs.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(&spec) = specs.get(i) else { break };
                *results[i].lock().unwrap() = Some(per_view(spec));
            });
        }
    });
    let mut joined = Vec::new();
    for r in results {
        joined.extend(r.into_inner().unwrap().expect("every view ran")?);
    }
    Ok(joined)
}
