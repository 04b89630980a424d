//! Contention by any device work, the application's included: an op that
//! waited to start after its stream let it go, while work of another stream
//! held the resource it needed, gets a `fault` edge from that work
//! (docs/records.md, "Ground-truth conventions"). Injected work that delayed
//! its target already has its edge (`super::faults`); this rule adds the
//! rest, from the times alone, for every backend.

use super::builder::RunBuilder;
use super::faults::FAULT_END_TOLERANCE_NS;
use ground_truth::graph::{EdgeType, GroundTruth, Node, NodeId, NodeKind};
use ground_truth::trace::CopyDirection;
use ground_truth::Ns;
use std::collections::HashSet;

/// How much longer than its submission an op must have waited to start
/// before its wait counts as contention. A kernel's submitted→start is
/// normally under a microsecond on the H200 (p50 0.74 µs over the kernels of
/// `results/corpus/h200-580`) and the simulator's dispatch takes 3 µs; work
/// of another stream ending in such a gap is no cause.
pub const CONTENTION_MIN_WAIT_NS: Ns = 10_000;

/// At most this many candidates are looked at per waiting op (newest first):
/// the holder ends right before the op starts, so it is among the first.
const MAX_CANDIDATES: usize = 64;

/// The name of a copy's node, the same for every backend: a device-to-device
/// copy runs on the SMs, the others on the copy engine (docs/gpu-facts.md).
pub fn memcpy_node_name(direction: CopyDirection) -> &'static str {
    match direction {
        CopyDirection::H2d => "memcpy h2d",
        CopyDirection::D2h => "memcpy d2h",
        CopyDirection::D2d => "memcpy d2d",
    }
}

/// What an op waits for: the SMs, or the copy engine of its direction (the
/// H200 has one per direction: a host-to-device and a device-to-host copy
/// run at once, two of one direction one after the other, docs/gpu-facts.md,
/// "Host↔device copy engines").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    Sms,
    CopyEngine(CopyDirection),
}

fn resource(n: &Node) -> Option<Resource> {
    let copy = |d| &*n.name == memcpy_node_name(d);
    match n.kind {
        NodeKind::Kernel | NodeKind::GraphNode | NodeKind::Memset => Some(Resource::Sms),
        NodeKind::Memcpy if copy(CopyDirection::D2d) => Some(Resource::Sms),
        NodeKind::Memcpy if copy(CopyDirection::D2h) => {
            Some(Resource::CopyEngine(CopyDirection::D2h))
        }
        NodeKind::Memcpy => Some(Resource::CopyEngine(CopyDirection::H2d)),
        _ => None,
    }
}

/// The op that held `waiting`'s resource until it could start: of the ops
/// of `by_end` (same resource, sorted by end), the one on another stream
/// that started before it and ended last after its submission, no later
/// than [`FAULT_END_TOLERANCE_NS`] after its start. `None` when it did not
/// wait [`CONTENTION_MIN_WAIT_NS`] beyond its submission.
fn holder(truth: &GroundTruth, by_end: &[NodeId], waiting: NodeId) -> Option<NodeId> {
    let x = &truth.nodes[waiting as usize];
    if x.submitted == 0 || x.start < x.submitted + CONTENTION_MIN_WAIT_NS {
        return None;
    }
    let end = |n: &NodeId| truth.nodes[*n as usize].end;
    let lo = by_end.partition_point(|n| end(n) <= x.submitted);
    let hi = by_end.partition_point(|n| end(n) <= x.start + FAULT_END_TOLERANCE_NS);
    by_end[lo..hi]
        .iter()
        .rev()
        .take(MAX_CANDIDATES)
        .copied()
        .find(|&o| {
            let h = &truth.nodes[o as usize];
            o != waiting && h.detail.stream != x.detail.stream && h.start < x.start
        })
}

