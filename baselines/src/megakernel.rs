//! Profilers of the megakernel track (docs/design.md, "The megakernel track").
//!
//! A megakernel case is one persistent kernel; every operator is a task class
//! inside it. These profilers read a [`TaskView`] — the standard trace view
//! (what kernel-level CUPTI sees) plus at most one monitor's capture and the
//! same monitor's capture of a known-good run — and answer the two queries of
//! the case: `q0` the cause of the kernel's lateness, `q1` (an `operator`
//! question) the task class affected.
//!
//! | name | reads | method |
//! |---|---|---|
//! | `mk-kernel-cupti` | kernel records only | the kernel's lateness; no task can be seen, so one fixed answer |
//! | `mk-task-log` | `task-log`, `task-log-budget` | per-task phases from every hook, coverage-aware |
//! | `mk-aggregate` | `aggregate`, `aggregate-sampled`, `ebpf`, `ebpf-sampled` | per-class phase histograms, maxima, worker counts, queue pressure, coverage-aware (`ebpf*`: the same aggregates built by the diagnosis monitor program, megakernel/README.md) |
//! | `mk-mpk-style` | `task-log`, `task-log-budget` | what Mirage MPK's recorder keeps: one span per task from dequeue to end (dependency waits hidden inside), no ready / pressure events, no drop count |
//! | `mk-pc-sampling` | `pc-sampling` | samples per task-class code region, the shared wait loop and the idle loop |
//!
//! The coverage-aware profilers never claim a complete answer, nor a top score
//! of 0.8 or more, when any class's coverage (observed / eligible) is below 1:
//! a low count that may be low coverage is reported as such.

use crate::Profiler;
use ground_truth::megakernel::{class_name, Capture, HookKind, TaskView, CLASSES};
use ground_truth::trace::Record;
use ground_truth::{
    CauseLabel, ClaimedEdge, Diagnosis, EdgeType, Evidence, Explanation, ExplanationMeta, Phases,
    Question, RankedCause, TraceView, SCHEMA_VERSION,
};
use std::time::Instant;

/// A profiler of task views.
pub trait TaskProfiler: Send + Sync {
    fn name(&self) -> &str;
    /// Whether it reads captures of this monitor (`None`: reads no capture).
    fn reads(&self, monitor: Option<&str>) -> bool;
    fn explain_tasks(&self, view: &TaskView) -> Explanation;
}

/// The track's profilers, in leaderboard order.
pub const TRACK_NAMES: [&str; 5] = [
    "mk-kernel-cupti",
    "mk-mpk-style",
    "mk-pc-sampling",
    "mk-task-log",
    "mk-aggregate",
];

