//! The CUDA calls of a step, made with the driver API and bound to their op
//! through CUPTI's external correlation stack.

use super::*;

impl<'a> Exec<'a> {
    pub(super) fn new_op(
        &self,
        ti: usize,
        tid: u32,
        request: Option<usize>,
        skey: Option<&StepKey>,
        what: What,
    ) -> Op {
        Op {
            id: self.next_op.fetch_add(1, Ordering::Relaxed),
            thread: ti,
            tid,
            request,
            skey: skey.cloned(),
            what,
            t0: 0,
            t1: 0,
            stream: None,
            stream_cupti: 0,
            handle: 0,
            generation: 0,
            prev: Tail::Empty,
            event_src: None,
            waited: Vec::new(),
            operator: None,
            call_site: None,
            slot: None,
            entry: None,
            injected: false,
            delays_target: false,
            error: None,
        }
    }

    /// Makes one call bound to `op`, timing it on the host.
    pub(super) fn call(&self, op: &mut Op, what: &str, f: impl FnOnce() -> CUresult) {
        cupti::push(op.id, None);
        op.t0 = now();
        let r = f();
        op.t1 = now();
        cupti::pop(false);
        if let Err(e) = check_cuda(what, r) {
            self.error(format!("op {}: {e}", op.id));
            op.error = Some(e);
        }
    }

    /// The slot of event `name`'s ring that `step` of request `request` (its
    /// index in its program) uses: `(request + request_offset) mod count`
    /// (docs/scenario-space.md, "Scenario language"; the simulator's rule).
    pub(super) fn event_slot(&self, name: &str, step: &Step, request: u32) -> usize {
        let base = self.event_ix[name];
        let offset = match step {
            Step::EventRecord { request_offset, .. } | Step::StreamWait { request_offset, .. } => {
                *request_offset as i64
            }
            _ => 0,
        };
        let ring = self.events.lock().unwrap()[base].ring.max(1) as i64;
        base + (request as i64 + offset).rem_euclid(ring) as usize
    }

    pub(super) fn stretch_of(&self, skey: &StepKey) -> Option<Stretch> {
        let p = self.plan?;
        match &p.stretch {
            Some((k, s))
                if k.program == skey.program
                    && k.request == skey.request
                    && k.step == skey.step =>
            {
                Some(*s)
            }
            _ => None,
        }
    }

    /// One API step's calls, by the step's kind, bound to one op; the op carries the
    /// NVTX range the thread is in.
    pub(super) fn api_step(
        &self,
        ti: usize,
        log: &mut ThreadLog,
        step: &Step,
        skey: &StepKey,
        request: usize,
    ) -> Op {
        let operator = log.nvtx.last().map(|n| n.0.clone());
        let call = StepCall {
            ti,
            tid: log.tid,
            skey,
            request,
            stretch: self.stretch_of(skey),
        };
        let mut op = match step {
            Step::Kernel { .. } => self.kernel_step(&call, step),
            Step::Copy { .. } => self.copy_step(&call, step),
            Step::Memset { .. } => self.memset_step(&call, step),
            Step::EventRecord { .. } => self.event_record_step(&call, step),
            Step::StreamWait { .. } => self.stream_wait_step(&call, step),
            Step::GraphLaunch { .. } => self.graph_launch_step(&call, step),
            Step::Sync { .. } => self.sync_step(&call, step),
            _ => unreachable!("not an API step"),
        };
        op.operator = operator;
        op
    }

    /// The op of one of the step's calls.
    fn step_op(&self, call: &StepCall, what: What) -> Op {
        self.new_op(call.ti, call.tid, Some(call.request), Some(call.skey), what)
    }

