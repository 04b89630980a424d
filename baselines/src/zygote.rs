//! The warm start of batch profilers (`baselines/PROTOCOL.md`, "Warm start"): a
//! server declared `serve[PRELOAD]:` is forked from a process that has already
//! imported one of the harness's preload sets ([`Preload`]), instead of being started
//! and importing them itself, once per kind and lane of view (measured: the imports
//! are most of what a Python profiler with heavy imports costs a run).
//!
//! What makes it safe is who runs before the fork: only the harness's code
//! (`zygote.py`) and the preload set it names, from the interpreter's standard
//! library or the project's pinned install (`baselines/hta/setup-hta.sh`), never the
//! profiler's. The zygote is confined like any server (namespaces, Landlock, cgroup)
//! and reads nothing of a run. Each fork then confines itself before the profiler's
//! script runs: it moves into its own cgroup, enters a user namespace of its own with
//! new PID, network, IPC and UTS namespaces (so two forks share no network, no SysV
//! IPC, no abstract socket), sets its limits, and restricts itself to its own Landlock
//! domain, built by the harness exactly as a cold server's and nested in the zygote's:
//! no fork can read another's files, signal or trace it. What two forks share is what
//! the zygote had imported before either existed.
//!
//! The harness talks to the zygote over a `SOCK_SEQPACKET` socket (its stdin): a fork
//! request carries the descriptors of the fork's ruleset, pipes, log and cgroup; the
//! fork answers with a pidfd of itself once it is confined, through which the harness
//! kills it (and, as PID 1 of its namespace, all it started).

use crate::external::{locked_private_dir, ExternalCommand, ExternalError};
use crate::sandbox::{self, Isolation, Sandbox};
use std::collections::HashMap;
use std::fs::File;
use std::io::IoSlice;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The zygote's program, shipped inside the binary.
const SOURCE: &str = include_str!("zygote.py");

/// File names in the zygote's private directory.
const HOME_DIR: &str = "home";
const LOG: &str = "zygote.stderr.log";

/// The most warm-started servers alive at once (PROTOCOL.md "Warm start"), counted
/// apart: a fork shares the zygote's imports and its start is a fork, so a run keeps one
/// per kind and lane of the default run (50 kinds × 3 lanes) alive rather than starting
/// them again and again.
pub const MAX_LIVE_WARM_SERVERS: usize = 192;

/// How long a fork may take to confine itself and answer.
const FORK_TIMEOUT: Duration = Duration::from_secs(30);

/// A preload set a server may declare (`serve[NAME]:`): what the zygote imports
/// before it forks. Fixed by the harness: a profiler chooses one, never its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preload {
    /// The standard library's common modules (json, re, collections, …).
    Python,
    /// Those and the pinned analysis stack of `baselines/hta/setup-hta.sh` (HTA,
    /// pandas, numpy, networkx), whose directory is put first on `sys.path`.
    Hta,
}

impl Preload {
    pub const ALL: [Preload; 2] = [Preload::Python, Preload::Hta];

    pub fn name(self) -> &'static str {
        match self {
            Preload::Python => "python",
            Preload::Hta => "hta",
        }
    }

    pub fn parse(name: &str) -> Option<Preload> {
        Preload::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The directory the zygote and its forks find the set in, beside the interpreter's own.
    fn path(self) -> Option<PathBuf> {
        match self {
            Preload::Python => None,
            Preload::Hta => Some(crate::hta::hta_dir()),
        }
    }
}

/// Why a command cannot be warm-started: it must be `PYTHON SCRIPT ARGS...`.
pub fn eligibility_problem(args: &[String]) -> Option<String> {
    let program = args.first().map(|p| Path::new(p.as_str()));
    let python = program
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("python"));
    if !python {
        return Some("a warm start runs a Python script: `python3 SCRIPT ARGS...`".into());
    }
    match args.get(1) {
        Some(script) if !script.starts_with('-') => None,
        _ => Some(
            "a warm start runs a script file: `python3 SCRIPT ARGS...`, no interpreter options"
                .into(),
        ),
    }
}

/// Whether this machine warm-starts: the zygote's forks confine themselves with
/// Landlock and namespaces, so without either a server is started cold (as the
/// per-view form falls back).
pub fn available(command: &ExternalCommand) -> bool {
    let isolated = match command.confinement {
        crate::Confinement::Trusted => false,
        crate::Confinement::Isolated | crate::Confinement::IsolatedIfAvailable => {
            matches!(sandbox::detect(true), Ok(Isolation::Landlock { .. }))
        }
    };
    isolated && sandbox::namespaces_available().is_ok()
}

/// Which zygote forks a server: one per command and preload set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    template: String,
    confinement: crate::Confinement,
    protected: Vec<PathBuf>,
    preload: Preload,
}

