//! Executes a scenario for real: one OS thread per declared host thread (pool
//! members included) and one injector thread, request arrivals dispatched on
//! schedule, work handed across queues over channels, every CUDA call made
//! with the driver API and bound to its op id through CUPTI's external
//! correlation stack.
//!
//! What the executor logs is what the ground truth needs and the device
//! cannot tell: which call created which op on which stream, the stream's
//! previous ops at that moment (taken under the stream's lock, so it is the
//! stream's real order), which event record a wait targeted, which ops a
//! synchronization waited for, and the host-side events (task begin,
//! handoffs, NVTX ranges, injected stalls) with CLOCK_MONOTONIC times.

mod calls;
mod inject;
mod log;
mod threads;

pub use log::*;

use super::driver::{check_cuda, launch, Args, Func, LaunchVia, Ptr, SendHandle};
use super::plan::{DevAction, Plan, Stretch};
use super::{call_sites, cupti};
use super::{now, spin_until};
use crate::keys::StepKey;
use cudarc::driver::sys::{self, CUresult};
use ground_truth::scenario::{
    InjectionKind, KernelKind, LaunchApi, ObjectKind, Scenario, Step, SyncTarget,
};
use ground_truth::trace::{CopyDirection, HostMemory};
use ground_truth::{Mode, Ns};
use kernels::Kernel;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Barrier, Mutex};

struct StreamState {
    handle: SendHandle<sys::CUstream>,
    cupti_id: u32,
    generation: u32,
    priority: i32,
    tail: Tail,
}

struct EventState {
    handle: SendHandle<sys::CUevent>,
    /// Events in this event's ring (`EventDecl::count`), on every slot.
    ring: u32,
    generation: u32,
    last: Option<u64>,
}

struct GraphState {
    graph: SendHandle<sys::CUgraph>,
    exec: SendHandle<sys::CUgraphExec>,
    generation: u32,
    /// Template-graph node of each decl node (for kernel-parameter updates).
    nodes: Vec<SendHandle<sys::CUgraphNode>>,
    /// Launch arguments each node was captured with.
    args: Vec<Args>,
    funcs: Vec<Func>,
    sinks: Vec<u32>,
}

enum Msg {
    Item(Item),
    Stop,
}

struct Item {
    request: usize,
    step: usize,
    handoff: Option<(u64, String)>,
}

/// Resources the session lends a run.
pub struct Device<'a> {
    pub ctx: SendHandle<sys::CUcontext>,
    /// The project's CUPTI recorder; `None` when the process runs without it
    /// (`causalbench workload`: an external collector may own CUPTI there).
    pub recorder: Option<&'a cupti::Recorder>,
    /// CUDA events around every copy and memset, timing them without CUPTI
    /// (`super::copy_stamps`); `None` when CUPTI times them.
    pub copy_stamps: Option<&'a super::copy_stamps::CopyStamps>,
    pub funcs: &'a HashMap<(String, Kernel), (Func, String)>,
    pub iterations: &'a HashMap<(Kernel, u32, u32, u64), u32>,
    pub sms: u32,
    pub priorities: (i32, i32),
    pub log: Ptr,
    pub log_slots: u32,
    /// Launch + teardown time CUPTI adds to a spin kernel's requested
    /// duration (measured at session start), taken off every spin so the
    /// kernel lasts what the scenario asks for.
    pub spin_overhead_ns: u64,
    pub dev_a: Ptr,
    pub dev_b: Ptr,
    pub dev_cap: usize,
    pub pinned: usize,
    pub pageable: usize,
}

const IDLE: u32 = 0;
const REQUEST: u32 = 1;
const ACK: u32 = 2;
const DESCHEDULE: u32 = 3;

/// How long the victim of a `cpu_deschedule` takes to run again after the hog
/// stops, learned over this process's earlier deschedules (the hog's exit and
/// the victim's return to its CPU take tens of microseconds): the hog ends
/// that much early, so the stall lasts what was requested. Only the resume is
/// learned, not a late start of the hog: learning that too shortened every
/// later hog and left the victim spinning on its CPU instead of switched out.
/// Calibration of the mechanism only; the stall recorded is always the one
/// measured.
static DESCHEDULE_RESUME_NS: AtomicU64 = AtomicU64::new(0);
const DESCHEDULE_RESUME_MAX_NS: u64 = 300_000;

