//! `causalbench collector`: bring your own collector (baselines/COLLECTORS.md).
//!
//! - `collector run`: the workload (`causalbench workload`, truth without
//!   CUPTI) under a collector that wraps it (`{workload}` in its command) or
//!   attaches to it by PID (`{pid}`, `{go}`); the collector's native output
//!   through its author's converter, run isolated like an external profiler
//!   (`baselines::sandbox`); the converted records bound to the workload's
//!   truth (`collector bind`); the bundles scored by `causalbench run --corpus`
//!   with the same metrics, and the rows marked "own collector".
//! - `collector bind`: converted records + the workload's bundles → bundles
//!   whose trace is the collector's (no GPU: what CI replays).
//! - `collector ebpf`: the project's eBPF host recorder as an attaching
//!   collector (closed-source mode for real: it sees only the process).

use crate::Failure;
use ground_truth::collector::{CollectorClock, CollectorRecords};
use ground_truth::io::Readable;
use ground_truth::Bundle;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Subcommand)]
pub enum CollectorCommand {
    /// Run a collector on the workload, convert, bind and score its records.
    Run(RunArgs),
    /// Bind a converter's records to a workload's bundles (no GPU needed).
    Bind(BindArgs),
    /// The project's eBPF host recorder attached to a workload by PID.
    Ebpf(EbpfArgs),
    /// One markdown table of several result sets' rows, each marked with
    /// its source (own collectors beside the view-based rows).
    Table(TableArgs),
}

#[derive(clap::Args)]
pub struct TableArgs {
    /// `SOURCE=RESULTS_DIR` (repeatable): the rows of RESULTS_DIR/leaderboard.json,
    /// marked SOURCE.
    #[arg(long = "rows", value_name = "SOURCE=DIR", required = true)]
    pub rows: Vec<String>,
    /// Only the rows of these views (`cupti-closed`, `host-closed`, …; default all).
    #[arg(long, value_delimiter = ',')]
    pub views: Vec<String>,
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// The collector's name on the leaderboard (an identifier).
    #[arg(long)]
    pub name: String,
    /// The collector's command line (no shell): `{workload}` where the
    /// workload's command goes (a wrapping collector), or `{pid}` and `{go}`
    /// (an attaching one); `{native}`: a directory for its native output
    /// (a wrapping collector's stdout is kept there as `stdout.txt` too).
    #[arg(long)]
    pub collector: String,
    /// The converter's command line (no shell): `{native}` (the native output
    /// directory, read only) and `{out}` (where it writes `records.json`).
    #[arg(long)]
    pub converter: String,
    /// The workload's scenarios: `catalog`, `dev`, `test` or a directory.
    #[arg(long, default_value = crate::catalog::DEFAULT_SUITE)]
    pub scenarios: String,
    #[arg(long)]
    pub cases: Option<usize>,
    #[arg(long)]
    pub only: Option<String>,
    /// At most this many scenarios, spread evenly over the suite.
    #[arg(long)]
    pub sample: Option<usize>,
    #[arg(long)]
    pub out: PathBuf,
    /// Wall-clock limit of the collector with its workload, and of the converter, in seconds.
    #[arg(long, default_value_t = 1800)]
    pub timeout: u64,
    /// On a kernel without Landlock, run the converter unisolated instead of refusing.
    #[arg(long)]
    pub allow_unisolated: bool,
    /// Stop after binding (no `run --corpus`).
    #[arg(long)]
    pub no_score: bool,
}

#[derive(clap::Args)]
pub struct BindArgs {
    /// The workload's output directory (`ID.bundle.json`, `workload.json`).
    #[arg(long)]
    pub workload: PathBuf,
    /// The converter's `records.json`.
    #[arg(long)]
    pub records: PathBuf,
    /// Where the bound bundles and `binding.json` go.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(clap::Args)]
pub struct EbpfArgs {
    #[arg(long)]
    pub pid: u32,
    /// The workload's go file: created once attached, removed when done.
    #[arg(long)]
    pub go: PathBuf,
    /// Directory for `records.json` (already in the collector-records format).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn collector(command: CollectorCommand) -> Result<(), Failure> {
    match command {
        CollectorCommand::Run(a) => run(&a),
        CollectorCommand::Bind(a) => bind(&a.workload, &a.records, &a.out).map(|_| ()),
        CollectorCommand::Ebpf(a) => ebpf(&a),
        CollectorCommand::Table(a) => table(&a),
    }
}

fn mkdir(p: &Path) -> Result<(), Failure> {
    std::fs::create_dir_all(p)
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", p.display())))
}

fn words(template: &str, what: &str) -> Result<Vec<String>, Failure> {
    let w = shell_words::split(template).map_err(|e| Failure::input(format!("--{what}: {e}")))?;
    if w.is_empty() {
        return Err(Failure::input(format!("--{what} is empty")));
    }
    Ok(w)
}

fn substitute(w: &[String], pairs: &[(&str, &Path)]) -> Vec<String> {
    w.iter()
        .map(|s| {
            pairs.iter().fold(s.clone(), |s, (k, v)| {
                s.replace(k, &v.display().to_string())
            })
        })
        .collect()
}

/// Waits for `child` at most until `deadline`, then kills it.
fn wait(mut child: Child, what: &str, deadline: Instant) -> Result<(), Failure> {
    loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => return Ok(()),
            Ok(Some(s)) => return Err(Failure::failed(format!("{what} exited with {s}"))),
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Failure::failed(format!("{what} ran past its time limit")));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(Failure::failed(format!("waiting for {what}: {e}"))),
        }
    }
}

