//! `hta-critical-path`: Meta's Holistic Trace Analysis (HTA), a third-party analyzer,
//! scored through an adapter.
//!
//! The view is exported as a Kineto trace (`exporters::kineto`, what the PyTorch
//! profiler writes), or, on a `kineto` view of a torch bundle, HTA reads the native
//! trace torch.profiler wrote beside the bundle instead ([`crate::hta_native`]: no
//! export, its events joined to the view's rids by Kineto's correlation ids); HTA's
//! critical-path analysis runs on it in Python
//! (`baselines/hta/hta_adapter.py`, embedded in this binary and written to a temp dir);
//! the adapter turns HTA's critical-path graph and path into an explanation (its
//! docstring says exactly how). Every view of a process goes through one adapter
//! process (`--serve`, its own process group, killed when it overruns a view's
//! timeout): HTA's imports cost about ten times one analysis.
//!
//! When HTA raises on a view, or the adapter process dies, the explanation claims
//! nothing and carries the message in `meta.failure`: the evaluator counts a crash of
//! its own (evaluator/METRICS.md, "Crashes"), not an abstention.
//!
//! HTA is optional: it is a Python package installed by `baselines/hta/setup-hta.sh`
//! into `$CAUSALBENCH_HTA_DIR` (default `${XDG_CACHE_HOME:-~/.cache}/causalbench/hta`).
//! [`hta_available`] probes once whether it imports; when it does not, `explain`
//! abstains (no edges, no causes, nothing complete) and says so once on stderr.
//! `CAUSALBENCH_HTA=0` turns the profiler off. HTA reads CUPTI records only: it is run
//! on `cupti` and `combined` views, loss-free or with targeted loss, and on loss-free
//! `kineto` views from the native trace ([`reads_view`]).

use crate::{Profiler, VERSION};
use ground_truth::view::LossSpec;
use ground_truth::{Collectors, Explanation, Readable, TraceView, ViewSpec};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub const NAME: &str = "hta-critical-path";

/// What a reader of `hta-critical-path`'s leaderboard rows must know (baselines/README.md).
pub const ROW_NOTE: &str = "Meta's Holistic Trace Analysis 0.5. On `kineto` views it reads \
    the native trace torch.profiler wrote beside the bundle (its whole-trace window, loss-free \
    views only; its events joined to the view's records by Kineto's correlation ids, \
    docs/torch-track.md), on the other views a Kineto export of the view. It knows the \
    runtime's event calls only (`cudaEventRecord`, `cudaStreamWaitEvent`): on traces that \
    carry the driver's (`cuEventRecord`, `cuStreamWaitEvent`, as the H200 CUPTI recordings \
    do) it finds no event edge. On exports it does not count `cudaGraphLaunch` as a launch \
    and raises on graph replays; on native traces it keeps one kernel per graph launch (the \
    last) and leaves the others out of its graph. It raises `KeyError` on lossy views whose \
    sync record outlived its call: those views are counted under \"Analyzer crashes\", not as \
    answers.";

/// The adapter script, shipped inside the binary.
pub const ADAPTER: &str = include_str!("../hta/hta_adapter.py");

/// The Python interpreter (`$PYTHON`, default `python3`).
pub fn python() -> String {
    std::env::var("PYTHON")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "python3".into())
}

/// Where setup-hta.sh installs HTA.
pub fn hta_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CAUSALBENCH_HTA_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into())).join(".cache")
        });
    cache.join("causalbench").join("hta")
}

/// Whether HTA's critical-path analysis imports here (probed once per process).
pub fn hta_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        if std::env::var("CAUSALBENCH_HTA").is_ok_and(|v| v == "0" || v == "off") {
            return false;
        }
        let probe = format!(
            "import sys; sys.path.insert(0, {:?}); import hta.analyzers.critical_path_analysis",
            hta_dir().to_string_lossy()
        );
        let child = Command::new(python())
            .arg("-c")
            .arg(probe)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(mut child) = child else { return false };
        use wait_timeout::ChildExt;
        match child.wait_timeout(Duration::from_secs(120)) {
            Ok(Some(s)) => s.success(),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                false
            }
        }
    })
}