struct Injector {
    state: AtomicU32,
    victim_tid: AtomicU32,
    /// The CPU the victim pinned itself to (`usize::MAX`: unknown).
    victim_cpu: AtomicUsize,
    /// When the victim asked to be descheduled (the stall is anchored there).
    deschedule_at: AtomicU64,
    /// When the hog stopped spinning (0 until it did).
    hog_end: AtomicU64,
    done: AtomicBool,
    report: Mutex<Option<Result<injectors::HogReport, String>>>,
}

pub struct Exec<'a> {
    sc: &'a Scenario,
    dev: &'a Device<'a>,
    plan: Option<&'a Plan>,
    seed: u64,
    instrumented: bool,
    streams: Vec<Mutex<StreamState>>,
    /// The injector's two streams, both at the highest priority (`DevAction::Kernel::lane`).
    injector_streams: [usize; 2],
    events: Mutex<Vec<EventState>>,
    graphs: Vec<Mutex<GraphState>>,
    stream_ix: HashMap<&'a str, usize>,
    event_ix: HashMap<&'a str, usize>,
    graph_ix: HashMap<&'a str, usize>,
    next_op: AtomicU64,
    next_slot: AtomicU32,
    pools: HashMap<&'a str, Vec<usize>>,
    senders: Vec<Mutex<Sender<Msg>>>,
    busy: Vec<AtomicBool>,
    queued: Vec<AtomicUsize>,
    tids: Vec<AtomicU32>,
    done: AtomicUsize,
    errors: Mutex<Vec<String>>,
    stalls: Mutex<Vec<Stall>>,
    requests: Vec<ReqInfo>,
    inj: Injector,
    graph_meta: Vec<GraphMeta>,
    /// The kernel of every kernel step, resolved once: [program][step].
    step_funcs: Vec<Vec<Option<(Func, String)>>>,
    /// Kernel name and call site of every step, shared by its ops: [program][step].
    step_names: Vec<Vec<StepNames>>,
}

/// A step's kernel name and call site, shared by the ops it issues.
type StepNames = (Arc<str>, Option<Arc<str>>);

fn pos_of<'a>(names: impl Iterator<Item = &'a str>) -> HashMap<&'a str, usize> {
    names.enumerate().map(|(i, n)| (n, i)).collect()
}

