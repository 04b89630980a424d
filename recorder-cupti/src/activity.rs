//! The CUPTI reference recorder: activity buffers, CLOCK_MONOTONIC
//! timestamps, latency (queued/submitted) timestamps, external correlation,
//! dropped-record accounting. Records are copied out of CUPTI's buffers into
//! owned [`Raw`] values as buffers complete; [`Recorder::flush`] forces every
//! buffer out and hands the collected records over.
//!
//! Activity structs are those of CUDA 13.0 (`CUpti_ActivityKernel10`,
//! `Memcpy6`, `Memset4`, `Synchronization2`, `CudaEvent2`, `API`,
//! `ExternalCorrelation`); newer CUPTI versions only append fields, so the
//! prefix read here stays valid. Fields are read through raw pointers one by
//! one, and enum-typed fields as plain `u32`, so a value this build does not
//! know can never be undefined behaviour.

use cudarc::cupti::sys as cs;
use std::collections::HashMap;
use std::ptr::addr_of;
use std::sync::Mutex;

/// Activity kinds (CUpti_ActivityKind values).
pub const KIND_MEMCPY: u32 = 1;
pub const KIND_MEMSET: u32 = 2;
pub const KIND_DRIVER: u32 = 4;
pub const KIND_RUNTIME: u32 = 5;
pub const KIND_CONCURRENT_KERNEL: u32 = 10;
pub const KIND_CUDA_EVENT: u32 = 36;
pub const KIND_SYNCHRONIZATION: u32 = 38;
pub const KIND_EXTERNAL_CORRELATION: u32 = 39;

/// External correlation kinds: the recorder-private op binding and the request token.
pub const EXT_OP: u32 = 3; // CUSTOM0
pub const EXT_REQUEST: u32 = 4; // CUSTOM1

/// One activity record, copied out of a CUPTI buffer.
#[derive(Debug, Clone, PartialEq)]
pub enum Raw {
    Api {
        driver: bool,
        cbid: u32,
        start: u64,
        end: u64,
        tid: u32,
        corr: u32,
    },
    Kernel {
        name: String,
        device: u32,
        context: u32,
        stream: u32,
        corr: u32,
        graph_id: u32,
        graph_node_id: u64,
        queued: u64,
        submitted: u64,
        start: u64,
        end: u64,
        grid: [u32; 3],
        block: [u32; 3],
        channel: u32,
    },
    Memcpy {
        copy_kind: u8,
        src_kind: u8,
        dst_kind: u8,
        bytes: u64,
        start: u64,
        end: u64,
        device: u32,
        context: u32,
        stream: u32,
        corr: u32,
        graph_id: u32,
        graph_node_id: u64,
        channel: u32,
    },
    Memset {
        bytes: u64,
        start: u64,
        end: u64,
        device: u32,
        context: u32,
        stream: u32,
        corr: u32,
    },
    Sync {
        sync_type: u32,
        start: u64,
        end: u64,
        corr: u32,
        stream: u32,
        event_id: u32,
        sync_id: u64,
    },
    CudaEvent {
        corr: u32,
        stream: u32,
        event_id: u32,
        ts: u64,
        sync_id: u64,
    },
    ExtCorr {
        ext_kind: u32,
        ext_id: u64,
        corr: u32,
    },
}

impl Raw {
    pub fn corr(&self) -> u32 {
        match self {
            Raw::Api { corr, .. }
            | Raw::Kernel { corr, .. }
            | Raw::Memcpy { corr, .. }
            | Raw::Memset { corr, .. }
            | Raw::Sync { corr, .. }
            | Raw::CudaEvent { corr, .. }
            | Raw::ExtCorr { corr, .. } => *corr,
        }
    }
}

#[derive(Default)]
struct Collected {
    records: Vec<Raw>,
    dropped: u64,
    /// Records of kinds this recorder does not parse (should stay 0).
    unknown: u64,
}

static COLLECTED: Mutex<Collected> = Mutex::new(Collected {
    records: Vec::new(),
    dropped: 0,
    unknown: 0,
});

const BUFFER_SIZE: usize = 8 << 20;
const BUFFER_ALIGN: usize = 8;

fn layout() -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(BUFFER_SIZE, BUFFER_ALIGN).expect("valid layout")
}

/// While starving: how many more buffers CUPTI may get, and their size.
static STARVATION: Mutex<Option<(usize, usize)>> = Mutex::new(None);