/// A track profiler by name.
pub fn track_profiler(name: &str) -> Option<Box<dyn TaskProfiler>> {
    Some(match name {
        "mk-kernel-cupti" => Box::new(KernelCupti),
        "mk-task-log" => Box::new(TaskLog),
        "mk-aggregate" => Box::new(Aggregate),
        "mk-mpk-style" => Box::new(MpkStyle),
        "mk-pc-sampling" => Box::new(PcSampler),
        _ => return None,
    })
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The causes of the track, in a fixed order (ties and the blind answer).
const TRACK_CAUSES: [CauseLabel; 5] = [
    CauseLabel::TaskClassDelay,
    CauseLabel::LateNotification,
    CauseLabel::RoutingSkew,
    CauseLabel::QueueOversubscription,
    CauseLabel::ReadyStarvation,
];

/// The kernel of the view (the longest kernel record) and its launch call.
fn kernel_of(v: &TraceView) -> Option<(&Record, Option<&Record>)> {
    let k = v
        .records
        .iter()
        .filter(|r| matches!(r, Record::Kernel { .. }))
        .max_by_key(|r| {
            let (s, e) = r.interval();
            e.saturating_sub(s)
        })?;
    let api = v
        .records
        .iter()
        .find(|r| matches!(r, Record::Api { .. }) && r.correlation_id() == k.correlation_id());
    Some((k, api))
}

struct Answer {
    causes: Vec<(CauseLabel, f64)>,
    class: Option<u32>,
    complete: bool,
}

fn explanation(name: &str, view: &TaskView, started: Instant, a: Answer) -> Explanation {
    let base = &view.base;
    let mut edges = Vec::new();
    let mut path = Vec::new();
    let mut lateness = 0.0;
    if let Some((k, api)) = kernel_of(base) {
        if let Some(api) = api {
            edges.push(ClaimedEdge {
                src: api.rid(),
                dst: k.rid(),
                kind: EdgeType::Launch,
                evidence: Evidence::Explicit,
                confidence: 1.0,
            });
            path.push(api.rid());
        }
        path.push(k.rid());
        let (s, e) = k.interval();
        if view.reference_kernel_ns > 0 {
            lateness = (e.saturating_sub(s) as f64 - view.reference_kernel_ns as f64).max(0.0);
        }
    }
    let mut causes: Vec<RankedCause> = a
        .causes
        .iter()
        .map(|&(label, score)| RankedCause {
            label,
            score: (score.clamp(0.0, 1.0) * 1000.0).round() / 1000.0,
        })
        .collect();
    if causes.is_empty() {
        causes.push(RankedCause {
            label: CauseLabel::None,
            score: 0.0,
        });
    }
    let diagnoses = base
        .queries
        .iter()
        .map(|q| Diagnosis {
            query: q.id.clone(),
            causes: causes.clone(),
            critical_path: path.clone(),
            phases: Phases {
                execution: lateness,
                ..Default::default()
            },
            complete: a.complete,
            first_unresolved: None,
            answer: match q.question {
                Question::Operator => a.class.map(class_name),
                _ => None,
            },
        })
        .collect();
    Explanation {
        schema_version: SCHEMA_VERSION,
        meta: ExplanationMeta {
            profiler: name.to_string(),
            version: VERSION.to_string(),
            view: base.spec,
            wall_ms: started.elapsed().as_secs_f64() * 1000.0,
            failure: None,
        },
        edges,
        attribution: Vec::new(),
        diagnoses,
    }
}

/// Kernel-level CUPTI only: the megakernel is one kernel record. The profiler
/// sees that it is late, not why: it gives the same ranked answer to every
/// case and abstains on the task class, so it cannot beat chance on a pair.
pub struct KernelCupti;

impl KernelCupti {
    fn answer() -> Answer {
        Answer {
            causes: TRACK_CAUSES.iter().map(|&c| (c, 0.2)).collect(),
            class: None,
            complete: false,
        }
    }
}

impl Profiler for KernelCupti {
    fn name(&self) -> &str {
        "mk-kernel-cupti"
    }
    fn version(&self) -> &str {
        VERSION
    }
    fn explain(&self, view: &TraceView) -> Explanation {
        let tv = TaskView {
            schema_version: SCHEMA_VERSION,
            base: view.clone(),
            workers: 0,
            tasks: 0,
            capture: None,
            reference: None,
            reference_kernel_ns: 0,
        };
        explanation("mk-kernel-cupti", &tv, Instant::now(), Self::answer())
    }
}

impl TaskProfiler for KernelCupti {
    fn name(&self) -> &str {
        "mk-kernel-cupti"
    }
    fn reads(&self, monitor: Option<&str>) -> bool {
        monitor.is_none()
    }
    fn explain_tasks(&self, view: &TaskView) -> Explanation {
        explanation("mk-kernel-cupti", view, Instant::now(), Self::answer())
    }
}

/// Per-class statistics a decision is made from.
#[derive(Debug, Clone, Default)]
struct ClassStats {
    n: u64,
    /// Per phase (notify, queue, wait, exec): sum and max, ns.
    sum: [f64; 4],
    max: [f64; 4],
    /// Tasks per worker.
    workers: Vec<u32>,
}

impl ClassStats {
    fn mean(&self, k: usize) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum[k] / self.n as f64
        }
    }
    fn busiest(&self) -> u32 {
        self.workers.iter().copied().max().unwrap_or(0)
    }
}

