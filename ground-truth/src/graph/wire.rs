//! The on-disk form of a [`super::Node`]: every field at the top level, as the bundle's
//! schema documents it. The in-memory node keeps its thread, stream, call site and operator
//! behind one shared pointer (`super::detail`); reading and writing go through this type so
//! that the JSON, the MessagePack and the schema stay exactly what they were.

use super::Node as InMemory;
use super::{NodeDetail, NodeId, NodeKind, NodeRids};
use crate::ids::Rid;
use crate::{Ns, SharedStr};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One node of the true dependency graph.
// Strings are shared: a ground truth repeats a few names millions of times.
// Zero times and generations are left out of the file (readers fill them back
// in, the schema says so with its `default`), which keeps large bundles smaller.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub id: NodeId,
    pub kind: NodeKind,
    /// Human-readable name (kernel name, API name, queue name, fault kind).
    pub name: SharedStr,
    /// Request token this node belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<SharedStr>,
    /// Scenario step id that produced it, if the step had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<SharedStr>,
    /// Host thread (OS tid) for host nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<u32>,
    /// Device stream (CUPTI stream id) for device nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_site: Option<SharedStr>,
    /// NVTX range (operator) enclosing the launch call, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<SharedStr>,
    /// Generation of the stream/event/graph object used (bumped on recreate).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    #[schemars(extend("default" = 0))]
    pub generation: u32,
    pub start: Ns,
    pub end: Ns,
    /// Device ops: when the op was queued and submitted (0 = not measured).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(extend("default" = 0))]
    pub queued: Ns,
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(extend("default" = 0))]
    pub submitted: Ns,
    /// Records that observe this node (most nodes have one or two: kept inline).
    #[schemars(with = "Vec<Rid>")]
    pub rids: NodeRids,
}

fn is_zero(v: &Ns) -> bool {
    *v == 0
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

impl From<Node> for InMemory {
    fn from(node: Node) -> Self {
        InMemory {
            id: node.id,
            kind: node.kind,
            name: node.name,
            request: node.request,
            step: node.step,
            detail: NodeDetail {
                thread: node.thread,
                stream: node.stream,
                call_site: node.call_site,
                operator: node.operator,
            }
            .into(),
            generation: node.generation,
            start: node.start,
            end: node.end,
            queued: node.queued,
            submitted: node.submitted,
            rids: node.rids,
        }
    }
}

impl From<&InMemory> for Node {
    fn from(node: &InMemory) -> Self {
        Node {
            id: node.id,
            kind: node.kind,
            name: node.name.clone(),
            request: node.request.clone(),
            step: node.step.clone(),
            thread: node.detail.thread,
            stream: node.detail.stream,
            call_site: node.detail.call_site.clone(),
            operator: node.detail.operator.clone(),
            generation: node.generation,
            start: node.start,
            end: node.end,
            queued: node.queued,
            submitted: node.submitted,
            rids: node.rids.clone(),
        }
    }
}

crate::wire_form::through_wire_form!(InMemory => Node);

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-memory node reads and writes the on-disk field order, names and defaults.
    #[test]
    fn a_node_reads_and_writes_the_documented_json() {
        let full = r#"{"id":3,"kind":"kernel","name":"k","request":"r1","step":"s","thread":4,"stream":13,"call_site":"app!site","operator":"mlp","generation":2,"start":10,"end":20,"queued":5,"submitted":7,"rids":[1,2,3]}"#;
        let bare =
            r#"{"id":0,"kind":"api_call","name":"cudaLaunchKernel","start":1,"end":2,"rids":[]}"#;
        for text in [full, bare] {
            let node: InMemory = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&node).unwrap(), text);
        }
        let node: InMemory = serde_json::from_str(full).unwrap();
        assert_eq!(node.detail.thread, Some(4));
        assert_eq!(node.detail.stream, Some(13));
        assert_eq!(node.detail.call_site.as_deref(), Some("app!site"));
        assert_eq!(node.detail.operator.as_deref(), Some("mlp"));
        let unknown = r#"{"id":0,"kind":"kernel","name":"k","start":1,"end":2,"rids":[],"lane":1}"#;
        assert!(serde_json::from_str::<InMemory>(unknown).is_err());
    }
}
