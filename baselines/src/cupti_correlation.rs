//! `cupti-correlation`: what a CUPTI-based tool (Nsight Systems style, HTA,
//! Kineto) derives from CUPTI alone.
//!
//! **Evidence it uses**: correlation ids API → activity (`launch`, explicit; a
//! graph launch's kernels all hang off the launch call), same-stream order of
//! kernels, copies and memsets by start time (`stream_order`, observed), and the
//! device phases CUPTI reports (queued → submitted → start → end). Request
//! identity is per thread: the request of a device op is the last request token
//! seen *on its launching thread* through external correlation records, up to
//! and including its launch call; `unknown` when there is none.
//!
//! **Causes**: the dominant device phase over peers (same operation elsewhere in
//! the view): queued→submitted ⇒ stream backlog, submitted→start ⇒ occupancy
//! pressure (kernels) or PCIe/copy-engine contention (copies), execution ⇒ slow
//! copy / occupancy; nothing anomalous on the device ⇒ `none`.
//!
//! **What it cannot know**: host causes (no scheduler, page-fault or handoff
//! evidence: a late launch looks like nothing), event and graph dependencies
//! (not followed), identity across host threads, call sites. It marks a path
//! incomplete only when a device op's own launch call is absent.

use crate::analysis::{self, ranked, Peers};
use crate::index::{Index, Pos};
use crate::{attribution, attribution_targets, finish, Output, Profiler};
use ground_truth::trace::Record;
use ground_truth::{CauseLabel, Diagnosis, EdgeType, Evidence, Explanation, Query, TraceView};
use std::collections::HashMap;
use std::time::Instant;

pub struct CuptiCorrelation;

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
        return crate::empty_diagnosis(q);
    };
    let Some(op) = device_op_of(ix, p) else {
        return Diagnosis {
            causes: ranked(vec![(CauseLabel::None, 1.0)]),
            critical_path: vec![ix.rid(p)],
            answer,
            ..crate::empty_diagnosis(q)
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

impl Profiler for CuptiCorrelation {
    fn name(&self) -> &str {
        "cupti-correlation"
    }
    fn version(&self) -> &str {
        crate::VERSION
    }
    fn explain(&self, view: &TraceView) -> Explanation {
        let t0 = Instant::now();
        let ix = Index::new(view);
        let peers = Peers::new(&ix);
        let mut out = Output::default();
        let pred = correlation_edges(&ix, &mut out);
        // Last request token seen on each thread, replayed in call order.
        let mut token_at_call: HashMap<Pos, String> = HashMap::new();
        let mut tids: Vec<u32> = ix.threads.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            let mut cur: Option<String> = None;
            for &a in &ix.threads[&tid].apis {
                if let Some(t) = ix
                    .rec(a)
                    .correlation_id()
                    .and_then(|c| ix.token_by_corr.get(&c))
                {
                    cur = Some(t.clone());
                }
                if let Some(t) = &cur {
                    token_at_call.insert(a, t.clone());
                }
            }
        }
        for p in attribution_targets(&ix) {
            let call = match ix.rec(p) {
                Record::Api { .. } => Some(p),
                _ => ix.launch_api(p),
            };
            out.attribution.push(attribution(
                &ix,
                p,
                call.and_then(|c| token_at_call.get(&c).cloned()),
            ));
        }
        for q in &view.queries {
            out.diagnoses
                .push(device_phase_diagnosis(&ix, &peers, &pred, q, None));
        }
        finish(self.name(), view, t0, out)
    }
}
