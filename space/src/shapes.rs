//! Families of real program shapes (docs/scenario-space.md, "Real program
//! shapes"): a serving loop with continuous batching, pipelined micro-batches
//! and a training step. Unlike the chain families (`families`, `build`), whose
//! cause sits in the asked request's own gating chain, here requests share a
//! thread, a stream or an event, so the cause may sit one or more requests
//! upstream of the symptom and reach it through a `busy`, `stream_order`,
//! `event` or `sync` edge (docs/records.md). Same-named kernels run at several
//! batch sizes, so a symptom's peers are no clean norm. Every family has a
//! negative control (`unrelated_work`, declared `none`).

use crate::sample::KERNEL_NAMES;
use ground_truth::labels::CauseLabel;
use ground_truth::scenario::{
    AxisValue, EventApi, EventDecl, Injection, InjectionKind, KernelKind, Program, QueueDecl,
    QueueKind, Step, StreamDecl, SymptomDecl, SyncTarget, ThreadDecl,
};
use ground_truth::trace::{CopyDirection, HostMemory};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// Blocks of a batch's kernels: two thirds of the H200's 132 SMs, as the chain
/// families' (`build::FULL_GRID`), so injected unrelated work fits beside them.
const FULL_GRID: u32 = 88;
/// Blocks of small kernels that run beside the main work.
const SMALL_GRID: u32 = 8;
/// Pinned and pageable host-to-device rates (bytes/µs) copies are sized by
/// (docs/gpu-facts.md), as `build` does.
const PINNED_BYTES_PER_US: f64 = 52_000.0;

/// Which op of which request an injection acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The symptom's own op (its launch, for host-side injections).
    Own,
    /// An op of the request `upstream` requests before the symptom's, which
    /// shares the symptom request's thread, stream or event.
    Upstream,
}

/// One variant of a shape family.
pub struct ShapeVariant {
    pub name: &'static str,
    pub cause: CauseLabel,
    pub kind: InjectionKind,
    pub role: Role,
}

/// What each shape family's builder gives: the declarations, the symptom,
/// the target step of each role, and the sampled axes.
pub struct ShapeWorkload {
    pub threads: Vec<ThreadDecl>,
    pub queues: Vec<QueueDecl>,
    pub streams: Vec<StreamDecl>,
    pub events: Vec<EventDecl>,
    pub programs: Vec<Program>,
    pub symptom: SymptomDecl,
    /// The symptom's nominal latency (µs), for the magnitude ratio.
    pub symptom_latency_us: f64,
    /// (program, request, step id) of each role's target, by injection kind
    /// where the kind needs a particular op.
    pub targets: Vec<(Role, Option<InjectionKind>, String, u32, String)>,
    pub axes: BTreeMap<String, AxisValue>,
    pub magnitude_ratio: f64,
}

impl ShapeWorkload {
    /// The injection of `v`, sized `magnitude_us`.
    pub fn injection(&self, v: &ShapeVariant, magnitude_us: f64) -> Injection {
        let (_, _, program, request, step) = self
            .targets
            .iter()
            .find(|t| t.0 == v.role && t.1 == Some(v.kind))
            .or_else(|| self.targets.iter().find(|t| t.0 == v.role && t.1.is_none()))
            .expect("every role has a target");
        Injection {
            kind: v.kind,
            target: step.clone(),
            program: Some(program.clone()),
            request: *request,
            magnitude_us,
        }
    }
}

/// A shape family: its name, variants and builder.
pub struct ShapeFamily {
    pub name: &'static str,
    pub variants: &'static [ShapeVariant],
    pub build: fn(&mut ChaCha8Rng) -> ShapeWorkload,
}

