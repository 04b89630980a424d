//! Task-level ground truth and the bundle of one megakernel case.
//!
//! The standard [`Bundle`] holds what kernel-level CUPTI sees (the launch call
//! and the one long kernel) and the ground truth: the launch and the kernel,
//! one `event_record` node per device dependency counter, one `task` node per
//! task (times from the full task log of the case), `graph` edges task → event
//! (the trigger) and event → task (the dispatch), `event` edges event → task
//! for dependency waits, the injected fault with `fault` edges to the tasks it
//! acted on, and two symptoms on the kernel: `q0` its cause, `q1` the task class
//! affected (an `operator` question: in a megakernel every operator is a task
//! class). Task nodes have no rids: no record of the standard trace observes a
//! task, which is the point of the track. The [`TaskTelemetry`] sidecar holds
//! the monitors' captures and the task truth.

use crate::mix2;
use crate::schedule::{Schedule, NONE};
use ground_truth::graph::{
    Boundary, Edge, EdgeType, InjectionRecord, Node, NodeKind, NodeRids, Phases, Symptom,
};
use ground_truth::megakernel::{
    class_name, Capture, MkScenario, TaskTelemetry, TaskTimes, TaskTruth,
};
use ground_truth::trace::{ApiDomain, Record};
use ground_truth::{
    Bundle, Collectors, GroundTruth, LossAccounting, Manifest, Mode, Question, Readable, Scenario,
    ViewSpec, SCHEMA_VERSION,
};
use std::path::Path;

/// Driver API callback id of `cuLaunchKernel`.
pub const CBID_CU_LAUNCH_KERNEL: u32 = 307;

/// What kernel-level CUPTI saw of one launch (CLOCK_MONOTONIC on a GPU; the
/// simulator's clock in simulation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelObs {
    pub api_start: u64,
    pub api_end: u64,
    pub queued: u64,
    pub submitted: u64,
    pub start: u64,
    pub end: u64,
    pub correlation_id: u32,
    pub stream: u32,
    pub context: u32,
    pub device: u32,
    pub tid: u32,
}

/// Environment of the recording.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub backend: String,
    pub gpu: String,
    pub driver: String,
    pub cuda: String,
    pub cupti: String,
    pub host: String,
}

/// The standard scenario embedded in the manifest: what CUPTI sees — one
/// persistent kernel launched once.
pub fn kernel_level_scenario(sc: &MkScenario, workers: u32, duration_us: f64) -> Scenario {
    let yaml = format!(
        "schema_version: 1\nname: {name}\nfamily: {family}\nvariant: {variant}\ncause: {cause}\n\
         description: {desc:?}\nmode: instrumented\nseed: {seed}\nrepetitions: {reps}\n\
         threads: [{{name: host}}]\nstreams: [{{name: compute}}]\n\
         programs:\n  - name: serve\n    start: host\n    requests: 1\n    steps:\n      \
         - {{op: kernel, id: megakernel, stream: compute, name: mk_persistent, duration_us: {dur:.3}, grid: {workers}}}\n\
         symptom: {{step: megakernel}}\n",
        name = sc.name,
        family = sc.family,
        variant = sc.variant,
        cause = sc.cause,
        desc = format!(
            "megakernel track (kernel-level description; the task-level scenario is in the tasks.json sidecar): {}",
            sc.description
        ),
        seed = sc.seed,
        reps = sc.repetitions,
        dur = duration_us.max(1.0),
    );
    Scenario::parse(Path::new("megakernel.yaml"), yaml.as_bytes())
        .expect("the kernel-level scenario template is valid")
}

/// Inputs of [`build`].
pub struct CaseInputs<'a> {
    pub scenario: &'a MkScenario,
    pub repetition: u32,
    pub schedule: &'a Schedule,
    /// The launch whose full task log is the truth.
    pub truth_capture: &'a Capture,
    /// Device clock of that launch's first worker start.
    pub device_start: u64,
    pub kernel: KernelObs,
    /// Outer kernel time of the no-injection twin (same monitor as `kernel`).
    pub twin_kernel_ns: u64,
    pub requested_us: f64,
    pub captures: Vec<Capture>,
    pub env: &'a Env,
}

