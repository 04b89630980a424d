//! Synthetic large inputs for the scale benchmark (`benches/score.rs`) and
//! `examples/score_scale.rs`: a stream-like ground truth of `n` nodes, a view
//! with 1 % of records lost, and an explanation of `n` claimed edges.
#![allow(dead_code)]

use ground_truth::explanation::ExplanationMeta;
use ground_truth::graph::NodeDetail;
use ground_truth::trace::ApiDomain;
use ground_truth::view::LossSpec;
use ground_truth::{
    Attribution, Bundle, CauseLabel, ClaimedEdge, Collectors, Diagnosis, Edge, EdgeType, Evidence,
    Explanation, GroundTruth, LossAccounting, Manifest, Mode, Node, NodeKind, Phases, Query,
    Question, RankedCause, Record, Rid, Symptom, TraceView, ViewSpec,
};

pub struct Inputs {
    pub bundle: Bundle,
    pub view: TraceView,
    pub explanation: Explanation,
}

/// Rid of node `i`: dense (`i + 1`) or scattered over u64 (forces the hashed index).
pub fn rid_of(i: u64, sparse: bool) -> Rid {
    if sparse {
        (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1 << 63
    } else {
        i + 1
    }
}

/// xorshift64*, deterministic.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Node `2k` is an API call, `2k+1` the kernel it launches, on one of 64 streams.
/// Truth edges: launch 2k → 2k+1, and stream_order from the previous kernel of the
/// same stream (≈ n edges in all). Every 8th request-carrying kernel has a request token.
pub fn build(n: usize, sparse: bool) -> Inputs {
    let streams = 64u64;
    let mut nodes = Vec::with_capacity(n);
    for i in 0..n as u64 {
        let kernel = i % 2 == 1;
        nodes.push(Node {
            id: i as u32,
            kind: if kernel {
                NodeKind::Kernel
            } else {
                NodeKind::ApiCall
            },
            name: Default::default(),
            request: None,
            step: None,
            detail: NodeDetail {
                stream: kernel.then_some(((i / 2) % streams) as u32),
                ..Default::default()
            }
            .into(),
            generation: 0,
            start: i * 1000,
            end: i * 1000 + 500,
            queued: 0,
            submitted: 0,
            rids: [rid_of(i, sparse)].into_iter().collect(),
        });
    }
    let mut edges = Vec::with_capacity(n);
    for i in (0..n as u64).step_by(2) {
        if i + 1 < n as u64 {
            edges.push(Edge {
                src: i as u32,
                dst: i as u32 + 1,
                kind: EdgeType::Launch,
            });
        }
        let prev = i + 1;
        let next = prev + 2 * streams;
        if next < n as u64 {
            edges.push(Edge {
                src: prev as u32,
                dst: next as u32,
                kind: EdgeType::StreamOrder,
            });
        }
    }
    // A few symptoms along stream 0.
    let mut symptoms = Vec::new();
    for s in 0..8u64 {
        let late = 1 + 2 * streams * (s + 1) * (n as u64 / (2 * streams * 10)).max(1);
        if late >= n as u64 {
            break;
        }
        let path = vec![(late - 2 * streams) as u32, late as u32];
        symptoms.push(Symptom {
            id: format!("q{s}"),
            node: late as u32,
            rid: rid_of(late, sparse),
            question: Question::Cause,
            cause: CauseLabel::StreamBacklog,
            answer: None,
            lateness_ns: 1e6,
            critical_path: [vec![(late - 2 * streams - 1) as u32], path].concat(),
            phases: Phases {
                host_enqueue: 0.0,
                queued_to_submitted: 1e6,
                submitted_to_start: 0.0,
                execution: 0.0,
            },
            boundaries: vec![],
            label: None,
        });
    }
    let mut rng = Rng(0x1234_5678_9abc_def1);
    // View: every record except ~1 % (never a query's record).
    let queried: std::collections::HashSet<Rid> = symptoms.iter().map(|s| s.rid).collect();
    let mut records = Vec::with_capacity(n);
    for (i, node) in nodes.iter().enumerate() {
        let rid = node.rids[0];
        if rng.below(100) == 0 && !queried.contains(&rid) {
            continue;
        }
        let t = i as u64 * 1000;
        records.push(if node.kind == NodeKind::Kernel {
            Record::Kernel {
                rid,
                stream: node.detail.stream.unwrap_or(0),
                correlation_id: (i / 2) as u32,
                queued: t,
                submitted: t,
                start: t,
                end: t + 500,
                detail: ground_truth::trace::KernelDetail {
                    name: Default::default(),
                    context: 1,
                    device: 0,
                    graph_id: 0,
                    graph_node_id: 0,
                    grid: [1, 1, 1],
                    block: [1, 1, 1],
                    channel: 0,
                }
                .into(),
            }
        } else {
            Record::Api {
                rid,
                domain: ApiDomain::Runtime,
                cbid: 211,
                name: Default::default(),
                tid: 1,
                start: t,
                end: t + 100,
                correlation_id: (i / 2) as u32,
            }
        });
    }
    // Explanation: n claims — 90 % truth edges (some duplicated), 10 % invented.
    let mut claims = Vec::with_capacity(n);
    while claims.len() < n {
        let r = rng.below(100);
        if r < 90 && !edges.is_empty() {
            let e = edges[rng.below(edges.len() as u64) as usize];
            claims.push(ClaimedEdge {
                src: rid_of(u64::from(e.src), sparse),
                dst: rid_of(u64::from(e.dst), sparse),
                kind: e.kind,
                evidence: Evidence::Explicit,
                confidence: 0.9,
            });
        } else {
            let (s, d) = (rng.below(n as u64), rng.below(n as u64));
            claims.push(ClaimedEdge {
                src: rid_of(s, sparse),
                dst: rid_of(d, sparse),
                kind: EdgeType::StreamOrder,
                evidence: if r < 95 {
                    Evidence::Inferred
                } else {
                    Evidence::Missing
                },
                confidence: 0.4,
            });
        }
    }
    let diagnoses = symptoms
        .iter()
        .map(|s| Diagnosis {
            query: s.id.clone(),
            causes: vec![RankedCause {
                label: CauseLabel::StreamBacklog,
                score: 1.0,
            }],
            critical_path: s
                .critical_path
                .iter()
                .map(|&p| rid_of(u64::from(p), sparse))
                .collect(),
            phases: s.phases,
            complete: true,
            first_unresolved: None,
            answer: None,
        })
        .collect();
    let queries = symptoms
        .iter()
        .map(|s| Query {
            id: s.id.clone(),
            rid: s.rid,
            question: s.question,
        })
        .collect();
    let spec = ViewSpec {
        collectors: Collectors::Combined,
        mode: Mode::Instrumented,
        loss: LossSpec::Uniform {
            rate: 0.01,
            seed: 1,
        },
    };
    let scenario = serde_json::from_value(serde_json::json!({
        "schema_version": 1, "name": "scale.a", "family": "scale", "variant": "a", "cause": "stream_backlog",
        "threads": [{"name": "main"}], "streams": [{"name": "s0"}],
        "programs": [{"name": "p", "start": "main", "steps": [{"op": "kernel", "id": "k", "stream": "s0", "name": "k", "duration_us": 1.0}]}],
        "symptom": {"step": "k"}
    }))
    .expect("scenario");
    let bundle = Bundle {
        schema_version: 1,
        manifest: Manifest {
            scenario,
            seed: 1,
            repetition: 0,
            backend: "sim".into(),
            gpu: String::new(),
            driver: String::new(),
            cuda: String::new(),
            cupti: String::new(),
            tool_version: String::new(),
            host: String::new(),
            collectors: vec![],
            cross_check: None,
            cupti_capabilities: None,
        },
        ground_truth: GroundTruth {
            nodes,
            edges,
            symptoms,
            injections: vec![],
        },
        // The evaluator never reads the bundle's trace; the view carries the records.
        trace: vec![],
        loss: LossAccounting::default(),
    };
    let view = TraceView {
        schema_version: 1,
        bundle: bundle.id(),
        spec,
        queries,
        collector_loss: LossAccounting::default(),
        records,
    };
    let explanation = Explanation {
        schema_version: 1,
        meta: ExplanationMeta {
            profiler: "synthetic".into(),
            version: "0".into(),
            view: spec,
            wall_ms: 0.0,
            failure: None,
        },
        edges: claims,
        attribution: Vec::<Attribution>::new(),
        diagnoses,
    };
    Inputs {
        bundle,
        view,
        explanation,
    }
}
