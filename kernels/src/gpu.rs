//! Loading the kernels with the CUDA driver API (cudarc) and launching them.
//!
//! All launches take raw device pointers, so cudarc's automatic event
//! tracking is never involved (the generator disables it anyway, see docs/gpu-facts.md);
//! the caller keeps the buffers alive until the work has finished, which is
//! why the launch functions are `unsafe`.

use std::path::Path;
use std::sync::Arc;

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
    PushKernelArg,
};

use crate::{compile_ptx, panic_text, Kernel, KernelError, LogEntry};

/// Device node whose presence means an NVIDIA driver and GPU are installed.
pub const NVIDIACTL: &str = "/dev/nvidiactl";

/// Why there is no usable GPU, or `Ok` when the driver library loads and a
/// device node exists. Never panics.
pub fn gpu_available() -> Result<(), KernelError> {
    if !Path::new(NVIDIACTL).exists() {
        return Err(KernelError::NoGpu(format!("{NVIDIACTL} does not exist")));
    }
    // SAFETY: only dlopen/dlclose of candidate names.
    let present = std::panic::catch_unwind(|| unsafe { cudarc::driver::sys::is_culib_present() })
        .unwrap_or(false);
    if !present {
        return Err(KernelError::NoGpu(
            "libcuda.so (the NVIDIA driver library) cannot be loaded".into(),
        ));
    }
    Ok(())
}

/// Open device `ordinal`'s primary context without panicking.
pub fn open_context(ordinal: usize) -> Result<Arc<CudaContext>, KernelError> {
    gpu_available()?;
    match std::panic::catch_unwind(|| CudaContext::new(ordinal)) {
        Ok(Ok(ctx)) => Ok(ctx),
        Ok(Err(source)) => Err(KernelError::Driver {
            context: format!("creating the context of device {ordinal}"),
            source,
        }),
        Err(p) => Err(KernelError::NoGpu(panic_text(&p))),
    }
}

fn drv<T>(context: &str, r: Result<T, cudarc::driver::DriverError>) -> Result<T, KernelError> {
    r.map_err(|source| KernelError::Driver {
        context: context.to_string(),
        source,
    })
}

/// Where a kernel writes its log entry: a device pointer to an array of
/// [`LogEntry`] (0 = do not log) and the slot index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogSlot {
    pub log_ptr: u64,
    pub slot: u32,
}

impl LogSlot {
    /// No logging.
    pub const NONE: LogSlot = LogSlot {
        log_ptr: 0,
        slot: 0,
    };

    /// Slot `slot` of `log` (the pointer stays valid as long as `log` lives).
    pub fn of(
        log: &CudaSlice<LogEntry>,
        stream: &CudaStream,
        slot: u32,
    ) -> Result<Self, KernelError> {
        if slot as usize >= log.len() {
            return Err(KernelError::BadLaunch(format!(
                "log slot {slot} out of range (log has {} entries)",
                log.len()
            )));
        }
        let (ptr, _sync) = log.device_ptr(stream);
        Ok(LogSlot { log_ptr: ptr, slot })
    }
}

/// The loaded module with every kernel and the device facts launches need.
pub struct Kernels {
    ctx: Arc<CudaContext>,
    _module: Arc<CudaModule>,
    funcs: Vec<(Kernel, CudaFunction)>,
    num_sms: u32,
    hog_dynamic_smem: u32,
}

/// Threads per block of the occupancy hog (only thread 0 spins; the block's
/// shared memory, not its threads, is what fills the SM).
pub const HOG_BLOCK_THREADS: u32 = 32;

impl Kernels {
    /// Compile with NVRTC for `arch` (default `compute_90`) and load.
    pub fn load(ctx: &Arc<CudaContext>, arch: Option<&str>) -> Result<Self, KernelError> {
        let ptx = compile_ptx(arch)?;
        Self::load_ptx(ctx, &ptx)
    }

