//! Deterministic simulator of the persistent megakernel: the same task graph,
//! the same worker loop (take the next ready task in FIFO order, hold, wait,
//! start, body, end, notify, dispatch), the same hooks and monitors
//! ([`MonitorState`] is the device's hook logic on the host), with a cost model
//! for the scheduler's own work and for each hook, so monitors perturb the run
//! as they do on a GPU. Same (schedule, config, seed) ⇒ same result.

use crate::bpf::{Attachment, Context, Hook};
use crate::mix2;
use crate::monitor::{HookTask, MonitorState};
use crate::schedule::{Schedule, NONE};
use ground_truth::megakernel::{Capture, HookKind, MonitorConfig, PcSampling, CLASSES};
use ground_truth::seed::unit;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Costs of the scheduler and of the hooks, ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimCosts {
    /// Taking a task from the queue.
    pub pop_ns: u64,
    /// One round of parallel pushes (128 threads) when an event completes.
    pub push_round_ns: u64,
    /// Completing an event (atomic + fence).
    pub notify_ns: u64,
    /// A hook the configuration selects (filter, coverage atomics).
    pub hook_eligible_ns: u64,
    /// Writing one event to the ring.
    pub hook_write_ns: u64,
    /// One aggregation update (histograms, sums, maxima).
    pub aggregate_ns: u64,
    /// Relative execution-time jitter (uniform ±).
    pub jitter: f64,
    /// Threads per worker block.
    pub threads: u32,
    /// A hook with an attached eBPF program: building the context, entering the interpreter.
    pub bpf_hook_ns: u64,
    /// One interpreted eBPF instruction (one thread, global-memory maps).
    pub bpf_insn_ns: u64,
    /// One helper call (map lookup or update, ring output: an atomic on global memory).
    pub bpf_helper_ns: u64,
}

impl Default for SimCosts {
    fn default() -> Self {
        SimCosts {
            pop_ns: 150,
            push_round_ns: 400,
            notify_ns: 300,
            hook_eligible_ns: 25,
            hook_write_ns: 35,
            aggregate_ns: 180,
            jitter: 0.004,
            threads: 128,
            bpf_hook_ns: 40,
            bpf_insn_ns: 6,
            bpf_helper_ns: 60,
        }
    }
}

/// Device clock at which simulated launches start (so timestamps look like %globaltimer).
pub const SIM_CLOCK_BASE: u64 = 1_000_000_000;

/// One simulated launch.
#[derive(Debug, Clone)]
pub struct SimRun {
    pub kernel_start: u64,
    pub kernel_end: u64,
    pub capture: Capture,
    /// What PC sampling (one sample per worker per [`PC_SAMPLE_NS`]) would
    /// have attributed: execution per class (each class's body is its own
    /// code), the shared dependency-wait loop, the scheduler's idle loop.
    pub pc: PcSampling,
}

/// Simulated PC-sampling period per worker.
pub const PC_SAMPLE_NS: u64 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    /// Worker becomes free.
    Free(u32),
    /// A pushed task becomes visible in its worker's queue.
    Visible(u32, u32),
}

/// Simulates one launch of `s` with monitor `cfg`.
pub fn run(s: &Schedule, cfg: &MonitorConfig, seed: u64, costs: &SimCosts) -> SimRun {
    run_with_programs(s, cfg, seed, costs, None)
}

