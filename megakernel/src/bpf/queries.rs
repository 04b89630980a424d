//! Diagnostic questions that need a program, not a setting: each has its
//! monitor program (`megakernel/monitors/<program>.bpf.c`), its ground truth
//! computed from the full task log of the same launch, the answer read from
//! the program's maps, and the fixed-configuration monitor's best attempt (a
//! configuration chosen for the question under the track's telemetry budget,
//! answered from what it captured).

use super::abi::ProgramSet;
use super::interp::Maps;
use crate::schedule::{Schedule, NONE};
use ground_truth::megakernel::{Capture, HookKind, MonitorConfig, CLASSES};
use std::collections::BTreeMap;

/// The telemetry budget of the fixed-configuration attempts: events per worker ring
/// (the track's `task-log-budget`).
pub const BUDGET_EVENTS_PER_WORKER: u32 = 24;

/// One task as the full log saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskRecord {
    pub task: u32,
    pub class: u32,
    pub task_gen: u32,
    pub req_gen: u32,
    pub worker: u32,
    pub dep_event: u32,
    pub trigger_event: u32,
    /// The event waited on (NONE: no wait).
    pub wait_event: u32,
    pub start: u64,
    pub end: u64,
    pub wait_ns: u64,
}

impl TaskRecord {
    pub fn exec(&self) -> u64 {
        self.end - self.start
    }
}

/// Every task's record from a full task log of a launch of `s`.
pub fn records(s: &Schedule, log: &Capture) -> Vec<TaskRecord> {
    let mut r: Vec<TaskRecord> = s
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| TaskRecord {
            task: i as u32,
            class: t.class_id,
            task_gen: t.task_gen,
            req_gen: t.req_gen,
            worker: t.worker,
            dep_event: t.dep_event,
            trigger_event: t.trigger_event,
            wait_event: t.wait_event,
            start: 0,
            end: 0,
            wait_ns: 0,
        })
        .collect();
    let mut wait_begin = vec![0u64; r.len()];
    for e in &log.events {
        let Some(t) = r.get_mut(e.task as usize) else {
            continue;
        };
        match e.kind {
            HookKind::Start => {
                t.start = e.ts;
                t.worker = e.worker;
            }
            HookKind::End => t.end = e.ts,
            HookKind::WaitBegin => wait_begin[e.task as usize] = e.ts,
            HookKind::WaitEnd => t.wait_ns = e.ts - wait_begin[e.task as usize],
            _ => {}
        }
    }
    r
}

fn step_key(req: u32, gen: u32) -> usize {
    ((req & 3) * 16 + (gen & 15)) as usize
}

/// One query.
pub struct Query {
    pub name: &'static str,
    /// Its monitor program (`megakernel/monitors/<program>.bpf.c`).
    pub program: &'static str,
    pub question: &'static str,
    /// Why a fixed configuration cannot express it.
    pub why_not_a_config: &'static str,
    pub truth: fn(&Schedule, &[TaskRecord]) -> Vec<u64>,
    pub from_maps: fn(&ProgramSet, &Maps) -> Vec<u64>,
    /// The fixed configuration's best attempt at the question.
    pub config: fn() -> MonitorConfig,
    pub from_config: fn(&Schedule, &Capture) -> Vec<u64>,
}

fn budget_log(name: &str, class_mask: u32, kinds: &[HookKind]) -> MonitorConfig {
    MonitorConfig {
        name: name.into(),
        class_mask,
        event_mask: kinds.iter().map(|k| 1u32 << k.id()).sum(),
        ..MonitorConfig::task_log_budget(BUDGET_EVENTS_PER_WORKER)
    }
}

// slo-waits ------------------------------------------------------------------

const SLO_WAIT_NS: u64 = 20_000;
const SLO_CLASS: u32 = 2;
const SLO_EXEC_NS: u64 = 12_000;

fn slo_truth(_: &Schedule, r: &[TaskRecord]) -> Vec<u64> {
    let mut slow = [false; 64];
    for t in r
        .iter()
        .filter(|t| t.class == SLO_CLASS && t.exec() > SLO_EXEC_NS)
    {
        slow[step_key(t.req_gen, t.task_gen)] = true;
    }
    let n = r
        .iter()
        .filter(|t| {
            t.wait_event != NONE
                && t.req_gen == 1
                && t.wait_ns > SLO_WAIT_NS
                && t.task_gen > 0
                && slow[step_key(t.req_gen, t.task_gen - 1)]
        })
        .count();
    vec![n as u64]
}