/// A workload some of whose scenarios failed still recorded the others
/// (`workload.json` says which): go on with those, saying so.
fn survivable(r: Result<(), Failure>, workload_dir: &Path) -> Result<(), Failure> {
    match r {
        Err(f) if f.code == 1 && workload_dir.join("workload.json").is_file() => {
            eprintln!(
                "causalbench: {} (going on with the scenarios it recorded)",
                f.message
            );
            Ok(())
        }
        r => r,
    }
}

fn spawn(argv: &[String], what: &str, stdout: Option<&Path>) -> Result<Child, Failure> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null());
    if let Some(p) = stdout {
        let f = std::fs::File::create(p)
            .map_err(|e| Failure::failed(format!("cannot create {}: {e}", p.display())))?;
        cmd.stdout(f);
    }
    cmd.spawn()
        .map_err(|e| Failure::input(format!("cannot start {what} `{}`: {e}", argv[0])))
}

fn run(a: &RunArgs) -> Result<(), Failure> {
    if let Some(p) = ground_truth::identifier::identifier_problem(&a.name) {
        return Err(Failure::input(format!("--name: {p}")));
    }
    let out = std::path::absolute(&a.out).unwrap_or(a.out.clone());
    let (workload_dir, native, converted) = (
        out.join("workload"),
        out.join("native"),
        out.join("converted"),
    );
    for d in [&workload_dir, &native, &converted] {
        mkdir(d)?;
    }
    let exe = std::env::current_exe()
        .map_err(|e| Failure::failed(format!("cannot find this program: {e}")))?;
    let mut workload: Vec<String> = vec![
        exe.display().to_string(),
        "workload".into(),
        "--suite".into(),
        a.scenarios.clone(),
        "--out".into(),
        workload_dir.display().to_string(),
    ];
    for (flag, v) in [
        ("--cases", a.cases.map(|c| c.to_string())),
        ("--only", a.only.clone()),
        ("--sample", a.sample.map(|c| c.to_string())),
    ] {
        if let Some(v) = v {
            workload.extend([flag.to_string(), v]);
        }
    }
    let template = words(&a.collector, "collector")?;
    let deadline = Instant::now() + Duration::from_secs(a.timeout);
    let wraps = template.iter().any(|w| w == "{workload}");
    let attaches = template.iter().any(|w| w.contains("{pid}"));
    if wraps == attaches {
        return Err(Failure::input(
            "--collector must name either `{workload}` (a wrapping collector) or `{pid}` (an attaching one)",
        ));
    }
    let started = Instant::now();
    if wraps {
        let argv: Vec<String> = template
            .iter()
            .flat_map(|w| {
                if w == "{workload}" {
                    workload.clone()
                } else {
                    substitute(std::slice::from_ref(w), &[("{native}", &native)])
                }
            })
            .collect();
        let child = spawn(&argv, "the collector", Some(&native.join("stdout.txt")))?;
        survivable(
            wait(child, "the collector with its workload", deadline),
            &workload_dir,
        )?;
    } else {
        let (pid_file, go) = (out.join("workload.pid"), out.join("go"));
        let _ = std::fs::remove_file(&pid_file);
        let _ = std::fs::remove_file(&go);
        let _ = std::fs::remove_file(crate::workload::done_file(&go));
        workload.extend([
            "--pid-file".into(),
            pid_file.display().to_string(),
            "--go".into(),
            go.display().to_string(),
        ]);
        let w = spawn(
            &workload,
            "the workload",
            Some(&native.join("workload-stdout.txt")),
        )?;
        while !pid_file.exists() {
            if Instant::now() > deadline {
                return Err(Failure::failed("the workload never wrote its pid"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let pid = std::fs::read_to_string(&pid_file)
            .map_err(|e| Failure::failed(format!("reading the workload's pid: {e}")))?;
        let argv: Vec<String> = substitute(&template, &[("{go}", &go), ("{native}", &native)])
            .into_iter()
            .map(|s| s.replace("{pid}", pid.trim()))
            .collect();
        let c = spawn(&argv, "the collector", Some(&native.join("stdout.txt")))?;
        let collected = wait(c, "the collector", deadline);
        if collected.is_err() {
            // The workload waits for the go file to go: release it.
            let _ = std::fs::remove_file(&go);
        }
        survivable(wait(w, "the workload", deadline), &workload_dir)?;
        collected?;
    }
    let collect_seconds = started.elapsed().as_secs_f64();
    let isolation = convert(a, &native, &converted, &out)?;
    let bound = out.join("bundles");
    let summary = bind(&workload_dir, &converted.join("records.json"), &bound)?;
    let manifest = json!({
        "collector": a.name, "collector_command": a.collector, "converter_command": a.converter,
        "scenarios": a.scenarios, "cases": a.cases, "only": a.only, "sample": a.sample,
        "collect_seconds": collect_seconds, "converter_isolation": isolation, "binding": summary,
        "causalbench_version": env!("CARGO_PKG_VERSION"),
    });
    crate::gpu::write_json(&out.join("collector.json"), &manifest)?;
    if a.no_score {
        return Ok(());
    }
    score(&exe, &bound, &out.join("results"))?;
    let rows = TABLE_HEAD.to_string()
        + &own_rows(
            &format!("own collector: {}", a.name),
            &out.join("results"),
            &[],
        )?;
    std::fs::write(out.join("leaderboard-own-collector.md"), rows)
        .map_err(|e| Failure::failed(format!("cannot write the leaderboard: {e}")))?;
    Ok(())
}

/// The converter, isolated as an external profiler is: it reads the native
/// output (and its own files), writes only `converted/`.
fn convert(a: &RunArgs, native: &Path, converted: &Path, out: &Path) -> Result<String, Failure> {
    let argv = substitute(
        &words(&a.converter, "converter")?,
        &[("{native}", native), ("{out}", converted)],
    );
    let isolation = baselines::sandbox::detect(a.allow_unisolated).map_err(Failure::input)?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null());
    if matches!(isolation, baselines::sandbox::Isolation::Landlock { .. }) {
        let grants = baselines::sandbox::grants(
            &argv,
            native,
            converted,
            &[
                out.join("workload"),
                out.join("bundles"),
                out.join("results"),
            ],
            &[],
        )
        .map_err(Failure::input)?;
        baselines::sandbox::Sandbox::new(&grants)
            .map_err(Failure::input)?
            .in_namespaces()
            .apply_to(&mut cmd);
    } else {
        eprintln!("causalbench: {}", isolation.describe());
    }
    let child = cmd
        .spawn()
        .map_err(|e| Failure::input(format!("cannot start the converter `{}`: {e}", argv[0])))?;
    wait(
        child,
        "the converter",
        Instant::now() + Duration::from_secs(a.timeout),
    )?;
    Ok(isolation.describe())
}

/// Binds `records` to every bundle of `workload_dir`, writes the bound bundles
/// and `binding.json` into `out`; returns the summary.
pub fn bind(workload_dir: &Path, records: &Path, out: &Path) -> Result<Value, Failure> {
    let set = CollectorRecords::read(records)?;
    let doc_path = workload_dir.join("workload.json");
    let doc: Value = serde_json::from_slice(
        &std::fs::read(&doc_path)
            .map_err(|e| Failure::input(format!("cannot read {}: {e}", doc_path.display())))?,
    )
    .map_err(|e| Failure::input(format!("{}: {e}", doc_path.display())))?;
    let known = crate::workload::known_kernels(&doc);
    mkdir(out)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(workload_dir)
        .map_err(|e| Failure::input(format!("cannot read {}: {e}", workload_dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.ends_with(".bundle.json") || n.ends_with(".bundle.json.gz")
        })
        .collect();
    files.sort();
    let mut per_bundle = Vec::new();
    let mut bound = 0usize;
    for f in files {
        let b = Bundle::read(&f)?;
        match generator::collector::bind(&b, &set, &known) {
            Ok((nb, binding)) => {
                let path = out.join(format!("{}.bundle.json", nb.id()));
                nb.write(&path).map_err(|e| {
                    Failure::failed(format!("cannot write {}: {e}", path.display()))
                })?;
                bound += 1;
                per_bundle.push(json!({"bundle": b.id(), "binding": binding}));
            }
            Err(e) => per_bundle.push(json!({"bundle": b.id(), "error": e})),
        }
    }
    let summary = json!({
        "collector": set.collector, "clock": set.clock, "records": set.records.len(),
        "bundles": per_bundle.len(), "bound": bound, "per_bundle": per_bundle,
    });
    crate::gpu::write_json(&out.join("binding.json"), &summary)?;
    eprintln!(
        "collector `{}`: {bound} of {} bundles bound",
        set.collector,
        per_bundle.len()
    );
    Ok(summary)
}

/// Scores the bound bundles with every built-in profiler, as any corpus.
fn score(exe: &Path, bundles: &Path, results: &Path) -> Result<(), Failure> {
    let status = Command::new(exe)
        .args(["run", "--corpus"])
        .arg(bundles)
        .arg("--out")
        .arg(results)
        .args([
            "--profilers",
            "builtin",
            "--megakernel-reps",
            "0",
            "--quiet",
        ])
        .status()
        .map_err(|e| Failure::failed(format!("cannot run the scoring: {e}")))?;
    if !status.success() {
        return Err(Failure::failed(format!("scoring exited with {status}")));
    }
    Ok(())
}

const TABLE_HEAD: &str = "| source | profiler | view | cases | symptom accuracy | top-3 | edge F1 | pair accuracy |\n|---|---|---|---|---|---|---|---|\n";

/// The rows of `results/leaderboard.json` (of `views`, or all), marked `source`.
pub fn own_rows(source: &str, results: &Path, views: &[String]) -> Result<String, Failure> {
    let path = results.join("leaderboard.json");
    let doc: Value = serde_json::from_slice(
        &std::fs::read(&path)
            .map_err(|e| Failure::input(format!("cannot read {}: {e}", path.display())))?,
    )
    .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
    let mut md = String::new();
    for r in doc["rows"].as_array().into_iter().flatten() {
        let view = format!(
            "{}-{}",
            r["collectors"].as_str().unwrap_or("?"),
            r["mode"].as_str().unwrap_or("?")
        );
        if !views.is_empty() && !views.contains(&view) {
            continue;
        }
        let f = |k: &str| {
            r[k].as_f64()
                .map(|v| format!("{v:.3}"))
                .unwrap_or_else(|| "–".into())
        };
        md.push_str(&format!(
            "| {source} | {} | {view} | {} | {} | {} | {} | {} |\n",
            r["profiler"].as_str().unwrap_or("?"),
            r["cases"],
            f("symptom_accuracy"),
            f("root_cause_top3"),
            f("edge_f1"),
            f("pair_accuracy"),
        ));
    }
    Ok(md)
}

fn table(a: &TableArgs) -> Result<(), Failure> {
    let mut md = TABLE_HEAD.to_string();
    for r in &a.rows {
        let (source, dir) = r
            .split_once('=')
            .ok_or_else(|| Failure::input(format!("--rows `{r}`: expected SOURCE=DIR")))?;
        md.push_str(&own_rows(source, Path::new(dir), &a.views)?);
    }
    out!("{md}");
    Ok(())
}

fn ebpf(a: &EbpfArgs) -> Result<(), Failure> {
    let cfg = ebpf_recorder::RecorderConfig::cuda(a.pid);
    let rec = ebpf_recorder::Recorder::start(cfg).map_err(|e| {
        let _ = std::fs::remove_file(&a.go);
        Failure::unavailable(format!("the eBPF recorder cannot attach to {}: {e}", a.pid))
    })?;
    ground_truth::io::write_atomic(&a.go, b"go\n")
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", a.go.display())))?;
    let done = crate::workload::done_file(&a.go);
    let alive = || Path::new(&format!("/proc/{}", a.pid)).exists();
    while !done.exists() && alive() {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Stacks are read from the live process: stop before releasing it.
    let trace = rec.stop();
    let _ = std::fs::remove_file(&a.go);
    for w in &trace.warnings {
        eprintln!("causalbench collector ebpf: {w}");
    }
    let set = CollectorRecords {
        schema_version: ground_truth::SCHEMA_VERSION,
        collector: "ebpf-host".into(),
        clock: CollectorClock::Monotonic,
        dropped: trace.ringbuffer_dropped,
        records: trace.records,
    };
    mkdir(&a.out)?;
    set.write(&a.out.join("records.json"))
        .map_err(|e| Failure::failed(format!("cannot write the records: {e}")))
}
