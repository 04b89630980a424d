//! Ground truth (docs/design.md): typed nodes and edges known by construction, the
//! symptoms asked about and their true answers.

use crate::ids::Rid;
use crate::labels::{CauseLabel, Collectors, Mode, Question};
use crate::shared_str::SharedStr;
use crate::Ns;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod detail;
pub mod wire;

pub use crate::ids::NodeId;
pub use detail::{NodeDetail, SharedNodeDetail};

/// The rids observing one node. Small and inline: ground truths reach tens of
/// millions of nodes, and a heap allocation per node would dominate their size.
pub type NodeRids = smallvec::SmallVec<[Rid; 2]>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    Request,
    HostTask,
    QueueHandoff,
    ApiCall,
    Kernel,
    Memcpy,
    Memset,
    EventRecord,
    StreamWait,
    GraphLaunch,
    GraphNode,
    Synchronization,
    InjectedFault,
    /// Megakernel track: one task of the device-side task graph of a persistent
    /// kernel (`operator` = its task class, `generation` = task generation,
    /// `request` = request generation, `stream` = the worker that ran it).
    Task,
}

impl NodeKind {
    /// Device-side operations: each has exactly one `launch` parent.
    pub fn is_device_op(self) -> bool {
        matches!(
            self,
            NodeKind::Kernel | NodeKind::Memcpy | NodeKind::Memset | NodeKind::GraphNode
        )
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, PartialOrd, Ord,
)]
#[serde(rename_all = "snake_case")]
pub enum EdgeType {
    /// API call → device activity it created.
    Launch,
    /// Previous op → next op in one stream.
    StreamOrder,
    /// Event record → the stream wait / op it gates.
    Event,
    /// Graph dependency between nodes of one launch.
    Graph,
    /// Host task → queue handoff → host task across a queue/thread.
    Handoff,
    /// Request → its host work.
    Request,
    /// Device op → host call that waited for it.
    Sync,
    /// Injected fault → the node it delayed.
    Fault,
    /// Previous host operation → next one on the same host task (program order).
    HostOrder,
    /// The last operation of work that kept a host thread (or pool member) busy →
    /// the next task that thread took up, when that task's work was ready before
    /// the thread was free: how one request waits behind another's work on a
    /// single-thread stage or a saturated pool (docs/records.md).
    Busy,
    /// The consumer task whose take freed a slot → the push onto a full bounded
    /// queue that waited for it (`QueueDecl::capacity`): how a slow consumer
    /// holds its producer back (docs/records.md).
    Backpressure,
}

impl EdgeType {
    pub const ALL: [EdgeType; 11] = [
        EdgeType::Launch,
        EdgeType::StreamOrder,
        EdgeType::Event,
        EdgeType::Graph,
        EdgeType::Handoff,
        EdgeType::Request,
        EdgeType::Sync,
        EdgeType::Fault,
        EdgeType::HostOrder,
        EdgeType::Busy,
        EdgeType::Backpressure,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeType::Launch => "launch",
            EdgeType::StreamOrder => "stream_order",
            EdgeType::Event => "event",
            EdgeType::Graph => "graph",
            EdgeType::Handoff => "handoff",
            EdgeType::Request => "request",
            EdgeType::Sync => "sync",
            EdgeType::Fault => "fault",
            EdgeType::HostOrder => "host_order",
            EdgeType::Busy => "busy",
            EdgeType::Backpressure => "backpressure",
        }
    }
}

/// One node of the true dependency graph, as it is held in memory: where it ran and
/// what enclosed it (thread, stream, call site, operator) behind one shared pointer, so
/// that a node is 104 bytes (docs/records.md "Memory of a large case"). On disk it is
/// [`wire::Node`], every field at the top level.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub id: NodeId,
    pub kind: NodeKind,
    /// Human-readable name (kernel name, API name, queue name, fault kind).
    pub name: SharedStr,
    /// Request token this node belongs to, if any.
    pub request: Option<SharedStr>,
    /// Scenario step id that produced it, if the step had one (often one per node, so
    /// it is not shared with the rest of the detail).
    pub step: Option<SharedStr>,
    /// Host thread, device stream, call site and NVTX operator; reads as a [`NodeDetail`].
    pub detail: SharedNodeDetail,
    /// Generation of the stream/event/graph object used (bumped on recreate).
    pub generation: u32,
    pub start: Ns,
    pub end: Ns,
    /// Device ops: when the op was queued and submitted (0 = not measured).
    pub queued: Ns,
    pub submitted: Ns,
    /// Records that observe this node (most nodes have one or two: kept inline).
    pub rids: NodeRids,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    pub src: NodeId,
    pub dst: NodeId,
    #[serde(rename = "type")]
    pub kind: EdgeType,
}

/// Lateness split by where it was spent (docs/design.md), in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Phases {
    pub host_enqueue: f64,
    pub queued_to_submitted: f64,
    pub submitted_to_start: f64,
    pub execution: f64,
}

