//! What the built-in profilers share: assembling an explanation (edges,
//! attribution, diagnoses, metadata) and the evidence several of them read the
//! same way (correlation-id launch edges, a query's device op, device-phase
//! diagnosis, NVTX names). Profilers import from here, never from each other.

use crate::analysis::{self, ranked, Peers};
use crate::index::{Index, Pos};
use crate::VERSION;
use ground_truth::trace::{Record, Rid, SyncType};
use ground_truth::SharedStr;
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
    // A profiler may hand them over in order already (causal-graph does): then the
    // stable sort, and its scratch copy of half the claims, is skipped.
    let order = |e: &ClaimedEdge| (e.dst, e.src, e.kind);
    if !out.edges.is_sorted_by_key(order) {
        out.edges.sort_by_key(order);
    }
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
            failure: None,
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

pub(crate) fn attribution(ix: &Index, p: Pos, token: Option<impl Into<SharedStr>>) -> Attribution {
    Attribution {
        rid: ix.rid(p),
        request: token.map_or_else(Attribution::unknown_request, Into::into),
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

/// `profiler`'s explanation of `view` that claims nothing: no edges, no causes,
/// nothing complete (an analyzer that abstains on every query of the view).
pub(crate) fn abstaining(
    view: &ground_truth::TraceView,
    profiler: &str,
    version: &str,
    wall_ms: f64,
) -> ground_truth::Explanation {
    ground_truth::Explanation {
        schema_version: ground_truth::SCHEMA_VERSION,
        meta: ground_truth::ExplanationMeta {
            profiler: profiler.to_string(),
            version: version.to_string(),
            view: view.spec,
            wall_ms,
            failure: None,
        },
        edges: Vec::new(),
        attribution: Vec::new(),
        diagnoses: view
            .queries
            .iter()
            .map(|q| Diagnosis {
                causes: Vec::new(),
                ..empty_diagnosis(q)
            })
            .collect(),
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
    ix.activities(c)?
        .iter()
        .copied()
        .find(|&a| ix.rec(a).is_device_op())
}

/// CUPTI's CUDA_EVENT and SYNCHRONIZATION records as Kineto keeps them: each stream
/// wait joined to the event record it waited on by `event_sync_id` (an explicit
/// `event` edge), and each stream's waits in enqueue order.
#[derive(Default)]
pub(crate) struct CuptiWaits {
    /// Stream → (enqueue time: its API call's start, wait record, joined event record).
    by_stream: HashMap<u32, Vec<(u64, Pos, Option<Pos>)>>,
}

/// Event record → stream wait edges by `event_sync_id` (never by the raw handle).
pub(crate) fn event_edges(ix: &Index, out: &mut Output) -> CuptiWaits {
    let mut by_esid: HashMap<u64, Pos> = HashMap::new();
    for (i, r) in ix.recs.iter().enumerate() {
        if let Record::CudaEvent { event_sync_id, .. } = r {
            if *event_sync_id != 0 {
                by_esid.insert(*event_sync_id, i as Pos);
            }
        }
    }
    let mut w = CuptiWaits::default();
    for (i, r) in ix.recs.iter().enumerate() {
        let Record::Sync {
            sync_type: SyncType::StreamWaitEvent,
            stream,
            event_sync_id,
            start,
            ..
        } = r
        else {
            continue;
        };
        let p = i as Pos;
        let ev = (*event_sync_id != 0)
            .then(|| by_esid.get(event_sync_id).copied())
            .flatten();
        if let Some(e) = ev {
            out.edge(ix, e, p, EdgeType::Event, Evidence::Explicit, 1.0);
        }
        let enq = ix.launch_api(p).map(|a| ix.start(a)).unwrap_or(*start);
        w.by_stream.entry(*stream).or_default().push((enq, p, ev));
    }
    for v in w.by_stream.values_mut() {
        v.sort_unstable();
    }
    w
}

/// What a late-submitted op waited for, read from CUPTI records: a stream wait
/// enqueued on its stream after its stream predecessor whose event completed after
/// that predecessor ended ⇒ the event (path: event record, wait); otherwise the
/// stream predecessor.
fn queue_gate(
    ix: &Index,
    waits: &CuptiWaits,
    stream_pred: &HashMap<Pos, Pos>,
    op: Pos,
) -> (CauseLabel, Vec<Pos>) {
    let enq = |p: Pos| ix.launch_api(p).map(|a| ix.start(a)).unwrap_or(ix.start(p));
    let pred = stream_pred.get(&op).copied();
    let lo = pred.map(enq).unwrap_or(0);
    let pred_end = pred.map(|p| ix.end(p)).unwrap_or(0);
    let s = ix.rec(op).stream().unwrap_or(0);
    let gate = waits.by_stream.get(&s).and_then(|v| {
        v.iter()
            .filter(|(t, _, e)| *t >= lo && *t <= enq(op) && e.is_some())
            .filter_map(|&(_, w, e)| e.map(|e| (w, e)))
            .filter(|&(_, e)| ix.start(e) >= pred_end)
            .max_by_key(|&(_, e)| ix.start(e))
    });
    match (gate, pred) {
        (Some((w, e)), _) => (CauseLabel::EventWait, vec![e, w]),
        (None, Some(sp)) => {
            let mut path: Vec<Pos> = ix.launch_api(sp).into_iter().collect();
            path.push(sp);
            (CauseLabel::StreamBacklog, path)
        }
        (None, None) => (CauseLabel::StreamBacklog, vec![]),
    }
}

/// Gap between a call and the previous API call of its thread (CUPTI API records).
fn api_gap(ix: &Index, api: Pos) -> Option<f64> {
    let th = ix.thread(ix.rec(api).tid()?)?;
    let k = th.apis.partition_point(|&a| ix.start(a) < ix.start(api));
    let prev = th.apis[..k].iter().rev().find(|&&a| a != api)?;
    Some(ix.start(api).saturating_sub(ix.end(*prev)) as f64)
}

/// Diagnosis from what CUPTI records show (the Kineto/HTA reading): the device
/// phases and the launch gap of the API record against peers; a late
/// queued→submitted is followed one hop to its stream wait's event or its stream
/// predecessor; a graph node's wait after its launch is its graph dependency; a
/// launch later than its peers' (CPU-bound) is `host_compute`, since CUPTI cannot
/// tell why the host was late.
pub(crate) fn device_phase_diagnosis(
    ix: &Index,
    peers: &Peers,
    stream_pred: &HashMap<Pos, Pos>,
    waits: &CuptiWaits,
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
    let api = ix.launch_api(op);
    let graph_node =
        matches!(ix.rec(op), Record::Kernel { detail, .. } if detail.graph_node_id != 0);
    let launch_wait = |k: Pos| {
        ix.launch_api(k)
            .map(|a| ix.start(k).saturating_sub(ix.end(a)) as f64)
    };
    if graph_node {
        ph.queued_to_submitted = analysis::excess(
            launch_wait(op),
            pe.iter().filter_map(|&k| launch_wait(k)).collect(),
            0.0,
        );
    }
    if !pe.is_empty() {
        ph.host_enqueue = analysis::excess(
            api.and_then(|a| api_gap(ix, a)),
            pe.iter()
                .filter_map(|&k| ix.launch_api(k).and_then(|a| api_gap(ix, a)))
                .collect(),
            0.0,
        );
    }
    let (d, v) = analysis::dominant(&ph);
    let mut gate_path = Vec::new();
    let causes = if d == 0 && analysis::significant(v, 0.0) {
        vec![
            (CauseLabel::HostCompute, v),
            (CauseLabel::CpuDeschedule, v * 0.5),
        ]
    } else if d == 1 && graph_node && analysis::significant(v, typical) {
        vec![
            (CauseLabel::GraphDependency, v),
            (CauseLabel::StreamBacklog, v * 0.3),
        ]
    } else {
        ph.host_enqueue = 0.0;
        let mut c = analysis::device_phase_causes(ix, op, &ph, typical);
        if c.first().is_some_and(|c| c.0 == CauseLabel::StreamBacklog) {
            let (label, path) = queue_gate(ix, waits, stream_pred, op);
            gate_path = path;
            if label != CauseLabel::StreamBacklog {
                c.insert(0, (label, v * 2.0));
            }
        }
        c
    };
    if causes.first().is_some_and(|c| c.0 == CauseLabel::None) {
        ph = Default::default();
    }
    let mut path: Vec<Rid> = gate_path.iter().map(|&x| ix.rid(x)).collect();
    if path.is_empty() {
        if let Some(a) = api {
            path.push(ix.rid(a));
        }
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
