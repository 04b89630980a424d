//! The typed partial order itself: its edges and `missing` claims, the passes
//! that build it in order, and the incoming-edge index the diagnosis walks.

use super::thresholds::{MISSING_CONFIDENCE_LOSS_PLAUSIBLE, MISSING_CONFIDENCE_NO_LOSS};
use crate::analysis::Peers;
use crate::index::FastMap;
use crate::index::{Activities, Index, Pos};
use ground_truth::trace::Source;
use ground_truth::view::LossSpec;
use ground_truth::{CauseLabel, EdgeType, Evidence, Ns, TraceView};

/// A device op's reading: its causes, its phases against its peers, how many
/// peers (`Graph::device_causes`).
pub(super) type Verdict = (Vec<(CauseLabel, f64)>, ground_truth::Phases, usize);

/// One edge of the partial order the causal graph inferred from the view: `src`
/// gated `dst` by `kind`, on the `ev` evidence, with confidence `conf`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InferredEdge {
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

pub(crate) struct Graph<'a> {
    pub ix: Index<'a>,
    pub peers: Peers,
    pub edges: Vec<InferredEdge>,
    pub missing: Vec<Missing>,
    /// CSR of incoming edges by destination position.
    pub(super) in_off: Vec<u32>,
    pub(super) in_idx: Vec<u32>,
    pub(super) missing_at: FastMap<Pos, usize>,
    pub loss_plausible: bool,
    /// Per stream: (enqueue key, the unit's exits) in order; a graph launch exits
    /// through its sinks.
    pub(super) stream_units: FastMap<u32, Vec<(Ns, Activities)>>,
    /// Launch calls known to be lost (their activity survived): (request token, when).
    pub(super) lost_calls: Vec<(Option<String>, Ns)>,
    /// Whether the view has CUPTI records / eBPF host records at all.
    pub(super) has_cupti: bool,
    pub(super) has_ebpf: bool,
    /// Graph nodes whose usual graph predecessor is absent from their launch.
    pub(super) graph_lost: std::cell::RefCell<Vec<Pos>>,
    /// When each stream wait was satisfied on the device: CUPTI's SYNCHRONIZATION
    /// record of a wait spans the host call, so the device-side moment is the
    /// completion of the event record it joins to (by `event_sync_id`).
    pub(super) wait_satisfied: FastMap<Pos, Ns>,
    /// Each device op's position among its operation's instances in its request.
    pub(super) position: Vec<u32>,
    /// The normal latency (ns) of the op the diagnosis in progress asks about
    /// (`Graph::normal_latency_of`); infinite between diagnoses. Device phases of the ops upstream are
    /// judged against it too (`Graph::phase_floors`).
    pub(super) asked_latency: std::cell::Cell<f64>,
    /// The readings of ops upstream of the symptom of the diagnosis in
    /// progress (`Graph::device_causes` below depth 0); emptied whenever
    /// the asked latency changes, which they depend on.
    pub(super) upstream_readings: std::cell::RefCell<FastMap<Pos, Verdict>>,
    /// Each request's size as its records give it (`Graph::request_size`),
    /// gathered on first use.
    pub(super) request_sizes: std::cell::OnceCell<FastMap<ground_truth::SharedStr, Vec<u64>>>,
    /// Closed mode: each host call's stretch on its thread, counted in calls
    /// that waited for the device (`Graph::work_unit`), gathered on first use.
    pub(super) stretches: std::cell::OnceCell<FastMap<Pos, u32>>,
    /// Closed mode: the calls whose inferred program-order edge the host
    /// collector's records join (`host::joined_by_thread_and_time`), sorted.
    pub(super) joined_calls: Vec<Pos>,
    /// Closed mode: when each call's chain of joined calls and inferred
    /// handoffs began (`host::chain_beginnings`); empty with task markers.
    pub(super) chain_began: FastMap<Pos, Ns>,
    /// Closed mode: the threads a handoff edge joins to another thread
    /// (`Graph::works_alone`), gathered on first use.
    pub(super) handoff_threads: std::cell::OnceCell<rustc_hash::FxHashSet<u32>>,
}

