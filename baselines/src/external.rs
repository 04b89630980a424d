//! External profilers: any program that reads a view file and writes an
//! explanation file (protocol: `baselines/PROTOCOL.md`, isolation:
//! `docs/integrity.md`).
//!
//! The command line is a template split into arguments like a shell would
//! (quotes, backslashes) *before* `{view}` and `{out}` are substituted, and the
//! program is executed directly: no shell ever reads a path. The program gets a
//! private copy of the view and a private output directory, runs in its own
//! process group under a Landlock ruleset ([`crate::sandbox`]) with stdin closed,
//! stdout discarded and stderr written to a log file (never a pipe, so a
//! background child it leaves behind cannot hold the harness). On exit or
//! timeout the whole group is killed. Its output is checked against a size
//! limit, copied to the requested path and validated with [`Explanation::read`]
//! and against the view ([`Explanation::check_against`]).

use crate::sandbox::{self, Isolation, Sandbox, SandboxError};
use ground_truth::{Explanation, FormatError, Readable, TraceView};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use wait_timeout::ChildExt;

/// Default wall-clock limit for one external profiler run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Default limit on the explanation file's size.
pub const DEFAULT_MAX_OUTPUT: u64 = 256 * 1024 * 1024;
/// How much of the program's stderr is kept for error messages.
const STDERR_TAIL: usize = 2048;

#[derive(Debug, thiserror::Error)]
pub enum ExternalError {
    #[error("cannot start external profiler `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("external profiler `{command}` timed out after {:.1} s and was killed", timeout.as_secs_f64())]
    Timeout { command: String, timeout: Duration },
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

fn tail_suffix(t: &str) -> String {
    if t.trim().is_empty() {
        String::new()
    } else {
        format!("; stderr ends with:\n{}", t.trim_end())
    }
}

/// How an external command is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

/// File names inside an invocation's private directory.
const PRIVATE_VIEW: &str = "view.json";
const PRIVATE_OUT_DIR: &str = "out";
const PRIVATE_OUT: &str = "explanation.json";
const PRIVATE_STDERR: &str = "stderr.log";

impl ExternalCommand {
    pub fn new(template: impl Into<String>) -> Self {
        ExternalCommand {
            template: template.into(),
            timeout: DEFAULT_TIMEOUT,
            max_output_bytes: DEFAULT_MAX_OUTPUT,
            confinement: Confinement::Isolated,
            protected: Vec::new(),
            stderr_log: None,
        }
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn with_max_output(mut self, bytes: u64) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    pub fn with_confinement(mut self, confinement: Confinement) -> Self {
        self.confinement = confinement;
        self
    }

    /// Adds a path the program must not reach.
    pub fn protecting(mut self, path: impl Into<PathBuf>) -> Self {
        self.protected.push(path.into());
        self
    }

    pub fn with_stderr_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.stderr_log = Some(path.into());
        self
    }

    /// The arguments (program first) for these two paths: the template is split
    /// first, then each placeholder is replaced in one pass, so a path that
    /// contains `{out}`, quotes or spaces stays one argument, verbatim.
    pub fn arguments(&self, view: &Path, out: &Path) -> Result<Vec<String>, ExternalError> {
        let template_error = |reason: String| ExternalError::Template {
            template: self.template.clone(),
            reason,
        };
        let words =
            shell_words::split(&self.template).map_err(|e| template_error(e.to_string()))?;
        if words.is_empty() {
            return Err(template_error("names no program".into()));
        }
        let (view, out) = (view.to_string_lossy(), out.to_string_lossy());
        let names_a_path = words
            .iter()
            .any(|w| w.contains("{view}") || w.contains("{out}"));
        let mut args: Vec<String> = words.iter().map(|w| substitute(w, &view, &out)).collect();
        if !names_a_path {
            args.push(view.into_owned());
            args.push(out.into_owned());
        }
        Ok(args)
    }

    /// The arguments for these two paths, quoted for display.
    pub fn command_line(&self, view: &Path, out: &Path) -> Result<String, ExternalError> {
        Ok(shell_words::join(self.arguments(view, out)?))
    }