/// The real-program-shape families, cycled through after the chain families.
pub const SHAPES: &[ShapeFamily] = &[
    ShapeFamily {
        name: "continuous-batching",
        variants: &[
            ShapeVariant {
                name: "queued-behind-earlier-request",
                cause: CauseLabel::HandoffQueueing,
                kind: InjectionKind::HostDelay,
                role: Role::Upstream,
            },
            ShapeVariant {
                name: "earlier-batch-fence",
                cause: CauseLabel::ImplicitSync,
                kind: InjectionKind::SyncWait,
                role: Role::Upstream,
            },
            ShapeVariant {
                name: "own-launch-descheduled",
                cause: CauseLabel::CpuDeschedule,
                kind: InjectionKind::CpuDeschedule,
                role: Role::Own,
            },
            ShapeVariant {
                name: "harmless",
                cause: CauseLabel::None,
                kind: InjectionKind::UnrelatedWork,
                role: Role::Own,
            },
        ],
        build: continuous_batching,
    },
    ShapeFamily {
        name: "pipelined-microbatches",
        variants: &[
            ShapeVariant {
                name: "upstream-stage-slow",
                cause: CauseLabel::EventWait,
                kind: InjectionKind::EventWait,
                role: Role::Upstream,
            },
            ShapeVariant {
                name: "own-stream-backlog",
                cause: CauseLabel::StreamBacklog,
                kind: InjectionKind::StreamBacklog,
                role: Role::Own,
            },
            ShapeVariant {
                name: "harmless",
                cause: CauseLabel::None,
                kind: InjectionKind::UnrelatedWork,
                role: Role::Own,
            },
        ],
        build: pipelined_microbatches,
    },
    ShapeFamily {
        name: "training-step",
        variants: &[
            ShapeVariant {
                name: "loader-preempted",
                cause: CauseLabel::CpuDeschedule,
                kind: InjectionKind::CpuDeschedule,
                role: Role::Own,
            },
            ShapeVariant {
                name: "previous-step-fence",
                cause: CauseLabel::ImplicitSync,
                kind: InjectionKind::SyncWait,
                role: Role::Upstream,
            },
            ShapeVariant {
                name: "harmless",
                cause: CauseLabel::None,
                kind: InjectionKind::UnrelatedWork,
                role: Role::Own,
            },
        ],
        build: training_step,
    },
];

/// Call sites and names drawn once per instance.
struct Names {
    rng: ChaCha8Rng,
    line: u32,
    pool: Vec<&'static str>,
}

impl Names {
    fn new(rng: &mut ChaCha8Rng) -> Self {
        let mut pool = KERNEL_NAMES.to_vec();
        for i in (1..pool.len()).rev() {
            pool.swap(i, rng.random_range(0..=i));
        }
        Names {
            rng: ChaCha8Rng::seed_from_u64(rng.random()),
            line: 10,
            pool,
        }
    }

    fn name(&self, i: usize) -> &'static str {
        self.pool[i % self.pool.len()]
    }

    fn kernel(&mut self, id: &str, stream: &str, name: &str, us: f64, grid: u32) -> Step {
        self.line += 7 + self.rng.random_range(0..40);
        let function = name.split('_').next().unwrap_or(name);
        Step::Kernel {
            id: Some(id.into()),
            stream: stream.into(),
            name: name.into(),
            kind: KernelKind::Spin,
            duration_us: tenth(us),
            grid,
            block: 256,
            launch: Default::default(),
            call_site: Some(format!("serve.py:{function}:{}", self.line)),
        }
    }

    fn copy(
        &mut self,
        id: &str,
        stream: &str,
        dir: CopyDirection,
        bytes: u64,
        m: HostMemory,
    ) -> Step {
        self.line += 7 + self.rng.random_range(0..40);
        Step::Copy {
            id: Some(id.into()),
            stream: stream.into(),
            direction: dir,
            bytes,
            memory: m,
            call_site: Some(format!("serve.py:copy:{}", self.line)),
        }
    }
}

fn tenth(us: f64) -> f64 {
    (us * 10.0).round() / 10.0
}

fn stream(name: &str) -> StreamDecl {
    StreamDecl {
        name: name.into(),
        priority: 0,
    }
}

fn thread(name: &str, count: u32) -> ThreadDecl {
    ThreadDecl {
        name: name.into(),
        count,
    }
}

fn host(id: &str, us: f64) -> Step {
    Step::HostWork {
        id: Some(id.into()),
        duration_us: tenth(us),
    }
}

/// A wait of `stream` on the latest record of `event`.
fn wait_event(id: &str, stream: &str, event: &str) -> Step {
    Step::StreamWait {
        id: Some(id.into()),
        stream: stream.into(),
        event: event.into(),
        api: EventApi::Runtime,
        request_offset: 0,
    }
}

