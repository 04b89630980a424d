//! The BPF side of a recording: load, attach, poll, drain. Runs entirely on the
//! recorder's background thread (the skeleton borrows its object storage).

use crate::config::{HandleArg, RecorderConfig};
use crate::error::RecorderError;
use crate::raw::*;
use crate::skel::*;
use crate::stacks::StackBook;
use crate::symbols::Resolved;
use crate::user_unwind::UserUnwinder;
use crate::{HostTrace, Started};
use ground_truth::trace::{Record, SwitchReason};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{
    ErrorKind, Link, MapCore, MapFlags, OpenObject, PrintLevel, RingBufferBuilder, UprobeMultiOpts,
    UprobeOpts,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

static LIBBPF_LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Why fexit/handle_mm_fault was refused, once it was (it will be again).
static FEXIT_REFUSED: Mutex<Option<String>> = Mutex::new(None);
/// Why this kernel refused uprobe_multi programs or links, once it has.
static MULTI_REFUSED: Mutex<Option<String>> = Mutex::new(None);

fn libbpf_print(_level: PrintLevel, msg: String) {
    if std::env::var_os("EBPF_RECORDER_DEBUG").is_some() {
        eprint!("{msg}");
    }
    if let Ok(mut log) = LIBBPF_LOG.lock() {
        log.push(msg.trim_end().to_string());
        let n = log.len();
        if n > 200 {
            log.drain(..n - 200);
        }
    }
}

fn take_log_tail() -> String {
    let mut log = LIBBPF_LOG
        .lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default();
    let n = log.len();
    if n > 12 {
        log.drain(..n - 12);
    }
    log.join(" | ")
}

/// The errno behind a libbpf error, if any.
fn os_error(e: &libbpf_rs::Error) -> Option<i32> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if let Some(code) = io.raw_os_error() {
                return Some(code);
            }
        }
        cur = c.source();
    }
    let text = e.to_string();
    let at = text.rfind("(os error ")?;
    text[at + 10..].trim_end_matches(')').parse().ok()
}

fn with_log(msg: String) -> String {
    let tail = take_log_tail();
    if tail.is_empty() {
        msg
    } else {
        format!("{msg}; libbpf: {tail}")
    }
}

/// EPERM means missing privileges; EACCES from a load is a verifier rejection.
fn load_error(stage: &str, e: libbpf_rs::Error) -> RecorderError {
    if os_error(&e) == Some(libc::EPERM) {
        return RecorderError::NotPrivileged {
            detail: with_log(format!("{stage}: {e}")),
        };
    }
    RecorderError::Load {
        detail: with_log(format!("{stage}: {e:#}")),
    }
}

fn attach_error(what: String, e: libbpf_rs::Error) -> RecorderError {
    if os_error(&e) == Some(libc::EPERM) {
        return RecorderError::NotPrivileged {
            detail: with_log(format!("attaching {what}: {e}")),
        };
    }
    RecorderError::Attach {
        what,
        detail: with_log(format!("{e:#}")),
    }
}

enum SessionError {
    /// The fexit program for fault timing failed; retry without it.
    Fexit(RecorderError),
    /// The uprobe_multi programs or links failed; retry with one link per function.
    Multi(RecorderError),
    Fatal(RecorderError),
}

