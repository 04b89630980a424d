//! `nvtx-enclosure`: attribution by NVTX range enclosure at *launch* time, as
//! operator-level profilers do (the PyTorch profiler and Nsight Systems' NVTX
//! projection put a kernel under the range open on its launching thread when the
//! launch call was made, joined to the kernel by the correlation id).
//!
//! **Evidence it uses**: NVTX ranges and handoff markers of every thread, plus
//! the CUPTI records an operator profiler also reads (launch edges by
//! correlation id, same-stream order by start, event records joined to stream
//! waits, device phases). The operator of a device op is the innermost NVTX range
//! open on its launching thread when the launch call began; its request is the
//! token of the host task that thread was running then (`unknown` when none).
//!
//! **Causes**: from the CUPTI records, like `cupti-correlation`.
//!
//! **What it cannot know**: why the host was late (host causes beyond a late
//! launch), ranges a thread pushes for work another thread launches (requests
//! handed across threads without markers), graph topology, call sites.

use crate::analysis::Peers;
use crate::common::{
    attribution, attribution_targets, correlation_edges, device_op_of, device_phase_diagnosis,
    event_edges, finish, nvtx_name, Output,
};
use crate::index::{Index, Pos};
use crate::Profiler;
use ground_truth::trace::{MarkerPhase, Record};
use ground_truth::{Explanation, Question, TraceView};
use std::time::Instant;

pub struct NvtxEnclosure;

/// The launching call behind a record: the API record of a device op, the record
/// itself for a host call.
fn launch_call(ix: &Index, p: Pos) -> Option<Pos> {
    match ix.rec(p) {
        Record::Api { .. } | Record::Uprobe { .. } => Some(p),
        _ => device_op_of(ix, p).and_then(|op| ix.launch_api(op)),
    }
}

/// The range enclosing a record's launch: the innermost NVTX range open on the
/// launching thread when the launch call began (operator profilers push the range
/// around the launch, not around the asynchronous execution). Without the launch
/// call, the range enclosing the op's start on any thread.
fn enclosing(ix: &Index, p: Pos) -> Option<Pos> {
    if let Some(c) = launch_call(ix, p) {
        let r = ix.rec(c);
        return ix.nvtx_enclosing_on(r.tid()?, r.interval().0);
    }
    let t = ix.start(device_op_of(ix, p).unwrap_or(p));
    ix.nvtx_enclosing_any(t)
}

/// The request: the host task running on the launching thread when the launch
/// call began, else that of the enclosing range's thread when it opened, else the
/// latest token a marker showed before the op started.
fn token(ix: &Index, p: Pos) -> Option<String> {
    if let Some(c) = launch_call(ix, p) {
        let r = ix.rec(c);
        if let Some(tok) = r
            .tid()
            .and_then(|tid| ix.task_token_on(tid, r.interval().0))
        {
            return Some(tok);
        }
    }
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
        let waits = event_edges(&ix, &mut out);
        for p in attribution_targets(&ix) {
            out.attribution.push(attribution(&ix, p, token(&ix, p)));
        }
        for q in &view.queries {
            let answer = match (q.question, ix.pos(q.rid)) {
                (Question::Operator, Some(p)) => enclosing(&ix, p).map(|n| nvtx_name(&ix, n)),
                _ => None,
            };
            out.diagnoses.push(device_phase_diagnosis(
                &ix, &peers, &pred, &waits, q, answer,
            ));
        }
        finish(self.name(), view, t0, out)
    }
}
