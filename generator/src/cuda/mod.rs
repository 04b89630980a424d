//! The real-GPU backend (`--backend cuda`): executes a scenario for real on an
//! NVIDIA GPU with the CUDA driver API (cudarc, loaded dynamically) and
//! records it with the CUPTI reference recorder, producing bundles in the
//! simulator's format with the same ground-truth conventions.
//!
//! - [`exec`]: real host threads, queues and pools; streams with priorities,
//!   events, graphs captured from streams and replayed, copies, memsets,
//!   waits, synchronizations, `cuLaunchKernel`/`cuLaunchKernelEx`; every call
//!   bound to its op through CUPTI external correlation (CUSTOM0 = op id,
//!   CUSTOM1 = request token in instrumented mode).
//! - the CUPTI reference recorder is its own crate, `recorder-cupti` (activity
//!   buffers, CLOCK_MONOTONIC timestamps, queued/submitted latency timestamps,
//!   dropped-record counts, raw record → trace record).
//! - [`plan`]: the one injection plan (`crate::plan`, sized on the measured
//!   no-injection twin) realised as real kernels, copies and page faults.
//! - [`truth`]: what happened, bound by correlation id and cross-checked
//!   against the kernels' own `%globaltimer` log, handed to the one recording
//!   path (`crate::record`) that the simulator uses too.
//! - [`recording`]: the twin and the injected run of each scenario, batches
//!   under one eBPF recorder session; [`measure`]: the backend's own overheads.
//!
//! Without a GPU, libcuda, CUPTI or NVRTC, [`CudaBackend::new`] returns
//! [`RecordError::Unavailable`] with what is missing; nothing panics.

mod call_sites;
mod copy_stamps;
mod driver;
mod exec;
pub mod host;
mod measure;
mod plan;
mod recording;
mod standalone;
mod truth;

pub use host::HostStats;
pub use kernels::gpu::driver_release;
pub use measure::{EbpfOverhead, Overhead};
pub use standalone::{ClockCalibration, KernelDelta, Recorded, Workload};
pub use truth::{ClockCheck, RunStats};

use crate::answers;
use crate::backend::{Backend, RecordError};
use cudarc::driver::sys;
use driver::{check_cuda, guarded, DeviceInfo, Func, Modules, Ptr, Scratch, SendHandle};
use ground_truth::bundle::{Bundle, CrossCheck, Manifest};
use ground_truth::scenario::{Scenario, Step};
use ground_truth::{Mode, Ns, SCHEMA_VERSION};
use kernels::Kernel;
use recorder_cupti as cupti;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// CLOCK_MONOTONIC nanoseconds, the trace clock.
pub fn now() -> Ns {
    injectors::monotonic_ns()
}