impl Phases {
    pub fn as_array(&self) -> [f64; 4] {
        [
            self.host_enqueue,
            self.queued_to_submitted,
            self.submitted_to_start,
            self.execution,
        ]
    }
    pub fn total(&self) -> f64 {
        self.as_array().iter().sum()
    }
}

/// A view's first unresolved boundary: the first edge met walking the true path
/// back from the symptom whose source node has no record in that view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Boundary {
    pub collectors: Collectors,
    pub mode: Mode,
    /// `None`: the whole true path is visible in that view.
    pub edge: Option<Edge>,
}

/// An operation whose lateness (or identity) is asked about, with the true answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Symptom {
    /// Query id, as it appears in views.
    pub id: String,
    pub node: NodeId,
    /// The record a view asks about (the late node's primary record).
    pub rid: Rid,
    pub question: Question,
    pub cause: CauseLabel,
    /// Expected answer for call-site / operator questions; the request token for request questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Measured lateness against the no-injection twin (ns, may be negative from noise).
    pub lateness_ns: f64,
    /// Root → late node, following the predecessor whose completion gated each step.
    pub critical_path: Vec<NodeId>,
    pub phases: Phases,
    /// First unresolved boundary in each standard (loss-free) view.
    pub boundaries: Vec<Boundary>,
    /// How `cause` was checked against this run's truth (docs/scenario-space.md,
    /// "Labels from the truth"); absent in bundles recorded before the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<LabelCheck>,
}

/// The check of a symptom's declared cause label against the truth of the run
/// that recorded it (docs/scenario-space.md, "Labels from the truth").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelCheck {
    /// The label the scenario declared.
    pub declared: CauseLabel,
    pub verdict: LabelVerdict,
    /// The largest end-time drift between two no-injection runs of the
    /// scenario over all matched nodes (ns): lateness below it is noise.
    pub noise_floor_ns: f64,
    /// Whether the injected mechanism lies on the symptom's true critical
    /// path; `None` where nothing timing-related was injected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism_on_path: Option<bool>,
    /// Why the verdict is what it is, in a sentence.
    pub reason: String,
}

/// What the label check decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LabelVerdict {
    /// The declared label holds: the mechanism is on the path and the symptom
    /// moved beyond the noise floor (or, for `none`, it did not move).
    Kept,
    /// The injection did not move the symptom beyond the noise floor: the
    /// case is kept with the label `none`.
    RelabelledNone,
    /// The symptom moved, but not through the injected mechanism (or a
    /// negative control moved it): no label holds, the case is not scored.
    Dropped,
    /// The symptom moved more than the two quiet runs drifted apart, but not
    /// by the noise margin: neither the declared label nor `none` is
    /// established, so the case is not scored.
    Indeterminate,
    /// Not a timing question (call site, operator, request identity, record
    /// loss): the declared label is kept unchecked.
    NotApplicable,
}

impl LabelVerdict {
    pub const ALL: [LabelVerdict; 5] = [
        LabelVerdict::Kept,
        LabelVerdict::RelabelledNone,
        LabelVerdict::Dropped,
        LabelVerdict::Indeterminate,
        LabelVerdict::NotApplicable,
    ];

    /// Whether a case with this verdict is scored: dropped and indeterminate
    /// cases have no label that holds.
    pub fn is_scored(self) -> bool {
        !matches!(self, LabelVerdict::Dropped | LabelVerdict::Indeterminate)
    }

    /// Whether the check took the declared label away (relabelled, dropped
    /// or indeterminate).
    pub fn changed_label(self) -> bool {
        !matches!(self, LabelVerdict::Kept | LabelVerdict::NotApplicable)
    }

    /// The verdict `as_str` names, if any.
    pub fn parse(name: &str) -> Option<LabelVerdict> {
        Self::ALL.into_iter().find(|v| v.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LabelVerdict::Kept => "kept",
            LabelVerdict::RelabelledNone => "relabelled_none",
            LabelVerdict::Dropped => "dropped",
            LabelVerdict::Indeterminate => "indeterminate",
            LabelVerdict::NotApplicable => "not_applicable",
        }
    }
}

/// What was injected, requested against measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InjectionRecord {
    pub kind: String,
    /// The mechanism that realised it (e.g. "sim:preemption", "ptrace-hold").
    pub mechanism: String,
    pub requested_us: f64,
    pub measured_us: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_node: Option<NodeId>,
    /// For a CPU deschedule: the longest time the victim thread was measured
    /// switched out during the stall, µs (what the deschedule actually did;
    /// a victim that kept running was delayed by its own compute instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu_us: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct GroundTruth {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    pub symptoms: Vec<Symptom>,
    #[serde(default)]
    pub injections: Vec<InjectionRecord>,
}

impl GroundTruth {
    /// Predecessor lists, indexed by node id.
    pub fn predecessors(&self) -> Vec<Vec<(NodeId, EdgeType)>> {
        let mut preds = vec![Vec::new(); self.nodes.len()];
        for e in &self.edges {
            preds[e.dst as usize].push((e.src, e.kind));
        }
        preds
    }

