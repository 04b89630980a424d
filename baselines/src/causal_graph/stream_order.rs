//! Stream order: consecutive items of one CUPTI stream by enqueue time, graph
//! launches as one unit, and the stream predecessors that are missing.

use super::graph::Graph;
use super::thresholds::{
    GRAPH_LAUNCH_ENTRY_CONFIDENCE, GRAPH_UNIT_STREAM_ORDER_CONFIDENCE, NOISE_NS,
    ORPHAN_BY_HANDLE_CONFIDENCE, ORPHAN_BY_HANDLE_CONFIDENCE_LOSS_PLAUSIBLE,
    ORPHAN_BY_THREAD_CONFIDENCE, OVERLAP_SCAN_OPS, RELEASE_SLACK_NS, RELEASE_SLACK_WAIT_SHARE,
    STREAM_ORDER_BESIDE_MISSING_CONFIDENCE, STREAM_ORDER_CONFIDENCE_LOSS_PLAUSIBLE,
};
use crate::index::FastMap;
use crate::index::{Activities, CallKind, Pos};
use ground_truth::trace::{HostMemory, Record, SyncType};
use ground_truth::{EdgeType, Evidence, Ns};

/// Unit of a stream's order: one record, or the kernels of one graph launch.
pub(super) enum Unit {
    One(Pos),
    Graph(Vec<Pos>),
}

