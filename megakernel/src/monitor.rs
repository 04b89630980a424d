//! Monitors: the host-side model of the device's hook logic (used by the
//! simulator, and the reference the device is checked against), and the
//! conversion of what the device wrote into a [`Capture`].

use ground_truth::megakernel::{
    bucket, sampled, Aggregates, Capture, ClassAggregate, Coverage, HookKind, MonitorConfig,
    PhaseAggregate, TaskEvent, BUCKETS, PHASES,
};

/// Device-side maximum number of classes aggregated separately.
pub const MAX_CLASSES: usize = 8;

/// Bytes one logged event takes on the device and on export.
pub const EVENT_BYTES: u64 = 32;
/// Bytes of the per-class coverage counters.
pub const COVERAGE_BYTES: u64 = (MAX_CLASSES * 3 * 8) as u64;

/// The device's monitor configuration struct, from the format's.
pub fn device_config(c: &MonitorConfig) -> kernels::megakernel::MonitorConfig {
    kernels::megakernel::MonitorConfig {
        version: c.version,
        flags: ((c.log as u32) * kernels::megakernel::MON_LOG)
            | ((c.aggregate as u32) * kernels::megakernel::MON_AGGREGATE),
        class_mask: c.class_mask,
        event_mask: c.event_mask,
        req_gen_min: c.req_gen_min,
        req_gen_max: c.req_gen_max,
        sample_period: c.sample_period,
        sample_seed: c.sample_seed,
        min_span_ns: c.min_span_ns,
        ring_capacity: c.ring_capacity,
        pressure_threshold: c.pressure_threshold,
        reserved: [0; 4],
    }
}

/// The hook logic of `mk_hook` / `mk_aggregate`, on the host.
#[derive(Debug, Clone)]
pub struct MonitorState {
    pub cfg: MonitorConfig,
    ring_count: Vec<u32>,
    /// Events written, with the ring (emitting worker) they went to.
    pub events: Vec<TaskEvent>,
    pub eligible: [u64; MAX_CLASSES],
    pub observed: [u64; MAX_CLASSES],
    pub dropped: [u64; MAX_CLASSES],
    hist: Vec<[[u32; BUCKETS]; PHASES.len()]>,
    sum: Vec<[u64; PHASES.len()]>,
    max_key: Vec<[u64; PHASES.len()]>,
    tasks: [u64; MAX_CLASSES],
    worker_class: Vec<Vec<u32>>,
    pub pressure_crossings: Vec<u32>,
    pub max_depth: Vec<u32>,
    workers: u32,
}

/// What a hook is about.
#[derive(Debug, Clone, Copy)]
pub struct HookTask {
    pub task: u32,
    pub class: u32,
    pub task_gen: u32,
    pub req_gen: u32,
}

impl MonitorState {
    pub fn new(cfg: &MonitorConfig, workers: u32) -> MonitorState {
        MonitorState {
            cfg: cfg.clone(),
            ring_count: vec![0; workers as usize],
            events: Vec::new(),
            eligible: [0; MAX_CLASSES],
            observed: [0; MAX_CLASSES],
            dropped: [0; MAX_CLASSES],
            hist: vec![[[0; BUCKETS]; PHASES.len()]; MAX_CLASSES],
            sum: vec![[0; PHASES.len()]; MAX_CLASSES],
            max_key: vec![[0; PHASES.len()]; MAX_CLASSES],
            tasks: [0; MAX_CLASSES],
            worker_class: vec![vec![0; workers as usize]; MAX_CLASSES],
            pressure_crossings: vec![0; workers as usize],
            max_depth: vec![0; workers as usize],
            workers,
        }
    }

    fn eligible_task(&self, t: &HookTask) -> bool {
        (self.cfg.class_mask >> (t.class & 31)) & 1 == 1
            && t.req_gen >= self.cfg.req_gen_min
            && t.req_gen <= self.cfg.req_gen_max
    }