#[derive(Debug, Clone, Default)]
struct Stats {
    classes: Vec<ClassStats>,
    crossings: u64,
    /// Lowest per-class coverage (observed / eligible); 1 when unknown-but-assumed.
    coverage: f64,
    /// Whether queue / pressure facts exist in this data.
    has_queue: bool,
}

const QUEUE: usize = 1;
const WAIT: usize = 2;
const EXEC: usize = 3;

fn coverage_min(c: &Capture) -> f64 {
    c.coverage
        .iter()
        .filter(|x| x.eligible > 0)
        .map(|x| x.ratio())
        .fold(1.0, f64::min)
}

/// Per-task phases from hook events. With `mpk_spans`, only what MPK's
/// recorder keeps: one span from dequeue (wait begin, or start) to end.
fn stats_from_log(c: &Capture, workers: u32, mpk_spans: bool) -> Stats {
    let n_tasks = c
        .events
        .iter()
        .map(|e| e.task as usize + 1)
        .max()
        .unwrap_or(0);
    let t = c.task_times(n_tasks);
    let crossings = c
        .events
        .iter()
        .filter(|e| e.kind == HookKind::QueuePressure)
        .count() as u64;
    let mut classes = vec![
        ClassStats {
            workers: vec![0; workers as usize],
            ..Default::default()
        };
        CLASSES.len()
    ];
    for x in t.iter().filter(|x| x.seen) {
        let Some(cs) = classes.get_mut(x.class as usize) else {
            continue;
        };
        if x.start == 0 || x.end < x.start {
            continue;
        }
        cs.n += 1;
        if let Some(w) = cs.workers.get_mut(x.worker as usize) {
            *w += 1;
        }
        let mut ph = [0f64; 4];
        if mpk_spans {
            let from = if x.wait_begin != 0 {
                x.wait_begin
            } else {
                x.start
            };
            ph[EXEC] = (x.end - from) as f64;
        } else {
            let taken = if x.wait_begin != 0 {
                x.wait_begin
            } else {
                x.start
            };
            if x.ready != 0 && taken >= x.ready {
                ph[QUEUE] = (taken - x.ready) as f64;
            }
            if x.wait_begin != 0 && x.wait_end >= x.wait_begin {
                ph[WAIT] = (x.wait_end - x.wait_begin) as f64;
            }
            ph[EXEC] = (x.end - x.start) as f64;
        }
        for (k, &p) in ph.iter().enumerate() {
            cs.sum[k] += p;
            cs.max[k] = cs.max[k].max(p);
        }
    }
    Stats {
        classes,
        crossings: if mpk_spans { 0 } else { crossings },
        coverage: if mpk_spans { 1.0 } else { coverage_min(c) },
        has_queue: !mpk_spans,
    }
}

fn stats_from_aggregates(c: &Capture) -> Option<Stats> {
    let a = c.aggregates.as_ref()?;
    let classes = a
        .classes
        .iter()
        .map(|ca| {
            let mut cs = ClassStats {
                n: ca.tasks,
                workers: ca.worker_tasks.clone(),
                ..Default::default()
            };
            for (k, p) in ca.phases.iter().enumerate().take(4) {
                cs.sum[k] = p.sum_ns as f64;
                cs.max[k] = p.max_ns as f64;
            }
            cs
        })
        .collect();
    Some(Stats {
        classes,
        crossings: a.pressure_crossings.iter().map(|&x| x as u64).sum(),
        coverage: coverage_min(c),
        has_queue: true,
    })
}

