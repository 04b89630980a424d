//! The injector thread's work in the simulator: real calls and device work,
//! shaped like the application's own (`crate::anonymous`), so that a view shows
//! kernels, copies and call sites that could be the application's. Only the
//! plan and the ground truth know which work was injected.

use super::{Engine, KernelLaunch, NO_STEP, QUEUE_OFFSET_NS};
use crate::build::NodeInfo;
use crate::sim::inject::{Action, InjectedCall};
use crate::sim::names::Api;
use ground_truth::graph::{EdgeType, NodeKind};
use ground_truth::trace::{CopyDirection, HostMemory};
use ground_truth::{Ns, SharedStr};

/// At most this many kernels (or copies) make up one injected action.
const MAX_PIECES: usize = 64;

impl Engine<'_> {
    /// Issues the actions the target's thread triggers right before its call:
    /// the injector makes their calls from now on, one engine step each, and the
    /// target's thread waits until the last one has returned, as the GPU
    /// backend's trigger does.
    pub(super) fn run_triggered(&mut self, victim: usize) {
        let Some(plan) = self.plan else { return };
        let th = self.injector_thread();
        let now = self.threads[victim].clock.max(self.threads[th].clock);
        let mut t = now;
        let mut calls = Vec::new();
        for action in plan.triggered.clone() {
            for (at, call) in self.expand(action, t) {
                t = at + call_latency(&call);
                calls.push((at, Action::Call(call)));
            }
        }
        for call in calls.into_iter().rev() {
            self.threads[th].actions.push_front(call);
        }
        self.schedule(th, now);
        let c = &mut self.threads[victim].clock;
        *c = (*c).max(t);
    }

    /// The calls of an injected action issued at `start`, with their times.
    fn expand(&self, action: Action, start: Ns) -> Vec<(Ns, InjectedCall)> {
        let mut draws = 0u64;
        let mut latency = |ns: Ns| {
            draws += 1;
            self.jitter(0x1c ^ (start << 8) ^ draws, self.noise.launch_latency(ns))
        };
        let mut calls = Vec::new();
        let mut t = start;
        match action {
            Action::Kernel {
                stream,
                grid,
                until,
                delays_target,
            } => {
                let si = stream
                    .map(|s| self.stream_ix[&s])
                    .unwrap_or(self.injector_stream());
                let grid = grid.unwrap_or_else(|| self.disguise.grid(start, 16));
                let block = self.disguise.block(start, 128);
                let dispatch = self.be.device.dispatch_ns;
                let ready = (start + QUEUE_OFFSET_NS).max(self.streams[si].tail_end);
                let sms = self.be.device.sms;
                let begin = self.sms.free_from(ready + dispatch, grid, 1, sms);
                // Injected kernels run exactly until `until` and are never lost.
                let busy = until.saturating_sub(begin).max(1_000);
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
            Action::Copies { until } => {
                let d = &self.be.device;
                let si = self.injector_stream();
                let (setup, bw) = (d.copy_setup_ns, d.pinned_bytes_per_ns);
                let ready = (start + QUEUE_OFFSET_NS).max(self.streams[si].tail_end) + setup;
                let busy = until.saturating_sub(ready.max(self.copies.free_at));
                let ns_of = |bytes: u64| setup + (bytes as f64 / bw) as Ns;
                // Without application copies to imitate: two equal MiB-rounded copies.
                let sizes = self
                    .disguise
                    .copy_sizes(busy, ns_of, MAX_PIECES)
                    .unwrap_or_else(|| {
                        let each = (busy.saturating_sub(2 * setup) as f64 / 2.0 * bw) as u64;
                        vec![each.next_multiple_of(1 << 20); 2]
                    });
                for bytes in sizes {
                    let latency = latency(self.be.host.copy_call_ns);
                    calls.push((t, InjectedCall::Copy { bytes, latency }));
                    t += latency;
                }
            }
            Action::Call(call) => calls.push((t, call)),
        }
        calls
    }

    /// Runs one injector action: an action is expanded into its calls, which
    /// come next in the injector's queue; a call is made.
    pub(super) fn inject_action(&mut self, th: usize, action: Action) {
        let start = self.threads[th].clock;
        let call = match action {
            Action::Call(call) => call,
            action => {
                for call in self.expand(action, start).into_iter().rev() {
                    self.threads[th]
                        .actions
                        .push_front((call.0, Action::Call(call.1)));
                }
                return;
            }
        };
        let (api, si) = match call {
            InjectedCall::Kernel { stream, .. } => (Api::LaunchKernel, stream),
            InjectedCall::Copy { .. } => (Api::MemcpyAsyncH2d, self.injector_stream()),
        };
        let draw = self.b.truth.nodes.len() as u64;
        let info = NodeInfo {
            stream: Some(self.streams[si].cupti_id),
            call_site: self.disguise.call_site(draw).map(SharedStr::from),
            ..Default::default()
        };
        let end = start + call_latency(&call);
        let handle = self.streams[si].handle;
        let (node, corr) = self.api_call(
            th,
            NodeKind::ApiCall,
            api,
            info.clone(),
            start,
            end,
            handle,
            None,
        );
        self.threads[th].prev = None;
        let queued = start + QUEUE_OFFSET_NS;
        let dev = match call {
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
                let dev = self.place_kernel(si, launch, queued, corr, info, &NO_STEP);
                if delays_target {
                    self.pending_fault_edges.push(dev);
                }
                dev
            }
            InjectedCall::Copy { bytes, .. } => {
                let dev = self.memcpy(
                    si,
                    CopyDirection::H2d,
                    bytes,
                    HostMemory::Pinned,
                    queued,
                    corr,
                    info,
                    &NO_STEP,
                    node as u64,
                );
                self.pending_fault_edges.push(dev);
                dev
            }
        };
        self.b.edge(node, dev, EdgeType::Launch);
        self.threads[th].clock = end;
    }
}

fn call_latency(call: &InjectedCall) -> Ns {
    match call {
        InjectedCall::Kernel { latency, .. } | InjectedCall::Copy { latency, .. } => *latency,
    }
}
