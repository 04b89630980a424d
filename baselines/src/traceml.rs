//! `traceml-step`: TraceML's end-of-run step-time diagnosis (PyPI `traceml-ai`),
//! scored on the one question it answers — is a training step's time lost on the
//! host side (waiting for input, work outside the step's phases) or on the device
//! side (the step's compute)?
//!
//! TraceML runs where its users run it: inside the training loop. The PyTorch
//! track records its training-step programs as real training loops traced by
//! `traceml.trace_step` (`causalbench torch record --train-loop`,
//! `generator/src/torch/train_loop.py`), one TraceML run per bundle, and keeps its
//! end-of-run `traceml.final_summary()` beside the bundle (`ID.traceml.json.gz`, the
//! way the native Kineto trace is kept). This row reads that verdict; it never runs
//! TraceML on a view (TraceML cannot read a trace: it instruments a live loop).
//!
//! The verdict is one per run (its Step Time diagnosis over the run's steps), so
//! every `cause` query of the run's loss-free `kineto` views gets the same answer,
//! mapped by [`causes_of`]; request, call-site and operator questions are abstained
//! on. A run TraceML could not conclude on (`NO_DATA`, `WARMUP`, `INCOMPLETE_DATA`)
//! or where it failed to start or summarize is its outcome: the view's
//! `meta.failure` (counted as crashed, with the message; evaluator/METRICS.md).

use crate::{Profiler, VERSION};
use ground_truth::io::{read_input, InputLimits};
use ground_truth::{CauseLabel, Explanation, Question, TraceView, ViewSpec};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub const NAME: &str = "traceml-step";

/// What a reader of `traceml-step`'s rows must know.
pub const ROW_NOTE: &str = "TraceML 0.5's end-of-run Step Time diagnosis \
    (`traceml.final_summary()`), recorded inside the training loop it traced \
    (`torch record --train-loop`: a DataLoader, an nn.Module, autograd and an optimizer \
    wrapped in `traceml.trace_step`); read from `ID.traceml.json.gz` beside the bundle, on \
    loss-free `kineto` views of such bundles only. One verdict per run, the same answer to \
    every cause query: INPUT_BOUND -> host_compute, cpu_deschedule, handoff_queueing; \
    RESIDUAL_HEAVY -> host_compute, cpu_deschedule, implicit_sync; H2D_BOUND -> slow_copy, \
    pcie_contention; COMPUTE_BOUND -> stream_backlog, occupancy_pressure; BALANCED -> none. \
    It abstains on request, call-site and operator questions and on a rank-straggler verdict; \
    NO_DATA, WARMUP and INCOMPLETE_DATA are shown as failures.";

/// The verdict recorded beside a bundle file, when there is one:
/// `X.bundle.json[.gz]` -> `X.traceml.json.gz`, else `X.traceml.json`.
pub fn verdict_beside(bundle: &Path) -> Option<PathBuf> {
    let name = bundle.file_name()?.to_str()?;
    let stem = name
        .strip_suffix(".bundle.json.gz")
        .or_else(|| name.strip_suffix(".bundle.json"))?;
    [".traceml.json.gz", ".traceml.json"]
        .iter()
        .map(|suffix| bundle.with_file_name(format!("{stem}{suffix}")))
        .find(|p| p.is_file())
}

/// Whether the row reads this view: loss-free `kineto` views (TraceML saw the whole
/// run; a view that drops records would still get the whole run's verdict).
pub fn reads_view(spec: &ViewSpec) -> bool {
    crate::hta_native::reads_natively(spec)
}

/// TraceML's Step Time verdict kinds mapped to cause labels, best first, or `None`
/// where the verdict names no cause of a step's delay (a rank straggler: this track
/// runs one rank). The order follows what TraceML's own finding says (its `action`
/// text, `traceml_ai/diagnostics/step_time/rules.py`): input wait is the loader's host
/// work, its stalls or the queue; residual time is "work outside traced phases, CPU
/// stalls ... or unobserved transfers" (a blocking readback is one); compute is the
/// step's own kernels.
pub fn causes_of(kind: &str) -> Option<&'static [CauseLabel]> {
    use CauseLabel::*;
    Some(match kind {
        "INPUT_BOUND" | "INPUT_STRAGGLER" => &[HostCompute, CpuDeschedule, HandoffQueueing],
        "RESIDUAL_HEAVY" => &[HostCompute, CpuDeschedule, ImplicitSync],
        "H2D_BOUND" | "H2D_STRAGGLER" => &[SlowCopy, PcieContention],
        "COMPUTE_BOUND" | "COMPUTE_STRAGGLER" => &[StreamBacklog, OccupancyPressure],
        "BALANCED" => &[None],
        _ => return Option::None,
    })
}

/// Step Time kinds under which TraceML concluded nothing (DIAGNOSIS.md, "Step Time").
const INCONCLUSIVE: &[&str] = &["NO_DATA", "WARMUP", "INCOMPLETE_DATA"];

/// What one recorded verdict says.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// A Step Time diagnosis (`kind`) with its one-line summary.
    Diagnosis { kind: String, summary: String },
    /// TraceML failed, or concluded nothing: the message shown.
    Failed(String),
}