/// The decision shared by the task-level profilers: compare the case with the
/// known-good reference, phase by phase, in units of the kernel's lateness.
fn decide(cur: &Stats, reference: &Stats, lateness_ns: f64) -> Answer {
    let late = lateness_ns.max(1.0);
    let n = cur.classes.len().min(reference.classes.len());
    let argmax = |f: &dyn Fn(usize) -> f64| -> (usize, f64) {
        (0..n)
            .map(|c| (c, f(c)))
            .fold((0, f64::MIN), |a, b| if b.1 > a.1 { b } else { a })
    };
    let d_wait = |c: usize| cur.classes[c].max[WAIT] - reference.classes[c].max[WAIT];
    let d_queue = |c: usize| cur.classes[c].max[QUEUE] - reference.classes[c].max[QUEUE];
    let skew = |c: usize| cur.classes[c].busiest() as f64 - reference.classes[c].busiest() as f64;
    let rel_exec = |c: usize| {
        let r = reference.classes[c].mean(EXEC);
        if r <= 0.0 {
            0.0
        } else {
            (cur.classes[c].mean(EXEC) - r) / r
        }
    };
    let (wc, wv) = argmax(&d_wait);
    let (qc, qv) = argmax(&d_queue);
    let (sc, sv) = argmax(&skew);
    let (ec, ev) = argmax(&rel_exec);
    let mut scored: Vec<(CauseLabel, f64, usize)> = Vec::new();
    if cur.has_queue && cur.crossings > reference.crossings {
        scored.push((CauseLabel::QueueOversubscription, 1.0, qc));
    }
    scored.push((
        CauseLabel::LateNotification,
        (wv / late).clamp(0.0, 1.0),
        wc,
    ));
    if sv >= 1.0 {
        scored.push((CauseLabel::RoutingSkew, 0.6 + 0.1 * sv.min(3.0), sc));
    }
    if cur.has_queue {
        scored.push((
            CauseLabel::ReadyStarvation,
            (qv / late).clamp(0.0, 1.0) * 0.95,
            qc,
        ));
    }
    scored.push((
        CauseLabel::TaskClassDelay,
        if ev > 0.03 {
            0.5 + ev.min(0.4)
        } else {
            ev.max(0.0)
        },
        ec,
    ));
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (top, top_score, class) = scored[0];
    let complete = cur.coverage >= 0.999 && reference.coverage >= 0.999;
    let cover = cur.coverage.min(reference.coverage);
    let scale = |s: f64| {
        if complete {
            s
        } else {
            // Partial coverage: never confident, whatever the counts say.
            (0.3 + 0.4 * cover) * s.min(1.0)
        }
    };
    let mut causes: Vec<(CauseLabel, f64)> = Vec::new();
    if top_score < 0.2 {
        causes.push((CauseLabel::None, scale(0.5)));
    }
    for (l, s, _) in &scored {
        if !causes.iter().any(|(x, _)| x == l) {
            causes.push((*l, scale(if *l == top { s.max(0.85) } else { s * 0.8 })));
        }
    }
    causes.sort_by(|a, b| b.1.total_cmp(&a.1));
    Answer {
        causes,
        class: (top_score >= 0.2).then_some(class as u32),
        complete,
    }
}

fn lateness(view: &TaskView) -> f64 {
    match kernel_of(&view.base) {
        Some((k, _)) if view.reference_kernel_ns > 0 => {
            let (s, e) = k.interval();
            e.saturating_sub(s) as f64 - view.reference_kernel_ns as f64
        }
        _ => 0.0,
    }
}

fn no_data(view: &TaskView, name: &str, started: Instant) -> Explanation {
    explanation(name, view, started, KernelCupti::answer())
}

/// Both task-log readers: the same decision over the same log, read either
/// as the full event stream or, with `mpk_spans`, as MPK's dequeue-to-end spans.
fn explain_from_log(name: &str, view: &TaskView, mpk_spans: bool) -> Explanation {
    let t = Instant::now();
    let (Some(c), Some(r)) = (&view.capture, &view.reference) else {
        return no_data(view, name, t);
    };
    let a = decide(
        &stats_from_log(c, view.workers, mpk_spans),
        &stats_from_log(r, view.workers, mpk_spans),
        lateness(view),
    );
    explanation(name, view, t, a)
}

/// The full task log (the compiler-native approach), coverage-aware.
pub struct TaskLog;

impl TaskProfiler for TaskLog {
    fn name(&self) -> &str {
        "mk-task-log"
    }
    fn reads(&self, monitor: Option<&str>) -> bool {
        matches!(monitor, Some("task-log" | "task-log-budget"))
    }
    fn explain_tasks(&self, view: &TaskView) -> Explanation {
        explain_from_log(TaskProfiler::name(self), view, false)
    }
}