    /// Load already-compiled PTX (from [`compile_ptx`]).
    pub fn load_ptx(ctx: &Arc<CudaContext>, ptx: &str) -> Result<Self, KernelError> {
        let module = drv(
            "loading the causalbench PTX module",
            ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx.to_string())),
        )?;
        let mut funcs = Vec::new();
        for k in Kernel::ALL {
            let f = drv(
                &format!("looking up {}", k.entry_point()),
                module.load_function(k.entry_point()),
            )?;
            funcs.push((k, f));
        }
        let num_sms = drv(
            "reading the SM count",
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        )? as u32;
        let optin = drv(
            "reading the opt-in shared memory per block",
            ctx.attribute(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            ),
        )?;
        let mut me = Kernels {
            ctx: ctx.clone(),
            _module: module,
            funcs,
            num_sms,
            hog_dynamic_smem: 0,
        };
        let hog = me.function(Kernel::OccupancyHog);
        let static_smem = drv(
            "reading the hog's static shared memory",
            hog.get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
        )?;
        let dynamic = (optin - static_smem).max(0);
        drv(
            "raising the hog's dynamic shared memory limit",
            hog.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                dynamic,
            ),
        )?;
        drv(
            "preferring the maximum shared-memory carveout for the hog",
            hog.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                100,
            ),
        )?;
        me.hog_dynamic_smem = dynamic as u32;
        Ok(me)
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    pub fn function(&self, k: Kernel) -> &CudaFunction {
        &self
            .funcs
            .iter()
            .find(|(kk, _)| *kk == k)
            .expect("every kernel is loaded")
            .1
    }

    /// Number of SMs on the device.
    pub fn num_sms(&self) -> u32 {
        self.num_sms
    }

    /// Dynamic shared memory per hog block (opt-in maximum minus static).
    pub fn hog_dynamic_smem_bytes(&self) -> u32 {
        self.hog_dynamic_smem
    }

    /// How many hog blocks fit on one SM (1 when the hog owns the SM).
    pub fn hog_blocks_per_sm(&self) -> Result<u32, KernelError> {
        drv(
            "computing the hog's occupancy",
            self.function(Kernel::OccupancyHog)
                .occupancy_max_active_blocks_per_multiprocessor(
                    HOG_BLOCK_THREADS,
                    self.hog_dynamic_smem as usize,
                    None,
                ),
        )
    }

    /// A zeroed log of `slots` entries.
    pub fn alloc_log(
        &self,
        stream: &Arc<CudaStream>,
        slots: usize,
    ) -> Result<CudaSlice<LogEntry>, KernelError> {
        drv(
            "allocating the device log",
            stream.alloc_zeros::<LogEntry>(slots),
        )
    }

    /// Copy the log back (synchronizes `stream`).
    pub fn read_log(
        &self,
        stream: &Arc<CudaStream>,
        log: &CudaSlice<LogEntry>,
    ) -> Result<Vec<LogEntry>, KernelError> {
        drv("reading the device log", stream.clone_dtoh(log))
    }

    /// Launch `cb_spin`: every block spins `duration_ns` from its own start.
    ///
    /// # Safety
    /// The log buffer behind `log` must stay alive until the kernel finished.
    pub unsafe fn launch_spin(
        &self,
        stream: &CudaStream,
        op_id: u64,
        log: LogSlot,
        duration_ns: u64,
        cfg: LaunchConfig,
    ) -> Result<(), KernelError> {
        let mut b = stream.launch_builder(self.function(Kernel::Spin));
        b.arg(&op_id)
            .arg(&log.log_ptr)
            .arg(&log.slot)
            .arg(&duration_ns);
        drv("launching cb_spin", b.launch(cfg).map(|_| ()))
    }

    /// Launch `cb_memory`: `iterations` grid-stride passes copying
    /// `n_bytes` (a multiple of 16) from `src` to `dst`.
    ///
    /// # Safety
    /// `src` and `dst` must be device buffers of at least `n_bytes`, and they
    /// and the log must stay alive until the kernel finished.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn launch_memory(
        &self,
        stream: &CudaStream,
        op_id: u64,
        log: LogSlot,
        src: u64,
        dst: u64,
        n_bytes: u64,
        iterations: u32,
        cfg: LaunchConfig,
    ) -> Result<(), KernelError> {
        if n_bytes & 15 != 0 {
            return Err(KernelError::BadLaunch(format!(
                "cb_memory copies 16-byte elements; {n_bytes} bytes is not a multiple of 16"
            )));
        }
        let n_vec = n_bytes / 16;
        let mut b = stream.launch_builder(self.function(Kernel::MemoryBound));
        b.arg(&op_id)
            .arg(&log.log_ptr)
            .arg(&log.slot)
            .arg(&src)
            .arg(&dst)
            .arg(&n_vec)
            .arg(&iterations);
        drv("launching cb_memory", b.launch(cfg).map(|_| ()))
    }

    /// Launch `cb_compute`: `iterations` rounds of 8 FMAs per thread; `out`
    /// (one f32 per thread) may be 0.
    ///
    /// # Safety
    /// `out`, when non-zero, must hold one f32 per launched thread; it and the
    /// log must stay alive until the kernel finished.
    pub unsafe fn launch_compute(
        &self,
        stream: &CudaStream,
        op_id: u64,
        log: LogSlot,
        out: u64,
        iterations: u32,
        cfg: LaunchConfig,
    ) -> Result<(), KernelError> {
        let mut b = stream.launch_builder(self.function(Kernel::ComputeBound));
        b.arg(&op_id)
            .arg(&log.log_ptr)
            .arg(&log.slot)
            .arg(&out)
            .arg(&iterations);
        drv("launching cb_compute", b.launch(cfg).map(|_| ()))
    }

    /// Launch the occupancy hog holding `sms` SMs for `duration_ns`: grid =
    /// `sms` blocks of [`HOG_BLOCK_THREADS`] threads, each with
    /// [`Self::hog_dynamic_smem_bytes`] of dynamic shared memory, so exactly
    /// one hog block fits per SM and nothing else fits beside it.
    ///
    /// # Safety
    /// The log buffer behind `log` must stay alive until the kernel finished.
    pub unsafe fn launch_occupancy_hog(
        &self,
        stream: &CudaStream,
        op_id: u64,
        log: LogSlot,
        duration_ns: u64,
        sms: u32,
    ) -> Result<(), KernelError> {
        if sms == 0 || sms > self.num_sms {
            return Err(KernelError::BadLaunch(format!(
                "the hog can hold 1..={} SMs, not {sms}",
                self.num_sms
            )));
        }
        let cfg = LaunchConfig {
            grid_dim: (sms, 1, 1),
            block_dim: (HOG_BLOCK_THREADS, 1, 1),
            shared_mem_bytes: self.hog_dynamic_smem,
        };
        let mut b = stream.launch_builder(self.function(Kernel::OccupancyHog));
        b.arg(&op_id)
            .arg(&log.log_ptr)
            .arg(&log.slot)
            .arg(&duration_ns);
        drv("launching cb_occupancy_hog", b.launch(cfg).map(|_| ()))
    }

    /// Launch `cb_empty`.
    ///
    /// # Safety
    /// The log buffer behind `log` must stay alive until the kernel finished.
    pub unsafe fn launch_empty(
        &self,
        stream: &CudaStream,
        op_id: u64,
        log: LogSlot,
        cfg: LaunchConfig,
    ) -> Result<(), KernelError> {
        let mut b = stream.launch_builder(self.function(Kernel::Empty));
        b.arg(&op_id).arg(&log.log_ptr).arg(&log.slot);
        drv("launching cb_empty", b.launch(cfg).map(|_| ()))
    }
}