fn gettid() -> u32 {
    // SAFETY: no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

fn detail_of(why: RecorderError) -> String {
    match why {
        RecorderError::NotPrivileged { detail }
        | RecorderError::Load { detail }
        | RecorderError::Attach { detail, .. } => detail,
        other => other.to_string(),
    }
}

/// Runs a whole recording; start-up success or failure goes to `ready`.
///
/// The first attempt uses everything this kernel may offer (fault timing by
/// fexit, uprobe_multi links); each optional piece that fails is dropped, with
/// a warning, and remembered so that later recordings skip it.
pub(crate) fn run(
    cfg: RecorderConfig,
    resolved: Resolved,
    ready: Sender<Result<Started, RecorderError>>,
    stop: Arc<AtomicBool>,
) -> HostTrace {
    libbpf_rs::set_print(Some((PrintLevel::Warn, libbpf_print)));
    let refused = |r: &Mutex<Option<String>>| r.lock().map(|r| r.clone()).unwrap_or(None);
    let mut fault_timing = cfg.page_faults;
    let mut multi = cfg.multi_link && !resolved.targets.is_empty();
    let mut notes = Vec::new();
    let fexit_note = |why: &str| {
        format!(
            "fexit/handle_mm_fault unavailable ({why}); page faults recorded with \
             duration 0 and major from the thread's maj_flt counter"
        )
    };
    if fault_timing {
        if let Some(why) = refused(&FEXIT_REFUSED) {
            fault_timing = false;
            notes.push(fexit_note(&why));
        }
    }
    if multi && refused(&MULTI_REFUSED).is_some() {
        multi = false;
    }
    // Each retry drops one optional piece: at most three attempts.
    for _ in 0..3 {
        let mut obj = MaybeUninit::uninit();
        let attempt = Attempt {
            fault_timing,
            multi,
        };
        match session(
            &cfg,
            &resolved,
            attempt,
            &mut obj,
            &ready,
            &stop,
            notes.clone(),
        ) {
            // What a retry dropped is remembered where it failed (the
            // `*_REFUSED` statics), so later recordings skip it.
            Ok(t) => return t,
            Err(SessionError::Fexit(why)) if fault_timing => {
                let why = refused(&FEXIT_REFUSED).unwrap_or_else(|| detail_of(why));
                notes.push(fexit_note(&why));
                if let Ok(mut r) = FEXIT_REFUSED.lock() {
                    r.get_or_insert(why);
                }
                fault_timing = false;
            }
            Err(SessionError::Multi(why)) if multi => {
                let why = detail_of(why);
                notes.push(format!(
                    "uprobe_multi links unavailable ({why}); one link per probed function \
                     (slower to attach and detach)"
                ));
                if let Ok(mut r) = MULTI_REFUSED.lock() {
                    r.get_or_insert(why);
                }
                multi = false;
            }
            Err(SessionError::Fexit(e))
            | Err(SessionError::Multi(e))
            | Err(SessionError::Fatal(e)) => {
                let _ = ready.send(Err(e));
                return HostTrace::default();
            }
        }
    }
    let _ = ready.send(Err(RecorderError::Load {
        detail: "no configuration of the BPF programs loaded".into(),
    }));
    HostTrace::default()
}

/// The optional pieces one attempt of [`session`] uses.
#[derive(Clone, Copy)]
struct Attempt {
    /// Fault durations from fexit/handle_mm_fault.
    fault_timing: bool,
    /// One uprobe_multi link for all entry probes and one for all return probes.
    multi: bool,
}

/// One attempt at a whole recording: load, attach, tell `ready`, poll until `stop`,
/// detach, drain, and build the trace.
#[allow(clippy::too_many_arguments)]
fn session(
    cfg: &RecorderConfig,
    resolved: &Resolved,
    attempt: Attempt,
    obj: &mut MaybeUninit<OpenObject>,
    ready: &Sender<Result<Started, RecorderError>>,
    stop: &AtomicBool,
    mut warnings: Vec<String>,
) -> Result<HostTrace, SessionError> {
    let skel = load(cfg, resolved, attempt, obj)?;
    write_handle_specs(&skel, resolved)?;
    let links = attach(&skel, cfg, resolved, attempt)?;
    let fault_timing = cfg.page_faults && attempt.fault_timing;
    // Started: the caller may run the workload now.
    let _ = ready.send(Ok(Started { fault_timing }));
    let mut drained = drain_until_stopped(&skel, cfg, stop, links, &mut warnings);
    let counters = Counters::read(&skel);
    let mut faults_untimed = counters.faults_untimed;
    // Faults still pending at stop: emitted with duration 0.
    if cfg.page_faults {
        faults_untimed += pending_faults(&skel, &mut drained.events);
    }
    let (records, stacks_unwound) = build_records(
        &drained.events,
        resolved,
        &drained.stack_cache,
        &drained.unwound,
        &mut drained.book,
    );
    warnings.append(&mut drained.book.errors);
    let Counters {
        ringbuffer_dropped,
        stack_errors,
        stack_walks,
        stacks_reused,
        stack_copies,
        stack_copies_dropped,
        ..
    } = counters;
    if stack_errors > 0 {
        warnings.push(format!(
            "{stack_errors} user stacks could not be captured (stack map full or collision); \
             those uprobe records carry only the call-site frame"
        ));
    }
    if stack_copies_dropped > 0 {
        warnings.push(format!(
            "{stack_copies_dropped} stack copies found the ring buffer full; those uprobe \
             records carry the frame-pointer stack"
        ));
    }
    warnings.extend(resolved.warnings.iter().cloned());
    Ok(HostTrace {
        records,
        ringbuffer_dropped,
        stack_errors,
        stack_walks,
        stacks_reused,
        stack_copies,
        stack_copies_dropped,
        stacks_unwound,
        faults_untimed,
        fault_timing,
        library: resolved.library.clone(),
        probes: resolved.targets.clone(),
        warnings,
    })
}

/// Opens the BPF object, configures it for the target and the attempt, and loads it. A
/// load failure with an optional program loaded is retried without it (fexit first);
/// the last retry reports the real error.
fn load<'obj>(
    cfg: &RecorderConfig,
    resolved: &Resolved,
    attempt: Attempt,
    obj: &'obj mut MaybeUninit<OpenObject>,
) -> Result<RecorderSkel<'obj>, SessionError> {
    use SessionError::*;
    let Attempt {
        fault_timing,
        multi,
    } = attempt;
    let fatal_load = |stage: &str, e| Fatal(load_error(stage, e));

    let builder = RecorderSkelBuilder::default();
    let mut open = builder.open(obj).map_err(|e| fatal_load("open", e))?;
    {
        let ro = open.maps.rodata_data.as_deref_mut().ok_or_else(|| {
            Fatal(RecorderError::Load {
                detail: "no .rodata in the BPF object".into(),
            })
        })?;
        ro.target_tgid = cfg.pid;
        ro.fault_timing = fault_timing as u32;
        ro.stack_mode = cfg.stacks as u32;
        ro.entry_only = !cfg.return_probes as u32;
        ro.stack_copy_bytes = cfg
            .stack_copy_size()
            .map_err(|e| Fatal(RecorderError::Config(e)))?;
        // The recorder's own thread may belong to the target: its wake-ups must
        // not produce records (they would wake it again).
        ro.self_tid = gettid();
        ro.wakeup_bytes =
            cfg.wakeup_bytes
                .unwrap_or(cfg.ringbuf_bytes.max(4096).next_power_of_two() / 4) as u64;
    }
    let rb_bytes = cfg.ringbuf_bytes.max(4096).next_power_of_two();
    open.maps
        .events
        .set_max_entries(rb_bytes)
        .map_err(|e| fatal_load("ring buffer size", e))?;
    open.maps
        .stacks
        .set_max_entries(cfg.max_stacks.max(1))
        .map_err(|e| fatal_load("stack map size", e))?;
    let uprobes = !resolved.targets.is_empty();
    open.progs.uprobe_enter.set_autoload(uprobes && !multi);
    open.progs
        .uprobe_exit
        .set_autoload(uprobes && !multi && cfg.return_probes);
    open.progs.uprobe_multi_enter.set_autoload(uprobes && multi);
    open.progs
        .uprobe_multi_exit
        .set_autoload(uprobes && multi && cfg.return_probes);
    open.progs.on_sched_switch.set_autoload(cfg.sched);
    open.progs.on_page_fault_user.set_autoload(cfg.page_faults);
    open.progs
        .on_handle_mm_fault_exit
        .set_autoload(cfg.page_faults && fault_timing);

    open.load().map_err(|e| {
        let err = load_error("load", e);
        if fault_timing {
            Fexit(err)
        } else if uprobes && multi {
            Multi(err)
        } else {
            Fatal(err)
        }
    })
}

