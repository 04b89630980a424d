//! The discrete-event core: host threads execute request programs one step at
//! a time in global time order, and every API call places its device work on
//! the device model at the moment it is enqueued. `calls` makes a step's API
//! call, `device` places its work, `injected_work` issues the plan's work; all of
//! them record through the shared per-step rules (`crate::record`).

mod calls;
mod device;
mod injected_work;

use injected_work::InjectorWork;

use super::device::{CopyEngine, SmPool};
use super::names::{Api, Names};
use super::noise::{Noise, Stall};
use super::SimBackend;
use crate::anonymous::Disguise;
use crate::plan::Plan;
use crate::record::steps::Observed;
use crate::record::{DeviceOp, DeviceTimes, NodeInfo, RunBuilder};
use ground_truth::bundle::LossAccounting;
use ground_truth::graph::{InjectionRecord, NodeId, NodeKind};
use ground_truth::scenario::{
    EventApi, InjectionKind, LaunchApi, ObjectKind, QueueDecl, Scenario, Step, SyncTarget,
};
use ground_truth::trace::{CopyDirection, HostMemory, Record, Rid, SwitchReason, SyncType};
use ground_truth::{Mode, Ns, SharedStr};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// Host-side constants (ns).
#[derive(Debug, Clone)]
pub struct HostParams {
    pub launch_ns: Ns,
    pub copy_call_ns: Ns,
    pub event_call_ns: Ns,
    pub graph_launch_ns: Ns,
    pub sync_call_ns: Ns,
    pub enqueue_ns: Ns,
    /// From a queue push to the consumer thread running (wake-up latency).
    pub wakeup_ns: Ns,
    /// From a device completion to a blocked host thread resuming.
    pub resume_ns: Ns,
    pub minor_fault_ns: Ns,
    pub major_fault_ns: Ns,
    /// Relative jitter of host and device durations.
    pub jitter: f64,
}

impl Default for HostParams {
    fn default() -> Self {
        HostParams {
            launch_ns: 4_000,
            copy_call_ns: 5_000,
            event_call_ns: 2_000,
            graph_launch_ns: 6_000,
            sync_call_ns: 3_000,
            enqueue_ns: 1_000,
            wakeup_ns: 8_000,
            resume_ns: 5_000,
            minor_fault_ns: 3_100,
            major_fault_ns: 80_000,
            jitter: 0.01,
        }
    }
}

pub use crate::keys::{Keys, StepKey};

/// The key of injected work, which is no scenario step (never a target, never lost).
const NO_STEP: StepKey = StepKey {
    program: usize::MAX,
    request: 0,
    step: 0,
    graph_node: None,
    api: false,
};

pub struct Run {
    pub builder: RunBuilder,
    pub keys: Keys,
    pub loss: LossAccounting,
    pub injections: Vec<InjectionRecord>,
}

const TID_BASE: u32 = 4100;
/// Where inside an API call its work is pushed to the stream. The same offset
/// for every call keeps push order equal to call order, as a stream's lock would.
const QUEUE_OFFSET_NS: Ns = 1_000;

struct StreamCall {
    api: Api,
    latency_ns: Ns,
    handle: u64,
    generation: u32,
    call_site: Option<SharedStr>,
}

/// A kernel to place on the device.
struct KernelLaunch<'n> {
    name: &'n SharedStr,
    grid: u32,
    block: u32,
    duration: Ns,
}

/// A copy to place on the device.
struct Transfer {
    direction: CopyDirection,
    bytes: u64,
    memory: HostMemory,
}

/// Where the device op of a call goes: its stream, the call (its `launch`
/// predecessor), when the call pushed it, the call's correlation id, and the
/// op's identity.
struct Enqueued {
    si: usize,
    launch: NodeId,
    queued: Ns,
    corr: u32,
    info: NodeInfo,
}

#[derive(Debug, Clone)]
struct Item {
    request: usize,
    step: usize,
    arrival: Ns,
    /// The handoff node and queue this work arrived through.
    handoff: Option<(NodeId, SharedStr)>,
    /// A device op the next host operation waited for (blocking copy).
    pending_sync: Option<NodeId>,
    /// An injected host stall before host work: the thread's next host
    /// operation (call or push) is what it delayed.
    pending_fault: Option<NodeId>,
    /// What comes before the current step (an injected or background stall, the
    /// injector's trigger) already happened (the injected stall's fault node, if any).
    stalled: Option<Option<NodeId>>,
    /// The push of the current step found its bounded queue full at this time;
    /// the thread waited until a consumer's take gave it the slot.
    push_ready: Option<Ns>,
}

