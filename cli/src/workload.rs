//! `causalbench workload`: scenarios' CUDA work as a standalone program an
//! external collector wraps or attaches to, the truth built without the
//! project's CUPTI recorder (`generator::cuda::Workload`, baselines/COLLECTORS.md).
//!
//! Writes into `--out`: `ID.bundle.json` per bundle (truth and records from
//! the workload's own stamps) and `workload.json` (the process id, the clock
//! calibration, each bundle's window and every kernel its stamps timed, what
//! `collector run` aligns a collector's clock on). With `--compare-cupti` it
//! runs the normal backend instead (CUPTI in the process) and also writes
//! `cupti/ID.bundle.json` and `truth-agreement.json`: per kernel |Δstart|,
//! |Δend| between the two truths of the same runs, and whether the label
//! check kept the same label.
//!
//! Nothing goes to stdout: a collector that prints its records there (the
//! CUPTI trace-injection sample) owns it.

use crate::Failure;
use generator::collector::KnownKernel;
use generator::cuda::{KernelDelta, Workload};
use ground_truth::io::Readable;
use ground_truth::{Bundle, Scenario};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long an attached collector may take to say go, and to finish after the runs.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(clap::Args, Clone)]
pub struct WorkloadArgs {
    /// A scenario file, or the name of a catalog scenario (repeatable).
    #[arg(long)]
    pub scenario: Vec<String>,
    /// A suite instead: `catalog`, a generated split (`dev`, `test`) or a directory.
    #[arg(long, conflicts_with = "scenario")]
    pub suite: Option<String>,
    /// Scenarios of a generated split.
    #[arg(long)]
    pub cases: Option<usize>,
    /// Only the suite's scenarios whose name contains this text.
    #[arg(long)]
    pub only: Option<String>,
    /// At most this many scenarios (after `--only`), spread evenly over the suite.
    #[arg(long)]
    pub sample: Option<usize>,
    #[arg(long, default_value_t = 0)]
    pub repetition: u32,
    /// Output directory (bundles, `workload.json`).
    #[arg(long)]
    pub out: PathBuf,
    /// Write this process's id here once its GPU session is open and every
    /// kernel is compiled (an attaching collector's cue).
    #[arg(long)]
    pub pid_file: Option<PathBuf>,
    /// Run only once this file exists; afterwards write `GO.done` and exit
    /// once the file is removed again (baselines/COLLECTORS.md, "Attaching").
    #[arg(long)]
    pub go: Option<PathBuf>,
    /// Run the normal backend (the project's CUPTI recorder in the process)
    /// and compare its truth with the stamps' truth of the same runs.
    #[arg(long)]
    pub compare_cupti: bool,
}

fn scenarios(args: &WorkloadArgs) -> Result<Vec<Scenario>, Failure> {
    let mut out = Vec::new();
    if let Some(suite) = &args.suite {
        out = crate::catalog::load_suite(suite, args.cases)?;
    }
    if !args.scenario.is_empty() {
        let catalog = crate::catalog::load_suite(crate::catalog::DEFAULT_SUITE, None)?;
        for s in &args.scenario {
            let path = Path::new(s);
            if path.is_file() {
                out.push(Scenario::read(path)?);
            } else {
                let sc = catalog.iter().find(|c| &c.name == s).ok_or_else(|| {
                    Failure::input(format!(
                        "`{s}` is neither a scenario file nor a catalog scenario (`causalbench list`)"
                    ))
                })?;
                out.push(sc.clone());
            }
        }
    }
    if let Some(o) = &args.only {
        out.retain(|s| s.name.contains(o.as_str()));
    }
    if let Some(n) = args.sample.filter(|&n| n > 0 && n < out.len()) {
        let step = out.len() as f64 / n as f64;
        out = (0..n)
            .map(|i| out[(i as f64 * step) as usize].clone())
            .collect();
    }
    if out.is_empty() {
        return Err(Failure::input(
            "no scenario: give --scenario NAME|FILE or --suite SUITE (and an --only that matches)",
        ));
    }
    Ok(out)
}

