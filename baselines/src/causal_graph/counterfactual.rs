//! The counterfactual over the reconstructed graph (issue 35): how much earlier
//! the record asked about would have finished had one record upstream of it
//! finished earlier by some amount (a delay removed), the graph's finish times
//! re-evaluated forward from that record. This is the benchmark's own meaning
//! of lateness (the same run without the delay, docs/scenario-space.md
//! "Labels from the truth") read from one run, as causal profilers' virtual
//! speed-ups and what-if analyzers read it.
//!
//! The model: every record keeps its own duration and the wait between its
//! last gate's release and its own completion; it completes as much earlier as
//! its last gate would release it earlier. A gate is an incoming edge, released
//! when [`Graph::effective`] says; a gate whose source finishes `s` earlier
//! releases `s` earlier. So a record gated by several predecessors moves only
//! as far as the others let it (the slack), and a delay absorbed by a later
//! gate (a launch that came after its stream was free) moves nothing. A call
//! blocked on the device op it launched (it was still running when the op
//! ended: a pageable copy) returns as much earlier as the op ends, up to how
//! long it blocked: its program-order successor is released by it like by the
//! op's `sync` edge.
//!
//! Cost: the symptom's ancestors are gathered once ([`Cone`], at most
//! [`MAX_CONE_NODES`]), with each one's successors within the cone; each
//! candidate re-evaluates only the records it can reach from there (its
//! forward cone towards the symptom), in the cone's topological order, and
//! only those a moved record gates: the evaluation stops as soon as no record
//! it could still reach moved.

