//! One detail shared by reference count: the rarely read fields of a trace record
//! (`trace/detail`) and of a truth node (`graph/detail`) are kept behind one shared
//! pointer, so that records and nodes stay small in memory (docs/records.md "Memory of a
//! large case"). A launch-bound trace repeats the same few details millions of times:
//! equal details made on one thread share one allocation, as `SharedStr` shares names.
//!
//! A file of its own because both `trace` and `graph` share their details through it;
//! each detail type registers its table (`shareable!`) where it is defined, so this file
//! names neither.

use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::Arc;

/// One detail shared by reference count; reads as the detail itself.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SharedDetail<T>(Arc<T>);

/// Distinct details a thread keeps to share (as `SharedStr` keeps names).
const SHARED_PER_THREAD: usize = 1024;

/// The table of details a thread has made, one per detail type.
pub trait Shareable: Eq + Hash + Sized + 'static {
    fn with_table<R>(use_table: impl FnOnce(&mut rustc_hash::FxHashSet<Arc<Self>>) -> R) -> R;
}

/// Gives each detail type its own per-thread table: `shareable!(Type => TABLE, …)`.
macro_rules! shareable {
    ($($detail:ty => $table:ident),*) => {$(
        thread_local! {
            static $table: std::cell::RefCell<
                rustc_hash::FxHashSet<std::sync::Arc<$detail>>,
            > = Default::default();
        }
        impl $crate::shared_detail::Shareable for $detail {
            fn with_table<R>(
                use_table: impl FnOnce(&mut rustc_hash::FxHashSet<std::sync::Arc<Self>>) -> R,
            ) -> R {
                $table.with_borrow_mut(use_table)
            }
        }
    )*};
}
pub(crate) use shareable;

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

    /// A detail of this test's own, so that the test names no other file.
    #[derive(Debug, PartialEq, Eq, Hash)]
    struct Bytes(u64);

    shareable!(Bytes => TEST_DETAILS);

    #[test]
    fn equal_details_made_on_one_thread_share_one_allocation() {
        let a = SharedDetail::from(Bytes(64));
        let b = SharedDetail::from(Bytes(64));
        let c = SharedDetail::from(Bytes(65));
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert!(!Arc::ptr_eq(&a.0, &c.0));
        assert_eq!(*c, Bytes(65), "reads as the detail itself");
    }
}
