//! From a scenario to a task graph: operators, tiles, events (dependency
//! counters), routing, and the injection realised as data.
//!
//! One decode step of one request runs `layers` × (attention → gemm →
//! communication) and then sampling. Every operator instance is split into
//! tiles (one task each); all tasks of an operator trigger one event, whose
//! completion dispatches the next operator's tasks. Communication tasks also
//! *wait* on the gemm event after they were dequeued (the data-arrival flag of
//! an all-reduce): normally a no-op, it is where a postponed notification shows.
//! Steps of request 0 run first, then request 1, … (request generation), and a
//! task's task generation is its decode step within its request.

use ground_truth::megakernel::{class_id, MkInjectionKind, MkScenario, TaskBody, CLASSES};

/// Sentinel for "no event".
pub const NONE: u32 = u32::MAX;

/// One task as the device sees it: the device's own `mk_task` mirror, so the
/// simulator runs exactly what the GPU executor uploads (no field-by-field copy
/// to fall out of step with the CUDA struct).
pub type TaskDesc = kernels::megakernel::Task;

/// Where a task came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskMeta {
    pub op: u32,
    pub tile: u32,
    /// Global decode step (request × decode_steps + step).
    pub step: u32,
    pub layer: u32,
    /// Nominal cost in ns (what the simulator runs, before `extra_ns`).
    pub nominal_ns: u64,
}

/// One dependency counter, likewise the device's own `mk_event` mirror.
pub type EventDesc = kernels::megakernel::Event;

/// One operator instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpDesc {
    pub class: u32,
    pub step: u32,
    pub layer: u32,
    pub first_task: u32,
    pub n_tasks: u32,
    pub event: u32,
}

/// The injection as realised in the graph.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Realised {
    None,
    /// `extra_ns` on every task of `class`.
    ClassDelay {
        class: u32,
        extra_ns: u32,
    },
    /// One extra task of `class` moved onto `worker` in each of the first `ops` ops of the class.
    RoutingSkew {
        class: u32,
        worker: u32,
        ops: u32,
    },
    /// Event `event` notifies its waiters `postpone_ns` late.
    LateNotification {
        event: u32,
        postpone_ns: u32,
    },
    /// `extra` tasks of op `op` moved onto `worker`.
    QueueOversubscription {
        op: u32,
        worker: u32,
        extra: u32,
    },
    /// Task `task` held `hold_ns` after it became ready.
    ReadyStarvation {
        task: u32,
        hold_ns: u32,
    },
}

impl Realised {
    pub fn describe(&self) -> String {
        match *self {
            Realised::None => "none".into(),
            Realised::ClassDelay { class, extra_ns } => format!(
                "class_delay: +{:.1} µs on every {} task",
                extra_ns as f64 / 1e3,
                CLASSES[class as usize]
            ),
            Realised::RoutingSkew { class, worker, ops } => format!(
                "routing_skew: one extra {} task routed to worker {worker} in {ops} ops",
                CLASSES[class as usize]
            ),
            Realised::LateNotification { event, postpone_ns } => format!(
                "late_notification: event {event} visible to its waiters {:.1} µs late",
                postpone_ns as f64 / 1e3
            ),
            Realised::QueueOversubscription { op, worker, extra } => {
                format!("queue_oversubscription: {extra} extra tasks of op {op} on worker {worker}")
            }
            Realised::ReadyStarvation { task, hold_ns } => format!(
                "ready_starvation: task {task} held {:.1} µs after ready",
                hold_ns as f64 / 1e3
            ),
        }
    }
}

/// A task graph ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub workers: u32,
    pub tasks: Vec<TaskDesc>,
    pub meta: Vec<TaskMeta>,
    pub events: Vec<EventDesc>,
    pub deps: Vec<u32>,
    pub roots: Vec<u32>,
    pub ops: Vec<OpDesc>,
    pub realised: Realised,
    /// Tasks the injection acted on.
    pub injected_tasks: Vec<u32>,
    /// Nominal memory-body slice per task (16-byte elements).
    pub mem_vecs: u32,
}

/// The injection's size in its native unit, chosen from a requested kernel
/// lateness (`amount_for`) or scaled by calibration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Amount(pub f64);

impl Schedule {
    /// Tasks routed to each worker.
    pub fn worker_ntasks(&self) -> Vec<u32> {
        let mut n = vec![0u32; self.workers as usize];
        for t in &self.tasks {
            n[t.worker as usize] += 1;
        }
        n
    }

