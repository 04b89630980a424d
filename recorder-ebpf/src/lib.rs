//! causalbench eBPF host recorder (docs/records.md "eBPF host records").
//!
//! Records, for one target process, with CLOCK_MONOTONIC timestamps
//! (`bpf_ktime_get_ns`, the clock CUPTI is pointed at):
//! - `Record::Uprobe`: entry/return of configured functions of one library
//!   (the CUDA driver entry points in the libcuda the process maps, by default
//!   [`RecorderConfig::cuda`]), with thread id, the handle argument and the
//!   symbolized user stack (innermost first, the call-site frame included);
//! - `Record::Sched`: switch-out/switch-in intervals of the target's threads
//!   (`tp_btf/sched_switch`) with the reason: `preempted` (still runnable),
//!   `traced` (stopped by ptrace / job control), else `blocked`;
//! - `Record::PageFault`: user page faults (`tp_btf/page_fault_user`) with
//!   address, and — when `fexit/handle_mm_fault` attaches — duration and
//!   major/minor (see [`HostTrace::fault_timing`]).
//!
//! ```no_run
//! use ebpf_recorder::{Recorder, RecorderConfig};
//! let rec = match Recorder::start(RecorderConfig::cuda(std::process::id())) {
//!     Ok(r) => Some(r),
//!     Err(e) => { eprintln!("continuing without host records: {e}"); None }
//! };
//! // ... run the workload ...
//! if let Some(r) = rec {
//!     let trace = r.stop();
//!     println!("{} records, {} lost", trace.records.len(), trace.ringbuffer_dropped);
//! }
//! ```

#![cfg_attr(ebpf_recorder_no_bpf, allow(dead_code, unused_imports))]

pub mod attribution;
mod config;
pub mod cost;
mod error;
pub mod perf_map;
mod raw;
#[cfg(not(ebpf_recorder_no_bpf))]
mod session;
mod stacks;
pub use stacks::StackBook;
mod symbols;
mod unwind_tables;
mod user_unwind;

#[cfg(not(ebpf_recorder_no_bpf))]
#[allow(
    clippy::all,
    unused_imports,
    dead_code,
    non_camel_case_types,
    non_snake_case
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/recorder.skel.rs"));
}

pub use config::{
    cuda_handle_args, glob_match, HandleArg, RecorderConfig, StackCapture, CUDA_FUNCTIONS,
};
pub use error::RecorderError;
pub use symbols::{current_exe, libcuda_in_maps, mapped_object, ProbeTarget, Resolved};

use ground_truth::trace::Record;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Everything one recording produced.
#[derive(Debug, Clone, Default)]
pub struct HostTrace {
    /// `uprobe`, `sched` and `page_fault` records ordered by start time, with
    /// placeholder rids 0.. (the bundle writer re-assigns them).
    pub records: Vec<Record>,
    /// Ring-buffer reservations that failed in BPF (records lost).
    pub ringbuffer_dropped: u64,
    /// Uprobe hits whose user stack could not be stored (stack map full or a
    /// hash collision); their records still carry the call-site frame.
    pub stack_errors: u64,
    /// User-stack walks done in BPF, and uprobe hits that reused the stack of
    /// their call site instead ([`StackCapture::PerSite`]).
    pub stack_walks: u64,
    pub stacks_reused: u64,
    /// Stacks copied at uprobe entries (`RecorderConfig::stack_copy_bytes`),
    /// copies that found no room in the ring buffer (their records keep the
    /// frame-pointer stack), and uprobe records whose stack is the copy's
    /// DWARF unwinding (longer than the frame-pointer walk).
    pub stack_copies: u64,
    pub stack_copies_dropped: u64,
    pub stacks_unwound: u64,
    /// Page faults recorded without a duration (no final `handle_mm_fault`
    /// return seen, or fault timing unavailable).
    pub faults_untimed: u64,
    /// True when page-fault `duration` (tracepoint → final `handle_mm_fault`
    /// return) and `major` (VM_FAULT_MAJOR, or a retried fault — the kernel's
    /// own maj_flt rule) came from `fexit/handle_mm_fault`. False: duration 0 and
    /// `major` from the thread's `maj_flt` counter read at its next fault or
    /// switch-out.
    pub fault_timing: bool,
    /// The probed library (None without uprobes).
    pub library: Option<PathBuf>,
    /// The functions that got uprobes.
    pub probes: Vec<ProbeTarget>,
    /// Non-fatal problems (patterns that matched nothing, unsymbolizable stacks, ...).
    pub warnings: Vec<String>,
}

