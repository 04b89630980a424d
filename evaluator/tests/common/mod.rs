//! Hand-built bundle / view / explanation triples with known answers.
#![allow(dead_code)]

use ground_truth::explanation::ExplanationMeta;
use ground_truth::trace::{ApiDomain, MarkerPhase};
use ground_truth::view::LossSpec;
use ground_truth::{
    Attribution, Bundle, CauseLabel, ClaimedEdge, Collectors, Diagnosis, Edge, EdgeType, Evidence,
    Explanation, GroundTruth, LossAccounting, Manifest, Mode, Node, NodeKind, Phases, Query,
    Question, RankedCause, Record, Rid, Scenario, Symptom, TraceView, ViewSpec,
};

/// A minimal valid scenario (the evaluator only reads name / family / variant).
pub fn scenario(family: &str, variant: &str, cause: CauseLabel) -> Scenario {
    let json = serde_json::json!({
        "schema_version": 1,
        "name": format!("{family}.{variant}"),
        "family": family,
        "variant": variant,
        "cause": cause,
        "threads": [{"name": "main"}],
        "streams": [{"name": "s0"}],
        "programs": [{"name": "p", "start": "main", "steps": [
            {"op": "kernel", "id": "k", "stream": "s0", "name": "k", "duration_us": 10.0}
        ]}],
        "symptom": {"step": "k"}
    });
    serde_json::from_value(json).expect("test scenario parses")
}

/// Rid numbering: `base + scale * n`, so tests can force the sparse (hashed) index.
#[derive(Clone, Copy)]
pub struct Rids {
    pub base: u64,
    pub scale: u64,
}

impl Rids {
    pub const DENSE: Rids = Rids { base: 0, scale: 1 };
    pub const SPARSE: Rids = Rids {
        base: 1 << 40,
        scale: 1_000_000_007,
    };
    pub fn r(&self, n: u64) -> Rid {
        self.base + self.scale * n
    }
}

fn node(
    id: u32,
    kind: NodeKind,
    name: &str,
    request: Option<&str>,
    rids: Vec<Rid>,
    t: u64,
) -> Node {
    Node {
        id,
        kind,
        name: name.into(),
        request: request.map(Into::into),
        step: None,
        detail: Default::default(),
        generation: 0,
        start: t,
        end: t + 10,
        queued: 0,
        submitted: 0,
        rids: rids.into(),
    }
}

fn api(rid: Rid, t: u64, corr: u32) -> Record {
    Record::Api {
        rid,
        domain: ApiDomain::Runtime,
        cbid: 211,
        name: "cudaLaunchKernel".into(),
        tid: 1,
        start: t,
        end: t + 5,
        correlation_id: corr,
    }
}

