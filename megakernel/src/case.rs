//! Running a family of megakernel scenarios on an executor (the simulator or
//! the GPU): the no-injection twin, each variant sized (a `match_variant`
//! variant is calibrated until its kernel is as late as the variant it
//! matches), one launch per monitor configuration, and the bundle.

use crate::bpf::diagnosis::{self, Diagnosis};
use crate::bundle::{self, CaseInputs, Env, KernelObs};
use crate::mix2;
use crate::schedule::{self, Amount, Schedule};
use crate::sim::{self, SimCosts, SIM_CLOCK_BASE};
use ground_truth::megakernel::{Capture, MkScenario, MonitorConfig, TaskTelemetry};
use ground_truth::Bundle;

/// One launch as an executor saw it.
#[derive(Debug, Clone)]
pub struct Launch {
    pub capture: Capture,
    pub kernel: KernelObs,
    /// Device clock of the first worker's start.
    pub device_start: u64,
    /// Device-side error bits (0 = clean).
    pub error: u32,
}

/// Something that runs a schedule with a monitor: the simulator or a GPU.
pub trait Executor {
    fn env(&self) -> Env;
    /// Workers a scenario with `workers: 0` gets.
    fn default_workers(&self) -> u32;
    fn launch(&mut self, s: &Schedule, cfg: &MonitorConfig, seed: u64) -> Result<Launch, String>;
    /// One launch under PC sampling, when this executor can collect samples
    /// (`None`: it cannot; the GPU reports why separately).
    fn launch_pc_sampling(&mut self, _s: &Schedule, _seed: u64) -> Option<Result<Launch, String>> {
        None
    }
    /// One launch with diagnosis program `d` attached at the hooks
    /// (`bpf::diagnosis`; its capture is the `d.monitor` monitor's), when
    /// this executor runs hook programs (`None`: it does not).
    fn launch_ebpf(
        &mut self,
        _s: &Schedule,
        _seed: u64,
        _d: &Diagnosis,
    ) -> Option<Result<Launch, String>> {
        None
    }
}

/// The simulator as an executor.
pub struct SimExecutor {
    pub costs: SimCosts,
    pub workers: u32,
}

impl Default for SimExecutor {
    fn default() -> Self {
        SimExecutor {
            costs: SimCosts::default(),
            workers: 132,
        }
    }
}

impl Executor for SimExecutor {
    fn env(&self) -> Env {
        Env {
            backend: "sim".into(),
            gpu: "simulated persistent megakernel".into(),
            driver: "n/a".into(),
            cuda: "n/a".into(),
            cupti: "n/a".into(),
            host: "simulator".into(),
        }
    }
    fn default_workers(&self) -> u32 {
        self.workers
    }
    fn launch_pc_sampling(&mut self, s: &Schedule, seed: u64) -> Option<Result<Launch, String>> {
        let cfg = MonitorConfig {
            name: PC_SAMPLING.into(),
            ..MonitorConfig::none()
        };
        Some(self.launch(s, &cfg, seed).map(|mut l| {
            l.capture.pc_sampling = Some(sim::run(s, &cfg, seed, &self.costs).pc);
            l
        }))
    }
    fn launch(&mut self, s: &Schedule, cfg: &MonitorConfig, seed: u64) -> Result<Launch, String> {
        let r = sim::run(s, cfg, seed, &self.costs);
        // A configuration is applied by one 64-byte copy; model it as 3 µs.
        let span = (r.kernel_start, r.kernel_end);
        let mut capture = r.capture;
        capture.config_apply_ns = SIM_APPLY_NS;
        Ok(sim_launch(span, capture, seed))
    }
    fn launch_ebpf(
        &mut self,
        s: &Schedule,
        seed: u64,
        d: &Diagnosis,
    ) -> Option<Result<Launch, String>> {
        Some(d.attach().and_then(|mut att| {
            let r = sim::run_with_programs(s, &d.config(), seed, &self.costs, Some(&mut att));
            // Swapping a verified program in is one bank copy: modelled as a configuration's.
            let capture =
                diagnosis::capture(d, &att, s.workers, r.capture.kernel_ns, SIM_APPLY_NS)?;
            Ok(sim_launch((r.kernel_start, r.kernel_end), capture, seed))
        }))
    }
}

/// The simulator's model of applying a configuration (or swapping a program bank) to a loaded kernel, ns.
const SIM_APPLY_NS: u64 = 3_000;

