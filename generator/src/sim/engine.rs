//! The discrete-event core: host threads execute request programs one step at
//! a time in global time order, and every API call places its device work on
//! the device model at the moment it is enqueued.

use super::device::{CopyEngine, SmPool};
use super::names::{Api, Names};
use super::SimBackend;
use crate::plan::{Action, Plan};
use crate::record::faults::finish_plan;
use crate::record::steps::Observed;
use crate::record::{DeviceOp, DeviceTimes, NodeInfo, RunBuilder};
use crate::unit_noise;
use ground_truth::bundle::LossAccounting;
use ground_truth::graph::{InjectionRecord, NodeId, NodeKind};
use ground_truth::scenario::{
    InjectionKind, LaunchApi, ObjectKind, QueueDecl, Scenario, Step, SyncTarget,
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
}

pub fn run(
    sc: &Scenario,
    be: &SimBackend,
    seed: u64,
    plan: Option<&Plan>,
    keep_records: bool,
) -> Run {
    let mut e = Engine::new(sc, be, seed, plan, keep_records);
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
        let j = unit_noise(self.seed ^ key) * self.be.host.jitter;
        ((v as f64) * (1.0 + j)).round().max(0.0) as Ns
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
                stalled: None,
            });
            let clock = self.threads[th].clock;
            self.schedule(th, clock.max(at));
        }
    }

    fn schedule_injector(&mut self) {
        let Some(plan) = self.plan else { return };
        let th = self.pools[INJECTOR_THREAD][0];
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
        let task = self.threads[th].task;
        let h = self.b.handoff(
            queue.clone(),
            token,
            tid,
            at,
            self.instrumented,
            task,
            item.pending_sync,
        );
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
                mechanism: plan.mechanism.clone(),
                requested_us: mag as f64 / 1000.0,
                measured_us: mag as f64 / 1000.0,
                fault_node: None,
            });
            return None;
        }
        let dur = match plan.kind {
            InjectionKind::CpuDeschedule => mag,
            InjectionKind::HostPageFaultMinor | InjectionKind::HostPageFaultMajor => {
                let major = plan.kind == InjectionKind::HostPageFaultMajor;
                let cost = if major {
                    self.be.host.major_fault_ns
                } else {
                    self.be.host.minor_fault_ns
                };
                let n = (mag as f64 / cost as f64).round().max(1.0) as u64;
                n * cost
            }
            _ => return None,
        };
        let step = self.names.step(skey.program, skey.step).id.clone();
        let fault = self
            .b
            .injected_fault(plan.kind, tid, step, (start, start + dur));
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
            mechanism: plan.mechanism.clone(),
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
        let name = self.names.api(api).clone();
        let node = self.b.call(
            kind,
            name,
            info,
            (start, end),
            Some(&mut self.threads[th].prev),
        );
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
                let end = start + self.jitter(key, call.latency_ns);
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
                let at = Enqueued {
                    si,
                    launch: node,
                    queued: start + QUEUE_OFFSET_NS,
                    corr,
                    info: inf,
                };
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
                        self.place_kernel(at, launch, &skey)
                    }
                    Step::Copy {
                        direction,
                        bytes,
                        memory,
                        ..
                    } => {
                        let copy = Transfer {
                            direction: *direction,
                            bytes: *bytes,
                            memory: *memory,
                        };
                        self.memcpy(at, copy, &skey, key)
                    }
                    Step::Memset { bytes, .. } => self.memset(at, *bytes, &skey, key),
                    Step::EventRecord { .. } => {
                        let ei = targets.event.expect("event steps name an event");
                        self.event_record(at, ei)
                    }
                    Step::StreamWait { .. } => {
                        let ei = targets.event.expect("event steps name an event");
                        self.stream_wait(at, ei)
                    }
                    _ => unreachable!("matched above"),
                };
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
                let end = start + self.jitter(key, hp.graph_launch_ns);
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
                let at = Enqueued {
                    si,
                    launch: node,
                    queued: start + QUEUE_OFFSET_NS,
                    corr,
                    info: inf,
                };
                self.graph_launch(at, gi, &skey, key);
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
                let call_end = start + self.jitter(key, hp.sync_call_ns);
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
                self.b.sync_waits(node, &waited);
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
            self.b.call_waited(node, fault, pending_sync);
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
            // The model has no bandwidth noise: it lengthens the op by the
            // magnitude itself, whatever form the GPU realises it in.
            Some(p) if p.stretches(skey) => {
                self.injections.push(InjectionRecord {
                    kind: p.kind.as_str().into(),
                    mechanism: p.mechanism.clone(),
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
        self.plan.is_some_and(|p| p.lose.as_ref() == Some(skey))
    }

    /// `dev` is the stream's new tail. The tail vector is reused: one op per
    /// stream step must not allocate.
    fn new_tail(&mut self, si: usize, dev: NodeId) {
        let tail = &mut self.streams[si].tail;
        tail.clear();
        tail.push(dev);
    }

    /// A device op of `at`'s call placed on its stream with `times`: its node
    /// and edges (`record::steps`), the stream's new tail, and what the
    /// recorder saw of it.
    fn enqueue<F: FnOnce(Rid) -> Record>(
        &mut self,
        at: Enqueued,
        kind: NodeKind,
        name: SharedStr,
        times: DeviceTimes,
        waited_record: Option<NodeId>,
        observed: Observed<F>,
    ) -> NodeId {
        let dev = self.b.device_op(DeviceOp {
            kind,
            name,
            info: at.info,
            times,
            launch: at.launch,
            after: &self.streams[at.si].tail,
            waited_record,
        });
        self.b.observe(dev, observed, &mut self.loss);
        self.new_tail(at.si, dev);
        dev
    }

    /// The record of a device op unless the plan loses it.
    fn observed<F: FnOnce(Rid) -> Record>(&self, skey: &StepKey, make: F) -> Observed<F> {
        if self.lose_record(skey) {
            Observed::Lost
        } else {
            Observed::Record(make)
        }
    }

    /// Places a kernel on the SMs after the stream's previous work.
    fn place_kernel(&mut self, at: Enqueued, kernel: KernelLaunch, skey: &StepKey) -> NodeId {
        let KernelLaunch {
            name,
            grid,
            block,
            duration,
        } = kernel;
        let (si, queued, corr) = (at.si, at.queued, at.corr);
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
        let record_name = name.clone();
        let observed = self.observed(skey, |rid| Record::Kernel {
            rid,
            name: record_name,
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
        let times = DeviceTimes {
            queued,
            submitted: ready,
            start,
            end,
        };
        let dev = self.enqueue(at, NodeKind::Kernel, name.clone(), times, None, observed);
        self.streams[si].tail_end = end;
        dev
    }

    fn memcpy(&mut self, at: Enqueued, copy: Transfer, skey: &StepKey, key: u64) -> NodeId {
        let Transfer {
            direction,
            bytes,
            memory,
        } = copy;
        let d = &self.be.device;
        let bw = match (direction, memory) {
            (CopyDirection::D2d, _) => d.d2d_bytes_per_ns,
            (_, HostMemory::Pinned) => d.pinned_bytes_per_ns,
            (_, HostMemory::Pageable) => d.pageable_bytes_per_ns,
        };
        let dur = self.jitter(key ^ 0xC, d.copy_setup_ns + (bytes as f64 / bw) as Ns)
            + self.stretch(skey);
        let (si, queued, corr) = (at.si, at.queued, at.corr);
        let ready = queued.max(self.streams[si].tail_end);
        let start = if direction == CopyDirection::D2d {
            ready + d.copy_setup_ns
        } else {
            self.copies.place(ready + d.copy_setup_ns, dur)
        };
        let end = start + dur;
        let stream_id = self.streams[si].cupti_id;
        let name = self.names.memcpy(direction).clone();
        let observed = self.observed(skey, |rid| Record::Memcpy {
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
        let times = DeviceTimes {
            queued,
            submitted: ready,
            start,
            end,
        };
        let dev = self.enqueue(at, NodeKind::Memcpy, name, times, None, observed);
        self.streams[si].tail_end = end;
        dev
    }

    fn memset(&mut self, at: Enqueued, bytes: u64, skey: &StepKey, key: u64) -> NodeId {
        let d = &self.be.device;
        let dur = self.jitter(
            key ^ 0xE,
            1_000 + (bytes as f64 / d.memset_bytes_per_ns) as Ns,
        ) + self.stretch(skey);
        let (si, queued, corr) = (at.si, at.queued, at.corr);
        let ready = queued.max(self.streams[si].tail_end);
        let start = ready + d.dispatch_ns;
        let end = start + dur;
        let stream_id = self.streams[si].cupti_id;
        let name = self.names.memset.clone();
        let observed = self.observed(skey, |rid| Record::Memset {
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
        let times = DeviceTimes {
            queued,
            submitted: ready,
            start,
            end,
        };
        let dev = self.enqueue(at, NodeKind::Memset, name, times, None, observed);
        self.streams[si].tail_end = end;
        dev
    }

    fn event_record(&mut self, at: Enqueued, ei: usize) -> NodeId {
        let (si, queued, corr) = (at.si, at.queued, at.corr);
        let done = queued.max(self.streams[si].tail_end);
        let name = self.names.event_record.clone();
        let sync_id = self.event_sync_id;
        self.event_sync_id += 1;
        let (event, stream) = (self.events[ei].handle, self.streams[si].cupti_id);
        let observed = Observed::Record(|rid| Record::CudaEvent {
            rid,
            event,
            event_sync_id: sync_id,
            stream,
            correlation_id: corr,
            ts: done,
        });
        let times = DeviceTimes::instant(queued, done);
        let dev = self.enqueue(at, NodeKind::EventRecord, name, times, None, observed);
        self.events[ei].last = Some((dev, done, sync_id));
        dev
    }

    fn stream_wait(&mut self, at: Enqueued, ei: usize) -> NodeId {
        let (si, queued, corr) = (at.si, at.queued, at.corr);
        let start = queued.max(self.streams[si].tail_end);
        let last = self.events[ei].last;
        let waited_record = last.map(|l| l.0);
        let end = self.b.wait_end(start, waited_record);
        let name = self.names.stream_wait.clone();
        let (event, stream) = (self.events[ei].handle, self.streams[si].cupti_id);
        let event_sync_id = last.map(|l| l.2).unwrap_or(0);
        let observed = Observed::Record(|rid| Record::Sync {
            rid,
            sync_type: SyncType::StreamWaitEvent,
            stream,
            event,
            event_sync_id,
            correlation_id: corr,
            start,
            end,
        });
        let times = DeviceTimes {
            queued,
            submitted: start,
            start,
            end,
        };
        let dev = self.enqueue(
            at,
            NodeKind::StreamWait,
            name,
            times,
            waited_record,
            observed,
        );
        self.streams[si].tail_end = end;
        dev
    }

    fn graph_launch(&mut self, at: Enqueued, gi: usize, skey: &StepKey, key: u64) {
        let Enqueued {
            si,
            launch,
            queued,
            corr,
            info,
        } = at;
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
            let deps: Vec<NodeId> = n.after.iter().map(|a| ids[a.as_str()]).collect();
            let ready = self.b.graph_ready(base_ready, &deps);
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
            let op = DeviceOp {
                kind: NodeKind::GraphNode,
                name: name.clone(),
                info: inf,
                times: DeviceTimes {
                    queued,
                    submitted: ready,
                    start,
                    end,
                },
                launch,
                after: if n.after.is_empty() { &tail } else { &[] },
                waited_record: None,
            };
            let dev = self.b.graph_node(op, &deps);
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
            let observed = self.observed(&nkey, |rid| Record::Kernel {
                rid,
                name,
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
            self.b.observe(dev, observed, &mut self.loss);
            if step_has_id {
                self.keys.insert(nkey, dev);
            }
        }
        self.streams[si].tail = sinks;
        self.streams[si].tail_end = tail_end;
    }

    /// Runs one injector action: real work issued by the injector thread.
    fn inject_action(&mut self, th: usize, action: Action) {
        let start = self.threads[th].clock;
        let be = self.be;
        let hp = &be.host;
        let si_inj = self.stream_ix[INJECTOR_STREAM];
        let call_site = SharedStr::from("causalbench-injector");
        let info = |stream: u32| NodeInfo {
            stream: Some(stream),
            call_site: Some(call_site.clone()),
            ..Default::default()
        };
        match action {
            Action::Kernel {
                on_target_stream,
                name,
                grid,
                until,
                delays_target,
                ..
            } => {
                // The scenario's streams come first, in declaration order.
                let si = on_target_stream.unwrap_or(si_inj);
                let end = start + hp.launch_ns;
                let inf = info(self.streams[si].cupti_id);
                let handle = self.streams[si].handle;
                let (node, corr) = self.api_call(
                    th,
                    NodeKind::ApiCall,
                    Api::LaunchKernel,
                    inf.clone(),
                    start,
                    end,
                    handle,
                    None,
                );
                self.threads[th].prev = None;
                let queued = start + QUEUE_OFFSET_NS;
                let ready = queued.max(self.streams[si].tail_end);
                let dispatch = self.be.device.dispatch_ns;
                let total = self.be.device.sms;
                let begin = self.sms.earliest(ready + dispatch, grid, total, self.now);
                // Injected kernels run exactly until `until` and are never lost.
                let name = SharedStr::from(name);
                let launch = KernelLaunch {
                    name: &name,
                    grid,
                    block: 256,
                    duration: until.saturating_sub(begin).max(1_000),
                };
                let at = Enqueued {
                    si,
                    launch: node,
                    queued,
                    corr,
                    info: inf,
                };
                let dev = self.place_kernel(at, launch, &NO_STEP);
                if delays_target {
                    self.pending_fault_edges.push(dev);
                }
                self.threads[th].clock = end;
            }
            Action::Copies { count, until, .. } => {
                let mut t = start;
                for i in 0..count {
                    let end = t + hp.copy_call_ns;
                    let inf = info(self.streams[si_inj].cupti_id);
                    let handle = self.streams[si_inj].handle;
                    let (node, corr) = self.api_call(
                        th,
                        NodeKind::ApiCall,
                        Api::MemcpyAsyncH2d,
                        inf.clone(),
                        t,
                        end,
                        handle,
                        None,
                    );
                    self.threads[th].prev = None;
                    let queued = t + QUEUE_OFFSET_NS;
                    let d = &self.be.device;
                    let ready = queued.max(self.streams[si_inj].tail_end) + d.copy_setup_ns;
                    let begin = ready.max(self.copies.free_at);
                    // Each copy holds the engine for an equal share of the remaining time.
                    let share = until.saturating_sub(begin) / (count - i) as u64;
                    let bytes = ((share.saturating_sub(d.copy_setup_ns)) as f64
                        * d.pinned_bytes_per_ns)
                        .max(4096.0) as u64;
                    let at = Enqueued {
                        si: si_inj,
                        launch: node,
                        queued,
                        corr,
                        info: inf,
                    };
                    let copy = Transfer {
                        direction: CopyDirection::H2d,
                        bytes,
                        memory: HostMemory::Pinned,
                    };
                    let dev = self.memcpy(at, copy, &NO_STEP, u64::MAX);
                    self.pending_fault_edges.push(dev);
                    t = end;
                }
                self.threads[th].clock = t;
            }
        }
    }

    /// The injection record of device-side work and its `fault` edge
    /// (`record::faults`); the measured magnitude is filled in by the answers step.
    fn finish_faults(&mut self) {
        let Some(plan) = self.plan else { return };
        let injected = std::mem::take(&mut self.pending_fault_edges);
        if let Some(record) = finish_plan(&mut self.b, plan, &self.keys, &injected) {
            self.injections.push(record);
        }
    }
}