    /// When `src`'s completion gated `dst` through an edge of `kind`. A launch
    /// hands work over at the op's queue time, even when the call itself blocks
    /// until later (a pageable copy), so it gates at the earlier of the two.
    /// A graph launch hands its nodes over while the call runs: a node that
    /// started only after the call returned was held by the call until then
    /// (on the H200 a graph's first node waits for the whole `cuGraphLaunch`,
    /// its queue time being the call's start, docs/gpu-facts.md), one that
    /// started during the call was let go at its queue time.
    ///
    /// A queue handoff lasts until its consumer's task begins, but it let the
    /// task go when the item was pushed (its start): whatever held the task
    /// after that was the consumer thread. A `busy` edge is recorded only when
    /// the thread was still busy once the task's work was ready, so it held the
    /// task until the task began.
    pub fn gating_time(&self, src: NodeId, dst: NodeId, kind: EdgeType) -> Ns {
        let (s, d) = (&self.nodes[src as usize], &self.nodes[dst as usize]);
        match kind {
            EdgeType::Busy => return d.start,
            EdgeType::Handoff if s.kind == NodeKind::QueueHandoff => return s.start,
            _ => {}
        }
        if kind != EdgeType::Launch || d.queued == 0 {
            return s.end;
        }
        if d.kind == NodeKind::GraphNode && d.start >= s.end {
            return s.end;
        }
        s.end.min(d.queued)
    }

    /// Predecessors of every node in one flat array (edge order kept within a
    /// node): `(starts, preds)` where node `n`'s are `preds[starts[n]..starts[n + 1]]`.
    /// Two allocations however large the graph, where a list per node costs one each.
    fn predecessor_index(&self) -> (Vec<usize>, Vec<(NodeId, EdgeType)>) {
        let mut starts = vec![0usize; self.nodes.len() + 1];
        for e in &self.edges {
            starts[e.dst as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut next = starts.clone();
        let mut preds = vec![(0, EdgeType::Launch); self.edges.len()];
        for e in &self.edges {
            let slot = &mut next[e.dst as usize];
            preds[*slot] = (e.src, e.kind);
            *slot += 1;
        }
        (starts, preds)
    }

    /// The true critical path to `late`: walk back, at each step taking the
    /// predecessor whose completion came last (the one that gated the node).
    /// Ties go to the lower node id so the result is deterministic.
    pub fn critical_path(&self, late: NodeId) -> Vec<NodeId> {
        let (starts, preds) = self.predecessor_index();
        let mut path = vec![late];
        let mut cur = late;
        // A path can't be longer than the node count; guards against malformed cycles.
        let of = |n: NodeId| &preds[starts[n as usize]..starts[n as usize + 1]];
        for _ in 0..self.nodes.len() {
            let here = of(cur);
            let best = here
                .iter()
                .max_by_key(|&&(p, k)| (self.gating_time(p, cur, k), std::cmp::Reverse(p)))
                .map(|&(p, k)| {
                    // A blocking call (a pageable copy) returned when its own device op
                    // completed, so what held the thread after it was that op: the walk
                    // goes through the op (its `sync` edge to this node) rather than
                    // back along the host calls (docs/records.md).
                    let own_op = matches!(k, EdgeType::HostOrder | EdgeType::Busy)
                        .then(|| {
                            here.iter().find(|&&(s, sk)| {
                                sk == EdgeType::Sync
                                    && of(s)
                                        .iter()
                                        .any(|&(c, ck)| c == p && ck == EdgeType::Launch)
                            })
                        })
                        .flatten();
                    own_op.map_or(p, |&(s, _)| s)
                });
            match best {
                Some(p) => {
                    path.push(p);
                    cur = p;
                }
                None => break,
            }
        }
        path.reverse();
        path
    }

    /// Node ids that own each rid.
    pub fn rid_owner(&self) -> std::collections::HashMap<Rid, NodeId> {
        let mut m = std::collections::HashMap::with_capacity(self.nodes.len() * 2);
        for n in &self.nodes {
            for &r in &n.rids {
                m.insert(r, n.id);
            }
        }
        m
    }

    /// The first unresolved boundary of `path` given which nodes a view shows.
    pub fn first_unresolved(
        &self,
        path: &[NodeId],
        visible: impl Fn(NodeId) -> bool,
    ) -> Option<Edge> {
        for w in path.windows(2).rev() {
            let (src, dst) = (w[0], w[1]);
            if !visible(src) {
                // Of several edges between the two, the one that gated (as in `critical_path`).
                let kind = self
                    .edges
                    .iter()
                    .filter(|e| e.src == src && e.dst == dst)
                    .max_by_key(|e| self.gating_time(src, dst, e.kind))
                    .map(|e| e.kind)?;
                return Some(Edge { src, dst, kind });
            }
        }
        None
    }
}
