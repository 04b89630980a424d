//! `causalbench measure …`: the recorder and injector studies on the GPU whose
//! figures `results/h200-580/MEASUREMENTS.md` reports. Each writes one JSON
//! file (atomically) with every raw value beside its summary.

use crate::gpu;
use crate::Failure;
use generator::cuda::CudaBackend;
use generator::Backend;
use ground_truth::graph::NodeKind;
use ground_truth::io::Readable;
use ground_truth::scenario::{InjectionKind, Step};
use ground_truth::trace::HostMemory;
use ground_truth::Scenario;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

mod profiler_cost;

/// `causalbench measure`'s studies.
#[derive(clap::Subcommand)]
pub enum MeasureCommand {
    /// Every injection type (the first suite scenario of each kind) at 1 ms and
    /// 5 ms requested: symptom lateness against the no-injection twin, also with
    /// the scenario's copies pinned when it has pageable ones (bundles not kept).
    Injections(InjectionArgs),
    /// Every suite scenario R times; per paired family, the difference in
    /// median lateness between its variants.
    Pairs(PairsArgs),
    /// Real CUPTI record loss: a launch-bound run with CUPTI given two 64 KB
    /// activity buffers, against the same run with the normal supply.
    Starve(StarveArgs),
    /// The eBPF host recorder's cost: launch-bound runs with it attached and
    /// without, interleaved.
    EbpfOverhead(EbpfOverheadArgs),
    /// The generator's launch cost against a direct cudarc launch loop.
    LaunchOverhead(LaunchOverheadArgs),
    /// What each collector configuration (none, CUPTI, eBPF, both) costs a
    /// launch-bound and a realistic workload: interleaved repetitions, the
    /// wall-time ratio to the same repetition without collectors, records and
    /// bytes per operation. `run --costs FILE` puts it on the leaderboard.
    Collectors(CollectorsArgs),
    /// What one hit of each eBPF recorder mechanism costs on this machine (no
    /// GPU needed): uprobe, return probe, each stack capture, sched and fault
    /// tracepoints, each against the same work without it, interleaved.
    ProbeCost(ProbeCostArgs),
    /// One large case on the simulator, stage by stage: seconds and peak RSS of
    /// recording, the bundle's and view's files, the view, causal-graph and the score.
    Large(crate::measure_large::LargeArgs),
    /// What one external profiler adds to a run per view it explains, against the
    /// built-in profilers' run per view: the same run twice, without and with it
    /// (`-- RUN OPTIONS` for both), timed end to end (no GPU needed).
    ProfilerCost(profiler_cost::ProfilerCostArgs),
}

#[derive(clap::Args)]
pub struct CollectorsArgs {
    /// Empty-kernel launches of the launch-bound workload.
    #[arg(long, default_value_t = 100_000)]
    pub launches: u32,
    /// Kernels (10-100 us each) of the realistic workload.
    #[arg(long, default_value_t = 4_000)]
    pub kernels: u32,
    /// Interleaved repetitions of every configuration (at least 5 for the leaderboard).
    #[arg(long, default_value_t = 5)]
    pub reps: u32,
    #[arg(long, default_value = "collectors.json")]
    pub out: PathBuf,
}

#[derive(clap::Args)]
pub struct ProbeCostArgs {
    /// Calls of the probed function per timed loop.
    #[arg(long, default_value_t = 200_000)]
    pub calls: u32,
    /// Token hand-offs between two threads per timed loop.
    #[arg(long, default_value_t = 20_000)]
    pub switches: u32,
    /// Fresh pages touched per timed loop.
    #[arg(long, default_value_t = 20_000)]
    pub pages: u32,
    /// Interleaved repetitions of every configuration.
    #[arg(long, default_value_t = 5)]
    pub reps: u32,
    #[arg(long, default_value = "probe-cost.json")]
    pub out: PathBuf,
}

