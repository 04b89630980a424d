//! Host-side edges: request, handoff, host order and fault (scheduler and page-fault
//! records of the calling thread).

use super::graph::{Graph, E};
use super::thresholds::{
    CLOSED_JOINED_CONFIDENCE, CLOSED_JOIN_GAP_NS, CLOSED_UNJOINED_CONFIDENCE, NOISE_NS,
    STALL_LOOKBACK_NS,
};
use crate::index::FastMap;
use crate::index::Index;
use crate::index::Pos;
use ground_truth::trace::{MarkerPhase, Record};
use ground_truth::{EdgeType, Evidence, Ns};

impl Graph<'_> {
    /// Request, handoff, host-order and fault edges on the host side.
    pub(super) fn host_edges(&mut self) {
        let ix = &self.ix;
        let mut add: Vec<E> = Vec::new();
        let mut miss = Vec::new();
        let mut miss_kind: Vec<(Pos, EdgeType)> = Vec::new();
        // Closed mode: calls whose inferred program-order edge the host
        // collector's records join (`joined_by_thread_and_time`).
        let mut joined: Vec<Pos> = Vec::new();
        let markers_present = !ix.markers.is_empty();
        // Enqueue markers by (queue, token), in time order.
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
                        // The hand-on waits for the task's last call: a blocking call
                        // that returned late delays it (docs/records.md, `host_order`).
                        if let Some(pp) = prev.filter(|&pp| Some(pp) != task) {
                            add.push(E {
                                src: pp,
                                dst: p,
                                kind: EdgeType::HostOrder,
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
                    } else if joined_by_thread_and_time(ix, tid, pp, p) {
                        joined.push(p);
                        (Evidence::Inferred, CLOSED_JOINED_CONFIDENCE)
                    } else {
                        (Evidence::Inferred, CLOSED_UNJOINED_CONFIDENCE)
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
                    if let Some(t) = ix.token(p) {
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
                        .unwrap_or(ix.start(p).saturating_sub(STALL_LOOKBACK_NS));
                    let st = super::readings::host_stalls(ix, tid, from, ix.start(p));
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