    /// Ops of a class, in order.
    pub fn ops_of(&self, class: u32) -> Vec<&OpDesc> {
        self.ops.iter().filter(|o| o.class == class).collect()
    }
}

/// Data-dependent routing, as a mixture-of-experts layer routes tokens: in
/// every gemm operator (the expert matmuls) each tile goes to its static
/// worker, except that the router sends a share of the tiles that depends on
/// the step's data (a seeded draw per operator: 0–25 % of them) to one hot
/// expert's worker, a different one per operator. The graph's shape is the
/// same; which worker runs what, and so where skew and waits land, changes
/// from step to step.
pub fn moe_route(s: &mut Schedule, seed: u64) {
    let workers = s.workers.max(1);
    for op in s
        .ops
        .iter()
        .filter(|o| o.class == class_id("gemm").unwrap_or(1))
    {
        let draw = crate::mix2(seed, op.event as u64);
        let hot = (draw % workers as u64) as u32;
        let share = ((draw >> 20) % 26) as f64 / 100.0;
        for k in 0..op.n_tasks {
            let t = (op.first_task + k) as usize;
            let u = ground_truth::seed::unit(crate::mix2(draw, k as u64));
            if u < share {
                s.tasks[t].worker = hot;
            }
        }
    }
}

fn route(tile: u32, tiles: u32, op: u32, workers: u32) -> u32 {
    let stride = (workers / tiles.max(1)).max(1);
    (tile * stride + op) % workers
}

/// Nominal (simulated) ns of one task of a class.
fn nominal_ns(cost_us: f64) -> u64 {
    (cost_us * 1000.0).round().max(1.0) as u64
}

/// The operator of the injection's point target in `step`: the class's first
/// op in that step.
fn op_in_step(ops: &[OpDesc], class: u32, step: u32) -> Option<&OpDesc> {
    ops.iter().find(|o| o.class == class && o.step == step)
}

/// Builds the graph of `sc` with `workers` workers and the injection sized by
/// `amount` (`None`: the no-injection twin).
pub fn build(sc: &MkScenario, workers: u32, amount: Option<Amount>) -> Schedule {
    let workers = workers.max(1);
    let specs = sc.class_specs();
    let steps = sc.requests * sc.decode_steps;
    let mut tasks = Vec::new();
    let mut meta = Vec::new();
    let mut events: Vec<EventDesc> = Vec::new();
    let mut ops = Vec::new();
    let mut prev_event = NONE;
    let mut op_index = 0u32;
    let mem_vecs = specs.iter().map(|c| c.kib * 1024 / 16).max().unwrap_or(0);
    for step in 0..steps {
        let req = step / sc.decode_steps;
        let gen = step % sc.decode_steps;
        let mut seq: Vec<(u32, u32)> = Vec::new();
        for layer in 0..sc.layers {
            for c in ["attention", "gemm", "communication"] {
                seq.push((class_id(c).unwrap(), layer));
            }
        }
        seq.push((class_id("sampling").unwrap(), sc.layers));
        for (class, layer) in seq {
            let spec = &specs[class as usize];
            let tiles = if spec.tiles == 0 {
                workers
            } else {
                spec.tiles.min(workers)
            };
            let ev = events.len() as u32;
            events.push(EventDesc {
                target: tiles,
                ..Default::default()
            });
            let first = tasks.len() as u32;
            for tile in 0..tiles {
                let (body, cost) = match spec.body {
                    TaskBody::Spin => (0, nominal_ns(spec.cost_us) as u32),
                    TaskBody::Memory => (1, 1),
                };
                tasks.push(TaskDesc {
                    class_id: class,
                    worker: route(tile, tiles, op_index, workers),
                    body,
                    cost,
                    dep_event: prev_event,
                    trigger_event: ev,
                    wait_event: if CLASSES[class as usize] == "communication" {
                        prev_event
                    } else {
                        NONE
                    },
                    hold_ns: 0,
                    task_gen: gen,
                    req_gen: req,
                    mem_vecs: if spec.body == TaskBody::Memory {
                        spec.kib * 1024 / 16
                    } else {
                        0
                    },
                    extra_ns: 0,
                });
                meta.push(TaskMeta {
                    op: op_index,
                    tile,
                    step,
                    layer,
                    nominal_ns: nominal_ns(spec.cost_us),
                });
            }
            ops.push(OpDesc {
                class,
                step,
                layer,
                first_task: first,
                n_tasks: tiles,
                event: ev,
            });
            prev_event = ev;
            op_index += 1;
        }
    }
    let mut s = Schedule {
        workers,
        tasks,
        meta,
        events,
        deps: Vec::new(),
        roots: Vec::new(),
        ops,
        realised: Realised::None,
        injected_tasks: Vec::new(),
        mem_vecs,
    };
    if let Some(a) = amount {
        inject(sc, &mut s, a);
    }
    link(&mut s);
    s
}

