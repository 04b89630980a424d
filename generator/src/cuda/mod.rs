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
//! - [`cupti`]: activity buffers (RUNTIME, DRIVER, CONCURRENT_KERNEL, MEMCPY,
//!   MEMSET, SYNCHRONIZATION, CUDA_EVENT, EXTERNAL_CORRELATION), CLOCK_MONOTONIC
//!   timestamps, queued/submitted latency timestamps, dropped-record counts.
//! - [`plan`]: injections calibrated on the measured no-injection twin.
//! - [`truth`]: nodes, edges and records from what happened, bound by
//!   correlation id; cross-checked against the kernels' own `%globaltimer` log.
//!
//! Without a GPU, libcuda, CUPTI or NVRTC, [`CudaBackend::new`] returns
//! [`RecordError::Unavailable`] with what is missing; nothing panics.

mod call_sites;
pub mod cupti;
mod driver;
mod exec;
pub mod host;
mod plan;
mod truth;

pub use driver::driver_release;
pub use host::HostStats;
pub use truth::{ClockCheck, RunStats};

use crate::answers;
use crate::backend::{Backend, RecordError};
use crate::keys::target_key;
use cudarc::driver::sys;
use driver::{ck, guarded, DeviceInfo, Func, Modules, Ptr, Scratch, H};
use ground_truth::bundle::{Bundle, CrossCheck, Manifest};
use ground_truth::scenario::{Scenario, Step};
use ground_truth::{Mode, Node, Ns, SCHEMA_VERSION};
use kernels::Kernel;
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

/// Launch-overhead benchmark: the generator's executor against a direct
/// cudarc loop launching the same number of empty kernels (interleaved).
#[derive(Debug, Clone, Default)]
pub struct Overhead {
    pub kernels: u32,
    /// Host time from the first to the last launch call, per repetition.
    pub direct_ns: Vec<u64>,
    pub generator_ns: Vec<u64>,
    /// The direct loop with the recorder's per-call binding (push/pop of the
    /// op's external correlation id), i.e. the binding's own cost.
    pub direct_bound_ns: Vec<u64>,
    /// The generator on the same workload in closed mode (no request token
    /// on CUPTI's external-correlation stack).
    pub generator_closed_ns: Vec<u64>,
    pub spin_overhead_ns: u64,
    /// Whole `record` of the same workload (execution, flush, ground truth).
    pub record_ns: Vec<u64>,
    /// median(generator) / median(direct).
    pub ratio: f64,
    /// Device ops of the generator runs bound to a CUPTI record.
    pub bound: usize,
    pub device_ops: usize,
}

