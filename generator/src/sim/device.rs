//! Device model of the simulator: stream FIFOs, SM capacity shared by
//! co-running kernels (and by device-to-device copies and memsets, which run
//! on the SMs), and one copy engine that serializes host↔device copies (as
//! measured on the H200, docs/gpu-facts.md). Ops are placed in enqueue order, which
//! the host model guarantees is nondecreasing in time.

use ground_truth::Ns;
use std::collections::BTreeMap;

/// Device constants, calibrated against the H200 figures in docs/gpu-facts.md.
#[derive(Debug, Clone)]
pub struct DeviceParams {
    pub sms: u32,
    /// Delay from a kernel becoming ready to its first block running.
    pub dispatch_ns: Ns,
    /// Pinned host↔device bandwidth, bytes per ns (52 GB/s).
    pub pinned_bytes_per_ns: f64,
    /// Pageable bandwidth (≈ 256 MiB in 80 ms).
    pub pageable_bytes_per_ns: f64,
    /// Device-to-device copy bandwidth.
    pub d2d_bytes_per_ns: f64,
    pub memset_bytes_per_ns: f64,
    /// Fixed cost of a memset besides its bytes.
    pub memset_setup_ns: Ns,
    pub copy_setup_ns: Ns,
}

impl Default for DeviceParams {
    fn default() -> Self {
        DeviceParams {
            sms: 132,
            dispatch_ns: 3_000,
            pinned_bytes_per_ns: 52.0,
            pageable_bytes_per_ns: 3.35,
            // Event-timed on the H200 (docs/gpu-facts.md): 1 GiB D2D in 0.51 ms,
            // a 1 GiB memset in 0.24 ms.
            d2d_bytes_per_ns: 2_150.0,
            memset_bytes_per_ns: 4_600.0,
            memset_setup_ns: 8_000,
            copy_setup_ns: 2_000,
        }
    }
}

/// SM occupancy as a step function of time: how many SMs the work placed so
/// far holds from each breakpoint until the next. A kernel takes the earliest
/// start at which its SMs are free for its whole run (it may run before work
/// placed earlier if it fits in the room left).
///
/// Finding that start walks the breakpoints from the kernel's ready time, and
/// a reservation touches only the breakpoints inside its run, so N kernels on
/// N streams cost about N² breakpoint steps in all instead of the N³ of
/// re-summing every reservation at each candidate start (issue #17's
/// many-streams case: 5,000 kernels on 5,000 streams).
#[derive(Debug, Default)]
pub struct SmPool {
    /// Breakpoint → SMs in use from it until the next breakpoint. Before the
    /// first none are; the last one is always 0 (every reservation ends).
    levels: BTreeMap<Ns, u32>,
}

impl SmPool {
    /// Earliest start ≥ `ready` at which `need` SMs are free for `dur`, without
    /// reserving; breakpoints before `horizon` are forgotten first.
    pub fn earliest(&mut self, ready: Ns, need: u32, dur: Ns, total: u32, horizon: Ns) -> Ns {
        self.forget_before(horizon);
        self.free_from(ready, need, dur, total)
    }

    /// As `earliest`, without forgetting anything (read-only).
    pub fn free_from(&self, ready: Ns, need: u32, dur: Ns, total: u32) -> Ns {
        let room = total - need.min(total);
        let dur = dur.max(1);
        let from = self
            .levels
            .range(..=ready)
            .next_back()
            .map_or(ready, |(&k, _)| k);
        let mut t = ready;
        let mut segments = self.levels.range(from..).peekable();
        while let Some((&at, &used)) = segments.next() {
            if at >= t.saturating_add(dur) {
                break;
            }
            if used > room {
                // Too full here: the run can begin no earlier than the next breakpoint.
                match segments.peek() {
                    Some((&next, _)) => t = t.max(next),
                    None => return t.max(at),
                }
            }
        }
        t
    }

    /// Earliest start ≥ `ready` at which `need` SMs are free; reserves them until start + dur.
    #[cfg(test)]
    pub fn place(&mut self, ready: Ns, need: u32, dur: Ns, total: u32, horizon: Ns) -> Ns {
        // Nothing placed in the future can start before the host's clock, so
        // what ended by then can never matter again.
        let t = self.earliest(ready, need, dur, total, horizon);
        self.reserve(t, dur, need.min(total));
        t
    }

    /// Holds `need` SMs over [start, start + dur).
    pub fn reserve(&mut self, start: Ns, dur: Ns, need: u32) {
        self.add(start, start + dur.max(1), need as i64);
    }

    /// Gives back what `reserve` with the same arguments held.
    pub fn release(&mut self, start: Ns, dur: Ns, need: u32) {
        self.add(start, start + dur.max(1), -(need as i64));
    }

    fn level_at(&self, t: Ns) -> u32 {
        self.levels.range(..=t).next_back().map_or(0, |(_, &l)| l)
    }

    fn add(&mut self, start: Ns, end: Ns, delta: i64) {
        let (at_start, at_end) = (self.level_at(start), self.level_at(end));
        self.levels.entry(start).or_insert(at_start);
        self.levels.entry(end).or_insert(at_end);
        for (_, used) in self.levels.range_mut(start..end) {
            *used = (*used as i64 + delta).max(0) as u32;
        }
    }

    /// Drops breakpoints that no time from `horizon` on depends on.
    fn forget_before(&mut self, horizon: Ns) {
        loop {
            let mut keys = self.levels.keys();
            match (keys.next(), keys.next()) {
                (Some(_), Some(&second)) if second <= horizon => {
                    self.levels.pop_first();
                }
                _ => break,
            }
        }
    }
}

#[derive(Debug, Default)]
pub struct CopyEngine {
    pub free_at: Ns,
}

impl CopyEngine {
    pub fn place(&mut self, ready: Ns, dur: Ns) -> Ns {
        let start = ready.max(self.free_at);
        self.free_at = start + dur;
        start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_waits_until_its_sms_are_free_for_its_whole_run() {
        let mut pool = SmPool::default();
        assert_eq!(pool.place(0, 100, 50, 132, 0), 0);
        // 32 SMs are left beside the first kernel.
        assert_eq!(pool.place(0, 32, 10, 132, 0), 0);
        assert_eq!(pool.place(0, 40, 10, 132, 0), 50);
        // A one-SM kernel waits only while all 132 are held.
        assert_eq!(pool.place(0, 1, 10, 132, 0), 10);
        // It may run before later-placed work when it ends in time.
        let mut pool = SmPool::default();
        pool.place(100, 132, 50, 132, 0);
        assert_eq!(pool.place(0, 132, 100, 132, 0), 0);
        assert_eq!(pool.place(0, 132, 1, 132, 0), 150);
        // Released SMs are free again; forgotten history changes nothing later.
        pool.release(150, 1, 132);
        assert_eq!(pool.earliest(120, 132, 1, 132, 120), 150);
    }
}