/// Does this profiler read views of this kind? HTA needs CUPTI records, and it is run
/// on the loss-free and the targeted-loss views only: it has no notion of a missing
/// record (it claims every path complete), so the uniform-loss views would measure
/// nothing the targeted one does not, at three times its cost; HTA's Python analysis
/// is most of a default run's time (baselines/README.md).
/// On `kineto` views HTA reads Kineto's native trace, loss-free only
/// ([`crate::hta_native::reads_natively`]).
pub fn reads_view(spec: &ViewSpec) -> bool {
    match spec.collectors {
        // HTA reads no host record: on kineto+host it would repeat its kineto answer.
        Collectors::Host | Collectors::KinetoHost => false,
        Collectors::Kineto => crate::hta_native::reads_natively(spec),
        _ => !matches!(spec.loss, LossSpec::Uniform { .. }),
    }
}

/// The HTA adapter profiler.
#[derive(Debug, Clone)]
pub struct HtaCriticalPath {
    pub timeout: Duration,
    /// Kineto's native trace of the view's bundle: on a `kineto` view HTA reads it,
    /// never an export ([`crate::hta_native`]); without one it cannot answer a
    /// `kineto` view.
    pub native_trace: Option<PathBuf>,
}

impl Default for HtaCriticalPath {
    fn default() -> Self {
        HtaCriticalPath {
            timeout: Duration::from_secs(600),
            native_trace: None,
        }
    }
}

impl HtaCriticalPath {
    /// HTA on the native Kineto trace `trace` for the `kineto` views of its bundle.
    pub fn on_native_trace(trace: PathBuf) -> Self {
        HtaCriticalPath {
            native_trace: Some(trace),
            ..HtaCriticalPath::default()
        }
    }
}

/// An explanation that claims nothing: no edges, no causes, nothing complete.
pub fn abstain(view: &TraceView, version: &str, wall_ms: f64) -> Explanation {
    crate::common::abstaining(view, NAME, version, wall_ms)
}

/// `message` as `meta.failure` takes it: one line, bounded.
pub(crate) fn one_line(message: &str) -> String {
    let line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let max = ground_truth::io::MAX_FAILURE_MESSAGE - 3;
    if line.len() <= max {
        return line;
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &line[..end])
}

/// A private temp directory, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new() -> std::io::Result<Self> {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = std::env::temp_dir().join(format!(
            "causalbench-hta-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p)?;
        Ok(TempDir(p))
    }
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The files of one request: the view written for the adapter, and where it writes
/// its explanation, in a private temp dir.
pub(crate) struct ViewDir {
    dir: TempDir,
    pub(crate) view: PathBuf,
    pub(crate) out: PathBuf,
}

impl ViewDir {
    pub(crate) fn new(view: &TraceView) -> Result<ViewDir, String> {
        let dir = TempDir::new().map_err(|e| format!("cannot create a temp dir: {e}"))?;
        let (vpath, out) = (
            dir.path().join("view.json"),
            dir.path().join("explanation.json"),
        );
        ground_truth::Readable::write(view, &vpath)
            .map_err(|e| format!("cannot write {}: {e}", vpath.display()))?;
        Ok(ViewDir {
            dir,
            view: vpath,
            out,
        })
    }
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// An adapter process of a run (`hta_adapter.py --serve`, in its own process
/// group): HTA is imported once and the views sent to it go through it, one at a
/// time (importing pandas, networkx and plotly costs far more than one analysis).
/// The further analyses' adapter (`hta_analyses.py`, [`crate::hta_analyses`]) runs
/// the same way ([`Server::start_script`]).
pub(crate) struct Server {
    child: Child,
    stdin: ChildStdin,
    replies: mpsc::Receiver<std::io::Result<String>>,
    /// Holds the adapter script.
    _dir: TempDir,
}

/// At most this many adapter processes analyse views side by side (each imports HTA
/// once, so no more than the cores).
const MAX_SERVERS: usize = 4;

/// The servers of this process, each started on first use and again after a failure.
static SERVERS: [Mutex<Option<Server>>; MAX_SERVERS] = [const { Mutex::new(None) }; MAX_SERVERS];

/// Which server takes a request: the views of one native trace always go to the same
/// one (it analyses the trace once for all of them, `hta_adapter.py`), exports in turn.
fn server_slot(native_trace: Option<&Path>) -> usize {
    let servers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_SERVERS);
    static TURN: AtomicU64 = AtomicU64::new(0);
    let ticket = match native_trace {
        Some(path) => {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            path.hash(&mut h);
            h.finish()
        }
        None => TURN.fetch_add(1, Ordering::Relaxed),
    };
    (ticket % servers as u64) as usize
}

