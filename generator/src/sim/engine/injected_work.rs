//! The injector thread's work in the simulator: real calls and device work,
//! shaped like the application's own (`crate::anonymous`), so that a view shows
//! kernels, copies and call sites that could be the application's. Only the
//! plan and the ground truth know which work was injected. Its fault
//! attribution is the shared rule (`record::faults`).

use super::{Engine, Enqueued, KernelLaunch, Transfer, NO_STEP, QUEUE_OFFSET_NS};
use crate::plan::Action;
use crate::record::faults::finish_plan;
use crate::record::NodeInfo;
use crate::sim::names::Api;
use ground_truth::graph::{NodeId, NodeKind};
use ground_truth::trace::{CopyDirection, HostMemory};
use ground_truth::{Ns, SharedStr};

/// At most this many kernels (or copies) make up one injected action.
const MAX_PIECES: usize = 64;

impl Engine<'_> {
    /// Runs the actions the target's thread triggers right before its call: the
    /// injector issues them now and the target's thread waits until it has, as
    /// the GPU backend's trigger does.
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
        let now = self.threads[victim].clock;
        for action in triggered {
            self.threads[th].clock = self.threads[th].clock.max(now);
            self.inject_action(th, action);
        }
        let done = self.threads[th].clock;
        let c = &mut self.threads[victim].clock;
        *c = (*c).max(done);
    }

    /// One injected API call on the injector thread at `at`, with an
    /// application-like call site. Returns its node, correlation id, the node
    /// info its device work takes and when the call returns.
    fn injected_call(
        &mut self,
        th: usize,
        api: Api,
        si: usize,
        at: Ns,
        latency_ns: Ns,
    ) -> (NodeId, u32, NodeInfo, Ns) {
        let draw = self.b.truth.nodes.len() as u64;
        let info = NodeInfo {
            stream: Some(self.streams[si].cupti_id),
            call_site: self.disguise.call_site(draw).map(SharedStr::from),
            ..Default::default()
        };
        let end = at + self.jitter(draw ^ 0x1c, self.noise.launch_latency(latency_ns));
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
        (node, corr, info, end)
    }

    /// Runs one injector action: real work issued by the injector thread.
    pub(super) fn inject_action(&mut self, th: usize, action: Action) {
        let start = self.threads[th].clock;
        let si_inj = self.injector_stream();
        let launch_ns = self.be.host.launch_ns;
        let copy_call_ns = self.be.host.copy_call_ns;
        match action {
            Action::Kernel {
                on_target_stream,
                grid,
                until,
                delays_target,
                ..
            } => {
                // The scenario's streams come first, in declaration order.
                let si = on_target_stream.unwrap_or(si_inj);
                let draw = self.b.truth.nodes.len() as u64;
                let grid = grid.unwrap_or_else(|| self.disguise.grid(draw, 16));
                let block = self.disguise.block(draw, 128);
                let dispatch = self.be.device.dispatch_ns;
                let ready = (start + QUEUE_OFFSET_NS).max(self.streams[si].tail_end);
                let total = self.be.device.sms;
                let begin = self
                    .sms
                    .earliest(ready + dispatch, grid, 1, total, self.now);
                // Injected kernels run exactly until `until` and are never lost.
                let busy = until.saturating_sub(begin).max(1_000);
                let pieces = self.disguise.kernel_pieces(busy, dispatch, MAX_PIECES);
                let mut t = start;
                for duration in pieces {
                    let (node, corr, inf, end) =
                        self.injected_call(th, Api::LaunchKernel, si, t, launch_ns);
                    let name = SharedStr::from(self.disguise.kernel_name(node as u64));
                    let launch = KernelLaunch {
                        name: &name,
                        grid,
                        block,
                        duration,
                    };
                    let at = Enqueued {
                        si,
                        launch: node,
                        queued: t + QUEUE_OFFSET_NS,
                        corr,
                        info: inf,
                    };
                    let dev = self.place_kernel(at, launch, &NO_STEP);
                    if delays_target {
                        self.pending_fault_edges.push(dev);
                    }
                    t = end;
                }
                self.threads[th].clock = t;
            }
            Action::Copies { until, .. } => {
                let d = &self.be.device;
                let (setup, bw) = (d.copy_setup_ns, d.pinned_bytes_per_ns);
                let ready = (start + QUEUE_OFFSET_NS).max(self.streams[si_inj].tail_end) + setup;
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
                let mut t = start;
                for bytes in sizes {
                    let (node, corr, inf, end) =
                        self.injected_call(th, Api::MemcpyAsyncH2d, si_inj, t, copy_call_ns);
                    let at = Enqueued {
                        si: si_inj,
                        launch: node,
                        queued: t + QUEUE_OFFSET_NS,
                        corr,
                        info: inf,
                    };
                    let copy = Transfer {
                        direction: CopyDirection::H2d,
                        bytes,
                        memory: HostMemory::Pinned,
                    };
                    let dev = self.memcpy(at, copy, &NO_STEP, node as u64);
                    self.pending_fault_edges.push(dev);
                    t = end;
                }
                self.threads[th].clock = t;
            }
        }
    }

    /// The injection record of device-side work and its `fault` edge
    /// (`record::faults`); the measured magnitude is filled in by the answers step.
    pub(super) fn finish_faults(&mut self) {
        let Some(plan) = self.plan else { return };
        let injected = std::mem::take(&mut self.pending_fault_edges);
        if let Some(record) = finish_plan(&mut self.b, plan, &self.keys, &injected) {
            self.injections.push(record);
        }
    }
}
