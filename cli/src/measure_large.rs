//! `causalbench measure large --ops N`: what one large case costs, stage by stage, in one
//! process: recording on the simulator, writing and reading the bundle (JSON and the compact
//! encoding, docs/records.md), deriving a view, writing and reading it, the reference
//! profiler's analysis and the score. Each stage's wall time and its own peak resident
//! memory (the kernel's high-water mark, reset before the stage) are printed, so a
//! regression names its stage. `--in-process` leaves the files out: record → view →
//! causal-graph → score only, the bundle's records moved into the view rather than
//! copied (`views::derive_taking_trace`).

use crate::Failure;
use ground_truth::io::Readable;
use ground_truth::labels::{Collectors, Mode};
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::Scenario;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args)]
pub struct LargeArgs {
    /// Kernel launches of the launch-bound case (at most the scenario-size limit,
    /// README "Limits").
    #[arg(long, default_value_t = 1_000_000)]
    pub ops: u64,
    /// Where the bundle and view files are written (default: a temporary directory,
    /// removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Only the stages one process carries a case through (record, view, causal-graph,
    /// score): no bundle or view file is written or read.
    #[arg(long, conflicts_with = "dir")]
    pub in_process: bool,
}

/// The launch-bound case of about `ops` kernel launches (`generator::sim::launch_bound_scenario`,
/// `generator/benches/scenarios/launch-bound-1m.yaml` at a million), within the scenario-size
/// limit.
fn large_scenario(ops: u64) -> Result<Scenario, Failure> {
    let launches = u32::try_from(ops)
        .map_err(|_| Failure::input(format!("--ops {ops}: too many operations")))?;
    let scenario = generator::sim::launch_bound_scenario(launches.max(100));
    if let Some(problem) = scenario.check().first() {
        return Err(Failure::input(format!(
            "--ops {ops}: {}: {}",
            problem.path, problem.message
        )));
    }
    Ok(scenario)
}

/// CPU seconds this process has used, every thread, user and system (`/proc/self/stat`
/// fields 14 and 15, in the kernel's fixed 100 ticks per second): beside a stage's wall
/// time, what it cost on a machine whose cores other jobs share.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    // `fields[0]` is field 3 (the state): utime is field 14, stime field 15.
    Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

/// Peak resident memory since the last reset, in bytes (`VmHWM`).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets the peak to the current resident memory (Linux `clear_refs` 5); a kernel that
/// refuses leaves the process-wide peak, which only overstates a stage.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

struct Stage {
    name: String,
    seconds: f64,
    cpu_seconds: Option<f64>,
    peak_bytes: Option<u64>,
    note: String,
}

fn stage<T>(
    stages: &mut Vec<Stage>,
    name: impl Into<String>,
    work: impl FnOnce() -> Result<(T, String), Failure>,
) -> Result<T, Failure> {
    reset_peak_rss();
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let (value, note) = work()?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let name = name.into();
    eprintln!("causalbench: {name}: {seconds:.2} s");
    stages.push(Stage {
        name,
        seconds,
        cpu_seconds: cpu,
        peak_bytes: peak_rss(),
        note,
    });
    Ok(value)
}

fn file_size(path: &Path) -> String {
    std::fs::metadata(path)
        .map(|m| format!("{:.1} MB", m.len() as f64 / 1e6))
        .unwrap_or_default()
}

/// Has glibc serve every allocation of a megabyte or more by its own mapping, given
/// back whole when freed. By default glibc raises that threshold (up to 32 MB) each
/// time such a block is freed, so a stage's large tables come from the heap, and
/// what an earlier stage freed there stays resident beside them: 0.2 GB of the
/// 1 M-launch case's peak, 2 GB at ten million (docs/records.md "Memory of a large
/// case").
fn map_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before the stages
    // allocate, on this thread, with a valid parameter and value.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

