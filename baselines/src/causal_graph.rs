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
//! - *graph* (inferred, confidence < 1): dependencies between nodes of one graph
//!   launch. CUPTI does not report graph topology, so a node that starts right
//!   after another node of the same launch ends, consistently over replays of the
//!   same graph exec, is taken as its dependant.
//! - *sync* (explicit/observed): the device work a blocking call waited for
//!   (stream/event/context synchronize, the implicit fence of a pageable copy).
//! - *request* (explicit): request tokens from external correlation records and
//!   `request_begin` markers; *handoff* (observed): `enqueue` → `task_begin`
//!   markers matched by queue and token; *host_order* (observed) within a host
//!   task, inferred (0.6) when no task markers delimit tasks (closed mode).
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
//! **Diagnosis**: the critical path walks back from the queried record taking at
//! each step the predecessor whose completion gated it, and stops at the first
//! record with a `missing` claim (`complete: false`, `first_unresolved`). Peers
//! are the same operation (kernel name / copy shape, same call-site frame when
//! stacks show it) in other requests of the view, since no twin is visible. The
//! phase decomposition is each phase's excess over the peers' median: host gap
//! before the call plus the queue waits of its handoff chain (including the
//! request's wait to be picked up), queued→submitted, submitted→start,
//! execution; all zero when nothing is late.
//!
//! Causes: a late host phase is blamed on the stall records of the calling
//! thread (`cpu_deschedule`, `host_page_fault`), the handoff chain's queue waits
//! (`handoff_queueing`) or else `host_compute`; a late submitted→start on
//! co-running work (`occupancy_pressure` / `pcie_contention`); a long transfer on
//! `slow_copy`. A late queued→submitted follows the gating chain through waits
//! and event records: an event edge ⇒ `event_wait`, a graph edge ⇒
//! `graph_dependency`, a stream predecessor ⇒ `stream_backlog` (`implicit_sync`
//! for a blocking pageable copy); when the upstream op was itself late for a
//! reason of its own (contention, a slow copy, a late launch) that reason is
//! ranked first. When nothing is late against the peers the op's timing is
//! still explained by what gated it (same rules, the host chain for an op that
//! started when launched), with `none` as the close second.
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

use crate::analysis::{self, dominant, ranked, significant, Peers, NOISE_NS};
use crate::index::{call_site_frame, median, CallKind, Index, Pos};
use crate::{attribution, attribution_targets, finish, Output, Profiler};
use ground_truth::trace::{HostMemory, MarkerPhase, Record, Source, SyncType};
use ground_truth::view::LossSpec;
use ground_truth::{
    CauseLabel, Diagnosis, EdgeType, Evidence, Explanation, Ns, Phases, Query, Question, TraceView,
};
use std::collections::HashMap;
use std::fmt::Write as _;
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
        for e in &g.edges {
            out.edge(&g.ix, e.src, e.dst, e.kind, e.ev, e.conf);
        }
        for m in &g.missing {
            out.edge(&g.ix, m.at, m.at, m.kind, Evidence::Missing, m.conf);
        }
        for p in attribution_targets(&g.ix) {
            out.attribution.push(attribution(&g.ix, p, g.token(p)));
        }
        for q in &view.queries {
            out.diagnoses.push(g.diagnose(q).diagnosis);
        }
        finish(self.name(), view, t0, out)
    }
}

/// The reference profiler's answer for one late operation, as text
/// (`causalbench why-late`).
pub fn why_late(view: &TraceView, rid: u64) -> String {
    let g = Graph::build(view);
    let mut s = String::new();
    let Some(p) = g.ix.pos(rid) else {
        return format!("rid {rid} is not a record of this view\n");
    };
    let q = Query {
        id: format!("why-late-{rid}"),
        rid,
        question: Question::Cause,
    };
    let d = g.diagnose(&q);
    let _ = writeln!(s, "why is {} late?", g.describe(p));
    let _ = writeln!(s, "\ncritical chain (root first):");
    let path = &d.diagnosis.critical_path;
    for (i, &r) in path.iter().enumerate() {
        let pos = g.ix.pos(r).expect("path rids are view rids");
        if i > 0 {
            let prev = g.ix.pos(path[i - 1]).expect("path rids are view rids");
            match g.incoming(pos).iter().find(|e| e.src == prev) {
                Some(e) => {
                    let _ = writeln!(
                        s,
                        "   │ {} ({}, confidence {:.2})",
                        e.kind.as_str(),
                        ev_str(e.ev),
                        e.conf
                    );
                }
                None => {
                    let _ = writeln!(s, "   │ (no edge)");
                }
            }
        }
        let _ = writeln!(s, "  {}", g.describe(pos));
    }
    match d.diagnosis.first_unresolved {
        Some(r) => {
            let pos = g.ix.pos(r).expect("unresolved rid is a view rid");
            let kinds: Vec<&str> = g
                .missing
                .iter()
                .filter(|m| m.at == pos)
                .map(|m| m.kind.as_str())
                .collect();
            let _ =
                writeln!(
                s,
                "\nfirst unresolved boundary: {} — its gating {} predecessor is not in this view{}",
                g.describe(pos),
                kinds.first().copied().unwrap_or("?"),
                if g.loss_plausible { " (the collectors report loss)" } else { "" }
            );
        }
        None => {
            let _ = writeln!(s, "\nthe chain is complete in this view");
        }
    }
    let ph = d.diagnosis.phases;
    let _ = writeln!(
        s,
        "\nlateness vs peers ({} peer(s)): host enqueue {:.1} µs, queued→submitted {:.1} µs, submitted→start {:.1} µs, execution {:.1} µs",
        d.peers,
        ph.host_enqueue / 1e3,
        ph.queued_to_submitted / 1e3,
        ph.submitted_to_start / 1e3,
        ph.execution / 1e3
    );
    let _ = writeln!(s, "\ncauses:");
    for c in &d.diagnosis.causes {
        let _ = writeln!(s, "  {:<20} {:.2}", c.label.as_str(), c.score);
    }
    if let Some(a) = &d.diagnosis.answer {
        let _ = writeln!(s, "\nanswer: {a}");
    }
    s
}

