//! Dependencies between nodes of one graph launch, inferred from timing that is
//! consistent over replays (CUPTI does not report graph topology).

use super::graph::Graph;
use crate::index::Pos;
use ground_truth::trace::Record;
use std::collections::HashMap;

impl Graph<'_> {
    /// Dependencies between nodes of one graph launch, inferred from timing
    /// consistent over replays: (pred, node, confidence).
    pub(super) fn infer_graph_edges(&self) -> Vec<(Pos, Pos, f64)> {
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
}
