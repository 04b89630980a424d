//! The true critical path through a graph launch (`GroundTruth::gating_time`):
//! the driver hands a graph's nodes over while `cuGraphLaunch` runs, so a node
//! that started after the call returned was held by the call, and one that
//! started during it by whatever else it waited for (docs/gpu-facts.md).

use ground_truth::graph::GroundTruth;

/// A 125 µs backlog kernel ends at 157 µs; a graph launch call runs 62–192 µs;
/// node 2 starts at 160 µs (during the call), node 3 at 194.5 µs (after it).
/// Both follow the backlog in stream order and the call by their launch, and
/// both carry the call's start as their queue time, as the H200's truth does.
fn graph_behind_backlog() -> GroundTruth {
    serde_json::from_str(
        r#"{
        "nodes": [
            {"id": 0, "kind": "kernel", "name": "rotary_embed", "stream": 1,
             "start": 32000, "end": 157000, "queued": 30000, "submitted": 31000, "rids": [1]},
            {"id": 1, "kind": "graph_launch", "name": "cuGraphLaunch", "thread": 7,
             "start": 62000, "end": 192000, "rids": [2]},
            {"id": 2, "kind": "graph_node", "name": "reduce_sum", "stream": 1,
             "start": 160000, "end": 200000, "queued": 62000, "submitted": 157000, "rids": [3]},
            {"id": 3, "kind": "graph_node", "name": "kv_cache_append", "stream": 1,
             "start": 194500, "end": 300000, "queued": 62000, "submitted": 157000, "rids": [4]}
        ],
        "edges": [
            {"src": 0, "dst": 2, "type": "stream_order"},
            {"src": 1, "dst": 2, "type": "launch"},
            {"src": 0, "dst": 3, "type": "stream_order"},
            {"src": 1, "dst": 3, "type": "launch"}
        ],
        "symptoms": []
    }"#,
    )
    .unwrap()
}

#[test]
fn a_graph_node_that_started_after_its_launch_call_returned_was_held_by_the_call() {
    let truth = graph_behind_backlog();
    assert_eq!(truth.critical_path(3), vec![1, 3]);
    // Must not: a node that started while the call ran was let go by the call
    // already, and waited for the backlog.
    assert_eq!(truth.critical_path(2), vec![0, 2]);
}
