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
use std::collections::HashSet;

/// The standard views `causalbench run` derives for every bundle.
pub fn standard_specs(loss_seed: u64) -> Vec<ViewSpec> {
    specs_for(&Collectors::ALL, loss_seed)
}

/// The standard views of `bundle`: a PyTorch-track bundle (backend `torch`,
/// docs/torch-track.md) has Kineto's records where the others have CUPTI's and
/// no host collector, so its views are the `kineto` ones.
pub fn standard_specs_of(bundle: &Bundle) -> Vec<ViewSpec> {
    if bundle.manifest.backend == "torch" {
        specs_for(&[Collectors::Kineto], bundle.manifest.seed)
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
    let truth = &bundle.ground_truth;
    // Loss never removes what a query may point at: the symptom's records and its launching call's.
    let protected: HashSet<Rid> = truth
        .symptoms
        .iter()
        .flat_map(|s| {
            let launch = truth
                .edges
                .iter()
                .filter(move |e| e.dst == s.node && e.kind == ground_truth::EdgeType::Launch)
                .map(|e| e.src);
            std::iter::once(s.node)
                .chain(launch)
                .flat_map(|n| truth.nodes[n as usize].rids.iter().copied())
        })
        .collect();
    let kept = |r: &Record| ViewSpec::keeps(spec.collectors, spec.mode, r);
    let removed: HashSet<Rid> = match spec.loss {
        LossSpec::None => HashSet::new(),
        LossSpec::Uniform { rate, seed } => bundle
            .trace
            .iter()
            .filter(|r| kept(r) && !protected.contains(&r.rid()))
            .filter(|r| unit(seed ^ r.rid().wrapping_mul(0x9E37_79B9_7F4A_7C15)) < rate)
            .map(|r| r.rid())
            .collect(),
        LossSpec::Targeted { seed } => targeted(bundle, truth, seed, &kept, &protected),
    };
    let records: Vec<Record> = bundle
        .trace
        .iter()
        .filter(|r| kept(r) && !removed.contains(&r.rid()))
        .cloned()
        .collect();
    let kept_rids: HashSet<Rid> = records.iter().map(|r| r.rid()).collect();
    let queries = truth
        .symptoms
        .iter()
        .filter_map(|s| {
            Some(Query {
                id: s.id.clone(),
                rid: query_rid(truth, s, &kept_rids)?,
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

/// The record a view asks about: the symptom's own record when the view has it;
/// otherwise (a host-only view cannot see device activity) the record of the
/// call that launched it, which is as close as that collector gets.
fn query_rid(truth: &GroundTruth, s: &ground_truth::Symptom, kept: &HashSet<Rid>) -> Option<Rid> {
    if kept.contains(&s.rid) {
        return Some(s.rid);
    }
    let own = truth.nodes[s.node as usize]
        .rids
        .iter()
        .copied()
        .find(|r| kept.contains(r));
    own.or_else(|| {
        let parent = truth
            .edges
            .iter()
            .find(|e| e.dst == s.node && e.kind == ground_truth::EdgeType::Launch)?
            .src;
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
    bundle: &Bundle,
    truth: &GroundTruth,
    seed: u64,
    kept: &dyn Fn(&Record) -> bool,
    protected: &HashSet<Rid>,
) -> HashSet<Rid> {
    let visible: HashSet<Rid> = bundle
        .trace
        .iter()
        .filter(|r| kept(r))
        .map(|r| r.rid())
        .collect();
    let mut out = HashSet::new();
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