/// The zygote of each key, or why it could not start (it is not tried again).
type Zygotes = HashMap<Key, Result<Arc<Zygote>, String>>;

fn zygotes() -> &'static Mutex<Zygotes> {
    static ZYGOTES: OnceLock<Mutex<Zygotes>> = OnceLock::new();
    ZYGOTES.get_or_init(Default::default)
}

/// The zygote of `command` and `preload`, started when none runs (again when it
/// died). `Err` says why this run has none: the harness's environment lacks the
/// preload set (HTA not installed, another Python version), which is no fault of the
/// profiler's, so its servers start cold instead (the run says so once).
pub(crate) fn of(
    command: &ExternalCommand,
    preload: Preload,
    paths: (&Path, &Path),
) -> Result<Arc<Zygote>, String> {
    let key = Key {
        template: command.template.clone(),
        confinement: command.confinement,
        protected: command.protected.clone(),
        preload,
    };
    let mut all = zygotes().lock().unwrap_or_else(|p| p.into_inner());
    match all.get(&key) {
        Some(Ok(z)) if !z.shared.lock().closed => return Ok(z.clone()),
        Some(Err(why)) => return Err(why.clone()),
        _ => {}
    }
    let started = Zygote::start(command, preload, paths)
        .map(Arc::new)
        .map_err(|e| e.to_string());
    if let Err(why) = &started {
        eprintln!(
            "causalbench: no warm start for `{}` ({why}); its servers start cold",
            command.template
        );
    }
    all.insert(key, started.clone());
    started
}