/// Simulates one launch of `s` with monitor `cfg` and, when given, an eBPF
/// program set attached at the task begin / end and dependency-wait hooks
/// (run by the reference interpreter, its cost charged to the worker).
pub fn run_with_programs(
    s: &Schedule,
    cfg: &MonitorConfig,
    seed: u64,
    costs: &SimCosts,
    mut programs: Option<&mut Attachment>,
) -> SimRun {
    let w = s.workers as usize;
    let mut mon = MonitorState::new(cfg, s.workers);
    let mut queue: Vec<VecDeque<u32>> = vec![VecDeque::new(); w];
    let mut busy = vec![false; w];
    let mut head = vec![0u32; w];
    let mut tail = vec![0u32; w];
    let mut ready = vec![0u64; s.tasks.len()];
    let mut ev_count = vec![0u32; s.events.len()];
    let mut ev_done = vec![0u64; s.events.len()];
    let mut heap: BinaryHeap<Reverse<(u64, u64, Action)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let t0 = SIM_CLOCK_BASE;
    let mut last_end = t0;
    let mut exec_ns = [0u64; CLASSES.len()];
    let mut wait_ns = 0u64;
    let ht = |i: u32| {
        let t = &s.tasks[i as usize];
        HookTask {
            task: i,
            class: t.class_id,
            task_gen: t.task_gen,
            req_gen: t.req_gen,
        }
    };
    // Dispatch of `list` by worker `by` at `at`; returns when the dispatcher is done.
    let dispatch = |list: &[u32],
                    ev: u32,
                    by: u32,
                    at: u64,
                    mon: &mut MonitorState,
                    ready: &mut [u64],
                    tail: &mut [u32],
                    head: &[u32],
                    heap: &mut BinaryHeap<Reverse<(u64, u64, Action)>>,
                    seq: &mut u64|
     -> u64 {
        let threads = costs.threads.max(1) as usize;
        let mut t_end = at;
        for (k, &task) in list.iter().enumerate() {
            let round = (k / threads) as u64;
            let mut t = at + (round + 1) * costs.push_round_ns;
            ready[task as usize] = at;
            let h = ht(task);
            let tw = s.tasks[task as usize].worker;
            let mut hook_cost = 0;
            if mon.hook(by, HookKind::Ready, &h, tw, ev, at, 0) {
                hook_cost += costs.hook_write_ns;
            }
            tail[tw as usize] += 1;
            let depth = tail[tw as usize].saturating_sub(head[tw as usize]).max(1);
            if mon.hook(by, HookKind::Assigned, &h, tw, depth, at, 0) {
                hook_cost += costs.hook_write_ns;
            }
            mon.push_depth(by, &h, tw, depth, at);
            if mon.cfg.log {
                hook_cost += 2 * costs.hook_eligible_ns;
            }
            t += hook_cost;
            *seq += 1;
            heap.push(Reverse((t, *seq, Action::Visible(tw, task))));
            t_end = t_end.max(t);
        }
        t_end
    };
    // Roots: worker 0 dispatches them at launch.
    let roots = s.roots.clone();
    let w0_free = dispatch(
        &roots, NONE, 0, t0, &mut mon, &mut ready, &mut tail, &head, &mut heap, &mut seq,
    );
    for wk in 0..w as u32 {
        seq += 1;
        heap.push(Reverse((
            if wk == 0 { w0_free } else { t0 },
            seq,
            Action::Free(wk),
        )));
        busy[wk as usize] = true;
    }
    while let Some(Reverse((now, _, action))) = heap.pop() {
        let wk = match action {
            Action::Visible(wk, task) => {
                queue[wk as usize].push_back(task);
                if busy[wk as usize] {
                    continue;
                }
                wk
            }
            Action::Free(wk) => wk,
        };
        let Some(task) = queue[wk as usize].pop_front() else {
            busy[wk as usize] = false;
            last_end = last_end.max(now);
            continue;
        };
        busy[wk as usize] = true;
        head[wk as usize] += 1;
        let t = s.tasks[task as usize];
        let h = ht(task);
        let rd = ready[task as usize];
        let notify_phase = if t.dep_event != NONE {
            rd.saturating_sub(ev_done[t.dep_event as usize])
        } else {
            0
        };
        let mut clock = now + costs.pop_ns;
        if t.hold_ns != 0 {
            clock = clock.max(rd + t.hold_ns as u64);
        }
        let queue_phase = clock.saturating_sub(rd);
        // What every hook of this task sees but its own timestamps.
        let base = context(task, &h, wk, &tail, &head, [notify_phase, queue_phase]);
        let mut wait_phase = 0;
        let hook_cost = |wrote: bool| {
            if wrote {
                costs.hook_eligible_ns + costs.hook_write_ns
            } else if mon_logs(cfg) {
                costs.hook_eligible_ns
            } else {
                0
            }
        };
        if t.wait_event != NONE {
            let wb = clock;
            let wrote = mon.hook(wk, HookKind::WaitBegin, &h, wk, t.wait_event, wb, 0);
            clock += hook_cost(wrote);
            let done = ev_done[t.wait_event as usize];
            let visible = if done == 0 {
                clock
            } else {
                done + s.events[t.wait_event as usize].postpone_ns as u64
            };
            clock = clock.max(visible) + 60;
            wait_phase = clock - wb;
            let wrote = mon.hook(
                wk,
                HookKind::WaitEnd,
                &h,
                wk,
                t.wait_event,
                clock,
                wait_phase,
            );
            clock += hook_cost(wrote);
            let ctx = Context {
                dep_event: t.wait_event,
                ts_start: wb,
                ts_end: wb + wait_phase,
                wait_ns: wait_phase,
                hook: Hook::DepWait as u32,
                ..base
            };
            clock += program_cost(&mut programs, Hook::DepWait, &ctx, costs);
        }
        let start = clock;
        let wrote = mon.hook(wk, HookKind::Start, &h, wk, 0, start, 0);
        let ctx = Context {
            dep_event: t.dep_event,
            ts_start: start,
            ts_end: start,
            wait_ns: wait_phase,
            hook: Hook::TaskBegin as u32,
            ..base
        };
        // The start hook is written, and the begin program run, before the
        // body begins; their cost delays the body.
        let body_start =
            start + hook_cost(wrote) + program_cost(&mut programs, Hook::TaskBegin, &ctx, costs);
        let nominal = if t.body == 1 {
            (s.meta[task as usize].nominal_ns * t.cost.max(1) as u64) as f64
        } else {
            t.cost as f64
        };
        let j = unit(mix2(seed, task as u64 * 7 + 1)) * 2.0 - 1.0;
        let exec_body = (nominal * (1.0 + costs.jitter * j)).round().max(1.0) as u64;
        let end = body_start + exec_body + t.extra_ns as u64;
        let exec_phase = end - start;
        if (t.class_id as usize) < exec_ns.len() {
            exec_ns[t.class_id as usize] += exec_phase;
        }
        wait_ns += wait_phase;
        let mut clock = end;
        let wrote = mon.hook(wk, HookKind::End, &h, wk, 0, end, exec_phase);
        clock += hook_cost(wrote);
        let ctx = Context {
            dep_event: t.dep_event,
            ts_start: start,
            ts_end: end,
            wait_ns: wait_phase,
            hook: Hook::TaskEnd as u32,
            ..base
        };
        clock += program_cost(&mut programs, Hook::TaskEnd, &ctx, costs);
        if mon.aggregate(wk, &h, [notify_phase, queue_phase, wait_phase, exec_phase]) {
            clock += costs.aggregate_ns;
        } else if cfg.aggregate {
            clock += costs.hook_eligible_ns;
        }
        let mut free_at = clock;
        if t.trigger_event != NONE {
            let e = t.trigger_event as usize;
            ev_count[e] += 1;
            clock += costs.notify_ns;
            free_at = clock;
            if ev_count[e] == s.events[e].target {
                ev_done[e] = clock;
                let ed = s.events[e];
                let list = &s.deps[ed.first_dep as usize..(ed.first_dep + ed.n_dep) as usize];
                free_at = dispatch(
                    list, e as u32, wk, clock, &mut mon, &mut ready, &mut tail, &head, &mut heap,
                    &mut seq,
                );
            }
        }
        last_end = last_end.max(free_at);
        seq += 1;
        heap.push(Reverse((free_at, seq, Action::Free(wk))));
    }
    let kernel_end = last_end + 500;
    let capture = mon.into_capture(CLASSES.len(), kernel_end - t0, 0);
    let total = (kernel_end - t0) * s.workers as u64;
    let busy: u64 = exec_ns.iter().sum::<u64>() + wait_ns;
    let pc = PcSampling {
        available: true,
        detail: format!(
            "simulated: one sample per worker every {PC_SAMPLE_NS} ns, attributed by code region"
        ),
        class_samples: exec_ns.iter().map(|n| n / PC_SAMPLE_NS).collect(),
        wait_samples: wait_ns / PC_SAMPLE_NS,
        idle_samples: total.saturating_sub(busy) / PC_SAMPLE_NS,
    };
    SimRun {
        kernel_start: t0,
        kernel_end,
        capture,
        pc,
    }
}