fn slo_maps(set: &ProgramSet, m: &Maps) -> Vec<u64> {
    vec![m.array(set, "count")[0]]
}

fn slo_config() -> MonitorConfig {
    MonitorConfig {
        req_gen_min: 1,
        req_gen_max: 1,
        min_span_ns: SLO_WAIT_NS + 1,
        ..budget_log("cfg-slo-waits", u32::MAX, &[HookKind::WaitEnd])
    }
}

/// Waits over the threshold in request 1 past its first step; the SLO
/// predicate (state left by other hooks) is not expressible, so it is ignored.
fn slo_from_config(_: &Schedule, c: &Capture) -> Vec<u64> {
    let cov = c.total_coverage();
    let first_step = c.events.iter().filter(|e| e.task_gen == 0).count() as u64;
    vec![(cov.observed + cov.dropped).saturating_sub(first_step)]
}

// escalate-p99 ---------------------------------------------------------------

const ESC_CLASS: u32 = 2;
const ESC_BOUND_NS: u64 = 12_000;
const ESC_RING: u64 = 256;

fn esc_truth(_: &Schedule, r: &[TaskRecord]) -> Vec<u64> {
    let mut over = [0u64; 64];
    let mut total = [0u64; 64];
    for t in r.iter().filter(|t| t.class == ESC_CLASS) {
        let k = step_key(t.req_gen, t.task_gen);
        total[k] += 1;
        over[k] += (t.exec() > ESC_BOUND_NS) as u64;
    }
    let n = r
        .iter()
        .filter(|t| t.class == ESC_CLASS && t.exec() > ESC_BOUND_NS && t.task_gen > 0)
        .filter(|t| {
            let k = step_key(t.req_gen, t.task_gen);
            over[k - 1] * 100 > total[k - 1]
        })
        .count() as u64;
    vec![
        n.min(ESC_RING),
        n.saturating_sub(ESC_RING),
        esc_steps(&over, &total),
    ]
}

/// Steps escalated: over-bound tasks after a step whose share over the bound passed 1 %.
fn esc_steps(over: &[u64], total: &[u64]) -> u64 {
    (0..64usize)
        .filter(|&k| k % 16 > 0 && over[k] > 0 && over[k - 1] * 100 > total[k - 1])
        .fold(0u64, |acc, k| acc | 1 << k)
}

fn esc_maps(set: &ProgramSet, m: &Maps) -> Vec<u64> {
    let ring = set.map_index("raw").map(|i| m.ring_counts(set, i));
    let (written, dropped) = ring.unwrap_or((0, 0));
    let steps = esc_steps(&m.array(set, "over"), &m.array(set, "total"));
    vec![written as u64, dropped as u64, steps]
}

fn esc_config() -> MonitorConfig {
    MonitorConfig {
        min_span_ns: ESC_BOUND_NS + 1,
        ..budget_log("cfg-escalate-p99", 1 << ESC_CLASS, &[HookKind::End])
    }
}

/// Every over-bound task's end is logged (no conditional escalation): the
/// count is every over-bound task, the steps those seen.
fn esc_from_config(_: &Schedule, c: &Capture) -> Vec<u64> {
    let cov = c.total_coverage();
    let n = cov.observed + cov.dropped;
    let steps = c
        .events
        .iter()
        .fold(0u64, |acc, e| acc | 1 << step_key(e.req_gen, e.task_gen));
    vec![n.min(ESC_RING), n.saturating_sub(ESC_RING), steps]
}

// skew-phase -----------------------------------------------------------------

/// [the communication phase (event) with the most wait, its skewed gemm tasks, all skewed gemm tasks].
fn skew_answer(skewed: &BTreeMap<u64, u64>, wait: &BTreeMap<u64, u64>) -> Vec<u64> {
    let phase = wait
        .iter()
        .fold(
            (0u64, 0u64),
            |best, (&p, &w)| if w > best.1 { (p, w) } else { best },
        )
        .0;
    vec![
        phase,
        skewed.get(&phase).copied().unwrap_or(0),
        skewed.values().sum(),
    ]
}

