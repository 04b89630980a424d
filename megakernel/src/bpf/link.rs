//! The compiling attach path on the GPU (megakernel/README.md, "Compiled
//! monitors"): a verified program set translated to CUDA C
//! ([`super::translate`]), compiled by NVRTC to relocatable PTX, and linked by
//! the driver (`cuLinkCreate` / `cuLinkAddData` / `cuLinkComplete`) beside the
//! megakernel's own relocatable cubin, which was compiled once
//! (`kernels::megakernel::compile_cubin_with_compiled_hooks`) and is never
//! compiled again: the driver compiles only the program's PTX and resolves
//! the hooks' three calls. The linked image is loaded as a module whose
//! `mk_persistent` the next launch runs (the swap happens at a launch
//! boundary, the persistent kernel's step boundary here).

use super::attach::Attachment;
use super::translate::{translate, Translation};
use cudarc::driver::sys as d;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use serde::Serialize;
use std::ffi::{c_void, CString};
use std::sync::Arc;
use std::time::Instant;

/// What attaching a compiled program set took, per stage (ns).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct CompileTimes {
    /// eBPF → CUDA C.
    pub translate_ns: u64,
    /// NVRTC: CUDA C → relocatable PTX.
    pub nvrtc_ns: u64,
    /// The driver: the program's PTX compiled and linked with the megakernel's cubin.
    pub link_ns: u64,
    /// The linked image loaded as a module, its kernel looked up.
    pub load_ns: u64,
}

/// A program set linked into the megakernel.
#[derive(Debug, Clone)]
pub struct Linked {
    pub func: CudaFunction,
    _module: Arc<CudaModule>,
    pub times: CompileTimes,
    /// Bytes of CUDA C and of PTX of the translation.
    pub c_bytes: usize,
    pub ptx_bytes: usize,
}

fn driver(what: &str, r: d::CUresult, log: &[u8]) -> Result<(), String> {
    if r == d::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    Err(format!(
        "{what}: {r:?}; {}",
        String::from_utf8_lossy(&log[..end]).trim()
    ))
}

/// Links `cubin` (relocatable, the megakernel) with `ptx` (relocatable, the
/// hooks) in `ctx`: the linked cubin image.
fn link(ctx: &Arc<CudaContext>, cubin: &[u8], ptx: &str) -> Result<Vec<u8>, String> {
    ctx.bind_to_thread()
        .map_err(|e| format!("binding the context: {e:?}"))?;
    let ptx = CString::new(ptx).map_err(|_| "a NUL byte in the PTX".to_string())?;
    let mut log = vec![0u8; 16 * 1024];
    let mut opts = [
        d::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        d::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut vals = [log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
    let mut state: d::CUlinkState = std::ptr::null_mut();
    // SAFETY: the option arrays and the log outlive the link state, which is
    // destroyed below on every path; the inputs are valid for their lengths.
    unsafe {
        let r = d::cuLinkCreate_v2(
            opts.len() as u32,
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
            &mut state,
        );
        driver("cuLinkCreate", r, &log)?;
        let result = (|| -> Result<Vec<u8>, String> {
            let r = d::cuLinkAddData_v2(
                state,
                d::CUjitInputType::CU_JIT_INPUT_CUBIN,
                cubin.as_ptr() as *mut c_void,
                cubin.len(),
                c"megakernel_bpf_compiled.cubin".as_ptr(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            driver("cuLinkAddData (the megakernel's cubin)", r, &log)?;
            let r = d::cuLinkAddData_v2(
                state,
                d::CUjitInputType::CU_JIT_INPUT_PTX,
                ptx.as_ptr() as *mut c_void,
                ptx.as_bytes_with_nul().len(),
                c"mk_bpf_hooks.ptx".as_ptr(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            driver("cuLinkAddData (the hooks' PTX)", r, &log)?;
            let mut out: *mut c_void = std::ptr::null_mut();
            let mut size = 0usize;
            let r = d::cuLinkComplete(state, &mut out, &mut size);
            driver("cuLinkComplete", r, &log)?;
            Ok(std::slice::from_raw_parts(out as *const u8, size).to_vec())
        })();
        let _ = d::cuLinkDestroy(state);
        result
    }
}

/// The megakernel with compiled hooks on one GPU: its relocatable cubin.
pub struct CompiledKernel {
    ctx: Arc<CudaContext>,
    cubin: Vec<u8>,
    /// `sm_XY` of the device.
    pub arch: String,
    /// NVRTC compile of the megakernel with compiled hooks (once per process), ns.
    pub compile_ns: u64,
}

impl CompiledKernel {
    /// Compiles the megakernel with compiled hooks for `ctx`'s device.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<CompiledKernel, String> {
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| format!("compute capability: {e:?}"))?;
        let arch = format!("sm_{major}{minor}");
        let t = Instant::now();
        let cubin = kernels::megakernel::compile_cubin_with_compiled_hooks(&arch)
            .map_err(|e| e.to_string())?;
        Ok(CompiledKernel {
            ctx: ctx.clone(),
            cubin,
            arch,
            compile_ns: t.elapsed().as_nanos() as u64,
        })
    }

    /// Translates, compiles and links `att`'s verified set; each stage timed.
    pub fn attach(&self, att: &Attachment) -> Result<Linked, String> {
        let mut times = CompileTimes::default();
        let t = Instant::now();
        let tr: Translation = translate(att).map_err(|e| e.to_string())?;
        times.translate_ns = t.elapsed().as_nanos() as u64;
        let t = Instant::now();
        let compute = self.arch.replace("sm_", "compute_");
        let ptx = kernels::megakernel::compile_hook_ptx(&tr.source, Some(&compute))
            .map_err(|e| e.to_string())?;
        times.nvrtc_ns = t.elapsed().as_nanos() as u64;
        let t = Instant::now();
        let image = link(&self.ctx, &self.cubin, &ptx)?;
        times.link_ns = t.elapsed().as_nanos() as u64;
        let t = Instant::now();
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(image))
            .map_err(|e| format!("loading the linked megakernel: {e:?}"))?;
        let func = module
            .load_function(kernels::megakernel::ENTRY)
            .map_err(|e| format!("looking up mk_persistent (compiled hooks): {e:?}"))?;
        times.load_ns = t.elapsed().as_nanos() as u64;
        Ok(Linked {
            func,
            _module: module,
            times,
            c_bytes: tr.source.len(),
            ptx_bytes: ptx.len(),
        })
    }
}
