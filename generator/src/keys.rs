//! Step identity shared by every backend: which executed step (or graph node,
//! or API call) a ground-truth node came from, so the twin and the injected
//! run can be matched and injections and symptoms resolved to nodes.

use ground_truth::graph::NodeId;
use ground_truth::scenario::{Scenario, Step};
use ground_truth::SharedStr;
use std::collections::HashMap;

/// Identifies one executed step across the twin and injected runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StepKey {
    pub program: usize,
    pub request: u32,
    pub step: usize,
    /// Graph node id, for the kernels of a graph launch.
    pub graph_node: Option<String>,
    /// The API-call node rather than the device-side node.
    pub api: bool,
}

pub type Keys = HashMap<StepKey, NodeId>;

/// The key of the scenario's symptom: its step, or the graph node it asks about.
pub fn symptom_key(sc: &Scenario) -> Option<StepKey> {
    let sd = &sc.symptom;
    let mut key = target_key(sc, sd.program.as_deref(), &sd.step, sd.request)?;
    key.graph_node = sd.graph_node.clone();
    Some(key)
}

/// Resolves an injection's target to the key of the step (or graph node) it names.
pub fn target_key(
    sc: &Scenario,
    program: Option<&str>,
    target: &str,
    request: u32,
) -> Option<StepKey> {
    let pi = match program {
        Some(name) => sc.programs.iter().position(|p| p.name == name)?,
        None => 0,
    };
    let steps = &sc.programs[pi].steps;
    if let Some(si) = steps.iter().position(|s| s.id() == Some(target)) {
        return Some(StepKey {
            program: pi,
            request,
            step: si,
            graph_node: None,
            api: false,
        });
    }
    // A graph node: the first launch of the graph that contains it.
    let graph = sc
        .graphs
        .iter()
        .find(|g| g.nodes.iter().any(|n| n.id == target))?;
    let si = steps
        .iter()
        .position(|s| matches!(s, Step::GraphLaunch { graph: g, .. } if *g == graph.name))?;
    Some(StepKey {
        program: pi,
        request,
        step: si,
        graph_node: Some(target.to_string()),
        api: false,
    })
}

/// The scenario step id of a key, if the step has one.
pub fn step_id<'s>(sc: &'s Scenario, k: &StepKey) -> Option<&'s str> {
    sc.programs.get(k.program)?.steps.get(k.step)?.id()
}

/// The scenario step id of a key as a node's `step` field.
pub fn skey_step_id(sc: &Scenario, k: &StepKey) -> Option<SharedStr> {
    step_id(sc, k).map(SharedStr::from)
}

/// Remembers the node an executed step produced. Only steps with an id can be
/// injection targets or symptoms, so only they are kept (a 1 M-op run stays cheap).
pub fn remember(keys: &mut Keys, sc: &Scenario, k: &StepKey, node: NodeId) {
    if step_id(sc, k).is_some() {
        keys.insert(k.clone(), node);
    }
}