#[derive(Debug)]
struct Thread {
    tid: u32,
    clock: Ns,
    queue: VecDeque<Item>,
    current: Option<Item>,
    scheduled: bool,
    task: Option<NodeId>,
    prev: Option<NodeId>,
    /// The blocking copy the thread's previous task ended on: its next task waited for it.
    left_blocked_by: Option<NodeId>,
    nvtx: Vec<(SharedStr, Ns)>,
    /// The injector's work to come, each with when it is issued.
    actions: VecDeque<(Ns, InjectorWork)>,
    /// Waiting for room in a full bounded queue: not scheduled until a
    /// consumer's take gives it a slot (`Engine::take`).
    blocked: bool,
}

/// A bounded queue (`QueueDecl::capacity`): the items it holds (pushed or
/// granted, not yet taken) and the producers waiting for room, in order.
#[derive(Debug, Default)]
struct Room {
    capacity: u32,
    held: u32,
    waiting: VecDeque<usize>,
}

#[derive(Debug, Clone)]
struct Stream {
    cupti_id: u32,
    handle: u64,
    generation: u32,
    /// Lower is higher (as in CUDA, `StreamDecl::priority`).
    priority: i32,
    tail_end: Ns,
    tail: Vec<NodeId>,
    /// The stream's last op, while it still waits for SMs and nothing has
    /// read its times yet: a higher-priority stream's work may still take its
    /// place (`Engine::place_on_sms`).
    waiting: Option<WaitingForSms>,
    /// Whether the stream is in `Engine::waiting_streams`.
    listed: bool,
}

/// SM work placed to start later than it became ready, still movable.
#[derive(Debug, Clone, Copy)]
struct WaitingForSms {
    node: NodeId,
    ready: Ns,
    need: u32,
    dur: Ns,
    start: Ns,
}

#[derive(Debug, Clone)]
struct Event {
    handle: u64,
    /// Events in this event's ring (`EventDecl::count`), kept on its first slot.
    ring: u32,
    generation: u32,
    /// Last record: (node, completion, event_sync_id).
    last: Option<(NodeId, Ns, u64)>,
}

#[derive(Debug, Clone)]
struct GraphExec {
    exec_id: u32,
    generation: u32,
}

struct RequestState {
    program: usize,
    index: u32,
    token: SharedStr,
    /// The token as the external correlation id of the request's API calls.
    external_id: u64,
    node: NodeId,
}

/// Indices of the objects a step names.
#[derive(Debug, Clone, Copy, Default)]
struct StepTargets {
    stream: Option<usize>,
    event: Option<usize>,
    graph: Option<usize>,
}

struct Engine<'a> {
    sc: &'a Scenario,
    be: &'a SimBackend,
    seed: u64,
    plan: Option<&'a Plan>,
    b: RunBuilder,
    keys: Keys,
    names: Names,
    /// The stream, event and graph each step names, resolved once (indexed by program, then step).
    targets: Vec<Vec<StepTargets>>,
    threads: Vec<Thread>,
    pools: HashMap<String, Vec<usize>>,
    queues: HashMap<&'a str, &'a QueueDecl>,
    /// The bounded queues' room.
    rooms: HashMap<&'a str, Room>,
    streams: Vec<Stream>,
    stream_ix: HashMap<String, usize>,
    events: Vec<Event>,
    event_ix: HashMap<String, usize>,
    graphs: Vec<GraphExec>,
    graph_ix: HashMap<String, usize>,
    requests: Vec<RequestState>,
    sms: SmPool,
    /// Streams whose last op may be waiting for SMs (`Stream::waiting`).
    waiting_streams: Vec<usize>,
    /// Whether streams differ in priority (the injector's is the highest):
    /// otherwise no op ever takes another's place and none is tracked.
    priorities_differ: bool,
    copies: CopyEngine,
    heap: BinaryHeap<Reverse<(Ns, u64, usize)>>,
    seq: u64,
    next_cupti_stream: u32,
    next_graph_exec: u32,
    correlation: u32,
    event_sync_id: u64,
    now: Ns,
    loss: LossAccounting,
    injections: Vec<InjectionRecord>,
    /// Device nodes of injected work that delay the target, resolved at the end.
    pending_fault_edges: Vec<NodeId>,
    instrumented: bool,
    /// Background noise of this run (its own seed: the twin's is independent).
    noise: Noise,
    /// What injected work imitates.
    disguise: Disguise,
}

