//! The injection plan, the same for every backend: a scenario's injection
//! turned into what to do where and when, sized from the measured
//! no-injection twin the way a real injector is. Injected device work that
//! must delay the target is issued when the target's thread reaches the
//! target's call (it hands the injector a trigger), so it is ahead of the
//! target in every queue: the twin's noise is independent of the run's, so a
//! time read off the twin could not promise that. It is sized to hold the
//! resource until the target's twin start plus the requested magnitude. Work
//! that must not delay the target is issued at a twin time. The plan fixes
//! only what the mechanism needs (the resource and how long it is held);
//! names, call sites, grids and copy sizes are drawn to look like the
//! application's (`crate::anonymous`) where the backend realises the plan:
//! the simulator in its model (`sim/engine/injected_work.rs`), the GPU
//! backend as real kernels and copies (`cuda/plan.rs`).

use crate::keys::{target_key, Keys, StepKey};
use ground_truth::graph::{Node, NodeKind};
use ground_truth::scenario::{Injection, InjectionKind, Scenario, Step};
use ground_truth::trace::{CopyDirection, HostMemory};
use ground_truth::Ns;

/// How a target op is lengthened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stretch {
    /// A kernel (or graph node kernel) spins this much longer.
    Ns(u64),
    /// A copy or memset moves this many more bytes (the magnitude at the
    /// twin's measured bandwidth of that very transfer).
    Bytes(u64),
}

/// The kernel an injection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectedKernel {
    /// Runs for a set time on a few SMs.
    Spin,
    /// Fills every SM (maximum shared memory per block) for a set time.
    OccupancyHog,
}

/// Injected device work. Times are twin times (relative to the twin's origin).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Kernel {
        /// `Some(stream index)`: on the target's stream (backlog); `None`: the injector's stream.
        on_target_stream: Option<usize>,
        kernel: InjectedKernel,
        /// `None`: an application-like grid (the mechanism does not depend on it).
        grid: Option<u32>,
        /// When it can start holding its resource, and when it must let go.
        from: Ns,
        until: Ns,
        delays_target: bool,
    },
    /// Pinned H2D copies on the injector's stream, keeping the copy engine
    /// busy from `from` until about `until`; `bytes_per_ns` is the twin's
    /// pinned bandwidth, to size them.
    Copies {
        from: Ns,
        until: Ns,
        bytes_per_ns: f64,
    },
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub kind: InjectionKind,
    pub magnitude_ns: Ns,
    /// Host stall right before this step's call.
    pub host_target: Option<StepKey>,
    /// The injected device work is issued right before this step's call.
    pub trigger: Option<StepKey>,
    pub stretch: Option<(StepKey, Stretch)>,
    /// Device op whose record the recorder loses.
    pub lose: Option<StepKey>,
    /// Device op the injected work delays (gets a `fault` edge).
    pub device_target: Option<StepKey>,
    /// The injected work, each with the twin time it is issued at; work that
    /// delays the target is issued at the `trigger` instead.
    pub actions: Vec<(Ns, Action)>,
    /// How the backend realised it (its injection record's `mechanism`);
    /// filled in by the backend.
    pub mechanism: String,
    /// Largest transfer the run needs (the GPU's scratch buffers).
    pub bytes_needed: u64,
    /// The target's duration in the twin (to measure a lengthening).
    pub twin_target_ns: Option<u64>,
}

impl Action {
    /// Whether the work must delay the target, and so is issued at the trigger.
    pub fn delays_target(&self) -> bool {
        match self {
            Action::Kernel { delays_target, .. } => *delays_target,
            Action::Copies { .. } => true,
        }
    }
}

impl Plan {
    pub fn stretch_graph_node(&self) -> Option<&str> {
        self.stretch
            .as_ref()
            .and_then(|(k, _)| k.graph_node.as_deref())
    }

    /// Whether `key` is the op the plan lengthens.
    pub fn stretches(&self, key: &StepKey) -> bool {
        self.stretch.as_ref().is_some_and(|(k, _)| k == key)
    }
}

/// The twin's measured nodes, times relative to its origin.
pub struct Twin<'a> {
    pub nodes: &'a [Node],
    pub keys: &'a Keys,
    pub origin: Ns,
}

