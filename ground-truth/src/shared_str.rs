//! [`SharedStr`]: an immutable string shared by reference count.
//!
//! A ground truth repeats a handful of strings millions of times (kernel and API
//! names, request tokens, step ids, call sites). Sharing one allocation per
//! distinct string makes creating, cloning and dropping a node free of heap
//! traffic. On disk it is a plain JSON string, and its schema is `String`'s.

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::{Borrow, Cow};
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SharedStr(Arc<str>);

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
        fmt::Display::fmt(&*self.0, f)
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for SharedStr {
    fn from(s: &str) -> Self {
        SharedStr(Arc::from(s))
    }
}

impl From<&SharedStr> for SharedStr {
    fn from(s: &SharedStr) -> Self {
        s.clone()
    }
}

impl From<&String> for SharedStr {
    fn from(s: &String) -> Self {
        SharedStr(Arc::from(s.as_str()))
    }
}

impl From<String> for SharedStr {
    fn from(s: String) -> Self {
        SharedStr(Arc::from(s))
    }
}

impl From<Box<str>> for SharedStr {
    fn from(s: Box<str>) -> Self {
        SharedStr(Arc::from(s))
    }
}

impl From<Arc<str>> for SharedStr {
    fn from(s: Arc<str>) -> Self {
        SharedStr(s)
    }
}

impl From<SharedStr> for String {
    fn from(s: SharedStr) -> Self {
        s.0.to_string()
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
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
            // One allocation straight from the parser's text (no String in between).
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SharedStr, E> {
                Ok(SharedStr::from(v))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<SharedStr, E> {
                Ok(SharedStr::from(v))
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
