//! The truth model: a flow for every ground-truth edge.

use super::layout::Group;
use super::model::{Arg, Model, Slice};
use super::slices::{add_flow, base, enum_str};
use ground_truth::{Bundle, NodeId, TraceView};
use std::collections::HashSet;

/// Ground truth: slices for the shown records, a flow for every true edge.
pub fn truth_model(bundle: &Bundle, view: Option<&TraceView>) -> Model {
    let title = match view {
        Some(v) => format!("{} · truth · view {}", bundle.id(), v.spec.label()),
        None => format!("{} · truth", bundle.id()),
    };
    let mut base = base(bundle, view, title);
    let truth = &bundle.ground_truth;
    // Nodes on an edge that no shown record observes get a slice of their own.
    let on_edges: HashSet<NodeId> = truth.edges.iter().flat_map(|e| [e.src, e.dst]).collect();
    let mut ids: Vec<NodeId> = on_edges.into_iter().collect();
    ids.sort_unstable();
    for n in ids {
        if base.slice_of_node.contains_key(&n) {
            continue;
        }
        let node = &truth.nodes[n as usize];
        let g = Group::Cb("ground truth · unrecorded nodes".into());
        let i = base.b.add(
            g,
            Slice {
                track: 0,
                start: node.start,
                end: node.end.max(node.start),
                instant: node.end <= node.start,
                name: format!("(unrecorded) {}", node.name),
                category: "unrecorded_node",
                args: vec![
                    ("node", Arg::U(n as u64)),
                    ("node_kind", Arg::text(enum_str(&node.kind))),
                    ("rids", Arg::text(format!("{:?}", node.rids))),
                ],
                flows_out: Vec::new(),
                flows_in: Vec::new(),
                depth: 0,
            },
        );
        base.slice_of_node.insert(n, i);
    }
    for e in &truth.edges {
        let (from, to) = (base.slice_of_node[&e.src], base.slice_of_node[&e.dst]);
        let kind = Arg::S(base.b.texts.get(e.kind.as_str()));
        add_flow(
            &mut base.b,
            from,
            to,
            format!("← {}", e.kind.as_str()),
            vec![
                ("type", kind),
                ("src_node", Arg::U(e.src as u64)),
                ("dst_node", Arg::U(e.dst as u64)),
            ],
        );
    }
    base.b.layout();
    base.b.model
}
