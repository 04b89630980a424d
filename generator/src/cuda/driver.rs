//! Thin layer over the CUDA driver API (cudarc's raw `sys` bindings): error
//! checking, the device facts the backend needs, kernels compiled under the
//! scenario's kernel names, launch argument blocks, scratch buffers.
//!
//! Every scenario kernel is the `kernels` crate's CUDA source compiled with
//! NVRTC with its entry point renamed by the preprocessor (`#define cb_spin
//! gemm`), so CUPTI reports the scenario's kernel names while the kernel
//! bodies stay those of `kernels/` (spin on `%globaltimer`, device log).

use cudarc::driver::sys::{self, CUresult};
use kernels::Kernel;
use std::collections::HashMap;
use std::ffi::{c_void, CString};

pub type Ptr = sys::CUdeviceptr;

/// A raw driver handle that may cross threads (the driver API is thread safe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendHandle<T>(pub T);
// SAFETY: CUDA driver handles are usable from any thread with the context current.
unsafe impl<T> Send for SendHandle<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendHandle<T> {}

pub fn err_name(r: CUresult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: the driver returns a static string or leaves the pointer null.
    unsafe {
        if sys::cuGetErrorName(r, &mut p) == CUresult::CUDA_SUCCESS && !p.is_null() {
            std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
        } else {
            format!("{r:?}")
        }
    }
}

/// Ok, or "`what` failed: CUDA_ERROR_…".
pub fn check_cuda(what: &str, r: CUresult) -> Result<(), String> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed: {}", err_name(r)))
    }
}

/// Runs `f`, turning a cudarc panic (a missing library or symbol) into an error.
pub fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(format!(
            "{what}: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into())
        )),
    }
}

/// Facts about the device read once.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub name: String,
    pub sms: u32,
    pub cc: (i32, i32),
    /// CUDA version the driver supports (`cuDriverGetVersion`, e.g. 13000).
    pub driver_cuda: i32,
    /// Kernel module version from /proc/driver/nvidia/version, if readable.
    pub driver_release: Option<String>,
    /// Stream priorities: (least, greatest); greatest is numerically lowest.
    pub priorities: (i32, i32),
    pub smem_optin: i32,
}

pub fn device_info(dev: sys::CUdevice) -> Result<DeviceInfo, String> {
    let attr = |a: sys::CUdevice_attribute| -> Result<i32, String> {
        let mut v = 0;
        // SAFETY: valid device and out pointer.
        check_cuda("cuDeviceGetAttribute", unsafe {
            sys::cuDeviceGetAttribute(&mut v, a, dev)
        })?;
        Ok(v)
    };
    use sys::CUdevice_attribute as A;
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: buffer of the given length.
    check_cuda("cuDeviceGetName", unsafe {
        sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, dev)
    })?;
    // SAFETY: NUL-terminated by the driver.
    let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let mut v = 0;
    // SAFETY: out pointer.
    check_cuda("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut v)
    })?;
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: out pointers; a context is current.
    check_cuda("cuCtxGetStreamPriorityRange", unsafe {
        sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest)
    })?;
    let driver_release = kernels::gpu::driver_release();
    Ok(DeviceInfo {
        name,
        sms: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
        cc: (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        driver_cuda: v,
        driver_release,
        priorities: (least, greatest),
        smem_optin: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
    })
}

/// A loaded kernel entry point.
#[derive(Debug, Clone, Copy)]
pub struct Func {
    pub f: SendHandle<sys::CUfunction>,
    pub kernel: Kernel,
    /// Dynamic shared memory to launch with (the hog's opt-in maximum).
    pub smem: u32,
}

/// Kernels compiled under scenario names, cached per (name, kernel).
pub struct Modules {
    arch: String,
    cache: HashMap<(String, Kernel), (Func, String)>,
    smem_optin: i32,
}

fn is_c_identifier(s: &str) -> bool {
    let mut ch = s.chars();
    ch.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && ch.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with("cb_")
        && !s.starts_with("__")
}

fn sanitize(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    out.insert_str(0, "k_");
    out
}

