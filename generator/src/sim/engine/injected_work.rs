//! The injector thread's work in the simulator: real calls and device work,
//! shaped like the application's own (`crate::anonymous`), so that a view shows
//! kernels, copies and call sites that could be the application's. Only the
//! plan and the ground truth know which work was injected. Its fault
//! attribution is the shared rule (`record::faults`).

use super::{Engine, Enqueued, KernelLaunch, Transfer, NO_STEP, QUEUE_OFFSET_NS};
use crate::plan::Action;
use crate::record::contention::contention_edges;
use crate::record::faults::finish_plan;
use crate::record::NodeInfo;
use crate::sim::names::Api;
use ground_truth::graph::NodeKind;
use ground_truth::scenario::Step;
use ground_truth::trace::{CopyDirection, HostMemory};
use ground_truth::{Ns, SharedStr};

/// At most this many kernels (or copies) make up one injected action.
const MAX_PIECES: usize = 64;
/// The shortest hold of an injected kernel.
const MIN_HOLD_NS: Ns = 1_000;

/// What the injector thread does next: a plan action, or one call of an
/// action it has expanded. Each call is an engine step of its own, so the
/// calls other threads make in between are placed in enqueue order.
#[derive(Debug, Clone)]
pub(super) enum InjectorWork {
    Action(Action),
    Call(InjectedCall),
}

/// One injected API call, as an action expands into them when it is issued.
#[derive(Debug, Clone)]
pub(super) enum InjectedCall {
    Kernel {
        stream: usize,
        grid: u32,
        block: u32,
        duration: Ns,
        delays_target: bool,
        latency: Ns,
    },
    Copy {
        direction: CopyDirection,
        bytes: u64,
        latency: Ns,
    },
}

impl InjectedCall {
    fn latency(&self) -> Ns {
        match self {
            InjectedCall::Kernel { latency, .. } | InjectedCall::Copy { latency, .. } => *latency,
        }
    }
}

