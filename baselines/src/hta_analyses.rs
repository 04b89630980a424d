//! `hta-idle-time` and `hta-launch-stats`: two further analyses of Meta's Holistic
//! Trace Analysis (HTA), each scored as its own row beside `hta-critical-path`
//! ([`crate::hta`]), run as HTA's users run them: on the native Kineto trace
//! torch.profiler wrote beside a bundle (`kineto` views without synthetic loss,
//! [`crate::hta_native::reads_natively`]), never on an export.
//!
//! - `hta-idle-time`: `TraceAnalysis.get_idle_time_breakdown` (per CUDA stream: host
//!   wait, kernel wait, other), its categories on the queried op's stream as causes.
//! - `hta-launch-stats`: `TraceAnalysis.get_cuda_kernel_launch_stats` (per launched op:
//!   the launch call's duration and the launch delay, with HTA's outlier cut-offs).
//!
//! Both run in Python (`baselines/hta/hta_analyses.py`, embedded, whose docstring says
//! exactly what HTA is asked and how its answer maps to cause labels) through one
//! adapter process per run, like the critical path's ([`crate::hta`]'s server). They
//! answer `cause` questions about device ops only and abstain on every other question
//! and on host calls ([`IDLE_TIME_NOTE`], [`LAUNCH_STATS_NOTE`]: the leaderboard says
//! so); an exception HTA raises is the view's outcome (`meta.failure`, a crash).

use crate::hta::{abstain, hta_available, one_line, python, Server, ViewDir};
use crate::{Profiler, VERSION};
use ground_truth::{Explanation, Readable, TraceView, ViewSpec};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const IDLE_TIME: &str = "hta-idle-time";
pub const LAUNCH_STATS: &str = "hta-launch-stats";
/// The rows of this module, in leaderboard order.
pub const NAMES: &[&str] = &[IDLE_TIME, LAUNCH_STATS];

/// What a reader of `hta-idle-time`'s rows must know.
pub const IDLE_TIME_NOTE: &str = "HTA 0.5's idle-time breakdown \
    (`get_idle_time_breakdown`) on the native Kineto trace (loss-free `kineto` views only). \
    It answers per CUDA stream, not per op: the queried op's stream's idle categories, \
    largest first, are its causes (host wait -> host_compute, kernel wait -> stream_backlog, \
    other -> event_wait). It abstains on host calls and on request, call-site and operator \
    questions, and on a stream it finds never idle.";

/// What a reader of `hta-launch-stats`' rows must know.
pub const LAUNCH_STATS_NOTE: &str = "HTA 0.5's kernel-launch statistics \
    (`get_cuda_kernel_launch_stats`, default cut-offs: 50 us runtime, 100 us launch delay) \
    on the native Kineto trace (loss-free `kineto` views only). It lists ops launched by \
    `cudaLaunchKernel(ExC)`, `cudaMemcpyAsync` and `cudaMemsetAsync` only: the PyTorch \
    track's CuPy kernels, launched by the driver's `cuLaunchKernel`, have no row and are \
    abstained, as are host calls and request, call-site and operator questions. A \
    launch-delay outlier names the device-side causes with equal scores (it does not say \
    which resource held the op); a long launch call implicit_sync (copies) or host_compute; \
    a prompt start host_compute.";

/// Which of HTA's analyses a row runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Analysis {
    IdleTime,
    LaunchStats,
}

impl Analysis {
    pub fn of_name(name: &str) -> Option<Analysis> {
        match name {
            IDLE_TIME => Some(Analysis::IdleTime),
            LAUNCH_STATS => Some(Analysis::LaunchStats),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Analysis::IdleTime => IDLE_TIME,
            Analysis::LaunchStats => LAUNCH_STATS,
        }
    }
    /// The adapter's name for it (`"analysis"` of a request).
    fn request_name(self) -> &'static str {
        match self {
            Analysis::IdleTime => "idle-time",
            Analysis::LaunchStats => "launch-stats",
        }
    }
    /// The row's note on the leaderboard.
    pub fn note(self) -> &'static str {
        match self {
            Analysis::IdleTime => IDLE_TIME_NOTE,
            Analysis::LaunchStats => LAUNCH_STATS_NOTE,
        }
    }
}

/// The adapter script, shipped inside the binary.
pub const ADAPTER: &str = include_str!("../hta/hta_analyses.py");

