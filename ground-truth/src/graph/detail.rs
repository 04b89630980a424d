//! A node's thread, stream, call site and operator, kept behind one shared pointer so that
//! a node is 104 bytes in memory (docs/records.md "Memory of a large case"). A launch-bound
//! truth has a handful of combinations of them across millions of nodes: equal details
//! made on one thread share one allocation (`crate::shared_detail`), and a node with
//! none of them holds no allocation at all.

use crate::shared_detail::{shareable, SharedDetail};
use crate::SharedStr;
use std::fmt;
use std::ops::Deref;

/// Where a node ran and what enclosed it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct NodeDetail {
    /// Host thread (OS tid) for host nodes.
    pub thread: Option<u32>,
    /// Device stream (CUPTI stream id) for device nodes.
    pub stream: Option<u32>,
    pub call_site: Option<SharedStr>,
    /// NVTX range (operator) enclosing the launch call, if any.
    pub operator: Option<SharedStr>,
}

shareable!(NodeDetail => NODE_DETAILS);

/// What a node without a detail reads as.
static EMPTY: NodeDetail = NodeDetail {
    thread: None,
    stream: None,
    call_site: None,
    operator: None,
};

/// A [`NodeDetail`] shared by reference count (none when it is empty); reads as the
/// detail itself. Equal details compare equal whether or not they share an allocation.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct SharedNodeDetail(Option<SharedDetail<NodeDetail>>);

impl SharedNodeDetail {
    /// Changes some of the detail (the others keep their values).
    pub fn edit(&mut self, change: impl FnOnce(&mut NodeDetail)) {
        let mut detail = (**self).clone();
        change(&mut detail);
        *self = detail.into();
    }
}

impl From<NodeDetail> for SharedNodeDetail {
    /// `detail`, sharing the allocation of an equal one made earlier on this thread.
    fn from(detail: NodeDetail) -> Self {
        if detail == EMPTY {
            SharedNodeDetail(None)
        } else {
            SharedNodeDetail(Some(detail.into()))
        }
    }
}

impl Deref for SharedNodeDetail {
    type Target = NodeDetail;
    fn deref(&self) -> &NodeDetail {
        self.0.as_deref().unwrap_or(&EMPTY)
    }
}

impl fmt::Debug for SharedNodeDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_detail_holds_nothing_and_edits_keep_the_other_fields() {
        let mut detail = SharedNodeDetail::from(NodeDetail::default());
        assert_eq!(detail, SharedNodeDetail::default());
        assert!(detail.0.is_none());
        detail.edit(|d| d.stream = Some(7));
        detail.edit(|d| d.operator = Some("mlp".into()));
        assert_eq!(detail.stream, Some(7));
        assert_eq!(detail.operator.as_deref(), Some("mlp"));
        assert_eq!(detail.thread, None);
        detail.edit(|d| *d = NodeDetail::default());
        assert!(detail.0.is_none());
    }
}