/// Scenarios and recorder of the lateness studies.
#[derive(clap::Args)]
pub struct StudySuite {
    /// `catalog` (the embedded suite), a generated split (`dev`, `test`) or a
    /// directory of scenario files.
    #[arg(long, default_value = crate::catalog::DEFAULT_SUITE)]
    pub suite: String,
    /// Keep the eBPF host recorder attached (attaching costs seconds a run: off by default).
    #[arg(long)]
    pub ebpf: bool,
}

#[derive(clap::Args)]
pub struct InjectionArgs {
    /// Repetitions per injection type and magnitude.
    #[arg(long, default_value_t = 20)]
    pub reps: u32,
    /// Only these injection kinds (comma-separated, e.g. `sync_wait,delayed_memcpy`).
    #[arg(long, value_delimiter = ',')]
    pub kinds: Vec<String>,
    #[command(flatten)]
    pub suite: StudySuite,
    #[arg(long, default_value = "injection-table.json")]
    pub out: PathBuf,
}

#[derive(clap::Args)]
pub struct PairsArgs {
    /// Repetitions per scenario.
    #[arg(long, default_value_t = 10)]
    pub reps: u32,
    #[command(flatten)]
    pub suite: StudySuite,
    #[arg(long, default_value = "pairs.json")]
    pub out: PathBuf,
}

#[derive(clap::Args)]
pub struct StarveArgs {
    /// Kernel launches of the launch-bound run.
    #[arg(long, default_value_t = 2000)]
    pub kernels: u32,
    /// The summary; both bundles (`starve-check.{normal,starved}.bundle.json`) are written beside it.
    #[arg(long, default_value = "starve-check.json")]
    pub out: PathBuf,
}

#[derive(clap::Args)]
pub struct EbpfOverheadArgs {
    /// Kernel launches per run.
    #[arg(long, default_value_t = 100_000)]
    pub launches: u32,
    /// Interleaved (with, without) pairs.
    #[arg(long, default_value_t = 5)]
    pub reps: u32,
    #[arg(long, default_value = "ebpf-overhead.json")]
    pub out: PathBuf,
}

#[derive(clap::Args)]
pub struct LaunchOverheadArgs {
    /// Empty kernels per run.
    #[arg(long, default_value_t = 100_000)]
    pub kernels: u32,
    /// Repetitions of each loop.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    #[arg(long, default_value = "launch-overhead.json")]
    pub out: PathBuf,
}