    /// Runs the profiler on a private copy of `view_path`, then copies its
    /// explanation to `out_path` and reads and validates it there, against the
    /// view read from `view_path` (an answer to another view is invalid).
    pub fn run(&self, view_path: &Path, out_path: &Path) -> Result<Explanation, ExternalError> {
        let explanation = self.run_unchecked(view_path, out_path)?;
        let view = TraceView::read(view_path)?;
        explanation.check_against(out_path, &view)?;
        Ok(explanation)
    }

    /// [`ExternalCommand::run`] for a caller that holds the view `view_path` contains.
    pub fn run_on(
        &self,
        view: &TraceView,
        view_path: &Path,
        out_path: &Path,
    ) -> Result<Explanation, ExternalError> {
        let explanation = self.run_unchecked(view_path, out_path)?;
        explanation.check_against(out_path, view)?;
        Ok(explanation)
    }

    /// Runs the profiler and reads its explanation, checked on its own only.
    fn run_unchecked(
        &self,
        view_path: &Path,
        out_path: &Path,
    ) -> Result<Explanation, ExternalError> {
        // A stale file from an earlier run must not pass for this run's output.
        let _ = std::fs::remove_file(out_path);
        let private = tempfile::Builder::new()
            .prefix("causalbench-profiler-")
            .tempdir()
            .map_err(|source| ExternalError::Io {
                command: self.template.clone(),
                what: "cannot create its private directory".into(),
                source,
            })?;
        let (pview, pout_dir) = (
            private.path().join(PRIVATE_VIEW),
            private.path().join(PRIVATE_OUT_DIR),
        );
        let pout = pout_dir.join(PRIVATE_OUT);
        let line = self.command_line(&pview, &pout)?;
        let io = |what: String| {
            let command = line.clone();
            move |source| ExternalError::Io {
                command,
                what,
                source,
            }
        };
        std::fs::copy(view_path, &pview)
            .map_err(io(format!("cannot copy the view {}", view_path.display())))?;
        std::fs::create_dir(&pout_dir).map_err(io("cannot create its output directory".into()))?;
        let args = self.arguments(&pview, &pout)?;
        let mut cmd = Command::new(&args[0]);
        cmd.args(&args[1..])
            .env("TMPDIR", &pout_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        let log_path = self
            .stderr_log
            .clone()
            .unwrap_or_else(|| private.path().join(PRIVATE_STDERR));
        if let Some(dir) = log_path.parent() {
            std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        }
        let log =
            File::create(&log_path).map_err(io(format!("cannot create {}", log_path.display())))?;
        cmd.stderr(log);
        self.confine(&mut cmd, &args, view_path, out_path, &pview, &pout_dir)
            .map_err(|source| ExternalError::Isolation {
                command: line.clone(),
                source,
            })?;
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        let mut child = cmd.spawn().map_err(|source| ExternalError::Spawn {
            command: line.clone(),
            source,
        })?;
        let started = Instant::now();
        let status: Option<ExitStatus> = match child.wait_timeout(self.timeout) {
            Ok(s) => s,
            Err(source) => {
                kill_group(&mut child);
                return Err(ExternalError::Spawn {
                    command: line,
                    source,
                });
            }
        };
        // Whatever the program left running dies with it.
        kill_group(&mut child);
        let Some(status) = status else {
            let _ = child.wait();
            return Err(ExternalError::Timeout {
                command: line,
                timeout: self.timeout.max(started.elapsed().min(self.timeout)),
            });
        };
        let stderr_tail = tail_of_file(&log_path, STDERR_TAIL);
        if !status.success() {
            return Err(ExternalError::Failed {
                command: line,
                status: status.to_string(),
                code: status.code(),
                stderr_tail,
            });
        }
        // Only a regular file counts: a link the program planted is not followed.
        let size = match std::fs::symlink_metadata(&pout) {
            Ok(m) if m.file_type().is_file() => m.len(),
            _ => {
                return Err(ExternalError::NoOutput {
                    command: line,
                    path: out_path.to_path_buf(),
                    stderr_tail,
                })
            }
        };
        if size > self.max_output_bytes {
            return Err(ExternalError::TooLarge {
                path: out_path.to_path_buf(),
                size,
                limit: self.max_output_bytes,
            });
        }
        if let Some(dir) = out_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        }
        std::fs::copy(&pout, out_path).map_err(io(format!(
            "cannot copy its explanation to {}",
            out_path.display()
        )))?;
        // The limit holds for the decompressed size too: a small gzip stream
        // may expand to any size.
        let limits = ground_truth::io::InputLimits::DEFAULT.at_most(self.max_output_bytes);
        Ok(Explanation::read_within(out_path, &limits)?)
    }

