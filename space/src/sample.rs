//! Sampling one family instance's structure along the axes of
//! docs/scenario-space.md. Every draw comes from one seeded generator, so an
//! instance seed always gives the same structure.

use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How one op of the gating chain gates the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// The next op follows in the same stream.
    Stream,
    /// An event recorded after this op; another stream waits on it.
    Event,
    /// An edge between two nodes of one replayed graph.
    Graph,
    /// The host synchronizes with this op's stream, then launches the next.
    Sync,
    /// The host synchronizes, hands the request to another thread, which launches the next.
    Handoff,
}

impl Link {
    pub fn as_str(self) -> &'static str {
        match self {
            Link::Stream => "stream",
            Link::Event => "event",
            Link::Graph => "graph",
            Link::Sync => "sync",
            Link::Handoff => "handoff",
        }
    }
}

/// Whether the symptom kernel's name is shared, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peers {
    /// One request and no other launch of the name.
    None,
    /// Other requests launch the same kernels from the same call sites.
    Clean,
    /// The symptom's kernel name is also launched from other call sites, with
    /// other durations, off the gating chain.
    Polluted,
}

impl Peers {
    pub fn as_str(self) -> &'static str {
        match self {
            Peers::None => "none",
            Peers::Clean => "clean",
            Peers::Polluted => "polluted",
        }
    }
}

/// What the symptom is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymptomOp {
    Kernel,
    Copy,
    Memset,
    /// A blocking host call (a stream synchronization) after the chain's last op.
    HostCall,
}

impl SymptomOp {
    pub fn as_str(self) -> &'static str {
        match self {
            SymptomOp::Kernel => "kernel",
            SymptomOp::Copy => "copy",
            SymptomOp::Memset => "memset",
            SymptomOp::HostCall => "host_call",
        }
    }
}

/// A confounder of another kind, present but off the true path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoy {
    None,
    /// A small application kernel on a spare stream, running beside the chain.
    ConcurrentKernel,
    /// An application copy on a spare stream, after the chain's copies.
    ConcurrentCopy,
    /// Another host thread busy with host work and its own launches.
    BusyThread,
}

impl Decoy {
    pub fn as_str(self) -> &'static str {
        match self {
            Decoy::None => "none",
            Decoy::ConcurrentKernel => "concurrent_kernel",
            Decoy::ConcurrentCopy => "concurrent_copy",
            Decoy::BusyThread => "busy_thread",
        }
    }
}

/// One family instance's sampled structure (docs/scenario-space.md, "Axes").
#[derive(Debug, Clone)]
pub struct Structure {
    pub requests: u32,
    /// The request whose symptom is asked about (and where the injection lands).
    pub asked_request: u32,
    pub peers: Peers,
    /// The gating chain: `links[i]` gates op `i + 1` on op `i`; op 0 is the
    /// root, the last op (or the host call after it) the symptom.
    pub links: Vec<Link>,
    /// Nodes of the chain's graph, counting off-path fan-in and fan-out nodes
    /// (0: no graph).
    pub graph_nodes: u32,
    pub streams: u32,
    pub magnitude_ratio: f64,
    pub decoy: Decoy,
    pub symptom_op: SymptomOp,
    /// For a copy symptom: pageable (not pinned) host memory.
    pub pageable: bool,
    /// Queue handoffs before the request reaches CUDA.
    pub handoff_depth: u32,
    /// The symptom's nominal latency (µs); copies and memsets are sized to it.
    pub symptom_us: f64,
    /// Durations of the other ops (µs), each within a factor of three of the
    /// symptom's, so no op's own jitter dwarfs the symptom.
    pub durations_us: Vec<f64>,
    /// Kernel names drawn for the chain (distinct).
    pub names: Vec<&'static str>,
    pub rng_seed: u64,
}

/// What a family demands of the structure it is sampled with.
#[derive(Debug, Clone, Copy, Default)]
pub struct Constraints {
    /// The kinds the first link may take, when the family's mechanism needs
    /// one (empty: any): the gate right after the root names a lengthened
    /// root's label (docs/scenario-space.md, "Labelling convention").
    pub first_link: &'static [Link],
    /// Every link is a graph edge (the chain is one graph).
    pub all_graph: bool,
    /// The symptom kinds the family allows (empty: any).
    pub symptom_ops: &'static [SymptomOp],
    /// No graph in the chain: the family's root is not a kernel, or its
    /// variants need the root op's own launch.
    pub no_graph: bool,
}

impl Constraints {
    /// Any structure the space samples.
    pub const ANY: Constraints = Constraints {
        first_link: &[],
        all_graph: false,
        symptom_ops: &[],
        no_graph: false,
    };
}

