//! The scenario space (docs/scenario-space.md): each family is a template
//! whose structure is sampled from a seed along documented axes, so the
//! benchmark's cases are drawn, not hand-written, and no fixed answer key
//! exists to fit. The hand-written catalog stays as the readable examples.
//!
//! `generate` turns a split and a seed into scenarios: family instances cycle
//! through [`FAMILIES`], each instance's structure is sampled once, and every
//! variant of the family is built from it with its own injection. Each
//! scenario carries its [`SpacePoint`] (split, instance, axes) for the
//! evaluator; views never see it.

mod build;
mod families;
mod sample;
mod shapes;

pub use families::{Family, Target, Variant, FAMILIES};
pub use sample::{
    Decoy, Link, Peers, Structure, SymptomOp, KERNEL_NAMES, MAX_DEPTH, MAX_GRAPH_NODES,
};
pub use shapes::{Role, ShapeFamily, ShapeVariant, SHAPES};

use ground_truth::labels::Mode;
use ground_truth::scenario::{AxisValue, Scenario, SpacePoint};
use std::collections::BTreeMap;

/// The two splits (docs/scenario-space.md, "Splits").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Fixed seed, shipped: what tests and CI run, and the GPU corpus records.
    Dev,
    /// A fresh seed per run, recorded in the results manifest.
    Test,
}

impl Split {
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Dev => "dev",
            Split::Test => "test",
        }
    }

    pub fn parse(text: &str) -> Option<Split> {
        match text {
            "dev" => Some(Split::Dev),
            "test" => Some(Split::Test),
            _ => None,
        }
    }
}

/// The dev split's fixed seed.
pub const DEV_SEED: u64 = 0x6465_765f_7370_6c74;
/// How many scenarios a split has unless `--cases` says otherwise.
pub const DEFAULT_CASES: usize = 300;
/// Smallest injected magnitude (µs): below it a real host cannot inject at all.
const MIN_MAGNITUDE_US: f64 = 5.0;

/// The axes every generated scenario records, in the order docs/scenario-space.md lists them.
pub const AXES: [&str; 11] = [
    "requests",
    "peers",
    "gating_depth",
    "graph_nodes",
    "streams",
    "magnitude_ratio",
    "decoy",
    "symptom_op",
    "memory",
    "handoff_depth",
    "first_link",
];

/// At least `cases` scenarios of `split` drawn from `seed`: whole family
/// instances, so every pair is complete (the last instance may overshoot).
pub fn generate(split: Split, seed: u64, cases: usize) -> Vec<Scenario> {
    let mut out = Vec::with_capacity(cases + 3);
    let mut index = 0u64;
    while out.len() < cases {
        out.extend(instance_at(split, seed, index));
        index += 1;
    }
    out
}

/// How many family kinds a split cycles through (chain families, then shapes):
/// instance `i` belongs to kind `i mod KINDS`.
pub const KINDS: usize = FAMILIES.len() + SHAPES.len();

/// The variants of instance `index` of a split, of the family `index` selects.
pub fn instance_at(split: Split, seed: u64, index: u64) -> Vec<Scenario> {
    let i = index as usize % KINDS;
    match FAMILIES.get(i) {
        Some(family) => instance(split, seed, index, family),
        None => shape_instance(split, seed, index, &SHAPES[i - FAMILIES.len()]),
    }
}

/// How far a re-draw moves an instance's index: a multiple of [`KINDS`], so
/// the new instance is of the same family, and beyond any split's own indices
/// (a split of a million cases draws fewer than 10⁵·KINDS instances).
pub const REDRAW_STRIDE: u64 = 100_000 * KINDS as u64;

/// The instance drawn in place of instance `index` of a split whose label the
/// check dropped (docs/scenario-space.md, "Cases that survive the noise"):
/// another structure of the same family from the same seed, so the same drops
/// re-draw the same instances. Re-drawing a re-drawn instance moves on again.
pub fn redrawn_instance(split: Split, seed: u64, index: u64) -> Vec<Scenario> {
    instance_at(split, seed, index + REDRAW_STRIDE)
}

/// The instance index of a scenario this crate generated, read back from the
/// name [`variant_scenario`] gives it (`FAMILY.SPLITNNNNN.VARIANT`); `None` for
/// any other scenario.
pub fn instance_index(sc: &Scenario) -> Option<u64> {
    let point = sc.space.as_ref()?;
    let middle = sc
        .name
        .strip_prefix(sc.family.as_str())?
        .strip_prefix('.')?
        .strip_suffix(sc.variant.as_str())?
        .strip_suffix('.')?;
    middle.strip_prefix(point.suite.as_str())?.parse().ok()
}

/// The variants of one instance of a real-program-shape family
/// (docs/scenario-space.md, "Real program shapes").
pub fn shape_instance(split: Split, seed: u64, index: u64, family: &ShapeFamily) -> Vec<Scenario> {
    use rand::SeedableRng;
    let instance_seed = instance_seed(seed, index);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(instance_seed);
    let w = (family.build)(&mut rng);
    let magnitude_us = magnitude_us(w.magnitude_ratio, w.symptom_latency_us);
    let mut axes = w.axes.clone();
    axes.insert(
        "magnitude_ratio".into(),
        AxisValue::Number(w.magnitude_ratio),
    );
    let shared = Shared {
        threads: &w.threads,
        queues: &w.queues,
        streams: &w.streams,
        events: &w.events,
        graphs: &[],
        programs: &w.programs,
        symptom: &w.symptom,
        axes: &axes,
    };
    family
        .variants
        .iter()
        .map(|v| {
            let injection = w.injection(v, magnitude_us);
            variant_scenario(
                split,
                index,
                instance_seed,
                family.name,
                (v.name, v.cause),
                &shared,
                injection,
            )
        })
        .collect()
}