/// Does this analysis read views of this kind? Only Kineto's native trace.
pub fn reads_view(spec: &ViewSpec) -> bool {
    crate::hta_native::reads_natively(spec)
}

/// One of HTA's further analyses on the native trace of one bundle.
#[derive(Debug, Clone)]
pub struct HtaAnalysis {
    pub analysis: Analysis,
    /// Kineto's native trace beside the view's bundle; without one the analysis
    /// cannot answer (it never reads an export).
    pub native_trace: Option<PathBuf>,
    pub timeout: Duration,
}

impl HtaAnalysis {
    pub fn new(analysis: Analysis, native_trace: Option<PathBuf>) -> Self {
        HtaAnalysis {
            analysis,
            native_trace,
            timeout: Duration::from_secs(600),
        }
    }

    fn run(&self, view: &TraceView) -> Result<Explanation, String> {
        let trace = self.native_trace.as_ref().ok_or(
            "no native Kineto trace beside this bundle: HTA's idle-time and launch analyses \
             read Kineto's own trace file, never an export",
        )?;
        let dir = ViewDir::new(view)?;
        let activities = kineto::read_activities(trace).map_err(|e| e.to_string())?;
        let events: serde_json::Map<String, serde_json::Value> =
            crate::hta_native::rids_of_events(&activities, view)
                .into_iter()
                .map(|(index, rid)| (index.to_string(), rid.into()))
                .collect();
        let rpath = dir.path().join("rids.json");
        std::fs::write(&rpath, serde_json::json!({ "events": events }).to_string())
            .map_err(|e| format!("cannot write {}: {e}", rpath.display()))?;
        let request = serde_json::json!({
            "analysis": self.analysis.request_name(),
            "kineto": trace, "view": dir.view, "out": dir.out, "rids": rpath,
        });
        let reply = ask(&request.to_string(), self.timeout)?;
        let reply: serde_json::Value = serde_json::from_str(&reply)
            .map_err(|e| format!("the HTA adapter's reply `{reply}` is not JSON: {e}"))?;
        if let Some(error) = reply.get("error") {
            return Err(format!("the HTA adapter failed: {error}"));
        }
        let x = Explanation::read(&dir.out).map_err(|e| e.to_string())?;
        x.check_against(&dir.out, view).map_err(|e| e.to_string())?;
        if x.meta.profiler != self.analysis.name() {
            return Err(format!(
                "the HTA adapter answered as `{}`, not `{}`",
                x.meta.profiler,
                self.analysis.name()
            ));
        }
        Ok(x)
    }
}

/// The run's adapter process for these analyses, started on first use and again
/// after a failure. One suffices: an analysis of one native trace takes tens of
/// milliseconds once HTA is imported.
static SERVER: Mutex<Option<Server>> = Mutex::new(None);

fn ask(request: &str, timeout: Duration) -> Result<String, String> {
    let mut server = SERVER.lock().unwrap_or_else(|p| p.into_inner());
    if server.is_none() {
        *server = Some(Server::start_script("hta_analyses.py", ADAPTER)?);
    }
    let answer = server
        .as_mut()
        .expect("started above")
        .ask(request, timeout);
    if answer.is_err() {
        // A server that failed once is not trusted with the next view.
        *server = None;
    }
    answer
}

impl Profiler for HtaAnalysis {
    fn name(&self) -> &str {
        self.analysis.name()
    }
    fn version(&self) -> &str {
        VERSION
    }
    fn explain(&self, view: &TraceView) -> Explanation {
        static TOLD: AtomicBool = AtomicBool::new(false);
        let started = Instant::now();
        let named = |mut x: Explanation| {
            x.meta.profiler = self.analysis.name().to_string();
            x
        };
        if !hta_available() {
            if !TOLD.swap(true, Ordering::SeqCst) {
                eprintln!(
                    "causalbench: {}: HolisticTraceAnalysis is not importable by `{}`; \
                     its explanations abstain. Install it with `bash baselines/hta/setup-hta.sh`.",
                    NAMES.join(", "),
                    python()
                );
            }
            return named(abstain(
                view,
                "unavailable",
                started.elapsed().as_secs_f64() * 1000.0,
            ));
        }
        match self.run(view) {
            Ok(x) => x,
            // The tool did not answer: a crash of its own, with the reason.
            Err(e) => {
                let mut x = named(abstain(
                    view,
                    "failed",
                    started.elapsed().as_secs_f64() * 1000.0,
                ));
                x.meta.failure = Some(one_line(&e));
                x
            }
        }
    }
}
