//! The host side of a step's API call: the injected stall before it, the
//! call itself (its node and the records a CUPTI and an eBPF recorder make of
//! it), and what the calling thread waits for.

use super::*;

impl Engine<'_> {
    /// The background preemptions and page faults that hit this application
    /// thread before its next step: real (simulated) stalls with the records a
    /// recorder sees, and no ground-truth node (they are host time, not a cause).
    /// Returns whether any stall happened.
    pub(super) fn background_noise(&mut self, th: usize, key: u64) -> bool {
        let tid = self.threads[th].tid;
        let stalls = self.noise.before_step(th, self.threads[th].clock, key);
        for &stall in &stalls {
            let at = self.threads[th].clock;
            let cost = match stall {
                Stall::Preempted(off_cpu) => {
                    let cpu = 3 + (tid % 13);
                    self.b.record(None, |rid| Record::Sched {
                        rid,
                        tid,
                        cpu,
                        switch_out: at,
                        switch_in: at + off_cpu,
                        reason: SwitchReason::Preempted,
                    });
                    off_cpu
                }
                Stall::PageFault { cost, address } => {
                    self.b.record(None, |rid| Record::PageFault {
                        rid,
                        tid,
                        ts: at,
                        duration: cost,
                        address,
                        major: false,
                    });
                    cost
                }
            };
            self.threads[th].clock = at + cost;
        }
        !stalls.is_empty()
    }

    /// Host stall injected right before the target call (preemption or page faults).
    pub(super) fn host_stall(&mut self, th: usize, skey: &StepKey) -> Option<NodeId> {
        let plan = self.plan?;
        if plan.host_target.as_ref() != Some(skey) {
            return None;
        }
        let tid = self.threads[th].tid;
        let start = self.threads[th].clock;
        let mag = plan.magnitude_ns;
        if plan.kind == InjectionKind::HostDelay {
            // Application work: the thread stays on CPU, so nothing but time shows it.
            self.threads[th].clock = start + mag;
            self.injections.push(InjectionRecord {
                kind: plan.kind.as_str().into(),
                mechanism: plan.mechanism.clone(),
                requested_us: mag as f64 / 1000.0,
                measured_us: mag as f64 / 1000.0,
                fault_node: None,
                off_cpu_us: None,
            });
            return None;
        }
        let dur = match plan.kind {
            InjectionKind::CpuDeschedule => mag,
            InjectionKind::HostPageFaultMinor | InjectionKind::HostPageFaultMajor => {
                let major = plan.kind == InjectionKind::HostPageFaultMajor;
                let cost = if major {
                    self.be.host.major_fault_ns
                } else {
                    self.be.host.minor_fault_ns
                };
                let n = (mag as f64 / cost as f64).round().max(1.0) as u64;
                n * cost
            }
            _ => return None,
        };
        let step = self.names.step(skey.program, skey.step).id.clone();
        let fault = self
            .b
            .injected_fault(plan.kind, tid, step, (start, start + dur));
        match plan.kind {
            InjectionKind::CpuDeschedule => {
                let cpu = 3 + (tid % 13);
                self.b.record(Some(fault), |rid| Record::Sched {
                    rid,
                    tid,
                    cpu,
                    switch_out: start,
                    switch_in: start + dur,
                    reason: SwitchReason::Preempted,
                });
            }
            _ => {
                let major = plan.kind == InjectionKind::HostPageFaultMajor;
                let cost = if major {
                    self.be.host.major_fault_ns
                } else {
                    self.be.host.minor_fault_ns
                };
                let n = dur / cost;
                for i in 0..n {
                    let address =
                        0x7f3a_0000_0000 + (crate::mix(self.seed ^ i) % (1 << 30)) / 4096 * 4096;
                    self.b.record(Some(fault), |rid| Record::PageFault {
                        rid,
                        tid,
                        ts: start + i * cost,
                        duration: cost,
                        address,
                        major,
                    });
                }
            }
        }
        self.threads[th].clock = start + dur;
        self.injections.push(InjectionRecord {
            kind: plan.kind.as_str().into(),
            mechanism: plan.mechanism.clone(),
            requested_us: mag as f64 / 1000.0,
            measured_us: dur as f64 / 1000.0,
            fault_node: Some(fault),
            // The model's preemption takes the thread off the CPU for all of it.
            off_cpu_us: (plan.kind == InjectionKind::CpuDeschedule).then_some(dur as f64 / 1000.0),
        });
        Some(fault)
    }

    /// Emits the API call (node + api, uprobe and external-correlation records).
    /// `external_id`: the request an instrumented application tags the call with.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn api_call(
        &mut self,
        th: usize,
        kind: NodeKind,
        api: Api,
        info: NodeInfo,
        start: Ns,
        end: Ns,
        handle: u64,
        external_id: Option<u64>,
    ) -> (NodeId, u32) {
        let tid = self.threads[th].tid;
        let corr = self.correlation;
        self.correlation += 1;
        let call_site = info.call_site.clone();
        let name = self.names.api(api).clone();
        let node = self.b.call(
            kind,
            name,
            info,
            (start, end),
            Some(&mut self.threads[th].prev),
        );
        let spec = api.spec();
        self.b.record(Some(node), |rid| Record::Api {
            rid,
            domain: spec.domain,
            cbid: spec.cbid,
            name: self.names.api(api).clone(),
            tid,
            start,
            end,
            correlation_id: corr,
        });
        let enter = start + (end - start).min(400) / 2;
        let exit = end.saturating_sub((end - start).min(400) / 2).max(enter);
        self.b.record(Some(node), |rid| {
            let stack = self.names.stack(api, call_site.as_ref());
            Record::Uprobe {
                rid,
                tid,
                function: self.names.driver_fn(api).clone(),
                enter,
                exit,
                handle,
                stack,
            }
        });
        if let (true, Some(external_id)) = (self.instrumented, external_id) {
            self.b.record(None, |rid| Record::ExternalCorrelation {
                rid,
                external_kind: self.names.request_kind.clone(),
                external_id,
                correlation_id: corr,
            });
        }
        (node, corr)
    }

    /// One API step: the call and what it enqueues or waits for, by the step's kind
    /// ([`Engine::stream_step`], [`Engine::graph_launch_step`], [`Engine::sync_step`]);
    /// then what the call waited on (an injected stall, a pageable copy's sync) and its key.
    pub(super) fn api_step(
        &mut self,
        th: usize,
        item: &Item,
        step: &Step,
        skey: StepKey,
        key: u64,
    ) {
        let fault = item.stalled.flatten().or(item.pending_fault);
        let current = self.threads[th].current.as_mut().unwrap();
        current.stalled = None;
        current.pending_fault = None;
        let request = &self.requests[item.request];
        let (token, external_id) = (request.token.clone(), Some(request.external_id));
        let tid = self.threads[th].tid;
        let operator = self.threads[th].nvtx.last().map(|n| n.0.clone());
        let step_id = self.names.step(skey.program, skey.step).id.clone();
        let mut targets = self.targets[skey.program][skey.step];
        // An event ring's slot is the request's (docs/scenario-space.md).
        targets.event = targets
            .event
            .map(|base| self.event_slot(base, step, skey.request));
        let start = self.threads[th].clock;
        let call = StepCall {
            th,
            skey,
            key,
            start,
            external_id,
            targets,
            token,
            step_id,
            tid,
            operator,
        };
        let pending_sync = item.pending_sync;
        self.threads[th].current.as_mut().unwrap().pending_sync = None;
        let node = match step {
            Step::Kernel { .. }
            | Step::Copy { .. }
            | Step::Memset { .. }
            | Step::EventRecord { .. }
            | Step::StreamWait { .. } => self.stream_step(&call, step),
            Step::GraphLaunch { .. } => self.graph_launch_step(&call),
            Step::Sync { target, event, .. } => self.sync_step(&call, target, event.is_some()),
            Step::HostWork { .. }
            | Step::Handoff { .. }
            | Step::NvtxPush { .. }
            | Step::NvtxPop
            | Step::Recreate { .. } => {
                unreachable!("not an API step")
            }
        };
        self.b.call_waited(node, fault, pending_sync);
        if call.step_id.is_some() {
            self.keys.insert(
                StepKey {
                    api: true,
                    ..call.skey
                },
                node,
            );
        }
    }

    /// A call that enqueues one op on one stream (a kernel, a copy, a memset, an event
    /// record, a stream wait): these share everything but the op itself. Returns the
    /// call's node.
    fn stream_step(&mut self, call: &StepCall, step: &Step) -> NodeId {
        let (th, key, start) = (call.th, call.key, call.start);
        let si = call.targets.stream.expect("stream steps name a stream");
        let stream_call = self.stream_call(
            step,
            call.skey.program,
            si,
            call.skey.step,
            call.targets.event,
        );
        let end = start + self.call_latency(key, stream_call.latency_ns);
        let inf = call.info(
            stream_call.call_site,
            Some(self.streams[si].cupti_id),
            stream_call.generation,
        );
        let (node, corr) = self.api_call(
            th,
            NodeKind::ApiCall,
            stream_call.api,
            inf.clone(),
            start,
            end,
            stream_call.handle,
            call.external_id,
        );
        let at = Enqueued {
            si,
            launch: node,
            queued: start + QUEUE_OFFSET_NS,
            corr,
            info: inf,
        };
        let dev = self.enqueue_stream_op(call, step, at);
        self.remember(&call.skey, dev);
        let ret = self.wait_for_pageable_copy(call, step, node, end, dev);
        self.threads[th].clock = ret;
        node
    }

    /// Places a stream step's device op, enqueued `at`. Returns its node.
    fn enqueue_stream_op(&mut self, call: &StepCall, step: &Step, at: Enqueued) -> NodeId {
        let (skey, key) = (&call.skey, call.key);
        match step {
            Step::Kernel {
                duration_us,
                grid,
                block,
                ..
            } => {
                let names = self.names.step(skey.program, skey.step);
                let name = names.name.clone().expect("kernels have a name");
                let duration =
                    self.jitter(key ^ 0xD, (duration_us * 1000.0) as Ns) + self.stretch(skey);
                let launch = KernelLaunch {
                    name: &name,
                    grid: *grid,
                    block: *block,
                    duration,
                };
                self.place_kernel(at, launch, skey)
            }
            Step::Copy {
                direction,
                bytes,
                memory,
                ..
            } => {
                let copy = Transfer {
                    direction: *direction,
                    bytes: *bytes,
                    memory: *memory,
                };
                self.memcpy(at, copy, skey, key)
            }
            Step::Memset { bytes, .. } => self.memset(at, *bytes, skey, key),
            Step::EventRecord { .. } => {
                let ei = call.targets.event.expect("event steps name an event");
                self.event_record(at, ei)
            }
            Step::StreamWait { .. } => {
                let ei = call.targets.event.expect("event steps name an event");
                self.stream_wait(at, ei)
            }
            _ => unreachable!("not a stream step"),
        }
    }

    /// When a stream step's call returns: pageable copies are staged through the host,
    /// so the call returns only when the copy `dev` is done (an implicit
    /// synchronization); every other call at its `end`.
    fn wait_for_pageable_copy(
        &mut self,
        call: &StepCall,
        step: &Step,
        node: NodeId,
        end: Ns,
        dev: NodeId,
    ) -> Ns {
        let mut ret = end;
        if let Step::Copy {
            memory: HostMemory::Pageable,
            direction,
            ..
        } = step
        {
            if *direction != CopyDirection::D2d {
                let (th, key) = (call.th, call.key);
                let be = self.be;
                let hp = &be.host;
                let done = self.b.truth.nodes[dev as usize].end;
                ret = end.max(done + self.jitter(key ^ 7, hp.resume_ns));
                self.block(th, end, ret);
                self.b.truth.nodes[node as usize].end = ret;
                if let Some(Record::Api { end, .. }) = self.last_record_of(node, "api") {
                    *end = ret;
                }
                self.threads[th].current.as_mut().unwrap().pending_sync = Some(dev);
            }
        }
        ret
    }

    /// A graph launch: the call, and the graph's nodes enqueued on its stream. Returns
    /// the call's node.
    fn graph_launch_step(&mut self, call: &StepCall) -> NodeId {
        let (th, key, start) = (call.th, call.key, call.start);
        let be = self.be;
        let hp = &be.host;
        let si = call.targets.stream.expect("graph launches name a stream");
        let gi = call.targets.graph.expect("graph launches name a graph");
        let end = start + self.call_latency(key, hp.graph_launch_ns);
        let s = &self.streams[si];
        let inf = call.info(None, Some(s.cupti_id), self.graphs[gi].generation);
        let handle = 0x5800_0000_0000 + self.graphs[gi].exec_id as u64 * 0x100;
        let (node, corr) = self.api_call(
            th,
            NodeKind::GraphLaunch,
            Api::GraphLaunch,
            inf.clone(),
            start,
            end,
            handle,
            call.external_id,
        );
        let at = Enqueued {
            si,
            launch: node,
            queued: start + QUEUE_OFFSET_NS,
            corr,
            info: inf,
        };
        self.graph_launch(at, gi, &call.skey, key);
        self.remember(&call.skey, node);
        self.threads[th].clock = end;
        node
    }

    /// A synchronization call: it returns when what it waits on is done (and the thread
    /// blocks until then). `joins_event`: an event sync that names its event joins to the
    /// record it waited on. Returns the call's node.
    fn sync_step(&mut self, call: &StepCall, target: &SyncTarget, joins_event: bool) -> NodeId {
        let (th, key, start) = (call.th, call.key, call.start);
        let be = self.be;
        let hp = &be.host;
        let (api, sync_type, handle, waited, sync_stream) = self.sync_waits_on(call, target);
        // An event sync joins to the record it waited on, like a stream wait does.
        let waited_sync_id = match (target, joins_event) {
            (SyncTarget::Event, true) => self.events
                [call.targets.event.expect("event syncs name an event")]
            .last
            .map(|l| l.2)
            .unwrap_or(0),
            _ => 0,
        };
        let call_end = start + self.call_latency(key, hp.sync_call_ns);
        let done = waited
            .iter()
            .map(|&n| self.b.truth.nodes[n as usize].end)
            .max()
            .unwrap_or(0);
        let ret = if done > call_end {
            done + self.jitter(key ^ 7, hp.resume_ns)
        } else {
            call_end
        };
        let inf = call.info(None, None, 0);
        let (node, corr) = self.api_call(
            th,
            NodeKind::Synchronization,
            api,
            inf,
            start,
            ret,
            handle,
            call.external_id,
        );
        self.b.sync_waits(node, &waited);
        self.b.record(Some(node), |rid| Record::Sync {
            rid,
            sync_type,
            stream: sync_stream,
            event: if sync_type == SyncType::EventSynchronize {
                handle
            } else {
                0
            },
            event_sync_id: waited_sync_id,
            correlation_id: corr,
            start,
            end: ret,
        });
        self.block(th, call_end, ret);
        self.remember(&call.skey, node);
        self.threads[th].clock = ret;
        node
    }

    /// What a synchronization call is and waits on: its API, CUPTI sync type and handle,
    /// the device nodes it waits for and the CUPTI id of the stream it names (0: none).
    fn sync_waits_on(
        &mut self,
        call: &StepCall,
        target: &SyncTarget,
    ) -> (Api, SyncType, u64, Vec<NodeId>, u32) {
        match target {
            SyncTarget::Stream => {
                let si = call.targets.stream.expect("stream syncs name a stream");
                self.stream_ready(si);
                let s = &self.streams[si];
                (
                    Api::StreamSynchronize,
                    SyncType::StreamSynchronize,
                    s.handle,
                    s.tail.clone(),
                    s.cupti_id,
                )
            }
            SyncTarget::Event => {
                let e = &self.events[call.targets.event.expect("event syncs name an event")];
                (
                    Api::EventSynchronize,
                    SyncType::EventSynchronize,
                    e.handle,
                    e.last.map(|l| vec![l.0]).unwrap_or_default(),
                    0,
                )
            }
            SyncTarget::Device => (
                Api::DeviceSynchronize,
                SyncType::ContextSynchronize,
                0,
                self.all_tails(),
                0,
            ),
        }
    }

    /// The API call a stream step makes: names, latency, the raw handle its first argument carries.
    pub(super) fn stream_call(
        &self,
        step: &Step,
        program: usize,
        si: usize,
        step_ix: usize,
        event: Option<usize>,
    ) -> StreamCall {
        let hp = &self.be.host;
        let s = &self.streams[si];
        let call_site = || self.names.step(program, step_ix).call_site.clone();
        let event = || &self.events[event.expect("an event step")];
        let (api, latency_ns, handle, generation, call_site) = match step {
            Step::Kernel { launch, .. } => {
                let api = match launch {
                    LaunchApi::Runtime => Api::LaunchKernel,
                    LaunchApi::Driver => Api::CuLaunchKernel,
                    LaunchApi::DriverEx => Api::CuLaunchKernelEx,
                };
                (api, hp.launch_ns, s.handle, s.generation, call_site())
            }
            Step::Copy { direction, .. } => (
                Api::memcpy(*direction),
                hp.copy_call_ns,
                s.handle,
                s.generation,
                call_site(),
            ),
            Step::Memset { .. } => (Api::MemsetAsync, hp.launch_ns, s.handle, s.generation, None),
            Step::EventRecord { api, .. } => {
                let e = event();
                (
                    match api {
                        EventApi::Runtime => Api::EventRecord,
                        EventApi::Driver => Api::CuEventRecord,
                    },
                    hp.event_call_ns,
                    e.handle,
                    e.generation,
                    None,
                )
            }
            // cuStreamWaitEvent(hStream, hEvent, flags): the first argument is the stream.
            Step::StreamWait { api, .. } => (
                match api {
                    EventApi::Runtime => Api::StreamWaitEvent,
                    EventApi::Driver => Api::CuStreamWaitEvent,
                },
                hp.event_call_ns,
                s.handle,
                event().generation,
                None,
            ),
            _ => unreachable!("not a stream step"),
        };
        StreamCall {
            api,
            latency_ns,
            handle,
            generation,
            call_site,
        }
    }

    /// Only steps with an id can be targets or symptoms, so only they are remembered.
    pub(super) fn remember(&mut self, skey: &StepKey, node: NodeId) {
        crate::keys::remember(&mut self.keys, self.sc, skey, node);
    }

    pub(super) fn last_record_of(&mut self, node: NodeId, kind: &str) -> Option<&mut Record> {
        let rids = self.b.truth.nodes[node as usize].rids.clone();
        self.b
            .trace
            .iter_mut()
            .rev()
            .take(8)
            .find(|r| rids.contains(&r.rid()) && r.kind_name() == kind)
    }

    /// A blocked host thread shows up to eBPF as a voluntary switch-out.
    pub(super) fn block(&mut self, th: usize, from: Ns, to: Ns) {
        if to > from + 20_000 {
            let tid = self.threads[th].tid;
            let cpu = 3 + (tid % 13);
            self.b.record(None, |rid| Record::Sched {
                rid,
                tid,
                cpu,
                switch_out: from,
                switch_in: to,
                reason: SwitchReason::Blocked,
            });
        }
    }
}

/// What the calls of one API step share: the calling thread, the step, when the call
/// starts, the request it serves (and its external correlation id), the objects the step
/// names, and the facts of the call's node.
struct StepCall {
    th: usize,
    skey: StepKey,
    key: u64,
    start: Ns,
    external_id: Option<u64>,
    targets: StepTargets,
    token: SharedStr,
    step_id: Option<SharedStr>,
    tid: u32,
    operator: Option<SharedStr>,
}

impl StepCall {
    /// The call's node facts, given what differs by call.
    fn info(&self, call_site: Option<SharedStr>, stream: Option<u32>, generation: u32) -> NodeInfo {
        NodeInfo {
            request: Some(self.token.clone()),
            step: self.step_id.clone(),
            thread: Some(self.tid),
            stream,
            call_site,
            operator: self.operator.clone(),
            generation,
        }
    }
}
