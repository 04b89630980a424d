//! Turns a scenario's injection into real work, calibrated on the measured
//! no-injection twin the way the simulator's `inject.rs` is: injected device
//! work is issued by the injector thread right before the target's own call
//! (the victim hands it a trigger, so it is ahead of the target in every
//! queue) and sized from the twin's measured times to hold the resource until
//! the target's twin start plus the requested magnitude.

use crate::anonymous::Disguise;
use crate::keys::{target_key, Keys, StepKey};
use ground_truth::graph::{Node, NodeKind};
use ground_truth::scenario::{Injection, InjectionKind, Scenario, Step};
use ground_truth::Ns;
use kernels::Kernel;
use std::sync::Mutex;

/// How a target op is lengthened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stretch {
    /// A kernel (or graph node kernel) spins this much longer.
    Ns(u64),
    /// A copy or memset moves this many more bytes.
    Bytes(u64),
}

#[derive(Debug, Clone)]
pub enum DevAction {
    Kernel {
        /// `Some(stream index)`: on the target's stream (backlog); `None`: the injector's stream.
        on_target_stream: Option<usize>,
        /// Drawn from the scenario's kernel names (`crate::anonymous`).
        name: String,
        /// Drawn from the application's call sites: the launch goes through the same trampoline.
        call_site: Option<String>,
        kernel: Kernel,
        grid: u32,
        dur_ns: u64,
        delays_target: bool,
    },
    /// Pinned H2D copies on the injector's stream, of application-like sizes
    /// where the application copies.
    Copies {
        sizes: Vec<u64>,
        call_site: Option<String>,
    },
}

#[derive(Debug)]
pub struct Plan {
    pub kind: InjectionKind,
    pub magnitude_ns: Ns,
    /// Host stall right before this step's call.
    pub host_target: Option<StepKey>,
    /// The injector issues `actions` right before this step's call.
    pub trigger: Option<StepKey>,
    pub stretch: Option<(StepKey, Stretch)>,
    pub lose: Option<StepKey>,
    /// Device op the injected work delays (gets a `fault` edge).
    pub device_target: Option<StepKey>,
    pub actions: Vec<DevAction>,
    /// How the device work was sized (for the injection record).
    pub mechanism: String,
    pub page_faults: Mutex<Option<injectors::PageFaults>>,
    pub page_fault_error: Option<String>,
    /// Largest transfer the run needs (scratch buffers).
    pub bytes_needed: u64,
    /// The target's duration in the twin (to measure a lengthening).
    pub twin_target_ns: Option<u64>,
}

