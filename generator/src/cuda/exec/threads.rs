//! The thread loop: one OS thread per declared host thread, request
//! arrivals dispatched on schedule, work handed across queues over channels.

use super::*;

impl<'a> Exec<'a> {
    /// Runs the scenario; returns the log (the device is synchronized after).
    pub fn run(mut self) -> RunLog {
        let nthreads = self.busy.len() - 1;
        let mut rxs = Vec::new();
        for _ in 0..nthreads {
            let (tx, rx) = channel();
            self.senders.push(Mutex::new(tx));
            rxs.push(rx);
        }
        let injector_needed = self
            .plan
            .is_some_and(|p| !p.actions.is_empty() || p.kind == InjectionKind::CpuDeschedule);
        let barrier = Barrier::new(nthreads + 1 + injector_needed as usize);
        let me = &self;
        let rooms = &QueueRooms::new(self.sc, self.poll_queues());
        let mut origin = 0;
        let mut arrivals = Vec::new();
        let mut logs: Vec<ThreadLog> = Vec::new();
        let stop_injector = AtomicBool::new(false);
        std::thread::scope(|s| {
            let mut handles = Vec::new();
            for (ti, rx) in rxs.into_iter().enumerate() {
                let barrier = &barrier;
                handles.push(
                    std::thread::Builder::new()
                        .name(format!("cb-worker-{ti}"))
                        .spawn_scoped(s, move || me.worker(ti, rx, barrier, rooms))
                        .expect("spawn worker thread"),
                );
            }
            let inj = injector_needed.then(|| {
                let barrier = &barrier;
                let stop = &stop_injector;
                std::thread::Builder::new()
                    // Named like the workers: a thread name must not name the injector.
                    .name(format!("cb-worker-{nthreads}"))
                    .spawn_scoped(s, move || me.injector(nthreads, barrier, stop))
                    .expect("spawn injector thread")
            });
            // SAFETY: binding the primary context to the dispatcher thread.
            unsafe { sys::cuCtxSetCurrent(me.dev.ctx.0) };
            barrier.wait();
            origin = now() + 1_000_000;
            for (k, r) in me.requests.iter().enumerate() {
                spin_until(origin + r.at_rel);
                let p = &me.sc.programs[r.program];
                let m = me.pick(&p.start, false, crate::mix(k as u64 ^ 0xA11));
                let t = now();
                arrivals.push(Arrival {
                    request: k,
                    t,
                    tid: me.tids[m].load(Ordering::Relaxed),
                });
                me.send(
                    m,
                    Item {
                        request: k,
                        step: 0,
                        handoff: None,
                    },
                );
            }
            let deadline = now() + 30_000_000_000;
            while me.done.load(Ordering::Acquire) < me.requests.len() {
                if now() > deadline {
                    me.error("the run did not finish within 30 s".into());
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            for tx in &me.senders {
                let _ = tx.lock().map(|t| t.send(Msg::Stop));
            }
            stop_injector.store(true, Ordering::Release);
            for h in handles {
                match h.join() {
                    Ok(l) => logs.push(l),
                    Err(_) => {
                        me.error("a worker thread panicked".into());
                        logs.push(ThreadLog::default());
                    }
                }
            }
            if let Some(h) = inj {
                match h.join() {
                    Ok(l) => logs.push(l),
                    Err(_) => me.error("the injector thread panicked".into()),
                }
            }
        });
        let end = now();
        self.finish_deschedule();
        // SAFETY: the run's work is done; wait for the device before flushing.
        if let Err(e) = check_cuda("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() }) {
            self.error(e);
        }
        let flushed = match self.dev.recorder {
            Some(r) => r.flush().unwrap_or_else(|e| {
                self.error(e);
                Default::default()
            }),
            None => Default::default(),
        };
        let used = self
            .next_slot
            .load(Ordering::Relaxed)
            .min(self.dev.log_slots) as usize;
        let mut device_log = vec![kernels::LogEntry::default(); used];
        if used > 0 {
            // SAFETY: the log holds at least `used` entries.
            let r = unsafe {
                sys::cuMemcpyDtoH_v2(
                    device_log.as_mut_ptr() as *mut std::ffi::c_void,
                    self.dev.log,
                    used * kernels::LogEntry::SIZE,
                )
            };
            if let Err(e) = check_cuda("reading the device log", r) {
                self.error(e);
            }
        }
        self.destroy();
        let injector = injector_needed.then_some(nthreads);
        RunLog {
            origin,
            arrivals,
            threads: logs,
            requests: std::mem::take(&mut self.requests),
            graphs: std::mem::take(&mut self.graph_meta),
            stalls: std::mem::take(&mut *self.stalls.lock().unwrap()),
            errors: std::mem::take(&mut *self.errors.lock().unwrap()),
            injector,
            device_log,
            flushed,
            end,
        }
    }

    /// Completes the cpu_deschedule stall's mechanism with the hog's report.
    pub(super) fn finish_deschedule(&self) {
        let report = self.inj.report.lock().ok().and_then(|mut g| g.take());
        let mut stalls = self.stalls.lock().unwrap();
        let Some(s) = stalls
            .iter_mut()
            .find(|s| s.kind == InjectionKind::CpuDeschedule)
        else {
            return;
        };
        s.mechanism = match report {
            Some(Ok(r)) => format!(
                "cuda:cpu-hog ({} hog pinned to the victim's cpu {}, spun {:.0} us{}; {})",
                match r.mechanism {
                    injectors::HogMechanism::Fifo => "SCHED_FIFO",
                    injectors::HogMechanism::Nice => "nice -20",
                },
                r.cpu,
                r.hog_spin().as_nanos() as f64 / 1e3,
                r.victim_run_delay
                    .map(|d| format!(
                        ", victim schedstat run delay {:.0} us",
                        d.as_nanos() as f64 / 1e3
                    ))
                    .unwrap_or_default(),
                s.mechanism
            ),
            Some(Err(e)) => {
                drop(stalls);
                self.error(format!("cpu_deschedule injection: {e}"));
                return;
            }
            None => {
                drop(stalls);
                self.error("cpu_deschedule injection: the hog did not report".into());
                return;
            }
        };
    }

    pub(super) fn destroy(&self) {
        // SAFETY: destroying this run's own objects after the device is idle.
        unsafe {
            for s in &self.streams {
                let s = s.lock().unwrap();
                sys::cuStreamDestroy_v2(s.handle.0);
            }
            for e in self.events.lock().unwrap().iter() {
                sys::cuEventDestroy_v2(e.handle.0);
            }
            for g in &self.graphs {
                let g = g.lock().unwrap();
                sys::cuGraphExecDestroy(g.exec.0);
                sys::cuGraphDestroy(g.graph.0);
            }
        }
    }

    pub(super) fn error(&self, e: String) {
        if let Ok(mut v) = self.errors.lock() {
            if v.len() < 50 {
                v.push(e);
            }
        }
    }

    pub(super) fn send(&self, m: usize, item: Item) {
        self.queued[m].fetch_add(1, Ordering::AcqRel);
        if let Ok(tx) = self.senders[m].lock() {
            if tx.send(Msg::Item(item)).is_err() {
                self.error(format!("thread {m} is gone"));
            }
        }
    }

    /// The pool member that takes new work: an idle one if any (seeded-random
    /// among idle ones when the queue is randomized), else the shortest queue.
    pub(super) fn pick(&self, pool: &str, randomized: bool, key: u64) -> usize {
        let members = &self.pools[pool];
        let idle: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&m| {
                !self.busy[m].load(Ordering::Acquire) && self.queued[m].load(Ordering::Acquire) == 0
            })
            .collect();
        let choose = |v: &[usize], salt: u64| {
            if randomized {
                v[(crate::mix(self.seed ^ key ^ salt) % v.len() as u64) as usize]
            } else {
                v[0]
            }
        };
        if !idle.is_empty() {
            return choose(&idle, 0x9001);
        }
        // One snapshot of the queue lengths: workers drain them concurrently,
        // so reading twice could leave no member at the minimum.
        let lens: Vec<(usize, usize)> = members
            .iter()
            .map(|&m| (m, self.queued[m].load(Ordering::Acquire)))
            .collect();
        let min = lens.iter().map(|l| l.1).min().unwrap_or(0);
        let shortest: Vec<usize> = lens.iter().filter(|l| l.1 == min).map(|l| l.0).collect();
        if shortest.is_empty() {
            return members[0];
        }
        choose(&shortest, 0x9002)
    }

    /// Whether every worker can poll its queue on a CPU of its own (the
    /// dispatcher, the injector and two spare CPUs set aside).
    pub(super) fn poll_queues(&self) -> bool {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        self.busy.len() + 3 <= cpus
    }

    /// How many ops and host events one thread may log (sized before the run).
    pub(super) fn log_capacity(&self) -> usize {
        let total: usize = self
            .sc
            .programs
            .iter()
            .map(|p| p.requests as usize * (p.steps.len() + 1))
            .sum();
        let threads = self.busy.len();
        if total * threads <= 4_000_000 {
            total
        } else {
            total / threads + 1024
        }
    }

    pub(super) fn worker(
        &self,
        ti: usize,
        rx: Receiver<Msg>,
        barrier: &Barrier,
        rooms: &QueueRooms,
    ) -> ThreadLog {
        // SAFETY: binding the primary context to this thread.
        if let Err(e) = check_cuda("cuCtxSetCurrent", unsafe {
            sys::cuCtxSetCurrent(self.dev.ctx.0)
        }) {
            self.error(e);
        }
        let tid = injectors::gettid() as u32;
        self.tids[ti].store(tid, Ordering::Release);
        let mut log = ThreadLog {
            tid,
            ..Default::default()
        };
        // Logging must not page-fault inside the run.
        let cap = self.log_capacity();
        prefault(&mut log.ops, cap);
        prefault(&mut log.events, cap);
        barrier.wait();
        // Where CPUs are plentiful, idle workers poll their queue instead of
        // sleeping: a futex wake-up on this VM costs 50 µs to over 1 ms, noise
        // the twin comparison would otherwise measure.
        let poll = self.poll_queues();
        let mut thread_free = 0;
        loop {
            let msg = if poll {
                let until = now() + 50_000_000;
                loop {
                    match rx.try_recv() {
                        Ok(m) => break Some(m),
                        Err(TryRecvError::Disconnected) => break None,
                        Err(TryRecvError::Empty) if now() > until => break rx.recv().ok(),
                        Err(TryRecvError::Empty) => std::hint::spin_loop(),
                    }
                }
            } else {
                rx.recv().ok()
            };
            let Some(Msg::Item(item)) = msg else { break };
            self.busy[ti].store(true, Ordering::Release);
            self.queued[ti].fetch_sub(1, Ordering::AcqRel);
            self.run_item(ti, &mut log, item, thread_free, rooms);
            thread_free = now();
            self.busy[ti].store(false, Ordering::Release);
        }
        log
    }

    pub(super) fn run_item(
        &self,
        ti: usize,
        log: &mut ThreadLog,
        item: Item,
        thread_free: Ns,
        rooms: &QueueRooms,
    ) {
        let r = &self.requests[item.request];
        let prog = &self.sc.programs[r.program];
        let (queue, handoff) = match item.handoff {
            Some((id, q)) => (q, Some(id)),
            None => (String::new(), None),
        };
        let taken_from = handoff.is_some().then(|| queue.clone());
        log.events.push(HostEv::TaskBegin {
            t: now(),
            thread_free,
            pending: log.pending.take(),
            request: item.request,
            handoff,
            queue,
        });
        // The take frees the item's slot only once its time is logged, so
        // a push that waited for it is logged after it (`record::steps::handoff`).
        if let Some(q) = taken_from {
            rooms.take(&q);
        }
        // The request token rides on CUPTI's external-correlation stack for
        // the whole task, as an instrumented application pushes it.
        let token = self.instrumented.then_some(r.token);
        if let Some(t) = token {
            cupti::push_token(t);
        }
        let mut si = item.step;
        // An injected host stall before a step that makes no call (host work)
        // delayed the thread's next host operation: it carries the fault.
        let mut carried_fault = None;
        while si < prog.steps.len() {
            let step = &prog.steps[si];
            let skey = StepKey {
                program: r.program,
                request: r.index,
                step: si,
                graph_node: None,
                api: false,
            };
            let mut fault = None;
            if let Some(plan) = self.plan {
                if plan.host_target.as_ref() == Some(&skey) {
                    fault = self.host_stall(ti, log, plan, &skey);
                }
                if plan.trigger.as_ref() == Some(&skey) {
                    self.trigger_injector();
                }
            }
            match step {
                Step::HostWork { duration_us, .. } => {
                    carried_fault = fault.or(carried_fault);
                    spin_until(now() + (duration_us * 1000.0).round() as u64);
                }
                Step::Handoff { queue } => {
                    let id = self.next_op.fetch_add(1, Ordering::Relaxed);
                    // A full bounded queue holds the push until a consumer takes an item.
                    let ready = now();
                    let t = match rooms.push(queue) {
                        Ok(true) => now(),
                        Ok(false) => ready,
                        Err(e) => {
                            self.error(e);
                            now()
                        }
                    };
                    log.events.push(HostEv::Handoff {
                        t,
                        ready,
                        id,
                        queue: queue.clone(),
                        request: item.request,
                        pending: log.pending.take(),
                        fault: fault.or(carried_fault.take()),
                    });
                    let decl = self.sc.queues.iter().find(|q| &q.name == queue);
                    let Some(decl) = decl else {
                        self.error(format!("no queue `{queue}`"));
                        break;
                    };
                    let key = crate::mix(((item.request as u64) << 24) ^ si as u64 ^ 0x5eed);
                    let m = self.pick(&decl.consumer, decl.randomized, key);
                    if token.is_some() {
                        cupti::pop_token();
                    }
                    self.send(
                        m,
                        Item {
                            request: item.request,
                            step: si + 1,
                            handoff: Some((id, queue.clone())),
                        },
                    );
                    return;
                }
                Step::NvtxPush { name } => log.nvtx.push((Arc::from(name.as_str()), now())),
                Step::NvtxPop => {
                    if let Some((name, t0)) = log.nvtx.pop() {
                        log.events.push(HostEv::Nvtx {
                            name: name.to_string(),
                            t0,
                            t1: now(),
                        });
                    }
                }
                Step::Recreate { object, name } => {
                    let op = self.recreate(ti, log.tid, *object, name, item.request);
                    log.ops.push(op);
                }
                _ => {
                    let op = self.api_step(ti, log, step, &skey, item.request);
                    let blocking = matches!(
                        step,
                        Step::Copy { memory: HostMemory::Pageable, direction, .. }
                            if *direction != CopyDirection::D2d
                    );
                    log.events.push(HostEv::Api {
                        op: op.id,
                        fault: fault.or(carried_fault.take()),
                        pending: log.pending.take(),
                    });
                    if blocking {
                        log.pending = Some(op.id);
                    }
                    log.ops.push(op);
                }
            }
            si += 1;
        }
        if token.is_some() {
            cupti::pop_token();
        }
        self.done.fetch_add(1, Ordering::AcqRel);
    }
}

/// Room in the scenario's bounded queues (`QueueDecl::capacity`): how many of
/// each one's items were pushed and not yet taken up by a consumer task. The
/// consumers' channels are per thread and unbounded; this is the bound.
pub(super) struct QueueRooms {
    /// Per bounded queue: its capacity and the items it holds.
    held: HashMap<String, (u32, AtomicU32)>,
    /// Whether a blocked producer spins (CPUs to spare, as the workers poll
    /// their channels) rather than sleeping on `freed`.
    spin: bool,
    lock: Mutex<()>,
    freed: std::sync::Condvar,
}

impl QueueRooms {
    pub(super) fn new(sc: &Scenario, spin: bool) -> Self {
        let held = sc
            .queues
            .iter()
            .filter_map(|q| Some((q.name.clone(), (q.capacity?, AtomicU32::new(0)))))
            .collect();
        QueueRooms {
            held,
            spin,
            lock: Mutex::new(()),
            freed: std::sync::Condvar::new(),
        }
    }

