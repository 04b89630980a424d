//! `causalbench corpus record`: every scenario of a suite recorded on the GPU
//! into a corpus directory, the way `results/corpus/h200-580/` was made: one
//! `ID.bundle.json` per bundle (each with its manifest: collectors, GPU,
//! driver, CUDA, CUPTI, the recorder's cross-check), `recording-summary.json`
//! (per bundle: lateness, phases, binding, clocks, host records; over all
//! bundles: CUPTI binding, CUPTI vs `%globaltimer`, spin-kernel accuracy) and
//! `call-sites.json` (call-site recovery, the call-site family and all).
//!
//! The whole suite is recorded under one eBPF recorder session
//! (`CudaBackend::record_batch`): attaching and draining the recorder costs
//! seconds, so a session per bundle would dominate the recording.

use crate::gpu;
use crate::Failure;
use generator::cuda::{HostStats, RunStats};
use ground_truth::io::Readable;
use ground_truth::{Bundle, Scenario};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Instant;

/// `causalbench corpus`'s subcommands.
#[derive(clap::Subcommand)]
pub enum CorpusCommand {
    /// Record every scenario of a suite on the GPU (CUPTI, the eBPF host
    /// recorder, the app's own records) into a corpus directory that
    /// `causalbench run --corpus DIR` replays.
    Record(RecordArgs),
}

/// `causalbench corpus record`'s options.
#[derive(clap::Args)]
pub struct RecordArgs {
    /// Corpus directory: `ID.bundle.json` per bundle, `recording-summary.json`, `call-sites.json`.
    #[arg(long)]
    pub out: PathBuf,
    /// `catalog` (the embedded suite), a generated split (`dev`: fixed seed; `test`:
    /// a fresh seed, or `--split-seed`) or a directory of scenario files.
    #[arg(long, default_value = crate::catalog::DEFAULT_SUITE)]
    pub suite: String,
    /// Scenarios of a generated split (whole family instances; default 300).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub cases: Option<u64>,
    /// The test split's seed (default: a fresh one, printed and kept in
    /// `recording-summary.json`'s scenarios).
    #[arg(long)]
    pub split_seed: Option<u64>,
    /// Repetitions per scenario (default: each scenario's own `repetitions`),
    /// at most the scenario-size limit of repetitions.
    #[arg(long, value_parser = clap::value_parser!(u32).range(..=i64::from(ground_truth::scenario::MAX_REPETITIONS)))]
    pub reps: Option<u32>,
    /// Record only the scenarios whose name contains this text.
    #[arg(long)]
    pub only: Option<String>,
    /// Record without the eBPF host recorder (manifests then omit `ebpf`).
    #[arg(long)]
    pub no_ebpf: bool,
}

pub fn corpus(command: CorpusCommand) -> Result<(), Failure> {
    match command {
        CorpusCommand::Record(args) => record(&args),
    }
}

