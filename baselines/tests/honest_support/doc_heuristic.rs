//! A profiler written from `baselines/PROTOCOL.md` and `docs/records.md` alone, with no
//! causal graph: the op's launch call by correlation id, its same-stream predecessor,
//! and the nearest host call before the launch on the launching thread. It is the bar
//! every built-in baseline must clear in the views its approach reads (`honest.rs`),
//! never a built-in itself.

use baselines::Profiler;
use ground_truth::trace::{Record, SwitchReason};
use ground_truth::{
    Attribution, CauseLabel, ClaimedEdge, Diagnosis, EdgeType, Evidence, Explanation,
    ExplanationMeta, Phases, RankedCause, TraceView, SCHEMA_VERSION,
};
use std::collections::HashMap;

/// Gaps above this are "late" (ns): a guess, as a doc reader would make it.
const LATE_NS: u64 = 100_000;

pub struct DocHeuristic;

fn is_call(r: &Record) -> bool {
    matches!(r, Record::Api { .. } | Record::Uprobe { .. })
}

impl Profiler for DocHeuristic {
    fn name(&self) -> &str {
        "doc-heuristic"
    }
    fn version(&self) -> &str {
        "1"
    }
    fn explain(&self, view: &TraceView) -> Explanation {
        let recs = &view.records;
        let by_rid: HashMap<u64, &Record> = recs.iter().map(|r| (r.rid(), r)).collect();
        let mut api_of: HashMap<u32, &Record> = HashMap::new();
        let mut token_of: HashMap<u32, String> = HashMap::new();
        for r in recs {
            match r {
                Record::Api { correlation_id, .. } => {
                    api_of.insert(*correlation_id, r);
                }
                Record::ExternalCorrelation {
                    external_id,
                    correlation_id,
                    ..
                } => {
                    token_of.insert(*correlation_id, external_id.to_string());
                }
                _ => {}
            }
        }
        let ops: Vec<&Record> = recs.iter().filter(|r| r.is_device_op()).collect();
        let mut calls: Vec<&Record> = recs.iter().filter(|r| is_call(r)).collect();
        calls.sort_by_key(|r| r.interval().0);
        let stream_pred = |op: &Record| {
            ops.iter()
                .filter(|o| o.stream() == op.stream() && o.interval().0 < op.interval().0)
                .max_by_key(|o| o.interval().0)
                .copied()
        };
        let launch = |op: &Record| op.correlation_id().and_then(|c| api_of.get(&c).copied());
        let prev_call = |call: &Record| {
            calls
                .iter()
                .filter(|c| c.tid() == call.tid() && c.interval().1 <= call.interval().0)
                .max_by_key(|c| c.interval().1)
                .copied()
        };
        let mut edges = Vec::new();
        let mut attribution = Vec::new();
        for op in &ops {
            if let Some(a) = launch(op) {
                edges.push(edge(
                    a.rid(),
                    op.rid(),
                    EdgeType::Launch,
                    Evidence::Explicit,
                ));
            }
            if let Some(p) = stream_pred(op) {
                edges.push(edge(
                    p.rid(),
                    op.rid(),
                    EdgeType::StreamOrder,
                    Evidence::Observed,
                ));
            }
            let tok = op.correlation_id().and_then(|c| token_of.get(&c).cloned());
            attribution.push(Attribution {
                rid: op.rid(),
                request: tok.map_or_else(Attribution::unknown_request, Into::into),
            });
        }
        let mut diagnoses = Vec::new();
        for q in &view.queries {
            let Some(&rec) = by_rid.get(&q.rid) else {
                continue;
            };
            let op = if rec.is_device_op() {
                Some(rec)
            } else {
                rec.correlation_id()
                    .and_then(|c| ops.iter().find(|o| o.correlation_id() == Some(c)).copied())
            };
            let call = op.and_then(launch).or(is_call(rec).then_some(rec));
            let mut path = Vec::new();
            let mut cause = CauseLabel::None;
            if let (Some(op), Some(call)) = (op, call) {
                let (start, _) = op.interval();
                let pred = stream_pred(op);
                if let Some(p) = pred.filter(|p| {
                    p.interval().1 > call.interval().1 && start <= p.interval().1 + LATE_NS / 5
                }) {
                    cause = CauseLabel::StreamBacklog;
                    path.push(p.rid());
                } else if start > call.interval().1 + LATE_NS {
                    cause = if matches!(op, Record::Memcpy { .. }) {
                        CauseLabel::PcieContention
                    } else {
                        CauseLabel::OccupancyPressure
                    };
                }
                path.push(call.rid());
                path.push(op.rid());
            }
            if cause == CauseLabel::None {
                if let Some(call) = call {
                    let from = prev_call(call).map(|p| p.interval().1).unwrap_or(0);
                    let to = call.interval().0;
                    if to > from + LATE_NS {
                        cause = host_cause(recs, call.tid(), from, to);
                    }
                }
            }
            diagnoses.push(Diagnosis {
                query: q.id.clone(),
                causes: vec![RankedCause {
                    label: cause,
                    score: 1.0,
                }],
                critical_path: path,
                phases: Phases::default(),
                complete: true,
                first_unresolved: None,
                answer: None,
            });
        }
        Explanation {
            schema_version: SCHEMA_VERSION,
            meta: ExplanationMeta {
                profiler: self.name().to_string(),
                version: self.version().to_string(),
                view: view.spec,
                wall_ms: 0.0,
                failure: None,
            },
            edges,
            attribution,
            diagnoses,
        }
    }
}

/// A scheduler record in the gap ⇒ descheduled; a page fault ⇒ faulting; else compute.
fn host_cause(recs: &[Record], tid: Option<u32>, from: u64, to: u64) -> CauseLabel {
    let on = |t: u32| tid == Some(t);
    let inside = |a: u64, b: u64| a < to && b > from;
    if recs.iter().any(|r| {
        matches!(r, Record::Sched { tid, switch_out, switch_in, reason, .. }
            if on(*tid) && inside(*switch_out, *switch_in) && *reason == SwitchReason::Preempted)
    }) {
        return CauseLabel::CpuDeschedule;
    }
    if recs
        .iter()
        .any(|r| matches!(r, Record::PageFault { tid, ts, .. } if on(*tid) && inside(*ts, *ts + 1)))
    {
        return CauseLabel::HostPageFault;
    }
    CauseLabel::HostCompute
}

fn edge(src: u64, dst: u64, kind: EdgeType, evidence: Evidence) -> ClaimedEdge {
    ClaimedEdge {
        src,
        dst,
        kind,
        evidence,
        confidence: 1.0,
    }
}