/// Handle specs, one per probed function (index = attach cookie).
fn write_handle_specs(skel: &RecorderSkel, resolved: &Resolved) -> Result<(), SessionError> {
    for (i, t) in resolved.targets.iter().enumerate() {
        let (kind, arg, offset) = match t.handle {
            HandleArg::None => (HANDLE_NONE, 0, 0),
            HandleArg::Arg(n) => (HANDLE_ARG, n as u32, 0),
            HandleArg::ArgField { arg, offset } => (HANDLE_ARG_FIELD, arg as u32, offset),
        };
        skel.maps
            .handle_specs
            .update(
                &(i as u32).to_ne_bytes(),
                &handle_spec_bytes(kind, arg, offset),
                MapFlags::ANY,
            )
            .map_err(|e| SessionError::Fatal(load_error("handle specs", e)))?;
    }
    Ok(())
}

/// Attaches every loaded program: fault timing, scheduler and fault tracepoints, then
/// the uprobes (one uprobe_multi link per direction, or one link per function).
fn attach(
    skel: &RecorderSkel,
    cfg: &RecorderConfig,
    resolved: &Resolved,
    attempt: Attempt,
) -> Result<Vec<Link>, SessionError> {
    use SessionError::*;
    let mut links: Vec<Link> = Vec::new();
    if cfg.page_faults && attempt.fault_timing {
        match skel.progs.on_handle_mm_fault_exit.attach() {
            Ok(l) => links.push(l),
            Err(e) => return Err(Fexit(attach_error("fexit/handle_mm_fault".into(), e))),
        }
    }
    if cfg.sched {
        links.push(
            skel.progs
                .on_sched_switch
                .attach()
                .map_err(|e| Fatal(attach_error("tp_btf/sched_switch".into(), e)))?,
        );
    }
    if cfg.page_faults {
        links.push(
            skel.progs
                .on_page_fault_user
                .attach()
                .map_err(|e| Fatal(attach_error("tp_btf/page_fault_user".into(), e)))?,
        );
    }
    if let (Some(lib), true) = (&resolved.library, attempt.multi) {
        links.extend(attach_uprobe_multi(skel, cfg, resolved, lib)?);
    } else if let Some(lib) = &resolved.library {
        links.extend(attach_uprobes_one_by_one(skel, cfg, resolved, lib)?);
    }
    Ok(links)
}