/// A record of `event` on `stream`.
fn record_event(id: &str, event: &str, stream: &str) -> Step {
    Step::EventRecord {
        id: Some(id.into()),
        event: event.into(),
        stream: stream.into(),
        api: EventApi::Runtime,
        request_offset: 0,
    }
}

fn sync_stream(id: &str, s: &str) -> Step {
    Step::Sync {
        id: Some(id.into()),
        target: SyncTarget::Stream,
        stream: Some(s.into()),
        event: None,
    }
}

fn magnitude_ratio(rng: &mut ChaCha8Rng) -> f64 {
    // 0.3–10, log-uniform: the shapes' cases sit at the headline's ratios,
    // where the quiet runs can resolve a move (docs/scenario-space.md).
    let r = (0.3f64.ln() + rng.random::<f64>() * (10.0f64.ln() - 0.3f64.ln())).exp();
    (r * 100.0).round() / 100.0
}

/// A training step's loader queue: unbounded or bounded to one or two batches,
/// a third of instances each. Drawn from a generator of its own, seeded from a
/// copy of `rng`, which it leaves where it was: every other property of an
/// instance is what it was before this axis existed.
fn loader_queue(rng: &ChaCha8Rng) -> Option<u32> {
    let mut own = ChaCha8Rng::seed_from_u64(rng.clone().random::<u64>() ^ 0x6c6f_6164_6572);
    [None, Some(1), Some(2)].choose(&mut own).copied().flatten()
}

fn number(v: f64) -> AxisValue {
    AxisValue::Number(v)
}

fn category(v: &str) -> AxisValue {
    AxisValue::Category(v.into())
}

/// A serving loop with continuous batching: one scheduler thread takes
/// requests in arrival order, each a batch of one of 2–4 sizes (the same
/// kernels, durations growing with the batch), launches them on one shared
/// stream and reads the logits back before taking the next. Requests arrive
/// faster than the scheduler serves them, so each waits behind the one
/// before it (`busy`); the cause may sit 1–3 requests upstream.
fn continuous_batching(rng: &mut ChaCha8Rng) -> ShapeWorkload {
    let mut n = Names::new(rng);
    let sizes_all = [1u32, 2, 4, 8, 16, 32];
    let k = rng.random_range(2..=4usize);
    let mut sizes: Vec<u32> = sizes_all.choose_multiple(rng, k).copied().collect();
    sizes.sort();
    let per_size = rng.random_range(2..=4u32);
    let total = k as u32 * per_size;
    let upstream = rng.random_range(1..=3u32.min(total - 1));
    let asked = rng.random_range(upstream..total);
    let first_op = rng.random_bool(0.3);
    let pageable = rng.random_bool(0.5);
    let (embed, attn, mlp) = (n.name(0), n.name(1), n.name(2));
    let base_us = rng.random_range(40.0..120.0f64);
    let per_item_us = rng.random_range(2.0..12.0f64);
    let sched_us = rng.random_range(20.0..60.0f64);
    // Arrivals in round robin over the batch sizes, spaced well under one
    // request's service time, so the scheduler stays busy.
    let gap_us = tenth(sched_us / 2.0);
    let mut programs = Vec::new();
    for (j, &b) in sizes.iter().enumerate() {
        let dur = |f: f64| base_us * f + per_item_us * b as f64;
        let steps = vec![
            host("schedule", sched_us + b as f64),
            n.kernel("embed", "s0", embed, dur(0.3), FULL_GRID),
            n.kernel("attn", "s0", attn, dur(1.0), FULL_GRID),
            n.kernel("mlp", "s0", mlp, dur(0.8), FULL_GRID),
            n.copy(
                "logits",
                "s0",
                CopyDirection::D2h,
                4096 * b as u64,
                if pageable {
                    HostMemory::Pageable
                } else {
                    HostMemory::Pinned
                },
            ),
            sync_stream("step_done", "s0"),
        ];
        programs.push(Program {
            name: format!("batch{b}"),
            start: "scheduler".into(),
            requests: per_size,
            interval_us: tenth(gap_us * k as f64),
            offset_us: tenth(gap_us * j as f64),
            steps,
        });
    }
    // The i-th arrival overall is request i / k of program i % k.
    let at = |i: u32| (programs[(i as usize) % k].name.clone(), i / k as u32);
    let (asked_program, asked_request) = at(asked);
    let (up_program, up_request) = at(asked - upstream);
    let symptom_step = if first_op { "embed" } else { "attn" };
    let asked_size = sizes[(asked as usize) % k] as f64;
    let symptom_latency_us = base_us * if first_op { 0.3 } else { 1.0 } + per_item_us * asked_size;
    let ratio = magnitude_ratio(rng);
    ShapeWorkload {
        threads: vec![thread("scheduler", 1)],
        queues: vec![],
        streams: vec![stream("s0"), stream("s1")],
        events: vec![],
        programs,
        symptom: SymptomDecl {
            step: symptom_step.into(),
            graph_node: None,
            program: Some(asked_program.clone()),
            request: asked_request,
            question: Default::default(),
            answer: None,
        },
        symptom_latency_us,
        targets: vec![
            (
                Role::Own,
                None,
                asked_program.clone(),
                asked_request,
                symptom_step.into(),
            ),
            (
                Role::Upstream,
                Some(InjectionKind::HostDelay),
                up_program.clone(),
                up_request,
                "embed".into(),
            ),
            (
                Role::Upstream,
                Some(InjectionKind::SyncWait),
                up_program,
                up_request,
                "mlp".into(),
            ),
        ],
        axes: BTreeMap::from([
            ("batch_sizes".into(), number(k as f64)),
            ("requests".into(), number(total as f64)),
            ("upstream".into(), number(upstream as f64)),
            (
                "symptom_position".into(),
                category(if first_op { "first" } else { "later" }),
            ),
            (
                "memory".into(),
                category(if pageable { "pageable" } else { "pinned" }),
            ),
            ("shape".into(), category("serving")),
        ]),
        magnitude_ratio: ratio,
    }
}

