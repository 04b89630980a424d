//! CLOCK_MONOTONIC helpers and the victim-side gap recorder used to measure
//! a deschedule from the victim's own point of view.

use std::time::Duration;

/// CLOCK_MONOTONIC in nanoseconds (the trace clock of docs/records.md).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's kernel thread id.
pub fn gettid() -> i32 {
    nix::unistd::gettid().as_raw()
}

/// One interval in which the victim did not observe its own clock advance
/// continuously: `start_ns` is its last reading before the gap, `end_ns` the
/// first after (CLOCK_MONOTONIC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Gap {
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Gap {
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.end_ns - self.start_ns)
    }
}

/// Spin on CLOCK_MONOTONIC for `total` and record every gap longer than
/// `threshold` between consecutive readings (the thread was switched out, or
/// stopped, for that long). Stops early when `stop` returns true (checked
/// every 1024 readings). At most `max_gaps` gaps are kept.
pub fn spin_recording_gaps(
    total: Duration,
    threshold: Duration,
    max_gaps: usize,
    mut stop: impl FnMut() -> bool,
) -> Vec<Gap> {
    let mut gaps = Vec::with_capacity(max_gaps.min(1024));
    let thr = threshold.as_nanos() as u64;
    let start = monotonic_ns();
    let end = start + total.as_nanos() as u64;
    let mut last = start;
    let mut n: u64 = 0;
    loop {
        let now = monotonic_ns();
        if now - last > thr && gaps.len() < max_gaps {
            gaps.push(Gap {
                start_ns: last,
                end_ns: now,
            });
        }
        last = now;
        if now >= end {
            break;
        }
        n += 1;
        if n & 1023 == 0 && stop() {
            break;
        }
    }
    gaps
}

/// The longest gap overlapping `[from_ns, to_ns]`, if any.
pub fn longest_gap_within(gaps: &[Gap], from_ns: u64, to_ns: u64) -> Option<Gap> {
    gaps.iter()
        .filter(|g| g.end_ns >= from_ns && g.start_ns <= to_ns)
        .max_by_key(|g| g.end_ns - g.start_ns)
        .copied()
}

/// Sleep until CLOCK_MONOTONIC reaches `deadline_ns`: sleeps while more than
/// `spin_margin` remains, then spins (sub-10 µs accuracy on an idle CPU).
pub fn sleep_until_ns(deadline_ns: u64, spin_margin: Duration) {
    let margin = spin_margin.as_nanos() as u64;
    loop {
        let now = monotonic_ns();
        if now >= deadline_ns {
            return;
        }
        let left = deadline_ns - now;
        if left > margin {
            std::thread::sleep(Duration::from_nanos(left - margin));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// `/proc/<pid>/task/<tid>/schedstat`: (time on CPU, time waiting on a
/// runqueue, timeslices), nanoseconds. `None` when unavailable.
pub fn schedstat(pid: i32, tid: i32) -> Option<(u64, u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    let mut it = s.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some((it.next()??, it.next()??, it.next()??))
}

/// Field `state` (R, S, t, T, ...) and `processor` (last CPU) of
/// `/proc/<pid>/task/<tid>/stat`.
pub fn thread_state(pid: i32, tid: i32) -> Option<(char, usize)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    // comm may contain spaces and parentheses: parse after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); field 39 (processor) is rest[36].
    let state = fields.first()?.chars().next()?;
    let cpu = fields.get(36)?.parse().ok()?;
    Some((state, cpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_advances() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
    }

    #[test]
    fn gap_recorder_sees_a_sleep() {
        let t0 = monotonic_ns();
        let mut slept = false;
        let gaps = spin_recording_gaps(
            Duration::from_millis(40),
            Duration::from_micros(500),
            64,
            || {
                if !slept && monotonic_ns() - t0 > 10_000_000 {
                    slept = true;
                    std::thread::sleep(Duration::from_millis(5));
                }
                false
            },
        );
        // The sleep happens inside stop(), i.e. between two readings.
        let g = longest_gap_within(&gaps, t0, monotonic_ns()).expect("a gap");
        assert!(g.duration() >= Duration::from_millis(5), "{g:?}");
    }

    #[test]
    fn own_thread_state_is_running() {
        let pid = std::process::id() as i32;
        let (state, _cpu) = thread_state(pid, gettid()).expect("stat readable");
        assert_eq!(state, 'R');
        assert!(
            schedstat(pid, gettid()).is_some()
                || !std::path::Path::new("/proc/self/schedstat").exists()
        );
    }
}
