//! The clocks of a run without CUPTI: `%globaltimer` (what the kernels stamp)
//! against CLOCK_MONOTONIC (the trace clock), measured by host–device pings
//! through mapped host memory, the way CUPTI's own timestamps would otherwise
//! place device work; the anchor event that puts CUDA events on
//! `%globaltimer`; and the spin kernels' launch overhead as the kernels' own
//! log measures it.

use super::super::driver::{self, check_cuda, Func, Ptr, SendHandle};
use super::super::{now, Session};
use cudarc::driver::sys;
use ground_truth::Ns;
use kernels::Kernel;
use std::ffi::{c_void, CString};

/// A kernel that answers each host ping with its `%globaltimer` reading:
/// ping `k` is the host writing `k` to `flag`; the answer is `out[k - 1]`.
const PING_SOURCE: &str = r#"
extern "C" __global__ void causalbench_clock_ping(volatile unsigned int* flag,
                                                  volatile unsigned long long* out,
                                                  unsigned int n) {
    for (unsigned int k = 1; k <= n; ++k) {
        while (*flag < k) { }
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        out[k - 1] = t;
        __threadfence_system();
    }
}
"#;

/// Pings of one measurement: at about 1.5 µs a round trip, well under a
/// millisecond, so one is taken before and one after every run.
const PINGS: u32 = 100;
/// How long one ping may take before the calibration gives up (the first
/// also waits for the ping kernel to start).
const PING_TIMEOUT_NS: Ns = 100_000_000;

/// CLOCK_MONOTONIC − `%globaltimer`, from the tightest pings.
pub type ClockCalibration = super::super::truth::ClockSample;

fn load(ptx: &str, entry: &str) -> Result<sys::CUfunction, String> {
    let c = CString::new(ptx).map_err(|_| "PTX contains a NUL byte".to_string())?;
    let mut m: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: NUL-terminated PTX image; out pointer.
    check_cuda("cuModuleLoadData(clock ping)", unsafe {
        sys::cuModuleLoadData(&mut m, c.as_ptr() as *const c_void)
    })?;
    let name = CString::new(entry).map_err(|_| "bad kernel name".to_string())?;
    let mut f: sys::CUfunction = std::ptr::null_mut();
    // SAFETY: loaded module, NUL-terminated name.
    check_cuda("cuModuleGetFunction(clock ping)", unsafe {
        sys::cuModuleGetFunction(&mut f, m, name.as_ptr())
    })?;
    Ok(f)
}

/// The ping kernel and its mapped buffer, made once per process; every
/// [`Pinger::measure`] launches the kernel anew (with the device idle: it
/// holds an SM while it answers).
pub struct Pinger {
    func: sys::CUfunction,
    host: *mut c_void,
    dev: Ptr,
    stream: SendHandle<sys::CUstream>,
}

impl Pinger {
    pub fn new(arch: &str) -> Result<Pinger, String> {
        let ptx = kernels::ptx_cache::compile(
            PING_SOURCE,
            "causalbench_clock_ping.cu",
            kernels::compile_options(arch),
            arch,
        )
        .map_err(|e| format!("NVRTC could not compile the clock ping: {e}"))?;
        let func = load(&ptx, "causalbench_clock_ping")?;
        let mut host: *mut c_void = std::ptr::null_mut();
        let mut dev: Ptr = 0;
        let mut stream: sys::CUstream = std::ptr::null_mut();
        // SAFETY: out pointers; DEVICEMAP (2) maps the page-locked buffer into the device.
        unsafe {
            check_cuda(
                "cuMemHostAlloc(clock ping)",
                sys::cuMemHostAlloc(&mut host, Self::BYTES, 2),
            )?;
            check_cuda(
                "cuMemHostGetDevicePointer(clock ping)",
                sys::cuMemHostGetDevicePointer_v2(&mut dev, host, 0),
            )?;
            check_cuda(
                "cuStreamCreate(clock ping)",
                sys::cuStreamCreate(&mut stream, 1),
            )?;
        }
        Ok(Pinger {
            func,
            host,
            dev,
            stream: SendHandle(stream),
        })
    }

    const BYTES: usize = 8 * (PINGS as usize + 1);

