//! The injector thread: the plan's device work issued as real calls, and
//! the fault attribution of what it delayed.

use super::*;

impl Engine<'_> {
    /// Runs one injector action: real work issued by the injector thread.
    pub(super) fn inject_action(&mut self, th: usize, action: Action) {
        let start = self.threads[th].clock;
        let be = self.be;
        let hp = &be.host;
        let si_inj = self.stream_ix[INJECTOR_STREAM];
        let call_site = SharedStr::from("causalbench-injector");
        let info = |stream: u32| NodeInfo {
            stream: Some(stream),
            call_site: Some(call_site.clone()),
            ..Default::default()
        };
        match action {
            Action::Kernel {
                on_target_stream,
                name,
                grid,
                until,
                delays_target,
                ..
            } => {
                // The scenario's streams come first, in declaration order.
                let si = on_target_stream.unwrap_or(si_inj);
                let end = start + hp.launch_ns;
                let inf = info(self.streams[si].cupti_id);
                let handle = self.streams[si].handle;
                let (node, corr) = self.api_call(
                    th,
                    NodeKind::ApiCall,
                    Api::LaunchKernel,
                    inf.clone(),
                    start,
                    end,
                    handle,
                    None,
                );
                self.threads[th].prev = None;
                let queued = start + QUEUE_OFFSET_NS;
                let ready = queued.max(self.streams[si].tail_end);
                let dispatch = self.be.device.dispatch_ns;
                let total = self.be.device.sms;
                let begin = self.sms.earliest(ready + dispatch, grid, total, self.now);
                // Injected kernels run exactly until `until` and are never lost.
                let name = SharedStr::from(name);
                let launch = KernelLaunch {
                    name: &name,
                    grid,
                    block: 256,
                    duration: until.saturating_sub(begin).max(1_000),
                };
                let at = Enqueued {
                    si,
                    launch: node,
                    queued,
                    corr,
                    info: inf,
                };
                let dev = self.place_kernel(at, launch, &NO_STEP);
                if delays_target {
                    self.pending_fault_edges.push(dev);
                }
                self.threads[th].clock = end;
            }
            Action::Copies { count, until, .. } => {
                let mut t = start;
                for i in 0..count {
                    let end = t + hp.copy_call_ns;
                    let inf = info(self.streams[si_inj].cupti_id);
                    let handle = self.streams[si_inj].handle;
                    let (node, corr) = self.api_call(
                        th,
                        NodeKind::ApiCall,
                        Api::MemcpyAsyncH2d,
                        inf.clone(),
                        t,
                        end,
                        handle,
                        None,
                    );
                    self.threads[th].prev = None;
                    let queued = t + QUEUE_OFFSET_NS;
                    let d = &self.be.device;
                    let ready = queued.max(self.streams[si_inj].tail_end) + d.copy_setup_ns;
                    let begin = ready.max(self.copies.free_at);
                    // Each copy holds the engine for an equal share of the remaining time.
                    let share = until.saturating_sub(begin) / (count - i) as u64;
                    let bytes = ((share.saturating_sub(d.copy_setup_ns)) as f64
                        * d.pinned_bytes_per_ns)
                        .max(4096.0) as u64;
                    let at = Enqueued {
                        si: si_inj,
                        launch: node,
                        queued,
                        corr,
                        info: inf,
                    };
                    let copy = Transfer {
                        direction: CopyDirection::H2d,
                        bytes,
                        memory: HostMemory::Pinned,
                    };
                    let dev = self.memcpy(at, copy, &NO_STEP, u64::MAX);
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
