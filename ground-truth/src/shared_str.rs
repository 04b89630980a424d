//! [`SharedStr`]: an immutable string shared by reference count.
//!
//! A ground truth repeats a handful of strings millions of times (kernel and API
//! names, request tokens, step ids, call sites). Sharing one allocation per
//! distinct string makes creating, cloning and dropping a node free of heap
//! traffic. On disk it is a plain JSON string, and its schema is `String`'s.
//!
//! The handle is one pointer (an `Arc<String>`, not the two words of an `Arc<str>`):
//! a ground-truth node holds three of them (its shared detail two more) and a large case
//! holds tens of millions of nodes and records, so the word saved per string is most of a
//! gigabyte at ten million operations (`causalbench measure large`); the extra hop to the bytes is
//! paid only when a string is read, never when it is shared.

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::{Borrow, Cow};
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SharedStr(Arc<String>);

impl SharedStr {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for SharedStr {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.0.as_str(), f)
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0.as_str(), f)
    }
}

impl From<&str> for SharedStr {
    fn from(s: &str) -> Self {
        SharedStr(Arc::new(s.to_owned()))
    }
}

impl From<&SharedStr> for SharedStr {
    fn from(s: &SharedStr) -> Self {
        s.clone()
    }
}

impl From<&String> for SharedStr {
    fn from(s: &String) -> Self {
        SharedStr(Arc::new(s.clone()))
    }
}

impl From<String> for SharedStr {
    fn from(s: String) -> Self {
        SharedStr(Arc::new(s))
    }
}

impl From<Box<str>> for SharedStr {
    fn from(s: Box<str>) -> Self {
        SharedStr(Arc::new(s.into_string()))
    }
}

impl From<Arc<str>> for SharedStr {
    fn from(s: Arc<str>) -> Self {
        SharedStr(Arc::new(s.to_string()))
    }
}

impl From<SharedStr> for String {
    fn from(s: SharedStr) -> Self {
        Arc::unwrap_or_clone(s.0)
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        self.0.as_str() == other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        self.0.as_str() == *other
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

/// Distinct strings a reading thread keeps to share: enough for the names a
/// trace repeats (APIs, kernels, frames, call sites); a file of mostly unique
/// strings (request tokens) only ever costs this many.
const SHARED_WHILE_READING: usize = 4096;

thread_local! {
    static READ_STRINGS: std::cell::RefCell<rustc_hash::FxHashSet<SharedStr>> =
        Default::default();
}

/// `text` as a `SharedStr`, sharing the allocation of an equal string read
/// earlier on this thread: a bundle read back shares its repeated names as the
/// recorder that wrote it did, instead of holding millions of copies.
fn shared_on_this_thread(text: &str) -> SharedStr {
    READ_STRINGS
        .with_borrow_mut(|seen| share_from(seen, SHARED_WHILE_READING, text, SharedStr::from))
}

/// The value in `seen` equal to `key`, or a new one made from it and kept, `seen`
/// starting over once it holds `limit` values (what each reading thread's table of
/// shared strings and stacks does).
pub(crate) fn share_from<T, Q>(
    seen: &mut rustc_hash::FxHashSet<T>,
    limit: usize,
    key: Q,
    make: impl FnOnce(Q) -> T,
) -> T
where
    T: Clone + Eq + std::hash::Hash + Borrow<Q::Target>,
    Q: Deref,
    Q::Target: Eq + std::hash::Hash,
{
    if let Some(s) = seen.get(&*key) {
        return s.clone();
    }
    if seen.len() >= limit {
        seen.clear();
    }
    let s = make(key);
    seen.insert(s.clone());
    s
}

impl Serialize for SharedStr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SharedStr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = SharedStr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SharedStr, E> {
                Ok(shared_on_this_thread(v))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<SharedStr, E> {
                Ok(shared_on_this_thread(&v))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

impl JsonSchema for SharedStr {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "string".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_read_on_one_thread_share_one_allocation() {
        let names: Vec<SharedStr> =
            serde_json::from_str(r#"["cuLaunchKernel","k","cuLaunchKernel","k\u0022"]"#).unwrap();
        assert!(Arc::ptr_eq(&names[0].0, &names[2].0));
        assert_eq!(names[3], "k\"");
        // Mostly unique strings (request tokens) keep the table bounded, and
        // every string still reads as itself.
        let tokens: Vec<String> = (0..3 * SHARED_WHILE_READING)
            .map(|i| format!("req-{i}"))
            .collect();
        let read: Vec<SharedStr> =
            serde_json::from_str(&serde_json::to_string(&tokens).unwrap()).unwrap();
        assert!(read.iter().zip(&tokens).all(|(r, t)| r == t));
        assert!(READ_STRINGS.with_borrow(|seen| seen.len()) <= SHARED_WHILE_READING);
    }

    /// One pointer per string: what a node of five strings and a record are sized by.
    #[test]
    fn a_shared_string_is_one_word() {
        assert_eq!(
            std::mem::size_of::<SharedStr>(),
            std::mem::size_of::<usize>()
        );
        assert_eq!(
            std::mem::size_of::<Option<SharedStr>>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn reads_and_writes_as_a_plain_string() {
        let s = SharedStr::from("cudaLaunchKernel");
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, "\"cudaLaunchKernel\"");
        let back: SharedStr = serde_json::from_str(&json).unwrap();
        assert_eq!(back, "cudaLaunchKernel");
        let escaped: SharedStr = serde_json::from_str("\"a\\\"b\"").unwrap();
        assert_eq!(escaped, "a\"b");
        assert!(serde_json::from_str::<SharedStr>("3").is_err());
    }

    #[test]
    fn schema_is_that_of_string() {
        let ours = serde_json::to_value(schemars::schema_for!(SharedStr)).unwrap();
        let string = serde_json::to_value(schemars::schema_for!(String)).unwrap();
        assert_eq!(ours["type"], string["type"]);
    }
}
