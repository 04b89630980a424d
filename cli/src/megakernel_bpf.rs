//! `causalbench megakernel bpf`: the monitor programs of the megakernel track
//! (megakernel/README.md, "Monitor programs as eBPF") measured end to end, on
//! the GPU or the simulator: load + verify time of every program and the
//! verifier's verdict on the unsafe ones; the program-only queries on static
//! and dynamic task graphs, each answered by its eBPF monitor and by the
//! fixed configuration's best attempt and scored against the task log's
//! truth; perturbation of the kernel's run time; on a GPU also the hooks'
//! register / shared-memory / local-memory cost, the swap time against a
//! rebuilt kernel, and a swap while the persistent kernel runs. Programs run
//! compiled (translated, NVRTC, linked into the megakernel: `bpf::link`) and
//! interpreted, the two measured in the same interleaved rounds, with the
//! compiled attach latency stage by stage (`bpf::attach_cost`).

use crate::{BackendArg, Failure};
use megakernel::bpf::device::GpuPrograms;
use megakernel::bpf::evaluate::{self, Execution, ProgramExecutor, QueryRow, SimPrograms};
use megakernel::bpf::perturbation::{median, query_programs_perturbation};
use megakernel::bpf::section::{comparison_table, query_table, QUERY_SEED, SIM_WORKERS};
use megakernel::bpf::{load, programs, verify, ProgramType};
use megakernel::gpu::GpuExecutor;
use megakernel::sim::SimCosts;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `causalbench megakernel bpf`'s options.
#[derive(clap::Args)]
pub struct BpfArgs {
    #[arg(long, default_value = "megakernel-bpf")]
    pub out: PathBuf,
    /// `auto`: the GPU when one is present, else the simulator.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// Interleaved rounds of the perturbation measurement.
    #[arg(long, default_value_t = 9)]
    pub perturbation_rounds: u32,
    #[arg(long, default_value_t = QUERY_SEED)]
    pub seed: u64,
    /// Repetitions of every track family run for the diagnosis rows (the
    /// diagnosis programs' `ebpf` / `ebpf-sampled` captures scored beside the
    /// track's other monitors); 0 leaves them out.
    #[arg(long, default_value_t = 1)]
    pub diagnosis_reps: u32,
}

fn failed(e: impl std::fmt::Display) -> Failure {
    Failure::failed(e.to_string())
}

/// [`megakernel::bpf::perturbation::attachment`], its failure the command's.
fn attachment(name: &str) -> Result<(megakernel::bpf::Attachment, u64, u64), Failure> {
    megakernel::bpf::perturbation::attachment(name).map_err(failed)
}

/// [`megakernel::bpf::perturbation::perturbation`], its failure the command's.
fn perturbation(
    ex: &mut dyn ProgramExecutor,
    s: &megakernel::schedule::Schedule,
    rounds: u32,
) -> Result<Value, Failure> {
    megakernel::bpf::perturbation::perturbation(ex, s, rounds).map_err(failed)
}

/// Load + verify cost of every monitor program, and the verdict on each unsafe one.
fn programs_summary() -> Result<(Value, Value), Failure> {
    let mut attach = Vec::new();
    let mut rejected = Vec::new();
    for (name, unsafe_program, elf) in programs::BUILT {
        if *unsafe_program {
            let set = load(name, elf).map_err(failed)?;
            let verdict = verify(&set, ProgramType::Observation);
            rejected.push(match verdict {
                Err(r) => json!({"program": name, "rejected": true, "insn": r.insn, "text": r.text, "reason": r.reason}),
                Ok(()) => json!({"program": name, "rejected": false}),
            });
            continue;
        }
        let (att, load_ns, verify_ns) = attachment(name)?;
        attach.push(json!({
            "program": name,
            "hooks": att.set.programs.iter().map(|p| p.hook.section()).collect::<Vec<_>>(),
            "insns": att.set.programs.iter().map(|p| p.insns()).sum::<usize>(),
            "maps": att.set.maps.len(),
            "map_bytes": att.maps.arena.len(),
            "load_us": load_ns as f64 / 1e3,
            "verify_us": verify_ns as f64 / 1e3,
        }));
    }
    Ok((json!(attach), json!(rejected)))
}

