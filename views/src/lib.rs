//! Derives trace views from run bundles (docs/design.md): which collectors' records a
//! profiler sees, whether application identity is present, and seeded
//! synthetic loss. The view carries no answers; the records it removed are
//! returned to the caller (the evaluator re-derives them from the bundle and
//! the spec, never from the view).
//!
//! Architecture invariant: depends only on `ground-truth`; a view is a pure,
//! deterministic function of (bundle, spec, view key); the key only decides the
//! opaque id that names the bundle ([`view_id`]).

pub mod view_id;
pub use view_id::ViewKey;

use ground_truth::graph::{GroundTruth, NodeId};
use ground_truth::seed::{mix, unit};
use ground_truth::trace::{Record, Rid};
use ground_truth::view::{LossSpec, Query, TraceView, ViewSpec};
use ground_truth::{Bundle, Collectors, LossAccounting, Mode, SCHEMA_VERSION};
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

/// The standard views `causalbench run` derives for every bundle.
pub fn standard_specs(loss_seed: u64) -> Vec<ViewSpec> {
    specs_for(&Collectors::ALL, loss_seed)
}

/// The standard views of `bundle`: a PyTorch-track bundle (backend `torch`,
/// docs/torch-track.md) has Kineto's records where the others have CUPTI's and
/// no host collector, so its views are the `kineto` ones.
pub fn standard_specs_of(bundle: &Bundle) -> Vec<ViewSpec> {
    if bundle.manifest.backend == "torch" {
        // kineto+host only where the eBPF host recorder ran beside Kineto.
        let host = bundle
            .trace
            .iter()
            .any(|r| r.source() == ground_truth::trace::Source::Ebpf);
        let collectors: &[Collectors] = if host {
            &[Collectors::Kineto, Collectors::KinetoHost]
        } else {
            &[Collectors::Kineto]
        };
        specs_for(collectors, bundle.manifest.seed)
    } else {
        standard_specs(bundle.manifest.seed)
    }
}

fn specs_for(collectors: &[Collectors], loss_seed: u64) -> Vec<ViewSpec> {
    let mut specs = Vec::new();
    for &collectors in collectors {
        for mode in [Mode::Instrumented, Mode::Closed] {
            specs.push(ViewSpec {
                collectors,
                mode,
                loss: LossSpec::None,
            });
            for rate in [0.01, 0.05, 0.20] {
                specs.push(ViewSpec {
                    collectors,
                    mode,
                    loss: LossSpec::Uniform {
                        rate,
                        seed: loss_seed,
                    },
                });
            }
            specs.push(ViewSpec {
                collectors,
                mode,
                loss: LossSpec::Targeted { seed: loss_seed },
            });
        }
    }
    specs
}

/// A derived view and the rids synthetic loss removed from it.
pub struct Derived {
    pub view: TraceView,
    pub removed: Vec<Rid>,
}

/// Derives the view `spec` of `bundle`, named under this process's random key.
pub fn derive(bundle: &Bundle, spec: ViewSpec) -> Derived {
    derive_with_key(bundle, spec, ViewKey::process())
}

/// Derives the view `spec` of `bundle`, named by `key`'s opaque id of the bundle.
pub fn derive_with_key(bundle: &Bundle, spec: ViewSpec, key: &ViewKey) -> Derived {
    let removed = lost(bundle, &bundle.trace, spec);
    let records: Vec<Record> = bundle
        .trace
        .iter()
        .filter(|r| in_view(spec, &removed, r))
        .cloned()
        .collect();
    finish(bundle, spec, key, records, removed)
}

/// [`derive_with_key`] for a caller done with the bundle's records: they move into the
/// view instead of being copied, and `bundle.trace` is left empty, so one process holds
/// a large case's records once (`causalbench measure large`). The same view.
pub fn derive_taking_trace(bundle: &mut Bundle, spec: ViewSpec, key: &ViewKey) -> Derived {
    let trace = std::mem::take(&mut bundle.trace);
    let removed = lost(bundle, &trace, spec);
    let records: Vec<Record> = trace
        .into_iter()
        .filter(|r| in_view(spec, &removed, r))
        .collect();
    finish(bundle, spec, key, records, removed)
}

