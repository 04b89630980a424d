//! The simulator backend: a deterministic discrete-event model of host threads
//! and queues (with preemption and page-fault stalls), API-call latency, stream
//! FIFO order, events, graph launches, a copy engine and SM capacity, and every
//! injection type. Same seed ⇒ byte-identical bundle; seeded jitter makes
//! repetitions differ.

mod device;
mod engine;
mod inject;
mod names;
mod noise;

pub use device::DeviceParams;
pub use engine::HostParams;
pub use noise::NoiseParams;

use crate::answers;
use crate::backend::{Backend, RecordError};
use crate::plan::{DeviceFacts, Twin};
use ground_truth::bundle::{Bundle, Manifest};
use ground_truth::{Scenario, SCHEMA_VERSION};

#[derive(Debug, Clone, Default)]
pub struct SimBackend {
    pub device: DeviceParams,
    pub host: HostParams,
    /// Background noise; `NoiseParams::quiet()` for a perfectly quiet host.
    pub noise: NoiseParams,
}

impl Backend for SimBackend {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn record(&self, scenario: &Scenario, repetition: u32) -> Result<Bundle, RecordError> {
        self.record_with_keys(scenario, repetition)
            .map(|(bundle, _)| bundle)
    }
}

impl SimBackend {
    /// [`Backend::record`], with the step each of the bundle's nodes came
    /// from (what the label check looks targets up by).
    pub(crate) fn record_with_keys(
        &self,
        scenario: &Scenario,
        repetition: u32,
    ) -> Result<(Bundle, crate::keys::Keys), RecordError> {
        crate::backend::check(scenario)?;
        // The simulator's runs share one clock: every origin is 0.
        fn as_quiet(r: &engine::Run) -> crate::label::QuietRun<'_> {
            crate::label::QuietRun {
                truth: &r.builder.truth,
                keys: &r.keys,
                origin: 0,
            }
        }
        let seed = crate::mix(scenario.seed ^ crate::mix(repetition as u64 + 1));
        // The twin is another run of the same program, so its background noise
        // is drawn independently of the injected run's (docs/records.md).
        let twin_noise = crate::mix(seed ^ 0x7477_696e);
        // Without an injection the twin is the run itself: simulate once.
        let (mut quiet, mut same_noise) = (None, None);
        let (run, twin) = match &scenario.injection {
            Some(inj) => {
                let twin = engine::run(scenario, self, seed, twin_noise, None, false);
                if crate::label::applies(scenario) {
                    // A second quiet run with noise of its own: how far this
                    // scenario's ops move without any injection.
                    quiet = Some(engine::run(
                        scenario,
                        self,
                        seed,
                        crate::mix(seed ^ 0x6e6f_6973),
                        None,
                        false,
                    ));
                }
                let measured = Twin {
                    nodes: &twin.builder.truth.nodes,
                    keys: &twin.keys,
                    origin: 0,
                };
                let device = DeviceFacts {
                    sms: self.device.sms,
                    dispatch_ns: self.device.dispatch_ns,
                    copy_setup_ns: self.device.copy_setup_ns,
                };
                // Sized from this run's own noise (label::sized_injection).
                let sized = quiet.as_ref().and_then(|q| {
                    crate::label::sized_injection(scenario, &as_quiet(&twin), &as_quiet(q))
                });
                let inj = sized.as_ref().unwrap_or(inj);
                let mut plan = crate::plan::plan(scenario, inj, &measured, device);
                plan.mechanism = inject::mechanism(inj.kind).into();
                if quiet.is_some() {
                    // The injected run's own noise without the injection: what
                    // the injection itself moved (`label::check_and_apply`).
                    same_noise = Some(engine::run(scenario, self, seed, seed, None, false));
                }
                (
                    engine::run(scenario, self, seed, seed, Some(&plan), true),
                    Some(twin),
                )
            }
            None => (engine::run(scenario, self, seed, seed, None, true), None),
        };
        let loss = run.loss;
        let injections = run.injections.clone();
        let (mut truth, trace) = run.builder.finish(seed);
        truth.injections = injections;
        answers::add_symptom_checked_with_same_noise(
            scenario,
            &mut truth,
            &trace,
            &run.keys,
            0,
            twin.as_ref().map(as_quiet).as_ref(),
            quiet.as_ref().map(as_quiet).as_ref(),
            same_noise.as_ref().map(as_quiet).as_ref(),
        )
        .map_err(|m| RecordError::Invalid(scenario.name.clone(), m))?;
        let mut collectors = vec!["cupti".to_string(), "ebpf".to_string()];
        if scenario.mode == ground_truth::Mode::Instrumented {
            collectors.push("app".into());
        }
        let bundle = Bundle {
            schema_version: SCHEMA_VERSION,
            manifest: Manifest {
                scenario: scenario.clone(),
                seed,
                repetition,
                backend: "sim".into(),
                gpu: format!("simulated H200 ({} SMs)", self.device.sms),
                driver: "sim".into(),
                cuda: "sim".into(),
                cupti: "sim".into(),
                tool_version: env!("CARGO_PKG_VERSION").into(),
                host: "simulator".into(),
                collectors,
                cross_check: None,
                cupti_capabilities: None,
            },
            ground_truth: truth,
            trace,
            loss,
        };
        Ok((bundle, run.keys))
    }
}