/// What the background thread reports once every program is attached.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started {
    pub fault_timing: bool,
}

/// A running recording. Start it before the workload, [`Recorder::stop`] after.
pub struct Recorder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<HostTrace>>,
    fault_timing: bool,
    library: Option<PathBuf>,
    probes: Vec<ProbeTarget>,
    warnings: Vec<String>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("fault_timing", &self.fault_timing)
            .field("library", &self.library)
            .field("probes", &self.probes.len())
            .finish()
    }
}

const BTF_PATH: &str = "/sys/kernel/btf/vmlinux";
const TRACEFS: &str = "/sys/kernel/tracing";

impl Recorder {
    /// Checks the environment, resolves the functions to probe, loads and
    /// attaches every BPF program, and starts the polling thread. Returns once
    /// recording is live, so the workload can start right after.
    pub fn start(cfg: RecorderConfig) -> Result<Recorder, RecorderError> {
        #[cfg(ebpf_recorder_no_bpf)]
        {
            let _ = cfg;
            Err(RecorderError::NotBuilt)
        }
        #[cfg(not(ebpf_recorder_no_bpf))]
        {
            cfg.stack_copy_size().map_err(RecorderError::Config)?;
            let mut warnings = preflight(cfg.pid)?;
            let resolved = symbols::resolve(&cfg)?;
            let library = resolved.library.clone();
            let probes = resolved.targets.clone();
            let stop = Arc::new(AtomicBool::new(false));
            let (tx, rx) = std::sync::mpsc::channel();
            let stop2 = stop.clone();
            let thread = std::thread::Builder::new()
                .name("ebpf-recorder".into())
                .spawn(move || session::run(cfg, resolved, tx, stop2))
                .map_err(|e| RecorderError::Thread(e.to_string()))?;
            match rx.recv_timeout(Duration::from_secs(120)) {
                Ok(Ok(started)) => {
                    warnings.retain(|w| !w.is_empty());
                    Ok(Recorder {
                        stop,
                        thread: Some(thread),
                        fault_timing: started.fault_timing,
                        library,
                        probes,
                        warnings,
                    })
                }
                Ok(Err(e)) => {
                    let _ = thread.join();
                    Err(e)
                }
                Err(e) => {
                    stop.store(true, Ordering::Release);
                    let detail = match thread.join() {
                        Err(_) => "the recorder thread panicked while starting".to_string(),
                        Ok(_) => format!("no start-up report from the recorder thread ({e})"),
                    };
                    Err(RecorderError::Thread(detail))
                }
            }
        }
    }

    /// Whether page faults get durations and major flags (see [`HostTrace::fault_timing`]).
    pub fn fault_timing(&self) -> bool {
        self.fault_timing
    }

    /// The functions that got uprobes.
    pub fn probes(&self) -> &[ProbeTarget] {
        &self.probes
    }

    /// The probed library.
    pub fn library(&self) -> Option<&Path> {
        self.library.as_deref()
    }

    /// Detaches every program, drains the ring buffer, symbolizes the stacks.
    /// Never fails: problems are reported in `HostTrace::warnings`.
    pub fn stop(mut self) -> HostTrace {
        self.finish()
    }

    fn finish(&mut self) -> HostTrace {
        self.stop.store(true, Ordering::Release);
        let mut trace = match self.thread.take().map(|t| t.join()) {
            Some(Ok(t)) => t,
            Some(Err(_)) => HostTrace {
                warnings: vec!["the recorder thread panicked; host records lost".into()],
                ..HostTrace::default()
            },
            None => HostTrace::default(),
        };
        let mut w = std::mem::take(&mut self.warnings);
        w.append(&mut trace.warnings);
        trace.warnings = w;
        trace
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.finish();
        }
    }
}

