//! Device times of copies and memsets without CUPTI: a CUDA event recorded on
//! the op's stream just before and just after it (under the stream's lock, so
//! nothing else of the stream runs between them), read after the run as
//! elapsed time from one anchor event whose `%globaltimer` time a kernel
//! stamped. Kernels time themselves (`kernels::LogEntry`); this is the
//! counterpart for the work that runs no kernel of ours, and for stream
//! waits (when the stream reached the wait and when it went on)
//! (docs/collectors.md, "Truth without CUPTI").

use super::driver::{check_cuda, SendHandle};
use cudarc::driver::sys;
use ground_truth::Ns;
use std::collections::HashMap;
use std::sync::Mutex;

/// Event pairs made before the run (making one costs a driver call).
const PREPARED_PAIRS: usize = 256;

type Pair = (SendHandle<sys::CUevent>, SendHandle<sys::CUevent>);

/// The events of one run's copies and memsets.
pub struct CopyStamps {
    free: Mutex<Vec<Pair>>,
    /// (op id, event before, event after), in enqueue order.
    used: Mutex<Vec<(u64, Pair)>>,
}

fn timing_event() -> Result<SendHandle<sys::CUevent>, String> {
    let mut e: sys::CUevent = std::ptr::null_mut();
    // SAFETY: out pointer; flags 0 keep timing enabled.
    check_cuda("cuEventCreate(copy stamp)", unsafe {
        sys::cuEventCreate(&mut e, 0)
    })?;
    Ok(SendHandle(e))
}

impl CopyStamps {
    pub fn new() -> Result<CopyStamps, String> {
        let mut free = Vec::with_capacity(PREPARED_PAIRS);
        for _ in 0..PREPARED_PAIRS {
            free.push((timing_event()?, timing_event()?));
        }
        Ok(CopyStamps {
            free: Mutex::new(free),
            used: Mutex::new(Vec::new()),
        })
    }

    /// Makes `call` (the op `op`'s enqueue on `stream`) between two events of
    /// the stream. A pair that cannot be made leaves the op untimed (its
    /// device node then sits at its call's end, as a lost record does).
    pub fn around(&self, op: u64, stream: sys::CUstream, call: impl FnOnce()) {
        let pair = self
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .map(Ok)
            .unwrap_or_else(|| Ok::<_, String>((timing_event()?, timing_event()?)));
        let Ok(pair) = pair else {
            call();
            return;
        };
        // SAFETY: live events of this context and the caller's live stream.
        unsafe { sys::cuEventRecord(pair.0 .0, stream) };
        call();
        // SAFETY: as above.
        unsafe { sys::cuEventRecord(pair.1 .0, stream) };
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((op, pair));
    }

    /// Each timed op's (start, end) in `%globaltimer` nanoseconds, from the
    /// anchor event recorded when the device's `%globaltimer` read
    /// `anchor_ns` (call after the device is synchronized). The pairs go back
    /// to the free list for the next run.
    pub fn times(&self, anchor: sys::CUevent, anchor_ns: Ns) -> HashMap<u64, (Ns, Ns)> {
        let used = std::mem::take(&mut *self.used.lock().unwrap_or_else(|e| e.into_inner()));
        let mut out = HashMap::with_capacity(used.len());
        let since_anchor = |e: sys::CUevent| -> Option<Ns> {
            let mut ms = 0f32;
            // SAFETY: both events are live and completed (the device is synchronized).
            let r = unsafe { sys::cuEventElapsedTime_v2(&mut ms, anchor, e) };
            (r == sys::CUresult::CUDA_SUCCESS && ms >= 0.0)
                .then(|| anchor_ns + (ms as f64 * 1e6).round() as Ns)
        };
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        for (op, pair) in used {
            if let (Some(s), Some(e)) = (since_anchor(pair.0 .0), since_anchor(pair.1 .0)) {
                out.insert(op, (s, e.max(s)));
            }
            free.push(pair);
        }
        out
    }
}

impl Drop for CopyStamps {
    fn drop(&mut self) {
        let free = std::mem::take(&mut *self.free.get_mut().unwrap_or_else(|e| e.into_inner()));
        let used = std::mem::take(&mut *self.used.get_mut().unwrap_or_else(|e| e.into_inner()));
        for (a, b) in free.into_iter().chain(used.into_iter().map(|u| u.1)) {
            // SAFETY: our own events, no longer used.
            unsafe {
                sys::cuEventDestroy_v2(a.0);
                sys::cuEventDestroy_v2(b.0);
            }
        }
    }
}