/// Starves CUPTI of activity buffers: at most `buffers` more buffers of
/// `bytes` each are handed out, then none, so CUPTI drops the records it has
/// no room for and counts them — real record loss, as under memory pressure.
/// `None` restores the normal supply.
pub fn starve_buffers(budget: Option<(usize, usize)>) {
    if let Ok(mut g) = STARVATION.lock() {
        *g = budget.map(|(n, bytes)| (n, bytes.clamp(1024, BUFFER_SIZE)));
    }
}

unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_num_records: *mut usize,
) {
    let grant = match STARVATION.lock().as_deref_mut() {
        Ok(Some((0, _))) => None,
        Ok(Some((left, bytes))) => {
            *left -= 1;
            Some(*bytes)
        }
        _ => Some(BUFFER_SIZE),
    };
    *max_num_records = 0;
    let Some(grant) = grant else {
        // No buffer: CUPTI drops the records and counts them.
        *buffer = std::ptr::null_mut();
        *size = 0;
        return;
    };
    // SAFETY: CUPTI passes valid out pointers; the buffer is freed in
    // `buffer_completed` (always allocated at full size, `grant` may be less).
    let p = std::alloc::alloc(layout());
    *buffer = p;
    *size = if p.is_null() { 0 } else { grant };
}

unsafe extern "C" fn buffer_completed(
    ctx: cudarc::driver::sys::CUcontext,
    stream_id: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    let mut out = Vec::new();
    let mut unknown = 0u64;
    let mut rec: *mut cs::CUpti_Activity = std::ptr::null_mut();
    loop {
        // SAFETY: iterating CUPTI's own buffer with its iterator.
        let r = cs::cuptiActivityGetNextRecord(buffer, valid, &mut rec);
        if r != cs::CUptiResult::CUPTI_SUCCESS || rec.is_null() {
            break;
        }
        match parse(rec as *const u8) {
            Some(raw) => out.push(raw),
            None => unknown += 1,
        }
    }
    let mut dropped: usize = 0;
    let _ = cs::cuptiActivityGetNumDroppedRecords(ctx, stream_id, &mut dropped);
    std::alloc::dealloc(buffer, layout());
    if let Ok(mut c) = COLLECTED.lock() {
        c.records.extend(out);
        c.dropped += dropped as u64;
        c.unknown += unknown;
    }
}

macro_rules! rd {
    ($p:expr, $ty:ty, $field:ident) => {
        // SAFETY: `$p` points at a complete record of this kind inside a CUPTI buffer.
        unsafe { addr_of!((*($p as *const $ty)).$field).read_unaligned() }
    };
}
/// Reads an enum-typed field as its `u32` representation.
macro_rules! rd_u32 {
    ($p:expr, $ty:ty, $field:ident) => {
        // SAFETY: as above; C enums are 32-bit.
        unsafe { (addr_of!((*($p as *const $ty)).$field) as *const u32).read_unaligned() }
    };
}