/// Resolves the library and the functions of a configuration without loading
/// anything (no privileges needed): what [`Recorder::start`] would probe.
pub fn resolve_probes(cfg: &RecorderConfig) -> Result<Resolved, RecorderError> {
    symbols::resolve(cfg)
}

/// Checks privileges, BTF and tracefs, and that the target exists. Returns
/// warnings (e.g. "mounted tracefs").
pub fn preflight(pid: u32) -> Result<Vec<String>, RecorderError> {
    let mut warnings = Vec::new();
    if !Path::new(&format!("/proc/{pid}")).is_dir() {
        return Err(RecorderError::NoProcess {
            pid,
            detail: format!("/proc/{pid} does not exist"),
        });
    }
    check_privileges()?;
    if !Path::new(BTF_PATH).exists() {
        return Err(RecorderError::NoBtf {
            path: BTF_PATH.into(),
        });
    }
    if let Some(w) = ensure_tracefs()? {
        warnings.push(w);
    }
    Ok(warnings)
}

/// Effective capabilities of this process (CapEff of /proc/self/status).
fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

fn check_privileges() -> Result<(), RecorderError> {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let caps = effective_caps().unwrap_or(0);
    let has = |bit: u32| caps & (1u64 << bit) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    Err(RecorderError::NotPrivileged {
        detail: format!(
            "this process has euid {euid} and effective capabilities 0x{caps:x} \
             (run as root, or grant cap_bpf,cap_perfmon+ep)"
        ),
    })
}

/// tracefs at /sys/kernel/tracing, mounted here if absent. Only an error when
/// it cannot be had *and* the kernel lacks the uprobe PMU (libbpf then creates
/// uprobes through tracefs); tp_btf and fexit programs do not need it.
fn ensure_tracefs() -> Result<Option<String>, RecorderError> {
    let mounted = |root: &str| Path::new(root).join("events").is_dir();
    if mounted(TRACEFS) || mounted("/sys/kernel/debug/tracing") {
        return Ok(None);
    }
    let detail = match mount_tracefs() {
        Ok(()) if mounted(TRACEFS) => return Ok(Some(format!("mounted tracefs at {TRACEFS}"))),
        Ok(()) => "mount succeeded but events/ is missing".to_string(),
        Err(e) => e,
    };
    if Path::new("/sys/bus/event_source/devices/uprobe/type").exists() {
        Ok(Some(format!(
            "tracefs not available ({detail}); not needed with the uprobe PMU"
        )))
    } else {
        Err(RecorderError::NoTracefs { detail })
    }
}

fn mount_tracefs() -> Result<(), String> {
    use std::ffi::CString;
    let src = CString::new("tracefs").unwrap();
    let target = CString::new(TRACEFS).unwrap();
    // SAFETY: valid NUL-terminated strings; null data is allowed for tracefs.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            src.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "mount -t tracefs: {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// Orders records by start time (ties: thread, then kind) and numbers them 0...
pub(crate) fn finish_records(mut records: Vec<Record>) -> Vec<Record> {
    records.sort_by_key(|r| (r.interval().0, r.tid().unwrap_or(0), r.kind_name()));
    for (i, r) in records.iter_mut().enumerate() {
        *r.rid_mut() = i as u64;
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rids_follow_start_order() {
        let recs = vec![
            Record::PageFault {
                rid: 9,
                tid: 1,
                ts: 50,
                duration: 0,
                address: 0x1000,
                major: false,
            },
            Record::Sched {
                rid: 9,
                tid: 1,
                cpu: 0,
                switch_out: 10,
                switch_in: 20,
                reason: ground_truth::trace::SwitchReason::Blocked,
            },
        ];
        let out = finish_records(recs);
        assert_eq!(out[0].kind_name(), "sched");
        assert_eq!(out[0].rid(), 0);
        assert_eq!(out[1].rid(), 1);
    }

    #[test]
    fn missing_process_is_reported() {
        let e = preflight(u32::MAX - 1).unwrap_err();
        assert!(matches!(e, RecorderError::NoProcess { .. }), "{e}");
    }
}
