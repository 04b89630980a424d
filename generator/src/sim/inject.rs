//! Turns a scenario's injection into a plan, calibrated on the no-injection
//! twin run the way a real injector is: work that must delay the target is
//! issued just before the target's call and sized to hold the resource until
//! the twin's start time plus the requested magnitude.

use super::engine::{Run, StepKey};
use ground_truth::graph::NodeKind;
use ground_truth::scenario::{Injection, InjectionKind, Scenario, Step};
use ground_truth::Ns;

#[derive(Debug, Clone)]
pub enum Action {
    /// Launch a kernel that runs until `until` (duration fitted at placement).
    Kernel {
        stream: Option<String>,
        name: String,
        grid: u32,
        until: Ns,
        delays_target: bool,
    },
    /// Bulk pinned H2D copies on the injector's stream that keep the copy engine busy until `until`.
    Copies { count: u32, until: Ns },
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
    pub actions: Vec<(Ns, Action)>,
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
    // Injector work is issued shortly before the target's own call, so it is ahead of it in every queue.
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
            p.actions.push((
                issue_at,
                Action::Kernel {
                    stream: None,
                    name: "occupancy_hog".into(),
                    grid: 132,
                    until: until.saturating_sub(dispatch),
                    delays_target: true,
                },
            ));
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
            p.actions.push((
                issue_at,
                Action::Kernel {
                    stream: target_stream(sc),
                    name: "backlog_work".into(),
                    grid: 16,
                    until: until.saturating_sub(dispatch),
                    delays_target: true,
                },
            ));
            p.device_target = Some(key);
        }
        InjectionKind::PcieContention => {
            p.actions
                .push((issue_at, Action::Copies { count: 2, until }));
            p.device_target = Some(key);
        }
        InjectionKind::UnrelatedWork => {
            let at = device
                .map(|d| d.start.saturating_sub(20_000))
                .unwrap_or(issue_at);
            p.actions.push((
                at.min(issue_at.max(at)),
                Action::Kernel {
                    stream: None,
                    name: "unrelated_work".into(),
                    grid: 8,
                    until: at + mag,
                    delays_target: false,
                },
            ));
            p.device_target = Some(key);
        }
    }
    p
}
