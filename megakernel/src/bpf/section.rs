//! The monitor programs' part of the megakernel track's leaderboard section
//! (megakernel/README.md, "Monitor programs as eBPF"): the program-only queries answered
//! on the simulator by each query's program and by the fixed configuration, the
//! comparison with the track's other monitors, and the hooks' GPU cost from the committed
//! `causalbench megakernel bpf --backend cuda` measurement.

use super::evaluate::{self, QueryRow, SimPrograms};
use super::perturbation::{perturbation, query_programs_perturbation};
use super::queries;
use crate::sim::SimCosts;
use evaluator::megakernel::TrackRow;
use serde_json::Value;
use std::path::Path;

/// Workers of the simulated kernel: the H200's 132 SMs, one persistent worker each.
pub const SIM_WORKERS: u32 = 132;

/// Seed of the query programs' launches (also `causalbench megakernel bpf`'s default).
pub const QUERY_SEED: u64 = 22;

/// Rounds of the perturbation measurement in the section: the simulator is
/// deterministic, so one round is its answer.
pub const SECTION_PERTURBATION_ROUNDS: u32 = 1;

/// The query table: per query and graph kind, answers correct and bytes exported.
pub fn query_table(rows: &[QueryRow]) -> String {
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
    rows: &[TrackRow],
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

/// The monitor programs' part of the track's leaderboard section: the
/// program-only queries on the simulator (deterministic; the GPU's figures
/// come from `causalbench megakernel bpf`) and the comparison with the
/// track's other monitors.
pub fn section(rows: &[TrackRow]) -> String {
    let head = "### Monitor programs (eBPF): program-only queries\n\n";
    let measured = crate::catalog::load()
        .map_err(|e| e.to_string())
        .and_then(|sc| {
            let graphs = evaluate::graphs(&sc, SIM_WORKERS);
            let mut sim = SimPrograms(SimCosts::default());
            let q = evaluate::run(&mut sim, &graphs, QUERY_SEED)?;
            let twin = crate::schedule::build(&sc[0], SIM_WORKERS, None);
            let p = perturbation(&mut sim, &twin, SECTION_PERTURBATION_ROUNDS)?;
            Ok((q, query_programs_perturbation(&p)))
        });
    match measured {
        Ok((q, pert)) => {
            format!(
            "{head}Each query's verified monitor program against the fixed configuration's best \
             attempt under a budget of {} events per worker, scored against the full task log \
             of the same launch (simulator, {SIM_WORKERS} workers; `causalbench megakernel bpf` measures \
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
pub const SHIPPED_GPU_SUMMARY: &str =
    "results/h200-580/megakernel-bpf-hookcost/chunks/bpf-summary.json";

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
    ) + &compiled_line(&v)
}

/// The compiled programs' figures of a `megakernel bpf --backend cuda` summary
/// (megakernel/README.md, "Compiled monitors"): the diagnosis program's and the
/// query programs' perturbation compiled and interpreted beside the fixed
/// configuration's, and a new question's compiled attach against the rebuild.
/// Empty for a summary from before the compiled path.
pub fn compiled_line(v: &Value) -> String {
    let arms = v["perturbation"].as_array().cloned().unwrap_or_default();
    let pct = |monitor: &str, execution: Option<&str>| {
        arms.iter()
            .find(|a| a["monitor"] == monitor && a["execution"].as_str() == execution)
            .and_then(|a| a["perturbation_pct"].as_f64())
    };
    let range = |execution: &str| {
        let v: Vec<f64> = arms
            .iter()
            .filter(|a| {
                a["execution"] == execution
                    && a["monitor"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("ebpf:"))
            })
            .filter_map(|a| a["perturbation_pct"].as_f64())
            .collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{lo:.1}–{hi:.1}")
    };
    let (Some(compiled), Some(interpreted), Some(fixed)) = (
        pct("diagnosis:ebpf", Some("compiled")),
        pct("diagnosis:ebpf", Some("interpreted")),
        pct("aggregate", None),
    ) else {
        return String::new();
    };
    let programs = v["compiled_attach"]["programs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let attach = |name: &str| programs.iter().find(|p| p["program"] == name).cloned();
    let num = |x: &Value| x.as_f64().unwrap_or(f64::NAN);
    let mut line = format!(
        "Compiled (translated to CUDA C, NVRTC, linked by the driver into the megakernel): the \
         diagnosis program perturbs the kernel by {compiled:.1} % (interpreted {interpreted:.1} \
         %, the fixed aggregation configuration {fixed:.1} %), the query programs by {} % \
         (interpreted {} %)",
        range("compiled"),
        range("interpreted"),
    );
    // A summary from a GPU that defers task-end-only sets also has them inline.
    if let Some(inline) = pct("diagnosis:ebpf:inline", Some("compiled")) {
        line += &format!(
            " (run on thread 32 beside the next task's body; inline on the scheduling thread {inline:.1} %)"
        );
    }
    if let Some(d) = attach("diagnose") {
        line += &format!(
            "; attaching the diagnosis compiled takes {:.1} ms (verify {:.2} + translate {:.2} + \
             NVRTC {:.1} + driver link {:.1} + load {:.1} + swap {:.2} ms), its linked kernel \
             {} registers and {} B local memory per thread",
            num(&d["total_ms"]),
            num(&d["verify_ms"]),
            num(&d["translate_ms"]),
            num(&d["nvrtc_ms"]),
            num(&d["driver_link_ms"]),
            num(&d["load_ms"]),
            num(&d["swap_ms"]),
            d["linked_kernel"]["regs"],
            d["linked_kernel"]["local_bytes"],
        );
    }
    line + ".\n"
}

#[cfg(test)]
mod tests {
    use super::gpu_costs_line;
    use std::path::Path;

    #[test]
    fn the_committed_gpu_summary_gives_the_hooks_cost_and_attach_time() {
        let summary = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(super::SHIPPED_GPU_SUMMARY);
        let line = gpu_costs_line(&summary);
        assert!(line.contains("+32 registers"), "{line}");
        assert!(line.contains("+100 B of shared memory"), "{line}");
        assert!(
            line.contains("attaching a new question takes 75 µs"),
            "{line}"
        );
        assert!(line.contains("988 ms to rebuild"), "{line}");
        // The compiled path's figures (issue 38), the diagnosis deferred to thread 32
        // and, interleaved with it, inline; the kernel whose memory bodies hand their
        // chunks to whichever warp is free (megakernel/README.md, "Where a hook's
        // fixed cost went").
        assert!(
            line.contains("the diagnosis program perturbs the kernel by 3.7 % (interpreted 427.5 %, the fixed aggregation configuration 3.3 %)"),
            "{line}"
        );
        assert!(line.contains("the query programs by 1.3–10.0 %"), "{line}");
        assert!(
            line.contains("inline on the scheduling thread 32.4 %"),
            "{line}"
        );
        assert!(
            line.contains("attaching the diagnosis compiled takes 22.9 ms"),
            "{line}"
        );
        assert!(line.contains("104 registers and 280 B local"), "{line}");
    }

    #[test]
    fn without_a_gpu_summary_the_line_says_it_was_not_measured() {
        let line = gpu_costs_line(Path::new("no/such/bpf-summary.json"));
        assert!(line.contains("not measured here"), "{line}");
    }
}
