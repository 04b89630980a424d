//! `CpuHog`: deschedule a victim thread by real CPU contention.
//!
//! The victim thread (any thread on the machine, by pid and tid) is pinned to
//! one CPU, and a hog thread of this process is pinned to the same CPU with a
//! higher priority: `SCHED_FIFO` when permitted (it then preempts the victim
//! at once and keeps it off the CPU for the whole spin), otherwise nice −20
//! (CFS/EEVDF weight 88761 against the victim's 1024 at nice 0: the victim
//! keeps about 1 % of the CPU, so it is switched out, still runnable). The hog
//! spins for the requested time, then drops its priority and exits, and the
//! victim's CPU affinity is restored.
//!
//! Privileges: changing another thread's affinity and raising a priority
//! need CAP_SYS_NICE (root). `SCHED_FIFO` also needs RLIMIT_RTPRIO > 0 or
//! CAP_SYS_NICE, and can be refused even to root (the H200 host refuses it,
//! docs/gpu-facts.md) — the nice fallback then applies and the report says so.

use std::time::Duration;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::clock::{gettid, monotonic_ns, schedstat, thread_state};
use crate::error::{sys, InjectorError, Result};

const MECH: &str = "CpuHog";

/// How the hog got its priority over the victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HogMechanism {
    /// `SCHED_FIFO` real-time priority: the victim does not run at all.
    Fifo,
    /// nice −20 on the hog thread: the victim keeps ~1 % of the CPU.
    Nice,
}

impl HogMechanism {
    pub fn as_str(self) -> &'static str {
        match self {
            HogMechanism::Fifo => "fifo",
            HogMechanism::Nice => "nice",
        }
    }
}

/// What one hog run did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HogReport {
    pub mechanism: HogMechanism,
    /// CPU the victim and the hog shared.
    pub cpu: usize,
    pub requested: Duration,
    /// CLOCK_MONOTONIC when the hog, on the victim's CPU at its raised
    /// priority, began spinning, and when it stopped.
    pub hog_start_ns: u64,
    pub hog_end_ns: u64,
    /// Increase of the victim's runqueue wait time (`/proc/.../schedstat`
    /// run_delay) over the run: the time it was runnable but not running,
    /// i.e. the switch-out as the scheduler saw it. `None` without schedstat.
    pub victim_run_delay: Option<Duration>,
    /// The victim's state (`R` = runnable) sampled while the hog spun.
    pub victim_state: Option<char>,
}

impl HogReport {
    pub fn hog_spin(&self) -> Duration {
        Duration::from_nanos(self.hog_end_ns.saturating_sub(self.hog_start_ns))
    }
}

/// A CPU-contention injector aimed at one thread.
#[derive(Debug, Clone)]
pub struct CpuHog {
    pub victim_pid: i32,
    pub victim_tid: i32,
    /// CPU to share with the victim; default: the victim's current CPU.
    pub cpu: Option<usize>,
    /// Try `SCHED_FIFO` before nice −20 (default true).
    pub allow_fifo: bool,
    /// `SCHED_FIFO` priority of the hog (1..=99, default 50).
    pub fifo_priority: i32,
    /// CLOCK_MONOTONIC moment the switch-out was requested. When set, the hog
    /// spins until this moment plus the duration rather than for the duration
    /// from its own start, so the time the hog took to start and land on the
    /// victim's CPU is part of the requested stall instead of added to it.
    pub requested_at_ns: Option<u64>,
    /// Put the victim back to `SCHED_OTHER` the moment the spin ends (for a
    /// victim that lowered itself to `SCHED_IDLE` so the hog preempts it at
    /// once): a `SCHED_IDLE` thread would otherwise wait behind any other
    /// thread that became runnable on that CPU meanwhile.
    pub restore_victim_policy: bool,
}

fn cpus_of(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

/// CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    sched_getaffinity(Pid::from_raw(0))
        .map(|s| cpus_of(&s))
        .unwrap_or_default()
}

