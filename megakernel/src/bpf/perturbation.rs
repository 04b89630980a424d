//! How much the monitor programs slow the kernel: one schedule launched under every
//! monitor (none, the fixed configurations, each query's program, each diagnosis
//! program) in interleaved rounds, the median kernel time of each against none's.
//! `causalbench megakernel bpf` measures it on the GPU or the simulator, the track's
//! leaderboard section on the simulator ([`super::section`]).

use super::evaluate::{Execution, Placement, ProgramExecutor};
use super::{load, programs, queries, Attachment};
use crate::schedule::Schedule;
use ground_truth::megakernel::MonitorConfig;
use serde_json::{json, Value};
use std::time::Instant;

/// The median of `v` (the upper one of an even count; 0 for none).
pub fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// A built monitor program loaded, verified and attached, with the load and the verify
/// time (ns).
pub fn attachment(name: &str) -> Result<(Attachment, u64, u64), String> {
    let elf = programs::object(name).ok_or_else(|| format!("{name} not built"))?;
    let t = Instant::now();
    let set = load(name, elf).map_err(|e| e.to_string())?;
    let load_ns = t.elapsed().as_nanos() as u64;
    let t = Instant::now();
    let att = Attachment::new(set).map_err(|e| e.to_string())?;
    Ok((att, load_ns, t.elapsed().as_nanos() as u64))
}

/// The name of the empty program set: the kernel with hooks, nothing attached.
const EMPTY: &str = "empty";

/// The empty program set, verified and attached.
fn empty_attachment() -> Result<Attachment, String> {
    Attachment::new(super::ProgramSet {
        name: EMPTY.into(),
        programs: Vec::new(),
        maps: Vec::new(),
    })
    .map_err(|e| e.to_string())
}

/// One arm of the perturbation measurement.
struct Arm {
    name: String,
    /// A built program's name, or [`EMPTY`].
    program: Option<&'static str>,
    cfg: MonitorConfig,
    /// How its program runs (`None`: no program).
    execution: Option<Execution>,
    /// Where a task-end-only program runs on a GPU.
    placement: Placement,
}

/// What one launch of an arm gave: kernel ns, and with a program, its hook
/// runs, instructions executed and device ns spent in the hooks (all workers).
#[derive(Default, Clone, Copy)]
struct Sample {
    kernel_ns: u64,
    runs: u64,
    insns: u64,
    hook_ns: u64,
    exec_ns: u64,
}

