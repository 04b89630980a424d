//! The PyTorch backend (docs/torch-track.md): scenarios executed by a Python
//! program with torch and CuPy (`executor.py`, embedded here and run as
//! `python3 -c <source> serve` in its own process group, without a shell),
//! every run recorded by torch.profiler (Kineto). One executor process serves
//! every run of a backend: importing torch and compiling kernels costs
//! seconds, a run milliseconds.
//!
//! Each repetition runs like the GPU backend's: the no-injection twin (the
//! plan is sized from it, `crate::plan`), a second quiet run where the label
//! check applies (its noise floor, `crate::label`), then the injected run,
//! whose Kineto trace is kept next to the bundle. The truth comes from the
//! executor's own log ([`truth`]); Kineto's events become the bundle's
//! records ([`observe`]).

pub mod attribution;
pub mod completeness;
pub mod fence_lines;
pub mod log;
pub mod observe;
mod plan;
pub mod truth;

/// How far a Kineto call record may sit off the eBPF recorder's clock when a
/// uprobe is matched to the call it is nested in (ns). Kineto's times are
/// aligned to CLOCK_MONOTONIC by an estimated offset (docs/torch-track.md,
/// "Cross-check"); on the H200 a driver call's uprobe entered up to 2.2 µs
/// before Kineto's record of the runtime call around it began.
pub const KINETO_CLOCK_SLACK_NS: ground_truth::Ns = 5_000;

use crate::backend::{check, Backend, RecordError};
use crate::label::QuietRun;
use crate::plan::{DeviceFacts, Twin};
use ground_truth::bundle::{CrossCheck, LossAccounting, Manifest};
use ground_truth::{Bundle, Mode, Ns, Scenario, SCHEMA_VERSION};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

pub use completeness::RunCompleteness;
pub use plan::{runs_as_training_loop, supported};
pub use truth::Completeness;

/// The executor's source, embedded so the binary needs no file beside it.
pub const EXECUTOR_SOURCE: &str = include_str!("executor.py");

/// The training-loop runner (`--train-loop`): loads [`EXECUTOR_SOURCE`] unchanged
/// and runs a training step's consumer thread as a real training loop traced by
/// TraceML (docs/torch-track.md, "TraceML on the training step").
pub const TRAIN_LOOP_SOURCE: &str = include_str!("train_loop.py");

/// The side file of a bundle's injected run holding TraceML's end-of-run verdict
/// (`--train-loop`), named like its Kineto trace.
pub fn traceml_file_name(scenario: &str, repetition: u32) -> String {
    format!("{scenario}.r{repetition}.traceml.json")
}

/// From a kernel becoming ready to its first block running, and from a copy
/// becoming ready to its first byte moving, on the H200 (the GPU backend's
/// measured constants, `cuda/plan.rs`).
const DEVICE_DISPATCH_NS: Ns = 3_000;
const DEVICE_COPY_SETUP_NS: Ns = 2_000;

/// The longest one run may take before the executor is given up on.
const RUN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bytes of user stack the host recorder copies at each driver call of the
/// executor. The Python frames sit above libtorch's and CPython's, which keep no
/// frame pointers in the H200's Python (3.12.3) and torch wheels, so the kernel's
/// frame-pointer walk ends inside libtorch; the copy, unwound with the objects'
/// DWARF unwind tables (recorder-ebpf/README.md, "Stacks"), reaches them. A
/// device-to-host copy's frames from the driver up to the Python method that
/// made it fit well within this (dispatcher and autograd layers included).
pub const HOST_STACK_COPY_BYTES: u32 = 32 * 1024;

/// The host recorder's ring buffer for the executor: every probed call carries a
/// stack copy of [`HOST_STACK_COPY_BYTES`], and this holds 8,000 of them between
/// two drains.
pub const HOST_RING_BUFFER_BYTES: u32 = 256 << 20;

