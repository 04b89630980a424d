//! How much the monitor programs slow the kernel: one schedule launched under every
//! monitor (none, the fixed configurations, each query's program, each diagnosis
//! program) in interleaved rounds, the median kernel time of each against none's.
//! `causalbench megakernel bpf` measures it on the GPU or the simulator, the track's
//! leaderboard section on the simulator ([`super::section`]).

use super::evaluate::ProgramExecutor;
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

/// Median kernel time of one schedule under each monitor, interleaved rounds: a JSON
/// array of `{monitor, kernel_us, perturbation_pct}`.
pub fn perturbation(
    ex: &mut dyn ProgramExecutor,
    s: &Schedule,
    rounds: u32,
) -> Result<Value, String> {
    let mut arms: Vec<(String, Option<&str>, MonitorConfig)> = vec![
        ("none".into(), None, MonitorConfig::none()),
        ("aggregate".into(), None, MonitorConfig::aggregate()),
        ("task-log".into(), None, MonitorConfig::task_log(u32::MAX)),
    ];
    for q in queries::QUERIES.iter() {
        arms.push((
            format!("ebpf:{}", q.name),
            Some(q.program),
            MonitorConfig::none(),
        ));
    }
    // The diagnosis programs under the same interleaved protocol.
    for d in super::diagnosis::ALL {
        arms.push((
            format!("diagnosis:{}", d.monitor),
            Some(d.program),
            d.config(),
        ));
    }
    let mut times: Vec<Vec<u64>> = vec![Vec::new(); arms.len()];
    for round in 0..rounds {
        for (i, (_, program, cfg)) in arms.iter().enumerate() {
            let mut att = match program {
                Some(p) => Some(attachment(p)?.0),
                None => None,
            };
            let cap = ex.launch_programs(s, cfg, 1000 + round as u64, att.as_mut())?;
            times[i].push(cap.kernel_ns);
        }
    }
    let base = median(times[0].clone()) as f64;
    Ok(json!(arms
        .iter()
        .zip(times)
        .map(|((name, _, _), t)| {
            let m = median(t) as f64;
            json!({"monitor": name, "kernel_us": m / 1e3, "perturbation_pct": 100.0 * (m - base) / base.max(1.0)})
        })
        .collect::<Vec<_>>()))
}

/// Mean perturbation of the query programs' arms (`ebpf:QUERY`) of a [`perturbation`]
/// result.
pub fn query_programs_perturbation(arms: &Value) -> f64 {
    let v: Vec<f64> = arms
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| {
            a["monitor"]
                .as_str()
                .is_some_and(|m| m.starts_with("ebpf:"))
        })
        .filter_map(|a| a["perturbation_pct"].as_f64())
        .collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}
