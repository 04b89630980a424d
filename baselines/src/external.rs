//! External profilers: any program that reads a view file and writes an
//! explanation file (protocol: `baselines/PROTOCOL.md`, isolation:
//! `docs/integrity.md`).
//!
//! The command line is a template split into arguments like a shell would
//! (quotes, backslashes) *before* `{view}` and `{out}` are substituted, and the
//! program is executed directly: no shell ever reads a path. The program gets a
//! private copy of the view and a private output directory, runs in its own
//! process group, in its own namespaces, under resource limits and a Landlock
//! ruleset ([`crate::sandbox`]), with a clean environment (`PATH`, `HOME`,
//! `TMPDIR`), stdin closed, stdout discarded and stderr written to a log file
//! (never a pipe, so a background child it leaves behind cannot hold the
//! harness), cut to [`DEFAULT_MAX_LOG`] afterwards. On exit or timeout the whole
//! group is killed, and with it its PID namespace. The harness measures its wall
//! time, CPU time and peak memory ([`Cost`]). Its output is checked against a size
//! limit, copied to the requested path and validated with [`Explanation::read`]
//! and against the view ([`Explanation::check_against`]).

use crate::cgroup::{Cgroup, CgroupLimits};
use crate::sandbox::{self, Isolation, Limits, Sandbox, SandboxError};
use ground_truth::{Explanation, Readable, TraceView};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

mod invocation;

pub(crate) use invocation::{
    cut_log, locked_private_dir, tail_of_file, PRIVATE_LOCK, PRIVATE_PREFIX,
};
pub use invocation::{failure_explanation, Confinement, Cost, ExternalCommand, ExternalError};

/// Default wall-clock limit for one external profiler run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Default limit on the explanation file's size.
pub const DEFAULT_MAX_OUTPUT: u64 = 256 * 1024 * 1024;
/// How much of the program's stderr is kept for error messages.
const STDERR_TAIL: usize = 2048;
/// Default limit on the stderr log kept of one invocation: the rest is cut.
pub const DEFAULT_MAX_LOG: u64 = 1024 * 1024;
/// Processes and threads one invocation may have at once (`RLIMIT_NPROC`, and
/// its cgroup's `pids.max`).
pub const MAX_TASKS: u64 = 4096;
/// Default limit on the memory of all of one invocation's processes together
/// (its cgroup's, [`crate::cgroup`]).
pub const DEFAULT_MAX_MEMORY: u64 = 16 * 1024 * 1024 * 1024;

/// A private directory without a lock file is left alone this long: its harness
/// may be between creating it and locking it.
const UNLOCKED_GRACE: Duration = Duration::from_secs(3600);

/// Removes the private directories that harnesses killed before they could clean
/// up left in the temporary directory: those whose lock no one holds. Run once per
/// process before its first invocation.
pub fn remove_stale_private_dirs() {
    remove_stale_private_dirs_in(&std::env::temp_dir());
}