/// The context fields every hook shares (`phases`: the task's dispatch latency and queueing).
fn context(
    task: u32,
    h: &HookTask,
    worker: u32,
    tail: &[u32],
    head: &[u32],
    phases: [u64; 2],
) -> Context {
    Context {
        notify_ns: phases[0],
        queue_ns: phases[1],
        task,
        class_id: h.class,
        task_gen: h.task_gen,
        req_gen: h.req_gen,
        worker,
        queue_depth: tail[worker as usize].saturating_sub(head[worker as usize]),
        ..Context::default()
    }
}

/// Runs the attached program for `hook` (if any); its cost in ns.
fn program_cost(
    programs: &mut Option<&mut Attachment>,
    hook: Hook,
    ctx: &Context,
    costs: &SimCosts,
) -> u64 {
    let Some(a) = programs.as_deref_mut() else {
        return 0;
    };
    match a.hook(hook, ctx) {
        Some(st) => {
            costs.bpf_hook_ns + st.insns * costs.bpf_insn_ns + st.helper_calls * costs.bpf_helper_ns
        }
        None if a.set.program(hook).is_some() => costs.bpf_hook_ns,
        None => 0,
    }
}

fn mon_logs(cfg: &MonitorConfig) -> bool {
    cfg.log
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{build, Amount};

    fn sc(kind: &str, class: &str) -> ground_truth::megakernel::MkScenario {
        let cause = match kind {
            "class_delay" => "task_class_delay",
            k => k,
        };
        serde_norway::from_str(&format!(
            "schema_version: 1\nname: f.v\nfamily: f\nvariant: v\ncause: {cause}\nworkers: 16\n\
             injection: {{kind: {kind}, class: {class}, magnitude_us: 100}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn twin_runs_every_task_once_and_is_deterministic() {
        let s = build(&sc("class_delay", "gemm"), 16, None);
        let cfg = MonitorConfig::task_log(u32::MAX);
        let a = run(&s, &cfg, 1, &SimCosts::default());
        let b = run(&s, &cfg, 1, &SimCosts::default());
        assert_eq!(a.capture, b.capture);
        let starts = a.capture.events_of(HookKind::Start);
        assert_eq!(starts, s.tasks.len());
        // 8 steps of ≈ 2 × (20 + 25 + 8) + 15 µs.
        let ms = a.capture.kernel_ns as f64 / 1e6;
        assert!((0.9..1.4).contains(&ms), "kernel {ms} ms");
        let cov = a.capture.total_coverage();
        assert_eq!(cov.eligible, cov.observed);
    }

    #[test]
    fn injections_make_the_kernel_late_by_about_the_amount() {
        let cfg = MonitorConfig::none();
        for (kind, class, amount, expect_us) in [
            (
                "late_notification",
                "communication",
                Amount(100_000.0),
                100.0,
            ),
            ("ready_starvation", "sampling", Amount(100_000.0), 100.0),
            (
                "class_delay",
                "communication",
                Amount(100_000.0 / 16.0),
                100.0,
            ),
        ] {
            let scn = sc(kind, class);
            let twin = run(&build(&scn, 16, None), &cfg, 3, &SimCosts::default());
            let inj = run(
                &build(&scn, 16, Some(amount)),
                &cfg,
                3,
                &SimCosts::default(),
            );
            let late = (inj.capture.kernel_ns as f64 - twin.capture.kernel_ns as f64) / 1e3;
            assert!(
                (late - expect_us).abs() < 0.1 * expect_us,
                "{kind}: {late} µs late, expected {expect_us}"
            );
        }
    }
}