/// Copies one record out; `None` for kinds the recorder does not use.
fn parse(p: *const u8) -> Option<Raw> {
    // SAFETY: every record starts with its 32-bit kind.
    let kind = unsafe { (p as *const u32).read_unaligned() };
    Some(match kind {
        KIND_DRIVER | KIND_RUNTIME => {
            type T = cs::CUpti_ActivityAPI;
            Raw::Api {
                driver: kind == KIND_DRIVER,
                cbid: rd!(p, T, cbid),
                start: rd!(p, T, start),
                end: rd!(p, T, end),
                tid: rd!(p, T, threadId),
                corr: rd!(p, T, correlationId),
            }
        }
        KIND_CONCURRENT_KERNEL => {
            type T = cs::CUpti_ActivityKernel10;
            let name_ptr: *const std::ffi::c_char = rd!(p, T, name);
            let name = if name_ptr.is_null() {
                String::new()
            } else {
                // SAFETY: CUPTI's NUL-terminated kernel name.
                unsafe { std::ffi::CStr::from_ptr(name_ptr) }
                    .to_string_lossy()
                    .into_owned()
            };
            let d = |v: i32| v.max(0) as u32;
            Raw::Kernel {
                name,
                device: rd!(p, T, deviceId),
                context: rd!(p, T, contextId),
                stream: rd!(p, T, streamId),
                corr: rd!(p, T, correlationId),
                graph_id: rd!(p, T, graphId),
                graph_node_id: rd!(p, T, graphNodeId),
                queued: rd!(p, T, queued),
                submitted: rd!(p, T, submitted),
                start: rd!(p, T, start),
                end: rd!(p, T, end),
                grid: [
                    d(rd!(p, T, gridX)),
                    d(rd!(p, T, gridY)),
                    d(rd!(p, T, gridZ)),
                ],
                block: [
                    d(rd!(p, T, blockX)),
                    d(rd!(p, T, blockY)),
                    d(rd!(p, T, blockZ)),
                ],
                channel: rd!(p, T, channelID),
            }
        }
        KIND_MEMCPY => {
            type T = cs::CUpti_ActivityMemcpy6;
            Raw::Memcpy {
                copy_kind: rd!(p, T, copyKind),
                src_kind: rd!(p, T, srcKind),
                dst_kind: rd!(p, T, dstKind),
                bytes: rd!(p, T, bytes),
                start: rd!(p, T, start),
                end: rd!(p, T, end),
                device: rd!(p, T, deviceId),
                context: rd!(p, T, contextId),
                stream: rd!(p, T, streamId),
                corr: rd!(p, T, correlationId),
                graph_id: rd!(p, T, graphId),
                graph_node_id: rd!(p, T, graphNodeId),
                channel: rd!(p, T, channelID),
            }
        }
        KIND_MEMSET => {
            type T = cs::CUpti_ActivityMemset4;
            Raw::Memset {
                bytes: rd!(p, T, bytes),
                start: rd!(p, T, start),
                end: rd!(p, T, end),
                device: rd!(p, T, deviceId),
                context: rd!(p, T, contextId),
                stream: rd!(p, T, streamId),
                corr: rd!(p, T, correlationId),
            }
        }
        KIND_SYNCHRONIZATION => {
            type T = cs::CUpti_ActivitySynchronization2;
            Raw::Sync {
                sync_type: rd_u32!(p, T, type_),
                start: rd!(p, T, start),
                end: rd!(p, T, end),
                corr: rd!(p, T, correlationId),
                stream: rd!(p, T, streamId),
                event_id: rd!(p, T, cudaEventId),
                sync_id: rd!(p, T, cudaEventSyncId),
            }
        }
        KIND_CUDA_EVENT => {
            type T = cs::CUpti_ActivityCudaEvent2;
            Raw::CudaEvent {
                corr: rd!(p, T, correlationId),
                stream: rd!(p, T, streamId),
                event_id: rd!(p, T, eventId),
                ts: rd!(p, T, deviceTimestamp),
                sync_id: rd!(p, T, cudaEventSyncId),
            }
        }
        KIND_EXTERNAL_CORRELATION => {
            type T = cs::CUpti_ActivityExternalCorrelation;
            Raw::ExtCorr {
                ext_kind: rd_u32!(p, T, externalKind),
                ext_id: rd!(p, T, externalId),
                corr: rd!(p, T, correlationId),
            }
        }
        _ => return None,
    })
}

unsafe extern "C" fn monotonic_timestamp() -> u64 {
    crate::now()
}

fn ok(what: &str, r: cs::CUptiResult) -> Result<(), String> {
    if r == cs::CUptiResult::CUPTI_SUCCESS {
        Ok(())
    } else {
        let mut s: *const std::ffi::c_char = std::ptr::null();
        // SAFETY: CUPTI returns a static string or leaves the pointer null.
        let name = unsafe {
            if cs::cuptiGetResultString(r, &mut s) == cs::CUptiResult::CUPTI_SUCCESS && !s.is_null()
            {
                std::ffi::CStr::from_ptr(s).to_string_lossy().into_owned()
            } else {
                format!("{r:?}")
            }
        };
        Err(format!("{what} failed: {name}"))
    }
}

/// What one flush handed over.
#[derive(Debug, Default)]
pub struct Flushed {
    pub records: Vec<Raw>,
    /// Records CUPTI dropped for lack of a buffer since the last flush.
    pub dropped: u64,
    pub unknown: u64,
}

/// The process-wide CUPTI activity recorder (CUPTI itself is process-wide).
pub struct Recorder {
    pub version: u32,
    names: Mutex<HashMap<(bool, u32), String>>,
}