    /// Puts `cmd` under the Landlock ruleset of this invocation, as its confinement asks.
    fn confine(
        &self,
        cmd: &mut Command,
        args: &[String],
        view_path: &Path,
        out_path: &Path,
        pview: &Path,
        pout_dir: &Path,
    ) -> Result<(), SandboxError> {
        let isolation = match self.confinement {
            Confinement::Trusted => return Ok(()),
            Confinement::Isolated => sandbox::detect(false)?,
            Confinement::IsolatedIfAvailable => sandbox::detect(true)?,
        };
        if isolation == Isolation::Unisolated {
            return Ok(());
        }
        // Whatever lies beside the view and the output (a bundle, say) stays out of
        // reach, and so do the private directories of other invocations.
        let temp = std::env::temp_dir().join("causalbench-profiler-");
        let neighbours: Vec<PathBuf> = [view_path, out_path, temp.as_path()]
            .iter()
            .map(|p| {
                let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
                dir.unwrap_or(Path::new(".")).to_path_buf()
            })
            .collect();
        let grants = sandbox::grants(args, pview, pout_dir, &self.protected, &neighbours)?;
        Sandbox::new(&grants)?.apply_to(cmd);
        Ok(())
    }
}

/// Replaces `{view}` and `{out}` in one left-to-right pass: text substituted in is never rescanned.
fn substitute(word: &str, view: &str, out: &str) -> String {
    let mut result = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(i) = rest.find('{') {
        result.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{view}") {
            result.push_str(view);
            rest = after;
        } else if let Some(after) = tail.strip_prefix("{out}") {
            result.push_str(out);
            rest = after;
        } else {
            result.push('{');
            rest = &tail[1..];
        }
    }
    result.push_str(rest);
    result
}

/// The last `keep` bytes of a file, as text.
fn tail_of_file(path: &Path, keep: usize) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(keep as u64)));
    let mut tail = Vec::new();
    let _ = f.take(keep as u64).read_to_end(&mut tail);
    String::from_utf8_lossy(&tail).into_owned()
}

/// Kills the child's process group (the child leads it): programs it started die too.
fn kill_group(child: &mut std::process::Child) {
    if let Ok(pgid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

/// Quotes a string for `sh` (and for the template's own splitting).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_before_substituting() {
        let c = ExternalCommand::new("prof --in {view} --out={out}");
        assert_eq!(
            c.arguments(Path::new("/a b/v.json"), Path::new("/o.json"))
                .unwrap(),
            ["prof", "--in", "/a b/v.json", "--out=/o.json"]
        );
        let c = ExternalCommand::new("prof");
        assert_eq!(
            c.arguments(Path::new("v.json"), Path::new("o.json"))
                .unwrap(),
            ["prof", "v.json", "o.json"]
        );
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn a_path_cannot_inject_arguments_or_placeholders() {
        let c = ExternalCommand::new("prof '{view}' {out}");
        let view = Path::new("/d/{out}'; touch /tmp/x; '$(id).json");
        let args = c.arguments(view, Path::new("/o.json")).unwrap();
        assert_eq!(args, ["prof", view.to_str().unwrap(), "/o.json"]);
        assert!(matches!(
            ExternalCommand::new("prof 'unclosed {view}").arguments(view, view),
            Err(ExternalError::Template { .. })
        ));
    }
}