/// Median kernel time of one schedule under each monitor, interleaved rounds: a JSON
/// array of `{monitor, execution, kernel_us, perturbation_pct, stretch_us, ...}`. Every
/// program arm is measured under each of the executor's executions (compiled and
/// interpreted on a GPU), with its hook runs, instructions per run and the device time
/// spent in the hooks per run and per worker, so that a kernel's stretch can be set
/// against what its hooks took (megakernel/README.md, "Compiled monitors").
pub fn perturbation(
    ex: &mut dyn ProgramExecutor,
    s: &Schedule,
    rounds: u32,
) -> Result<Value, String> {
    let fixed = |name: &str, cfg: MonitorConfig| Arm {
        name: name.into(),
        program: None,
        cfg,
        execution: None,
        placement: Placement::default(),
    };
    let mut arms = vec![
        fixed("none", MonitorConfig::none()),
        fixed("aggregate", MonitorConfig::aggregate()),
        fixed("task-log", MonitorConfig::task_log(u32::MAX)),
    ];
    for e in ex.executions() {
        // The kernel with hooks and no program attached: what the hooks cost
        // the kernel before any program runs (megakernel/README.md, "Where a
        // hook's fixed cost went").
        arms.push(Arm {
            name: "hooks:empty".into(),
            program: Some(EMPTY),
            cfg: MonitorConfig::none(),
            execution: Some(e),
            placement: Placement::default(),
        });
        for q in queries::QUERIES.iter() {
            arms.push(Arm {
                name: format!("ebpf:{}", q.name),
                program: Some(q.program),
                cfg: MonitorConfig::none(),
                execution: Some(e),
                placement: Placement::default(),
            });
        }
        // The diagnosis programs under the same interleaved protocol, placed
        // as by default and, where the executor defers (a GPU), also inline
        // on the scheduling thread.
        let placements: &[(Placement, &str)] = if ex.defers() {
            &[(Placement::Deferred, ""), (Placement::Inline, ":inline")]
        } else {
            &[(Placement::Deferred, "")]
        };
        for d in super::diagnosis::ALL {
            for &(placement, suffix) in placements {
                arms.push(Arm {
                    name: format!("diagnosis:{}{suffix}", d.monitor),
                    program: Some(d.program),
                    cfg: d.config(),
                    execution: Some(e),
                    placement,
                });
            }
        }
        // The smallest program (a counter per class at task end): the fixed cost of a hook run.
        arms.push(Arm {
            name: "probe:task_count".into(),
            program: Some("task_count"),
            cfg: MonitorConfig::none(),
            execution: Some(e),
            placement: Placement::default(),
        });
    }
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); arms.len()];
    for round in 0..rounds {
        for (i, arm) in arms.iter().enumerate() {
            if let Some(e) = arm.execution {
                ex.set_execution(e);
            }
            ex.set_placement(arm.placement);
            let mut att = match arm.program {
                Some(EMPTY) => Some(empty_attachment()?),
                Some(p) => Some(attachment(p)?.0),
                None => None,
            };
            let cap = ex.launch_programs(s, &arm.cfg, 1000 + round as u64, att.as_mut())?;
            let mut smp = Sample {
                kernel_ns: cap.kernel_ns,
                ..Sample::default()
            };
            if let Some(a) = &att {
                smp.runs = a.eligible.iter().sum();
                smp.insns = a.insns;
                smp.hook_ns = a.device_hook_ns;
                smp.exec_ns = a.device_exec_ns;
            }
            samples[i].push(smp);
        }
    }
    if let Some(e) = ex.executions().first() {
        ex.set_execution(*e);
    }
    ex.set_placement(Placement::default());
    let med = |v: &[Sample], f: fn(&Sample) -> u64| median(v.iter().map(f).collect()) as f64;
    let base = med(&samples[0], |x| x.kernel_ns);
    let workers = s.workers.max(1) as f64;
    Ok(json!(arms
        .iter()
        .zip(samples)
        .map(|(arm, v)| {
            let m = med(&v, |x| x.kernel_ns);
            let runs = med(&v, |x| x.runs);
            let hook_ns = med(&v, |x| x.hook_ns);
            let mut o = json!({
                "monitor": arm.name,
                "execution": arm.execution.map(|e| e.name()),
                "kernel_us": m / 1e3,
                "perturbation_pct": 100.0 * (m - base) / base.max(1.0),
                "stretch_us": (m - base) / 1e3,
            });
            if arm.program.is_some() {
                o["hook_runs"] = json!(runs);
                o["insns_per_run"] = json!(med(&v, |x| x.insns) / runs.max(1.0));
                o["hook_ns_per_run"] = json!(hook_ns / runs.max(1.0));
                o["interp_loop_ns_per_run"] = json!(med(&v, |x| x.exec_ns) / runs.max(1.0));
                o["hook_us_per_worker"] = json!(hook_ns / workers / 1e3);
            }
            o
        })
        .collect::<Vec<_>>()))
}

/// Mean perturbation of the query programs' arms (`ebpf:QUERY`) of a [`perturbation`]
/// result, under the executor's default execution (the first one measured).
pub fn query_programs_perturbation(arms: &Value) -> f64 {
    let list = arms.as_array().cloned().unwrap_or_default();
    let default = list
        .iter()
        .find_map(|a| a["execution"].as_str().map(str::to_string));
    let v: Vec<f64> = list
        .iter()
        .filter(|a| {
            a["monitor"]
                .as_str()
                .is_some_and(|m| m.starts_with("ebpf:"))
                && a["execution"].as_str().map(str::to_string) == default
        })
        .filter_map(|a| a["perturbation_pct"].as_f64())
        .collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}