fn node(id: usize, kind: NodeKind, name: String, start: u64, end: u64) -> Node {
    Node {
        id: id as u32,
        kind,
        name: name.into(),
        request: None,
        step: None,
        detail: Default::default(),
        generation: 0,
        start,
        end,
        queued: 0,
        submitted: 0,
        rids: NodeRids::new(),
    }
}

/// The record ids of the two records CUPTI sees: the launch call and the kernel.
#[derive(Clone, Copy)]
struct LaunchRids {
    api: u64,
    kernel: u64,
}

impl LaunchRids {
    /// Seeded by the case, so that a repetition's records keep their ids.
    fn of(sc: &MkScenario, repetition: u32) -> LaunchRids {
        LaunchRids {
            api: mix2(sc.seed ^ 0x6d6b, repetition as u64 * 2 + 1) >> 12,
            kernel: mix2(sc.seed ^ 0x6d6b, repetition as u64 * 2 + 2) >> 12,
        }
    }
}

/// Builds the bundle and its sidecar.
pub fn build(inp: CaseInputs<'_>) -> (Bundle, TaskTelemetry) {
    let sc = inp.scenario;
    let s = inp.schedule;
    let k = inp.kernel;
    let rids = LaunchRids::of(sc, inp.repetition);
    let trace = kernel_level_trace(&k, s.workers, rids);
    let mut graph = TaskGraph::of(&inp, rids);
    let lateness_ns = (k.end - k.start) as f64 - inp.twin_kernel_ns as f64;
    let (fault, kind_name) = graph.push_fault(sc, s, &k);
    let TaskGraph {
        nodes,
        edges,
        task_nodes,
        ..
    } = graph;
    let mut gt = GroundTruth {
        nodes,
        edges,
        symptoms: Vec::new(),
        injections: vec![InjectionRecord {
            kind: kind_name,
            mechanism: format!("{}:task-graph", inp.env.backend),
            requested_us: inp.requested_us,
            measured_us: lateness_ns / 1e3,
            fault_node: Some(fault),
            off_cpu_us: None,
        }],
    };
    gt.symptoms = kernel_symptoms(&gt, &trace, sc, rids.kernel, lateness_ns);
    let bundle = Bundle {
        schema_version: SCHEMA_VERSION,
        manifest: Manifest {
            scenario: kernel_level_scenario(sc, s.workers, (k.end - k.start) as f64 / 1e3),
            seed: sc.seed,
            repetition: inp.repetition,
            backend: inp.env.backend.clone(),
            gpu: inp.env.gpu.clone(),
            driver: inp.env.driver.clone(),
            cuda: inp.env.cuda.clone(),
            cupti: inp.env.cupti.clone(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            host: inp.env.host.clone(),
            collectors: vec!["cupti".into(), "megakernel-hooks".into()],
            cross_check: None,
            cupti_capabilities: None,
        },
        ground_truth: gt,
        trace,
        loss: LossAccounting::default(),
    };
    let telemetry = TaskTelemetry {
        schema_version: SCHEMA_VERSION,
        bundle: bundle.id(),
        scenario: sc.clone(),
        workers: s.workers,
        tasks: s.tasks.len() as u32,
        backend: inp.env.backend.clone(),
        captures: inp.captures,
        reference: Vec::new(),
        truth: TaskTruth {
            cause: sc.cause,
            affected_class: sc.injection.class.clone(),
            injected_tasks: s.injected_tasks.clone(),
            task_nodes: task_nodes.clone(),
            requested_us: inp.requested_us,
            measured_us: lateness_ns / 1e3,
            realised: s.realised.describe(),
        },
    };
    debug_assert!(bundle.problems().is_empty(), "{:?}", bundle.problems());
    (bundle, telemetry)
}

/// The standard trace: what kernel-level CUPTI sees, the launch call and one kernel.
fn kernel_level_trace(k: &KernelObs, workers: u32, rids: LaunchRids) -> Vec<Record> {
    vec![
        Record::Api {
            rid: rids.api,
            domain: ApiDomain::Driver,
            cbid: CBID_CU_LAUNCH_KERNEL,
            name: "cuLaunchKernel".into(),
            tid: k.tid,
            start: k.api_start,
            end: k.api_end,
            correlation_id: k.correlation_id,
        },
        Record::Kernel {
            rid: rids.kernel,
            stream: k.stream,
            correlation_id: k.correlation_id,
            queued: k.queued,
            submitted: k.submitted,
            start: k.start,
            end: k.end,
            detail: ground_truth::trace::KernelDetail {
                name: "mk_persistent".into(),
                context: k.context,
                device: k.device,
                graph_id: 0,
                graph_node_id: 0,
                grid: [workers, 1, 1],
                block: [128, 1, 1],
                channel: 0,
            }
            .into(),
        },
    ]
}

/// Device clock → bundle clock: the kernel's start on both clocks is the same moment
/// (0 stays "not measured").
struct DeviceClock {
    offset: i128,
}

impl DeviceClock {
    fn to_bundle(&self, t: u64) -> u64 {
        if t == 0 {
            0
        } else {
            (t as i128 + self.offset).max(0) as u64
        }
    }
}

/// The true graph as it is built: the launch, the kernel, one node per dependency
/// counter (event), one per task, and the fault.
struct TaskGraph {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    /// Id of the first task node (task `i` is `task_base + i`).
    task_base: usize,
    task_nodes: Vec<u32>,
}

impl TaskGraph {
    /// The launch → kernel, then the events and the tasks with their edges.
    fn of(inp: &CaseInputs<'_>, rids: LaunchRids) -> TaskGraph {
        let k = inp.kernel;
        let mut g = TaskGraph {
            nodes: Vec::new(),
            edges: Vec::new(),
            task_base: 0,
            task_nodes: Vec::new(),
        };
        let mut api = node(
            0,
            NodeKind::ApiCall,
            "cuLaunchKernel".into(),
            k.api_start,
            k.api_end,
        );
        api.detail.edit(|d| d.thread = Some(k.tid));
        api.rids.push(rids.api);
        g.nodes.push(api);
        let mut kn = node(1, NodeKind::Kernel, "mk_persistent".into(), k.start, k.end);
        kn.detail.edit(|d| d.stream = Some(k.stream));
        kn.queued = k.queued;
        kn.submitted = k.submitted;
        kn.step = Some("megakernel".into());
        kn.rids.push(rids.kernel);
        g.nodes.push(kn);
        g.edges.push(Edge {
            src: 0,
            dst: 1,
            kind: EdgeType::Launch,
        });
        let clock = DeviceClock {
            offset: k.start as i128 - inp.device_start as i128,
        };
        let times = inp.truth_capture.task_times(inp.schedule.tasks.len());
        let ev_base = g.push_events(inp.schedule, &times, &clock);
        g.push_tasks(inp.schedule, &times, &clock, ev_base);
        g
    }

    /// One node per event, at its completion: the latest end of its triggers. Returns
    /// the id of the first.
    fn push_events(&mut self, s: &Schedule, times: &[TaskTimes], clock: &DeviceClock) -> usize {
        let ev_base = self.nodes.len();
        let mut ev_done = vec![0u64; s.events.len()];
        for (i, t) in s.tasks.iter().enumerate() {
            if t.trigger_event != NONE {
                let e = t.trigger_event as usize;
                ev_done[e] = ev_done[e].max(times[i].end);
            }
        }
        for (e, &d) in ev_done.iter().enumerate() {
            let mut n = node(
                ev_base + e,
                NodeKind::EventRecord,
                format!("event{e}"),
                clock.to_bundle(d),
                clock.to_bundle(d),
            );
            n.step = Some(format!("event{e}").into());
            self.nodes.push(n);
        }
        ev_base
    }

    /// One node per task, with its trigger, dependency and wait edges.
    fn push_tasks(
        &mut self,
        s: &Schedule,
        times: &[TaskTimes],
        clock: &DeviceClock,
        ev_base: usize,
    ) {
        let task_base = self.nodes.len();
        self.task_base = task_base;
        self.task_nodes = Vec::with_capacity(s.tasks.len());
        for (i, t) in s.tasks.iter().enumerate() {
            let tt = times[i];
            let mut n = node(
                task_base + i,
                NodeKind::Task,
                format!("task:{}", class_name(t.class_id)),
                clock.to_bundle(tt.start),
                clock.to_bundle(tt.end),
            );
            n.detail
                .edit(|d| d.operator = Some(class_name(t.class_id).into()));
            n.generation = t.task_gen;
            n.request = Some(t.req_gen.to_string().into());
            n.detail.edit(|d| d.stream = Some(tt.worker));
            n.queued = clock.to_bundle(tt.ready);
            n.submitted = clock.to_bundle(if tt.wait_begin != 0 {
                tt.wait_begin
            } else {
                tt.start
            });
            n.step = Some(format!("task{i}").into());
            self.task_nodes.push((task_base + i) as u32);
            self.nodes.push(n);
            if t.trigger_event != NONE {
                self.edges.push(Edge {
                    src: (task_base + i) as u32,
                    dst: (ev_base + t.trigger_event as usize) as u32,
                    kind: EdgeType::Graph,
                });
            }
            if t.dep_event != NONE {
                self.edges.push(Edge {
                    src: (ev_base + t.dep_event as usize) as u32,
                    dst: (task_base + i) as u32,
                    kind: EdgeType::Graph,
                });
            }
            if t.wait_event != NONE {
                self.edges.push(Edge {
                    src: (ev_base + t.wait_event as usize) as u32,
                    dst: (task_base + i) as u32,
                    kind: EdgeType::Event,
                });
            }
        }
    }

    /// The injected fault over the whole kernel, with a `fault` edge to each task it
    /// acted on. Returns its id and the injection's kind name.
    fn push_fault(&mut self, sc: &MkScenario, s: &Schedule, k: &KernelObs) -> (u32, String) {
        let fault = self.nodes.len() as u32;
        let kind_name = serde_json::to_value(sc.injection.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let mut f = node(
            fault as usize,
            NodeKind::InjectedFault,
            kind_name.clone(),
            k.start,
            k.end,
        );
        f.detail
            .edit(|d| d.operator = Some(sc.injection.class.clone().into()));
        self.nodes.push(f);
        for &t in &s.injected_tasks {
            self.edges.push(Edge {
                src: fault,
                dst: self.task_base as u32 + t,
                kind: EdgeType::Fault,
            });
        }
        (fault, kind_name)
    }
}

/// The two symptoms on the kernel: `q0` its cause, `q1` the task class affected, each
/// with the first unresolved boundary of the launch → kernel path in every view.
fn kernel_symptoms(
    gt: &GroundTruth,
    trace: &[Record],
    sc: &MkScenario,
    rid_kernel: u64,
    lateness_ns: f64,
) -> Vec<Symptom> {
    let path = vec![0u32, 1u32];
    let present = |n: u32, c: Collectors, m: Mode| -> bool {
        let rids = &gt.nodes[n as usize].rids;
        trace
            .iter()
            .any(|r| rids.contains(&r.rid()) && ViewSpec::keeps(c, m, r))
    };
    let boundaries: Vec<Boundary> = Collectors::ALL
        .iter()
        .flat_map(|&c| [Mode::Instrumented, Mode::Closed].map(|m| (c, m)))
        .map(|(c, m)| Boundary {
            collectors: c,
            mode: m,
            edge: gt.first_unresolved(&path, |n| present(n, c, m)),
        })
        .collect();
    let phases = Phases {
        execution: lateness_ns,
        ..Default::default()
    };
    let mut symptoms = Vec::new();
    for (id, q, answer) in [
        ("q0", Question::Cause, None),
        ("q1", Question::Operator, Some(sc.injection.class.clone())),
    ] {
        symptoms.push(Symptom {
            id: id.into(),
            node: 1,
            rid: rid_kernel,
            question: q,
            cause: sc.cause,
            answer,
            lateness_ns,
            critical_path: path.clone(),
            phases,
            boundaries: boundaries.clone(),
            label: None,
        });
    }
    symptoms
}
