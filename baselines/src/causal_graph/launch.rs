//! Launch edges (API record → its activities by correlation id), `missing` claims
//! for lost launch records, and distrust of visible edges into claimed gaps.

use super::graph::Graph;
use super::thresholds::{
    DISTRUSTED_EDGE_CONFIDENCE, LOST_LAUNCH_SCAN_CALLS, UPROBE_LAUNCH_CONFIDENCE,
    UPROBE_QUEUED_SLACK_NS,
};
use crate::index::FastMap;
use crate::index::{Activities, Pos};
use ground_truth::trace::{Record, SyncType};
use ground_truth::{EdgeType, Evidence};

impl Graph<'_> {
    /// Launch edges by correlation id; `missing` when the API record is absent.
    pub(super) fn launch_edges(&mut self) {
        let has_api = self.ix.has_api_records();
        let mc = self.missing_conf();
        let corrs: Vec<u32> = self.ix.activities_by_corr().map(|(c, _)| c).collect();
        for c in corrs {
            let acts = Activities::from_slice(self.ix.activities(c).unwrap_or_default());
            let api = self.ix.api_of_corr(c);
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
                            Some(u) => self.add(
                                u,
                                a,
                                EdgeType::Launch,
                                Evidence::Inferred,
                                UPROBE_LAUNCH_CONFIDENCE,
                            ),
                            None => {
                                self.add_missing(a, EdgeType::Launch, mc);
                                if let Some((q, _, _, _)) =
                                    self.ix.rec(a).device_times().filter(|t| t.0 > 0)
                                {
                                    self.lost_calls
                                        .push((self.ix.token_of_corr(c).map(|t| t.to_string()), q));
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
    pub(super) fn uprobe_for_lost_launch(&self, a: Pos) -> Option<Pos> {
        let ix = &self.ix;
        let r = ix.rec(a);
        let (q, _, _, _) = r.device_times().filter(|t| t.0 > 0)?;
        let k = ix
            .all_calls
            .partition_point(|&c| ix.start(c) <= q + UPROBE_QUEUED_SLACK_NS);
        ix.all_calls[..k]
            .iter()
            .rev()
            .take(LOST_LAUNCH_SCAN_CALLS)
            .copied()
            .find(|&c| {
                matches!(ix.rec(c), Record::Uprobe { .. })
                    && ix.end(c) + UPROBE_QUEUED_SLACK_NS >= q
                    && ix.call_kind(c).can_create(r)
            })
    }

    /// Lowers the confidence of visible edges into a record whose predecessor of
    /// the same kind is claimed missing: the visible one is likely not the gate.
    pub(super) fn distrust_edges_into_gaps(&mut self) {
        if self.missing.is_empty() {
            return;
        }
        let gaps: FastMap<(Pos, EdgeType), ()> =
            self.missing.iter().map(|m| ((m.at, m.kind), ())).collect();
        for e in &mut self.edges {
            if gaps.contains_key(&(e.dst, e.kind)) {
                e.conf = e.conf.min(DISTRUSTED_EDGE_CONFIDENCE);
            }
        }
    }
}
