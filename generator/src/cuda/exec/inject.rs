//! The injection side of a run: host stalls on the victim thread, and the
//! injector thread that issues the plan's device work at the trigger.

use super::*;

impl<'a> Exec<'a> {
    /// Host stall injected just before the target step's call, on the
    /// victim thread itself.
    pub(super) fn host_stall(
        &self,
        ti: usize,
        log: &mut ThreadLog,
        plan: &Plan,
        skey: &StepKey,
    ) -> Option<usize> {
        let t0 = now();
        let mag = plan.magnitude_ns;
        let mut switched_out_ns = None;
        let mut resumed = None;
        let mechanism = match plan.kind {
            InjectionKind::HostDelay => {
                spin_until(t0 + mag);
                "cuda:host-compute (busy loop on the launching thread)".to_string()
            }
            InjectionKind::HostPageFaultMinor | InjectionKind::HostPageFaultMajor => {
                let pf = plan.page_faults.lock().ok().and_then(|mut g| g.take());
                match pf {
                    Some(mut pf) => {
                        let r = pf.trigger_until(t0 + mag);
                        // Back into the plan: unmapping hundreds of touched
                        // pages takes hundreds of microseconds, which belong
                        // after the run, not in the stall.
                        if let Ok(mut g) = plan.page_faults.lock() {
                            *g = Some(pf);
                        }
                        match r {
                            Ok(r) => format!(
                                "cuda:page-faults ({} minor, {} major faults touching {} fresh pages on the launching thread, {:.2} us each)",
                                r.minor_faults,
                                r.major_faults,
                                r.pages_touched,
                                r.per_fault().map(|d| d.as_nanos() as f64 / 1e3).unwrap_or(0.0)
                            ),
                            Err(e) => {
                                self.error(format!("page-fault injection: {e}"));
                                format!("cuda:page-faults failed: {e}")
                            }
                        }
                    }
                    None => {
                        let e = plan
                            .page_fault_error
                            .clone()
                            .unwrap_or_else(|| "no prepared pages".into());
                        self.error(format!("page-fault injection: {e}"));
                        format!("cuda:page-faults unavailable: {e}")
                    }
                }
            }
            InjectionKind::CpuDeschedule => {
                // At SCHED_IDLE the victim is preempted the moment the hog
                // lands on its CPU and stays runnable-but-off until the hog
                // stops (a nice 0 thread would get EEVDF slices meanwhile).
                // Pinned to the CPU it is on, the victim cannot be pulled to an
                // idle one while the hog holds this one, and the hog's own
                // pinning of the victim moves nothing (a running thread's
                // migration waits for its CPU). The hog is told that CPU, so it
                // reads nothing of the victim before it moves there.
                let pinned = injectors::PinnedHere::now();
                let cpu = pinned.as_ref().map_or(usize::MAX, |p| p.cpu());
                self.inj.done.store(false, Ordering::Release);
                self.inj.hog_end.store(0, Ordering::Release);
                self.inj.victim_tid.store(log.tid, Ordering::Release);
                self.inj.victim_cpu.store(cpu, Ordering::Release);
                self.inj.deschedule_at.store(t0, Ordering::Release);
                self.inj.state.store(DESCHEDULE, Ordering::Release);
                // Lowered only once the hog is on its way: a SCHED_IDLE victim
                // is switched out by any thread of its CPU, for as long as that
                // thread likes, which no hog controls.
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: changes the calling thread's own policy.
                let idle = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } == 0;
                // Keep running until switched out and back (or the hog is done).
                let deadline = t0 + mag * 4 + 200_000_000;
                let (mut last, mut gaps, mut longest) = (t0, 0u64, 0u64);
                // When the victim ran again after its longest switch-out: the
                // resume the hog's early stop is calibrated on.
                let mut resumed_at = 0u64;
                loop {
                    let t = now();
                    let gap = t - last;
                    if gap > 20_000 {
                        gaps += gap;
                        if gap > longest {
                            longest = gap;
                            resumed_at = t;
                        }
                    }
                    last = t;
                    // A slice the scheduler grants the victim before the hog's
                    // end (EEVDF gives even SCHED_IDLE threads one now and
                    // then) does not end the stall early.
                    if (idle && longest >= mag / 2 && t >= t0 + mag)
                        || self.inj.done.load(Ordering::Acquire)
                        || t > deadline
                    {
                        break;
                    }
                    std::hint::spin_loop();
                }
                if idle {
                    // SAFETY: back to the normal policy (root may always raise it).
                    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
                }
                drop(pinned);
                switched_out_ns = Some(longest);
                resumed = Some(resumed_at);
                // The hog's own report is added once the run is over (see `run`).
                format!(
                    "victim{} switched out {:.0} us in total, longest {:.0} us",
                    if idle { " at SCHED_IDLE meanwhile" } else { "" },
                    gaps as f64 / 1e3,
                    longest as f64 / 1e3
                )
            }
            _ => return None,
        };
        let t1 = now();
        let hog_end = self.inj.hog_end.load(Ordering::Acquire);
        if let Some(resumed_at) = resumed {
            let est = DESCHEDULE_RESUME_NS.load(Ordering::Relaxed);
            if let Some(next) = next_resume_estimate(est, hog_end, resumed_at) {
                DESCHEDULE_RESUME_NS.store(next, Ordering::Relaxed);
            }
        }
        let mut stalls = self.stalls.lock().unwrap();
        stalls.push(Stall {
            kind: plan.kind,
            thread: ti,
            tid: log.tid,
            skey: skey.clone(),
            t0,
            t1,
            mechanism,
            requested_ns: mag,
            switched_out_ns,
        });
        let index = stalls.len() - 1;
        log.events.push(HostEv::Stall { index });
        Some(index)
    }

    /// Asks the injector to issue its device work now and waits until it has.
    pub(super) fn trigger_injector(&self) {
        self.inj.state.store(REQUEST, Ordering::Release);
        // Work that must not delay the target (a negative control's unrelated
        // work) is nothing the application waits for: waiting for its launch
        // made the application's own next call late on the H200 (22–110 µs of
        // host enqueue in the negative controls of the shapes' dev split), a
        // delay no record explains. The injector clears the request itself.
        let must_precede = self
            .plan
            .is_some_and(|p| p.plan.actions.iter().any(|(_, a)| a.delays_target()));
        if !must_precede {
            return;
        }
        let deadline = now() + 500_000_000;
        while self.inj.state.load(Ordering::Acquire) != ACK {
            if now() > deadline {
                self.error("the injector did not acknowledge within 500 ms".into());
                return;
            }
            std::hint::spin_loop();
        }
        self.inj.state.store(IDLE, Ordering::Release);
    }

    /// The injector thread: waits (spinning, so it reacts within a
    /// microsecond) for the victim's trigger, then issues the planned work.
    pub(super) fn injector(&self, ti: usize, barrier: &Barrier, stop: &AtomicBool) -> ThreadLog {
        // SAFETY: binding the primary context.
        unsafe { sys::cuCtxSetCurrent(self.dev.ctx.0) };
        let tid = injectors::gettid() as u32;
        self.tids[ti].store(tid, Ordering::Release);
        let mut log = ThreadLog {
            tid,
            ..Default::default()
        };
        barrier.wait();
        let Some(plan) = self.plan else { return log };
        // A deschedule's hog waits ready: pinned where it runs, at its raised
        // priority, spinning without yielding, so that it is running when the
        // victim asks (injectors::ReadyHog says why). Once it has held the
        // victim it has nothing left to do and polls without spinning, so it
        // takes no CPU from the application.
        let mut ready = (plan.kind == InjectionKind::CpuDeschedule)
            .then(injectors::ReadyHog::take)
            .flatten();
        let mut relaxed = false;
        let mut spins = 0u64;
        while !stop.load(Ordering::Acquire) {
            match self.inj.state.load(Ordering::Acquire) {
                REQUEST => {
                    // Each kernel piece is its own launch, issued right after
                    // the one before: all are queued before the first ends.
                    // The victim waits only until what must be ahead of its
                    // target is queued: every piece on the target's own
                    // stream (a backlog, FIFO), else the first piece (a hog
                    // holds the SMs from its first piece on; the next ones
                    // wait at the highest priority). The application thread
                    // waiting for all of them was a host-side delay of its
                    // own that no record explains.
                    let ahead = plan
                        .realised
                        .iter()
                        .rposition(|a| {
                            matches!(
                                a,
                                DevAction::Kernel {
                                    on_target_stream: Some(_),
                                    ..
                                }
                            )
                        })
                        .unwrap_or(0);
                    let mut pieces = plan.realised.iter();
                    for a in pieces.by_ref().take(ahead + 1) {
                        self.inject_action(ti, &mut log, a);
                    }
                    // A victim that waits (`trigger_injector`) sees ACK and
                    // clears it; one that does not wait (nothing must precede
                    // its target) left the request for the injector to clear.
                    let waits = plan.plan.actions.iter().any(|(_, a)| a.delays_target());
                    self.inj
                        .state
                        .store(if waits { ACK } else { IDLE }, Ordering::Release);
                    for a in pieces {
                        self.inject_action(ti, &mut log, a);
                    }
                }
                DESCHEDULE => {
                    self.inj.state.store(IDLE, Ordering::Release);
                    let victim = self.inj.victim_tid.load(Ordering::Acquire) as i32;
                    // Anchored at the victim's request: the hog's start-up
                    // is part of the requested stall, not added to it.
                    let at = self.inj.deschedule_at.load(Ordering::Acquire)
                        - DESCHEDULE_RESUME_NS.load(Ordering::Relaxed);
                    let mut hog = injectors::CpuHog::new(std::process::id() as i32, victim);
                    let cpu = self.inj.victim_cpu.load(Ordering::Acquire);
                    if cpu != usize::MAX {
                        hog = hog.on_cpu(cpu);
                    }
                    let r = hog
                        .with_fifo(false)
                        .requested_at(at)
                        .restoring_victim_policy()
                        // This spinning thread is the hog: it lands on the
                        // victim's CPU within microseconds (a spawned thread
                        // may first wait for a slice on a busy CPU).
                        .run_here(std::time::Duration::from_nanos(plan.magnitude_ns.max(1)))
                        .map_err(|e| e.to_string());
                    // When the spin itself stopped (the report's stamp, not
                    // after the hog's clean-up): the resume is measured from it.
                    let spin_end = r.as_ref().map_or_else(|_| now(), |r| r.hog_end_ns);
                    self.inj.hog_end.store(spin_end, Ordering::Release);
                    if let Ok(mut g) = self.inj.report.lock() {
                        *g = Some(r);
                    }
                    self.inj.done.store(true, Ordering::Release);
                    ready = None;
                    relaxed = true;
                }
                _ if relaxed => std::thread::sleep(std::time::Duration::from_micros(100)),
                _ => {
                    spins += 1;
                    if ready.is_none() && spins.is_multiple_of(4096) {
                        std::thread::yield_now();
                    }
                    std::hint::spin_loop();
                }
            }
        }
        log
    }

    pub(super) fn inject_action(&self, ti: usize, log: &mut ThreadLog, a: &DevAction) {
        match a {
            DevAction::Kernel {
                on_target_stream,
                name,
                call_site,
                lane,
                kernel,
                grid,
                block,
                dur_ns,
                delays_target,
            } => {
                let si = match on_target_stream {
                    Some(s) => *s,
                    None => self.injector_streams[*lane % 2],
                };
                let what = What::Kernel {
                    name: Arc::from(name.as_str()),
                    kind: KernelKind::Spin,
                    dur_ns: *dur_ns,
                    extra_ns: 0,
                    grid: *grid,
                    block: *block,
                    launch: LaunchApi::Driver,
                    kernel: *kernel,
                };
                let mut op = self.new_op(ti, log.tid, None, None, what);
                op.injected = true;
                op.delays_target = *delays_target;
                op.call_site = call_site.as_deref().map(Arc::from);
                let f = self.func(name, *kernel);
                self.enqueue_kernel(
                    &mut op,
                    si,
                    f,
                    *kernel,
                    *grid,
                    *block,
                    *dur_ns,
                    LaunchVia::Launch,
                );
                log.events.push(HostEv::Api {
                    op: op.id,
                    fault: None,
                    pending: None,
                });
                log.ops.push(op);
            }
            DevAction::Copies { sizes, call_site } => {
                for bytes_each in sizes {
                    let what = What::Copy {
                        direction: CopyDirection::H2d,
                        bytes: *bytes_each,
                        extra_bytes: 0,
                        memory: HostMemory::Pinned,
                    };
                    let mut op = self.new_op(ti, log.tid, None, None, what);
                    op.injected = true;
                    op.delays_target = true;
                    op.call_site = call_site.as_deref().map(Arc::from);
                    self.enqueue_copy(
                        &mut op,
                        self.injector_streams[0],
                        CopyDirection::H2d,
                        *bytes_each,
                        HostMemory::Pinned,
                    );
                    log.events.push(HostEv::Api {
                        op: op.id,
                        fault: None,
                        pending: None,
                    });
                    log.ops.push(op);
                }
            }
        }
    }
}

