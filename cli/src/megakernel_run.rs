//! `causalbench megakernel run`: the megakernel track's experiment on the GPU
//! (or the simulator), in one command that ends well inside its time budget
//! and writes what it has after every step, atomically:
//!
//! - every family of `megakernel/catalog/` × N repetitions: the twin, each
//!   variant (a matched variant calibrated to its pair's lateness), one launch
//!   per monitor (none, task-log, aggregate, task-log-budget, aggregate-sampled)
//!   and per diagnosis program (ebpf, ebpf-sampled: `megakernel::bpf::diagnosis`);
//!   bundles + sidecars in `OUT/FAMILY.cases.jsonl.gz`;
//! - pairs: outer kernel durations of the two variants (within 5 %?) and the
//!   internal signature of each from its task log;
//! - the track's scores (`track-scores.jsonl`, `track-leaderboard.{json,md}`);
//! - perturbation: interleaved launches of one schedule under every monitor;
//! - on a GPU: time to apply a monitor configuration vs rebuilding the kernel
//!   (NVRTC); controls (the same work as one kernel per operator and as a CUDA
//!   graph); CUPTI PC sampling, tried and reported plainly;
//! - `OUT/summary.json`, rewritten after each step.

use crate::{BackendArg, Failure};
use ground_truth::megakernel::{Capture, MkScenario, MonitorConfig, PcSampling};
use megakernel::bpf::device::GpuPrograms;
use megakernel::case::{run_family, standard_monitors, CaseResult, Executor, FamilyOptions};
use megakernel::gpu::GpuExecutor;
use megakernel::pack::{self, PackedCase};
use megakernel::{schedule, signature};
use serde_json::{json, Value};
use std::path::Path;
use std::path::PathBuf;
use std::time::Instant;

/// `causalbench megakernel run`'s options.
#[derive(clap::Args)]
pub struct RunArgs {
    #[arg(long, default_value = "megakernel-check")]
    pub out: PathBuf,
    /// Repetitions of each family.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// `auto`: the GPU when one is present, else the simulator.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// Shorthand for `--backend sim`.
    #[arg(long, conflicts_with = "backend")]
    pub sim: bool,
    /// Start no new step after this many seconds.
    #[arg(long, default_value_t = 240.0)]
    pub budget_s: f64,
    /// Interleaved rounds of the perturbation measurement (each: one launch per monitor).
    #[arg(long, default_value_t = 15)]
    pub perturbation_rounds: u32,
}

/// `summary.json`, rewritten (atomically) on every change.
struct Summary {
    path: std::path::PathBuf,
    value: Value,
    started: Instant,
    budget_s: f64,
}

impl Summary {
    fn set(&mut self, key: &str, val: Value) {
        self.value[key] = val;
        self.value["elapsed_s"] = json!(self.started.elapsed().as_secs_f64());
        if let Err(e) = ground_truth::io::write_json_atomic(&self.path, &self.value) {
            eprintln!("causalbench: cannot write {}: {e}", self.path.display());
        }
    }

    fn push(&mut self, key: &str, val: Value) {
        if !self.value[key].is_array() {
            self.value[key] = json!([]);
        }
        let mut list = self.value[key].take();
        list.as_array_mut().expect("made an array above").push(val);
        self.set(key, list);
    }

