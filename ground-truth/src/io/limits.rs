//! The one input-size policy of every reader (README "Limits"): how large a
//! file may be, how far a gzip stream may expand, how deeply a value may nest,
//! and how much of a bad value an error message may echo. A reader refuses
//! input past a limit with a [`FormatError`] naming the limit, before it holds
//! more than the limit in memory.

use super::FormatError;
use std::io::Read;
use std::ops::Deref;
use std::path::Path;

/// Deepest nesting of arrays and objects (JSON) or sequences, mappings and flow
/// collections (YAML) a reader accepts. It is the depth at which the JSON and
/// YAML parsers stop recursing; no format of this project nests past 10.
pub const MAX_NESTING: usize = 128;

/// Characters of a value an error message quotes before it is cut short.
pub const MAX_ECHO_CHARS: usize = 200;

/// How large an input a reader accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputLimits {
    /// The largest input in bytes, as stored and, for a gzip file, once
    /// decompressed.
    pub max_bytes: u64,
    /// How many times its compressed size a gzip stream may expand. The
    /// recorded corpus compresses about 7×, the most repetitive bundles about
    /// 20×; only a crafted stream reaches 1000×.
    pub max_expansion: u64,
}

impl InputLimits {
    /// The limits of every reader unless a caller sets its own: bundles of a
    /// million operations are about a gigabyte.
    pub const DEFAULT: InputLimits = InputLimits {
        max_bytes: 4 << 30,
        max_expansion: 100,
    };

    /// These limits with a smaller largest input (never a larger one).
    pub fn at_most(self, max_bytes: u64) -> InputLimits {
        InputLimits {
            max_bytes: self.max_bytes.min(max_bytes),
            ..self
        }
    }

    fn too_large(&self, file: &Path, what: &str, found: &str) -> FormatError {
        FormatError::new(
            file,
            "",
            format!(
                "{what} is {found}, over the input limit of {} bytes",
                self.max_bytes
            ),
        )
    }
}

/// The first two bytes of every gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Files from this size on are parsed from a memory map: copying a gigabyte
/// bundle into memory first cost 0.7 s and as much memory as the file.
pub(super) const MAP_FROM_BYTES: u64 = 64 << 20;

/// The bytes of an input: a map of a large plain file, or a copy in memory.
pub enum InputBytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for InputBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            InputBytes::Mapped(map) => map,
            InputBytes::Owned(bytes) => bytes,
        }
    }
}