/// The next estimate of a descheduled victim's resume time: halfway from
/// `est` towards the resume this stall showed, from the hog's stop
/// (`hog_end`) to the end of the victim's switch-out (`resumed_at`). `None`
/// when the stall showed none (no hog, or the victim ran again before the
/// hog stopped). Measured to the switch-out's end, not to the stall's end:
/// the victim spins on until the requested end, so that time always
/// exceeded the estimate and ratcheted it to its ceiling, stopping every
/// later hog up to 300 us early (on the H200, hogs spun 150-220 us less
/// than asked and stalls under about 200 us were not switched out at all).
pub(super) fn next_resume_estimate(est: u64, hog_end: u64, resumed_at: u64) -> Option<u64> {
    if hog_end == 0 || resumed_at <= hog_end {
        return None;
    }
    let (est, resume) = (est as i64, (resumed_at - hog_end) as i64);
    Some((est + (resume - est) / 2).clamp(0, DESCHEDULE_RESUME_MAX_NS as i64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A victim that resumes 20 us after each hog stops: the estimate
    /// settles at 20 us whatever it started from, and never climbs to the
    /// ceiling however long the victim spins after resuming.
    #[test]
    fn the_resume_estimate_settles_at_the_victims_resume() {
        for start in [0, 150_000, DESCHEDULE_RESUME_MAX_NS] {
            let mut est = start;
            for k in 0..40u64 {
                let hog_end = 1_000_000 * (k + 1);
                est = next_resume_estimate(est, hog_end, hog_end + 20_000).unwrap();
            }
            assert!(est.abs_diff(20_000) < 1_000, "from {start}: {est}");
        }
    }

    #[test]
    fn a_victim_back_before_the_hog_stopped_teaches_nothing() {
        assert_eq!(next_resume_estimate(50_000, 2_000, 1_000), None);
        assert_eq!(next_resume_estimate(50_000, 0, 1_000), None);
    }
}