/// Whether record `r` of the bundle is in the view: its collectors and mode keep it
/// and synthetic loss did not remove it.
fn in_view(spec: ViewSpec, removed: &RidSet, r: &Record) -> bool {
    ViewSpec::keeps(spec.collectors, spec.mode, r) && !removed.contains(&r.rid())
}

/// The rids synthetic loss removes from the view `spec` of the bundle's records `trace`.
fn lost(bundle: &Bundle, trace: &[Record], spec: ViewSpec) -> RidSet {
    let truth = &bundle.ground_truth;
    let launchers = launching_calls(truth);
    // Loss never removes what a query may point at: the symptom's records and its launching call's.
    let protected: RidSet = truth
        .symptoms
        .iter()
        .flat_map(|s| {
            std::iter::once(s.node)
                .chain(launchers.get(&s.node).into_iter().flatten().copied())
                .flat_map(|n| truth.nodes[n as usize].rids.iter().copied())
        })
        .collect();
    let kept = |r: &Record| ViewSpec::keeps(spec.collectors, spec.mode, r);
    match spec.loss {
        LossSpec::None => RidSet::default(),
        LossSpec::Uniform { rate, seed } => trace
            .iter()
            .filter(|r| kept(r) && !protected.contains(&r.rid()))
            .filter(|r| unit(seed ^ r.rid().wrapping_mul(0x9E37_79B9_7F4A_7C15)) < rate)
            .map(|r| r.rid())
            .collect(),
        LossSpec::Targeted { seed } => targeted(trace, truth, seed, &kept, &protected),
    }
}

/// The view of `records` (the bundle's records that are in it): its queries, loss
/// accounting and opaque id.
fn finish(
    bundle: &Bundle,
    spec: ViewSpec,
    key: &ViewKey,
    records: Vec<Record>,
    removed: RidSet,
) -> Derived {
    let truth = &bundle.ground_truth;
    let launchers = launching_calls(truth);
    // Only the rids a query may point at are looked up in the view.
    let asked: RidSet = truth
        .symptoms
        .iter()
        .flat_map(|s| {
            let nodes = std::iter::once(s.node)
                .chain(launchers.get(&s.node).into_iter().flatten().copied());
            std::iter::once(s.rid)
                .chain(nodes.flat_map(|n| truth.nodes[n as usize].rids.iter().copied()))
        })
        .collect();
    let kept_rids = present(records.iter(), &asked);
    let queries = truth
        .symptoms
        .iter()
        .filter_map(|s| {
            Some(Query {
                id: s.id.clone(),
                rid: query_rid(truth, &launchers, s, &kept_rids)?,
                question: s.question,
            })
        })
        .collect();
    let l = bundle.loss;
    let collector_loss = LossAccounting {
        cupti_dropped: if spec.collectors != Collectors::Host {
            l.cupti_dropped
        } else {
            0
        },
        cupti_timestamps_dropped: if spec.collectors != Collectors::Host {
            l.cupti_timestamps_dropped
        } else {
            0
        },
        ringbuffer_dropped: if spec.collectors.keeps_host_records() {
            l.ringbuffer_dropped
        } else {
            0
        },
        cupti_unobservable: if spec.collectors != Collectors::Host {
            l.cupti_unobservable
        } else {
            0
        },
    };
    let mut removed: Vec<Rid> = removed.into_iter().collect();
    removed.sort_unstable();
    Derived {
        view: TraceView {
            schema_version: SCHEMA_VERSION,
            bundle: key.view_id(&bundle.id()),
            spec,
            queries,
            collector_loss,
            records,
        },
        removed,
    }
}

