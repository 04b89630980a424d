//! The batch (server) form of the external-profiler protocol (`baselines/PROTOCOL.md`,
//! "Batch form"): one long-lived process answers many views, one JSON request per
//! line on its stdin, one explanation per line on its stdout, so that a program with
//! heavy imports (HTA, pandas) pays for them once instead of once per view.
//!
//! A server is confined exactly like a per-view invocation ([`crate::external`]): the
//! same namespaces, limits and Landlock rules, a clean environment, stderr to a log
//! file. What it may read of the run is one directory, `views/`, which holds only the
//! view being asked about (and the inputs the caller adds to it): the harness puts the
//! view there, writes the request, reads the answer and removes the view before the
//! next request. Its answer is validated exactly as a per-view explanation (size
//! limit, [`Explanation::read_within`], then the caller's check against the view).
//!
//! What a server remembers it remembers: no sandbox can make a process forget. So the
//! harness decides which views meet in one process ([`ServerKey`]): one server per
//! command, view kind (collectors, mode, loss) and *lane*. A server therefore never
//! sees two views of one bundle (they differ in kind), and the caller puts the
//! variants of one family instance in different lanes (the run draws the lanes at
//! random per instance, `cli/src/external.rs`), so no server sees two variants of one
//! pair. A hung or failed answer is that view's failure; the process is killed and
//! the next view of its key starts a new one.
//!
//! A server declared `serve[PRELOAD]:` is forked warm from a zygote that imported
//! the preload set once ([`crate::zygote`]), confined alike; warm servers are counted
//! apart ([`MAX_LIVE_WARM_SERVERS`]).
//!
//! Servers are started from one long-lived thread of the harness: a sandboxed
//! process dies with the thread that started it (`PR_SET_PDEATHSIG`), and a run's
//! worker threads end before the run does.

use crate::external::{locked_private_dir, Cost, ExternalCommand, ExternalError};
use crate::keeper::{kill_group, spawn_from_keeper};
use crate::zygote::{self, Forked, Preload, MAX_LIVE_WARM_SERVERS};
use ground_truth::{Explanation, Readable, TraceView};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Instant;

/// A command template that starts with this declares a server (PROTOCOL.md).
pub const SERVE_PREFIX: &str = "serve:";

/// `serve[NAME]:` declares a server warm-started from the preload set NAME.
const WARM_SERVE_PREFIX: &str = "serve[";
const WARM_SERVE_END: &str = "]:";

/// The most server processes alive at once; beyond, the least recently used idle one
/// is stopped (it is started again when its key is asked for).
pub const MAX_LIVE_SERVERS: usize = 64;

/// File names in a server's private directory.
const VIEWS_DIR: &str = "views";
const HOME_DIR: &str = "home";
const SERVER_LOG: &str = "stderr.log";
const VIEW_FILE: &str = "view.json";

/// Which process answers a view: views with different keys never meet in one process.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ServerKey {
    template: String,
    confinement: crate::Confinement,
    protected: Vec<PathBuf>,
    max_output_bytes: u64,
    /// The view's collectors, mode and loss (`ViewSpec::label`, no seed).
    kind: String,
    lane: u32,
}

/// One request: the view, and extra inputs the caller puts beside it (name → file).
pub struct Request<'a> {
    pub view: &'a TraceView,
    pub view_path: &'a Path,
    pub inputs: &'a [(&'a str, &'a Path)],
}

/// A running server process.
struct Server {
    process: Process,
    stdin: File,
    answers: mpsc::Receiver<Answer>,
    private: tempfile::TempDir,
    _owner: File,
    started: Instant,
    /// Whether no view was asked yet: the first one is charged the start.
    fresh: bool,
    line: String,
    last_used: Instant,
    /// Its cgroup, where the machine gives one: CPU time, peak memory, OOM kills.
    /// Declared last: dropped after the process is killed and reaped.
    cgroup: Option<crate::cgroup::Cgroup>,
}