    /// A kernel launch, lengthened by the plan's stretch when this is its target.
    fn kernel_step(&self, call: &StepCall, step: &Step) -> Op {
        let Step::Kernel {
            stream,
            name,
            kind,
            duration_us,
            grid,
            block,
            launch: api,
            ..
        } = step
        else {
            unreachable!("a kernel step")
        };
        let skey = call.skey;
        let extra = match call.stretch {
            Some(Stretch::Ns(n)) if skey_plain(self.plan) => n,
            _ => 0,
        };
        let dur = (duration_us * 1000.0).round() as u64 + extra;
        let kernel = Kernel::from(*kind);
        let (kname, site) = self.step_names[skey.program][skey.step].clone();
        let what = What::Kernel {
            name: kname,
            kind: *kind,
            dur_ns: dur,
            extra_ns: extra,
            grid: *grid,
            block: *block,
            launch: *api,
            kernel,
        };
        let mut op = self.step_op(call, what);
        op.call_site = site;
        let via = if *api == LaunchApi::DriverEx {
            LaunchVia::LaunchEx
        } else {
            LaunchVia::Launch
        };
        let f = self.step_funcs[skey.program][skey.step]
            .clone()
            .ok_or_else(|| format!("kernel `{name}` was not prepared"));
        self.enqueue_kernel(
            &mut op,
            self.stream_ix[stream.as_str()],
            f,
            kernel,
            *grid,
            *block,
            dur,
            via,
        );
        op
    }

    /// A copy, of more bytes by the plan's stretch when this is its target.
    fn copy_step(&self, call: &StepCall, step: &Step) -> Op {
        let Step::Copy {
            stream,
            direction,
            bytes,
            memory,
            ..
        } = step
        else {
            unreachable!("a copy step")
        };
        let skey = call.skey;
        let extra = match call.stretch {
            Some(Stretch::Bytes(b)) => b,
            _ => 0,
        };
        let what = What::Copy {
            direction: *direction,
            bytes: *bytes + extra,
            extra_bytes: extra,
            memory: *memory,
        };
        let mut op = self.step_op(call, what);
        op.call_site = self.step_names[skey.program][skey.step].1.clone();
        self.enqueue_copy(
            &mut op,
            self.stream_ix[stream.as_str()],
            *direction,
            *bytes + extra,
            *memory,
        );
        op
    }

    /// A memset of the scratch buffer, of more bytes by the plan's stretch when this is
    /// its target (at most the buffer).
    fn memset_step(&self, call: &StepCall, step: &Step) -> Op {
        let Step::Memset { stream, bytes, .. } = step else {
            unreachable!("a memset step")
        };
        let extra = match call.stretch {
            Some(Stretch::Bytes(b)) => b,
            _ => 0,
        };
        let n = (*bytes + extra).min(self.dev.dev_cap as u64) as usize;
        let what = What::Memset {
            bytes: n as u64,
            extra_bytes: extra,
        };
        let mut op = self.step_op(call, what);
        let dst = self.dev.dev_a;
        self.on_stream(
            &mut op,
            self.stream_ix[stream.as_str()],
            "cuMemsetD8Async",
            |s| unsafe {
                // SAFETY: scratch buffer of at least n bytes.
                sys::cuMemsetD8Async(dst, 0, n, s)
            },
        );
        op
    }

    /// An event record on a stream: the event's slot of its ring remembers the op.
    fn event_record_step(&self, call: &StepCall, step: &Step) -> Op {
        let Step::EventRecord { event, stream, .. } = step else {
            unreachable!("an event record step")
        };
        let ei = self.event_slot(event, step, call.skey.request);
        let mut op = self.step_op(call, What::EventRecord { event: ei });
        let si = self.stream_ix[stream.as_str()];
        let mut st = self.streams[si].lock().unwrap();
        let mut evs = self.events.lock().unwrap();
        let (sh, eh) = (st.handle.0, evs[ei].handle.0);
        // Whatever the step's `api`: this backend loads only the driver (cudarc), as
        // for a launch the scenario calls through the runtime.
        // SAFETY: live event and stream.
        self.call(&mut op, "cuEventRecord", || unsafe {
            sys::cuEventRecord(eh, sh)
        });
        op.stream = Some(si);
        op.stream_cupti = st.cupti_id;
        op.handle = eh as u64;
        op.generation = evs[ei].generation;
        op.prev = std::mem::replace(&mut st.tail, Tail::one(op.id));
        evs[ei].last = Some(op.id);
        op
    }

