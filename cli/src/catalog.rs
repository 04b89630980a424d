//! Scenario suites: the embedded catalog, or a directory of YAML files.

use anyhow::Result;
use ground_truth::io::{FormatError, Readable};
use ground_truth::Scenario;
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/catalog.rs"));

/// Name of the embedded suite.
pub const DEFAULT_SUITE: &str = "catalog";

/// A generated split of the scenario space: which, drawn from which seed, how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitDraw {
    pub split: scenario_space::Split,
    pub seed: u64,
    pub cases: usize,
}

/// The generated split `suite` names (`dev`, `test`), if it names one: the dev
/// split's seed is fixed, the test split's is `test_seed` or a fresh draw.
pub fn split_draw(suite: &str, cases: Option<usize>, test_seed: Option<u64>) -> Option<SplitDraw> {
    let split = scenario_space::Split::parse(suite)?;
    let seed = match split {
        scenario_space::Split::Dev => scenario_space::DEV_SEED,
        scenario_space::Split::Test => test_seed.unwrap_or_else(rand::random),
    };
    Some(SplitDraw {
        split,
        seed,
        cases: cases.unwrap_or(scenario_space::DEFAULT_CASES),
    })
}

/// The scenarios of a generated split, saying on stderr which split was drawn
/// from which seed (what reproduces it).
pub fn load_split(draw: SplitDraw) -> Vec<Scenario> {
    eprintln!(
        "causalbench: the {} split, seed {}, {} scenarios",
        draw.split.as_str(),
        draw.seed,
        draw.cases
    );
    scenario_space::generate(draw.split, draw.seed, draw.cases)
}

/// Loads a suite: `catalog` (embedded), a generated split (`dev`, or `test` from a
/// fresh seed; `cases` scenarios, default `scenario_space::DEFAULT_CASES`), or a
/// directory of scenario files.
pub fn load_suite(suite: &str, cases: Option<usize>) -> Result<Vec<Scenario>, FormatError> {
    if let Some(draw) = split_draw(suite, cases, None) {
        return Ok(load_split(draw));
    }
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
