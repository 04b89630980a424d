//! Scenario suites: the embedded catalog, or a directory of YAML files.

use anyhow::Result;
use ground_truth::io::{FormatError, Readable};
use ground_truth::Scenario;
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/catalog.rs"));

/// Name of the embedded suite.
pub const DEFAULT_SUITE: &str = "catalog";

/// Loads a suite: `catalog` (embedded) or a directory of scenario files.
pub fn load_suite(suite: &str) -> Result<Vec<Scenario>, FormatError> {
    if suite == DEFAULT_SUITE {
        return CATALOG
            .iter()
            .map(|(name, text)| {
                Scenario::parse(&PathBuf::from(format!("catalog/{name}")), text.as_bytes())
            })
            .collect();
    }
    let dir = Path::new(suite);
    let entries = std::fs::read_dir(dir).map_err(|e| {
        FormatError::new(dir, "", format!("`{suite}` is neither the embedded suite `{DEFAULT_SUITE}` nor a readable directory: {e}"))
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        out.push(Scenario::read(&f)?);
    }
    let mut names = std::collections::HashSet::new();
    for s in &out {
        if !names.insert(s.name.clone()) {
            return Err(FormatError::new(
                dir,
                ".name",
                format!("two scenarios are named `{}`", s.name),
            ));
        }
    }
    Ok(out)
}
