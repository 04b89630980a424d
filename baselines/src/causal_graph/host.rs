//! Host-side edges: request, handoff, host order and fault (scheduler and page-fault
//! records of the calling thread).

use super::graph::{Graph, InferredEdge};
use super::thresholds::{
    CLOSED_JOINED_CONFIDENCE, CLOSED_JOIN_GAP_NS, CLOSED_UNJOINED_CONFIDENCE, NOISE_NS,
    STALL_EDGE_CONFIDENCE, STALL_LOOKBACK_NS,
};
use crate::index::FastMap;
use crate::index::Index;
use crate::index::Pos;
use ground_truth::trace::{MarkerPhase, Record};
use ground_truth::{EdgeType, Evidence, Ns, SharedStr};

impl Graph<'_> {
    /// Request, handoff, host-order and fault edges on the host side: those the
    /// task-begin markers name ([`Markers::request_and_handoff_edges`]), then each
    /// thread's host operations in program order ([`ThreadWalk`]); then the edges are
    /// added and what is missing is claimed.
    pub(super) fn host_edges(&mut self) {
        let ix = &self.ix;
        let mut found = HostFindings::default();
        let markers = Markers::of(ix);
        markers.request_and_handoff_edges(ix, &mut found);
        let lost_on = self.lost_calls_by_thread();
        let mut tids: Vec<u32> = ix.threads.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            let mut walk = ThreadWalk {
                ix,
                tid,
                markers: &markers,
                lost_here: lost_on.get(&tid),
                prev: None,
                last: None,
                task: None,
            };
            for &(_, _, _, p) in &thread_ops(ix, tid) {
                walk.step(p, &mut found);
            }
        }
        let closed = !markers.present;
        if closed {
            let handoffs = super::handoff_inference::inferred_handoffs(ix, &found.resumes);
            found.add.extend(handoffs);
        }
        self.add_host_findings(found);
        if closed {
            self.chain_began = self.chain_beginnings();
        }
    }

    /// Closed mode: when each call's chain began, the stand-in for its
    /// request's beginning. A chain runs back from a call through the
    /// program-order edges the host collector's records join
    /// ([`Graph::joined`]) and the handoffs inferred between threads
    /// (`handoff_inference`), to a call with neither: the first call the
    /// request's work made that the view can tie it to.
    fn chain_beginnings(&self) -> FastMap<Pos, Ns> {
        let ix = &self.ix;
        let before: FastMap<Pos, Pos> = self
            .edges
            .iter()
            .filter(|e| {
                e.src != e.dst
                    && (self.joined(e)
                        || (e.kind == EdgeType::Handoff && e.ev == Evidence::Inferred))
            })
            .map(|e| (e.dst, e.src))
            .collect();
        let mut calls = ix.all_calls.clone();
        calls.sort_unstable_by_key(|&c| (ix.start(c), ix.rid(c)));
        let mut began: FastMap<Pos, Ns> = FastMap::default();
        for c in calls {
            let at = before
                .get(&c)
                .and_then(|b| began.get(b).copied())
                .unwrap_or(ix.start(c));
            began.insert(c, at);
        }
        began
    }

    /// Where lost launch calls were made: the thread running their request then (by
    /// its task-begin markers), thread → when each was made.
    fn lost_calls_by_thread(&self) -> FastMap<u32, Vec<Ns>> {
        let ix = &self.ix;
        let mut tasks_of_token: FastMap<&str, Vec<(Ns, u32)>> = FastMap::default();
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
        let mut lost_on: FastMap<u32, Vec<Ns>> = FastMap::default();
        for (tok, q) in &self.lost_calls {
            let Some(v) = tok.as_deref().and_then(|t| tasks_of_token.get(t)) else {
                continue;
            };
            if let Some(&(_, tid)) = v.iter().filter(|(ts, _)| ts <= q).max() {
                lost_on.entry(tid).or_default().push(*q);
            }
        }
        lost_on
    }

    /// Adds what the host pass found: its edges, then its missing predecessors
    /// (handoffs without their enqueue first, then the others in the order found).
    fn add_host_findings(&mut self, found: HostFindings) {
        let HostFindings {
            add,
            miss,
            miss_kind,
            mut joined,
            ..
        } = found;
        // Room for exactly these: growing by doubling here left a third of the
        // largest list of the analysis unused at its peak.
        self.edges.reserve_exact(add.len());
        self.edges.extend(add);
        joined.sort_unstable();
        self.joined_calls = joined;
        let mc = self.missing_conf();
        for m in miss {
            self.add_missing(m, EdgeType::Handoff, mc);
        }
        for (m, k) in miss_kind {
            self.add_missing(m, k, mc);
        }
    }
}

