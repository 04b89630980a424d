//! The track's pipeline after recording, as `causalbench run` does it for the
//! main suite: for each case, the standard view of its bundle (what kernel-level
//! CUPTI sees), one task view per capture, every track profiler on the views
//! it reads, and the track's scores (`evaluator::megakernel`).

use crate::pack::PackedCase;
use baselines::megakernel::{track_profiler, TRACK_NAMES};
use evaluator::megakernel::{score_track_case, track_leaderboard, TrackCase, TrackRow};
use ground_truth::megakernel::{Capture, TaskTelemetry, TaskView};
use ground_truth::view::LossSpec;
use ground_truth::{Bundle, Collectors, Mode, TraceView, ViewSpec, SCHEMA_VERSION};

/// The view every track profiler's base is: CUPTI records, instrumented, no loss.
pub fn base_view(bundle: &Bundle) -> TraceView {
    views::derive(
        bundle,
        ViewSpec {
            collectors: Collectors::Cupti,
            mode: Mode::Instrumented,
            loss: LossSpec::None,
        },
    )
    .view
}

fn find<'a>(caps: &'a [Capture], name: &str) -> Option<&'a Capture> {
    caps.iter().find(|c| c.config.name == name)
}

/// The task view of one capture (`None`: kernel-level records only).
pub fn task_view(base: &TraceView, t: &TaskTelemetry, monitor: Option<&str>) -> TaskView {
    TaskView {
        schema_version: SCHEMA_VERSION,
        base: base.clone(),
        workers: t.workers,
        tasks: t.tasks,
        capture: monitor.and_then(|m| find(&t.captures, m)).cloned(),
        reference: monitor.and_then(|m| find(&t.reference, m)).cloned(),
        reference_kernel_ns: find(&t.reference, "none").map(|c| c.kernel_ns).unwrap_or(0),
    }
}

/// Every track profiler on every capture it reads, scored.
pub fn evaluate(cases: &[PackedCase]) -> Vec<TrackCase> {
    let mut out = Vec::new();
    for c in cases {
        let base = base_view(&c.bundle);
        let mut monitors: Vec<Option<&str>> = vec![None];
        monitors.extend(
            c.telemetry
                .captures
                .iter()
                .map(|x| Some(x.config.name.as_str())),
        );
        for name in TRACK_NAMES {
            let Some(p) = track_profiler(name) else {
                continue;
            };
            for &m in &monitors {
                if !p.reads(m) {
                    continue;
                }
                let view = task_view(&base, &c.telemetry, m);
                let e = p.explain_tasks(&view);
                out.push(score_track_case(&c.bundle, &c.telemetry, &view, &e).0);
            }
        }
    }
    out
}

/// Scores and their leaderboard.
pub fn leaderboard(cases: &[PackedCase]) -> (Vec<TrackCase>, Vec<TrackRow>) {
    let scores = evaluate(cases);
    let rows = track_leaderboard(&scores);
    (scores, rows)
}
