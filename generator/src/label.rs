//! Labels from the truth (docs/scenario-space.md, "Labels from the truth"): a
//! symptom's declared cause is checked against the ground truth of the run
//! that recorded it, on the backend that recorded it. The injected mechanism
//! must lie on the symptom's true critical path and the symptom must move
//! beyond the noise floor measured between two no-injection runs; otherwise
//! the case is relabelled `none` or dropped. Both backends call this module
//! once per run, after the symptom's answers are added.

use crate::keys::{symptom_key, target_key, Keys, StepKey};
use crate::record::faults::FAULT_END_TOLERANCE_NS;
use ground_truth::graph::{EdgeType, GroundTruth, LabelCheck, LabelVerdict, NodeId, Symptom};
use ground_truth::labels::{CauseLabel, Question};
use ground_truth::scenario::{Injection, InjectionKind};
use ground_truth::{Ns, Scenario};

/// A no-injection run as the label check needs it: its truth, the step each
/// node came from, and its time origin.
pub struct QuietRun<'a> {
    pub truth: &'a GroundTruth,
    pub keys: &'a Keys,
    pub origin: Ns,
}

impl<'a> QuietRun<'a> {
    /// A run as the label check reads it: the truth its builder holds, the
    /// step each node came from, its time origin.
    pub fn of(builder: &'a crate::record::RunBuilder, keys: &'a Keys, origin: Ns) -> Self {
        QuietRun {
            truth: &builder.truth,
            keys,
            origin,
        }
    }
}

/// How many times the drift seen between two quiet runs the lateness must
/// exceed: one pair of runs is one sample of the noise, and a margin of three
/// keeps a noise-only lateness below the floor in most runs.
pub const NOISE_MARGIN: f64 = 3.0;

/// How many times the quiet runs' drift an injection on the symptom's path must
/// exceed before a symptom that moved by no more than that drift is `none`: the
/// injected run and its twin each carry noise up to the drift, so a symptom the
/// injection moved by up to twice the drift can read as not late.
pub const RESOLVABLE: f64 = 2.0;

/// The share of a symptom's lateness a CPU deschedule's measured off-CPU
/// time must cover for the deschedule to be its cause.
pub const DESCHEDULE_SHARE: f64 = 0.5;

/// How many times the noise floor measured before the injected run an
/// injection is sized to at least ([`sized_injection`]): a move through the
/// injected mechanism then clears the floor with the same margin again, and
/// the injection is more than [`RESOLVABLE`] times the drift.
pub const SIZE_MARGIN: f64 = 2.0;

/// The injection a backend runs (docs/scenario-space.md, "Cases that survive
/// the noise"): the scenario's, with its magnitude raised to [`SIZE_MARGIN`]
/// times the noise floor the twin and the quiet run measure on the symptom's
/// true path in the twin (from the onset anchor the twin gives), when the
/// asked magnitude is smaller. On a noisy host an injection under the floor
/// moves the symptom by no more than the quiet runs drift and leaves the case
/// indeterminate or relabelled; sized from what this backend measured, the
/// case can be scored. The effective magnitude is the injection record's
/// `requested_us`. A negative control's work keeps its asked size: it is not
/// meant to move anything.
pub fn sized_injection(sc: &Scenario, twin: &QuietRun, quiet: &QuietRun) -> Option<Injection> {
    let inj = sc.injection.clone()?;
    if !applies(sc) || inj.kind == InjectionKind::UnrelatedWork {
        return Some(inj);
    }
    let Some(&symptom) = symptom_key(sc).and_then(|k| twin.keys.get(&k)) else {
        return Some(inj);
    };
    let path = twin.truth.critical_path(symptom);
    let anchor = onset_anchor(sc, twin.truth, twin.keys, &path).map(|(k, _)| k);
    let floor_us = noise_floor(sc, twin, quiet, anchor.as_ref()) / 1e3;
    let sized = (SIZE_MARGIN * floor_us * 10.0).ceil() / 10.0;
    Some(Injection {
        magnitude_us: inj.magnitude_us.max(sized),
        ..inj
    })
}