fn ev_str(e: Evidence) -> &'static str {
    match e {
        Evidence::Explicit => "explicit",
        Evidence::Observed => "observed",
        Evidence::Inferred => "inferred",
        Evidence::Missing => "missing",
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct E {
    pub src: Pos,
    pub dst: Pos,
    pub kind: EdgeType,
    pub ev: Evidence,
    pub conf: f64,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Missing {
    pub at: Pos,
    pub kind: EdgeType,
    pub conf: f64,
}

pub(crate) struct Diag {
    pub diagnosis: Diagnosis,
    pub peers: usize,
}

pub(crate) struct Graph<'a> {
    pub ix: Index<'a>,
    pub peers: Peers,
    pub edges: Vec<E>,
    pub missing: Vec<Missing>,
    /// CSR of incoming edges by destination position.
    in_off: Vec<u32>,
    in_idx: Vec<u32>,
    missing_at: HashMap<Pos, usize>,
    pub loss_plausible: bool,
    /// Per stream: (enqueue key, the unit's exits) in order; a graph launch exits
    /// through its sinks.
    stream_units: HashMap<u32, Vec<(Ns, Vec<Pos>)>>,
    /// Launch calls known to be lost (their activity survived): (request token, when).
    lost_calls: Vec<(Option<String>, Ns)>,
    /// Whether the view has CUPTI records / eBPF host records at all.
    has_cupti: bool,
    has_ebpf: bool,
    /// Graph nodes whose usual graph predecessor is absent from their launch.
    graph_lost: std::cell::RefCell<Vec<Pos>>,
    /// When each stream wait was satisfied on the device: CUPTI's SYNCHRONIZATION
    /// record of a wait spans the host call, so the device-side moment is the
    /// completion of the event record it joins to (by `event_sync_id`).
    wait_satisfied: HashMap<Pos, Ns>,
}

/// Unit of a stream's order: one record, or the kernels of one graph launch.
enum Unit {
    One(Pos),
    Graph(Vec<Pos>),
}

impl<'a> Graph<'a> {
    pub fn build(view: &'a TraceView) -> Graph<'a> {
        let ix = Index::new(view);
        let peers = Peers::new(&ix);
        let loss = view.collector_loss;
        let loss_plausible =
            loss.cupti_dropped + loss.cupti_timestamps_dropped + loss.ringbuffer_dropped > 0
                || !matches!(view.spec.loss, LossSpec::None);
        let mut g = Graph {
            ix,
            peers,
            edges: Vec::new(),
            missing: Vec::new(),
            in_off: Vec::new(),
            in_idx: Vec::new(),
            missing_at: HashMap::new(),
            loss_plausible,
            stream_units: HashMap::new(),
            lost_calls: Vec::new(),
            has_cupti: view.records.iter().any(|r| r.source() == Source::Cupti),
            has_ebpf: view.records.iter().any(|r| r.source() == Source::Ebpf),
            graph_lost: Default::default(),
            wait_satisfied: HashMap::new(),
        };
        g.wait_satisfied = g.stream_wait_completions();
        g.launch_edges();
        g.stream_edges();
        g.event_and_sync_edges();
        g.interference_edges();
        g.host_edges();
        g.distrust_edges_into_gaps();
        g.index_edges();
        g
    }

    fn add(&mut self, src: Pos, dst: Pos, kind: EdgeType, ev: Evidence, conf: f64) {
        self.edges.push(E {
            src,
            dst,
            kind,
            ev,
            conf,
        });
    }

    fn add_missing(&mut self, at: Pos, kind: EdgeType, conf: f64) {
        if let Some(&i) = self.missing_at.get(&at) {
            let m = &mut self.missing[i];
            m.conf = m.conf.max(conf);
            return;
        }
        self.missing_at.insert(at, self.missing.len());
        self.missing.push(Missing { at, kind, conf });
    }

    fn missing_conf(&self) -> f64 {
        if self.loss_plausible {
            0.9
        } else {
            0.6
        }
    }

    /// Launch edges by correlation id; `missing` when the API record is absent.
    fn launch_edges(&mut self) {
        let has_api = self.ix.has_api_records();
        let mc = self.missing_conf();
        let mut corrs: Vec<u32> = self.ix.acts_by_corr.keys().copied().collect();
        corrs.sort_unstable();
        for c in corrs {
            let acts = self.ix.acts_by_corr[&c].clone();
            let api = self.ix.api_by_corr.get(&c).copied();
            for a in acts {
                let launched = match self.ix.rec(a) {
                    Record::Sync { sync_type, .. } => *sync_type == SyncType::StreamWaitEvent,
                    _ => true,
                };
                if !launched {
                    continue;
                }
                match api {
                    Some(api) => self.add(api, a, EdgeType::Launch, Evidence::Explicit, 1.0),
                    None if has_api => {
                        // The API record is gone; its uprobe may survive (eBPF saw the call).
                        match self.uprobe_for_lost_launch(a) {
                            Some(u) => self.add(u, a, EdgeType::Launch, Evidence::Inferred, 0.75),
                            None => {
                                self.add_missing(a, EdgeType::Launch, mc);
                                if let Some((q, _, _, _)) =
                                    self.ix.rec(a).device_times().filter(|t| t.0 > 0)
                                {
                                    self.lost_calls
                                        .push((self.ix.token_by_corr.get(&c).cloned(), q));
                                }
                            }
                        }
                    }
                    None => {}
                }
            }
        }
    }

    /// An unpaired launch uprobe whose call contains the op's `queued` time.
    fn uprobe_for_lost_launch(&self, a: Pos) -> Option<Pos> {
        let ix = &self.ix;
        let r = ix.rec(a);
        let (q, _, _, _) = r.device_times().filter(|t| t.0 > 0)?;
        let k = ix.all_calls.partition_point(|&c| ix.start(c) <= q + 2_000);
        ix.all_calls[..k]
            .iter()
            .rev()
            .take(256)
            .copied()
            .find(|&c| {
                matches!(ix.rec(c), Record::Uprobe { .. })
                    && ix.end(c) + 2_000 >= q
                    && ix.call_kind(c).can_create(r)
            })
    }

    /// Lowers the confidence of visible edges into a record whose predecessor of
    /// the same kind is claimed missing: the visible one is likely not the gate.
    fn distrust_edges_into_gaps(&mut self) {
        if self.missing.is_empty() {
            return;
        }
        let gaps: HashMap<(Pos, EdgeType), ()> =
            self.missing.iter().map(|m| ((m.at, m.kind), ())).collect();
        for e in &mut self.edges {
            if gaps.contains_key(&(e.dst, e.kind)) {
                e.conf = e.conf.min(0.5);
            }
        }
    }

    /// Enqueue-order key of a stream item: its launching call's start.
    fn enqueue_key(&self, p: Pos) -> Ns {
        if let Some(api) = self.ix.launch_api(p) {
            return self.ix.start(api);
        }
        match self.ix.rec(p) {
            Record::Kernel { queued, .. }
            | Record::Memcpy { queued, .. }
            | Record::Memset { queued, .. }
                if *queued > 0 =>
            {
                *queued
            }
            r => r.interval().0,
        }
    }

    /// Stream order, graph dependencies inside launches, and missing stream predecessors.
    fn stream_edges(&mut self) {
        let ix = &self.ix;
        let mut by_stream: HashMap<u32, Vec<(Ns, Ns, u64, Pos)>> = HashMap::new();
        for (i, r) in ix.recs.iter().enumerate() {
            let p = i as Pos;
            let item = match r {
                Record::Kernel { .. }
                | Record::Memcpy { .. }
                | Record::Memset { .. }
                | Record::CudaEvent { .. } => true,
                Record::Sync { sync_type, .. } => *sync_type == SyncType::StreamWaitEvent,
                _ => false,
            };
            if item {
                let s = r.stream().expect("stream items have a stream");
                by_stream.entry(s).or_default().push((
                    self.enqueue_key(p),
                    r.interval().0,
                    r.rid(),
                    p,
                ));
            }
        }
        let orphans = self.orphan_launches();
        let graph_edges = self.infer_graph_edges();
        let mc0 = self.missing_conf();
        for b in self.graph_lost.take() {
            self.add_missing(b, EdgeType::Graph, mc0);
        }
        let mut graph_preds: HashMap<Pos, ()> = HashMap::new();
        let mut graph_succs: HashMap<Pos, ()> = HashMap::new();
        for &(a, b, conf) in &graph_edges {
            self.add(a, b, EdgeType::Graph, Evidence::Inferred, conf);
            graph_preds.insert(b, ());
            graph_succs.insert(a, ());
        }
        let mut streams: Vec<u32> = by_stream.keys().copied().collect();
        streams.sort_unstable();
        let base_conf = if self.loss_plausible { 0.9 } else { 1.0 };
        let mc = self.missing_conf();
        for s in streams {
            let mut items = by_stream.remove(&s).unwrap_or_default();
            items.sort_unstable();
            // Group the kernels of one graph launch.
            let mut units: Vec<(Ns, Unit)> = Vec::new();
            for &(key, _, _, p) in &items {
                let r = self.ix.rec(p);
                let gk = match r {
                    Record::Kernel {
                        graph_node_id,
                        correlation_id,
                        ..
                    } if *graph_node_id != 0 => Some(*correlation_id),
                    _ => None,
                };
                if let (Some(c), Some((_, Unit::Graph(v)))) = (gk, units.last_mut()) {
                    if self.ix.rec(v[0]).correlation_id() == Some(c) {
                        v.push(p);
                        continue;
                    }
                }
                units.push((
                    key,
                    if gk.is_some() {
                        Unit::Graph(vec![p])
                    } else {
                        Unit::One(p)
                    },
                ));
            }
            let orphan_keys = orphans.get(&s);
            let mut prev: Option<(Ns, Vec<Pos>)> = None;
            let mut order: Vec<(Ns, Vec<Pos>)> = Vec::with_capacity(units.len());
            for (key, u) in &units {
                let entries: Vec<Pos> = match u {
                    Unit::One(p) => vec![*p],
                    Unit::Graph(v) => v
                        .iter()
                        .copied()
                        .filter(|p| !graph_preds.contains_key(p))
                        .collect(),
                };
                // An API launch on this stream between prev and this unit left no activity record.
                let orphan_between = orphan_keys
                    .map(|ks| {
                        let lo = prev.as_ref().map(|(k, _)| *k).unwrap_or(0);
                        ks.iter()
                            .filter(|(k, _)| *k > lo && *k <= *key)
                            .map(|(_, c)| *c)
                            .fold(0.0, f64::max)
                    })
                    .unwrap_or(0.0);
                for &x in &entries {
                    let pred_exits: &[Pos] =
                        prev.as_ref().map(|(_, v)| v.as_slice()).unwrap_or(&[]);
                    let unexplained = self.unexplained_gating(x, pred_exits);
                    let mut conf = base_conf;
                    if orphan_between > 0.0 {
                        self.add_missing(x, EdgeType::StreamOrder, orphan_between);
                        conf = 0.4;
                    } else if unexplained {
                        self.add_missing(x, EdgeType::StreamOrder, mc);
                        conf = 0.4;
                    }
                    if let Some((_, pp)) = &prev {
                        for &e in pp {
                            self.add(e, x, EdgeType::StreamOrder, Evidence::Observed, conf);
                        }
                    }
                }
                // A graph launch completes through its sinks (nodes nothing depends on).
                let exits: Vec<Pos> = match u {
                    Unit::One(p) => vec![*p],
                    Unit::Graph(v) => v
                        .iter()
                        .copied()
                        .filter(|p| !graph_succs.contains_key(p))
                        .collect(),
                };
                prev = Some((*key, exits.clone()));
                order.push((*key, exits));
            }
            self.stream_units.insert(s, order);
        }
    }

    /// Was `x` held back (submitted well after queued) by something not visible?
    fn unexplained_gating(&self, x: Pos, preds: &[Pos]) -> bool {
        let r = self.ix.rec(x);
        let Some((q, s, _, _)) = r.device_times() else {
            return false;
        };
        if q == 0 || s <= q {
            return false;
        }
        let wait = (s - q) as f64;
        if wait < NOISE_NS {
            return false;
        }
        let tol = 10_000.0 + 0.02 * wait;
        let explained_by = |p: Pos| {
            let done = self.done(p) as f64;
            done + tol >= s as f64
        };
        if preds.iter().any(|&p| explained_by(p)) {
            return false;
        }
        // A blocking (pageable) copy fences against device work on other streams too.
        if self.is_fenced_copy(x) {
            let k = self
                .ix
                .device_ops
                .partition_point(|&o| self.ix.start(o) < s);
            if self.ix.device_ops[..k]
                .iter()
                .rev()
                .take(4096)
                .any(|&o| o != x && explained_by(o))
            {
                return false;
            }
        }
        true
    }

    fn is_fenced_copy(&self, x: Pos) -> bool {
        let r = self.ix.rec(x);
        if matches!(
            r,
            Record::Memcpy {
                memory: HostMemory::Pageable,
                ..
            }
        ) {
            return true;
        }
        let c = r.correlation_id().unwrap_or(0);
        self.ix.acts_by_corr.get(&c).is_some_and(|v| {
            v.iter().any(|&a| {
                matches!(
                    self.ix.rec(a),
                    Record::Sync {
                        sync_type: SyncType::ImplicitCopyFence,
                        ..
                    }
                )
            })
        })
    }

    /// Completion time of a record (when its successors could proceed).
    pub fn done(&self, p: Pos) -> Ns {
        self.wait_satisfied
            .get(&p)
            .copied()
            .unwrap_or_else(|| self.ix.end(p))
    }

    /// Stream wait → max(its record's end, completion of the event record it waited on).
    fn stream_wait_completions(&self) -> HashMap<Pos, Ns> {
        let ix = &self.ix;
        let mut event_done: HashMap<u64, Ns> = HashMap::new();
        for r in ix.recs {
            if let Record::CudaEvent {
                event_sync_id, ts, ..
            } = r
            {
                if *event_sync_id != 0 {
                    event_done.insert(*event_sync_id, *ts);
                }
            }
        }
        let mut out = HashMap::new();
        for (i, r) in ix.recs.iter().enumerate() {
            if let Record::Sync {
                sync_type: SyncType::StreamWaitEvent,
                event_sync_id,
                end,
                ..
            } = r
            {
                if let Some(&t) = event_done.get(event_sync_id) {
                    out.insert(i as Pos, (*end).max(t));
                }
            }
        }
        out
    }

    /// API launches that enqueued work but have no activity record, by the stream
    /// they most likely targeted: stream → [(enqueue key, confidence)].
    fn orphan_launches(&self) -> HashMap<u32, Vec<(Ns, f64)>> {
        let ix = &self.ix;
        let mut out: HashMap<u32, Vec<(Ns, f64)>> = HashMap::new();
        if ix.device_ops.is_empty() {
            return out;
        }
        // Raw stream handle → CUPTI stream id, as observed over time (handles repeat).
        let mut handle_obs: HashMap<u64, Vec<(Ns, u32)>> = HashMap::new();
        let mut thread_obs: HashMap<u32, Vec<(Ns, u32)>> = HashMap::new();
        let mut orphans = Vec::new();
        for (&c, &api) in &ix.api_by_corr {
            // A stream wait is a stream item too (its SYNC record), and its first
            // argument is the stream, so a lost wait record is an orphan like a lost launch.
            let kind = ix.call_kind(api);
            if !(kind.launches_work() || kind == CallKind::StreamWait) {
                continue;
            }
            let stream = ix
                .acts_by_corr
                .get(&c)
                .and_then(|v| v.iter().find_map(|&a| ix.rec(a).stream()));
            match stream {
                Some(s) => {
                    let t = ix.start(api);
                    if let Some(&u) = ix.uprobe_of_api.get(&api) {
                        if let Record::Uprobe { handle, .. } = ix.rec(u) {
                            if *handle != 0 {
                                handle_obs.entry(*handle).or_default().push((t, s));
                            }
                        }
                    }
                    if let Some(tid) = ix.rec(api).tid() {
                        thread_obs.entry(tid).or_default().push((t, s));
                    }
                }
                None => orphans.push(api),
            }
        }
        for v in handle_obs.values_mut().chain(thread_obs.values_mut()) {
            v.sort_unstable();
        }
        let nearest = |v: &Vec<(Ns, u32)>, t: Ns| -> Option<u32> {
            let k = v.partition_point(|&(x, _)| x <= t);
            let before = (k > 0).then(|| v[k - 1]);
            let after = v.get(k).copied();
            match (before, after) {
                (Some(b), Some(a)) => Some(if t - b.0 <= a.0 - t { b.1 } else { a.1 }),
                (Some(b), None) => Some(b.1),
                (None, Some(a)) => Some(a.1),
                (None, None) => None,
            }
        };
        orphans.sort_unstable();
        for api in orphans {
            let t = ix.start(api);
            let by_handle = ix.uprobe_of_api.get(&api).and_then(|&u| match ix.rec(u) {
                Record::Uprobe { handle, .. } if *handle != 0 => {
                    handle_obs.get(handle).and_then(|v| nearest(v, t))
                }
                _ => None,
            });
            let (stream, conf) = match by_handle {
                Some(s) => (Some(s), if self.loss_plausible { 0.9 } else { 0.7 }),
                None => (
                    ix.rec(api)
                        .tid()
                        .and_then(|tid| thread_obs.get(&tid))
                        .and_then(|v| nearest(v, t)),
                    0.5,
                ),
            };
            if let Some(s) = stream {
                out.entry(s).or_default().push((t, conf));
            }
        }
        out
    }

    /// Dependencies between nodes of one graph launch, inferred from timing
    /// consistent over replays: (pred, node, confidence).
    fn infer_graph_edges(&self) -> Vec<(Pos, Pos, f64)> {
        let ix = &self.ix;
        // (graph_id) → launches (corr) → nodes.
        let mut launches: HashMap<(u32, u32), Vec<Pos>> = HashMap::new();
        for &p in &ix.device_ops {
            if let Record::Kernel {
                graph_id,
                graph_node_id,
                correlation_id,
                ..
            } = ix.rec(p)
            {
                if *graph_node_id != 0 {
                    launches
                        .entry((*graph_id, *correlation_id))
                        .or_default()
                        .push(p);
                }
            }
        }
        let node_id = |p: Pos| match ix.rec(p) {
            Record::Kernel { graph_node_id, .. } => *graph_node_id,
            _ => 0,
        };
        const GAP: f64 = 30_000.0;
        let mut votes: HashMap<(u32, u64, u64), (u32, u32)> = HashMap::new(); // (votes, violations)
        let mut replays: HashMap<u32, u32> = HashMap::new();
        let mut picks: Vec<(u32, Pos, Pos)> = Vec::new();
        let mut keys: Vec<(u32, u32)> = launches.keys().copied().collect();
        keys.sort_unstable();
        for k in &keys {
            let nodes = &launches[k];
            *replays.entry(k.0).or_default() += 1;
            for &b in nodes {
                let bs = ix.start(b) as f64;
                let mut best: Option<Pos> = None;
                for &a in nodes {
                    if a == b {
                        continue;
                    }
                    let ae = ix.end(a) as f64;
                    let key = (k.0, node_id(a), node_id(b));
                    if ae <= bs + 1_000.0 {
                        if best.is_none_or(|x| ix.end(x) < ix.end(a)) {
                            best = Some(a);
                        }
                    } else if (ix.start(a) as f64) < bs {
                        // b started while a was running: b does not depend on a.
                        votes.entry(key).or_default().1 += 1;
                    }
                }
                if let Some(a) = best {
                    if bs - ix.end(a) as f64 <= GAP {
                        votes.entry((k.0, node_id(a), node_id(b))).or_default().0 += 1;
                        picks.push((k.0, a, b));
                    }
                }
            }
        }
        // A node whose usual predecessor (in other replays) is absent from this
        // launch lost that predecessor's record.
        let mut preds_of: HashMap<(u32, u64), Vec<u64>> = HashMap::new();
        for (&(gid, a, b), &(v, bad)) in &votes {
            if v > 0 && bad == 0 {
                preds_of.entry((gid, b)).or_default().push(a);
            }
        }
        for k in &keys {
            let nodes = &launches[k];
            let present: Vec<u64> = nodes.iter().map(|&p| node_id(p)).collect();
            for &b in nodes {
                if preds_of
                    .get(&(k.0, node_id(b)))
                    .is_some_and(|ps| ps.iter().any(|a| !present.contains(a)))
                {
                    self.graph_lost.borrow_mut().push(b);
                }
            }
        }
        picks
            .into_iter()
            .filter_map(|(gid, a, b)| {
                let (v, bad) = votes[&(gid, node_id(a), node_id(b))];
                (bad == 0).then(|| (a, b, 0.5 + 0.4 * v as f64 / replays[&gid].max(1) as f64))
            })
            .collect()
    }

    /// Event record → wait (by event_sync_id), and device work → blocking host calls.
    fn event_and_sync_edges(&mut self) {
        let ix = &self.ix;
        let mut by_esid: HashMap<u64, Pos> = HashMap::new();
        let mut by_handle: HashMap<u64, Vec<Pos>> = HashMap::new();
        let mut syncs = Vec::new();
        for (i, r) in ix.recs.iter().enumerate() {
            let p = i as Pos;
            match r {
                Record::CudaEvent {
                    event_sync_id,
                    event,
                    ..
                } => {
                    if *event_sync_id != 0 {
                        by_esid.insert(*event_sync_id, p);
                    }
                    by_handle.entry(*event).or_default().push(p);
                }
                Record::Sync { .. } => syncs.push(p),
                _ => {}
            }
        }
        for v in by_handle.values_mut() {
            v.sort_by_key(|&p| self.enqueue_key(p));
        }
        let mc = self.missing_conf();
        let mut add = Vec::new();
        let mut miss = Vec::new();
        // The exits of the last unit of a stream enqueued before t that were still
        // running at t (only those made the call wait).
        let waited_on = |s: u32, t: Ns, from: Ns| -> Vec<Pos> {
            let Some(v) = self.stream_units.get(&s) else {
                return vec![];
            };
            let k = v.partition_point(|(key, _)| *key < t);
            if k == 0 {
                return vec![];
            }
            v[k - 1]
                .1
                .iter()
                .copied()
                .filter(|&e| ix.end(e) > from)
                .collect()
        };
        for p in syncs {
            let Record::Sync {
                sync_type,
                stream,
                event,
                event_sync_id,
                correlation_id,
                start,
                ..
            } = ix.rec(p)
            else {
                continue;
            };
            let host_call = ix.api_by_corr.get(correlation_id).copied().unwrap_or(p);
            let call_start = ix.start(host_call).min(*start);
            match sync_type {
                SyncType::StreamWaitEvent | SyncType::EventSynchronize => {
                    let wait = *sync_type == SyncType::StreamWaitEvent;
                    let (kind, dst) = if wait {
                        (EdgeType::Event, p)
                    } else {
                        (EdgeType::Sync, host_call)
                    };
                    if *event_sync_id != 0 {
                        match by_esid.get(event_sync_id) {
                            Some(&e) => add.push((e, dst, kind, Evidence::Explicit, 1.0)),
                            None => miss.push((p, kind)),
                        }
                    } else if let Some(v) = by_handle.get(event) {
                        // No sync id: the most recent record of the handle before the
                        // call is the one CUDA waits for (right unless a record of it
                        // was lost, hence not explicit).
                        let k = v.partition_point(|&e| self.enqueue_key(e) <= call_start);
                        if k > 0 {
                            let e = v[k - 1];
                            if wait {
                                add.push((e, dst, kind, Evidence::Inferred, 0.6));
                            } else if ix.end(e) > call_start {
                                add.push((e, dst, kind, Evidence::Observed, 0.8));
                            }
                        }
                    }
                }
                SyncType::StreamSynchronize | SyncType::ImplicitCopyFence => {
                    let t = ix.launch_api(p).map(|a| ix.start(a)).unwrap_or(call_start);
                    for d in waited_on(*stream, t, call_start) {
                        add.push((d, host_call, EdgeType::Sync, Evidence::Observed, 0.9));
                    }
                }
                SyncType::ContextSynchronize => {
                    let mut ss: Vec<u32> = self.stream_units.keys().copied().collect();
                    ss.sort_unstable();
                    for s in ss {
                        for d in waited_on(s, call_start, call_start) {
                            add.push((d, host_call, EdgeType::Sync, Evidence::Observed, 0.9));
                        }
                    }
                }
            }
        }
        // A blocking (pageable) copy: the host could not go on until it finished,
        // so it gates the thread's next host operation.
        for &d in &ix.device_ops {
            let r = ix.rec(d);
            if !matches!(r, Record::Memcpy { memory: HostMemory::Pageable, direction, .. } if *direction != ground_truth::trace::CopyDirection::D2d)
            {
                continue;
            }
            let Some(api) = ix.launch_api(d) else {
                continue;
            };
            if ix.end(api) + 1_000 < ix.end(d) {
                continue;
            }
            let Some(tid) = ix.rec(api).tid() else {
                continue;
            };
            if let Some(next) = self.next_host_op(tid, api) {
                add.push((d, next, EdgeType::Sync, Evidence::Observed, 0.8));
            }
        }
        for (a, b, k, ev, c) in add {
            self.add(a, b, k, ev, c);
        }
        for (p, k) in miss {
            self.add_missing(p, k, mc);
        }
    }

    /// The next host call or enqueue on `tid` after `call`, in the same task.
    fn next_host_op(&self, tid: u32, call: Pos) -> Option<Pos> {
        let ix = &self.ix;
        let th = ix.thread(tid)?;
        let t = ix.start(call);
        let k = th.calls.partition_point(|&c| ix.start(c) <= t);
        let next_call = th.calls.get(k).copied();
        let km = th.markers.partition_point(|&m| ix.start(m) < ix.end(call));
        let next_marker = th.markers.get(km).copied();
        match (next_call, next_marker) {
            (Some(c), Some(m)) if ix.start(m) <= ix.start(c) => matches!(
                ix.rec(m),
                Record::Marker {
                    phase: MarkerPhase::Enqueue,
                    ..
                }
            )
            .then_some(m),
            (Some(c), _) => Some(c),
            (None, Some(m)) => matches!(
                ix.rec(m),
                Record::Marker {
                    phase: MarkerPhase::Enqueue,
                    ..
                }
            )
            .then_some(m),
            (None, None) => None,
        }
    }

    /// Device work on another stream that held the resource (SMs for kernels,
    /// the copy engine for copies) while an op waited to start: the latest such
    /// op ending inside the wait (inferred `fault`).
    fn interference_edges(&mut self) {
        let ix = &self.ix;
        let mut by_end: Vec<Pos> = ix.device_ops.clone();
        by_end.sort_by_key(|&p| (ix.end(p), ix.rid(p)));
        // Typical submitted→start wait of each operation: only an op that waited
        // much longer than its peers was held back by someone else's work.
        let mut waits: HashMap<analysis::PeerKey, Vec<f64>> = HashMap::new();
        for &p in &ix.device_ops {
            let r = ix.rec(p);
            if let (Some(k), Some((_, s, st, _))) = (analysis::peer_key(r), r.device_times()) {
                if s > 0 && st >= s {
                    waits.entry(k).or_default().push((st - s) as f64);
                }
            }
        }
        let typical_wait: HashMap<analysis::PeerKey, f64> = waits
            .into_iter()
            .filter(|(_, v)| v.len() >= 2)
            .filter_map(|(k, v)| median(v).map(|m| (k, m)))
            .collect();
        let mut add = Vec::new();
        let mut lost = Vec::new();
        for &x in &ix.device_ops {
            let r = ix.rec(x);
            let Some((q, s, st, _)) = r.device_times() else {
                continue;
            };
            if q == 0 || s == 0 || st < s || ((st - s) as f64) < NOISE_NS {
                continue;
            }
            let copy = matches!(r, Record::Memcpy { .. });
            if !copy && !matches!(r, Record::Kernel { .. }) {
                continue;
            }
            let Some(&base) = analysis::peer_key(r).and_then(|k| typical_wait.get(&k)) else {
                continue;
            };
            if ((st - s) as f64 - base) <= NOISE_NS.max(base) {
                continue;
            }
            let lo = by_end.partition_point(|&p| ix.end(p) <= s);
            let hi = by_end.partition_point(|&p| ix.end(p) <= st + 1_000);
            let culprit = by_end[lo..hi].iter().rev().copied().find(|&o| {
                let ro = ix.rec(o);
                o != x
                    && ro.stream() != r.stream()
                    && matches!(ro, Record::Memcpy { .. }) == copy
                    && ix.start(o) < st
            });
            // The engine/SMs are handed over at once: a culprit that ended well
            // before the victim started was not the last one holding it.
            let tol = 10_000 + (st - s) / 50;
            match culprit {
                Some(o) if ix.end(o) + tol >= st => add.push((o, x)),
                Some(o) => {
                    add.push((o, x));
                    lost.push(x);
                }
                // Held back on the device by nothing visible: that work was lost.
                None => lost.push(x),
            }
        }
        for (o, x) in add {
            self.add(o, x, EdgeType::Fault, Evidence::Inferred, 0.7);
        }
        let mc = self.missing_conf();
        for x in lost {
            self.add_missing(x, EdgeType::Fault, mc);
        }
    }

    /// Request, handoff, host-order and fault edges on the host side.
    fn host_edges(&mut self) {
        let ix = &self.ix;
        let mut add: Vec<E> = Vec::new();
        let mut miss = Vec::new();
        let mut miss_kind: Vec<(Pos, EdgeType)> = Vec::new();
        let markers_present = !ix.markers.is_empty();
        // Enqueue markers by (queue, token), in time order.
        let mut enq: HashMap<(&str, &str), Vec<Pos>> = HashMap::new();
        let mut req: HashMap<&str, Pos> = HashMap::new();
        for &m in &ix.markers {
            if let Record::Marker {
                phase,
                queue,
                token,
                ..
            } = ix.rec(m)
            {
                match phase {
                    MarkerPhase::Enqueue => enq
                        .entry((queue.as_str(), token.as_str()))
                        .or_default()
                        .push(m),
                    MarkerPhase::RequestBegin => {
                        req.entry(token.as_str()).or_insert(m);
                    }
                    MarkerPhase::TaskBegin => {}
                }
            }
        }
        for &m in &ix.markers {
            if let Record::Marker {
                phase: MarkerPhase::TaskBegin,
                queue,
                token,
                ts,
                ..
            } = ix.rec(m)
            {
                // Every host task of a request hangs off the request (explicit token).
                if let Some(&r) = req.get(token.as_str()) {
                    add.push(E {
                        src: r,
                        dst: m,
                        kind: EdgeType::Request,
                        ev: Evidence::Explicit,
                        conf: 1.0,
                    });
                }
                if queue.is_empty() {
                    continue;
                }
                let found = enq.get(&(queue.as_str(), token.as_str())).and_then(|v| {
                    let k = v.partition_point(|&e| ix.start(e) <= *ts);
                    (k > 0).then(|| v[k - 1])
                });
                match found {
                    Some(e) => add.push(E {
                        src: e,
                        dst: m,
                        kind: EdgeType::Handoff,
                        ev: Evidence::Observed,
                        conf: 1.0,
                    }),
                    None => miss.push(m),
                }
            }
        }
        // Where lost launch calls were made: the thread running their request then.
        let mut tasks_of_token: HashMap<&str, Vec<(Ns, u32)>> = HashMap::new();
        for &m in &ix.markers {
            if let Record::Marker {
                phase: MarkerPhase::TaskBegin,
                token,
                ts,
                tid,
                ..
            } = ix.rec(m)
            {
                tasks_of_token
                    .entry(token.as_str())
                    .or_default()
                    .push((*ts, *tid));
            }
        }
        let mut lost_on: HashMap<u32, Vec<Ns>> = HashMap::new();
        for (tok, q) in &self.lost_calls {
            let Some(v) = tok.as_deref().and_then(|t| tasks_of_token.get(t)) else {
                continue;
            };
            if let Some(&(_, tid)) = v.iter().filter(|(ts, _)| ts <= q).max() {
                lost_on.entry(tid).or_default().push(*q);
            }
        }
        let mut tids: Vec<u32> = ix.threads.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            let th = &ix.threads[&tid];
            let lost_here = lost_on.get(&tid);
            // Host operations of the thread in program order: calls and markers.
            let mut ops: Vec<(Ns, u8, u64, Pos)> = th
                .calls
                .iter()
                .chain(th.markers.iter().filter(|&&m| {
                    !matches!(
                        ix.rec(m),
                        Record::Marker {
                            phase: MarkerPhase::RequestBegin,
                            ..
                        }
                    )
                }))
                // A task begins before the calls it makes at the same instant.
                .map(|&p| {
                    let rank = u8::from(!matches!(
                        ix.rec(p),
                        Record::Marker {
                            phase: MarkerPhase::TaskBegin,
                            ..
                        }
                    ));
                    (ix.start(p), rank, ix.rid(p), p)
                })
                .collect();
            ops.sort_unstable();
            let mut prev: Option<Pos> = None;
            let mut task: Option<Pos> = None;
            for &(_, _, _, p) in &ops {
                match ix.rec(p) {
                    Record::Marker {
                        phase: MarkerPhase::TaskBegin,
                        token,
                        queue,
                        ..
                    } => {
                        if queue.is_empty() && !req.contains_key(token.as_str()) {
                            // A request's first task without its request_begin.
                            miss_kind.push((p, EdgeType::Request));
                        }
                        prev = Some(p);
                        task = Some(p);
                        continue;
                    }
                    Record::Marker {
                        phase: MarkerPhase::Enqueue,
                        token: etok,
                        ..
                    } => {
                        let task_tok = task.and_then(|tb| match ix.rec(tb) {
                            Record::Marker { token, .. } => Some(token),
                            _ => None,
                        });
                        if task_tok != Some(etok) {
                            // Handed on by a task whose begin marker is missing.
                            miss_kind.push((p, EdgeType::Handoff));
                            continue;
                        }
                        // The task hands its request on; program order continues past it.
                        if let Some(t) = task {
                            add.push(E {
                                src: t,
                                dst: p,
                                kind: EdgeType::Handoff,
                                ev: Evidence::Observed,
                                conf: 1.0,
                            });
                        }
                        continue;
                    }
                    _ => {}
                }
                if let Some(pp) = prev {
                    let (ev, conf) = if markers_present {
                        (Evidence::Observed, 1.0)
                    } else {
                        (Evidence::Inferred, 0.6)
                    };
                    add.push(E {
                        src: pp,
                        dst: p,
                        kind: EdgeType::HostOrder,
                        ev,
                        conf,
                    });
                }
                // A call of request T must run in a task of request T: otherwise that
                // task's begin marker is missing. A lost launch call of this thread
                // between the previous op and this one is a missing program-order
                // predecessor.
                if markers_present {
                    if let Some(t) = ix
                        .rec(p)
                        .correlation_id()
                        .and_then(|c| ix.token_by_corr.get(&c))
                    {
                        let task_tok = task.and_then(|tb| match ix.rec(tb) {
                            Record::Marker { token, .. } => Some(token),
                            _ => None,
                        });
                        if task_tok.map(|k| k.as_str()) != Some(t.as_str()) {
                            miss_kind.push((p, EdgeType::HostOrder));
                        }
                    }
                }
                if let Some(qs) = lost_here {
                    let lo = prev.map(|pp| ix.end(pp)).unwrap_or(0);
                    if qs.iter().any(|&q| q >= lo && q <= ix.start(p)) {
                        miss_kind.push((p, EdgeType::HostOrder));
                    }
                }
                // Scheduler / page-fault evidence between the previous op and this call.
                if !matches!(ix.rec(p), Record::Marker { .. }) {
                    let from = prev
                        .map(|pp| ix.end(pp))
                        .unwrap_or(ix.start(p).saturating_sub(50_000_000));
                    let st = ix.host_stalls(tid, from, ix.start(p));
                    if st.desched_ns >= NOISE_NS {
                        if let Some(s) = st.last_sched {
                            add.push(E {
                                src: s,
                                dst: p,
                                kind: EdgeType::Fault,
                                ev: Evidence::Observed,
                                conf: 0.9,
                            });
                        }
                    }
                    if st.fault_ns >= NOISE_NS || st.major > 0 {
                        if let Some(f) = st.last_fault {
                            add.push(E {
                                src: f,
                                dst: p,
                                kind: EdgeType::Fault,
                                ev: Evidence::Observed,
                                conf: 0.9,
                            });
                        }
                    }
                }
                prev = Some(p);
            }
        }
        self.edges.extend(add);
        let mc = self.missing_conf();
        for m in miss {
            self.add_missing(m, EdgeType::Handoff, mc);
        }
        for (m, k) in miss_kind {
            self.add_missing(m, k, mc);
        }
    }

    fn index_edges(&mut self) {
        let n = self.ix.recs.len();
        let mut off = vec![0u32; n + 1];
        for e in &self.edges {
            off[e.dst as usize + 1] += 1;
        }
        for i in 0..n {
            off[i + 1] += off[i];
        }
        let mut fill = off.clone();
        let mut idx = vec![0u32; self.edges.len()];
        for (i, e) in self.edges.iter().enumerate() {
            let d = e.dst as usize;
            idx[fill[d] as usize] = i as u32;
            fill[d] += 1;
        }
        self.in_off = off;
        self.in_idx = idx;
    }

    pub fn incoming(&self, p: Pos) -> Vec<E> {
        let (a, b) = (
            self.in_off[p as usize] as usize,
            self.in_off[p as usize + 1] as usize,
        );
        self.in_idx[a..b]
            .iter()
            .map(|&i| self.edges[i as usize])
            .collect()
    }

    fn incoming_of(&self, p: Pos, kind: EdgeType) -> Option<E> {
        self.incoming(p)
            .into_iter()
            .filter(|e| e.kind == kind)
            .max_by_key(|e| (self.ix.end(e.src), self.ix.rid(e.src)))
    }

    /// When a predecessor let `dst` proceed.
    fn effective(&self, e: &E) -> Ns {
        if e.kind == EdgeType::Launch {
            if let Some((q, _, _, _)) = self.ix.rec(e.dst).device_times() {
                if q > 0 {
                    return q;
                }
            }
            // A call that returns after its op started was blocking (a pageable
            // copy): the op was enqueued when the call began, not when it returned.
            let (call_start, call_end) = (self.ix.start(e.src), self.ix.end(e.src));
            return if call_end > self.ix.start(e.dst) {
                call_start
            } else {
                call_end
            };
        }
        self.done(e.src)
    }

    /// Walks back from `p` along gating predecessors: (path root first, first unresolved).
    pub fn critical_path(&self, p: Pos) -> (Vec<Pos>, Option<Pos>) {
        let mut path = vec![p];
        let mut cur = p;
        let mut unresolved = None;
        for _ in 0..256 {
            let inc = self.incoming(cur);
            let best = inc
                .iter()
                .filter(|e| !path.contains(&e.src))
                .max_by(|a, b| {
                    (self.effective(a), strength(a.ev), self.ix.rid(a.src)).cmp(&(
                        self.effective(b),
                        strength(b.ev),
                        self.ix.rid(b.src),
                    ))
                });
            if self.missing_at.contains_key(&cur) {
                // A predecessor the semantics require is absent: it may have gated
                // `cur`, so the walk cannot go on with confidence.
                unresolved = Some(cur);
                break;
            }
            match best {
                Some(e) if e.kind == EdgeType::HostOrder && e.ev == Evidence::Inferred => {
                    // Closed mode: which host task this call belongs to is not in the
                    // view; the path cannot be followed back with certainty.
                    unresolved = Some(cur);
                    break;
                }
                Some(e) => {
                    path.push(e.src);
                    cur = e.src;
                }
                None => {
                    // Without task markers a host chain's root is never visible.
                    if self.ix.view.spec.mode == ground_truth::Mode::Closed
                        && matches!(self.ix.rec(cur), Record::Api { .. } | Record::Uprobe { .. })
                    {
                        unresolved = Some(cur);
                    }
                    break;
                }
            }
        }
        path.reverse();
        (path, unresolved)
    }

    /// Request token of a record: explicit external correlation (device ops, api,
    /// sync), or the task markers of a host thread (uprobes).
    pub fn token(&self, p: Pos) -> Option<String> {
        let ix = &self.ix;
        let r = ix.rec(p);
        if let Some(c) = r.correlation_id() {
            return ix.token_by_corr.get(&c).cloned();
        }
        match r {
            Record::Uprobe { tid, enter, .. } => match ix.api_of_uprobe.get(&p) {
                Some(&a) => self.token(a),
                None => ix.task_token_on(*tid, *enter),
            },
            _ => None,
        }
    }

    /// The host call behind a record: its launch API for device activities, the
    /// record itself for calls.
    fn call_of(&self, p: Pos) -> Option<Pos> {
        match self.ix.rec(p) {
            Record::Api { .. } | Record::Uprobe { .. } => Some(self.ix.canonical_call(p)),
            _ => self.ix.launch_api(p),
        }
    }

    pub fn describe(&self, p: Pos) -> String {
        let ix = &self.ix;
        let r = ix.rec(p);
        let what = match r {
            Record::Api { name, tid, .. } => format!("api {name} (thread {tid})"),
            Record::Uprobe { function, tid, .. } => format!("uprobe {function} (thread {tid})"),
            Record::Kernel {
                name,
                stream,
                graph_node_id,
                ..
            } if *graph_node_id != 0 => {
                format!("kernel {name} (stream {stream}, graph node {graph_node_id})")
            }
            Record::Kernel { name, stream, .. } => format!("kernel {name} (stream {stream})"),
            Record::Memcpy {
                direction,
                bytes,
                stream,
                memory,
                ..
            } => format!("memcpy {direction:?} {bytes} B {memory:?} (stream {stream})")
                .to_lowercase(),
            Record::Memset { bytes, stream, .. } => format!("memset {bytes} B (stream {stream})"),
            Record::Sync {
                sync_type,
                stream,
                event_sync_id,
                ..
            } => {
                format!("sync {sync_type:?} (stream {stream}, event sync id {event_sync_id})")
            }
            Record::CudaEvent {
                stream,
                event_sync_id,
                ..
            } => format!("event record (stream {stream}, sync id {event_sync_id})"),
            Record::Marker {
                phase,
                queue,
                token,
                tid,
                ..
            } => {
                format!("marker {phase:?} queue `{queue}` token `{token}` (thread {tid})")
            }
            Record::Sched {
                reason,
                tid,
                switch_out,
                switch_in,
                ..
            } => {
                format!(
                    "sched {reason:?} thread {tid} for {:.1} µs",
                    (switch_in - switch_out) as f64 / 1e3
                )
            }
            Record::PageFault { major, tid, .. } => format!(
                "{} page fault (thread {tid})",
                if *major { "major" } else { "minor" }
            ),
            Record::Nvtx { name, .. } => format!("nvtx `{name}`"),
            Record::ExternalCorrelation { external_id, .. } => {
                format!("external correlation {external_id}")
            }
        };
        let (s, e) = r.interval();
        format!(
            "rid {} {what} [{:.3} → {:.3} ms]",
            r.rid(),
            s as f64 / 1e6,
            e as f64 / 1e6
        )
    }

    /// Host-side lateness of a call: (gap since its host predecessor, queue waits
    /// of its handoff chain, total time since its request began).
    fn host_measure(&self, call: Pos) -> HostMeasure {
        let ix = &self.ix;
        let mut m = HostMeasure::default();
        let start = ix.start(call);
        if let Some(e) = self.incoming_of(call, EdgeType::HostOrder) {
            m.gap = Some(start.saturating_sub(ix.end(e.src)) as f64);
            m.ready = ix.end(e.src);
            m.gap_inferred = e.ev == Evidence::Inferred;
        } else {
            m.ready = start;
        }
        // Follow the handoff chain back through task_begin markers.
        let mut cur = call;
        for _ in 0..64 {
            let Some(t) = self.task_of(cur) else { break };
            if let Some(e) = self.incoming_of(t, EdgeType::Handoff) {
                m.queue_wait = Some(
                    m.queue_wait.unwrap_or(0.0)
                        + ix.start(t).saturating_sub(ix.start(e.src)) as f64,
                );
                cur = e.src;
                continue;
            }
            if let Some(e) = self.incoming_of(t, EdgeType::Request) {
                m.since_request = Some(start.saturating_sub(ix.start(e.src)) as f64);
                // Arrival → first task: the request waited to be picked up.
                m.queue_wait = Some(
                    m.queue_wait.unwrap_or(0.0)
                        + ix.start(t).saturating_sub(ix.start(e.src)) as f64,
                );
            }
            break;
        }
        m
    }

    /// The task_begin marker of the host task a host operation belongs to.
    fn task_of(&self, mut x: Pos) -> Option<Pos> {
        for _ in 0..100_000 {
            match self.ix.rec(x) {
                Record::Marker {
                    phase: MarkerPhase::TaskBegin,
                    ..
                } => return Some(x),
                Record::Marker {
                    phase: MarkerPhase::Enqueue,
                    ..
                } => x = self.incoming_of(x, EdgeType::Handoff)?.src,
                _ => x = self.incoming_of(x, EdgeType::HostOrder)?.src,
            }
        }
        None
    }

    /// Diagnoses one query.
    pub(crate) fn diagnose(&self, q: &Query) -> Diag {
        let ix = &self.ix;
        let Some(p) = ix.pos(q.rid) else {
            return Diag {
                diagnosis: Diagnosis {
                    query: q.id.clone(),
                    causes: ranked(vec![(CauseLabel::None, 1.0)]),
                    critical_path: vec![],
                    phases: Phases::default(),
                    complete: false,
                    first_unresolved: None,
                    answer: None,
                },
                peers: 0,
            };
        };
        let (mut path, mut unresolved) = self.critical_path(p);
        let (mut causes, phases, npeers) = self.causes(p, 0);
        let call = self.call_of(p);
        // The launch call was late and nothing visible on the host explains it:
        // without the eBPF collector (or with host records lost) the stall that
        // delayed it is not in this view.
        let (d, v) = dominant(&phases);
        let host_late = d == 0
            && significant(v, 0.0)
            && causes
                .first()
                .is_some_and(|c| c.0 == CauseLabel::HostCompute);
        if host_late && (!self.has_ebpf || self.loss_plausible) {
            if let Some(c) = call {
                if unresolved.is_none() {
                    unresolved = Some(c);
                    if let Some(i) = path.iter().position(|&x| x == c) {
                        path.drain(..i);
                    }
                }
                if !self.has_ebpf {
                    causes.push((CauseLabel::CpuDeschedule, v * 0.5));
                    causes.push((CauseLabel::HostPageFault, v * 0.4));
                }
            }
        }
        // Host-only view: the device side of a call's work is never visible.
        if !self.has_cupti
            && unresolved.is_none()
            && call.is_some_and(|c| {
                let k = ix.call_kind(c);
                k.launches_work() || k == crate::index::CallKind::Synchronize
            })
        {
            unresolved = Some(p);
        }
        let answer = match q.question {
            Question::CallSite => self
                .call_of(p)
                .and_then(|c| ix.stack(c))
                .and_then(call_site_frame)
                .map(str::to_string),
            Question::Operator => self.call_of(p).and_then(|c| {
                let r = ix.rec(c);
                ix.nvtx_enclosing_on(r.tid()?, r.interval().0)
                    .map(|n| match ix.rec(n) {
                        Record::Nvtx { name, .. } => name.to_string(),
                        _ => String::new(),
                    })
            }),
            _ => None,
        };
        Diag {
            diagnosis: Diagnosis {
                query: q.id.clone(),
                causes: ranked(causes),
                critical_path: path.iter().map(|&x| ix.rid(x)).collect(),
                phases,
                complete: unresolved.is_none(),
                first_unresolved: unresolved.map(|x| ix.rid(x)),
                answer,
            },
            peers: npeers,
        }
    }

    /// Ranked causes, phase excess and peer count for record `p`.
    fn causes(&self, p: Pos, depth: u32) -> (Vec<(CauseLabel, f64)>, Phases, usize) {
        let ix = &self.ix;
        let r = ix.rec(p);
        match r {
            Record::Kernel { .. } | Record::Memcpy { .. } | Record::Memset { .. } => {
                self.device_causes(p, 0)
            }
            Record::Sync { sync_type, .. } if *sync_type != SyncType::StreamWaitEvent => {
                self.blocking_causes(p, depth)
            }
            Record::Api { correlation_id, .. } => {
                // A blocking call seen through its API record.
                let acts = ix.acts_by_corr.get(correlation_id);
                if let Some(s) = acts.and_then(|v| {
                    v.iter().copied().find(|&a| matches!(ix.rec(a), Record::Sync { sync_type, .. } if *sync_type != SyncType::StreamWaitEvent))
                }) {
                    return self.blocking_causes(s, depth);
                }
                if let Some(d) =
                    acts.and_then(|v| v.iter().copied().find(|&a| ix.rec(a).is_device_op()))
                {
                    return self.device_causes(d, 0);
                }
                self.host_causes(p)
            }
            Record::Uprobe { .. } => self.host_causes(ix.canonical_call(p)),
            Record::Sync { .. } | Record::CudaEvent { .. } => {
                // Wait or event record: judged by what gated it.
                let inc = self.incoming(p);
                if inc.iter().any(|e| e.kind == EdgeType::Event) {
                    (
                        vec![
                            (CauseLabel::EventWait, 0.6),
                            (CauseLabel::StreamBacklog, 0.2),
                        ],
                        Phases::default(),
                        0,
                    )
                } else {
                    (
                        vec![(CauseLabel::StreamBacklog, 0.5), (CauseLabel::None, 0.3)],
                        Phases::default(),
                        0,
                    )
                }
            }
            _ => (vec![(CauseLabel::None, 1.0)], Phases::default(), 0),
        }
    }

    /// Host-only diagnosis of a call (no device record to judge).
    fn host_causes(&self, call: Pos) -> (Vec<(CauseLabel, f64)>, Phases, usize) {
        let peers = self.call_peers(call);
        let (host, v) = self.host_excess(call, &peers);
        let mut ph = Phases::default();
        ph.host_enqueue = host;
        if !significant(host, 0.0) {
            return (
                vec![(CauseLabel::None, 1.0), (CauseLabel::HostCompute, 0.2)],
                Phases::default(),
                peers.len(),
            );
        }
        (v, ph, peers.len())
    }

    /// Peers of a host call: same entry point, same call-site frame when known.
    fn call_peers(&self, call: Pos) -> Vec<Pos> {
        let ix = &self.ix;
        let name = ix.call_name(call);
        let site = ix.stack(call).and_then(call_site_frame);
        ix.all_calls
            .iter()
            .copied()
            .filter(|&c| {
                c != call
                    && ix.call_name(c) == name
                    && ix.stack(c).and_then(call_site_frame) == site
            })
            .collect()
    }

    /// Host-side excess of a call over its peers, and the host causes ranked.
    fn host_excess(&self, call: Pos, peer_calls: &[Pos]) -> (f64, Vec<(CauseLabel, f64)>) {
        let ix = &self.ix;
        let own = self.host_measure(call);
        let pm: Vec<HostMeasure> = peer_calls
            .iter()
            .take(512)
            .map(|&c| self.host_measure(c))
            .collect();
        let gap_x = analysis::excess(own.gap, pm.iter().filter_map(|m| m.gap).collect(), 0.0);
        let wait_x = analysis::excess(
            own.queue_wait,
            pm.iter().filter_map(|m| m.queue_wait).collect(),
            0.0,
        );
        let tid = ix.rec(call).tid().unwrap_or(0);
        let st = ix.host_stalls(tid, own.ready.min(ix.start(call)), ix.start(call));
        // A gap to an inferred predecessor (closed mode: maybe another task's call)
        // includes idle time; only what stall records explain counts as lateness.
        let gap_x = if own.gap_inferred {
            gap_x.min(st.desched_ns + st.fault_ns)
        } else {
            gap_x
        };
        let total = gap_x + wait_x;
        let mut v = vec![
            (
                CauseLabel::CpuDeschedule,
                st.desched_ns.min(gap_x.max(st.desched_ns)),
            ),
            (
                CauseLabel::HostPageFault,
                st.fault_ns + if st.major > 0 { NOISE_NS } else { 0.0 },
            ),
            (CauseLabel::HandoffQueueing, wait_x),
            (
                CauseLabel::HostCompute,
                (gap_x - st.desched_ns - st.fault_ns).max(0.0),
            ),
        ];
        v.retain(|x| x.1 > 0.0);
        if v.is_empty() {
            v.push((CauseLabel::HostCompute, 1.0));
        }
        (total.max(st.desched_ns + st.fault_ns), v)
    }

    /// Peers of a device op: the same operation (kernel name / copy shape, and
    /// the same call site when stacks show it) in other requests of the view.
    fn device_peers(&self, p: Pos) -> Vec<Pos> {
        let ix = &self.ix;
        let all = self.peers.of(ix, p);
        let site = |k: Pos| {
            ix.launch_api(k)
                .and_then(|a| ix.stack(a))
                .and_then(call_site_frame)
        };
        let tok = |k: Pos| self.token(k);
        let (my_site, my_tok) = (site(p), tok(p));
        let same_site: Vec<Pos> = all
            .iter()
            .copied()
            .filter(|&k| site(k) == my_site)
            .collect();
        let pool = if same_site.is_empty() { all } else { same_site };
        let other_req: Vec<Pos> = pool
            .iter()
            .copied()
            .filter(|&k| my_tok.is_none() || tok(k) != my_tok)
            .collect();
        if other_req.is_empty() {
            pool
        } else {
            other_req
        }
    }

    /// Per-phase excess of a device op over its peers, host side included.
    fn device_phases(&self, p: Pos, peers: &[Pos]) -> (Phases, Vec<(CauseLabel, f64)>) {
        let ix = &self.ix;
        let r = ix.rec(p);
        let mut ph = analysis::device_excess(ix, peers, p);
        // Graph nodes have no queued/submitted: the wait after the launch call is
        // the dependency wait.
        if matches!(r, Record::Kernel { graph_node_id, .. } if *graph_node_id != 0) {
            let wait = |k: Pos| {
                ix.launch_api(k)
                    .map(|a| ix.start(k).saturating_sub(ix.end(a)) as f64)
            };
            ph.queued_to_submitted = analysis::excess(
                wait(p),
                peers.iter().filter_map(|&k| wait(k)).collect(),
                0.0,
            );
            ph.submitted_to_start = 0.0;
        }
        let mut host_causes = Vec::new();
        if let Some(a) = ix.launch_api(p) {
            let peer_calls: Vec<Pos> = peers.iter().filter_map(|&k| ix.launch_api(k)).collect();
            let (hx, hv) = self.host_excess(a, &peer_calls);
            ph.host_enqueue = hx;
            host_causes = hv;
        }
        (ph, host_causes)
    }

    /// The predecessor whose completion let `p` proceed.
    fn gating_edge(&self, p: Pos) -> Option<E> {
        self.incoming(p).into_iter().max_by(|a, b| {
            (self.effective(a), strength(a.ev), self.ix.rid(a.src)).cmp(&(
                self.effective(b),
                strength(b.ev),
                self.ix.rid(b.src),
            ))
        })
    }

    /// Walks the gating chain back from a device op through waits and event
    /// records to the first device op or host call that held it back:
    /// (that record, edge kinds crossed, whether a required record is missing).
    fn gating_chain(&self, p: Pos) -> (Option<Pos>, Vec<EdgeType>, bool) {
        let ix = &self.ix;
        let mut kinds = Vec::new();
        let mut cur = p;
        for _ in 0..64 {
            if cur != p && self.missing_at.contains_key(&cur) {
                return (Some(cur), kinds, true);
            }
            let Some(e) = self.gating_edge(cur) else {
                return (None, kinds, false);
            };
            kinds.push(e.kind);
            cur = e.src;
            match ix.rec(cur) {
                Record::CudaEvent { .. }
                | Record::Sync {
                    sync_type: SyncType::StreamWaitEvent,
                    ..
                } => continue,
                _ => return (Some(cur), kinds, false),
            }
        }
        (Some(cur), kinds, false)
    }

    /// What held a device op back, from the kind of its gating chain and, when
    /// the gate was itself late, the upstream op's own cause.
    fn gating_causes(&self, p: Pos, v: f64, depth: u32) -> Vec<(CauseLabel, f64)> {
        let ix = &self.ix;
        let r = ix.rec(p);
        let is_copy = matches!(r, Record::Memcpy { .. });
        let (up, kinds, lost) = self.gating_chain(p);
        let first = kinds.first().copied();
        let base = if kinds.contains(&EdgeType::Event) {
            CauseLabel::EventWait
        } else if first == Some(EdgeType::Graph) {
            CauseLabel::GraphDependency
        } else if first == Some(EdgeType::Fault) {
            if is_copy {
                CauseLabel::PcieContention
            } else {
                CauseLabel::OccupancyPressure
            }
        } else if first == Some(EdgeType::Launch) || first.is_none() {
            // Started as soon as it was launched: the host decided its timing.
            return match ix.launch_api(p) {
                Some(a) => self
                    .host_structural(a)
                    .into_iter()
                    .map(|(l, x)| (l, x * v.max(1.0)))
                    .collect(),
                None => vec![
                    (CauseLabel::StreamBacklog, v * 0.5),
                    (CauseLabel::EventWait, v * 0.5),
                ],
            };
        } else if self.is_fenced_copy(p) {
            CauseLabel::ImplicitSync
        } else {
            CauseLabel::StreamBacklog
        };
        let mut out = vec![(base, v)];
        if self.missing_at.contains_key(&p) || lost {
            // The gate is behind a lost record: its kind is a guess.
            let alt = if base == CauseLabel::EventWait {
                CauseLabel::StreamBacklog
            } else {
                CauseLabel::EventWait
            };
            out.push((alt, v * 0.4));
        }
        // A gate that was itself late for a reason of its own passes that reason on.
        if let Some(u) = up.filter(|&u| ix.rec(u).is_device_op() && depth < 3 && !lost) {
            let upeers = self.device_peers(u);
            let utyp = analysis::typical_latency(ix, &upeers);
            let (uph, uhost) = self.device_phases(u, &upeers);
            let (ud, uv) = dominant(&uph);
            if significant(uv, utyp) && !upeers.is_empty() {
                let ucopy = matches!(ix.rec(u), Record::Memcpy { .. });
                let passed: Vec<(CauseLabel, f64)> = match ud {
                    0 => uhost,
                    2 if ucopy => vec![(CauseLabel::PcieContention, 1.0)],
                    2 => vec![(CauseLabel::OccupancyPressure, 1.0)],
                    3 if ucopy => vec![(CauseLabel::SlowCopy, 1.0)],
                    1 => self.gating_causes(u, 1.0, depth + 1),
                    _ => vec![],
                };
                let total: f64 = passed.iter().map(|x| x.1).sum::<f64>().max(1e-9);
                if let Some(&(l, _)) = passed.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
                    if l != base {
                        out.insert(0, (l, v * 1.2));
                        let _ = total;
                    }
                }
            }
        }
        out
    }

    /// Why a call happened when it did, from its host-side chain (no peers).
    fn host_structural(&self, call: Pos) -> Vec<(CauseLabel, f64)> {
        let ix = &self.ix;
        let m = self.host_measure(call);
        let tid = ix.rec(call).tid().unwrap_or(0);
        let st = ix.host_stalls(tid, m.ready.min(ix.start(call)), ix.start(call));
        let wait = m.queue_wait.unwrap_or(0.0);
        let since = m.since_request.unwrap_or(0.0);
        let in_task = (since - wait).max(m.gap.unwrap_or(0.0)).max(0.0);
        let mut v = vec![
            (CauseLabel::CpuDeschedule, st.desched_ns),
            (CauseLabel::HostPageFault, st.fault_ns),
            (CauseLabel::HandoffQueueing, wait),
            (
                CauseLabel::HostCompute,
                (in_task - st.desched_ns - st.fault_ns).max(0.0),
            ),
        ];
        v.retain(|x| x.1 > 0.0);
        let total: f64 = v.iter().map(|x| x.1).sum();
        let mut out: Vec<(CauseLabel, f64)> = if total <= 0.0 {
            vec![(CauseLabel::HostCompute, 1.0)]
        } else {
            v.into_iter().map(|(l, x)| (l, x / total)).collect()
        };
        if ix.view.spec.mode == ground_truth::Mode::Closed {
            // Queues are invisible without markers: queueing stays a candidate.
            out.push((CauseLabel::HandoffQueueing, 0.4));
        }
        out
    }

    fn device_causes(&self, p: Pos, depth: u32) -> (Vec<(CauseLabel, f64)>, Phases, usize) {
        let ix = &self.ix;
        let r = ix.rec(p);
        let peers = self.device_peers(p);
        let typical = analysis::typical_latency(ix, &peers);
        let (ph, host_causes) = self.device_phases(p, &peers);
        let is_copy = matches!(r, Record::Memcpy { .. });
        let (d, v) = dominant(&ph);
        if !significant(v, typical) {
            // Nothing is late against its peers: explain the op's timing by what
            // gated it, and keep `none` as the close alternative.
            let mut out: Vec<(CauseLabel, f64)> = self
                .gating_causes(p, 1.0, depth)
                .into_iter()
                .map(|(l, x)| (l, 0.6 * x))
                .collect();
            out.push((CauseLabel::None, 0.45));
            // Not late: no lateness to split.
            return (out, Phases::default(), peers.len());
        }
        let mut out: Vec<(CauseLabel, f64)> = Vec::new();
        match d {
            0 => out.extend(host_causes.iter().copied()),
            1 => out.extend(self.gating_causes(p, v, depth)),
            2 => {
                let (q, s, st, _) = r.device_times().expect("device op");
                let from = if s > 0 { s } else { q };
                if is_copy {
                    let o = analysis::overlap_by_others(ix, p, from, st, |o| {
                        matches!(o, Record::Memcpy { .. })
                    });
                    out.push((
                        CauseLabel::PcieContention,
                        v * if o > 0.0 { 1.0 } else { 0.5 },
                    ));
                    out.push((CauseLabel::SlowCopy, v * if o > 0.0 { 0.2 } else { 0.4 }));
                } else {
                    let o = analysis::overlap_by_others(ix, p, from, st, |o| {
                        matches!(o, Record::Kernel { .. })
                    });
                    out.push((
                        CauseLabel::OccupancyPressure,
                        v * if o > 0.0 { 1.0 } else { 0.6 },
                    ));
                    out.push((CauseLabel::StreamBacklog, v * 0.3));
                }
            }
            _ => {
                if is_copy {
                    out.push((CauseLabel::SlowCopy, v));
                    out.push((CauseLabel::PcieContention, v * 0.3));
                } else {
                    out.push((CauseLabel::OccupancyPressure, v));
                    out.push((CauseLabel::GraphDependency, v * 0.1));
                }
            }
        }
        // Secondary significant phases as lower-ranked alternatives.
        if d != 0 && significant(ph.host_enqueue, typical) {
            out.extend(host_causes.iter().map(|&(l, s)| (l, s * 0.3)));
        }
        if d != 1 && significant(ph.queued_to_submitted, typical) {
            out.extend(self.gating_causes(p, ph.queued_to_submitted * 0.3, depth));
        }
        (out, ph, peers.len())
    }

    /// A blocking host call (stream/event/context synchronize, implicit fence).
    fn blocking_causes(&self, s: Pos, depth: u32) -> (Vec<(CauseLabel, f64)>, Phases, usize) {
        let ix = &self.ix;
        let Record::Sync {
            sync_type,
            correlation_id,
            ..
        } = ix.rec(s)
        else {
            return (vec![(CauseLabel::None, 1.0)], Phases::default(), 0);
        };
        let copy = ix
            .acts_by_corr
            .get(correlation_id)
            .and_then(|v| v.iter().copied().find(|&a| ix.rec(a).is_device_op()));
        if *sync_type == SyncType::ImplicitCopyFence {
            let mut v = vec![(CauseLabel::ImplicitSync, 1.0)];
            let mut ph = Phases::default();
            let mut n = 0;
            if let Some(c) = copy {
                let (cv, cph, cn) = self.device_causes(c, 1);
                ph = cph;
                n = cn;
                v.extend(
                    cv.into_iter()
                        .filter(|x| x.0 != CauseLabel::ImplicitSync)
                        .map(|(l, x)| (l, x.min(1.0) * 0.3)),
                );
            }
            return (v, ph, n);
        }
        // Judge the device work the call waited for.
        let host_call = ix.api_by_corr.get(correlation_id).copied().unwrap_or(s);
        let gating = self.incoming_of(host_call, EdgeType::Sync);
        match gating {
            Some(e) if depth < 2 && ix.rec(e.src).is_device_op() => {
                let (v, ph, n) = self.causes(e.src, depth + 1);
                (v, ph, n)
            }
            Some(_) => (
                vec![
                    (CauseLabel::EventWait, 0.5),
                    (CauseLabel::StreamBacklog, 0.5),
                ],
                Phases::default(),
                0,
            ),
            None => (
                vec![(CauseLabel::None, 0.5), (CauseLabel::ImplicitSync, 0.5)],
                Phases::default(),
                0,
            ),
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct HostMeasure {
    /// Call start minus its host-order predecessor's end.
    gap: Option<f64>,
    /// Sum of queue waits (task_begin − enqueue) along the handoff chain.
    queue_wait: Option<f64>,
    since_request: Option<f64>,
    /// The predecessor was only inferred (no task markers).
    gap_inferred: bool,
    /// When the call's host predecessor finished.
    ready: Ns,
}

fn strength(e: Evidence) -> u8 {
    match e {
        Evidence::Explicit => 3,
        Evidence::Observed => 2,
        Evidence::Inferred => 1,
        Evidence::Missing => 0,
    }
}