fn record(args: &RecordArgs) -> Result<(), Failure> {
    let mut items: Vec<(Scenario, u32)> = Vec::new();
    let draw =
        crate::catalog::split_draw(&args.suite, args.cases.map(|c| c as usize), args.split_seed);
    let scenarios = match draw.clone() {
        Some(draw) => crate::catalog::load_split(draw),
        None => crate::catalog::load_suite(&args.suite, None)?,
    };
    for sc in scenarios {
        if args.only.as_deref().is_some_and(|o| !sc.name.contains(o)) {
            continue;
        }
        for rep in 0..args.reps.unwrap_or(sc.repetitions) {
            items.push((sc.clone(), rep));
        }
    }
    if items.is_empty() {
        return Err(Failure::input(format!(
            "no scenario of suite `{}` matches --only {:?}",
            args.suite,
            args.only.as_deref().unwrap_or("")
        )));
    }
    let be = gpu::open("corpus record")?;
    if args.no_ebpf {
        gpu::host_recorder(&be, false)?;
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", args.out.display())))?;
    let started = Instant::now();
    let bar = crate::progress::Stage::start(
        crate::progress::Report::choose(false),
        items.len(),
        "bundles recorded",
    );
    bar.set_item("recording under one recorder session");
    let mut bundles = Vec::new();
    let mut failures = Vec::new();
    let mut sites = CallSites::default();
    let mut totals = Totals::default();
    let mut redrawn = Vec::new();
    let mut round = items;
    for attempt in 0..=crate::redraw::MAX_REDRAWS {
        let batch = be.record_batch(&round).map_err(Failure::failed)?;
        bar.set_item("");
        let per_run = started.elapsed().as_secs_f64() / (bar.position() + round.len()) as f64;
        let mut verdicts = Vec::new();
        for ((sc, rep), (recorded, stats)) in round.iter().zip(batch) {
            let verdict = recorded.as_ref().ok().and_then(crate::run::label_verdict);
            verdicts.push((sc, *rep, verdict));
            keep_recorded(
                args,
                (sc, *rep),
                (recorded, stats),
                per_run,
                &bar,
                Kept {
                    bundles: &mut bundles,
                    failures: &mut failures,
                    sites: &mut sites,
                    totals: &mut totals,
                },
            );
        }
        // A generated split re-draws the instances whose label dropped (`crate::redraw`).
        let Some(draw) = draw
            .as_ref()
            .filter(|_| attempt < crate::redraw::MAX_REDRAWS)
        else {
            break;
        };
        let (more, now) = crate::redraw::replacements(draw.split, draw.seed, verdicts);
        if more.is_empty() {
            break;
        }
        bar.add_items(more.len());
        redrawn.extend(now);
        round = more;
    }
    bar.finish();
    let record_seconds = started.elapsed().as_secs_f64();
    let call_sites = sites.json();
    gpu::write_json(&args.out.join("call-sites.json"), &call_sites)?;
    let ok = bundles.len();
    let failed = failures.len();
    let mut summary = json!({
        "bundles_ok": ok, "failures": failures, "record_seconds": record_seconds,
        "bundles": bundles, "redrawn": redrawn,
    });
    for (key, value) in totals.json() {
        summary[key] = value;
    }
    gpu::write_json(&args.out.join("recording-summary.json"), &summary)?;
    eprintln!(
        "causalbench: {ok} bundles recorded on the GPU in {record_seconds:.1} s, {failed} failed, \
         {} instances re-drawn for a dropped variant; binding {}, globaltimer {}; corpus in {}",
        redrawn.len(),
        summary["binding"],
        summary["globaltimer"],
        args.out.display()
    );
    if failed > 0 {
        return Err(Failure::failed(format!(
            "{failed} of {ok_and_failed} bundles failed (see {})",
            args.out.join("recording-summary.json").display(),
            ok_and_failed = ok + failed,
        )));
    }
    Ok(())
}

/// Where the outcome of one recorded bundle goes.
struct Kept<'a> {
    bundles: &'a mut Vec<Value>,
    failures: &'a mut Vec<Value>,
    sites: &'a mut CallSites,
    totals: &'a mut Totals,
}

/// Writes one recorded bundle and adds it to the summary, or its failure.
fn keep_recorded(
    args: &RecordArgs,
    (sc, rep): (&Scenario, u32),
    (recorded, stats): (Result<Bundle, impl std::fmt::Display>, Vec<RunStats>),
    per_run: f64,
    bar: &crate::progress::Stage,
    kept: Kept,
) {
    let Kept {
        bundles,
        failures,
        sites,
        totals,
    } = kept;
    totals.add(&stats);
    match recorded {
        Ok(b) => {
            let path = args.out.join(format!("{}.bundle.json", b.id()));
            if let Err(e) = b.write(&path) {
                failures.push(json!({"bundle": b.id(), "error": format!("write: {e}")}));
            }
            let run = stats.iter().rev().find(|s| !s.twin);
            if let Some(h) = run.and_then(|s| s.host.as_ref()) {
                sites.add(h, sc.family == "call-site-attribution");
            }
            bar.say(summary_line(&b, run, per_run));
            bundles.push(bundle_summary(&b, run, per_run));
        }
        Err(e) => {
            bar.say(format!("FAIL {} r{rep}: {e}", sc.name));
            failures.push(
                json!({"bundle": format!("{}.r{rep}", sc.name), "error": e.to_string(),
                "stats_errors": stats.iter().flat_map(|s| s.errors.clone()).collect::<Vec<_>>()}),
            );
        }
    }
    bar.inc();
}

fn summary_line(b: &Bundle, run: Option<&RunStats>, per_run: f64) -> String {
    let sym = &b.ground_truth.symptoms[0];
    format!(
        "ok   {:60} {:>7.1} ms  late {:>9.1} us  bound {}/{}  clock max {} ns",
        b.id(),
        per_run * 1e3,
        sym.lateness_ns / 1e3,
        run.map(|s| s.bound).unwrap_or(0),
        run.map(|s| s.device_ops).unwrap_or(0),
        run.map(|s| s.clock.max_start_dev_ns.max(s.clock.max_end_dev_ns))
            .unwrap_or(0)
    )
}