/// CPUs this process's main thread may run on: what a thread of it may be
/// moved to, whatever the calling thread's own affinity.
pub fn process_cpus() -> Vec<usize> {
    sched_getaffinity(Pid::from_raw(std::process::id() as i32))
        .map(|s| cpus_of(&s))
        .unwrap_or_else(|_| allowed_cpus())
}

/// The calling thread pinned to the CPU it runs on, until dropped: a
/// deschedule's victim, which the hog then finds where it expects it and
/// which no idle CPU can pull away while the hog holds this one.
pub struct PinnedHere {
    previous: CpuSet,
    cpu: usize,
}

impl PinnedHere {
    /// Pins the calling thread; `None` when the kernel refuses (the caller
    /// then goes on unpinned).
    pub fn now() -> Option<Self> {
        let cpu = nix::sched::sched_getcpu().ok()?;
        let previous = sched_getaffinity(Pid::from_raw(0)).ok()?;
        sched_setaffinity(Pid::from_raw(0), &one_cpu(cpu).ok()?).ok()?;
        Some(Self { previous, cpu })
    }

    /// The CPU the thread is pinned to.
    pub fn cpu(&self) -> usize {
        self.cpu
    }
}

impl Drop for PinnedHere {
    fn drop(&mut self) {
        let _ = sched_setaffinity(Pid::from_raw(0), &self.previous);
    }
}

fn one_cpu(cpu: usize) -> Result<CpuSet> {
    let mut set = CpuSet::new();
    set.set(cpu).map_err(|_| InjectorError::BadCpu {
        cpu,
        allowed: allowed_cpus(),
    })?;
    Ok(set)
}

/// Raise the calling thread's priority: `SCHED_FIFO` (when `allow_fifo`) or
/// nice −20.
fn raise_priority(allow_fifo: bool, fifo_priority: i32) -> Result<HogMechanism> {
    if allow_fifo {
        let param = libc::sched_param {
            sched_priority: fifo_priority,
        };
        // SAFETY: valid param pointer; pid 0 = calling thread.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
            return Ok(HogMechanism::Fifo);
        }
    }
    let tid = gettid();
    // SAFETY: plain syscall on our own thread id.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -20) };
    if rc == 0 {
        return Ok(HogMechanism::Nice);
    }
    match nix::errno::Errno::last() {
        nix::errno::Errno::EPERM | nix::errno::Errno::EACCES => {
            Err(InjectorError::PrivilegeMissing {
                mechanism: MECH,
                capability: "CAP_SYS_NICE",
                why: "to raise the hog's priority (SCHED_FIFO or nice -20)",
            })
        }
        e => Err(sys(MECH, "setpriority(-20)")(e)),
    }
}

fn drop_priority(mech: HogMechanism) {
    match mech {
        HogMechanism::Fifo => {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: as above.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
        }
        HogMechanism::Nice => {
            // SAFETY: as above.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, gettid() as libc::id_t, 0) };
        }
    }
}

/// Which mechanism a hog would get here, found by raising (then dropping)
/// the priority of a short-lived thread.
pub fn probe_mechanism(allow_fifo: bool) -> Result<HogMechanism> {
    std::thread::spawn(move || {
        let m = raise_priority(allow_fifo, 1)?;
        drop_priority(m);
        Ok(m)
    })
    .join()
    .map_err(|_| InjectorError::HogPanicked)?
}

impl CpuHog {
    pub fn new(victim_pid: i32, victim_tid: i32) -> Self {
        CpuHog {
            victim_pid,
            victim_tid,
            cpu: None,
            allow_fifo: true,
            fifo_priority: 50,
            requested_at_ns: None,
            restore_victim_policy: false,
        }
    }

    /// See [`CpuHog::restore_victim_policy`].
    pub fn restoring_victim_policy(mut self) -> Self {
        self.restore_victim_policy = true;
        self
    }

    /// Anchor the stall at `t` (CLOCK_MONOTONIC ns): the victim is held off
    /// its CPU until `t + duration`.
    pub fn requested_at(mut self, t: u64) -> Self {
        self.requested_at_ns = Some(t);
        self
    }

    /// Share this CPU with the victim.
    pub fn on_cpu(mut self, cpu: usize) -> Self {
        self.cpu = Some(cpu);
        self
    }