/// Stops every zygote of this process (their forks die with them).
pub fn stop_all() {
    zygotes().lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// What the zygote said, per fork request.
#[derive(Default)]
struct Replies {
    ready: HashMap<u64, OwnedFd>,
    ended: HashMap<u64, String>,
    preloaded: Option<Result<u64, String>>,
    closed: bool,
}

#[derive(Default)]
struct Shared {
    replies: Mutex<Replies>,
    arrived: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Replies> {
        self.replies.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until `done` finds what it waits for in the replies, or `timeout` passes.
    fn wait_for<T>(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&mut Replies) -> Option<T>,
    ) -> Option<T> {
        let deadline = Instant::now() + timeout;
        let mut replies = self.lock();
        loop {
            if let Some(found) = done(&mut replies) {
                return Some(found);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            replies = self
                .arrived
                .wait_timeout(replies, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// A running zygote.
pub(crate) struct Zygote {
    /// The relay of its namespaces (it is PID 1 there: killed, every fork dies).
    child: Mutex<Child>,
    socket: OwnedFd,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    private: tempfile::TempDir,
    _owner: File,
    preload_dir: Option<PathBuf>,
    /// Declared last: dropped after the zygote is killed.
    _cgroup: Option<crate::cgroup::Cgroup>,
}

impl Zygote {
    fn start(
        command: &ExternalCommand,
        preload: Preload,
        paths: (&Path, &Path),
    ) -> Result<Zygote, ExternalError> {
        let args = command.server_arguments()?;
        let line = format!(
            "zygote [{}] of {}",
            preload.name(),
            shell_words::join(&args)
        );
        let io = |what: &'static str| io_error(&line, what);
        let (private, owner) = locked_private_dir(&line, None)?;
        let home = private.path().join(HOME_DIR);
        std::fs::create_dir(&home).map_err(io("cannot create its home directory"))?;
        let log = File::create(private.path().join(LOG)).map_err(io("cannot create its log"))?;
        let (ours, theirs) = seqpacket_pair().map_err(io("cannot create its socket"))?;
        let preload_dir = preload.path();
        let mut cmd = Command::new(&args[0]);
        cmd.args(["-I", "-c", SOURCE, preload.name()])
            .arg(preload_dir.as_deref().unwrap_or(Path::new("")))
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(log);
        command.clean_environment(&mut cmd, &home);
        // It reads what the profiler's own command may (its forks' rights are a subset
        // of its own) and the preload set's directory, and writes its private directory
        // (the forks' directories lie in it).
        let readable = preload_dir.clone().unwrap_or_else(|| home.clone());

        let grants = command
            .grants(&args, paths, (&readable, private.path()))
            .map_err(|source| ExternalError::Isolation {
                command: line.clone(),
                source,
            })?;
        let Some(Some(grants)) = grants else {
            return Err(io_error(&line, "is not isolated here")(
                std::io::Error::other("no Landlock"),
            ));
        };
        let sandbox = Sandbox::new(&grants).map_err(|source| ExternalError::Isolation {
            command: line.clone(),
            source,
        })?;
        let cgroup = command.cgroup();
        let sandbox = match &cgroup {
            Some(c) => sandbox.in_cgroup(c),
            None => sandbox,
        };
        // Its forks' tasks count in its user namespace too: room for every live
        // server's, within what this process may grant.
        let mut limits = command.limits();
        let hard = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NPROC)
            .map_or(u64::MAX, |(_, hard)| hard);
        limits.max_tasks = limits
            .max_tasks
            .saturating_mul(MAX_LIVE_WARM_SERVERS as u64 + 1)
            .min(hard);
        sandbox
            .with_writable_proc()
            .in_namespaces()
            .with_limits(limits)
            .apply_to(&mut cmd);
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        let mut child =
            crate::keeper::spawn_from_keeper(cmd).map_err(|source| ExternalError::Spawn {
                command: line.clone(),
                source,
            })?;
        let shared = Arc::new(Shared::default());
        let reader = ours.try_clone().map_err(io("cannot share its socket"))?;
        {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("causalbench-zygote".into())
                .spawn(move || read_replies(reader, &shared))
                .map_err(io("cannot start its reader"))?;
        }
        let preloaded = shared.wait_for(command.timeout, |r| {
            r.preloaded
                .clone()
                .or_else(|| r.closed.then(|| Err("it exited".to_string())))
        });
        let failed = match preloaded {
            Some(Ok(_)) => None,
            Some(Err(why)) => Some(why),
            None => Some(format!(
                "no answer within {:.0} s",
                command.timeout.as_secs_f64()
            )),
        };
        if let Some(why) = failed {
            crate::keeper::kill_group(&mut child);
            let _ = child.wait();
            let tail = crate::external::tail_of_file(&private.path().join(LOG), 2048);
            return Err(ExternalError::Failed {
                command: line,
                status: format!("could not preload {}: {why}", preload.name()),
                code: None,
                stderr_tail: tail,
            });
        }
        Ok(Zygote {
            child: Mutex::new(child),
            socket: ours,
            shared,
            next_id: AtomicU64::new(0),
            private,
            _owner: owner,
            preload_dir,
            _cgroup: cgroup,
        })
    }

    /// The directory a fork's private directory is made in.
    pub(crate) fn private_dir(&self) -> &Path {
        self.private.path()
    }

    /// Forks a server running `args` (`PYTHON SCRIPT ARGS...`) that reads `views` and
    /// writes `home`, its stdin and stdout the other ends of the harness's pipes, its
    /// stderr `log` (kept at `log_path`), confined as `command` confines a cold server.
    pub(crate) fn fork(
        self: &Arc<Zygote>,
        command: &ExternalCommand,
        args: &[String],
        paths: (&Path, &Path),
        (views, home): (&Path, &Path),
        (log, log_path): (File, &Path),
        cgroup: Option<&crate::cgroup::Cgroup>,
    ) -> Result<(Forked, File, File), ExternalError> {
        let line = shell_words::join(args);
        let io = |what: &'static str| io_error(&line, what);
        let isolation = |source| ExternalError::Isolation {
            command: line.clone(),
            source,
        };
        let Some(Some(mut grants)) = command
            .grants(args, paths, (views, home))
            .map_err(isolation)?
        else {
            return Err(io_error(&line, "is not isolated here")(
                std::io::Error::other("no Landlock"),
            ));
        };
        // Modules of the preload set import more of it lazily.
        grants.read.extend(self.preload_dir.iter().cloned());
        let (ruleset, proc_access) = Sandbox::new(&grants)
            .map_err(isolation)?
            .into_ruleset()
            .ok_or_else(|| ExternalError::Io {
                command: line.clone(),
                what: "has no Landlock ruleset".into(),
                source: std::io::Error::other("no ruleset"),
            })?;
        let (stdin_theirs, stdin_ours) = pipe().map_err(io("cannot create its stdin"))?;
        let (stdout_ours, stdout_theirs) = pipe().map_err(io("cannot create its stdout"))?;
        let mut fds: Vec<OwnedFd> = vec![ruleset, stdin_theirs, stdout_theirs, log.into()];
        for procs in cgroup.map(|c| c.procs_files()).unwrap_or_default() {
            use std::os::unix::ffi::OsStrExt;
            let path = std::ffi::OsStr::from_bytes(procs.as_bytes());
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io("cannot open its cgroup"))?;
            fds.push(f.into());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let limits = command.limits();
        let request = serde_json::json!({
            "id": id,
            "argv": &args[1..],
            "env": command.clean_environment_map(home),
            "fsize": limits.max_file_bytes,
            "nproc": limits.max_tasks,
            "proc_access": proc_access,
        });
        send_with_fds(&self.socket, request.to_string().as_bytes(), &fds)
            .map_err(io("cannot ask its zygote"))?;
        drop(fds);
        let answer = self.shared.wait_for(FORK_TIMEOUT, |r| {
            if let Some(fd) = r.ready.remove(&id) {
                return Some(Ok(fd));
            }
            if let Some(status) = r.ended.remove(&id) {
                return Some(Err(status));
            }
            r.closed.then(|| Err("its zygote exited".to_string()))
        });
        let pidfd = match answer {
            Some(Ok(pidfd)) => pidfd,
            Some(Err(status)) => {
                return Err(ExternalError::Failed {
                    command: line,
                    status: format!("could not start: {status}"),
                    code: None,
                    stderr_tail: crate::external::tail_of_file(log_path, 2048),
                })
            }
            None => {
                return Err(ExternalError::Failed {
                    command: line,
                    status: format!("not started within {:.0} s", FORK_TIMEOUT.as_secs_f64()),
                    code: None,
                    stderr_tail: String::new(),
                })
            }
        };
        let pid = pid_of(&pidfd).unwrap_or(0);
        Ok((
            Forked {
                pidfd,
                pid,
                id,
                zygote: self.clone(),
            },
            File::from(stdin_ours),
            File::from(stdout_ours),
        ))
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        crate::keeper::kill_group(&mut child);
        let _ = child.wait();
    }
}

/// A server forked by a zygote.
pub(crate) struct Forked {
    pidfd: OwnedFd,
    /// Its pid in the harness's PID namespace (0 when unknown).
    pid: u32,
    id: u64,
    zygote: Arc<Zygote>,
}

impl Forked {
    /// Kills it and, PID 1 of its namespace, every process it started.
    pub(crate) fn kill(&self) {
        // SAFETY: pidfd_send_signal(2) with a pidfd this struct owns and no siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            );
        }
    }

    /// How it ended, as its zygote saw it (it is killed first).
    pub(crate) fn exit_status(&self) -> String {
        self.kill();
        self.zygote
            .shared
            .wait_for(Duration::from_secs(2), |r| r.ended.remove(&self.id))
            .unwrap_or_else(|| "exit status unknown".into())
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }
}

impl Drop for Forked {
    fn drop(&mut self) {
        self.kill();
        self.zygote.shared.lock().ended.remove(&self.id);
    }
}

/// The pid a pidfd refers to, in this process's PID namespace.
fn pid_of(pidfd: &OwnedFd) -> Option<u32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|p| p.trim().parse().ok())
}

/// An error of the harness's own while it starts `line`.
fn io_error(line: &str, what: &'static str) -> impl FnOnce(std::io::Error) -> ExternalError {
    let command = line.to_string();
    move |source| ExternalError::Io {
        command,
        what: what.into(),
        source,
    }
}

fn seqpacket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    Ok(socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?)
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

fn send_with_fds(socket: &OwnedFd, bytes: &[u8], fds: &[OwnedFd]) -> std::io::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixAddr};
    let raw: Vec<i32> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let cmsg = [ControlMessage::ScmRights(&raw)];
    sendmsg::<UnixAddr>(
        socket.as_raw_fd(),
        &[IoSlice::new(bytes)],
        &cmsg,
        MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    Ok(())
}

/// Reads the zygote's messages until its socket closes.
fn read_replies(socket: OwnedFd, shared: &Shared) {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, UnixAddr};
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 4]);
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let received = recvmsg::<UnixAddr>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        );
        let (len, fds) = match received {
            Ok(msg) if msg.bytes > 0 => {
                let mut fds = Vec::new();
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmRights(raw) = c {
                            // SAFETY: the kernel just gave this process these descriptors.
                            fds.extend(
                                raw.into_iter()
                                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                            );
                        }
                    }
                }
                (msg.bytes, fds)
            }
            Err(nix::errno::Errno::EINTR) => continue,
            _ => break,
        };
        let message: serde_json::Value = serde_json::from_slice(&buf[..len]).unwrap_or_default();
        let mut replies = shared.lock();
        let id = message["id"].as_u64();
        if let Some(n) = message["preloaded"].as_u64() {
            replies.preloaded = Some(Ok(n));
        } else if let Some(why) = message["failed"].as_str() {
            replies.preloaded = Some(Err(why.to_string()));
        } else if let (Some(id), Some(true)) = (id, message["ready"].as_bool()) {
            if let Some(fd) = fds.into_iter().next() {
                replies.ready.insert(id, fd);
            }
        } else if let (Some(id), Some(status)) = (id, message["status"].as_str()) {
            replies.ended.insert(id, status.to_string());
        }
        drop(replies);
        shared.arrived.notify_all();
    }
    shared.lock().closed = true;
    shared.arrived.notify_all();
}
