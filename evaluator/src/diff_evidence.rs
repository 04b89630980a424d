//! What differs between two recordings of the same case, record by record
//! kind: which kinds are present, which optional fields are provided, and how
//! long the records last. A verdict that flipped between two result sets is
//! explained by these differences of the bundles it was scored on.

use ground_truth::{Bundle, Record};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A median duration moves "in timing" when it changes by more than this
/// fraction and by more than [`TIMING_MIN_NS`].
pub const TIMING_FRACTION: f64 = 0.25;
pub const TIMING_MIN_NS: f64 = 2_000.0;

/// One record kind of one bundle.
#[derive(Debug, Clone, Default, PartialEq)]
struct KindEvidence {
    count: u64,
    /// Optional fields (0 = "not provided", docs/records.md) → records providing them.
    provided: BTreeMap<&'static str, u64>,
    durations: Vec<u64>,
}

/// The record evidence of one bundle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    kinds: BTreeMap<&'static str, KindEvidence>,
    lost: u64,
}

/// What the optional fields of a record provide.
fn optional_fields(r: &Record) -> Vec<(&'static str, bool)> {
    match r {
        Record::Kernel {
            queued, submitted, ..
        } => vec![("queued", *queued > 0), ("submitted", *submitted > 0)],
        Record::Memcpy {
            queued, submitted, ..
        } => vec![("queued", *queued > 0), ("submitted", *submitted > 0)],
        Record::Sync {
            event_sync_id,
            event,
            ..
        } => vec![("event_sync_id", *event_sync_id > 0), ("event", *event > 0)],
        Record::CudaEvent {
            ts, event_sync_id, ..
        } => vec![("ts", *ts > 0), ("event_sync_id", *event_sync_id > 0)],
        _ => vec![],
    }
}

impl Evidence {
    pub fn of(bundle: &Bundle) -> Evidence {
        let mut kinds: BTreeMap<&'static str, KindEvidence> = BTreeMap::new();
        for r in &bundle.trace {
            let k = kinds.entry(r.kind_name()).or_default();
            k.count += 1;
            for (field, provided) in optional_fields(r) {
                *k.provided.entry(field).or_default() += provided as u64;
            }
            let (start, end) = r.interval();
            if end > start {
                k.durations.push(end - start);
            }
        }
        Evidence {
            kinds,
            lost: bundle.loss.total(),
        }
    }
}

/// How a record kind or field differs between two bundles.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Records of a kind appear on one side only, or in other numbers.
    Presence,
    /// A field is provided by a different number of records.
    Value,
    /// The median duration of a kind moved.
    Timing,
}

/// One difference in the records of a case between two result sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordChange {
    /// A record kind (`cuda_event`), a field (`sync.event_sync_id`), or
    /// `loss` for the bundle's loss accounting.
    pub what: String,
    pub change: ChangeKind,
    pub before: String,
    pub after: String,
}

impl RecordChange {
    /// The change without its counts, the same for every bundle it happens
    /// in: what summaries count.
    pub fn key(&self) -> String {
        let gone = self.after.starts_with("0 ") || self.after.starts_with("provided by 0 ");
        let came = self.before.starts_with("0 ") || self.before.starts_with("provided by 0 ");
        let how = match self.change {
            ChangeKind::Presence if gone => "vanishes",
            ChangeKind::Presence if came => "appears",
            ChangeKind::Presence => "count changes",
            ChangeKind::Value if gone => "no longer provided",
            ChangeKind::Value => "now provided",
            ChangeKind::Timing => "duration moves",
        };
        format!("{} {how}", self.what)
    }
}

impl std::fmt::Display for RecordChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = match self.change {
            ChangeKind::Presence => "presence",
            ChangeKind::Value => "value",
            ChangeKind::Timing => "timing",
        };
        write!(f, "{} {} → {} ({how})", self.what, self.before, self.after)
    }
}

fn median(v: &[u64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    Some(s[s.len() / 2] as f64)
}

/// The differences from `a` to `b`, most telling first: presence, then
/// values, then timing.
pub fn changes(a: &Evidence, b: &Evidence) -> Vec<RecordChange> {
    let mut out = Vec::new();
    let none = KindEvidence::default();
    let names: std::collections::BTreeSet<&str> =
        a.kinds.keys().chain(b.kinds.keys()).copied().collect();
    for name in names {
        let (x, y) = (
            a.kinds.get(name).unwrap_or(&none),
            b.kinds.get(name).unwrap_or(&none),
        );
        // CUPTI records one per operation: their number is the evidence. Host
        // records (scheduler switches, faults) vary from run to run: only a
        // kind appearing or vanishing counts.
        let per_op = matches!(
            name,
            "api" | "kernel" | "memcpy" | "memset" | "sync" | "cuda_event" | "external_correlation"
        );
        if (per_op && x.count != y.count) || ((x.count == 0) != (y.count == 0)) {
            out.push(RecordChange {
                what: name.to_string(),
                change: ChangeKind::Presence,
                before: format!("{} records", x.count),
                after: format!("{} records", y.count),
            });
        }
        let fields: std::collections::BTreeSet<&str> = x
            .provided
            .keys()
            .chain(y.provided.keys())
            .copied()
            .collect();
        for field in fields {
            let (p, q) = (
                x.provided.get(field).copied().unwrap_or(0),
                y.provided.get(field).copied().unwrap_or(0),
            );
            // Only where the field's presence itself changed, not merely the
            // number of records carrying it.
            if (p == 0) != (q == 0) {
                out.push(RecordChange {
                    what: format!("{name}.{field}"),
                    change: ChangeKind::Value,
                    before: format!("provided by {p} of {}", x.count),
                    after: format!("provided by {q} of {}", y.count),
                });
            }
        }
        if let (Some(p), Some(q)) = (median(&x.durations), median(&y.durations)) {
            let moved = (q - p).abs();
            if moved > TIMING_MIN_NS && moved > TIMING_FRACTION * p.max(q) {
                out.push(RecordChange {
                    what: name.to_string(),
                    change: ChangeKind::Timing,
                    before: format!("median {:.1} µs", p / 1000.0),
                    after: format!("median {:.1} µs", q / 1000.0),
                });
            }
        }
    }
    if a.lost != b.lost {
        out.push(RecordChange {
            what: "loss".into(),
            change: ChangeKind::Presence,
            before: format!("{} records lost or unobservable", a.lost),
            after: format!("{} records lost or unobservable", b.lost),
        });
    }
    out.sort_by_key(|c| c.change);
    out
}
