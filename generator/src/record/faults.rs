//! Fault attribution of device-side injections: which injected work is the
//! cause of the op it delayed, and the injection record that says so. Host
//! stalls need no attribution: the stall is the step right before the call it
//! delays (`RunBuilder::injected_fault`).

use super::builder::RunBuilder;
use crate::keys::Keys;
use crate::plan::Plan;
use ground_truth::graph::{EdgeType, GroundTruth, InjectionRecord, NodeId};
use ground_truth::scenario::InjectionKind;
use ground_truth::Ns;

/// How long after the delayed op's start the end of the injected work that
/// held its resource may be stamped and still count as what it waited for.
///
/// A simulated resource is released exactly when the next op starts, but a
/// real GPU's timestamps are not that exact: a kernel's end is stamped when
/// its last block retires and the next op's start when its first block is
/// dispatched, so back-to-back work can overlap by a little on the record.
/// The GPU backend's own clock check holds device timestamps to agreement
/// within 2 µs (`cuda::ClockCheck::within_2us`), so that is the granularity
/// the rule accepts. It is far below any injection's magnitude (tens of µs
/// and more), so no later, unrelated work can slip in.
pub const FAULT_END_TOLERANCE_NS: Ns = 2_000;

/// The injected work that delayed `target`: of `injected`, the one that ended
/// last among those ending after the target was submitted (still holding the
/// resource when the target could have started) and no later than
/// [`FAULT_END_TOLERANCE_NS`] after the target's start (the target's start
/// waited for it).
pub fn delaying_work(truth: &GroundTruth, target: NodeId, injected: &[NodeId]) -> Option<NodeId> {
    let t = &truth.nodes[target as usize];
    let mut last: Option<NodeId> = None;
    for &d in injected {
        let end = truth.nodes[d as usize].end;
        if end <= t.start + FAULT_END_TOLERANCE_NS
            && end > t.submitted
            && last.is_none_or(|l| truth.nodes[l as usize].end < end)
        {
            last = Some(d);
        }
    }
    last
}

/// A device-side injection as the plan made it.
pub struct DeviceInjection<'a> {
    pub kind: InjectionKind,
    pub mechanism: &'a str,
    pub magnitude_ns: Ns,
    /// The node of the op the injected work was sized to delay, if it ran.
    pub target: Option<NodeId>,
}

/// The injection record of a device-side injection, with the `fault` edge
/// from the work that delayed the target. A record loss, or unrelated work
/// whose target never ran, is recorded as requested. Backlog work gets no
/// `fault` edge: it is already the target's `stream_order` predecessor.
/// Where the target ran, the measured magnitude is left NaN for the answers
/// step (lateness against the twin).
pub fn finish_device_injection(
    b: &mut RunBuilder,
    inj: DeviceInjection,
    injected: &[NodeId],
) -> Option<InjectionRecord> {
    let requested_us = inj.magnitude_ns as f64 / 1000.0;
    let Some(target) = inj.target else {
        return matches!(
            inj.kind,
            InjectionKind::RecordLoss | InjectionKind::UnrelatedWork
        )
        .then(|| InjectionRecord {
            kind: inj.kind.as_str().into(),
            mechanism: inj.mechanism.into(),
            requested_us,
            measured_us: requested_us,
            fault_node: None,
            off_cpu_us: None,
        });
    };
    let cause = delaying_work(&b.truth, target, injected);
    if let Some(d) = cause {
        if inj.kind != InjectionKind::StreamBacklog {
            b.edge(d, target, EdgeType::Fault);
        }
    }
    Some(InjectionRecord {
        kind: inj.kind.as_str().into(),
        mechanism: inj.mechanism.into(),
        requested_us,
        measured_us: f64::NAN,
        fault_node: cause,
        off_cpu_us: None,
    })
}

/// [`finish_device_injection`] for `plan`'s device-side injection (if it
/// has one), with the target resolved among the run's `keys`.
pub fn finish_plan(
    b: &mut RunBuilder,
    plan: &Plan,
    keys: &Keys,
    injected: &[NodeId],
) -> Option<InjectionRecord> {
    let target = plan
        .device_target
        .as_ref()
        .and_then(|k| keys.get(k))
        .copied();
    let injection = DeviceInjection {
        kind: plan.kind,
        mechanism: &plan.mechanism,
        magnitude_ns: plan.magnitude_ns,
        target,
    };
    finish_device_injection(b, injection, injected)
}

