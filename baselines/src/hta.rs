//! `hta-critical-path`: Meta's Holistic Trace Analysis (HTA), a third-party analyzer,
//! scored through an adapter.
//!
//! The view is exported as a Kineto trace (`exporters::kineto`, what the PyTorch
//! profiler writes), HTA's critical-path analysis runs on it in Python
//! (`baselines/hta/hta_adapter.py`, embedded in this binary and written to a temp dir
//! next to the trace), through the external-profiler runner ([`ExternalCommand`]); the
//! adapter turns HTA's critical-path graph and path into an explanation (its docstring
//! says exactly how).
//!
//! HTA is optional: it is a Python package installed by `baselines/hta/setup-hta.sh`
//! into `$CAUSALBENCH_HTA_DIR` (default `${XDG_CACHE_HOME:-~/.cache}/causalbench/hta`).
//! [`hta_available`] probes once whether it imports; when it does not, `explain`
//! abstains (no edges, no causes, nothing complete) and says so once on stderr.
//! `CAUSALBENCH_HTA=0` turns the profiler off. HTA reads CUPTI records only: it is run
//! on `cupti` and `combined` views ([`reads_view`]).

use crate::common::empty_diagnosis;
use crate::external::ExternalCommand;
use crate::{Profiler, VERSION};
use ground_truth::{Collectors, Explanation, ExplanationMeta, TraceView, ViewSpec, SCHEMA_VERSION};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const NAME: &str = "hta-critical-path";

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

/// Does this profiler read views of this kind? HTA needs CUPTI records.
pub fn reads_view(spec: &ViewSpec) -> bool {
    spec.collectors != Collectors::Host
}

/// The HTA adapter profiler.
#[derive(Debug, Clone)]
pub struct HtaCriticalPath {
    pub timeout: Duration,
}

impl Default for HtaCriticalPath {
    fn default() -> Self {
        HtaCriticalPath {
            timeout: Duration::from_secs(600),
        }
    }
}

/// An explanation that claims nothing: no edges, no causes, nothing complete.
pub fn abstain(view: &TraceView, version: &str, wall_ms: f64) -> Explanation {
    Explanation {
        schema_version: SCHEMA_VERSION,
        meta: ExplanationMeta {
            profiler: NAME.to_string(),
            version: version.to_string(),
            view: view.spec,
            wall_ms,
            failure: None,
        },
        edges: Vec::new(),
        attribution: Vec::new(),
        diagnoses: view
            .queries
            .iter()
            .map(|q| ground_truth::Diagnosis {
                causes: Vec::new(),
                ..empty_diagnosis(q)
            })
            .collect(),
    }
}

/// A private temp directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<Self> {
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
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl HtaCriticalPath {
    /// Runs the adapter; errors are messages for stderr.
    pub fn run(&self, view: &TraceView) -> Result<Explanation, String> {
        let dir = TempDir::new().map_err(|e| format!("cannot create a temp dir: {e}"))?;
        let d = dir.path();
        let (vpath, kpath, apath, opath) = (
            d.join("view.json"),
            d.join("kineto.json"),
            d.join("hta_adapter.py"),
            d.join("explanation.json"),
        );
        ground_truth::Readable::write(view, &vpath)
            .map_err(|e| format!("cannot write {}: {e}", vpath.display()))?;
        exporters::kineto::write_kineto(view, &exporters::kineto::KinetoOptions::default(), &kpath)
            .map_err(|e| format!("cannot write {}: {e}", kpath.display()))?;
        std::fs::write(&apath, ADAPTER)
            .map_err(|e| format!("cannot write {}: {e}", apath.display()))?;
        let q = |p: &Path| crate::external::shell_quote(&p.to_string_lossy());
        let cmd = ExternalCommand::new(format!(
            "{} {} {} {{view}} {{out}}",
            crate::external::shell_quote(&python()),
            q(&apath),
            q(&kpath)
        ))
        .with_timeout(self.timeout)
        // The project's own adapter: it needs its installed packages, wherever they are.
        .with_confinement(crate::external::Confinement::Trusted);
        cmd.run_on(view, &vpath, &opath).map_err(|e| e.to_string())
    }
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
            Err(e) => {
                eprintln!("causalbench: {NAME}: {e}");
                abstain(view, "failed", started.elapsed().as_secs_f64() * 1000.0)
            }
        }
    }
}