/// Fills the dependents of every event and the roots.
fn link(s: &mut Schedule) {
    let mut by_event: Vec<Vec<u32>> = vec![Vec::new(); s.events.len()];
    s.roots.clear();
    for (i, t) in s.tasks.iter().enumerate() {
        if t.dep_event == NONE {
            s.roots.push(i as u32);
        } else {
            by_event[t.dep_event as usize].push(i as u32);
        }
    }
    s.deps.clear();
    for (e, list) in by_event.into_iter().enumerate() {
        s.events[e].first_dep = s.deps.len() as u32;
        s.events[e].n_dep = list.len() as u32;
        s.deps.extend(list);
    }
}

/// The default step of point injections: the middle decode step.
pub fn point_step(sc: &MkScenario) -> u32 {
    sc.injection
        .step
        .unwrap_or((sc.requests * sc.decode_steps) / 2)
}

/// The amount (native unit) expected to make the kernel `lateness_ns` late,
/// from the nominal costs (the starting point of calibration).
pub fn amount_for(sc: &MkScenario, workers: u32, lateness_ns: f64) -> Amount {
    let twin = build(sc, workers, None);
    let class = class_id(&sc.injection.class).unwrap_or(0);
    let n_ops = twin.ops_of(class).len().max(1) as f64;
    let cost = sc.class_specs()[class as usize].cost_us * 1000.0;
    Amount(match sc.injection.kind {
        MkInjectionKind::ClassDelay => lateness_ns / n_ops,
        MkInjectionKind::RoutingSkew => (lateness_ns / cost).max(1.0),
        MkInjectionKind::LateNotification => lateness_ns,
        MkInjectionKind::QueueOversubscription => (lateness_ns / cost).max(1.0),
        MkInjectionKind::ReadyStarvation => lateness_ns,
    })
}

fn inject(sc: &MkScenario, s: &mut Schedule, a: Amount) {
    let class = class_id(&sc.injection.class).unwrap_or(0);
    let step = point_step(sc);
    let w = s.workers;
    let clamp_u32 = |x: f64| x.round().clamp(0.0, u32::MAX as f64 / 2.0) as u32;
    match sc.injection.kind {
        MkInjectionKind::ClassDelay => {
            let extra = clamp_u32(a.0).max(1);
            for (i, t) in s.tasks.iter_mut().enumerate() {
                if t.class_id == class {
                    t.extra_ns = extra;
                    s.injected_tasks.push(i as u32);
                }
            }
            s.realised = Realised::ClassDelay {
                class,
                extra_ns: extra,
            };
        }
        MkInjectionKind::RoutingSkew => {
            // One extra task per op onto the skewed worker, in as many of the
            // class's ops as the amount asks for (spread evenly over the run).
            let ops: Vec<OpDesc> = s.ops_of(class).into_iter().copied().collect();
            let n = clamp_u32(a.0).clamp(1, ops.len() as u32);
            let target = w / 3;
            let mut moved = 0;
            for k in 0..n {
                let op = ops[(k as usize * ops.len()) / n as usize];
                if op.n_tasks < 2 {
                    continue;
                }
                // The op's task that would run on the worker after the target.
                let victim = (op.first_task..op.first_task + op.n_tasks)
                    .find(|&t| s.tasks[t as usize].worker == (target + 1) % w)
                    .unwrap_or(op.first_task + 1);
                let already = (op.first_task..op.first_task + op.n_tasks)
                    .any(|t| s.tasks[t as usize].worker == target);
                s.tasks[victim as usize].worker = target;
                s.injected_tasks.push(victim);
                if already {
                    moved += 1;
                }
            }
            s.realised = Realised::RoutingSkew {
                class,
                worker: target,
                ops: moved.max(n),
            };
        }
        MkInjectionKind::LateNotification => {
            // The event the class's waiters wait on, in the target step.
            let Some(op) = op_in_step(&s.ops, class, step).copied() else {
                return;
            };
            let waiter = s.tasks[op.first_task as usize];
            let event = if waiter.wait_event != NONE {
                waiter.wait_event
            } else {
                waiter.dep_event
            };
            if event == NONE {
                return;
            }
            let post = clamp_u32(a.0).max(1);
            s.events[event as usize].postpone_ns = post;
            // Only waiters see a postponed notification: make the op's tasks wait on it.
            for t in op.first_task..op.first_task + op.n_tasks {
                s.tasks[t as usize].wait_event = event;
                s.injected_tasks.push(t);
            }
            s.realised = Realised::LateNotification {
                event,
                postpone_ns: post,
            };
        }
        MkInjectionKind::QueueOversubscription => {
            let Some(op) = op_in_step(&s.ops, class, step).copied() else {
                return;
            };
            let target = (2 * w) / 3;
            let extra = clamp_u32(a.0).clamp(1, op.n_tasks.saturating_sub(1).max(1));
            let mut moved = 0;
            for t in op.first_task..op.first_task + op.n_tasks {
                if moved == extra {
                    break;
                }
                if s.tasks[t as usize].worker != target {
                    s.tasks[t as usize].worker = target;
                    s.injected_tasks.push(t);
                    moved += 1;
                }
            }
            s.realised = Realised::QueueOversubscription {
                op: ops_index(&s.ops, &op),
                worker: target,
                extra: moved,
            };
        }
        MkInjectionKind::ReadyStarvation => {
            let Some(op) = op_in_step(&s.ops, class, step).copied() else {
                return;
            };
            let task = op.first_task;
            let hold = clamp_u32(a.0).max(1);
            s.tasks[task as usize].hold_ns = hold;
            s.injected_tasks.push(task);
            s.realised = Realised::ReadyStarvation {
                task,
                hold_ns: hold,
            };
        }
    }
}