pub fn measure(command: MeasureCommand) -> Result<(), Failure> {
    let (out, value) = match command {
        MeasureCommand::Large(a) => return crate::measure_large::large(&a),
        MeasureCommand::ProfilerCost(a) => return profiler_cost::profiler_cost(&a),
        MeasureCommand::Injections(a) => {
            let scenarios = crate::catalog::load_suite(&a.suite.suite, None)?;
            let be = study_backend("measure injections", &a.suite)?;
            (a.out, injection_study(&be, &scenarios, a.reps, &a.kinds))
        }
        MeasureCommand::Pairs(a) => {
            let scenarios = crate::catalog::load_suite(&a.suite.suite, None)?;
            let be = study_backend("measure pairs", &a.suite)?;
            (a.out, pairs_study(&be, &scenarios, a.reps))
        }
        MeasureCommand::Starve(a) => {
            let be = gpu::open("measure starve")?;
            // Host records are beside the point here, and attaching costs seconds a run.
            gpu::host_recorder(&be, false)?;
            let dir = a.out.parent().unwrap_or(Path::new("")).to_path_buf();
            (a.out, starve_check(&be, a.kernels, &dir)?)
        }
        MeasureCommand::EbpfOverhead(a) => {
            let be = gpu::open("measure ebpf-overhead")?;
            let o = benchmark("eBPF overhead", || be.ebpf_overhead(a.launches, a.reps))?;
            let value = json!({
                "kernels": o.kernels, "with_ns": o.with_ns, "without_ns": o.without_ns,
                "ratio_median": o.ratio, "uprobes": o.uprobes,
                "ringbuffer_dropped": o.ringbuffer_dropped, "start_ns": o.start_ns,
                "stop_ns": o.stop_ns, "error": o.error,
            });
            (a.out, value)
        }
        MeasureCommand::Collectors(a) => {
            let be = gpu::open("measure collectors")?;
            let costs = benchmark("collector costs", || {
                be.collector_costs(a.launches, a.kernels, a.reps)
            })?;
            for w in &costs.workloads {
                for c in &w.configurations {
                    eprintln!(
                        "causalbench: {:<12} {:<10} x{:.3} [{:.3}, {:.3}]  {:.2} records/op  {:.0} bytes/op",
                        w.workload, c.collectors, c.overhead_median, c.overhead_min,
                        c.overhead_max, c.records_per_op, c.bytes_per_op
                    );
                }
            }
            if let Some(e) = &costs.error {
                eprintln!("causalbench: measure collectors stopped early: {e}");
            }
            let value = serde_json::to_value(&costs)
                .map_err(|e| Failure::failed(format!("measure collectors: {e}")))?;
            (a.out, value)
        }
        MeasureCommand::ProbeCost(a) => {
            let study = ebpf_recorder::cost::CostStudy {
                calls: a.calls,
                switches: a.switches,
                pages: a.pages,
                reps: a.reps,
            };
            let bar = crate::progress::bar(1, "eBPF probe cost");
            let cost = ebpf_recorder::cost::probe_cost(study);
            bar.finish_and_clear();
            let cost = cost.map_err(|e| Failure::failed(format!("measure probe-cost: {e}")))?;
            for t in cost.uprobes.iter().chain(&cost.sched).chain(&cost.faults) {
                eprintln!(
                    "causalbench: {:<46} {:>9.1} ns/op  {:>+8.1} ns/hit",
                    t.name, t.median_ns_per_op, t.cost_ns_per_hit
                );
            }
            let value = serde_json::to_value(&cost)
                .map_err(|e| Failure::failed(format!("measure probe-cost: {e}")))?;
            (a.out, value)
        }
        MeasureCommand::LaunchOverhead(a) => {
            let be = gpu::open("measure launch-overhead")?;
            let o = benchmark("launch overhead", || be.launch_overhead(a.kernels, a.reps))?;
            let value = json!({
                "kernels": o.kernels, "direct_ns": o.direct_ns, "generator_ns": o.generator_ns,
                "direct_bound_ns": o.direct_bound_ns, "spin_overhead_ns": o.spin_overhead_ns,
                "generator_closed_ns": o.generator_closed_ns,
                "record_ns": o.record_ns, "ratio_median": o.ratio,
                "bound": o.bound, "device_ops": o.device_ops,
            });
            (a.out, value)
        }
    };
    gpu::write_json(&out, &value)?;
    eprintln!("causalbench: wrote {}", out.display());
    Ok(())
}

/// One of the backend's own benchmarks, under a spinner.
fn benchmark<T>(
    what: &str,
    run: impl FnOnce() -> Result<T, generator::RecordError>,
) -> Result<T, Failure> {
    let bar = crate::progress::bar(1, what);
    let result = run();
    bar.finish_and_clear();
    result.map_err(Failure::failed)
}

fn study_backend(command: &str, suite: &StudySuite) -> Result<CudaBackend, Failure> {
    let be = gpu::open(command)?;
    gpu::host_recorder(&be, suite.ebpf)?;
    Ok(be)
}

/// Symptom lateness (µs) and the first injection's measured size (µs) of `reps`
/// recordings of `sc`, and the errors of those that failed.
fn lateness_runs(be: &CudaBackend, sc: &Scenario, reps: u32) -> (Vec<f64>, Vec<f64>, Vec<String>) {
    let (mut late, mut measured, mut errors) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..reps {
        match be.record(sc, rep) {
            Ok(b) => {
                late.push(b.ground_truth.symptoms[0].lateness_ns / 1e3);
                measured.push(
                    b.ground_truth
                        .injections
                        .first()
                        .map(|i| i.measured_us)
                        .unwrap_or(f64::NAN),
                );
            }
            Err(e) => errors.push(e.to_string()),
        }
        // The studies keep no per-run measurements: drop them as they come.
        let _ = be.take_stats();
    }
    (late, measured, errors)
}