/// Linear model of a kernel's duration in its `iterations` parameter,
/// measured on the device (`%globaltimer`, block 0's start to the last
/// block's end).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IterationModel {
    pub fixed_ns: f64,
    pub ns_per_iteration: f64,
}

impl IterationModel {
    /// Iterations for a kernel of about `duration_ns` (at least 1).
    pub fn iterations_for(&self, duration_ns: u64) -> u32 {
        if self.ns_per_iteration <= 0.0 {
            return 1;
        }
        let it = ((duration_ns as f64 - self.fixed_ns) / self.ns_per_iteration).round();
        it.clamp(1.0, u32::MAX as f64) as u32
    }

    /// Predicted duration for `iterations`.
    pub fn duration_ns(&self, iterations: u32) -> f64 {
        self.fixed_ns + self.ns_per_iteration * iterations as f64
    }
}

impl Kernels {
    /// Measure how `cb_memory` (over `mem_bytes`, a multiple of 16) or
    /// `cb_compute` scales with `iterations` for launch shape `cfg`, so a
    /// scenario's `duration_us` can be turned into an iteration count.
    pub fn calibrate_iterations(
        &self,
        stream: &Arc<CudaStream>,
        kernel: Kernel,
        cfg: LaunchConfig,
        mem_bytes: u64,
    ) -> Result<IterationModel, KernelError> {
        let (lo, hi) = match kernel {
            Kernel::MemoryBound => (2u32, 10u32),
            Kernel::ComputeBound => (20_000u32, 220_000u32),
            other => {
                return Err(KernelError::BadLaunch(format!(
                    "{} has no iterations parameter",
                    other.entry_point()
                )))
            }
        };
        let threads = cfg.grid_dim.0 as u64
            * cfg.grid_dim.1 as u64
            * cfg.grid_dim.2 as u64
            * cfg.block_dim.0 as u64
            * cfg.block_dim.1 as u64
            * cfg.block_dim.2 as u64;
        let bytes = if kernel == Kernel::MemoryBound {
            mem_bytes.max(16)
        } else {
            16
        };
        let src = drv(
            "allocating calibration memory",
            stream.alloc_zeros::<u8>(bytes as usize),
        )?;
        let dst = drv(
            "allocating calibration memory",
            stream.alloc_zeros::<u8>(bytes as usize),
        )?;
        let out = drv(
            "allocating calibration memory",
            stream.alloc_zeros::<f32>(threads as usize),
        )?;
        let log = self.alloc_log(stream, 6)?;
        let (src_p, _a) = src.device_ptr(stream);
        let (dst_p, _b) = dst.device_ptr(stream);
        let (out_p, _c) = out.device_ptr(stream);
        // Slots 0-1: warm-up; 2-3: lo; 4-5: hi.
        let iters = [lo, lo, lo, lo, hi, hi];
        for (slot, &it) in iters.iter().enumerate() {
            let ls = LogSlot::of(&log, stream, slot as u32)?;
            // SAFETY: every buffer lives until read_log synchronizes below.
            unsafe {
                match kernel {
                    Kernel::MemoryBound => self.launch_memory(
                        stream,
                        slot as u64 + 1,
                        ls,
                        src_p,
                        dst_p,
                        bytes,
                        it,
                        cfg,
                    )?,
                    _ => self.launch_compute(stream, slot as u64 + 1, ls, out_p, it, cfg)?,
                }
            }
        }
        let e = self.read_log(stream, &log)?;
        let dur = |i: usize| e[i].last_end_ns.saturating_sub(e[i].start_ns) as f64;
        let t_lo = dur(2).min(dur(3));
        let t_hi = dur(4).min(dur(5));
        let ns_per_iteration = (t_hi - t_lo) / (hi - lo) as f64;
        let fixed_ns = (t_lo - ns_per_iteration * lo as f64).max(0.0);
        Ok(IterationModel {
            fixed_ns,
            ns_per_iteration,
        })
    }
}

/// A launch configuration of `grid` × `block` threads (1-D), no dynamic
/// shared memory — the shape of a scenario `KernelSpec`.
pub fn launch_config(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The NVIDIA kernel module's release ("580.159.04"), from
/// /proc/driver/nvidia/version, if readable.
pub fn driver_release() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu ..."
    text.lines()
        .next()?
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_string)
}
