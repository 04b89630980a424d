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
    programs: Option<&mut Attachment>,
) -> SimRun {
    let mut sim = Sim::new(s, cfg, seed, costs, programs);
    sim.launch();
    sim.run_until_idle();
    sim.finish()
}

/// Events of the simulation: (time, sequence number for a stable order, action).
type Timeline = BinaryHeap<Reverse<(u64, u64, Action)>>;

/// The state of one simulated launch: the workers' queues, the events' counters, the
/// pending actions and what PC sampling would have counted.
struct Sim<'a> {
    s: &'a Schedule,
    cfg: &'a MonitorConfig,
    seed: u64,
    costs: &'a SimCosts,
    programs: Option<&'a mut Attachment>,
    mon: MonitorState,
    queue: Vec<VecDeque<u32>>,
    busy: Vec<bool>,
    /// Tasks each worker has taken, and that were pushed to it (their difference is
    /// its queue depth as the device counts it).
    head: Vec<u32>,
    tail: Vec<u32>,
    /// When each task was made ready (dispatched).
    ready: Vec<u64>,
    ev_count: Vec<u32>,
    /// When each event completed (0: not yet).
    ev_done: Vec<u64>,
    heap: Timeline,
    seq: u64,
    last_end: u64,
    exec_ns: [u64; CLASSES.len()],
    wait_ns: u64,
}