/// One uprobe_multi link for all entry probes and one for all return probes.
fn attach_uprobe_multi(
    skel: &RecorderSkel,
    cfg: &RecorderConfig,
    resolved: &Resolved,
    lib: &std::path::Path,
) -> Result<Vec<Link>, SessionError> {
    use SessionError::*;
    let mut links = Vec::new();
    for retprobe in [false, true] {
        if retprobe && !cfg.return_probes {
            continue;
        }
        let prog = if retprobe {
            &skel.progs.uprobe_multi_exit
        } else {
            &skel.progs.uprobe_multi_enter
        };
        let opts = UprobeMultiOpts {
            offsets: resolved
                .targets
                .iter()
                .map(|t| t.file_offset as usize)
                .collect(),
            cookies: (0..resolved.targets.len() as u64).collect(),
            retprobe,
            ..Default::default()
        };
        let what = format!(
            "{} uprobe_multi on {} functions of {}",
            if retprobe { "return" } else { "entry" },
            resolved.targets.len(),
            lib.display()
        );
        match prog.attach_uprobe_multi_with_opts(cfg.pid as i32, lib, "", opts) {
            Ok(link) => links.push(link),
            Err(e) => {
                let err = attach_error(what, e);
                // Missing privileges are no reason to try single links.
                return Err(if matches!(err, RecorderError::NotPrivileged { .. }) {
                    Fatal(err)
                } else {
                    Multi(err)
                });
            }
        }
    }
    Ok(links)
}

