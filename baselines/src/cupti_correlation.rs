//! `cupti-correlation`: what a CUPTI-based tool derives from CUPTI alone, as
//! Kineto keeps the records and HTA reads them (PyTorch profiler traces): API
//! records, activities, and the CUDA_EVENT and SYNCHRONIZATION records.
//!
//! **Evidence it uses**: correlation ids API → activity (`launch`, explicit; a
//! graph launch's kernels all hang off the launch call), same-stream order of
//! kernels, copies and memsets by start time (`stream_order`, observed), event
//! record → stream wait joined by `event_sync_id` (`event`, explicit), the device
//! phases CUPTI reports (queued → submitted → start → end) and the API records'
//! timing. Request identity is per thread: the request of a device op is the last
//! request token seen *on its launching thread* through external correlation
//! records, up to and including its launch call; `unknown` when there is none.
//!
//! **Causes**: the dominant phase over peers (same operation elsewhere in the
//! view): a launch call later after the thread's previous call than its peers'
//! ⇒ `host_compute` (CPU-bound: CUPTI cannot say why); queued→submitted ⇒ what
//! the op waited for, one hop: a stream wait on its stream whose event completed
//! after the stream predecessor ⇒ `event_wait`, else `stream_backlog`
//! (`implicit_sync` for a pageable copy); a graph node's wait after its launch ⇒
//! `graph_dependency`; submitted→start ⇒ occupancy pressure (kernels) or
//! PCIe/copy-engine contention (copies); execution ⇒ slow copy / occupancy;
//! nothing anomalous ⇒ `none`.
//!
//! **What it cannot know**: why a launch was late (no scheduler, page-fault or
//! handoff evidence), causes more than one hop upstream, graph topology, identity
//! across host threads, call sites. It marks a path incomplete only when a device
//! op's own launch call is absent.

use crate::analysis::Peers;
use crate::common::{
    attribution, attribution_targets, correlation_edges, device_phase_diagnosis, event_edges,
    finish, Output,
};
use crate::index::{Index, Pos};
use crate::Profiler;
use ground_truth::trace::Record;
use ground_truth::{Explanation, TraceView};
use std::collections::HashMap;
use std::time::Instant;

pub struct CuptiCorrelation;

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
        let waits = event_edges(&ix, &mut out);
        // Last request token seen on each thread, replayed in call order.
        let mut token_at_call: HashMap<Pos, String> = HashMap::new();
        let mut tids: Vec<u32> = ix.threads.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            let mut cur: Option<String> = None;
            for &a in &ix.threads[&tid].apis {
                if let Some(t) = ix.token(a) {
                    cur = Some(t.to_string());
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
                .push(device_phase_diagnosis(&ix, &peers, &pred, &waits, q, None));
        }
        finish(self.name(), view, t0, out)
    }
}
