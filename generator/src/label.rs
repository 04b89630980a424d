//! Labels from the truth (docs/scenario-space.md, "Labels from the truth"): a
//! symptom's declared cause is checked against the ground truth of the run
//! that recorded it, on the backend that recorded it. The injected mechanism
//! must lie on the symptom's true critical path and the symptom must move
//! beyond the noise floor measured between two no-injection runs; otherwise
//! the case is relabelled `none` or dropped. Both backends call this module
//! once per run, after the symptom's answers are added.

use crate::keys::{symptom_key, target_key, Keys};
use crate::record::faults::FAULT_END_TOLERANCE_NS;
use ground_truth::graph::{EdgeType, GroundTruth, LabelCheck, LabelVerdict, NodeId, Symptom};
use ground_truth::labels::{CauseLabel, Question};
use ground_truth::scenario::InjectionKind;
use ground_truth::{Ns, Scenario};

/// A no-injection run as the label check needs it: its truth, the step each
/// node came from, and its time origin.
pub struct QuietRun<'a> {
    pub truth: &'a GroundTruth,
    pub keys: &'a Keys,
    pub origin: Ns,
}

/// How many times the drift seen between two quiet runs the lateness must
/// exceed: one pair of runs is one sample of the noise, and a margin of three
/// keeps a noise-only lateness below the floor in most runs.
pub const NOISE_MARGIN: f64 = 3.0;

/// The noise floor of a scenario's symptom (ns): [`NOISE_MARGIN`] times the
/// largest end-time drift between two no-injection runs over the nodes of
/// the symptom's true critical path in the first (the ops whose timing sets
/// the symptom's), and never below the clock granularity the truth trusts
/// (`FAULT_END_TOLERANCE_NS`).
pub fn noise_floor(sc: &Scenario, a: &QuietRun, b: &QuietRun) -> f64 {
    let granularity = FAULT_END_TOLERANCE_NS as f64;
    let Some(key) = symptom_key(sc) else {
        return granularity;
    };
    let Some(&symptom) = a.keys.get(&key) else {
        return granularity;
    };
    let on_path: std::collections::HashSet<NodeId> =
        a.truth.critical_path(symptom).into_iter().collect();
    let mut drift: f64 = 0.0;
    for (key, &na) in a.keys {
        if !on_path.contains(&na) {
            continue;
        }
        let Some(&nb) = b.keys.get(key) else { continue };
        let (Some(x), Some(y)) = (
            a.truth.nodes.get(na as usize),
            b.truth.nodes.get(nb as usize),
        ) else {
            continue;
        };
        let ea = x.end as f64 - a.origin as f64;
        let eb = y.end as f64 - b.origin as f64;
        drift = drift.max((ea - eb).abs());
    }
    (NOISE_MARGIN * drift).max(granularity)
}

/// Whether the scenario's label is a timing claim the check applies to (a
/// cause question about an injection that moves time); only then does a
/// backend run the second no-injection run the noise floor needs.
pub fn applies(sc: &Scenario) -> bool {
    sc.symptom.question == Question::Cause
        && sc
            .injection
            .as_ref()
            .is_some_and(|inj| inj.kind != InjectionKind::RecordLoss)
}

/// Checks the first symptom's declared cause against `truth` and applies the
/// verdict: the symptom's `cause` becomes the checked label (`none` when
/// relabelled) and its `label` says how it was decided.
pub fn check_and_apply(sc: &Scenario, truth: &mut GroundTruth, keys: &Keys, noise_floor_ns: f64) {
    let Some(symptom) = truth.symptoms.first() else {
        return;
    };
    let check = check(sc, truth, keys, symptom, noise_floor_ns);
    let symptom = &mut truth.symptoms[0];
    if check.verdict == LabelVerdict::RelabelledNone {
        symptom.cause = CauseLabel::None;
    }
    symptom.label = Some(check);
}

fn check(
    sc: &Scenario,
    truth: &GroundTruth,
    keys: &Keys,
    symptom: &Symptom,
    noise_floor_ns: f64,
) -> LabelCheck {
    let (lateness_ns, question, path) = (
        symptom.lateness_ns,
        symptom.question,
        &symptom.critical_path,
    );
    let declared = sc.cause;
    let verdict = |verdict, on_path, reason: String| LabelCheck {
        declared,
        verdict,
        noise_floor_ns,
        mechanism_on_path: on_path,
        reason,
    };
    let injection = match &sc.injection {
        Some(inj) if applies(sc) && question == Question::Cause => inj,
        _ => {
            return verdict(
                LabelVerdict::NotApplicable,
                None,
                "not a timing question: the label describes structure, not lateness".into(),
            )
        }
    };
    let on_path = mechanism_on_path(sc, truth, keys, injection.kind, path);
    let late = lateness_ns > noise_floor_ns;
    let (lateness_us, floor_us) = (lateness_ns / 1e3, noise_floor_ns / 1e3);
    if declared == CauseLabel::None {
        return if on_path {
            verdict(
                LabelVerdict::Dropped,
                Some(true),
                format!("declared `none`, but the injected work is on the symptom's true path ({lateness_us:.1} µs late)"),
            )
        } else {
            verdict(
                LabelVerdict::Kept,
                Some(false),
                format!("the injected work is off the symptom's true path ({lateness_us:.1} µs late, noise floor {floor_us:.1} µs)"),
            )
        };
    }
    match (late, on_path) {
        (false, _) => verdict(
            LabelVerdict::RelabelledNone,
            Some(on_path),
            format!("{lateness_us:.1} µs late, within the noise floor of {floor_us:.1} µs: the symptom is not late"),
        ),
        (true, true) => verdict(
            LabelVerdict::Kept,
            Some(true),
            format!("{lateness_us:.1} µs late (noise floor {floor_us:.1} µs) through the injected `{}` on the true path", injection.kind.as_str()),
        ),
        (true, false) => verdict(
            LabelVerdict::Dropped,
            Some(false),
            format!("{lateness_us:.1} µs late (noise floor {floor_us:.1} µs), but the injected `{}` is not on the true path", injection.kind.as_str()),
        ),
    }
}

