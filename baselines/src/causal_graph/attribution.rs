//! Request attribution: the request token of a record.

use super::graph::Graph;
use crate::index::Pos;
use ground_truth::trace::Record;
use ground_truth::SharedStr;

impl Graph<'_> {
    /// Request token of a record: explicit external correlation (device ops, api,
    /// sync), or the task markers of a host thread (uprobes).
    pub fn token(&self, p: Pos) -> Option<SharedStr> {
        let ix = &self.ix;
        let r = ix.rec(p);
        if r.correlation_id().is_some() {
            return ix.token(p).cloned();
        }
        match r {
            Record::Uprobe { tid, enter, .. } => match ix.api_of_uprobe(p) {
                Some(a) => self.token(a),
                None => ix.task_token_on(*tid, *enter).map(SharedStr::from),
            },
            _ => None,
        }
    }
}
