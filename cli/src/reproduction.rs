//! `reproduction.json` counts only for the explanations it describes: `check --rerun`
//! records the sha256 of those it compared ([`explanations_sha256`]), and the site
//! and `check` take a reproduction into account only while the entry's explanations
//! are still those ([`reproduction_of`]); a hand-written one counts for none.

use crate::manifest::sha256_file;
use crate::Failure;
use ground_truth::submission::{Reproduction, REPRODUCTION_FILE};
use ground_truth::Readable;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// One digest of every regular file under `dir/explanations` (each file's sha256 by
/// its path inside the folder): what `check --rerun` compared, recorded in
/// `reproduction.json`, so that a reproduction of other explanations is ignored.
pub fn explanations_sha256(dir: &Path) -> String {
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut stack = vec![dir.join("explanations")];
    while let Some(at) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() => {
                    let name = path
                        .strip_prefix(dir)
                        .unwrap_or(&path)
                        .display()
                        .to_string();
                    files.insert(name, sha256_file(&path).unwrap_or_else(|e| e));
                }
                _ => {}
            }
        }
    }
    let mut h = Sha256::new();
    for (name, sha) in &files {
        h.update(format!("{name}\0{sha}\n").as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The entry's `reproduction.json` when `check --rerun` wrote it for the explanations
/// the entry holds now; `None` when there is none, or it describes other explanations
/// (edited since, or a file `check --rerun` never wrote).
pub fn reproduction_of(dir: &Path) -> Result<Option<Reproduction>, Failure> {
    let path = dir.join(REPRODUCTION_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let r = Reproduction::read(&path).map_err(|e| Failure::input(e.to_string()))?;
    Ok((r.explanations_sha256 == explanations_sha256(dir)).then_some(r))
}
