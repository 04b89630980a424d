//! One case (one bundle) through the stages: record or replay, the label check's verdict,
//! then for each standard view: derive, profile, score.

use super::plan::Job;
use super::profile::{explain_view, ViewAt};
use super::record::{bundle_of, keep_label_verdict};
use super::score::score_explanations;
use super::view::{derive_and_write, each_standard_view};
use crate::external::Externals;
use crate::manifest::RunManifest;
use crate::progress::Stage;
use evaluator::CaseScore;
use std::path::Path;

/// What every case of a run shares besides the backend.
pub(super) struct Shared<'a> {
    /// Threads one case may spread its views over.
    pub view_threads: usize,
    pub manifest: &'a RunManifest,
    pub view_key: &'a views::ViewKey,
    pub externals: &'a Externals,
}

/// Records or replays one bundle, then views, profiles and scores it. A case no label
/// holds for (dropped or indeterminate) has no scores.
pub(super) fn run_case(
    job: &Job,
    backend: &dyn generator::Backend,
    out: &Path,
    key: &str,
    profilers: &[String],
    shared: &Shared,
    progress: &Stage,
) -> Result<Vec<CaseScore>, String> {
    let bundle = bundle_of(job, backend, out, key, shared.manifest)?;
    if !keep_label_verdict(out, key, &bundle)? {
        return Ok(Vec::new());
    }
    let bundle_file = match job {
        Job::Replay { path, .. } => Some(path.as_path()),
        Job::Record { .. } => None,
    };
    let lane = shared.externals.lane_of(&bundle);
    each_standard_view(&bundle, shared.view_threads, |spec| {
        let (view, path) = derive_and_write(&bundle, spec, shared.view_key, out, key)?;
        let at = ViewAt {
            out,
            key,
            spec,
            path: &path,
            bundle_file,
            lane,
        };
        let explained = explain_view(&view, &at, profilers, shared.externals)?;
        for e in &explained {
            progress.viewed(&e.explanation.meta.profiler);
        }
        Ok(score_explanations(&bundle, &view, explained))
    })
}
