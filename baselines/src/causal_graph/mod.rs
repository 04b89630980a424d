//! `causal-graph`: the reference design. A typed partial order built from
//! explicit semantics, with an evidence class on every edge.
//!
//! **Evidence it uses**
//! - *launch* (explicit): API record → the CUPTI activities carrying its
//!   correlation id (kernels, copies, memsets, event records, stream waits).
//!   Graph-launched kernels share the launch's correlation id and are told apart
//!   by `graph_node_id`.
//! - *stream_order* (observed): consecutive items of one CUPTI stream id (a new
//!   id per stream object, so recreated streams whose raw handle repeats are not
//!   confused), ordered by enqueue time (the launching call's start). Items are
//!   device ops, `cuda_event` records and stream-wait `sync` records, so a wait
//!   is ordered in its stream even before any kernel of that stream appears
//!   (Kineto 904), and an event's predecessor is the previous item of the
//!   event's own stream, not the thread's previous launch (HTA 117).
//! - *event* (explicit): `cuda_event` → stream-wait `sync`, joined by
//!   `event_sync_id` (never by the raw event handle, which is reused).
//! - *graph* (inferred, confidence < 0.8): dependencies between nodes of one
//!   graph launch. CUPTI does not report graph topology, so every node that ended
//!   before another started in every replay of the same graph exec (and never
//!   overlapped it) is a candidate predecessor, and all candidates are kept
//!   except those implied through another one (transitive reduction): fan-in
//!   keeps every predecessor. Stream-order edges into and out of a multi-node
//!   launch depend on that topology and are inferred too; every entry node of a
//!   launch follows the item before the launch, on whichever stream CUPTI
//!   reports the node (the driver runs a graph's branches on streams of its own).
//! - *sync* (explicit/observed): the device work a blocking call waited for
//!   (stream/event/context synchronize, the implicit fence of a pageable copy).
//! - *request* (explicit): request tokens from external correlation records and
//!   `request_begin` markers; *handoff* (observed): `enqueue` → `task_begin`
//!   markers matched by queue and token, inferred (0.6) in closed mode from
//!   timing that recurs (`handoff_inference`); *host_order* (observed) within a
//!   host task, inferred (0.6) when no task markers delimit tasks (closed mode).
//! - *fault* (observed): a preempted/traced `sched` interval or page faults of
//!   the calling thread between its previous host operation and an API call.
//! - *missing*: a claim `src = dst = R` when a record the semantics require for
//!   `R` is absent: its launch API record (correlation id without API record), the
//!   event record of a wait (`event_sync_id` not found), an enqueue for a
//!   `task_begin`, a stream predecessor expected from an API launch whose activity
//!   record is absent, or a device op gated (`submitted` well after `queued`) by
//!   nothing visible. `collector_loss` and the view's loss spec raise the
//!   confidence of such claims and lower the confidence of stream-order edges.
//!
//! - *fault* (inferred, 0.7): device work on another stream that held the SMs
//!   (kernels) or the copy engine (copies) while an op waited far longer than its
//!   peers to start: the latest such op ending when the victim started.
//!
//! **Diagnosis** (the rules, with the reasons for each, are in
//! `baselines/README.md`): the critical path walks back from the queried record
//! taking at each step the predecessor whose completion gated it, and stops at
//! the first record with a `missing` claim (`complete: false`,
//! `first_unresolved`). Peers are the same operation *at the same place* in
//! other requests of the view (kernel name / copy shape, same call-site frame
//! when stacks show it, same position among that operation's instances in its
//! request, the same stream when one shares it), since no twin is visible: a
//! name launched from several call contexts is several operations. Each phase's
//! excess over the peers' median is lateness above its noise floor (the peers'
//! own spread, and for device phases a quarter of the op's typical latency; an
//! op launched late must finish later than its peers by three times their
//! spread, the label check's margin, `thresholds::SPREAD_MARGIN`); a
//! host stall that the thread's scheduler or page-fault records show is
//! lateness whatever the device op's length. Without peers only what the
//! records explain is lateness: stall records, and absolute waits on a gate.
//!
//! Causes: a late host phase is blamed on the stall records of the calling
//! thread (`cpu_deschedule`, `host_page_fault`), the handoff chain's queue waits
//! (`handoff_queueing`) or else `host_compute`; a late submitted→start on
//! co-running work (`occupancy_pressure` / `pcie_contention`); a long transfer on
//! `slow_copy`. A late queued→submitted follows the gating chain through waits
//! and event records: an event edge ⇒ `event_wait`, a graph edge ⇒
//! `graph_dependency`, a stream predecessor ⇒ `stream_backlog` (`implicit_sync`
//! for a blocking pageable copy); when the upstream op was itself late for a
//! reason of its own that reason is passed on, hop by hop, to the root of the
//! chain. An op launched on time after a blocking call that returned late, or
//! late since its request began with no late phase of its own, takes the cause
//! of the late device work or stall upstream on its critical path; an op that
//! finished on time against its peers is not late whatever its phases. Nothing late
//! against clean peers ⇒ `none` first; without peers, or with records lost, the
//! op's timing is explained by what gated it, `none` the close second.
//!
//! Incompleteness beyond `missing` claims: a late call with nothing on the
//! host to explain it is unresolved when the view has no eBPF records (or loss
//! is plausible); in closed mode a host call's task is invisible, so an
//! inferred program-order step ends the walk; in a host-only view the device
//! side of a launch is never resolved.
//!
//! **What it cannot know**: graph topology (inferred), what a lost record was,
//! request identity and host queues in closed mode (abstains with `unknown`),
//! device timing in a host-only view, and anything not written in some record.