impl<'a> Exec<'a> {
    /// Creates the run's streams, events and graphs (before the origin).
    pub fn new(
        sc: &'a Scenario,
        dev: &'a Device<'a>,
        plan: Option<&'a Plan>,
        seed: u64,
    ) -> Result<Exec<'a>, String> {
        let (least, greatest) = dev.priorities;
        let clamp = |p: i32| p.clamp(greatest.min(least), least.max(greatest));
        let mut streams = Vec::new();
        for decl in &sc.streams {
            streams.push(Mutex::new(create_stream(dev, clamp(decl.priority))?));
        }
        // The injector's streams have the highest priority, so a hog's blocks
        // are dispatched before the victim's when both are waiting for SMs.
        let injector_streams = [streams.len(), streams.len() + 1];
        for _ in injector_streams {
            streams.push(Mutex::new(create_stream(dev, greatest)?));
        }
        let mut events = Vec::new();
        let mut event_ix = HashMap::new();
        for ev in &sc.events {
            event_ix.insert(ev.name.as_str(), events.len());
            for _ in 0..ev.count.max(1) {
                events.push(EventState {
                    handle: SendHandle(create_event()?),
                    ring: ev.count.max(1),
                    generation: 0,
                    last: None,
                });
            }
        }
        let mut requests = Vec::new();
        let mut arrivals = Vec::new();
        for (pi, p) in sc.programs.iter().enumerate() {
            for i in 0..p.requests {
                let at = ((p.offset_us + p.interval_us * i as f64) * 1000.0).round() as Ns;
                arrivals.push((at, pi, i));
            }
        }
        arrivals.sort();
        for (k, (at, pi, i)) in arrivals.into_iter().enumerate() {
            requests.push(ReqInfo {
                program: pi,
                index: i,
                token: k as u64 + 1,
                at_rel: at,
            });
        }
        let mut pools: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut n = 0usize;
        for t in &sc.threads {
            pools.insert(&t.name, (n..n + t.count as usize).collect());
            n += t.count as usize;
        }
        // Thread n is the injector.
        let mut e = Exec {
            sc,
            dev,
            plan,
            seed,
            instrumented: sc.mode == Mode::Instrumented,
            streams,
            injector_streams,
            events: Mutex::new(events),
            graphs: Vec::new(),
            stream_ix: pos_of(sc.streams.iter().map(|s| s.name.as_str())),
            event_ix,
            graph_ix: pos_of(sc.graphs.iter().map(|s| s.name.as_str())),
            next_op: AtomicU64::new(1),
            next_slot: AtomicU32::new(0),
            pools,
            senders: Vec::new(),
            busy: (0..=n).map(|_| AtomicBool::new(false)).collect(),
            queued: (0..=n).map(|_| AtomicUsize::new(0)).collect(),
            tids: (0..=n).map(|_| AtomicU32::new(0)).collect(),
            done: AtomicUsize::new(0),
            errors: Mutex::new(Vec::new()),
            stalls: Mutex::new(Vec::new()),
            requests,
            inj: Injector {
                state: AtomicU32::new(IDLE),
                victim_tid: AtomicU32::new(0),
                victim_cpu: AtomicUsize::new(usize::MAX),
                deschedule_at: AtomicU64::new(0),
                hog_end: AtomicU64::new(0),
                done: AtomicBool::new(false),
                report: Mutex::new(None),
            },
            graph_meta: Vec::new(),
            step_funcs: Vec::new(),
            step_names: Vec::new(),
        };
        e.step_names = sc
            .programs
            .iter()
            .map(|p| {
                p.steps
                    .iter()
                    .map(|s| match s {
                        Step::Kernel {
                            name, call_site, ..
                        } => (
                            Arc::from(name.as_str()),
                            call_site.as_deref().map(Arc::from),
                        ),
                        Step::Copy { call_site, .. } => {
                            (Arc::from(""), call_site.as_deref().map(Arc::from))
                        }
                        _ => (Arc::from(""), None),
                    })
                    .collect()
            })
            .collect();
        for site in e.step_names.iter().flatten().filter_map(|n| n.1.as_deref()) {
            if let Err(w) = call_sites::register(site) {
                eprintln!("causalbench: {w}");
            }
        }
        e.step_funcs = sc
            .programs
            .iter()
            .map(|p| {
                p.steps
                    .iter()
                    .map(|s| match s {
                        Step::Kernel { name, kind, .. } => e.func(name, Kernel::from(*kind)).ok(),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        for gi in 0..sc.graphs.len() {
            let g = e.capture(gi)?;
            e.graphs.push(Mutex::new(g));
        }
        Ok(e)
    }

    fn func(&self, name: &str, kernel: Kernel) -> Result<(Func, String), String> {
        self.dev
            .funcs
            .get(&(name.to_string(), kernel))
            .cloned()
            .ok_or_else(|| format!("kernel `{name}` ({kernel:?}) was not prepared"))
    }

    fn slot(&self) -> u32 {
        let s = self.next_slot.fetch_add(1, Ordering::Relaxed);
        s % self.dev.log_slots
    }

    /// The slot argument of a node of graph `gi`: a ring with an entry per
    /// replay the scenario launches (`kernels::LogRing`), so every replay's
    /// times are logged, not only the last's; one plain slot where the ring
    /// would not fit the log without wrapping.
    fn graph_node_slot(&self, gi: usize) -> u32 {
        let capacity = graph_launches(self.sc, gi).clamp(1, kernels::LogRing::MAX_CAPACITY);
        let header = self.next_slot.fetch_add(capacity + 1, Ordering::Relaxed);
        let ring = kernels::LogRing { header, capacity };
        match ring.slot_arg() {
            Some(arg) if header + ring.entries() <= self.dev.log_slots => arg,
            _ => self.slot(),
        }
    }

    /// Kernel arguments for a scenario kernel of `kind` lasting `dur_ns`.
    fn kernel_args(
        &self,
        kernel: Kernel,
        grid: u32,
        block: u32,
        dur_ns: u64,
        op: u64,
        slot: u32,
    ) -> Args {
        let mut a = Args {
            op_id: op,
            log: self.dev.log,
            slot,
            ..Default::default()
        };
        match kernel {
            Kernel::Spin => {
                let o = self.dev.spin_overhead_ns;
                a.a = if dur_ns > 4 * o { dur_ns - o } else { dur_ns };
            }
            Kernel::OccupancyHog => a.a = dur_ns,
            Kernel::MemoryBound => {
                let bytes = (self.dev.dev_cap.min(64 << 20) as u64) & !15;
                a.a = self.dev.dev_a;
                a.b = self.dev.dev_b;
                a.c = bytes / 16;
                a.iters = self
                    .dev
                    .iterations
                    .get(&(kernel, grid, block, dur_ns))
                    .copied()
                    .unwrap_or(1);
            }
            Kernel::ComputeBound => {
                a.a = 0;
                a.iters = self
                    .dev
                    .iterations
                    .get(&(kernel, grid, block, dur_ns))
                    .copied()
                    .unwrap_or(1);
            }
            Kernel::Empty => {}
        }
        a
    }

    /// Captures graph `gi` from a stream: one forked stream per node, event
    /// edges for the declared dependencies, joined back to the origin stream.
    fn capture(&mut self, gi: usize) -> Result<GraphState, String> {
        let decl = &self.sc.graphs[gi];
        let dev = self.dev;
        let origin = create_stream(dev, 0)?.handle.0;
        let mut aux = Vec::new();
        let mut evs = Vec::new();
        for _ in &decl.nodes {
            aux.push(create_stream(dev, 0)?.handle.0);
            evs.push(create_event_flags(2)?);
        }
        let ev_origin = create_event_flags(2)?;
        let mut args = Vec::new();
        let mut funcs = Vec::new();
        let mut entries = Vec::new();
        let mut slots = Vec::new();
        let mut has_dependants = vec![false; decl.nodes.len()];
        let idx = |id: &str| decl.nodes.iter().position(|n| n.id == id);
        let mut resolved = Vec::new();
        for n in &decl.nodes {
            resolved.push(self.func(&n.kernel.name, Kernel::from(n.kernel.kind))?);
        }
        // SAFETY: handles created above; capture is thread-local to this thread.
        unsafe {
            check_cuda(
                "cuStreamBeginCapture",
                sys::cuStreamBeginCapture_v2(
                    origin,
                    sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                ),
            )?;
            let mut result = Ok(());
            check_cuda(
                "cuEventRecord(capture origin)",
                sys::cuEventRecord(ev_origin, origin),
            )?;
            for (ni, n) in decl.nodes.iter().enumerate() {
                let s = aux[ni];
                if n.after.is_empty() {
                    result = result.and(check_cuda(
                        "cuStreamWaitEvent(capture)",
                        sys::cuStreamWaitEvent(s, ev_origin, 0),
                    ));
                }
                for a in &n.after {
                    if let Some(j) = idx(a) {
                        has_dependants[j] = true;
                        result = result.and(check_cuda(
                            "cuStreamWaitEvent(capture)",
                            sys::cuStreamWaitEvent(s, evs[j], 0),
                        ));
                    }
                }
                let kernel = Kernel::from(n.kernel.kind);
                let (f, entry) = resolved[ni].clone();
                let slot = self.graph_node_slot(gi);
                let dur = (n.kernel.duration_us * 1000.0).round() as u64;
                let op_id = graph_op_id(gi, ni);
                let mut a =
                    self.kernel_args(kernel, n.kernel.grid, n.kernel.block, dur, op_id, slot);
                result = result.and(check_cuda(
                    "cuLaunchKernel(capture)",
                    launch(
                        &f,
                        n.kernel.grid,
                        n.kernel.block,
                        s,
                        &mut a,
                        LaunchVia::Launch,
                    ),
                ));
                result = result.and(check_cuda(
                    "cuEventRecord(capture)",
                    sys::cuEventRecord(evs[ni], s),
                ));
                args.push(a);
                funcs.push(f);
                entries.push(entry);
                slots.push(slot);
            }
            for &ev in &evs {
                result = result.and(check_cuda(
                    "cuStreamWaitEvent(capture join)",
                    sys::cuStreamWaitEvent(origin, ev, 0),
                ));
            }
            let mut graph: sys::CUgraph = std::ptr::null_mut();
            let end = check_cuda(
                "cuStreamEndCapture",
                sys::cuStreamEndCapture(origin, &mut graph),
            );
            result?;
            end?;
            let mut exec: sys::CUgraphExec = std::ptr::null_mut();
            check_cuda(
                "cuGraphInstantiate",
                sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0),
            )?;
            // Template nodes by the op id each kernel was captured with.
            let mut count = 0usize;
            check_cuda(
                "cuGraphGetNodes",
                sys::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut count),
            )?;
            let mut all = vec![std::ptr::null_mut(); count];
            check_cuda(
                "cuGraphGetNodes",
                sys::cuGraphGetNodes(graph, all.as_mut_ptr(), &mut count),
            )?;
            let mut nodes = vec![SendHandle(std::ptr::null_mut()); decl.nodes.len()];
            let mut by_func: Vec<(sys::CUgraphNode, sys::CUfunction)> = Vec::new();
            for &node in &all {
                let mut ty: u32 = u32::MAX;
                if sys::cuGraphNodeGetType(node, &mut ty as *mut u32 as *mut sys::CUgraphNodeType)
                    != CUresult::CUDA_SUCCESS
                    || ty != 0
                {
                    continue;
                }
                let mut p: sys::CUDA_KERNEL_NODE_PARAMS = std::mem::zeroed();
                if sys::cuGraphKernelNodeGetParams_v2(node, &mut p) != CUresult::CUDA_SUCCESS {
                    continue;
                }
                by_func.push((node, p.func));
                if p.kernelParams.is_null() {
                    continue;
                }
                let first = *p.kernelParams;
                if first.is_null() {
                    continue;
                }
                let id = (first as *const u64).read_unaligned();
                if let Some(ni) = (0..decl.nodes.len()).find(|&ni| graph_op_id(gi, ni) == id) {
                    nodes[ni] = SendHandle(node);
                }
            }
            // Fallback: a node whose function no other node uses.
            for ni in 0..decl.nodes.len() {
                if !nodes[ni].0.is_null() {
                    continue;
                }
                let same: Vec<_> = by_func
                    .iter()
                    .filter(|(n, f)| *f == funcs[ni].f.0 && !nodes.iter().any(|m| m.0 == *n))
                    .collect();
                if same.len() == 1 {
                    nodes[ni] = SendHandle(same[0].0);
                }
            }
            for s in aux {
                sys::cuStreamDestroy_v2(s);
            }
            for ev in evs {
                sys::cuEventDestroy_v2(ev);
            }
            sys::cuEventDestroy_v2(ev_origin);
            sys::cuStreamDestroy_v2(origin);
            self.graph_meta.push(GraphMeta { entries, slots });
            Ok(GraphState {
                graph: SendHandle(graph),
                exec: SendHandle(exec),
                generation: 0,
                nodes,
                args,
                funcs,
                sinks: (0..decl.nodes.len() as u32)
                    .filter(|&i| !has_dependants[i as usize])
                    .collect(),
            })
        }
    }
}

/// Reserves `cap` elements and touches their pages.
/// How many times the scenario launches graph `gi`: every request of a
/// program runs each of its graph-launch steps once.
fn graph_launches(sc: &Scenario, gi: usize) -> u32 {
    let Some(name) = sc.graphs.get(gi).map(|g| &g.name) else {
        return 0;
    };
    sc.programs
        .iter()
        .map(|p| {
            let steps = p
                .steps
                .iter()
                .filter(|s| matches!(s, Step::GraphLaunch { graph, .. } if graph == name))
                .count() as u32;
            steps.saturating_mul(p.requests)
        })
        .fold(0u32, u32::saturating_add)
}

fn prefault<T>(v: &mut Vec<T>, cap: usize) {
    v.reserve(cap);
    let spare = v.spare_capacity_mut();
    // SAFETY: writes bytes into the uninitialised spare capacity only (the
    // length is unchanged); this just makes the kernel map its pages now.
    unsafe {
        std::ptr::write_bytes(
            spare.as_mut_ptr() as *mut u8,
            0,
            std::mem::size_of_val(spare),
        )
    };
}

fn skey_plain(plan: Option<&Plan>) -> bool {
    plan.is_some_and(|p| p.stretch_graph_node().is_none())
}

fn set_node_duration(g: &GraphState, ni: usize, dur: u64) -> Result<(), String> {
    let node = g.nodes[ni].0;
    if node.is_null() {
        return Err("the captured graph node was not found".into());
    }
    let f = &g.funcs[ni];
    let mut args = g.args[ni];
    args.a = dur;
    let mut params = args.params(f.kernel);
    // SAFETY: zeroed POD struct, then every used field set; params outlive the call.
    unsafe {
        let mut p: sys::CUDA_KERNEL_NODE_PARAMS = std::mem::zeroed();
        sys::cuGraphKernelNodeGetParams_v2(node, &mut p);
        p.func = f.f.0;
        p.kernelParams = params.as_mut_ptr();
        p.extra = std::ptr::null_mut();
        p.kern = std::ptr::null_mut();
        p.ctx = std::ptr::null_mut();
        check_cuda(
            "cuGraphExecKernelNodeSetParams",
            sys::cuGraphExecKernelNodeSetParams_v2(g.exec.0, node, &p),
        )
    }
}

fn create_stream(dev: &Device, priority: i32) -> Result<StreamState, String> {
    let mut s: sys::CUstream = std::ptr::null_mut();
    // SAFETY: out pointer; flags 1 = CU_STREAM_NON_BLOCKING.
    check_cuda("cuStreamCreateWithPriority", unsafe {
        sys::cuStreamCreateWithPriority(&mut s, 1, priority)
    })?;
    let cupti_id = stream_id(dev, s)?;
    Ok(StreamState {
        handle: SendHandle(s),
        cupti_id,
        generation: 0,
        priority,
        tail: Tail::Empty,
    })
}

/// Stream ids of a process without the CUPTI recorder: numbered from here,
/// far from CUPTI's small ids so the two are never mistaken for each other.
static OWN_STREAM_IDS: AtomicU32 = AtomicU32::new(1 << 20);

/// The id a stream's device ops carry: CUPTI's where the recorder runs in this
/// process, else a process-unique number of our own.
fn stream_id(dev: &Device, s: sys::CUstream) -> Result<u32, String> {
    match dev.recorder {
        // SAFETY: the session's live context and a stream of it.
        Some(r) => unsafe { r.stream_id(dev.ctx.0, s) },
        None => Ok(OWN_STREAM_IDS.fetch_add(1, Ordering::Relaxed)),
    }
}

fn create_event() -> Result<sys::CUevent, String> {
    create_event_flags(0)
}

fn create_event_flags(flags: u32) -> Result<sys::CUevent, String> {
    let mut e: sys::CUevent = std::ptr::null_mut();
    // SAFETY: out pointer.
    check_cuda("cuEventCreate", unsafe {
        sys::cuEventCreate(&mut e, flags)
    })?;
    Ok(e)
}