/// Adds a `fault` edge to every device op that waited for a resource held by
/// work of another stream, from that work, unless one is there already.
pub fn contention_edges(b: &mut RunBuilder) {
    let truth = &b.truth;
    let mut sms = Vec::new();
    let (mut to_device, mut to_host) = (Vec::new(), Vec::new());
    for n in &truth.nodes {
        match resource(n) {
            Some(Resource::Sms) => sms.push(n.id),
            Some(Resource::CopyEngine(CopyDirection::D2h)) => to_host.push(n.id),
            Some(Resource::CopyEngine(_)) => to_device.push(n.id),
            None => {}
        }
    }
    for list in [&mut sms, &mut to_device, &mut to_host] {
        list.sort_by_key(|&n| (truth.nodes[n as usize].end, n));
    }
    let existing: HashSet<(NodeId, NodeId)> = truth
        .edges
        .iter()
        .filter(|e| e.kind == EdgeType::Fault)
        .map(|e| (e.src, e.dst))
        .collect();
    let mut add = Vec::new();
    for n in &truth.nodes {
        let by_end = match resource(n) {
            Some(Resource::Sms) => &sms,
            Some(Resource::CopyEngine(CopyDirection::D2h)) => &to_host,
            Some(Resource::CopyEngine(_)) => &to_device,
            None => continue,
        };
        if let Some(h) = holder(truth, by_end, n.id) {
            if !existing.contains(&(h, n.id)) {
                add.push((h, n.id));
            }
        }
    }
    for (h, n) in add {
        b.edge(h, n, EdgeType::Fault);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::NodeInfo;

    fn op(b: &mut RunBuilder, kind: NodeKind, stream: u32, times: [Ns; 3]) -> NodeId {
        let info = NodeInfo {
            stream: Some(stream),
            ..Default::default()
        };
        let n = b.node(kind, "k", info, times[1], times[2]);
        b.set_device_times(n, times[0], times[0], times[1], times[2]);
        n
    }

    /// A copy waits only for the engine of its own direction.
    #[test]
    fn a_copy_is_held_only_by_a_copy_of_its_direction() {
        let mut b = RunBuilder::new(false);
        let copy = |b: &mut RunBuilder, name: &'static str, stream: u32, t: [Ns; 3]| {
            let info = NodeInfo {
                stream: Some(stream),
                ..Default::default()
            };
            let n = b.node(NodeKind::Memcpy, name, info, t[1], t[2]);
            b.set_device_times(n, t[0], t[0], t[1], t[2]);
            n
        };
        let h2d = copy(&mut b, "memcpy h2d", 1, [0, 0, 500_000]);
        let d2h = copy(&mut b, "memcpy d2h", 2, [100_000, 500_000, 600_000]);
        let h2d_late = copy(&mut b, "memcpy h2d", 3, [100_000, 500_000, 600_000]);
        contention_edges(&mut b);
        let edges: Vec<_> = b.truth.edges.iter().map(|e| (e.src, e.dst)).collect();
        assert_eq!(
            edges,
            vec![(h2d, h2d_late)],
            "the readback waited for nothing of its engine"
        );
        let _ = d2h;
    }

    #[test]
    fn work_of_another_stream_that_held_the_resource_until_the_wait_ended_is_the_fault() {
        let mut b = RunBuilder::new(false);
        let holder = op(&mut b, NodeKind::Kernel, 1, [0, 0, 500_000]);
        let earlier = op(&mut b, NodeKind::Kernel, 2, [0, 0, 50_000]);
        let waited = op(&mut b, NodeKind::Kernel, 3, [100_000, 500_000, 600_000]);
        // A copy waits for the copy engine, not for kernels.
        let copy = op(&mut b, NodeKind::Memcpy, 4, [100_000, 500_000, 600_000]);
        // An op that did not wait gets nothing.
        let _prompt = op(&mut b, NodeKind::Kernel, 5, [495_000, 500_000, 510_000]);
        // Work of its own stream is stream order, not contention.
        let same = op(&mut b, NodeKind::Kernel, 1, [100_000, 500_000, 700_000]);
        contention_edges(&mut b);
        let edges: Vec<_> = b
            .truth
            .edges
            .iter()
            .map(|e| (e.src, e.dst, e.kind))
            .collect();
        assert_eq!(edges, vec![(holder, waited, EdgeType::Fault)]);
        let _ = (earlier, copy, same);
        // An edge the injection rule made is not made twice.
        let mut b2 = RunBuilder::new(false);
        let h = op(&mut b2, NodeKind::Kernel, 1, [0, 0, 500_000]);
        let w = op(&mut b2, NodeKind::Kernel, 3, [100_000, 500_000, 600_000]);
        b2.edge(h, w, EdgeType::Fault);
        contention_edges(&mut b2);
        assert_eq!(b2.truth.edges.len(), 1);
    }
}