/// The variants of one family instance.
pub fn instance(split: Split, seed: u64, index: u64, family: &Family) -> Vec<Scenario> {
    let instance_seed = instance_seed(seed, index);
    let structure = sample::sample(instance_seed, family.constraints);
    let workload = build::build(&structure, family.layout);
    let magnitude_us = magnitude_us(structure.magnitude_ratio, workload.symptom_latency_us);
    let axes = axes(&structure, &workload);
    let shared = Shared {
        threads: &workload.threads,
        queues: &workload.queues,
        streams: &workload.streams,
        events: &workload.events,
        graphs: &workload.graphs,
        programs: &workload.programs,
        symptom: &workload.symptom,
        axes: &axes,
    };
    family
        .variants
        .iter()
        .map(|v| {
            let injection =
                families::injection(v, &workload, structure.asked_request, magnitude_us);
            variant_scenario(
                split,
                index,
                instance_seed,
                family.name,
                (v.name, v.cause),
                &shared,
                injection,
            )
        })
        .collect()
}

/// Instance `index`'s seed: every choice of the instance is drawn from it.
fn instance_seed(seed: u64, index: u64) -> u64 {
    ground_truth::seed::mix(seed ^ ground_truth::seed::mix(index + 1))
}

/// The injected magnitude (µs) of `ratio` times the symptom's normal latency.
fn magnitude_us(ratio: f64, symptom_latency_us: f64) -> f64 {
    (ratio * symptom_latency_us).max(MIN_MAGNITUDE_US).round()
}

/// What every variant of an instance shares.
struct Shared<'a> {
    threads: &'a [ground_truth::scenario::ThreadDecl],
    queues: &'a [ground_truth::scenario::QueueDecl],
    streams: &'a [ground_truth::scenario::StreamDecl],
    events: &'a [ground_truth::scenario::EventDecl],
    graphs: &'a [ground_truth::scenario::GraphDecl],
    programs: &'a [ground_truth::scenario::Program],
    symptom: &'a ground_truth::scenario::SymptomDecl,
    axes: &'a BTreeMap<String, AxisValue>,
}

/// One variant of an instance: the shared declarations with its own
/// injection and declared label.
fn variant_scenario(
    split: Split,
    index: u64,
    instance_seed: u64,
    family: &str,
    (variant, cause): (&str, ground_truth::labels::CauseLabel),
    shared: &Shared,
    injection: ground_truth::scenario::Injection,
) -> Scenario {
    Scenario {
        schema_version: ground_truth::SCHEMA_VERSION,
        name: format!("{family}.{}{index:05}.{variant}", split.as_str()),
        family: family.into(),
        variant: variant.into(),
        cause,
        description: format!(
            "generated: {family} instance {index} of the {} split",
            split.as_str()
        ),
        mode: Mode::Instrumented,
        seed: instance_seed,
        repetitions: 1,
        threads: shared.threads.to_vec(),
        queues: shared.queues.to_vec(),
        streams: shared.streams.to_vec(),
        events: shared.events.to_vec(),
        graphs: shared.graphs.to_vec(),
        programs: shared.programs.to_vec(),
        injection: Some(injection),
        symptom: shared.symptom.clone(),
        names: KERNEL_NAMES.iter().map(|n| n.to_string()).collect(),
        space: Some(SpacePoint {
            suite: split.as_str().into(),
            instance: instance_seed,
            axes: shared.axes.clone(),
        }),
    }
}

fn axes(s: &Structure, w: &build::Workload) -> BTreeMap<String, AxisValue> {
    let number = |v: f64| AxisValue::Number(v);
    let category = |v: &str| AxisValue::Category(v.into());
    let memory = w
        .programs
        .iter()
        .flat_map(|p| &p.steps)
        .filter_map(|st| match st {
            ground_truth::scenario::Step::Copy {
                id: Some(id),
                memory,
                ..
            } if w.chain.contains(id) => Some(*memory),
            _ => None,
        })
        .next_back()
        .map_or("none", |m| match m {
            ground_truth::trace::HostMemory::Pinned => "pinned",
            ground_truth::trace::HostMemory::Pageable => "pageable",
        });
    BTreeMap::from([
        ("requests".into(), number(s.requests as f64)),
        ("peers".into(), category(s.peers.as_str())),
        ("gating_depth".into(), number(s.links.len() as f64)),
        (
            "graph_nodes".into(),
            number(w.graphs.first().map_or(0, |g| g.nodes.len()) as f64),
        ),
        ("streams".into(), number(s.streams as f64)),
        ("magnitude_ratio".into(), number(s.magnitude_ratio)),
        ("decoy".into(), category(s.decoy.as_str())),
        ("symptom_op".into(), category(s.symptom_op.as_str())),
        ("memory".into(), category(memory)),
        ("handoff_depth".into(), number(s.handoff_depth as f64)),
        ("first_link".into(), category(s.links[0].as_str())),
    ])
}
