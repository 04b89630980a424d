//! Dependencies between nodes of one graph launch, inferred from timing that is
//! consistent over replays (CUPTI does not report graph topology).

use super::graph::Graph;
use super::thresholds::{
    GRAPH_EDGE_AGREEMENT_CONFIDENCE, GRAPH_EDGE_BASE_CONFIDENCE, GRAPH_NODE_CLOCK_SLACK_NS,
};
use crate::index::FastMap;
use crate::index::Pos;
use ground_truth::trace::Record;

impl Graph<'_> {
    /// Dependencies between nodes of one graph launch, inferred from timing
    /// consistent over replays: (pred, node, confidence).
    pub(super) fn infer_graph_edges(&self) -> Vec<(Pos, Pos, f64)> {
        let ix = &self.ix;
        // (graph_id) → launches (corr) → nodes.
        let mut launches: FastMap<(u32, u32), Vec<Pos>> = FastMap::default();
        for &p in &ix.device_ops {
            if let Record::Kernel {
                correlation_id,
                detail,
                ..
            } = ix.rec(p)
            {
                if detail.graph_node_id != 0 {
                    launches
                        .entry((detail.graph_id, *correlation_id))
                        .or_default()
                        .push(p);
                }
            }
        }
        let node_id = |p: Pos| match ix.rec(p) {
            Record::Kernel { detail, .. } => detail.graph_node_id,
            _ => 0,
        };
        let mut keys: Vec<(u32, u32)> = launches.keys().copied().collect();
        keys.sort_unstable();
        // Per graph: (a, b) node ids → (launches where a ended before b started,
        // launches where b started while a ran). A dependency is consistent with
        // every launch; one overlap rules it out.
        let mut order: FastMap<(u32, u64, u64), (u32, u32)> = FastMap::default();
        let mut replays: FastMap<u32, u32> = FastMap::default();
        for k in &keys {
            *replays.entry(k.0).or_default() += 1;
            let nodes = &launches[k];
            for &b in nodes {
                let bs = ix.start(b) as f64;
                for &a in nodes {
                    if a == b || node_id(a) == node_id(b) {
                        continue;
                    }
                    let e = order.entry((k.0, node_id(a), node_id(b))).or_default();
                    if ix.end(a) as f64 <= bs + GRAPH_NODE_CLOCK_SLACK_NS {
                        e.0 += 1;
                    } else {
                        e.1 += 1;
                    }
                }
            }
        }
        // Candidate predecessors: always finished before the node started. Keep
        // every one of them (fan-in) except those implied through another
        // candidate (a → c → b makes a → b redundant): the transitive reduction.
        let mut cands: FastMap<(u32, u64), Vec<u64>> = FastMap::default();
        for (&(gid, a, b), &(before, overlap)) in &order {
            if before > 0 && overlap == 0 {
                cands.entry((gid, b)).or_default().push(a);
            }
        }
        let mut preds_of: FastMap<(u32, u64), Vec<u64>> = FastMap::default();
        for (&(gid, b), v) in &cands {
            let implied = |a: u64| {
                v.iter()
                    .any(|&c| c != a && cands.get(&(gid, c)).is_some_and(|cv| cv.contains(&a)))
            };
            let mut kept: Vec<u64> = v.iter().copied().filter(|&a| !implied(a)).collect();
            kept.sort_unstable();
            preds_of.insert((gid, b), kept);
        }
        // A node whose usual predecessor (in other replays) is absent from this
        // launch lost that predecessor's record.
        let mut out = Vec::new();
        for k in &keys {
            let nodes = &launches[k];
            let by_id: FastMap<u64, Pos> = nodes.iter().map(|&p| (node_id(p), p)).collect();
            for &b in nodes {
                let Some(ps) = preds_of.get(&(k.0, node_id(b))) else {
                    continue;
                };
                if ps.iter().any(|a| !by_id.contains_key(a)) {
                    self.graph_lost.borrow_mut().push(b);
                }
                for a in ps {
                    if let Some(&ap) = by_id.get(a) {
                        let (before, _) = order[&(k.0, *a, node_id(b))];
                        // Inferred from timing, never certain: below 0.8 however
                        // many replays agree.
                        let share = before as f64 / replays[&k.0].max(1) as f64;
                        out.push((
                            ap,
                            b,
                            GRAPH_EDGE_BASE_CONFIDENCE + GRAPH_EDGE_AGREEMENT_CONFIDENCE * share,
                        ));
                    }
                }
            }
        }
        out
    }
}