/// One bundle's entry in `recording-summary.json`.
fn bundle_summary(b: &Bundle, run: Option<&RunStats>, per_run: f64) -> Value {
    let sym = &b.ground_truth.symptoms[0];
    let node = &b.ground_truth.nodes[sym.node as usize];
    let name = |n: u32| {
        let node = &b.ground_truth.nodes[n as usize];
        format!("{:?}:{}", node.kind, node.name)
    };
    json!({
        "bundle": b.id(),
        "seconds_batch_average": per_run,
        "lateness_us": sym.lateness_ns / 1e3,
        "phases": [sym.phases.host_enqueue / 1e3, sym.phases.queued_to_submitted / 1e3,
                   sym.phases.submitted_to_start / 1e3, sym.phases.execution / 1e3],
        "symptom": format!("{:?} {}", node.kind, node.name),
        "critical_path": sym.critical_path.iter().map(|&n| name(n)).collect::<Vec<_>>(),
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
        "host": run.and_then(|s| s.host.as_ref()).map(host_json),
        "ringbuffer_dropped": b.loss.ringbuffer_dropped,
        "manifest": {"gpu": b.manifest.gpu, "driver": b.manifest.driver, "cuda": b.manifest.cuda,
                     "cupti": b.manifest.cupti, "host": b.manifest.host},
    })
}

fn host_json(h: &HostStats) -> Value {
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

/// The recorder's measurements summed over every run (twins included).
#[derive(Default)]
struct Totals {
    device_ops: usize,
    bound: usize,
    api_ops: usize,
    api_bound: usize,
    /// |CUPTI − `%globaltimer`| per kernel, ns.
    clock_differences: Vec<i64>,
    /// (requested, measured) ns of spin kernels of at least 100 µs.
    spins: Vec<(u64, u64)>,
    cupti_dropped: u64,
}

impl Totals {
    fn add(&mut self, stats: &[RunStats]) {
        for s in stats {
            self.device_ops += s.device_ops;
            self.bound += s.bound;
            self.api_ops += s.api_ops;
            self.api_bound += s.api_bound;
            self.clock_differences.extend(s.clock.devs.iter().copied());
            self.spins.extend(s.spin.iter().copied());
            self.cupti_dropped += s.cupti_dropped;
        }
    }

    fn json(&self) -> [(&'static str, Value); 4] {
        let devs = &self.clock_differences;
        let spin_error: Vec<f64> = self
            .spins
            .iter()
            .map(|&(requested, measured)| {
                (measured as f64 - requested as f64).abs() / requested as f64
            })
            .collect();
        let share = |count: usize, of: usize| 100.0 * count as f64 / of.max(1) as f64;
        [
            (
                "binding",
                json!({"device_ops": self.device_ops, "bound": self.bound,
                       "percent": share(self.bound, self.device_ops),
                       "api_ops": self.api_ops, "api_bound": self.api_bound}),
            ),
            (
                "globaltimer",
                json!({"kernels": devs.len(), "max_ns": devs.iter().max(),
                       "p99_ns": percentile(devs, 0.99), "p50_ns": percentile(devs, 0.5),
                       "within_2us_percent": share(devs.iter().filter(|&&d| d <= 2000).count(), devs.len())}),
            ),
            (
                "spin_ge_100us",
                json!({"kernels": spin_error.len(),
                       "within_1pct_percent": share(spin_error.iter().filter(|&&r| r <= 0.01).count(), spin_error.len()),
                       "max_rel_err": spin_error.iter().cloned().fold(0.0, f64::max)}),
            ),
            ("cupti_dropped", json!(self.cupti_dropped)),
        ]
    }
}

fn percentile(v: &[i64], q: f64) -> i64 {
    if v.is_empty() {
        return 0;
    }
    let mut v = v.to_vec();
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Call-site recovery summed over bundles: the call-site family and all.
#[derive(Default)]
struct CallSites {
    family: [usize; 6],
    all: [usize; 6],
    frames: std::collections::BTreeSet<String>,
}

impl CallSites {
    fn add(&mut self, h: &HostStats, family: bool) {
        let v = [
            h.kernels,
            h.kernels_with_call_site,
            h.launch_calls,
            h.call_sites_exact,
            h.call_sites_nearest_wrong,
            h.nearest_other_call,
        ];
        for (total, count) in self.all.iter_mut().zip(v) {
            *total += count;
        }
        if family {
            for (total, count) in self.family.iter_mut().zip(v) {
                *total += count;
            }
        }
        if family {
            self.frames.extend(h.call_site_frames.iter().cloned());
        }
    }

    fn json(&self) -> Value {
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
