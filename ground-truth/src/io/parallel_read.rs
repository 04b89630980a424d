//! Parsing a large bundle or view on every core.
//!
//! serde_json parses about 200 MB/s on one core, so a gigabyte bundle spent
//! five seconds parsing, nearly all of it in the trace, node and edge arrays.
//! Here one serial pass (serde_json skipping values, which is several times
//! faster than building them) borrows each element of those arrays as its raw
//! text, and worker threads parse the elements.
//!
//! It accepts exactly what the derived `Deserialize` of [`Bundle`] and
//! [`TraceView`] accepts and gives the same value: each frame below has the same
//! fields, defaults and unknown-field rule as its type, and every element is
//! parsed by the element type's own `Deserialize`. Where it is unsure it declines:
//! `None` sends the caller to the tracked parser, which also names the place of
//! any error. A frame that drifts from the types therefore costs speed, never
//! correctness, and a test holds the two in step.

use crate::bundle::{LossAccounting, Manifest};
use crate::graph::{InjectionRecord, Symptom};
use crate::view::{Query, ViewSpec};
use crate::{Bundle, GroundTruth, TraceView};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::value::RawValue;

/// Elements per worker below which threads cost more than they save.
const MIN_PER_WORKER: usize = 64 * 1024;

/// `Bundle` with its three large arrays left as raw element texts.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BundleFrame<'a> {
    schema_version: u32,
    manifest: Manifest,
    #[serde(borrow)]
    ground_truth: TruthFrame<'a>,
    #[serde(borrow)]
    trace: Vec<&'a RawValue>,
    loss: LossAccounting,
}

/// `GroundTruth` with its node and edge arrays left as raw element texts.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TruthFrame<'a> {
    #[serde(borrow)]
    nodes: Vec<&'a RawValue>,
    #[serde(borrow)]
    edges: Vec<&'a RawValue>,
    symptoms: Vec<Symptom>,
    #[serde(default)]
    injections: Vec<InjectionRecord>,
}

/// The bundle in `bytes`, parsed with its large arrays spread over the cores;
/// `None` when anything about it is not a well-formed bundle.
pub(super) fn parse_bundle(bytes: &[u8]) -> Option<Bundle> {
    let frame: BundleFrame = serde_json::from_slice(bytes).ok()?;
    let workers = workers();
    let truth = frame.ground_truth;
    Some(Bundle {
        schema_version: frame.schema_version,
        manifest: frame.manifest,
        ground_truth: GroundTruth {
            nodes: parse_elements(&truth.nodes, workers)?,
            edges: parse_elements(&truth.edges, workers)?,
            symptoms: truth.symptoms,
            injections: truth.injections,
        },
        trace: parse_elements(&frame.trace, workers)?,
        loss: frame.loss,
    })
}

/// `TraceView` with its record array left as raw element texts.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ViewFrame<'a> {
    schema_version: u32,
    bundle: String,
    spec: ViewSpec,
    queries: Vec<Query>,
    collector_loss: LossAccounting,
    #[serde(borrow)]
    records: Vec<&'a RawValue>,
}

/// The view in `bytes`, parsed with its records spread over the cores; `None`
/// when anything about it is not a well-formed view.
pub(super) fn parse_view(bytes: &[u8]) -> Option<TraceView> {
    let frame: ViewFrame = serde_json::from_slice(bytes).ok()?;
    Some(TraceView {
        schema_version: frame.schema_version,
        bundle: frame.bundle,
        spec: frame.spec,
        queries: frame.queries,
        collector_loss: frame.collector_loss,
        records: parse_elements(&frame.records, workers())?,
    })
}

fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Each raw element parsed as a `T`, in order, on up to `workers` threads.
fn parse_elements<T: DeserializeOwned + Send>(raw: &[&RawValue], workers: usize) -> Option<Vec<T>> {
    let workers = workers.min(raw.len() / MIN_PER_WORKER).max(1);
    if workers == 1 {
        return parse_serially(raw);
    }
    let per_worker = raw.len().div_ceil(workers);
    std::thread::scope(|scope| {
        let parts: Vec<_> = raw
            .chunks(per_worker)
            .map(|part| scope.spawn(move || parse_serially::<T>(part)))
            .collect();
        let mut out = Vec::with_capacity(raw.len());
        for part in parts {
            out.extend(part.join().ok()??);
        }
        Some(out)
    })
}

fn parse_serially<T: DeserializeOwned>(raw: &[&RawValue]) -> Option<Vec<T>> {
    raw.iter()
        .map(|element| serde_json::from_str(element.get()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_keep_their_order_across_workers() {
        let n = 5 * MIN_PER_WORKER + 17;
        let text = serde_json::to_string(&(0..n as u64).collect::<Vec<_>>()).unwrap();
        let raw: Vec<&RawValue> = serde_json::from_str(&text).unwrap();
        for workers in [1, 2, 3, 8] {
            let parsed: Vec<u64> = parse_elements(&raw, workers).unwrap();
            assert_eq!(
                parsed,
                (0..n as u64).collect::<Vec<_>>(),
                "{workers} workers"
            );
        }
    }

    #[test]
    fn one_bad_element_declines_the_whole_array() {
        let n = 4 * MIN_PER_WORKER;
        let mut items: Vec<serde_json::Value> = (0..n as u64).map(Into::into).collect();
        items[3 * MIN_PER_WORKER + 5] = "not a number".into();
        let text = serde_json::to_string(&items).unwrap();
        let raw: Vec<&RawValue> = serde_json::from_str(&text).unwrap();
        assert!(parse_elements::<u64>(&raw, 4).is_none());
        assert!(parse_elements::<u64>(&raw, 1).is_none());
    }
}
