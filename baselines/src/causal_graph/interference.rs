//! Interference: device work on another stream that held the SMs or the copy
//! engine while an op waited to start (inferred `fault`).

use super::graph::Graph;
use super::readings;
use super::thresholds::{
    CLOCK_NS, HANDOVER_SLACK_NS, HANDOVER_SLACK_WAIT_DIVISOR, INTERFERENCE_CONFIDENCE, NOISE_NS,
};
use crate::analysis;
use crate::index::FastMap;
use crate::index::{median, Pos};
use ground_truth::trace::Record;
use ground_truth::{EdgeType, Evidence};

impl Graph<'_> {
    /// Device work on another stream that held the resource (SMs for kernels,
    /// the copy engine for copies) while an op waited to start: the latest such
    /// op ending inside the wait (inferred `fault`).
    pub(super) fn interference_edges(&mut self) {
        let ix = &self.ix;
        let mut by_end: Vec<Pos> = ix.device_ops.clone();
        by_end.sort_by_key(|&p| (ix.end(p), ix.rid(p)));
        // Typical submitted→start wait of each operation: only an op that waited
        // much longer than its peers was held back by someone else's work.
        let mut waits: FastMap<analysis::PeerKey, Vec<f64>> = FastMap::default();
        for &p in &ix.device_ops {
            let r = ix.rec(p);
            if let (Some(k), Some((_, s, st, _))) =
                (analysis::peer_key(r), readings::device_times(ix, p))
            {
                if s > 0 && st >= s {
                    waits.entry(k).or_default().push((st - s) as f64);
                }
            }
        }
        let typical_wait: FastMap<analysis::PeerKey, f64> = waits
            .into_iter()
            .filter(|(_, v)| v.len() >= 2)
            .filter_map(|(k, v)| median(v).map(|m| (k, m)))
            .collect();
        let mut add = Vec::new();
        let mut lost = Vec::new();
        for &x in &ix.device_ops {
            let r = ix.rec(x);
            let Some((q, s, st, _)) = readings::device_times(ix, x) else {
                continue;
            };
            if q == 0 || s == 0 || st < s || ((st - s) as f64) < NOISE_NS {
                continue;
            }
            let copy = matches!(r, Record::Memcpy { .. });
            if !copy && !matches!(r, Record::Kernel { .. }) {
                continue;
            }
            // Without peers the normal wait is the device's own dispatch, well
            // under the noise floor: a longer wait is judged by itself.
            let base = analysis::peer_key(r)
                .and_then(|k| typical_wait.get(&k))
                .copied()
                .unwrap_or(0.0);
            if ((st - s) as f64 - base) <= NOISE_NS.max(base) {
                continue;
            }
            let lo = by_end.partition_point(|&p| ix.end(p) <= s);
            // An op that ends as the victim starts (within the clocks'
            // agreement: a kernel's end and the next one's start come from
            // timestamps that agree to [`CLOCK_NS`]) handed the resource over.
            let hi = by_end.partition_point(|&p| ix.end(p) <= st + CLOCK_NS as u64);
            let culprit = by_end[lo..hi].iter().rev().copied().find(|&o| {
                let ro = ix.rec(o);
                o != x
                    && ro.stream() != r.stream()
                    && matches!(ro, Record::Memcpy { .. }) == copy
                    && ix.start(o) < st
            });
            // The engine/SMs are handed over at once: a culprit that ended well
            // before the victim started was not the last one holding it.
            let tol = HANDOVER_SLACK_NS + (st - s) / HANDOVER_SLACK_WAIT_DIVISOR;
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
            self.add(
                o,
                x,
                EdgeType::Fault,
                Evidence::Inferred,
                INTERFERENCE_CONFIDENCE,
            );
        }
        let mc = self.missing_conf();
        for x in lost {
            self.add_missing(x, EdgeType::Fault, mc);
        }
    }
}