    /// Takes a slot of `queue` for a push, waiting while the queue is full;
    /// whether the queue is bounded (the caller then stamps when it got room).
    /// A push still waiting when the run's 30 s are over (a consumer that
    /// failed) is an error: the push goes ahead so that the run can end.
    fn push(&self, queue: &str) -> Result<bool, String> {
        let Some((capacity, held)) = self.held.get(queue) else {
            return Ok(false);
        };
        let deadline = now() + 30_000_000_000;
        let room = || {
            held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < *capacity).then_some(n + 1)
            })
            .is_ok()
        };
        while !room() {
            if now() > deadline {
                held.fetch_add(1, Ordering::AcqRel);
                return Err(format!(
                    "a push onto the full queue `{queue}` found no room within 30 s"
                ));
            }
            if self.spin {
                std::hint::spin_loop();
                continue;
            }
            let g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            // Checked again under the lock a take notifies under: no wake-up is lost.
            if room() {
                break;
            }
            let _ = self
                .freed
                .wait_timeout(g, std::time::Duration::from_millis(1));
        }
        Ok(true)
    }

    /// A consumer task took an item of `queue`: its slot is free.
    fn take(&self, queue: &str) {
        if let Some((_, held)) = self.held.get(queue) {
            held.fetch_sub(1, Ordering::AcqRel);
            if !self.spin {
                let _g = self.lock.lock();
                self.freed.notify_all();
            }
        }
    }
}
