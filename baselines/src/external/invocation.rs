//! What one invocation of an external profiler is and yields, for the per-view runner
//! ([`crate::external`]) and the server ([`crate::external_server`]) alike: the
//! command ([`ExternalCommand`]) and how it is confined, what it cost ([`Cost`]), how
//! it failed ([`ExternalError`], [`failure_explanation`]), the names in its private
//! directory, and its stderr log's tail and cut. A file of its own so that the runner,
//! which hands batch commands to the server, and the server, which runs them the
//! runner's way, need not name each other for it.

use crate::sandbox::SandboxError;
use ground_truth::{Explanation, FormatError, TraceView};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the harness measured of one invocation: from its cgroup, every process it
/// had ([`crate::cgroup::Usage`]); without one, the process it started and every
/// process that one waited for (`wait4(2)`'s rusage; in namespaces, the program).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// From spawn to exit (or to the kill on timeout), in milliseconds.
    pub wall_ms: f64,
    /// User plus system CPU time, in milliseconds.
    pub cpu_ms: f64,
    /// Peak memory in KiB: of all its processes together (its cgroup's), else the
    /// largest resident set of any of those `wait4` saw (`ru_maxrss`).
    pub max_rss_kib: u64,
    /// Whether CPU time and peak memory come from its cgroup.
    pub from_cgroup: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ExternalError {
    #[error("cannot start external profiler `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("external profiler `{command}` timed out after {:.1} s and was killed", timeout.as_secs_f64())]
    Timeout { command: String, timeout: Duration },
    #[error("external profiler `{command}` was killed at its memory limit of {limit} bytes")]
    MemoryLimit { command: String, limit: u64 },
    #[error(
        "external profiler `{command}` failed ({status}){}",
        tail_suffix(stderr_tail)
    )]
    Failed {
        command: String,
        status: String,
        code: Option<i32>,
        stderr_tail: String,
    },
    #[error("external profiler `{command}` exited 0 but wrote no explanation at {}{}", path.display(), tail_suffix(stderr_tail))]
    NoOutput {
        command: String,
        path: PathBuf,
        stderr_tail: String,
    },
    #[error("explanation {} is {size} bytes, over the limit of {limit} bytes", path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error("invalid explanation: {0}")]
    Invalid(#[from] FormatError),
    #[error("external profiler `{command}`: its explanation cannot be read: {source}")]
    Unreadable {
        command: String,
        source: std::io::Error,
    },
    #[error("command template `{template}`: {reason}")]
    Template { template: String, reason: String },
    #[error("external profiler `{command}`: {source}")]
    Isolation {
        command: String,
        source: SandboxError,
    },
    #[error("external profiler `{command}`: {what}: {source}")]
    Io {
        command: String,
        what: String,
        source: std::io::Error,
    },
}

impl ExternalError {
    /// Whether the program is to blame (its failure on this view), not the harness:
    /// it ran and failed, hung, or wrote no valid explanation of this view.
    pub fn is_the_programs(&self) -> bool {
        matches!(
            self,
            ExternalError::Timeout { .. }
                | ExternalError::MemoryLimit { .. }
                | ExternalError::Failed { .. }
                | ExternalError::NoOutput { .. }
                | ExternalError::TooLarge { .. }
                | ExternalError::Invalid(_)
                | ExternalError::Unreadable { .. }
        )
    }

    /// The program's failure in one line without paths of this invocation, so that
    /// the same failure reads the same in every run (`meta.failure` of the explanation
    /// the harness writes for it, [`failure_explanation`]).
    pub fn summary(&self, out_path: &Path) -> String {
        match self {
            ExternalError::Timeout { timeout, .. } => {
                format!("timed out after {:.1} s", timeout.as_secs_f64())
            }
            ExternalError::MemoryLimit { limit, .. } => {
                format!("killed at its memory limit of {limit} bytes")
            }
            ExternalError::Failed { status, .. } => format!("failed ({status})"),
            ExternalError::NoOutput { .. } => "exited 0 but wrote no explanation".into(),
            ExternalError::TooLarge { size, limit, .. } => {
                format!("wrote an explanation of {size} bytes, over the limit of {limit}")
            }
            // One line: a list of valid values, wrapped in the error, joins up again.
            ExternalError::Invalid(e) => format!(
                "invalid explanation: {}",
                e.to_string()
                    .replace(&out_path.display().to_string(), "explanation.json")
                    .replace("\n  ", " ")
            ),
            ExternalError::Unreadable { .. } => "its explanation cannot be read".into(),
            other => other.to_string(),
        }
    }
}

