//! `nvtx-enclosure`: attribution by NVTX range enclosure at *execution* time,
//! as operator-level profilers present it (a kernel is shown under the range it
//! ran inside).
//!
//! **Evidence it uses**: NVTX ranges and handoff markers of every thread, plus
//! the CUPTI records an operator profiler also reads (launch edges by
//! correlation id, same-stream order by start, device phases). The operator of
//! a device op is the innermost NVTX range, on any thread, that encloses the
//! op's *start*; its request is the token of the host task running on that
//! range's thread when the range opened, else the latest token any marker
//! showed before the op started (`unknown` when none).
//!
//! **Causes**: from device phases over peers, like `cupti-correlation`.
//!
//! **What it cannot know**: that asynchronous work runs after the range that
//! launched it has closed (the operator is then the wrong one, or none), host
//! causes, event/graph dependencies, call sites.

use crate::analysis::Peers;
use crate::common::{
    attribution, attribution_targets, correlation_edges, device_op_of, device_phase_diagnosis,
    finish, nvtx_name, Output,
};
use crate::index::{Index, Pos};
use crate::Profiler;
use ground_truth::trace::{MarkerPhase, Record};
use ground_truth::{Explanation, Question, TraceView};
use std::time::Instant;

pub struct NvtxEnclosure;

/// The range enclosing a record's execution (device ops: their start).
fn enclosing(ix: &Index, p: Pos) -> Option<Pos> {
    let t = ix.start(device_op_of(ix, p).unwrap_or(p));
    ix.nvtx_enclosing_any(t)
}

fn token(ix: &Index, p: Pos) -> Option<String> {
    let t = ix.start(device_op_of(ix, p).unwrap_or(p));
    if let Some(n) = enclosing(ix, p) {
        if let Record::Nvtx { tid, start, .. } = ix.rec(n) {
            if let Some(tok) = ix.task_token_on(*tid, *start) {
                return Some(tok);
            }
        }
    }
    let k = ix.markers.partition_point(|&m| ix.start(m) <= t);
    ix.markers[..k].iter().rev().find_map(|&m| match ix.rec(m) {
        Record::Marker {
            phase: MarkerPhase::RequestBegin | MarkerPhase::TaskBegin | MarkerPhase::Enqueue,
            token,
            ..
        } if !token.is_empty() => Some(token.to_string()),
        _ => None,
    })
}

impl Profiler for NvtxEnclosure {
    fn name(&self) -> &str {
        "nvtx-enclosure"
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
        for p in attribution_targets(&ix) {
            out.attribution.push(attribution(&ix, p, token(&ix, p)));
        }
        for q in &view.queries {
            let answer = match (q.question, ix.pos(q.rid)) {
                (Question::Operator, Some(p)) => enclosing(&ix, p).map(|n| nvtx_name(&ix, n)),
                _ => None,
            };
            out.diagnoses
                .push(device_phase_diagnosis(&ix, &peers, &pred, q, answer));
        }
        finish(self.name(), view, t0, out)
    }
}