/// Waits until `t` (sleeping while far, spinning for the last stretch).
pub fn spin_until(t: Ns) {
    loop {
        let n = now();
        if n >= t {
            return;
        }
        if t - n > 2_000_000 {
            std::thread::sleep(std::time::Duration::from_nanos(t - n - 1_000_000));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Why the backend cannot run here, or `Ok` when the driver, CUPTI and NVRTC
/// all load. Cheap (no context is created) and never panics.
pub fn probe() -> Result<(), String> {
    if !crate::backend::gpu_present() {
        return Err("no NVIDIA GPU or driver found (/dev/nvidiactl is absent)".into());
    }
    kernels::gpu::gpu_available().map_err(|e| e.to_string())?;
    cupti::ensure_cupti()?;
    kernels::ensure_nvrtc().map_err(|e| e.to_string())?;
    Ok(())
}

/// One batch item's bundle (or why it failed) and the measurements of its runs.
pub type BatchItemResult = (Result<Bundle, RecordError>, Vec<RunStats>);

pub struct CudaBackend {
    session: OnceLock<Result<Mutex<Session>, String>>,
    stats: Mutex<Vec<RunStats>>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CudaBackend")
    }
}

impl CudaBackend {
    /// The backend, or why it is unavailable here.
    pub fn new() -> Result<CudaBackend, RecordError> {
        probe().map_err(|m| RecordError::Unavailable("cuda", m))?;
        Ok(CudaBackend {
            session: OnceLock::new(),
            stats: Mutex::new(Vec::new()),
        })
    }

    fn session(&self) -> Result<&Mutex<Session>, RecordError> {
        self.session
            .get_or_init(|| guarded("opening the GPU session", Session::open).map(Mutex::new))
            .as_ref()
            .map_err(|e| RecordError::Unavailable("cuda", e.clone()))
    }

    /// Measurements of every run recorded so far (twins included), drained.
    pub fn take_stats(&self) -> Vec<RunStats> {
        std::mem::take(&mut *self.stats.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether recorded runs attach the eBPF host recorder (default: yes, where
    /// it can run; a run without it omits "ebpf" from the manifest collectors).
    pub fn set_host_recorder(&self, on: bool) -> Result<(), RecordError> {
        let s = self.session()?;
        s.lock().unwrap_or_else(|e| e.into_inner()).host_on = on;
        Ok(())
    }

    /// Starves CUPTI of activity buffers in every recorded run while set: at
    /// most `buffers` buffers of `bytes` each per run, then CUPTI drops records
    /// and counts them (the bundle's `loss.cupti_dropped`); the ground truth
    /// still has every op, timed from the kernels' own device log. `None`:
    /// the normal supply.
    pub fn set_cupti_starvation(&self, budget: Option<(usize, usize)>) -> Result<(), RecordError> {
        let s = self.session()?;
        s.lock().unwrap_or_else(|e| e.into_inner()).cupti_starvation = budget;
        Ok(())
    }

    /// Records every (scenario, repetition) under one eBPF recorder session
    /// (see `Session::record_batch`), with each run's measurements.
    pub fn record_batch(
        &self,
        items: &[(Scenario, u32)],
    ) -> Result<Vec<BatchItemResult>, RecordError> {
        let s = self.session()?;
        let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
        let mut ok = Vec::new();
        let mut idx = Vec::new();
        let mut out: Vec<Option<BatchItemResult>> = Vec::with_capacity(items.len());
        for (i, (sc, _)) in items.iter().enumerate() {
            if let Some(p) = sc.check().first() {
                out.push(Some((
                    Err(RecordError::Invalid(
                        sc.name.clone(),
                        format!("{}: {}", p.path, p.message),
                    )),
                    Vec::new(),
                )));
            } else {
                out.push(None);
                ok.push(items[i].clone());
                idx.push(i);
            }
        }
        let done = s.record_batch(&ok);
        for ((r, st), i) in done.into_iter().zip(idx) {
            let name = items[i].0.name.clone();
            out[i] = Some((r.map_err(|m| RecordError::Invalid(name, m)), st));
        }
        Ok(out.into_iter().map(|o| o.expect("filled")).collect())
    }

    /// eBPF collector overhead on `kernels` launches, with vs without.
    pub fn ebpf_overhead(&self, kernels: u32, reps: u32) -> Result<EbpfOverhead, RecordError> {
        let s = self.session()?;
        let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
        guarded("eBPF overhead benchmark", || s.ebpf_overhead(kernels, reps))
            .map_err(|e| RecordError::Unavailable("cuda", e))
    }

    /// What each collector configuration costs a launch-bound and a realistic
    /// workload (`causalbench measure collectors`).
    pub fn collector_costs(
        &self,
        launches: u32,
        kernels: u32,
        reps: u32,
    ) -> Result<ground_truth::costs::CollectorCosts, RecordError> {
        let s = self.session()?;
        let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
        guarded("collector-cost study", || {
            s.collector_costs(launches, kernels, reps)
        })
        .map_err(|e| RecordError::Unavailable("cuda", e))
    }

    /// Generator overhead launching `kernels` empty kernels vs a direct cudarc loop.
    pub fn launch_overhead(&self, kernels: u32, reps: u32) -> Result<Overhead, RecordError> {
        let s = self.session()?;
        let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
        guarded("launch-overhead benchmark", || {
            s.launch_overhead(kernels, reps)
        })
        .map_err(|e| RecordError::Unavailable("cuda", e))
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn record(&self, scenario: &Scenario, repetition: u32) -> Result<Bundle, RecordError> {
        crate::backend::check(scenario)?;
        let s = self.session()?;
        // One run at a time on the GPU: CUPTI and the device are process-wide.
        let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
        let mut stats = Vec::new();
        let r = guarded("cuda backend", || {
            s.record(scenario, repetition, &mut stats)
        });
        self.stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(stats);
        r.map_err(|m| RecordError::Invalid(scenario.name.clone(), m))
    }

    /// One eBPF recorder session for the whole batch: attaching and draining
    /// it costs seconds, far more than a catalog run.
    fn record_many(&self, items: &[(Scenario, u32)]) -> Vec<Result<Bundle, RecordError>> {
        match self.record_batch(items) {
            Ok(done) => done
                .into_iter()
                .map(|(bundle, stats)| {
                    self.stats
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend(stats);
                    bundle
                })
                .collect(),
            Err(e) => items.iter().map(|_| Err(e.clone())).collect(),
        }
    }

    fn records_in_batches(&self) -> bool {
        true
    }
}

struct Session {
    ctx: Arc<cudarc::driver::CudaContext>,
    recorder: cupti::Recorder,
    info: DeviceInfo,
    modules: Modules,
    funcs: HashMap<(String, Kernel), (Func, String)>,
    iterations: HashMap<(Kernel, u32, u32, u64), u32>,
    scratch: Scratch,
    log: Ptr,
    log_slots: u32,
    fault_ns: HashMap<bool, Result<f64, String>>,
    host: String,
    /// CUPTI duration of a spin kernel minus its requested spin (median).
    spin_overhead_ns: u64,
    /// Attach the eBPF host recorder to recorded runs.
    host_on: bool,
    /// Why the eBPF host recorder can't run here (said once, then skipped).
    host_disabled: Option<String>,
    /// CUPTI buffer budget of every run while set (`cupti::starve_buffers`).
    cupti_starvation: Option<(usize, usize)>,
}

const LOG_SLOTS: u32 = 1 << 20;

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

impl Session {
    fn open() -> Result<Session, String> {
        probe()?;
        // CUPTI first, so it sees the context being created.
        let recorder = cupti::Recorder::start()?;
        Self::with_recorder(recorder, None).and_then(|mut s| {
            s.spin_overhead_ns = s.spin_overhead()?;
            Ok(s)
        })
    }

    /// The context, the kernels' modules and the device log around `recorder`;
    /// the eBPF host recorder attached unless `host_disabled` says why not.
    fn with_recorder(
        recorder: cupti::Recorder,
        host_disabled: Option<String>,
    ) -> Result<Session, String> {
        let ctx = cudarc::driver::CudaContext::new(0)
            .map_err(|e| format!("creating the CUDA context of device 0: {e:?}"))?;
        // Dependencies are managed explicitly (docs/gpu-facts.md: tracking breaks capture).
        // SAFETY: no cudarc-managed buffers cross streams in this backend.
        unsafe { ctx.disable_event_tracking() };
        ctx.bind_to_thread()
            .map_err(|e| format!("binding the context: {e:?}"))?;
        let info = driver::device_info(ctx.cu_device())?;
        let modules = Modules::new(info.cc, info.smem_optin);
        let mut log: Ptr = 0;
        let bytes = LOG_SLOTS as usize * kernels::LogEntry::SIZE;
        // SAFETY: out pointer; the log lives as long as the session.
        check_cuda("cuMemAlloc(device log)", unsafe {
            sys::cuMemAlloc_v2(&mut log, bytes)
        })?;
        Ok(Session {
            ctx,
            recorder,
            info,
            modules,
            funcs: HashMap::new(),
            iterations: HashMap::new(),
            scratch: Scratch::default(),
            log,
            log_slots: LOG_SLOTS,
            fault_ns: HashMap::new(),
            host: hostname(),
            spin_overhead_ns: 0,
            host_on: host_disabled.is_none(),
            host_disabled,
            cupti_starvation: None,
        })
    }

    /// How much longer than its requested spin a spin kernel lasts in CUPTI's
    /// records (block launch and teardown), from ten 200 µs full-GPU spins.
    fn spin_overhead(&mut self) -> Result<u64, String> {
        const SPIN: u64 = 200_000;
        let (f, entry) = self
            .modules
            .get("causalbench_spin_calibration", Kernel::Spin)?;
        self.scratch.ensure(1 << 20)?;
        let mut stream: sys::CUstream = std::ptr::null_mut();
        // SAFETY: out pointer; our own stream, synchronized and destroyed below.
        unsafe {
            check_cuda("cuStreamCreate", sys::cuStreamCreate(&mut stream, 1))?;
            for _ in 0..10 {
                let mut a = self.args(&f, 0, SPIN, 1);
                check_cuda(
                    "spin calibration launch",
                    driver::launch(
                        &f,
                        self.info.sms,
                        128,
                        stream,
                        &mut a,
                        driver::LaunchVia::Launch,
                    ),
                )?;
            }
            check_cuda(
                "spin calibration synchronize",
                sys::cuStreamSynchronize(stream),
            )?;
            sys::cuStreamDestroy_v2(stream);
        }
        let flushed = self.recorder.flush()?;
        let mut d: Vec<u64> = flushed
            .records
            .iter()
            .filter_map(|r| match r {
                cupti::Raw::Kernel {
                    name, start, end, ..
                } if *name == entry && end > start => Some(end - start),
                _ => None,
            })
            .collect();
        d.sort_unstable();
        Ok(d.get(d.len() / 2)
            .map(|m| m.saturating_sub(SPIN).min(20_000))
            .unwrap_or(0))
    }

    fn device(&self) -> exec::Device<'_> {
        exec::Device {
            ctx: SendHandle(self.ctx.cu_ctx()),
            recorder: Some(&self.recorder),
            copy_stamps: None,
            funcs: &self.funcs,
            iterations: &self.iterations,
            sms: self.info.sms,
            priorities: self.info.priorities,
            log: self.log,
            log_slots: self.log_slots,
            spin_overhead_ns: self.spin_overhead_ns,
            dev_a: self.scratch.dev_a,
            dev_b: self.scratch.dev_b,
            dev_cap: self.scratch.dev_cap,
            pinned: self.scratch.pinned,
            pageable: self.scratch.pageable.as_ptr() as usize,
        }
    }

    fn fault_cost(&mut self, major: bool) -> Result<f64, String> {
        self.fault_ns
            .entry(major)
            .or_insert_with(|| {
                let kind = if major {
                    injectors::FaultKind::Major
                } else {
                    injectors::FaultKind::Minor
                };
                injectors::calibrate_faults(kind, if major { 256 } else { 4096 }, 3)
                    .map(|c| c.per_fault.as_nanos() as f64)
                    .map_err(|e| e.to_string())
            })
            .clone()
    }

    /// Compiles, loads and warms up every kernel the run launches, sizes the
    /// scratch buffers and calibrates memory/compute-bound kernels.
    fn prepare(&mut self, sc: &Scenario, plan: Option<&plan::Plan>) -> Result<(), String> {
        let mut wanted: Vec<(String, Kernel, u32, u32, u64)> = Vec::new();
        let mut bytes: u64 = 0;
        for p in &sc.programs {
            for s in &p.steps {
                match s {
                    Step::Kernel {
                        name,
                        kind,
                        duration_us,
                        grid,
                        block,
                        ..
                    } => wanted.push((
                        name.clone(),
                        Kernel::from(*kind),
                        *grid,
                        *block,
                        (duration_us * 1000.0).round() as u64,
                    )),
                    Step::Copy { bytes: b, .. } | Step::Memset { bytes: b, .. } => {
                        bytes = bytes.max(*b)
                    }
                    _ => {}
                }
            }
        }
        for g in &sc.graphs {
            for n in &g.nodes {
                wanted.push((
                    n.kernel.name.clone(),
                    Kernel::from(n.kernel.kind),
                    n.kernel.grid,
                    n.kernel.block,
                    (n.kernel.duration_us * 1000.0).round() as u64,
                ));
            }
        }
        if let Some(p) = plan {
            for (name, k) in plan::injected_kernels(p) {
                wanted.push((name, k, 1, 32, 1_000));
            }
            bytes = bytes.max(p.bytes_needed);
            if let Some((_, plan::Stretch::Ns(extra))) = &p.stretch {
                // Lengthened memory/compute kernels need their own iteration count.
                for w in wanted.clone() {
                    if matches!(w.1, Kernel::MemoryBound | Kernel::ComputeBound) {
                        wanted.push((w.0, w.1, w.2, w.3, w.4 + extra));
                    }
                }
            }
        }
        if wanted.iter().any(|w| w.1 == Kernel::MemoryBound) {
            bytes = bytes.max(64 << 20);
        }
        self.scratch.ensure(bytes as usize)?;
        let mut stream: sys::CUstream = std::ptr::null_mut();
        // SAFETY: out pointer.
        check_cuda("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut stream, 1)
        })?;
        let r = self.warm(&wanted, stream);
        // SAFETY: our stream.
        unsafe {
            sys::cuStreamSynchronize(stream);
            sys::cuStreamDestroy_v2(stream);
        }
        r
    }

    fn warm(
        &mut self,
        wanted: &[(String, Kernel, u32, u32, u64)],
        stream: sys::CUstream,
    ) -> Result<(), String> {
        let mut warmed: Vec<(String, Kernel)> = Vec::new();
        for (name, kernel, grid, block, dur) in wanted {
            let key = (name.clone(), *kernel);
            if !self.funcs.contains_key(&key) {
                let f = self.modules.get(name, *kernel)?;
                self.funcs.insert(key.clone(), f);
            }
            let (f, _) = self.funcs[&key].clone();
            if matches!(kernel, Kernel::MemoryBound | Kernel::ComputeBound)
                && !self
                    .iterations
                    .contains_key(&(*kernel, *grid, *block, *dur))
            {
                let per = self.calibrate(&f, *grid, *block, stream)?;
                let iters = ((*dur as f64 / per.max(1.0)).round() as u32).max(1);
                self.iterations
                    .insert((*kernel, *grid, *block, *dur), iters);
            }
            if warmed.contains(&key) {
                continue;
            }
            warmed.push(key);
            // First launch of a lazily loaded function pays the module load: do it now.
            let mut a = self.args(&f, 0, 1_000, 1);
            let (g, b) = if *kernel == Kernel::OccupancyHog {
                (1, kernels::gpu::HOG_BLOCK_THREADS)
            } else {
                (1, 32)
            };
            // SAFETY: scratch and log buffers live for the session.
            check_cuda(&format!("warm-up launch of {name}"), unsafe {
                driver::launch(&f, g, b, stream, &mut a, driver::LaunchVia::Launch)
            })?;
        }
        // SAFETY: our stream.
        check_cuda("warm-up synchronize", unsafe {
            sys::cuStreamSynchronize(stream)
        })
    }

    fn args(&self, f: &Func, slot: u32, dur: u64, iters: u32) -> driver::Args {
        let mut a = driver::Args {
            op_id: u64::MAX,
            log: self.log,
            slot,
            ..Default::default()
        };
        match f.kernel {
            Kernel::Spin | Kernel::OccupancyHog => a.a = dur,
            Kernel::MemoryBound => {
                let bytes = (self.scratch.dev_cap.min(64 << 20) as u64) & !15;
                a.a = self.scratch.dev_a;
                a.b = self.scratch.dev_b;
                a.c = bytes / 16;
                a.iters = iters;
            }
            Kernel::ComputeBound => a.iters = iters,
            Kernel::Empty => {}
        }
        a
    }

    /// Nanoseconds per iteration of a memory/compute-bound kernel shape.
    fn calibrate(
        &mut self,
        f: &Func,
        grid: u32,
        block: u32,
        stream: sys::CUstream,
    ) -> Result<f64, String> {
        let iters = 16u32;
        let mut best = f64::MAX;
        for _ in 0..3 {
            // SAFETY: slot 0 of our log; buffers live for the session.
            unsafe {
                check_cuda(
                    "cuMemsetD8(log)",
                    sys::cuMemsetD8_v2(self.log, 0, kernels::LogEntry::SIZE),
                )?;
                let mut a = self.args(f, 0, 0, iters);
                check_cuda(
                    "calibration launch",
                    driver::launch(f, grid, block, stream, &mut a, driver::LaunchVia::Launch),
                )?;
                check_cuda("calibration synchronize", sys::cuStreamSynchronize(stream))?;
                let mut e = kernels::LogEntry::default();
                check_cuda(
                    "reading the calibration log",
                    sys::cuMemcpyDtoH_v2(
                        &mut e as *mut kernels::LogEntry as *mut std::ffi::c_void,
                        self.log,
                        kernels::LogEntry::SIZE,
                    ),
                )?;
                let d = e.last_end_ns.max(e.end_ns).saturating_sub(e.start_ns) as f64;
                if d > 0.0 {
                    best = best.min(d / iters as f64);
                }
            }
        }
        if best == f64::MAX {
            return Err(
                "calibrating a memory/compute-bound kernel: the device log stayed empty".into(),
            );
        }
        Ok(best)
    }

    fn execute(
        &mut self,
        sc: &Scenario,
        plan: Option<&plan::Plan>,
        seed: u64,
    ) -> Result<exec::RunLog, String> {
        self.execute_host(sc, plan, seed, false).map(|r| r.0)
    }

    /// [`Self::execute`], with the eBPF host recorder attached to this process
    /// around the workload when `host` (and it can run here). libcuda is
    /// loaded by now (the session holds a context), so its uprobes resolve.
    fn execute_host(
        &mut self,
        sc: &Scenario,
        plan: Option<&plan::Plan>,
        seed: u64,
        host: bool,
    ) -> Result<(exec::RunLog, Option<ebpf_recorder::HostTrace>), String> {
        // SAFETY: clearing our own device log.
        check_cuda("clearing the device log", unsafe {
            sys::cuMemsetD8_v2(
                self.log,
                0,
                self.log_slots as usize * kernels::LogEntry::SIZE,
            )
        })?;
        // SAFETY: no arguments.
        check_cuda("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })?;
        // Whatever setup recorded is not part of the run.
        self.recorder.flush()?;
        let rec = if host {
            host::start(&mut self.host_disabled)
        } else {
            None
        };
        let dev = self.device();
        cupti::starve_buffers(self.cupti_starvation);
        let log = exec::Exec::new(sc, &dev, plan, seed).map(|e| e.run());
        cupti::starve_buffers(None);
        let trace = rec.map(|r| r.stop());
        Ok((log?, trace))
    }
}