/// The explanation the harness keeps for `profiler` when it failed on `view` with
/// `message`: it claims nothing and carries the message in `meta.failure`, so the
/// case counts as that profiler's crash (evaluator/METRICS.md, "Crashes") and no
/// other profiler's scores change.
pub fn failure_explanation(
    view: &TraceView,
    profiler: &str,
    message: &str,
    wall_ms: f64,
) -> Explanation {
    let line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut end = line.len().min(ground_truth::io::MAX_FAILURE_MESSAGE);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Explanation {
        schema_version: ground_truth::SCHEMA_VERSION,
        meta: ground_truth::ExplanationMeta {
            profiler: profiler.to_string(),
            version: "failed".to_string(),
            view: view.spec,
            wall_ms,
            failure: Some(line[..end].to_string()),
        },
        edges: Vec::new(),
        attribution: Vec::new(),
        diagnoses: Vec::new(),
    }
}

fn tail_suffix(t: &str) -> String {
    if t.trim().is_empty() {
        String::new()
    } else {
        format!("; stderr ends with:\n{}", t.trim_end())
    }
}

/// How an external command is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Confinement {
    /// Under Landlock; refused on a kernel without it.
    Isolated,
    /// Under Landlock where the kernel has it, else unisolated (the caller warns and records it).
    IsolatedIfAvailable,
    /// The project's own adapters (e.g. HTA), which need their installed packages.
    Trusted,
}

/// A runner for one external profiler command line.
#[derive(Debug, Clone)]
pub struct ExternalCommand {
    /// `PROGRAM ARGS... {view} {out}`, split into arguments like a shell would, never run by one.
    pub template: String,
    pub timeout: Duration,
    pub max_output_bytes: u64,
    pub confinement: Confinement,
    /// Paths the program must never reach (the results directory), besides the
    /// directories of the view and of the output it is given.
    pub protected: Vec<PathBuf>,
    /// Where the program's stderr is kept (default: a temporary file).
    pub stderr_log: Option<PathBuf>,
    /// The stderr log is cut to this many bytes once the invocation has ended.
    pub max_log_bytes: u64,
    /// Memory of all its processes together, where it has a cgroup.
    pub max_memory_bytes: u64,
    /// Processes and threads at once.
    pub max_tasks: u64,
    /// A server's views meet only views of the same lane ([`crate::external_server`]).
    pub lane: u32,
}

/// How the private directories of invocations are named, in the temporary directory.
pub(crate) const PRIVATE_PREFIX: &str = "causalbench-profiler-";
/// The file in a private directory its harness holds locked while it runs.
pub(crate) const PRIVATE_LOCK: &str = "owner.lock";

/// A fresh private directory (in `within`, else the temporary directory) and its lock
/// file, held locked as long as the caller keeps it: a private directory whose lock
/// is free belongs to a harness that died (`kill -9`) and is removed by the next one
/// (`external::remove_stale_private_dirs`). Errors name `command`.
pub(crate) fn locked_private_dir(
    command: &str,
    within: Option<&Path>,
) -> Result<(tempfile::TempDir, File), ExternalError> {
    let io = |what: &str| {
        let (command, what) = (command.to_string(), what.to_string());
        move |source| ExternalError::Io {
            command,
            what,
            source,
        }
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(PRIVATE_PREFIX);
    let private = match within {
        Some(dir) => builder.tempdir_in(dir),
        None => builder.tempdir(),
    }
    .map_err(io("cannot create its private directory"))?;
    let owner = File::create(private.path().join(PRIVATE_LOCK))
        .and_then(|f| f.try_lock().map(|()| f).map_err(std::io::Error::other))
        .map_err(io("cannot lock its private directory"))?;
    Ok((private, owner))
}
/// Cuts the log at `max` bytes, saying so at its end.
pub(crate) fn cut_log(path: &Path, max: u64) {
    let Ok(len) = std::fs::metadata(path).map(|m| m.len()) else {
        return;
    };
    if len <= max {
        return;
    }
    if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(path) {
        let _ = f.set_len(max);
        let _ = f.seek(SeekFrom::End(0));
        let _ = writeln!(
            f,
            "\n[causalbench: stderr cut at {max} bytes of the {len} the profiler wrote]"
        );
    }
}

/// The last `keep` bytes of a file, as text.
pub(crate) fn tail_of_file(path: &Path, keep: usize) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(keep as u64)));
    let mut tail = Vec::new();
    let _ = f.take(keep as u64).read_to_end(&mut tail);
    String::from_utf8_lossy(&tail).into_owned()
}