const KINDS: [(cs::CUpti_ActivityKind, &str); 8] = [
    (
        cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_RUNTIME,
        "RUNTIME",
    ),
    (cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER"),
    (
        cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
        "CONCURRENT_KERNEL",
    ),
    (cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"),
    (cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"),
    (
        cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
        "SYNCHRONIZATION",
    ),
    (
        cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CUDA_EVENT,
        "CUDA_EVENT",
    ),
    (
        cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
        "EXTERNAL_CORRELATION",
    ),
];

impl Recorder {
    /// Starts recording. Call before the CUDA context is created.
    pub fn start() -> Result<Recorder, String> {
        // SAFETY: plain CUPTI configuration calls with valid arguments.
        unsafe {
            // The clock first: every record must be in the CLOCK_MONOTONIC domain.
            ok(
                "cuptiActivityRegisterTimestampCallback",
                cs::cuptiActivityRegisterTimestampCallback(Some(monotonic_timestamp)),
            )?;
            let mut version = 0u32;
            ok("cuptiGetVersion", cs::cuptiGetVersion(&mut version))?;
            // Thread ids as gettid() reports them (what the generator logs);
            // without it API records carry CUPTI's own ids.
            let _ = cs::cuptiSetThreadIdType(
                cs::CUpti_ActivityThreadIdType::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM,
            );
            ok(
                "cuptiActivityRegisterCallbacks",
                cs::cuptiActivityRegisterCallbacks(Some(buffer_requested), Some(buffer_completed)),
            )?;
            for (k, name) in KINDS {
                ok(
                    &format!("cuptiActivityEnable({name})"),
                    cs::cuptiActivityEnable(k),
                )?;
            }
            // queued/submitted on kernel records; without it they stay 0 ("not provided").
            let _ = cs::cuptiActivityEnableLatencyTimestamps(1);
            // Device timestamps of CUDA_EVENT records (CUDA 12.8+); optional.
            let _ =
                std::panic::catch_unwind(|| cs::cuptiActivityEnableCudaEventDeviceTimestamps(1));
            Ok(Recorder {
                version,
                names: Mutex::new(HashMap::new()),
            })
        }
    }

    /// Enables or disables every activity kind [`Recorder::start`] enabled: a
    /// cost study's way to run the same workload without the CUPTI collector
    /// (CUPTI stays loaded and subscribed; only its activity recording stops).
    pub fn set_activities(&self, on: bool) -> Result<(), String> {
        for (k, name) in KINDS {
            // SAFETY: plain CUPTI configuration calls on kinds `start` enabled.
            let r = unsafe {
                if on {
                    cs::cuptiActivityEnable(k)
                } else {
                    cs::cuptiActivityDisable(k)
                }
            };
            ok(
                &format!(
                    "cuptiActivity{}({name})",
                    if on { "Enable" } else { "Disable" }
                ),
                r,
            )?;
        }
        Ok(())
    }

    /// A recorder that records nothing and names callback ids from `names`
    /// (driver?, cbid, name): for building truth from hand-made records offline.
    pub fn offline(names: &[(bool, u32, &str)]) -> Recorder {
        Recorder {
            version: 0,
            names: Mutex::new(
                names
                    .iter()
                    .map(|&(d, c, n)| ((d, c), n.to_string()))
                    .collect(),
            ),
        }
    }

    /// Forces every buffer out (after the device is synchronized) and takes the records.
    pub fn flush(&self) -> Result<Flushed, String> {
        // SAFETY: FLUSH_FORCED = 1.
        ok("cuptiActivityFlushAll", unsafe {
            cs::cuptiActivityFlushAll(1)
        })?;
        // Records dropped while no buffer was out are counted on the global
        // queue, which a completed buffer may never report.
        let mut global: usize = 0;
        // SAFETY: NULL context and stream 0 name the global queue.
        let _ =
            unsafe { cs::cuptiActivityGetNumDroppedRecords(std::ptr::null_mut(), 0, &mut global) };
        let mut c = COLLECTED
            .lock()
            .map_err(|_| "CUPTI record store poisoned")?;
        c.dropped += global as u64;
        Ok(Flushed {
            records: std::mem::take(&mut c.records),
            dropped: std::mem::take(&mut c.dropped),
            unknown: std::mem::take(&mut c.unknown),
        })
    }

    /// CUPTI's stream id of a stream (differs from `cuStreamGetId`,
    /// docs/gpu-facts.md).
    ///
    /// # Safety
    /// `ctx` and `stream` must be live handles of this process's CUDA context
    /// and one of its streams.
    pub unsafe fn stream_id(
        &self,
        ctx: cudarc::driver::sys::CUcontext,
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<u32, String> {
        let mut id = 0u32;
        // SAFETY: the caller passes live handles.
        ok("cuptiGetStreamIdEx", unsafe {
            cs::cuptiGetStreamIdEx(ctx, stream, 0, &mut id)
        })?;
        Ok(id)
    }

    /// The API function name of a callback id.
    pub fn api_name(&self, driver: bool, cbid: u32) -> String {
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        names
            .entry((driver, cbid))
            .or_insert_with(|| {
                let domain = if driver {
                    cs::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API
                } else {
                    cs::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API
                };
                let mut p: *const std::ffi::c_char = std::ptr::null();
                // SAFETY: CUPTI returns a static name or leaves the pointer null.
                let got = std::panic::catch_unwind(move || unsafe {
                    if cs::cuptiGetCallbackName(domain, cbid, &mut p)
                        == cs::CUptiResult::CUPTI_SUCCESS
                        && !p.is_null()
                    {
                        Some(std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned())
                    } else {
                        None
                    }
                });
                got.ok().flatten().unwrap_or_else(|| format!("cbid{cbid}"))
            })
            .clone()
    }
}

/// Whether [`push`], [`pop`], [`push_token`] and [`pop_token`] reach CUPTI
/// (off only while a cost study runs a workload without the collector).
static BINDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Turns the per-call binding to CUPTI's external-correlation stacks on or off.
pub fn set_binding(on: bool) {
    BINDING.store(on, std::sync::atomic::Ordering::Relaxed);
}

#[inline]
fn binding() -> bool {
    BINDING.load(std::sync::atomic::Ordering::Relaxed)
}

/// Binds the calls the current thread makes until [`pop`] to `op` (and, in
/// instrumented mode, to a request token).
#[inline]
pub fn push(op: u64, token: Option<u64>) {
    if !binding() {
        return;
    }
    // SAFETY: per-thread CUPTI external-correlation stacks.
    unsafe {
        cs::cuptiActivityPushExternalCorrelationId(
            cs::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
            op,
        );
        if let Some(t) = token {
            cs::cuptiActivityPushExternalCorrelationId(
                cs::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1,
                t,
            );
        }
    }
}

#[inline]
pub fn pop(token: bool) {
    if !binding() {
        return;
    }
    let mut last = 0u64;
    // SAFETY: pops what `push` pushed.
    unsafe {
        if token {
            cs::cuptiActivityPopExternalCorrelationId(
                cs::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1,
                &mut last,
            );
        }
        cs::cuptiActivityPopExternalCorrelationId(
            cs::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
            &mut last,
        );
    }
}

/// Puts a request token on the calling thread's CUSTOM1 stack: every API
/// call the thread makes until [`pop_token`] carries it.
#[inline]
pub fn push_token(token: u64) {
    if !binding() {
        return;
    }
    // SAFETY: per-thread CUPTI external-correlation stack.
    unsafe {
        cs::cuptiActivityPushExternalCorrelationId(
            cs::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1,
            token,
        );
    }
}

#[inline]
pub fn pop_token() {
    if !binding() {
        return;
    }
    let mut last = 0u64;
    // SAFETY: pops what `push_token` pushed.
    unsafe {
        cs::cuptiActivityPopExternalCorrelationId(
            cs::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1,
            &mut last,
        );
    }
}

/// Directories searched for CUPTI when it is not loadable by name.
fn search_dirs() -> Vec<std::path::PathBuf> {
    let mut d = Vec::new();
    if let Some(p) = std::env::var_os("CAUSALBENCH_CUPTI_DIR") {
        d.push(p.into());
    }
    for p in [
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/local/cuda/extras/CUPTI/lib64",
        "/usr/local/cuda/lib64",
    ] {
        d.push(p.into());
    }
    d
}

fn present_by_name() -> bool {
    // SAFETY: only dlopen/dlclose of candidate names.
    std::panic::catch_unwind(|| unsafe { cs::is_culib_present() }).unwrap_or(false)
}

/// Makes sure libcupti can be loaded (preloading it from the usual CUDA
/// directories when the loader path lacks them). Never panics.
pub fn ensure_cupti() -> Result<(), String> {
    static STATE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    STATE
        .get_or_init(|| {
            if present_by_name() {
                return Ok(());
            }
            let mut tried = Vec::new();
            for dir in search_dirs() {
                let Ok(rd) = std::fs::read_dir(&dir) else {
                    continue;
                };
                let mut libs: Vec<_> = rd
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("libcupti.so.13"))
                    })
                    .collect();
                libs.sort();
                for lib in libs {
                    let Ok(c) = std::ffi::CString::new(lib.as_os_str().as_encoded_bytes()) else {
                        continue;
                    };
                    // SAFETY: loading CUPTI runs its initialisers; the handle is kept.
                    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
                    if !h.is_null() && present_by_name() {
                        return Ok(());
                    }
                    tried.push(lib.display().to_string());
                }
            }
            Err(format!(
                "CUPTI (libcupti.so.13) cannot be loaded (tried the loader path LD_LIBRARY_PATH={:?}{}); \
                 on a CUDA host run with LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib \
                 or set CAUSALBENCH_CUPTI_DIR to the directory holding libcupti.so.13",
                std::env::var("LD_LIBRARY_PATH").unwrap_or_default(),
                if tried.is_empty() {
                    String::new()
                } else {
                    format!(" and {}", tried.join(", "))
                }
            ))
        })
        .clone()
}
