//! `causalbench megakernel bpf`: the monitor programs of the megakernel track
//! (megakernel/README.md, "Monitor programs as eBPF") measured end to end, on
//! the GPU or the simulator: load + verify time of every program and the
//! verifier's verdict on the unsafe ones; the program-only queries on static
//! and dynamic task graphs, each answered by its eBPF monitor and by the
//! fixed configuration's best attempt and scored against the task log's
//! truth; perturbation of the kernel's run time; on a GPU also the hooks'
//! register / shared-memory / local-memory cost, the swap time against a
//! rebuilt kernel, and a swap while the persistent kernel runs.

use crate::{BackendArg, Failure};
use ground_truth::megakernel::MonitorConfig;
use megakernel::bpf::device::GpuPrograms;
use megakernel::bpf::evaluate::{self, ProgramExecutor, QueryRow, SimPrograms};
use megakernel::bpf::{load, programs, queries, verify, Attachment, ProgramType};
use megakernel::gpu::GpuExecutor;
use megakernel::sim::SimCosts;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
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
    #[arg(long, default_value_t = 22)]
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

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn attachment(name: &str) -> Result<(Attachment, u64, u64), Failure> {
    let elf = programs::object(name).ok_or_else(|| failed(format!("{name} not built")))?;
    let t = Instant::now();
    let set = load(name, elf).map_err(failed)?;
    let load_ns = t.elapsed().as_nanos() as u64;
    let t = Instant::now();
    let att = Attachment::new(set).map_err(failed)?;
    Ok((att, load_ns, t.elapsed().as_nanos() as u64))
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

/// Median kernel time of one schedule under each monitor, interleaved rounds.
fn perturbation(
    ex: &mut dyn ProgramExecutor,
    s: &megakernel::schedule::Schedule,
    rounds: u32,
) -> Result<Value, Failure> {
    let mut arms: Vec<(String, Option<&str>, MonitorConfig)> = vec![
        ("none".into(), None, MonitorConfig::none()),
        ("aggregate".into(), None, MonitorConfig::aggregate()),
        ("task-log".into(), None, MonitorConfig::task_log(u32::MAX)),
    ];
    for q in queries::QUERIES.iter() {
        arms.push((
            format!("ebpf:{}", q.name),
            Some(q.program),
            MonitorConfig::none(),
        ));
    }
    // The diagnosis programs under the same interleaved protocol.
    for d in megakernel::bpf::diagnosis::ALL {
        arms.push((
            format!("diagnosis:{}", d.monitor),
            Some(d.program),
            d.config(),
        ));
    }
    let mut times: Vec<Vec<u64>> = vec![Vec::new(); arms.len()];
    for round in 0..rounds {
        for (i, (_, program, cfg)) in arms.iter().enumerate() {
            let mut att = match program {
                Some(p) => Some(attachment(p)?.0),
                None => None,
            };
            let cap = ex
                .launch_programs(s, cfg, 1000 + round as u64, att.as_mut())
                .map_err(failed)?;
            times[i].push(cap.kernel_ns);
        }
    }
    let base = median(times[0].clone()) as f64;
    Ok(json!(arms
        .iter()
        .zip(times)
        .map(|((name, _, _), t)| {
            let m = median(t) as f64;
            json!({"monitor": name, "kernel_us": m / 1e3, "perturbation_pct": 100.0 * (m - base) / base.max(1.0)})
        })
        .collect::<Vec<_>>()))
}

/// Mean perturbation of the query programs' arms (`ebpf:QUERY`) of a [`perturbation`] result.
fn query_programs_perturbation(arms: &Value) -> f64 {
    let v: Vec<f64> = arms
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| {
            a["monitor"]
                .as_str()
                .is_some_and(|m| m.starts_with("ebpf:"))
        })
        .filter_map(|a| a["perturbation_pct"].as_f64())
        .collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The query table: per query and graph kind, answers correct and bytes exported.
fn query_table(rows: &[QueryRow]) -> String {
    let mut md = String::from(
        "| query | graphs | eBPF correct | fixed config correct | eBPF bytes | config bytes |\n|---|---|---|---|---|---|\n",
    );
    for (q, kind, n, e, c, eb, cb) in evaluate::summarize(rows) {
        md += &format!("| {q} | {kind} ({n}) | {e}/{n} | {c}/{n} | {eb} | {cb} |\n");
    }
    md
}

/// The comparison under one telemetry budget: the track's scores (`rows`) of
/// the full task log, the fixed-configuration aggregation, the diagnosis
/// programs (`ebpf`, read by the same aggregate profiler) and PC sampling,
/// beside every monitor's answers to the program-only queries (`queries`)
/// and the query programs' bytes and perturbation (`ebpf_perturbation_pct`).
pub fn comparison_table(
    rows: &[evaluator::megakernel::TrackRow],
    queries: &[QueryRow],
    ebpf_perturbation_pct: f64,
) -> String {
    let f3 = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{v:.3}"));
    let row = |p: &str, m: &str| rows.iter().find(|r| r.profiler == p && r.monitor == m);
    let n = queries.len().max(1) as f64;
    let share = |k: usize| format!("{:.3} ({k}/{})", k as f64 / n, queries.len());
    let ebpf_ok = queries.iter().filter(|r| r.ebpf_correct).count();
    let config_ok = queries.iter().filter(|r| r.config_correct).count();
    let mean = |f: fn(&QueryRow) -> u64| queries.iter().map(f).sum::<u64>() as f64 / n;
    let mut md = String::from(
        "| monitor | cause acc | class acc | pair acc | false conf (budget) | program-only queries correct | bytes (diagnosis) | bytes (queries) | perturbation % (diagnosis) |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    let track = |md: &mut String,
                 name: &str,
                 (p, m, budget): (&str, &str, &str),
                 q: String,
                 qbytes: String| {
        let Some(r) = row(p, m) else {
            *md += &format!(
                "| {name} | not measured (no `{m}` capture in these cases) | | | | {q} | | {qbytes} | |\n"
            );
            return;
        };
        let fc = row(p, budget).and_then(|b| b.false_confidence_rate);
        *md += &format!(
            "| {name} | {:.3} | {:.3} | {} | {} ({budget}) | {q} | {:.0} | {qbytes} | {:.2} |\n",
            r.cause_accuracy,
            r.class_accuracy,
            f3(r.pair_accuracy),
            f3(fc),
            r.mean_bytes_exported,
            r.perturbation_pct
        );
    };
    let log_bytes = row("mk-task-log", "task-log").map_or(0.0, |r| r.mean_bytes_exported);
    track(
        &mut md,
        "full task log",
        ("mk-task-log", "task-log", "task-log-budget"),
        "1.000 (it is the truth)".into(),
        format!("{log_bytes:.0}"),
    );
    track(
        &mut md,
        "fixed-config aggregation",
        ("mk-aggregate", "aggregate", "aggregate-sampled"),
        share(config_ok),
        format!("{:.0}", mean(|r| r.config_bytes)),
    );
    track(
        &mut md,
        "eBPF monitors",
        ("mk-aggregate", "ebpf", "ebpf-sampled"),
        share(ebpf_ok),
        format!(
            "{:.0} (query programs' perturbation {ebpf_perturbation_pct:.2} %)",
            mean(|r| r.ebpf_bytes)
        ),
    );
    track(
        &mut md,
        "PC sampling",
        ("mk-pc-sampling", "pc-sampling", "pc-sampling"),
        share(0),
        "0".into(),
    );
    md
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

/// The monitor programs' part of the track's leaderboard section: the
/// program-only queries on the simulator (deterministic; the GPU's figures
/// come from `causalbench megakernel bpf`) and the comparison with the
/// track's other monitors.
pub fn section(rows: &[evaluator::megakernel::TrackRow]) -> String {
    let head = "### Monitor programs (eBPF): program-only queries\n\n";
    let measured = megakernel::catalog::load()
        .map_err(|e| e.to_string())
        .and_then(|sc| {
            let graphs = evaluate::graphs(&sc, 132);
            let mut sim = SimPrograms(SimCosts::default());
            let q = evaluate::run(&mut sim, &graphs, 22)?;
            let twin = megakernel::schedule::build(&sc[0], 132, None);
            let p = perturbation(&mut sim, &twin, 1).map_err(|f| f.message)?;
            Ok((q, query_programs_perturbation(&p)))
        });
    match measured {
        Ok((q, pert)) => {
            format!(
            "{head}Each query's verified monitor program against the fixed configuration's best \
             attempt under a budget of {} events per worker, scored against the full task log \
             of the same launch (simulator, 132 workers; `causalbench megakernel bpf` measures \
             the GPU).\n\n{}\nThe comparison (the track's scores above, on the backend \
             its cases were recorded on — the eBPF monitors' row is the diagnosis programs' \
             `ebpf` / `ebpf-sampled` captures, read by `mk-aggregate`; queries and the query \
             programs' perturbation, mean over the five, on the simulator):\n\n{}",
            queries::BUDGET_EVENTS_PER_WORKER,
            query_table(&q),
            comparison_table(rows, &q, pert)
        ) + &gpu_costs_line(Path::new(SHIPPED_GPU_SUMMARY))
        }
        Err(e) => format!("{head}not measured: {e}\n"),
    }
}

/// The committed GPU measurement of `causalbench megakernel bpf --backend cuda`
/// (megakernel/README.md, "Results on the H200"), whose hook cost and attach
/// time the simulator cannot give.
pub const SHIPPED_GPU_SUMMARY: &str = "results/h200-580/megakernel-bpf/bpf-summary.json";

/// What the hooks cost in the compiled kernel and what attaching a new question
/// costs against rebuilding it, from a `megakernel bpf --backend cuda` summary;
/// says so when there is none (the numbers exist only where a GPU measured them).
pub fn gpu_costs_line(summary: &Path) -> String {
    let read = std::fs::read(summary)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .filter(|v| v["backend"] == "cuda");
    let Some(v) = read else {
        return format!(
            "\nHooks' register and shared-memory cost and attach time: not measured here              (`causalbench megakernel bpf --backend cuda` on a GPU writes them; no `{}`).\n",
            summary.display()
        );
    };
    let (d, a) = (&v["resources"]["delta"], &v["attach"]);
    let num = |x: &Value| x.as_f64().unwrap_or(f64::NAN);
    format!(
        "\nOn the GPU (`{}`, {} {}): the hooks cost {:+} registers per thread and {:+} B of \
         shared memory ({:+} B local); attaching a new question takes {:.0} µs (load {:.1} + \
         verify {:.1} + swap {:.1} µs) against {:.0} ms to rebuild the kernel ({:.2} ms with its \
         PTX cached).\n",
        summary.display(),
        v["device"]["gpu"].as_str().unwrap_or("GPU"),
        v["build"].as_str().unwrap_or(""),
        num(&d["regs"]),
        num(&d["shared_bytes"]),
        num(&d["local_bytes"]),
        num(&a["attach_total_us"]),
        num(&a["load_us"]),
        num(&a["verify_us"]),
        num(&a["swap_us"]),
        num(&a["rebuild_with_hooks_cold_ms"]),
        num(&a["rebuild_warm_ms"]),
    )
}

fn markdown(summary: &Value, rows: &[QueryRow]) -> String {
    let mut md = query_table(rows);
    md += "\n| monitor | kernel µs | perturbation % |\n|---|---|---|\n";
    for p in summary["perturbation"].as_array().into_iter().flatten() {
        md += &format!(
            "| {} | {:.1} | {:.2} |\n",
            p["monitor"].as_str().unwrap_or(""),
            p["kernel_us"].as_f64().unwrap_or(0.0),
            p["perturbation_pct"].as_f64().unwrap_or(0.0)
        );
    }
    md
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
    let workers = gpu.as_ref().map_or(132, |g| g.gpu.num_sms);
    let mut sim = SimPrograms(SimCosts::default());
    let scenarios = megakernel::catalog::load().map_err(|e| Failure::input(e.to_string()))?;
    let graphs = evaluate::graphs(&scenarios, workers);
    let ex: &mut dyn ProgramExecutor = match gpu.as_mut() {
        Some(g) => g,
        None => &mut sim,
    };
    let rows = evaluate::run(ex, &graphs, args.seed).map_err(failed)?;
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
        let env = megakernel::case::Executor::env(&g.gpu);
        summary["device"] =
            json!({"gpu": env.gpu, "driver": env.driver, "cuda": env.cuda, "sms": g.gpu.num_sms});
        let [(r0, s0, l0), (r1, s1, l1)] = g.dev.resources;
        summary["resources"] = json!({
            "plain": {"regs": r0, "shared_bytes": s0, "local_bytes": l0},
            "hooks": {"regs": r1, "shared_bytes": s1, "local_bytes": l1},
            "delta": {"regs": r1 - r0, "shared_bytes": s1 - s0, "local_bytes": l1 - l0},
        });
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
        g.live_swap(&twin, &mut a, &mut b, Duration::from_micros(300))
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
    }
    let correct = |f: fn(&QueryRow) -> bool| rows.iter().filter(|r| f(r)).count();
    summary["queries"] = json!({
        "rows": rows.len(),
        "ebpf_correct": correct(|r| r.ebpf_correct),
        "config_correct": correct(|r| r.config_correct),
        "summary": evaluate::summarize(&rows),
    });
    summary["elapsed_s"] = json!(started.elapsed().as_secs_f64());
    let lines: String = rows
        .iter()
        .map(|r| serde_json::to_string(r).unwrap_or_default() + "\n")
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

#[cfg(test)]
mod gpu_costs_tests {
    use super::gpu_costs_line;
    use std::path::Path;

    #[test]
    fn the_committed_gpu_summary_gives_the_hooks_cost_and_attach_time() {
        let summary = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(super::SHIPPED_GPU_SUMMARY);
        let line = gpu_costs_line(&summary);
        assert!(line.contains("+22 registers"), "{line}");
        assert!(line.contains("+0 B of shared memory"), "{line}");
        assert!(
            line.contains("attaching a new question takes 81 µs"),
            "{line}"
        );
        assert!(line.contains("821 ms to rebuild"), "{line}");
    }

    #[test]
    fn without_a_gpu_summary_the_line_says_it_was_not_measured() {
        let line = gpu_costs_line(Path::new("no/such/bpf-summary.json"));
        assert!(line.contains("not measured here"), "{line}");
    }
}
