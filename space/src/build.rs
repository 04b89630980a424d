//! A sampled structure as scenario declarations: threads and queues for the
//! handoffs, streams, events, the chain's graph, the request program with its
//! gating chain, peers and decoys. Every variant of a family instance is built
//! from the same structure, so the variants differ only in their injection.

use crate::sample::{Decoy, Link, Peers, Structure, SymptomOp};
use ground_truth::scenario::{
    EventApi, EventDecl, GraphDecl, GraphNodeDecl, KernelKind, KernelSpec, Program, QueueDecl,
    QueueKind, Step, StreamDecl, SymptomDecl, SyncTarget, ThreadDecl,
};
use ground_truth::trace::{CopyDirection, HostMemory};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Nominal transfer rates (bytes per µs) the space sizes copies and memsets by,
/// the H200's as the simulator models them (`generator::sim::DeviceParams`);
/// they set sizes and the magnitude ratio only: the label check measures the
/// real lateness.
const PINNED_BYTES_PER_US: f64 = 52_000.0;
const PAGEABLE_BYTES_PER_US: f64 = 3_350.0;
const DEVICE_BYTES_PER_US: f64 = 1_500_000.0;
const MEMSET_BYTES_PER_US: f64 = 2_000_000.0;
/// Longest device-side transfer the space sizes (µs): keeps device buffers
/// below half a gigabyte.
const MAX_DEVICE_TRANSFER_US: f64 = 200.0;

/// A duration to a tenth of a microsecond: what a scenario file says, and
/// what survives its own format exactly.
fn tenth(us: f64) -> f64 {
    (us * 10.0).round() / 10.0
}

/// `us` of transfer at `rate`, in whole 4 KiB pages.
fn bytes_for(us: f64, rate: f64) -> u64 {
    (((us * rate) as u64) / 4096).max(1) * 4096
}
/// Blocks of the chain's kernels: two thirds of an H200's 132 SMs, so the
/// application's small kernels beside the chain fit in the rest and never
/// hold SMs the chain needs.
const FULL_GRID: u32 = 88;
/// Blocks of decoy and background kernels: together they fit in the SMs the
/// chain leaves free.
const SMALL_GRID: u32 = 4;

/// The built declarations plus where the family's injections can land.
pub struct Workload {
    pub threads: Vec<ThreadDecl>,
    pub queues: Vec<QueueDecl>,
    pub streams: Vec<StreamDecl>,
    pub events: Vec<EventDecl>,
    pub graphs: Vec<GraphDecl>,
    pub programs: Vec<Program>,
    pub symptom: SymptomDecl,
    /// Step id (or graph node id) of each chain op, root first.
    pub chain: Vec<String>,
    /// The step id of the graph launch, when the chain has a graph.
    pub graph_launch: Option<String>,
    /// A side kernel whose event also gates chain op 1 (`with_side_gate`).
    pub side_gate: Option<String>,
    /// The symptom's normal latency (µs): its nominal duration.
    pub symptom_latency_us: f64,
}

/// Options a family adds to the sampled structure.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layout {
    /// The root is a host-to-device copy.
    pub root_copy: bool,
    /// A copy symptom reads back to the host (device-to-host).
    pub readback: bool,
    /// A side kernel on its own stream also gates chain op 1 through an event.
    pub side_gate: bool,
}

impl Layout {
    /// The sampled structure as it is, nothing added.
    pub const PLAIN: Layout = Layout {
        root_copy: false,
        readback: false,
        side_gate: false,
    };
}

struct Builder<'s> {
    s: &'s Structure,
    rng: ChaCha8Rng,
    threads: Vec<ThreadDecl>,
    queues: Vec<QueueDecl>,
    events: Vec<EventDecl>,
    steps: Vec<Step>,
    /// Durations drawn so far (index into `s.durations_us`).
    next_duration: usize,
    line: u32,
    /// Streams added beyond the sampled ones (for peers, decoys, side gates).
    aux_streams: u32,
}