/// Does the injected mechanism lie on the symptom's true critical path? What
/// "the mechanism" is depends on the injection (docs/scenario-space.md):
/// the injected fault or work that the truth attributes (`fault` edge source)
/// for host stalls, occupancy and PCIe contention; the lengthened target op,
/// followed on the path by the gate its label names, for the others.
fn mechanism_on_path(
    sc: &Scenario,
    truth: &GroundTruth,
    keys: &Keys,
    kind: InjectionKind,
    path: &[NodeId],
) -> bool {
    let fault_on_path = truth
        .injections
        .iter()
        .filter_map(|i| i.fault_node)
        .any(|f| path.contains(&f));
    // The target's nodes: its step's node, and for a graph launch the nodes
    // the launch ran (what a backlog ahead of the launch delays).
    let target = sc
        .injection
        .as_ref()
        .and_then(|inj| target_key(sc, inj.program.as_deref(), &inj.target, inj.request));
    let target_nodes: Vec<NodeId> = target
        .as_ref()
        .map(|key| {
            keys.iter()
                .filter(|(k, _)| {
                    k.program == key.program
                        && k.request == key.request
                        && k.step == key.step
                        && !k.api
                        && (k.graph_node == key.graph_node || key.graph_node.is_none())
                })
                .map(|(_, &n)| n)
                .collect()
        })
        .unwrap_or_default();
    // The target's own API call (the launch a host-side delay makes late).
    let target_call = target.clone().and_then(|mut key| {
        key.api = true;
        keys.get(&key).copied()
    });
    let position = |n: NodeId| path.iter().position(|&p| p == n);
    // The earliest of the target's nodes on the path.
    let target_at = target_nodes.iter().filter_map(|&n| position(n)).min();
    // The edge types met on the path after `from` (towards the symptom).
    let gates_after = |from: usize| -> Vec<EdgeType> {
        path[from..]
            .windows(2)
            .filter_map(|w| {
                truth
                    .edges
                    .iter()
                    .filter(|e| e.src == w[0] && e.dst == w[1])
                    .map(|e| e.kind)
                    .next()
            })
            .collect()
    };
    match kind {
        // The application's own host work grew: no fault node on the
        // simulator, so the late launch call itself is the mechanism.
        InjectionKind::HostDelay => {
            fault_on_path || target_call.is_some_and(|c| position(c).is_some())
        }
        InjectionKind::CpuDeschedule
        | InjectionKind::HostPageFaultMinor
        | InjectionKind::HostPageFaultMajor
        | InjectionKind::OccupancyPressure
        | InjectionKind::PcieContention
        | InjectionKind::UnrelatedWork => fault_on_path,
        InjectionKind::StreamBacklog => target_at.is_some_and(|i| {
            i > 0 && edge_kind(truth, path[i - 1], path[i]) == Some(EdgeType::StreamOrder)
        }),
        InjectionKind::EventWait => {
            target_at.is_some_and(|i| gates_after(i).contains(&EdgeType::Event))
        }
        InjectionKind::GraphDependency => {
            target_at.is_some_and(|i| gates_after(i).contains(&EdgeType::Graph))
        }
        // The lengthened op a blocking host call waits for: a `sync` edge
        // follows it on the way to the symptom, or the symptom is the copy
        // whose own call blocks (a readback behind it in its stream).
        InjectionKind::SyncWait => target_at.is_some_and(|i| {
            gates_after(i).contains(&EdgeType::Sync)
                || path.last().is_some_and(|&s| {
                    truth.nodes[s as usize].kind == ground_truth::graph::NodeKind::Memcpy
                })
        }),
        InjectionKind::DelayedMemcpy | InjectionKind::KernelSlowdown => target_at.is_some(),
        InjectionKind::RecordLoss => false,
    }
}

fn edge_kind(truth: &GroundTruth, src: NodeId, dst: NodeId) -> Option<EdgeType> {
    truth
        .edges
        .iter()
        .find(|e| e.src == src && e.dst == dst)
        .map(|e| e.kind)
}