    /// Measures the offset: each ping's `%globaltimer` answer lies between
    /// the host's write and its read of the answer; the midpoint of the pings
    /// with the shortest round trips (the best tenth, median offset) is the
    /// estimate, taken at the median of their host times.
    pub fn measure(&self) -> Result<ClockCalibration, String> {
        // SAFETY: our own mapped buffer, no kernel of ours is using it.
        unsafe { std::ptr::write_bytes(self.host as *mut u8, 0, Self::BYTES) };
        let flag = self.host as *mut u32;
        // The answers follow the flag's 8 bytes.
        let out = (self.host as usize + 8) as *mut u64;
        let (mut flag_dev, mut out_dev, mut n) = (self.dev, self.dev + 8, PINGS);
        let mut params: Vec<*mut c_void> = vec![
            &mut flag_dev as *mut u64 as *mut c_void,
            &mut out_dev as *mut u64 as *mut c_void,
            &mut n as *mut u32 as *mut c_void,
        ];
        // SAFETY: the parameters outlive the call; the buffers outlive the kernel.
        let launched = check_cuda("cuLaunchKernel(clock ping)", unsafe {
            sys::cuLaunchKernel(
                self.func,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                self.stream.0,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        });
        // (round trip, offset, host midpoint)
        let mut samples: Vec<(u64, i64, Ns)> = Vec::new();
        let mut failure = launched.err();
        if failure.is_none() {
            for k in 1..=PINGS {
                let t0 = now();
                // SAFETY: the mapped buffer lives as long as the pinger.
                unsafe { std::ptr::write_volatile(flag, k) };
                let answer = loop {
                    // SAFETY: as above; the device writes the answer.
                    let g = unsafe { std::ptr::read_volatile(out.add(k as usize - 1)) };
                    if g != 0 {
                        break Some(g);
                    }
                    if now() - t0 > PING_TIMEOUT_NS {
                        break None;
                    }
                    std::hint::spin_loop();
                };
                let t1 = now();
                let Some(g) = answer else {
                    failure = Some(format!("the clock ping kernel did not answer ping {k}"));
                    break;
                };
                let mid = (t0 + t1) / 2;
                samples.push((t1 - t0, mid as i64 - g as i64, mid));
            }
        }
        // SAFETY: ends the kernel whatever happened.
        unsafe {
            std::ptr::write_volatile(flag, PINGS);
            sys::cuStreamSynchronize(self.stream.0);
        }
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(best_of(samples))
    }
}

/// The estimate from (round trip, offset, host midpoint) samples.
fn best_of(mut samples: Vec<(u64, i64, Ns)>) -> ClockCalibration {
    samples.sort_unstable();
    let best = &samples[..(samples.len() / 10).max(1)];
    let mut offsets: Vec<i64> = best.iter().map(|s| s.1).collect();
    offsets.sort_unstable();
    let mut at: Vec<Ns> = best.iter().map(|s| s.2).collect();
    at.sort_unstable();
    ClockCalibration {
        offset_ns: offsets[offsets.len() / 2],
        at_ns: at[at.len() / 2],
        round_trip_ns: best[0].0,
        pings: samples.len() as u32,
    }
}

impl Drop for Pinger {
    fn drop(&mut self) {
        // SAFETY: ours; no kernel of ours runs (each measure waits for it).
        unsafe {
            sys::cuStreamDestroy_v2(self.stream.0);
            sys::cuMemFreeHost(self.host);
        }
    }
}

/// The event every copy stamp of a run is read against: recorded just before
/// a one-thread kernel that stamps its start and end, and a second event just
/// after it, so the first event's `%globaltimer` time is bracketed.
pub struct Anchor {
    stream: SendHandle<sys::CUstream>,
    before: SendHandle<sys::CUevent>,
    after: SendHandle<sys::CUevent>,
    func: Func,
    entry: Ptr,
}

/// The anchor kernel's op id in its private log entry.
const ANCHOR_OP: u64 = 0xA0C0_0000_0000_0001;

impl Anchor {
    pub fn new(s: &mut Session) -> Result<Anchor, String> {
        let (func, _) = s.modules.get("causalbench_clock_anchor", Kernel::Empty)?;
        let mut stream: sys::CUstream = std::ptr::null_mut();
        let mut before: sys::CUevent = std::ptr::null_mut();
        let mut after: sys::CUevent = std::ptr::null_mut();
        let mut entry: Ptr = 0;
        // SAFETY: out pointers; they live as long as the process's session.
        unsafe {
            check_cuda(
                "cuStreamCreate(anchor)",
                sys::cuStreamCreate(&mut stream, 1),
            )?;
            check_cuda("cuEventCreate(anchor)", sys::cuEventCreate(&mut before, 0))?;
            check_cuda("cuEventCreate(anchor)", sys::cuEventCreate(&mut after, 0))?;
            check_cuda(
                "cuMemAlloc(anchor)",
                sys::cuMemAlloc_v2(&mut entry, kernels::LogEntry::SIZE),
            )?;
        }
        Ok(Anchor {
            stream: SendHandle(stream),
            before: SendHandle(before),
            after: SendHandle(after),
            func,
            entry,
        })
    }

    /// Records the anchor (before the run's work).
    pub fn record(&self, _s: &Session) -> Result<&Anchor, String> {
        let mut a = driver::Args {
            op_id: ANCHOR_OP,
            log: self.entry,
            slot: 0,
            ..Default::default()
        };
        // SAFETY: our stream, events and entry; the args outlive the launch call.
        unsafe {
            check_cuda(
                "cuMemsetD8(anchor)",
                sys::cuMemsetD8_v2(self.entry, 0, kernels::LogEntry::SIZE),
            )?;
            check_cuda(
                "cuEventRecord(anchor)",
                sys::cuEventRecord(self.before.0, self.stream.0),
            )?;
            check_cuda(
                "anchor launch",
                driver::launch(
                    &self.func,
                    1,
                    1,
                    self.stream.0,
                    &mut a,
                    driver::LaunchVia::Launch,
                ),
            )?;
            check_cuda(
                "cuEventRecord(anchor)",
                sys::cuEventRecord(self.after.0, self.stream.0),
            )?;
        }
        Ok(self)
    }