/// Pipelined micro-batches: one thread issues every micro-batch at once;
/// stage 1 of a micro-batch waits (on its own stream) for the event the
/// previous micro-batch recorded when its stage 2 finished, so a slow stage
/// 2 reaches micro-batches 1–3 downstream through `event` edges.
fn pipelined_microbatches(rng: &mut ChaCha8Rng) -> ShapeWorkload {
    let mut n = Names::new(rng);
    let total = rng.random_range(3..=6u32);
    let upstream = rng.random_range(1..=3u32.min(total - 1));
    let asked = rng.random_range(upstream..total);
    let (s1_name, s2_name) = (n.name(0), n.name(1));
    let stage1_us = rng.random_range(60.0..200.0f64);
    let stage2_us = stage1_us * rng.random_range(0.8..1.5f64);
    let steps = vec![
        wait_event("wait_previous", "s0", "stage2_done"),
        n.kernel("stage1", "s0", s1_name, stage1_us, FULL_GRID / 2),
        record_event("stage1_mark", "stage1_done", "s0"),
        wait_event("wait_stage1", "s1", "stage1_done"),
        n.kernel("stage2", "s1", s2_name, stage2_us, FULL_GRID / 2),
        record_event("stage2_mark", "stage2_done", "s1"),
    ];
    let ratio = magnitude_ratio(rng);
    ShapeWorkload {
        threads: vec![thread("main", 1)],
        queues: vec![],
        streams: vec![stream("s0"), stream("s1")],
        events: vec![
            EventDecl {
                name: "stage1_done".into(),
                count: 1,
            },
            EventDecl {
                name: "stage2_done".into(),
                count: 1,
            },
        ],
        programs: vec![Program {
            name: "microbatch".into(),
            start: "main".into(),
            requests: total,
            interval_us: 1.0,
            offset_us: 0.0,
            steps,
        }],
        symptom: SymptomDecl {
            step: "stage1".into(),
            graph_node: None,
            program: Some("microbatch".into()),
            request: asked,
            question: Default::default(),
            answer: None,
        },
        symptom_latency_us: stage1_us,
        targets: vec![
            (Role::Own, None, "microbatch".into(), asked, "stage1".into()),
            (
                Role::Upstream,
                None,
                "microbatch".into(),
                asked - upstream,
                "stage2".into(),
            ),
        ],
        axes: BTreeMap::from([
            ("requests".into(), number(total as f64)),
            ("upstream".into(), number(upstream as f64)),
            ("symptom_position".into(), category("later")),
            ("shape".into(), category("pipeline")),
        ]),
        magnitude_ratio: ratio,
    }
}