/// Skewed tasks per released phase: beyond the first of its operator on each worker.
fn skew_counts(gemm: impl Iterator<Item = (u32, u32)>) -> BTreeMap<u64, u64> {
    let mut per: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    for (phase, worker) in gemm {
        *per.entry((phase, worker)).or_default() += 1;
    }
    let mut out = BTreeMap::new();
    for ((phase, _), n) in per {
        *out.entry(phase as u64).or_default() += n.saturating_sub(1);
    }
    out
}

fn skew_truth(_: &Schedule, r: &[TaskRecord]) -> Vec<u64> {
    let skewed = skew_counts(
        r.iter()
            .filter(|t| t.class == 1)
            .map(|t| (t.trigger_event, t.worker)),
    );
    let mut wait = BTreeMap::new();
    for t in r.iter().filter(|t| t.class == 2 && t.wait_event != NONE) {
        *wait.entry(t.wait_event as u64).or_default() += t.wait_ns;
    }
    skew_answer(&skewed, &wait)
}

fn skew_maps(set: &ProgramSet, m: &Maps) -> Vec<u64> {
    let to_map = |v: Vec<u64>| -> BTreeMap<u64, u64> {
        v.into_iter()
            .enumerate()
            .filter(|(_, x)| *x != 0)
            .map(|(i, x)| (i as u64, x))
            .collect()
    };
    skew_answer(
        &to_map(m.array(set, "skewed")),
        &to_map(m.array(set, "wait_sum")),
    )
}

fn skew_config() -> MonitorConfig {
    budget_log(
        "cfg-skew-phase",
        (1 << 1) | (1 << 2),
        &[HookKind::Start, HookKind::WaitEnd],
    )
}

/// Gemm starts (worker, released phase from the graph) and communication
/// wait ends (phase = the event waited on), as far as the budget kept them.
fn skew_from_config(s: &Schedule, c: &Capture) -> Vec<u64> {
    let gemm = c
        .events
        .iter()
        .filter(|e| e.kind == HookKind::Start && e.class == 1)
        .map(|e| (s.tasks[e.task as usize].trigger_event, e.worker));
    let skewed = skew_counts(gemm);
    let mut begin: BTreeMap<u32, u64> = BTreeMap::new();
    let mut wait = BTreeMap::new();
    for e in &c.events {
        match e.kind {
            HookKind::WaitBegin => {
                begin.insert(e.task, e.ts);
            }
            HookKind::WaitEnd if e.class == 2 => {
                // Without the begin event the span is unknown: the budget log keeps only the end.
                let span = begin.get(&e.task).map(|b| e.ts - b).unwrap_or(0);
                *wait.entry(e.aux as u64).or_default() += span.max(1);
            }
            _ => {}
        }
    }
    skew_answer(&skewed, &wait)
}

// step-max-wait --------------------------------------------------------------

fn step_slot(req: u32, gen: u32) -> usize {
    ((req & 1) * 8 + (gen & 7)) as usize
}

fn step_max_truth(_: &Schedule, r: &[TaskRecord]) -> Vec<u64> {
    let mut v = vec![0u64; 16];
    for t in r.iter().filter(|t| t.wait_event != NONE) {
        let k = step_slot(t.req_gen, t.task_gen);
        v[k] = v[k].max(t.wait_ns);
    }
    v
}

fn step_max_maps(set: &ProgramSet, m: &Maps) -> Vec<u64> {
    let a = m.array(set, "max_wait");
    (0..16)
        .map(|k| a[k * 256..(k + 1) * 256].iter().copied().max().unwrap_or(0))
        .collect()
}

fn step_max_config() -> MonitorConfig {
    budget_log(
        "cfg-step-max-wait",
        u32::MAX,
        &[HookKind::WaitBegin, HookKind::WaitEnd],
    )
}