/// The noise floor of a scenario's symptom (ns): [`NOISE_MARGIN`] times the
/// largest end-time drift between two no-injection runs over the nodes of
/// the symptom's true critical path in the first (the ops whose timing sets
/// the symptom's), and never below the clock granularity the truth trusts
/// (`FAULT_END_TOLERANCE_NS`). With an `anchor` (the step lateness is
/// measured from, [`onset_anchor`]) the drift is measured from that step's
/// start in each run and only over the path from it on, so jitter upstream
/// of where the injection can act is not counted as noise.
pub fn noise_floor(sc: &Scenario, a: &QuietRun, b: &QuietRun, anchor: Option<&StepKey>) -> f64 {
    let granularity = FAULT_END_TOLERANCE_NS as f64;
    let Some(key) = symptom_key(sc) else {
        return granularity;
    };
    let Some(&symptom) = a.keys.get(&key) else {
        return granularity;
    };
    // Each run's time zero: the anchor's start when both runs have it, the
    // run's origin otherwise.
    let anchored = anchor.and_then(|k| Some((*a.keys.get(k)?, *b.keys.get(k)?)));
    let (zero_a, zero_b) = match anchored {
        Some((na, nb)) => (
            a.truth.nodes[na as usize].start as f64,
            b.truth.nodes[nb as usize].start as f64,
        ),
        None => (a.origin as f64, b.origin as f64),
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
        if anchored.is_some() && (x.start as f64) < zero_a {
            continue;
        }
        let ea = x.end as f64 - zero_a;
        let eb = y.end as f64 - zero_b;
        drift = drift.max((ea - eb).abs());
    }
    (NOISE_MARGIN * drift).max(granularity)
}

