//! The discrete-event core: host threads execute request programs one step at
//! a time in global time order, and every API call places its device work on
//! the device model at the moment it is enqueued.

mod injected_work;

use super::device::{CopyEngine, SmPool};
use super::inject::{Action, Plan};
use super::names::{Api, Names};
use super::noise::{Noise, Stall};
use super::SimBackend;
use crate::anonymous::Disguise;
use crate::build::{NodeInfo, RunBuilder};
use ground_truth::bundle::LossAccounting;
use ground_truth::graph::{EdgeType, InjectionRecord, NodeId, NodeKind};
use ground_truth::scenario::{
    InjectionKind, LaunchApi, ObjectKind, QueueDecl, Scenario, Step, SyncTarget,
};
use ground_truth::trace::{CopyDirection, HostMemory, MarkerPhase, Record, SwitchReason, SyncType};
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

const INJECTOR_THREAD: &str = "causalbench-injector";
const INJECTOR_STREAM: &str = "causalbench-injector";
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

#[derive(Debug, Clone)]
struct Item {
    request: usize,
    step: usize,
    arrival: Ns,
    /// The handoff node and queue this work arrived through.
    handoff: Option<(NodeId, SharedStr)>,
    /// A device op the next host operation waited for (blocking copy).
    pending_sync: Option<NodeId>,
    /// The injected host stall before the current step already happened (its fault node, if any).
    stalled: Option<Option<NodeId>>,
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
    nvtx: Vec<(SharedStr, Ns)>,
    actions: VecDeque<(Ns, Action)>,
}

#[derive(Debug, Clone)]
struct Stream {
    cupti_id: u32,
    handle: u64,
    generation: u32,
    tail_end: Ns,
    tail: Vec<NodeId>,
}