/// Simulates `sc`: `seed` keys the run's structure (pool choices, injected
/// work's disguise), `noise_seed` its background noise and jitter.
pub fn run(
    sc: &Scenario,
    be: &SimBackend,
    seed: u64,
    noise_seed: u64,
    plan: Option<&Plan>,
    keep_records: bool,
) -> Run {
    let mut e = Engine::new(sc, be, seed, noise_seed, plan, keep_records);
    let ops: usize = sc
        .programs
        .iter()
        .map(|p| p.requests as usize * (p.steps.len() + 2))
        .sum();
    e.b.reserve(ops);
    e.arrive_requests();
    e.schedule_injector();
    while let Some(Reverse((t, _, th))) = e.heap.pop() {
        e.now = e.now.max(t);
        e.threads[th].scheduled = false;
        e.tick(th);
    }
    e.finish_faults();
    Run {
        builder: e.b,
        keys: e.keys,
        loss: e.loss,
        injections: e.injections,
    }
}

impl<'a> Engine<'a> {
    fn new(
        sc: &'a Scenario,
        be: &'a SimBackend,
        seed: u64,
        noise_seed: u64,
        plan: Option<&'a Plan>,
        keep: bool,
    ) -> Self {
        let mut threads = Vec::new();
        let mut pools = HashMap::new();
        // Ids are handed out in a seeded order, so the injector's thread and
        // stream are not always the last ones.
        let thread_count = sc.threads.iter().map(|t| t.count as usize).sum::<usize>() + 1;
        let tid_order = crate::anonymous::shuffled(seed, thread_count);
        let stream_order = crate::anonymous::shuffled(seed ^ 1, sc.streams.len() + 1);
        for decl in sc
            .threads
            .iter()
            .map(|t| (Some(t.name.as_str()), t.count))
            // The injector's thread comes last and belongs to no pool: it has no name a
            // scenario could share or a record could show.
            .chain([(None, 1)])
        {
            let mut members = Vec::new();
            for _ in 0..decl.1 {
                members.push(threads.len());
                threads.push(Thread {
                    tid: TID_BASE + tid_order[threads.len()] as u32,
                    clock: 0,
                    queue: VecDeque::new(),
                    current: None,
                    scheduled: false,
                    task: None,
                    prev: None,
                    left_blocked_by: None,
                    nvtx: Vec::new(),
                    actions: VecDeque::new(),
                    blocked: false,
                });
            }
            if let Some(pool) = decl.0 {
                pools.insert(pool.to_string(), members);
            }
        }
        let mut e = Engine {
            sc,
            be,
            seed,
            plan,
            b: RunBuilder::new(keep),
            keys: HashMap::new(),
            names: Names::new(sc),
            targets: Vec::new(),
            threads,
            pools,
            queues: sc.queues.iter().map(|q| (q.name.as_str(), q)).collect(),
            rooms: sc
                .queues
                .iter()
                .filter_map(|q| {
                    let capacity = q.capacity?;
                    Some((
                        q.name.as_str(),
                        Room {
                            capacity,
                            ..Default::default()
                        },
                    ))
                })
                .collect(),
            streams: Vec::new(),
            stream_ix: HashMap::new(),
            events: Vec::new(),
            event_ix: HashMap::new(),
            graphs: Vec::new(),
            graph_ix: HashMap::new(),
            requests: Vec::new(),
            sms: SmPool::default(),
            waiting_streams: Vec::new(),
            priorities_differ: plan.is_some()
                || sc
                    .streams
                    .windows(2)
                    .any(|w| w[0].priority != w[1].priority),
            copies: CopyEngine::default(),
            heap: BinaryHeap::new(),
            seq: 0,
            next_cupti_stream: 13,
            next_graph_exec: 1,
            correlation: 1,
            event_sync_id: 1,
            now: 0,
            loss: LossAccounting::default(),
            injections: Vec::new(),
            pending_fault_edges: Vec::new(),
            instrumented: sc.mode == Mode::Instrumented,
            noise: Noise::new(noise_seed, &be.noise, be.host.jitter, thread_count),
            disguise: Disguise::new(sc, seed),
        };
        e.b.declare_queues(&sc.queues);
        for (i, s) in sc
            .streams
            .iter()
            .map(|s| (Some(s.name.as_str()), s.priority))
            // The injector's stream comes last, unnamed, like its thread, at the
            // highest priority, as the GPU backend's injector streams are.
            .chain([(None, i32::MIN)])
            .enumerate()
        {
            let (s, priority) = s;
            let cupti_id = e.next_cupti_stream + stream_order[i] as u32;
            e.streams.push(Stream {
                cupti_id,
                handle: 0x5600_0000_1000 + 0x200 * stream_order[i] as u64,
                generation: 0,
                priority,
                tail_end: 0,
                tail: Vec::new(),
                waiting: None,
                listed: false,
            });
            if let Some(name) = s {
                e.stream_ix.insert(name.to_string(), i);
            }
        }
        e.next_cupti_stream += stream_order.len() as u32;
        for ev in &sc.events {
            e.event_ix.insert(ev.name.clone(), e.events.len());
            for _ in 0..ev.count.max(1) {
                let slot = e.events.len();
                e.events.push(Event {
                    handle: 0x5700_0000_2000 + 0x40 * slot as u64,
                    ring: ev.count.max(1),
                    generation: 0,
                    last: None,
                });
            }
        }
        for (i, g) in sc.graphs.iter().enumerate() {
            let exec_id = e.next_graph_exec;
            e.next_graph_exec += 1;
            e.graphs.push(GraphExec {
                exec_id,
                generation: 0,
            });
            e.graph_ix.insert(g.name.clone(), i);
        }
        e.targets = sc
            .programs
            .iter()
            .map(|p| p.steps.iter().map(|step| e.step_targets(step)).collect())
            .collect();
        e
    }

