//! The CUPTI reference recorder: activity buffers, CLOCK_MONOTONIC
//! timestamps, latency (queued/submitted) timestamps, external correlation,
//! dropped-record accounting. Records are copied out of CUPTI's buffers into
//! owned [`Raw`] values as buffers complete; [`Recorder::flush`] forces every
//! buffer out and hands the collected records over.
//!
//! The recorder adapts to the CUPTI it loads (docs/cupti-versions.md): it
//! reads `cuptiGetVersion` first, decodes records with that release's layout
//! ([`crate::layout`]), enables each activity kind on its own and keeps the
//! ones the release accepts, and falls back to CUPTI's own clock (moved by a
//! measured offset) where the timestamp callback is refused. What it could
//! not enable is written into the manifest and counted as loss.

use crate::capability::{release_of, Clock, KindOutcomes};
use crate::layout::RecordLayout;
use cudarc::cupti::sys as cs;
use ground_truth::CuptiCapabilities;
use std::collections::HashMap;
use std::sync::Mutex;

pub use crate::raw::{
    Raw, EXT_OP, EXT_REQUEST, KIND_CONCURRENT_KERNEL, KIND_CUDA_EVENT, KIND_DRIVER,
    KIND_EXTERNAL_CORRELATION, KIND_MEMCPY, KIND_MEMSET, KIND_RUNTIME, KIND_SYNCHRONIZATION,
};

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

fn buffer_layout() -> std::alloc::Layout {
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
    let p = std::alloc::alloc(buffer_layout());
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
    let (layout, shift) = DECODING
        .lock()
        .ok()
        .and_then(|d| *d)
        .unwrap_or((RecordLayout::Cupti13_0, 0));
    let mut rec: *mut cs::CUpti_Activity = std::ptr::null_mut();
    loop {
        // SAFETY: iterating CUPTI's own buffer with its iterator.
        let r = cs::cuptiActivityGetNextRecord(buffer, valid, &mut rec);
        if r != cs::CUptiResult::CUPTI_SUCCESS || rec.is_null() {
            break;
        }
        let kind = (rec as *const u32).read_unaligned();
        if kind < 64 {
            SEEN_KINDS.fetch_or(1 << kind, std::sync::atomic::Ordering::Relaxed);
        }
        match parse(rec as *const u8, layout, shift) {
            Some(raw) => out.push(raw),
            None => unknown += 1,
        }
    }
    let mut dropped: usize = 0;
    let _ = cs::cuptiActivityGetNumDroppedRecords(ctx, stream_id, &mut dropped);
    std::alloc::dealloc(buffer, buffer_layout());
    if let Ok(mut c) = COLLECTED.lock() {
        c.records.extend(out);
        c.dropped += dropped as u64;
        c.unknown += unknown;
    }
}

/// Activity kinds (bit `kind`) of which a record arrived: CUPTI 12.0–12.8
/// refuse to enable CUDA_EVENT yet deliver its records alongside
/// SYNCHRONIZATION (docs/cupti-versions.md), so a refusal alone does not say
/// the kind is unobservable.
static SEEN_KINDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The layout and clock shift of the loaded CUPTI, set by [`Recorder::start`]
/// before any buffer is handed out.
static DECODING: Mutex<Option<(RecordLayout, i64)>> = Mutex::new(None);

