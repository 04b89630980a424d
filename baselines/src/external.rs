//! External profilers: any program that reads a view file and writes an
//! explanation file (protocol: `baselines/PROTOCOL.md`).
//!
//! The command line is a template run by `sh -c`, with `{view}` and `{out}`
//! replaced by the shell-quoted paths (appended when the template names
//! neither). The program runs in its own process group with stdin closed; on
//! timeout the whole group is killed. Its output is checked against a size limit
//! before it is parsed and validated with [`Explanation::read`].

use ground_truth::{Explanation, FormatError, Readable};
use std::io::Read;
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
}

fn tail_suffix(t: &str) -> String {
    if t.trim().is_empty() {
        String::new()
    } else {
        format!("; stderr ends with:\n{}", t.trim_end())
    }
}

/// A runner for one external profiler command line.
#[derive(Debug, Clone)]
pub struct ExternalCommand {
    /// `PROGRAM {view} {out}`, run with `sh -c`.
    pub template: String,
    pub timeout: Duration,
    pub max_output_bytes: u64,
}

impl ExternalCommand {
    pub fn new(template: impl Into<String>) -> Self {
        ExternalCommand {
            template: template.into(),
            timeout: DEFAULT_TIMEOUT,
            max_output_bytes: DEFAULT_MAX_OUTPUT,
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

    /// The shell command line for these two paths.
    pub fn command_line(&self, view: &Path, out: &Path) -> String {
        let (v, o) = (
            shell_quote(&view.to_string_lossy()),
            shell_quote(&out.to_string_lossy()),
        );
        if self.template.contains("{view}") || self.template.contains("{out}") {
            self.template.replace("{view}", &v).replace("{out}", &o)
        } else {
            format!("{} {v} {o}", self.template)
        }
    }

    /// Runs the profiler on `view_path`, then reads and validates `out_path`.
    pub fn run(&self, view_path: &Path, out_path: &Path) -> Result<Explanation, ExternalError> {
        let line = self.command_line(view_path, out_path);
        // A stale file from an earlier run must not pass for this run's output.
        let _ = std::fs::remove_file(out_path);
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(&line)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        let mut child = cmd.spawn().map_err(|source| ExternalError::Spawn {
            command: line.clone(),
            source,
        })?;
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let drain_out = std::thread::spawn(move || tail_of(stdout, 0));
        let drain_err = std::thread::spawn(move || tail_of(stderr, STDERR_TAIL));
        let started = Instant::now();
        let status: Option<ExitStatus> = match child.wait_timeout(self.timeout) {
            Ok(s) => s,
            Err(source) => {
                return Err(ExternalError::Spawn {
                    command: line,
                    source,
                })
            }
        };
        let Some(status) = status else {
            kill_group(&mut child);
            let _ = child.wait();
            let _ = drain_out.join();
            let _ = drain_err.join();
            return Err(ExternalError::Timeout {
                command: line,
                timeout: self.timeout.max(started.elapsed().min(self.timeout)),
            });
        };
        let _ = drain_out.join();
        let stderr_tail = drain_err.join().unwrap_or_default();
        if !status.success() {
            return Err(ExternalError::Failed {
                command: line,
                status: status.to_string(),
                code: status.code(),
                stderr_tail,
            });
        }
        let size = match std::fs::metadata(out_path) {
            Ok(m) => m.len(),
            Err(_) => {
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
        // The limit holds for the decompressed size too: a small gzip stream
        // may expand to any size.
        let limits = ground_truth::io::InputLimits::DEFAULT.at_most(self.max_output_bytes);
        Ok(Explanation::read_within(out_path, &limits)?)
    }
}

/// Reads a pipe to its end, keeping the last `keep` bytes as text.
fn tail_of(mut r: impl Read, keep: usize) -> String {
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if keep > 0 {
                    tail.extend_from_slice(&buf[..n]);
                    if tail.len() > 2 * keep {
                        tail.drain(..tail.len() - keep);
                    }
                }
            }
        }
    }
    if tail.len() > keep {
        tail.drain(..tail.len() - keep);
    }
    String::from_utf8_lossy(&tail).into_owned()
}

fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    {
        // The child leads its own process group: kill the group, so that programs
        // the shell started die too.
        let pgid = child.id();
        let _ = Command::new("kill")
            .arg("-KILL")
            .arg("--")
            .arg(format!("-{pgid}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.kill();
}

/// Quotes a string for `sh`.
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
    fn substitutes_and_quotes_paths() {
        let c = ExternalCommand::new("prof --in {view} --out {out}");
        assert_eq!(
            c.command_line(Path::new("/a b/v.json"), Path::new("/o.json")),
            "prof --in '/a b/v.json' --out /o.json"
        );
        let c = ExternalCommand::new("prof");
        assert_eq!(
            c.command_line(Path::new("v.json"), Path::new("o.json")),
            "prof v.json o.json"
        );
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