    fn step_targets(&self, step: &Step) -> StepTargets {
        let (stream, event, graph) = match step {
            Step::Kernel { stream, .. }
            | Step::Copy { stream, .. }
            | Step::Memset { stream, .. } => (Some(stream.as_str()), None, None),
            Step::EventRecord { event, stream, .. } | Step::StreamWait { stream, event, .. } => {
                (Some(stream.as_str()), Some(event.as_str()), None)
            }
            Step::GraphLaunch { graph, stream, .. } => {
                (Some(stream.as_str()), None, Some(graph.as_str()))
            }
            Step::Sync { stream, event, .. } => (stream.as_deref(), event.as_deref(), None),
            _ => (None, None, None),
        };
        StepTargets {
            stream: stream.and_then(|s| self.stream_ix.get(s).copied()),
            event: event.and_then(|e| self.event_ix.get(e).copied()),
            graph: graph.and_then(|g| self.graph_ix.get(g).copied()),
        }
    }

    /// The slot of the event ring starting at `base` that `step` of request
    /// `request` (its index in its program) uses: `(request + request_offset)
    /// mod count` (docs/scenario-space.md, "Scenario language").
    fn event_slot(&self, base: usize, step: &Step, request: u32) -> usize {
        let offset = match step {
            Step::EventRecord { request_offset, .. } | Step::StreamWait { request_offset, .. } => {
                *request_offset as i64
            }
            _ => 0,
        };
        let ring = self.events[base].ring.max(1) as i64;
        base + (request as i64 + offset).rem_euclid(ring) as usize
    }

    fn jitter(&self, key: u64, v: Ns) -> Ns {
        self.noise.jitter_ns(key, v)
    }

    /// An API call's latency this run (the run's launch-latency scale, then per-call jitter).
    fn call_latency(&self, key: u64, v: Ns) -> Ns {
        self.jitter(key, self.noise.launch_latency(v))
    }

    /// The injector's thread: the last one, after every scenario thread.
    fn injector_thread(&self) -> usize {
        self.threads.len() - 1
    }

    /// The injector's stream: the last one, after every scenario stream.
    fn injector_stream(&self) -> usize {
        self.sc.streams.len()
    }

    fn schedule(&mut self, th: usize, at: Ns) {
        if !self.threads[th].scheduled {
            self.threads[th].scheduled = true;
            self.seq += 1;
            self.heap.push(Reverse((at, self.seq, th)));
        }
    }

