//! The true answers for a symptom: lateness against the twin, its phase
//! decomposition, the critical path and each standard view's first unresolved
//! boundary. Shared by every backend so the answers mean the same everywhere.

use crate::keys::{symptom_key, Keys, StepKey};
use ground_truth::graph::{Boundary, GroundTruth, Node, NodeId, NodeKind, Phases, Symptom};
use ground_truth::labels::{Collectors, Mode, Question};
use ground_truth::trace::{Record, Rid};
use ground_truth::view::ViewSpec;
use ground_truth::Scenario;
use std::collections::HashMap;

/// A twin node with its times moved from the twin's origin `from` to the
/// run's origin `to` (every real backend compares a run with its twin so).
pub fn shifted(n: &Node, from: ground_truth::Ns, to: ground_truth::Ns) -> Node {
    let mv = |t: ground_truth::Ns| {
        if t == 0 {
            0
        } else {
            (t + to).saturating_sub(from)
        }
    };
    let mut n = n.clone();
    n.start = mv(n.start);
    n.end = mv(n.end);
    n.queued = mv(n.queued);
    n.submitted = mv(n.submitted);
    n
}

/// Adds the scenario's symptom to a recorded run's `truth` and checks its
/// label against the truth (docs/scenario-space.md, "Labels from the truth").
/// The symptom's step is resolved among the run's `keys` and compared with
/// the same step of `twin` (`None`: the run had no injection and is its own
/// twin). Lateness is measured from the step the injection cannot have moved
/// (`label::onset_anchor`), and the noise floor, the drift between the twin
/// and the second quiet run `quiet`, from the same step. `twin` and `quiet`
/// keep their own clocks; `origin` is the recorded run's. An injection the
/// backend could not measure directly (NaN) is measured by the symptom's
/// lateness.
pub fn add_checked_symptom(
    sc: &Scenario,
    truth: &mut GroundTruth,
    trace: &[Record],
    keys: &Keys,
    origin: ground_truth::Ns,
    twin: Option<&crate::label::QuietRun>,
    quiet: Option<&crate::label::QuietRun>,
) -> Result<(), String> {
    add_symptom_checked_with_same_noise(sc, truth, trace, keys, origin, twin, quiet, None)
}

/// [`add_checked_symptom`], with what a backend that can replay its own noise
/// knows besides: `same_noise`, the injected run again with the same noise and
/// no injection (the simulator's). The symptom's end there against the injected
/// run's is the injection's own effect, which tells a symptom the twin's noise
/// made late from one a delay the truth does not name made late
/// (`label::check_and_apply`).
#[allow(clippy::too_many_arguments)]
pub fn add_symptom_checked_with_same_noise(
    sc: &Scenario,
    truth: &mut GroundTruth,
    trace: &[Record],
    keys: &Keys,
    origin: ground_truth::Ns,
    twin: Option<&crate::label::QuietRun>,
    quiet: Option<&crate::label::QuietRun>,
    same_noise: Option<&crate::label::QuietRun>,
) -> Result<(), String> {
    // A step's node in the twin, in the recorded run's clock.
    let twin_node = |key: &StepKey| {
        let t = twin?;
        let n = t.keys.get(key)?;
        Some(shifted(&t.truth.nodes[*n as usize], t.origin, origin))
    };
    let key = symptom_key(sc).ok_or_else(|| "symptom.step names no step".to_string())?;
    let node = *keys
        .get(&key)
        .ok_or_else(|| "the symptom step never ran".to_string())?;
    let twin_symptom = match twin {
        Some(_) => {
            twin_node(&key).ok_or_else(|| "the symptom step never ran in the twin".to_string())?
        }
        None => truth.nodes[node as usize].clone(),
    };
    let mut symptom = self::symptom(sc, truth, trace, node, &twin_symptom)?;
    let mut anchor = None;
    if twin.is_some() {
        if let Some((anchor_key, anchor_node)) =
            crate::label::onset_anchor(sc, truth, keys, &symptom.critical_path)
        {
            if let Some(twin_anchor) = twin_node(&anchor_key) {
                // How far the runs had drifted apart before the injection could act.
                let shift =
                    truth.nodes[anchor_node as usize].start as f64 - twin_anchor.start as f64;
                symptom.lateness_ns -= shift;
                symptom.phases.host_enqueue -= shift;
                anchor = Some(anchor_key);
            }
        }
    }
    for inj in &mut truth.injections {
        if inj.measured_us.is_nan() {
            inj.measured_us = symptom.lateness_ns / 1000.0;
        }
    }
    truth.symptoms.push(symptom);
    let noise_floor = match (twin, quiet) {
        (Some(a), Some(b)) => crate::label::noise_floor(sc, a, b, anchor.as_ref()),
        _ => 0.0,
    };
    let injection_effect_ns = same_noise.and_then(|s| {
        let n = s.keys.get(&key)?;
        let unmoved = shifted(&s.truth.nodes[*n as usize], s.origin, origin);
        Some(truth.nodes[node as usize].end as f64 - unmoved.end as f64)
    });
    crate::label::check_and_apply(sc, truth, keys, noise_floor, injection_effect_ns);
    Ok(())
}