/// The coverage-carrying aggregation monitor.
pub struct Aggregate;

impl TaskProfiler for Aggregate {
    fn name(&self) -> &str {
        "mk-aggregate"
    }
    fn reads(&self, monitor: Option<&str>) -> bool {
        matches!(
            monitor,
            Some("aggregate" | "aggregate-sampled" | "ebpf" | "ebpf-sampled")
        )
    }
    fn explain_tasks(&self, view: &TaskView) -> Explanation {
        let t = Instant::now();
        let (Some(c), Some(r)) = (
            view.capture.as_ref().and_then(stats_from_aggregates),
            view.reference.as_ref().and_then(stats_from_aggregates),
        ) else {
            return no_data(view, TaskProfiler::name(self), t);
        };
        let a = decide(&c, &r, lateness(view));
        explanation(TaskProfiler::name(self), view, t, a)
    }
}

/// What Mirage MPK's recorder gives: one span per task from dequeue to end,
/// so a dependency wait looks like execution; no ready / queue events; no
/// count of dropped events, so it cannot know its coverage.
pub struct MpkStyle;

impl TaskProfiler for MpkStyle {
    fn name(&self) -> &str {
        "mk-mpk-style"
    }
    fn reads(&self, monitor: Option<&str>) -> bool {
        matches!(monitor, Some("task-log" | "task-log-budget"))
    }
    fn explain_tasks(&self, view: &TaskView) -> Explanation {
        explain_from_log(TaskProfiler::name(self), view, true)
    }
}

/// PC sampling: samples per class body, in the shared wait loop, in the idle loop.
pub struct PcSampler;

impl TaskProfiler for PcSampler {
    fn name(&self) -> &str {
        "mk-pc-sampling"
    }
    fn reads(&self, monitor: Option<&str>) -> bool {
        matches!(monitor, Some("pc-sampling"))
    }
    fn explain_tasks(&self, view: &TaskView) -> Explanation {
        let t = Instant::now();
        let pc = |c: &Option<Capture>| c.as_ref().and_then(|c| c.pc_sampling.clone());
        let (Some(c), Some(r)) = (pc(&view.capture), pc(&view.reference)) else {
            return no_data(view, TaskProfiler::name(self), t);
        };
        if !c.available || !r.available {
            return no_data(view, TaskProfiler::name(self), t);
        }
        let d = |a: u64, b: u64| a as f64 - b as f64;
        let (mut best_c, mut best_rel) = (0usize, f64::MIN);
        for k in 0..c.class_samples.len().min(r.class_samples.len()) {
            let rel = if r.class_samples[k] == 0 {
                0.0
            } else {
                d(c.class_samples[k], r.class_samples[k]) / r.class_samples[k] as f64
            };
            if rel > best_rel {
                best_rel = rel;
                best_c = k;
            }
        }
        let d_wait = d(c.wait_samples, r.wait_samples);
        let d_idle = d(c.idle_samples, r.idle_samples);
        let body: f64 = c.class_samples.iter().sum::<u64>() as f64;
        let a = if best_rel > 0.03 {
            Answer {
                causes: vec![
                    (CauseLabel::TaskClassDelay, 0.7),
                    (CauseLabel::LateNotification, 0.1),
                    (CauseLabel::ReadyStarvation, 0.1),
                ],
                class: Some(best_c as u32),
                complete: false,
            }
        } else if d_wait > 0.01 * body && d_wait >= 0.05 * d_idle {
            // The wait loop is shared code: which class waited is not in the PC.
            Answer {
                causes: vec![
                    (CauseLabel::LateNotification, 0.6),
                    (CauseLabel::TaskClassDelay, 0.2),
                ],
                class: None,
                complete: false,
            }
        } else {
            // Idle time grew: starvation, skew and oversubscription look alike here.
            Answer {
                causes: vec![
                    (CauseLabel::ReadyStarvation, 0.4),
                    (CauseLabel::QueueOversubscription, 0.3),
                    (CauseLabel::RoutingSkew, 0.3),
                ],
                class: None,
                complete: false,
            }
        };
        explanation(TaskProfiler::name(self), view, t, a)
    }
}
