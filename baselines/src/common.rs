//! What the built-in profilers share: assembling an explanation (edges,
//! attribution, diagnoses, metadata) and the evidence several of them read the
//! same way (correlation-id launch edges, a query's device op, device-phase
//! diagnosis, NVTX names). Profilers import from here, never from each other.

use crate::analysis::{self, ranked, Peers};
use crate::index::{Index, Pos};
use crate::VERSION;
use ground_truth::trace::{Record, Rid};
use ground_truth::{
    Attribution, CauseLabel, ClaimedEdge, Diagnosis, EdgeType, Evidence, Explanation,
    ExplanationMeta, Query, TraceView, SCHEMA_VERSION,
};
use std::collections::HashMap;
use std::time::Instant;

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

/// Launch edges by correlation id and stream order of device ops by start;
/// returns each op's stream predecessor.
pub(crate) fn correlation_edges(ix: &Index, out: &mut Output) -> HashMap<Pos, Pos> {
    let mut pred = HashMap::new();
    let mut last: HashMap<u32, Pos> = HashMap::new();
    for &op in &ix.device_ops {
        if let Some(api) = ix.launch_api(op) {
            out.edge(ix, api, op, EdgeType::Launch, Evidence::Explicit, 1.0);
        }
        let s = ix.rec(op).stream().unwrap_or(0);
        if let Some(prev) = last.insert(s, op) {
            out.edge(ix, prev, op, EdgeType::StreamOrder, Evidence::Observed, 1.0);
            pred.insert(op, prev);
        }
    }
    pred
}

/// The device op a query is about: the record itself, or the activity of an api call.
pub(crate) fn device_op_of(ix: &Index, p: Pos) -> Option<Pos> {
    let r = ix.rec(p);
    if r.is_device_op() {
        return Some(p);
    }
    let c = r.correlation_id()?;
    ix.acts_by_corr
        .get(&c)?
        .iter()
        .copied()
        .find(|&a| ix.rec(a).is_device_op())
}

/// Diagnosis from device phases only.
pub(crate) fn device_phase_diagnosis(
    ix: &Index,
    peers: &Peers,
    stream_pred: &HashMap<Pos, Pos>,
    q: &Query,
    answer: Option<String>,
) -> Diagnosis {
    let Some(p) = ix.pos(q.rid) else {
        return empty_diagnosis(q);
    };
    let Some(op) = device_op_of(ix, p) else {
        return Diagnosis {
            causes: ranked(vec![(CauseLabel::None, 1.0)]),
            critical_path: vec![ix.rid(p)],
            answer,
            ..empty_diagnosis(q)
        };
    };
    let pe = peers.of(ix, op);
    let typical = analysis::typical_latency(ix, &pe);
    let mut ph = analysis::device_excess(ix, &pe, op);
    let causes = analysis::device_phase_causes(ix, op, &ph, typical);
    if causes.first().is_some_and(|c| c.0 == CauseLabel::None) {
        ph = Default::default();
    }
    let api = ix.launch_api(op);
    let mut path = Vec::new();
    if causes
        .first()
        .is_some_and(|c| c.0 == CauseLabel::StreamBacklog)
    {
        if let Some(&sp) = stream_pred.get(&op) {
            if let Some(a) = ix.launch_api(sp) {
                path.push(ix.rid(a));
            }
            path.push(ix.rid(sp));
        }
    } else if let Some(a) = api {
        path.push(ix.rid(a));
    }
    path.push(ix.rid(op));
    if op != p {
        path.push(ix.rid(p));
    }
    Diagnosis {
        query: q.id.clone(),
        causes: ranked(causes),
        critical_path: path,
        phases: ph,
        complete: api.is_some() || !ix.has_api_records(),
        first_unresolved: (api.is_none() && ix.has_api_records()).then(|| ix.rid(op)),
        answer,
    }
}

/// The name of an NVTX range record.
pub(crate) fn nvtx_name(ix: &Index, n: Pos) -> String {
    match ix.rec(n) {
        Record::Nvtx { name, .. } => name.to_string(),
        _ => String::new(),
    }
}