use super::graph::{Graph, InferredEdge};
use super::thresholds::MAX_CONE_NODES;
use crate::index::{FastMap, Pos};
use ground_truth::trace::{Record, SyncType};
use ground_truth::{EdgeType, Evidence};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The records that can reach one symptom (its ancestors through incoming
/// edges), each listed after everything that gates it.
pub(crate) struct Cone {
    /// Ancestors first, the symptom last.
    order: Vec<Pos>,
    /// A record's place in `order`.
    place: FastMap<Pos, u32>,
    /// The record whose completion is the symptom's ([`Graph::counterfactual_target`]).
    target: Pos,
    /// The same records, the nearest to the symptom first (breadth-first).
    nearest: Vec<Pos>,
    /// By place in `order`: the places of the records of the cone it gates
    /// (its out-edges within the cone).
    successors: Vec<Vec<u32>>,
}

impl Cone {
    /// The records that can reach the symptom, the nearest first.
    pub(crate) fn nearest_first(&self) -> &[Pos] {
        &self.nearest
    }
}

impl Graph<'_> {
    /// The record whose completion stands for `p`'s in the counterfactual: a
    /// blocking call's CUPTI record has no edges of its own, its API call does
    /// (as the critical path reads it, `critical_path.rs`).
    fn counterfactual_target(&self, p: Pos) -> Pos {
        if let Record::Sync {
            sync_type,
            correlation_id,
            ..
        } = self.ix.rec(p)
        {
            if *sync_type != SyncType::StreamWaitEvent && self.incoming(p).is_empty() {
                if let Some(call) = self.ix.api_of_corr(*correlation_id) {
                    return call;
                }
            }
        }
        p
    }

    /// The ancestors of `symptom` in topological order, at most
    /// [`MAX_CONE_NODES`] of them, the nearest first (breadth-first over
    /// incoming edges): a record beyond the bound counts as unmoved. The order
    /// is a depth-first post-order within the gathered set.
    pub(crate) fn cone(&self, symptom: Pos) -> Cone {
        let target = self.counterfactual_target(symptom);
        let mut gathered: FastMap<Pos, ()> = FastMap::default();
        gathered.insert(target, ());
        let mut nearest = vec![target];
        let mut frontier = std::collections::VecDeque::from([target]);
        while let Some(x) = frontier.pop_front() {
            for e in self.incoming(x) {
                if gathered.len() >= MAX_CONE_NODES {
                    break;
                }
                if gathered.insert(e.src, ()).is_none() {
                    nearest.push(e.src);
                    frontier.push_back(e.src);
                }
            }
        }
        let mut order = Vec::with_capacity(gathered.len());
        let mut place: FastMap<Pos, u32> = FastMap::default();
        let mut visited: FastMap<Pos, ()> = FastMap::default();
        let mut stack: Vec<(Pos, bool)> = vec![(target, false)];
        while let Some((x, expanded)) = stack.pop() {
            if expanded {
                place.insert(x, order.len() as u32);
                order.push(x);
                continue;
            }
            if visited.insert(x, ()).is_some() {
                continue;
            }
            stack.push((x, true));
            for e in self.incoming(x) {
                if gathered.contains_key(&e.src) && !visited.contains_key(&e.src) {
                    stack.push((e.src, false));
                }
            }
        }
        let mut successors: Vec<Vec<u32>> = vec![Vec::new(); order.len()];
        for (i, &x) in order.iter().enumerate() {
            for e in self.incoming(x) {
                if let Some(&from) = place.get(&e.src) {
                    successors[from as usize].push(i as u32);
                }
            }
        }
        Cone {
            order,
            place,
            target,
            nearest,
            successors,
        }
    }

    /// How much earlier (ns) the cone's symptom finishes when `x` finishes
    /// `amount` ns earlier, every record between them re-evaluated by the
    /// model of the module doc; 0 when `x` cannot reach the symptom.
    pub(crate) fn effect(&self, cone: &Cone, x: Pos, amount: f64) -> f64 {
        self.effect_and_route(cone, x, amount).0
    }

    /// [`Graph::effect`], and the edges the earlier finish travelled by from
    /// `x` to the symptom (`x`'s own out-edge first): at each record the moved
    /// gate that held it last. Empty when nothing reached the symptom.
    pub(crate) fn effect_and_route(
        &self,
        cone: &Cone,
        x: Pos,
        amount: f64,
    ) -> (f64, Vec<InferredEdge>) {
        self.joint_effect_and_route(cone, &[(x, amount)])
    }

    /// How much earlier the cone's symptom finishes when every record of
    /// `delays` finishes earlier by its own amount at once (a record also
    /// moved by a gate finishes earlier by both), and the route from the
    /// delay that reached it last ([`Graph::effect_and_route`]).
    pub(crate) fn joint_effect_and_route(
        &self,
        cone: &Cone,
        delays: &[(Pos, f64)],
    ) -> (f64, Vec<InferredEdge>) {
        // Each record's own delay removed, by place in the cone's order.
        let mut own: FastMap<u32, f64> = FastMap::default();
        for &(x, amount) in delays {
            let x = self.counterfactual_target(x);
            if let Some(&at) = cone.place.get(&x) {
                if amount > 0.0 {
                    let entry = own.entry(at).or_insert(0.0);
                    *entry = entry.max(amount);
                }
            }
        }
        // Each moved record: how much earlier it finishes, and the gate it moved by.
        let mut moved: FastMap<Pos, (f64, Option<InferredEdge>)> = FastMap::default();
        // The places still to evaluate, the earliest in topological order first:
        // the delayed records and those a moved record gates (the others keep
        // their finish), each once, and only after every record before it in
        // the order (as a walk over the whole order would see them).
        let mut pending: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
        let mut queued: FastMap<u32, ()> = FastMap::default();
        for &at in own.keys() {
            if queued.insert(at, ()).is_none() {
                pending.push(Reverse(at));
            }
        }
        let queue_after =
            |at: u32, pending: &mut BinaryHeap<Reverse<u32>>, queued: &mut FastMap<u32, ()>| {
                for &next in &cone.successors[at as usize] {
                    if next > at && queued.insert(next, ()).is_none() {
                        pending.push(Reverse(next));
                    }
                }
            };
        while let Some(Reverse(at)) = pending.pop() {
            let n = cone.order[at as usize];
            let incoming = self.incoming(n);
            let via = incoming
                .iter()
                .filter(|e| moved.contains_key(&e.src))
                .max_by_key(|e| (self.effective(e), self.ix.rid(e.src)))
                .copied();
            let own_delay = own.get(&at).copied().unwrap_or(0.0);
            if via.is_none() && own_delay <= 0.0 {
                continue;
            }
            let released = incoming.iter().map(|e| self.effective(e)).max();
            let released_sooner = incoming
                .iter()
                .map(|e| {
                    let shift = moved.get(&e.src).map_or(0.0, |m| m.0);
                    self.effective(e) as f64 - shift
                })
                .fold(f64::NEG_INFINITY, f64::max);
            let gated = released.map_or(0.0, |r| (r as f64 - released_sooner).max(0.0));
            let shift = gated + own_delay;
            if shift > 0.0 {
                let by = if gated > 0.0 { via } else { None };
                move_earlier(&mut moved, n, shift, by);
                queue_after(at, &mut pending, &mut queued);
                // The call blocked on the op returns with it (its successors,
                // the program order or the next task it kept waiting, are
                // evaluated too), reached by the `sync` the wait is.
                if let Some((call, sooner)) = self.blocked_call(n, shift) {
                    if let Some(&c) = cone.place.get(&call) {
                        let wait = InferredEdge {
                            src: n,
                            dst: call,
                            kind: EdgeType::Sync,
                            ev: Evidence::Inferred,
                            conf: 1.0,
                        };
                        move_earlier(&mut moved, call, sooner, Some(wait));
                        queue_after(c, &mut pending, &mut queued);
                    }
                }
            }
        }
        let Some(&(effect, _)) = moved.get(&cone.target) else {
            return (0.0, Vec::new());
        };
        let mut route = Vec::new();
        let mut cur = cone.target;
        while let Some(&(_, Some(e))) = moved.get(&cur) {
            route.push(e);
            cur = e.src;
        }
        route.reverse();
        (effect, route)
    }
}