/// Builds the symptom for `node` (injected run) given the same node in the twin.
pub fn symptom(
    sc: &Scenario,
    truth: &GroundTruth,
    trace: &[Record],
    node: NodeId,
    twin: &Node,
) -> Result<Symptom, String> {
    let n = &truth.nodes[node as usize];
    let critical_path = truth.critical_path(node);
    // Only the records of the symptom and of its path matter here, picked out
    // while scanning a trace of millions; the path of a long chain holds most
    // of them (`RidSet`).
    let wanted = RidSet::new(
        critical_path
            .iter()
            .flat_map(|&p| truth.nodes[p as usize].rids.iter().copied())
            .collect(),
    );
    let by_rid: HashMap<Rid, &Record> = trace
        .iter()
        .filter(|r| wanted.contains(r.rid()))
        .map(|r| (r.rid(), r))
        .collect();
    let primary = n
        .rids
        .iter()
        .copied()
        .find(|r| {
            by_rid
                .get(r)
                .is_some_and(|rec| rec.is_device_op() || matches!(rec, Record::Sync { .. }))
        })
        .ok_or_else(|| {
            format!(
                "the symptom `{}` has no device or sync record (was it the lost record?)",
                sc.symptom.step
            )
        })?;
    let phases = phase_delta(n, twin);
    let lateness_ns = n.end as f64 - twin.end as f64;
    let kept = |collectors: Collectors, mode: Mode, id: NodeId| {
        truth.nodes[id as usize].rids.iter().any(|r| {
            by_rid
                .get(r)
                .is_some_and(|rec| ViewSpec::keeps(collectors, mode, rec))
        })
    };
    let mut boundaries = Vec::new();
    for collectors in Collectors::ALL {
        for mode in [Mode::Instrumented, Mode::Closed] {
            let edge = truth.first_unresolved(&critical_path, |id| kept(collectors, mode, id));
            boundaries.push(Boundary {
                collectors,
                mode,
                edge,
            });
        }
    }
    let answer = match sc.symptom.question {
        Question::Cause => None,
        Question::Request => n.request.as_deref().map(str::to_string),
        Question::CallSite => {
            check_answer(sc, n.detail.call_site.as_deref(), "call_site")?;
            sc.symptom.answer.clone()
        }
        Question::Operator => {
            check_answer(sc, n.detail.operator.as_deref(), "operator")?;
            sc.symptom.answer.clone()
        }
    };
    Ok(Symptom {
        id: "q0".into(),
        node,
        rid: primary,
        question: sc.symptom.question,
        cause: sc.cause,
        answer,
        lateness_ns,
        critical_path,
        phases,
        boundaries,
        label: None,
    })
}

