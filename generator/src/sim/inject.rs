//! Turns a scenario's injection into a plan, calibrated on the no-injection
//! twin run the way a real injector is: work that must delay the target is
//! issued when the target's thread reaches the target's call (it hands the
//! injector a trigger, as on the GPU) and sized to hold the resource until the
//! twin's start time plus the requested magnitude. The twin's noise is
//! independent of the run's, so only the injector's trigger, not a time read
//! off the twin, keeps the injected work ahead of the target in every queue.
//! Injected work is shaped like application work (`crate::anonymous`): the plan
//! fixes only what the mechanism needs (the resource and how long it is held).

use super::engine::{Run, StepKey};
use ground_truth::graph::NodeKind;
use ground_truth::scenario::{Injection, InjectionKind, Scenario, Step};
use ground_truth::Ns;

#[derive(Debug, Clone)]
pub enum Action {
    /// Launch back-to-back kernels of application-like durations that run
    /// until `until` (durations fitted at placement) on `grid` SMs (`None`: an
    /// application-like grid, where the mechanism does not depend on it).
    Kernel {
        stream: Option<String>,
        grid: Option<u32>,
        until: Ns,
        delays_target: bool,
    },
    /// Pinned H2D copies of application-like sizes on the injector's stream
    /// that keep the copy engine busy until about `until`.
    Copies { until: Ns },
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub kind: InjectionKind,
    pub magnitude_ns: Ns,
    /// Step whose API call is preceded by a host stall.
    pub host_target: Option<StepKey>,
    /// Device op lengthened by the magnitude.
    pub stretch_target: Option<StepKey>,
    /// Device op whose record the recorder loses.
    pub lose_target: Option<StepKey>,
    /// Device op the injected work delays (gets a `fault` edge).
    pub device_target: Option<StepKey>,
    /// Work issued at a time read off the twin (work that must not delay the target).
    pub actions: Vec<(Ns, Action)>,
    /// The step whose thread triggers `triggered` right before making its call.
    pub trigger: Option<StepKey>,
    pub triggered: Vec<Action>,
}

pub use crate::keys::target_key;

pub fn plan(sc: &Scenario, inj: &Injection, twin: &Run) -> Plan {
    let key = target_key(sc, inj.program.as_deref(), &inj.target, inj.request);
    let mag = (inj.magnitude_us * 1000.0).round() as Ns;
    let mut p = Plan {
        kind: inj.kind,
        magnitude_ns: mag,
        host_target: None,
        stretch_target: None,
        lose_target: None,
        device_target: None,
        actions: Vec::new(),
        trigger: None,
        triggered: Vec::new(),
    };
    let Some(key) = key else { return p };
    let nodes = &twin.builder.truth.nodes;
    let device = twin.keys.get(&key).map(|&n| &nodes[n as usize]);
    let api_key = StepKey {
        api: true,
        graph_node: None,
        ..key.clone()
    };
    let api = twin.keys.get(&api_key).map(|&n| &nodes[n as usize]);
    let issue_at = api.map(|a| a.start.saturating_sub(40_000)).unwrap_or(0);
    let until = device.map(|d| d.start + mag).unwrap_or(0);
    let target_stream = |sc: &Scenario| match &sc.programs[key.program].steps[key.step] {
        Step::Kernel { stream, .. }
        | Step::Copy { stream, .. }
        | Step::Memset { stream, .. }
        | Step::GraphLaunch { stream, .. } => Some(stream.clone()),
        _ => None,
    };
    match inj.kind {
        InjectionKind::CpuDeschedule
        | InjectionKind::HostDelay
        | InjectionKind::HostPageFaultMinor
        | InjectionKind::HostPageFaultMajor => {
            p.host_target = Some(key);
        }
        InjectionKind::EventWait
        | InjectionKind::GraphDependency
        | InjectionKind::SyncWait
        | InjectionKind::DelayedMemcpy
        | InjectionKind::KernelSlowdown => {
            p.stretch_target = Some(key);
        }
        InjectionKind::RecordLoss => p.lose_target = Some(key),
        InjectionKind::OccupancyPressure => {
            let dispatch = 3_000;
            p.triggered.push(Action::Kernel {
                stream: None,
                grid: Some(132),
                until: until.saturating_sub(dispatch),
                delays_target: true,
            });
            p.trigger = Some(key.clone());
            p.device_target = Some(key);
        }
        InjectionKind::StreamBacklog => {
            let dispatch = if device
                .is_some_and(|d| d.kind == NodeKind::Kernel || d.kind == NodeKind::Memset)
            {
                3_000
            } else {
                2_000
            };
            p.triggered.push(Action::Kernel {
                stream: target_stream(sc),
                grid: None,
                until: until.saturating_sub(dispatch),
                delays_target: true,
            });
            p.trigger = Some(key.clone());
            p.device_target = Some(key);
        }
        InjectionKind::PcieContention => {
            p.triggered.push(Action::Copies { until });
            p.trigger = Some(key.clone());
            p.device_target = Some(key);
        }
        InjectionKind::UnrelatedWork => {
            let at = device
                .map(|d| d.start.saturating_sub(20_000))
                .unwrap_or(issue_at);
            // On SMs the target leaves free: the work runs beside it, never ahead of it.
            p.actions.push((
                at.min(issue_at.max(at)),
                Action::Kernel {
                    stream: None,
                    grid: Some(8),
                    until: at + mag,
                    delays_target: false,
                },
            ));
            p.device_target = Some(key);
        }
    }
    p
}