fn quantiles(v: &[f64]) -> Value {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        if v.is_empty() {
            f64::NAN
        } else {
            v[((v.len() - 1) as f64 * p).round() as usize]
        }
    };
    json!({"n": v.len(), "min": q(0.0), "p10": q(0.1), "median": q(0.5), "p90": q(0.9), "max": q(1.0)})
}

/// The variants an injection type is measured in: the scenario as it is; with
/// its pageable copies pinned (a pageable copy's own jitter, large because the
/// CPU stages it, limits how precisely lengthening one, or waiting behind one,
/// shows an injection); and for minor page faults, the same scenario with
/// major faults (no suite scenario asks for them).
fn injection_variants(sc: &Scenario, kind: InjectionKind) -> Vec<(Scenario, String)> {
    let mut variants = vec![(sc.clone(), String::new())];
    if let Some(pinned) = with_copies_pinned(sc) {
        variants.push((pinned, " (copies pinned)".to_string()));
    }
    if kind == InjectionKind::HostPageFaultMinor {
        let mut major = sc.clone();
        if let Some(i) = major.injection.as_mut() {
            i.kind = InjectionKind::HostPageFaultMajor;
        }
        variants.push((major, " -> host_page_fault_major".to_string()));
    }
    variants
}

/// Each injection type at 1 ms and 5 ms requested (`measurements/injection-table.json`).
fn injection_study(be: &CudaBackend, scenarios: &[Scenario], reps: u32, kinds: &[String]) -> Value {
    let mut seen = BTreeSet::new();
    let mut plan = Vec::new();
    for sc in scenarios {
        let Some(inj) = &sc.injection else { continue };
        let kind = inj.kind.as_str().to_string();
        if inj.kind == InjectionKind::RecordLoss || !seen.insert(kind.clone()) {
            continue;
        }
        if !kinds.is_empty() && !kinds.contains(&kind) {
            continue;
        }
        for (variant, note) in injection_variants(sc, inj.kind) {
            for magnitude_us in [1000.0, 5000.0] {
                plan.push((kind.clone(), variant.clone(), note.clone(), magnitude_us));
            }
        }
    }
    let bar = crate::progress::bar(plan.len(), "injection rows");
    let mut rows = Vec::new();
    for (kind, sc, note, magnitude_us) in plan {
        let mut s = sc.clone();
        if let Some(i) = s.injection.as_mut() {
            i.magnitude_us = magnitude_us;
        }
        bar.set_message(format!("{kind}{note} {magnitude_us} us"));
        let t = Instant::now();
        let (late, measured, errors) = lateness_runs(be, &s, reps);
        let within = late
            .iter()
            .filter(|&&l| (l - magnitude_us).abs() <= 0.1 * magnitude_us)
            .count();
        let row = json!({
            "kind": format!("{kind}{note}"), "scenario": sc.name, "requested_us": magnitude_us,
            "reps": reps, "ok": late.len(),
            "within_10pct": within,
            "within_10pct_percent": 100.0 * within as f64 / late.len().max(1) as f64,
            "lateness_us": quantiles(&late),
            "injection_measured_us": quantiles(&measured),
            "lateness_all_us": late,
            "errors": errors, "seconds": t.elapsed().as_secs_f64(),
        });
        crate::progress::say(
            &bar,
            format!(
                "{:44} {magnitude_us:>6} us: within 10 % {within}/{} median {}",
                format!("{kind}{note}"),
                row["ok"],
                row["lateness_us"]["median"]
            ),
        );
        rows.push(row);
        bar.inc(1);
    }
    bar.finish_and_clear();
    json!(rows)
}