/// How a server was started.
enum Process {
    /// By the harness, as any invocation: the relay of its namespaces.
    Spawned(Child),
    /// Forked from a zygote, warm (PROTOCOL.md "Warm start").
    Forked(Forked),
}

impl Process {
    /// Kills it and everything it started.
    fn kill(&mut self) {
        match self {
            Process::Spawned(child) => kill_group(child),
            Process::Forked(forked) => forked.kill(),
        }
    }

    /// How it ended (it is killed first, so this never waits long).
    fn exit_status(&mut self) -> String {
        match self {
            Process::Spawned(child) => {
                kill_group(child);
                match child.wait() {
                    Ok(status) => status.to_string(),
                    Err(e) => e.to_string(),
                }
            }
            Process::Forked(forked) => forked.exit_status(),
        }
    }

    /// The program's pid: PID 1 of its namespace, found as the relay's child.
    fn program_pid(&self) -> u32 {
        match self {
            Process::Spawned(child) => {
                let relay = child.id();
                let children =
                    std::fs::read_to_string(format!("/proc/{relay}/task/{relay}/children"))
                        .unwrap_or_default();
                children
                    .split_whitespace()
                    .next()
                    .and_then(|p| p.parse::<u32>().ok())
                    .unwrap_or(relay)
            }
            Process::Forked(forked) => forked.pid(),
        }
    }
}

/// What the server's stdout gave for one request.
enum Answer {
    Line(Vec<u8>),
    TooLong(u64),
    Closed(std::io::Error),
}

type Slot = Arc<Mutex<Option<Server>>>;

fn servers() -> &'static Mutex<HashMap<ServerKey, Slot>> {
    static SERVERS: OnceLock<Mutex<HashMap<ServerKey, Slot>>> = OnceLock::new();
    SERVERS.get_or_init(Default::default)
}

/// Whether a template declares a server, and the command without the declaration.
pub fn declared_server(template: &str) -> Option<&str> {
    declaration(template).map(|(_, command)| command)
}

/// The preload set a server declares for its warm start (`serve[NAME]:`, PROTOCOL.md
/// "Warm start"): `None` for a plain `serve:`, an error for a name the harness has no
/// set of.
pub fn declared_preload(template: &str) -> Option<Result<Preload, String>> {
    let name = declaration(template)?.0?;
    Some(Preload::parse(name).ok_or_else(|| {
        let known: Vec<&str> = Preload::ALL.iter().map(|p| p.name()).collect();
        format!(
            "`serve[{name}]:` names no preload set; the harness has: {}",
            known.join(", ")
        )
    }))
}

/// `serve:` or `serve[NAME]:`, split into the preload name and the command.
fn declaration(template: &str) -> Option<(Option<&str>, &str)> {
    let template = template.trim_start();
    if let Some(command) = template.strip_prefix(SERVE_PREFIX) {
        return Some((None, command));
    }
    let (name, command) = template
        .strip_prefix(WARM_SERVE_PREFIX)?
        .split_once(WARM_SERVE_END)?;
    Some((Some(name), command))
}

/// Answers one view through the server of `command`'s key, starting it when none runs.
/// The explanation is written to `out_path` and read back from there.
pub fn ask(
    command: &ExternalCommand,
    request: &Request,
    out_path: &Path,
    cost: &mut Option<Cost>,
) -> Result<Explanation, ExternalError> {
    let key = ServerKey {
        template: command.template.clone(),
        confinement: command.confinement,
        protected: command.protected.clone(),
        max_output_bytes: command.max_output_bytes,
        kind: request.view.spec.label(),
        lane: command.lane,
    };
    let zygote = match declared_preload(&command.template) {
        Some(preload) if zygote::available(command) => {
            let preload = preload.map_err(|reason| ExternalError::Template {
                template: command.template.clone(),
                reason,
            })?;
            zygote::of(command, preload, (request.view_path, out_path)).ok()
        }
        _ => None,
    };
    let warm = zygote.is_some();
    let slot = {
        let mut all = servers().lock().unwrap_or_else(|p| p.into_inner());
        let slot = all.entry(key).or_default().clone();
        let max = if warm {
            MAX_LIVE_WARM_SERVERS
        } else {
            MAX_LIVE_SERVERS
        };
        stop_idle_beyond(&all, warm, max.saturating_sub(1));
        slot
    };
    let mut server = slot.lock().unwrap_or_else(|p| p.into_inner());
    if server.is_none() {
        *server = Some(Server::start(command, request, out_path, zygote.as_ref())?);
    }
    let running = server.as_mut().expect("started above");
    let answer = running.ask(command, request, out_path, cost);
    if answer.is_err() {
        // A server that failed once is not trusted with the next view: it may be hung,
        // half way through a line, or gone.
        *server = None;
    }
    answer
}

