//! The reference's diagnosis names every threshold and weight it uses
//! (`src/causal_graph/thresholds.rs`): its diagnosis files hold no bare numeric
//! literal but 0, 1 and 2 (counts, indices, identities), outside comments and
//! strings. A tuple field (`x.1`) is no literal.

use baselines::causal_graph::thresholds::DIAGNOSIS_FILES;
use std::path::PathBuf;

/// Numeric literals allowed outside the table, as written without `_` and type suffix.
const ALLOWED: &[&str] = &["0", "1", "2", "0.0", "1.0"];

/// The source with comments and the contents of string and char literals blanked
/// (lines kept, so line numbers stay).
fn code_only(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                out.push('"');
                let mut escaped = false;
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                    }
                    if escaped {
                        escaped = false;
                    } else if n == '\\' {
                        escaped = true;
                    } else if n == '"' {
                        break;
                    }
                }
                out.push('"');
            }
            _ => out.push(c),
        }
    }
    out
}

/// (line, literal) of every numeric literal of `code` not in [`ALLOWED`].
fn bare_numbers(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i] as char;
            let prev = i.checked_sub(1).map(|j| bytes[j] as char);
            let starts = c.is_ascii_digit()
                && !prev.is_some_and(|p| p.is_ascii_alphanumeric() || p == '_' || p == '.');
            if !starts {
                // Skip the rest of an identifier or a tuple field.
                i += 1;
                continue;
            }
            let mut j = i;
            while j < bytes.len() {
                let d = bytes[j] as char;
                let exponent_sign = (d == '-' || d == '+')
                    && j > i
                    && matches!(bytes[j - 1] as char, 'e' | 'E')
                    && !line[i..j].starts_with("0x");
                let fraction = d == '.'
                    && bytes.get(j + 1).is_some_and(|b| b.is_ascii_digit())
                    && !line[i..j].contains('.');
                if d.is_ascii_alphanumeric() || d == '_' || exponent_sign || fraction {
                    j += 1;
                } else {
                    break;
                }
            }
            let literal = &line[i..j];
            let value = strip_suffix(literal).replace('_', "");
            if !ALLOWED.contains(&value.as_str()) {
                found.push((n + 1, literal.to_string()));
            }
            i = j;
        }
    }
    found
}

/// A literal without its type suffix (`u32`, `f64`, `usize`...).
fn strip_suffix(literal: &str) -> &str {
    for suffix in [
        "usize", "isize", "u128", "i128", "u64", "i64", "u32", "i32", "u16", "i16", "u8", "i8",
        "f64", "f32",
    ] {
        if let Some(v) = literal.strip_suffix(suffix) {
            return v.trim_end_matches('_');
        }
    }
    literal
}

#[test]
fn the_diagnosis_names_every_threshold() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/causal_graph");
    let mut bare = Vec::new();
    for file in DIAGNOSIS_FILES {
        let source = std::fs::read_to_string(dir.join(file)).unwrap();
        // Unit tests beside the code may use numbers freely.
        let code = code_only(source.split("#[cfg(test)]").next().unwrap_or(""));
        for (line, literal) in bare_numbers(&code) {
            bare.push(format!("src/causal_graph/{file}:{line}: {literal}"));
        }
    }
    assert!(
        bare.is_empty(),
        "numeric literals outside src/causal_graph/thresholds.rs (name them there, with \
         value, unit, why and where measured):\n{}",
        bare.join("\n")
    );
}

#[test]
fn the_scan_finds_literals_and_skips_the_rest() {
    let code = code_only(
        "let a = x.1 + 0.25 * y; // 0.3 in a comment\nlet b = \"12\"; let c = 20_000.0f64 + f64::MAX + u64 + 2 + 1e-9 + 0x10 + 3u32;",
    );
    let found: Vec<String> = bare_numbers(&code).into_iter().map(|x| x.1).collect();
    assert_eq!(found, ["0.25", "20_000.0f64", "1e-9", "0x10", "3u32"]);
}