/// Every track family × `reps` recorded on `ex` and scored: the track's rows,
/// the diagnosis programs' (`ebpf`, `ebpf-sampled`) among them when `ex` runs
/// hook programs.
fn diagnosis_rows(
    ex: &mut dyn megakernel::case::Executor,
    reps: u32,
) -> Result<Vec<evaluator::megakernel::TrackRow>, Failure> {
    let mut cases = Vec::new();
    for (family, variants) in crate::track::families()? {
        for repetition in 0..reps {
            let options = megakernel::case::FamilyOptions {
                repetition,
                measure_launches: if ex.env().backend == "sim" { 1 } else { 3 },
                ..Default::default()
            };
            let recorded = megakernel::case::run_family(ex, &variants, &options)
                .map_err(|e| failed(format!("megakernel family {family} r{repetition}: {e}")))?;
            cases.extend(recorded.into_iter().map(|c| megakernel::pack::PackedCase {
                bundle: c.bundle,
                telemetry: c.telemetry,
            }));
        }
    }
    Ok(megakernel::track::leaderboard(&cases).1)
}

fn markdown(summary: &Value, rows: &[QueryRow]) -> String {
    let mut md = query_table(rows);
    md += "\n| monitor | execution | kernel µs | perturbation % | hook runs | insns / run | hook ns / run | hook µs / worker |\n|---|---|---|---|---|---|---|---|\n";
    let num = |v: &Value, d: usize| v.as_f64().map_or(String::new(), |x| format!("{x:.d$}"));
    for p in summary["perturbation"].as_array().into_iter().flatten() {
        md += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            p["monitor"].as_str().unwrap_or(""),
            p["execution"].as_str().unwrap_or(""),
            num(&p["kernel_us"], 1),
            num(&p["perturbation_pct"], 2),
            num(&p["hook_runs"], 0),
            num(&p["insns_per_run"], 1),
            num(&p["hook_ns_per_run"], 0),
            num(&p["hook_us_per_worker"], 1),
        );
    }
    let stages = summary["compiled_attach"]["programs"].as_array();
    if let Some(list) = stages {
        md += "\n| program | verify ms | translate ms | NVRTC ms | driver link ms | load ms | swap ms | total ms | linked regs / local B |\n|---|---|---|---|---|---|---|---|---|\n";
        for p in list {
            let k = &p["linked_kernel"];
            md += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                p["program"].as_str().unwrap_or(""),
                num(&p["verify_ms"], 3),
                num(&p["translate_ms"], 3),
                num(&p["nvrtc_ms"], 2),
                num(&p["driver_link_ms"], 2),
                num(&p["load_ms"], 2),
                num(&p["swap_ms"], 3),
                num(&p["total_ms"], 2),
                if k.is_null() {
                    String::new()
                } else {
                    format!("{} / {}", k["regs"], k["local_bytes"])
                }
            );
        }
    }
    md
}

