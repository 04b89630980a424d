//! The persistent megakernel (`src/cuda/megakernel.cu`): one block per worker
//! runs a device-side task graph with semantic hooks (see the source's header
//! comment and `megakernel/README.md`). This module holds the source, its NVRTC
//! compile, and `#[repr(C)]` mirrors of every struct the host and the kernel
//! share; the layouts are checked against the `static_assert`s in the source.

use crate::{check_arch, KernelError};

/// The CUDA C source of the megakernel.
const SOURCE: &str = include_str!("cuda/megakernel.cu");

/// The interpreter of verified hook programs, compiled in front of [`SOURCE`]
/// by [`compile_ptx_with_hooks`].
const BPF_SOURCE: &str = include_str!("cuda/mk_bpf.cu");

/// Entry point name.
pub const ENTRY: &str = "mk_persistent";

/// Version of the hook / monitor-configuration ABI (`MK_ABI_VERSION`).
pub const ABI_VERSION: u32 = 1;
/// `MK_NONE`: no event / no task.
pub const NONE: u32 = u32::MAX;
/// Task classes the device aggregates separately (`MK_MAX_CLASSES`).
pub const MAX_CLASSES: usize = 8;
/// Phases of a task (`MK_PHASES`): notify, queue, wait, execution.
pub const PHASES: usize = 4;
/// Histogram buckets per phase (`MK_BUCKETS`).
pub const BUCKETS: usize = 24;

/// Monitor flags.
pub const MON_LOG: u32 = 1;
pub const MON_AGGREGATE: u32 = 2;
/// Error bits of [`State::error`].
pub const ERR_ABI: u32 = 1;
pub const ERR_DEADLINE: u32 = 2;
pub const ERR_QUEUE: u32 = 4;
/// Task bodies.
pub const BODY_SPIN: u32 = 0;
pub const BODY_MEMORY: u32 = 1;

/// The megakernel's CUDA C source.
pub fn source() -> &'static str {
    SOURCE
}

/// Compile the megakernel to PTX with NVRTC for `arch` (default `compute_90`).
pub fn compile_ptx(arch: Option<&str>) -> Result<String, KernelError> {
    let arch = arch.unwrap_or(crate::DEFAULT_ARCH);
    check_arch(arch)?;
    crate::ptx_cache::compile(SOURCE, "megakernel.cu", crate::compile_options(arch), arch)
}

/// The megakernel with the eBPF hook interpreter compiled in (`MK_BPF_HOOKS`):
/// the program slot's device address goes in the monitor configuration's
/// `reserved[0..2]` (low word first; 0: no programs).
pub fn compile_ptx_with_hooks(arch: Option<&str>) -> Result<String, KernelError> {
    let arch = arch.unwrap_or(crate::DEFAULT_ARCH);
    check_arch(arch)?;
    crate::ptx_cache::compile(
        &source_with_hooks(),
        "megakernel_bpf.cu",
        crate::compile_options(arch),
        arch,
    )
}

/// The source [`compile_ptx_with_hooks`] compiles.
pub fn source_with_hooks() -> String {
    format!("#define MK_BPF_HOOKS 1\n{BPF_SOURCE}\n{SOURCE}")
}

/// The source [`compile_cubin_with_compiled_hooks`] compiles: the hooks call
/// `mk_bpf_hook_task_begin` / `_task_end` / `_dep_wait`, left undefined, which
/// the translated program set (megakernel/src/bpf/translate.rs) defines.
pub fn source_with_compiled_hooks() -> String {
    format!("#define MK_BPF_HOOKS 1\n#define MK_BPF_COMPILED 1\n{BPF_SOURCE}\n{SOURCE}")
}

/// NVRTC options of relocatable device code for `arch` (`compute_XY` gives
/// PTX, `sm_XY` a cubin).
fn relocatable_options(arch: &str) -> Vec<String> {
    let mut o = crate::compile_options(arch);
    o.push("--relocatable-device-code=true".to_string());
    o
}