    fn over_budget(&self) -> bool {
        self.started.elapsed().as_secs_f64() > self.budget_s
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn median(v: &mut [u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

fn case_summary(c: &CaseResult) -> Value {
    let t = &c.telemetry;
    json!({
        "bundle": c.bundle.id(),
        "family": t.scenario.family,
        "variant": t.scenario.variant,
        "cause": t.truth.cause,
        "class": t.truth.affected_class,
        "realised": t.truth.realised,
        "twin_us": us(c.twin_ns),
        "kernel_us": us(c.kernel_ns),
        "lateness_us": (c.kernel_ns as f64 - c.twin_ns as f64) / 1e3,
        "requested_us": t.truth.requested_us,
        "calibration_steps": c.calibration_steps,
        "injected_tasks": t.truth.injected_tasks.len(),
        "monitors": t.captures.iter().map(|x| {
            let cov = x.total_coverage();
            json!({
                "name": x.config.name,
                "kernel_us": us(x.kernel_ns),
                "bytes_exported": x.bytes_exported,
                "events": x.events.len(),
                "eligible": cov.eligible,
                "observed": cov.observed,
                "dropped": cov.dropped,
                "coverage": cov.ratio(),
                "config_apply_us": us(x.config_apply_ns),
            })
        }).collect::<Vec<_>>(),
        "signature": signature::of_task_log(&c.bundle, t),
    })
}

/// The track's acceptance checks (megakernel/README.md), from the rows and the pairs measured.
fn acceptance(rows: &[evaluator::megakernel::TrackRow], summary: &Value) -> Value {
    let row = |p: &str, m: &str| rows.iter().find(|r| r.profiler == p && r.monitor == m);
    let pairs = summary["pairs"].as_array().cloned().unwrap_or_default();
    let within = pairs
        .iter()
        .filter(|p| p["within_5pct"] == json!(true))
        .count();
    let log_bytes = row("mk-task-log", "task-log").map(|r| r.mean_bytes_exported);
    let aggregate_bytes = row("mk-aggregate", "aggregate").map(|r| r.mean_bytes_exported);
    let false_confidence: Vec<Value> = rows
        .iter()
        .filter(|r| r.budgeted)
        .map(|r| json!({"profiler": r.profiler, "monitor": r.monitor, "false_confidence_rate": r.false_confidence_rate, "under_covered": r.under_covered}))
        .collect();
    json!({
        "pairs_within_5pct": format!("{within}/{}", pairs.len()),
        "kernel_cupti_pair_accuracy": row("mk-kernel-cupti", "none").and_then(|r| r.pair_accuracy),
        "aggregate_pair_accuracy": row("mk-aggregate", "aggregate").and_then(|r| r.pair_accuracy),
        "task_log_pair_accuracy": row("mk-task-log", "task-log").and_then(|r| r.pair_accuracy),
        "bytes_task_log_over_aggregate": match (log_bytes, aggregate_bytes) {
            (Some(l), Some(a)) if a > 0.0 => Some(l / a),
            _ => None,
        },
        "aggregate_perturbation_pct": row("mk-aggregate", "aggregate").map(|r| r.perturbation_pct),
        "task_log_perturbation_pct": row("mk-task-log", "task-log").map(|r| r.perturbation_pct),
        "ebpf_pair_accuracy": row("mk-aggregate", "ebpf").and_then(|r| r.pair_accuracy),
        "ebpf_bytes": row("mk-aggregate", "ebpf").map(|r| r.mean_bytes_exported),
        "ebpf_perturbation_pct": row("mk-aggregate", "ebpf").map(|r| r.perturbation_pct),
        "budgeted_false_confidence": false_confidence,
    })
}

/// The GPU, when the options ask for it (or `auto` finds one), with the
/// kernel with hooks loaded beside the plain one (the diagnosis programs' captures).
fn open_gpu(args: &RunArgs, summary: &mut Summary) -> Result<Option<GpuPrograms>, Failure> {
    let backend = if args.sim {
        BackendArg::Sim
    } else {
        args.backend
    };
    let opened = match backend {
        BackendArg::Sim => return Ok(None),
        BackendArg::Auto if !generator::backend::gpu_present() => {
            eprintln!("causalbench: no GPU here: running the megakernel track on the simulator");
            return Ok(None);
        }
        _ => {
            let t = Instant::now();
            GpuExecutor::open(true)
                .and_then(GpuPrograms::new)
                .map(|g| (g, t.elapsed().as_secs_f64()))
        }
    };
    match (opened, backend) {
        (Ok((programs, open_s)), _) => {
            let g = &programs.gpu;
            summary.set(
                "device",
                json!({
                    "gpu": g.env().gpu, "driver": g.env().driver, "cuda": g.env().cuda,
                    "cupti": g.env().cupti, "sms": g.num_sms,
                    "cupti_recorder": g.recorder_error.clone().unwrap_or_else(|| "ok".into()),
                    "open_s": open_s,
                    "rebuild_ms": g.rebuild_ns as f64 / 1e6,
                    "hooks_compile_ms": programs.dev.compile_ns as f64 / 1e6,
                }),
            );
            Ok(Some(programs))
        }
        (Err(e), BackendArg::Auto) => {
            eprintln!("causalbench: the GPU cannot run the megakernel ({e}); using the simulator");
            Ok(None)
        }
        (Err(e), _) => Err(Failure::unavailable(format!(
            "`megakernel run --backend cuda` needs a GPU that can run the megakernel: {e}; \
             `--backend sim` runs the track on the simulator"
        ))),
    }
}

pub fn run(args: RunArgs) -> Result<(), Failure> {
    let families = crate::track::families()?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", args.out.display())))?;
    let mut summary = Summary {
        path: args.out.join("summary.json"),
        value: json!({"tool": "causalbench megakernel run", "version": env!("CARGO_PKG_VERSION"), "status": "starting"}),
        started: Instant::now(),
        budget_s: args.budget_s,
    };
    let result = open_gpu(&args, &mut summary).and_then(|mut gpu| {
        if gpu.is_none() {
            summary.set("device", json!({"gpu": "simulator"}));
        }
        experiment(&args, &families, gpu.as_mut(), &mut summary)
    });
    let status = match &result {
        Ok(()) => "done".to_string(),
        Err(f) => format!("error: {}", f.message),
    };
    summary.set("status", json!(status));
    eprintln!(
        "causalbench: megakernel run {status} in {:.1} s -> {}",
        summary.started.elapsed().as_secs_f64(),
        summary.path.display()
    );
    result
}

/// Repetition 0's case of a family: (index in all cases, family, injected schedule, twin).
type FirstCase = (usize, String, schedule::Schedule, schedule::Schedule);

fn experiment(
    args: &RunArgs,
    families: &[(String, Vec<MkScenario>)],
    mut gpu: Option<&mut GpuPrograms>,
    summary: &mut Summary,
) -> Result<(), Failure> {
    let mut sim = megakernel::SimExecutor::default();
    let on_gpu = gpu.is_some();
    let ex: &mut dyn Executor = match gpu.as_deref_mut() {
        Some(g) => g,
        None => &mut sim,
    };
    let recorded = record_families(args, families, ex, on_gpu, summary);
    let default_workers = ex.default_workers();
    let (scenario, workers) = recorded
        .family_twin
        .clone()
        .unwrap_or_else(|| (families[0].1[0].clone(), default_workers));
    let mut all_cases = recorded.cases;
    score(args, &all_cases, summary, None)?;
    if !summary.over_budget() && !recorded.device_failed {
        perturbation(args, ex, &scenario, workers, summary);
    }
    if let Some(GpuPrograms { gpu: g, .. }) = gpu {
        gpu_extras(g, &scenario, workers, summary);
        if !summary.over_budget() && !recorded.first_cases.is_empty() {
            pc_sampling(args, g, &recorded.first_cases, &mut all_cases, summary)?;
        }
    }
    if recorded.family_twin.is_none() {
        return Err(Failure::failed("no megakernel family ran to completion"));
    }
    Ok(())
}

struct Recorded {
    cases: Vec<PackedCase>,
    family_twin: Option<(MkScenario, u32)>,
    first_cases: Vec<FirstCase>,
    device_failed: bool,
}

/// Step 1: families × repetitions, each family's pack rewritten after every repetition.
fn record_families(
    args: &RunArgs,
    families: &[(String, Vec<MkScenario>)],
    ex: &mut dyn Executor,
    on_gpu: bool,
    summary: &mut Summary,
) -> Recorded {
    let mut out = Recorded {
        cases: Vec::new(),
        family_twin: None,
        first_cases: Vec::new(),
        device_failed: false,
    };
    let bar = crate::progress::bar(families.len() * args.reps as usize, "family runs");
    for (family, variants) in families {
        if out.device_failed {
            break;
        }
        let mut packed: Vec<PackedCase> = Vec::new();
        for rep in 0..args.reps {
            bar.set_message(format!("{family} r{rep}"));
            bar.inc(1);
            if summary.over_budget() {
                summary.push("skipped", json!(format!("{family} r{rep}: time budget")));
                continue;
            }
            let options = FamilyOptions {
                repetition: rep,
                measure_launches: if on_gpu { 3 } else { 1 },
                ..Default::default()
            };
            let t = Instant::now();
            let cases = match run_family(ex, variants, &options) {
                Ok(cases) => cases,
                Err(e) => {
                    crate::progress::say(&bar, format!("{family} r{rep}: {e}"));
                    summary.push("errors", json!(format!("{family} r{rep}: {e}")));
                    if e.contains("device error")
                        || e.contains("launching")
                        || e.contains("waiting for")
                    {
                        // The kernel itself failed: the rest would fail the same way.
                        out.device_failed = true;
                        break;
                    }
                    continue;
                }
            };
            let summaries: Vec<Value> = cases.iter().map(case_summary).collect();
            if cases.len() == 2 {
                let (a, b) = (cases[0].kernel_ns as f64, cases[1].kernel_ns as f64);
                let difference = (a - b).abs() / ((a + b) / 2.0);
                summary.push(
                    "pairs",
                    json!({
                        "family": family, "rep": rep,
                        "variants": [cases[0].telemetry.scenario.variant, cases[1].telemetry.scenario.variant],
                        "kernel_us": [us(cases[0].kernel_ns), us(cases[1].kernel_ns)],
                        "twin_us": us(cases[0].twin_ns),
                        "diff_pct": difference * 100.0,
                        "within_5pct": difference < 0.05,
                        "signatures": [summaries[0]["signature"].clone(), summaries[1]["signature"].clone()],
                    }),
                );
            }
            for s in summaries {
                summary.push("cases", s);
            }
            if out.family_twin.is_none() {
                out.family_twin = Some((variants[0].clone(), cases[0].telemetry.workers));
            }
            if rep == 0 {
                for (i, c) in cases.iter().enumerate() {
                    out.first_cases.push((
                        out.cases.len() + i,
                        family.clone(),
                        c.schedule.clone(),
                        c.twin.clone(),
                    ));
                }
            }
            let new: Vec<PackedCase> = cases
                .into_iter()
                .map(|c| PackedCase {
                    bundle: c.bundle,
                    telemetry: c.telemetry,
                })
                .collect();
            out.cases.extend(new.iter().cloned());
            packed.extend(new);
            write_pack(&args.out, family, &packed, summary);
            crate::progress::say(
                &bar,
                format!("{family} r{rep}: {:.2} s", t.elapsed().as_secs_f64()),
            );
        }
    }
    bar.finish_and_clear();
    out
}

fn write_pack(out: &Path, family: &str, cases: &[PackedCase], summary: &mut Summary) {
    let path = crate::track::pack_path(out, family);
    if let Err(e) = pack::write(&path, cases) {
        summary.push("errors", json!(format!("{}: {e}", path.display())));
    }
}

/// Step 1b (CPU only): every track profiler on every capture it reads.
fn score(
    args: &RunArgs,
    cases: &[PackedCase],
    summary: &mut Summary,
    note: Option<&str>,
) -> Result<(), Failure> {
    let t = Instant::now();
    let (scored, rows) = crate::track::write(&args.out, cases)?;
    eprintln!("{}", evaluator::megakernel::track_markdown(&rows));
    let acceptance = acceptance(&rows, &summary.value);
    summary.set(
        "track",
        json!({
            "scored_cases": scored,
            "score_s": t.elapsed().as_secs_f64(),
            "rows": rows,
            "acceptance": acceptance,
            "note": note,
        }),
    );
    Ok(())
}

/// Step 2: interleaved launches of the twin under each monitor.
fn perturbation(
    args: &RunArgs,
    ex: &mut dyn Executor,
    scenario: &MkScenario,
    workers: u32,
    summary: &mut Summary,
) {
    let twin = schedule::build(scenario, workers, None);
    let monitors = standard_monitors();
    let mut kernel: Vec<Vec<u64>> = vec![Vec::new(); monitors.len()];
    let mut apply: Vec<Vec<u64>> = vec![Vec::new(); monitors.len()];
    let mut error = None;
    'rounds: for round in 0..args.perturbation_rounds {
        for (i, m) in monitors.iter().enumerate() {
            match ex.launch(&twin, m, round as u64) {
                Ok(l) => {
                    kernel[i].push(l.capture.kernel_ns);
                    apply[i].push(l.capture.config_apply_ns);
                }
                Err(e) => {
                    error = Some(e);
                    break 'rounds;
                }
            }
        }
        if summary.over_budget() {
            break;
        }
    }
    let base = median(&mut kernel[0].clone()) as f64;
    let rows: Vec<Value> = monitors
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let med = median(&mut kernel[i]) as f64;
            json!({
                "monitor": m.name,
                "launches": kernel[i].len(),
                "median_kernel_us": med / 1e3,
                "min_kernel_us": kernel[i].iter().min().map(|&x| us(x)),
                "max_kernel_us": kernel[i].iter().max().map(|&x| us(x)),
                "overhead_pct": if base > 0.0 { (med / base - 1.0) * 100.0 } else { 0.0 },
                "median_config_apply_us": us(median(&mut apply[i])),
            })
        })
        .collect();
    summary.set(
        "perturbation",
        json!({"schedule": scenario.name, "rounds": args.perturbation_rounds, "rows": rows, "error": error}),
    );
}

/// Step 3 (GPU only): configuration apply vs rebuild, and the controls.
fn gpu_extras(g: &mut GpuExecutor, scenario: &MkScenario, workers: u32, summary: &mut Summary) {
    let warm: Vec<f64> = (0..3)
        .filter_map(|_| g.measure_rebuild().ok())
        .map(|ns| ns as f64 / 1e6)
        .collect();
    summary.set(
        "config_apply",
        json!({
            "rebuild_ms": g.rebuild_ns as f64 / 1e6,
            "rebuild_warm_ms": warm,
            "note": "rebuild = NVRTC compile + module load of megakernel.cu (first: cold, includes loading NVRTC; warm: three more); applying a configuration = one 64-byte copy + synchronize (per-monitor medians under perturbation.rows)",
        }),
    );
    if summary.over_budget() {
        return;
    }
    let mut rows = Vec::new();
    for (label, injected) in [("twin", false), ("class-delay", true)] {
        let amount = injected.then(|| {
            schedule::amount_for(scenario, workers, scenario.injection.magnitude_us * 1e3)
        });
        let s = schedule::build(scenario, workers, amount);
        match g.controls(&s, 5) {
            Ok(c) => {
                let mut per_op = c.kernel_per_op_ns.clone();
                let mut graph = c.cuda_graph_ns.clone();
                let mut mega = c.megakernel_ns.clone();
                rows.push(json!({
                    "schedule": label, "kernels_per_run": c.kernels_per_run,
                    "kernel_per_op_median_us": us(median(&mut per_op)),
                    "cuda_graph_median_us": us(median(&mut graph)),
                    "megakernel_median_us": us(median(&mut mega)),
                    "raw": c,
                }));
            }
            Err(e) => rows.push(json!({"schedule": label, "error": e})),
        }
        summary.set("controls", json!(rows));
    }
}

/// Step 4 (GPU only): CUPTI PC sampling, one sampled launch per case of
/// repetition 0 and per family twin, attached to the cases as `pc-sampling`
/// captures; packs rewritten, the track re-scored. Last, so nothing else is at
/// stake if the driver misbehaves under sampling.
fn pc_sampling(
    args: &RunArgs,
    g: &mut GpuExecutor,
    first_cases: &[FirstCase],
    all_cases: &mut [PackedCase],
    summary: &mut Summary,
) -> Result<(), Failure> {
    let mut schedules: Vec<&schedule::Schedule> = Vec::new();
    let mut twins_of: Vec<String> = Vec::new();
    for (_, family, _, twin) in first_cases {
        if !twins_of.contains(family) {
            twins_of.push(family.clone());
            schedules.push(twin);
        }
    }
    let twins = schedules.len();
    schedules.extend(first_cases.iter().map(|(_, _, s, _)| s));
    let t = Instant::now();
    let sampled = g.pc_sampling_collect(&schedules);
    let available = sampled.first().is_some_and(|(p, _)| p.available);
    summary.set(
        "pc_sampling",
        json!({
            "available": available,
            "launches": sampled.len(),
            "seconds": t.elapsed().as_secs_f64(),
            "detail": sampled.first().map(|(p, _)| p.detail.clone()),
            "samples": sampled.iter().map(|(p, ns)| json!({
                "class_samples": p.class_samples, "wait": p.wait_samples,
                "idle": p.idle_samples, "kernel_us": us(*ns)})).collect::<Vec<_>>(),
        }),
    );
    if !available || sampled.len() != schedules.len() {
        return Ok(());
    }
    let capture = |p: &PcSampling, ns: u64| Capture {
        config: MonitorConfig {
            name: megakernel::case::PC_SAMPLING.into(),
            ..MonitorConfig::none()
        },
        kernel_ns: ns,
        events: Vec::new(),
        aggregates: None,
        coverage: Vec::new(),
        bytes_exported: 0,
        config_apply_ns: 0,
        pc_sampling: Some(p.clone()),
    };
    for (k, (index, family, _, _)) in first_cases.iter().enumerate() {
        let twin = twins_of.iter().position(|f| f == family).unwrap_or(0);
        let (twin_samples, twin_ns) = &sampled[twin];
        let (samples, ns) = &sampled[twins + k];
        let t = &mut all_cases[*index].telemetry;
        t.captures.push(capture(samples, *ns));
        t.reference.push(capture(twin_samples, *twin_ns));
    }
    for family in &twins_of {
        let cases: Vec<PackedCase> = all_cases
            .iter()
            .filter(|c| &c.telemetry.scenario.family == family)
            .cloned()
            .collect();
        write_pack(&args.out, family, &cases, summary);
    }
    score(
        args,
        all_cases,
        summary,
        Some("pc-sampling captures exist for repetition 0 only"),
    )
}