/// One uprobe (and uretprobe) link per probed function.
fn attach_uprobes_one_by_one(
    skel: &RecorderSkel,
    cfg: &RecorderConfig,
    resolved: &Resolved,
    lib: &std::path::Path,
) -> Result<Vec<Link>, SessionError> {
    let mut links = Vec::new();
    for (i, t) in resolved.targets.iter().enumerate() {
        for retprobe in [false, true] {
            if retprobe && !cfg.return_probes {
                continue;
            }
            let prog = if retprobe {
                &skel.progs.uprobe_exit
            } else {
                &skel.progs.uprobe_enter
            };
            let opts = UprobeOpts {
                cookie: i as u64,
                retprobe,
                ..Default::default()
            };
            let link = prog
                .attach_uprobe_with_opts(cfg.pid as i32, lib, t.file_offset as usize, opts)
                .map_err(|e| {
                    SessionError::Fatal(attach_error(
                        format!(
                            "{} on {} ({}+0x{:x})",
                            if retprobe { "uretprobe" } else { "uprobe" },
                            t.function,
                            lib.display(),
                            t.file_offset
                        ),
                        e,
                    ))
                })?;
            links.push(link);
        }
    }
    Ok(links)
}

/// What the ring buffer gave until the recording stopped, with the stacks learnt while
/// the target was alive.
struct Drained {
    events: Vec<RawEvent>,
    book: StackBook,
    /// The stack map's frames by stack id.
    stack_cache: HashMap<i64, Vec<u64>>,
    /// Copied stacks, unwound as they arrived.
    unwound: HashMap<CallKey, Vec<u64>>,
}

/// Polls the ring buffer until `stop`, reading new stacks as they arrive; then detaches
/// (`links` dropped) and drains what is left.
fn drain_until_stopped(
    skel: &RecorderSkel,
    cfg: &RecorderConfig,
    stop: &AtomicBool,
    links: Vec<Link>,
    warnings: &mut Vec<String>,
) -> Drained {
    let events: RefCell<Vec<RawEvent>> = RefCell::new(Vec::new());
    let mut book = StackBook::new(cfg.pid);
    let mut stack_cache: HashMap<i64, Vec<u64>> = HashMap::new();
    // Copied stacks are unwound as they arrive (the copies are not kept), while
    // the target's mappings are those the stacks ran in.
    let unwinder: RefCell<Option<UserUnwinder>> =
        RefCell::new((cfg.stack_copy_bytes > 0).then(|| UserUnwinder::new(cfg.pid)));
    let fresh_unwound: RefCell<Vec<(CallKey, Vec<u64>)>> = RefCell::new(Vec::new());
    let mut unwound: HashMap<CallKey, Vec<u64>> = HashMap::new();
    let mut processed = 0usize;
    {
        let mut rbb = RingBufferBuilder::new();
        let added = rbb
            .add(&skel.maps.events, |data: &[u8]| {
                if let Some(copy) = StackCopy::parse(data) {
                    if let Some(u) = unwinder.borrow_mut().as_mut() {
                        let frames = u.unwind(&copy);
                        let key = (copy.tid, copy.enter, copy.function);
                        fresh_unwound.borrow_mut().push((key, frames));
                    }
                } else if let Some(e) = RawEvent::parse(data) {
                    events.borrow_mut().push(e);
                }
                0
            })
            .map(|_| ());
        let rb = match added.and_then(|()| rbb.build()) {
            Ok(rb) => Some(rb),
            Err(e) => {
                warnings.push(format!("ring buffer setup failed: {e}; no records"));
                None
            }
        };
        let mut poll_error = false;
        // New stacks are read and normalized while the target is alive.
        let mut learn =
            |events: &RefCell<Vec<RawEvent>>, processed: &mut usize, book: &mut StackBook| {
                let evs = events.borrow();
                for e in &evs[*processed..] {
                    if e.kind != EV_UPROBE {
                        continue;
                    }
                    if e.stack_id >= 0 && !stack_cache.contains_key(&e.stack_id) {
                        let frames = skel
                            .maps
                            .stacks
                            .lookup(&(e.stack_id as u32).to_ne_bytes(), MapFlags::ANY)
                            .ok()
                            .flatten()
                            .map(|b| parse_stack(&b))
                            .unwrap_or_default();
                        book.note(frames.iter().copied());
                        stack_cache.insert(e.stack_id, frames);
                    }
                    book.note([e.ret_addr]);
                }
                *processed = evs.len();
                for (key, frames) in fresh_unwound.borrow_mut().drain(..) {
                    book.note(frames.iter().copied());
                    unwound.insert(key, frames);
                }
                book.flush();
            };
        if let Some(rb) = &rb {
            // BPF submits without waking us unless the buffer is a quarter
            // full, so each round waits up to poll_interval, then drains.
            while !stop.load(Ordering::Acquire) {
                if let Err(e) = rb.poll(cfg.poll_interval).and_then(|_| rb.consume()) {
                    if e.kind() != ErrorKind::Interrupted && !poll_error {
                        warnings.push(format!("ring buffer poll: {e}"));
                        poll_error = true;
                        std::thread::sleep(cfg.poll_interval);
                    }
                }
                learn(&events, &mut processed, &mut book);
            }
        } else {
            while !stop.load(Ordering::Acquire) {
                std::thread::sleep(cfg.poll_interval);
            }
        }
        // Detach first so that nothing new arrives, then drain.
        drop(links);
        if let Some(rb) = &rb {
            let _ = rb.consume();
        }
        learn(&events, &mut processed, &mut book);
    }
    if let Some(u) = unwinder.borrow_mut().as_mut() {
        warnings.append(&mut u.errors);
    }
    Drained {
        events: events.into_inner(),
        book,
        stack_cache,
        unwound,
    }
}

