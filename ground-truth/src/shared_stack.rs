//! [`SharedStack`]: a symbolized user stack shared by reference count.
//!
//! A host trace takes one stack per probed call, and a serving loop makes the same
//! few calls from the same few places millions of times: one allocation per
//! distinct stack instead of one per record keeps a ten-million-operation case
//! within memory (`causalbench measure large`). On disk it is a plain array of
//! strings, and its schema is `Vec<String>`'s.

use crate::shared_str::SharedStr;
use schemars::{Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::{Borrow, Cow};
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// Frames, innermost first.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct SharedStack(Arc<[SharedStr]>);

impl Deref for SharedStack {
    type Target = [SharedStr];
    fn deref(&self) -> &[SharedStr] {
        &self.0
    }
}

impl Borrow<[SharedStr]> for SharedStack {
    fn borrow(&self) -> &[SharedStr] {
        &self.0
    }
}

impl fmt::Debug for SharedStack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<Vec<SharedStr>> for SharedStack {
    fn from(frames: Vec<SharedStr>) -> Self {
        SharedStack(frames.into())
    }
}

impl From<&[SharedStr]> for SharedStack {
    fn from(frames: &[SharedStr]) -> Self {
        SharedStack(frames.into())
    }
}

impl<S: Into<SharedStr>> FromIterator<S> for SharedStack {
    fn from_iter<I: IntoIterator<Item = S>>(frames: I) -> Self {
        SharedStack(frames.into_iter().map(Into::into).collect())
    }
}

impl PartialEq<Vec<SharedStr>> for SharedStack {
    fn eq(&self, other: &Vec<SharedStr>) -> bool {
        *self.0 == **other
    }
}

/// Distinct stacks a reading thread keeps to share (as `SharedStr` keeps names).
const SHARED_WHILE_READING: usize = 1024;

thread_local! {
    static READ_STACKS: std::cell::RefCell<rustc_hash::FxHashSet<SharedStack>> =
        Default::default();
}

/// `frames` as a `SharedStack`, sharing the allocation of an equal stack read
/// earlier on this thread.
fn shared_on_this_thread(frames: Vec<SharedStr>) -> SharedStack {
    READ_STACKS.with_borrow_mut(|seen| {
        crate::shared_str::share_from(seen, SHARED_WHILE_READING, frames, SharedStack::from)
    })
}

impl Serialize for SharedStack {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SharedStack {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<SharedStr>::deserialize(deserializer).map(shared_on_this_thread)
    }
}

impl schemars::JsonSchema for SharedStack {
    fn inline_schema() -> bool {
        <Vec<SharedStr>>::inline_schema()
    }
    fn schema_name() -> Cow<'static, str> {
        <Vec<SharedStr>>::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        <Vec<SharedStr>>::schema_id()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        <Vec<SharedStr>>::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_stacks_read_on_one_thread_share_one_allocation() {
        let stacks: Vec<SharedStack> = serde_json::from_str(
            r#"[["cuLaunchKernel","app!main"],["x"],["cuLaunchKernel","app!main"]]"#,
        )
        .unwrap();
        assert!(Arc::ptr_eq(&stacks[0].0, &stacks[2].0));
        assert_eq!(stacks[1].len(), 1);
        assert_eq!(stacks[1][0], "x");
    }

    #[test]
    fn reads_and_writes_as_a_plain_array_with_its_schema() {
        let stack: SharedStack = ["cuLaunchKernel", "app!main"].into_iter().collect();
        let json = serde_json::to_string(&stack).unwrap();
        assert_eq!(json, r#"["cuLaunchKernel","app!main"]"#);
        let frames: Vec<String> = serde_json::from_str(&json).unwrap();
        assert_eq!(frames, ["cuLaunchKernel", "app!main"]);
        assert!(serde_json::from_str::<SharedStack>(r#"[1]"#).is_err());
        let ours = serde_json::to_value(schemars::schema_for!(SharedStack)).unwrap();
        let plain = serde_json::to_value(schemars::schema_for!(Vec<String>)).unwrap();
        assert_eq!(ours, plain);
    }
}
