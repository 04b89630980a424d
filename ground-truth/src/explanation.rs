//! Explanation (docs/design.md): a profiler's reconstructed graph and answers,
//! written against the rids of the view it was given.

use crate::graph::{EdgeType, Phases};
use crate::labels::{CauseLabel, Evidence};
use crate::shared_str::SharedStr;
use crate::trace::Rid;
use crate::view::{TraceView, ViewSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimedEdge {
    pub src: Rid,
    pub dst: Rid,
    #[serde(rename = "type")]
    pub kind: EdgeType,
    pub evidence: Evidence,
    /// In [0, 1].
    pub confidence: f64,
}

/// `request: None` (written as `"unknown"`) means the profiler abstains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Attribution {
    pub rid: Rid,
    /// Request token, or `"unknown"` to abstain.
    // Shared: a profiler attributes millions of records to a few thousand requests.
    pub request: SharedStr,
}

impl Attribution {
    pub const UNKNOWN: &'static str = "unknown";

    /// [`Attribution::UNKNOWN`] as a request: one allocation for every record so attributed.
    pub fn unknown_request() -> SharedStr {
        static UNKNOWN: std::sync::LazyLock<SharedStr> =
            std::sync::LazyLock::new(|| SharedStr::from(Attribution::UNKNOWN));
        UNKNOWN.clone()
    }
    pub fn is_unknown(&self) -> bool {
        self.request == Self::UNKNOWN
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RankedCause {
    pub label: CauseLabel,
    pub score: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Diagnosis {
    /// The view query answered.
    pub query: String,
    /// Best first.
    pub causes: Vec<RankedCause>,
    /// Claimed critical path, root first, ending at the queried record.
    #[serde(default)]
    pub critical_path: Vec<Rid>,
    #[serde(default)]
    pub phases: Phases,
    /// Whether the profiler claims to have resolved the whole path.
    pub complete: bool,
    /// When incomplete: the record whose gating predecessor is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_unresolved: Option<Rid>,
    /// Answer to call-site / operator questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplanationMeta {
    pub profiler: String,
    pub version: String,
    pub view: ViewSpec,
    /// Wall time the analysis took, in milliseconds.
    pub wall_ms: f64,
    /// Set when the analyzer failed on this view (a third-party tool raised): its
    /// message. Such an explanation claims nothing, and the evaluator counts the case
    /// as crashed, with this message, beside its scores (evaluator/METRICS.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Explanation {
    pub schema_version: u32,
    pub meta: ExplanationMeta,
    #[serde(default)]
    pub edges: Vec<ClaimedEdge>,
    #[serde(default)]
    pub attribution: Vec<Attribution>,
    #[serde(default)]
    pub diagnoses: Vec<Diagnosis>,
}

impl Explanation {
    /// The first thing that makes this explanation no answer to `view`, as
    /// (JSON path, message): written for another view, answering a query the
    /// view does not ask, or naming a record the view does not contain
    /// (`docs/design.md`: an explanation is written against the rids of the
    /// view it was given).
    pub fn problem_against(&self, view: &TraceView) -> Option<(String, String)> {
        if self.meta.view != view.spec {
            return Some((
                "meta.view".to_string(),
                format!(
                    "explanation is for view `{}`, but it was given view `{}`",
                    self.meta.view.label(),
                    view.spec.label()
                ),
            ));
        }
        let queries: HashSet<&str> = view.queries.iter().map(|q| q.id.as_str()).collect();
        if let Some((i, d)) = self
            .diagnoses
            .iter()
            .enumerate()
            .find(|(_, d)| !queries.contains(d.query.as_str()))
        {
            return Some((
                format!("diagnoses[{i}].query"),
                format!("the view has no query `{}`", d.query),
            ));
        }
        let rids: HashSet<Rid> = view.records.iter().map(|r| r.rid()).collect();
        let named =
            self.edges
                .iter()
                .enumerate()
                .flat_map(|(i, e)| {
                    [
                        (format!("edges[{i}].src"), e.src),
                        (format!("edges[{i}].dst"), e.dst),
                    ]
                })
                .chain(
                    self.attribution
                        .iter()
                        .enumerate()
                        .map(|(i, a)| (format!("attribution[{i}].rid"), a.rid)),
                )
                .chain(self.diagnoses.iter().enumerate().flat_map(|(i, d)| {
                    let path =
                        d.critical_path.iter().enumerate().map(move |(j, rid)| {
                            (format!("diagnoses[{i}].critical_path[{j}]"), *rid)
                        });
                    let unresolved = d
                        .first_unresolved
                        .map(|rid| (format!("diagnoses[{i}].first_unresolved"), rid));
                    path.chain(unresolved)
                }));
        named
            .into_iter()
            .find(|(_, rid)| !rids.contains(rid))
            .map(|(path, rid)| (path, format!("rid {rid} is not a record of this view")))
    }
}