    pub fn event(&self) -> sys::CUevent {
        self.before.0
    }

    /// The `%globaltimer` time of [`Anchor::event`]: the kernel started after
    /// it and ended before the second event, which came `D` after it, so it
    /// lies in [end − D, start]; the midpoint.
    pub fn read(&self, _s: &Session) -> Result<Ns, String> {
        let mut e = kernels::LogEntry::default();
        let mut ms = 0f32;
        // SAFETY: our stream, events and entry.
        unsafe {
            check_cuda(
                "cuStreamSynchronize(anchor)",
                sys::cuStreamSynchronize(self.stream.0),
            )?;
            check_cuda(
                "reading the anchor",
                sys::cuMemcpyDtoH_v2(
                    &mut e as *mut kernels::LogEntry as *mut c_void,
                    self.entry,
                    kernels::LogEntry::SIZE,
                ),
            )?;
            check_cuda(
                "cuEventElapsedTime(anchor)",
                sys::cuEventElapsedTime_v2(&mut ms, self.before.0, self.after.0),
            )?;
        }
        if !e.is_written_for(ANCHOR_OP) {
            return Err("the anchor kernel did not stamp its log entry".into());
        }
        let span = (ms as f64 * 1e6).round() as Ns;
        let end = e.last_end_ns.max(e.end_ns);
        let earliest = end.saturating_sub(span).min(e.start_ns);
        Ok((earliest + e.start_ns) / 2)
    }
}

/// How much longer than requested a spin kernel lasts in its own log (block
/// launch and teardown as the log sees them), from ten 200 µs full-GPU spins:
/// the runs' spins are shortened by it so they last what the scenario asks,
/// as the CUPTI session does with CUPTI's durations.
pub fn spin_overhead(s: &mut Session) -> Result<u64, String> {
    const SPIN: u64 = 200_000;
    let (f, _) = s
        .modules
        .get("causalbench_spin_calibration", Kernel::Spin)?;
    s.scratch.ensure(1 << 20)?;
    let mut stream: sys::CUstream = std::ptr::null_mut();
    let mut d = Vec::new();
    // SAFETY: out pointer; our own stream and log slot 0, synchronized before reading.
    unsafe {
        check_cuda("cuStreamCreate", sys::cuStreamCreate(&mut stream, 1))?;
        for _ in 0..10 {
            check_cuda(
                "cuMemsetD8(log)",
                sys::cuMemsetD8_v2(s.log, 0, kernels::LogEntry::SIZE),
            )?;
            let mut a = s.args(&f, 0, SPIN, 1);
            a.op_id = 1;
            check_cuda(
                "spin calibration launch",
                driver::launch(
                    &f,
                    s.info.sms,
                    128,
                    stream,
                    &mut a,
                    driver::LaunchVia::Launch,
                ),
            )?;
            check_cuda(
                "spin calibration synchronize",
                sys::cuStreamSynchronize(stream),
            )?;
            let mut e = kernels::LogEntry::default();
            check_cuda(
                "reading the spin calibration",
                sys::cuMemcpyDtoH_v2(
                    &mut e as *mut kernels::LogEntry as *mut c_void,
                    s.log,
                    kernels::LogEntry::SIZE,
                ),
            )?;
            if e.is_written_for(1) {
                d.push(e.last_end_ns.max(e.end_ns) - e.start_ns);
            }
        }
        sys::cuStreamDestroy_v2(stream);
    }
    d.sort_unstable();
    Ok(d.get(d.len() / 2)
        .map(|m| m.saturating_sub(SPIN).min(20_000))
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::best_of;

    /// The estimate is the median offset of the tenth of the pings with the
    /// shortest round trips, taken at their median host time; slow pings
    /// (the first one waits for the kernel to start) do not move it.
    #[test]
    fn the_tightest_pings_give_the_offset_and_its_time() {
        // (round trip, offset, host midpoint): 20 tight pings around offset
        // 1000 and 180 slow ones far off.
        let mut samples: Vec<(u64, i64, u64)> = (0..20)
            .map(|k| (1_400 + k, 1_000 + (k as i64 % 3) - 1, 50_000 + 10 * k))
            .collect();
        samples.extend((0..180).map(|k| (20_000 + k, 9_000 + k as i64, 10 * k)));
        samples.push((5_000_000, -77, 1)); // the first ping, waiting for the kernel
        let c = best_of(samples);
        assert_eq!(c.offset_ns, 1_000);
        assert_eq!(c.round_trip_ns, 1_400);
        assert_eq!(c.pings, 201);
        assert_eq!(c.at_ns, 50_100);
    }
}
