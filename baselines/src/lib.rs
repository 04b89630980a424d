//! Built-in profilers (docs/design.md) and the external-profiler runner.
//!
//! A profiler reads only a [`TraceView`] and writes an [`Explanation`] against
//! the view's rids; it never sees the bundle or the ground truth. Each baseline
//! is a faithful, competent version of one method, documented in its module:
//!
//! | name | module | evidence |
//! |---|---|---|
//! | `timestamp-join` | [`timestamp_join`] | nearest-timestamp stitching, time overlap |
//! | `cupti-correlation` | [`cupti_correlation`] | correlation ids, same-stream order, event and sync records, device phases |
//! | `ebpf-host` | [`ebpf_host`] | uprobes, scheduler, page faults, stacks |
//! | `nvtx-enclosure` | [`nvtx_enclosure`] | NVTX ranges open at launch time, CUPTI records |
//! | `causal-graph` | [`causal_graph`] | typed partial order from explicit semantics (the reference design) |
//!
//! `baselines/README.md` describes each one (the tool it models, what it cannot see, its
//! known failures) and the reference's rules.
//!
//! External profilers run through [`external::ExternalCommand`] (protocol in
//! `baselines/PROTOCOL.md`), isolated by [`sandbox`] (`docs/integrity.md`).
//!
//! Leakage probes ([`probes`], [`probe_names`]) answer from names, record kinds or
//! structure alone; they are the floor of the leaderboard, never in the built-in set.
//!
//! Optional third-party analyzers, run only where installed ([`optional_names`]):
//! `hta-critical-path` ([`hta`]): Holistic Trace Analysis' critical path on a Kineto
//! export of the view, or on a `kineto` view on the native trace beside the bundle
//! ([`hta_native`]), through its adapter process; `hta-idle-time` and `hta-launch-stats`
//! ([`hta_analyses`]): HTA's idle-time breakdown and kernel-launch statistics, on native
//! Kineto traces only; `traceml-step` ([`traceml`]): TraceML's end-of-run step-time
//! verdict, recorded beside a `torch record --train-loop` bundle.

pub mod analysis;
pub mod causal_graph;
pub mod cgroup;
mod common;
pub mod cupti_correlation;
pub mod ebpf_host;
pub mod external;
pub mod external_server;
pub mod hta;
pub mod hta_analyses;
pub mod hta_native;
pub mod index;
mod keeper;
pub mod kineto_flows;
pub mod megakernel;
mod namespaces;
pub mod nvtx_enclosure;
pub mod probes;
pub mod sandbox;
pub mod synth;
pub mod timestamp_join;
pub mod traceml;
pub mod zygote;

pub use causal_graph::{why_late, CausalGraph};
pub use cupti_correlation::CuptiCorrelation;
pub use ebpf_host::EbpfHost;
pub use external::{Confinement, ExternalCommand, ExternalError};
pub use hta::{hta_available, HtaCriticalPath};
pub use nvtx_enclosure::NvtxEnclosure;
pub use timestamp_join::TimestampJoin;

use ground_truth::{Explanation, TraceView};

/// Version written into every built-in profiler's explanation.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A profiler: reads one view, writes one explanation.
pub trait Profiler: Send + Sync {
    fn name(&self) -> &str;
    fn version(&self) -> &str;
    /// Explains a view. `meta.wall_ms` is the measured analysis time.
    fn explain(&self, view: &TraceView) -> Explanation;
}

const NAMES: &[&str] = &[
    "timestamp-join",
    "cupti-correlation",
    "ebpf-host",
    "nvtx-enclosure",
    "causal-graph",
];

/// Names of the built-in profilers, in leaderboard order (reference design last).
pub fn builtin_names() -> &'static [&'static str] {
    NAMES
}

/// Names of the leakage probes ([`probes`]): run only when asked for
/// (`--profilers probes`), shown apart on the leaderboard.
pub fn probe_names() -> &'static [&'static str] {
    probes::NAMES
}