    fn arrive_requests(&mut self) {
        let mut arrivals = Vec::new();
        for (pi, p) in self.sc.programs.iter().enumerate() {
            for i in 0..p.requests {
                let base = ((p.offset_us + p.interval_us * i as f64) * 1000.0) as Ns + 10_000;
                let at = base + self.jitter(0xA11 ^ ((pi as u64) << 32) ^ i as u64, 2_000);
                arrivals.push((at, pi, i));
            }
        }
        arrivals.sort();
        for (at, pi, i) in arrivals {
            let external_id = self.requests.len() as u64 + 1;
            let token = SharedStr::from(external_id.to_string());
            let p = &self.sc.programs[pi];
            let th = self.pick_member(&p.start, false, at, i as u64);
            let tid = self.threads[th].tid;
            let name = format!("{}#{}", p.name, i);
            let node = self
                .b
                .request(name, token.clone(), tid, at, self.instrumented);
            let r = self.requests.len();
            self.requests.push(RequestState {
                program: pi,
                index: i,
                token,
                external_id,
                node,
            });
            self.threads[th].queue.push_back(Item {
                request: r,
                step: 0,
                arrival: at,
                handoff: None,
                pending_sync: None,
                pending_fault: None,
                stalled: None,
                push_ready: None,
            });
            let clock = self.threads[th].clock;
            self.schedule(th, clock.max(at));
        }
    }

    fn schedule_injector(&mut self) {
        let Some(plan) = self.plan else { return };
        let th = self.injector_thread();
        // Work that delays the target is issued at the trigger instead (`run_triggered`).
        let mut actions: Vec<(Ns, InjectorWork)> = plan
            .actions
            .iter()
            .filter(|(_, a)| !a.delays_target())
            .map(|(at, a)| (*at, InjectorWork::Action(a.clone())))
            .collect();
        actions.sort_by_key(|a| a.0);
        if let Some(&(first, _)) = actions.first() {
            self.threads[th].actions = actions.into();
            self.schedule(th, first);
        }
    }

    /// Chooses the pool member that takes new work: an idle one if any
    /// (seeded-random among idle ones when the queue is randomized), else the
    /// one with the shortest queue.
    fn pick_member(&self, pool: &str, randomized: bool, at: Ns, key: u64) -> usize {
        let members = &self.pools[pool];
        let idle = members.iter().copied().filter(|&m| {
            let t = &self.threads[m];
            t.current.is_none() && t.queue.is_empty() && t.clock <= at
        });
        let idle_count = idle.clone().count();
        if idle_count > 0 {
            let i = if randomized {
                (crate::mix(self.seed ^ key ^ 0x9001) % idle_count as u64) as usize
            } else {
                0
            };
            return idle.clone().nth(i).expect("counted");
        }
        let min = members
            .iter()
            .map(|&m| self.threads[m].queue.len())
            .min()
            .unwrap_or(0);
        let mut shortest = members
            .iter()
            .copied()
            .filter(|&m| self.threads[m].queue.len() == min);
        if randomized {
            let count = shortest.clone().count() as u64;
            shortest
                .nth((crate::mix(self.seed ^ key ^ 0x9002) % count) as usize)
                .expect("counted")
        } else {
            shortest
                .min_by_key(|&m| self.threads[m].clock)
                .expect("a pool has members")
        }
    }

    fn tick(&mut self, th: usize) {
        if self.threads[th].blocked {
            return;
        }
        if let Some(&(at, _)) = self.threads[th].actions.front() {
            if at <= self.now.max(self.threads[th].clock) {
                let (at, work) = self.threads[th].actions.pop_front().unwrap();
                self.threads[th].clock = self.threads[th].clock.max(at);
                self.inject(th, work);
                if let Some(&(next, _)) = self.threads[th].actions.front() {
                    let c = self.threads[th].clock;
                    self.schedule(th, next.max(c));
                }
                return;
            }
        }
        if self.threads[th].current.is_none() {
            let Some(item) = self.threads[th].queue.pop_front() else {
                return;
            };
            self.begin_task(th, item);
        }
        self.run_step(th);
        let t = &self.threads[th];
        if t.blocked {
            // A consumer's take schedules it again.
        } else if t.current.is_some() {
            let c = t.clock;
            self.schedule(th, c);
        } else if let Some(next) = t.queue.front() {
            let at = t.clock.max(next.arrival);
            self.schedule(th, at);
        }
    }

