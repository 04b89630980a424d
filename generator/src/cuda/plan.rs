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
/// At most this many kernels (or copies) make up one injected action.
const MAX_PIECES: usize = 64;

/// One piece of injected work as the injector thread issues it.
#[derive(Debug, Clone)]
pub enum DevAction {
    Kernel {
        /// `Some(stream index)`: on the target's stream (backlog); `None`: the injector's stream `lane`.
        on_target_stream: Option<usize>,
        /// Which of the injector's two streams (0 or 1). A hog's pieces
        /// alternate between them, so while one piece holds the SMs the next
        /// is already waiting at the highest priority and takes each SM the
        /// moment its block leaves (on one stream it would wait for the whole
        /// piece to finish, and the target's blocks would take the SMs freed
        /// meanwhile); the piece after it waits behind the first on its stream.
        lane: usize,
        /// Drawn from the scenario's kernel names (`crate::anonymous`).
        name: String,
        /// Drawn from the application's call sites: the launch goes through the same trampoline.
        call_site: Option<String>,
        kernel: Kernel,
        grid: u32,
        block: u32,
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
    /// The plan's work, realised (issued at the trigger, in order): each
    /// kernel is one piece of a kernel action, each its own launch.
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

/// How long the injector thread takes to issue one injected launch through a
/// call-site trampoline, at most (the H200 host's launches take a few
/// microseconds): the pieces of a kernel action are sized so that each is
/// enqueued before the one ahead of it ends, so the device never idles
/// between them.
const ISSUE_NS: u64 = 10_000;

/// Whether every piece of `pieces` (run back to back, `gap_ns` apart) is
/// issued, `ISSUE_NS` after the one before, before the piece ahead of it ends.
fn enqueued_ahead(pieces: &[u64], gap_ns: u64) -> bool {
    let mut ends = 0u64;
    pieces.iter().enumerate().skip(1).all(|(k, _)| {
        ends += pieces[k - 1] + if k > 1 { gap_ns } else { 0 };
        k as u64 * ISSUE_NS <= ends
    })
}

/// Splits `total_ns` of injected kernel time like the simulator does
/// (`Disguise::kernel_pieces`), with as many pieces as the injector thread can
/// enqueue ahead of the device.
fn kernel_pieces(disguise: &Disguise, total_ns: u64) -> Vec<u64> {
    (1..=MAX_PIECES)
        .rev()
        .map(|most| disguise.kernel_pieces(total_ns, DISPATCH_NS, most))
        .find(|pieces| enqueued_ahead(pieces, DISPATCH_NS))
        .unwrap_or_else(|| vec![total_ns])
}

/// The launch configuration of the `draw`-th injected kernel: an application
/// kernel's (grid, block), among those whose grid the mechanism allows when it
/// needs one; without such a kernel, the needed grid with an application block.
fn launch_configuration(
    disguise: &Disguise,
    kernel: InjectedKernel,
    needed_grid: Option<u32>,
    sms: u32,
    draw: u64,
) -> (u32, u32) {
    let fits = |grid: u32| match (kernel, needed_grid) {
        // The hog holds each SM with one block, and a second wave would
        // hold them for a second duration: exactly one block per SM.
        (InjectedKernel::OccupancyHog, _) => grid == sms,
        // Concurrent work stays on the SMs the target leaves free.
        (InjectedKernel::Spin, Some(most)) => grid <= most,
        (InjectedKernel::Spin, None) => grid <= sms,
    };
    disguise
        .launch_configuration(draw, fits)
        .unwrap_or_else(|| {
            let grid = match kernel {
                InjectedKernel::OccupancyHog => sms,
                InjectedKernel::Spin => needed_grid.unwrap_or(16).min(sms),
            };
            (grid, disguise.block(draw, 128))
        })
}

/// A piece of the plan's work as the real kernels or copies that do it,
/// shaped like the application's work (`disguise`): a kernel action becomes
/// back-to-back kernels of application-like durations and launch
/// configurations that together hold its resource from when it can until the
/// plan's release time; copies fill that time at the twin's pinned bandwidth.
/// `draw` numbers the draws, so no two pieces share them.
fn realise(action: &Action, disguise: &Disguise, sms: u32, draw: &mut u64) -> Vec<DevAction> {
    match action {
        Action::Kernel {
            on_target_stream,
            kernel,
            grid,
            from,
            until,
            delays_target,
        } => {
            let hold_ns =
                until
                    .saturating_sub(*from)
                    .max(if *delays_target { MIN_HOLD_NS } else { 1_000 });
            kernel_pieces(disguise, hold_ns)
                .into_iter()
                .enumerate()
                .map(|(piece, dur_ns)| {
                    let d = *draw;
                    *draw += 1;
                    let (grid, block) = launch_configuration(disguise, *kernel, *grid, sms, d);
                    DevAction::Kernel {
                        on_target_stream: *on_target_stream,
                        lane: match kernel {
                            InjectedKernel::OccupancyHog => piece % 2,
                            InjectedKernel::Spin => 0,
                        },
                        name: disguise.kernel_name(d).into(),
                        call_site: disguise.call_site(d).map(str::to_string),
                        kernel: match kernel {
                            InjectedKernel::Spin => Kernel::Spin,
                            InjectedKernel::OccupancyHog => Kernel::OccupancyHog,
                        },
                        grid,
                        block,
                        dur_ns,
                        delays_target: *delays_target,
                    }
                })
                .collect()
        }
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
            *draw += 1;
            vec![DevAction::Copies {
                sizes,
                call_site: disguise.call_site(*draw).map(str::to_string),
            }]
        }
    }
}

/// What the injection record says the GPU did.
fn mechanism(p: &crate::plan::Plan, realised: &[DevAction]) -> String {
    let mag = p.magnitude_ns.max(1) as f64;
    // The kernel pieces: how many, and how long they hold their resource in all.
    let (pieces, held_ns) = realised
        .iter()
        .filter_map(|a| match a {
            DevAction::Kernel { dur_ns, .. } => Some(*dur_ns),
            DevAction::Copies { .. } => None,
        })
        .fold((0usize, 0u64), |(n, sum), d| (n + 1, sum + d));
    let gaps_ns = DISPATCH_NS * pieces.saturating_sub(1) as u64;
    let held_us = (held_ns + gaps_ns) as f64 / 1e3;
    match (p.kind, realised.first(), p.stretch.as_ref().map(|s| s.1)) {
        (_, _, Some(Stretch::Bytes(extra))) => format!(
            "cuda:larger-transfer (+{extra} bytes at the twin's {:.2} GB/s)",
            extra as f64 / mag
        ),
        (_, _, Some(Stretch::Ns(_))) => {
            "cuda:longer-kernel (spin duration + magnitude)".into()
        }
        (InjectionKind::RecordLoss, _, _) => "cuda:record-dropped-by-recorder".into(),
        (InjectionKind::OccupancyPressure, Some(DevAction::Kernel { grid, .. }), _) => {
            format!(
                "cuda:occupancy-hog-kernels ×{pieces} ({grid} blocks of max shared memory each, back to back, alternating between two highest-priority streams, {held_us:.0} us in all, issued by the injector thread just before the target's launch)"
            )
        }
        (InjectionKind::StreamBacklog, Some(DevAction::Kernel { .. }), _) => format!(
            "cuda:backlog-kernels ×{pieces} ({held_us:.0} us of back-to-back spins on the target's stream, issued by the injector thread just before the target's call)"
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
        (InjectionKind::UnrelatedWork, _, _) => format!(
            "cuda:concurrent-kernels ×{pieces} (at most 8 blocks each, back to back on the injector's stream, {held_us:.0} us in all)"
        ),
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
    let mut draw = 0;
    let realised: Vec<DevAction> = plan
        .actions
        .iter()
        .flat_map(|(_, a)| realise(a, &disguise, sms, &mut draw))
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

/// The kernels an injection launches, as (name, kernel) pairs to prepare,
/// each once (pieces share names).
pub fn injected_kernels(p: &Plan) -> Vec<(String, Kernel)> {
    let mut kernels: Vec<(String, Kernel)> = Vec::new();
    for a in &p.realised {
        if let DevAction::Kernel { name, kernel, .. } = a {
            if !kernels.iter().any(|(n, k)| n == name && k == kernel) {
                kernels.push((name.clone(), *kernel));
            }
        }
    }
    kernels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;
    use ground_truth::io::Readable;
    use ground_truth::scenario::Step;

    /// A catalog scenario.
    fn catalog(name: &str) -> Scenario {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalog");
        Scenario::read(&dir.join(format!("{name}.yaml"))).expect("catalog")
    }

    /// The GPU plan of `sc`'s injection on a 132-SM device, without a measured twin.
    fn plan_of(sc: &Scenario, seed: u64) -> Plan {
        let keys = Keys::new();
        let twin = Twin {
            nodes: &[],
            keys: &keys,
            origin: 0,
        };
        let inj = sc.injection.as_ref().expect("an injection");
        plan(sc, inj, &twin, 132, seed, |_| Err("none".into()))
    }

    /// The GPU's injected kernels are compiled under, and its injected calls made
    /// from, names the scenario's own application work uses.
    #[test]
    fn injected_work_is_named_like_the_application() {
        let mut planned = 0;
        for name in [
            "late-launch-vs-device-queueing.occupancy-hog",
            "late-launch-vs-device-queueing.stream-backlog",
            "call-site-attribution.site-a",
            "slow-copy-vs-blocked-consumer.own-copy-contended",
            "concurrent-work.harmless",
        ] {
            let sc = catalog(name);
            let kernels: Vec<&str> = sc
                .programs
                .iter()
                .flat_map(|p| &p.steps)
                .filter_map(|s| match s {
                    Step::Kernel { name, .. } => Some(name.as_str()),
                    _ => None,
                })
                .collect();
            let sites: Vec<Option<&str>> = sc
                .programs
                .iter()
                .flat_map(|p| &p.steps)
                .filter_map(|s| match s {
                    Step::Kernel { call_site, .. } | Step::Copy { call_site, .. } => {
                        Some(call_site.as_deref())
                    }
                    _ => None,
                })
                .collect();
            let copies: Vec<u64> = sc
                .programs
                .iter()
                .flat_map(|p| &p.steps)
                .filter_map(|s| match s {
                    Step::Copy { bytes, .. } => Some(*bytes),
                    _ => None,
                })
                .collect();
            for seed in 0..4 {
                let p = plan_of(&sc, seed);
                for a in &p.realised {
                    planned += 1;
                    match a {
                        DevAction::Kernel {
                            name, call_site, ..
                        } => {
                            assert!(kernels.contains(&name.as_str()), "{name}");
                            assert!(sites.contains(&call_site.as_deref()), "{call_site:?}");
                        }
                        DevAction::Copies { sizes, call_site } => {
                            assert!(sizes.iter().all(|b| copies.contains(b)), "{sizes:?}");
                            assert!(sites.contains(&call_site.as_deref()), "{call_site:?}");
                        }
                    }
                }
            }
        }
        assert!(planned >= 20, "{planned}");
    }

    /// The application's (grid, block) launch configurations.
    fn configurations(sc: &Scenario) -> Vec<(u32, u32)> {
        sc.programs
            .iter()
            .flat_map(|p| &p.steps)
            .filter_map(|s| match s {
                Step::Kernel { grid, block, .. } => Some((*grid, *block)),
                _ => None,
            })
            .chain(
                sc.graphs
                    .iter()
                    .flat_map(|g| &g.nodes)
                    .map(|n| (n.kernel.grid, n.kernel.block)),
            )
            .collect()
    }

    /// A kernel action becomes back-to-back pieces that hold its resource for
    /// exactly the planned window, each with an application launch
    /// configuration that meets the mechanism's need, each enqueued before the
    /// one ahead of it ends, all named in the mechanism.
    #[test]
    fn kernel_actions_are_application_like_pieces_filling_the_hold() {
        let sms = 132;
        for name in [
            "late-launch-vs-device-queueing.occupancy-hog",
            "late-launch-vs-device-queueing.stream-backlog",
            "concurrent-work.harmless",
        ] {
            let sc = catalog(name);
            let own = configurations(&sc);
            for seed in 0..8 {
                let p = plan_of(&sc, seed);
                let Some((
                    _,
                    Action::Kernel {
                        kernel,
                        grid: needed,
                        from,
                        until,
                        delays_target,
                        ..
                    },
                )) = p.actions.first()
                else {
                    panic!("{name}: a kernel action");
                };
                let hold = until.saturating_sub(*from).max(if *delays_target {
                    MIN_HOLD_NS
                } else {
                    1_000
                });
                let mut pieces: Vec<(u32, u32, u64)> = Vec::new();
                for (i, a) in p.realised.iter().enumerate() {
                    let DevAction::Kernel {
                        grid,
                        block,
                        dur_ns,
                        lane,
                        ..
                    } = a
                    else {
                        panic!("{name}: only kernels");
                    };
                    // The hog's next piece waits on the other stream.
                    let alternating = *kernel == InjectedKernel::OccupancyHog;
                    assert_eq!(*lane, if alternating { i % 2 } else { 0 }, "{name}");
                    pieces.push((*grid, *block, *dur_ns));
                }
                let gaps = DISPATCH_NS * (pieces.len() as u64 - 1);
                let held: u64 = pieces.iter().map(|p| p.2).sum::<u64>() + gaps;
                assert_eq!(held, hold, "{name} seed {seed}: {pieces:?}");
                let durations: Vec<u64> = pieces.iter().map(|p| p.2).collect();
                assert!(enqueued_ahead(&durations, DISPATCH_NS), "{durations:?}");
                for &(grid, block, _) in &pieces {
                    match kernel {
                        InjectedKernel::OccupancyHog => assert_eq!(grid, sms, "{name}"),
                        InjectedKernel::Spin => {
                            assert!(grid <= needed.unwrap_or(sms), "{name}: {grid}")
                        }
                    }
                    let fallback = match kernel {
                        InjectedKernel::OccupancyHog => Some(sms),
                        InjectedKernel::Spin => *needed,
                    };
                    assert!(
                        own.contains(&(grid, block))
                            || (Some(grid) == fallback && own.iter().any(|c| c.1 == block)),
                        "{name}: ({grid}, {block}) is not the application's: {own:?}"
                    );
                }
                assert!(
                    p.mechanism.contains(&format!("×{}", pieces.len())),
                    "{}",
                    p.mechanism
                );
            }
        }
    }

    /// A long hold is split into many application-length pieces, each issued
    /// before the one ahead of it ends; a short one stays one kernel.
    #[test]
    fn long_holds_split_into_pieces_the_injector_can_keep_ahead_of() {
        let sc = catalog("late-launch-vs-device-queueing.occupancy-hog");
        let disguise = Disguise::new(&sc, 5);
        let long = kernel_pieces(&disguise, 5_000_000);
        assert!(long.len() > 2, "{long:?}");
        assert!(enqueued_ahead(&long, DISPATCH_NS));
        assert_eq!(
            long.iter().sum::<u64>() + DISPATCH_NS * (long.len() as u64 - 1),
            5_000_000
        );
        assert_eq!(kernel_pieces(&disguise, 1_000), vec![1_000]);
        // Pieces shorter than the time to issue the next one are not kept apart.
        assert!(!enqueued_ahead(&[2_000, 2_000, 2_000], DISPATCH_NS));
        assert!(enqueued_ahead(&[30_000, 2_000, 2_000], DISPATCH_NS));
    }

    /// The hog takes an application configuration whose grid is one block per
    /// SM, with its block; without one, the SM count with an application block.
    #[test]
    fn the_hog_covers_the_sms_with_an_application_configuration() {
        let yaml = |grid: u32| {
            format!(
                "schema_version: 1\nname: t.a\nfamily: t\nvariant: a\ncause: none\n\
                 threads: [{{name: host}}]\nstreams: [{{name: s}}]\n\
                 programs:\n  - name: p\n    start: host\n    steps:\n      \
                 - {{op: kernel, id: a, stream: s, name: gemm, duration_us: 200, grid: {grid}, block: 256}}\n      \
                 - {{op: kernel, id: b, stream: s, name: softmax, duration_us: 300, grid: 64, block: 512}}\n\
                 symptom: {{step: a}}\n"
            )
        };
        let path = std::path::Path::new("t.yaml");
        let fitting = Disguise::new(&Scenario::parse(path, yaml(132).as_bytes()).unwrap(), 1);
        let wider = Disguise::new(&Scenario::parse(path, yaml(264).as_bytes()).unwrap(), 1);
        for draw in 0..32 {
            let hog = |d: &Disguise| {
                launch_configuration(d, InjectedKernel::OccupancyHog, Some(132), 132, draw)
            };
            assert_eq!(hog(&fitting), (132, 256));
            let (grid, block) = hog(&wider);
            assert_eq!(grid, 132);
            assert!([256, 512].contains(&block));
            let concurrent =
                launch_configuration(&fitting, InjectedKernel::Spin, Some(8), 132, draw);
            assert_eq!(concurrent.0, 8);
            let free = launch_configuration(&fitting, InjectedKernel::Spin, None, 132, draw);
            assert!([(132, 256), (64, 512)].contains(&free));
        }
    }
}
