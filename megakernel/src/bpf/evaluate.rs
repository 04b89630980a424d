//! Runs the program-only queries on task graphs: for each (graph, query), one
//! launch with the query's program attached beside the full task log (the
//! truth comes from the same launch), one launch with the fixed
//! configuration's best attempt, and scores both answers against the truth.

use super::attach::Attachment;
use super::queries::{records, QUERIES};
use super::{load, programs};
use crate::schedule::{self, Schedule, NONE};
use crate::sim::{self, SimCosts};
use ground_truth::megakernel::{Capture, MkScenario, MonitorConfig};
use serde::Serialize;

/// How the hooks run an attached program set: interpreted (the reference
/// interpreter on the simulator, the device interpreter on a GPU) or
/// translated, compiled and linked into the megakernel (`bpf::link`, GPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Execution {
    Interpreted,
    Compiled,
}

impl Execution {
    pub fn name(self) -> &'static str {
        match self {
            Execution::Interpreted => "interpreted",
            Execution::Compiled => "compiled",
        }
    }
}

/// Where a GPU runs a program set whose one program is at task end
/// (kernels/src/cuda/mk_bpf.cu, `mk_bpf_epoch::defers`): on thread 32 beside the
/// next task's body, off the scheduling thread (the default), or inline on
/// the scheduling thread at the task end, as every other set runs. The
/// simulator runs every program inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    #[default]
    Deferred,
    Inline,
}

/// Something that launches a schedule with a monitor configuration and,
/// optionally, an attached program set (whose maps it fills).
pub trait ProgramExecutor {
    /// The ways it can run attached programs, the default first.
    fn executions(&self) -> Vec<Execution> {
        vec![Execution::Interpreted]
    }
    /// Runs attached programs this way from the next launch on (one of [`Self::executions`]).
    fn set_execution(&mut self, _e: Execution) {}
    /// Whether it runs a task-end-only set deferred (else every program inline).
    fn defers(&self) -> bool {
        false
    }
    /// Places task-end-only program sets this way from the next launch on.
    fn set_placement(&mut self, _p: Placement) {}
    fn launch_programs(
        &mut self,
        s: &Schedule,
        cfg: &MonitorConfig,
        seed: u64,
        programs: Option<&mut Attachment>,
    ) -> Result<Capture, String>;
}

/// The simulator, running programs with the reference interpreter.
pub struct SimPrograms(pub SimCosts);

impl ProgramExecutor for SimPrograms {
    fn launch_programs(
        &mut self,
        s: &Schedule,
        cfg: &MonitorConfig,
        seed: u64,
        programs: Option<&mut Attachment>,
    ) -> Result<Capture, String> {
        Ok(sim::run_with_programs(s, cfg, seed, &self.0, programs).capture)
    }
}

/// One task graph to ask the queries on.
#[derive(Debug, Clone)]
pub struct Graph {
    pub name: String,
    /// `static` (the catalog's routing) or `dynamic` (data-dependent MoE routing).
    pub kind: &'static str,
    pub schedule: Schedule,
}

/// The catalog's scenarios (a matched variant at the lateness its pair asks
/// for, uncalibrated), then one compound graph (see [`compound`]), each
/// static and dynamic.
pub fn graphs(scenarios: &[MkScenario], workers: u32) -> Vec<Graph> {
    let mut out = Vec::new();
    let mut both = |name: &str, s: Schedule, seed: u64| {
        let mut d = s.clone();
        schedule::moe_route(&mut d, crate::mix2(seed, 0x30e));
        out.push(Graph {
            name: name.to_string(),
            kind: "static",
            schedule: s,
        });
        out.push(Graph {
            name: name.to_string(),
            kind: "dynamic",
            schedule: d,
        });
    };
    for sc in scenarios {
        let w = if sc.workers == 0 { workers } else { sc.workers };
        let magnitude_us = match &sc.injection.match_variant {
            Some(m) => scenarios
                .iter()
                .find(|o| o.family == sc.family && &o.variant == m)
                .map(|o| o.injection.magnitude_us)
                .unwrap_or(sc.injection.magnitude_us),
            None => sc.injection.magnitude_us,
        };
        let amount = schedule::amount_for(sc, w, magnitude_us * 1e3);
        both(&sc.name, schedule::build(sc, w, Some(amount)), sc.seed);
    }
    if let Some(sc) = scenarios.first() {
        let w = if sc.workers == 0 { workers } else { sc.workers };
        both(COMPOUND, compound(&schedule::build(sc, w, None)), sc.seed);
    }
    out
}

/// Name of the compound graph.
pub const COMPOUND: &str = "compound.slow-comm-then-late-notify";

