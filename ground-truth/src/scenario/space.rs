//! Where a generated scenario sits in the scenario space (docs/scenario-space.md).
//! Hand-written catalog scenarios have none. The point travels in the bundle's
//! manifest (never in a view), so the evaluator can group a family instance's
//! variants into one pair and break scores down per axis.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A generated scenario's split, family instance and sampled axes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpacePoint {
    /// `dev` (fixed seeds, shipped) or `test` (a fresh seed per run).
    pub suite: String,
    /// The family instance: every variant sampled from one structure shares it,
    /// and only they form a pair.
    pub instance: u64,
    /// The sampled value of each axis, by axis name (docs/scenario-space.md).
    pub axes: BTreeMap<String, AxisValue>,
}

/// One axis value: a number (depth, count, ratio) or a category (`none`, `clean`, `polluted`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum AxisValue {
    Number(f64),
    Category(String),
}

impl AxisValue {
    pub fn as_number(&self) -> Option<f64> {
        match self {
            AxisValue::Number(n) => Some(*n),
            AxisValue::Category(_) => None,
        }
    }
}

impl std::fmt::Display for AxisValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AxisValue::Number(n) => write!(f, "{n}"),
            AxisValue::Category(c) => f.write_str(c),
        }
    }
}