/// What only the GPU measures: the device, the hooks' register / shared / local memory
/// cost, attach against rebuild time, and a swap while the persistent kernel runs.
fn gpu_measurements(
    g: &mut GpuPrograms,
    twin: &megakernel::schedule::Schedule,
    summary: &mut Value,
) -> Result<(), Failure> {
    let env = megakernel::case::Executor::env(&g.gpu);
    summary["device"] =
        json!({"gpu": env.gpu, "driver": env.driver, "cuda": env.cuda, "sms": g.gpu.num_sms});
    let [(r0, s0, l0), (r1, s1, l1)] = g.dev.resources;
    summary["resources"] = json!({
        "plain": {"regs": r0, "shared_bytes": s0, "local_bytes": l0},
        "hooks": {"regs": r1, "shared_bytes": s1, "local_bytes": l1},
        "delta": {"regs": r1 - r0, "shared_bytes": s1 - s0, "local_bytes": l1 - l0},
    });
    // The compiling path: each stage of a new question's attach, and each
    // linked kernel's registers and local memory.
    summary["compiled_attach"] = match megakernel::bpf::attach_cost::on_gpu(g, 3) {
        Ok(v) => v,
        Err(e) => json!({"error": e}),
    };
    summary["compiled_fallbacks"] = json!(g.fallbacks);
    let (att, load_ns, verify_ns) = attachment("slo_waits")?;
    let swaps: Vec<u64> = (0..9)
        .map(|_| g.swap_ns(&att))
        .collect::<Result<_, _>>()
        .map_err(failed)?;
    let rebuild: Vec<u64> = (0..3)
        .map(|_| g.gpu.measure_rebuild())
        .collect::<Result<_, _>>()
        .map_err(failed)?;
    let swap_ns = median(swaps);
    summary["attach"] = json!({
        "load_us": load_ns as f64 / 1e3, "verify_us": verify_ns as f64 / 1e3,
        "swap_us": swap_ns as f64 / 1e3,
        "attach_total_us": (load_ns + verify_ns + swap_ns) as f64 / 1e3,
        "rebuild_warm_ms": median(rebuild) as f64 / 1e6,
        "rebuild_with_hooks_cold_ms": g.dev.compile_ns as f64 / 1e6,
    });
    let (mut a, _, _) = attachment("task_count")?;
    let (mut b, _, _) = attachment("task_count")?;
    g.live_swap(twin, &mut a, &mut b, Duration::from_micros(300))
        .map_err(failed)?;
    let ea = a.maps.array(&a.set, "ended");
    let eb = b.maps.array(&b.set, "ended");
    let per_class: Vec<u64> = (0..8)
        .map(|c| {
            twin.tasks
                .iter()
                .filter(|t| t.class_id as usize == c)
                .count() as u64
        })
        .collect();
    let sums: Vec<u64> = ea.iter().zip(&eb).map(|(x, y)| x + y).collect();
    summary["live_swap"] = json!({
        "before_swap": ea, "after_swap": eb, "tasks_per_class": per_class,
        "every_task_once": sums == per_class,
        "both_banks_ran": ea.iter().sum::<u64>() > 0 && eb.iter().sum::<u64>() > 0,
    });
    Ok(())
}