/// The content of `file` (decompressed when it is a gzip stream, recognized
/// by its magic bytes), or an error naming the file and the limit it passes.
/// `what` names the format in messages.
pub fn read_input(
    file: &Path,
    what: &str,
    limits: &InputLimits,
) -> Result<InputBytes, FormatError> {
    let cannot_read =
        |e: std::io::Error| FormatError::new(file, "", format!("cannot read {what}: {e}"));
    let f = std::fs::File::open(file).map_err(cannot_read)?;
    let meta = f.metadata().map_err(cannot_read)?;
    if meta.is_file() && meta.len() > limits.max_bytes {
        return Err(limits.too_large(file, what, &format!("{} bytes", meta.len())));
    }
    let bytes = if meta.is_file() && meta.len() >= MAP_FROM_BYTES {
        // SAFETY: the map is read-only and lives only while this read parses it.
        // Our writers replace files by rename, never in place; a file truncated by
        // another program while it is parsed is outside what a reader can defend.
        let map = unsafe { memmap2::Mmap::map(&f) }.map_err(cannot_read)?;
        if !map.starts_with(&GZIP_MAGIC) {
            return Ok(InputBytes::Mapped(map));
        }
        map.to_vec()
    } else {
        // Not a regular file (a pipe, a device): read no more than the limit.
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        f.take(limits.max_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(cannot_read)?;
        if bytes.len() as u64 > limits.max_bytes {
            return Err(limits.too_large(file, what, "longer"));
        }
        bytes
    };
    gunzip_if_compressed(file, what, bytes, limits).map(InputBytes::Owned)
}

/// `bytes`, decompressed when they are a gzip stream, never past the limits.
fn gunzip_if_compressed(
    file: &Path,
    what: &str,
    bytes: Vec<u8>,
    limits: &InputLimits,
) -> Result<Vec<u8>, FormatError> {
    if !bytes.starts_with(&GZIP_MAGIC) {
        return Ok(bytes);
    }
    let by_expansion = (bytes.len() as u64).saturating_mul(limits.max_expansion);
    let cap = limits.max_bytes.min(by_expansion);
    let mut out = Vec::with_capacity(bytes.len().saturating_mul(8).min(cap as usize));
    flate2::read::MultiGzDecoder::new(&bytes[..])
        .take(cap + 1)
        .read_to_end(&mut out)
        .map_err(|e| FormatError::new(file, "", format!("expected a complete gzip stream: {e}")))?;
    if out.len() as u64 > cap {
        let message = if cap == limits.max_bytes {
            format!(
                "gzip-compressed {what} expands past the input limit of {} bytes",
                limits.max_bytes
            )
        } else {
            format!(
                "gzip-compressed {what} of {} bytes expands more than {}× (past {cap} bytes), \
                 the limit of a gzip stream's expansion",
                bytes.len(),
                limits.max_expansion
            )
        };
        return Err(FormatError::new(file, "", message));
    }
    Ok(out)
}

/// `message` with whatever it quotes cut to [`MAX_ECHO_CHARS`]: a wrong-typed
/// value of a hundred megabytes is not echoed whole. The end of the message,
/// which says what was expected, is kept.
pub fn bounded_echo(message: String) -> String {
    const KEEP_END: usize = 100;
    let chars = message.chars().count();
    if chars <= MAX_ECHO_CHARS + KEEP_END + 40 {
        return message;
    }
    let head: String = message.chars().take(MAX_ECHO_CHARS).collect();
    let tail: String = message.chars().skip(chars - KEEP_END).collect();
    format!(
        "{head}… ({} characters left out) …{tail}",
        chars - MAX_ECHO_CHARS - KEEP_END
    )
}

/// The error for input nested past [`MAX_NESTING`].
pub(super) fn nesting_message() -> String {
    format!("values nest deeper than {MAX_NESTING} levels, the nesting limit of every reader")
}

/// Whether a parser's message says it stopped at its recursion limit (which
/// is [`MAX_NESTING`]).
pub(super) fn is_recursion_limit(message: &str) -> bool {
    message.contains("recursion limit exceeded")
}

/// The line at which YAML `text` may open a flow collection (`[`, `{`) past
/// [`MAX_NESTING`] levels. The YAML parser takes time quadratic in the flow
/// depth (a 400 KB file of `[`: minutes), so this linear scan runs first.
/// Block nesting costs the parser nothing extra and stops at its recursion
/// limit. The scan can only count too deep, never too shallow: every `[` and
/// `{` counts, in quotes and comments too, and only a `]` or `}` outside them
/// closes one. A file it refuses needs more than the limit of brackets unclosed.
pub(super) fn yaml_flow_too_deep(text: &str) -> Option<usize> {
    scan_flow(text).err()
}

/// [`yaml_flow_too_deep`]'s scan: `Err(line)` past the limit.
fn scan_flow(text: &str) -> Result<(), usize> {
    let mut scan = FlowScan { depth: 0, line: 1 };
    // The character just before, and whether a value may start here (a quote
    // elsewhere is part of a plain scalar and opens nothing).
    let mut previous = '\n';
    let mut value_start = true;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                scan.line += 1;
                value_start = true;
            }
            ' ' | '\t' => value_start |= matches!(previous, ':' | '-' | '?'),
            '#' if matches!(previous, '\n' | ' ' | '\t') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                    scan.may_open(c)?;
                }
                scan.line += 1;
                previous = '\n';
                value_start = true;
                continue;
            }
            '"' | '\'' if value_start || previous == ':' => {
                let mut escaped = false;
                for q in chars.by_ref() {
                    scan.may_open(q)?;
                    if c == '"' && q == '\\' && !escaped {
                        escaped = true;
                        continue;
                    }
                    // A doubled `''` inside a single-quoted scalar closes and
                    // reopens it: the same for this scan.
                    if q == c && !escaped {
                        break;
                    }
                    escaped = false;
                }
                value_start = false;
            }
            '[' | '{' => {
                scan.may_open(c)?;
                value_start = true;
            }
            ',' => value_start = true,
            ']' | '}' => {
                scan.depth = scan.depth.saturating_sub(1);
                value_start = false;
            }
            _ => value_start = false,
        }
        previous = c;
    }
    Ok(())
}

/// The state of [`scan_flow`].
struct FlowScan {
    depth: usize,
    line: usize,
}

impl FlowScan {
    /// Counts `c` when it opens a collection; `Err(line)` past the limit.
    fn may_open(&mut self, c: char) -> Result<(), usize> {
        if c == '\n' {
            self.line += 1;
        }
        if matches!(c, '[' | '{') {
            self.depth += 1;
            if self.depth > MAX_NESTING {
                return Err(self.line);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_depth_is_never_undercounted() {
        let open = |n: usize| "[".repeat(n);
        let close = |n: usize| "]".repeat(n);
        let deep = open(MAX_NESTING + 1);
        assert_eq!(yaml_flow_too_deep(&format!("a: 1\nb: {deep}")), Some(2));
        assert_eq!(yaml_flow_too_deep(&"[]".repeat(10 * MAX_NESTING)), None);
        // Brackets in quotes and comments may open, never close.
        for closing in [
            format!("\"{}\"", close(100)),
            format!("'{}'", close(100)),
            format!("# {}\n", close(100)),
        ] {
            let text = format!("a: {} {closing} {}", open(100), open(100));
            assert!(yaml_flow_too_deep(&text).is_some(), "{text}");
        }
        // A quote inside a word opens nothing: its brackets close.
        let text = format!("a: {}don't{}\nb: {}", open(100), close(100), open(100));
        assert_eq!(yaml_flow_too_deep(&text), None);
    }

    #[test]
    fn long_messages_keep_their_start_and_end() {
        let value = "x".repeat(10_000);
        let message = bounded_echo(format!("invalid type: string \"{value}\", expected u64"));
        assert!(message.len() < 400, "{message}");
        assert!(message.starts_with("invalid type: string \"xxx"));
        assert!(message.ends_with("\", expected u64"));
        assert!(message.contains("characters left out"));
        assert_eq!(bounded_echo("short".into()), "short");
    }
}