    fn begin_task(&mut self, th: usize, item: Item) {
        let pickup = crate::record::Pickup {
            ready: item.arrival,
            thread_free: self.threads[th].clock,
            blocked_by: self.threads[th].left_blocked_by.take(),
        };
        let start = self.threads[th].clock.max(item.arrival);
        self.threads[th].clock = start;
        let req = &self.requests[item.request];
        let (token, req_node) = (req.token.clone(), req.node);
        let tid = self.threads[th].tid;
        let queue = item
            .handoff
            .as_ref()
            .map(|h| h.1.clone())
            .unwrap_or_default();
        let handoff = item.handoff.as_ref().map(|h| h.0);
        if let Some((_, queue)) = &item.handoff {
            self.take(queue, start);
        }
        let task = self.b.host_task(
            token,
            tid,
            queue,
            start,
            self.instrumented,
            Some(req_node),
            handoff,
            Some(pickup),
        );
        let t = &mut self.threads[th];
        t.task = Some(task);
        t.prev = Some(task);
        t.current = Some(item);
    }

    /// Host tasks and requests are instants (when work began), so that as
    /// predecessors they gate by their beginning, not by whatever they did later.
    fn end_task(&mut self, th: usize) {
        // A blocking copy the task ended on holds the thread's next operation.
        let pending = self.threads[th]
            .current
            .as_ref()
            .and_then(|c| c.pending_sync);
        self.threads[th].left_blocked_by = pending;
        self.threads[th].task = None;
        self.threads[th].current = None;
        self.threads[th].prev = None;
    }

    fn op_key(&self, item: &Item) -> u64 {
        crate::mix(((item.request as u64) << 24) ^ item.step as u64 ^ 0x5eed)
    }

    fn run_step(&mut self, th: usize) {
        let item = self.threads[th].current.clone().expect("running item");
        let req = &self.requests[item.request];
        let (pi, ri) = (req.program, req.index);
        let program = &self.sc.programs[pi];
        if item.step >= program.steps.len() {
            self.end_task(th);
            return;
        }
        let step = &program.steps[item.step];
        let key = self.op_key(&item);
        let skey = StepKey {
            program: pi,
            request: ri,
            step: item.step,
            graph_node: None,
            api: false,
        };
        // An injected stall is a step of its own, so other threads' work in the
        // meantime is placed before the delayed call (global time order).
        if item.stalled.is_none()
            && self
                .plan
                .is_some_and(|p| p.host_target.as_ref() == Some(&skey))
        {
            let fault = self.host_stall(th, &skey);
            self.threads[th].current.as_mut().unwrap().stalled = Some(fault);
            return;
        }
        if item.stalled.is_none() {
            // Background stalls and the injector's trigger take time before the
            // step, so they are steps of their own too.
            let stalled = self.background_noise(th, key);
            let trigger = self.plan.is_some_and(|p| p.trigger.as_ref() == Some(&skey));
            if trigger {
                self.run_triggered(th);
            }
            if stalled || trigger {
                self.threads[th].current.as_mut().unwrap().stalled = Some(None);
                return;
            }
        }
        let current = self.threads[th].current.as_mut().unwrap();
        current.step += 1;
        current.stalled = None;
        match step {
            Step::HostWork { duration_us, .. } => {
                if let Some(Some(f)) = item.stalled {
                    current.pending_fault = Some(f);
                }
                let d = self.jitter(key, (duration_us * 1000.0) as Ns);
                self.threads[th].clock += d;
            }
            Step::Handoff { .. } => {
                let queue = self.step_name(pi, item.step);
                self.handoff(th, &item, queue, key)
            }
            Step::NvtxPush { .. } => {
                let c = self.threads[th].clock;
                let name = self.step_name(pi, item.step);
                self.threads[th].nvtx.push((name, c));
                self.threads[th].clock += 300;
            }
            Step::NvtxPop => {
                let c = self.threads[th].clock;
                let tid = self.threads[th].tid;
                if let Some((name, start)) = self.threads[th].nvtx.pop() {
                    if self.instrumented {
                        self.b.record(None, |rid| Record::Nvtx {
                            rid,
                            tid,
                            name,
                            start,
                            end: c,
                        });
                    }
                }
                self.threads[th].clock += 300;
            }
            Step::Recreate { object, name } => {
                self.recreate(*object, name);
                self.threads[th].clock += self.jitter(key, 20_000);
            }
            _ => self.api_step(th, &item, step, skey, key),
        }
        if self.threads[th]
            .current
            .as_ref()
            .is_some_and(|c| c.step >= program.steps.len())
        {
            self.end_task(th);
        }
    }