/// The step a symptom's lateness is measured from (docs/scenario-space.md,
/// "Labels from the truth"): among the keyed ancestors of the symptom in the
/// injected run's truth (the nodes it depends on, through any edge), the one
/// that started last before the injection's onset — the earliest start of the
/// injected fault or work and of the target's nodes and call. Nothing that
/// started before the onset can have been moved by the injection, and an
/// ancestor shares the symptom's upstream jitter (thread wake-ups, earlier
/// requests), so measuring from it keeps that jitter out of both the lateness
/// and the noise floor. `None` when the scenario has no injection or no
/// keyed ancestor starts before the onset: then everything is measured from
/// the run's origin. `path` is the symptom's true critical path; its last
/// node is the symptom.
pub fn onset_anchor(
    sc: &Scenario,
    truth: &GroundTruth,
    keys: &Keys,
    path: &[NodeId],
) -> Option<(StepKey, NodeId)> {
    let inj = sc.injection.as_ref()?;
    let &symptom = path.last()?;
    let start = |n: NodeId| truth.nodes.get(n as usize).map(|node| node.start);
    let mut onset: Option<Ns> = truth
        .injections
        .iter()
        .filter_map(|i| i.fault_node)
        .filter_map(start)
        .min();
    if let Some(target) = target_key(sc, inj.program.as_deref(), &inj.target, inj.request) {
        let target_starts = keys
            .iter()
            .filter(|(k, _)| {
                k.program == target.program && k.request == target.request && k.step == target.step
            })
            .filter_map(|(_, &n)| start(n));
        onset = onset.into_iter().chain(target_starts).min();
    }
    let onset = onset?;
    // The symptom's ancestors: a walk back over every predecessor edge.
    let predecessors = truth.predecessors();
    let mut seen = vec![false; truth.nodes.len()];
    let mut stack = vec![symptom];
    while let Some(n) = stack.pop() {
        let Some(flag) = seen.get_mut(n as usize) else {
            continue;
        };
        if std::mem::replace(flag, true) {
            continue;
        }
        stack.extend(predecessors[n as usize].iter().map(|&(p, _)| p));
    }
    keys.iter()
        .filter(|(_, &n)| seen.get(n as usize).copied().unwrap_or(false))
        .filter(|(_, &n)| start(n).is_some_and(|s| s < onset))
        .map(|(k, &n)| (k.clone(), n))
        .max_by_key(|(k, n)| (start(*n), *n, k.api))
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
///
/// `injection_effect_ns`, where the backend can say it (the simulator replays
/// the injected run's noise without the injection), is how far the injection
/// itself moved the symptom: a symptom late against the twin that the
/// injection did not move is late by the twin's noise, which establishes
/// nothing, rather than by a delay the truth fails to name.
pub fn check_and_apply(
    sc: &Scenario,
    truth: &mut GroundTruth,
    keys: &Keys,
    noise_floor_ns: f64,
    injection_effect_ns: Option<f64>,
) {
    let Some(symptom) = truth.symptoms.first() else {
        return;
    };
    let check = check(
        sc,
        truth,
        keys,
        symptom,
        noise_floor_ns,
        injection_effect_ns,
    );
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
    injection_effect_ns: Option<f64>,
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
    let on_path = mechanism_on_path(sc, truth, keys, injection.kind, declared, path);
    let late = lateness_ns > noise_floor_ns;
    let (lateness_us, floor_us) = (lateness_ns / 1e3, noise_floor_ns / 1e3);
    // What the two quiet runs drifted apart (the floor without its margin).
    let drift_ns = noise_floor_ns / NOISE_MARGIN;
    if declared == CauseLabel::None {
        return if on_path {
            verdict(
                LabelVerdict::Dropped,
                Some(true),
                format!("declared `none`, but the injected work is on the symptom's true path ({lateness_us:.1} µs late)"),
            )
        } else if late && moved_by_noise_only(injection_effect_ns) {
            verdict(
                LabelVerdict::Indeterminate,
                Some(false),
                format!("declared `none`, {lateness_us:.1} µs late against the twin (noise floor {floor_us:.1} µs), but the same run without the injection ends {:.1} µs apart: the twin's noise, not a delay; one pair of quiet runs did not bound it", injection_effect_ns.unwrap_or(0.0) / 1e3),
            )
        } else if late {
            // Off the path, yet the symptom moved: through something the
            // truth has no edge for, so `none` would be a false label.
            verdict(
                LabelVerdict::Dropped,
                Some(false),
                format!("declared `none`, but {lateness_us:.1} µs late (noise floor {floor_us:.1} µs) with the injected work off the symptom's true path: a delay the truth does not name"),
            )
        } else if within_margin_only(lateness_ns, noise_floor_ns) {
            verdict(
                LabelVerdict::Indeterminate,
                Some(false),
                format!("declared `none` with the injected work off the symptom's true path, but {lateness_us:.1} µs late: more than the quiet runs drifted ({:.1} µs), within the noise floor of {floor_us:.1} µs: not established either way", drift_ns / 1e3),
            )
        } else {
            verdict(
                LabelVerdict::Kept,
                Some(false),
                format!("the injected work is off the symptom's true path ({lateness_us:.1} µs late, noise floor {floor_us:.1} µs)"),
            )
        };
    }
    // A deschedule whose victim was switched out for less than half the
    // lateness did not cause it: the thread kept running (its own compute,
    // which is what the records show), so the declared label does not hold.
    if injection.kind == InjectionKind::CpuDeschedule && late && on_path {
        let off_cpu_ns = truth
            .injections
            .iter()
            .filter_map(|i| i.off_cpu_us)
            .map(|us| us * 1e3)
            .reduce(f64::max);
        if let Some(off) = off_cpu_ns.filter(|&off| off < DESCHEDULE_SHARE * lateness_ns) {
            return verdict(
                LabelVerdict::Dropped,
                Some(true),
                format!(
                    "{lateness_us:.1} µs late, but the descheduled thread was switched out for only {:.1} µs of it: the deschedule does not explain the lateness",
                    off / 1e3
                ),
            );
        }
    }
    // Within the floor but beyond what the quiet runs drifted (and beyond the
    // clock's granularity): the symptom may have moved, by less than the
    // margin asks. Neither the label nor `none` is established.
    if !late && within_margin_only(lateness_ns, noise_floor_ns) {
        return verdict(
            LabelVerdict::Indeterminate,
            Some(on_path),
            format!("{lateness_us:.1} µs late: more than the quiet runs drifted ({:.1} µs), within the noise floor of {floor_us:.1} µs: not established either way", drift_ns / 1e3),
        );
    }
    // On the path and no later than the quiet runs drifted, but the twin could not
    // have told: each run's noise may reach that drift, so a symptom that moved by
    // the whole injection (up to twice the drift) can still read as not late. Only an
    // injection larger than that, absorbed by slack, establishes `none`.
    // The magnitude the backend ran (`sized_injection` may have raised it).
    let injected_ns = truth
        .injections
        .iter()
        .map(|i| i.requested_us * 1e3)
        .reduce(f64::max)
        .unwrap_or(injection.magnitude_us * 1e3);
    if !late && on_path && injected_ns > 0.0 && injected_ns <= RESOLVABLE * drift_ns {
        return verdict(
            LabelVerdict::Indeterminate,
            Some(true),
            format!("{lateness_us:.1} µs late with the injected `{}` on the true path, but the quiet runs drifted {:.1} µs apart, as much as half the injected {:.1} µs: the twin cannot say whether the symptom moved", injection.kind.as_str(), drift_ns / 1e3, injected_ns / 1e3),
        );
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
        (true, false) if moved_by_noise_only(injection_effect_ns) => verdict(
            LabelVerdict::Indeterminate,
            Some(false),
            format!("{lateness_us:.1} µs late against the twin (noise floor {floor_us:.1} µs), but the injected `{}` is not on the true path and the same run without it ends {:.1} µs apart: late by the twin's noise, which establishes no label", injection.kind.as_str(), injection_effect_ns.unwrap_or(0.0) / 1e3),
        ),
        (true, false) => verdict(
            LabelVerdict::Dropped,
            Some(false),
            format!("{lateness_us:.1} µs late (noise floor {floor_us:.1} µs), but the injected `{}` is not on the true path", injection.kind.as_str()),
        ),
    }
}

/// Whether the injection itself left the symptom where it was: the symptom
/// ends within the clock granularity the truth trusts
/// ([`FAULT_END_TOLERANCE_NS`]) of where the same run without the injection
/// ends. Unknown (`None`, every backend but the simulator) is not "unmoved".
fn moved_by_noise_only(injection_effect_ns: Option<f64>) -> bool {
    injection_effect_ns.is_some_and(|e| e.abs() <= FAULT_END_TOLERANCE_NS as f64)
}

/// A lateness within the noise floor that still exceeds both the drift the
/// quiet runs showed (the floor without its margin) and the clock granularity
/// the truth trusts: one sample of the noise cannot say whether the symptom
/// moved, so no label is established (docs/scenario-space.md, "Verdict").
fn within_margin_only(lateness_ns: f64, noise_floor_ns: f64) -> bool {
    let drift = noise_floor_ns / NOISE_MARGIN;
    lateness_ns <= noise_floor_ns
        && lateness_ns > drift
        && lateness_ns > FAULT_END_TOLERANCE_NS as f64
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
    declared: CauseLabel,
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
    // The target's own API call (the launch a host-side delay makes late);
    // for a step that makes no call (host work), the request's next call
    // after it, the host operation its delay made late.
    let steps = target
        .as_ref()
        .and_then(|k| sc.programs.get(k.program))
        .map_or(0, |p| p.steps.len());
    let target_call = target.clone().and_then(|key| {
        (key.step..steps.max(key.step + 1)).find_map(|step| {
            keys.get(&StepKey {
                step,
                api: true,
                ..key.clone()
            })
            .copied()
        })
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
        // Another request's host work grew and the symptom's request waited
        // for the thread it held (`handoff_queueing`), or for room in a bounded
        // queue that thread kept full: a `busy` or `backpressure` edge follows
        // the late call on the way to the symptom.
        InjectionKind::HostDelay if declared == CauseLabel::HandoffQueueing => {
            target_call.and_then(position).is_some_and(|i| {
                gates_after(i)
                    .iter()
                    .any(|g| matches!(g, EdgeType::Busy | EdgeType::Backpressure))
            })
        }
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
        // A lengthened device op: on the path, and named by the gate it works
        // through, which must be the declared label (one rule for every
        // lengthening injection, `lengthened_op_label`).
        InjectionKind::EventWait
        | InjectionKind::GraphDependency
        | InjectionKind::SyncWait
        | InjectionKind::KernelSlowdown => {
            target_at.is_some_and(|i| lengthened_op_label(&gates_after(i), truth, path) == declared)
        }
        InjectionKind::DelayedMemcpy => target_at.is_some(),
        InjectionKind::RecordLoss => false,
    }
}

/// The label a lengthened device op earns at the symptom (docs/scenario-space.md,
/// "Labelling convention"), from the gates on the true path after it
/// (`gates`, towards the symptom): the first gate other than stream order —
/// an event (`event_wait`), a graph edge (`graph_dependency`), a blocking
/// host call (`sync`: `implicit_sync`) — or, when stream order alone carries
/// the delay, `stream_backlog`, except that a symptom which is a copy whose
/// own call blocked behind the op is `implicit_sync` (a readback forced the
/// fence). Stream order first and an event after it is `event_wait`: the
/// event is the gate that crossed to the symptom's stream.
fn lengthened_op_label(gates: &[EdgeType], truth: &GroundTruth, path: &[NodeId]) -> CauseLabel {
    let crossing = gates.iter().find_map(|g| match g {
        EdgeType::Event => Some(CauseLabel::EventWait),
        EdgeType::Graph => Some(CauseLabel::GraphDependency),
        EdgeType::Sync => Some(CauseLabel::ImplicitSync),
        _ => None,
    });
    crossing.unwrap_or_else(|| {
        let readback = path.last().is_some_and(|&s| {
            truth.nodes[s as usize].kind == ground_truth::graph::NodeKind::Memcpy
        });
        if readback {
            CauseLabel::ImplicitSync
        } else {
            CauseLabel::StreamBacklog
        }
    })
}

fn edge_kind(truth: &GroundTruth, src: NodeId, dst: NodeId) -> Option<EdgeType> {
    truth
        .edges
        .iter()
        .find(|e| e.src == src && e.dst == dst)
        .map(|e| e.kind)
}

#[cfg(test)]
mod tests;