/// A launch-bound scenario of `ops` kernel launches (for benchmarks and the
/// generator-overhead measurement): one thread, two streams, 1 µs kernels.
/// At 1 M ops it is `generator/benches/scenarios/launch-bound-1m.yaml`.
pub fn launch_bound_scenario(ops: u32) -> Scenario {
    use ground_truth::scenario::{Program, Step, StreamDecl, SymptomDecl, ThreadDecl};
    let per_request = 100u32;
    let kernel = |i: u32| Step::Kernel {
        id: (i == 0).then(|| "first".to_string()),
        stream: ["a", "b"][i as usize % 2].into(),
        name: "tiny".into(),
        kind: ground_truth::scenario::KernelKind::Empty,
        duration_us: 1.0,
        grid: 1,
        block: 32,
        launch: Default::default(),
        call_site: None,
    };
    Scenario {
        schema_version: SCHEMA_VERSION,
        name: format!("launch-bound-{ops}"),
        family: "benchmark".into(),
        variant: "launch-bound".into(),
        cause: ground_truth::CauseLabel::None,
        description: "many tiny kernel launches".into(),
        mode: ground_truth::Mode::Instrumented,
        seed: 1,
        repetitions: 1,
        threads: vec![ThreadDecl {
            name: "host".into(),
            count: 1,
        }],
        queues: vec![],
        streams: vec![
            StreamDecl {
                name: "a".into(),
                priority: 0,
            },
            StreamDecl {
                name: "b".into(),
                priority: 0,
            },
        ],
        events: vec![],
        graphs: vec![],
        programs: vec![Program {
            name: "loop".into(),
            start: "host".into(),
            requests: ops.div_ceil(per_request),
            interval_us: 0.0,
            offset_us: 0.0,
            steps: (0..per_request).map(kernel).collect(),
        }],
        injection: None,
        symptom: SymptomDecl {
            step: "first".into(),
            graph_node: None,
            program: None,
            request: 0,
            question: Default::default(),
            answer: None,
        },
        names: Vec::new(),
        space: None,
    }
}

/// `streams` kernels on as many streams, each needing every SM, then a
/// device synchronize: the many-streams case of the SM pool (benchmarks;
/// `scripts/measure/many_streams.py` writes the same as a scenario file).
pub fn many_streams_scenario(streams: u32) -> Scenario {
    use ground_truth::scenario::{Step, StreamDecl, SyncTarget};
    let mut sc = launch_bound_scenario(streams);
    sc.name = format!("many-streams-{streams}");
    sc.variant = "many-streams".into();
    sc.description = "one kernel on each of many streams".into();
    sc.streams = (0..streams)
        .map(|i| StreamDecl {
            name: format!("s{i}"),
            priority: 0,
        })
        .collect();
    let program = &mut sc.programs[0];
    program.requests = 1;
    program.steps = (0..streams)
        .map(|i| Step::Kernel {
            id: (i == 0).then(|| "first".to_string()),
            stream: format!("s{i}"),
            name: "k".into(),
            kind: ground_truth::scenario::KernelKind::Spin,
            duration_us: 20.0,
            grid: 132,
            block: 128,
            launch: Default::default(),
            call_site: None,
        })
        .chain([Step::Sync {
            id: None,
            target: SyncTarget::Device,
            stream: None,
            event: None,
        }])
        .collect();
    sc
}