/// An NVRTC compile of `source` with `options`: its PTX and, when `cubin`,
/// its cubin (NVRTC's own SASS for a real `sm_XY` architecture).
fn nvrtc(
    source: &str,
    name: &str,
    options: &[String],
    arch: &str,
    cubin: bool,
) -> Result<(String, Vec<u8>), KernelError> {
    use cudarc::nvrtc::{result, sys};
    crate::ensure_nvrtc()?;
    let fail = |detail: String| KernelError::Compile {
        arch: arch.to_string(),
        detail,
    };
    let src =
        std::ffi::CString::new(source).map_err(|_| fail("a NUL byte in the source".into()))?;
    let cname = std::ffi::CString::new(name).map_err(|_| fail("a NUL byte in the name".into()))?;
    // cudarc panics when a symbol is missing from the loaded library; never
    // let that cross our API.
    let run = || -> Result<(String, Vec<u8>), KernelError> {
        let prog =
            result::create_program(&src, Some(&cname)).map_err(|e| fail(format!("{e:?}")))?;
        // SAFETY: `prog` was just created and is destroyed once, below.
        let out = unsafe {
            match result::compile_program(prog, options) {
                Err(e) => {
                    let log = result::get_program_log(prog)
                        .map(|l| {
                            std::ffi::CStr::from_ptr(l.as_ptr())
                                .to_string_lossy()
                                .into_owned()
                        })
                        .unwrap_or_default();
                    Err(fail(format!("{e:?} with options {options:?}; log:\n{log}")))
                }
                Ok(()) => {
                    let ptx = result::get_ptx(prog).map_err(|e| fail(format!("{e:?}")))?;
                    let ptx = std::ffi::CStr::from_ptr(ptx.as_ptr())
                        .to_string_lossy()
                        .into_owned();
                    let mut bin = Vec::new();
                    if cubin {
                        let mut size = 0usize;
                        let r = sys::nvrtcGetCUBINSize(prog, &mut size);
                        if r != sys::nvrtcResult::NVRTC_SUCCESS {
                            return Err(fail(format!("nvrtcGetCUBINSize: {r:?}")));
                        }
                        bin = vec![0u8; size];
                        let r = sys::nvrtcGetCUBIN(prog, bin.as_mut_ptr().cast());
                        if r != sys::nvrtcResult::NVRTC_SUCCESS {
                            return Err(fail(format!("nvrtcGetCUBIN: {r:?}")));
                        }
                    }
                    Ok((ptx, bin))
                }
            }
        };
        // SAFETY: created above, not destroyed before.
        let _ = unsafe { result::destroy_program(prog) };
        out
    };
    std::panic::catch_unwind(run).map_err(|p| KernelError::NvrtcUnavailable {
        detail: crate::panic_text(&p),
    })?
}

/// The megakernel whose hooks call compiled programs, as relocatable device
/// code for the real architecture `sm` (e.g. `sm_90`): a cubin that the
/// driver links with a translated program set at attach time without
/// compiling the megakernel again (megakernel/README.md, "Compiled monitors").
pub fn compile_cubin_with_compiled_hooks(sm: &str) -> Result<Vec<u8>, KernelError> {
    check_arch(sm)?;
    if !sm.starts_with("sm_") {
        return Err(KernelError::BadArch(sm.to_string()));
    }
    let (_, cubin) = nvrtc(
        &source_with_compiled_hooks(),
        "megakernel_bpf_compiled.cu",
        &relocatable_options(sm),
        sm,
        true,
    )?;
    Ok(cubin)
}

/// A translated hook program set (CUDA C) compiled by NVRTC to relocatable
/// PTX for `arch` (default `compute_90`), ready for the driver to compile and
/// link beside [`compile_cubin_with_compiled_hooks`]'s cubin. Never cached:
/// this compile is part of the attach time it measures.
pub fn compile_hook_ptx(source: &str, arch: Option<&str>) -> Result<String, KernelError> {
    let arch = arch.unwrap_or(crate::DEFAULT_ARCH);
    check_arch(arch)?;
    // NVVM's optimiser off: the translation is straight-line code that the
    // driver's ptxas optimises when it links it (-O3 by default), and NVVM's
    // passes were most of NVRTC's time on the diagnosis program.
    let options = vec![
        format!("--gpu-architecture={arch}"),
        "--relocatable-device-code=true".to_string(),
        "-Xnvvm".to_string(),
        "-opt=0".to_string(),
    ];
    let (ptx, _) = nvrtc(source, "mk_bpf_hooks.cu", &options, arch, false)?;
    Ok(ptx)
}

