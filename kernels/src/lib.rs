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

/// A CUDA graph node's log ring, mirroring `CB_RING` in the CUDA source: a
/// graph is captured once with fixed kernel arguments but runs once per
/// replay, so the slot argument of its nodes names a ring of entries. Entry
/// `header` counts the finished replays (its `blocks` field) and replay `r`
/// writes entry `header + 1 + r`; replays past `capacity` are not logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRing {
    /// Index of the header entry; the ring's entries follow it.
    pub header: u32,
    /// Replays the ring has an entry for.
    pub capacity: u32,
}

impl LogRing {
    const FLAG: u32 = 0x8000_0000;
    const CAPACITY_SHIFT: u32 = 20;
    /// The most replays one ring logs (11 bits of the slot argument).
    pub const MAX_CAPACITY: u32 = 0x7ff;
    /// Headers must lie below this index (20 bits of the slot argument).
    pub const HEADER_LIMIT: u32 = 1 << 20;

    /// Log entries the ring occupies: its header and one per replay.
    pub fn entries(self) -> u32 {
        self.capacity + 1
    }

    /// The kernel's `slot` argument naming this ring; `None` where the ring
    /// does not fit the argument's fields.
    pub fn slot_arg(self) -> Option<u32> {
        (self.header < Self::HEADER_LIMIT && (1..=Self::MAX_CAPACITY).contains(&self.capacity))
            .then_some(Self::FLAG | (self.capacity << Self::CAPACITY_SHIFT) | self.header)
    }

    /// The ring a kernel's `slot` argument names; `None` for a single entry.
    pub fn from_slot_arg(arg: u32) -> Option<LogRing> {
        (arg & Self::FLAG != 0).then_some(LogRing {
            header: arg & (Self::HEADER_LIMIT - 1),
            capacity: (arg >> Self::CAPACITY_SHIFT) & Self::MAX_CAPACITY,
        })
    }

    /// The entry replay `replay` (0-based) wrote, if the ring has one for it.
    pub fn entry(self, replay: usize) -> Option<u32> {
        (replay < self.capacity as usize).then(|| self.header + 1 + replay as u32)
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
    fn log_ring_round_trips_through_the_slot_argument_the_cuda_source_decodes() {
        let ring = LogRing {
            header: 12_345,
            capacity: 7,
        };
        let arg = ring.slot_arg().unwrap();
        assert_eq!(LogRing::from_slot_arg(arg), Some(ring));
        assert_eq!(LogRing::from_slot_arg(12_345), None);
        assert_eq!(ring.entry(0), Some(12_346));
        assert_eq!(ring.entry(6), Some(12_352));
        assert_eq!(ring.entry(7), None);
        assert_eq!(ring.entries(), 8);
        // Fields that do not fit are refused, not truncated.
        let too_big = LogRing {
            header: LogRing::HEADER_LIMIT,
            capacity: 1,
        };
        assert_eq!(too_big.slot_arg(), None);
        let too_many = LogRing {
            header: 0,
            capacity: LogRing::MAX_CAPACITY + 1,
        };
        assert_eq!(too_many.slot_arg(), None);
        // The CUDA source decodes the same fields.
        let src = source();
        assert!(src.contains("#define CB_RING 0x80000000u"));
        assert!(src.contains("#define CB_RING_CAP_SHIFT 20"));
        assert!(src.contains("#define CB_RING_CAP_MASK 0x7ffu"));
        assert!(src.contains("#define CB_RING_HEADER_MASK 0xfffffu"));
    }

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