pub fn large(args: &LargeArgs) -> Result<(), Failure> {
    map_large_allocations();
    let scenario = large_scenario(args.ops)?;
    let temp;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| Failure::failed(format!("cannot create {}: {e}", d.display())))?;
            d.clone()
        }
        None => {
            temp = std::env::temp_dir().join(format!("causalbench-large-{}", std::process::id()));
            std::fs::create_dir_all(&temp)
                .map_err(|e| Failure::failed(format!("cannot create {}: {e}", temp.display())))?;
            temp.clone()
        }
    };
    let result = stages(&scenario, &dir, !args.in_process);
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (stages, records) = result?;
    outln!(
        "| stage ({} operations, {records} records) | seconds | CPU seconds | peak RSS (GB) | |",
        args.ops
    );
    outln!("|---|---|---|---|---|");
    for s in &stages {
        let peak = s
            .peak_bytes
            .map(|b| format!("{:.2}", b as f64 / 1e9))
            .unwrap_or_else(|| "n/a".into());
        let cpu = s
            .cpu_seconds
            .map(|c| format!("{c:.2}"))
            .unwrap_or_else(|| "n/a".into());
        outln!(
            "| {} | {:.2} | {cpu} | {peak} | {} |",
            s.name,
            s.seconds,
            s.note
        );
    }
    let carried: Vec<&Stage> = stages
        .iter()
        .filter(|s| {
            matches!(
                s.name.as_str(),
                "record" | "view" | "causal-graph" | "score"
            )
        })
        .collect();
    let in_process: f64 = carried.iter().map(|s| s.seconds).sum();
    let in_process_cpu: f64 = carried.iter().filter_map(|s| s.cpu_seconds).sum();
    let peak = stages
        .iter()
        .filter_map(|s| s.peak_bytes)
        .max()
        .unwrap_or(0);
    outln!(
        "\nrecord → view → causal-graph → score in one process: {in_process:.2} s \
         ({in_process_cpu:.2} CPU s); highest stage peak RSS {:.2} GB",
        peak as f64 / 1e9
    );
    Ok(())
}

type Measured = (Vec<Stage>, usize);

/// Two stages: `value` written to `file` (its encoding chosen by the name) and read back.
fn write_and_read<T: Readable>(
    stages: &mut Vec<Stage>,
    value: &T,
    encoding: &str,
    file: &Path,
) -> Result<(), Failure> {
    stage(stages, format!("write {} ({encoding})", T::WHAT), || {
        value
            .write(file)
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", file.display())))?;
        Ok(((), file_size(file)))
    })?;
    stage(stages, format!("read {} ({encoding})", T::WHAT), || {
        drop(T::read(file)?);
        Ok(((), String::new()))
    })
}

fn stages(scenario: &Scenario, dir: &Path, files: bool) -> Result<Measured, Failure> {
    use generator::Backend;
    let mut stages = Vec::new();
    let backend = generator::sim::SimBackend::default();
    let mut bundle = stage(&mut stages, "record", || {
        let b = backend
            .record(scenario, 0)
            .map_err(|e| Failure::failed(format!("recording {}: {e}", scenario.name)))?;
        let note = format!("{} truth nodes", b.ground_truth.nodes.len());
        Ok((b, note))
    })?;
    let records = bundle.trace.len();
    if files {
        for (encoding, file) in [
            ("JSON", "large.bundle.json"),
            ("compact", "large.bundle.msgpack"),
        ] {
            write_and_read(&mut stages, &bundle, encoding, &dir.join(file))?;
        }
    }
    let spec = ViewSpec {
        collectors: Collectors::Combined,
        mode: Mode::Instrumented,
        loss: LossSpec::None,
    };
    // The bundle's records move into the view (the score reads only the ground truth):
    // the process holds them once, as one that carries a case through does.
    let view = stage(&mut stages, "view", || {
        let v = views::derive_taking_trace(&mut bundle, spec, views::ViewKey::process()).view;
        let note = format!("{} view records", v.records.len());
        Ok((v, note))
    })?;
    if files {
        for (encoding, file) in [
            ("JSON", "large.view.json"),
            ("compact", "large.view.msgpack"),
        ] {
            write_and_read(&mut stages, &view, encoding, &dir.join(file))?;
        }
    }
    let explanation = stage(&mut stages, "causal-graph", || {
        let profiler = baselines::builtin("causal-graph").expect("a built-in profiler");
        let e = profiler.explain(&view);
        let note = format!("{} claimed edges", e.edges.len());
        Ok((e, note))
    })?;
    stage(&mut stages, "score", || {
        let score = evaluator::score_case(&bundle, &view, &explanation);
        Ok((
            (),
            format!("edge F1 {:.3}", score.edges.f1.unwrap_or(f64::NAN)),
        ))
    })?;
    Ok((stages, records))
}