/// Reads the verdict file the recorder wrote (`train_loop.py`: `{"tool", "version",
/// "final_summary"}` or `{"tool", "error"}`); an unreadable or malformed file is an
/// error naming it.
pub fn read_verdict(file: &Path) -> Result<Verdict, String> {
    let bytes =
        read_input(file, "TraceML verdict", &InputLimits::DEFAULT).map_err(|e| e.to_string())?;
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: not JSON: {e}", file.display()))?;
    if let Some(error) = v.get("error") {
        let error = error
            .as_str()
            .map_or_else(|| error.to_string(), str::to_string);
        return Ok(Verdict::Failed(format!("TraceML: {error}")));
    }
    let diagnosis = v
        .pointer("/final_summary/step_time/diagnosis")
        .ok_or_else(|| {
            format!(
                "{}: no `.final_summary.step_time.diagnosis` (TraceML's Step Time verdict)",
                file.display()
            )
        })?;
    let kind = diagnosis
        .get("kind")
        .and_then(|k| k.as_str())
        .ok_or_else(|| {
            format!(
                "{}: `.final_summary.step_time.diagnosis.kind` is not a string",
                file.display()
            )
        })?
        .to_string();
    let summary = diagnosis
        .get("summary")
        .and_then(|s| s.as_str())
        .unwrap_or("")
        .to_string();
    if INCONCLUSIVE.contains(&kind.as_str()) {
        return Ok(Verdict::Failed(format!(
            "TraceML concluded nothing: {kind}: {summary}"
        )));
    }
    Ok(Verdict::Diagnosis { kind, summary })
}

/// The row on one view of a bundle recorded with `--train-loop`.
#[derive(Debug, Clone)]
pub struct TracemlStep {
    /// The verdict beside the view's bundle ([`verdict_beside`]).
    pub verdict: Option<PathBuf>,
}

impl TracemlStep {
    fn answer(&self, view: &TraceView) -> Result<Explanation, String> {
        let file = self
            .verdict
            .as_ref()
            .ok_or("no TraceML verdict beside this bundle (recorded without --train-loop)")?;
        let kind = match read_verdict(file)? {
            Verdict::Failed(message) => return Err(message),
            Verdict::Diagnosis { kind, .. } => kind,
        };
        let causes = causes_of(&kind);
        let mut x = abstain(view, 0.0);
        for (d, q) in x.diagnoses.iter_mut().zip(&view.queries) {
            if let (Question::Cause, Some(labels)) = (q.question, causes) {
                // Best first, each below the one before (the order of `causes_of`).
                let n = labels.len() as f64;
                d.causes = crate::analysis::ranked(
                    labels
                        .iter()
                        .enumerate()
                        .map(|(i, &l)| (l, (n - i as f64) / n))
                        .collect(),
                );
                d.answer = None;
            }
        }
        Ok(x)
    }
}

/// An explanation that claims nothing (every query abstained).
fn abstain(view: &TraceView, wall_ms: f64) -> Explanation {
    crate::common::abstaining(view, NAME, VERSION, wall_ms)
}

impl Profiler for TracemlStep {
    fn name(&self) -> &str {
        NAME
    }
    fn version(&self) -> &str {
        VERSION
    }
    fn explain(&self, view: &TraceView) -> Explanation {
        let started = Instant::now();
        let mut x = match self.answer(view) {
            Ok(x) => x,
            Err(message) => {
                let mut x = abstain(view, 0.0);
                x.meta.failure = Some(crate::hta::one_line(&message));
                x
            }
        };
        x.meta.wall_ms = started.elapsed().as_secs_f64() * 1000.0;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    }

    #[test]
    fn the_verdict_is_the_bundles_twin_file() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("a.r0.bundle.json.gz");
        assert_eq!(verdict_beside(&bundle), None);
        let v = write(dir.path(), "a.r0.traceml.json", "{}");
        assert_eq!(verdict_beside(&bundle), Some(v));
        assert_eq!(verdict_beside(&dir.path().join("a.r0.view.json")), None);
    }

    #[test]
    fn verdicts_read_as_diagnoses_or_failures() {
        let dir = tempfile::tempdir().unwrap();
        let ok = write(
            dir.path(),
            "ok.json",
            r#"{"tool":"traceml-ai","final_summary":{"step_time":{"diagnosis":{"kind":"INPUT_BOUND","summary":"Input wait is 40%"}}}}"#,
        );
        assert_eq!(
            read_verdict(&ok).unwrap(),
            Verdict::Diagnosis {
                kind: "INPUT_BOUND".into(),
                summary: "Input wait is 40%".into()
            }
        );
        let warm = write(
            dir.path(),
            "warm.json",
            r#"{"final_summary":{"step_time":{"diagnosis":{"kind":"WARMUP","summary":"1 step"}}}}"#,
        );
        assert!(matches!(read_verdict(&warm).unwrap(), Verdict::Failed(m) if m.contains("WARMUP")));
        let crashed = write(dir.path(), "crash.json", r#"{"error":"boom"}"#);
        assert_eq!(
            read_verdict(&crashed).unwrap(),
            Verdict::Failed("TraceML: boom".into())
        );
        let bad = write(dir.path(), "bad.json", r#"{"final_summary":{}}"#);
        assert!(read_verdict(&bad)
            .unwrap_err()
            .contains("step_time.diagnosis"));
        let not_json = write(dir.path(), "nj.json", "nope");
        assert!(read_verdict(&not_json).unwrap_err().contains("not JSON"));
    }

    #[test]
    fn host_side_and_device_side_verdicts_name_different_causes() {
        assert_eq!(
            causes_of("INPUT_BOUND").unwrap()[0],
            CauseLabel::HostCompute
        );
        assert_eq!(
            causes_of("COMPUTE_BOUND").unwrap()[0],
            CauseLabel::StreamBacklog
        );
        assert_eq!(causes_of("BALANCED").unwrap(), &[CauseLabel::None]);
        assert_eq!(causes_of("STRAGGLER"), None);
    }
}