/// [`remove_stale_private_dirs`] in `temp`: a test's own directory, which no other
/// harness of the same process cleans at the same time (a cleaner holds a lock while
/// it looks, so a second one sees that directory as live).
pub fn remove_stale_private_dirs_in(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for entry in entries.flatten() {
        let is_private = entry
            .file_name()
            .to_string_lossy()
            .starts_with(PRIVATE_PREFIX)
            && entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_private {
            continue;
        }
        let dir = entry.path();
        let stale = match File::open(dir.join(PRIVATE_LOCK)) {
            Ok(lock) => lock.try_lock().is_ok(),
            Err(_) => entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > UNLOCKED_GRACE)),
        };
        if stale {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
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
            max_log_bytes: DEFAULT_MAX_LOG,
            max_memory_bytes: DEFAULT_MAX_MEMORY,
            max_tasks: MAX_TASKS,
            lane: 0,
        }
    }

    /// Whether the template declares a server (`serve:`, baselines/PROTOCOL.md "Batch form").
    pub fn is_server(&self) -> bool {
        crate::external_server::declared_server(&self.template).is_some()
    }

    /// The lane of the views this invocation answers: a server process only ever
    /// sees views of one lane (the run puts the variants of a family instance in
    /// different lanes).
    pub fn in_lane(mut self, lane: u32) -> Self {
        self.lane = lane;
        self
    }

    pub fn with_max_memory(mut self, bytes: u64) -> Self {
        self.max_memory_bytes = bytes;
        self
    }

    pub fn with_max_tasks(mut self, tasks: u64) -> Self {
        self.max_tasks = tasks;
        self
    }

    /// The cgroup of one invocation of this command ([`crate::cgroup`]): `None` for
    /// the project's trusted adapters, and where this machine gives none (what is
    /// in force is recorded by [`crate::sandbox::Isolation::describe`]).
    pub fn cgroup(&self) -> Option<Cgroup> {
        if self.confinement == Confinement::Trusted {
            return None;
        }
        Cgroup::for_invocation(CgroupLimits {
            max_memory_bytes: self.max_memory_bytes,
            max_tasks: self.max_tasks,
        })
        .ok()
    }

    pub fn with_max_log(mut self, bytes: u64) -> Self {
        self.max_log_bytes = bytes;
        self
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
        if self.is_server() {
            return self.server_arguments();
        }
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

    /// A server's arguments (program first): its template without the declaration,
    /// which names no per-view path (views come as requests on stdin).
    pub fn server_arguments(&self) -> Result<Vec<String>, ExternalError> {
        let template_error = |reason: String| ExternalError::Template {
            template: self.template.clone(),
            reason,
        };
        let command = crate::external_server::declared_server(&self.template)
            .ok_or_else(|| template_error("declares no server".into()))?;
        let words = shell_words::split(command).map_err(|e| template_error(e.to_string()))?;
        if words.is_empty() {
            return Err(template_error("names no program".into()));
        }
        if words
            .iter()
            .any(|w| w.contains("{view}") || w.contains("{out}"))
        {
            return Err(template_error(
                "a server gets its views as requests on stdin: it names no {view} or {out}".into(),
            ));
        }
        if let Some(preload) = crate::external_server::declared_preload(&self.template) {
            preload.map_err(template_error)?;
            if let Some(problem) = crate::zygote::eligibility_problem(&words) {
                return Err(template_error(problem));
            }
        }
        Ok(words)
    }

    /// The arguments for these two paths, quoted for display.
    pub fn command_line(&self, view: &Path, out: &Path) -> Result<String, ExternalError> {
        Ok(shell_words::join(self.arguments(view, out)?))
    }

    /// Runs the profiler on a private copy of `view_path`, then copies its
    /// explanation to `out_path` and reads and validates it there, against the
    /// view read from `view_path` (an answer to another view is invalid).
    pub fn run(&self, view_path: &Path, out_path: &Path) -> Result<Explanation, ExternalError> {
        let explanation = self.run_unchecked(view_path, out_path, &mut None)?;
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
        self.run_measured(view, view_path, out_path).0
    }

    /// [`ExternalCommand::run_on`], with what the harness measured of the invocation
    /// (`None` when the program never started).
    pub fn run_measured(
        &self,
        view: &TraceView,
        view_path: &Path,
        out_path: &Path,
    ) -> (Result<Explanation, ExternalError>, Option<Cost>) {
        self.run_measured_with(view, view_path, &[], out_path)
    }

    /// [`ExternalCommand::run_measured`] of a server ([`ExternalCommand::is_server`])
    /// given extra input files besides the view, each readable by it, under its name,
    /// only while it answers this view (the project's HTA adapter gets the view's
    /// Kineto trace so). A per-view command gets the view alone.
    pub fn run_measured_with(
        &self,
        view: &TraceView,
        view_path: &Path,
        inputs: &[(&str, &Path)],
        out_path: &Path,
    ) -> (Result<Explanation, ExternalError>, Option<Cost>) {
        let mut cost = None;
        let answered = if self.is_server() {
            self.ask_server(view, view_path, inputs, out_path, &mut cost)
        } else {
            self.run_unchecked(view_path, out_path, &mut cost)
        };
        let result = answered.and_then(|explanation| {
            explanation.check_against(out_path, view)?;
            Ok(explanation)
        });
        (result, cost)
    }

    /// A server's answer to one view, checked on its own only.
    fn ask_server(
        &self,
        view: &TraceView,
        view_path: &Path,
        inputs: &[(&str, &Path)],
        out_path: &Path,
        cost: &mut Option<Cost>,
    ) -> Result<Explanation, ExternalError> {
        // A stale file from an earlier run must not pass for this run's output.
        let _ = std::fs::remove_file(out_path);
        static CLEANED: std::sync::Once = std::sync::Once::new();
        CLEANED.call_once(remove_stale_private_dirs);
        let request = crate::external_server::Request {
            view,
            view_path,
            inputs,
        };
        crate::external_server::ask(self, &request, out_path, cost)
    }

    /// Runs the profiler and reads its explanation, checked on its own only.
    fn run_unchecked(
        &self,
        view_path: &Path,
        out_path: &Path,
        cost: &mut Option<Cost>,
    ) -> Result<Explanation, ExternalError> {
        // A stale file from an earlier run must not pass for this run's output.
        let _ = std::fs::remove_file(out_path);
        if self.is_server() {
            let view = TraceView::read(view_path)?;
            return self.ask_server(&view, view_path, &[], out_path, cost);
        }
        static CLEANED: std::sync::Once = std::sync::Once::new();
        CLEANED.call_once(remove_stale_private_dirs);
        let (private, _owner) = invocation::locked_private_dir(&self.template, None)?;
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
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        self.clean_environment(&mut cmd, &pout_dir);
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
        let cgroup = self.cgroup();
        self.confine(
            &mut cmd,
            &args,
            (view_path, out_path),
            (&pview, &pout_dir),
            cgroup.as_ref(),
        )
        .map_err(|source| ExternalError::Isolation {
            command: line.clone(),
            source,
        })?;
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(|source| ExternalError::Spawn {
            command: line.clone(),
            source,
        })?;
        let ended = wait_measured(&mut child, self.timeout, started, cgroup.as_ref());
        cut_log(&log_path, self.max_log_bytes);
        let (status, measured) = ended.map_err(|source| ExternalError::Spawn {
            command: line.clone(),
            source,
        })?;
        *cost = Some(measured);
        let Some(status) = status else {
            return Err(ExternalError::Timeout {
                command: line,
                timeout: self.timeout,
            });
        };
        let stderr_tail = tail_of_file(&log_path, STDERR_TAIL);
        let out_of_memory = cgroup.as_ref().is_some_and(|g| g.usage().oom_kills > 0);
        if out_of_memory {
            return Err(ExternalError::MemoryLimit {
                command: line,
                limit: self.max_memory_bytes,
            });
        }
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
        std::fs::copy(&pout, out_path).map_err(|source| ExternalError::Unreadable {
            command: line.clone(),
            source,
        })?;
        // The limit holds for the decompressed size too: a small gzip stream
        // may expand to any size.
        let limits = ground_truth::io::InputLimits::DEFAULT.at_most(self.max_output_bytes);
        Ok(Explanation::read_within(out_path, &limits)?)
    }

    /// The environment baselines/PROTOCOL.md lists and nothing else of the harness's
    /// own (a seed, a token, a path to the results): `PATH`, and `HOME` and `TMPDIR`
    /// naming the program's writable directory.
    pub(crate) fn clean_environment(&self, cmd: &mut Command, home: &Path) {
        if self.confinement != Confinement::Trusted {
            cmd.env_clear();
        }
        cmd.envs(self.clean_environment_map(home));
    }

    /// [`ExternalCommand::clean_environment`]'s variables, as a warm-started server
    /// ([`crate::zygote`]) sets them itself.
    pub(crate) fn clean_environment_map(&self, home: &Path) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        if self.confinement != Confinement::Trusted {
            let path = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.into());
            env.insert("PATH".to_string(), path);
            env.insert("HOME".to_string(), home.to_string_lossy().into_owned());
        }
        env.insert("TMPDIR".to_string(), home.to_string_lossy().into_owned());
        env
    }

    /// Puts `cmd` under the confinement of this invocation: its cgroup, namespaces
    /// and limits, and the Landlock ruleset as its confinement asks.
    pub(crate) fn confine(
        &self,
        cmd: &mut Command,
        args: &[String],
        paths: (&Path, &Path),
        private: (&Path, &Path),
        cgroup: Option<&Cgroup>,
    ) -> Result<(), SandboxError> {
        let Some(grants) = self.grants(args, paths, private)? else {
            return Ok(());
        };
        let sandbox = match grants {
            Some(grants) => Sandbox::new(&grants)?,
            None => Sandbox::default(),
        };
        let sandbox = match cgroup {
            Some(cgroup) => sandbox.in_cgroup(cgroup),
            None => sandbox,
        };
        sandbox
            .in_namespaces()
            .with_limits(self.limits())
            .apply_to(cmd);
        Ok(())
    }

    /// The limits an invocation is set (`setrlimit`).
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            // The explanation is refused over the limit anyway; the log is cut after.
            max_file_bytes: self.max_output_bytes.max(self.max_log_bytes),
            max_tasks: self.max_tasks,
        }
    }

    /// What `args` may reach when it reads `pview` and writes `pout_dir`, its private
    /// copies of `view_path` and `out_path`: `None` when this confinement confines
    /// nothing (the project's trusted adapters), `Some(None)` when it runs unisolated
    /// (a kernel without Landlock, allowed), else the Landlock grants.
    pub(crate) fn grants(
        &self,
        args: &[String],
        (view_path, out_path): (&Path, &Path),
        (pview, pout_dir): (&Path, &Path),
    ) -> Result<Option<Option<sandbox::Grants>>, SandboxError> {
        let isolation = match self.confinement {
            Confinement::Trusted => return Ok(None),
            Confinement::Isolated => sandbox::detect(false)?,
            Confinement::IsolatedIfAvailable => sandbox::detect(true)?,
        };
        if isolation == Isolation::Unisolated {
            return Ok(Some(None));
        }
        // Whatever lies beside the view and the output (a bundle, say) stays out of
        // reach, and so do the private directories of other invocations.
        let temp = std::env::temp_dir().join(PRIVATE_PREFIX);
        let neighbours: Vec<PathBuf> = [view_path, out_path, temp.as_path()]
            .iter()
            .map(|p| {
                let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
                dir.unwrap_or(Path::new(".")).to_path_buf()
            })
            .collect();
        let grants = sandbox::grants(args, pview, pout_dir, &self.protected, &neighbours)?;
        Ok(Some(Some(grants)))
    }
}