/// Layout of `struct mk_bpf_slot` (checked against the source's `static_assert`s).
pub mod bpf_slot {
    /// Instructions one bank holds (`MK_BPF_MAX_INSNS`).
    pub const MAX_INSNS: usize = 1024;
    /// Maps one bank declares (`MK_BPF_MAX_MAPS`).
    pub const MAX_MAPS: usize = 8;
    /// Bytes of one bank's map arena (`MK_BPF_ARENA_BYTES`).
    pub const ARENA_BYTES: usize = 65536;
    /// Hooks a bank has a program slot for (`MK_BPF_HOOK_KINDS`).
    pub const HOOK_KINDS: usize = 3;
    pub const GENERATION: usize = 0;
    /// `placement`: 0 lets a set whose one program is at task end run on
    /// thread 32 beside the next task's body (`mk_bpf_epoch::defers`), 1 runs every
    /// program inline on the scheduling thread.
    pub const PLACEMENT: usize = 4;
    pub const ELIGIBLE: usize = 8;
    pub const OBSERVED: usize = 72;
    pub const DROPPED: usize = 136;
    pub const INSNS: usize = 200;
    pub const BANKS: usize = 208;
    /// `sizeof(mk_bpf_bank)`: n_maps, pad, prog_start[3], prog_len[3], maps[8] (32 bytes each), insns.
    pub const BANK_BYTES: usize = 8480;
    pub const BANK_MAPS: usize = 32;
    pub const BANK_INSNS: usize = 288;
    pub const MAP_DESC_BYTES: usize = 32;
    pub const ARENAS: usize = BANKS + 2 * BANK_BYTES;
    /// Per hook: ns spent in its program's runs (`hook_ns[3]`, after the arenas).
    pub const HOOK_NS: usize = ARENAS + 2 * ARENA_BYTES;
    /// Per hook: of those, ns in the interpreter's dispatch loop (`exec_ns[3]`).
    pub const EXEC_NS: usize = HOOK_NS + 8 * HOOK_KINDS;
    /// `sizeof(mk_bpf_slot)`.
    pub const SLOT_BYTES: usize = EXEC_NS + 8 * HOOK_KINDS;
}

/// `struct mk_task` (48 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Task {
    pub class_id: u32,
    pub worker: u32,
    pub body: u32,
    /// Spin: ns. Memory: passes.
    pub cost: u32,
    pub dep_event: u32,
    pub trigger_event: u32,
    pub wait_event: u32,
    pub hold_ns: u32,
    pub task_gen: u32,
    pub req_gen: u32,
    pub mem_vecs: u32,
    /// Spin this long after the body (class-delay injection).
    pub extra_ns: u32,
}

/// `struct mk_event` (16 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Event {
    pub target: u32,
    pub first_dep: u32,
    pub n_dep: u32,
    pub postpone_ns: u32,
}

/// `struct mk_hook_event` (32 bytes): one hook event in a worker's ring.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HookEvent {
    pub ts: u64,
    pub task: u32,
    pub worker: u32,
    pub aux: u32,
    pub kind: u16,
    pub class_id: u16,
    pub task_gen: u32,
    pub req_gen: u32,
}

/// `struct mk_monitor_config` (64 bytes), read by the kernel at launch.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MonitorConfig {
    pub version: u32,
    pub flags: u32,
    pub class_mask: u32,
    pub event_mask: u32,
    pub req_gen_min: u32,
    pub req_gen_max: u32,
    pub sample_period: u32,
    pub sample_seed: u32,
    pub min_span_ns: u64,
    pub ring_capacity: u32,
    pub pressure_threshold: u32,
    pub reserved: [u32; 4],
}

/// `struct mk_aggregates` (3648 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aggregates {
    pub hist: [[[u32; BUCKETS]; PHASES]; MAX_CLASSES],
    pub sum_ns: [[u64; PHASES]; MAX_CLASSES],
    /// `(longest ns << 20) | task id`.
    pub max_key: [[u64; PHASES]; MAX_CLASSES],
    pub tasks: [u64; MAX_CLASSES],
}

impl Default for Aggregates {
    fn default() -> Self {
        Aggregates {
            hist: [[[0; BUCKETS]; PHASES]; MAX_CLASSES],
            sum_ns: [[0; PHASES]; MAX_CLASSES],
            max_key: [[0; PHASES]; MAX_CLASSES],
            tasks: [0; MAX_CLASSES],
        }
    }
}