impl Builder<'_> {
    fn duration(&mut self) -> f64 {
        let d = self.s.durations_us[self.next_duration % self.s.durations_us.len()];
        self.next_duration += 1;
        d
    }

    fn call_site(&mut self, name: &str) -> String {
        self.line += 7 + self.rng.random_range(0..40);
        let function = name.split('_').next().unwrap_or(name);
        format!("serve.py:{function}:{}", self.line)
    }

    fn kernel(
        &mut self,
        id: Option<String>,
        stream: &str,
        name: &str,
        duration_us: f64,
        grid: u32,
    ) -> Step {
        let call_site = Some(self.call_site(name));
        Step::Kernel {
            id,
            stream: stream.into(),
            name: name.into(),
            kind: KernelKind::Spin,
            duration_us: tenth(duration_us),
            grid,
            block: 256,
            launch: Default::default(),
            call_site,
        }
    }

    /// A stream of its own, beyond the sampled ones.
    fn aux_stream(&mut self) -> String {
        self.aux_streams += 1;
        stream_name(self.s.streams + self.aux_streams - 1)
    }

    fn host_work(&mut self, us: f64) {
        self.steps.push(Step::HostWork {
            id: None,
            duration_us: us,
        });
    }

    /// A queue handoff to a new consumer thread (or pool).
    fn handoff(&mut self) {
        let n = self.queues.len() + 1;
        let pool = self.rng.random_bool(0.3);
        let thread = format!("worker{n}");
        self.threads.push(ThreadDecl {
            name: thread.clone(),
            count: if pool {
                self.rng.random_range(2..=4)
            } else {
                1
            },
        });
        let kind = *[
            QueueKind::Channel,
            QueueKind::ThreadPool,
            QueueKind::Future,
            QueueKind::Callback,
        ]
        .choose(&mut self.rng)
        .expect("non-empty");
        let queue = format!("queue{n}");
        self.queues.push(QueueDecl {
            name: queue.clone(),
            kind,
            consumer: thread,
            randomized: pool,
            capacity: None,
        });
        self.steps.push(Step::Handoff { queue });
    }
}

fn stream_name(i: u32) -> String {
    format!("s{i}")
}

/// The chain as built: its ops' ids and nominal latencies, the stream it ended on, and
/// its graph (when it has one).
struct Chain {
    /// Step id (or graph node id) of each op, root first.
    ids: Vec<String>,
    /// Each op's nominal latency (µs).
    latencies: Vec<f64>,
    /// The stream the last op runs on.
    stream: u32,
    /// The chain's graph nodes, root first.
    graph_nodes: Vec<GraphNodeDecl>,
    graph_launch: Option<String>,
}

/// Builds the workload of `s` under `layout`: handoffs in front, the side gate, the
/// chain with its links, the symptom, the graph's off-path nodes, then what runs beside
/// the chain, as programs.
pub fn build(s: &Structure, layout: Layout) -> Workload {
    let mut b = Builder {
        s,
        rng: ChaCha8Rng::seed_from_u64(s.rng_seed),
        threads: vec![ThreadDecl {
            name: "main".into(),
            count: 1,
        }],
        queues: Vec::new(),
        events: Vec::new(),
        steps: Vec::new(),
        next_duration: 0,
        line: 10,
        aux_streams: 0,
    };
    let depth = s.links.len();
    for _ in 0..s.handoff_depth {
        let us = b.rng.random_range(5.0..40.0f64).round();
        b.host_work(us);
        b.handoff();
    }
    b.host_work(20.0);
    let last_kernel_name = s.names[depth.min(s.names.len() - 1)];
    let side_gate = layout.side_gate.then(|| b.side_gate());
    let chain = b.chain(layout, side_gate.is_some());
    let (symptom, symptom_latency_us) = b.symptom(&chain);
    let graph_nodes = b.graph_with_off_path_nodes(chain.graph_nodes, depth);
    b.beside_the_chain(last_kernel_name, symptom_latency_us);
    let programs = b.programs(&chain.latencies, symptom_latency_us);
    let streams = (0..s.streams + b.aux_streams)
        .map(|i| StreamDecl {
            name: stream_name(i),
            priority: 0,
        })
        .collect();
    let graphs = if graph_nodes.is_empty() {
        vec![]
    } else {
        vec![GraphDecl {
            name: "chain".into(),
            build: Default::default(),
            nodes: graph_nodes,
        }]
    };
    Workload {
        threads: b.threads,
        queues: b.queues,
        streams,
        events: b.events,
        graphs,
        programs,
        symptom,
        chain: chain.ids,
        graph_launch: chain.graph_launch,
        side_gate,
        symptom_latency_us,
    }
}