impl<'a> Graph<'a> {
    pub fn build(view: &'a TraceView) -> Graph<'a> {
        let ix = Index::new(view);
        let peers = Peers::new(&ix);
        let loss = view.collector_loss;
        let loss_plausible = loss.total() > 0 || !matches!(view.spec.loss, LossSpec::None);
        let mut g = Graph {
            ix,
            peers,
            edges: Vec::new(),
            missing: Vec::new(),
            in_off: Vec::new(),
            in_idx: Vec::new(),
            missing_at: FastMap::default(),
            loss_plausible,
            stream_units: FastMap::default(),
            lost_calls: Vec::new(),
            has_cupti: view.records.iter().any(|r| r.source() == Source::Cupti),
            has_ebpf: view.records.iter().any(|r| r.source() == Source::Ebpf),
            graph_lost: Default::default(),
            asked_latency: std::cell::Cell::new(f64::INFINITY),
            upstream_readings: Default::default(),
            wait_satisfied: FastMap::default(),
            position: Vec::new(),
            request_sizes: Default::default(),
            stretches: Default::default(),
            joined_calls: Vec::new(),
            chain_began: FastMap::default(),
            handoff_threads: Default::default(),
        };
        g.position = g.positions();
        g.wait_satisfied = g.stream_wait_completions();
        g.launch_edges();
        g.stream_edges();
        g.event_and_sync_edges();
        g.interference_edges();
        g.host_edges();
        g.distrust_edges_into_gaps();
        g.index_edges();
        // Grown by doubling: up to half its room unused for the rest of the analysis.
        g.edges.shrink_to_fit();
        g
    }

    pub(super) fn add(&mut self, src: Pos, dst: Pos, kind: EdgeType, ev: Evidence, conf: f64) {
        self.edges.push(InferredEdge {
            src,
            dst,
            kind,
            ev,
            conf,
        });
    }

    pub(super) fn add_missing(&mut self, at: Pos, kind: EdgeType, conf: f64) {
        if let Some(&i) = self.missing_at.get(&at) {
            let m = &mut self.missing[i];
            m.conf = m.conf.max(conf);
            return;
        }
        self.missing_at.insert(at, self.missing.len());
        self.missing.push(Missing { at, kind, conf });
    }

    pub(super) fn missing_conf(&self) -> f64 {
        if self.loss_plausible {
            MISSING_CONFIDENCE_LOSS_PLAUSIBLE
        } else {
            MISSING_CONFIDENCE_NO_LOSS
        }
    }

    pub(super) fn index_edges(&mut self) {
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

    pub fn incoming(&self, p: Pos) -> Vec<InferredEdge> {
        let (a, b) = (
            self.in_off[p as usize] as usize,
            self.in_off[p as usize + 1] as usize,
        );
        self.in_idx[a..b]
            .iter()
            .map(|&i| self.edges[i as usize])
            .collect()
    }

    pub(super) fn incoming_of(&self, p: Pos, kind: EdgeType) -> Option<InferredEdge> {
        self.incoming(p)
            .into_iter()
            .filter(|e| e.kind == kind)
            .max_by_key(|e| (self.ix.end(e.src), self.ix.rid(e.src)))
    }

    /// Whether `e` is an inferred program-order edge the host collector's
    /// records join (closed mode, `host::joined_by_thread_and_time`).
    pub(super) fn joined(&self, e: &InferredEdge) -> bool {
        e.kind == EdgeType::HostOrder
            && e.ev == Evidence::Inferred
            && self.joined_calls.binary_search(&e.dst).is_ok()
    }

    /// Completion time of a record (when its successors could proceed).
    pub fn done(&self, p: Pos) -> Ns {
        self.wait_satisfied
            .get(&p)
            .copied()
            .unwrap_or_else(|| self.ix.end(p))
    }
}