#[derive(Debug, Clone)]
struct Event {
    handle: u64,
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
    streams: Vec<Stream>,
    stream_ix: HashMap<String, usize>,
    events: Vec<Event>,
    event_ix: HashMap<String, usize>,
    graphs: Vec<GraphExec>,
    graph_ix: HashMap<String, usize>,
    requests: Vec<RequestState>,
    sms: SmPool,
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
        for decl in sc
            .threads
            .iter()
            .map(|t| (t.name.as_str(), t.count))
            .chain([(INJECTOR_THREAD, 1)])
        {
            let mut members = Vec::new();
            for _ in 0..decl.1 {
                members.push(threads.len());
                threads.push(Thread {
                    tid: TID_BASE + threads.len() as u32,
                    clock: 0,
                    queue: VecDeque::new(),
                    current: None,
                    scheduled: false,
                    task: None,
                    prev: None,
                    nvtx: Vec::new(),
                    actions: VecDeque::new(),
                });
            }
            pools.insert(decl.0.to_string(), members);
        }
        let thread_count = threads.len();
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
            streams: Vec::new(),
            stream_ix: HashMap::new(),
            events: Vec::new(),
            event_ix: HashMap::new(),
            graphs: Vec::new(),
            graph_ix: HashMap::new(),
            requests: Vec::new(),
            sms: SmPool::default(),
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
        for (i, s) in sc
            .streams
            .iter()
            .map(|s| s.name.as_str())
            .chain([INJECTOR_STREAM])
            .enumerate()
        {
            let cupti_id = e.next_cupti_stream;
            e.next_cupti_stream += 1;
            e.streams.push(Stream {
                cupti_id,
                handle: 0x5600_0000_1000 + 0x200 * i as u64,
                generation: 0,
                tail_end: 0,
                tail: Vec::new(),
            });
            e.stream_ix.insert(s.to_string(), i);
        }
        for (i, ev) in sc.events.iter().enumerate() {
            e.events.push(Event {
                handle: 0x5700_0000_2000 + 0x40 * i as u64,
                generation: 0,
                last: None,
            });
            e.event_ix.insert(ev.name.clone(), i);
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

    fn jitter(&self, key: u64, v: Ns) -> Ns {
        self.noise.jitter_ns(key, v)
    }

    /// An API call's latency this run (the run's launch-latency scale, then per-call jitter).
    fn call_latency(&self, key: u64, v: Ns) -> Ns {
        self.jitter(key, self.noise.launch_latency(v))
    }

    fn injector_thread(&self) -> usize {
        self.pools[INJECTOR_THREAD][0]
    }

    fn injector_stream(&self) -> usize {
        self.stream_ix[INJECTOR_STREAM]
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
            let node = self.b.node(
                NodeKind::Request,
                format!("{}#{}", p.name, i),
                NodeInfo {
                    request: Some(token.clone()),
                    thread: Some(tid),
                    ..Default::default()
                },
                at,
                at,
            );
            if self.instrumented {
                self.b.record(Some(node), |rid| Record::Marker {
                    rid,
                    tid,
                    phase: MarkerPhase::RequestBegin,
                    queue: SharedStr::default(),
                    token: token.clone(),
                    ts: at,
                });
            }
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
                stalled: None,
            });
            let clock = self.threads[th].clock;
            self.schedule(th, clock.max(at));
        }
    }

    fn schedule_injector(&mut self) {
        let Some(plan) = self.plan else { return };
        let th = self.injector_thread();
        let mut actions: Vec<(Ns, Action)> = plan.actions.clone();
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
        if let Some(&(at, _)) = self.threads[th].actions.front() {
            if at <= self.now.max(self.threads[th].clock) {
                let (at, action) = self.threads[th].actions.pop_front().unwrap();
                self.threads[th].clock = self.threads[th].clock.max(at);
                self.inject_action(th, action);
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
        if t.current.is_some() {
            let c = t.clock;
            self.schedule(th, c);
        } else if let Some(next) = t.queue.front() {
            let at = t.clock.max(next.arrival);
            self.schedule(th, at);
        }
    }

    fn begin_task(&mut self, th: usize, item: Item) {
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
        let task = self.b.host_task(
            token,
            tid,
            queue,
            start,
            self.instrumented,
            Some(req_node),
            handoff,
        );
        let t = &mut self.threads[th];
        t.task = Some(task);
        t.prev = Some(task);
        t.current = Some(item);
    }

    /// Host tasks and requests are instants (when work began), so that as
    /// predecessors they gate by their beginning, not by whatever they did later.
    fn end_task(&mut self, th: usize) {
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
        self.background_noise(th, key);
        if self.plan.is_some_and(|p| p.trigger.as_ref() == Some(&skey)) {
            self.run_triggered(th);
        }
        self.threads[th].current.as_mut().unwrap().step += 1;
        match step {
            Step::HostWork { duration_us, .. } => {
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
            }
            ObjectKind::Event => {
                let e = &mut self.events[self.event_ix[name]];
                e.generation += 1;
                e.last = None;
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

    fn handoff(&mut self, th: usize, item: &Item, queue: SharedStr, key: u64) {
        let tid = self.threads[th].tid;
        let at = self.threads[th].clock;
        let token = self.requests[item.request].token.clone();
        let h = self.b.node(
            NodeKind::QueueHandoff,
            &queue,
            NodeInfo {
                request: Some(token.clone()),
                thread: Some(tid),
                ..Default::default()
            },
            at,
            at,
        );
        if self.instrumented {
            self.b.record(Some(h), |rid| Record::Marker {
                rid,
                tid,
                phase: MarkerPhase::Enqueue,
                queue: queue.clone(),
                token: token.clone(),
                ts: at,
            });
        }
        if let Some(task) = self.threads[th].task {
            self.b.edge(task, h, EdgeType::Handoff);
        }
        if let Some(dev) = item.pending_sync {
            self.b.edge(dev, h, EdgeType::Sync);
        }
        self.threads[th].clock += self.jitter(key ^ 1, self.be.host.enqueue_ns);
        let decl = self.queues[&*queue];
        let arrival = self.threads[th].clock + self.jitter(key ^ 2, self.be.host.wakeup_ns);
        let next = Item {
            request: item.request,
            step: item.step + 1,
            arrival,
            handoff: Some((h, queue)),
            pending_sync: None,
            stalled: None,
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

    /// The background preemptions and page faults that hit this application
    /// thread before its next step: real (simulated) stalls with the records a
    /// recorder sees, and no ground-truth node (they are host time, not a cause).
    fn background_noise(&mut self, th: usize, key: u64) {
        let tid = self.threads[th].tid;
        for stall in self.noise.before_step(th, self.threads[th].clock, key) {
            let at = self.threads[th].clock;
            let cost = match stall {
                Stall::Preempted(off_cpu) => {
                    let cpu = 3 + (tid % 13);
                    self.b.record(None, |rid| Record::Sched {
                        rid,
                        tid,
                        cpu,
                        switch_out: at,
                        switch_in: at + off_cpu,
                        reason: SwitchReason::Preempted,
                    });
                    off_cpu
                }
                Stall::PageFault { cost, address } => {
                    self.b.record(None, |rid| Record::PageFault {
                        rid,
                        tid,
                        ts: at,
                        duration: cost,
                        address,
                        major: false,
                    });
                    cost
                }
            };
            self.threads[th].clock = at + cost;
        }
    }

    /// Host stall injected right before the target call (preemption or page faults).
    fn host_stall(&mut self, th: usize, skey: &StepKey) -> Option<NodeId> {
        let plan = self.plan?;
        if plan.host_target.as_ref() != Some(skey) {
            return None;
        }
        let tid = self.threads[th].tid;
        let start = self.threads[th].clock;
        let mag = plan.magnitude_ns;
        if plan.kind == InjectionKind::HostDelay {
            // Application work: the thread stays on CPU, so nothing but time shows it.
            self.threads[th].clock = start + mag;
            self.injections.push(InjectionRecord {
                kind: plan.kind.as_str().into(),
                mechanism: "sim:host-compute".into(),
                requested_us: mag as f64 / 1000.0,
                measured_us: mag as f64 / 1000.0,
                fault_node: None,
            });
            return None;
        }
        let (name, mechanism, dur) = match plan.kind {
            InjectionKind::CpuDeschedule => ("cpu_deschedule", "sim:preemption", mag),
            InjectionKind::HostPageFaultMinor | InjectionKind::HostPageFaultMajor => {
                let major = plan.kind == InjectionKind::HostPageFaultMajor;
                let cost = if major {
                    self.be.host.major_fault_ns
                } else {
                    self.be.host.minor_fault_ns
                };
                let n = (mag as f64 / cost as f64).round().max(1.0) as u64;
                (
                    if major {
                        "host_page_fault_major"
                    } else {
                        "host_page_fault_minor"
                    },
                    "sim:page-faults",
                    n * cost,
                )
            }
            _ => return None,
        };
        let fault = self.b.node(
            NodeKind::InjectedFault,
            name,
            NodeInfo {
                thread: Some(tid),
                step: self.names.step(skey.program, skey.step).id.clone(),
                ..Default::default()
            },
            start,
            start + dur,
        );
        match plan.kind {
            InjectionKind::CpuDeschedule => {
                let cpu = 3 + (tid % 13);
                self.b.record(Some(fault), |rid| Record::Sched {
                    rid,
                    tid,
                    cpu,
                    switch_out: start,
                    switch_in: start + dur,
                    reason: SwitchReason::Preempted,
                });
            }
            _ => {
                let major = plan.kind == InjectionKind::HostPageFaultMajor;
                let cost = if major {
                    self.be.host.major_fault_ns
                } else {
                    self.be.host.minor_fault_ns
                };
                let n = dur / cost;
                for i in 0..n {
                    let address =
                        0x7f3a_0000_0000 + (crate::mix(self.seed ^ i) % (1 << 30)) / 4096 * 4096;
                    self.b.record(Some(fault), |rid| Record::PageFault {
                        rid,
                        tid,
                        ts: start + i * cost,
                        duration: cost,
                        address,
                        major,
                    });
                }
            }
        }
        self.threads[th].clock = start + dur;
        self.injections.push(InjectionRecord {
            kind: plan.kind.as_str().into(),
            mechanism: mechanism.into(),
            requested_us: mag as f64 / 1000.0,
            measured_us: dur as f64 / 1000.0,
            fault_node: Some(fault),
        });
        Some(fault)
    }

    /// Emits the API call (node + api, uprobe and external-correlation records).
    /// `external_id`: the request an instrumented application tags the call with.
    #[allow(clippy::too_many_arguments)]
    fn api_call(
        &mut self,
        th: usize,
        kind: NodeKind,
        api: Api,
        info: NodeInfo,
        start: Ns,
        end: Ns,
        handle: u64,
        external_id: Option<u64>,
    ) -> (NodeId, u32) {
        let tid = self.threads[th].tid;
        let corr = self.correlation;
        self.correlation += 1;
        let call_site = info.call_site.clone();
        let node = self.b.node(kind, self.names.api(api), info, start, end);
        let spec = api.spec();
        self.b.record(Some(node), |rid| Record::Api {
            rid,
            domain: spec.domain,
            cbid: spec.cbid,
            name: self.names.api(api).clone(),
            tid,
            start,
            end,
            correlation_id: corr,
        });
        let enter = start + (end - start).min(400) / 2;
        let exit = end.saturating_sub((end - start).min(400) / 2).max(enter);
        self.b.record(Some(node), |rid| {
            let stack = self.names.stack(api, call_site.as_ref());
            Record::Uprobe {
                rid,
                tid,
                function: self.names.driver_fn(api).clone(),
                enter,
                exit,
                handle,
                stack,
            }
        });
        if let (true, Some(external_id)) = (self.instrumented, external_id) {
            self.b.record(None, |rid| Record::ExternalCorrelation {
                rid,
                external_kind: self.names.request_kind.clone(),
                external_id,
                correlation_id: corr,
            });
        }
        if let Some(prev) = self.threads[th].prev {
            self.b.edge(prev, node, EdgeType::HostOrder);
        }
        self.threads[th].prev = Some(node);
        (node, corr)
    }

    fn api_step(&mut self, th: usize, item: &Item, step: &Step, skey: StepKey, key: u64) {
        let fault = item.stalled.flatten();
        self.threads[th].current.as_mut().unwrap().stalled = None;
        let request = &self.requests[item.request];
        let (token, external_id) = (request.token.clone(), Some(request.external_id));
        let tid = self.threads[th].tid;
        let operator = self.threads[th].nvtx.last().map(|n| n.0.clone());
        let step_id = self.names.step(skey.program, skey.step).id.clone();
        let targets = self.targets[skey.program][skey.step];
        let info = |call_site: Option<SharedStr>, stream: Option<u32>, generation: u32| NodeInfo {
            request: Some(token.clone()),
            step: step_id.clone(),
            thread: Some(tid),
            stream,
            call_site,
            operator: operator.clone(),
            generation,
        };
        let start = self.threads[th].clock;
        let pending_sync = item.pending_sync;
        self.threads[th].current.as_mut().unwrap().pending_sync = None;
        let be = self.be;
        let hp = &be.host;
        let api_node: Option<NodeId>;
        match step {
            Step::Kernel { .. }
            | Step::Copy { .. }
            | Step::Memset { .. }
            | Step::EventRecord { .. }
            | Step::StreamWait { .. } => {
                // Calls that enqueue one op on one stream share everything but the op itself.
                let si = targets.stream.expect("stream steps name a stream");
                let call = self.stream_call(step, skey.program, si, skey.step);
                let end = start + self.call_latency(key, call.latency_ns);
                let inf = info(
                    call.call_site,
                    Some(self.streams[si].cupti_id),
                    call.generation,
                );
                let (node, corr) = self.api_call(
                    th,
                    NodeKind::ApiCall,
                    call.api,
                    inf.clone(),
                    start,
                    end,
                    call.handle,
                    external_id,
                );
                api_node = Some(node);
                let queued = start + QUEUE_OFFSET_NS;
                let dev = match step {
                    Step::Kernel {
                        duration_us,
                        grid,
                        block,
                        ..
                    } => {
                        let names = self.names.step(skey.program, skey.step);
                        let name = names.name.clone().expect("kernels have a name");
                        let duration = self.jitter(key ^ 0xD, (duration_us * 1000.0) as Ns)
                            + self.stretch(&skey);
                        let launch = KernelLaunch {
                            name: &name,
                            grid: *grid,
                            block: *block,
                            duration,
                        };
                        self.place_kernel(si, launch, queued, corr, inf, &skey)
                    }
                    Step::Copy {
                        direction,
                        bytes,
                        memory,
                        ..
                    } => self.memcpy(
                        si, *direction, *bytes, *memory, queued, corr, inf, &skey, key,
                    ),
                    Step::Memset { bytes, .. } => {
                        self.memset(si, *bytes, queued, corr, inf, &skey, key)
                    }
                    Step::EventRecord { .. } => {
                        let ei = targets.event.expect("event steps name an event");
                        self.event_record(si, ei, queued, corr, inf)
                    }
                    Step::StreamWait { .. } => {
                        let ei = targets.event.expect("event steps name an event");
                        self.stream_wait(si, ei, queued, corr, inf)
                    }
                    _ => unreachable!("matched above"),
                };
                self.b.edge(node, dev, EdgeType::Launch);
                self.remember(&skey, dev);
                let mut ret = end;
                // Pageable copies are staged through the host: the call returns only
                // when the copy is done (an implicit synchronization).
                if let Step::Copy {
                    memory: HostMemory::Pageable,
                    direction,
                    ..
                } = step
                {
                    if *direction != CopyDirection::D2d {
                        let done = self.b.truth.nodes[dev as usize].end;
                        ret = end.max(done + self.jitter(key ^ 7, hp.resume_ns));
                        self.block(th, end, ret);
                        self.b.truth.nodes[node as usize].end = ret;
                        if let Some(Record::Api { end, .. }) = self.last_record_of(node, "api") {
                            *end = ret;
                        }
                        self.threads[th].current.as_mut().unwrap().pending_sync = Some(dev);
                    }
                }
                self.threads[th].clock = ret;
            }
            Step::GraphLaunch { .. } => {
                let si = targets.stream.expect("graph launches name a stream");
                let gi = targets.graph.expect("graph launches name a graph");
                let end = start + self.call_latency(key, hp.graph_launch_ns);
                let s = &self.streams[si];
                let inf = info(None, Some(s.cupti_id), self.graphs[gi].generation);
                let handle = 0x5800_0000_0000 + self.graphs[gi].exec_id as u64 * 0x100;
                let (node, corr) = self.api_call(
                    th,
                    NodeKind::GraphLaunch,
                    Api::GraphLaunch,
                    inf.clone(),
                    start,
                    end,
                    handle,
                    external_id,
                );
                api_node = Some(node);
                let queued = start + QUEUE_OFFSET_NS;
                self.graph_launch(si, gi, node, queued, corr, inf, &skey, key);
                self.remember(&skey, node);
                self.threads[th].clock = end;
            }
            Step::Sync { target, event, .. } => {
                let (api, sync_type, handle, waited, sync_stream) = match target {
                    SyncTarget::Stream => {
                        let s = &self.streams[targets.stream.expect("stream syncs name a stream")];
                        (
                            Api::StreamSynchronize,
                            SyncType::StreamSynchronize,
                            s.handle,
                            s.tail.clone(),
                            s.cupti_id,
                        )
                    }
                    SyncTarget::Event => {
                        let e = &self.events[targets.event.expect("event syncs name an event")];
                        (
                            Api::EventSynchronize,
                            SyncType::EventSynchronize,
                            e.handle,
                            e.last.map(|l| vec![l.0]).unwrap_or_default(),
                            0,
                        )
                    }
                    SyncTarget::Device => (
                        Api::DeviceSynchronize,
                        SyncType::ContextSynchronize,
                        0,
                        self.streams
                            .iter()
                            .flat_map(|s| s.tail.iter().copied())
                            .collect(),
                        0,
                    ),
                };
                // An event sync joins to the record it waited on, like a stream wait does.
                let waited_sync_id = match (target, event) {
                    (SyncTarget::Event, Some(_)) => self.events
                        [targets.event.expect("event syncs name an event")]
                    .last
                    .map(|l| l.2)
                    .unwrap_or(0),
                    _ => 0,
                };
                let call_end = start + self.call_latency(key, hp.sync_call_ns);
                let done = waited
                    .iter()
                    .map(|&n| self.b.truth.nodes[n as usize].end)
                    .max()
                    .unwrap_or(0);
                let ret = if done > call_end {
                    done + self.jitter(key ^ 7, hp.resume_ns)
                } else {
                    call_end
                };
                let inf = info(None, None, 0);
                let (node, corr) = self.api_call(
                    th,
                    NodeKind::Synchronization,
                    api,
                    inf,
                    start,
                    ret,
                    handle,
                    external_id,
                );
                api_node = Some(node);
                for &w in &waited {
                    if self.b.truth.nodes[w as usize].end > start {
                        self.b.edge(w, node, EdgeType::Sync);
                    }
                }
                self.b.record(Some(node), |rid| Record::Sync {
                    rid,
                    sync_type,
                    stream: sync_stream,
                    event: if sync_type == SyncType::EventSynchronize {
                        handle
                    } else {
                        0
                    },
                    event_sync_id: waited_sync_id,
                    correlation_id: corr,
                    start,
                    end: ret,
                });
                self.block(th, call_end, ret);
                self.remember(&skey, node);
                self.threads[th].clock = ret;
            }
            Step::HostWork { .. }
            | Step::Handoff { .. }
            | Step::NvtxPush { .. }
            | Step::NvtxPop
            | Step::Recreate { .. } => {
                unreachable!("not an API step")
            }
        }
        if let Some(node) = api_node {
            if let Some(f) = fault {
                self.b.edge(f, node, EdgeType::Fault);
            }
            if let Some(dev) = pending_sync {
                self.b.edge(dev, node, EdgeType::Sync);
            }
            if step_id.is_some() {
                self.keys.insert(StepKey { api: true, ..skey }, node);
            }
        }
    }

    /// The API call a stream step makes: names, latency, the raw handle its first argument carries.
    fn stream_call(&self, step: &Step, program: usize, si: usize, step_ix: usize) -> StreamCall {
        let hp = &self.be.host;
        let s = &self.streams[si];
        let call_site = || self.names.step(program, step_ix).call_site.clone();
        let event = || &self.events[self.targets[program][step_ix].event.expect("an event step")];
        let (api, latency_ns, handle, generation, call_site) = match step {
            Step::Kernel { launch, .. } => {
                let api = match launch {
                    LaunchApi::Runtime => Api::LaunchKernel,
                    LaunchApi::Driver => Api::CuLaunchKernel,
                    LaunchApi::DriverEx => Api::CuLaunchKernelEx,
                };
                (api, hp.launch_ns, s.handle, s.generation, call_site())
            }
            Step::Copy { direction, .. } => (
                Api::memcpy(*direction),
                hp.copy_call_ns,
                s.handle,
                s.generation,
                call_site(),
            ),
            Step::Memset { .. } => (Api::MemsetAsync, hp.launch_ns, s.handle, s.generation, None),
            Step::EventRecord { .. } => {
                let e = event();
                (
                    Api::EventRecord,
                    hp.event_call_ns,
                    e.handle,
                    e.generation,
                    None,
                )
            }
            // cuStreamWaitEvent(hStream, hEvent, flags): the first argument is the stream.
            Step::StreamWait { .. } => (
                Api::StreamWaitEvent,
                hp.event_call_ns,
                s.handle,
                event().generation,
                None,
            ),
            _ => unreachable!("not a stream step"),
        };
        StreamCall {
            api,
            latency_ns,
            handle,
            generation,
            call_site,
        }
    }

    /// Only steps with an id can be targets or symptoms, so only they are remembered.
    fn remember(&mut self, skey: &StepKey, node: NodeId) {
        crate::keys::remember(&mut self.keys, self.sc, skey, node);
    }

    fn last_record_of(&mut self, node: NodeId, kind: &str) -> Option<&mut Record> {
        let rids = self.b.truth.nodes[node as usize].rids.clone();
        self.b
            .trace
            .iter_mut()
            .rev()
            .take(8)
            .find(|r| rids.contains(&r.rid()) && r.kind_name() == kind)
    }

    /// A blocked host thread shows up to eBPF as a voluntary switch-out.
    fn block(&mut self, th: usize, from: Ns, to: Ns) {
        if to > from + 20_000 {
            let tid = self.threads[th].tid;
            let cpu = 3 + (tid % 13);
            self.b.record(None, |rid| Record::Sched {
                rid,
                tid,
                cpu,
                switch_out: from,
                switch_in: to,
                reason: SwitchReason::Blocked,
            });
        }
    }

    /// Extra duration the plan adds to this device op (lengthening injections).
    fn stretch(&mut self, skey: &StepKey) -> Ns {
        match self.plan {
            Some(p) if p.stretch_target.as_ref() == Some(skey) => {
                self.injections.push(InjectionRecord {
                    kind: p.kind.as_str().into(),
                    mechanism: "sim:longer-device-work".into(),
                    requested_us: p.magnitude_ns as f64 / 1000.0,
                    measured_us: p.magnitude_ns as f64 / 1000.0,
                    fault_node: None,
                });
                p.magnitude_ns
            }
            _ => 0,
        }
    }

    fn lose_record(&self, skey: &StepKey) -> bool {
        self.plan
            .is_some_and(|p| p.lose_target.as_ref() == Some(skey))
    }

    /// `dev` is the stream's new tail, ordered after the previous one(s).
    /// The tail vector is reused: one op per stream step must not allocate.
    fn stream_order(&mut self, si: usize, dev: NodeId) {
        let tail = &mut self.streams[si].tail;
        for &p in tail.iter() {
            self.b.edge(p, dev, EdgeType::StreamOrder);
        }
        tail.clear();
        tail.push(dev);
    }

    /// Places a kernel on the SMs after the stream's previous work: its node,
    /// stream order and CUPTI record (unless the plan loses it).
    fn place_kernel(
        &mut self,
        si: usize,
        kernel: KernelLaunch,
        queued: Ns,
        corr: u32,
        info: NodeInfo,
        skey: &StepKey,
    ) -> NodeId {
        let KernelLaunch {
            name,
            grid,
            block,
            duration,
        } = kernel;
        let ready = queued.max(self.streams[si].tail_end);
        let start = self.sms.place(
            ready + self.be.device.dispatch_ns,
            grid,
            duration,
            self.be.device.sms,
            self.now,
        );
        let end = start + duration;
        let stream_id = self.streams[si].cupti_id;
        let dev = self.b.node(NodeKind::Kernel, name, info, start, end);
        self.b.set_device_times(dev, queued, ready, start, end);
        self.stream_order(si, dev);
        self.streams[si].tail_end = end;
        if self.lose_record(skey) {
            self.loss.cupti_dropped += 1;
        } else {
            self.b.record(Some(dev), |rid| Record::Kernel {
                rid,
                name: name.clone(),
                stream: stream_id,
                context: 1,
                device: 0,
                correlation_id: corr,
                graph_id: 0,
                graph_node_id: 0,
                queued,
                submitted: ready,
                start,
                end,
                grid: [grid, 1, 1],
                block: [block, 1, 1],
                channel: si as u32,
            });
        }
        dev
    }

    #[allow(clippy::too_many_arguments)]
    fn memcpy(
        &mut self,
        si: usize,
        direction: CopyDirection,
        bytes: u64,
        memory: HostMemory,
        queued: Ns,
        corr: u32,
        info: NodeInfo,
        skey: &StepKey,
        key: u64,
    ) -> NodeId {
        let d = &self.be.device;
        let bw = match (direction, memory) {
            (CopyDirection::D2d, _) => d.d2d_bytes_per_ns,
            (_, HostMemory::Pinned) => d.pinned_bytes_per_ns,
            (_, HostMemory::Pageable) => d.pageable_bytes_per_ns,
        };
        let dur = self.jitter(key ^ 0xC, d.copy_setup_ns + (bytes as f64 / bw) as Ns)
            + self.stretch(skey);
        let ready = queued.max(self.streams[si].tail_end);
        let start = if direction == CopyDirection::D2d {
            ready + d.copy_setup_ns
        } else {
            self.copies.place(ready + d.copy_setup_ns, dur)
        };
        let end = start + dur;
        let stream_id = self.streams[si].cupti_id;
        let name = self.names.memcpy(direction).clone();
        let dev = self.b.node(NodeKind::Memcpy, name, info, start, end);
        self.b.set_device_times(dev, queued, ready, start, end);
        self.stream_order(si, dev);
        self.streams[si].tail_end = end;
        if self.lose_record(skey) {
            self.loss.cupti_dropped += 1;
        } else {
            self.b.record(Some(dev), |rid| Record::Memcpy {
                rid,
                direction,
                memory,
                bytes,
                stream: stream_id,
                context: 1,
                device: 0,
                correlation_id: corr,
                graph_id: 0,
                graph_node_id: 0,
                queued,
                submitted: ready,
                start,
                end,
                channel: 100 + si as u32,
            });
        }
        dev
    }

    #[allow(clippy::too_many_arguments)]
    fn memset(
        &mut self,
        si: usize,
        bytes: u64,
        queued: Ns,
        corr: u32,
        info: NodeInfo,
        skey: &StepKey,
        key: u64,
    ) -> NodeId {
        let d = &self.be.device;
        let dur = self.jitter(
            key ^ 0xE,
            1_000 + (bytes as f64 / d.memset_bytes_per_ns) as Ns,
        ) + self.stretch(skey);
        let ready = queued.max(self.streams[si].tail_end);
        let start = ready + d.dispatch_ns;
        let end = start + dur;
        let stream_id = self.streams[si].cupti_id;
        let name = self.names.memset.clone();
        let dev = self.b.node(NodeKind::Memset, name, info, start, end);
        self.b.set_device_times(dev, queued, ready, start, end);
        self.stream_order(si, dev);
        self.streams[si].tail_end = end;
        if self.lose_record(skey) {
            self.loss.cupti_dropped += 1;
        } else {
            self.b.record(Some(dev), |rid| Record::Memset {
                rid,
                bytes,
                stream: stream_id,
                context: 1,
                device: 0,
                correlation_id: corr,
                queued,
                submitted: ready,
                start,
                end,
            });
        }
        dev
    }

    fn event_record(
        &mut self,
        si: usize,
        ei: usize,
        queued: Ns,
        corr: u32,
        info: NodeInfo,
    ) -> NodeId {
        let done = queued.max(self.streams[si].tail_end);
        let name = self.names.event_record.clone();
        let dev = self.b.node(NodeKind::EventRecord, name, info, done, done);
        self.b.set_device_times(dev, queued, done, done, done);
        self.stream_order(si, dev);
        let sync_id = self.event_sync_id;
        self.event_sync_id += 1;
        let (event, stream) = (self.events[ei].handle, self.streams[si].cupti_id);
        self.events[ei].last = Some((dev, done, sync_id));
        self.b.record(Some(dev), |rid| Record::CudaEvent {
            rid,
            event,
            event_sync_id: sync_id,
            stream,
            correlation_id: corr,
            ts: done,
        });
        dev
    }

    fn stream_wait(
        &mut self,
        si: usize,
        ei: usize,
        queued: Ns,
        corr: u32,
        info: NodeInfo,
    ) -> NodeId {
        let start = queued.max(self.streams[si].tail_end);
        let last = self.events[ei].last;
        let end = start.max(last.map(|l| l.1).unwrap_or(0));
        let name = self.names.stream_wait.clone();
        let dev = self.b.node(NodeKind::StreamWait, name, info, start, end);
        self.b.set_device_times(dev, queued, start, start, end);
        self.stream_order(si, dev);
        self.streams[si].tail_end = end;
        if let Some((rec, _, _)) = last {
            self.b.edge(rec, dev, EdgeType::Event);
        }
        let (event, stream) = (self.events[ei].handle, self.streams[si].cupti_id);
        let event_sync_id = last.map(|l| l.2).unwrap_or(0);
        self.b.record(Some(dev), |rid| Record::Sync {
            rid,
            sync_type: SyncType::StreamWaitEvent,
            stream,
            event,
            event_sync_id,
            correlation_id: corr,
            start,
            end,
        });
        dev
    }

    #[allow(clippy::too_many_arguments)]
    fn graph_launch(
        &mut self,
        si: usize,
        gi: usize,
        launch: NodeId,
        queued: Ns,
        corr: u32,
        info: NodeInfo,
        skey: &StepKey,
        key: u64,
    ) {
        let decl = &self.sc.graphs[gi];
        let base_ready = queued.max(self.streams[si].tail_end);
        let tail = std::mem::take(&mut self.streams[si].tail);
        let mut ids: HashMap<&str, NodeId> = HashMap::new();
        let mut has_dependants: Vec<bool> = vec![false; decl.nodes.len()];
        for n in &decl.nodes {
            for a in &n.after {
                if let Some(j) = decl.nodes.iter().position(|m| &m.id == a) {
                    has_dependants[j] = true;
                }
            }
        }
        let exec_id = self.graphs[gi].exec_id;
        let stream_id = self.streams[si].cupti_id;
        let step_has_id = self.names.step(skey.program, skey.step).id.is_some();
        let mut sinks = Vec::new();
        let mut tail_end = base_ready;
        for (ni, n) in decl.nodes.iter().enumerate() {
            let nkey = StepKey {
                graph_node: Some(n.id.clone()),
                ..skey.clone()
            };
            let ready = n
                .after
                .iter()
                .map(|a| self.b.truth.nodes[ids[a.as_str()] as usize].end)
                .max()
                .unwrap_or(base_ready)
                .max(base_ready);
            let dur = self.jitter(
                key ^ crate::mix(ni as u64 + 77),
                (n.kernel.duration_us * 1000.0) as Ns,
            ) + self.stretch(&nkey);
            let start = self.sms.place(
                ready + 1_000,
                n.kernel.grid,
                dur,
                self.be.device.sms,
                self.now,
            );
            let end = start + dur;
            let mut inf = info.clone();
            let names = self.names.step(skey.program, skey.step);
            inf.step = Some(names.graph_node_steps[ni].clone());
            let name = self.names.graph_kernel(gi, ni).clone();
            let dev = self.b.node(NodeKind::GraphNode, name, inf, start, end);
            self.b.set_device_times(dev, queued, ready, start, end);
            self.b.edge(launch, dev, EdgeType::Launch);
            if n.after.is_empty() {
                for &p in &tail {
                    self.b.edge(p, dev, EdgeType::StreamOrder);
                }
            }
            for a in &n.after {
                self.b.edge(ids[a.as_str()], dev, EdgeType::Graph);
            }
            ids.insert(&n.id, dev);
            if !has_dependants[ni] {
                sinks.push(dev);
            }
            tail_end = tail_end.max(end);
            let graph_node_id = 0x10_0000
                + ((self.graphs[gi].generation as u64) << 16)
                + ((gi as u64) << 8)
                + ni as u64;
            let (grid, block) = ([n.kernel.grid, 1, 1], [n.kernel.block, 1, 1]);
            if self.lose_record(&nkey) {
                self.loss.cupti_dropped += 1;
            } else {
                self.b.record(Some(dev), |rid| Record::Kernel {
                    rid,
                    name: self.names.graph_kernel(gi, ni).clone(),
                    stream: stream_id,
                    context: 1,
                    device: 0,
                    correlation_id: corr,
                    graph_id: exec_id,
                    graph_node_id,
                    queued: 0,
                    submitted: 0,
                    start,
                    end,
                    grid,
                    block,
                    channel: si as u32,
                });
            }
            if step_has_id {
                self.keys.insert(nkey, dev);
            }
        }
        self.streams[si].tail = sinks;
        self.streams[si].tail_end = tail_end;
    }

    /// Injected device work that delayed the target gets a `fault` edge to it,
    /// and the injection's measured magnitude is filled in by the answers step.
    fn finish_faults(&mut self) {
        let Some(plan) = self.plan else { return };
        let Some(target) = plan
            .device_target
            .as_ref()
            .and_then(|k| self.keys.get(k))
            .copied()
        else {
            if matches!(
                plan.kind,
                InjectionKind::RecordLoss | InjectionKind::UnrelatedWork
            ) {
                self.injections.push(InjectionRecord {
                    kind: plan.kind.as_str().into(),
                    mechanism: if plan.kind == InjectionKind::RecordLoss {
                        "sim:dropped-record"
                    } else {
                        "sim:concurrent-kernel"
                    }
                    .into(),
                    requested_us: plan.magnitude_ns as f64 / 1000.0,
                    measured_us: plan.magnitude_ns as f64 / 1000.0,
                    fault_node: None,
                });
            }
            return;
        };
        let start = self.b.truth.nodes[target as usize].start;
        // Only work that was still holding the resource when the target was ready delayed it.
        let mut last: Option<NodeId> = None;
        for &d in &self.pending_fault_edges {
            let n = &self.b.truth.nodes[d as usize];
            if n.end <= start + 1
                && n.end > self.b.truth.nodes[target as usize].submitted
                && last.is_none_or(|l| self.b.truth.nodes[l as usize].end < n.end)
            {
                last = Some(d);
            }
        }
        if let Some(d) = last {
            if plan.kind != InjectionKind::StreamBacklog {
                self.b.edge(d, target, EdgeType::Fault);
            }
        }
        let mechanism = match plan.kind {
            InjectionKind::OccupancyPressure => "sim:occupancy-hog-kernel",
            InjectionKind::StreamBacklog => "sim:backlog-kernels",
            InjectionKind::PcieContention => "sim:bulk-copies",
            InjectionKind::UnrelatedWork => "sim:concurrent-kernel",
            _ => return,
        };
        self.injections.push(InjectionRecord {
            kind: plan.kind.as_str().into(),
            mechanism: mechanism.into(),
            requested_us: plan.magnitude_ns as f64 / 1000.0,
            measured_us: f64::NAN,
            fault_node: last,
        });
    }
}