mod attribution;
mod candidates;
mod closed_mode;
mod counterfactual;
mod critical_path;
mod diagnosis;
mod event_sync;
mod gating;
mod graph;
mod graph_launch;
mod handoff_inference;
mod host;
mod interference;
mod launch;
mod peers;
mod readings;
mod requests;
mod stream_order;
mod structural;
mod text;
pub mod thresholds;
mod upstream;

pub use text::why_late;

use crate::common::{attribution, attribution_targets, edge, finish, Output};
use crate::index::Pos;
use crate::Profiler;
use graph::Graph;
use ground_truth::trace::Rid;
use ground_truth::{ClaimedEdge, EdgeType, Evidence, Explanation, TraceView};
use std::time::Instant;

pub struct CausalGraph;

impl Profiler for CausalGraph {
    fn name(&self) -> &str {
        "causal-graph"
    }
    fn version(&self) -> &str {
        crate::VERSION
    }
    fn explain(&self, view: &TraceView) -> Explanation {
        let t0 = Instant::now();
        let g = Graph::build(view);
        let mut out = Output::default();
        let targets = attribution_targets(&g.ix);
        out.attribution.reserve_exact(targets.len());
        for p in targets {
            out.attribution.push(attribution(&g.ix, p, g.token(p)));
        }
        for q in &view.queries {
            out.diagnoses.push(g.diagnose(q).diagnosis);
        }
        // The claims last: the graph is freed as they are made.
        out.edges = claims_in_order(g);
        finish(self.name(), view, t0, out)
    }
}

/// The graph's edges and `missing` claims as rid claims, in the order `finish` leaves
/// them (by destination, source and kind, the first of equal claims kept), so that it
/// has nothing to sort. Sorting (rid, rid, kind, place) keys here gives that order
/// without a stable sort's scratch copy of the claims, with the index already freed:
/// both, beside the finished claims, were the peak of a large case's analysis
/// (docs/records.md "Memory of a large case").
fn claims_in_order(mut g: Graph) -> Vec<ClaimedEdge> {
    let edges = std::mem::take(&mut g.edges);
    let missing = std::mem::take(&mut g.missing);
    // Rids come from the view's records, which outlive the graph.
    let recs = g.ix.recs;
    drop(g);
    let rid = |p: Pos| recs[p as usize].rid();
    let mut keys: Vec<(Rid, Rid, EdgeType, u32)> = Vec::with_capacity(edges.len() + missing.len());
    for (i, e) in edges.iter().enumerate() {
        keys.push((rid(e.dst), rid(e.src), e.kind, i as u32));
    }
    for (i, m) in missing.iter().enumerate() {
        let at = rid(m.at);
        keys.push((at, at, m.kind, (edges.len() + i) as u32));
    }
    keys.sort_unstable();
    let mut claims = Vec::with_capacity(keys.len());
    let mut last = None;
    for (dst, src, kind, place) in keys {
        if last == Some((dst, src, kind)) {
            continue;
        }
        last = Some((dst, src, kind));
        let (evidence, confidence) = match edges.get(place as usize) {
            Some(e) => (e.ev, e.conf),
            None => (
                Evidence::Missing,
                missing[place as usize - edges.len()].conf,
            ),
        };
        claims.push(edge(src, dst, kind, evidence, confidence));
    }
    claims
}