/// `struct mk_coverage`: per-class eligible / observed / dropped.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Coverage {
    pub eligible: [u64; MAX_CLASSES],
    pub observed: [u64; MAX_CLASSES],
    pub dropped: [u64; MAX_CLASSES],
}

/// `struct mk_state`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct State {
    pub first_start: u64,
    pub last_end: u64,
    pub error: u32,
    pub tasks_done: u32,
    pub pad: [u32; 2],
}

/// `struct mk_params` (216 bytes): sizes and device pointers.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Params {
    pub n_tasks: u32,
    pub n_events: u32,
    pub n_workers: u32,
    pub n_roots: u32,
    pub queue_cap: u32,
    pub ring_alloc: u32,
    pub n_classes: u32,
    pub pad0: u32,
    pub deadline_ns: u64,
    pub tasks: u64,
    pub events: u64,
    pub deps: u64,
    pub roots: u64,
    pub worker_ntasks: u64,
    pub event_count: u64,
    pub event_done: u64,
    pub ready_ts: u64,
    pub queue: u64,
    pub queue_tail: u64,
    pub queue_head: u64,
    pub ring: u64,
    pub ring_count: u64,
    pub coverage: u64,
    pub agg: u64,
    pub worker_class_tasks: u64,
    pub pressure_crossings: u64,
    pub max_depth: u64,
    pub state: u64,
    pub scratch_src: u64,
    pub scratch_dst: u64,
    pub scratch_vecs: u64,
}

macro_rules! device_pod {
    ($($t:ty),*) => {$(
        // SAFETY: plain-old-data with the layout of the device struct; all-zero bits are valid.
        unsafe impl cudarc::driver::DeviceRepr for $t {}
        unsafe impl cudarc::driver::ValidAsZeroBits for $t {}
    )*};
}
device_pod!(
    Task,
    Event,
    HookEvent,
    MonitorConfig,
    Aggregates,
    Coverage,
    State,
    Params
);

/// The sampling hash (`mk_hash`), shared with the simulator and the evaluator
/// through `ground_truth::megakernel::sample_hash`.
pub fn hash(x: u32) -> u32 {
    ground_truth::megakernel::sample_hash(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_the_cuda_source() {
        assert_eq!(size_of::<Task>(), 48);
        assert_eq!(size_of::<Event>(), 16);
        assert_eq!(size_of::<HookEvent>(), 32);
        assert_eq!(offset_of!(HookEvent, kind), 20);
        assert_eq!(offset_of!(HookEvent, task_gen), 24);
        assert_eq!(size_of::<MonitorConfig>(), 64);
        assert_eq!(offset_of!(MonitorConfig, min_span_ns), 32);
        assert_eq!(size_of::<Aggregates>(), 3648);
        assert_eq!(size_of::<Coverage>(), 192);
        assert_eq!(size_of::<State>(), 32);
        assert_eq!(size_of::<Params>(), 216);
        assert_eq!(offset_of!(Params, deadline_ns), 32);
        assert_eq!(offset_of!(Params, scratch_vecs), 208);
        for s in [
            "sizeof(mk_task) == 48",
            "sizeof(mk_event) == 16",
            "sizeof(mk_hook_event) == 32",
            "sizeof(mk_monitor_config) == 64",
            "sizeof(mk_aggregates) == 3648",
            "sizeof(mk_params) == 216",
            "#define MK_ABI_VERSION 1u",
        ] {
            assert!(source().contains(s), "{s} missing from megakernel.cu");
        }
        assert!(source().contains(&format!("extern \"C\" __global__ void {ENTRY}(")));
        for s in [
            "sizeof(mk_bpf_slot) == 148288",
            "sizeof(mk_bpf_bank) == 8480",
            "#define MK_BPF_MAX_INSNS 1024",
            "#define MK_BPF_ARENA_BYTES 65536",
        ] {
            assert!(BPF_SOURCE.contains(s), "{s} missing from mk_bpf.cu");
        }
        assert_eq!(bpf_slot::SLOT_BYTES, 148288);
        assert_eq!(
            bpf_slot::BANK_INSNS + 8 * bpf_slot::MAX_INSNS,
            bpf_slot::BANK_BYTES
        );
    }

    #[test]
    fn hash_matches_known_values() {
        // lowbias32 of 0 is 0; of 1 is a fixed constant.
        assert_eq!(hash(0), 0);
        assert_eq!(hash(1), ground_truth::megakernel::sample_hash(1));
    }
}