/// The host recorder's configuration for the executor `pid`: the driver entry
/// points of `RecorderConfig::cuda`, with stack copies.
pub fn host_recorder_config(pid: u32) -> ebpf_recorder::RecorderConfig {
    let mut cfg = ebpf_recorder::RecorderConfig::cuda(pid);
    cfg.stack_copy_bytes = HOST_STACK_COPY_BYTES;
    cfg.ringbuf_bytes = HOST_RING_BUFFER_BYTES;
    cfg
}

pub struct TorchBackend {
    python: String,
    server: Mutex<Option<Server>>,
    /// Where each injected run's native Kineto trace is written
    /// (`<scenario>.r<repetition>.kineto.json`); `None`: a temporary file.
    trace_dir: Option<PathBuf>,
    completeness: Mutex<Vec<RunCompleteness>>,
    /// Whether each injected run's step log is kept beside its trace
    /// (`<scenario>.r<repetition>.steplog.json`).
    pub keep_logs: bool,
    /// Whether the eBPF host recorder records each injected run of the executor
    /// (started as `python3 -X perf`, so its perf map names Python frames), its
    /// records joined to the truth like the GPU backend's (`cuda::host`): the
    /// bundle then has `kineto+host` views (docs/torch-track.md, "kineto+host").
    pub host_recorder: bool,
    /// Whether training-step programs run as real training loops traced by TraceML
    /// (`train_loop.py`), one executor process (one TraceML run) per bundle, its
    /// verdict written beside the Kineto trace ([`traceml_file_name`]).
    pub train_loop: bool,
    /// Why the host recorder cannot run here, once it failed (later runs go on
    /// without host records).
    host_disabled: Mutex<Option<String>>,
    last_answer: Mutex<String>,
}

impl TorchBackend {
    /// A backend running `python` (`CAUSALBENCH_PYTHON`, else `python3`).
    /// The executor starts with the first run.
    pub fn new(trace_dir: Option<PathBuf>) -> TorchBackend {
        TorchBackend {
            python: std::env::var("CAUSALBENCH_PYTHON").unwrap_or_else(|_| "python3".into()),
            server: Mutex::new(None),
            trace_dir,
            completeness: Mutex::new(Vec::new()),
            keep_logs: false,
            host_recorder: false,
            train_loop: false,
            host_disabled: Mutex::new(None),
            last_answer: Mutex::new(String::new()),
        }
    }

    /// The native Kineto trace of a recorded bundle, as this backend names it.
    pub fn trace_file_name(scenario: &str, repetition: u32) -> String {
        format!("{scenario}.r{repetition}.kineto.json")
    }

    /// Completeness of every bundle recorded so far.
    pub fn completeness(&self) -> Vec<RunCompleteness> {
        self.completeness
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default()
    }