pub fn run(args: BpfArgs) -> Result<(), Failure> {
    if let Some(why) = programs::unavailable() {
        return Err(Failure::unavailable(why));
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| failed(format!("cannot create {}: {e}", args.out.display())))?;
    let started = Instant::now();
    let mut summary =
        json!({"tool": "causalbench megakernel bpf", "version": env!("CARGO_PKG_VERSION")});
    let (attach, rejected) = programs_summary()?;
    summary["programs"] = attach;
    summary["unsafe_programs"] = rejected;
    let use_gpu = match args.backend {
        BackendArg::Sim => false,
        BackendArg::Cuda => true,
        BackendArg::Auto => generator::backend::gpu_present(),
    };
    let mut gpu = if use_gpu {
        let g = GpuExecutor::open(false).and_then(GpuPrograms::new);
        match (g, args.backend) {
            (Ok(g), _) => Some(g),
            (Err(e), BackendArg::Auto) => {
                eprintln!(
                    "causalbench: the GPU cannot run the megakernel ({e}); using the simulator"
                );
                None
            }
            (Err(e), _) => return Err(Failure::unavailable(e)),
        }
    } else {
        None
    };
    let workers = gpu.as_ref().map_or(SIM_WORKERS, |g| g.gpu.num_sms);
    let mut sim = SimPrograms(SimCosts::default());
    let scenarios = megakernel::catalog::load().map_err(|e| Failure::input(e.to_string()))?;
    let graphs = evaluate::graphs(&scenarios, workers);
    let ex: &mut dyn ProgramExecutor = match gpu.as_mut() {
        Some(g) => g,
        None => &mut sim,
    };
    // The queries under every execution the backend has (compiled first on a GPU).
    let mut by_execution: Vec<(Execution, Vec<QueryRow>)> = Vec::new();
    for e in ex.executions() {
        ex.set_execution(e);
        by_execution.push((e, evaluate::run(ex, &graphs, args.seed).map_err(failed)?));
    }
    if let Some((e, _)) = by_execution.first() {
        ex.set_execution(*e);
    }
    let rows = by_execution
        .first()
        .map(|(_, r)| r.clone())
        .unwrap_or_default();
    let twin = megakernel::schedule::build(&scenarios[0], workers, None);
    summary["perturbation"] = perturbation(ex, &twin, args.perturbation_rounds)?;
    summary["backend"] = json!(if gpu.is_some() { "cuda" } else { "sim" });
    // Host-side times (load, verify, attach) depend on it.
    summary["build"] = json!(if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    });
    let track_rows = if args.diagnosis_reps == 0 {
        Vec::new()
    } else {
        let mut sim_track = megakernel::SimExecutor {
            workers,
            ..Default::default()
        };
        let ex: &mut dyn megakernel::case::Executor = match gpu.as_mut() {
            Some(g) => g,
            None => &mut sim_track,
        };
        diagnosis_rows(ex, args.diagnosis_reps)?
    };
    summary["diagnosis"] = json!(track_rows
        .iter()
        .filter(|r| r.profiler == "mk-aggregate")
        .collect::<Vec<_>>());
    if let Some(g) = gpu.as_mut() {
        gpu_measurements(g, &twin, &mut summary)?;
    }
    if gpu.is_none() {
        summary["compiled_attach"] =
            megakernel::bpf::attach_cost::on_host().unwrap_or_else(|e| json!({"error": e}));
    }
    let correct = |f: fn(&QueryRow) -> bool| rows.iter().filter(|r| f(r)).count();
    summary["queries"] = json!({
        "execution": by_execution.first().map(|(e, _)| e.name()),
        "rows": rows.len(),
        "ebpf_correct": correct(|r| r.ebpf_correct),
        "config_correct": correct(|r| r.config_correct),
        "summary": evaluate::summarize(&rows),
    });
    summary["queries_by_execution"] = json!(by_execution
        .iter()
        .map(|(e, r)| json!({
            "execution": e.name(),
            "rows": r.len(),
            "ebpf_correct": r.iter().filter(|x| x.ebpf_correct).count(),
            "insns_per_run_mean": r.iter().map(|x| x.insns_per_run).sum::<f64>() / r.len().max(1) as f64,
        }))
        .collect::<Vec<_>>());
    summary["elapsed_s"] = json!(started.elapsed().as_secs_f64());
    let lines: String = by_execution
        .iter()
        .flat_map(|(e, r)| {
            r.iter().map(move |row| {
                let mut v = serde_json::to_value(row).unwrap_or_default();
                v["execution"] = json!(e.name());
                v.to_string() + "\n"
            })
        })
        .collect();
    let w = |name: &str, text: &str| {
        std::fs::write(args.out.join(name), text).map_err(|e| {
            failed(format!(
                "cannot write {}: {e}",
                args.out.join(name).display()
            ))
        })
    };
    w("bpf-queries.jsonl", &lines)?;
    w(
        "bpf-summary.json",
        &serde_json::to_string_pretty(&summary).unwrap_or_default(),
    )?;
    let mut md = markdown(&summary, &rows);
    if !track_rows.is_empty() {
        let pert = query_programs_perturbation(&summary["perturbation"]);
        md += &format!(
            "\nThe diagnosis, every track family × {} on this backend ({}), scored by the track's profilers:\n\n{}\n{}",
            args.diagnosis_reps,
            summary["backend"].as_str().unwrap_or(""),
            evaluator::megakernel::track_markdown(&track_rows),
            comparison_table(&track_rows, &rows, pert)
        );
    }
    w("bpf-report.md", &md)?;
    println!("{md}");
    eprintln!(
        "causalbench: megakernel bpf: {} of {} query answers correct by eBPF, {} by the fixed configuration ({:.1} s) -> {}",
        correct(|r| r.ebpf_correct),
        rows.len(),
        correct(|r| r.config_correct),
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    Ok(())
}
