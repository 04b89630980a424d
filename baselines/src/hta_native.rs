//! `hta-critical-path` on Kineto's own trace (docs/torch-track.md, "HTA on Kineto's
//! native trace"): on a `kineto` view of a torch bundle, HTA reads the trace file
//! torch.profiler wrote beside the bundle (`ID.kineto.json.gz` next to
//! `ID.bundle.json.gz`), never an export of the view. This module finds that file
//! and says which of its events are which of the view's records, so HTA's answer,
//! given in the trace's events, becomes an explanation in the view's rids.
//!
//! The join is Kineto's correlation id, which the bundle's records keep
//! (docs/torch-track.md, "Kineto's records in the bundle"): a runtime or driver
//! call is the view's `api` record of the same correlation id and name, a kernel,
//! copy or memset the view's device record of the same kind and correlation id
//! (one graph launch's kernels share theirs: they pair in start order, names
//! equal), a `cuda_sync` event the view's `sync` record of its correlation id.
//! Events of the trace the bundle does not keep (the executor's time stamps, the
//! framework's own calls, Python functions) have no rid: HTA's graph may pass
//! through them, an explanation never names them.

use ground_truth::trace::Record;
use ground_truth::view::LossSpec;
use ground_truth::{Collectors, TraceView, ViewSpec};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The native Kineto trace recorded beside a bundle file, when there is one:
/// `X.bundle.json[.gz]` → `X.kineto.json.gz`, else `X.kineto.json`.
pub fn native_trace_beside(bundle: &Path) -> Option<PathBuf> {
    let name = bundle.file_name()?.to_str()?;
    let stem = name
        .strip_suffix(".bundle.json.gz")
        .or_else(|| name.strip_suffix(".bundle.json"))?;
    [".kineto.json.gz", ".kineto.json"]
        .iter()
        .map(|suffix| bundle.with_file_name(format!("{stem}{suffix}")))
        .find(|p| p.is_file())
}

/// Whether HTA reads this view from the native trace: `kineto` views without
/// synthetic loss. The native file is what Kineto wrote; removing a record from it
/// would be the synthetic loss the views already apply, and HTA answering a lossy
/// view from the whole file would claim what the view does not hold.
pub fn reads_natively(spec: &ViewSpec) -> bool {
    spec.collectors == Collectors::Kineto && matches!(spec.loss, LossSpec::None)
}

/// What a record or a trace event is, for the join: the class and the correlation id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Class {
    Call,
    Kernel,
    Memcpy,
    Memset,
    Sync,
}

/// Members of one join group, in start order: (start, name where it must match,
/// rid of a view record or traceEvents index of an event).
type Group<'a, T> = Vec<(i64, Option<&'a str>, T)>;

/// The view's record of each trace event that has one: traceEvents index → rid.
pub fn rids_of_events(trace: &kineto::Activities, view: &TraceView) -> BTreeMap<usize, u64> {
    // (class, correlation) → the view's records, in start order, with their names.
    let mut records: HashMap<(Class, u64), Group<u64>> = HashMap::new();
    for r in &view.records {
        let (class, correlation, start, name) = match r {
            Record::Api {
                correlation_id,
                start,
                name,
                ..
            } => (Class::Call, correlation_id, start, Some(&**name)),
            Record::Kernel {
                correlation_id,
                start,
                detail,
                ..
            } => (Class::Kernel, correlation_id, start, Some(&*detail.name)),
            Record::Memcpy {
                correlation_id,
                start,
                ..
            } => (Class::Memcpy, correlation_id, start, None),
            Record::Memset {
                correlation_id,
                start,
                ..
            } => (Class::Memset, correlation_id, start, None),
            Record::Sync {
                correlation_id,
                start,
                ..
            } => (Class::Sync, correlation_id, start, None),
            _ => continue,
        };
        records
            .entry((class, u64::from(*correlation)))
            .or_default()
            .push((*start as i64, name, r.rid()));
    }
    let mut events: HashMap<(Class, u64), Group<usize>> = HashMap::new();
    for c in &trace.calls {
        events
            .entry((Class::Call, c.correlation))
            .or_default()
            .push((c.start, Some(&c.name), c.index));
    }
    for d in &trace.device {
        let class = match d.kind {
            kineto::DeviceKind::Kernel => Class::Kernel,
            kineto::DeviceKind::Memcpy => Class::Memcpy,
            kineto::DeviceKind::Memset => Class::Memset,
        };
        let name = (class == Class::Kernel).then_some(d.name.as_str());
        events
            .entry((class, d.correlation))
            .or_default()
            .push((d.start, name, d.index));
    }
    for s in &trace.syncs {
        events
            .entry((Class::Sync, s.correlation))
            .or_default()
            .push((s.start, None, s.index));
    }
    let mut rids = BTreeMap::new();
    for (key, mut recs) in records {
        let Some(evs) = events.get_mut(&key) else {
            continue;
        };
        recs.sort_unstable();
        evs.sort_unstable();
        // The bundle keeps a subset of the trace's events of one correlation (never
        // more): each record takes the next event of its name, in start order.
        let mut next = 0;
        for (_, name, rid) in recs {
            while next < evs.len() && name.is_some() && evs[next].1 != name {
                next += 1;
            }
            let Some(&(_, _, index)) = evs.get(next) else {
                break;
            };
            rids.insert(index, rid);
            next += 1;
        }
    }
    rids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_native_trace_is_the_bundles_twin_file() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("a.r0.bundle.json.gz");
        assert_eq!(native_trace_beside(&bundle), None);
        std::fs::write(dir.path().join("a.r0.kineto.json"), "{}").unwrap();
        assert_eq!(
            native_trace_beside(&bundle),
            Some(dir.path().join("a.r0.kineto.json"))
        );
        std::fs::write(dir.path().join("a.r0.kineto.json.gz"), "").unwrap();
        assert_eq!(
            native_trace_beside(&bundle),
            Some(dir.path().join("a.r0.kineto.json.gz"))
        );
        assert_eq!(
            native_trace_beside(&dir.path().join("a.r0.view.json")),
            None
        );
    }
}