    /// Allow or forbid `SCHED_FIFO` (forbidding forces the nice mechanism).
    pub fn with_fifo(mut self, allow: bool) -> Self {
        self.allow_fifo = allow;
        self
    }

    fn pick_cpu(&self) -> Result<usize> {
        // The process's CPUs, not the calling thread's: a hog readied on a CPU
        // of its own (`ReadyHog`) may still move to any of them.
        let allowed = process_cpus();
        let cpu = match self.cpu {
            Some(c) => c,
            None => thread_state(self.victim_pid, self.victim_tid)
                .map(|(_, c)| c)
                .filter(|c| allowed.contains(c))
                .or_else(|| allowed.last().copied())
                .ok_or_else(|| InjectorError::Invalid("this process may run on no CPU".into()))?,
        };
        if !allowed.contains(&cpu) {
            return Err(InjectorError::BadCpu { cpu, allowed });
        }
        Ok(cpu)
    }

    /// Deschedule the victim for `duration` with a hog thread spawned for it.
    /// Blocks the caller for about `duration`. Restores the victim's affinity
    /// whatever happens.
    pub fn run(&self, duration: Duration) -> Result<HogReport> {
        self.deschedule(duration, false)
    }

    /// Like [`run`](Self::run), but the calling thread is the hog: it moves
    /// itself onto the victim's CPU at the raised priority, spins, and gets
    /// its own affinity and priority back. A running thread migrates in
    /// microseconds, while a freshly spawned one may first wait for a slice on
    /// a busy CPU — the caller should be a spare thread that is running now.
    pub fn run_here(&self, duration: Duration) -> Result<HogReport> {
        self.deschedule(duration, true)
    }

    fn deschedule(&self, duration: Duration, here: bool) -> Result<HogReport> {
        if duration.is_zero() || duration > Duration::from_secs(10) {
            return Err(InjectorError::Invalid(format!(
                "CpuHog duration must be in (0, 10 s], got {duration:?}"
            )));
        }
        if !(1..=99).contains(&self.fifo_priority) {
            return Err(InjectorError::Invalid(format!(
                "SCHED_FIFO priority must be 1..=99, got {}",
                self.fifo_priority
            )));
        }
        let (pid, tid) = (self.victim_pid, self.victim_tid);
        if !std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists() {
            return Err(InjectorError::NoSuchThread { pid, tid });
        }
        let cpu = self.pick_cpu()?;
        let victim = Pid::from_raw(tid);
        let old_affinity =
            sched_getaffinity(victim).map_err(sys(MECH, format!("sched_getaffinity({tid})")))?;
        sched_setaffinity(victim, &one_cpu(cpu)?).map_err(|e| match e {
            nix::errno::Errno::EPERM => InjectorError::PrivilegeMissing {
                mechanism: MECH,
                capability: "CAP_SYS_NICE",
                why: "to pin the victim thread to the hog's CPU",
            },
            e => sys(MECH, format!("sched_setaffinity({tid}, {{{cpu}}})"))(e),
        })?;
        let before = schedstat(pid, tid);
        let spin = HogSpin {
            allow_fifo: self.allow_fifo,
            prio: self.fifo_priority,
            cpu,
            hog_set: one_cpu(cpu)?,
            anchor: self.requested_at_ns,
            dur_ns: duration.as_nanos() as u64,
            victim: (pid, tid),
            restore_victim_policy: self.restore_victim_policy,
        };
        let outcome = if here {
            let own =
                sched_getaffinity(Pid::from_raw(0)).map_err(sys(MECH, "sched_getaffinity(self)"));
            own.and_then(|own| {
                let r = spin.spin();
                let _ = sched_setaffinity(Pid::from_raw(0), &own);
                r
            })
        } else {
            match std::thread::Builder::new()
                .name("causalbench-cpuhog".into())
                .spawn(move || spin.spin())
            {
                Ok(h) => h
                    .join()
                    .map_err(|_| InjectorError::HogPanicked)
                    .and_then(|r| r),
                Err(e) => Err(InjectorError::Io {
                    mechanism: MECH,
                    what: "spawning the hog thread".into(),
                    source: e,
                }),
            }
        };
        // Restore the victim whatever happened (it may have exited meanwhile).
        let restore = sched_setaffinity(victim, &old_affinity);
        let after = schedstat(pid, tid);
        let (mechanism, hog_start_ns, hog_end_ns, st) = outcome?;
        if let Err(e) = restore {
            if e != nix::errno::Errno::ESRCH {
                return Err(sys(MECH, format!("restoring the affinity of {tid}"))(e));
            }
        }
        let victim_run_delay = match (before, after) {
            (Some(b), Some(a)) => Some(Duration::from_nanos(a.1.saturating_sub(b.1))),
            _ => None,
        };
        Ok(HogReport {
            mechanism,
            cpu,
            requested: duration,
            hog_start_ns,
            hog_end_ns,
            victim_run_delay,
            victim_state: st,
        })
    }
}

