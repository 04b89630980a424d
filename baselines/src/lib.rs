//! Built-in profilers (SPEC §8) and the external-profiler runner.
//!
//! A profiler reads only a [`TraceView`] and writes an [`Explanation`] against
//! the view's rids; it never sees the bundle or the ground truth. Each baseline
//! is a faithful, competent version of one method, documented in its module:
//!
//! | name | module | evidence |
//! |---|---|---|
//! | `timestamp-join` | [`timestamp_join`] | nearest-timestamp stitching, time overlap |
//! | `cupti-correlation` | [`cupti_correlation`] | correlation ids, same-stream order, device phases |
//! | `ebpf-host` | [`ebpf_host`] | uprobes, scheduler, page faults, stacks |
//! | `nvtx-enclosure` | [`nvtx_enclosure`] | NVTX ranges enclosing execution |
//! | `causal-graph` | [`causal_graph`] | typed partial order from explicit semantics (the reference design) |
//!
//! External profilers run through [`external::ExternalCommand`] (protocol in
//! `baselines/PROTOCOL.md`), isolated by [`sandbox`] (`docs/integrity.md`).
//!
//! Optional third-party analyzers, run only where installed ([`optional_names`]):
//! `hta-critical-path` ([`hta`]): Holistic Trace Analysis' critical path on a Kineto
//! export of the view, through `ExternalCommand`.

pub mod analysis;
pub mod causal_graph;
pub mod cupti_correlation;
pub mod ebpf_host;
pub mod external;
pub mod hta;
pub mod index;
pub mod megakernel;
pub mod nvtx_enclosure;
pub mod sandbox;
pub mod synth;
pub mod timestamp_join;

pub use causal_graph::{why_late, CausalGraph};
pub use cupti_correlation::CuptiCorrelation;
pub use ebpf_host::EbpfHost;
pub use external::{Confinement, ExternalCommand, ExternalError};
pub use hta::{hta_available, HtaCriticalPath};
pub use nvtx_enclosure::NvtxEnclosure;
pub use timestamp_join::TimestampJoin;

use ground_truth::trace::Rid;
use ground_truth::{
    Attribution, ClaimedEdge, Diagnosis, EdgeType, Evidence, Explanation, ExplanationMeta,
    TraceView, SCHEMA_VERSION,
};
use index::{Index, Pos};
use std::time::Instant;

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

/// Optional profilers usable here (third-party analyzers that are installed), in
/// leaderboard order. `hta-critical-path` is listed when HTA imports ([`hta_available`]).
pub fn optional_names() -> Vec<&'static str> {
    let mut v = Vec::new();
    if hta_available() {
        v.push(hta::NAME);
    }
    v
}

/// Whether profiler `name` reads views of this kind (HTA needs CUPTI records; every
/// built-in reads every view).
pub fn reads_view(name: &str, spec: &ground_truth::ViewSpec) -> bool {
    match name {
        hta::NAME => hta::reads_view(spec),
        _ => true,
    }
}

/// A built-in or optional profiler by name (an optional one that is not installed
/// abstains).
pub fn builtin(name: &str) -> Option<Box<dyn Profiler>> {
    Some(match name {
        hta::NAME => Box::new(HtaCriticalPath::default()),
        "timestamp-join" => Box::new(TimestampJoin),
        "cupti-correlation" => Box::new(CuptiCorrelation),
        "ebpf-host" => Box::new(EbpfHost),
        "nvtx-enclosure" => Box::new(NvtxEnclosure),
        "causal-graph" => Box::new(CausalGraph),
        _ => return None,
    })
}

/// What a baseline produced, before metadata is attached.
#[derive(Debug, Default)]
pub(crate) struct Output {
    pub edges: Vec<ClaimedEdge>,
    pub attribution: Vec<Attribution>,
    pub diagnoses: Vec<Diagnosis>,
}

impl Output {
    pub fn edge(
        &mut self,
        ix: &Index,
        src: Pos,
        dst: Pos,
        kind: EdgeType,
        evidence: Evidence,
        confidence: f64,
    ) {
        self.edges
            .push(edge(ix.rid(src), ix.rid(dst), kind, evidence, confidence));
    }
}

pub(crate) fn edge(
    src: Rid,
    dst: Rid,
    kind: EdgeType,
    evidence: Evidence,
    confidence: f64,
) -> ClaimedEdge {
    let mut confidence = confidence.clamp(0.0, 1.0);
    if evidence == Evidence::Inferred {
        confidence = confidence.min(0.95);
    }
    ClaimedEdge {
        src,
        dst,
        kind,
        evidence,
        confidence: (confidence * 1000.0).round() / 1000.0,
    }
}

/// Wraps a baseline's output with metadata and the measured wall time.
pub(crate) fn finish(
    name: &str,
    view: &TraceView,
    started: Instant,
    mut out: Output,
) -> Explanation {
    out.edges
        .sort_by(|a, b| (a.dst, a.src, a.kind).cmp(&(b.dst, b.src, b.kind)));
    out.edges
        .dedup_by(|a, b| a.src == b.src && a.dst == b.dst && a.kind == b.kind);
    out.attribution.sort_by_key(|a| a.rid);
    out.attribution.dedup_by_key(|a| a.rid);
    Explanation {
        schema_version: SCHEMA_VERSION,
        meta: ExplanationMeta {
            profiler: name.to_string(),
            version: VERSION.to_string(),
            view: view.spec,
            wall_ms: started.elapsed().as_secs_f64() * 1000.0,
        },
        edges: out.edges,
        attribution: out.attribution,
        diagnoses: out.diagnoses,
    }
}

/// Records a baseline attributes to requests: every device activity plus the
/// records asked about.
pub(crate) fn attribution_targets(ix: &Index) -> Vec<Pos> {
    let mut v = ix.device_ops.clone();
    v.extend(ix.view.queries.iter().filter_map(|q| ix.pos(q.rid)));
    v.sort_unstable();
    v.dedup();
    v
}

pub(crate) fn attribution(ix: &Index, p: Pos, token: Option<String>) -> Attribution {
    Attribution {
        rid: ix.rid(p),
        request: token.unwrap_or_else(|| Attribution::UNKNOWN.to_string()),
    }
}

/// The answer to a query a baseline cannot say anything about.
pub(crate) fn empty_diagnosis(q: &ground_truth::Query) -> Diagnosis {
    Diagnosis {
        query: q.id.clone(),
        causes: analysis::ranked(vec![(ground_truth::CauseLabel::None, 1.0)]),
        critical_path: Vec::new(),
        phases: ground_truth::Phases::default(),
        complete: false,
        first_unresolved: None,
        answer: None,
    }
}
