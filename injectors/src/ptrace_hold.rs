//! `PtraceHold`: stop one thread of another process for a requested time.
//!
//! `PTRACE_SEIZE` the thread (by tid), `PTRACE_INTERRUPT` it, wait for the
//! stop, hold it stopped for the requested time, then `PTRACE_DETACH` (which
//! resumes it, re-delivering a signal that arrived meanwhile). The victim is
//! switched out in the "traced" state (`t`), not runnable — a real
//! deschedule that works where `SCHED_FIFO` is refused (the H200 host,
//! docs/gpu-facts.md: a 5.008 ms hold gave the victim a 5.057 ms gap).
//!
//! Limitation: Linux refuses to ptrace a thread of the caller's own thread
//! group, so the victim is `(pid, tid)` of *another* process (the workload
//! runs in a child process, or the injector does). Asking for one of our own
//! threads is [`InjectorError::OwnThreadGroup`].
//!
//! Privileges: CAP_SYS_PTRACE (root), or, under Yama `ptrace_scope` 1, the
//! victim being a descendant of the caller. The whole seize → detach sequence
//! runs on the calling thread (ptrace's tracer is a thread).

use std::time::Duration;

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::clock::{monotonic_ns, sleep_until_ns, thread_state};
use crate::error::{sys, InjectorError, Result};

const MECH: &str = "PtraceHold";

/// A ptrace-based hold of one thread of another process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtraceHold {
    pub pid: i32,
    pub tid: i32,
}

/// What one hold did (CLOCK_MONOTONIC nanoseconds).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HoldReport {
    pub requested: Duration,
    /// When PTRACE_INTERRUPT was issued.
    pub interrupt_ns: u64,
    /// When the stop was confirmed by waitpid.
    pub stopped_ns: u64,
    /// When PTRACE_DETACH resumed the thread.
    pub resumed_ns: u64,
    /// The thread's state sampled during the hold (`t` = tracing stop).
    pub state_during: Option<char>,
    /// A signal that arrived during the hold and was re-delivered at detach.
    pub redelivered_signal: Option<i32>,
}

impl HoldReport {
    /// Time the thread was known to be stopped.
    pub fn held(&self) -> Duration {
        Duration::from_nanos(self.resumed_ns.saturating_sub(self.stopped_ns))
    }
    /// Interrupt → stop confirmed.
    pub fn stop_latency(&self) -> Duration {
        Duration::from_nanos(self.stopped_ns.saturating_sub(self.interrupt_ns))
    }
}

impl PtraceHold {
    /// Validate the victim: it must exist and not be in our thread group.
    pub fn new(pid: i32, tid: i32) -> Result<Self> {
        let me = std::process::id() as i32;
        if pid == me || std::path::Path::new(&format!("/proc/self/task/{tid}")).exists() {
            return Err(InjectorError::OwnThreadGroup { pid, tid });
        }
        if !std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists() {
            return Err(InjectorError::NoSuchThread { pid, tid });
        }
        Ok(PtraceHold { pid, tid })
    }

    /// Stop the thread, hold it stopped for `duration` from the confirmed
    /// stop, and resume it. Blocks the caller for about `duration`.
    pub fn hold(&self, duration: Duration) -> Result<HoldReport> {
        if duration.is_zero() || duration > Duration::from_secs(10) {
            return Err(InjectorError::Invalid(format!(
                "PtraceHold duration must be in (0, 10 s], got {duration:?}"
            )));
        }
        let tid = Pid::from_raw(self.tid);
        ptrace::seize(tid, ptrace::Options::empty()).map_err(|e| match e {
            Errno::EPERM => InjectorError::PrivilegeMissing {
                mechanism: MECH,
                capability: "CAP_SYS_PTRACE",
                why: "to trace a thread of a process that is not a descendant (or under Yama ptrace_scope >= 2)",
            },
            Errno::ESRCH => InjectorError::NoSuchThread {
                pid: self.pid,
                tid: self.tid,
            },
            e => sys(MECH, format!("PTRACE_SEIZE({})", self.tid))(e),
        })?;
        let result = self.hold_seized(tid, duration);
        if result.is_err() {
            // Best effort: never leave the victim traced. Detach needs a
            // stopped tracee; interrupt first, and ignore errors (it may
            // have exited).
            let _ = ptrace::interrupt(tid);
            for _ in 0..50 {
                match waitpid(tid, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(1)),
                    _ => break,
                }
            }
            let _ = ptrace::detach(tid, None);
        }
        result
    }

    fn hold_seized(&self, tid: Pid, duration: Duration) -> Result<HoldReport> {
        let interrupt_ns = monotonic_ns();
        ptrace::interrupt(tid).map_err(sys(MECH, "PTRACE_INTERRUPT"))?;
        let mut pending: Option<Signal> = None;
        loop {
            match waitpid(tid, Some(WaitPidFlag::__WALL)).map_err(sys(MECH, "waitpid"))? {
                WaitStatus::PtraceEvent(_, _, ev) if ev == libc::PTRACE_EVENT_STOP => break,
                // A signal-delivery-stop also stops the thread; keep the
                // signal to re-deliver at detach. The interrupt stays pending
                // and is reported next unless we leave first: stopped is
                // stopped, so we hold here.
                WaitStatus::Stopped(_, sig) => {
                    pending = Some(sig);
                    break;
                }
                WaitStatus::Exited(..) | WaitStatus::Signaled(..) => {
                    return Err(InjectorError::NoSuchThread {
                        pid: self.pid,
                        tid: self.tid,
                    })
                }
                _ => continue,
            }
        }
        let stopped_ns = monotonic_ns();
        let deadline = stopped_ns + duration.as_nanos() as u64;
        // Sample the state a little into the hold, then wait out the rest.
        sleep_until_ns(
            stopped_ns + (duration.as_nanos() as u64 / 4),
            Duration::from_micros(200),
        );
        let state_during = thread_state(self.pid, self.tid).map(|(s, _)| s);
        sleep_until_ns(deadline, Duration::from_micros(200));
        let resumed_ns = monotonic_ns();
        ptrace::detach(tid, pending).map_err(sys(MECH, "PTRACE_DETACH"))?;
        Ok(HoldReport {
            requested: duration,
            interrupt_ns,
            stopped_ns,
            resumed_ns,
            state_during,
            redelivered_signal: pending.map(|s| s as i32),
        })
    }
}