/// Two faults in request 1 of a no-injection graph: its decode step 1's
/// communication runs 6 µs longer (past the 12 µs SLO of `slo-waits`), and
/// the first layer's all-reduce notification of steps 2 and 3 reaches its
/// waiters 40 µs late — only step 2's waits follow a step over the SLO.
pub fn compound(twin: &Schedule) -> Schedule {
    let mut s = twin.clone();
    for t in s
        .tasks
        .iter_mut()
        .filter(|t| t.class_id == 2 && t.req_gen == 1 && t.task_gen == 1)
    {
        t.extra_ns = 6_000;
    }
    for gen in [2, 3] {
        let waited = s
            .tasks
            .iter()
            .find(|t| {
                t.class_id == 2 && t.req_gen == 1 && t.task_gen == gen && t.wait_event != NONE
            })
            .map(|t| t.wait_event);
        if let Some(e) = waited {
            s.events[e as usize].postpone_ns = 40_000;
        }
    }
    s
}

/// One (graph, query) result.
#[derive(Debug, Clone, Serialize)]
pub struct QueryRow {
    pub graph: String,
    pub kind: String,
    pub query: String,
    pub truth: Vec<u64>,
    pub ebpf: Vec<u64>,
    pub config: Vec<u64>,
    pub ebpf_correct: bool,
    pub config_correct: bool,
    pub ebpf_bytes: u64,
    pub config_bytes: u64,
    /// Program runs that completed / hook events with a program.
    pub ebpf_coverage: f64,
    pub ebpf_dropped: u64,
    /// What the configuration recorded / what it was asked for.
    pub config_coverage: f64,
    pub insns_per_run: f64,
}

fn coverage(observed: u64, eligible: u64) -> f64 {
    if eligible == 0 {
        1.0
    } else {
        observed as f64 / eligible as f64
    }
}

/// Every query on every graph.
pub fn run(
    ex: &mut dyn ProgramExecutor,
    graphs: &[Graph],
    seed: u64,
) -> Result<Vec<QueryRow>, String> {
    if let Some(why) = programs::unavailable() {
        return Err(why.into());
    }
    let mut rows = Vec::new();
    for (gi, g) in graphs.iter().enumerate() {
        for (qi, q) in QUERIES.iter().enumerate() {
            let elf = programs::object(q.program)
                .ok_or_else(|| format!("program {} was not built", q.program))?;
            let set = load(q.program, elf).map_err(|e| e.to_string())?;
            let mut att = Attachment::new(set).map_err(|e| e.to_string())?;
            let launch_seed = crate::mix2(seed, (gi * 16 + qi) as u64);
            let log = ex.launch_programs(
                &g.schedule,
                &MonitorConfig::task_log(u32::MAX),
                launch_seed,
                Some(&mut att),
            )?;
            let truth = (q.truth)(&g.schedule, &records(&g.schedule, &log));
            let ebpf = (q.from_maps)(&att.set, &att.maps);
            let cfg = (q.config)();
            let cap = ex.launch_programs(&g.schedule, &cfg, launch_seed, None)?;
            let config = (q.from_config)(&g.schedule, &cap);
            let cov = cap.total_coverage();
            let runs: u64 = att.observed.iter().sum();
            rows.push(QueryRow {
                graph: g.name.clone(),
                kind: g.kind.into(),
                query: q.name.into(),
                ebpf_correct: ebpf == truth,
                config_correct: config == truth,
                truth,
                ebpf,
                config,
                ebpf_bytes: att.exported_bytes(),
                config_bytes: cap.bytes_exported,
                ebpf_coverage: coverage(runs, att.eligible.iter().sum()),
                ebpf_dropped: att.dropped.iter().sum(),
                config_coverage: coverage(cov.observed, cov.eligible),
                insns_per_run: att.insns as f64 / runs.max(1) as f64,
            });
        }
    }
    Ok(rows)
}

/// Per query and graph kind: (query, kind, cases, eBPF correct, config correct, mean eBPF bytes, mean config bytes).
pub fn summarize(rows: &[QueryRow]) -> Vec<(String, String, usize, usize, usize, u64, u64)> {
    let mut out = Vec::new();
    for q in QUERIES.iter() {
        for kind in ["static", "dynamic"] {
            let r: Vec<&QueryRow> = rows
                .iter()
                .filter(|r| r.query == q.name && r.kind == kind)
                .collect();
            if r.is_empty() {
                continue;
            }
            let n = r.len();
            out.push((
                q.name.to_string(),
                kind.to_string(),
                n,
                r.iter().filter(|r| r.ebpf_correct).count(),
                r.iter().filter(|r| r.config_correct).count(),
                r.iter().map(|r| r.ebpf_bytes).sum::<u64>() / n as u64,
                r.iter().map(|r| r.config_bytes).sum::<u64>() / n as u64,
            ));
        }
    }
    out
}