/// One hog's spin: raise the priority, land on the victim's CPU, spin until
/// the deadline, drop the priority.
struct HogSpin {
    allow_fifo: bool,
    prio: i32,
    cpu: usize,
    hog_set: CpuSet,
    anchor: Option<u64>,
    dur_ns: u64,
    victim: (i32, i32),
    restore_victim_policy: bool,
}

impl HogSpin {
    /// (mechanism, spin start, spin end, victim state sampled midway).
    fn spin(&self) -> Result<(HogMechanism, u64, u64, Option<char>)> {
        let mech = raise_priority(self.allow_fifo, self.prio)?;
        // Moving onto the victim's CPU at the raised priority is what
        // preempts the victim.
        if let Err(e) = sched_setaffinity(Pid::from_raw(0), &self.hog_set) {
            drop_priority(mech);
            let cpu = self.cpu;
            return Err(sys(MECH, format!("sched_setaffinity(hog, {{{cpu}}})"))(e));
        }
        let t0 = monotonic_ns();
        let deadline = self.anchor.map_or(t0, |a| a.min(t0)) + self.dur_ns;
        let mid = t0 + deadline.saturating_sub(t0) / 2;
        let mut now = t0;
        let mut state = None;
        while now < deadline {
            std::hint::spin_loop();
            now = monotonic_ns();
            if state.is_none() && now >= mid {
                state = Some(thread_state(self.victim.0, self.victim.1).map(|(st, _)| st));
            }
        }
        if self.restore_victim_policy {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: valid param; a thread id of the victim's process (root
            // may change another thread's policy; failure leaves it idle).
            unsafe { libc::sched_setscheduler(self.victim.1, libc::SCHED_OTHER, &param) };
        }
        drop_priority(mech);
        Ok((mech, t0, now, state.flatten()))
    }
}

/// A hog made ready before it is needed: the calling thread pinned to the CPU
/// it runs on, at the hog's raised priority, until dropped (then its
/// affinity and priority come back).
///
/// Why: a hog thread waiting at nice 0 shares its CPU with whatever else runs
/// there, so on the H200 host it began its spin 100-170 us after the request
/// (and over a millisecond late now and then: a whole slice of another
/// thread), which left short deschedules no switch-out at all. At nice -20 on
/// a CPU of its own it is running when the request comes (docs/gpu-facts.md,
/// "CPU deschedule").
pub struct ReadyHog {
    previous: CpuSet,
    mechanism: HogMechanism,
}

impl ReadyHog {
    /// Readies the calling thread; `None` when the kernel refuses (the hog
    /// then starts from nice 0, as before).
    pub fn take() -> Option<Self> {
        let cpu = nix::sched::sched_getcpu().ok()?;
        let previous = sched_getaffinity(Pid::from_raw(0)).ok()?;
        let mechanism = raise_priority(false, 1).ok()?;
        if sched_setaffinity(Pid::from_raw(0), &one_cpu(cpu).ok()?).is_err() {
            drop_priority(mechanism);
            return None;
        }
        Some(Self {
            previous,
            mechanism,
        })
    }
}

impl Drop for ReadyHog {
    fn drop(&mut self) {
        drop_priority(self.mechanism);
        let _ = sched_setaffinity(Pid::from_raw(0), &self.previous);
    }
}
