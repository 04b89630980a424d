//! causalbench device kernels.
//!
//! The CUDA C source (`src/cuda/causalbench.cu`) is embedded in the binary and
//! compiled to PTX at run time with NVRTC, so no `nvcc` is needed anywhere: not
//! to build the workspace, and not on the GPU host. NVRTC is loaded
//! dynamically (cudarc's `dynamic-loading`); when it cannot be found every
//! entry point returns [`KernelError::NvrtcUnavailable`] instead of panicking.
//!
//! Kernels (entry points, see [`Kernel`]):
//! - `cb_spin(op_id, log, slot, duration_ns)`: every block spins on
//!   `%globaltimer` for `duration_ns` from its own start;
//! - `cb_memory(op_id, log, slot, src, dst, n_vec, iterations)`: grid-stride
//!   copy of `n_vec` 16-byte elements, `iterations` passes;
//! - `cb_compute(op_id, log, slot, out, iterations)`: 8 FMA chains per thread;
//! - `cb_occupancy_hog(op_id, log, slot, duration_ns)`: launched with one
//!   block per SM to hold and the maximum dynamic shared memory, holds `grid`
//!   SMs for `duration_ns` (see [`gpu::Kernels::launch_occupancy_hog`]);
//! - `cb_empty(op_id, log, slot)`: launch-overhead probe.
//!
//! Every kernel writes one [`LogEntry`] at `log[slot]` (null `log` disables it).

pub mod gpu;
pub mod megakernel;
mod nvrtc;
pub mod ptx_cache;

pub use nvrtc::{ensure_nvrtc, nvrtc_search_dirs, NVRTC_DIR_ENV};

use ground_truth::scenario::KernelKind;

/// The CUDA C source of every kernel.
const SOURCE: &str = include_str!("cuda/causalbench.cu");

/// Default virtual architecture: Hopper (H100/H200). PTX for `compute_90`
/// is JIT-compiled by the driver for sm_90 and later.
pub const DEFAULT_ARCH: &str = "compute_90";

/// Errors of this crate. None of them panics; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error(
        "NVRTC (libnvrtc.so.13) cannot be loaded: {detail}. Run `bash kernels/setup-nvrtc.sh` \
         and add the directory it prints to LD_LIBRARY_PATH (or set {env} to it); on a CUDA host \
         use LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib",
        env = NVRTC_DIR_ENV
    )]
    NvrtcUnavailable { detail: String },
    #[error("NVRTC failed to compile the causalbench kernels for {arch}: {detail}")]
    Compile { arch: String, detail: String },
    #[error("invalid GPU architecture {0:?}: expected e.g. \"compute_90\" or \"sm_90\"")]
    BadArch(String),
    #[error("no NVIDIA GPU: {0}")]
    NoGpu(String),
    #[error("CUDA driver call failed while {context}: {source}")]
    Driver {
        context: String,
        #[source]
        source: cudarc::driver::DriverError,
    },
    #[error("invalid launch parameters: {0}")]
    BadLaunch(String),
}

/// Which kernel to run. `Spin`, `MemoryBound`, `ComputeBound` and `Empty`
/// correspond to [`ground_truth::scenario::KernelKind`]; `OccupancyHog` is
/// the injector's co-running kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    Spin,
    MemoryBound,
    ComputeBound,
    OccupancyHog,
    Empty,
}

impl Kernel {
    pub const ALL: [Kernel; 5] = [
        Kernel::Spin,
        Kernel::MemoryBound,
        Kernel::ComputeBound,
        Kernel::OccupancyHog,
        Kernel::Empty,
    ];

    /// The `extern "C"` entry point name in the PTX.
    pub fn entry_point(self) -> &'static str {
        match self {
            Kernel::Spin => "cb_spin",
            Kernel::MemoryBound => "cb_memory",
            Kernel::ComputeBound => "cb_compute",
            Kernel::OccupancyHog => "cb_occupancy_hog",
            Kernel::Empty => "cb_empty",
        }
    }

    /// The scenario kernel kind this kernel implements (`None` for the hog,
    /// which only injectors launch).
    pub fn scenario_kind(self) -> Option<KernelKind> {
        match self {
            Kernel::Spin => Some(KernelKind::Spin),
            Kernel::MemoryBound => Some(KernelKind::MemoryBound),
            Kernel::ComputeBound => Some(KernelKind::ComputeBound),
            Kernel::Empty => Some(KernelKind::Empty),
            Kernel::OccupancyHog => None,
        }
    }
}

impl From<KernelKind> for Kernel {
    fn from(k: KernelKind) -> Self {
        match k {
            KernelKind::Spin => Kernel::Spin,
            KernelKind::MemoryBound => Kernel::MemoryBound,
            KernelKind::ComputeBound => Kernel::ComputeBound,
            KernelKind::Empty => Kernel::Empty,
        }
    }
}

/// Entry point name for a scenario kernel kind.
pub fn entry_point(kind: KernelKind) -> &'static str {
    Kernel::from(kind).entry_point()
}

