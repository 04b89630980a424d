//! The critical path: walking back from a record along the predecessor whose
//! completion gated it.

use super::graph::{Graph, InferredEdge};
use super::thresholds::EXPLICIT_EVIDENCE_RANK;
use crate::index::Pos;
use ground_truth::trace::{Record, SyncType};
use ground_truth::{EdgeType, Evidence, Ns};

impl Graph<'_> {
    /// When a predecessor let `dst` proceed.
    pub(super) fn effective(&self, e: &InferredEdge) -> Ns {
        if e.kind == EdgeType::Launch {
            if let Some((q, _, _, _)) = super::readings::device_times(&self.ix, e.dst) {
                if q > 0 {
                    return q;
                }
            }
            // A call that returns after its op started was blocking (a pageable
            // copy): the op was enqueued when the call began, not when it returned.
            // A graph launch is the exception: the driver submits the graph's
            // nodes while the call runs, so a node that started before the call
            // returned was let go by the launch when it started.
            let (call_start, call_end) = (self.ix.start(e.src), self.ix.end(e.src));
            let op_start = self.ix.start(e.dst);
            let graph_node = matches!(
                self.ix.rec(e.dst),
                Record::Kernel { detail, .. } if detail.graph_node_id != 0
            );
            return if call_end <= op_start {
                call_end
            } else if graph_node {
                op_start
            } else {
                call_start
            };
        }
        self.done(e.src)
    }

    /// The predecessor whose completion let `p` proceed.
    pub(super) fn gating_edge(&self, p: Pos) -> Option<InferredEdge> {
        self.incoming(p).into_iter().max_by(|a, b| {
            (self.effective(a), strength(a.ev), self.ix.rid(a.src)).cmp(&(
                self.effective(b),
                strength(b.ev),
                self.ix.rid(b.src),
            ))
        })
    }

    /// Walks back from `p` along gating predecessors: (path root first, first unresolved).
    pub fn critical_path(&self, p: Pos) -> (Vec<Pos>, Option<Pos>) {
        // A blocking call's CUPTI record has no edges of its own: what the wait
        // waited for, and the host work before it, gate its API call, which
        // the record's correlation id names.
        if let Record::Sync {
            sync_type,
            correlation_id,
            ..
        } = self.ix.rec(p)
        {
            if *sync_type != SyncType::StreamWaitEvent && self.incoming(p).is_empty() {
                if let Some(call) = self.ix.api_of_corr(*correlation_id).filter(|&c| c != p) {
                    let (mut path, unresolved) = self.critical_path(call);
                    path.push(p);
                    return (path, unresolved);
                }
            }
        }
        let mut path = vec![p];
        let mut cur = p;
        let mut unresolved = None;
        for _ in 0..256 {
            let inc = self.incoming(cur);
            let best = inc
                .iter()
                .filter(|e| !path.contains(&e.src))
                .max_by(|a, b| {
                    (self.effective(a), strength(a.ev), self.ix.rid(a.src)).cmp(&(
                        self.effective(b),
                        strength(b.ev),
                        self.ix.rid(b.src),
                    ))
                });
            if self.missing_at.contains_key(&cur) {
                // A predecessor the semantics require is absent: it may have gated
                // `cur`, so the walk cannot go on with confidence.
                unresolved = Some(cur);
                break;
            }
            match best {
                Some(e)
                    if e.kind == EdgeType::HostOrder
                        && e.ev == Evidence::Inferred
                        && !self.joined(&e) =>
                {
                    // Closed mode: which host task this call belongs to is not in the
                    // view; the path cannot be followed back with certainty.
                    unresolved = Some(cur);
                    break;
                }
                Some(e) => {
                    path.push(e.src);
                    cur = e.src;
                }
                None => {
                    // Without task markers a host chain's root is never visible.
                    if self.ix.view.spec.mode == ground_truth::Mode::Closed
                        && matches!(self.ix.rec(cur), Record::Api { .. } | Record::Uprobe { .. })
                    {
                        unresolved = Some(cur);
                    }
                    break;
                }
            }
        }
        path.reverse();
        (path, unresolved)
    }
}

pub(super) fn strength(e: Evidence) -> u8 {
    match e {
        Evidence::Explicit => EXPLICIT_EVIDENCE_RANK,
        Evidence::Observed => 2,
        Evidence::Inferred => 1,
        Evidence::Missing => 0,
    }
}