impl<'a> Sim<'a> {
    fn new(
        s: &'a Schedule,
        cfg: &'a MonitorConfig,
        seed: u64,
        costs: &'a SimCosts,
        programs: Option<&'a mut Attachment>,
    ) -> Sim<'a> {
        let w = s.workers as usize;
        Sim {
            s,
            cfg,
            seed,
            costs,
            programs,
            mon: MonitorState::new(cfg, s.workers),
            queue: vec![VecDeque::new(); w],
            busy: vec![false; w],
            head: vec![0u32; w],
            tail: vec![0u32; w],
            ready: vec![0u64; s.tasks.len()],
            ev_count: vec![0u32; s.events.len()],
            ev_done: vec![0u64; s.events.len()],
            heap: BinaryHeap::new(),
            seq: 0,
            last_end: SIM_CLOCK_BASE,
            exec_ns: [0u64; CLASSES.len()],
            wait_ns: 0,
        }
    }

    /// What the hooks see of task `i`.
    fn hook_task(&self, i: u32) -> HookTask {
        let t = &self.s.tasks[i as usize];
        HookTask {
            task: i,
            class: t.class_id,
            task_gen: t.task_gen,
            req_gen: t.req_gen,
        }
    }

    /// What a hook costs the worker: more when it wrote an event.
    fn hook_cost(&self, wrote: bool) -> u64 {
        if wrote {
            self.costs.hook_eligible_ns + self.costs.hook_write_ns
        } else if mon_logs(self.cfg) {
            self.costs.hook_eligible_ns
        } else {
            0
        }
    }

    /// Dispatch of `list` by worker `by` at `at`; returns when the dispatcher is done.
    fn dispatch(&mut self, list: &[u32], ev: u32, by: u32, at: u64) -> u64 {
        let costs = self.costs;
        let threads = costs.threads.max(1) as usize;
        let mut t_end = at;
        for (k, &task) in list.iter().enumerate() {
            let round = (k / threads) as u64;
            let mut t = at + (round + 1) * costs.push_round_ns;
            self.ready[task as usize] = at;
            let h = self.hook_task(task);
            let tw = self.s.tasks[task as usize].worker;
            let mut hook_cost = 0;
            if self.mon.hook(by, HookKind::Ready, &h, tw, ev, at, 0) {
                hook_cost += costs.hook_write_ns;
            }
            self.tail[tw as usize] += 1;
            let depth = self.tail[tw as usize]
                .saturating_sub(self.head[tw as usize])
                .max(1);
            if self.mon.hook(by, HookKind::Assigned, &h, tw, depth, at, 0) {
                hook_cost += costs.hook_write_ns;
            }
            self.mon.push_depth(by, &h, tw, depth, at);
            if self.mon.cfg.log {
                hook_cost += 2 * costs.hook_eligible_ns;
            }
            t += hook_cost;
            self.seq += 1;
            self.heap
                .push(Reverse((t, self.seq, Action::Visible(tw, task))));
            t_end = t_end.max(t);
        }
        t_end
    }

    /// Roots: worker 0 dispatches them at launch; every worker starts looking for work.
    fn launch(&mut self) {
        let s = self.s;
        let t0 = SIM_CLOCK_BASE;
        let w0_free = self.dispatch(&s.roots, NONE, 0, t0);
        for wk in 0..s.workers {
            self.seq += 1;
            self.heap.push(Reverse((
                if wk == 0 { w0_free } else { t0 },
                self.seq,
                Action::Free(wk),
            )));
            self.busy[wk as usize] = true;
        }
    }

    /// The worker loop: a free worker takes the next task of its queue (FIFO) or idles
    /// until a task becomes visible there.
    fn run_until_idle(&mut self) {
        while let Some(Reverse((now, _, action))) = self.heap.pop() {
            let wk = match action {
                Action::Visible(wk, task) => {
                    self.queue[wk as usize].push_back(task);
                    if self.busy[wk as usize] {
                        continue;
                    }
                    wk
                }
                Action::Free(wk) => wk,
            };
            let Some(task) = self.queue[wk as usize].pop_front() else {
                self.busy[wk as usize] = false;
                self.last_end = self.last_end.max(now);
                continue;
            };
            self.busy[wk as usize] = true;
            self.head[wk as usize] += 1;
            let free_at = self.run_task(wk, task, now);
            self.last_end = self.last_end.max(free_at);
            self.seq += 1;
            self.heap
                .push(Reverse((free_at, self.seq, Action::Free(wk))));
        }
    }

    /// Worker `wk` runs `task`, taken at `now`: hold, dependency wait, start, body, end,
    /// notify and dispatch. Returns when the worker is free again.
    fn run_task(&mut self, wk: u32, task: u32, now: u64) -> u64 {
        let (s, costs) = (self.s, self.costs);
        let t = s.tasks[task as usize];
        let h = self.hook_task(task);
        let rd = self.ready[task as usize];
        let notify_phase = if t.dep_event != NONE {
            rd.saturating_sub(self.ev_done[t.dep_event as usize])
        } else {
            0
        };
        let mut clock = now + costs.pop_ns;
        if t.hold_ns != 0 {
            clock = clock.max(rd + t.hold_ns as u64);
        }
        let queue_phase = clock.saturating_sub(rd);
        // What every hook of this task sees but its own timestamps.
        let base = context(
            task,
            &h,
            wk,
            &self.tail,
            &self.head,
            [notify_phase, queue_phase],
        );
        let mut wait_phase = 0;
        if t.wait_event != NONE {
            (clock, wait_phase) = self.wait_for_event(wk, t.wait_event, &h, clock, base);
        }
        let start = clock;
        let wrote = self.mon.hook(wk, HookKind::Start, &h, wk, 0, start, 0);
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
        let body_start = start
            + self.hook_cost(wrote)
            + program_cost(&mut self.programs, Hook::TaskBegin, &ctx, costs);
        let nominal = if t.body == 1 {
            (s.meta[task as usize].nominal_ns * t.cost.max(1) as u64) as f64
        } else {
            t.cost as f64
        };
        let j = unit(mix2(self.seed, task as u64 * 7 + 1)) * 2.0 - 1.0;
        let exec_body = (nominal * (1.0 + costs.jitter * j)).round().max(1.0) as u64;
        let end = body_start + exec_body + t.extra_ns as u64;
        let exec_phase = end - start;
        if (t.class_id as usize) < self.exec_ns.len() {
            self.exec_ns[t.class_id as usize] += exec_phase;
        }
        self.wait_ns += wait_phase;
        let mut clock = end;
        let wrote = self.mon.hook(wk, HookKind::End, &h, wk, 0, end, exec_phase);
        clock += self.hook_cost(wrote);
        let ctx = Context {
            dep_event: t.dep_event,
            ts_start: start,
            ts_end: end,
            wait_ns: wait_phase,
            hook: Hook::TaskEnd as u32,
            ..base
        };
        clock += program_cost(&mut self.programs, Hook::TaskEnd, &ctx, costs);
        if self
            .mon
            .aggregate(wk, &h, [notify_phase, queue_phase, wait_phase, exec_phase])
        {
            clock += costs.aggregate_ns;
        } else if self.cfg.aggregate {
            clock += costs.hook_eligible_ns;
        }
        let mut free_at = clock;
        if t.trigger_event != NONE {
            let e = t.trigger_event as usize;
            self.ev_count[e] += 1;
            clock += costs.notify_ns;
            free_at = clock;
            if self.ev_count[e] == s.events[e].target {
                self.ev_done[e] = clock;
                let ed = s.events[e];
                let list = &s.deps[ed.first_dep as usize..(ed.first_dep + ed.n_dep) as usize];
                free_at = self.dispatch(list, e as u32, wk, clock);
            }
        }
        free_at
    }

    /// Worker `wk` waits from `clock` for `event` (the wait hooks and program
    /// included). Returns the clock after the wait and the wait phase.
    fn wait_for_event(
        &mut self,
        wk: u32,
        event: u32,
        h: &HookTask,
        mut clock: u64,
        base: Context,
    ) -> (u64, u64) {
        let wb = clock;
        let wrote = self.mon.hook(wk, HookKind::WaitBegin, h, wk, event, wb, 0);
        clock += self.hook_cost(wrote);
        let done = self.ev_done[event as usize];
        let visible = if done == 0 {
            clock
        } else {
            done + self.s.events[event as usize].postpone_ns as u64
        };
        clock = clock.max(visible) + 60;
        let wait_phase = clock - wb;
        let wrote = self
            .mon
            .hook(wk, HookKind::WaitEnd, h, wk, event, clock, wait_phase);
        clock += self.hook_cost(wrote);
        let ctx = Context {
            dep_event: event,
            ts_start: wb,
            ts_end: wb + wait_phase,
            wait_ns: wait_phase,
            hook: Hook::DepWait as u32,
            ..base
        };
        clock += program_cost(&mut self.programs, Hook::DepWait, &ctx, self.costs);
        (clock, wait_phase)
    }

    /// The kernel ends 500 ns after its last worker; the capture and the PC samples.
    fn finish(self) -> SimRun {
        let t0 = SIM_CLOCK_BASE;
        let kernel_end = self.last_end + 500;
        let capture = self.mon.into_capture(CLASSES.len(), kernel_end - t0, 0);
        let total = (kernel_end - t0) * self.s.workers as u64;
        let busy: u64 = self.exec_ns.iter().sum::<u64>() + self.wait_ns;
        let pc = PcSampling {
            available: true,
            detail: format!(
                "simulated: one sample per worker every {PC_SAMPLE_NS} ns, attributed by code region"
            ),
            class_samples: self.exec_ns.iter().map(|n| n / PC_SAMPLE_NS).collect(),
            wait_samples: self.wait_ns / PC_SAMPLE_NS,
            idle_samples: total.saturating_sub(busy) / PC_SAMPLE_NS,
        };
        SimRun {
            kernel_start: t0,
            kernel_end,
            capture,
            pc,
        }
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