impl Plan {
    pub fn stretch_graph_node(&self) -> Option<&str> {
        self.stretch
            .as_ref()
            .and_then(|(k, _)| k.graph_node.as_deref())
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
}

/// Default pinned bandwidth when the twin has no copy to measure (bytes/ns, SPEC §9).
const PINNED_BYTES_PER_NS: f64 = 52.0;
const MAX_COPY: u64 = 256 << 20;

/// `seed` keys the draws that make injected work look like the application's.
pub fn plan(
    sc: &Scenario,
    inj: &Injection,
    twin: &Twin,
    sms: u32,
    seed: u64,
    minor_fault_ns: impl FnOnce(bool) -> Result<f64, String>,
) -> Plan {
    let disguise = Disguise::new(sc, seed);
    let call_site = |draw: u64| disguise.call_site(draw).map(str::to_string);
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
        page_faults: Mutex::new(None),
        page_fault_error: None,
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
    let issue = api.map(|a| twin.rel(a.start)).unwrap_or(0);
    let dev_start = dev.map(|d| twin.rel(d.start)).unwrap_or(issue);
    let until = dev_start + mag;
    // When injected work issued at `issue` can start holding the resource:
    // not before it is issued, and not before the target itself could start.
    let est_start = (issue + 10_000).max(dev_start.saturating_sub(2_000));
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
                if d.end > d.start
                    && (!pinned_only || *memory == ground_truth::trace::HostMemory::Pinned) =>
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
        InjectionKind::CpuDeschedule | InjectionKind::HostDelay => {
            p.host_target = Some(step_key);
        }
        InjectionKind::HostPageFaultMinor | InjectionKind::HostPageFaultMajor => {
            let major = inj.kind == InjectionKind::HostPageFaultMajor;
            p.host_target = Some(step_key);
            let prepared = minor_fault_ns(major).and_then(|per| {
                // Twice the calibrated count: the run stops at the requested
                // time (`trigger_until`), and a fault may cost more in the run
                // than in the calibration.
                let n = ((2.0 * mag as f64 / per.max(1.0)).round() as usize).max(16);
                injectors::PageFaults::prepare(
                    n,
                    if major {
                        injectors::FaultKind::Major
                    } else {
                        injectors::FaultKind::Minor
                    },
                )
                .map_err(|e| e.to_string())
            });
            match prepared {
                Ok(pf) => p.page_faults = Mutex::new(Some(pf)),
                Err(e) => p.page_fault_error = Some(e),
            }
        }
        InjectionKind::EventWait
        | InjectionKind::GraphDependency
        | InjectionKind::SyncWait
        | InjectionKind::KernelSlowdown
        | InjectionKind::DelayedMemcpy => {
            let s = if is_transfer {
                let extra = (bw(false) * mag as f64).round() as u64;
                p.mechanism = format!(
                    "cuda:larger-transfer (+{extra} bytes at the twin's {:.2} GB/s)",
                    bw(false)
                );
                Stretch::Bytes(extra)
            } else {
                p.mechanism = "cuda:longer-kernel (spin duration + magnitude)".into();
                Stretch::Ns(mag)
            };
            if let Stretch::Bytes(b) = s {
                if let Step::Copy { bytes, .. } | Step::Memset { bytes, .. } = step {
                    p.bytes_needed = p.bytes_needed.max(bytes + b);
                }
            }
            p.stretch = Some((key, s));
        }
        InjectionKind::RecordLoss => {
            p.mechanism = "cuda:record-dropped-by-recorder".into();
            p.lose = Some(key);
        }
        InjectionKind::OccupancyPressure => {
            let dur = until.saturating_sub(est_start).max(20_000);
            p.actions.push(DevAction::Kernel {
                on_target_stream: None,
                name: disguise.kernel_name(0).into(),
                call_site: call_site(0),
                kernel: Kernel::OccupancyHog,
                grid: sms,
                dur_ns: dur,
                delays_target: true,
            });
            p.mechanism = format!(
                "cuda:occupancy-hog-kernel ({sms} blocks of max shared memory on the highest-priority stream, {:.0} us, issued by the injector thread just before the target's launch)",
                dur as f64 / 1e3
            );
            p.trigger = Some(step_key);
            p.device_target = Some(key);
        }
        InjectionKind::StreamBacklog => {
            let dur = until.saturating_sub(est_start + 3_000).max(20_000);
            p.actions.push(DevAction::Kernel {
                on_target_stream: target_stream,
                name: disguise.kernel_name(0).into(),
                call_site: call_site(0),
                kernel: Kernel::Spin,
                grid: disguise.grid(0, 16).min(sms),
                dur_ns: dur,
                delays_target: true,
            });
            p.mechanism = format!(
                "cuda:backlog-kernel ({:.0} us spin on the target's stream, issued by the injector thread just before the target's call)",
                dur as f64 / 1e3
            );
            p.trigger = Some(step_key);
            p.device_target = Some(key);
        }
        InjectionKind::PcieContention => {
            let b = bw(true);
            let total = ((until.saturating_sub(est_start)) as f64 * b).round() as u64;
            // Application-sized copies where the application copies; else
            // equal MiB-rounded ones.
            let ns_of = |bytes: u64| (bytes as f64 / b) as Ns;
            let budget = until.saturating_sub(est_start);
            let sizes = disguise.copy_sizes(budget, ns_of, 64).unwrap_or_else(|| {
                let count = total.div_ceil(MAX_COPY).max(2);
                vec![(total / count).max(1 << 20).next_multiple_of(1 << 20); count as usize]
            });
            let count = sizes.len();
            let moved: u64 = sizes.iter().sum();
            p.bytes_needed = p.bytes_needed.max(sizes.iter().copied().max().unwrap_or(0));
            p.actions.push(DevAction::Copies {
                sizes,
                call_site: call_site(1),
            });
            p.mechanism = format!(
                "cuda:bulk-copies ({count} pinned H2D copies, {moved} bytes in all, at {b:.1} GB/s on another stream, queued on the copy engine just before the target copy)"
            );
            p.trigger = Some(step_key);
            p.device_target = Some(key);
        }
        InjectionKind::UnrelatedWork => {
            p.actions.push(DevAction::Kernel {
                on_target_stream: None,
                name: disguise.kernel_name(0).into(),
                call_site: call_site(0),
                kernel: Kernel::Spin,
                grid: 8,
                dur_ns: mag.max(1_000),
                delays_target: false,
            });
            p.mechanism = "cuda:concurrent-kernel (8 blocks on the injector's stream)".into();
            p.trigger = Some(step_key);
            p.device_target = Some(key);
        }
    }
    p
}

/// The kernels an injection launches, as (name, kernel) pairs to prepare.
pub fn injected_kernels(p: &Plan) -> Vec<(String, Kernel)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            DevAction::Kernel { name, kernel, .. } => Some((name.clone(), *kernel)),
            DevAction::Copies { .. } => None,
        })
        .collect()
}