    fn recreate(&mut self, object: ObjectKind, name: &str) {
        match object {
            ObjectKind::Stream => {
                let s = &mut self.streams[self.stream_ix[name]];
                s.cupti_id = self.next_cupti_stream;
                self.next_cupti_stream += 1;
                s.generation += 1;
                // A fresh stream has no pending work: destroy waited for it.
                s.tail.clear();
                s.waiting = None;
            }
            ObjectKind::Event => {
                // Every event of the ring is destroyed and created again.
                let base = self.event_ix[name];
                let ring = self.events[base].ring.max(1) as usize;
                for e in &mut self.events[base..base + ring] {
                    e.generation += 1;
                    e.last = None;
                }
            }
            ObjectKind::Graph => {
                let g = &mut self.graphs[self.graph_ix[name]];
                g.exec_id = self.next_graph_exec;
                self.next_graph_exec += 1;
                g.generation += 1;
            }
        }
    }

    /// The kernel, NVTX range or queue name of a step.
    fn step_name(&self, program: usize, step: usize) -> SharedStr {
        let names = self.names.step(program, step);
        names.name.clone().expect("the step has a name")
    }

    /// A consumer took an item of `queue` at `at`: on a bounded queue its slot
    /// goes to the first producer waiting for room, which pushes then.
    fn take(&mut self, queue: &str, at: Ns) {
        let Some(room) = self.rooms.get_mut(queue) else {
            return;
        };
        room.held -= 1;
        let Some(p) = room.waiting.pop_front() else {
            return;
        };
        room.held += 1;
        let t = &mut self.threads[p];
        t.blocked = false;
        t.clock = t.clock.max(at);
        let c = t.clock;
        self.schedule(p, c);
    }

    /// Whether the push of `item` (its current step) must wait for room: its
    /// bounded queue is full and no take has given it a slot yet. Then the
    /// thread stays at the step, its stall already taken, until `take`.
    fn wait_for_room(&mut self, th: usize, item: &Item, queue: &str) -> bool {
        let Some(room) = self.rooms.get_mut(queue) else {
            return false;
        };
        if item.push_ready.is_some() {
            // Woken by a take, which counted its slot.
            return false;
        }
        if room.held < room.capacity {
            room.held += 1;
            return false;
        }
        room.waiting.push_back(th);
        let t = &mut self.threads[th];
        t.blocked = true;
        let clock = t.clock;
        let current = t.current.as_mut().expect("running item");
        current.step = item.step;
        current.stalled = Some(item.stalled.flatten());
        current.push_ready = Some(clock);
        true
    }

    fn handoff(&mut self, th: usize, item: &Item, queue: SharedStr, key: u64) {
        if self.wait_for_room(th, item, &queue) {
            return;
        }
        let tid = self.threads[th].tid;
        let at = self.threads[th].clock;
        let ready = item.push_ready.unwrap_or(at);
        let token = self.requests[item.request].token.clone();
        let (task, prev) = (self.threads[th].task, self.threads[th].prev);
        let h = self.b.handoff(
            queue.clone(),
            token,
            tid,
            (ready, at),
            self.instrumented,
            task,
            prev,
            item.pending_sync,
        );
        let fault = item.stalled.flatten().or(item.pending_fault);
        self.b.call_waited(h, fault, None);
        self.threads[th].clock += self.jitter(key ^ 1, self.be.host.enqueue_ns);
        let decl = self.queues[&*queue];
        let arrival = self.threads[th].clock + self.jitter(key ^ 2, self.be.host.wakeup_ns);
        let next = Item {
            request: item.request,
            step: item.step + 1,
            arrival,
            handoff: Some((h, queue)),
            pending_sync: None,
            pending_fault: None,
            stalled: None,
            push_ready: None,
        };
        // This thread's part of the request ends here.
        self.end_task(th);
        let consumer = self.pick_member(&decl.consumer, decl.randomized, arrival, key);
        self.threads[consumer].queue.push_back(next);
        let c = self.threads[consumer].clock;
        if self.threads[consumer].current.is_none() {
            self.schedule(consumer, c.max(arrival));
        }
    }
}