    fn start(&self) -> Result<Server, RecordError> {
        let unavailable = |e: String| RecordError::Unavailable("torch", e);
        let mut command = Command::new(&self.python);
        if self.host_recorder {
            // CPython's perf trampolines: /tmp/perf-PID.map names each Python
            // function's frames, which the host recorder's stacks resolve through.
            command.args(["-X", "perf"]);
        }
        if self.train_loop {
            // The runner gets the executor's source as an argument and compiles it
            // under the executor's own file name; TraceML's aggregator logs go to a
            // directory of this process's own.
            static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let logs = std::env::temp_dir()
                .join(format!("causalbench-traceml-{}-{n}", std::process::id()));
            command
                .arg("-c")
                .arg(TRAIN_LOOP_SOURCE)
                .env("CAUSALBENCH_TRACEML_LOGS", logs);
        } else {
            command.arg("-c").arg(EXECUTOR_SOURCE);
        }
        command.arg("serve");
        if self.train_loop {
            command.arg(EXECUTOR_SOURCE);
        }
        let mut child = command
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .map_err(|e| unavailable(format!("cannot start {}: {e}", self.python)))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| unavailable("no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| unavailable("no stdout".into()))?;
        Ok(Server {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        })
    }

    /// The executor's process id, starting it when it is not running.
    fn executor_pid(&self) -> Result<u32, String> {
        let mut guard = self.server.lock().map_err(|_| "executor lock poisoned")?;
        if guard.is_none() {
            *guard = Some(self.start().map_err(|e| e.to_string())?);
        }
        Ok(guard.as_ref().ok_or("no executor")?.child.id())
    }

    /// The host recorder attached to the executor for one run, when asked for and
    /// possible (the executor has mapped libcuda by then: it ran the twin or a
    /// warm-up run).
    fn start_host_recorder(&self) -> Result<Option<ebpf_recorder::Recorder>, String> {
        if !self.host_recorder {
            return Ok(None);
        }
        let pid = self.executor_pid()?;
        let mut disabled = self
            .host_disabled
            .lock()
            .map_err(|_| "host recorder lock poisoned")?;
        Ok(crate::cuda::host::start_with(
            host_recorder_config(pid),
            &mut disabled,
        ))
    }

    /// Sends one request and reads its step log.
    fn request(&self, req: &serde_json::Value) -> Result<log::StepLog, String> {
        let mut guard = self.server.lock().map_err(|_| "executor lock poisoned")?;
        if guard.is_none() {
            *guard = Some(self.start().map_err(|e| e.to_string())?);
        }
        let server = guard.as_mut().ok_or("no executor")?;
        let line = serde_json::to_string(req).map_err(|e| e.to_string())?;
        let sent = writeln!(server.stdin, "{line}").and_then(|_| server.stdin.flush());
        if let Err(e) = sent {
            *guard = None;
            return Err(format!("the torch executor stopped: {e}"));
        }
        let mut answer = String::new();
        let started = std::time::Instant::now();
        let read = server.stdout.read_line(&mut answer);
        if started.elapsed() > RUN_TIMEOUT {
            *guard = None;
            return Err("the torch executor took too long".into());
        }
        match read {
            Ok(0) | Err(_) => {
                *guard = None;
                return Err("the torch executor ended without an answer (see its stderr)".into());
            }
            Ok(_) => {}
        }
        let parsed = parse_answer(&answer);
        if self.keep_logs {
            if let Ok(mut last) = self.last_answer.lock() {
                *last = answer;
            }
        }
        parsed
    }

    fn run(
        &self,
        sc: &Scenario,
        seed: u64,
        plan: Option<&serde_json::Value>,
        trace: Option<&Path>,
    ) -> Result<log::StepLog, String> {
        let mut names: Vec<String> = sc
            .programs
            .iter()
            .flat_map(|p| p.steps.iter())
            .filter_map(|s| s.kernel_spec().map(|k| k.name))
            .chain(
                sc.graphs
                    .iter()
                    .flat_map(|g| g.nodes.iter().map(|n| n.kernel.name.clone())),
            )
            .chain(sc.names.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        let req = serde_json::json!({
            "scenario": sc,
            "seed": seed,
            "plan": plan,
            "profile": true,
            "kineto_out": trace.map(|p| p.display().to_string()),
            "kernel_names": names,
        });
        let mut req = req;
        if self.train_loop {
            req["train_loop"] = serde_json::json!(true);
            if let Some(trace) = trace {
                let out = trace.with_file_name(
                    trace
                        .file_name()
                        .and_then(|n| n.to_str())
                        .and_then(|n| n.strip_suffix(".kineto.json"))
                        .map(|stem| format!("{stem}.traceml.json"))
                        .unwrap_or_else(|| "traceml.json".into()),
                );
                req["traceml_out"] = serde_json::json!(out.display().to_string());
            }
        }
        let log = self.request(&req)?;
        if !log.errors.is_empty() {
            return Err(format!("the run failed: {}", log.errors.join("; ")));
        }
        Ok(log)
    }

    /// One repetition, in its steps: the twin, the quiet run and the plan sized from
    /// them ([`TorchBackend::twin_and_plan`]); the injected run ([`TorchBackend::injected_run`])
    /// and its truth and trace ([`TorchBackend::truth_of_injected_run`]); the symptom's
    /// checked answers; the bundle's manifest ([`manifest`]).
    fn record_one(&self, sc: &Scenario, repetition: u32) -> Result<Bundle, String> {
        let seed = crate::mix(sc.seed ^ crate::mix(repetition as u64 + 1));
        let Planned { plan, twin, quiet } = self.twin_and_plan(sc, seed)?;
        let executor_plan = plan
            .as_ref()
            .map(|p| plan::for_executor(sc, p, seed))
            .transpose()?;
        let trace_path = self.trace_path(sc, repetition, seed);
        let (log, host_trace) = self.injected_run(
            sc,
            repetition,
            seed,
            executor_plan.as_ref(),
            &trace_path,
            twin.is_some(),
        )?;
        let host_attached = host_trace.is_some();
        let out = self.truth_of_injected_run(
            sc,
            repetition,
            &log,
            plan.as_ref(),
            &trace_path,
            host_trace,
        )?;
        let origin = out.origin;
        let keys = out.keys;
        let stats = out.stats;
        let (mut truth, trace) = out.builder.finish(seed);
        truth.injections = out.injections;
        fn as_quiet(r: &truth::Output) -> QuietRun<'_> {
            QuietRun {
                truth: &r.builder.truth,
                keys: &r.keys,
                origin: r.origin,
            }
        }
        crate::answers::add_checked_symptom(
            sc,
            &mut truth,
            &trace,
            &keys,
            origin,
            twin.as_ref().map(as_quiet).as_ref(),
            quiet.as_ref().map(as_quiet).as_ref(),
        )?;
        kineto_boundaries(&mut truth, host_attached);
        let check = format!(
            "; Kineto vs %globaltimer over {} kernels (median offset {} ns removed): max |start diff| {} ns, max |end diff| {} ns",
            stats.kernels_compared, stats.clock_offset_ns, stats.max_start_diff_ns, stats.max_end_diff_ns
        );
        for inj in &mut truth.injections {
            inj.mechanism.push_str(&check);
        }
        Ok(Bundle {
            schema_version: SCHEMA_VERSION,
            manifest: manifest(sc, seed, repetition, &log, &stats, host_attached),
            ground_truth: truth,
            trace,
            loss: LossAccounting::default(),
        })
    }

    /// For a scenario with an injection: the no-injection twin, the quiet run where the
    /// label check applies, and the plan sized from them; nothing for one without.
    fn twin_and_plan(&self, sc: &Scenario, seed: u64) -> Result<Planned, String> {
        let mut plan = None;
        let mut twin = None;
        let mut quiet = None;
        if let Some(inj) = &sc.injection {
            let log = self.run(sc, seed, None, None)?;
            let out = truth::build(sc, &log, None, None);
            let tw = Twin {
                nodes: &out.builder.truth.nodes,
                keys: &out.keys,
                origin: out.origin,
            };
            let facts = DeviceFacts {
                sms: log.device.sms,
                dispatch_ns: DEVICE_DISPATCH_NS,
                copy_setup_ns: DEVICE_COPY_SETUP_NS,
            };
            if crate::label::applies(sc) {
                let quiet_log = self.run(sc, crate::mix(seed ^ 0x6e6f_6973), None, None)?;
                quiet = Some(truth::build(sc, &quiet_log, None, None));
            }
            // Sized from this machine's own noise (label::sized_injection).
            let sized = quiet.as_ref().and_then(|q| {
                use crate::label::QuietRun;
                let (twin, quiet) = (
                    QuietRun::of(&out.builder, &out.keys, out.origin),
                    QuietRun::of(&q.builder, &q.keys, q.origin),
                );
                crate::label::sized_injection(sc, &twin, &quiet)
            });
            let inj = sized.as_ref().unwrap_or(inj);
            let mut p = crate::plan::plan(sc, inj, &tw, facts);
            p.mechanism = plan::mechanism(&p);
            plan = Some(p);
            twin = Some(out);
        }
        Ok(Planned { plan, twin, quiet })
    }

    /// Where the injected run's Kineto trace is written: beside the bundle when the
    /// backend keeps traces, else a temporary file of this process.
    fn trace_path(&self, sc: &Scenario, repetition: u32, seed: u64) -> PathBuf {
        match &self.trace_dir {
            Some(dir) => dir.join(Self::trace_file_name(&sc.name, repetition)),
            None => std::env::temp_dir().join(format!(
                "causalbench-{}-{}.kineto.json",
                std::process::id(),
                crate::mix(seed)
            )),
        }
    }

    /// The injected run, recorded by Kineto into `trace_path` (and by the host recorder
    /// when asked for), its step log kept when asked for. `warmed`: the executor already
    /// ran this scenario (its twin).
    fn injected_run(
        &self,
        sc: &Scenario,
        repetition: u32,
        seed: u64,
        executor_plan: Option<&serde_json::Value>,
        trace_path: &Path,
        warmed: bool,
    ) -> Result<(log::StepLog, Option<ebpf_recorder::HostTrace>), String> {
        if self.host_recorder && !warmed {
            // The recorder resolves libcuda from the executor's maps: one run first.
            self.run(sc, seed, None, None)?;
        }
        let host_recorder = self.start_host_recorder()?;
        let log = self.run(sc, seed, executor_plan, Some(trace_path));
        let host_trace = host_recorder.map(|r| r.stop());
        if self.train_loop {
            // One TraceML run per bundle: the next bundle starts a fresh executor.
            if let Ok(mut server) = self.server.lock() {
                *server = None;
            }
        }
        let log = log?;
        if let (true, Some(dir)) = (self.keep_logs, &self.trace_dir) {
            let answer = self
                .last_answer
                .lock()
                .map(|a| a.clone())
                .unwrap_or_default();
            let file = dir.join(format!("{}.r{repetition}.steplog.json", sc.name));
            std::fs::write(&file, answer).map_err(|e| format!("{}: {e}", file.display()))?;
        }
        Ok((log, host_trace))
    }

    /// The injected run's truth and trace: Kineto's activities bound to the executor's
    /// calls, the host recorder's records joined to them, and the run's completeness
    /// counted for the corpus.
    fn truth_of_injected_run(
        &self,
        sc: &Scenario,
        repetition: u32,
        log: &log::StepLog,
        plan: Option<&crate::plan::Plan>,
        trace_path: &Path,
        host_trace: Option<ebpf_recorder::HostTrace>,
    ) -> Result<truth::Output, String> {
        let acts = kineto::read_activities(trace_path).map_err(|e| e.to_string())?;
        if self.trace_dir.is_none() {
            let _ = std::fs::remove_file(trace_path);
        }
        let shift = (log.clock.realtime_minus_monotonic_ns[0]
            + log.clock.realtime_minus_monotonic_ns[1])
            / 2;
        let calls: Vec<observe::TimedCall> = log
            .threads
            .iter()
            .flat_map(|t| {
                t.ops
                    .iter()
                    .map(move |o| (o.id, o.tid.unwrap_or(t.tid), o.t0, o.t1, o.api_key()))
            })
            .collect();
        let binding = observe::bind(&acts, shift, &calls);
        let mut out = truth::build(sc, log, plan, Some((&acts, &binding)));
        if let Some(host) = host_trace {
            if host.stack_copies_dropped > 0 || host.ringbuffer_dropped > 0 {
                // Said where it happens: those stacks end where the frame-pointer
                // walk ends (inside libtorch), so their fences go unanswered.
                eprintln!(
                    "causalbench: {} r{repetition}: the host recorder lost {} stack copies and {} records (ring buffer full)",
                    sc.name, host.stack_copies_dropped, host.ringbuffer_dropped
                );
            }
            crate::cuda::host::attach(
                &mut out.builder,
                host,
                (log.origin, log.end),
                KINETO_CLOCK_SLACK_NS,
            );
        }
        if let Ok(mut c) = self.completeness.lock() {
            c.push(RunCompleteness {
                scenario: sc.name.clone(),
                family: sc.family.clone(),
                repetition,
                counts: out.stats.completeness.clone(),
            });
        }
        Ok(out)
    }
}

/// What [`TorchBackend::twin_and_plan`] ran and sized: the plan, the twin's truth and
/// the quiet run's (`None` for a scenario without an injection, and `quiet` where the
/// label check does not apply).
struct Planned {
    plan: Option<crate::plan::Plan>,
    twin: Option<truth::Output>,
    quiet: Option<truth::Output>,
}

/// A `kineto` view keeps what a `cupti` view keeps (Kineto's records are CUPTI's
/// kinds): its first unresolved boundaries are the same; a `kineto+host` view keeps
/// what a `combined` view keeps. Adds those boundaries to every symptom.
fn kineto_boundaries(truth: &mut ground_truth::GroundTruth, host_attached: bool) {
    use ground_truth::Collectors;
    for s in &mut truth.symptoms {
        let mut pairs = vec![(Collectors::Cupti, Collectors::Kineto)];
        if host_attached {
            pairs.push((Collectors::Combined, Collectors::KinetoHost));
        }
        for (like, collectors) in pairs {
            let same: Vec<_> = s
                .boundaries
                .iter()
                .filter(|b| b.collectors == like)
                .map(|b| ground_truth::graph::Boundary {
                    collectors,
                    ..b.clone()
                })
                .collect();
            s.boundaries.extend(same);
        }
    }
}

/// The manifest of a torch bundle: the executor's device and versions, the collectors
/// that recorded it, and Kineto's cross-check against the kernels' own clocks.
fn manifest(
    sc: &Scenario,
    seed: u64,
    repetition: u32,
    log: &log::StepLog,
    stats: &truth::RunStats,
    host_attached: bool,
) -> Manifest {
    let c = &stats.completeness;
    let mut collectors = vec!["kineto".to_string()];
    if host_attached {
        collectors.push("ebpf".into());
    }
    if sc.mode == Mode::Instrumented {
        collectors.push("app".into());
    }
    Manifest {
        scenario: sc.clone(),
        seed,
        repetition,
        backend: "torch".into(),
        gpu: format!(
            "{} ({} SMs, compute capability {}.{})",
            log.device.name, log.device.sms, log.device.capability[0], log.device.capability[1]
        ),
        driver: String::new(),
        cuda: log.versions.cuda.clone().unwrap_or_default(),
        cupti: format!(
            "Kineto of torch {} (CuPy {}, Python {})",
            log.versions.torch, log.versions.cupy, log.versions.python
        ),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        host: host_name(),
        collectors,
        cross_check: Some(CrossCheck {
            kernels: stats.kernels_compared,
            clock_offset_ns: stats.clock_offset_ns,
            max_start_diff_ns: stats.max_start_diff_ns,
            max_end_diff_ns: stats.max_end_diff_ns,
            spin_overhead_ns: 0,
            device_ops: c.device_ops + c.graph_kernels,
            device_ops_bound: c.device_ops_seen + c.graph_kernels_seen,
            call_sites_exact: 0,
            call_sites_nearest_wrong: 0,
        }),
        cupti_capabilities: None,
    }
}
fn parse_answer(answer: &str) -> Result<log::StepLog, String> {
    let value: serde_json::Value = serde_json::from_str(answer)
        .map_err(|e| format!("the torch executor's answer is not JSON: {e}"))?;
    if let Some(e) = value.get("error").and_then(|e| e.as_str()) {
        return Err(format!("the torch executor failed: {e}"));
    }
    ground_truth::io::from_json(Path::new("<torch executor answer>"), answer.as_bytes())
        .map_err(|e| e.to_string())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

impl Backend for TorchBackend {
    fn name(&self) -> &'static str {
        "torch"
    }

    fn record(&self, scenario: &Scenario, repetition: u32) -> Result<Bundle, RecordError> {
        check(scenario)?;
        plan::supported(scenario)
            .map_err(|why| RecordError::Invalid(scenario.name.clone(), why))?;
        self.record_one(scenario, repetition)
            .map_err(|e| RecordError::Invalid(scenario.name.clone(), e))
    }

    fn records_in_batches(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