/// Kernel names of an inference-serving application: what generated work is
/// called, so no name says which op is the root, the gate or the symptom.
pub const KERNEL_NAMES: [&str; 24] = [
    "gemm_bf16_128x128",
    "gemm_bf16_64x256",
    "layernorm_fwd",
    "rmsnorm_fwd",
    "softmax_warp",
    "rotary_embed",
    "attention_fwd",
    "flash_decode",
    "gelu_fused",
    "silu_mul",
    "reduce_sum",
    "elementwise_add",
    "topk_select",
    "embedding_lookup",
    "kv_cache_append",
    "dequant_int4",
    "quantize_fp8",
    "transpose_tile",
    "scatter_add",
    "gather_rows",
    "argmax_vocab",
    "bias_residual",
    "conv1d_causal",
    "sampling_topp",
];

/// The longest gating chain and the largest graph the space samples.
pub const MAX_DEPTH: u32 = 8;
pub const MAX_GRAPH_NODES: u32 = 16;

/// Samples a structure for `seed` under a family's `constraints`.
pub fn sample(seed: u64, constraints: Constraints) -> Structure {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let requests = if rng.random_bool(0.25) {
        1
    } else {
        rng.random_range(2..=8)
    };
    let peers = if requests == 1 {
        if rng.random_bool(0.5) {
            Peers::None
        } else {
            Peers::Polluted
        }
    } else if rng.random_bool(0.5) {
        Peers::Clean
    } else {
        Peers::Polluted
    };
    let symptom_op = if constraints.symptom_ops.is_empty() {
        *[
            SymptomOp::Kernel,
            SymptomOp::Kernel,
            SymptomOp::Copy,
            SymptomOp::Memset,
            SymptomOp::HostCall,
        ]
        .choose(&mut rng)
        .expect("non-empty")
    } else {
        *constraints.symptom_ops.choose(&mut rng).expect("non-empty")
    };
    let streams = rng.random_range(1..=8u32);
    let depth = rng.random_range(1..=MAX_DEPTH) as usize;
    // Graph nodes are kernels: a copy or memset symptom ends the chain outside a graph.
    let graph_allowed =
        !constraints.no_graph && matches!(symptom_op, SymptomOp::Kernel | SymptomOp::HostCall);
    let mut links: Vec<Link> = Vec::with_capacity(depth);
    if constraints.all_graph {
        links = vec![Link::Graph; depth];
    } else {
        // A run of graph edges, if any, ends the chain: a graph launch gates
        // what follows it only as a whole.
        let graph_from = if graph_allowed && depth >= 2 && rng.random_bool(0.3) {
            rng.random_range(1..depth)
        } else {
            depth
        };
        for i in 0..depth {
            let link = if i >= graph_from {
                Link::Graph
            } else {
                let mut choices = vec![Link::Stream, Link::Sync, Link::Handoff];
                if streams >= 2 {
                    choices.extend([Link::Event, Link::Event]);
                }
                *choices.choose(&mut rng).expect("non-empty")
            };
            links.push(link);
        }
        if !constraints.first_link.is_empty() {
            links[0] = *constraints.first_link.choose(&mut rng).expect("non-empty");
        }
    }
    let streams = if links.contains(&Link::Event) {
        streams.max(2)
    } else {
        streams
    };
    let graph_chain = links.iter().filter(|&&l| l == Link::Graph).count() as u32;
    let graph_nodes = if graph_chain == 0 {
        0
    } else {
        let chain_nodes = graph_chain + u32::from(constraints.all_graph);
        rng.random_range(chain_nodes.max(2)..=MAX_GRAPH_NODES.max(chain_nodes))
    };
    // Log-uniform over 0.1×–10× the symptom's normal latency.
    let magnitude_ratio = 10f64.powf(rng.random_range(-1.0..=1.0));
    let magnitude_ratio = (magnitude_ratio * 1000.0).round() / 1000.0;
    let decoy = *[
        Decoy::None,
        Decoy::ConcurrentKernel,
        Decoy::ConcurrentCopy,
        Decoy::BusyThread,
    ]
    .choose(&mut rng)
    .expect("non-empty");
    let handoff_depth = if rng.random_bool(0.4) {
        0
    } else {
        rng.random_range(1..=8)
    };
    let pageable = rng.random_bool(0.5);
    let ops = depth + 1 + MAX_GRAPH_NODES as usize + 8;
    // 50 µs – 1 ms, log-uniform.
    let symptom_us = (10f64.powf(rng.random_range(1.7..=3.0)) * 10.0).round() / 10.0;
    let durations_us = (0..ops)
        .map(|_| (symptom_us * 10f64.powf(rng.random_range(-0.5..=0.5)) * 10.0).round() / 10.0)
        .collect();
    let mut names = KERNEL_NAMES.to_vec();
    for i in (1..names.len()).rev() {
        names.swap(i, rng.random_range(0..=i));
    }
    Structure {
        requests,
        asked_request: rng.random_range(0..requests),
        peers,
        links,
        graph_nodes,
        streams,
        magnitude_ratio,
        decoy,
        symptom_op,
        pageable,
        handoff_depth,
        symptom_us,
        durations_us,
        names,
        rng_seed: rng.random(),
    }
}
