//! Records every catalog scenario on the GPU with the `cuda` backend and
//! measures the recorder: share of device ops bound to a CUPTI record, CUPTI
//! vs `%globaltimer` agreement, spin-kernel duration accuracy, and the
//! generator's launch overhead against a direct cudarc loop.
//!
//! ```text
//! cargo build --release -p generator --example cuda_check
//! LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib \
//!   target/release/examples/cuda_check --catalog catalog --out bundles --summary summary.json
//! ```
//! Options: `--reps N` (default: each scenario's repetitions), `--only SUBSTRING`,
//! `--bench N` kernels (default 100000, 0 = skip), `--bench-reps R` (default 3).

use generator::cuda::CudaBackend;
use generator::Backend;
use ground_truth::io::Readable;
use ground_truth::Scenario;
use serde_json::json;
use std::path::PathBuf;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn pct(v: &[i64], q: f64) -> i64 {
    if v.is_empty() {
        return 0;
    }
    let mut v = v.to_vec();
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let catalog = PathBuf::from(arg(&args, "--catalog").unwrap_or_else(|| "catalog".into()));
    let out = PathBuf::from(arg(&args, "--out").unwrap_or_else(|| "cuda-bundles".into()));
    let summary_path = arg(&args, "--summary").map(PathBuf::from);
    let reps: Option<u32> = arg(&args, "--reps").and_then(|s| s.parse().ok());
    let only = arg(&args, "--only");
    let bench: u32 = arg(&args, "--bench")
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let bench_reps: u32 = arg(&args, "--bench-reps")
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let be = match CudaBackend::new() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cuda_check: {e}");
            std::process::exit(3);
        }
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&catalog)
        .unwrap_or_else(|e| panic!("{}: {e}", catalog.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    std::fs::create_dir_all(&out).expect("create the output directory");
    let mut bundles = Vec::new();
    let mut failures = Vec::new();
    let started = std::time::Instant::now();
    for f in &files {
        let sc = match Scenario::read(f) {
            Ok(s) => s,
            Err(e) => {
                failures.push(json!({"file": f.display().to_string(), "error": e.to_string()}));
                continue;
            }
        };
        if only.as_deref().is_some_and(|o| !sc.name.contains(o)) {
            continue;
        }
        for rep in 0..reps.unwrap_or(sc.repetitions) {
            let t = std::time::Instant::now();
            let r = be.record(&sc, rep);
            let stats = be.take_stats();
            let run = stats.iter().rev().find(|s| !s.twin);
            match r {
                Ok(b) => {
                    let path = out.join(format!("{}.bundle.json", b.id()));
                    if let Err(e) = b.write(&path) {
                        failures.push(json!({"bundle": b.id(), "error": format!("write: {e}")}));
                    }
                    let sym = &b.ground_truth.symptoms[0];
                    let node = &b.ground_truth.nodes[sym.node as usize];
                    eprintln!(
                        "ok   {:60} {:>7.1} ms  late {:>9.1} us  bound {}/{}  clock max {} ns",
                        b.id(),
                        t.elapsed().as_secs_f64() * 1e3,
                        sym.lateness_ns / 1e3,
                        run.map(|s| s.bound).unwrap_or(0),
                        run.map(|s| s.device_ops).unwrap_or(0),
                        run.map(|s| s.clock.max_start_dev_ns.max(s.clock.max_end_dev_ns))
                            .unwrap_or(0)
                    );
                    bundles.push(json!({
                        "bundle": b.id(),
                        "seconds": t.elapsed().as_secs_f64(),
                        "lateness_us": sym.lateness_ns / 1e3,
                        "phases": [sym.phases.host_enqueue / 1e3, sym.phases.queued_to_submitted / 1e3,
                                   sym.phases.submitted_to_start / 1e3, sym.phases.execution / 1e3],
                        "symptom": format!("{:?} {}", node.kind, node.name),
                        "critical_path": sym.critical_path.iter()
                            .map(|&n| format!("{:?}:{}", b.ground_truth.nodes[n as usize].kind, b.ground_truth.nodes[n as usize].name))
                            .collect::<Vec<_>>(),
                        "injections": b.ground_truth.injections.iter().map(|i| json!({
                            "kind": i.kind, "mechanism": i.mechanism,
                            "requested_us": i.requested_us, "measured_us": i.measured_us,
                            "fault_node": i.fault_node,
                        })).collect::<Vec<_>>(),
                        "nodes": b.ground_truth.nodes.len(),
                        "edges": b.ground_truth.edges.len(),
                        "records": b.trace.len(),
                        "loss": {"cupti_dropped": b.loss.cupti_dropped, "timestamps_dropped": b.loss.cupti_timestamps_dropped},
                        "device_ops": run.map(|s| s.device_ops),
                        "bound": run.map(|s| s.bound),
                        "unbound": run.map(|s| s.unbound.clone()),
                        "api_bound": run.map(|s| (s.api_bound, s.api_ops)),
                        "harness_records": run.map(|s| s.harness_records),
                        "clock": run.map(|s| json!({"kernels": s.clock.kernels, "offset_ns": s.clock.offset_ns,
                            "max_start_dev_ns": s.clock.max_start_dev_ns, "max_end_dev_ns": s.clock.max_end_dev_ns,
                            "within_2us": s.clock.within_2us})),
                        "manifest": {"gpu": b.manifest.gpu, "driver": b.manifest.driver, "cuda": b.manifest.cuda,
                                     "cupti": b.manifest.cupti, "host": b.manifest.host},
                    }));
                }
                Err(e) => {
                    eprintln!("FAIL {} r{rep}: {e}", sc.name);
                    failures.push(json!({"bundle": format!("{}.r{rep}", sc.name), "error": e.to_string(),
                        "stats_errors": stats.iter().flat_map(|s| s.errors.clone()).collect::<Vec<_>>()}));
                }
            }
            aggregate(&stats);
        }
    }
    let record_seconds = started.elapsed().as_secs_f64();
    let agg = AGG.with(|a| a.borrow().clone());
    let devs = &agg.devs;
    let spin_rel: Vec<f64> = agg
        .spin
        .iter()
        .map(|&(r, m)| (m as f64 - r as f64).abs() / r as f64)
        .collect();
    let mut overhead = json!(null);
    if bench > 0 {
        match be.launch_overhead(bench, bench_reps) {
            Ok(o) => {
                eprintln!(
                    "overhead: {} kernels: direct {:?} ns, direct+binding {:?} ns, generator {:?} ns, generator closed {:?} ns, ratio {:.3}",
                    o.kernels, o.direct_ns, o.direct_bound_ns, o.generator_ns, o.generator_closed_ns, o.ratio
                );
                overhead = json!({
                    "kernels": o.kernels, "direct_ns": o.direct_ns, "generator_ns": o.generator_ns,
                    "direct_bound_ns": o.direct_bound_ns, "spin_overhead_ns": o.spin_overhead_ns,
                    "generator_closed_ns": o.generator_closed_ns,
                    "record_ns": o.record_ns, "ratio_median": o.ratio,
                    "bound": o.bound, "device_ops": o.device_ops,
                });
            }
            Err(e) => overhead = json!({"error": e.to_string()}),
        }
    }
    let summary = json!({
        "bundles_ok": bundles.len(),
        "failures": failures,
        "record_seconds": record_seconds,
        "binding": {"device_ops": agg.device_ops, "bound": agg.bound,
                    "percent": 100.0 * agg.bound as f64 / agg.device_ops.max(1) as f64,
                    "api_ops": agg.api_ops, "api_bound": agg.api_bound},
        "globaltimer": {"kernels": devs.len(), "max_ns": devs.iter().max(), "p99_ns": pct(devs, 0.99),
                        "p50_ns": pct(devs, 0.5),
                        "within_2us_percent": 100.0 * devs.iter().filter(|&&d| d <= 2000).count() as f64 / devs.len().max(1) as f64},
        "spin_ge_100us": {"kernels": spin_rel.len(),
                          "within_1pct_percent": 100.0 * spin_rel.iter().filter(|&&r| r <= 0.01).count() as f64 / spin_rel.len().max(1) as f64,
                          "max_rel_err": spin_rel.iter().cloned().fold(0.0, f64::max)},
        "cupti_dropped": agg.dropped,
        "overhead": overhead,
        "bundles": bundles,
    });
    let text = serde_json::to_string_pretty(&summary).expect("json");
    if let Some(p) = summary_path {
        std::fs::write(&p, &text).expect("write the summary");
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "bundles_ok": summary["bundles_ok"], "failures": summary["failures"],
            "binding": summary["binding"], "globaltimer": summary["globaltimer"],
            "spin_ge_100us": summary["spin_ge_100us"], "overhead": summary["overhead"],
            "record_seconds": record_seconds,
        }))
        .expect("json")
    );
}

#[derive(Default, Clone)]
struct Agg {
    device_ops: usize,
    bound: usize,
    api_ops: usize,
    api_bound: usize,
    devs: Vec<i64>,
    spin: Vec<(u64, u64)>,
    dropped: u64,
}

thread_local! {
    static AGG: std::cell::RefCell<Agg> = std::cell::RefCell::new(Agg::default());
}

fn aggregate(stats: &[generator::cuda::RunStats]) {
    AGG.with(|a| {
        let mut a = a.borrow_mut();
        for s in stats {
            a.device_ops += s.device_ops;
            a.bound += s.bound;
            a.api_ops += s.api_ops;
            a.api_bound += s.api_bound;
            a.devs.extend(s.clock.devs.iter().copied());
            a.spin.extend(s.spin.iter().copied());
            a.dropped += s.cupti_dropped;
        }
    });
}