/// A training step: a data-loader thread decodes each batch (pure host work)
/// and hands it to the main thread through a queue; the main thread copies it
/// to the device (pinned, asynchronous), runs forward, backward, a
/// gradient all-reduce on a communication stream and the optimizer, then
/// reads the loss back (`.item()`, a blocking pageable copy) before it takes
/// the next batch. Steps are issued as fast as the loader goes, and the loader
/// prepares a batch in about the time the main thread takes for a step. The
/// queue is unbounded or holds one or two batches (`loader_queue`), as a
/// loader's `queue.Queue(maxsize)` does: a loader ahead of the main thread
/// then waits for room (the truth's `backpressure` edge, docs/records.md).
fn training_step(rng: &mut ChaCha8Rng) -> ShapeWorkload {
    let mut n = Names::new(rng);
    let total = rng.random_range(3..=5u32);
    let asked = rng.random_range(1..total);
    let fwd_us = rng.random_range(80.0..250.0f64);
    let loader_pace = rng.random_range(0.8..1.2f64);
    let batch_bytes =
        ((rng.random_range(20.0..80.0f64) * PINNED_BYTES_PER_US) as u64 / 4096) * 4096;
    let (fwd, bwd, comm, opt) = (n.name(0), n.name(1), n.name(2), n.name(3));
    let steps = vec![
        // The loader keeps pace with the main thread (a step's kernels take
        // about 3.9 forwards), so neither has slack to absorb a delay.
        host("decode_batch", fwd_us * 3.9 * loader_pace),
        Step::Handoff {
            queue: "batches".into(),
        },
        n.copy(
            "load",
            "s0",
            CopyDirection::H2d,
            batch_bytes,
            HostMemory::Pinned,
        ),
        n.kernel("forward", "s0", fwd, fwd_us, FULL_GRID),
        n.kernel("backward", "s0", bwd, fwd_us * 2.0, FULL_GRID),
        record_event("grads_mark", "grads_ready", "s0"),
        wait_event("wait_grads", "s1", "grads_ready"),
        n.kernel("allreduce", "s1", comm, fwd_us * 0.5, SMALL_GRID),
        record_event("comm_mark", "comm_done", "s1"),
        wait_event("wait_comm", "s0", "comm_done"),
        n.kernel("optimizer", "s0", opt, fwd_us * 0.4, FULL_GRID),
        n.copy("loss", "s0", CopyDirection::D2h, 4096, HostMemory::Pageable),
    ];
    let ratio = magnitude_ratio(rng);
    let capacity = loader_queue(rng);
    ShapeWorkload {
        threads: vec![thread("loader", 1), thread("main", 1)],
        queues: vec![QueueDecl {
            name: "batches".into(),
            kind: QueueKind::Channel,
            consumer: "main".into(),
            randomized: false,
            capacity,
        }],
        streams: vec![stream("s0"), stream("s1")],
        events: ["grads_ready", "comm_done"]
            .into_iter()
            .map(|e| EventDecl {
                name: e.into(),
                count: 1,
            })
            .collect(),
        programs: vec![Program {
            name: "train".into(),
            start: "loader".into(),
            requests: total,
            interval_us: 1.0,
            offset_us: 0.0,
            steps,
        }],
        symptom: SymptomDecl {
            step: "forward".into(),
            graph_node: None,
            program: Some("train".into()),
            request: asked,
            question: Default::default(),
            answer: None,
        },
        symptom_latency_us: fwd_us,
        targets: vec![
            (
                Role::Own,
                Some(InjectionKind::CpuDeschedule),
                "train".into(),
                asked,
                "decode_batch".into(),
            ),
            (Role::Own, None, "train".into(), asked, "forward".into()),
            (
                Role::Upstream,
                None,
                "train".into(),
                asked - 1,
                "optimizer".into(),
            ),
        ],
        axes: BTreeMap::from([
            ("requests".into(), number(total as f64)),
            ("upstream".into(), number(1.0)),
            ("symptom_position".into(), category("later")),
            ("shape".into(), category("training")),
            (
                "loader_queue".into(),
                category(&capacity.map_or("unbounded".into(), |c| c.to_string())),
            ),
        ]),
        magnitude_ratio: ratio,
    }
}
