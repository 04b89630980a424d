//! The megakernel scenarios (`megakernel/catalog/*.yaml`), embedded.

use ground_truth::megakernel::MkScenario;
use ground_truth::{FormatError, Readable};
use std::path::Path;

/// (file name, YAML) of every shipped megakernel scenario.
pub const CATALOG: &[(&str, &str)] = &[
    (
        "mk-exec-vs-notify.slow-class.yaml",
        include_str!("../catalog/mk-exec-vs-notify.slow-class.yaml"),
    ),
    (
        "mk-exec-vs-notify.late-notify.yaml",
        include_str!("../catalog/mk-exec-vs-notify.late-notify.yaml"),
    ),
    (
        "mk-skew-vs-slow-class.skewed.yaml",
        include_str!("../catalog/mk-skew-vs-slow-class.skewed.yaml"),
    ),
    (
        "mk-skew-vs-slow-class.slow-class.yaml",
        include_str!("../catalog/mk-skew-vs-slow-class.slow-class.yaml"),
    ),
    (
        "mk-burst-vs-starve.oversubscribed.yaml",
        include_str!("../catalog/mk-burst-vs-starve.oversubscribed.yaml"),
    ),
    (
        "mk-burst-vs-starve.starved.yaml",
        include_str!("../catalog/mk-burst-vs-starve.starved.yaml"),
    ),
    (
        "mk-notify-vs-starve.late-notify.yaml",
        include_str!("../catalog/mk-notify-vs-starve.late-notify.yaml"),
    ),
    (
        "mk-notify-vs-starve.starved.yaml",
        include_str!("../catalog/mk-notify-vs-starve.starved.yaml"),
    ),
];

/// Every shipped scenario, parsed and checked.
pub fn load() -> Result<Vec<MkScenario>, FormatError> {
    CATALOG
        .iter()
        .map(|(f, y)| MkScenario::parse(&Path::new("megakernel/catalog").join(f), y.as_bytes()))
        .collect()
}

/// Scenarios grouped by family, in catalog order.
pub fn families(all: &[MkScenario]) -> Vec<(String, Vec<MkScenario>)> {
    let mut out: Vec<(String, Vec<MkScenario>)> = Vec::new();
    for s in all {
        match out.iter_mut().find(|(f, _)| *f == s.family) {
            Some((_, v)) => v.push(s.clone()),
            None => out.push((s.family.clone(), vec![s.clone()])),
        }
    }
    out
}

/// Reads every `*.yaml` of a directory.
pub fn load_dir(dir: &Path) -> Result<Vec<MkScenario>, FormatError> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| FormatError::new(dir, "", format!("cannot read directory: {e}")))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files.iter().map(|f| MkScenario::read(f)).collect()
}
