//! The injection plan (`crate::plan`, the same for every backend) in the
//! PyTorch executor's terms, and which scenarios the executor can run
//! (docs/torch-track.md, "What the executor cannot run").

use crate::anonymous::Disguise;
use crate::plan::{Action, InjectedKernel, Plan, Stretch};
use ground_truth::scenario::{InjectionKind, Scenario, Step};
use serde_json::{json, Value};

/// Why a scenario cannot run on the PyTorch executor, if it cannot.
pub fn supported(sc: &Scenario) -> Result<(), String> {
    if let Some(inj) = &sc.injection {
        match inj.kind {
            InjectionKind::CpuDeschedule
            | InjectionKind::HostPageFaultMinor
            | InjectionKind::HostPageFaultMajor => {
                return Err(format!(
                    "the torch executor cannot inject {}: the project's host injectors act on a thread of the recording process, and the Python threads live in the executor's process (docs/torch-track.md)",
                    inj.kind.as_str()
                ))
            }
            InjectionKind::RecordLoss => {
                return Err("the torch executor cannot inject record_loss: Kineto's buffers are not ours to drop from (docs/torch-track.md)".into())
            }
            _ => {}
        }
    }
    for (pi, p) in sc.programs.iter().enumerate() {
        for (si, s) in p.steps.iter().enumerate() {
            if let Step::Recreate { object, .. } = s {
                if *object == ground_truth::scenario::ObjectKind::Graph {
                    return Err(format!(
                        "programs[{pi}].steps[{si}]: the torch executor cannot recreate a graph (torch.cuda.CUDAGraph has no re-instantiation)"
                    ));
                }
            }
        }
    }
    Ok(())
}

fn key_json(k: &crate::keys::StepKey) -> Value {
    json!({
        "program": k.program,
        "request": k.request,
        "step": k.step,
        "graph_node": k.graph_node,
    })
}

/// The plan as the executor's request field `plan`.
pub fn for_executor(sc: &Scenario, p: &Plan, seed: u64) -> Result<Value, String> {
    let disguise = Disguise::new(sc, seed);
    let mut out = serde_json::Map::new();
    if let Some((k, s)) = &p.stretch {
        let mut v = key_json(k);
        match s {
            Stretch::Ns(n) => v["extra_ns"] = json!(n),
            Stretch::Bytes(b) => v["extra_bytes"] = json!(b),
        }
        out.insert("stretch".into(), v);
    }
    if let Some(k) = &p.host_target {
        if p.kind == InjectionKind::HostDelay {
            let mut v = key_json(k);
            v["ns"] = json!(p.magnitude_ns);
            out.insert("host_delay".into(), v);
        }
    }
    if let Some(k) = &p.trigger {
        out.insert("trigger".into(), key_json(k));
    }
    let mut actions = Vec::new();
    for (draw, (_, a)) in p.actions.iter().enumerate() {
        match a {
            Action::Kernel {
                on_target_stream,
                kernel,
                grid,
                from,
                until,
                delays_target,
            } => actions.push(json!({
                "kind": "kernel",
                "on_target_stream": on_target_stream,
                "hog": *kernel == InjectedKernel::OccupancyHog,
                "grid": grid.unwrap_or_else(|| disguise.grid(draw as u64, 8)),
                "dur_ns": until.saturating_sub(*from),
                "name": disguise.kernel_name(draw as u64),
                "delays_target": delays_target,
            })),
            Action::Copies {
                from,
                until,
                bytes_per_ns,
            } => actions.push(json!({
                "kind": "copies",
                "bytes": ((until.saturating_sub(*from)) as f64 * bytes_per_ns).round() as u64,
                "delays_target": true,
            })),
        }
    }
    if !actions.is_empty() {
        out.insert("actions".into(), Value::Array(actions));
    }
    Ok(Value::Object(out))
}

/// How the executor realises the plan (the injection record's `mechanism`).
pub fn mechanism(p: &Plan) -> String {
    let mut parts = Vec::new();
    if let Some((_, s)) = &p.stretch {
        parts.push(match s {
            Stretch::Ns(n) => format!("the target's self-timed spin kernel ran {n} ns longer"),
            Stretch::Bytes(b) => format!("the target transfer moved {b} more bytes"),
        });
    }
    if p.kind == InjectionKind::HostDelay {
        parts.push("the executor's Python thread spun before the target call".into());
    }
    for (_, a) in &p.actions {
        parts.push(match a {
            Action::Kernel {
                kernel: InjectedKernel::OccupancyHog,
                ..
            } => "a CuPy hog kernel filling every SM, launched from another Python thread".into(),
            Action::Kernel {
                on_target_stream: Some(_),
                ..
            } => "a CuPy spin kernel enqueued on the target's torch stream from another Python thread".into(),
            Action::Kernel { .. } => {
                "a CuPy spin kernel on another torch stream from another Python thread".into()
            }
            Action::Copies { .. } => {
                "a pinned host-to-device torch copy on another stream from another Python thread".into()
            }
        });
    }
    parts.join("; ")
}

/// Whether `sc` runs as a training loop (`torch record --train-loop`,
/// `train_loop.py`): one program with one handoff (the loader's), after which the
/// main thread's steps include a `forward` and, later, an `optimizer` step.
pub fn runs_as_training_loop(sc: &Scenario) -> Result<(), String> {
    let [program] = sc.programs.as_slice() else {
        return Err(format!(
            "a training loop runs one program, not {}",
            sc.programs.len()
        ));
    };
    let handoffs: Vec<usize> = program
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, Step::Handoff { .. }))
        .map(|(i, _)| i)
        .collect();
    let [handoff] = handoffs.as_slice() else {
        return Err("a training loop needs exactly one handoff (loader -> main)".into());
    };
    let ids: Vec<Option<&str>> = program.steps[handoff + 1..]
        .iter()
        .map(|s| s.id())
        .collect();
    let forward = ids.iter().position(|id| *id == Some("forward"));
    let optimizer = ids.iter().position(|id| *id == Some("optimizer"));
    match (forward, optimizer) {
        (Some(f), Some(o)) if f < o => Ok(()),
        _ => Err(
            "not a training step: the steps after the handoff have no `forward` and, later, \
             `optimizer` step"
                .into(),
        ),
    }
}