/// Stops the least recently used idle servers started `warm` (or cold) while more than
/// `max` of them run (a server answering a view, its slot locked, counts as running).
fn stop_idle_beyond(all: &HashMap<ServerKey, Slot>, warm: bool, max: usize) {
    let mut busy = 0;
    let mut idle: Vec<(Instant, &Slot)> = Vec::new();
    for slot in all.values() {
        match slot.try_lock() {
            Ok(s) => {
                if let Some(s) = s.as_ref().filter(|s| s.is_warm() == warm) {
                    idle.push((s.last_used, slot));
                }
            }
            Err(_) => busy += 1,
        }
    }
    idle.sort_by_key(|(t, _)| *t);
    let excess = (idle.len() + busy).saturating_sub(max);
    for (_, slot) in idle.into_iter().take(excess) {
        if let Ok(mut s) = slot.try_lock() {
            *s = None;
        }
    }
}

/// Stops every server of this process (their namespaces die with them).
pub fn stop_all() {
    let all = servers().lock().unwrap_or_else(|p| p.into_inner());
    for slot in all.values() {
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
    zygote::stop_all();
}

impl Server {
    fn is_warm(&self) -> bool {
        matches!(self.process, Process::Forked(_))
    }

    /// Starts a server for `command`: forked from `zygote` when one is given, else
    /// spawned cold.
    fn start(
        command: &ExternalCommand,
        request: &Request,
        out_path: &Path,
        zygote: Option<&Arc<zygote::Zygote>>,
    ) -> Result<Server, ExternalError> {
        let io = |what: &str| {
            let (command, what) = (command.template.clone(), what.to_string());
            move |source| ExternalError::Io {
                command,
                what,
                source,
            }
        };
        // A fork's directory lies in its zygote's, which the zygote's Landlock rules
        // grant (a fork's own rules grant it its directory only).
        let (private, owner) =
            locked_private_dir(&command.template, zygote.map(|z| z.private_dir()))?;
        let (views, home) = (
            private.path().join(VIEWS_DIR),
            private.path().join(HOME_DIR),
        );
        std::fs::create_dir(&views).map_err(io("cannot create its views directory"))?;
        std::fs::create_dir(&home).map_err(io("cannot create its home directory"))?;
        let args = command.server_arguments()?;
        let line = shell_words::join(&args);
        // Appended to, so that the harness can empty it after each view.
        let log_path = private.path().join(SERVER_LOG);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io("cannot create its stderr log"))?;
        let cgroup = command.cgroup();
        let paths = (request.view_path, out_path);
        let started = Instant::now();
        let (process, stdin, stdout) = match zygote {
            Some(zygote) => {
                let (forked, stdin, stdout) = zygote.fork(
                    command,
                    &args,
                    paths,
                    (&views, &home),
                    (log, &log_path),
                    cgroup.as_ref(),
                )?;
                (Process::Forked(forked), stdin, stdout)
            }
            None => {
                let mut child =
                    spawn(command, &args, paths, (&views, &home), log, cgroup.as_ref())?;
                let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                    kill_group(&mut child);
                    return Err(ExternalError::Io {
                        command: line,
                        what: "has no pipes".into(),
                        source: std::io::Error::other("no stdin or stdout"),
                    });
                };
                let (stdin, stdout) = (
                    File::from(std::os::fd::OwnedFd::from(stdin)),
                    File::from(std::os::fd::OwnedFd::from(stdout)),
                );
                (Process::Spawned(child), stdin, stdout)
            }
        };
        let (send, answers) = mpsc::channel();
        let limit = command.max_output_bytes;
        std::thread::spawn(move || read_answers(stdout, limit, send));
        Ok(Server {
            process,
            stdin,
            answers,
            private,
            _owner: owner,
            started,
            fresh: true,
            line,
            last_used: Instant::now(),
            cgroup,
        })
    }

    fn ask(
        &mut self,
        command: &ExternalCommand,
        request: &Request,
        out_path: &Path,
        cost: &mut Option<Cost>,
    ) -> Result<Explanation, ExternalError> {
        let line = self.line.clone();
        let io = |what: String| {
            let command = line.clone();
            move |source| ExternalError::Io {
                command,
                what,
                source,
            }
        };
        let views = self.private.path().join(VIEWS_DIR);
        let view = views.join(VIEW_FILE);
        std::fs::copy(request.view_path, &view).map_err(io(format!(
            "cannot copy the view {}",
            request.view_path.display()
        )))?;
        let mut inputs = serde_json::Map::new();
        for (name, path) in request.inputs {
            let plain = ground_truth::identifier::identifier_problem(name).is_none();
            if !plain || *name == VIEW_FILE {
                return Err(ExternalError::Template {
                    template: command.template.clone(),
                    reason: format!("input name `{name}` is no plain file name"),
                });
            }
            let file = views.join(name);
            std::fs::copy(path, &file)
                .map_err(io(format!("cannot copy the input {}", path.display())))?;
            inputs.insert(name.to_string(), file.to_string_lossy().into());
        }
        let mut message = serde_json::json!({ "view": view });
        if !inputs.is_empty() {
            message["inputs"] = inputs.into();
        }
        let (before, oom_before) = (self.usage(), self.oom_kills());
        let asked = if std::mem::take(&mut self.fresh) {
            self.started
        } else {
            Instant::now()
        };
        let sent = writeln!(self.stdin, "{message}").and_then(|()| self.stdin.flush());
        let answer = match sent {
            Ok(()) => self.answers.recv_timeout(command.timeout),
            Err(e) => Ok(Answer::Closed(e)),
        };
        let wall = asked.elapsed();
        let after = self.usage();
        self.last_used = Instant::now();
        // Only the view asked about is ever readable: gone before the next request.
        let _ = std::fs::remove_file(&view);
        for (name, _) in request.inputs {
            let _ = std::fs::remove_file(views.join(name));
        }
        self.keep_log(command);
        let timed_out = matches!(answer, Err(mpsc::RecvTimeoutError::Timeout));
        if timed_out {
            self.process.kill();
        }
        *cost = Some(Cost {
            wall_ms: wall.as_secs_f64() * 1000.0,
            cpu_ms: (after.0 - before.0).max(0.0),
            max_rss_kib: after.1,
            from_cgroup: self.cgroup.is_some(),
        });
        if self.oom_kills() > oom_before {
            return Err(ExternalError::MemoryLimit {
                command: line,
                limit: command.max_memory_bytes,
            });
        }
        let bytes = match answer {
            Ok(Answer::Line(bytes)) => bytes,
            Ok(Answer::TooLong(size)) => {
                return Err(ExternalError::TooLarge {
                    path: out_path.to_path_buf(),
                    size,
                    limit: command.max_output_bytes,
                })
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(ExternalError::Timeout {
                    command: line,
                    timeout: command.timeout,
                })
            }
            Ok(Answer::Closed(why)) => {
                let status = self.exit_status();
                return Err(ExternalError::Failed {
                    command: line,
                    status: format!("stopped answering ({why}): {status}"),
                    code: None,
                    stderr_tail: command
                        .stderr_log
                        .as_deref()
                        .map(|p| crate::external::tail_of_file(p, 2048))
                        .unwrap_or_default(),
                });
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = self.exit_status();
                return Err(ExternalError::Failed {
                    command: line,
                    status: format!("exited before answering: {status}"),
                    code: None,
                    stderr_tail: command
                        .stderr_log
                        .as_deref()
                        .map(|p| crate::external::tail_of_file(p, 2048))
                        .unwrap_or_default(),
                });
            }
        };
        if let Some(dir) = out_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        }
        std::fs::write(out_path, &bytes).map_err(|source| ExternalError::Unreadable {
            command: line.clone(),
            source,
        })?;
        let limits = ground_truth::io::InputLimits::DEFAULT.at_most(command.max_output_bytes);
        Ok(Explanation::read_within(out_path, &limits)?)
    }

    fn oom_kills(&self) -> u64 {
        self.cgroup.as_ref().map_or(0, |g| g.usage().oom_kills)
    }

    /// The server's CPU time (ms) and peak memory (KiB) so far: from its cgroup, else
    /// of the program (PID 1 of its namespace, found as the relay's child), its threads
    /// and reaped children.
    fn usage(&self) -> (f64, u64) {
        if let Some(usage) = self.cgroup.as_ref().map(|g| g.usage()) {
            if let (Some(cpu), Some(peak)) = (usage.cpu_ms, usage.peak_memory_kib) {
                return (cpu, peak);
            }
        }
        let pid = self.process.program_pid();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Fields after the command name (which may hold spaces): utime is the 14th field.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // SAFETY: sysconf reads a constant of the system.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let cpu_ms = (ticks(11) + ticks(12) + ticks(13) + ticks(14)) * 1000.0 / hz;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let peak = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        (cpu_ms, peak)
    }

    /// Moves what the server wrote to stderr during this view into the view's log.
    fn keep_log(&self, command: &ExternalCommand) {
        let path = self.private.path().join(SERVER_LOG);
        if let Some(log) = &command.stderr_log {
            if let Some(dir) = log.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let (Ok(from), Ok(mut to)) = (File::open(&path), File::create(log)) {
                let _ = std::io::copy(&mut from.take(command.max_log_bytes), &mut to);
            }
            crate::external::cut_log(log, command.max_log_bytes);
        }
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&path) {
            let _ = f.set_len(0);
        }
    }

    /// How the server ended (it is killed first, so this never waits long).
    fn exit_status(&mut self) -> String {
        self.process.exit_status()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.process.kill();
        if let Process::Spawned(child) = &mut self.process {
            let _ = child.wait();
        }
    }
}