fn step_max_from_config(_: &Schedule, c: &Capture) -> Vec<u64> {
    let mut v = vec![0u64; 16];
    let mut begin: BTreeMap<u32, u64> = BTreeMap::new();
    for e in &c.events {
        match e.kind {
            HookKind::WaitBegin => {
                begin.insert(e.task, e.ts);
            }
            HookKind::WaitEnd => {
                if let Some(b) = begin.get(&e.task) {
                    let k = step_slot(e.req_gen, e.task_gen);
                    v[k] = v[k].max(e.ts - b);
                }
            }
            _ => {}
        }
    }
    v
}

// wait-over-exec -------------------------------------------------------------

fn woe_truth(_: &Schedule, r: &[TaskRecord]) -> Vec<u64> {
    let mut v = vec![0u64; CLASSES.len()];
    for t in r.iter().filter(|t| t.wait_ns > t.exec()) {
        v[(t.class as usize).min(CLASSES.len() - 1)] += 1;
    }
    v
}

fn woe_maps(set: &ProgramSet, m: &Maps) -> Vec<u64> {
    m.array(set, "waited_longer")[..CLASSES.len()].to_vec()
}

fn woe_config() -> MonitorConfig {
    budget_log(
        "cfg-wait-over-exec",
        u32::MAX,
        &[
            HookKind::WaitBegin,
            HookKind::WaitEnd,
            HookKind::Start,
            HookKind::End,
        ],
    )
}

/// Tasks whose wait and execution were both captured.
fn woe_from_config(s: &Schedule, c: &Capture) -> Vec<u64> {
    let r = records(s, c);
    let mut seen = vec![[false; 4]; s.tasks.len()];
    for e in &c.events {
        let slot = match e.kind {
            HookKind::WaitBegin => 0,
            HookKind::WaitEnd => 1,
            HookKind::Start => 2,
            HookKind::End => 3,
            _ => continue,
        };
        if let Some(x) = seen.get_mut(e.task as usize) {
            x[slot] = true;
        }
    }
    let mut v = vec![0u64; CLASSES.len()];
    for t in r
        .iter()
        .filter(|t| seen[t.task as usize].iter().all(|&b| b) && t.wait_ns > t.exec())
    {
        v[(t.class as usize).min(CLASSES.len() - 1)] += 1;
    }
    v
}

/// The queries, in report order.
pub const QUERIES: [Query; 5] = [
    Query {
        name: "slo-waits",
        program: "slo_waits",
        question: "dependency waits > 20 µs in request generation 1, counted only while the SLO \
                   predicate holds (the request's previous decode step had a communication task \
                   executing > 12 µs)",
        why_not_a_config: "the predicate is state one hook leaves for another; a configuration \
                           filters each event on its own fields",
        truth: slo_truth,
        from_maps: slo_maps,
        config: slo_config,
        from_config: slo_from_config,
    },
    Query {
        name: "escalate-p99",
        program: "escalate_p99",
        question: "raw events of communication tasks over 12 µs, escalated only in decode steps \
                   after one whose communication p99 crossed 12 µs",
        why_not_a_config: "escalation depends on a running percentile; a configuration logs \
                           every event over a span threshold or none",
        truth: esc_truth,
        from_maps: esc_maps,
        config: esc_config,
        from_config: esc_from_config,
    },
    Query {
        name: "skew-phase",
        program: "skew_phase",
        question: "the communication phase with the most dependency wait, the routing-skewed gemm \
                   tasks of the operator that released it, and all skewed gemm tasks",
        why_not_a_config: "per-class worker counts and wait histograms are not split by phase; \
                           a log needs two events per task to attribute them",
        truth: skew_truth,
        from_maps: skew_maps,
        config: skew_config,
        from_config: skew_from_config,
    },
    Query {
        name: "step-max-wait",
        program: "step_max_wait",
        question: "the longest dependency wait of each decode step of each request",
        why_not_a_config: "aggregates keep one maximum per class and phase, not per step",
        truth: step_max_truth,
        from_maps: step_max_maps,
        config: step_max_config,
        from_config: step_max_from_config,
    },
    Query {
        name: "wait-over-exec",
        program: "wait_over_exec",
        question: "per class, the tasks that waited on a dependency longer than they then executed",
        why_not_a_config: "a comparison of two spans of the same task; histograms keep each \
                           span on its own",
        truth: woe_truth,
        from_maps: woe_maps,
        config: woe_config,
        from_config: woe_from_config,
    },
];
