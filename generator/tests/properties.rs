//! Invariants of the simulator's ground truth on generated scenarios.

use generator::sim::SimBackend;
use generator::Backend;
use ground_truth::graph::{EdgeType, NodeKind};
use ground_truth::io::Readable;
use ground_truth::scenario::*;
use ground_truth::trace::{CopyDirection, HostMemory};
use ground_truth::{CauseLabel, Mode, Scenario, SCHEMA_VERSION};
use proptest::prelude::*;

fn step_strategy() -> impl Strategy<Value = Step> {
    let stream = prop::sample::select(vec!["s0", "s1", "s2"]).prop_map(String::from);
    prop_oneof![
        (stream.clone(), 1.0f64..500.0, 1u32..200).prop_map(|(stream, d, grid)| Step::Kernel {
            id: None,
            stream,
            name: "k".into(),
            kind: KernelKind::Spin,
            duration_us: d,
            grid,
            block: 128,
            launch: LaunchApi::Runtime,
            call_site: None
        }),
        (stream.clone(), 1u64..(64 << 20), any::<bool>()).prop_map(|(stream, bytes, pageable)| {
            Step::Copy {
                id: None,
                stream,
                direction: CopyDirection::H2d,
                bytes,
                memory: if pageable {
                    HostMemory::Pageable
                } else {
                    HostMemory::Pinned
                },
                call_site: None,
            }
        }),
        stream.clone().prop_map(|stream| Step::Memset {
            id: None,
            stream,
            bytes: 4096
        }),
        stream.clone().prop_map(|stream| Step::EventRecord {
            id: None,
            event: "e".into(),
            stream,
            api: EventApi::Runtime,
            request_offset: 0,
        }),
        stream.clone().prop_map(|stream| Step::StreamWait {
            id: None,
            stream,
            event: "e".into(),
            api: EventApi::Driver,
            request_offset: 0,
        }),
        stream.clone().prop_map(|stream| Step::GraphLaunch {
            id: None,
            graph: "g".into(),
            stream
        }),
        stream.clone().prop_map(|s| Step::Sync {
            id: None,
            target: SyncTarget::Stream,
            stream: Some(s),
            event: None
        }),
        Just(Step::Sync {
            id: None,
            target: SyncTarget::Device,
            stream: None,
            event: None
        }),
        (0.0f64..100.0).prop_map(|d| Step::HostWork {
            id: None,
            duration_us: d
        }),
        Just(Step::Handoff { queue: "q".into() }),
        Just(Step::Recreate {
            object: ObjectKind::Event,
            name: "e".into()
        }),
        Just(Step::Recreate {
            object: ObjectKind::Stream,
            name: "s1".into()
        }),
    ]
}

fn injection_strategy() -> impl Strategy<Value = Option<InjectionKind>> {
    prop::option::of(prop::sample::select(vec![
        InjectionKind::CpuDeschedule,
        InjectionKind::HostDelay,
        InjectionKind::HostPageFaultMinor,
        InjectionKind::OccupancyPressure,
        InjectionKind::StreamBacklog,
        InjectionKind::KernelSlowdown,
        InjectionKind::UnrelatedWork,
    ]))
}