fn ops_index(ops: &[OpDesc], op: &OpDesc) -> u32 {
    ops.iter().position(|o| o == op).unwrap_or(0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn scenario(kind: &str, class: &str) -> MkScenario {
        let y = format!(
            "schema_version: 1\nname: f.v\nfamily: f\nvariant: v\ncause: {}\nworkers: 16\n\
             injection: {{kind: {kind}, class: {class}, magnitude_us: 100}}\n",
            match kind {
                "class_delay" => "task_class_delay",
                k => k,
            }
        );
        serde_norway::from_str(&y).unwrap()
    }

    #[test]
    fn twin_graph_is_linked_and_routed() {
        let sc = scenario("class_delay", "communication");
        let s = build(&sc, 16, None);
        // 8 steps × (2 layers × 3 ops + sampling).
        assert_eq!(s.ops.len(), 8 * 7);
        assert_eq!(s.roots.len(), 16);
        assert_eq!(s.deps.len() + s.roots.len(), s.tasks.len());
        // Each worker runs one attention task per op.
        let att = &s.ops[0];
        let mut ws: Vec<u32> = (att.first_task..att.first_task + att.n_tasks)
            .map(|t| s.tasks[t as usize].worker)
            .collect();
        ws.sort();
        ws.dedup();
        assert_eq!(ws.len(), 16);
        assert_eq!(s.realised, Realised::None);
        assert!(s.injected_tasks.is_empty());
    }

    #[test]
    fn each_injection_is_data_in_the_graph() {
        let s = build(
            &scenario("class_delay", "communication"),
            16,
            Some(Amount(5000.0)),
        );
        assert!(s
            .injected_tasks
            .iter()
            .all(|&t| s.tasks[t as usize].extra_ns == 5000));
        let s = build(
            &scenario("late_notification", "communication"),
            16,
            Some(Amount(9e4)),
        );
        assert!(s.events.iter().any(|e| e.postpone_ns == 90_000));
        let s = build(
            &scenario("ready_starvation", "sampling"),
            16,
            Some(Amount(9e4)),
        );
        assert_eq!(s.injected_tasks.len(), 1);
        assert_eq!(s.tasks[s.injected_tasks[0] as usize].hold_ns, 90_000);
        let s = build(
            &scenario("queue_oversubscription", "attention"),
            16,
            Some(Amount(5.0)),
        );
        let n = s.worker_ntasks();
        assert!(n.iter().max().unwrap() - n.iter().min().unwrap() >= 5);
        let s = build(&scenario("routing_skew", "gemm"), 16, Some(Amount(4.0)));
        assert_eq!(s.injected_tasks.len(), 4);
    }
}