/// The collector study's realistic workload: `kernels` kernels of 10–100 µs
/// (spread deterministically) on two streams, a 1 MB pinned copy in each
/// direction every 8 kernels, and a stream synchronize at the end of every
/// request of 16 kernels, so the host waits for the device as a serving loop does.
pub fn realistic_scenario(kernels: u32) -> Scenario {
    use ground_truth::scenario::{Step, SyncTarget};
    use ground_truth::trace::CopyDirection;
    let per_request = 16u32;
    let mut sc = launch_bound_scenario(kernels);
    sc.name = format!("realistic-{kernels}");
    sc.variant = "realistic".into();
    sc.description = "kernels of 10-100 us with copies and a sync per request".into();
    let program = &mut sc.programs[0];
    program.requests = kernels.div_ceil(per_request);
    let mut steps = Vec::new();
    for i in 0..per_request {
        let stream = ["a", "b"][i as usize % 2].to_string();
        if i % 8 == 4 {
            for direction in [CopyDirection::H2d, CopyDirection::D2h] {
                steps.push(Step::Copy {
                    id: None,
                    stream: stream.clone(),
                    direction,
                    bytes: 1 << 20,
                    memory: Default::default(),
                    call_site: None,
                });
            }
        }
        steps.push(Step::Kernel {
            id: (i == 0).then(|| "first".to_string()),
            stream,
            name: "layer".into(),
            kind: ground_truth::scenario::KernelKind::Spin,
            // 10, 16, 22, ... 100 us: (i * 37) mod 16 spreads them over the request.
            duration_us: 10.0 + 6.0 * ((i * 37) % 16) as f64,
            grid: 66,
            block: 128,
            launch: Default::default(),
            call_site: None,
        });
    }
    steps.push(Step::Sync {
        id: None,
        target: SyncTarget::Stream,
        stream: Some("a".into()),
        event: None,
    });
    steps.push(Step::Sync {
        id: None,
        target: SyncTarget::Stream,
        stream: Some("b".into()),
        event: None,
    });
    program.steps = steps;
    sc
}

/// Runs the simulation once without recording (the model alone, as the twin
/// run does) and returns how many ground-truth nodes it produced. This is what
/// "simulated operations per second" measures.
pub fn simulate_only(backend: &SimBackend, scenario: &Scenario) -> usize {
    engine::run(scenario, backend, scenario.seed, scenario.seed, None, false)
        .builder
        .truth
        .nodes
        .len()
}

#[cfg(test)]
mod tests {
    use ground_truth::io::Readable;

    /// The collector study's realistic workload is a valid scenario the
    /// simulator runs, with kernels of 10–100 µs.
    #[test]
    fn realistic_scenario_is_valid_and_runs() {
        use ground_truth::scenario::Step;
        let sc = super::realistic_scenario(64);
        assert!(sc.check().is_empty(), "{:?}", sc.check());
        let durations: Vec<f64> = sc.programs[0]
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Kernel { duration_us, .. } => Some(*duration_us),
                _ => None,
            })
            .collect();
        assert_eq!(durations.len(), 16);
        assert!(durations.iter().all(|d| (10.0..=100.0).contains(d)));
        let nodes = super::simulate_only(&super::SimBackend::default(), &sc);
        assert!(nodes > 64, "{nodes} nodes");
    }

    /// The shipped 1 M-op scenario file is the benchmarks' scenario.
    #[test]
    fn launch_bound_1m_yaml_is_the_benchmark_scenario() {
        let file = std::path::Path::new("launch-bound-1m.yaml");
        let yaml = include_bytes!("../../benches/scenarios/launch-bound-1m.yaml");
        let sc = ground_truth::Scenario::parse(file, yaml).unwrap();
        assert_eq!(sc, super::launch_bound_scenario(1_000_000));
    }
}