/// Copies one record out; `None` for kinds the recorder does not use.
///
/// # Safety
/// `p` points at a complete record CUPTI wrote in `layout`.
unsafe fn parse(p: *const u8, layout: RecordLayout, shift: i64) -> Option<Raw> {
    // SAFETY: every record starts with its 32-bit kind.
    let kind = unsafe { (p as *const u32).read_unaligned() };
    let size = layout.record_size(kind)?;
    // SAFETY: CUPTI wrote a whole record of this kind, at least `size` bytes
    // (the struct of the release `layout` is; later releases only append).
    let bytes = unsafe { std::slice::from_raw_parts(p, size) };
    crate::layout::decode(bytes, layout, shift, |name| {
        let name = name as *const std::ffi::c_char;
        if name.is_null() {
            String::new()
        } else {
            // SAFETY: CUPTI's NUL-terminated kernel name, alive while the buffer is.
            unsafe { std::ffi::CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        }
    })
    .ok()
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
    /// `cuptiGetVersion`.
    pub version: u32,
    pub layout: RecordLayout,
    /// What this CUPTI observes and cannot, for the manifest.
    pub capabilities: CuptiCapabilities,
    kinds: KindOutcomes,
    names: Mutex<HashMap<(bool, u32), String>>,
}

/// The activity kinds recorded, and whether a recording is possible without
/// each: without external correlation no record can be bound to its op, and
/// without kernel records there is no device timeline at all.
const KINDS: [(u32, &str, bool); 8] = [
    (KIND_RUNTIME, "RUNTIME", false),
    (KIND_DRIVER, "DRIVER", false),
    (KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", true),
    (KIND_MEMCPY, "MEMCPY", false),
    (KIND_MEMSET, "MEMSET", false),
    (KIND_SYNCHRONIZATION, "SYNCHRONIZATION", false),
    (KIND_CUDA_EVENT, "CUDA_EVENT", false),
    (KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION", true),
];

fn activity_kind(kind: u32) -> cs::CUpti_ActivityKind {
    use cs::CUpti_ActivityKind as K;
    match kind {
        KIND_RUNTIME => K::CUPTI_ACTIVITY_KIND_RUNTIME,
        KIND_DRIVER => K::CUPTI_ACTIVITY_KIND_DRIVER,
        KIND_CONCURRENT_KERNEL => K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
        KIND_MEMCPY => K::CUPTI_ACTIVITY_KIND_MEMCPY,
        KIND_MEMSET => K::CUPTI_ACTIVITY_KIND_MEMSET,
        KIND_SYNCHRONIZATION => K::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
        KIND_CUDA_EVENT => K::CUPTI_ACTIVITY_KIND_CUDA_EVENT,
        _ => K::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    }
}

fn seen(kind: u32) -> bool {
    kind < 64 && SEEN_KINDS.load(std::sync::atomic::Ordering::Relaxed) & (1 << kind) != 0
}

/// Whether the loaded CUPTI exports `name` (older releases lack newer calls;
/// calling a missing one through the bindings would panic).
fn exports(name: &str) -> bool {
    // SAFETY: a symbol lookup in the already loaded library.
    std::panic::catch_unwind(|| unsafe { cs::culib().get::<*const ()>(name.as_bytes()).is_ok() })
        .unwrap_or(false)
}

/// The offset from CUPTI's own clock to CLOCK_MONOTONIC: the reading with
/// the tightest bracket of 32, and half that bracket as its uncertainty.
fn measure_clock_offset() -> Result<(i64, u64), String> {
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..32 {
        let before = crate::now();
        let mut cupti = 0u64;
        // SAFETY: valid out pointer.
        ok("cuptiGetTimestamp", unsafe {
            cs::cuptiGetTimestamp(&mut cupti)
        })?;
        let after = crate::now();
        let bracket = after - before;
        let offset = (before + bracket / 2) as i64 - cupti as i64;
        if best.is_none_or(|(b, _)| bracket < b) {
            best = Some((bracket, offset));
        }
    }
    let (bracket, offset) = best.expect("32 readings");
    Ok((offset, bracket.div_ceil(2)))
}

impl Recorder {
    /// Starts recording. Call before the CUDA context is created.
    pub fn start() -> Result<Recorder, String> {
        let mut version = 0u32;
        // SAFETY: valid out pointer; every CUPTI release has this call.
        ok("cuptiGetVersion", unsafe {
            cs::cuptiGetVersion(&mut version)
        })?;
        let layout = RecordLayout::of_api_version(version)?;
        // The clock first: every record must be in the CLOCK_MONOTONIC domain.
        // SAFETY: registers a plain extern "C" function.
        let clock = match ok("cuptiActivityRegisterTimestampCallback", unsafe {
            cs::cuptiActivityRegisterTimestampCallback(Some(monotonic_timestamp))
        }) {
            Ok(()) => Clock::Callback,
            Err(refused) => {
                let (offset_ns, uncertainty_ns) = measure_clock_offset()?;
                Clock::Shifted {
                    refused,
                    offset_ns,
                    uncertainty_ns,
                }
            }
        };
        if let Ok(mut d) = DECODING.lock() {
            *d = Some((layout, clock.shift()));
        }
        // SAFETY: plain CUPTI configuration calls with valid arguments.
        unsafe {
            // Thread ids as gettid() reports them (what the generator logs);
            // without it API records carry CUPTI's own ids.
            let _ = cs::cuptiSetThreadIdType(
                cs::CUpti_ActivityThreadIdType::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM,
            );
            ok(
                "cuptiActivityRegisterCallbacks",
                cs::cuptiActivityRegisterCallbacks(Some(buffer_requested), Some(buffer_completed)),
            )?;
        }
        let mut kinds = KindOutcomes::default();
        for (kind, name, required) in KINDS {
            // SAFETY: a plain enum argument; CUPTI refuses kinds it lacks.
            let enabled = ok(&format!("cuptiActivityEnable({name})"), unsafe {
                cs::cuptiActivityEnable(activity_kind(kind))
            });
            match enabled {
                Ok(()) => kinds.enabled.push((kind, name)),
                Err(e) if required => {
                    return Err(format!(
                        "{e} (CUPTI {}): cannot record without it",
                        release_of(version)
                    ))
                }
                Err(e) => kinds.refused.push((kind, name, e)),
            }
        }
        // SAFETY: plain CUPTI configuration calls.
        unsafe {
            // queued/submitted on kernel records; without it they stay 0 ("not provided").
            let _ = cs::cuptiActivityEnableLatencyTimestamps(1);
            // Device timestamps of CUDA_EVENT records; a call newer releases have.
            if exports("cuptiActivityEnableCudaEventDeviceTimestamps") {
                let _ = cs::cuptiActivityEnableCudaEventDeviceTimestamps(1);
            }
        }
        let capabilities =
            crate::capability::capabilities(version, &loaded_library(), layout, &clock, &kinds);
        Ok(Recorder {
            version,
            layout,
            capabilities,
            kinds,
            names: Mutex::new(HashMap::new()),
        })
    }

    /// Whether this CUPTI delivers records of an activity kind (`KIND_*`):
    /// enabled, or refused but delivered anyway.
    pub fn observes(&self, kind: u32) -> bool {
        self.kinds.observes(kind) || seen(kind)
    }

    /// What this CUPTI observes and cannot, as far as the records so far show:
    /// a refused kind whose records arrived anyway counts as observed.
    pub fn capabilities(&self) -> CuptiCapabilities {
        let mut c = self.capabilities.clone();
        for (kind, name, _) in &self.kinds.refused {
            if seen(*kind) {
                c.unobservable.retain(|u| u.what != *name);
                c.kinds
                    .push(format!("{name} (enable refused, records delivered anyway)"));
            }
        }
        c
    }

    /// Enables or disables every activity kind [`Recorder::start`] enabled: a
    /// cost study's way to run the same workload without the CUPTI collector
    /// (CUPTI stays loaded and subscribed; only its activity recording stops).
    pub fn set_activities(&self, on: bool) -> Result<(), String> {
        for &(kind, name) in &self.kinds.enabled {
            // SAFETY: plain CUPTI configuration calls on kinds `start` enabled.
            let r = unsafe {
                if on {
                    cs::cuptiActivityEnable(activity_kind(kind))
                } else {
                    cs::cuptiActivityDisable(activity_kind(kind))
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
        Self::offline_observing(names, &KINDS.map(|(k, n, _)| (k, n)))
    }

    /// As [`Recorder::offline`], for a CUPTI that observes only `kinds`.
    pub fn offline_observing(
        names: &[(bool, u32, &str)],
        kinds: &[(u32, &'static str)],
    ) -> Recorder {
        Recorder {
            version: 0,
            layout: RecordLayout::Cupti13_0,
            capabilities: CuptiCapabilities::default(),
            kinds: KindOutcomes {
                enabled: kinds.to_vec(),
                refused: KINDS
                    .iter()
                    .filter(|(k, _, _)| !kinds.iter().any(|(o, _)| o == k))
                    .map(|&(k, n, _)| (k, n, "offline recorder".to_string()))
                    .collect(),
            },
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

/// The environment variable naming one CUPTI library file to record with
/// (docs/cupti-versions.md): any supported release, not only the one this
/// build was made against.
pub const CUPTI_LIB_VAR: &str = "CAUSALBENCH_CUPTI_LIB";

fn present_by_name() -> bool {
    // SAFETY: only dlopen/dlclose of candidate names.
    std::panic::catch_unwind(|| unsafe { cs::is_culib_present() }).unwrap_or(false)
}

/// The file a loaded symbol lives in.
fn file_of(symbol: *const std::ffi::c_void) -> Option<String> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables; `info` is a valid out pointer.
    if symbol.is_null()
        || unsafe { libc::dladdr(symbol, &mut info) } == 0
        || info.dli_fname.is_null()
    {
        return None;
    }
    // SAFETY: the loader's NUL-terminated file name.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let name = name.to_string_lossy().into_owned();
    Some(
        std::fs::canonicalize(&name)
            .map(|p| p.display().to_string())
            .unwrap_or(name),
    )
}

/// The CUPTI library the bindings call into.
pub fn loaded_library() -> String {
    std::panic::catch_unwind(|| {
        // SAFETY: a symbol lookup in the library the bindings load.
        let sym = unsafe { cs::culib().get::<*const std::ffi::c_void>(b"cuptiGetVersion") };
        sym.ok().and_then(|s| file_of(*s))
    })
    .ok()
    .flatten()
    .unwrap_or_else(|| "unknown".into())
}

/// Preloads the library `CAUSALBENCH_CUPTI_LIB` names and checks that the
/// bindings resolve to it, not to another CUPTI found first by name.
fn load_named(path: &std::ffi::OsStr) -> Result<(), String> {
    let shown = std::path::Path::new(path).display().to_string();
    let c = std::ffi::CString::new(path.as_encoded_bytes())
        .map_err(|_| format!("{CUPTI_LIB_VAR}={shown:?}: not a file name"))?;
    // SAFETY: loading CUPTI runs its initialisers; the handle is kept.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        // SAFETY: dlerror's message for the failed dlopen.
        let why = unsafe { libc::dlerror() };
        let why = if why.is_null() {
            "unknown error".into()
        } else {
            unsafe { std::ffi::CStr::from_ptr(why) }
                .to_string_lossy()
                .into_owned()
        };
        return Err(format!("{CUPTI_LIB_VAR}={shown}: cannot be loaded: {why}"));
    }
    // SAFETY: symbol lookup in the handle just opened.
    let ours =
        file_of(unsafe { libc::dlsym(handle, c"cuptiGetVersion".as_ptr()) }).ok_or_else(|| {
            format!("{CUPTI_LIB_VAR}={shown}: has no cuptiGetVersion, not a CUPTI library")
        })?;
    if !present_by_name() {
        return Err(format!(
            "{CUPTI_LIB_VAR}={shown}: loaded, but no CUPTI name the bindings look for resolves to it \
             (libcupti.so, libcupti.so.13, libcupti.so.12): give a file named libcupti.so.<major>"
        ));
    }
    let bound = loaded_library();
    if bound != ours {
        return Err(format!(
            "{CUPTI_LIB_VAR}={shown}: the loader path finds another CUPTI first ({bound}); \
             put a directory holding only the wanted libcupti.so first on LD_LIBRARY_PATH"
        ));
    }
    Ok(())
}

/// Makes sure libcupti can be loaded (preloading it from the usual CUDA
/// directories when the loader path lacks them, or the file
/// `CAUSALBENCH_CUPTI_LIB` names). Never panics.
pub fn ensure_cupti() -> Result<(), String> {
    static STATE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    STATE
        .get_or_init(|| {
            if let Some(path) = std::env::var_os(CUPTI_LIB_VAR) {
                return load_named(&path);
            }
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
                            .is_some_and(|n| n.starts_with("libcupti.so.1"))
                    })
                    .collect();
                // Newest first: `libcupti.so.13…` before `libcupti.so.12…`.
                libs.sort();
                libs.reverse();
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
                "CUPTI (libcupti.so.13 or .12) cannot be loaded (tried the loader path LD_LIBRARY_PATH={:?}{}); \
                 on a CUDA host run with LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib, \
                 set CAUSALBENCH_CUPTI_DIR to the directory holding libcupti.so.13, \
                 or {CUPTI_LIB_VAR} to one CUPTI library file",
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
