//! The one rule for names that end up in file names (a scenario's `name`,
//! `family` and `variant` name its bundles, views and score files): an
//! identifier can never climb out of a directory, hide a file or pass for a
//! command-line option.

/// Longest identifier: file names on common file systems take 255 bytes,
/// and an identifier is combined with a key and extensions.
pub const MAX_IDENTIFIER_LEN: usize = 128;

/// Why `name` is not an identifier: 1 to [`MAX_IDENTIFIER_LEN`] ASCII
/// letters, digits, `_`, `-` and `.`, starting with a letter, a digit or `_`
/// (so never `.`, `..`, a hidden file or an option), without a `/`.
pub fn identifier_problem(name: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let problem = if name.is_empty() {
        "is empty".to_string()
    } else if name.len() > MAX_IDENTIFIER_LEN {
        format!("is {} bytes long, over {MAX_IDENTIFIER_LEN}", name.len())
    } else if let Some(c) = name.chars().find(|&c| !allowed(c)) {
        format!("contains {c:?}")
    } else if name.starts_with(['.', '-']) {
        format!("starts with {:?}", &name[..1])
    } else {
        return None;
    };
    Some(format!(
        "expected an identifier (ASCII letters, digits, `_`, `-`, `.`; starting with a \
         letter, digit or `_`; at most {MAX_IDENTIFIER_LEN} bytes): `{}` {problem}",
        crate::io::bounded_echo(name.to_string())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        for good in [
            "dependency-vs-overlap.event-edge",
            "a",
            "_x",
            "launch-bound-1000000",
        ] {
            assert_eq!(identifier_problem(good), None, "{good}");
        }
        for bad in [
            "", "../x", "a/b", "..", ".hidden", "-rf", "a b", "é", "a\\b", "x\0",
        ] {
            assert!(identifier_problem(bad).is_some(), "{bad:?}");
        }
        assert!(identifier_problem(&"a".repeat(MAX_IDENTIFIER_LEN + 1)).is_some());
    }
}