/// Optional profilers usable here (third-party analyzers that are installed), in
/// leaderboard order. `hta-critical-path` is listed when HTA imports ([`hta_available`]).
pub fn optional_names() -> Vec<&'static str> {
    // Built in, but only for Kineto's traces (`kineto` views).
    let mut v = vec![kineto_flows::NAME];
    if hta_available() {
        v.push(hta::NAME);
        v.extend(hta_analyses::NAMES);
    }
    // Built in: it reads the verdict TraceML wrote while the run was recorded.
    v.push(traceml::NAME);
    v
}

/// What a reader of a third-party row must know (its known limits, what it abstains
/// on), by profiler name: `leaderboard.md` ends with the notes of its rows.
pub fn row_notes() -> Vec<(&'static str, &'static str)> {
    let mut notes = vec![(hta::NAME, hta::ROW_NOTE)];
    for name in hta_analyses::NAMES {
        let analysis = hta_analyses::Analysis::of_name(name).expect("its own names");
        notes.push((name, analysis.note()));
    }
    notes.push((traceml::NAME, traceml::ROW_NOTE));
    notes
}

/// Whether profiler `name` reads views of this kind (HTA needs CUPTI records; every
/// built-in reads every view).
pub fn reads_view(name: &str, spec: &ground_truth::ViewSpec) -> bool {
    match name {
        hta::NAME => hta::reads_view(spec),
        name if hta_analyses::Analysis::of_name(name).is_some() => hta_analyses::reads_view(spec),
        kineto_flows::NAME => kineto_flows::reads_view(spec),
        traceml::NAME => traceml::reads_view(spec),
        _ => true,
    }
}

/// The profiler `name` for one view of the bundle read from `bundle_file` (a corpus
/// file; `None` for a bundle recorded in memory), or `None` when it does not read that
/// view: `hta-critical-path` reads a `kineto` view from the native Kineto trace
/// beside the bundle file ([`hta_native`]), so not at all without one.
pub fn profiler_for(
    name: &str,
    spec: &ground_truth::ViewSpec,
    bundle_file: Option<&std::path::Path>,
) -> Option<Box<dyn Profiler>> {
    if !reads_view(name, spec) {
        return None;
    }
    if name == hta::NAME && spec.collectors == ground_truth::Collectors::Kineto {
        let trace = bundle_file.and_then(hta_native::native_trace_beside)?;
        return Some(Box::new(HtaCriticalPath::on_native_trace(trace)));
    }
    if name == traceml::NAME {
        // Only bundles recorded with TraceML in their training loop have a verdict.
        let verdict = bundle_file.and_then(traceml::verdict_beside)?;
        return Some(Box::new(traceml::TracemlStep {
            verdict: Some(verdict),
        }));
    }
    if let Some(analysis) = hta_analyses::Analysis::of_name(name) {
        let trace = bundle_file.and_then(hta_native::native_trace_beside)?;
        return Some(Box::new(hta_analyses::HtaAnalysis::new(
            analysis,
            Some(trace),
        )));
    }
    builtin(name)
}

/// A built-in, optional or probe profiler by name (an optional one that is not
/// installed abstains).
pub fn builtin(name: &str) -> Option<Box<dyn Profiler>> {
    if let Some(p) = probes::probe(name) {
        return Some(p);
    }
    if let Some(analysis) = hta_analyses::Analysis::of_name(name) {
        return Some(Box::new(hta_analyses::HtaAnalysis::new(analysis, None)));
    }
    Some(match name {
        hta::NAME => Box::new(HtaCriticalPath::default()),
        kineto_flows::NAME => Box::new(kineto_flows::KinetoFlows),
        traceml::NAME => Box::new(traceml::TracemlStep { verdict: None }),
        "timestamp-join" => Box::new(TimestampJoin),
        "cupti-correlation" => Box::new(CuptiCorrelation),
        "ebpf-host" => Box::new(EbpfHost),
        "nvtx-enclosure" => Box::new(NvtxEnclosure),
        "causal-graph" => Box::new(CausalGraph),
        _ => return None,
    })
}
