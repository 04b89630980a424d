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
//! The catalog is recorded with `CudaBackend::record_batch`: one eBPF host
//! recorder session for all runs (attaching/detaching costs ~20 s on the H200),
//! each run keeping the host records inside its own window.
//!
//! Options: `--reps N` (default: each scenario's repetitions), `--only SUBSTRING`,
//! `--bench N` kernels (default 100000, 0 = skip), `--bench-reps R` (default 3),
//! `--no-ebpf` (record without the eBPF host recorder),
//! `--ebpf-bench N` launches (default 0 = skip), `--ebpf-bench-reps R` (default 5):
//! eBPF collector overhead, with vs without, interleaved;
//! `--injection-table R` (default 0 = skip): every injection type (first
//! catalog scenario of each kind) at 1 ms and 5 ms requested, R repetitions,
//! symptom lateness vs the twin (bundles not written), also with the scenario's
//! copies pinned when it has pageable ones; `--table-kinds a,b` limits it to
//! those injection kinds;
//! `--pairs-reps R` (default 0 = skip): every catalog scenario R repetitions,
//! per paired family the lateness difference between variants;
//! `--table-ebpf`: keep the eBPF recorder on for those two studies (default off);
//! `--starve-check N` (default 0 = skip): a launch-bound run of N kernels with
//! CUPTI starved of activity buffers, against the same run with the normal supply.

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
    let no_ebpf = args.iter().any(|a| a == "--no-ebpf");
    let num =
        |name: &str, d: u32| -> u32 { arg(&args, name).and_then(|s| s.parse().ok()).unwrap_or(d) };
    let ebpf_bench = num("--ebpf-bench", 0);
    let ebpf_bench_reps = num("--ebpf-bench-reps", 5);
    let table_reps = num("--injection-table", 0);
    let pairs_reps = num("--pairs-reps", 0);
    let table_ebpf = args.iter().any(|a| a == "--table-ebpf");
    let be = match CudaBackend::new() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cuda_check: {e}");
            std::process::exit(3);
        }
    };
    if no_ebpf {
        be.set_host_recorder(false).expect("session");
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&catalog)
        .unwrap_or_else(|e| panic!("{}: {e}", catalog.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    std::fs::create_dir_all(&out).expect("create the output directory");
    let mut bundles = Vec::new();
    let mut failures = Vec::new();
    let mut sites = Sites::default();
    let mut scenarios: Vec<Scenario> = Vec::new();
    let mut items: Vec<(Scenario, u32)> = Vec::new();
    let started = std::time::Instant::now();
    for f in &files {
        let sc = match Scenario::read(f) {
            Ok(s) => s,
            Err(e) => {
                failures.push(json!({"file": f.display().to_string(), "error": e.to_string()}));
                continue;
            }
        };
        scenarios.push(sc.clone());
        if only.as_deref().is_some_and(|o| !sc.name.contains(o)) {
            continue;
        }
        for rep in 0..reps.unwrap_or(sc.repetitions) {
            items.push((sc.clone(), rep));
        }
    }
    // One eBPF recorder session for the whole catalog (attach/detach costs seconds).
    let batch = be.record_batch(&items).unwrap_or_else(|e| {
        eprintln!("cuda_check: {e}");
        std::process::exit(3);
    });
    let per_run = started.elapsed().as_secs_f64() / items.len().max(1) as f64;
    for ((sc, rep), (r, stats)) in items.iter().zip(batch) {
        let rep = *rep;
        {
            let run = stats.iter().rev().find(|s| !s.twin);
            match r {
                Ok(b) => {
                    let path = out.join(format!("{}.bundle.json", b.id()));
                    if let Err(e) = b.write(&path) {
                        failures.push(json!({"bundle": b.id(), "error": format!("write: {e}")}));
                    }
                    let host = run.and_then(|s| s.host.clone());
                    if let Some(h) = &host {
                        sites.add(h, sc.family == "call-site-attribution");
                    }
                    let sym = &b.ground_truth.symptoms[0];
                    let node = &b.ground_truth.nodes[sym.node as usize];
                    eprintln!(
                        "ok   {:60} {:>7.1} ms  late {:>9.1} us  bound {}/{}  clock max {} ns",
                        b.id(),
                        per_run * 1e3,
                        sym.lateness_ns / 1e3,
                        run.map(|s| s.bound).unwrap_or(0),
                        run.map(|s| s.device_ops).unwrap_or(0),
                        run.map(|s| s.clock.max_start_dev_ns.max(s.clock.max_end_dev_ns))
                            .unwrap_or(0)
                    );
                    bundles.push(json!({
                        "bundle": b.id(),
                        "seconds_batch_average": per_run,
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
                        "collectors": b.manifest.collectors,
                        "cross_check": b.manifest.cross_check.as_ref().map(|c| json!({
                            "kernels": c.kernels, "clock_offset_ns": c.clock_offset_ns,
                            "max_start_diff_ns": c.max_start_diff_ns, "max_end_diff_ns": c.max_end_diff_ns,
                            "spin_overhead_ns": c.spin_overhead_ns, "device_ops": c.device_ops,
                            "device_ops_bound": c.device_ops_bound, "call_sites_exact": c.call_sites_exact,
                            "call_sites_nearest_wrong": c.call_sites_nearest_wrong})),
                        "host": host.as_ref().map(host_json),
                        "ringbuffer_dropped": b.loss.ringbuffer_dropped,
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
    let write_partial = |key: &str, v: &serde_json::Value| {
        if let Some(p) = &summary_path {
            let p = p.with_extension(format!("{key}.json"));
            let _ = std::fs::write(p, serde_json::to_string_pretty(v).expect("json"));
        }
    };
    let call_sites = sites.json();
    write_partial("call-sites", &call_sites);
    write_partial(
        "recording",
        &json!({"bundles_ok": bundles.len(), "failures": failures, "record_seconds": record_seconds,
                "bundles": bundles}),
    );
    eprintln!("call sites: {call_sites}");
    let mut ebpf_overhead = json!(null);
    if ebpf_bench > 0 {
        ebpf_overhead = match be.ebpf_overhead(ebpf_bench, ebpf_bench_reps) {
            Ok(o) => json!({
                "kernels": o.kernels, "with_ns": o.with_ns, "without_ns": o.without_ns,
                "ratio_median": o.ratio, "uprobes": o.uprobes,
                "ringbuffer_dropped": o.ringbuffer_dropped, "start_ns": o.start_ns,
                "stop_ns": o.stop_ns, "error": o.error,
            }),
            Err(e) => json!({"error": e.to_string()}),
        };
        eprintln!("ebpf overhead: {ebpf_overhead}");
        write_partial("ebpf-overhead", &ebpf_overhead);
    }
    if (table_reps > 0 || pairs_reps > 0) && !table_ebpf {
        be.set_host_recorder(false).expect("session");
    }
    let starve_ops = num("--starve-check", 0);
    if starve_ops > 0 {
        let v = starve_check(&be, starve_ops, &out);
        eprintln!("starve check: {v}");
        write_partial("starve-check", &v);
    }
    let mut injection_table = json!(null);
    if table_reps > 0 {
        let kinds = arg(&args, "--table-kinds");
        let kinds: Option<Vec<&str>> = kinds.as_deref().map(|k| k.split(',').collect());
        injection_table = injection_study(&be, &scenarios, table_reps, kinds.as_deref());
        write_partial("injection-table", &injection_table);
    }
    let mut pairs = json!(null);
    if pairs_reps > 0 {
        pairs = pairs_study(&be, &scenarios, pairs_reps);
        write_partial("pairs", &pairs);
    }
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
        "call_sites": call_sites,
        "ebpf_overhead": ebpf_overhead,
        "injection_table": injection_table,
        "pairs": pairs,
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
            "call_sites": summary["call_sites"], "ebpf_overhead": summary["ebpf_overhead"],
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

fn host_json(h: &generator::cuda::HostStats) -> serde_json::Value {
    json!({
        "uprobes": h.uprobes, "uprobes_owned": h.uprobes_owned,
        "sched": h.sched, "sched_owned": h.sched_owned,
        "page_faults": h.page_faults, "page_faults_owned": h.page_faults_owned,
        "dropped_outside": h.dropped_outside, "ringbuffer_dropped": h.ringbuffer_dropped,
        "stack_errors": h.stack_errors, "kernels": h.kernels,
        "kernels_with_call_site": h.kernels_with_call_site, "launch_calls": h.launch_calls,
        "call_sites_exact": h.call_sites_exact, "nearest_other_call": h.nearest_other_call,
        "call_sites_nearest_wrong": h.call_sites_nearest_wrong,
        "call_site_frames": h.call_site_frames, "warnings": h.warnings,
    })
}

/// Call-site recovery summed over bundles: the call-site family and all.
#[derive(Default)]
struct Sites {
    family: [usize; 6],
    all: [usize; 6],
    frames: std::collections::BTreeSet<String>,
}

impl Sites {
    fn add(&mut self, h: &generator::cuda::HostStats, family: bool) {
        let v = [
            h.kernels,
            h.kernels_with_call_site,
            h.launch_calls,
            h.call_sites_exact,
            h.call_sites_nearest_wrong,
            h.nearest_other_call,
        ];
        for i in 0..6 {
            self.all[i] += v[i];
            if family {
                self.family[i] += v[i];
            }
        }
        if family {
            self.frames.extend(h.call_site_frames.iter().cloned());
        }
    }

    fn json(&self) -> serde_json::Value {
        let one = |a: &[usize; 6]| {
            json!({
                "kernels": a[0], "kernels_with_call_site": a[1],
                "kernels_with_call_site_percent": 100.0 * a[1] as f64 / a[0].max(1) as f64,
                "launch_calls": a[2], "exact": a[3],
                "exact_percent": 100.0 * a[3] as f64 / a[2].max(1) as f64,
                "nearest_wrong_stack": a[4],
                "nearest_wrong_stack_percent": 100.0 * a[4] as f64 / a[3].max(1) as f64,
                "nearest_other_call": a[5],
                "nearest_other_call_percent": 100.0 * a[5] as f64 / a[3].max(1) as f64,
            })
        };
        json!({"call_site_family": one(&self.family), "all_bundles": one(&self.all),
               "call_site_family_frames": self.frames})
    }
}

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
        let _ = be.take_stats();
    }
    (late, measured, errors)
}

fn quantiles(v: &[f64]) -> serde_json::Value {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let q = |p: f64| {
        if v.is_empty() {
            f64::NAN
        } else {
            v[((v.len() - 1) as f64 * p).round() as usize]
        }
    };
    json!({"n": v.len(), "min": q(0.0), "p10": q(0.1), "median": q(0.5), "p90": q(0.9), "max": q(1.0)})
}

/// Issue 6: each injection type at 1 ms and 5 ms requested.
fn injection_study(
    be: &CudaBackend,
    scenarios: &[Scenario],
    reps: u32,
    table_kinds: Option<&[&str]>,
) -> serde_json::Value {
    let mut seen = std::collections::BTreeSet::new();
    let mut rows = Vec::new();
    for sc in scenarios {
        let Some(inj) = &sc.injection else { continue };
        let kind = inj.kind.as_str().to_string();
        if kind == "record_loss" || !seen.insert(kind.clone()) {
            continue;
        }
        if table_kinds.is_some_and(|k| !k.iter().any(|k| *k == kind)) {
            continue;
        }
        // A transfer's own jitter (large for pageable copies, which the CPU
        // stages) limits how precisely lengthening one, or waiting behind
        // one, shows an injection: the same injection with the scenario's
        // copies pinned is measured too.
        let mut variants = vec![(sc.clone(), String::new())];
        if let Some(pinned) = with_copies_pinned(sc) {
            variants.push((pinned, " (copies pinned)".to_string()));
        }
        // No catalog scenario asks for major faults: measure them on the
        // minor-fault scenario.
        if inj.kind == ground_truth::scenario::InjectionKind::HostPageFaultMinor {
            let mut major = sc.clone();
            if let Some(i) = major.injection.as_mut() {
                i.kind = ground_truth::scenario::InjectionKind::HostPageFaultMajor;
            }
            variants.push((major, " -> host_page_fault_major".to_string()));
        }
        for (sc, note) in &variants {
            for mag_us in [1000.0, 5000.0] {
                let mut s = sc.clone();
                if let Some(i) = s.injection.as_mut() {
                    i.magnitude_us = mag_us;
                }
                let t = std::time::Instant::now();
                let (late, measured, errors) = lateness_runs(be, &s, reps);
                let within = late
                    .iter()
                    .filter(|&&l| (l - mag_us).abs() <= 0.1 * mag_us)
                    .count();
                let row = json!({
                    "kind": format!("{kind}{note}"), "scenario": sc.name, "requested_us": mag_us,
                    "reps": reps, "ok": late.len(),
                    "within_10pct": within,
                    "within_10pct_percent": 100.0 * within as f64 / late.len().max(1) as f64,
                    "lateness_us": quantiles(&late),
                    "injection_measured_us": quantiles(&measured),
                    "lateness_all_us": late,
                    "errors": errors, "seconds": t.elapsed().as_secs_f64(),
                });
                eprintln!(
                    "table {:44} {mag_us:>6} us: within 10 % {within}/{} median {}",
                    format!("{kind}{note}"),
                    late.len(),
                    row["lateness_us"]["median"]
                );
                eprintln!("tablerow {row}");
                rows.push(row);
            }
        }
    }
    json!(rows)
}

/// Real CUPTI record loss: a launch-bound run with CUPTI given only two small
/// activity buffers. CUPTI's dropped count must reach the bundle and every op
/// must still be in the ground truth.
fn starve_check(be: &CudaBackend, ops: u32, out: &std::path::Path) -> serde_json::Value {
    use ground_truth::graph::NodeKind;
    let sc = generator::sim::launch_bound_scenario(ops);
    let budget = (2usize, 64usize << 10);
    // Host records are beside the point here, and attaching costs ~20 s a run.
    be.set_host_recorder(false).expect("session");
    let run = |starved: bool| -> serde_json::Value {
        be.set_cupti_starvation(starved.then_some(budget))
            .expect("session");
        let r = be.record(&sc, 0);
        let _ = be.take_stats();
        be.set_cupti_starvation(None).expect("session");
        match r {
            Ok(b) => {
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
                let path = out.join(format!(
                    "starve-check.{}.bundle.json",
                    if starved { "starved" } else { "normal" }
                ));
                let written = b.write(&path).map_err(|e| e.to_string());
                let reread = ground_truth::Bundle::read(&path)
                    .map(|_| ())
                    .map_err(|e| e.to_string());
                json!({
                    "starved": starved, "buffers": budget.0, "buffer_bytes": budget.1,
                    "cupti_dropped": b.loss.cupti_dropped, "records": b.trace.len(),
                    "kernels": kernels.len(), "kernels_with_record": with_record,
                    "api_calls": calls, "written": written.is_ok(), "reread": reread,
                })
            }
            Err(e) => json!({"starved": starved, "error": e.to_string()}),
        }
    };
    json!({"ops": ops, "normal": run(false), "starved": run(true)})
}

/// The scenario with every pageable copy in pinned host memory, when it has any.
fn with_copies_pinned(sc: &Scenario) -> Option<Scenario> {
    use ground_truth::scenario::Step;
    use ground_truth::trace::HostMemory;
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

/// Issue 6: the paired families at their catalog magnitudes.
fn pairs_study(be: &CudaBackend, scenarios: &[Scenario], reps: u32) -> serde_json::Value {
    let mut by_family: std::collections::BTreeMap<String, Vec<serde_json::Value>> =
        Default::default();
    for sc in scenarios {
        let (late, _, errors) = lateness_runs(be, sc, reps);
        let med = {
            let mut v = late.clone();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
        };
        eprintln!("pairs {:60} median lateness {med:.1} us", sc.name);
        by_family.entry(sc.family.clone()).or_default().push(json!({
            "variant": sc.variant, "scenario": sc.name,
            "cause": sc.injection.as_ref().map(|i| i.kind.as_str().to_string()),
            "requested_us": sc.injection.as_ref().map(|i| i.magnitude_us),
            "median_lateness_us": med, "lateness_us": quantiles(&late),
            "lateness_all_us": late, "errors": errors,
        }));
    }
    let mut out = Vec::new();
    for (family, variants) in by_family {
        let meds: Vec<f64> = variants
            .iter()
            .filter_map(|v| v["median_lateness_us"].as_f64())
            .filter(|m| m.is_finite())
            .collect();
        let (lo, hi) = meds
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &m| (a.min(m), b.max(m)));
        let diff = if meds.len() >= 2 && hi > 0.0 {
            (hi - lo) / hi
        } else {
            f64::NAN
        };
        out.push(json!({
            "family": family, "variants": variants,
            "max_relative_difference": diff,
            "under_20pct": meds.len() >= 2 && diff < 0.2,
        }));
    }
    json!(out)
}