impl Twin<'_> {
    fn node(&self, k: &StepKey) -> Option<&Node> {
        self.keys.get(k).map(|&n| &self.nodes[n as usize])
    }
    fn rel(&self, t: Ns) -> Ns {
        t.saturating_sub(self.origin)
    }

    /// When the last work on the SMs that started before `t` ended (twin
    /// time): from then until `t` the twin's SMs were idle, if it is before
    /// `t`. Every copy counts, as a node does not say its direction.
    fn sm_work_ends_before(&self, t: Ns) -> Ns {
        self.nodes
            .iter()
            .filter(|n| {
                matches!(
                    n.kind,
                    NodeKind::Kernel | NodeKind::GraphNode | NodeKind::Memset | NodeKind::Memcpy
                ) && self.rel(n.start) < t
            })
            .map(|n| self.rel(n.end))
            .max()
            .unwrap_or(0)
    }
}

/// What the plan needs to know of the device.
#[derive(Debug, Clone, Copy)]
pub struct DeviceFacts {
    pub sms: u32,
    /// From a kernel (or memset) becoming ready to its first block running.
    pub dispatch_ns: Ns,
    /// From a copy becoming ready to its first byte moving.
    pub copy_setup_ns: Ns,
}

/// Default pinned bandwidth when the twin has no copy to measure (bytes/ns):
/// 256 MiB in 4.84 ms on the H200 (docs/gpu-facts.md, "Host↔device copy engines").
const PINNED_BYTES_PER_NS: f64 = 55.5;
/// SMs harmless work holds at most beside its target.
const UNRELATED_SMS: u32 = 8;
/// How long before the target's call the injected work is issued.
const ISSUE_LEAD_NS: Ns = 40_000;
/// From issuing injected work to it holding its resource.
const ISSUE_TO_HOLD_NS: Ns = 10_000;
/// How long before the target's start unrelated work begins.
const UNRELATED_LEAD_NS: Ns = 20_000;

