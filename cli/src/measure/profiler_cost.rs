//! `causalbench measure profiler-cost`: what one external profiler adds to a run, per
//! view it explains, against what the built-in profilers' run costs per view
//! (issue 36's target: a Python profiler with heavy imports, in the batch form, at
//! most twice the built-ins' wall time per view).
//!
//! Two runs of the same cases, one after the other: the built-in profilers alone,
//! then the same with the external command. Both are timed end to end (recording,
//! views, every profiler, scores, reports); the difference is the external profiler's,
//! divided by the views it explained. The harness's own measurement of each of its
//! invocations (`scores.jsonl`, `invocation`) is reported beside it.

use crate::run::RunArgs;
use crate::Failure;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args)]
pub struct ProfilerCostArgs {
    /// The external profiler, `NAME=CMD` (PROTOCOL.md; `serve:` for the batch form).
    #[arg(long, value_name = "NAME=CMD")]
    pub profiler: String,
    /// A directory for the two runs (`builtin/`, `with/`, each fresh) and the result
    /// (`profiler-cost.json`).
    #[arg(long, default_value = "profiler-cost")]
    pub out: PathBuf,
    /// Options of both runs, after `--` (`run`'s: `--suite`, `--reps`, `--collectors`, …;
    /// default: the default run with the built-in profilers, `--profilers builtin`).
    #[arg(last = true)]
    pub run_args: Vec<String>,
}

/// `run`'s options parsed from words, as the command line would give them.
#[derive(clap::Parser)]
struct RunLine {
    #[command(flatten)]
    run: RunArgs,
}

pub fn profiler_cost(a: &ProfilerCostArgs) -> Result<(), Failure> {
    let name = crate::external::parse(&a.profiler)?.name;
    let (builtin, with) = (a.out.join("builtin"), a.out.join("with"));
    for dir in [&builtin, &with] {
        if dir.exists() {
            return Err(Failure::input(format!(
                "{} exists: the runs must start fresh (a resumed run would measure nothing)",
                dir.display()
            )));
        }
    }
    let builtin_wall = timed_run(a, &builtin, None)?;
    let with_wall = timed_run(a, &with, Some(&a.profiler))?;
    let alone = read_scores(&builtin)?;
    let beside = read_scores(&with)?;
    let views = |rows: &[Value], of: &dyn Fn(&str) -> bool| -> usize {
        rows.iter()
            .filter(|r| of(r["profiler"].as_str().unwrap_or_default()))
            .map(|r| format!("{} {}", r["bundle"], r["view"]))
            .collect::<BTreeSet<_>>()
            .len()
    };
    let builtin_views = views(&alone, &|_| true);
    let external_views = views(&beside, &|p| p == name);
    if builtin_views == 0 || external_views == 0 {
        return Err(Failure::failed(format!(
            "measure profiler-cost: no views scored ({builtin_views} by the built-in run, \
             {external_views} by {name})"
        )));
    }
    let builtin_per_view_ms = builtin_wall * 1000.0 / builtin_views as f64;
    let added_per_view_ms = (with_wall - builtin_wall) * 1000.0 / external_views as f64;
    let ratio = added_per_view_ms / builtin_per_view_ms;
    // The harness's measurement of each invocation, and the built-ins' in-process times.
    let mut invocation = Vec::new();
    let mut crashed = 0;
    let mut analysis: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for r in &beside {
        let profiler = r["profiler"].as_str().unwrap_or_default();
        if profiler == name {
            invocation.push(r["invocation"]["wall_ms"].as_f64().unwrap_or(0.0));
            crashed += usize::from(!r["crashed"].is_null());
        } else if let Some(ms) = r["analysis_ms"].as_f64() {
            let e = analysis.entry(profiler.to_string()).or_default();
            e.0 += ms;
            e.1 += 1;
        }
    }
    invocation.sort_by(f64::total_cmp);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let value = json!({
        "profiler": a.profiler,
        "run_args": a.run_args,
        "builtin_run_s": builtin_wall,
        "with_run_s": with_wall,
        "builtin_views": builtin_views,
        "external_views": external_views,
        "builtin_run_ms_per_view": builtin_per_view_ms,
        "external_added_ms_per_view": added_per_view_ms,
        "ratio": ratio,
        "external_invocation_ms": {
            "mean": mean(&invocation),
            "median": invocation.get(invocation.len() / 2),
            "max": invocation.last(),
            "total_s": invocation.iter().sum::<f64>() / 1000.0,
        },
        "external_crashed_views": crashed,
        "builtin_analysis_ms_per_view": analysis
            .iter()
            .map(|(p, (ms, n))| (p.clone(), json!(ms / *n as f64)))
            .collect::<serde_json::Map<_, _>>(),
    });
    eprintln!(
        "causalbench: built-in run {builtin_wall:.1} s over {builtin_views} views \
         ({builtin_per_view_ms:.2} ms/view); with {name} {with_wall:.1} s: {name} adds \
         {added_per_view_ms:.2} ms per view it explained ({external_views} views, \
         {crashed} crashed; its invocations {:.2} ms mean): {ratio:.2}x the built-ins' \
         wall time per view",
        mean(&invocation)
    );
    let path = a.out.join("profiler-cost.json");
    crate::gpu::write_json(&path, &value)?;
    eprintln!("causalbench: wrote {}", path.display());
    Ok(())
}

/// Runs `run` into `out` with the built-in profilers (and `external`), in seconds.
fn timed_run(a: &ProfilerCostArgs, out: &Path, external: Option<&str>) -> Result<f64, Failure> {
    let mut words: Vec<String> = vec!["run".into(), "--quiet".into()];
    words.extend(["--out".into(), out.display().to_string()]);
    if !a.run_args.iter().any(|w| w.starts_with("--profilers")) {
        words.extend(["--profilers".into(), "builtin".into()]);
    }
    if let Some(p) = external {
        words.extend(["--profiler".into(), p.to_string()]);
    }
    words.extend(a.run_args.iter().cloned());
    let line = <RunLine as clap::Parser>::try_parse_from(&words)
        .map_err(|e| Failure::input(format!("measure profiler-cost: run {e}")))?;
    eprintln!("causalbench: measure profiler-cost: {}", words.join(" "));
    let started = Instant::now();
    crate::run::run(line.run)?;
    Ok(started.elapsed().as_secs_f64())
}

fn read_scores(out: &Path) -> Result<Vec<Value>, Failure> {
    let path = out.join("scores.jsonl");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Failure::failed(format!("cannot read {}: {e}", path.display())))?;
    text.lines()
        .map(|l| {
            serde_json::from_str(l).map_err(|e| Failure::failed(format!("{}: {e}", path.display())))
        })
        .collect()
}