/// What the host pass finds, in the order it finds it.
#[derive(Default)]
struct HostFindings {
    add: Vec<InferredEdge>,
    /// Task begins whose enqueue marker is missing (a missing handoff).
    miss: Vec<Pos>,
    /// Other missing predecessors, by kind.
    miss_kind: Vec<(Pos, EdgeType)>,
    /// Closed mode: calls whose inferred program-order edge the host
    /// collector's records join (`joined_by_thread_and_time`).
    joined: Vec<Pos>,
    /// Closed mode: calls after an idle time their thread's records leave
    /// unexplained, with when the thread went idle (`handoff_inference`).
    resumes: Vec<(Pos, Ns)>,
}

/// The request-begin and enqueue markers, by what task-begin markers look them up by.
struct Markers<'a> {
    /// Enqueue markers by (queue, token), in time order.
    enq: FastMap<(&'a str, &'a str), Vec<Pos>>,
    /// Each request's first request-begin marker, by token.
    req: FastMap<&'a str, Pos>,
    /// Whether the view has task markers at all (else closed mode).
    present: bool,
}

impl<'a> Markers<'a> {
    fn of(ix: &Index<'a>) -> Markers<'a> {
        let mut enq: FastMap<(&str, &str), Vec<Pos>> = FastMap::default();
        let mut req: FastMap<&str, Pos> = FastMap::default();
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
        Markers {
            enq,
            req,
            present: !ix.markers.is_empty(),
        }
    }

    /// The marker that made a task's work ready: the last enqueue of its token
    /// onto its queue before it began (`at`), or for a request's first task
    /// (no queue) the request's arrival.
    fn readied_by(&self, ix: &Index<'a>, queue: &str, token: &str, at: Ns) -> Option<Pos> {
        if queue.is_empty() {
            return self.req.get(token).copied();
        }
        let v = self.enq.get(&(queue, token))?;
        let k = v.partition_point(|&e| ix.start(e) <= at);
        (k > 0).then(|| v[k - 1])
    }

    /// Every host task of a request hangs off the request (explicit token); a task
    /// handed on through a queue hangs off the last enqueue of its token before it
    /// began, or its handoff is missing.
    fn request_and_handoff_edges(&self, ix: &Index<'a>, found: &mut HostFindings) {
        for &m in &ix.markers {
            if let Record::Marker {
                phase: MarkerPhase::TaskBegin,
                queue,
                token,
                ts,
                ..
            } = ix.rec(m)
            {
                if let Some(&r) = self.req.get(token.as_str()) {
                    found.add.push(InferredEdge {
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
                match self.readied_by(ix, queue, token, *ts) {
                    Some(e) => found.add.push(InferredEdge {
                        src: e,
                        dst: m,
                        kind: EdgeType::Handoff,
                        ev: Evidence::Observed,
                        conf: 1.0,
                    }),
                    None => found.miss.push(m),
                }
            }
        }
    }
}

/// Host operations of thread `tid` in program order: its calls and its task-begin and
/// enqueue markers, as (start, rank, rid, position) sorted (a task begins before the
/// calls it makes at the same instant).
fn thread_ops(ix: &Index<'_>, tid: u32) -> Vec<(Ns, u8, u64, Pos)> {
    let th = &ix.threads[&tid];
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
    ops
}

/// One thread's host operations walked in program order: the task the thread runs and
/// its previous operation.
struct ThreadWalk<'w, 'a> {
    ix: &'w Index<'a>,
    tid: u32,
    markers: &'w Markers<'a>,
    /// When the lost launch calls made on this thread were made.
    lost_here: Option<&'w Vec<Ns>>,
    prev: Option<Pos>,
    /// The thread's last host operation of any kind (a hand-on included): what
    /// kept the thread busy until it ended.
    last: Option<Pos>,
    task: Option<Pos>,
}

impl<'a> ThreadWalk<'_, 'a> {
    fn step(&mut self, p: Pos, found: &mut HostFindings) {
        match self.ix.rec(p) {
            Record::Marker {
                phase: MarkerPhase::TaskBegin,
                token,
                queue,
                ..
            } => {
                if queue.is_empty() && !self.markers.req.contains_key(token.as_str()) {
                    // A request's first task without its request_begin.
                    found.miss_kind.push((p, EdgeType::Request));
                }
                self.busy(p, queue, token, found);
                self.prev = Some(p);
                self.task = Some(p);
            }
            Record::Marker {
                phase: MarkerPhase::Enqueue,
                token,
                ..
            } => self.enqueue(p, token, found),
            _ => self.call(p, found),
        }
        self.last = Some(p);
    }

    /// A task whose work was ready (its enqueue, or its request's arrival for
    /// a request's first task) before the thread's last operation ended waited
    /// for the thread: a `busy` edge from that operation (docs/records.md). How
    /// one request waits behind another's work on a serving loop's thread.
    fn busy(&self, task: Pos, queue: &str, token: &str, found: &mut HostFindings) {
        let ix = self.ix;
        let Some(last) = self.last else { return };
        let Some(ready) = self.markers.readied_by(ix, queue, token, ix.start(task)) else {
            return;
        };
        if ix.end(last) > ix.start(ready) {
            found.add.push(InferredEdge {
                src: last,
                dst: task,
                kind: EdgeType::Busy,
                ev: Evidence::Observed,
                conf: 1.0,
            });
        }
    }

    /// The token of the task the thread runs.
    fn task_token(&self) -> Option<&'a SharedStr> {
        self.task.and_then(|tb| match self.ix.rec(tb) {
            Record::Marker { token, .. } => Some(token),
            _ => None,
        })
    }

    /// An enqueue marker: the task hands its request on.
    fn enqueue(&mut self, p: Pos, etok: &SharedStr, found: &mut HostFindings) {
        if self.task_token() != Some(etok) {
            // Handed on by a task whose begin marker is missing.
            found.miss_kind.push((p, EdgeType::Handoff));
            return;
        }
        // The task hands its request on; program order continues past it.
        if let Some(t) = self.task {
            found.add.push(InferredEdge {
                src: t,
                dst: p,
                kind: EdgeType::Handoff,
                ev: Evidence::Observed,
                conf: 1.0,
            });
        }
        // The hand-on waits for the task's last call: a blocking call
        // that returned late delays it (docs/records.md, `host_order`).
        if let Some(pp) = self.prev.filter(|&pp| Some(pp) != self.task) {
            found.add.push(InferredEdge {
                src: pp,
                dst: p,
                kind: EdgeType::HostOrder,
                ev: Evidence::Observed,
                conf: 1.0,
            });
        }
    }

    /// A call: its program-order edge from the previous operation, what is missing
    /// before it, and the stalls that delayed it.
    fn call(&mut self, p: Pos, found: &mut HostFindings) {
        let ix = self.ix;
        if let Some(pp) = self.prev {
            let (ev, conf) = if self.markers.present {
                (Evidence::Observed, 1.0)
            } else if joined_by_thread_and_time(ix, self.tid, pp, p) {
                found.joined.push(p);
                (Evidence::Inferred, CLOSED_JOINED_CONFIDENCE)
            } else {
                if !matches!(ix.rec(p), Record::Marker { .. }) {
                    found.resumes.push((p, ix.end(pp)));
                }
                (Evidence::Inferred, CLOSED_UNJOINED_CONFIDENCE)
            };
            found.add.push(InferredEdge {
                src: pp,
                dst: p,
                kind: EdgeType::HostOrder,
                ev,
                conf,
            });
        }
        if self.prev.is_none() && !self.markers.present {
            // The thread's first call: it idled from the start of the view.
            found.resumes.push((p, 0));
        }
        // A call of request T must run in a task of request T: otherwise that
        // task's begin marker is missing. A lost launch call of this thread
        // between the previous op and this one is a missing program-order
        // predecessor.
        if self.markers.present {
            if let Some(t) = ix.token(p) {
                if self.task_token().map(|k| k.as_str()) != Some(t.as_str()) {
                    found.miss_kind.push((p, EdgeType::HostOrder));
                }
            }
        }
        if let Some(qs) = self.lost_here {
            let lo = self.prev.map(|pp| ix.end(pp)).unwrap_or(0);
            if qs.iter().any(|&q| q >= lo && q <= ix.start(p)) {
                found.miss_kind.push((p, EdgeType::HostOrder));
            }
        }
        if !matches!(ix.rec(p), Record::Marker { .. }) {
            self.stall_edges(p, found);
        }
        self.prev = Some(p);
    }

    /// Scheduler / page-fault evidence between the previous op and call `p`.
    fn stall_edges(&self, p: Pos, found: &mut HostFindings) {
        let ix = self.ix;
        let from = self
            .prev
            .map(|pp| ix.end(pp))
            .unwrap_or(ix.start(p).saturating_sub(STALL_LOOKBACK_NS));
        let st = super::readings::host_stalls(ix, self.tid, from, ix.start(p));
        if st.desched_ns >= NOISE_NS {
            if let Some(s) = st.last_sched {
                found.add.push(InferredEdge {
                    src: s,
                    dst: p,
                    kind: EdgeType::Fault,
                    ev: Evidence::Observed,
                    conf: STALL_EDGE_CONFIDENCE,
                });
            }
        }
        if st.fault_ns >= NOISE_NS || st.major > 0 {
            if let Some(f) = st.last_fault {
                found.add.push(InferredEdge {
                    src: f,
                    dst: p,
                    kind: EdgeType::Fault,
                    ev: Evidence::Observed,
                    conf: STALL_EDGE_CONFIDENCE,
                });
            }
        }
    }
}

/// Closed mode (no task markers, no request identity): whether a thread went
/// from its call `prev` straight on to its call `call`, so that `prev`'s
/// completion gated `call` as it does inside a task. The host collector's
/// records of the thread join them by thread and time: the gap between them,
/// less the thread's scheduler and page-fault stalls in it, is at most
/// [`CLOSED_JOIN_GAP_NS`]. A longer gap the records leave unexplained may be
/// the thread idling until a handoff brought it work (which only task markers
/// would show): there the evidence stops, and the walk with it
/// (`critical_path`). Back-to-back tasks of one thread join too, rightly: the
/// earlier one held the thread (the truth's `busy` edge, docs/records.md).
pub(super) fn joined_by_thread_and_time(ix: &Index, tid: u32, prev: Pos, call: Pos) -> bool {
    let (from, to) = (ix.end(prev), ix.start(call));
    if to <= from {
        return true;
    }
    let st = super::readings::host_stalls(ix, tid, from, to);
    let unexplained = (to - from) as f64 - (st.desched_ns + st.fault_ns);
    unexplained <= CLOSED_JOIN_GAP_NS
}