impl Engine<'_> {
    /// Issues the actions the target's thread triggers right before its call:
    /// the injector makes their calls from now on, one engine step each, and
    /// the target's thread waits until the last one has returned, as the GPU
    /// backend's trigger does.
    pub(super) fn run_triggered(&mut self, victim: usize) {
        let Some(plan) = self.plan else { return };
        let triggered: Vec<Action> = plan
            .actions
            .iter()
            .filter(|(_, a)| a.delays_target())
            .map(|(_, a)| a.clone())
            .collect();
        if triggered.is_empty() {
            return;
        }
        let th = self.injector_thread();
        let now = self.threads[victim].clock.max(self.threads[th].clock);
        let mut done = now;
        let mut calls = Vec::new();
        for action in triggered {
            for (at, call) in self.expand(action, done) {
                done = at + call.latency();
                calls.push((at, InjectorWork::Call(call)));
            }
        }
        self.queue_next(th, calls);
        self.schedule(th, now);
        let c = &mut self.threads[victim].clock;
        *c = (*c).max(done);
    }

    /// Puts `work` at the front of the injector's queue, in its order.
    fn queue_next(&mut self, th: usize, work: Vec<(Ns, InjectorWork)>) {
        for item in work.into_iter().rev() {
            self.threads[th].actions.push_front(item);
        }
    }

    /// The calls of an injected action issued at `start`, with their times.
    /// Their latencies are drawn here, keyed by `start`, because the calls are
    /// made later, one step each.
    fn expand(&self, action: Action, start: Ns) -> Vec<(Ns, InjectedCall)> {
        let mut draws = 0u64;
        let mut latency = |ns: Ns| {
            draws += 1;
            self.call_latency(0x1c ^ (start << 8) ^ draws, ns)
        };
        let mut calls = Vec::new();
        let mut t = start;
        match action {
            Action::Kernel {
                on_target_stream,
                grid,
                until,
                delays_target,
                ..
            } => {
                // The scenario's streams come first, in declaration order.
                let si = on_target_stream.unwrap_or(self.injector_stream());
                let grid = grid.unwrap_or_else(|| self.disguise.grid(start, 16));
                let block = self.disguise.block(start, 128);
                let dispatch = self.be.device.dispatch_ns;
                let ready = (start + QUEUE_OFFSET_NS).max(self.streams[si].tail_end);
                // Injected kernels run exactly until `until` and are never lost:
                // sized from when their SMs are free until then, not from when
                // they are issued (issue 33 item 4).
                let begin = self.sm_hold_start(ready + dispatch, grid, until);
                let busy = until.saturating_sub(begin).max(MIN_HOLD_NS);
                for duration in self.disguise.kernel_pieces(busy, dispatch, MAX_PIECES) {
                    let latency = latency(self.be.host.launch_ns);
                    calls.push((
                        t,
                        InjectedCall::Kernel {
                            stream: si,
                            grid,
                            block,
                            duration,
                            delays_target,
                            latency,
                        },
                    ));
                    t += latency;
                }
            }
            Action::Copies { until, .. } => {
                let d = &self.be.device;
                let si = self.injector_stream();
                let direction = self.contended_direction();
                let (setup, bw) = (d.copy_setup_ns, d.pinned_bytes_per_ns);
                let ready = (start + QUEUE_OFFSET_NS).max(self.streams[si].tail_end) + setup;
                let begin = self.copy_hold_start(direction, ready, until);
                let busy = until.saturating_sub(begin);
                let ns_of = |bytes: u64| setup + (bytes as f64 / bw) as Ns;
                // Without application copies to imitate: two equal MiB-rounded copies.
                let sizes = self.whole_copies(busy, ns_of).unwrap_or_else(|| {
                    let each = (busy.saturating_sub(2 * setup) as f64 / 2.0 * bw) as u64;
                    vec![each.next_multiple_of(1 << 20); 2]
                });
                for bytes in sizes {
                    let latency = latency(self.be.host.copy_call_ns);
                    calls.push((
                        t,
                        InjectedCall::Copy {
                            direction,
                            bytes,
                            latency,
                        },
                    ));
                    t += latency;
                }
            }
        }
        calls
    }

    /// The earliest start ≥ `ready` from which `grid` SMs stay free until
    /// `until` (or for the shortest hold, when they never do): where an
    /// injected kernel that must hold them until `until` can run. A time at
    /// which they are free for an instant only would size a kernel that
    /// cannot start there, and it would run that much longer than asked.
    fn sm_hold_start(&self, ready: Ns, grid: u32, until: Ns) -> Ns {
        let sms = self.be.device.sms;
        let mut begin = self.sms.free_from(ready, grid, 1, sms);
        loop {
            let hold = until.saturating_sub(begin).max(MIN_HOLD_NS);
            // A shorter hold never starts later, so this only moves forward.
            let next = self.sms.free_from(ready, grid, hold, sms);
            if next <= begin {
                return begin;
            }
            begin = next;
        }
    }

    /// As `sm_hold_start`, for `direction`'s copy engine.
    fn copy_hold_start(&self, direction: CopyDirection, ready: Ns, until: Ns) -> Ns {
        let mut begin = self.copies.free_from(direction, ready, 1);
        loop {
            let hold = until.saturating_sub(begin).max(1);
            let next = self.copies.free_from(direction, ready, hold);
            if next <= begin {
                return begin;
            }
            begin = next;
        }
    }

    /// Whole copies of the application's sizes (a view must not tell them
    /// apart) whose engine time (`ns_of`) comes within half the smallest of
    /// them of `busy`: the largest size as often as it fits, then the
    /// smallest. Their total never shrinks as `busy` grows, so neither does
    /// the lateness they cause (issue 40 item 4: sizes drawn one by one made
    /// it jump by whole large copies). `None` when the application copies
    /// nothing.
    fn whole_copies(&self, busy: Ns, ns_of: impl Fn(u64) -> Ns) -> Option<Vec<u64>> {
        let mut sizes: Vec<u64> = (0..MAX_PIECES as u64)
            .map_while(|draw| self.disguise.copy_bytes(draw))
            .collect();
        sizes.sort_unstable();
        let (&small, &large) = (sizes.first()?, sizes.last()?);
        let (small_ns, large_ns) = (ns_of(small).max(1), ns_of(large).max(1));
        // Rounded to the nearest multiple of the smallest copy.
        let target = busy + small_ns / 2;
        let larges = (target / large_ns) as usize;
        let smalls = ((target - larges as Ns * large_ns) / small_ns) as usize;
        let mut copies = vec![large; larges.min(MAX_PIECES)];
        copies.extend(std::iter::repeat_n(
            small,
            smalls.min(MAX_PIECES - copies.len()),
        ));
        if copies.is_empty() {
            copies.push(small);
        }
        Some(copies)
    }

    /// The direction of the copy the plan's PCIe contention delays: each
    /// direction has its own copy engine (docs/gpu-facts.md), so injected
    /// copies go the target's way.
    fn contended_direction(&self) -> CopyDirection {
        let target = self.plan.and_then(|p| p.device_target.as_ref());
        match target.map(|k| &self.sc.programs[k.program].steps[k.step]) {
            Some(Step::Copy {
                direction: CopyDirection::D2h,
                ..
            }) => CopyDirection::D2h,
            _ => CopyDirection::H2d,
        }
    }

    /// Runs one step of the injector: an action is expanded into its calls,
    /// which come next in its queue; a call is made.
    pub(super) fn inject(&mut self, th: usize, work: InjectorWork) {
        let start = self.threads[th].clock;
        match work {
            InjectorWork::Action(action) => {
                let calls = self.expand(action, start);
                let work = calls
                    .into_iter()
                    .map(|(at, call)| (at, InjectorWork::Call(call)))
                    .collect();
                self.queue_next(th, work);
            }
            InjectorWork::Call(call) => self.injected_call(th, call, start),
        }
    }

    /// One injected API call on the injector thread at `at`, with an
    /// application-like call site, and the device work it enqueues.
    fn injected_call(&mut self, th: usize, call: InjectedCall, at: Ns) {
        let (api, si) = match call {
            InjectedCall::Kernel { stream, .. } => (Api::LaunchKernel, stream),
            InjectedCall::Copy { direction, .. } => {
                (Api::memcpy(direction), self.injector_stream())
            }
        };
        let draw = self.b.truth.nodes.len() as u64;
        let info = NodeInfo {
            stream: Some(self.streams[si].cupti_id),
            call_site: self.disguise.call_site(draw).map(SharedStr::from),
            ..Default::default()
        };
        let end = at + call.latency();
        let handle = self.streams[si].handle;
        let (node, corr) = self.api_call(
            th,
            NodeKind::ApiCall,
            api,
            info.clone(),
            at,
            end,
            handle,
            None,
        );
        self.threads[th].prev = None;
        let enqueued = Enqueued {
            si,
            launch: node,
            queued: at + QUEUE_OFFSET_NS,
            corr,
            info,
        };
        match call {
            InjectedCall::Kernel {
                grid,
                block,
                duration,
                delays_target,
                ..
            } => {
                let name = SharedStr::from(self.disguise.kernel_name(node as u64));
                let launch = KernelLaunch {
                    name: &name,
                    grid,
                    block,
                    duration,
                };
                let dev = self.place_kernel(enqueued, launch, &NO_STEP);
                if delays_target {
                    self.pending_fault_edges.push(dev);
                }
            }
            InjectedCall::Copy {
                direction, bytes, ..
            } => {
                let copy = Transfer {
                    direction,
                    bytes,
                    memory: HostMemory::Pinned,
                };
                let dev = self.memcpy(enqueued, copy, &NO_STEP, node as u64);
                self.pending_fault_edges.push(dev);
            }
        }
        self.threads[th].clock = end;
    }

    /// The injection record of device-side work and its `fault` edge
    /// (`record::faults`); the measured magnitude is filled in by the answers step.
    /// Then the contention of all other work (`record::contention`).
    pub(super) fn finish_faults(&mut self) {
        if let Some(plan) = self.plan {
            let injected = std::mem::take(&mut self.pending_fault_edges);
            if let Some(record) = finish_plan(&mut self.b, plan, &self.keys, &injected) {
                self.injections.push(record);
            }
        }
        contention_edges(&mut self.b);
    }
}
