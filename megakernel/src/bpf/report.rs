//! What `causalbench megakernel bpf` measures besides the queries and the perturbation,
//! and its report's tables: every monitor program's load + verify cost and the
//! verifier's verdict on the unsafe ones; on a GPU the hooks' register / shared / local
//! memory cost, a new question's attach against a rebuild of the kernel, and a swap
//! while the persistent kernel runs (megakernel/README.md, "Monitor programs as eBPF").

use super::device::GpuPrograms;
use super::evaluate::QueryRow;
use super::perturbation::{attachment, median};
use super::section::query_table;
use super::{load, programs, verify, ProgramType};
use crate::schedule::Schedule;
use serde_json::{json, Value};
use std::time::Duration;

/// Repetitions of each stage of the compiled attach on the GPU (`attach_cost::on_gpu`):
/// enough for a median, few because each compiles a kernel with NVRTC.
pub const COMPILED_ATTACH_REPS: u32 = 3;

/// Swaps of an attached program into the running kernel's slot timed on the GPU; the
/// report gives their median (an odd count, so one of them).
pub const SWAP_REPS: usize = 9;

/// Rebuilds of the kernel timed on the GPU, against which the attach is compared; the
/// report gives their median, few because each rebuild takes milliseconds.
pub const REBUILD_REPS: usize = 3;

/// How long after the persistent kernel starts running the first program the live swap
/// puts the second one in: well inside one launch, so both banks run tasks.
pub const LIVE_SWAP_DELAY: Duration = Duration::from_micros(300);

/// Slots of the `task_count` program's `ended` map, one per task class (`class_id & 7`,
/// monitors/task_count.bpf.c): the live swap's count of ended tasks per class.
pub const TASK_COUNT_CLASSES: usize = 8;

/// Load + verify cost of every monitor program, and the verdict on each unsafe one.
pub fn programs_summary() -> Result<(Value, Value), String> {
    let mut attach = Vec::new();
    let mut rejected = Vec::new();
    for (name, unsafe_program, elf) in programs::BUILT {
        if *unsafe_program {
            let set = load(name, elf).map_err(|e| e.to_string())?;
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

/// The report's tables: the query table, the perturbation of every monitor and, when
/// measured, the compiled attach stage by stage.
pub fn report_markdown(summary: &Value, rows: &[QueryRow]) -> String {
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

/// What only the GPU measures, written into `summary`: the device, the hooks' register /
/// shared / local memory cost, attach against rebuild time, and a swap while the
/// persistent kernel runs `twin`.
pub fn gpu_measurements(
    g: &mut GpuPrograms,
    twin: &Schedule,
    summary: &mut Value,
) -> Result<(), String> {
    let env = crate::case::Executor::env(&g.gpu);
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
    summary["compiled_attach"] = match super::attach_cost::on_gpu(g, COMPILED_ATTACH_REPS) {
        Ok(v) => v,
        Err(e) => json!({"error": e}),
    };
    summary["compiled_fallbacks"] = json!(g.fallbacks);
    let (att, load_ns, verify_ns) = attachment("slo_waits")?;
    let swaps: Vec<u64> = (0..SWAP_REPS)
        .map(|_| g.swap_ns(&att))
        .collect::<Result<_, _>>()?;
    let rebuild: Vec<u64> = (0..REBUILD_REPS)
        .map(|_| g.gpu.measure_rebuild())
        .collect::<Result<_, _>>()?;
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
    g.live_swap(twin, &mut a, &mut b, LIVE_SWAP_DELAY)?;
    let ea = a.maps.array(&a.set, "ended");
    let eb = b.maps.array(&b.set, "ended");
    let per_class: Vec<u64> = (0..TASK_COUNT_CLASSES)
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
