//! A device activity's rarely read fields, kept behind one shared pointer so that a record
//! of any kind is at most 64 bytes in memory (docs/records.md "Memory of a large case").
//! A launch-bound trace repeats the same few kernels, copies and memsets millions of times:
//! equal details made on one thread share one allocation, as `SharedStr` shares names.
//! A ground-truth node's detail (`crate::graph::NodeDetail`) is shared the same way.

use crate::SharedStr;
use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::Arc;

/// What a kernel activity carries besides its rid, stream, correlation id and times.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KernelDetail {
    pub name: SharedStr,
    pub context: u32,
    pub device: u32,
    pub graph_id: u32,
    pub graph_node_id: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub channel: u32,
}

/// What a copy activity carries besides its rid, direction, memory, stream, correlation
/// id and times.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CopyDetail {
    pub bytes: u64,
    pub context: u32,
    pub device: u32,
    pub graph_id: u32,
    pub graph_node_id: u64,
    pub channel: u32,
}

/// What a memset activity carries besides its rid, stream, correlation id and times.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemsetDetail {
    pub bytes: u64,
    pub context: u32,
    pub device: u32,
}

/// One detail shared by reference count; reads as the detail itself.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SharedDetail<T>(Arc<T>);

/// Distinct details a thread keeps to share (as `SharedStr` keeps names).
const SHARED_PER_THREAD: usize = 1024;

/// The table of details a thread has made, one per detail type.
pub trait Shareable: Eq + Hash + Sized + 'static {
    fn with_table<R>(use_table: impl FnOnce(&mut rustc_hash::FxHashSet<Arc<Self>>) -> R) -> R;
}

macro_rules! shareable {
    ($($detail:ty => $table:ident),*) => {$(
        thread_local! {
            static $table: std::cell::RefCell<rustc_hash::FxHashSet<Arc<$detail>>> =
                Default::default();
        }
        impl Shareable for $detail {
            fn with_table<R>(
                use_table: impl FnOnce(&mut rustc_hash::FxHashSet<Arc<Self>>) -> R,
            ) -> R {
                $table.with_borrow_mut(use_table)
            }
        }
    )*};
}

shareable!(
    KernelDetail => KERNEL_DETAILS,
    CopyDetail => COPY_DETAILS,
    MemsetDetail => MEMSET_DETAILS,
    crate::graph::NodeDetail => NODE_DETAILS
);

impl<T: Shareable> From<T> for SharedDetail<T> {
    /// `detail`, sharing the allocation of an equal one made earlier on this thread.
    fn from(detail: T) -> Self {
        T::with_table(|seen| {
            if let Some(shared) = seen.get(&detail) {
                return SharedDetail(shared.clone());
            }
            if seen.len() >= SHARED_PER_THREAD {
                seen.clear();
            }
            let shared = Arc::new(detail);
            seen.insert(shared.clone());
            SharedDetail(shared)
        })
    }
}

impl<T> Deref for SharedDetail<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: fmt::Debug> fmt::Debug for SharedDetail<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_details_made_on_one_thread_share_one_allocation() {
        let detail = |bytes| MemsetDetail {
            bytes,
            context: 1,
            device: 0,
        };
        let a = SharedDetail::from(detail(64));
        let b = SharedDetail::from(detail(64));
        let c = SharedDetail::from(detail(65));
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert!(!Arc::ptr_eq(&a.0, &c.0));
        assert_eq!(c.bytes, 65);
    }
}
