//! The compact encoding of large bundles and views (docs/records.md, "Compact
//! encoding"): an 8-byte header — the magic `CBCOMPCT` — a format version byte, then
//! the value as MessagePack (`rmp-serde`, structs as maps keyed by field name, so
//! it carries exactly the fields, defaults and tags of the JSON). JSON stays the
//! interchange; this encoding only saves a process that reads a large case again
//! the text parsing. Readers recognize it by its header whatever the file's name.

use super::FormatError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::Path;

/// The first bytes of a compact file.
pub const COMPACT_MAGIC: &[u8; 8] = b"CBCOMPCT";
/// The version of the compact encoding written after the magic.
pub const COMPACT_VERSION: u8 = 1;
/// File-name ending that writers take as "write the compact encoding".
pub const COMPACT_SUFFIX: &str = ".msgpack";

/// Whether `bytes` start with the compact encoding's header.
pub fn is_compact(bytes: &[u8]) -> bool {
    bytes.starts_with(COMPACT_MAGIC)
}

/// Whether a writer should use the compact encoding for `file` (its name ends in
/// [`COMPACT_SUFFIX`]).
pub fn wants_compact(file: &Path) -> bool {
    file.to_string_lossy().ends_with(COMPACT_SUFFIX)
}

/// `value` in the compact encoding, header included.
pub fn to_compact<T: Serialize + ?Sized>(value: &T) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(1 << 16);
    out.extend_from_slice(COMPACT_MAGIC);
    out.push(COMPACT_VERSION);
    rmp_serde::encode::write_named(&mut out, value).map_err(std::io::Error::other)?;
    Ok(out)
}

/// Decodes compact `bytes` read from `file`; a wrong version or a bad body is a
/// [`FormatError`] naming the file.
pub fn from_compact<T: DeserializeOwned>(file: &Path, bytes: &[u8]) -> Result<T, FormatError> {
    let body = bytes
        .strip_prefix(COMPACT_MAGIC.as_slice())
        .ok_or_else(|| {
            FormatError::new(file, "", "not the compact encoding (no CBCOMPCT header)")
        })?;
    match body.first() {
        Some(&COMPACT_VERSION) => {}
        Some(v) => {
            return Err(FormatError::new(
                file,
                "",
                format!("compact encoding version {v}; this build reads version {COMPACT_VERSION}"),
            ))
        }
        None => {
            return Err(FormatError::new(
                file,
                "",
                "compact encoding cut after its magic",
            ))
        }
    }
    let mut de = rmp_serde::Deserializer::new(std::io::Cursor::new(&body[1..]));
    let value = T::deserialize(&mut de).map_err(|e| {
        FormatError::new(
            file,
            "",
            super::bounded_echo(format!("bad compact encoding: {e}")),
        )
    })?;
    let rest = &body[1..][de.position() as usize..];
    if !rest.is_empty() {
        return Err(FormatError::new(
            file,
            "",
            format!("{} bytes after the compact value", rest.len()),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::tests::{big_bundle, small_bundle_and_view};
    use crate::io::Readable;
    use crate::{Bundle, TraceView};

    #[test]
    fn bundles_and_views_read_back_the_same_from_either_encoding() {
        let bundle = big_bundle();
        let bytes = to_compact(&bundle).unwrap();
        assert!(is_compact(&bytes));
        let back: Bundle = from_compact(Path::new("b.msgpack"), &bytes).unwrap();
        assert!(back == bundle);
        let json = serde_json::to_vec(&bundle).unwrap();
        assert!(
            bytes.len() < json.len(),
            "{} vs {} bytes",
            bytes.len(),
            json.len()
        );
        // Through the reader, by content (the header), and checked like JSON.
        let (small, view) = small_bundle_and_view();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("v.view.msgpack");
        view.write(&file).unwrap();
        assert!(is_compact(&std::fs::read(&file).unwrap()));
        assert!(TraceView::read(&file).unwrap() == view);
        let named_json = dir.path().join("b.bundle.json");
        std::fs::write(&named_json, to_compact(&small).unwrap()).unwrap();
        assert_eq!(
            Bundle::read(&named_json).unwrap_err(),
            Bundle::parse(&named_json, &serde_json::to_vec(&small).unwrap()).unwrap_err(),
            "the same semantic check whatever the encoding"
        );
    }

    #[test]
    fn bad_compact_input_is_an_error_naming_the_file() {
        let (_, view) = small_bundle_and_view();
        let bytes = to_compact(&view).unwrap();
        let file = Path::new("v.msgpack");
        let mut other_version = bytes.clone();
        other_version[COMPACT_MAGIC.len()] = COMPACT_VERSION + 1;
        let err = from_compact::<TraceView>(file, &other_version).unwrap_err();
        assert!(err.message.contains("version"), "{err}");
        let cut = from_compact::<TraceView>(file, &bytes[..bytes.len() / 2]).unwrap_err();
        assert!(cut.to_string().starts_with("v.msgpack"), "{cut}");
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(from_compact::<TraceView>(file, &longer).is_err());
        assert!(from_compact::<TraceView>(file, COMPACT_MAGIC).is_err());
    }
}
