//! How the GPU backend realises the injection plan (`crate::plan`, sized on
//! the measured twin like the simulator's): the plan's work as real kernels
//! and copies that the injector thread issues when the victim reaches the
//! trigger step (the victim hands it a trigger right before the target's own
//! call, so the work is ahead of the target in every queue), named and sized
//! like the application's own work (`crate::anonymous`), and the pages a
//! page-fault injection will touch, prepared before the run.

use crate::anonymous::Disguise;
use crate::plan::{Action, DeviceFacts, InjectedKernel};
pub use crate::plan::{Stretch, Twin};
use ground_truth::scenario::{Injection, InjectionKind, Scenario};
use kernels::Kernel;
use std::sync::Mutex;

/// From a kernel becoming ready to its first block running on the H200, and
/// from a copy becoming ready to its first byte moving (the simulator's
/// calibration, `sim/device.rs`).
const DISPATCH_NS: u64 = 3_000;
const COPY_SETUP_NS: u64 = 2_000;
/// Shortest injected kernel that delays a target (shorter ones cannot reach it).
const MIN_HOLD_NS: u64 = 20_000;
/// Largest single injected copy (the scratch buffers hold one).
const MAX_COPY: u64 = 256 << 20;
/// At most this many copies make up one injected action.
const MAX_PIECES: usize = 64;

/// One piece of injected work as the injector thread issues it.
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

/// The plan with what the GPU needs to carry it out.
#[derive(Debug)]
pub struct Plan {
    pub plan: crate::plan::Plan,
    /// The plan's work, realised (issued at the trigger, in order).
    pub realised: Vec<DevAction>,
    pub page_faults: Mutex<Option<injectors::PageFaults>>,
    pub page_fault_error: Option<String>,
}

impl std::ops::Deref for Plan {
    type Target = crate::plan::Plan;
    fn deref(&self) -> &crate::plan::Plan {
        &self.plan
    }
}

/// A piece of the plan's work as the real kernel or copies that do it,
/// shaped like the application's work (`disguise`): a kernel runs from when it
/// can hold its resource until the plan's release time; copies fill that time
/// at the twin's pinned bandwidth.
fn realise(action: &Action, disguise: &Disguise, sms: u32) -> DevAction {
    match action {
        Action::Kernel {
            on_target_stream,
            kernel,
            grid,
            from,
            until,
            delays_target,
        } => DevAction::Kernel {
            on_target_stream: *on_target_stream,
            name: disguise.kernel_name(0).into(),
            call_site: disguise.call_site(0).map(str::to_string),
            kernel: match kernel {
                InjectedKernel::Spin => Kernel::Spin,
                InjectedKernel::OccupancyHog => Kernel::OccupancyHog,
            },
            grid: grid.unwrap_or_else(|| disguise.grid(0, 16).min(sms)),
            dur_ns: until.saturating_sub(*from).max(if *delays_target {
                MIN_HOLD_NS
            } else {
                1_000
            }),
            delays_target: *delays_target,
        },
        Action::Copies {
            from,
            until,
            bytes_per_ns,
        } => {
            let b = *bytes_per_ns;
            let budget = until.saturating_sub(*from);
            let ns_of = |bytes: u64| (bytes as f64 / b) as u64;
            // Application-sized copies where the application copies; else
            // equal MiB-rounded ones.
            let sizes = disguise
                .copy_sizes(budget, ns_of, MAX_PIECES)
                .unwrap_or_else(|| {
                    let total = (budget as f64 * b).round() as u64;
                    let count = total.div_ceil(MAX_COPY).max(2);
                    vec![(total / count).max(1 << 20).next_multiple_of(1 << 20); count as usize]
                });
            DevAction::Copies {
                sizes,
                call_site: disguise.call_site(1).map(str::to_string),
            }
        }
    }
}

