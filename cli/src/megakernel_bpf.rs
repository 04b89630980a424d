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
use megakernel::bpf::perturbation::query_programs_perturbation;
use megakernel::bpf::programs;
use megakernel::bpf::report::{gpu_measurements, programs_summary, report_markdown};
use megakernel::bpf::section::{comparison_table, QUERY_SEED, SIM_WORKERS};
use megakernel::gpu::GpuExecutor;
use megakernel::sim::SimCosts;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Instant;

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

/// [`megakernel::bpf::perturbation::perturbation`], its failure the command's.
fn perturbation(
    ex: &mut dyn ProgramExecutor,
    s: &megakernel::schedule::Schedule,
    rounds: u32,
) -> Result<Value, Failure> {
    megakernel::bpf::perturbation::perturbation(ex, s, rounds).map_err(failed)
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
                measure_launches: crate::track::measure_launches(&ex.env().backend),
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

pub fn run(args: BpfArgs) -> Result<(), Failure> {
    if let Some(why) = programs::unavailable() {
        return Err(Failure::unavailable(why));
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| failed(format!("cannot create {}: {e}", args.out.display())))?;
    let started = Instant::now();
    let mut summary =
        json!({"tool": "causalbench megakernel bpf", "version": env!("CARGO_PKG_VERSION")});
    let (attach, rejected) = programs_summary().map_err(failed)?;
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
        gpu_measurements(g, &twin, &mut summary).map_err(failed)?;
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
    let mut md = report_markdown(&summary, &rows);
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
    outln!("{md}");
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