/// Spawns a cold server: `args` confined as `command` confines any invocation.
fn spawn(
    command: &ExternalCommand,
    args: &[String],
    paths: (&Path, &Path),
    (views, home): (&Path, &Path),
    log: File,
    cgroup: Option<&crate::cgroup::Cgroup>,
) -> Result<Child, ExternalError> {
    let line = shell_words::join(args);
    let mut cmd = Command::new(&args[0]);
    cmd.args(&args[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log);
    command.clean_environment(&mut cmd, home);
    command
        .confine(&mut cmd, args, paths, (views, home), cgroup)
        .map_err(|source| ExternalError::Isolation {
            command: line.clone(),
            source,
        })?;
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    spawn_from_keeper(cmd).map_err(|source| ExternalError::Spawn {
        command: line,
        source,
    })
}

/// Reads answer lines, each at most `limit` bytes; stops at the first one over it.
fn read_answers(stdout: File, limit: u64, send: mpsc::Sender<Answer>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut line = Vec::new();
        let read = (&mut reader).take(limit + 1).read_until(b'\n', &mut line);
        let answer = match read {
            Ok(0) => Answer::Closed(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(_) if line.last() == Some(&b'\n') => {
                line.pop();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                Answer::Line(line)
            }
            Ok(n) if n as u64 > limit => Answer::TooLong(n as u64),
            Ok(_) => Answer::Closed(std::io::ErrorKind::UnexpectedEof.into()),
            Err(e) => Answer::Closed(e),
        };
        let last = !matches!(answer, Answer::Line(_));
        if send.send(answer).is_err() || last {
            return;
        }
    }
}