    /// One hook; returns whether the event cost a ring write (for perturbation models).
    #[allow(clippy::too_many_arguments)]
    pub fn hook(
        &mut self,
        emitter: u32,
        kind: HookKind,
        t: &HookTask,
        about_worker: u32,
        aux: u32,
        ts: u64,
        span: u64,
    ) -> bool {
        if !self.cfg.log || (self.cfg.event_mask >> kind.id()) & 1 == 0 || !self.eligible_task(t) {
            return false;
        }
        if matches!(kind, HookKind::End | HookKind::WaitEnd) && span < self.cfg.min_span_ns {
            return false;
        }
        let cls = (t.class as usize).min(MAX_CLASSES - 1);
        self.eligible[cls] += 1;
        if !sampled(t.task, self.cfg.sample_period, self.cfg.sample_seed) {
            return false;
        }
        let slot = &mut self.ring_count[emitter as usize];
        let s = *slot;
        *slot += 1;
        if s >= self.cfg.ring_capacity {
            self.dropped[cls] += 1;
            return true;
        }
        self.events.push(TaskEvent {
            ts,
            kind,
            task: t.task,
            class: t.class,
            worker: about_worker,
            aux,
            task_gen: t.task_gen,
            req_gen: t.req_gen,
        });
        self.observed[cls] += 1;
        true
    }

    /// Queue bookkeeping of a push (depth after it); emits pressure when crossing.
    pub fn push_depth(&mut self, emitter: u32, t: &HookTask, worker: u32, depth: u32, ts: u64) {
        let d = &mut self.max_depth[worker as usize];
        *d = (*d).max(depth);
        if self.cfg.pressure_threshold != 0 && depth == self.cfg.pressure_threshold {
            self.pressure_crossings[worker as usize] += 1;
            self.hook(emitter, HookKind::QueuePressure, t, worker, depth, ts, 0);
        }
    }

    /// Aggregation at a task's end; returns whether it did work.
    pub fn aggregate(&mut self, worker: u32, t: &HookTask, phase: [u64; 4]) -> bool {
        if !self.cfg.aggregate || !self.eligible_task(t) {
            return false;
        }
        let cls = (t.class as usize).min(MAX_CLASSES - 1);
        if !self.cfg.log {
            self.eligible[cls] += 1;
        }
        if !sampled(t.task, self.cfg.sample_period, self.cfg.sample_seed) {
            return false;
        }
        for (k, &p) in phase.iter().enumerate() {
            self.hist[cls][k][bucket(p)] += 1;
            self.sum[cls][k] += p;
            self.max_key[cls][k] = self.max_key[cls][k].max((p << 20) | (t.task as u64 & 0xfffff));
        }
        self.tasks[cls] += 1;
        self.worker_class[cls][worker as usize] += 1;
        if !self.cfg.log {
            self.observed[cls] += 1;
        }
        true
    }

    /// The capture this monitor exported.
    pub fn into_capture(mut self, classes: usize, kernel_ns: u64, config_apply_ns: u64) -> Capture {
        self.events.sort_by_key(|e| (e.ts, e.kind.id(), e.task));
        let aggregates = self.cfg.aggregate.then(|| {
            aggregates_from(
                classes,
                &self.hist,
                &self.sum,
                &self.max_key,
                &self.tasks,
                &self.worker_class,
                &self.pressure_crossings,
                &self.max_depth,
            )
        });
        let coverage = coverage_from(classes, &self.eligible, &self.observed, &self.dropped);
        let bytes = exported_bytes(&self.cfg, self.events.len() as u64, aggregates.as_ref());
        Capture {
            config: self.cfg,
            kernel_ns,
            events: self.events,
            aggregates,
            coverage,
            bytes_exported: bytes,
            config_apply_ns,
            pc_sampling: None,
        }
    }

    pub fn workers(&self) -> u32 {
        self.workers
    }
}