fn wait_for(what: &str, done: impl Fn() -> bool) -> Result<(), Failure> {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > ATTACH_TIMEOUT {
            return Err(Failure::failed(format!(
                "waited {} s for {what}",
                ATTACH_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn write_bundle(b: &Bundle, path: &Path) -> Result<(), Failure> {
    b.write(path)
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
}

/// Per kernel |Δ| summary: share within 2 µs, percentiles, the worst.
fn deltas_summary(d: &[KernelDelta]) -> Value {
    let mut worst: Vec<i64> = d
        .iter()
        .map(|k| k.start_ns.abs().max(k.end_ns.abs()))
        .collect();
    worst.sort_unstable();
    let pct = |p: f64| -> i64 {
        worst
            .get(((worst.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    let abs_sorted = |f: fn(&KernelDelta) -> i64| -> Vec<i64> {
        let mut v: Vec<i64> = d.iter().map(|k| f(k).abs()).collect();
        v.sort_unstable();
        v
    };
    let median = |v: Vec<i64>| v.get(v.len() / 2).copied().unwrap_or(0);
    json!({
        "kernels": d.len(),
        "within_2us": worst.iter().filter(|&&w| w <= 2_000).count(),
        "share_within_2us": if worst.is_empty() { 0.0 } else {
            worst.iter().filter(|&&w| w <= 2_000).count() as f64 / worst.len() as f64 },
        "median_abs_start_ns": median(abs_sorted(|k| k.start_ns)),
        "median_abs_end_ns": median(abs_sorted(|k| k.end_ns)),
        "p99_worst_ns": pct(0.99),
        "max_worst_ns": worst.last().copied().unwrap_or(0),
    })
}

/// One run's deltas with their median start difference taken off (the
/// constant between CUPTI's GPU-to-host clock conversion and the pings').
fn offset_calibrated(d: &[KernelDelta]) -> Vec<KernelDelta> {
    let mut starts: Vec<i64> = d.iter().map(|k| k.start_ns).collect();
    starts.sort_unstable();
    let Some(&median) = starts.get(starts.len() / 2) else {
        return Vec::new();
    };
    d.iter()
        .map(|k| KernelDelta {
            name: k.name.clone(),
            start_ns: k.start_ns - median,
            end_ns: k.end_ns - median,
        })
        .collect()
}

/// The symptom labels of a bundle: (query, cause label, label-check outcome).
fn labels(b: &Bundle) -> Vec<(String, String, String)> {
    b.ground_truth
        .symptoms
        .iter()
        .map(|s| {
            (
                s.id.clone(),
                format!("{:?}", s.cause),
                s.label
                    .as_ref()
                    .map(|l| format!("{:?}", l.verdict))
                    .unwrap_or_else(|| "unchecked".into()),
            )
        })
        .collect()
}

pub fn workload(args: WorkloadArgs) -> Result<(), Failure> {
    // The GPU work runs on a thread of its own: the injectors pin the thread
    // that drives a run and read the process's CPUs from the main thread's
    // affinity, which must stay the process's.
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("cb-workload".into())
            .spawn_scoped(s, || run_all(args))
            .map_err(|e| Failure::failed(format!("cannot start the workload thread: {e}")))?
            .join()
            .unwrap_or_else(|_| Err(Failure::failed("the workload thread panicked")))
    })
}

fn run_all(args: WorkloadArgs) -> Result<(), Failure> {
    let scenarios = scenarios(&args)?;
    let w = Workload::open(args.compare_cupti).map_err(|e| {
        Failure::unavailable(format!(
            "`workload` needs a GPU: {e}; `causalbench run --backend sim` records on the simulator"
        ))
    })?;
    // Never torn down: a collector injected into the process (CUPTI's
    // trace-injection sample) flushes its records at exit, and needs the CUDA
    // context alive then.
    let mut w = std::mem::ManuallyDrop::new(w);
    let dirs = [args.out.clone(), args.out.join("cupti")];
    for d in &dirs[..if args.compare_cupti { 2 } else { 1 }] {
        std::fs::create_dir_all(d)
            .map_err(|e| Failure::failed(format!("cannot create {}: {e}", d.display())))?;
    }
    for sc in &scenarios {
        w.prepare(sc).map_err(Failure::input)?;
    }
    let pid = std::process::id();
    eprintln!(
        "causalbench workload: pid {pid}, {} scenarios prepared, clock offset {} ns (round trip {} ns)",
        scenarios.len(),
        w.clock().offset_ns,
        w.clock().round_trip_ns
    );
    if let Some(p) = &args.pid_file {
        ground_truth::io::write_atomic(p, format!("{pid}\n").as_bytes())
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", p.display())))?;
    }
    if let Some(go) = &args.go {
        wait_for(&format!("{} (the collector's go)", go.display()), || {
            go.exists()
        })?;
    }
    let mut entries = Vec::new();
    let mut all_deltas: Vec<KernelDelta> = Vec::new();
    let mut calibrated: Vec<KernelDelta> = Vec::new();
    let mut label_pairs = Vec::new();
    let mut failures = 0usize;
    for sc in &scenarios {
        let id = format!("{}.r{}", sc.name, args.repetition);
        let rec = match w.record(sc, args.repetition) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("FAIL {id}: {e}");
                failures += 1;
                entries.push(json!({"bundle": id, "error": e.to_string()}));
                continue;
            }
        };
        let mut entry = json!({
            "bundle": id, "window": [rec.window.0, rec.window.1],
            "clock": rec.clock, "clock_drift_ns": rec.clock.drift_ns(),
            "known_kernels": rec.known,
        });
        match &rec.bundle {
            Ok(b) => write_bundle(b, &args.out.join(format!("{id}.bundle.json")))?,
            Err(e) => {
                failures += 1;
                entry["error"] = json!(e);
            }
        }
        if let Some(c) = &rec.cupti {
            match c {
                Ok(b) => write_bundle(b, &args.out.join(format!("cupti/{id}.bundle.json")))?,
                Err(e) => entry["cupti_error"] = json!(e),
            }
            let outcome = |r: &Result<Bundle, String>| match r {
                Ok(b) => json!(labels(b)),
                Err(e) => json!(format!("dropped: {e}")),
            };
            let (a, b) = (outcome(&rec.bundle), outcome(c));
            label_pairs.push(json!({"bundle": id, "same": a == b, "stamps": a, "cupti": b}));
            entry["kernels"] = deltas_summary(&rec.kernels);
            calibrated.extend(offset_calibrated(&rec.kernels));
            all_deltas.extend(rec.kernels);
        }
        eprintln!(
            "{} {id}",
            if entry.get("error").is_some() {
                "FAIL"
            } else {
                "ok"
            }
        );
        entries.push(entry);
        // Written after every scenario, so a run cut short keeps what it did.
        write_docs(
            &args,
            &w,
            pid,
            &entries,
            [&all_deltas, &calibrated],
            &label_pairs,
        )?;
    }
    if let Some(go) = &args.go {
        let done = done_file(go);
        ground_truth::io::write_atomic(&done, b"done\n")
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", done.display())))?;
        wait_for(&format!("the collector to remove {}", go.display()), || {
            !go.exists()
        })?;
    }
    if failures > 0 {
        return Err(Failure::failed(format!(
            "{failures} of {} scenarios failed",
            scenarios.len()
        )));
    }
    Ok(())
}

/// `workload.json`, and with `--compare-cupti` `truth-agreement.json`.
fn write_docs(
    args: &WorkloadArgs,
    w: &Workload,
    pid: u32,
    entries: &[Value],
    [all_deltas, calibrated]: [&[KernelDelta]; 2],
    label_pairs: &[Value],
) -> Result<(), Failure> {
    let doc = json!({
        "pid": pid,
        "clock": w.clock(),
        "spin_overhead_ns": w.spin_overhead_ns(),
        "compare_cupti": args.compare_cupti,
        "bundles": entries,
    });
    crate::gpu::write_json(&args.out.join("workload.json"), &doc)?;
    if args.compare_cupti {
        let same = label_pairs
            .iter()
            .filter(|p| p["same"] == json!(true))
            .count();
        let agreement = json!({
            "what": "truth from the workload's stamps (step log, %globaltimer, CUDA events; clock offset by host-device pings before and after each run, interpolated) against CUPTI's truth of the same runs",
            "clock": w.clock(),
            "kernels": deltas_summary(all_deltas),
            "kernels_offset_calibrated": {
                "what": "the same, each run's median start difference taken off first (the two clock conversions' constant offset, as the backend's own CUPTI-vs-%globaltimer check does)",
                "summary": deltas_summary(calibrated)},
            "labels": {"cases": label_pairs.len(), "same": same,
                "share_same": if label_pairs.is_empty() { 0.0 } else { same as f64 / label_pairs.len() as f64 },
                "per_case": label_pairs},
        });
        crate::gpu::write_json(&args.out.join("truth-agreement.json"), &agreement)?;
        eprintln!(
            "truth without CUPTI vs CUPTI: {}",
            serde_json::to_string(&agreement["kernels"]).unwrap_or_default()
        );
    }
    Ok(())
}

/// The file the workload writes beside `go` once its runs are over.
pub fn done_file(go: &Path) -> PathBuf {
    let mut name = go.as_os_str().to_owned();
    name.push(".done");
    PathBuf::from(name)
}

/// Every kernel `workload.json` lists, of every bundle (what a collector's
/// clock is aligned on: its records cover the whole process).
pub fn known_kernels(doc: &Value) -> Vec<KnownKernel> {
    doc["bundles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| serde_json::from_value::<Vec<KnownKernel>>(b["known_kernels"].clone()).ok())
        .flatten()
        .collect()
}