/// The injection record of a lengthened target (`plan.stretch`), when `key`
/// is that target: the measured extra duration against the twin's.
pub fn stretch_injection(
    plan: &Plan,
    key: &crate::keys::StepKey,
    start: Ns,
    end: Ns,
) -> Option<InjectionRecord> {
    let (target, _) = plan.stretch.as_ref()?;
    if target != key {
        return None;
    }
    let measured = match plan.twin_target_ns {
        Some(t) => (end.saturating_sub(start) as f64 - t as f64) / 1000.0,
        None => plan.magnitude_ns as f64 / 1000.0,
    };
    Some(InjectionRecord {
        kind: plan.kind.as_str().into(),
        mechanism: plan.mechanism.clone(),
        requested_us: plan.magnitude_ns as f64 / 1000.0,
        measured_us: measured,
        fault_node: None,
        off_cpu_us: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::NodeInfo;
    use ground_truth::graph::NodeKind;

    /// A target submitted at 100 µs that started at 500 µs, and injected work
    /// ending at each of `ends`.
    fn run(ends: &[Ns]) -> (RunBuilder, NodeId, Vec<NodeId>) {
        let mut b = RunBuilder::new(false);
        let target = b.node(
            NodeKind::Kernel,
            "target",
            NodeInfo::default(),
            500_000,
            600_000,
        );
        b.set_device_times(target, 90_000, 100_000, 500_000, 600_000);
        let injected = ends
            .iter()
            .map(|&end| b.node(NodeKind::Kernel, "hog", NodeInfo::default(), 50_000, end))
            .collect();
        (b, target, injected)
    }

    #[test]
    fn work_ending_within_the_tolerance_of_the_targets_start_after_its_submission_is_the_fault() {
        // Ends exactly at the start, and a little after it (timestamp overlap).
        for end in [500_000, 500_000 + FAULT_END_TOLERANCE_NS] {
            let (b, target, injected) = run(&[end]);
            assert_eq!(
                delaying_work(&b.truth, target, &injected),
                Some(injected[0])
            );
        }
        // Ends later than the tolerance: the target did not wait for it.
        let (b, target, injected) = run(&[500_000 + FAULT_END_TOLERANCE_NS + 1]);
        assert_eq!(delaying_work(&b.truth, target, &injected), None);
        // Ended before the target was even submitted: it held nothing the target wanted.
        let (b, target, injected) = run(&[100_000]);
        assert_eq!(delaying_work(&b.truth, target, &injected), None);
    }

    #[test]
    fn of_several_holders_the_last_to_release_is_the_fault() {
        let (b, target, injected) = run(&[300_000, 499_000, 200_000]);
        assert_eq!(
            delaying_work(&b.truth, target, &injected),
            Some(injected[1])
        );
    }

    #[test]
    fn backlog_work_is_the_fault_but_gets_no_edge_and_a_loss_is_recorded_as_requested() {
        let (mut b, target, injected) = run(&[499_000]);
        let backlog = DeviceInjection {
            kind: InjectionKind::StreamBacklog,
            mechanism: "m",
            magnitude_ns: 400_000,
            target: Some(target),
        };
        let r = finish_device_injection(&mut b, backlog, &injected).unwrap();
        assert_eq!(r.fault_node, Some(injected[0]));
        assert!(r.measured_us.is_nan());
        assert!(b.truth.edges.is_empty());
        let hog = DeviceInjection {
            kind: InjectionKind::OccupancyPressure,
            mechanism: "m",
            magnitude_ns: 400_000,
            target: Some(target),
        };
        finish_device_injection(&mut b, hog, &injected).unwrap();
        assert_eq!(b.truth.edges.len(), 1);
        assert_eq!(b.truth.edges[0].kind, EdgeType::Fault);
        let loss = DeviceInjection {
            kind: InjectionKind::RecordLoss,
            mechanism: "m",
            magnitude_ns: 5_000,
            target: None,
        };
        let r = finish_device_injection(&mut b, loss, &[]).unwrap();
        assert_eq!((r.requested_us, r.measured_us), (5.0, 5.0));
    }
}