impl Builder<'_> {
    /// A side kernel on a stream of its own whose event also gates chain op 1; its id.
    fn side_gate(&mut self) -> String {
        let s = self.s;
        let side_stream = self.aux_stream();
        let id = "side".to_string();
        // Shorter than the root, so it gates only when lengthened.
        let d = self.duration() * 0.3;
        let name = s.names[s.names.len() - 1];
        let k = self.kernel(
            Some(id.clone()),
            &side_stream,
            name,
            (d * 10.0).round() / 10.0,
            SMALL_GRID * 2,
        );
        self.steps.push(k);
        self.events.push(EventDecl {
            name: "side_done".into(),
            count: 1,
        });
        self.steps.push(Step::EventRecord {
            id: None,
            event: "side_done".into(),
            stream: side_stream,
            api: EventApi::default(),
            request_offset: 0,
        });
        id
    }

    /// The chain's ops, root first, each followed by the link to the next.
    fn chain(&mut self, layout: Layout, side_gated: bool) -> Chain {
        let s = self.s;
        let depth = s.links.len();
        // The first op inside the graph: a chain of graph edges from its root
        // starts there; a run at the end starts at the op its first edge gates.
        let graph_start = s.links.iter().position(|&l| l == Link::Graph);
        let mut chain = Chain {
            ids: Vec::with_capacity(depth + 1),
            latencies: Vec::with_capacity(depth + 1),
            stream: 0,
            graph_nodes: Vec::new(),
            graph_launch: None,
        };
        for i in 0..=depth {
            let id = format!("op{i}");
            let is_last = i == depth;
            if graph_start.is_some_and(|g| i >= g) {
                self.graph_op(&mut chain, i, id);
                continue;
            }
            let st = stream_name(chain.stream);
            let latency = self.device_op(layout, i, &id, &st);
            chain.latencies.push(latency);
            if i == 1 && side_gated {
                // The side kernel's event gates op 1 too: recorded before the
                // chain, waited for here (ahead of op 1 on its stream).
                let wait = Step::StreamWait {
                    id: None,
                    stream: st.clone(),
                    event: "side_done".into(),
                    api: EventApi::default(),
                    request_offset: 0,
                };
                let op = self.steps.pop().expect("op 1 was just pushed");
                self.steps.push(wait);
                self.steps.push(op);
            }
            chain.ids.push(id);
            if is_last {
                break;
            }
            self.link(i, st, &mut chain.stream);
        }
        // Side gate of op 1 when op 1 sits in a graph: not built (families with a
        // side gate have no graph).
        chain
    }

    /// Chain op `i` as a node of the chain's graph (the graph launched first).
    fn graph_op(&mut self, chain: &mut Chain, i: usize, id: String) {
        let s = self.s;
        let is_last = i == s.links.len();
        let name = s.names[i % s.names.len()];
        if chain.graph_launch.is_none() {
            let launch = "graph_launch".to_string();
            self.steps.push(Step::GraphLaunch {
                id: Some(launch.clone()),
                graph: "chain".into(),
                stream: stream_name(chain.stream),
            });
            chain.graph_launch = Some(launch);
        }
        let d = if is_last {
            s.symptom_us
        } else {
            self.duration()
        };
        let after = match chain.graph_nodes.last() {
            Some(prev) if i > 0 => vec![prev.id.clone()],
            _ => vec![],
        };
        chain.graph_nodes.push(GraphNodeDecl {
            id: id.clone(),
            kernel: KernelSpec {
                name: name.into(),
                kind: KernelKind::Spin,
                duration_us: tenth(d),
                grid: FULL_GRID,
                block: 256,
            },
            after,
        });
        chain.latencies.push(d);
        chain.ids.push(id);
    }

    /// Chain op `i` on stream `st`: the root copy, the symptom's copy or memset, or a
    /// kernel; its nominal latency.
    fn device_op(&mut self, layout: Layout, i: usize, id: &str, st: &str) -> f64 {
        let s = self.s;
        let is_last = i == s.links.len();
        let name = s.names[i % s.names.len()];
        if i == 0 && layout.root_copy {
            let d = self.duration();
            let bytes = bytes_for(d, PINNED_BYTES_PER_US);
            self.steps.push(Step::Copy {
                id: Some(id.into()),
                stream: st.into(),
                direction: CopyDirection::H2d,
                bytes,
                memory: HostMemory::Pinned,
                call_site: None,
            });
            bytes as f64 / PINNED_BYTES_PER_US
        } else if is_last && s.symptom_op == SymptomOp::Copy {
            let direction = if layout.readback {
                CopyDirection::D2h
            } else {
                *[CopyDirection::H2d, CopyDirection::D2h, CopyDirection::D2d]
                    .choose(&mut self.rng)
                    .expect("non-empty")
            };
            let memory = if s.pageable && direction != CopyDirection::D2d {
                HostMemory::Pageable
            } else {
                HostMemory::Pinned
            };
            let (rate, us) = match (direction, memory) {
                (CopyDirection::D2d, _) => (
                    DEVICE_BYTES_PER_US,
                    s.symptom_us.min(MAX_DEVICE_TRANSFER_US),
                ),
                (_, HostMemory::Pageable) => (PAGEABLE_BYTES_PER_US, s.symptom_us),
                _ => (PINNED_BYTES_PER_US, s.symptom_us),
            };
            let bytes = bytes_for(us, rate);
            self.steps.push(Step::Copy {
                id: Some(id.into()),
                stream: st.into(),
                direction,
                bytes,
                memory,
                call_site: None,
            });
            bytes as f64 / rate
        } else if is_last && s.symptom_op == SymptomOp::Memset {
            let bytes = bytes_for(
                s.symptom_us.min(MAX_DEVICE_TRANSFER_US),
                MEMSET_BYTES_PER_US,
            );
            self.steps.push(Step::Memset {
                id: Some(id.into()),
                stream: st.into(),
                bytes,
            });
            bytes as f64 / MEMSET_BYTES_PER_US
        } else {
            let d = if is_last {
                s.symptom_us
            } else {
                self.duration()
            };
            let k = self.kernel(Some(id.into()), st, name, d, FULL_GRID);
            self.steps.push(k);
            d
        }
    }

    /// The link after chain op `i` (on stream `st`): nothing for stream order and graph
    /// edges, an event record and wait, or a host sync (and a handoff) after which the
    /// chain continues on another stream, `stream`.
    fn link(&mut self, i: usize, st: String, stream: &mut u32) {
        let s = self.s;
        match s.links[i] {
            Link::Stream | Link::Graph => {}
            Link::Event => {
                let event = format!("e{i}");
                self.events.push(EventDecl {
                    name: event.clone(),
                    count: 1,
                });
                self.steps.push(Step::EventRecord {
                    id: None,
                    event: event.clone(),
                    stream: st,
                    api: EventApi::default(),
                    request_offset: 0,
                });
                *stream = (*stream + 1) % s.streams.max(2);
                self.steps.push(Step::StreamWait {
                    id: None,
                    stream: stream_name(*stream),
                    event,
                    api: EventApi::default(),
                    request_offset: 0,
                });
            }
            Link::Sync | Link::Handoff => {
                self.steps.push(Step::Sync {
                    id: None,
                    target: SyncTarget::Stream,
                    stream: Some(st),
                    event: None,
                });
                if s.links[i] == Link::Handoff {
                    self.handoff();
                }
                let us = self.rng.random_range(5.0..30.0f64).round();
                self.host_work(us);
                *stream = self.rng.random_range(0..s.streams);
            }
        }
    }

    /// The symptom (the host's wait for the last op, or the last op itself) and its
    /// normal latency.
    fn symptom(&mut self, chain: &Chain) -> (SymptomDecl, f64) {
        let s = self.s;
        let last_stream = stream_name(chain.stream);
        let symptom_latency_us = *chain.latencies.last().expect("a chain has ops");
        let symptom = |step: String, graph_node: Option<String>| SymptomDecl {
            step,
            graph_node,
            program: None,
            request: s.asked_request,
            question: Default::default(),
            answer: None,
        };
        let decl = if s.symptom_op == SymptomOp::HostCall {
            self.steps.push(Step::Sync {
                id: Some("wait".into()),
                target: SyncTarget::Stream,
                stream: Some(last_stream),
                event: None,
            });
            symptom("wait".into(), None)
        } else {
            match &chain.graph_launch {
                Some(launch) => symptom(launch.clone(), chain.ids.last().cloned()),
                None => symptom(chain.ids.last().cloned().expect("a chain has ops"), None),
            }
        };
        (decl, symptom_latency_us)
    }

    /// Off-path fan-in and fan-out nodes of the graph, up to its sampled size.
    /// Declared in dependency order: fan-in roots first, then the chain, then
    /// the fan-out nodes hanging off it.
    fn graph_with_off_path_nodes(
        &mut self,
        mut graph_nodes: Vec<GraphNodeDecl>,
        depth: usize,
    ) -> Vec<GraphNodeDecl> {
        let s = self.s;
        let chain_in_graph = graph_nodes.len();
        let (mut fan_ins, mut fan_outs) = (Vec::new(), Vec::new());
        let mut extra = 0;
        while chain_in_graph > 0 && chain_in_graph + extra < s.graph_nodes as usize {
            let anchor = self.rng.random_range(0..chain_in_graph);
            let anchor_id = graph_nodes[anchor].id.clone();
            let anchor_us = graph_nodes[anchor].kernel.duration_us;
            let id = format!("n{extra}");
            extra += 1;
            let name = s.names[(depth + 1 + extra) % s.names.len()];
            let fan_in = anchor > 0 && self.rng.random_bool(0.5);
            // Fan-in nodes are short so they never gate the chain; fan-out nodes
            // hang off a chain node and gate nothing after it.
            let (duration_us, after) = if fan_in {
                ((anchor_us * 0.2 * 10.0).round() / 10.0 + 1.0, vec![])
            } else {
                (self.duration(), vec![anchor_id.clone()])
            };
            let node = GraphNodeDecl {
                id: id.clone(),
                kernel: KernelSpec {
                    name: name.into(),
                    kind: KernelKind::Spin,
                    duration_us: tenth(duration_us),
                    grid: SMALL_GRID,
                    block: 256,
                },
                after,
            };
            if fan_in {
                graph_nodes[anchor].after.push(id);
                fan_ins.push(node);
            } else {
                fan_outs.push(node);
            }
        }
        fan_ins
            .into_iter()
            .chain(graph_nodes)
            .chain(fan_outs)
            .collect()
    }

    /// What runs beside the chain on the main thread: polluted peers, the spare streams'
    /// kernels, the decoy, then the device sync that ends a request.
    fn beside_the_chain(&mut self, last_kernel_name: &str, symptom_latency_us: f64) {
        let s = self.s;
        // Peers polluted by the same kernel name from other call sites, with
        // other durations, on a stream of their own (never gating the chain).
        if s.peers == Peers::Polluted {
            let st = self.aux_stream();
            for factor in [0.4, 2.5] {
                let d = (symptom_latency_us * factor * 10.0).round() / 10.0 + 5.0;
                let k = self.kernel(None, &st, last_kernel_name, d, SMALL_GRID);
                self.steps.push(k);
            }
        }
        // Spare streams carry small application kernels beside the chain.
        let used: std::collections::BTreeSet<String> = self
            .steps
            .iter()
            .filter_map(|st| match st {
                Step::Kernel { stream, .. }
                | Step::Copy { stream, .. }
                | Step::Memset { stream, .. }
                | Step::GraphLaunch { stream, .. } => Some(stream.clone()),
                _ => None,
            })
            .collect();
        for i in 0..s.streams {
            let st = stream_name(i);
            if !used.contains(&st) {
                let d = self.duration() * 0.5;
                let name = s.names[(i as usize + 11) % s.names.len()];
                let k = self.kernel(None, &st, name, (d * 10.0).round() / 10.0, SMALL_GRID);
                self.steps.push(k);
            }
        }
        let has_copies = self.steps.iter().any(|st| matches!(st, Step::Copy { .. }));
        match s.decoy {
            Decoy::None | Decoy::BusyThread => {}
            Decoy::ConcurrentKernel => {
                let st = self.aux_stream();
                let name = s.names[s.names.len() - 2];
                let k = self.kernel(None, &st, name, symptom_latency_us.max(20.0), SMALL_GRID);
                self.steps.push(k);
            }
            Decoy::ConcurrentCopy => {
                let st = self.aux_stream();
                let copy = Step::Copy {
                    id: None,
                    stream: st,
                    direction: CopyDirection::D2h,
                    bytes: bytes_for(s.symptom_us, PINNED_BYTES_PER_US),
                    memory: HostMemory::Pinned,
                    call_site: None,
                };
                if has_copies {
                    self.steps.push(copy);
                } else {
                    // No chain copy to contend with: beside the chain from its start.
                    let at = self
                        .steps
                        .iter()
                        .position(|st| st.is_device_op())
                        .unwrap_or(0)
                        + 1;
                    self.steps.insert(at, copy);
                }
            }
        }
        self.steps.push(Step::Sync {
            id: None,
            target: SyncTarget::Device,
            stream: None,
            event: None,
        });
    }

    /// The serving program (the steps built so far, one request per interval) and, with
    /// a busy-thread decoy, the background program beside it.
    fn programs(&mut self, latencies: &[f64], symptom_latency_us: f64) -> Vec<Program> {
        let s = self.s;
        let depth = s.links.len();
        let total_us: f64 =
            latencies.iter().sum::<f64>() + 60.0 * (depth as f64 + s.handoff_depth as f64);
        let interval_us =
            (total_us * 1.5 + symptom_latency_us * s.magnitude_ratio * 1.5 + 500.0).round();
        let mut programs = vec![Program {
            name: "serve".into(),
            start: "main".into(),
            requests: s.requests,
            interval_us,
            offset_us: 0.0,
            steps: std::mem::take(&mut self.steps),
        }];
        if s.decoy == Decoy::BusyThread {
            self.threads.push(ThreadDecl {
                name: "busy".into(),
                count: 1,
            });
            let st = self.aux_stream();
            let name = s.names[s.names.len() - 3];
            let work = (symptom_latency_us * 2.0).round().max(50.0);
            let k = self.kernel(None, &st, name, symptom_latency_us.max(20.0), SMALL_GRID);
            programs.push(Program {
                name: "background".into(),
                start: "busy".into(),
                requests: s.requests,
                interval_us,
                offset_us: (interval_us * 0.1).round(),
                steps: vec![
                    Step::HostWork {
                        id: None,
                        duration_us: work,
                    },
                    k,
                    Step::Sync {
                        id: None,
                        target: SyncTarget::Stream,
                        stream: Some(st),
                        event: None,
                    },
                ],
            });
        }
        programs
    }
}