/// The BPF programs' counters at the end of a recording.
struct Counters {
    ringbuffer_dropped: u64,
    stack_errors: u64,
    faults_untimed: u64,
    stack_walks: u64,
    stacks_reused: u64,
    stack_copies: u64,
    stack_copies_dropped: u64,
}

impl Counters {
    fn read(skel: &RecorderSkel) -> Counters {
        let counter = |idx: u32| -> u64 {
            skel.maps
                .counters
                .lookup(&idx.to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .and_then(|b| {
                    b.get(..8)
                        .map(|s| u64::from_ne_bytes(s.try_into().unwrap()))
                })
                .unwrap_or(0)
        };
        Counters {
            ringbuffer_dropped: counter(CNT_RB_DROPPED),
            stack_errors: counter(CNT_STACK_ERRORS),
            faults_untimed: counter(CNT_FAULTS_UNTIMED),
            stack_walks: counter(CNT_STACK_WALKS),
            stacks_reused: counter(CNT_STACK_REUSED),
            stack_copies: counter(CNT_STACK_COPIES),
            stack_copies_dropped: counter(CNT_STACK_COPIES_DROPPED),
        }
    }
}

/// The page faults still pending at stop, added to `events` with duration 0; how many.
fn pending_faults(skel: &RecorderSkel, events: &mut Vec<RawEvent>) -> u64 {
    let mut pending = 0;
    for key in skel.maps.faults.keys() {
        if let Ok(Some(v)) = skel.maps.faults.lookup(&key, MapFlags::ANY) {
            if let (Some((ts, address, error_code)), Ok(k)) =
                (parse_fault_state(&v), <[u8; 4]>::try_from(key.as_slice()))
            {
                events.push(RawEvent {
                    kind: EV_FAULT,
                    tid: u32::from_ne_bytes(k),
                    t0: ts,
                    t1: 0,
                    arg: address,
                    ret_addr: error_code,
                    ..Default::default()
                });
                pending += 1;
            }
        }
    }
    pending
}

/// A probed call: thread, entry time, function index (what ties a stack copy
/// to its uprobe record).
type CallKey = (u32, u64, u32);

/// The user stack of one call: the stack map's frames, with the return address
/// read at entry inserted as the call-site frame when the unwinder missed it
/// (at a function's first instruction the frame-pointer chain skips the caller);
/// or, when its stack copy unwound to more frames than that, the unwound stack.
/// The flag says which.
fn call_stack(
    e: &RawEvent,
    stack_cache: &HashMap<i64, Vec<u64>>,
    unwound: &HashMap<CallKey, Vec<u64>>,
) -> (Vec<u64>, bool) {
    let mut frames = stack_cache.get(&e.stack_id).cloned().unwrap_or_default();
    if e.ret_addr != 0 && !frames.contains(&e.ret_addr) {
        let at = 1.min(frames.len());
        frames.insert(at, e.ret_addr);
    }
    match unwound.get(&(e.tid, e.t0, e.aux)) {
        Some(longer) if longer.len() > frames.len() => (longer.clone(), true),
        _ => (frames, false),
    }
}

fn build_records(
    events: &[RawEvent],
    resolved: &Resolved,
    stack_cache: &HashMap<i64, Vec<u64>>,
    unwound: &HashMap<CallKey, Vec<u64>>,
    book: &mut StackBook,
) -> (Vec<Record>, u64) {
    let uprobe_events: Vec<&RawEvent> = events.iter().filter(|e| e.kind == EV_UPROBE).collect();
    let mut stacks_unwound = 0;
    let raw_stacks: Vec<Vec<u64>> = uprobe_events
        .iter()
        .map(|e| {
            let (frames, from_copy) = call_stack(e, stack_cache, unwound);
            stacks_unwound += from_copy as u64;
            frames
        })
        .collect();
    let mut stacks = book.symbolize(&raw_stacks).into_iter();

    let mut out = Vec::with_capacity(events.len());
    for e in events {
        let rec = match e.kind {
            EV_UPROBE => {
                let stack = stacks.next().unwrap_or_default();
                let function = resolved
                    .targets
                    .get(e.aux as usize)
                    .map(|t| t.function.clone())
                    .unwrap_or_else(|| format!("fn#{}", e.aux));
                Record::Uprobe {
                    rid: 0,
                    tid: e.tid,
                    function: function.into(),
                    enter: e.t0,
                    exit: e.t1.max(e.t0),
                    handle: e.arg,
                    stack: stack.into(),
                }
            }
            EV_SCHED => Record::Sched {
                rid: 0,
                tid: e.tid,
                cpu: e.aux,
                switch_out: e.t0,
                switch_in: e.t1.max(e.t0),
                reason: match e.reason {
                    REASON_PREEMPTED => SwitchReason::Preempted,
                    REASON_TRACED => SwitchReason::Traced,
                    REASON_BLOCKED => SwitchReason::Blocked,
                    _ => SwitchReason::Blocked,
                },
            },
            EV_FAULT => Record::PageFault {
                rid: 0,
                tid: e.tid,
                ts: e.t0,
                duration: if e.aux & FAULT_TIMED != 0 {
                    e.t1.saturating_sub(e.t0)
                } else {
                    0
                },
                address: e.arg,
                major: e.aux & FAULT_MAJOR != 0,
            },
            _ => continue,
        };
        out.push(rec);
    }
    (crate::finish_records(out), stacks_unwound)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uprobe_event(stack_id: i64, ret_addr: u64) -> RawEvent {
        RawEvent {
            kind: EV_UPROBE,
            tid: 7,
            t0: 1000,
            t1: 2000,
            ret_addr,
            stack_id,
            aux: 3,
            ..Default::default()
        }
    }

    /// The frame-pointer stack gets the call site; a copy of the same call that
    /// unwound further replaces it, one that did not (or of another call) does not.
    #[test]
    fn the_longer_of_the_walked_and_the_unwound_stack_is_kept() {
        let walked = HashMap::from([(5i64, vec![0x10, 0x30])]);
        let e = uprobe_event(5, 0x20);
        let none = HashMap::new();
        assert_eq!(
            call_stack(&e, &walked, &none),
            (vec![0x10, 0x20, 0x30], false)
        );
        let deeper = HashMap::from([((7, 1000, 3), vec![0x10, 0x20, 0x30, 0x40])]);
        assert_eq!(
            call_stack(&e, &walked, &deeper),
            (vec![0x10, 0x20, 0x30, 0x40], true)
        );
        let shorter = HashMap::from([((7, 1000, 3), vec![0x10, 0x20])]);
        assert!(!call_stack(&e, &walked, &shorter).1);
        let other_call = HashMap::from([((7, 1001, 3), vec![1, 2, 3, 4, 5])]);
        assert!(!call_stack(&e, &walked, &other_call).1);
        // No walk at all (stack map full): the copy still gives the stack.
        let lost = uprobe_event(-14, 0x20);
        assert!(call_stack(&lost, &walked, &deeper).1);
    }
}
