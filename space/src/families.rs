//! The families of the scenario space (docs/scenario-space.md, "Families"):
//! what each demands of the sampled structure, and where each variant's
//! injection lands. Variants of one instance share the structure; only the
//! injection and its declared label differ. The label is the root cause at
//! the start of the true path (docs/scenario-space.md, "Labelling convention").

use crate::build::{Layout, Workload};
use crate::sample::{Constraints, Link, SymptomOp};
use ground_truth::labels::CauseLabel;
use ground_truth::scenario::{Injection, InjectionKind};

/// One variant: its name, declared label, and injection kind and target.
pub struct Variant {
    pub name: &'static str,
    pub cause: CauseLabel,
    pub kind: InjectionKind,
    pub target: Target,
}

/// Where in the workload an injection lands.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// The chain's root op (its launch, for host-side injections).
    Root,
    /// Chain op 1 (the first op the root gates).
    Second,
    /// The chain's last op.
    Last,
    /// The graph launch step of the chain's graph.
    GraphLaunch,
    /// The side kernel gating chain op 1.
    SideGate,
}

/// A family template.
pub struct Family {
    pub name: &'static str,
    pub constraints: Constraints,
    pub layout: Layout,
    pub variants: &'static [Variant],
}

const KERNEL_OR_CALL: &[SymptomOp] = &[SymptomOp::Kernel, SymptomOp::HostCall];

/// Every family, in the order instances cycle through them.
pub const FAMILIES: &[Family] = &[
    Family {
        name: "late-launch-vs-device-queueing",
        constraints: Constraints::ANY,
        layout: Layout::PLAIN,
        variants: &[
            Variant {
                name: "host-deschedule",
                cause: CauseLabel::CpuDeschedule,
                kind: InjectionKind::CpuDeschedule,
                target: Target::Root,
            },
            Variant {
                name: "occupancy-hog",
                cause: CauseLabel::OccupancyPressure,
                kind: InjectionKind::OccupancyPressure,
                target: Target::Root,
            },
            Variant {
                name: "stream-backlog",
                cause: CauseLabel::StreamBacklog,
                kind: InjectionKind::StreamBacklog,
                target: Target::Root,
            },
        ],
    },
    Family {
        name: "host-page-fault-vs-cpu-stall",
        constraints: Constraints::ANY,
        layout: Layout::PLAIN,
        variants: &[
            Variant {
                name: "page-fault",
                cause: CauseLabel::HostPageFault,
                kind: InjectionKind::HostPageFaultMinor,
                target: Target::Root,
            },
            Variant {
                name: "preempted",
                cause: CauseLabel::CpuDeschedule,
                kind: InjectionKind::CpuDeschedule,
                target: Target::Root,
            },
        ],
    },
    Family {
        name: "dependency-vs-overlap",
        constraints: Constraints {
            first_link: &[Link::Event],
            ..Constraints::ANY
        },
        layout: Layout::PLAIN,
        variants: &[
            Variant {
                name: "event-edge",
                cause: CauseLabel::EventWait,
                kind: InjectionKind::EventWait,
                target: Target::Root,
            },
            Variant {
                name: "independent",
                cause: CauseLabel::HostCompute,
                kind: InjectionKind::HostDelay,
                target: Target::Second,
            },
        ],
    },
    Family {
        name: "slow-copy-vs-blocked-consumer",
        constraints: Constraints {
            first_link: &[Link::Stream],
            symptom_ops: KERNEL_OR_CALL,
            no_graph: true,
            ..Constraints::ANY
        },
        layout: Layout {
            root_copy: true,
            side_gate: true,
            ..Layout::PLAIN
        },
        variants: &[
            Variant {
                name: "own-copy-contended",
                cause: CauseLabel::PcieContention,
                kind: InjectionKind::PcieContention,
                target: Target::Root,
            },
            Variant {
                name: "blocked-elsewhere",
                cause: CauseLabel::EventWait,
                kind: InjectionKind::EventWait,
                target: Target::SideGate,
            },
        ],
    },
    Family {
        name: "implicit-synchronization",
        constraints: Constraints {
            first_link: &[Link::Sync, Link::Handoff],
            symptom_ops: &[SymptomOp::Copy],
            no_graph: true,
            ..Constraints::ANY
        },
        layout: Layout {
            readback: true,
            ..Layout::PLAIN
        },
        variants: &[
            Variant {
                name: "copy-forced-fence",
                cause: CauseLabel::ImplicitSync,
                kind: InjectionKind::SyncWait,
                target: Target::Root,
            },
            Variant {
                name: "slow-transfer",
                cause: CauseLabel::SlowCopy,
                kind: InjectionKind::DelayedMemcpy,
                target: Target::Last,
            },
        ],
    },
    Family {
        name: "graph-replay-vs-direct-launch",
        constraints: Constraints {
            all_graph: true,
            symptom_ops: KERNEL_OR_CALL,
            ..Constraints::ANY
        },
        layout: Layout::PLAIN,
        variants: &[
            Variant {
                name: "graph-dependency",
                cause: CauseLabel::GraphDependency,
                kind: InjectionKind::GraphDependency,
                target: Target::Root,
            },
            Variant {
                name: "backlogged-launch",
                cause: CauseLabel::StreamBacklog,
                kind: InjectionKind::StreamBacklog,
                target: Target::GraphLaunch,
            },
        ],
    },
    Family {
        name: "concurrent-work",
        constraints: Constraints::ANY,
        layout: Layout::PLAIN,
        variants: &[
            Variant {
                name: "harmful",
                cause: CauseLabel::OccupancyPressure,
                kind: InjectionKind::OccupancyPressure,
                target: Target::Root,
            },
            Variant {
                name: "harmless",
                cause: CauseLabel::None,
                kind: InjectionKind::UnrelatedWork,
                target: Target::Root,
            },
        ],
    },
];

/// The injection of `variant` on `workload`, sized `magnitude_us`.
pub fn injection(
    variant: &Variant,
    workload: &Workload,
    request: u32,
    magnitude_us: f64,
) -> Injection {
    let root = &workload.chain[0];
    let mut target = match variant.target {
        Target::Root => root.clone(),
        Target::Second => workload.chain[1.min(workload.chain.len() - 1)].clone(),
        Target::Last => workload.chain.last().cloned().expect("a chain has ops"),
        Target::GraphLaunch => workload
            .graph_launch
            .clone()
            .unwrap_or_else(|| root.clone()),
        Target::SideGate => workload.side_gate.clone().unwrap_or_else(|| root.clone()),
    };
    // Only a graph dependency acts on a graph node itself; every other
    // injection acts on the step that launches the graph.
    if variant.kind != InjectionKind::GraphDependency && workload.graphs_contain(&target) {
        if let Some(launch) = &workload.graph_launch {
            target = launch.clone();
        }
    }
    Injection {
        kind: variant.kind,
        target,
        program: None,
        request,
        magnitude_us,
    }
}

impl Workload {
    /// Whether `id` names a node of the chain's graph.
    pub fn graphs_contain(&self, id: &str) -> bool {
        self.graphs
            .iter()
            .any(|g| g.nodes.iter().any(|n| n.id == id))
    }
}