impl Modules {
    pub fn new(cc: (i32, i32), smem_optin: i32) -> Modules {
        Modules {
            arch: format!("compute_{}{}", cc.0, cc.1),
            cache: HashMap::new(),
            smem_optin,
        }
    }

    fn compile(&self, entry: &str, kernel: Kernel) -> Result<String, String> {
        let src = format!(
            "#define {} {entry}\n{}",
            kernel.entry_point(),
            kernels::source()
        );
        // One module per entry name: each is compiled once per source, options
        // and NVRTC version, then read from the PTX cache (docs/cli.md, "Caches").
        kernels::ptx_cache::compile(
            &src,
            &format!("{entry}.cu"),
            kernels::compile_options(&self.arch),
            &self.arch,
        )
        .map_err(|e| format!("NVRTC could not compile kernel `{entry}`: {e}"))
    }

    /// The entry point named `name` running `kernel`'s body (compiled and
    /// loaded on first use; falls back to `k_<name>` if the name clashes).
    /// Returns the function and the name CUPTI will report.
    pub fn get(&mut self, name: &str, kernel: Kernel) -> Result<(Func, String), String> {
        if let Some(f) = self.cache.get(&(name.to_string(), kernel)) {
            return Ok(f.clone());
        }
        let mut candidates = Vec::new();
        if is_c_identifier(name) {
            candidates.push(name.to_string());
        }
        candidates.push(sanitize(name));
        let mut last = String::new();
        for entry in candidates {
            match self.compile(&entry, kernel) {
                Ok(ptx) => {
                    let f = self.load(&ptx, &entry, kernel)?;
                    self.cache
                        .insert((name.to_string(), kernel), (f, entry.clone()));
                    return Ok((f, entry));
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn load(&self, ptx: &str, entry: &str, kernel: Kernel) -> Result<Func, String> {
        let c = CString::new(ptx).map_err(|_| "PTX contains a NUL byte".to_string())?;
        let mut m: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: NUL-terminated PTX image.
        check_cuda("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut m, c.as_ptr() as *const c_void)
        })?;
        let cname = CString::new(entry).map_err(|_| "bad kernel name".to_string())?;
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: loaded module, NUL-terminated name.
        check_cuda(&format!("cuModuleGetFunction({entry})"), unsafe {
            sys::cuModuleGetFunction(&mut f, m, cname.as_ptr())
        })?;
        let mut smem = 0u32;
        if kernel == Kernel::OccupancyHog {
            use sys::CUfunction_attribute as FA;
            let mut stat = 0;
            // SAFETY: valid function, out pointer.
            check_cuda("cuFuncGetAttribute(SHARED_SIZE_BYTES)", unsafe {
                sys::cuFuncGetAttribute(&mut stat, FA::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f)
            })?;
            let dynamic = (self.smem_optin - stat).max(0);
            // SAFETY: valid function and attribute values.
            unsafe {
                check_cuda(
                    "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                    sys::cuFuncSetAttribute(
                        f,
                        FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        dynamic,
                    ),
                )?;
                check_cuda(
                    "cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT)",
                    sys::cuFuncSetAttribute(
                        f,
                        FA::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                        100,
                    ),
                )?;
            }
            smem = dynamic as u32;
        }
        Ok(Func {
            f: SendHandle(f),
            kernel,
            smem,
        })
    }
}

/// Launch arguments of one kernel, laid out as the CUDA source declares them.
/// Kept alive across the launch call (the driver copies the values).
#[derive(Debug, Clone, Copy, Default)]
pub struct Args {
    pub op_id: u64,
    pub log: u64,
    pub slot: u32,
    /// spin/hog: duration_ns; memory: src; compute: out.
    pub a: u64,
    /// memory: dst.
    pub b: u64,
    /// memory: n_vec.
    pub c: u64,
    /// memory / compute: iterations.
    pub iters: u32,
}

impl Args {
    /// The kernelParams array (pointers into `self`).
    pub fn params(&mut self, kernel: Kernel) -> Vec<*mut c_void> {
        let p = |x: &mut u64| x as *mut u64 as *mut c_void;
        let mut v: Vec<*mut c_void> = vec![
            p(&mut self.op_id),
            p(&mut self.log),
            &mut self.slot as *mut u32 as *mut c_void,
        ];
        match kernel {
            Kernel::Spin | Kernel::OccupancyHog => v.push(p(&mut self.a)),
            Kernel::MemoryBound => {
                v.push(p(&mut self.a));
                v.push(p(&mut self.b));
                v.push(p(&mut self.c));
                v.push(&mut self.iters as *mut u32 as *mut c_void);
            }
            Kernel::ComputeBound => {
                v.push(p(&mut self.a));
                v.push(&mut self.iters as *mut u32 as *mut c_void);
            }
            Kernel::Empty => {}
        }
        v
    }
}

/// How a kernel is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchVia {
    Launch,
    LaunchEx,
}

/// Launches `func` on `stream` with `grid` × `block`.
///
/// # Safety
/// The buffers the arguments point at must stay alive until the kernel ran.
#[inline(always)]
pub unsafe fn launch(
    func: &Func,
    grid: u32,
    block: u32,
    stream: sys::CUstream,
    args: &mut Args,
    via: LaunchVia,
) -> CUresult {
    let mut params = args.params(func.kernel);
    match via {
        LaunchVia::Launch => sys::cuLaunchKernel(
            func.f.0,
            grid,
            1,
            1,
            block,
            1,
            1,
            func.smem,
            stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        ),
        LaunchVia::LaunchEx => {
            let cfg = sys::CUlaunchConfig {
                gridDimX: grid,
                gridDimY: 1,
                gridDimZ: 1,
                blockDimX: block,
                blockDimY: 1,
                blockDimZ: 1,
                sharedMemBytes: func.smem,
                hStream: stream,
                attrs: std::ptr::null_mut(),
                numAttrs: 0,
            };
            sys::cuLaunchKernelEx(&cfg, func.f.0, params.as_mut_ptr(), std::ptr::null_mut())
        }
    }
}

/// Scratch buffers copies, memsets and memory-bound kernels use.
#[derive(Debug, Default)]
pub struct Scratch {
    pub dev_a: Ptr,
    pub dev_b: Ptr,
    pub dev_cap: usize,
    pub pinned: usize,
    pub pinned_cap: usize,
    pub pageable: Vec<u8>,
}

impl Scratch {
    /// Grows every buffer to at least `bytes`.
    pub fn ensure(&mut self, bytes: usize) -> Result<(), String> {
        let bytes = bytes.max(1 << 20).next_multiple_of(1 << 20);
        if self.dev_cap < bytes {
            // SAFETY: freeing our own allocations (0 is ignored) and allocating new ones.
            unsafe {
                if self.dev_cap > 0 {
                    sys::cuMemFree_v2(self.dev_a);
                    sys::cuMemFree_v2(self.dev_b);
                }
                self.dev_cap = 0;
                check_cuda("cuMemAlloc", sys::cuMemAlloc_v2(&mut self.dev_a, bytes))?;
                check_cuda("cuMemAlloc", sys::cuMemAlloc_v2(&mut self.dev_b, bytes))?;
                check_cuda("cuMemsetD8", sys::cuMemsetD8_v2(self.dev_a, 0, bytes))?;
                check_cuda("cuMemsetD8", sys::cuMemsetD8_v2(self.dev_b, 0, bytes))?;
            }
            self.dev_cap = bytes;
        }
        if self.pinned_cap < bytes {
            // SAFETY: as above, page-locked host memory.
            unsafe {
                if self.pinned_cap > 0 {
                    sys::cuMemFreeHost(self.pinned as *mut c_void);
                }
                self.pinned_cap = 0;
                let mut p: *mut c_void = std::ptr::null_mut();
                check_cuda("cuMemHostAlloc", sys::cuMemHostAlloc(&mut p, bytes, 0))?;
                std::ptr::write_bytes(p as *mut u8, 1, bytes);
                self.pinned = p as usize;
            }
            self.pinned_cap = bytes;
        }
        if self.pageable.len() < bytes {
            // Touched, so copies don't pay first-touch faults.
            self.pageable = vec![1u8; bytes];
        }
        Ok(())
    }
}
