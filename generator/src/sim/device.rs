//! Device model of the simulator: stream FIFOs, SM capacity shared by
//! co-running kernels, and one copy engine that serializes host↔device copies
//! (as measured on the H200, docs/gpu-facts.md). Ops are placed in enqueue order, which
//! the host model guarantees is nondecreasing in time.

use ground_truth::Ns;

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
    pub copy_setup_ns: Ns,
}

impl Default for DeviceParams {
    fn default() -> Self {
        DeviceParams {
            sms: 132,
            dispatch_ns: 3_000,
            pinned_bytes_per_ns: 52.0,
            pageable_bytes_per_ns: 3.35,
            d2d_bytes_per_ns: 1_500.0,
            memset_bytes_per_ns: 2_000.0,
            copy_setup_ns: 2_000,
        }
    }
}

/// SM occupancy: kernels placed so far, as (start, end, sms). A kernel takes
/// the earliest start at which its SMs are free for its whole run, counting
/// every reservation that overlaps that run as occupied throughout it (FIFO-like:
/// a kernel never squeezes between two reserved ones; it only runs before an
/// earlier-enqueued one that starts after it has finished).
#[derive(Debug, Default)]
pub struct SmPool {
    running: Vec<(Ns, Ns, u32)>,
}

impl SmPool {
    /// Earliest start ≥ `ready` at which `need` SMs are free for `dur`, without reserving.
    pub fn earliest(&mut self, ready: Ns, need: u32, dur: Ns, total: u32, horizon: Ns) -> Ns {
        self.running.retain(|&(_, end, _)| end > horizon);
        self.free_from(ready, need, dur, total)
    }

    /// As `earliest`, without dropping the entries that ended (read-only).
    pub fn free_from(&self, ready: Ns, need: u32, dur: Ns, total: u32) -> Ns {
        let need = need.min(total);
        let mut t = ready;
        loop {
            let overlapping =
                |&&(start, end, _): &&(Ns, Ns, u32)| end > t && start < t + dur.max(1);
            let used: u32 = self.running.iter().filter(overlapping).map(|r| r.2).sum();
            if used + need <= total {
                return t;
            }
            match self.running.iter().filter(overlapping).map(|r| r.1).min() {
                Some(next) => t = next,
                None => return t,
            }
        }
    }

    /// Earliest start ≥ `ready` at which `need` SMs are free; reserves them until start + dur.
    pub fn place(&mut self, ready: Ns, need: u32, dur: Ns, total: u32, horizon: Ns) -> Ns {
        // Nothing placed in the future can start before the host's clock, so
        // entries that ended by then can never matter again.
        let t = self.earliest(ready, need, dur, total, horizon);
        self.running.push((t, t + dur, need.min(total)));
        t
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