/// What the injection record says the GPU did.
fn mechanism(p: &crate::plan::Plan, realised: &[DevAction]) -> String {
    let mag = p.magnitude_ns.max(1) as f64;
    match (p.kind, realised.first(), p.stretch.as_ref().map(|s| s.1)) {
        (_, _, Some(Stretch::Bytes(extra))) => format!(
            "cuda:larger-transfer (+{extra} bytes at the twin's {:.2} GB/s)",
            extra as f64 / mag
        ),
        (_, _, Some(Stretch::Ns(_))) => {
            "cuda:longer-kernel (spin duration + magnitude)".into()
        }
        (InjectionKind::RecordLoss, _, _) => "cuda:record-dropped-by-recorder".into(),
        (InjectionKind::OccupancyPressure, Some(DevAction::Kernel { grid, dur_ns, .. }), _) => {
            format!(
                "cuda:occupancy-hog-kernel ({grid} blocks of max shared memory on the highest-priority stream, {:.0} us, issued by the injector thread just before the target's launch)",
                *dur_ns as f64 / 1e3
            )
        }
        (InjectionKind::StreamBacklog, Some(DevAction::Kernel { dur_ns, .. }), _) => format!(
            "cuda:backlog-kernel ({:.0} us spin on the target's stream, issued by the injector thread just before the target's call)",
            *dur_ns as f64 / 1e3
        ),
        (InjectionKind::PcieContention, Some(DevAction::Copies { sizes, .. }), _) => {
            let b = p.actions.first().map_or(0.0, |(_, a)| match a {
                Action::Copies { bytes_per_ns, .. } => *bytes_per_ns,
                Action::Kernel { .. } => 0.0,
            });
            let (count, moved) = (sizes.len(), sizes.iter().sum::<u64>());
            format!(
                "cuda:bulk-copies ({count} pinned H2D copies, {moved} bytes in all, at {b:.1} GB/s on another stream, queued on the copy engine just before the target copy)"
            )
        }
        (InjectionKind::UnrelatedWork, _, _) => {
            "cuda:concurrent-kernel (8 blocks on the injector's stream)".into()
        }
        _ => String::new(),
    }
}

pub fn plan(
    sc: &Scenario,
    inj: &Injection,
    twin: &Twin,
    sms: u32,
    seed: u64,
    minor_fault_ns: impl FnOnce(bool) -> Result<f64, String>,
) -> Plan {
    // `seed` keys the draws that make injected work look like the application's.
    let disguise = Disguise::new(sc, seed);
    let device = DeviceFacts {
        sms,
        dispatch_ns: DISPATCH_NS,
        copy_setup_ns: COPY_SETUP_NS,
    };
    let mut plan = crate::plan::plan(sc, inj, twin, device);
    let realised: Vec<DevAction> = plan
        .actions
        .iter()
        .map(|(_, a)| realise(a, &disguise, sms))
        .collect();
    for a in &realised {
        if let DevAction::Copies { sizes, .. } = a {
            let largest = sizes.iter().copied().max().unwrap_or(0);
            plan.bytes_needed = plan.bytes_needed.max(largest);
        }
    }
    plan.mechanism = mechanism(&plan, &realised);
    let mut p = Plan {
        plan,
        realised,
        page_faults: Mutex::new(None),
        page_fault_error: None,
    };
    if let InjectionKind::HostPageFaultMinor | InjectionKind::HostPageFaultMajor = inj.kind {
        let major = inj.kind == InjectionKind::HostPageFaultMajor;
        let mag = p.magnitude_ns;
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
    p
}

/// The kernels an injection launches, as (name, kernel) pairs to prepare.
pub fn injected_kernels(p: &Plan) -> Vec<(String, Kernel)> {
    p.realised
        .iter()
        .filter_map(|a| match a {
            DevAction::Kernel { name, kernel, .. } => Some((name.clone(), *kernel)),
            DevAction::Copies { .. } => None,
        })
        .collect()
}
