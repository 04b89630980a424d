//! Request attribution: the request token of a record.

use super::graph::Graph;
use crate::index::Pos;
use ground_truth::trace::Record;

impl Graph<'_> {
    /// Request token of a record: explicit external correlation (device ops, api,
    /// sync), or the task markers of a host thread (uprobes).
    pub fn token(&self, p: Pos) -> Option<String> {
        let ix = &self.ix;
        let r = ix.rec(p);
        if let Some(c) = r.correlation_id() {
            return ix.token_by_corr.get(&c).cloned();
        }
        match r {
            Record::Uprobe { tid, enter, .. } => match ix.api_of_uprobe.get(&p) {
                Some(&a) => self.token(a),
                None => ix.task_token_on(*tid, *enter),
            },
            _ => None,
        }
    }
}