/// The declared answer must be what the run actually did; otherwise the
/// scenario is wrong, and we say so instead of shipping a false truth.
fn check_answer(sc: &Scenario, actual: Option<&str>, what: &str) -> Result<(), String> {
    if sc.symptom.answer.as_deref() != actual {
        return Err(format!(
            "symptom.answer is {:?} but the symptom's {what} is {:?}",
            sc.symptom.answer.as_deref().unwrap_or(""),
            actual.unwrap_or("")
        ));
    }
    Ok(())
}

/// Lateness split into phases: each is the change against the twin of one interval.
pub fn phase_delta(n: &Node, twin: &Node) -> Phases {
    let d = |a: u64, b: u64| a as f64 - b as f64;
    match n.kind {
        NodeKind::Kernel | NodeKind::Memcpy | NodeKind::Memset | NodeKind::GraphNode => Phases {
            host_enqueue: d(n.queued, twin.queued),
            queued_to_submitted: d(
                n.submitted - n.queued.min(n.submitted),
                twin.submitted - twin.queued.min(twin.submitted),
            ),
            submitted_to_start: d(
                n.start - n.submitted.min(n.start),
                twin.start - twin.submitted.min(twin.start),
            ),
            execution: d(n.end - n.start, twin.end - twin.start),
        },
        _ => Phases {
            host_enqueue: d(n.start, twin.start),
            queued_to_submitted: 0.0,
            submitted_to_start: 0.0,
            execution: d(n.end - n.start, twin.end - twin.start),
        },
    }
}

/// A set of record ids asked about once per record of a trace. A bitmap over
/// the ids' range where that range is at most a few bits per id (the ids of
/// one run are dense); else the sorted ids, searched. A binary search per
/// record over a critical path of millions missed the cache on every probe:
/// the record stage of `causalbench measure large` grew faster than the work.
enum RidSet {
    Dense(Vec<u64>),
    Sorted(Vec<Rid>),
}

impl RidSet {
    /// Dense while the bitmap has at most this many bits per id (and always
    /// for a small range).
    const DENSE_BITS_PER_ID: u64 = 64;

    fn new(mut rids: Vec<Rid>) -> RidSet {
        let Some(&max) = rids.iter().max() else {
            return RidSet::Sorted(rids);
        };
        let room = (rids.len() as u64).saturating_mul(Self::DENSE_BITS_PER_ID);
        if max >= room.max(1 << 16) {
            rids.sort_unstable();
            return RidSet::Sorted(rids);
        }
        let mut words = vec![0u64; (max / 64 + 1) as usize];
        for r in rids {
            words[(r / 64) as usize] |= 1 << (r % 64);
        }
        RidSet::Dense(words)
    }

    fn contains(&self, rid: Rid) -> bool {
        match self {
            RidSet::Dense(words) => words
                .get((rid / 64) as usize)
                .is_some_and(|w| w & (1 << (rid % 64)) != 0),
            RidSet::Sorted(rids) => rids.binary_search(&rid).is_ok(),
        }
    }
}

#[cfg(test)]
mod rid_set_tests {
    use super::RidSet;

    #[test]
    fn dense_and_sparse_sets_hold_exactly_their_ids() {
        let dense = RidSet::new(vec![5, 0, 63, 64, 1000]);
        assert!(matches!(dense, RidSet::Dense(_)));
        let sparse = RidSet::new(vec![3, u64::MAX - 1, 1 << 40]);
        assert!(matches!(sparse, RidSet::Sorted(_)));
        for (set, ids) in [
            (&dense, vec![5u64, 0, 63, 64, 1000]),
            (&sparse, vec![3, u64::MAX - 1, 1 << 40]),
        ] {
            for probe in [
                0u64,
                1,
                3,
                5,
                62,
                63,
                64,
                65,
                999,
                1000,
                1001,
                1 << 40,
                u64::MAX - 1,
                u64::MAX,
            ] {
                assert_eq!(set.contains(probe), ids.contains(&probe), "{probe}");
            }
        }
        assert!(!RidSet::new(Vec::new()).contains(0));
    }
}
