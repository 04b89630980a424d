//! The simulator backend: a deterministic discrete-event model of host threads
//! and queues (with preemption and page-fault stalls), API-call latency, stream
//! FIFO order, events, graph launches, a copy engine and SM capacity, and every
//! injection type. Same seed ⇒ byte-identical bundle; seeded jitter makes
//! repetitions differ.

mod device;
mod engine;
mod inject;

pub use device::DeviceParams;
pub use engine::HostParams;

use crate::answers;
use crate::backend::{Backend, RecordError};
use ground_truth::bundle::{Bundle, Manifest};
use ground_truth::{Scenario, SCHEMA_VERSION};

#[derive(Debug, Clone, Default)]
pub struct SimBackend {
    pub device: DeviceParams,
    pub host: HostParams,
}

impl Backend for SimBackend {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn record(&self, scenario: &Scenario, repetition: u32) -> Result<Bundle, RecordError> {
        if let Some(p) = scenario.check().first() {
            return Err(RecordError::Invalid(scenario.name.clone(), format!("{}: {}", p.path, p.message)));
        }
        let seed = crate::mix(scenario.seed ^ crate::mix(repetition as u64 + 1));
        let twin = engine::run(scenario, self, seed, None, false);
        let plan = scenario.injection.as_ref().map(|inj| inject::plan(scenario, inj, &twin));
        let run = engine::run(scenario, self, seed, plan.as_ref(), true);
        let loss = run.loss;
        let injections = run.injections.clone();
        let (mut truth, trace) = run.builder.finish(seed);
        truth.injections = injections;
        let sd = &scenario.symptom;
        let mut key = inject::target_key(scenario, sd.program.as_deref(), &sd.step, sd.request)
            .ok_or_else(|| RecordError::Invalid(scenario.name.clone(), "symptom.step names no step".into()))?;
        key.graph_node = sd.graph_node.clone();
        let missing = || RecordError::Invalid(scenario.name.clone(), "the symptom step never ran".into());
        let node = *run.keys.get(&key).ok_or_else(missing)?;
        let twin_node = &twin.builder.truth.nodes[*twin.keys.get(&key).ok_or_else(missing)? as usize];
        let symptom = answers::symptom(scenario, &truth, &trace, node, twin_node)
            .map_err(|m| RecordError::Invalid(scenario.name.clone(), m))?;
        for inj in &mut truth.injections {
            if inj.measured_us.is_nan() {
                inj.measured_us = symptom.lateness_ns / 1000.0;
            }
        }
        truth.symptoms.push(symptom);
        let mut collectors = vec!["cupti".to_string(), "ebpf".to_string()];
        if scenario.mode == ground_truth::Mode::Instrumented {
            collectors.push("app".into());
        }
        Ok(Bundle {
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
            },
            ground_truth: truth,
            trace,
            loss,
        })
    }
}