/// Sets of rids: small integers chosen by the recorder, so a fast hasher.
type RidSet = HashSet<Rid, BuildHasherDefault<rustc_hash::FxHasher>>;

/// The launching calls of each symptom's node (the sources of its `launch` edges, in
/// edge order), found in one pass over the edges.
fn launching_calls(truth: &GroundTruth) -> HashMap<NodeId, Vec<NodeId>> {
    let symptom_nodes: HashSet<NodeId> = truth.symptoms.iter().map(|s| s.node).collect();
    let mut out: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
    for e in &truth.edges {
        if e.kind == ground_truth::EdgeType::Launch && symptom_nodes.contains(&e.dst) {
            out.entry(e.dst).or_default().push(e.src);
        }
    }
    out
}

/// Which of the rids `asked` belong to one of `records`.
fn present<'a>(records: impl Iterator<Item = &'a Record>, asked: &RidSet) -> RidSet {
    records
        .map(|r| r.rid())
        .filter(|rid| asked.contains(rid))
        .collect()
}

/// The record a view asks about: the symptom's own record when the view has it;
/// otherwise (a host-only view cannot see device activity) the record of the
/// call that launched it, which is as close as that collector gets.
fn query_rid(
    truth: &GroundTruth,
    launchers: &HashMap<NodeId, Vec<NodeId>>,
    s: &ground_truth::Symptom,
    kept: &RidSet,
) -> Option<Rid> {
    if kept.contains(&s.rid) {
        return Some(s.rid);
    }
    let own = truth.nodes[s.node as usize]
        .rids
        .iter()
        .copied()
        .find(|r| kept.contains(r));
    own.or_else(|| {
        let parent = *launchers.get(&s.node)?.first()?;
        truth.nodes[parent as usize]
            .rids
            .iter()
            .copied()
            .find(|r| kept.contains(r))
    })
}

/// Targeted loss: for each symptom, one record on its true critical path whose
/// removal hides a node (a node seen through one record only), chosen by seed.
fn targeted(
    trace: &[Record],
    truth: &GroundTruth,
    seed: u64,
    kept: &dyn Fn(&Record) -> bool,
    protected: &RidSet,
) -> RidSet {
    let on_paths: RidSet = truth
        .symptoms
        .iter()
        .flat_map(|s| s.critical_path.iter())
        .flat_map(|&n| truth.nodes[n as usize].rids.iter().copied())
        .collect();
    let visible = present(trace.iter().filter(|r| kept(r)), &on_paths);
    let mut out = RidSet::default();
    for (i, s) in truth.symptoms.iter().enumerate() {
        let path: Vec<NodeId> = s
            .critical_path
            .iter()
            .copied()
            .filter(|&n| n != s.node)
            .collect();
        let seen = |n: NodeId| -> Vec<Rid> {
            truth.nodes[n as usize]
                .rids
                .iter()
                .copied()
                .filter(|r| visible.contains(r) && !protected.contains(r))
                .collect()
        };
        let single: Vec<Rid> = path
            .iter()
            .filter_map(|&n| match seen(n).as_slice() {
                [only] => Some(*only),
                _ => None,
            })
            .collect();
        let pool: Vec<Rid> = if single.is_empty() {
            path.iter().flat_map(|&n| seen(n)).collect()
        } else {
            single
        };
        if !pool.is_empty() {
            let pick = (mix(seed ^ (i as u64 + 1)) % pool.len() as u64) as usize;
            out.insert(pool[pick]);
        }
    }
    out
}

/// Whether `view` is exactly what [`derive`] makes of `bundle` for the view's
/// own spec, whatever key named it: how a view is matched to its bundle without
/// trusting the id it carries.
pub fn derived_from(view: &TraceView, bundle: &Bundle) -> bool {
    let d = derive_with_key(bundle, view.spec, ViewKey::process()).view;
    d.records == view.records
        && d.queries == view.queries
        && d.collector_loss == view.collector_loss
        && d.schema_version == view.schema_version
}
