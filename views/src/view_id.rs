//! Opaque view ids (`docs/integrity.md`): a view names its bundle by a keyed
//! hash, so that nobody without the key can tell which scenario and repetition
//! it came from, though the names of both are public. `causalbench run` keeps
//! one random key per results directory, where external profilers cannot read
//! it; everything else draws a random key per process.

use sha2::{Digest, Sha256};
use std::sync::OnceLock;

/// The secret that makes view ids unguessable.
#[derive(Clone, PartialEq, Eq)]
pub struct ViewKey([u8; 32]);

impl std::fmt::Debug for ViewKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A key printed in a log is a key given away.
        f.write_str("ViewKey(..)")
    }
}

impl ViewKey {
    /// A fresh key from the operating system's random source.
    pub fn random() -> ViewKey {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the operating system's random source works");
        ViewKey(key)
    }

    /// This process's key, drawn on first use.
    pub fn process() -> &'static ViewKey {
        static KEY: OnceLock<ViewKey> = OnceLock::new();
        KEY.get_or_init(ViewKey::random)
    }

    /// The key as 64 lowercase hex digits (for its file).
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// Reads [`ViewKey::to_hex`]'s text (surrounding whitespace allowed).
    pub fn from_hex(text: &str) -> Result<ViewKey, String> {
        let t = text.trim();
        if t.len() != 64 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "expected 64 hex digits, found {} characters",
                t.len()
            ));
        }
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).expect("checked hex");
        }
        Ok(ViewKey(key))
    }

    /// The opaque id of the bundle `bundle_id` (`Bundle::id()`) under this key.
    pub fn view_id(&self, bundle_id: &str) -> String {
        let mut h = Sha256::new();
        h.update(b"causalbench view id\0");
        h.update(self.0);
        h.update(bundle_id.as_bytes());
        hex(&h.finalize()[..16])
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_not_derivable_without_the_key() {
        let id = "stream_backlog_vs_event_wait.backlog.r0";
        let (a, b) = (ViewKey::random(), ViewKey::random());
        // Issue 15's attack on the old fixed hash is replayed end to end in `cli/tests/isolation.rs`.
        let plain = Sha256::digest(id.as_bytes());
        assert_ne!(a.view_id(id), hex(&plain[..16]));
        assert_ne!(a.view_id(id), b.view_id(id), "the key decides the id");
        assert_eq!(a.view_id(id), a.view_id(id));
        assert_ne!(
            a.view_id(id),
            a.view_id("stream_backlog_vs_event_wait.backlog.r1")
        );
    }

    #[test]
    fn keys_round_trip_through_hex() {
        let k = ViewKey::random();
        assert_eq!(ViewKey::from_hex(&format!("{}\n", k.to_hex())).unwrap(), k);
        assert!(ViewKey::from_hex("abc").is_err());
        assert!(!format!("{k:?}").contains(&k.to_hex()));
    }
}
