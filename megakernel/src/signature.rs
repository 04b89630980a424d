//! The internal signature of a run, from a full task log: what differs inside
//! the kernel when the outer duration does not.

use ground_truth::megakernel::{class_id, Capture, HookKind, TaskTelemetry, CLASSES};
use ground_truth::{Bundle, NodeKind};
use serde::Serialize;

/// Per-class phase statistics and scheduler facts of one launch.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Signature {
    /// Mean execution per class, µs.
    pub exec_mean_us: Vec<f64>,
    /// Longest dependency wait per class, µs.
    pub wait_max_us: Vec<f64>,
    /// Longest ready → taken-up per class, µs.
    pub queue_max_us: Vec<f64>,
    /// Largest share of one class's tasks on one worker, over the mean share.
    pub worker_skew: Vec<f64>,
    /// Queue-pressure events.
    pub pressure_events: u64,
    /// Tasks whose start was logged.
    pub tasks_seen: u64,
}

/// The signature of a case's full task log (`None`: the case ran no
/// `task-log` monitor), from its bundle and task telemetry. Each task's class
/// comes from its node in the bundle's ground truth (task nodes are in task
/// order); a node that names no known class counts as class 0.
pub fn of_task_log(bundle: &Bundle, t: &TaskTelemetry) -> Option<Signature> {
    let classes: Vec<u32> = bundle
        .ground_truth
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Task)
        .map(|n| n.detail.operator.as_deref().and_then(class_id).unwrap_or(0))
        .collect();
    t.captures
        .iter()
        .find(|x| x.config.name == "task-log")
        .map(|x| of(x, t.tasks as usize, &classes, t.workers))
}

/// The signature of a capture that logged every task.
pub fn of(c: &Capture, tasks: usize, classes_of: &[u32], workers: u32) -> Signature {
    let t = c.task_times(tasks);
    let n = CLASSES.len();
    let mut exec = vec![(0f64, 0u64); n];
    let mut wait = vec![0f64; n];
    let mut queue = vec![0f64; n];
    let mut per_worker = vec![vec![0u32; workers as usize]; n];
    let mut seen = 0;
    for (i, tt) in t.iter().enumerate() {
        if tt.start == 0 || tt.end == 0 {
            continue;
        }
        seen += 1;
        let c = classes_of[i] as usize;
        if c >= n {
            continue;
        }
        exec[c].0 += (tt.end - tt.start) as f64 / 1e3;
        exec[c].1 += 1;
        if tt.wait_begin != 0 && tt.wait_end >= tt.wait_begin {
            wait[c] = wait[c].max((tt.wait_end - tt.wait_begin) as f64 / 1e3);
        }
        let taken = if tt.wait_begin != 0 {
            tt.wait_begin
        } else {
            tt.start
        };
        if tt.ready != 0 && taken >= tt.ready {
            queue[c] = queue[c].max((taken - tt.ready) as f64 / 1e3);
        }
        if (tt.worker as usize) < per_worker[c].len() {
            per_worker[c][tt.worker as usize] += 1;
        }
    }
    let skew = per_worker
        .iter()
        .map(|w| {
            let total: u32 = w.iter().sum();
            let used = w.iter().filter(|&&x| x > 0).count().max(1);
            let mean = total as f64 / used as f64;
            if mean == 0.0 {
                0.0
            } else {
                *w.iter().max().unwrap_or(&0) as f64 / mean
            }
        })
        .collect();
    Signature {
        exec_mean_us: exec
            .iter()
            .map(|(s, k)| if *k == 0 { 0.0 } else { s / *k as f64 })
            .collect(),
        wait_max_us: wait,
        queue_max_us: queue,
        worker_skew: skew,
        pressure_events: c.events_of(HookKind::QueuePressure) as u64,
        tasks_seen: seen,
    }
}