fn kernel(rid: Rid, t: u64, corr: u32) -> Record {
    Record::Kernel {
        rid,
        stream: 7,
        correlation_id: corr,
        queued: t,
        submitted: t,
        start: t,
        end: t + 10,
        detail: ground_truth::trace::KernelDetail {
            name: "k".into(),
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
}

/// The fixture:
///
/// ```text
/// node 0 request "7"   rid 1 (marker)
/// node 1 api launch A  rids 10 (api), 11 (uprobe)   request 7
/// node 2 kernel A      rid 20                       request 7
/// node 3 api launch B  rid 30                       request 7
/// node 4 kernel B      rid 40                       request 7
/// node 5 kernel C      rid 50                       request 8
/// node 6 api launch C  rid 60                       request 8
/// edges: 0→1 request, 1→2 launch, 1→3 host_order, 3→4 launch, 2→4 stream_order, 6→5 launch
/// symptom s1: node 4 (rid 40), cause stream_backlog, path 0,1,2,4, phases (0,0,4,1)
/// symptom s2: node 5 (rid 50), request question, answer "8", path 6,5
/// ```
pub struct Fixture {
    pub bundle: Bundle,
    pub rids: Rids,
}

impl Fixture {
    pub fn new(rids: Rids) -> Fixture {
        Fixture::with(rids, "fam", "a", CauseLabel::StreamBacklog, 0)
    }

    pub fn with(
        rids: Rids,
        family: &str,
        variant: &str,
        cause: CauseLabel,
        repetition: u32,
    ) -> Fixture {
        let r = |n| rids.r(n);
        let nodes = vec![
            node(0, NodeKind::Request, "req7", Some("7"), vec![r(1)], 0),
            node(
                1,
                NodeKind::ApiCall,
                "launchA",
                Some("7"),
                vec![r(10), r(11)],
                100,
            ),
            node(2, NodeKind::Kernel, "A", Some("7"), vec![r(20)], 200),
            node(3, NodeKind::ApiCall, "launchB", Some("7"), vec![r(30)], 300),
            node(4, NodeKind::Kernel, "B", Some("7"), vec![r(40)], 400),
            node(5, NodeKind::Kernel, "C", Some("8"), vec![r(50)], 500),
            node(6, NodeKind::ApiCall, "launchC", Some("8"), vec![r(60)], 450),
        ];
        let e = |src, dst, kind| Edge { src, dst, kind };
        let edges = vec![
            e(0, 1, EdgeType::Request),
            e(1, 2, EdgeType::Launch),
            e(1, 3, EdgeType::HostOrder),
            e(3, 4, EdgeType::Launch),
            e(2, 4, EdgeType::StreamOrder),
            e(6, 5, EdgeType::Launch),
        ];
        let symptoms = vec![
            Symptom {
                id: "s1".into(),
                node: 4,
                rid: r(40),
                question: Question::Cause,
                cause,
                answer: None,
                lateness_ns: 5e6,
                critical_path: vec![0, 1, 2, 4],
                phases: Phases {
                    host_enqueue: 0.0,
                    queued_to_submitted: 0.0,
                    submitted_to_start: 4e6,
                    execution: 1e6,
                },
                boundaries: vec![],
                label: None,
            },
            Symptom {
                id: "s2".into(),
                node: 5,
                rid: r(50),
                question: Question::Request,
                cause: CauseLabel::HandoffQueueing,
                answer: Some("8".into()),
                lateness_ns: 0.0,
                critical_path: vec![6, 5],
                phases: Phases::default(),
                boundaries: vec![],
                label: None,
            },
        ];
        let trace = vec![
            Record::Marker {
                rid: r(1),
                tid: 1,
                phase: MarkerPhase::RequestBegin,
                queue: Default::default(),
                token: "7".into(),
                ts: 0,
            },
            api(r(10), 100, 1),
            Record::Uprobe {
                rid: r(11),
                tid: 1,
                function: "cuLaunchKernel".into(),
                enter: 101,
                exit: 104,
                handle: 0,
                stack: Default::default(),
            },
            kernel(r(20), 200, 1),
            api(r(30), 300, 2),
            kernel(r(40), 400, 2),
            kernel(r(50), 500, 3),
            api(r(60), 450, 3),
        ];
        let bundle = Bundle {
            schema_version: 1,
            manifest: Manifest {
                scenario: scenario(family, variant, cause),
                seed: 1,
                repetition,
                backend: "sim".into(),
                gpu: "none".into(),
                driver: "none".into(),
                cuda: "none".into(),
                cupti: "none".into(),
                tool_version: "test".into(),
                host: "test".into(),
                collectors: vec!["cupti".into(), "ebpf".into(), "app".into()],
                cross_check: None,
                cupti_capabilities: None,
            },
            ground_truth: GroundTruth {
                nodes,
                edges,
                symptoms,
                injections: vec![],
            },
            trace,
            loss: LossAccounting::default(),
        };
        Fixture { bundle, rids }
    }

    pub fn r(&self, n: u64) -> Rid {
        self.rids.r(n)
    }

    /// The full view, minus records numbered in `drop` (fixture numbers, not rids).
    pub fn view(&self, drop: &[u64], loss: LossSpec) -> TraceView {
        let dropped: Vec<Rid> = drop.iter().map(|&n| self.r(n)).collect();
        TraceView {
            schema_version: 1,
            bundle: self.bundle.id(),
            spec: ViewSpec {
                collectors: Collectors::Combined,
                mode: Mode::Instrumented,
                loss,
            },
            queries: vec![
                Query {
                    id: "s1".into(),
                    rid: self.r(40),
                    question: Question::Cause,
                },
                Query {
                    id: "s2".into(),
                    rid: self.r(50),
                    question: Question::Request,
                },
            ],
            collector_loss: LossAccounting::default(),
            records: self
                .bundle
                .trace
                .iter()
                .filter(|r| !dropped.contains(&r.rid()))
                .cloned()
                .collect(),
        }
    }

    pub fn full_view(&self) -> TraceView {
        self.view(&[], LossSpec::None)
    }

    pub fn edge(
        &self,
        src: u64,
        dst: u64,
        kind: EdgeType,
        evidence: Evidence,
        confidence: f64,
    ) -> ClaimedEdge {
        ClaimedEdge {
            src: self.r(src),
            dst: self.r(dst),
            kind,
            evidence,
            confidence,
        }
    }

    /// An explanation that gets everything right on the full view.
    pub fn perfect(&self, profiler: &str) -> Explanation {
        let x = Evidence::Explicit;
        let edges = vec![
            self.edge(1, 10, EdgeType::Request, x, 1.0),
            self.edge(10, 20, EdgeType::Launch, x, 1.0),
            self.edge(11, 30, EdgeType::HostOrder, x, 1.0),
            self.edge(30, 40, EdgeType::Launch, x, 1.0),
            self.edge(20, 40, EdgeType::StreamOrder, Evidence::Observed, 1.0),
            self.edge(60, 50, EdgeType::Launch, x, 1.0),
        ];
        let attribution = [(20, "7"), (40, "7"), (50, "8")]
            .iter()
            .map(|&(n, t)| Attribution {
                rid: self.r(n),
                request: t.into(),
            })
            .collect();
        let diagnoses = vec![
            Diagnosis {
                query: "s1".into(),
                causes: vec![RankedCause {
                    label: self.bundle.ground_truth.symptoms[0].cause,
                    score: 1.0,
                }],
                critical_path: vec![self.r(1), self.r(10), self.r(11), self.r(20), self.r(40)],
                phases: self.bundle.ground_truth.symptoms[0].phases,
                complete: true,
                first_unresolved: None,
                answer: None,
            },
            Diagnosis {
                query: "s2".into(),
                causes: vec![RankedCause {
                    label: CauseLabel::HandoffQueueing,
                    score: 1.0,
                }],
                critical_path: vec![self.r(60), self.r(50)],
                phases: Phases::default(),
                complete: true,
                first_unresolved: None,
                answer: None,
            },
        ];
        explanation(profiler, edges, attribution, diagnoses)
    }
}

pub fn explanation(
    profiler: &str,
    edges: Vec<ClaimedEdge>,
    attribution: Vec<Attribution>,
    diagnoses: Vec<Diagnosis>,
) -> Explanation {
    Explanation {
        schema_version: 1,
        meta: ExplanationMeta {
            profiler: profiler.into(),
            version: "0".into(),
            view: ViewSpec {
                collectors: Collectors::Combined,
                mode: Mode::Instrumented,
                loss: LossSpec::None,
            },
            wall_ms: 1.5,
            failure: None,
        },
        edges,
        attribution,
        diagnoses,
    }
}

pub fn empty(profiler: &str) -> Explanation {
    explanation(profiler, vec![], vec![], vec![])
}