/// eBPF collector overhead: the launch-bound scenario through the executor,
/// with and without the host recorder attached (interleaved repetitions).
#[derive(Debug, Clone, Default)]
pub struct EbpfOverhead {
    pub kernels: u32,
    /// Host time from the first to the last call, per repetition.
    pub without_ns: Vec<u64>,
    pub with_ns: Vec<u64>,
    /// median(with) / median(without).
    pub ratio: f64,
    /// Uprobe records per recorded repetition, and ring-buffer losses.
    pub uprobes: Vec<usize>,
    pub ringbuffer_dropped: Vec<u64>,
    /// Recorder start (attach) and stop (drain + symbolize) times, ns.
    pub start_ns: Vec<u64>,
    pub stop_ns: Vec<u64>,
    /// Why the recorder could not run (then nothing was measured).
    pub error: Option<String>,
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
        if let Some(p) = scenario.check().first() {
            return Err(RecordError::Invalid(
                scenario.name.clone(),
                format!("{}: {}", p.path, p.message),
            ));
        }
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
        let ctx = cudarc::driver::CudaContext::new(0)
            .map_err(|e| format!("creating the CUDA context of device 0: {e:?}"))?;
        // Dependencies are managed explicitly (SPEC §9: tracking breaks capture).
        // SAFETY: no cudarc-managed buffers cross streams in this backend.
        unsafe { ctx.disable_event_tracking() };
        ctx.bind_to_thread()
            .map_err(|e| format!("binding the context: {e:?}"))?;
        let info = driver::device_info(ctx.cu_device())?;
        let modules = Modules::new(info.cc, info.smem_optin);
        let mut log: Ptr = 0;
        let bytes = LOG_SLOTS as usize * kernels::LogEntry::SIZE;
        // SAFETY: out pointer; the log lives as long as the session.
        ck("cuMemAlloc(device log)", unsafe {
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
            host_on: true,
            host_disabled: None,
            cupti_starvation: None,
        })
        .and_then(|mut s| {
            s.spin_overhead_ns = s.spin_overhead()?;
            Ok(s)
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
            ck("cuStreamCreate", sys::cuStreamCreate(&mut stream, 1))?;
            for _ in 0..10 {
                let mut a = self.args(&f, 0, SPIN, 1);
                ck(
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
            ck(
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
            ctx: H(self.ctx.cu_ctx()),
            recorder: &self.recorder,
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
        ck("cuStreamCreate", unsafe {
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
            ck(&format!("warm-up launch of {name}"), unsafe {
                driver::launch(&f, g, b, stream, &mut a, driver::LaunchVia::Launch)
            })?;
        }
        // SAFETY: our stream.
        ck("warm-up synchronize", unsafe {
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
                ck(
                    "cuMemsetD8(log)",
                    sys::cuMemsetD8_v2(self.log, 0, kernels::LogEntry::SIZE),
                )?;
                let mut a = self.args(f, 0, 0, iters);
                ck(
                    "calibration launch",
                    driver::launch(f, grid, block, stream, &mut a, driver::LaunchVia::Launch),
                )?;
                ck("calibration synchronize", sys::cuStreamSynchronize(stream))?;
                let mut e = kernels::LogEntry::default();
                ck(
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
        ck("clearing the device log", unsafe {
            sys::cuMemsetD8_v2(
                self.log,
                0,
                self.log_slots as usize * kernels::LogEntry::SIZE,
            )
        })?;
        // SAFETY: no arguments.
        ck("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })?;
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

    fn record(
        &mut self,
        sc: &Scenario,
        repetition: u32,
        stats: &mut Vec<RunStats>,
    ) -> Result<Bundle, String> {
        let host_on = self.host_on;
        let part = self.run_part(sc, repetition, stats, host_on)?;
        self.finish_part(sc, part, stats)
    }

    /// Records many runs under one eBPF recorder session (attaching and
    /// detaching its uprobes costs seconds, far more than a run): each run's
    /// host records are the ones inside its own window. The ring-buffer loss
    /// counter is the session's, so every bundle carries the batch total.
    fn record_batch(
        &mut self,
        items: &[(Scenario, u32)],
    ) -> Vec<(Result<Bundle, String>, Vec<RunStats>)> {
        let rec = if self.host_on {
            host::start(&mut self.host_disabled)
        } else {
            None
        };
        let mut parts: Vec<(Result<Part, String>, Vec<RunStats>)> = Vec::new();
        for (sc, rep) in items {
            let mut st = Vec::new();
            let p = guarded("cuda backend", || self.run_part(sc, *rep, &mut st, false));
            parts.push((p, st));
        }
        if let Some(r) = rec {
            let tr = r.stop();
            let mut windows: Vec<(Ns, Ns, usize)> = parts
                .iter()
                .enumerate()
                .filter_map(|(i, (p, _))| p.as_ref().ok().map(|p| (p.window.0, p.window.1, i)))
                .collect();
            windows.sort_unstable();
            let mut split: Vec<Vec<ground_truth::trace::Record>> = vec![Vec::new(); parts.len()];
            let find = |t: Ns| -> Option<usize> {
                let k = windows.partition_point(|w| w.0 <= t);
                k.checked_sub(1)
                    .map(|j| windows[j])
                    .filter(|w| t <= w.1)
                    .map(|w| w.2)
            };
            for r in tr.records {
                use ground_truth::trace::Record as R;
                let at = match &r {
                    R::Uprobe { enter, .. } => find(*enter),
                    R::Sched {
                        switch_out,
                        switch_in,
                        ..
                    } => find(*switch_out).or_else(|| find(*switch_in)),
                    R::PageFault { ts, .. } => find(*ts),
                    _ => None,
                };
                if let Some(i) = at {
                    split[i].push(r);
                }
            }
            for (i, recs) in split.into_iter().enumerate() {
                if let Ok(p) = &mut parts[i].0 {
                    p.host = Some(ebpf_recorder::HostTrace {
                        records: recs,
                        ringbuffer_dropped: tr.ringbuffer_dropped,
                        stack_errors: tr.stack_errors,
                        faults_untimed: tr.faults_untimed,
                        fault_timing: tr.fault_timing,
                        library: tr.library.clone(),
                        probes: Vec::new(),
                        warnings: tr.warnings.clone(),
                    });
                }
            }
        }
        parts
            .into_iter()
            .zip(items)
            .map(|((p, mut st), (sc, _))| {
                let b =
                    p.and_then(|p| guarded("cuda backend", || self.finish_part(sc, p, &mut st)));
                (b, st)
            })
            .collect()
    }

    fn run_part(
        &mut self,
        sc: &Scenario,
        repetition: u32,
        stats: &mut Vec<RunStats>,
        host_on: bool,
    ) -> Result<Part, String> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| format!("binding the context: {e:?}"))?;
        let seed = crate::mix(sc.seed ^ crate::mix(repetition as u64 + 1));
        let fail = |what: &str, errors: &[String]| -> Result<(), String> {
            if errors.is_empty() {
                Ok(())
            } else {
                Err(format!("{what} failed: {}", errors.join("; ")))
            }
        };
        self.prepare(sc, None)?;
        let mut twin = None;
        let mut plan = None;
        if let Some(inj) = &sc.injection {
            let log = self.execute(sc, None, seed)?;
            let mut out = truth::build(sc, &log, None, &self.recorder, false);
            out.stats.twin = true;
            stats.push(out.stats.clone());
            fail("the no-injection twin run", &log.errors)?;
            let tw = plan::Twin {
                nodes: &out.builder.truth.nodes,
                keys: &out.keys,
                origin: out.origin,
            };
            let sms = self.info.sms;
            let mut costs: HashMap<bool, Result<f64, String>> = HashMap::new();
            for major in [false, true] {
                if (major && inj.kind == ground_truth::scenario::InjectionKind::HostPageFaultMajor)
                    || (!major
                        && inj.kind == ground_truth::scenario::InjectionKind::HostPageFaultMinor)
                {
                    costs.insert(major, self.fault_cost(major));
                }
            }
            let p = plan::plan(sc, inj, &tw, sms, seed, |major| {
                costs
                    .remove(&major)
                    .unwrap_or_else(|| Err("no fault calibration".into()))
            });
            plan = Some(p);
            twin = Some(out);
        }
        self.prepare(sc, plan.as_ref())?;
        let (mut log, mut host_trace) = self.execute_host(sc, plan.as_ref(), seed, host_on)?;
        // A deschedule whose victim was not actually switched out for most of
        // the requested time did not inject what the scenario says: run again.
        for _ in 0..2 {
            let short = log
                .stalls
                .iter()
                .any(|s| s.switched_out_ns.is_some_and(|g| g < s.requested_ns / 2));
            if !short {
                break;
            }
            (log, host_trace) = self.execute_host(sc, plan.as_ref(), seed, host_on)?;
        }
        let out = truth::build(sc, &log, plan.as_ref(), &self.recorder, true);
        Ok(Part {
            seed,
            repetition,
            out,
            twin,
            window: (log.origin, log.end),
            errors: log.errors,
            host: host_trace,
        })
    }

    fn finish_part(
        &mut self,
        sc: &Scenario,
        part: Part,
        stats: &mut Vec<RunStats>,
    ) -> Result<Bundle, String> {
        let Part {
            seed,
            repetition,
            mut out,
            twin,
            window,
            errors,
            host: host_trace,
        } = part;
        let fail = |what: &str, errors: &[String]| -> Result<(), String> {
            if errors.is_empty() {
                Ok(())
            } else {
                Err(format!("{what} failed: {}", errors.join("; ")))
            }
        };
        let with_host = host_trace.is_some();
        if let Some(h) = host_trace {
            let hs = host::attach(&mut out.builder, h, window);
            out.loss.ringbuffer_dropped = hs.ringbuffer_dropped;
            out.stats.records = out.builder.trace.len();
            out.stats.host = Some(hs);
        }
        stats.push(out.stats.clone());
        let cross_check = CrossCheck {
            kernels: out.stats.clock.kernels as u64,
            clock_offset_ns: out.stats.clock.offset_ns,
            max_start_diff_ns: out.stats.clock.max_start_dev_ns,
            max_end_diff_ns: out.stats.clock.max_end_dev_ns,
            spin_overhead_ns: self.spin_overhead_ns,
            device_ops: out.stats.device_ops as u64,
            device_ops_bound: out.stats.bound as u64,
            call_sites_exact: out
                .stats
                .host
                .as_ref()
                .map_or(0, |h| h.call_sites_exact as u64),
            call_sites_nearest_wrong: out
                .stats
                .host
                .as_ref()
                .map_or(0, |h| h.call_sites_nearest_wrong as u64),
        };
        fail("the recorded run", &errors)?;
        let clock = out.stats.clock.clone();
        let origin = out.origin;
        let keys = out.keys;
        let loss = out.loss;
        let injections = out.injections;
        let (mut truth, trace) = out.builder.finish(seed);
        truth.injections = injections;
        let sd = &sc.symptom;
        let mut key = target_key(sc, sd.program.as_deref(), &sd.step, sd.request)
            .ok_or_else(|| "symptom.step names no step".to_string())?;
        key.graph_node = sd.graph_node.clone();
        let node = *keys
            .get(&key)
            .ok_or_else(|| "the symptom step never ran".to_string())?;
        let twin_node = match &twin {
            Some(t) => {
                let n = t
                    .keys
                    .get(&key)
                    .ok_or_else(|| "the symptom step never ran in the twin".to_string())?;
                shifted(&t.builder.truth.nodes[*n as usize], t.origin, origin)
            }
            None => truth.nodes[node as usize].clone(),
        };
        let symptom = answers::symptom(sc, &truth, &trace, node, &twin_node)?;
        let check = format!(
            "; CUPTI vs %globaltimer over {} kernels (offset-calibrated): max |start diff| {} ns, max |end diff| {} ns; spin kernels shortened by the measured {} ns launch overhead",
            clock.kernels, clock.max_start_dev_ns, clock.max_end_dev_ns, self.spin_overhead_ns
        );
        for inj in &mut truth.injections {
            if inj.measured_us.is_nan() {
                inj.measured_us = symptom.lateness_ns / 1000.0;
            }
            inj.mechanism.push_str(&check);
        }
        truth.symptoms.push(symptom);
        let mut collectors = vec!["cupti".to_string()];
        if with_host {
            collectors.push("ebpf".into());
        }
        if sc.mode == Mode::Instrumented {
            collectors.push("app".into());
        }
        let v = self.info.driver_cuda;
        Ok(Bundle {
            schema_version: SCHEMA_VERSION,
            manifest: Manifest {
                scenario: sc.clone(),
                seed,
                repetition,
                backend: "cuda".into(),
                gpu: format!(
                    "{} ({} SMs, compute capability {}.{})",
                    self.info.name, self.info.sms, self.info.cc.0, self.info.cc.1
                ),
                driver: self
                    .info
                    .driver_release
                    .clone()
                    .unwrap_or_else(|| format!("CUDA driver API {v}")),
                cuda: format!("{}.{}", v / 1000, (v % 1000) / 10),
                cupti: format!("CUPTI API version {}", self.recorder.version),
                tool_version: env!("CARGO_PKG_VERSION").into(),
                host: self.host.clone(),
                collectors,
                cross_check: Some(cross_check),
            },
            ground_truth: truth,
            trace,
            loss,
        })
    }

    fn ebpf_overhead(&mut self, n: u32, reps: u32) -> Result<EbpfOverhead, String> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| format!("binding the context: {e:?}"))?;
        let sc = crate::sim::launch_bound_scenario(n);
        self.prepare(&sc, None)?;
        let window = |log: &exec::RunLog| {
            let (mut first, mut last) = (u64::MAX, 0u64);
            for t in &log.threads {
                for op in &t.ops {
                    first = first.min(op.t0);
                    last = last.max(op.t1);
                }
            }
            last.saturating_sub(first)
        };
        let mut o = EbpfOverhead {
            kernels: n,
            ..Default::default()
        };
        // One unmeasured plain run first (page-in).
        for rep in 0..reps.max(1) + 1 {
            for with in if rep % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            } {
                if rep == 0 && with {
                    // Attaching costs seconds: only the plain run warms up.
                    continue;
                }
                let (log, trace) = if with {
                    self.recorder.flush()?;
                    let t0 = now();
                    let Some(rec) = host::start(&mut self.host_disabled) else {
                        o.error = self.host_disabled.clone();
                        return Ok(o);
                    };
                    let t1 = now();
                    let dev = self.device();
                    let log = exec::Exec::new(&sc, &dev, None, rep as u64)?.run();
                    let t2 = now();
                    let tr = rec.stop();
                    if rep > 0 {
                        o.start_ns.push(t1 - t0);
                        o.stop_ns.push(now() - t2);
                    }
                    (log, Some(tr))
                } else {
                    (self.execute(&sc, None, rep as u64)?, None)
                };
                if !log.errors.is_empty() {
                    return Err(log.errors.join("; "));
                }
                if rep == 0 {
                    continue;
                }
                if let Some(tr) = trace {
                    o.with_ns.push(window(&log));
                    o.uprobes.push(
                        tr.records
                            .iter()
                            .filter(|r| matches!(r, ground_truth::trace::Record::Uprobe { .. }))
                            .count(),
                    );
                    o.ringbuffer_dropped.push(tr.ringbuffer_dropped);
                } else {
                    o.without_ns.push(window(&log));
                }
            }
        }
        self.recorder.flush()?;
        let med = |v: &[u64]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v[v.len() / 2] as f64
        };
        o.ratio = med(&o.with_ns) / med(&o.without_ns).max(1.0);
        Ok(o)
    }

    fn launch_overhead(&mut self, n: u32, reps: u32) -> Result<Overhead, String> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| format!("binding the context: {e:?}"))?;
        let sc = crate::sim::launch_bound_scenario(n);
        let mut closed_sc = sc.clone();
        closed_sc.mode = Mode::Closed;
        self.prepare(&sc, None)?;
        let arch = format!("compute_{}{}", self.info.cc.0, self.info.cc.1);
        let k = kernels::gpu::Kernels::load(&self.ctx, Some(&arch)).map_err(|e| e.to_string())?;
        let s1 = self.ctx.new_stream().map_err(|e| format!("{e:?}"))?;
        let s2 = self.ctx.new_stream().map_err(|e| format!("{e:?}"))?;
        let cfg = kernels::gpu::launch_config(1, 32);
        let mut o = Overhead {
            kernels: n,
            ..Default::default()
        };
        for rep in 0..reps.max(1) {
            // Direct cudarc loop.
            let t0 = now();
            for i in 0..n {
                let s = if i % 2 == 0 { &s1 } else { &s2 };
                // SAFETY: no buffers are involved (the log is disabled).
                unsafe { k.launch_empty(s, i as u64, kernels::gpu::LogSlot::NONE, cfg) }
                    .map_err(|e| e.to_string())?;
            }
            let t1 = now();
            o.direct_ns.push(t1 - t0);
            s1.synchronize().map_err(|e| format!("{e:?}"))?;
            s2.synchronize().map_err(|e| format!("{e:?}"))?;
            // Direct loop with the binding.
            let t0 = now();
            for i in 0..n {
                let s = if i % 2 == 0 { &s1 } else { &s2 };
                cupti::push(i as u64 + 1, None);
                // SAFETY: as above.
                let r = unsafe { k.launch_empty(s, i as u64, kernels::gpu::LogSlot::NONE, cfg) };
                cupti::pop(false);
                r.map_err(|e| e.to_string())?;
            }
            let t1 = now();
            o.direct_bound_ns.push(t1 - t0);
            s1.synchronize().map_err(|e| format!("{e:?}"))?;
            s2.synchronize().map_err(|e| format!("{e:?}"))?;
            // The generator: same kernels through the executor and recorder.
            let window = |log: &exec::RunLog| {
                let (mut first, mut last) = (u64::MAX, 0u64);
                for t in &log.threads {
                    for op in &t.ops {
                        first = first.min(op.t0);
                        last = last.max(op.t1);
                    }
                }
                last.saturating_sub(first)
            };
            let closed = self.execute(&closed_sc, None, rep as u64)?;
            o.generator_closed_ns.push(window(&closed));
            drop(closed);
            let r0 = now();
            let log = self.execute(&sc, None, rep as u64)?;
            o.generator_ns.push(window(&log));
            let out = truth::build(&sc, &log, None, &self.recorder, true);
            let _ = out.builder.finish(1);
            o.record_ns.push(now() - r0);
            o.bound += out.stats.bound;
            o.device_ops += out.stats.device_ops;
            if !log.errors.is_empty() {
                return Err(log.errors.join("; "));
            }
        }
        self.recorder.flush()?;
        let med = |v: &[u64]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v[v.len() / 2] as f64
        };
        o.ratio = med(&o.generator_ns) / med(&o.direct_ns).max(1.0);
        o.spin_overhead_ns = self.spin_overhead_ns;
        Ok(o)
    }
}

/// A recorded run before its bundle is assembled (host records pending).
struct Part {
    seed: u64,
    repetition: u32,
    out: truth::Output,
    twin: Option<truth::Output>,
    window: (Ns, Ns),
    errors: Vec<String>,
    host: Option<ebpf_recorder::HostTrace>,
}

/// A twin node with its times moved from the twin's origin to the run's.
fn shifted(n: &Node, from: Ns, to: Ns) -> Node {
    let mv = |t: Ns| {
        if t == 0 {
            0
        } else {
            (t + to).saturating_sub(from)
        }
    };
    let mut n = n.clone();
    n.start = mv(n.start);
    n.end = mv(n.end);
    n.queued = mv(n.queued);
    n.submitted = mv(n.submitted);
    n
}