/// The scenario with every pageable copy in pinned host memory, when it has any.
fn with_copies_pinned(sc: &Scenario) -> Option<Scenario> {
    let mut s = sc.clone();
    let mut changed = false;
    for step in s.programs.iter_mut().flat_map(|p| p.steps.iter_mut()) {
        if let Step::Copy { memory, .. } = step {
            if *memory == HostMemory::Pageable {
                *memory = HostMemory::Pinned;
                changed = true;
            }
        }
    }
    changed.then_some(s)
}

/// The paired families at their suite magnitudes (`measurements/pairs.json`).
fn pairs_study(be: &CudaBackend, scenarios: &[Scenario], reps: u32) -> Value {
    let mut by_family: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let bar = crate::progress::bar(scenarios.len(), "scenarios");
    for sc in scenarios {
        bar.set_message(sc.name.clone());
        let (late, _, errors) = lateness_runs(be, sc, reps);
        let median = {
            let mut v = late.clone();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
        };
        crate::progress::say(
            &bar,
            format!("{:60} median lateness {median:.1} us", sc.name),
        );
        by_family.entry(sc.family.clone()).or_default().push(json!({
            "variant": sc.variant, "scenario": sc.name,
            "cause": sc.injection.as_ref().map(|i| i.kind.as_str().to_string()),
            "requested_us": sc.injection.as_ref().map(|i| i.magnitude_us),
            "median_lateness_us": median, "lateness_us": quantiles(&late),
            "lateness_all_us": late, "errors": errors,
        }));
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut out = Vec::new();
    for (family, variants) in by_family {
        let medians: Vec<f64> = variants
            .iter()
            .filter_map(|v| v["median_lateness_us"].as_f64())
            .filter(|m| m.is_finite())
            .collect();
        let (lo, hi) = medians
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &m| (a.min(m), b.max(m)));
        let difference = if medians.len() >= 2 && hi > 0.0 {
            (hi - lo) / hi
        } else {
            f64::NAN
        };
        out.push(json!({
            "family": family, "variants": variants,
            "max_relative_difference": difference,
            "under_20pct": medians.len() >= 2 && difference < 0.2,
        }));
    }
    json!(out)
}

/// Real CUPTI record loss (`measurements/starve-check.json`): CUPTI's dropped
/// count must reach the bundle and every op must still be in the ground truth.
fn starve_check(be: &CudaBackend, ops: u32, dir: &Path) -> Result<Value, Failure> {
    let sc = generator::sim::launch_bound_scenario(ops);
    let budget = (2usize, 64usize << 10);
    let bar = crate::progress::bar(2, "runs");
    let run = |starved: bool| -> Result<Value, Failure> {
        be.set_cupti_starvation(starved.then_some(budget))
            .map_err(Failure::failed)?;
        let recorded = be.record(&sc, 0);
        let _ = be.take_stats();
        be.set_cupti_starvation(None).map_err(Failure::failed)?;
        bar.inc(1);
        let b = match recorded {
            Ok(b) => b,
            Err(e) => return Ok(json!({"starved": starved, "error": e.to_string()})),
        };
        let kernels: Vec<_> = b
            .ground_truth
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Kernel)
            .collect();
        let with_record = kernels.iter().filter(|n| !n.rids.is_empty()).count();
        let calls = b
            .ground_truth
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::ApiCall)
            .count();
        let path = dir.join(format!(
            "starve-check.{}.bundle.json",
            if starved { "starved" } else { "normal" }
        ));
        let written = b.write(&path).map_err(|e| e.to_string());
        let reread = ground_truth::Bundle::read(&path)
            .map(|_| ())
            .map_err(|e| e.to_string());
        Ok(json!({
            "starved": starved, "buffers": budget.0, "buffer_bytes": budget.1,
            "cupti_dropped": b.loss.cupti_dropped, "records": b.trace.len(),
            "kernels": kernels.len(), "kernels_with_record": with_record,
            "api_calls": calls, "written": written.is_ok(), "reread": reread,
        }))
    };
    let normal = run(false)?;
    let starved = run(true)?;
    bar.finish_and_clear();
    Ok(json!({"ops": ops, "normal": normal, "starved": starved}))
}
