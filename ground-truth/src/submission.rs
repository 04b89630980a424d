//! A leaderboard submission (`causalbench submit`, `causalbench check`,
//! `baselines/PROTOCOL.md` "Getting onto the leaderboard"): one folder per entry,
//! described by its `metadata.json` ([`Submission`]); `check --rerun` writes
//! `reproduction.json` ([`Reproduction`]) beside it.

use crate::labels::Collectors;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Version of the submission formats; readers reject any other.
pub const SUBMISSION_SCHEMA_VERSION: u32 = 1;
/// The entry's description inside its folder.
pub const METADATA_FILE: &str = "metadata.json";
/// What `check --rerun` found, inside the entry's folder.
pub const REPRODUCTION_FILE: &str = "reproduction.json";

/// `metadata.json`: who the entry is, what ran, where, on what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    pub schema_version: u32,
    /// The profiler's name: its leaderboard row and `meta.profiler` of every explanation.
    pub name: String,
    /// The profiler's own version, as the submitter gives it.
    pub version: String,
    /// The command template that was run (`{view}`, `{out}`, baselines/PROTOCOL.md).
    pub command: String,
    /// Collectors whose views the profiler needs: it was run on exactly these views.
    pub collectors: Vec<Collectors>,
    /// The view labels (`ViewSpec::label`) explained for every bundle.
    pub views: Vec<String>,
    /// Where the submission was produced.
    pub machine: Machine,
    /// The causalbench version that produced and scored it.
    pub tool_version: String,
    /// How the profiler was confined (docs/integrity.md).
    pub isolation: String,
    /// The backend that recorded the bundles (`sim` or `cuda`).
    pub backend: String,
    /// The published split the bundles were recorded from.
    pub split: SplitDraw,
    /// Repetitions per scenario when given (else each scenario's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reps: Option<u32>,
    /// Every bundle the entry was scored on, by job key: its file in the folder and its sha256.
    pub bundles: BTreeMap<String, BundleFile>,
}

/// A generated split of the scenario space (docs/scenario-space.md, "Splits").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SplitDraw {
    /// `dev` or `test`.
    pub split: String,
    pub seed: u64,
    pub cases: usize,
    /// Whether the split is public material a profiler could have memorized
    /// (baselines/PROTOCOL.md, "Hidden splits"): the dev split, or a test split whose
    /// seed was given to `submit`. Only a test split whose seed `submit` drew itself,
    /// out of the profiler's reach, is hidden. An entry without it is public.
    #[serde(default = "public_unless_stated")]
    pub public: bool,
}

fn public_unless_stated() -> bool {
    true
}

/// A bundle file of the entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BundleFile {
    /// Relative to the entry's folder.
    pub path: PathBuf,
    /// Hex sha256 of the file's bytes.
    pub sha256: String,
}

/// The machine a submission or a reproduction ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    pub hostname: String,
    pub os: String,
    pub arch: String,
    pub cpu_model: String,
    pub cpus: usize,
}

/// `reproduction.json`: the outcome of `check --rerun`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reproduction {
    pub schema_version: u32,
    /// Every explanation the command wrote again equals the submitted one
    /// (`meta.wall_ms` aside).
    pub reproduced: bool,
    /// Explanations compared.
    pub compared: usize,
    /// The first explanation that differed, and how; absent when reproduced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_difference: Option<String>,
    pub machine: Machine,
    pub tool_version: String,
    /// One sha256 of the explanations compared (each file's sha256 by its path in
    /// the entry): a reproduction counts only for the explanations it describes.
    /// Absent in reproductions written before it was kept, which then count for none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub explanations_sha256: String,
}

fn version_problem(found: u32) -> Vec<(String, String)> {
    if found == SUBMISSION_SCHEMA_VERSION {
        return Vec::new();
    }
    vec![(
        "schema_version".into(),
        format!("expected schema_version {SUBMISSION_SCHEMA_VERSION}, found {found}"),
    )]
}

impl crate::Readable for Submission {
    const WHAT: &'static str = "submission metadata";
    fn problems(&self) -> Vec<(String, String)> {
        let mut out = version_problem(self.schema_version);
        if let Some(problem) = crate::identifier::identifier_problem(&self.name) {
            out.push(("name".into(), problem));
        }
        for (key, bundle) in &self.bundles {
            let relative = bundle.path.is_relative()
                && bundle
                    .path
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !relative {
                out.push((
                    format!("bundles.{key}.path"),
                    "expected a path inside the entry's folder".into(),
                ));
            }
        }
        out
    }
}

impl crate::Readable for Reproduction {
    const WHAT: &'static str = "reproduction record";
    fn problems(&self) -> Vec<(String, String)> {
        version_problem(self.schema_version)
    }
}
