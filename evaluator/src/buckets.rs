//! The buckets of the scenario space's axes (docs/scenario-space.md, "Axes"): the
//! documented bins of each numeric axis, a category as its own bucket, and the
//! headline's two magnitude classes.

use ground_truth::scenario::AxisValue;

/// The axis the acceptance headline filters on, and its threshold.
pub const HEADLINE_AXIS: &str = "magnitude_ratio";
pub const HEADLINE_THRESHOLD: f64 = 0.3;

/// One bucket of an axis: numeric bins in increasing order, then categories by name,
/// then `mixed` (a pair whose variants fall in different buckets).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bucket {
    rank: u32,
    pub label: String,
}

impl Bucket {
    pub fn mixed() -> Bucket {
        Bucket {
            rank: u32::MAX,
            label: "mixed".into(),
        }
    }
}

/// Bins of a numeric axis: (label, lowest value in the bin); a bin holds the values
/// from its lower bound up to the next bin's (exclusive).
type Bins = &'static [(&'static str, f64)];

/// Counts (depths, streams, handoffs, and any numeric axis not named below).
const COUNT_BINS: Bins = &[
    ("0", f64::NEG_INFINITY),
    ("1", 0.5),
    ("2", 1.5),
    ("3-4", 2.5),
    ("5-8", 4.5),
    ("9+", 8.5),
];
const REQUEST_BINS: Bins = &[
    ("0", f64::NEG_INFINITY),
    ("1", 0.5),
    ("2-3", 1.5),
    ("4-8", 3.5),
    ("9+", 8.5),
];
const GRAPH_BINS: Bins = &[
    ("0", f64::NEG_INFINITY),
    ("2-4", 0.5),
    ("5-8", 4.5),
    ("9-16", 8.5),
    ("17+", 16.5),
];
/// Injection magnitude / the symptom's normal latency.
const MAGNITUDE_BINS: Bins = &[
    ("<0.3", f64::NEG_INFINITY),
    ("0.3-1", 0.3),
    ("1-3", 1.0),
    (">=3", 3.0),
];
/// The headline's two classes (the acceptance threshold of issue 16).
const HEADLINE_BINS: Bins = &[("<0.3", f64::NEG_INFINITY), (">=0.3", HEADLINE_THRESHOLD)];

/// The bins of a numeric axis.
fn bins_of(axis: &str) -> Bins {
    match axis {
        "requests" => REQUEST_BINS,
        "graph_nodes" => GRAPH_BINS,
        "magnitude_ratio" => MAGNITUDE_BINS,
        _ => COUNT_BINS,
    }
}

fn bin(bins: Bins, value: &AxisValue) -> Option<Bucket> {
    match value {
        AxisValue::Number(x) if x.is_finite() => {
            let rank = bins.iter().rposition(|&(_, low)| *x >= low)?;
            Some(Bucket {
                rank: rank as u32,
                label: bins[rank].0.to_string(),
            })
        }
        // A number that is not finite says nothing about where the case sits.
        AxisValue::Number(_) => None,
        AxisValue::Category(c) => Some(Bucket {
            rank: bins.len() as u32,
            label: c.clone(),
        }),
    }
}

/// The bucket of one axis value (documented bins for numbers; a category is its own bucket).
pub fn bucket(axis: &str, value: &AxisValue) -> Option<Bucket> {
    bin(bins_of(axis), value)
}

/// The headline class of a `magnitude_ratio` value: `<0.3` or `>=0.3`.
pub(crate) fn headline_class(_axis: &str, value: &AxisValue) -> Option<Bucket> {
    bin(HEADLINE_BINS, value)
}
