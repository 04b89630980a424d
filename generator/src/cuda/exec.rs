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

use super::driver::{ck, launch, Args, Func, LaunchVia, Ptr, H};
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

/// A device op (or one node of a graph launch) as a stream predecessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DevRef {
    pub op: u64,
    pub gnode: Option<u32>,
}

/// A stream's last ops (one, except after a graph launch): no allocation
/// in the common case, since every enqueue replaces it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Tail {
    #[default]
    Empty,
    One(DevRef),
    Many(Vec<DevRef>),
}

impl Tail {
    pub fn as_slice(&self) -> &[DevRef] {
        match self {
            Tail::Empty => &[],
            Tail::One(d) => std::slice::from_ref(d),
            Tail::Many(v) => v,
        }
    }

    pub fn from_vec(mut v: Vec<DevRef>) -> Tail {
        match v.len() {
            0 => Tail::Empty,
            1 => Tail::One(v.pop().expect("one element")),
            _ => Tail::Many(v),
        }
    }

    fn one(op: u64) -> Tail {
        Tail::One(DevRef { op, gnode: None })
    }
}

/// What an op did (the full request, kept for diagnostics).
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub enum What {
    Kernel {
        name: Arc<str>,
        kind: KernelKind,
        /// Requested duration, injected stretch included.
        dur_ns: u64,
        extra_ns: u64,
        grid: u32,
        block: u32,
        launch: LaunchApi,
        /// Injector kernels: hog / backlog / unrelated.
        kernel: Kernel,
    },
    Copy {
        direction: CopyDirection,
        bytes: u64,
        extra_bytes: u64,
        memory: HostMemory,
    },
    Memset {
        bytes: u64,
        extra_bytes: u64,
    },
    EventRecord {
        event: usize,
    },
    StreamWait {
        event: usize,
    },
    GraphLaunch {
        graph: usize,
        extra_ns: u64,
    },
    Sync {
        target: SyncTarget,
    },
    Recreate,
}

/// One CUDA call the executor made.
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub struct Op {
    /// The recorder-private external correlation id (CUSTOM0).
    pub id: u64,
    pub thread: usize,
    pub tid: u32,
    /// Run request index (`None` for injector work).
    pub request: Option<usize>,
    pub skey: Option<StepKey>,
    pub what: What,
    /// Host-measured call interval (CLOCK_MONOTONIC).
    pub t0: Ns,
    pub t1: Ns,
    pub stream: Option<usize>,
    pub stream_cupti: u32,
    pub handle: u64,
    pub generation: u32,
    /// The stream's previous ops when this op was enqueued.
    pub prev: Tail,
    /// Stream waits: the event record op waited on.
    pub event_src: Option<u64>,
    /// Synchronizations: the device ops waited for.
    pub waited: Vec<DevRef>,
    pub operator: Option<Arc<str>>,
    pub call_site: Option<Arc<str>>,
    /// Device log slot (kernels).
    pub slot: Option<u32>,
    /// The name CUPTI reports for the kernel's entry point.
    pub entry: Option<String>,
    pub injected: bool,
    pub delays_target: bool,
    pub error: Option<String>,
}

/// An injected host stall that happened just before a step's call.
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub struct Stall {
    pub kind: InjectionKind,
    pub thread: usize,
    pub tid: u32,
    pub skey: StepKey,
    pub t0: Ns,
    pub t1: Ns,
    pub mechanism: String,
    pub requested_ns: u64,
    /// Longest interval the victim saw itself switched out (cpu_deschedule).
    pub switched_out_ns: Option<u64>,
}

#[derive(Debug, Clone)]
pub enum HostEv {
    TaskBegin {
        t: Ns,
        request: usize,
        handoff: Option<u64>,
        queue: String,
    },
    Handoff {
        t: Ns,
        id: u64,
        queue: String,
        request: usize,
        pending: Option<u64>,
    },
    Api {
        op: u64,
        fault: Option<usize>,
        pending: Option<u64>,
    },
    Stall {
        index: usize,
    },
    Nvtx {
        name: String,
        t0: Ns,
        t1: Ns,
    },
}