    /// A stream's wait on an event: the op joins to the event's last record.
    fn stream_wait_step(&self, call: &StepCall, step: &Step) -> Op {
        let Step::StreamWait { stream, event, .. } = step else {
            unreachable!("a stream wait step")
        };
        let ei = self.event_slot(event, step, call.skey.request);
        let mut op = self.step_op(call, What::StreamWait { event: ei });
        let si = self.stream_ix[stream.as_str()];
        let mut st = self.streams[si].lock().unwrap();
        let evs = self.events.lock().unwrap();
        let (sh, eh) = (st.handle.0, evs[ei].handle.0);
        // SAFETY: live event and stream.
        let wait = |op: &mut Op| {
            self.call(op, "cuStreamWaitEvent", || unsafe {
                sys::cuStreamWaitEvent(sh, eh, 0)
            })
        };
        // Without CUPTI, events around the wait time it on its stream
        // (`truth::stamps`: the wait's record).
        match self.dev.copy_stamps {
            Some(stamps) => {
                let id = op.id;
                stamps.around(id, sh, || wait(&mut op));
            }
            None => wait(&mut op),
        }
        op.stream = Some(si);
        op.stream_cupti = st.cupti_id;
        op.handle = eh as u64;
        op.generation = evs[ei].generation;
        op.event_src = evs[ei].last;
        op.prev = std::mem::replace(&mut st.tail, Tail::one(op.id));
        op
    }

    /// A graph launch: its sinks become the stream's tail; a node the plan lengthens
    /// runs longer for this one launch.
    fn graph_launch_step(&self, call: &StepCall, step: &Step) -> Op {
        let Step::GraphLaunch { graph, stream, .. } = step else {
            unreachable!("a graph launch step")
        };
        let gi = self.graph_ix[graph.as_str()];
        let extra = match (&self.plan, call.stretch) {
            (Some(p), Some(Stretch::Ns(n))) if p.stretch_graph_node().is_some() => n,
            _ => 0,
        };
        let mut op = self.step_op(
            call,
            What::GraphLaunch {
                graph: gi,
                extra_ns: extra,
            },
        );
        let si = self.stream_ix[stream.as_str()];
        let g = self.graphs[gi].lock().unwrap();
        let mut st = self.streams[si].lock().unwrap();
        let (sh, exec) = (st.handle.0, g.exec.0);
        // A lengthened node: update the exec's kernel parameters for this
        // one launch (graph and node identity stay the same), then restore.
        let target = (extra > 0)
            .then(|| self.plan.and_then(|p| p.stretch_graph_node()))
            .flatten()
            .and_then(|nid| self.sc.graphs[gi].nodes.iter().position(|n| n.id == nid));
        if let Some(ni) = target {
            if let Err(e) = set_node_duration(&g, ni, g.args[ni].a + extra) {
                self.error(format!("graph_dependency injection: {e}"));
            }
        }
        // SAFETY: live exec and stream.
        self.call(&mut op, "cuGraphLaunch", || unsafe {
            sys::cuGraphLaunch(exec, sh)
        });
        if let Some(ni) = target {
            if let Err(e) = set_node_duration(&g, ni, g.args[ni].a) {
                self.error(format!("graph_dependency injection: {e}"));
            }
        }
        op.stream = Some(si);
        op.stream_cupti = st.cupti_id;
        op.handle = exec as u64;
        op.generation = g.generation;
        let sinks: Vec<DevRef> = g
            .sinks
            .iter()
            .map(|&n| DevRef {
                op: op.id,
                gnode: Some(n),
            })
            .collect();
        op.prev = std::mem::replace(&mut st.tail, Tail::from_vec(sinks));
        op
    }