impl Server {
    fn start() -> Result<Server, String> {
        Server::start_script("hta_adapter.py", ADAPTER)
    }

    /// `python3 FILE --serve` of the adapter `source`, written to a private temp dir.
    pub(crate) fn start_script(file: &str, source: &str) -> Result<Server, String> {
        let dir = TempDir::new().map_err(|e| format!("cannot create a temp dir: {e}"))?;
        let script = dir.path().join(file);
        std::fs::write(&script, source)
            .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
        let mut child = Command::new(python())
            .arg(&script)
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start `{} {}`: {e}", python(), script.display()))?;
        let (stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
            (Some(i), Some(o)) => (i, o),
            _ => return Err("the HTA adapter has no pipes".into()),
        };
        let (send, replies) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Server {
            child,
            stdin,
            replies,
            _dir: dir,
        })
    }

    /// Sends one request line and waits for its reply line.
    pub(crate) fn ask(&mut self, request: &str, timeout: Duration) -> Result<String, String> {
        writeln!(self.stdin, "{request}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("the HTA adapter stopped reading: {e}"))?;
        match self.replies.recv_timeout(timeout) {
            Ok(Ok(line)) => Ok(line),
            Ok(Err(e)) => Err(format!("cannot read the HTA adapter's reply: {e}")),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
                "the HTA adapter took over {:.0} s on one view and was killed",
                timeout.as_secs_f64()
            )),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().map(|s| s.to_string());
                Err(format!(
                    "the HTA adapter exited ({})",
                    status.unwrap_or_else(|e| e.to_string())
                ))
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl HtaCriticalPath {
    /// Runs HTA on one view through the run's adapter process; errors are messages.
    pub fn run(&self, view: &TraceView) -> Result<Explanation, String> {
        if view.spec.collectors == Collectors::Kineto {
            self.run_native(view)
        } else {
            self.run_export(view)
        }
    }

    /// A `kineto` view: HTA reads the native trace beside the bundle, its events
    /// named by the view's rids.
    fn run_native(&self, view: &TraceView) -> Result<Explanation, String> {
        let trace = self.native_trace.as_ref().ok_or(
            "no native Kineto trace beside this bundle: on kineto views HTA reads \
             Kineto's own trace file, never an export",
        )?;
        let dir = ViewDir::new(view)?;
        let activities = kineto::read_activities(trace).map_err(|e| e.to_string())?;
        let events: serde_json::Map<String, serde_json::Value> =
            crate::hta_native::rids_of_events(&activities, view)
                .into_iter()
                .map(|(index, rid)| (index.to_string(), rid.into()))
                .collect();
        let rpath = dir.path().join("rids.json");
        std::fs::write(&rpath, serde_json::json!({ "events": events }).to_string())
            .map_err(|e| format!("cannot write {}: {e}", rpath.display()))?;
        let request = serde_json::json!({
            "kineto": trace, "view": dir.view, "out": dir.out, "rids": rpath
        });
        self.ask(&request.to_string(), Some(trace), &dir.out, view)
    }

    /// Any other view: HTA reads its Kineto export, once per distinct export
    /// ([`ExportKey`]).
    fn run_export(&self, view: &TraceView) -> Result<Explanation, String> {
        let (trace, _) =
            exporters::kineto::to_kineto(view, &exporters::kineto::KinetoOptions::default());
        let slot = export_slot(ExportKey::of(&trace, view));
        // Held while HTA analyses this export: a second view with the same export
        // (the `combined` and `cupti` views of a bundle) waits for the answer.
        let mut answer = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(x) = answer.as_ref() {
            let mut x = x.clone();
            x.meta.view = view.spec;
            return Ok(x);
        }
        let dir = ViewDir::new(view)?;
        let kpath = dir.path().join("kineto.json");
        std::fs::write(&kpath, trace.to_string())
            .map_err(|e| format!("cannot write {}: {e}", kpath.display()))?;
        let request = serde_json::json!({ "kineto": kpath, "view": dir.view, "out": dir.out });
        let x = self.ask(&request.to_string(), None, &dir.out, view)?;
        *answer = Some(x.clone());
        Ok(x)
    }

    /// Sends one request to an adapter process and reads the explanation it wrote
    /// to `opath`; `native` routes the views of one native trace to one process.
    fn ask(
        &self,
        request: &str,
        native: Option<&Path>,
        opath: &Path,
        view: &TraceView,
    ) -> Result<Explanation, String> {
        let reply = {
            let mut server = SERVERS[server_slot(native)]
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if server.is_none() {
                *server = Some(Server::start()?);
            }
            let answer = server
                .as_mut()
                .expect("started above")
                .ask(request, self.timeout);
            if answer.is_err() {
                // A server that failed once is not trusted with the next view.
                *server = None;
            }
            answer?
        };
        let reply: serde_json::Value = serde_json::from_str(&reply)
            .map_err(|e| format!("the HTA adapter's reply `{reply}` is not JSON: {e}"))?;
        if let Some(error) = reply.get("error") {
            return Err(format!("the HTA adapter failed: {error}"));
        }
        let x = Explanation::read(opath).map_err(|e| e.to_string())?;
        x.check_against(opath, view).map_err(|e| e.to_string())?;
        Ok(x)
    }
}

/// What determines HTA's answer on an export: the Kineto trace's events (its
/// `traceName`, which names the view, is left out) and the view's queries. The
/// `combined` and `cupti` views of a bundle export the same events (HTA reads CUPTI
/// records only), so HTA analyses them once: the second view's explanation is the
/// first's, its `wall_ms` that one analysis (baselines/README.md, "hta-critical-path").
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct ExportKey([u8; 32]);

impl ExportKey {
    fn of(trace: &serde_json::Value, view: &TraceView) -> ExportKey {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(trace["traceEvents"].to_string().as_bytes());
        h.update([0]);
        h.update(trace["deviceProperties"].to_string().as_bytes());
        h.update([0]);
        h.update(
            serde_json::to_string(&view.queries)
                .expect("queries serialize")
                .as_bytes(),
        );
        ExportKey(h.finalize().into())
    }
}

/// The answers of the last exports analysed; a few hundred views' worth, since a
/// run sends the views of a bundle close together.
const EXPORTS_KEPT: usize = 512;

type ExportAnswer = std::sync::Arc<Mutex<Option<Explanation>>>;

/// The slot of one export's answer: empty until HTA answered it (a failure is not
/// kept: the next view with this export asks again).
fn export_slot(key: ExportKey) -> ExportAnswer {
    static ANSWERS: OnceLock<Mutex<(HashMap<ExportKey, ExportAnswer>, VecDeque<ExportKey>)>> =
        OnceLock::new();
    let mut answers = ANSWERS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let (map, order) = &mut *answers;
    if let Some(slot) = map.get(&key) {
        return slot.clone();
    }
    while order.len() >= EXPORTS_KEPT {
        if let Some(old) = order.pop_front() {
            map.remove(&old);
        }
    }
    order.push_back(key);
    map.entry(key).or_default().clone()
}

impl Profiler for HtaCriticalPath {
    fn name(&self) -> &str {
        NAME
    }
    fn version(&self) -> &str {
        VERSION
    }
    fn explain(&self, view: &TraceView) -> Explanation {
        static TOLD: AtomicBool = AtomicBool::new(false);
        let started = Instant::now();
        if !hta_available() {
            if !TOLD.swap(true, Ordering::SeqCst) {
                eprintln!(
                    "causalbench: {NAME}: HolisticTraceAnalysis is not importable by `{}` (looked in {}); \
                     its explanations abstain. Install it with `bash baselines/hta/setup-hta.sh`.",
                    python(),
                    hta_dir().display()
                );
            }
            return abstain(
                view,
                "unavailable",
                started.elapsed().as_secs_f64() * 1000.0,
            );
        }
        match self.run(view) {
            Ok(x) => x,
            // The tool did not answer: a crash of its own, with the reason.
            Err(e) => {
                let mut x = abstain(view, "failed", started.elapsed().as_secs_f64() * 1000.0);
                x.meta.failure = Some(one_line(&e));
                x
            }
        }
    }
}