#[derive(Debug, Default)]
pub struct ThreadLog {
    pub tid: u32,
    pub events: Vec<HostEv>,
    pub ops: Vec<Op>,
    pub(crate) nvtx: Vec<(Arc<str>, Ns)>,
    pub(crate) pending: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Arrival {
    pub request: usize,
    pub t: Ns,
    pub tid: u32,
}

#[derive(Debug, Clone)]
pub struct ReqInfo {
    pub program: usize,
    pub index: u32,
    pub token: u64,
    /// Planned arrival, relative to the run's origin.
    pub at_rel: Ns,
}

/// Per graph: the kernel entry names and log slots of its nodes (decl order).
#[derive(Debug, Clone)]
pub struct GraphMeta {
    pub entries: Vec<String>,
    pub slots: Vec<u32>,
}

/// Everything one execution produced.
pub struct RunLog {
    pub origin: Ns,
    pub arrivals: Vec<Arrival>,
    pub threads: Vec<ThreadLog>,
    pub requests: Vec<ReqInfo>,
    pub graphs: Vec<GraphMeta>,
    pub stalls: Vec<Stall>,
    pub errors: Vec<String>,
    pub injector: Option<usize>,
    pub device_log: Vec<kernels::LogEntry>,
    pub flushed: cupti::Flushed,
    pub end: Ns,
}

struct StreamState {
    handle: H<sys::CUstream>,
    cupti_id: u32,
    generation: u32,
    priority: i32,
    tail: Tail,
}

struct EventState {
    handle: H<sys::CUevent>,
    generation: u32,
    last: Option<u64>,
}

struct GraphState {
    graph: H<sys::CUgraph>,
    exec: H<sys::CUgraphExec>,
    generation: u32,
    /// Template-graph node of each decl node (for kernel-parameter updates).
    nodes: Vec<H<sys::CUgraphNode>>,
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
    pub ctx: H<sys::CUcontext>,
    pub recorder: &'a cupti::Recorder,
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

/// How much longer than requested the victim of a `cpu_deschedule` stayed
/// stalled, learned over this process's earlier deschedules (the hog's exit
/// and the victim's return to its CPU take tens of microseconds): the hog ends
/// that much early, so the stall lasts what was requested. Calibration of the
/// mechanism only; the stall recorded is always the one measured.
static DESCHEDULE_RESUME_NS: AtomicU64 = AtomicU64::new(0);
const DESCHEDULE_RESUME_MAX_NS: u64 = 300_000;

struct Injector {
    state: AtomicU32,
    victim_tid: AtomicU32,
    /// When the victim asked to be descheduled (the stall is anchored there).
    deschedule_at: AtomicU64,
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
    injector_stream: usize,
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
        // The injector's stream has the highest priority, so a hog's blocks
        // are dispatched before the victim's when both are waiting for SMs.
        let injector_stream = streams.len();
        streams.push(Mutex::new(create_stream(dev, greatest)?));
        let mut events = Vec::new();
        for _ in &sc.events {
            events.push(EventState {
                handle: H(create_event()?),
                generation: 0,
                last: None,
            });
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
            injector_stream,
            events: Mutex::new(events),
            graphs: Vec::new(),
            stream_ix: pos_of(sc.streams.iter().map(|s| s.name.as_str())),
            event_ix: pos_of(sc.events.iter().map(|s| s.name.as_str())),
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
                deschedule_at: AtomicU64::new(0),
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
            ck(
                "cuStreamBeginCapture",
                sys::cuStreamBeginCapture_v2(
                    origin,
                    sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                ),
            )?;
            let mut result = Ok(());
            ck(
                "cuEventRecord(capture origin)",
                sys::cuEventRecord(ev_origin, origin),
            )?;
            for (ni, n) in decl.nodes.iter().enumerate() {
                let s = aux[ni];
                if n.after.is_empty() {
                    result = result.and(ck(
                        "cuStreamWaitEvent(capture)",
                        sys::cuStreamWaitEvent(s, ev_origin, 0),
                    ));
                }
                for a in &n.after {
                    if let Some(j) = idx(a) {
                        has_dependants[j] = true;
                        result = result.and(ck(
                            "cuStreamWaitEvent(capture)",
                            sys::cuStreamWaitEvent(s, evs[j], 0),
                        ));
                    }
                }
                let kernel = Kernel::from(n.kernel.kind);
                let (f, entry) = resolved[ni].clone();
                let slot = self.slot();
                let dur = (n.kernel.duration_us * 1000.0).round() as u64;
                let op_id = graph_op_id(gi, ni);
                let mut a =
                    self.kernel_args(kernel, n.kernel.grid, n.kernel.block, dur, op_id, slot);
                result = result.and(ck(
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
                result = result.and(ck("cuEventRecord(capture)", sys::cuEventRecord(evs[ni], s)));
                args.push(a);
                funcs.push(f);
                entries.push(entry);
                slots.push(slot);
            }
            for &ev in &evs {
                result = result.and(ck(
                    "cuStreamWaitEvent(capture join)",
                    sys::cuStreamWaitEvent(origin, ev, 0),
                ));
            }
            let mut graph: sys::CUgraph = std::ptr::null_mut();
            let end = ck(
                "cuStreamEndCapture",
                sys::cuStreamEndCapture(origin, &mut graph),
            );
            result?;
            end?;
            let mut exec: sys::CUgraphExec = std::ptr::null_mut();
            ck(
                "cuGraphInstantiate",
                sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0),
            )?;
            // Template nodes by the op id each kernel was captured with.
            let mut count = 0usize;
            ck(
                "cuGraphGetNodes",
                sys::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut count),
            )?;
            let mut all = vec![std::ptr::null_mut(); count];
            ck(
                "cuGraphGetNodes",
                sys::cuGraphGetNodes(graph, all.as_mut_ptr(), &mut count),
            )?;
            let mut nodes = vec![H(std::ptr::null_mut()); decl.nodes.len()];
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
                    nodes[ni] = H(node);
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
                    nodes[ni] = H(same[0].0);
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
                graph: H(graph),
                exec: H(exec),
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

    /// Runs the scenario; returns the log (the device is synchronized after).
    pub fn run(mut self) -> RunLog {
        let nthreads = self.busy.len() - 1;
        let mut rxs = Vec::new();
        for _ in 0..nthreads {
            let (tx, rx) = channel();
            self.senders.push(Mutex::new(tx));
            rxs.push(rx);
        }
        let injector_needed = self
            .plan
            .is_some_and(|p| !p.actions.is_empty() || p.kind == InjectionKind::CpuDeschedule);
        let barrier = Barrier::new(nthreads + 1 + injector_needed as usize);
        let me = &self;
        let mut origin = 0;
        let mut arrivals = Vec::new();
        let mut logs: Vec<ThreadLog> = Vec::new();
        let stop_injector = AtomicBool::new(false);
        std::thread::scope(|s| {
            let mut handles = Vec::new();
            for (ti, rx) in rxs.into_iter().enumerate() {
                let barrier = &barrier;
                handles.push(
                    std::thread::Builder::new()
                        .name(format!("cb-worker-{ti}"))
                        .spawn_scoped(s, move || me.worker(ti, rx, barrier))
                        .expect("spawn worker thread"),
                );
            }
            let inj = injector_needed.then(|| {
                let barrier = &barrier;
                let stop = &stop_injector;
                std::thread::Builder::new()
                    // Named like the workers: a thread name must not name the injector.
                    .name(format!("cb-worker-{nthreads}"))
                    .spawn_scoped(s, move || me.injector(nthreads, barrier, stop))
                    .expect("spawn injector thread")
            });
            // SAFETY: binding the primary context to the dispatcher thread.
            unsafe { sys::cuCtxSetCurrent(me.dev.ctx.0) };
            barrier.wait();
            origin = now() + 1_000_000;
            for (k, r) in me.requests.iter().enumerate() {
                spin_until(origin + r.at_rel);
                let p = &me.sc.programs[r.program];
                let m = me.pick(&p.start, false, crate::mix(k as u64 ^ 0xA11));
                let t = now();
                arrivals.push(Arrival {
                    request: k,
                    t,
                    tid: me.tids[m].load(Ordering::Relaxed),
                });
                me.send(
                    m,
                    Item {
                        request: k,
                        step: 0,
                        handoff: None,
                    },
                );
            }
            let deadline = now() + 30_000_000_000;
            while me.done.load(Ordering::Acquire) < me.requests.len() {
                if now() > deadline {
                    me.error("the run did not finish within 30 s".into());
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            for tx in &me.senders {
                let _ = tx.lock().map(|t| t.send(Msg::Stop));
            }
            stop_injector.store(true, Ordering::Release);
            for h in handles {
                match h.join() {
                    Ok(l) => logs.push(l),
                    Err(_) => {
                        me.error("a worker thread panicked".into());
                        logs.push(ThreadLog::default());
                    }
                }
            }
            if let Some(h) = inj {
                match h.join() {
                    Ok(l) => logs.push(l),
                    Err(_) => me.error("the injector thread panicked".into()),
                }
            }
        });
        let end = now();
        self.finish_deschedule();
        // SAFETY: the run's work is done; wait for the device before flushing.
        if let Err(e) = ck("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() }) {
            self.error(e);
        }
        let flushed = self.dev.recorder.flush().unwrap_or_else(|e| {
            self.error(e);
            Default::default()
        });
        let used = self
            .next_slot
            .load(Ordering::Relaxed)
            .min(self.dev.log_slots) as usize;
        let mut device_log = vec![kernels::LogEntry::default(); used];
        if used > 0 {
            // SAFETY: the log holds at least `used` entries.
            let r = unsafe {
                sys::cuMemcpyDtoH_v2(
                    device_log.as_mut_ptr() as *mut std::ffi::c_void,
                    self.dev.log,
                    used * kernels::LogEntry::SIZE,
                )
            };
            if let Err(e) = ck("reading the device log", r) {
                self.error(e);
            }
        }
        self.destroy();
        let injector = injector_needed.then_some(nthreads);
        RunLog {
            origin,
            arrivals,
            threads: logs,
            requests: std::mem::take(&mut self.requests),
            graphs: std::mem::take(&mut self.graph_meta),
            stalls: std::mem::take(&mut *self.stalls.lock().unwrap()),
            errors: std::mem::take(&mut *self.errors.lock().unwrap()),
            injector,
            device_log,
            flushed,
            end,
        }
    }

    /// Completes the cpu_deschedule stall's mechanism with the hog's report.
    fn finish_deschedule(&self) {
        let report = self.inj.report.lock().ok().and_then(|mut g| g.take());
        let mut stalls = self.stalls.lock().unwrap();
        let Some(s) = stalls
            .iter_mut()
            .find(|s| s.kind == InjectionKind::CpuDeschedule)
        else {
            return;
        };
        s.mechanism = match report {
            Some(Ok(r)) => format!(
                "cuda:cpu-hog ({} hog pinned to the victim's cpu {}, spun {:.0} us{}; {})",
                match r.mechanism {
                    injectors::HogMechanism::Fifo => "SCHED_FIFO",
                    injectors::HogMechanism::Nice => "nice -20",
                },
                r.cpu,
                r.hog_spin().as_nanos() as f64 / 1e3,
                r.victim_run_delay
                    .map(|d| format!(
                        ", victim schedstat run delay {:.0} us",
                        d.as_nanos() as f64 / 1e3
                    ))
                    .unwrap_or_default(),
                s.mechanism
            ),
            Some(Err(e)) => {
                drop(stalls);
                self.error(format!("cpu_deschedule injection: {e}"));
                return;
            }
            None => {
                drop(stalls);
                self.error("cpu_deschedule injection: the hog did not report".into());
                return;
            }
        };
    }

    fn destroy(&self) {
        // SAFETY: destroying this run's own objects after the device is idle.
        unsafe {
            for s in &self.streams {
                let s = s.lock().unwrap();
                sys::cuStreamDestroy_v2(s.handle.0);
            }
            for e in self.events.lock().unwrap().iter() {
                sys::cuEventDestroy_v2(e.handle.0);
            }
            for g in &self.graphs {
                let g = g.lock().unwrap();
                sys::cuGraphExecDestroy(g.exec.0);
                sys::cuGraphDestroy(g.graph.0);
            }
        }
    }

    fn error(&self, e: String) {
        if let Ok(mut v) = self.errors.lock() {
            if v.len() < 50 {
                v.push(e);
            }
        }
    }

    fn send(&self, m: usize, item: Item) {
        self.queued[m].fetch_add(1, Ordering::AcqRel);
        if let Ok(tx) = self.senders[m].lock() {
            if tx.send(Msg::Item(item)).is_err() {
                self.error(format!("thread {m} is gone"));
            }
        }
    }

    /// The pool member that takes new work: an idle one if any (seeded-random
    /// among idle ones when the queue is randomized), else the shortest queue.
    fn pick(&self, pool: &str, randomized: bool, key: u64) -> usize {
        let members = &self.pools[pool];
        let idle: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&m| {
                !self.busy[m].load(Ordering::Acquire) && self.queued[m].load(Ordering::Acquire) == 0
            })
            .collect();
        let choose = |v: &[usize], salt: u64| {
            if randomized {
                v[(crate::mix(self.seed ^ key ^ salt) % v.len() as u64) as usize]
            } else {
                v[0]
            }
        };
        if !idle.is_empty() {
            return choose(&idle, 0x9001);
        }
        // One snapshot of the queue lengths: workers drain them concurrently,
        // so reading twice could leave no member at the minimum.
        let lens: Vec<(usize, usize)> = members
            .iter()
            .map(|&m| (m, self.queued[m].load(Ordering::Acquire)))
            .collect();
        let min = lens.iter().map(|l| l.1).min().unwrap_or(0);
        let shortest: Vec<usize> = lens.iter().filter(|l| l.1 == min).map(|l| l.0).collect();
        if shortest.is_empty() {
            return members[0];
        }
        choose(&shortest, 0x9002)
    }

    /// Whether every worker can poll its queue on a CPU of its own (the
    /// dispatcher, the injector and two spare CPUs set aside).
    fn poll_queues(&self) -> bool {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        self.busy.len() + 3 <= cpus
    }

    /// How many ops and host events one thread may log (sized before the run).
    fn log_capacity(&self) -> usize {
        let total: usize = self
            .sc
            .programs
            .iter()
            .map(|p| p.requests as usize * (p.steps.len() + 1))
            .sum();
        let threads = self.busy.len();
        if total * threads <= 4_000_000 {
            total
        } else {
            total / threads + 1024
        }
    }

    fn worker(&self, ti: usize, rx: Receiver<Msg>, barrier: &Barrier) -> ThreadLog {
        // SAFETY: binding the primary context to this thread.
        if let Err(e) = ck("cuCtxSetCurrent", unsafe {
            sys::cuCtxSetCurrent(self.dev.ctx.0)
        }) {
            self.error(e);
        }
        let tid = injectors::gettid() as u32;
        self.tids[ti].store(tid, Ordering::Release);
        let mut log = ThreadLog {
            tid,
            ..Default::default()
        };
        // Logging must not page-fault inside the run.
        let cap = self.log_capacity();
        prefault(&mut log.ops, cap);
        prefault(&mut log.events, cap);
        barrier.wait();
        // Where CPUs are plentiful, idle workers poll their queue instead of
        // sleeping: a futex wake-up on this VM costs 50 µs to over 1 ms, noise
        // the twin comparison would otherwise measure.
        let poll = self.poll_queues();
        loop {
            let msg = if poll {
                let until = now() + 50_000_000;
                loop {
                    match rx.try_recv() {
                        Ok(m) => break Some(m),
                        Err(TryRecvError::Disconnected) => break None,
                        Err(TryRecvError::Empty) if now() > until => break rx.recv().ok(),
                        Err(TryRecvError::Empty) => std::hint::spin_loop(),
                    }
                }
            } else {
                rx.recv().ok()
            };
            let Some(Msg::Item(item)) = msg else { break };
            self.busy[ti].store(true, Ordering::Release);
            self.queued[ti].fetch_sub(1, Ordering::AcqRel);
            self.run_item(ti, &mut log, item);
            self.busy[ti].store(false, Ordering::Release);
        }
        log
    }

    fn run_item(&self, ti: usize, log: &mut ThreadLog, item: Item) {
        let r = &self.requests[item.request];
        let prog = &self.sc.programs[r.program];
        let (queue, handoff) = match item.handoff {
            Some((id, q)) => (q, Some(id)),
            None => (String::new(), None),
        };
        log.pending = None;
        log.events.push(HostEv::TaskBegin {
            t: now(),
            request: item.request,
            handoff,
            queue,
        });
        // The request token rides on CUPTI's external-correlation stack for
        // the whole task, as an instrumented application pushes it.
        let token = self.instrumented.then_some(r.token);
        if let Some(t) = token {
            cupti::push_token(t);
        }
        let mut si = item.step;
        while si < prog.steps.len() {
            let step = &prog.steps[si];
            let skey = StepKey {
                program: r.program,
                request: r.index,
                step: si,
                graph_node: None,
                api: false,
            };
            let mut fault = None;
            if let Some(plan) = self.plan {
                if plan.host_target.as_ref() == Some(&skey) {
                    fault = self.host_stall(ti, log, plan, &skey);
                }
                if plan.trigger.as_ref() == Some(&skey) {
                    self.trigger_injector();
                }
            }
            match step {
                Step::HostWork { duration_us, .. } => {
                    spin_until(now() + (duration_us * 1000.0).round() as u64);
                }
                Step::Handoff { queue } => {
                    let id = self.next_op.fetch_add(1, Ordering::Relaxed);
                    log.events.push(HostEv::Handoff {
                        t: now(),
                        id,
                        queue: queue.clone(),
                        request: item.request,
                        pending: log.pending.take(),
                    });
                    let decl = self.sc.queues.iter().find(|q| &q.name == queue);
                    let Some(decl) = decl else {
                        self.error(format!("no queue `{queue}`"));
                        break;
                    };
                    let key = crate::mix(((item.request as u64) << 24) ^ si as u64 ^ 0x5eed);
                    let m = self.pick(&decl.consumer, decl.randomized, key);
                    if token.is_some() {
                        cupti::pop_token();
                    }
                    self.send(
                        m,
                        Item {
                            request: item.request,
                            step: si + 1,
                            handoff: Some((id, queue.clone())),
                        },
                    );
                    return;
                }
                Step::NvtxPush { name } => log.nvtx.push((Arc::from(name.as_str()), now())),
                Step::NvtxPop => {
                    if let Some((name, t0)) = log.nvtx.pop() {
                        log.events.push(HostEv::Nvtx {
                            name: name.to_string(),
                            t0,
                            t1: now(),
                        });
                    }
                }
                Step::Recreate { object, name } => {
                    let op = self.recreate(ti, log.tid, *object, name, item.request);
                    log.ops.push(op);
                }
                _ => {
                    let op = self.api_step(ti, log, step, &skey, item.request);
                    let blocking = matches!(
                        step,
                        Step::Copy { memory: HostMemory::Pageable, direction, .. }
                            if *direction != CopyDirection::D2d
                    );
                    log.events.push(HostEv::Api {
                        op: op.id,
                        fault,
                        pending: log.pending.take(),
                    });
                    if blocking {
                        log.pending = Some(op.id);
                    }
                    log.ops.push(op);
                }
            }
            si += 1;
        }
        if token.is_some() {
            cupti::pop_token();
        }
        self.done.fetch_add(1, Ordering::AcqRel);
    }

    fn new_op(
        &self,
        ti: usize,
        tid: u32,
        request: Option<usize>,
        skey: Option<&StepKey>,
        what: What,
    ) -> Op {
        Op {
            id: self.next_op.fetch_add(1, Ordering::Relaxed),
            thread: ti,
            tid,
            request,
            skey: skey.cloned(),
            what,
            t0: 0,
            t1: 0,
            stream: None,
            stream_cupti: 0,
            handle: 0,
            generation: 0,
            prev: Tail::Empty,
            event_src: None,
            waited: Vec::new(),
            operator: None,
            call_site: None,
            slot: None,
            entry: None,
            injected: false,
            delays_target: false,
            error: None,
        }
    }

    /// Makes one call bound to `op`, timing it on the host.
    fn call(&self, op: &mut Op, what: &str, f: impl FnOnce() -> CUresult) {
        cupti::push(op.id, None);
        op.t0 = now();
        let r = f();
        op.t1 = now();
        cupti::pop(false);
        if let Err(e) = ck(what, r) {
            self.error(format!("op {}: {e}", op.id));
            op.error = Some(e);
        }
    }

    fn stretch_of(&self, skey: &StepKey) -> Option<Stretch> {
        let p = self.plan?;
        match &p.stretch {
            Some((k, s))
                if k.program == skey.program
                    && k.request == skey.request
                    && k.step == skey.step =>
            {
                Some(*s)
            }
            _ => None,
        }
    }

    fn api_step(
        &self,
        ti: usize,
        log: &mut ThreadLog,
        step: &Step,
        skey: &StepKey,
        request: usize,
    ) -> Op {
        let operator = log.nvtx.last().map(|n| n.0.clone());
        let stretch = self.stretch_of(skey);
        let tid = log.tid;
        let mut op = match step {
            Step::Kernel {
                stream,
                name,
                kind,
                duration_us,
                grid,
                block,
                launch: api,
                ..
            } => {
                let extra = match stretch {
                    Some(Stretch::Ns(n)) if skey_plain(self.plan) => n,
                    _ => 0,
                };
                let dur = (duration_us * 1000.0).round() as u64 + extra;
                let kernel = Kernel::from(*kind);
                let (kname, site) = self.step_names[skey.program][skey.step].clone();
                let what = What::Kernel {
                    name: kname,
                    kind: *kind,
                    dur_ns: dur,
                    extra_ns: extra,
                    grid: *grid,
                    block: *block,
                    launch: *api,
                    kernel,
                };
                let mut op = self.new_op(ti, tid, Some(request), Some(skey), what);
                op.call_site = site;
                let via = if *api == LaunchApi::DriverEx {
                    LaunchVia::LaunchEx
                } else {
                    LaunchVia::Launch
                };
                let f = self.step_funcs[skey.program][skey.step]
                    .clone()
                    .ok_or_else(|| format!("kernel `{name}` was not prepared"));
                self.enqueue_kernel(
                    &mut op,
                    self.stream_ix[stream.as_str()],
                    f,
                    kernel,
                    *grid,
                    *block,
                    dur,
                    via,
                );
                op
            }
            Step::Copy {
                stream,
                direction,
                bytes,
                memory,
                ..
            } => {
                let extra = match stretch {
                    Some(Stretch::Bytes(b)) => b,
                    _ => 0,
                };
                let what = What::Copy {
                    direction: *direction,
                    bytes: *bytes + extra,
                    extra_bytes: extra,
                    memory: *memory,
                };
                let mut op = self.new_op(ti, tid, Some(request), Some(skey), what);
                op.call_site = self.step_names[skey.program][skey.step].1.clone();
                self.enqueue_copy(
                    &mut op,
                    self.stream_ix[stream.as_str()],
                    *direction,
                    *bytes + extra,
                    *memory,
                );
                op
            }
            Step::Memset { stream, bytes, .. } => {
                let extra = match stretch {
                    Some(Stretch::Bytes(b)) => b,
                    _ => 0,
                };
                let n = (*bytes + extra).min(self.dev.dev_cap as u64) as usize;
                let what = What::Memset {
                    bytes: n as u64,
                    extra_bytes: extra,
                };
                let mut op = self.new_op(ti, tid, Some(request), Some(skey), what);
                let dst = self.dev.dev_a;
                self.on_stream(
                    &mut op,
                    self.stream_ix[stream.as_str()],
                    "cuMemsetD8Async",
                    |s| unsafe {
                        // SAFETY: scratch buffer of at least n bytes.
                        sys::cuMemsetD8Async(dst, 0, n, s)
                    },
                );
                op
            }
            Step::EventRecord { event, stream, .. } => {
                let ei = self.event_ix[event.as_str()];
                let mut op = self.new_op(
                    ti,
                    tid,
                    Some(request),
                    Some(skey),
                    What::EventRecord { event: ei },
                );
                let si = self.stream_ix[stream.as_str()];
                let mut st = self.streams[si].lock().unwrap();
                let mut evs = self.events.lock().unwrap();
                let (sh, eh) = (st.handle.0, evs[ei].handle.0);
                // SAFETY: live event and stream.
                self.call(&mut op, "cuEventRecord", || unsafe {
                    sys::cuEventRecord(eh, sh)
                });
                op.stream = Some(si);
                op.stream_cupti = st.cupti_id;
                op.handle = eh as u64;
                op.generation = evs[ei].generation;
                op.prev = std::mem::replace(&mut st.tail, Tail::one(op.id));
                evs[ei].last = Some(op.id);
                op
            }
            Step::StreamWait { stream, event, .. } => {
                let ei = self.event_ix[event.as_str()];
                let mut op = self.new_op(
                    ti,
                    tid,
                    Some(request),
                    Some(skey),
                    What::StreamWait { event: ei },
                );
                let si = self.stream_ix[stream.as_str()];
                let mut st = self.streams[si].lock().unwrap();
                let evs = self.events.lock().unwrap();
                let (sh, eh) = (st.handle.0, evs[ei].handle.0);
                // SAFETY: live event and stream.
                self.call(&mut op, "cuStreamWaitEvent", || unsafe {
                    sys::cuStreamWaitEvent(sh, eh, 0)
                });
                op.stream = Some(si);
                op.stream_cupti = st.cupti_id;
                op.handle = eh as u64;
                op.generation = evs[ei].generation;
                op.event_src = evs[ei].last;
                op.prev = std::mem::replace(&mut st.tail, Tail::one(op.id));
                op
            }
            Step::GraphLaunch { graph, stream, .. } => {
                let gi = self.graph_ix[graph.as_str()];
                let extra = match (&self.plan, stretch) {
                    (Some(p), Some(Stretch::Ns(n))) if p.stretch_graph_node().is_some() => n,
                    _ => 0,
                };
                let mut op = self.new_op(
                    ti,
                    tid,
                    Some(request),
                    Some(skey),
                    What::GraphLaunch {
                        graph: gi,
                        extra_ns: extra,
                    },
                );
                let si = self.stream_ix[stream.as_str()];
                let g = self.graphs[gi].lock().unwrap();
                let mut st = self.streams[si].lock().unwrap();
                let (sh, exec) = (st.handle.0, g.exec.0);
                // A lengthened node: update the exec's kernel parameters for this
                // one launch (graph and node identity stay the same), then restore.
                let target = (extra > 0)
                    .then(|| self.plan.and_then(|p| p.stretch_graph_node()))
                    .flatten()
                    .and_then(|nid| self.sc.graphs[gi].nodes.iter().position(|n| n.id == nid));
                if let Some(ni) = target {
                    if let Err(e) = set_node_duration(&g, ni, g.args[ni].a + extra) {
                        self.error(format!("graph_dependency injection: {e}"));
                    }
                }
                // SAFETY: live exec and stream.
                self.call(&mut op, "cuGraphLaunch", || unsafe {
                    sys::cuGraphLaunch(exec, sh)
                });
                if let Some(ni) = target {
                    if let Err(e) = set_node_duration(&g, ni, g.args[ni].a) {
                        self.error(format!("graph_dependency injection: {e}"));
                    }
                }
                op.stream = Some(si);
                op.stream_cupti = st.cupti_id;
                op.handle = exec as u64;
                op.generation = g.generation;
                let sinks: Vec<DevRef> = g
                    .sinks
                    .iter()
                    .map(|&n| DevRef {
                        op: op.id,
                        gnode: Some(n),
                    })
                    .collect();
                op.prev = std::mem::replace(&mut st.tail, Tail::from_vec(sinks));
                op
            }
            Step::Sync {
                target,
                stream,
                event,
                ..
            } => {
                let mut op = self.new_op(
                    ti,
                    tid,
                    Some(request),
                    Some(skey),
                    What::Sync { target: *target },
                );
                match target {
                    SyncTarget::Stream => {
                        let si = stream.as_deref().map(|s| self.stream_ix[s]).unwrap_or(0);
                        let (sh, waited, cid) = {
                            let st = self.streams[si].lock().unwrap();
                            (st.handle, st.tail.as_slice().to_vec(), st.cupti_id)
                        };
                        op.waited = waited;
                        op.stream = Some(si);
                        op.stream_cupti = cid;
                        op.handle = sh.0 as u64;
                        // SAFETY: live stream.
                        self.call(&mut op, "cuStreamSynchronize", || unsafe {
                            sys::cuStreamSynchronize(sh.0)
                        });
                    }
                    SyncTarget::Event => {
                        let ei = event.as_deref().map(|e| self.event_ix[e]).unwrap_or(0);
                        let (eh, last) = {
                            let evs = self.events.lock().unwrap();
                            (evs[ei].handle, evs[ei].last)
                        };
                        op.waited = last
                            .map(|o| DevRef { op: o, gnode: None })
                            .into_iter()
                            .collect();
                        op.handle = eh.0 as u64;
                        // SAFETY: live event.
                        self.call(&mut op, "cuEventSynchronize", || unsafe {
                            sys::cuEventSynchronize(eh.0)
                        });
                    }
                    SyncTarget::Device => {
                        for s in &self.streams {
                            op.waited
                                .extend(s.lock().unwrap().tail.as_slice().iter().copied());
                        }
                        // SAFETY: no arguments.
                        self.call(&mut op, "cuCtxSynchronize", || unsafe {
                            sys::cuCtxSynchronize()
                        });
                    }
                }
                op
            }
            _ => unreachable!("not an API step"),
        };
        op.operator = operator;
        op
    }

    #[allow(clippy::too_many_arguments)]
    fn enqueue_kernel(
        &self,
        op: &mut Op,
        si: usize,
        f: Result<(Func, String), String>,
        kernel: Kernel,
        grid: u32,
        block: u32,
        dur: u64,
        via: LaunchVia,
    ) {
        let (f, entry) = match f {
            Ok(f) => f,
            Err(e) => {
                self.error(e.clone());
                op.error = Some(e);
                return;
            }
        };
        let slot = self.slot();
        op.slot = Some(slot);
        op.entry = Some(entry);
        let mut args = self.kernel_args(kernel, grid, block, dur, op.id, slot);
        let grid = if kernel == Kernel::OccupancyHog {
            grid.min(self.dev.sms).max(1)
        } else {
            grid
        };
        let block = if kernel == Kernel::OccupancyHog {
            kernels::gpu::HOG_BLOCK_THREADS
        } else {
            block
        };
        let launch = call_sites::launcher(op.call_site.as_deref());
        self.on_stream(
            op,
            si,
            if via == LaunchVia::LaunchEx {
                "cuLaunchKernelEx"
            } else {
                "cuLaunchKernel"
            },
            |s| unsafe {
                // SAFETY: arguments live across the call; buffers live for the session.
                launch(&f, grid, block, s, &mut args, via)
            },
        );
    }

    fn enqueue_copy(
        &self,
        op: &mut Op,
        si: usize,
        direction: CopyDirection,
        bytes: u64,
        memory: HostMemory,
    ) {
        let n = (bytes as usize).min(self.dev.dev_cap);
        let host = match memory {
            HostMemory::Pinned => self.dev.pinned,
            HostMemory::Pageable => self.dev.pageable,
        } as *mut std::ffi::c_void;
        let (a, b) = (self.dev.dev_a, self.dev.dev_b);
        let name = match direction {
            CopyDirection::H2d => "cuMemcpyHtoDAsync",
            CopyDirection::D2h => "cuMemcpyDtoHAsync",
            CopyDirection::D2d => "cuMemcpyDtoDAsync",
        };
        // SAFETY: scratch buffers hold at least n bytes and live for the session.
        self.on_stream(op, si, name, |s| unsafe {
            match direction {
                CopyDirection::H2d => sys::cuMemcpyHtoDAsync_v2(a, host, n, s),
                CopyDirection::D2h => sys::cuMemcpyDtoHAsync_v2(host, a, n, s),
                CopyDirection::D2d => sys::cuMemcpyDtoDAsync_v2(b, a, n, s),
            }
        });
    }

    /// Enqueues one op on stream `si` under the stream's lock, so the
    /// recorded predecessor is the stream's real previous op.
    fn on_stream(
        &self,
        op: &mut Op,
        si: usize,
        what: &str,
        f: impl FnOnce(sys::CUstream) -> CUresult,
    ) {
        let mut st = self.streams[si].lock().unwrap();
        let h = st.handle.0;
        self.call(op, what, || f(h));
        op.stream = Some(si);
        op.stream_cupti = st.cupti_id;
        op.handle = h as u64;
        op.generation = st.generation;
        op.prev = std::mem::replace(&mut st.tail, Tail::one(op.id));
    }

    fn recreate(&self, ti: usize, tid: u32, object: ObjectKind, name: &str, request: usize) -> Op {
        let mut op = self.new_op(ti, tid, Some(request), None, What::Recreate);
        let r: Result<(), String> = (|| match object {
            ObjectKind::Stream => {
                let si = self.stream_ix[name];
                let mut st = self.streams[si].lock().unwrap();
                let old = st.handle.0;
                let prio = st.priority;
                let mut new: sys::CUstream = std::ptr::null_mut();
                let mut r = CUresult::CUDA_SUCCESS;
                // SAFETY: destroying our stream after it drained, creating a new one.
                self.call(&mut op, "recreate stream", || unsafe {
                    sys::cuStreamSynchronize(old);
                    sys::cuStreamDestroy_v2(old);
                    r = sys::cuStreamCreateWithPriority(&mut new, 1, prio);
                    r
                });
                ck("cuStreamCreateWithPriority", r)?;
                st.handle = H(new);
                st.cupti_id = self.dev.recorder.stream_id(self.dev.ctx.0, new)?;
                st.generation += 1;
                st.tail = Tail::Empty;
                Ok(())
            }
            ObjectKind::Event => {
                let ei = self.event_ix[name];
                let mut evs = self.events.lock().unwrap();
                let old = evs[ei].handle.0;
                let mut new: sys::CUevent = std::ptr::null_mut();
                // SAFETY: destroying our event (pending work keeps it alive), creating a new one.
                self.call(&mut op, "recreate event", || unsafe {
                    sys::cuEventDestroy_v2(old);
                    sys::cuEventCreate(&mut new, 0)
                });
                evs[ei].handle = H(new);
                evs[ei].generation += 1;
                evs[ei].last = None;
                Ok(())
            }
            ObjectKind::Graph => {
                let gi = self.graph_ix[name];
                let mut g = self.graphs[gi].lock().unwrap();
                let (old, graph) = (g.exec.0, g.graph.0);
                let mut new: sys::CUgraphExec = std::ptr::null_mut();
                // SAFETY: re-instantiating our graph.
                self.call(&mut op, "recreate graph exec", || unsafe {
                    sys::cuGraphExecDestroy(old);
                    sys::cuGraphInstantiateWithFlags(&mut new, graph, 0)
                });
                g.exec = H(new);
                g.generation += 1;
                Ok(())
            }
        })();
        if let Err(e) = r {
            self.error(e.clone());
            op.error = Some(e);
        }
        op
    }

    /// Host stall injected just before the target step's call, on the
    /// victim thread itself.
    fn host_stall(
        &self,
        ti: usize,
        log: &mut ThreadLog,
        plan: &Plan,
        skey: &StepKey,
    ) -> Option<usize> {
        let t0 = now();
        let mag = plan.magnitude_ns;
        let mut switched_out_ns = None;
        let mechanism = match plan.kind {
            InjectionKind::HostDelay => {
                spin_until(t0 + mag);
                "cuda:host-compute (busy loop on the launching thread)".to_string()
            }
            InjectionKind::HostPageFaultMinor | InjectionKind::HostPageFaultMajor => {
                let pf = plan.page_faults.lock().ok().and_then(|mut g| g.take());
                match pf {
                    Some(mut pf) => {
                        let r = pf.trigger_until(t0 + mag);
                        // Back into the plan: unmapping hundreds of touched
                        // pages takes hundreds of microseconds, which belong
                        // after the run, not in the stall.
                        if let Ok(mut g) = plan.page_faults.lock() {
                            *g = Some(pf);
                        }
                        match r {
                            Ok(r) => format!(
                                "cuda:page-faults ({} minor, {} major faults touching {} fresh pages on the launching thread, {:.2} us each)",
                                r.minor_faults,
                                r.major_faults,
                                r.pages_touched,
                                r.per_fault().map(|d| d.as_nanos() as f64 / 1e3).unwrap_or(0.0)
                            ),
                            Err(e) => {
                                self.error(format!("page-fault injection: {e}"));
                                format!("cuda:page-faults failed: {e}")
                            }
                        }
                    }
                    None => {
                        let e = plan
                            .page_fault_error
                            .clone()
                            .unwrap_or_else(|| "no prepared pages".into());
                        self.error(format!("page-fault injection: {e}"));
                        format!("cuda:page-faults unavailable: {e}")
                    }
                }
            }
            InjectionKind::CpuDeschedule => {
                // At SCHED_IDLE the victim is preempted the moment the hog
                // lands on its CPU and stays runnable-but-off until the hog
                // stops (a nice 0 thread would get EEVDF slices meanwhile).
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: changes the calling thread's own policy.
                let idle = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } == 0;
                self.inj.done.store(false, Ordering::Release);
                self.inj.victim_tid.store(log.tid, Ordering::Release);
                self.inj.deschedule_at.store(t0, Ordering::Release);
                self.inj.state.store(DESCHEDULE, Ordering::Release);
                // Keep running until switched out and back (or the hog is done).
                let deadline = t0 + mag * 4 + 200_000_000;
                let (mut last, mut gaps, mut longest) = (t0, 0u64, 0u64);
                loop {
                    let t = now();
                    let gap = t - last;
                    if gap > 20_000 {
                        gaps += gap;
                        longest = longest.max(gap);
                    }
                    last = t;
                    // A slice the scheduler grants the victim before the hog's
                    // end (EEVDF gives even SCHED_IDLE threads one now and
                    // then) does not end the stall early.
                    if (idle && longest >= mag / 2 && t >= t0 + mag)
                        || self.inj.done.load(Ordering::Acquire)
                        || t > deadline
                    {
                        break;
                    }
                    std::hint::spin_loop();
                }
                if idle {
                    // SAFETY: back to the normal policy (root may always raise it).
                    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
                }
                switched_out_ns = Some(longest);
                // The hog's own report is added once the run is over (see `run`).
                format!(
                    "victim{} switched out {:.0} us in total, longest {:.0} us",
                    if idle { " at SCHED_IDLE meanwhile" } else { "" },
                    gaps as f64 / 1e3,
                    longest as f64 / 1e3
                )
            }
            _ => return None,
        };
        let t1 = now();
        if plan.kind == InjectionKind::CpuDeschedule {
            // Halfway towards the resume time this stall showed.
            let est = DESCHEDULE_RESUME_NS.load(Ordering::Relaxed) as i64;
            let over = (t1 - t0) as i64 - mag as i64;
            let next = (est + over / 2).clamp(0, DESCHEDULE_RESUME_MAX_NS as i64);
            DESCHEDULE_RESUME_NS.store(next as u64, Ordering::Relaxed);
        }
        let mut stalls = self.stalls.lock().unwrap();
        stalls.push(Stall {
            kind: plan.kind,
            thread: ti,
            tid: log.tid,
            skey: skey.clone(),
            t0,
            t1,
            mechanism,
            requested_ns: mag,
            switched_out_ns,
        });
        let index = stalls.len() - 1;
        log.events.push(HostEv::Stall { index });
        Some(index)
    }

    /// Asks the injector to issue its device work now and waits until it has.
    fn trigger_injector(&self) {
        self.inj.state.store(REQUEST, Ordering::Release);
        let deadline = now() + 500_000_000;
        while self.inj.state.load(Ordering::Acquire) != ACK {
            if now() > deadline {
                self.error("the injector did not acknowledge within 500 ms".into());
                return;
            }
            std::hint::spin_loop();
        }
        self.inj.state.store(IDLE, Ordering::Release);
    }

    /// The injector thread: waits (spinning, so it reacts within a
    /// microsecond) for the victim's trigger, then issues the planned work.
    fn injector(&self, ti: usize, barrier: &Barrier, stop: &AtomicBool) -> ThreadLog {
        // SAFETY: binding the primary context.
        unsafe { sys::cuCtxSetCurrent(self.dev.ctx.0) };
        let tid = injectors::gettid() as u32;
        self.tids[ti].store(tid, Ordering::Release);
        let mut log = ThreadLog {
            tid,
            ..Default::default()
        };
        barrier.wait();
        let Some(plan) = self.plan else { return log };
        let mut spins = 0u64;
        while !stop.load(Ordering::Acquire) {
            match self.inj.state.load(Ordering::Acquire) {
                REQUEST => {
                    for a in &plan.actions {
                        self.inject_action(ti, &mut log, a);
                    }
                    self.inj.state.store(ACK, Ordering::Release);
                }
                DESCHEDULE => {
                    self.inj.state.store(IDLE, Ordering::Release);
                    let victim = self.inj.victim_tid.load(Ordering::Acquire) as i32;
                    // Anchored at the victim's request: the hog's start-up
                    // is part of the requested stall, not added to it.
                    let at = self.inj.deschedule_at.load(Ordering::Acquire)
                        - DESCHEDULE_RESUME_NS.load(Ordering::Relaxed);
                    let r = injectors::CpuHog::new(std::process::id() as i32, victim)
                        .with_fifo(false)
                        .requested_at(at)
                        .restoring_victim_policy()
                        // This spinning thread is the hog: it lands on the
                        // victim's CPU within microseconds (a spawned thread
                        // may first wait for a slice on a busy CPU).
                        .run_here(std::time::Duration::from_nanos(plan.magnitude_ns.max(1)))
                        .map_err(|e| e.to_string());
                    if let Ok(mut g) = self.inj.report.lock() {
                        *g = Some(r);
                    }
                    self.inj.done.store(true, Ordering::Release);
                }
                _ => {
                    spins += 1;
                    if spins.is_multiple_of(4096) {
                        std::thread::yield_now();
                    }
                    std::hint::spin_loop();
                }
            }
        }
        log
    }

    fn inject_action(&self, ti: usize, log: &mut ThreadLog, a: &DevAction) {
        match a {
            DevAction::Kernel {
                on_target_stream,
                name,
                call_site,
                kernel,
                grid,
                dur_ns,
                delays_target,
            } => {
                let si = match on_target_stream {
                    Some(s) => *s,
                    None => self.injector_stream,
                };
                let what = What::Kernel {
                    name: Arc::from(name.as_str()),
                    kind: KernelKind::Spin,
                    dur_ns: *dur_ns,
                    extra_ns: 0,
                    grid: *grid,
                    block: 128,
                    launch: LaunchApi::Driver,
                    kernel: *kernel,
                };
                let mut op = self.new_op(ti, log.tid, None, None, what);
                op.injected = true;
                op.delays_target = *delays_target;
                op.call_site = call_site.as_deref().map(Arc::from);
                let f = self.func(name, *kernel);
                self.enqueue_kernel(
                    &mut op,
                    si,
                    f,
                    *kernel,
                    *grid,
                    128,
                    *dur_ns,
                    LaunchVia::Launch,
                );
                log.events.push(HostEv::Api {
                    op: op.id,
                    fault: None,
                    pending: None,
                });
                log.ops.push(op);
            }
            DevAction::Copies { sizes, call_site } => {
                for bytes_each in sizes {
                    let what = What::Copy {
                        direction: CopyDirection::H2d,
                        bytes: *bytes_each,
                        extra_bytes: 0,
                        memory: HostMemory::Pinned,
                    };
                    let mut op = self.new_op(ti, log.tid, None, None, what);
                    op.injected = true;
                    op.delays_target = true;
                    op.call_site = call_site.as_deref().map(Arc::from);
                    self.enqueue_copy(
                        &mut op,
                        self.injector_stream,
                        CopyDirection::H2d,
                        *bytes_each,
                        HostMemory::Pinned,
                    );
                    log.events.push(HostEv::Api {
                        op: op.id,
                        fault: None,
                        pending: None,
                    });
                    log.ops.push(op);
                }
            }
        }
    }
}

/// Reserves `cap` elements and touches their pages.
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

/// The op id graph node kernels are captured with (never a real op id).
pub fn graph_op_id(gi: usize, ni: usize) -> u64 {
    0xC0DE_0000_0000_0000 | ((gi as u64) << 24) | ni as u64
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
        ck(
            "cuGraphExecKernelNodeSetParams",
            sys::cuGraphExecKernelNodeSetParams_v2(g.exec.0, node, &p),
        )
    }
}

fn create_stream(dev: &Device, priority: i32) -> Result<StreamState, String> {
    let mut s: sys::CUstream = std::ptr::null_mut();
    // SAFETY: out pointer; flags 1 = CU_STREAM_NON_BLOCKING.
    ck("cuStreamCreateWithPriority", unsafe {
        sys::cuStreamCreateWithPriority(&mut s, 1, priority)
    })?;
    let cupti_id = dev.recorder.stream_id(dev.ctx.0, s)?;
    Ok(StreamState {
        handle: H(s),
        cupti_id,
        generation: 0,
        priority,
        tail: Tail::Empty,
    })
}

fn create_event() -> Result<sys::CUevent, String> {
    create_event_flags(0)
}

fn create_event_flags(flags: u32) -> Result<sys::CUevent, String> {
    let mut e: sys::CUevent = std::ptr::null_mut();
    // SAFETY: out pointer.
    ck("cuEventCreate", unsafe {
        sys::cuEventCreate(&mut e, flags)
    })?;
    Ok(e)
}