    /// A synchronization on a stream, an event or the device: the op waits on what the
    /// target's tail (or the event's last record) was when it was called.
    fn sync_step(&self, call: &StepCall, step: &Step) -> Op {
        let Step::Sync {
            target,
            stream,
            event,
            ..
        } = step
        else {
            unreachable!("a sync step")
        };
        let mut op = self.step_op(call, What::Sync { target: *target });
        match target {
            SyncTarget::Stream => {
                let si = stream.as_deref().map(|s| self.stream_ix[s]).unwrap_or(0);
                let (sh, waited, cid) = {
                    let st = self.streams[si].lock().unwrap();
                    (st.handle, st.tail.as_slice().to_vec(), st.cupti_id)
                };
                op.waited = waited;
                op.stream = Some(si);
                op.stream_cupti = cid;
                op.handle = sh.0 as u64;
                // SAFETY: live stream.
                self.call(&mut op, "cuStreamSynchronize", || unsafe {
                    sys::cuStreamSynchronize(sh.0)
                });
            }
            SyncTarget::Event => {
                let ei = event
                    .as_deref()
                    .map(|e| self.event_slot(e, step, call.skey.request))
                    .unwrap_or(0);
                let (eh, last) = {
                    let evs = self.events.lock().unwrap();
                    (evs[ei].handle, evs[ei].last)
                };
                op.waited = last
                    .map(|o| DevRef { op: o, gnode: None })
                    .into_iter()
                    .collect();
                op.handle = eh.0 as u64;
                // SAFETY: live event.
                self.call(&mut op, "cuEventSynchronize", || unsafe {
                    sys::cuEventSynchronize(eh.0)
                });
            }
            SyncTarget::Device => {
                for s in &self.streams {
                    op.waited
                        .extend(s.lock().unwrap().tail.as_slice().iter().copied());
                }
                // SAFETY: no arguments.
                self.call(&mut op, "cuCtxSynchronize", || unsafe {
                    sys::cuCtxSynchronize()
                });
            }
        }
        op
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn enqueue_kernel(
        &self,
        op: &mut Op,
        si: usize,
        f: Result<(Func, String), String>,
        kernel: Kernel,
        grid: u32,
        block: u32,
        dur: u64,
        via: LaunchVia,
    ) {
        let (f, entry) = match f {
            Ok(f) => f,
            Err(e) => {
                self.error(e.clone());
                op.error = Some(e);
                return;
            }
        };
        let slot = self.slot();
        op.slot = Some(slot);
        op.entry = Some(entry);
        let mut args = self.kernel_args(kernel, grid, block, dur, op.id, slot);
        let grid = if kernel == Kernel::OccupancyHog {
            grid.min(self.dev.sms).max(1)
        } else {
            grid
        };
        // The hog's shared memory, not its threads, makes it own an SM, so
        // it launches with the application-like block it was given.
        let block = if kernel == Kernel::OccupancyHog && !(1..=1024).contains(&block) {
            kernels::gpu::HOG_BLOCK_THREADS
        } else {
            block
        };
        let launch = call_sites::launcher(op.call_site.as_deref());
        self.on_stream(
            op,
            si,
            if via == LaunchVia::LaunchEx {
                "cuLaunchKernelEx"
            } else {
                "cuLaunchKernel"
            },
            |s| unsafe {
                // SAFETY: arguments live across the call; buffers live for the session.
                launch(&f, grid, block, s, &mut args, via)
            },
        );
    }

    pub(super) fn enqueue_copy(
        &self,
        op: &mut Op,
        si: usize,
        direction: CopyDirection,
        bytes: u64,
        memory: HostMemory,
    ) {
        let n = (bytes as usize).min(self.dev.dev_cap);
        let host = match memory {
            HostMemory::Pinned => self.dev.pinned,
            HostMemory::Pageable => self.dev.pageable,
        } as *mut std::ffi::c_void;
        let (a, b) = (self.dev.dev_a, self.dev.dev_b);
        let name = match direction {
            CopyDirection::H2d => "cuMemcpyHtoDAsync",
            CopyDirection::D2h => "cuMemcpyDtoHAsync",
            CopyDirection::D2d => "cuMemcpyDtoDAsync",
        };
        // SAFETY: scratch buffers hold at least n bytes and live for the session.
        self.on_stream(op, si, name, |s| unsafe {
            match direction {
                CopyDirection::H2d => sys::cuMemcpyHtoDAsync_v2(a, host, n, s),
                CopyDirection::D2h => sys::cuMemcpyDtoHAsync_v2(host, a, n, s),
                CopyDirection::D2d => sys::cuMemcpyDtoDAsync_v2(b, a, n, s),
            }
        });
    }

    /// Enqueues one op on stream `si` under the stream's lock, so the
    /// recorded predecessor is the stream's real previous op.
    pub(super) fn on_stream(
        &self,
        op: &mut Op,
        si: usize,
        what: &str,
        f: impl FnOnce(sys::CUstream) -> CUresult,
    ) {
        let mut st = self.streams[si].lock().unwrap();
        let h = st.handle.0;
        match self.dev.copy_stamps {
            Some(stamps) if matches!(op.what, What::Copy { .. } | What::Memset { .. }) => {
                let id = op.id;
                stamps.around(id, h, || self.call(op, what, || f(h)));
            }
            _ => self.call(op, what, || f(h)),
        }
        op.stream = Some(si);
        op.stream_cupti = st.cupti_id;
        op.handle = h as u64;
        op.generation = st.generation;
        op.prev = std::mem::replace(&mut st.tail, Tail::one(op.id));
    }

    pub(super) fn recreate(
        &self,
        ti: usize,
        tid: u32,
        object: ObjectKind,
        name: &str,
        request: usize,
    ) -> Op {
        let mut op = self.new_op(ti, tid, Some(request), None, What::Recreate);
        let r: Result<(), String> = (|| match object {
            ObjectKind::Stream => {
                let si = self.stream_ix[name];
                let mut st = self.streams[si].lock().unwrap();
                let old = st.handle.0;
                let prio = st.priority;
                let mut new: sys::CUstream = std::ptr::null_mut();
                let mut r = CUresult::CUDA_SUCCESS;
                // SAFETY: destroying our stream after it drained, creating a new one.
                self.call(&mut op, "recreate stream", || unsafe {
                    sys::cuStreamSynchronize(old);
                    sys::cuStreamDestroy_v2(old);
                    r = sys::cuStreamCreateWithPriority(&mut new, 1, prio);
                    r
                });
                check_cuda("cuStreamCreateWithPriority", r)?;
                st.handle = SendHandle(new);
                st.cupti_id = stream_id(self.dev, new)?;
                st.generation += 1;
                st.tail = Tail::Empty;
                Ok(())
            }
            ObjectKind::Event => {
                // Every event of the ring is destroyed and created again.
                let base = self.event_ix[name];
                let mut evs = self.events.lock().unwrap();
                let ring = evs[base].ring.max(1) as usize;
                for ei in base..base + ring {
                    let old = evs[ei].handle.0;
                    let mut new: sys::CUevent = std::ptr::null_mut();
                    // SAFETY: destroying our event (pending work keeps it alive), creating a new one.
                    self.call(&mut op, "recreate event", || unsafe {
                        sys::cuEventDestroy_v2(old);
                        sys::cuEventCreate(&mut new, 0)
                    });
                    evs[ei].handle = SendHandle(new);
                    evs[ei].generation += 1;
                    evs[ei].last = None;
                }
                Ok(())
            }
            ObjectKind::Graph => {
                let gi = self.graph_ix[name];
                let mut g = self.graphs[gi].lock().unwrap();
                let (old, graph) = (g.exec.0, g.graph.0);
                let mut new: sys::CUgraphExec = std::ptr::null_mut();
                // SAFETY: re-instantiating our graph.
                self.call(&mut op, "recreate graph exec", || unsafe {
                    sys::cuGraphExecDestroy(old);
                    sys::cuGraphInstantiateWithFlags(&mut new, graph, 0)
                });
                g.exec = SendHandle(new);
                g.generation += 1;
                Ok(())
            }
        })();
        if let Err(e) = r {
            self.error(e.clone());
            op.error = Some(e);
        }
        op
    }
}

/// What the calls of one API step share: the calling thread (index and tid), the step,
/// the request it serves, and the plan's stretch when the step is its target.
struct StepCall<'s> {
    ti: usize,
    tid: u32,
    skey: &'s StepKey,
    request: usize,
    stretch: Option<Stretch>,
}