impl Graph<'_> {
    /// When device op `op` finishes `shift` earlier and the call that launched
    /// it was blocked on it (the call was still running when the op ended),
    /// that call returns as much earlier, up to how long it blocked: the call
    /// and how much earlier it returns. However late after the op's end the
    /// call returned: a serving loop's pageable readback behind a lengthened
    /// kernel returned 395 µs after its 4 KiB copy ended (its peers 5 µs)
    /// with no stall record on its thread, and a bound on that return (it was
    /// 20 µs) cut the only path from the kernel to the requests it held
    /// (`continuous-batching.earlier-batch-fence` read `none` at magnitude
    /// 7.6, H200 split `h200-580-20261205-2`).
    fn blocked_call(&self, op: Pos, shift: f64) -> Option<(Pos, f64)> {
        let ix = &self.ix;
        if !ix.rec(op).is_device_op() {
            return None;
        }
        let call = ix.launch_api(op)?;
        let (op_end, call_end) = (ix.end(op), ix.end(call));
        if call_end < op_end {
            return None;
        }
        cov_mark::hit!(counterfactual_blocked_call);
        let blocked = op_end.saturating_sub(ix.start(call)) as f64;
        Some((call, shift.min(blocked)))
    }
}

/// Records `x` as finishing `shift` earlier, moved by gate `by`, unless it
/// already moves further (a call blocked on its op moves with the op and by
/// its own gates: the larger shift holds).
fn move_earlier(
    moved: &mut FastMap<Pos, (f64, Option<InferredEdge>)>,
    x: Pos,
    shift: f64,
    by: Option<InferredEdge>,
) {
    if moved.get(&x).is_none_or(|m| m.0 < shift) {
        moved.insert(x, (shift, by));
    }
}