fn scenario_strategy() -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec(step_strategy(), 0..25),
        1u32..4,
        injection_strategy(),
        0.0f64..3000.0,
        any::<u64>(),
    )
        .prop_map(|(mut steps, requests, inj, mag, seed)| {
            // The symptom: a kernel with an id, somewhere in the program.
            let at = (seed as usize) % (steps.len() + 1);
            steps.insert(
                at,
                Step::Kernel {
                    id: Some("target".into()),
                    stream: "s0".into(),
                    name: "target".into(),
                    kind: KernelKind::Spin,
                    duration_us: 100.0,
                    grid: 64,
                    block: 128,
                    launch: LaunchApi::DriverEx,
                    call_site: Some("app.rs:1".into()),
                },
            );
            Scenario {
                schema_version: SCHEMA_VERSION,
                name: "generated".into(),
                family: "generated".into(),
                variant: "v".into(),
                cause: CauseLabel::None,
                description: String::new(),
                mode: Mode::Instrumented,
                seed,
                repetitions: 1,
                threads: vec![
                    ThreadDecl {
                        name: "main".into(),
                        count: 1,
                    },
                    ThreadDecl {
                        name: "pool".into(),
                        count: 3,
                    },
                ],
                queues: vec![QueueDecl {
                    name: "q".into(),
                    kind: QueueKind::ThreadPool,
                    consumer: "pool".into(),
                    randomized: true,
                    capacity: None,
                }],
                streams: ["s0", "s1", "s2"]
                    .iter()
                    .map(|s| StreamDecl {
                        name: s.to_string(),
                        priority: 0,
                    })
                    .collect(),
                events: vec![EventDecl {
                    name: "e".into(),
                    count: 1,
                }],
                graphs: vec![GraphDecl {
                    name: "g".into(),
                    build: GraphBuild::Captured,
                    nodes: vec![
                        GraphNodeDecl {
                            id: "a".into(),
                            kernel: spec(50.0),
                            after: vec![],
                        },
                        GraphNodeDecl {
                            id: "b".into(),
                            kernel: spec(20.0),
                            after: vec!["a".into()],
                        },
                        GraphNodeDecl {
                            id: "c".into(),
                            kernel: spec(20.0),
                            after: vec!["a".into()],
                        },
                    ],
                }],
                programs: vec![Program {
                    name: "p".into(),
                    start: "main".into(),
                    requests,
                    interval_us: 300.0,
                    offset_us: 0.0,
                    steps,
                }],
                injection: inj.map(|kind| Injection {
                    kind,
                    target: "target".into(),
                    program: None,
                    request: 0,
                    magnitude_us: mag,
                }),
                symptom: SymptomDecl {
                    step: "target".into(),
                    graph_node: None,
                    program: None,
                    request: 0,
                    question: Default::default(),
                    answer: None,
                },
                names: Vec::new(),
                space: None,
            }
        })
}

fn spec(d: f64) -> KernelSpec {
    KernelSpec {
        name: "gk".into(),
        kind: KernelKind::Spin,
        duration_us: d,
        grid: 32,
        block: 128,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn ground_truth_invariants(sc in scenario_strategy()) {
        prop_assert!(sc.check().is_empty(), "{:?}", sc.check());
        let b = SimBackend::default().record(&sc, 0).expect("records");
        let gt = &b.ground_truth;
        // Acyclic.
        prop_assert_eq!(ground_truth::io::find_cycle(gt.nodes.len(), &gt.edges), None);
        // Every device op has exactly one launch parent.
        let mut launches = vec![0; gt.nodes.len()];
        for e in &gt.edges {
            if e.kind == EdgeType::Launch { launches[e.dst as usize] += 1; }
        }
        for n in &gt.nodes {
            if n.kind.is_device_op() { prop_assert_eq!(launches[n.id as usize], 1, "node {:?}", n); }
        }
        // Stream order follows enqueue order, and a stream runs its ops one after another.
        for e in gt.edges.iter().filter(|e| e.kind == EdgeType::StreamOrder) {
            let (u, v) = (&gt.nodes[e.src as usize], &gt.nodes[e.dst as usize]);
            if u.kind != NodeKind::GraphNode && v.kind != NodeKind::GraphNode {
                prop_assert!(u.queued <= v.queued, "enqueue order {:?} -> {:?}", u, v);
            }
            prop_assert!(u.end <= v.start.max(v.submitted), "FIFO {:?} -> {:?}", u, v);
        }
        // The bundle validates against its own reader.
        let bytes = serde_json::to_vec(&b).unwrap();
        ground_truth::Bundle::parse(std::path::Path::new("generated.json"), &bytes).expect("valid bundle");
    }

    #[test]
    fn same_seed_same_bytes(sc in scenario_strategy()) {
        let be = SimBackend::default();
        let a = serde_json::to_vec(&be.record(&sc, 1).unwrap()).unwrap();
        let b = serde_json::to_vec(&be.record(&sc, 1).unwrap()).unwrap();
        prop_assert_eq!(a, b);
    }
}

#[test]
fn repetitions_differ_by_seeded_jitter() {
    let sc = generator::sim::launch_bound_scenario(200);
    let be = SimBackend::default();
    let a = be.record(&sc, 0).unwrap();
    let b = be.record(&sc, 1).unwrap();
    assert_ne!(a.trace, b.trace);
}