/// Bytes a monitor exports: logged events at 32 bytes, the aggregates in
/// their compact form (non-empty classes: histograms, sums, maxima, worker
/// counts as u32; per-worker pressure as u32 pairs), and the coverage counters.
pub fn exported_bytes(cfg: &MonitorConfig, events: u64, agg: Option<&Aggregates>) -> u64 {
    if !cfg.log && !cfg.aggregate {
        return 0;
    }
    let mut b = COVERAGE_BYTES;
    if cfg.log {
        b += events * EVENT_BYTES;
    }
    if let Some(a) = agg {
        for c in &a.classes {
            b +=
                8 + (PHASES.len() * (BUCKETS * 4 + 8 + 8)) as u64 + 4 * c.worker_tasks.len() as u64;
        }
        b += 8 * a.pressure_crossings.len() as u64;
    }
    b
}

pub(crate) fn coverage_from(
    classes: usize,
    eligible: &[u64],
    observed: &[u64],
    dropped: &[u64],
) -> Vec<Coverage> {
    (0..classes)
        .map(|c| Coverage {
            class: c as u32,
            eligible: eligible[c],
            observed: observed[c],
            dropped: dropped[c],
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn aggregates_from(
    classes: usize,
    hist: &[[[u32; BUCKETS]; 4]],
    sum: &[[u64; 4]],
    max_key: &[[u64; 4]],
    tasks: &[u64],
    worker_class: &[Vec<u32>],
    crossings: &[u32],
    max_depth: &[u32],
) -> Aggregates {
    Aggregates {
        classes: (0..classes)
            .map(|c| ClassAggregate {
                class: c as u32,
                tasks: tasks[c],
                phases: (0..PHASES.len())
                    .map(|k| PhaseAggregate {
                        hist: hist[c][k].to_vec(),
                        sum_ns: sum[c][k],
                        max_ns: max_key[c][k] >> 20,
                        max_task: (max_key[c][k] & 0xfffff) as u32,
                    })
                    .collect(),
                worker_tasks: worker_class[c].clone(),
            })
            .collect(),
        pressure_crossings: crossings.to_vec(),
        max_depth: max_depth.to_vec(),
    }
}

/// A capture from what the device wrote.
#[allow(clippy::too_many_arguments)]
pub fn capture_from_device(
    cfg: &MonitorConfig,
    classes: usize,
    workers: u32,
    kernel_ns: u64,
    config_apply_ns: u64,
    events: Vec<kernels::megakernel::HookEvent>,
    cov: &kernels::megakernel::Coverage,
    agg: &kernels::megakernel::Aggregates,
    worker_class: &[u32],
    crossings: &[u32],
    max_depth: &[u32],
) -> Capture {
    let mut evs: Vec<TaskEvent> = events
        .into_iter()
        .filter_map(|e| {
            Some(TaskEvent {
                ts: e.ts,
                kind: HookKind::from_id(e.kind as u32)?,
                task: e.task,
                class: e.class_id as u32,
                worker: e.worker,
                aux: e.aux,
                task_gen: e.task_gen,
                req_gen: e.req_gen,
            })
        })
        .collect();
    evs.sort_by_key(|e| (e.ts, e.kind.id(), e.task));
    let aggregates = cfg.aggregate.then(|| {
        let wc: Vec<Vec<u32>> = (0..MAX_CLASSES)
            .map(|c| worker_class[c * workers as usize..(c + 1) * workers as usize].to_vec())
            .collect();
        aggregates_from(
            classes,
            &agg.hist,
            &agg.sum_ns,
            &agg.max_key,
            &agg.tasks,
            &wc,
            crossings,
            max_depth,
        )
    });
    let coverage = coverage_from(classes, &cov.eligible, &cov.observed, &cov.dropped);
    let bytes = exported_bytes(cfg, evs.len() as u64, aggregates.as_ref());
    Capture {
        config: cfg.clone(),
        kernel_ns,
        events: evs,
        aggregates,
        coverage,
        bytes_exported: bytes,
        config_apply_ns,
        pc_sampling: None,
    }
}