/// A simulated launch (the kernel's start and end) as kernel-level CUPTI and the monitor saw it.
fn sim_launch((start, end): (u64, u64), capture: Capture, seed: u64) -> Launch {
    let api_start = SIM_CLOCK_BASE - 6_000;
    Launch {
        kernel: KernelObs {
            api_start,
            api_end: api_start + 4_000,
            queued: api_start + 3_000,
            submitted: api_start + 4_500,
            start,
            end,
            correlation_id: (seed % 100_000) as u32 + 1,
            stream: 7,
            context: 1,
            device: 0,
            tid: 4242,
        },
        device_start: start,
        capture,
        error: 0,
    }
}

/// Name of the PC-sampling capture.
pub const PC_SAMPLING: &str = "pc-sampling";

/// The monitors every case is captured with, in order. The first must be `none`.
pub fn standard_monitors() -> Vec<MonitorConfig> {
    vec![
        MonitorConfig::none(),
        MonitorConfig::task_log(u32::MAX),
        MonitorConfig::aggregate(),
        MonitorConfig::task_log_budget(24),
        MonitorConfig::aggregate_sampled(8, 0x5eed),
    ]
}

/// One recorded case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub bundle: Bundle,
    pub telemetry: TaskTelemetry,
    /// Outer kernel ns of the twin and of this variant with the `none` monitor.
    pub twin_ns: u64,
    pub kernel_ns: u64,
    /// Calibration steps taken (0 for a variant not matched to another).
    pub calibration_steps: u32,
    /// The injected schedule as run, and the family's no-injection twin.
    pub schedule: Schedule,
    pub twin: Schedule,
}

/// Options of [`run_family`].
#[derive(Debug, Clone)]
pub struct FamilyOptions {
    pub repetition: u32,
    pub monitors: Vec<MonitorConfig>,
    /// Calibration target: |lateness − target| ≤ this share of the twin's duration.
    pub match_tolerance: f64,
    pub max_calibration_steps: u32,
    /// Launches per measurement of the `none` monitor (median).
    pub measure_launches: u32,
}