/// `PATH` for a harness that has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Waits for `child` until `timeout` has passed since `started`, then kills its
/// process group and its cgroup (whatever it left running dies with them; in
/// namespaces, its whole PID namespace) and reaps it with `wait4(2)`. `None` as
/// status: timed out.
pub fn wait_measured(
    child: &mut std::process::Child,
    timeout: Duration,
    started: Instant,
    cgroup: Option<&Cgroup>,
) -> std::io::Result<(Option<ExitStatus>, Cost)> {
    let pid = child.id() as libc::pid_t;
    let exited = wait_for_exit(pid, started + timeout)?;
    // The child is not reaped yet, so its process group id still names its group.
    kill_group(pid);
    if let Some(cgroup) = cgroup {
        cgroup.kill();
    }
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 writes into the two locals it is given.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let wall = if exited {
        started.elapsed()
    } else {
        started.elapsed().min(timeout)
    };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    let measured = cgroup.map(Cgroup::usage).unwrap_or_default();
    let cost = Cost {
        wall_ms: wall.as_secs_f64() * 1000.0,
        cpu_ms: measured
            .cpu_ms
            .unwrap_or(ms(usage.ru_utime) + ms(usage.ru_stime)),
        max_rss_kib: measured
            .peak_memory_kib
            .unwrap_or(u64::try_from(usage.ru_maxrss).unwrap_or(0)),
        from_cgroup: measured.cpu_ms.is_some() || measured.peak_memory_kib.is_some(),
    };
    let _ = child; // reaped above: `Child` must not be waited for or killed again
    Ok((exited.then(|| ExitStatus::from_raw(status)), cost))
}

/// Whether process `pid` exited before `deadline` (it is left unreaped).
fn wait_for_exit(pid: libc::pid_t, deadline: Instant) -> std::io::Result<bool> {
    // SAFETY: pidfd_open(2) takes two integers.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
    if pidfd >= 0 {
        // SAFETY: the kernel just returned this descriptor to us alone.
        let pidfd =
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pidfd as i32) };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            let mut pfd = libc::pollfd {
                fd: std::os::fd::AsRawFd::as_raw_fd(&pidfd),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: poll reads and writes the one pollfd it is given.
            match unsafe { libc::poll(&mut pfd, 1, ms) } {
                n if n > 0 => return Ok(true),
                0 => continue,
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
    }
    // A kernel without pidfds (before 5.3): look every few milliseconds.
    loop {
        // SAFETY: waitid writes into the zeroed siginfo it is given.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else if unsafe { info.si_pid() } == pid {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(5));
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

/// Kills the process group `pgid` leads: programs it started die too.
fn kill_group(pgid: libc::pid_t) {
    // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
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