pub fn plan(sc: &Scenario, inj: &Injection, twin: &Twin, device: DeviceFacts) -> Plan {
    let mag = (inj.magnitude_us * 1000.0).round() as Ns;
    let mut p = Plan {
        kind: inj.kind,
        magnitude_ns: mag,
        host_target: None,
        trigger: None,
        stretch: None,
        lose: None,
        device_target: None,
        actions: Vec::new(),
        mechanism: String::new(),
        bytes_needed: 0,
        twin_target_ns: None,
    };
    let Some(key) = target_key(sc, inj.program.as_deref(), &inj.target, inj.request) else {
        return p;
    };
    let step_key = StepKey {
        graph_node: None,
        ..key.clone()
    };
    let api_key = StepKey {
        api: true,
        ..step_key.clone()
    };
    let dev = twin.node(&key);
    let api = twin.node(&api_key);
    p.twin_target_ns = dev.map(|d| d.end.saturating_sub(d.start));
    let call_at = api.map(|a| twin.rel(a.start)).unwrap_or(0);
    let issue_at = call_at.saturating_sub(ISSUE_LEAD_NS);
    let dev_start = dev.map(|d| twin.rel(d.start)).unwrap_or(call_at);
    let until = dev_start + mag;
    // When injected work issued at the call can start holding the resource:
    // not before it is issued, and not before the target itself could start.
    let holds_from = (call_at + ISSUE_TO_HOLD_NS).max(dev_start.saturating_sub(2_000));
    // The target starts its dispatch (or copy setup) after the resource frees.
    let lead = match dev.map(|d| d.kind) {
        Some(NodeKind::Kernel | NodeKind::Memset) => device.dispatch_ns,
        _ => device.copy_setup_ns,
    };
    let step = &sc.programs[key.program].steps[key.step];
    let target_stream = match step {
        Step::Kernel { stream, .. }
        | Step::Copy { stream, .. }
        | Step::Memset { stream, .. }
        | Step::GraphLaunch { stream, .. } => sc.streams.iter().position(|s| &s.name == stream),
        _ => None,
    };
    // Bytes per ns of the target's own transfer in the twin.
    let bw = |pinned_only: bool| -> f64 {
        match (dev, step) {
            (Some(d), Step::Copy { bytes, memory, .. })
                if d.end > d.start && (!pinned_only || *memory == HostMemory::Pinned) =>
            {
                *bytes as f64 / (d.end - d.start) as f64
            }
            (Some(d), Step::Memset { bytes, .. }) if d.end > d.start && !pinned_only => {
                *bytes as f64 / (d.end - d.start) as f64
            }
            _ => PINNED_BYTES_PER_NS,
        }
    };
    let is_transfer = matches!(step, Step::Copy { .. } | Step::Memset { .. })
        && key.graph_node.is_none()
        && dev.is_some_and(|d| matches!(d.kind, NodeKind::Memcpy | NodeKind::Memset));
    match inj.kind {
        InjectionKind::CpuDeschedule
        | InjectionKind::HostDelay
        | InjectionKind::HostPageFaultMinor
        | InjectionKind::HostPageFaultMajor => {
            p.host_target = Some(step_key);
        }
        InjectionKind::EventWait
        | InjectionKind::GraphDependency
        | InjectionKind::SyncWait
        | InjectionKind::KernelSlowdown
        | InjectionKind::DelayedMemcpy => {
            let s = if is_transfer {
                let extra = (bw(false) * mag as f64).round() as u64;
                if let Step::Copy { bytes, .. } | Step::Memset { bytes, .. } = step {
                    p.bytes_needed = p.bytes_needed.max(bytes + extra);
                }
                Stretch::Bytes(extra)
            } else {
                Stretch::Ns(mag)
            };
            p.stretch = Some((key, s));
        }
        InjectionKind::RecordLoss => p.lose = Some(key),
        InjectionKind::OccupancyPressure => {
            let hog = Action::Kernel {
                on_target_stream: None,
                kernel: InjectedKernel::OccupancyHog,
                grid: Some(device.sms),
                from: holds_from,
                until: until.saturating_sub(lead),
                delays_target: true,
            };
            p.actions.push((issue_at, hog));
            p.trigger = Some(step_key);
            p.device_target = Some(key);
        }
        InjectionKind::StreamBacklog => {
            let backlog = Action::Kernel {
                on_target_stream: target_stream,
                kernel: InjectedKernel::Spin,
                grid: None,
                from: holds_from,
                until: until.saturating_sub(lead),
                delays_target: true,
            };
            p.actions.push((issue_at, backlog));
            p.trigger = Some(step_key);
            p.device_target = Some(key);
        }
        InjectionKind::PcieContention => {
            // Nothing gates the injected copies: they hold the engine from
            // when they are issued, also when the target copy waits for its
            // stream long after that (an event, earlier work). Sized from
            // `holds_from` instead, they would be done before a gated target
            // could move, and delay it only when the magnitude passes its gate
            // (issue 40 item 4).
            let copies = Action::Copies {
                from: call_at + ISSUE_TO_HOLD_NS,
                until,
                bytes_per_ns: bw(true),
            };
            p.actions.push((issue_at, copies));
            p.trigger = Some(step_key);
            p.device_target = Some(key);
        }
        InjectionKind::UnrelatedWork => {
            // On SMs the target leaves free: the work runs beside it, never
            // ahead of it. Beside a kernel that needs every SM none is free, so
            // the work runs while the twin's SMs were idle before it, done
            // before it starts (issue 40 item 7: 8 SMs held beside a full
            // kernel delayed it on the H200).
            let spare = device.sms.saturating_sub(sms_needed(sc, step));
            let (from, until) = match dev {
                Some(_) if spare == 0 => {
                    let until = dev_start.saturating_sub(UNRELATED_LEAD_NS);
                    let idle_from = twin.sm_work_ends_before(until) + UNRELATED_LEAD_NS;
                    (until.saturating_sub(mag).max(idle_from.min(until)), until)
                }
                Some(_) => {
                    let from = dev_start.saturating_sub(UNRELATED_LEAD_NS);
                    (from, from + mag)
                }
                None => (issue_at, issue_at + mag),
            };
            let unrelated = Action::Kernel {
                on_target_stream: None,
                kernel: InjectedKernel::Spin,
                grid: Some(spare.clamp(1, UNRELATED_SMS)),
                from,
                until,
                delays_target: false,
            };
            p.actions.push((from, unrelated));
            p.trigger = Some(step_key);
            p.device_target = Some(key);
        }
    }
    p
}

/// The SMs the device work of `step` needs at once: a kernel's grid, the
/// largest grid of a launched graph, one for a memset or device-to-device
/// copy (docs/gpu-facts.md), none for a host copy.
fn sms_needed(sc: &Scenario, step: &Step) -> u32 {
    match step {
        Step::Kernel { grid, .. } => *grid,
        Step::GraphLaunch { graph, .. } => sc
            .graphs
            .iter()
            .filter(|g| &g.name == graph)
            .flat_map(|g| g.nodes.iter().map(|n| n.kernel.grid))
            .max()
            .unwrap_or(0),
        Step::Memset { .. } => 1,
        Step::Copy { direction, .. } if *direction == CopyDirection::D2d => 1,
        _ => 0,
    }
}