impl Default for FamilyOptions {
    fn default() -> Self {
        FamilyOptions {
            repetition: 0,
            monitors: standard_monitors(),
            match_tolerance: 0.01,
            max_calibration_steps: 3,
            measure_launches: 1,
        }
    }
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn measure(
    ex: &mut dyn Executor,
    s: &Schedule,
    n: u32,
    seed: u64,
) -> Result<(u64, Launch), String> {
    let cfg = MonitorConfig::none();
    let mut v = Vec::new();
    let mut last = None;
    for i in 0..n.max(1) {
        let l = ex.launch(s, &cfg, mix2(seed, i as u64))?;
        if l.error != 0 {
            return Err(format!("device error bits {:#x}", l.error));
        }
        v.push(l.capture.kernel_ns);
        last = Some(l);
    }
    Ok((median(v), last.expect("at least one launch")))
}

/// Runs every variant of one family (the variants must share the family's
/// workload). Variants with `match_variant` are run after the one they match.
pub fn run_family(
    ex: &mut dyn Executor,
    variants: &[MkScenario],
    opt: &FamilyOptions,
) -> Result<Vec<CaseResult>, String> {
    let Some(first) = variants.first() else {
        return Ok(Vec::new());
    };
    let workers = if first.workers == 0 {
        ex.default_workers()
    } else {
        first.workers
    };
    let seed = mix2(first.seed, opt.repetition as u64);
    let twin = schedule::build(first, workers, None);
    let (twin_ns, _) = measure(ex, &twin, opt.measure_launches, mix2(seed, 1))?;
    // The twin under every monitor: the known-good reference a profiler compares against.
    let mut reference = Vec::new();
    for (i, m) in opt.monitors.iter().enumerate() {
        let l = ex.launch(&twin, m, mix2(seed, 50 + i as u64))?;
        if l.error != 0 {
            return Err(format!(
                "{} twin: device error bits {:#x} with monitor {}",
                first.family, l.error, m.name
            ));
        }
        reference.push(l.capture);
    }
    if let Some(l) = ex.launch_pc_sampling(&twin, mix2(seed, 49)) {
        reference.push(l?.capture);
    }
    for (i, d) in diagnosis::ALL.iter().enumerate() {
        if let Some(l) = ex.launch_ebpf(&twin, mix2(seed, 40 + i as u64), d) {
            reference.push(l?.capture);
        }
    }
    let mut order: Vec<&MkScenario> = variants
        .iter()
        .filter(|v| v.injection.match_variant.is_none())
        .collect();
    order.extend(
        variants
            .iter()
            .filter(|v| v.injection.match_variant.is_some()),
    );
    let mut lateness: Vec<(String, f64)> = Vec::new();
    let mut out = Vec::new();
    for sc in order {
        let (target, requested_us) = match &sc.injection.match_variant {
            Some(m) => {
                let l = lateness
                    .iter()
                    .find(|(v, _)| v == m)
                    .map(|(_, l)| *l)
                    .ok_or_else(|| {
                        format!(
                            "{}: match_variant `{m}` is not a variant of family {} run before it",
                            sc.name, sc.family
                        )
                    })?;
                (l, l / 1e3)
            }
            None => (sc.injection.magnitude_us * 1e3, sc.injection.magnitude_us),
        };
        let mut amount = schedule::amount_for(sc, workers, target);
        let mut s = schedule::build(sc, workers, Some(amount));
        let (mut k_ns, _) = measure(ex, &s, opt.measure_launches, mix2(seed, 2))?;
        let mut steps = 0;
        if sc.injection.match_variant.is_some() {
            while steps < opt.max_calibration_steps {
                let late = k_ns as f64 - twin_ns as f64;
                if (late - target).abs() <= opt.match_tolerance * twin_ns as f64 || late <= 0.0 {
                    break;
                }
                amount = Amount(amount.0 * target / late);
                s = schedule::build(sc, workers, Some(amount));
                k_ns = measure(ex, &s, opt.measure_launches, mix2(seed, 3 + steps as u64))?.0;
                steps += 1;
            }
        }
        lateness.push((sc.variant.clone(), k_ns as f64 - twin_ns as f64));
        // One launch per monitor; the full log is the truth.
        let mut captures = Vec::new();
        let mut truth: Option<Launch> = None;
        let mut none_launch: Option<Launch> = None;
        for (i, m) in opt.monitors.iter().enumerate() {
            let l = ex.launch(&s, m, mix2(seed, 100 + i as u64))?;
            if l.error != 0 {
                return Err(format!(
                    "{}: device error bits {:#x} with monitor {}",
                    sc.name, l.error, m.name
                ));
            }
            if m.log && !m.is_budgeted() && truth.is_none() {
                truth = Some(l.clone());
            }
            if m.name == "none" {
                none_launch = Some(l.clone());
            }
            captures.push(l.capture);
        }
        if let Some(l) = ex.launch_pc_sampling(&s, mix2(seed, 99)) {
            captures.push(l?.capture);
        }
        for (i, d) in diagnosis::ALL.iter().enumerate() {
            if let Some(l) = ex.launch_ebpf(&s, mix2(seed, 90 + i as u64), d) {
                captures.push(l?.capture);
            }
        }
        let truth = truth.ok_or("the monitors include no full task log (the truth)")?;
        let kernel = none_launch
            .as_ref()
            .map(|l| l.kernel)
            .unwrap_or(truth.kernel);
        // The truth's task times come from the full-log launch; the kernel as
        // CUPTI saw it from the unmonitored launch.
        let (bundle, mut telemetry) = bundle::build(CaseInputs {
            scenario: sc,
            repetition: opt.repetition,
            schedule: &s,
            truth_capture: &truth.capture,
            device_start: truth.device_start,
            kernel: shift_to(truth.kernel, kernel),
            twin_kernel_ns: twin_ns,
            requested_us,
            captures,
            env: &ex.env(),
        });
        telemetry.reference = reference.clone();
        let kernel_ns = none_launch.map(|l| l.capture.kernel_ns).unwrap_or(k_ns);
        out.push(CaseResult {
            bundle,
            telemetry,
            twin_ns,
            kernel_ns,
            calibration_steps: steps,
            schedule: s.clone(),
            twin: twin.clone(),
        });
    }
    Ok(out)
}

/// The unmonitored launch's kernel record placed where the truth launch ran,
/// so task nodes (mapped through the truth launch's clock offset) fall inside it.
fn shift_to(truth: KernelObs, none: KernelObs) -> KernelObs {
    let dur = none.end - none.start;
    KernelObs {
        end: truth.start + dur,
        ..truth
    }
}