/// One device log entry, mirroring `struct cb_log_entry` in the CUDA source
/// (40 bytes, 8-byte aligned).
///
/// `op_id`, `start_ns`, `end_ns` and `smid` are written by block 0 thread 0
/// (plain stores); `blocks` and `last_end_ns` are accumulated atomically by
/// every block, so zero the log before use. Times are `%globaltimer`
/// nanoseconds (not CLOCK_MONOTONIC: calibrate an offset).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogEntry {
    pub op_id: u64,
    /// Block 0's first `%globaltimer` reading.
    pub start_ns: u64,
    /// Block 0's last `%globaltimer` reading.
    pub end_ns: u64,
    /// SM block 0 ran on (`%smid`).
    pub smid: u32,
    /// Number of blocks that finished (0 means the kernel has not run, or the
    /// slot was not zeroed).
    pub blocks: u32,
    /// Latest end time over all blocks.
    pub last_end_ns: u64,
}

impl LogEntry {
    pub const SIZE: usize = 40;

    /// Block 0's duration in nanoseconds.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// Whether block 0 wrote this entry (`op_id` matches and times are set).
    pub fn is_written_for(&self, op_id: u64) -> bool {
        self.op_id == op_id && self.start_ns != 0 && self.end_ns >= self.start_ns
    }
}

// SAFETY: plain-old-data with the same layout as the device struct; all-zero
// bits are a valid value.
unsafe impl cudarc::driver::DeviceRepr for LogEntry {}
unsafe impl cudarc::driver::ValidAsZeroBits for LogEntry {}

/// The CUDA C source of every kernel.
pub fn source() -> &'static str {
    SOURCE
}

/// NVRTC options used by [`compile_ptx`] for `arch`.
pub fn compile_options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "-std=c++17".to_string(),
        "--fmad=true".to_string(),
        "-lineinfo".to_string(),
    ]
}

fn check_arch(arch: &str) -> Result<(), KernelError> {
    let digits = arch
        .strip_prefix("compute_")
        .or_else(|| arch.strip_prefix("sm_"))
        .ok_or_else(|| KernelError::BadArch(arch.to_string()))?;
    let digits = digits.trim_end_matches(['a', 'f']);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(KernelError::BadArch(arch.to_string()));
    }
    Ok(())
}

/// Compile every kernel to PTX with NVRTC for `arch` (default
/// [`DEFAULT_ARCH`]). Returns the PTX text.
pub fn compile_ptx(arch: Option<&str>) -> Result<String, KernelError> {
    let arch = arch.unwrap_or(DEFAULT_ARCH);
    check_arch(arch)?;
    ptx_cache::compile(SOURCE, "causalbench.cu", compile_options(arch), arch)
}

fn describe_compile_error(e: &cudarc::nvrtc::CompileError) -> String {
    match e {
        cudarc::nvrtc::CompileError::CompileError {
            nvrtc,
            options,
            log,
        } => format!(
            "{nvrtc:?} with options {options:?}; log:\n{}",
            log.to_string_lossy()
        ),
        other => format!("{other:?}"),
    }
}

pub(crate) fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        "panic with a non-string payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_entry_layout_matches_cuda() {
        assert_eq!(std::mem::size_of::<LogEntry>(), LogEntry::SIZE);
        assert_eq!(std::mem::align_of::<LogEntry>(), 8);
        assert_eq!(std::mem::offset_of!(LogEntry, op_id), 0);
        assert_eq!(std::mem::offset_of!(LogEntry, start_ns), 8);
        assert_eq!(std::mem::offset_of!(LogEntry, end_ns), 16);
        assert_eq!(std::mem::offset_of!(LogEntry, smid), 24);
        assert_eq!(std::mem::offset_of!(LogEntry, blocks), 28);
        assert_eq!(std::mem::offset_of!(LogEntry, last_end_ns), 32);
        assert!(source().contains("sizeof(cb_log_entry) == 40"));
    }

    #[test]
    fn every_entry_point_is_in_the_source() {
        for k in Kernel::ALL {
            let decl = format!("__global__ void {}(", k.entry_point());
            assert!(source().contains(&decl), "{decl} missing from the source");
            assert!(source().contains(&format!("extern \"C\" {decl}")));
        }
    }

    #[test]
    fn scenario_kinds_map_to_kernels() {
        for kind in [
            KernelKind::Spin,
            KernelKind::MemoryBound,
            KernelKind::ComputeBound,
            KernelKind::Empty,
        ] {
            let k = Kernel::from(kind);
            assert_eq!(k.scenario_kind(), Some(kind));
            assert_eq!(entry_point(kind), k.entry_point());
        }
        assert_eq!(Kernel::OccupancyHog.scenario_kind(), None);
    }

    #[test]
    fn arch_is_validated_before_loading_nvrtc() {
        assert!(matches!(
            compile_ptx(Some("hopper")),
            Err(KernelError::BadArch(_))
        ));
        assert!(matches!(
            compile_ptx(Some("compute_")),
            Err(KernelError::BadArch(_))
        ));
        assert!(check_arch("compute_90").is_ok());
        assert!(check_arch("sm_90a").is_ok());
        assert!(check_arch("compute_100f").is_ok());
    }
}