impl Graph<'_> {
    /// Enqueue-order key of a stream item: its launching call's start.
    pub(super) fn enqueue_key(&self, p: Pos) -> Ns {
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

    /// Stream order, graph dependencies inside launches, and missing stream predecessors:
    /// the graph edges inside launches ([`Graph::graph_edges_in_launches`]), then each
    /// stream's units in enqueue order ([`Graph::stream_order`]), then the edges into
    /// each graph launch's entry nodes on its other streams
    /// ([`Graph::graph_launch_entry_edges`]).
    pub(super) fn stream_edges(&mut self) {
        let mut by_stream = self.stream_items();
        let orphans = self.orphan_launches();
        let (graph_preds, graph_succs) = self.graph_edges_in_launches();
        let launch_sinks = self.launch_sinks(&graph_succs);
        let mut streams: Vec<u32> = by_stream.keys().copied().collect();
        streams.sort_unstable();
        let mut pass = StreamPass {
            orphans,
            graph_preds,
            launch_sinks,
            base_conf: if self.loss_plausible {
                STREAM_ORDER_CONFIDENCE_LOSS_PLAUSIBLE
            } else {
                1.0
            },
            mc: self.missing_conf(),
            launch_entries: FastMap::default(),
            launch_preds: FastMap::default(),
        };
        for s in streams {
            let mut items = by_stream.remove(&s).unwrap_or_default();
            items.sort_unstable();
            let units = self.units_of(&items);
            let order = self.stream_order(s, &units, &mut pass);
            self.stream_units.insert(s, order);
        }
        self.graph_launch_entry_edges(&pass.launch_preds, &pass.launch_entries);
    }

    /// The items of every CUPTI stream (device ops, event records, stream waits), as
    /// (enqueue key, start, rid, position), unsorted.
    fn stream_items(&self) -> FastMap<u32, Vec<(Ns, Ns, u64, Pos)>> {
        let ix = &self.ix;
        let mut by_stream: FastMap<u32, Vec<(Ns, Ns, u64, Pos)>> = FastMap::default();
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
        by_stream
    }

    /// Adds the inferred graph edges inside launches (and the missing ones of nodes
    /// whose usual predecessor is absent). Returns the nodes with an inferred
    /// predecessor and those with an inferred successor.
    fn graph_edges_in_launches(&mut self) -> (FastMap<Pos, ()>, FastMap<Pos, ()>) {
        let graph_edges = self.infer_graph_edges();
        let mc0 = self.missing_conf();
        for b in self.graph_lost.take() {
            self.add_missing(b, EdgeType::Graph, mc0);
        }
        let mut graph_preds: FastMap<Pos, ()> = FastMap::default();
        let mut graph_succs: FastMap<Pos, ()> = FastMap::default();
        for &(a, b, conf) in &graph_edges {
            self.add(a, b, EdgeType::Graph, Evidence::Inferred, conf);
            graph_preds.insert(b, ());
            graph_succs.insert(a, ());
        }
        (graph_preds, graph_succs)
    }

    /// Each graph launch's sinks (nodes nothing in it depends on), over every
    /// stream its nodes ran on: the launch completes through all of them,
    /// so a stream's next item or a synchronize on any of its streams waits
    /// for them, not only for the nodes CUPTI put on that stream.
    fn launch_sinks(&self, graph_succs: &FastMap<Pos, ()>) -> FastMap<u32, Activities> {
        let mut launch_sinks: FastMap<u32, Activities> = FastMap::default();
        for &d in &self.ix.device_ops {
            if let Record::Kernel {
                correlation_id,
                detail,
                ..
            } = self.ix.rec(d)
            {
                if detail.graph_node_id != 0 && !graph_succs.contains_key(&d) {
                    launch_sinks.entry(*correlation_id).or_default().push(d);
                }
            }
        }
        launch_sinks
    }

    /// A stream's items, sorted, as units: the kernels of one graph launch group into
    /// one.
    fn units_of(&self, items: &[(Ns, Ns, u64, Pos)]) -> Vec<(Ns, Unit)> {
        let mut units: Vec<(Ns, Unit)> = Vec::new();
        for &(key, _, _, p) in items {
            let r = self.ix.rec(p);
            let gk = match r {
                Record::Kernel {
                    correlation_id,
                    detail,
                    ..
                } if detail.graph_node_id != 0 => Some(*correlation_id),
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
        units
    }

    /// Stream `s`'s order: each unit's entries follow the previous unit's exits.
    /// Returns the stream's (enqueue key, exits) per unit; a graph launch's entries and
    /// the exits before it are kept in `pass` for its other streams.
    fn stream_order(
        &mut self,
        s: u32,
        units: &[(Ns, Unit)],
        pass: &mut StreamPass,
    ) -> Vec<(Ns, Activities)> {
        let orphan_keys = pass.orphans.get(&s);
        let mut prev: Option<(Ns, Activities)> = None;
        let mut prev_multi = false;
        let mut order: Vec<(Ns, Activities)> = Vec::with_capacity(units.len());
        for (key, u) in units {
            let entries: Vec<Pos> = match u {
                Unit::One(p) => vec![*p],
                Unit::Graph(v) => v
                    .iter()
                    .copied()
                    .filter(|p| !pass.graph_preds.contains_key(p))
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
            if let Unit::Graph(v) = u {
                if let Some(c) = self.ix.rec(v[0]).correlation_id() {
                    pass.launch_entries.entry(c).or_default().extend(&entries);
                    if let Some((_, pp)) = &prev {
                        pass.launch_preds.entry(c).or_default().extend(pp);
                    }
                }
            }
            // Which nodes of a graph launch enter and exit it follows from
            // the inferred topology: such an edge is inferred too.
            let inferred = matches!(u, Unit::Graph(v) if v.len() > 1) || prev_multi;
            for &x in &entries {
                let pred_exits: &[Pos] = prev.as_ref().map(|(_, v)| v.as_slice()).unwrap_or(&[]);
                self.stream_order_into(x, pred_exits, inferred, orphan_between, pass);
            }
            // A graph launch completes through its sinks (nodes nothing depends on).
            // Kept inline: one unit per launch, nearly all a single op.
            let exits: Activities = match u {
                Unit::One(p) => Activities::from_slice(&[*p]),
                // A launch has no sinks only when every node of it has an
                // inferred successor; its unit then has no exits either.
                Unit::Graph(v) => self
                    .ix
                    .rec(v[0])
                    .correlation_id()
                    .and_then(|c| pass.launch_sinks.get(&c))
                    .cloned()
                    .unwrap_or_default(),
            };
            prev_multi = matches!(u, Unit::Graph(v) if v.len() > 1);
            prev = Some((*key, exits.clone()));
            order.push((*key, exits));
        }
        order
    }

    /// The stream-order edges into entry `x` of a unit from the previous unit's exits
    /// (`inferred`: either unit is a graph launch of several nodes), less sure, and a
    /// missing predecessor claimed, where a launch left no record between them
    /// (`orphan_between`: the claim's confidence) or something unseen held `x` back.
    fn stream_order_into(
        &mut self,
        x: Pos,
        pred_exits: &[Pos],
        inferred: bool,
        orphan_between: f64,
        pass: &StreamPass,
    ) {
        // A stream wait lets its stream go on only once the stream's
        // previous item is done as well as the event it waits for. Its
        // record's `end` need not say so: docs/records.md has it "when
        // satisfied", but the H200's records (results/dev-corpus/h200-580)
        // end it with the API call, so a wait enqueued behind a long copy
        // "ends" long before the copy does.
        if matches!(
            self.ix.rec(x),
            Record::Sync {
                sync_type: SyncType::StreamWaitEvent,
                ..
            }
        ) {
            if let Some(behind) = pred_exits.iter().map(|&e| self.done(e)).max() {
                let done = self.done(x).max(behind);
                self.wait_satisfied.insert(x, done);
            }
        }
        let unexplained = self.unexplained_gating(x, pred_exits);
        let mut conf: f64 = pass.base_conf;
        if orphan_between > 0.0 {
            self.add_missing(x, EdgeType::StreamOrder, orphan_between);
            conf = STREAM_ORDER_BESIDE_MISSING_CONFIDENCE;
        } else if unexplained {
            self.add_missing(x, EdgeType::StreamOrder, pass.mc);
            conf = STREAM_ORDER_BESIDE_MISSING_CONFIDENCE;
        }
        for &e in pred_exits {
            if inferred {
                self.add(
                    e,
                    x,
                    EdgeType::StreamOrder,
                    Evidence::Inferred,
                    conf.min(GRAPH_UNIT_STREAM_ORDER_CONFIDENCE),
                );
            } else {
                self.add(e, x, EdgeType::StreamOrder, Evidence::Observed, conf);
            }
        }
    }

    /// A graph launch enters the stream it was launched into as one unit: every
    /// entry node waits for that stream's earlier work, on whichever stream
    /// CUPTI reports the node (the driver runs a graph's branches on streams of
    /// its own, docs/gpu-facts.md). The launch's stream is not in its API record,
    /// so the item before the launch on any of its nodes' streams stands for it;
    /// one that ended after an entry node started did not gate it.
    fn graph_launch_entry_edges(
        &mut self,
        launch_preds: &FastMap<u32, Vec<Pos>>,
        launch_entries: &FastMap<u32, Vec<Pos>>,
    ) {
        let mut launches: Vec<u32> = launch_preds.keys().copied().collect();
        launches.sort_unstable();
        for c in launches {
            let preds = &launch_preds[&c];
            for &x in launch_entries.get(&c).map(Vec::as_slice).unwrap_or(&[]) {
                let stream = self.ix.rec(x).stream();
                for &e in preds {
                    if self.ix.rec(e).stream() != stream && self.ix.end(e) <= self.ix.start(x) {
                        self.add(
                            e,
                            x,
                            EdgeType::StreamOrder,
                            Evidence::Inferred,
                            GRAPH_LAUNCH_ENTRY_CONFIDENCE,
                        );
                    }
                }
            }
        }
    }

    /// Was `x` held back (submitted well after queued) by something not visible?
    pub(super) fn unexplained_gating(&self, x: Pos, preds: &[Pos]) -> bool {
        let Some((q, s, _, _)) = super::readings::device_times(&self.ix, x) else {
            return false;
        };
        if q == 0 || s <= q {
            return false;
        }
        let wait = (s - q) as f64;
        if wait < NOISE_NS {
            return false;
        }
        let tol = RELEASE_SLACK_NS + RELEASE_SLACK_WAIT_SHARE * wait;
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
                .take(OVERLAP_SCAN_OPS)
                .any(|&o| o != x && explained_by(o))
            {
                return false;
            }
        }
        true
    }

    pub(super) fn is_fenced_copy(&self, x: Pos) -> bool {
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
        self.ix.activities(c).is_some_and(|v| {
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

    /// Stream wait → max(its record's end, completion of the event record it waited on).
    pub(super) fn stream_wait_completions(&self) -> FastMap<Pos, Ns> {
        let ix = &self.ix;
        let mut event_done: FastMap<u64, Ns> = FastMap::default();
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
        let mut out = FastMap::default();
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
    pub(super) fn orphan_launches(&self) -> FastMap<u32, Vec<(Ns, f64)>> {
        let ix = &self.ix;
        let mut out: FastMap<u32, Vec<(Ns, f64)>> = FastMap::default();
        if ix.device_ops.is_empty() {
            return out;
        }
        // Raw stream handle → CUPTI stream id, as observed over time (handles repeat).
        let mut handle_obs: FastMap<u64, Vec<(Ns, u32)>> = FastMap::default();
        let mut thread_obs: FastMap<u32, Vec<(Ns, u32)>> = FastMap::default();
        let mut orphans = Vec::new();
        // In record order, each correlation id's API record as `api_by_corr` keeps it.
        let calls = ix.recs.iter().enumerate().filter_map(|(i, r)| match r {
            Record::Api { correlation_id, .. }
                if ix.api_of_corr(*correlation_id) == Some(i as Pos) =>
            {
                Some((*correlation_id, i as Pos))
            }
            _ => None,
        });
        for (c, api) in calls {
            // A stream wait is a stream item too (its SYNC record), and its first
            // argument is the stream, so a lost wait record is an orphan like a lost launch.
            let kind = ix.call_kind(api);
            if !(kind.launches_work() || kind == CallKind::StreamWait) {
                continue;
            }
            let stream = ix
                .activities(c)
                .and_then(|v| v.iter().find_map(|&a| ix.rec(a).stream()));
            match stream {
                Some(s) => {
                    let t = ix.start(api);
                    if let Some(u) = ix.uprobe_of_api(api) {
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
            let by_handle = ix.uprobe_of_api(api).and_then(|u| match ix.rec(u) {
                Record::Uprobe { handle, .. } if *handle != 0 => {
                    handle_obs.get(handle).and_then(|v| nearest(v, t))
                }
                _ => None,
            });
            let (stream, conf) = match by_handle {
                Some(s) => (
                    Some(s),
                    if self.loss_plausible {
                        ORPHAN_BY_HANDLE_CONFIDENCE_LOSS_PLAUSIBLE
                    } else {
                        ORPHAN_BY_HANDLE_CONFIDENCE
                    },
                ),
                None => (
                    ix.rec(api)
                        .tid()
                        .and_then(|tid| thread_obs.get(&tid))
                        .and_then(|v| nearest(v, t)),
                    ORPHAN_BY_THREAD_CONFIDENCE,
                ),
            };
            if let Some(s) = stream {
                out.entry(s).or_default().push((t, conf));
            }
        }
        out
    }
}

/// What the stream-order pass shares across streams: the launches that left no record
/// (by stream), the graph structure inside launches, the confidences of its edges and
/// claims, and what each graph launch's other streams need (its entries, the exits
/// before it), by correlation id.
struct StreamPass {
    orphans: FastMap<u32, Vec<(Ns, f64)>>,
    /// Graph nodes with an inferred predecessor inside their launch.
    graph_preds: FastMap<Pos, ()>,
    launch_sinks: FastMap<u32, Activities>,
    /// An observed stream-order edge's confidence.
    base_conf: f64,
    /// A missing predecessor's confidence.
    mc: f64,
    launch_entries: FastMap<u32, Vec<Pos>>,
    launch_preds: FastMap<u32, Vec<Pos>>,
}
