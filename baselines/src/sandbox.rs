//! Kernel isolation of external profilers with Landlock (`docs/integrity.md`,
//! "Isolation of external profilers").
//!
//! Each invocation may read the system directories, the command's own files
//! (the directory of its program and of each script argument), its private copy
//! of the view, and may write only its private output directory. Protected
//! paths (the results directory) are never granted, not even through a parent:
//! a program or script whose directory holds a protected path is granted as a
//! single file. The ruleset is built in the parent; the child only calls
//! `prctl` and `landlock_restrict_self` between fork and exec, which are plain
//! system calls and safe there even when the harness runs many threads.

use landlock::{
    Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The oldest Landlock ABI that isolates a profiler: ABI 3 adds control of
/// `truncate(2)`, without which a profiler could empty a bundle it cannot open.
pub const MIN_ABI: i32 = 3;

/// The rights the ruleset handles (everything else stays allowed): those of ABI 6,
/// including the scopes that stop a profiler signalling the harness.
const TARGET_ABI: ABI = ABI::V6;

/// Directories of the system an external program may read and execute from.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/proc",
    "/sys", "/dev",
];

/// How external commands are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Under a Landlock ruleset of this kernel ABI.
    Landlock { abi: i32 },
    /// Without kernel isolation: the kernel lacks Landlock and the user allowed it.
    Unisolated,
}

impl Isolation {
    /// How results record it (`manifest.json`, leaderboard note), with the
    /// namespaces and the cgroup mechanisms each invocation gets on this machine.
    pub fn describe(&self) -> String {
        let namespaces = match namespaces_available() {
            Ok(()) => "; namespaces: user, pid, net, mount, ipc, uts".to_string(),
            Err(why) => format!("; NO namespaces ({why}): network and processes not confined"),
        } + "; "
            + &crate::cgroup::describe();
        match self {
            Isolation::Landlock { abi } => format!("landlock (ABI {abi}){namespaces}"),
            Isolation::Unisolated => {
                "UNISOLATED: external profilers could read bundles and \
                                      other views (kernel without Landlock, --allow-unisolated)"
                    .to_string()
                    + &namespaces
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "this kernel cannot isolate external profilers ({found}; Landlock ABI {MIN_ABI} or later is needed): \
         refusing to run them; pass --allow-unisolated to run them anyway (recorded in the results)"
    )]
    Unavailable { found: String },
    #[error("{} lies under the system directory {system}, which external profilers may read: use another directory", protected.display())]
    ProtectedUnderSystem { protected: PathBuf, system: String },
    #[error("cannot build the Landlock ruleset: {0}")]
    Ruleset(String),
}

/// Set (to anything) to behave as on a kernel without Landlock: how the refusal
/// and `--allow-unisolated` are tested on kernels that have it.
pub const PRETEND_NO_LANDLOCK: &str = "CAUSALBENCH_PRETEND_NO_LANDLOCK";

/// The running kernel's Landlock ABI, `None` when it has none (or it is disabled).
pub fn kernel_abi() -> Option<i32> {
    if std::env::var_os(PRETEND_NO_LANDLOCK).is_some() {
        return None;
    }
    // SAFETY: the documented version query of landlock_create_ruleset(2): no pointer is read.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    (v > 0).then_some(v as i32)
}

/// What to do on this kernel: isolate, refuse, or (allowed) run unisolated.
pub fn choose(abi: Option<i32>, allow_unisolated: bool) -> Result<Isolation, SandboxError> {
    match abi {
        Some(abi) if abi >= MIN_ABI => Ok(Isolation::Landlock { abi }),
        _ if allow_unisolated => Ok(Isolation::Unisolated),
        found => Err(SandboxError::Unavailable {
            found: found.map_or("no Landlock".to_string(), |a| format!("Landlock ABI {a}")),
        }),
    }
}

/// The isolation this kernel gives, under the user's choice.
pub fn detect(allow_unisolated: bool) -> Result<Isolation, SandboxError> {
    choose(kernel_abi(), allow_unisolated)
}

/// What one invocation may reach.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Grants {
    /// Read and execute, the whole hierarchy (a file: that file only).
    pub read: Vec<PathBuf>,
    /// Every right, the whole hierarchy.
    pub write: Vec<PathBuf>,
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// The grants of `argv` (program first) reading `view` and writing into `out_dir`:
/// nothing under `protected` is reachable, and no directory holding one of
/// `neighbours` is granted whole (a file named as an argument there still is).
pub fn grants(
    argv: &[String],
    view: &Path,
    out_dir: &Path,
    protected: &[PathBuf],
    neighbours: &[PathBuf],
) -> Result<Grants, SandboxError> {
    let protected: Vec<PathBuf> = protected.iter().map(|p| canonical(p)).collect();
    let guarded: Vec<PathBuf> = protected
        .iter()
        .cloned()
        .chain(neighbours.iter().map(|p| canonical(p)))
        .collect();
    let mut g = Grants::default();
    for dir in SYSTEM_DIRS.iter().map(Path::new).filter(|d| d.exists()) {
        let real = canonical(dir);
        if let Some(p) = protected.iter().find(|p| p.starts_with(&real)) {
            return Err(SandboxError::ProtectedUnderSystem {
                protected: p.clone(),
                system: dir.display().to_string(),
            });
        }
        g.read.push(dir.to_path_buf());
    }
    // Programs (the command and a script's interpreter) and plain files, by name.
    let program = argv.first().and_then(|p| resolve_program(p));
    let interpreter = program.as_deref().and_then(interpreter_of);
    let programs: Vec<PathBuf> = program.into_iter().chain(interpreter).collect();
    let files = argv
        .iter()
        .skip(1)
        .map(Path::new)
        .filter(|p| p.is_file())
        .map(Path::to_path_buf);
    let own_files: Vec<(bool, PathBuf)> = programs
        .into_iter()
        .map(|p| (true, p))
        .chain(files.map(|f| (false, f)))
        .collect();
    let mut add = |grant: PathBuf| {
        if !g.read.contains(&grant) {
            g.read.push(grant);
        }
    };
    let reaches_protected = |dir: &Path| guarded.iter().any(|p| p.starts_with(dir));
    for (is_program, file) in &own_files {
        // The file as named and, through symbolic links, as stored.
        for f in [file.clone(), canonical(file)] {
            let f = canonical(f.parent().unwrap_or(Path::new("/")))
                .join(f.file_name().unwrap_or_default());
            if protected.iter().any(|p| f.starts_with(p)) {
                continue;
            }
            let dir = f.parent().map(Path::to_path_buf).unwrap_or_default();
            // A program in `PREFIX/bin` (or a version manager's `PREFIX/shims`)
            // needs its installation: a virtual environment's packages, pyenv's versions.
            let prefix = is_program
                .then(|| install_prefix(&dir))
                .flatten()
                .filter(|p| !reaches_protected(p));
            match prefix {
                Some(prefix) => add(prefix),
                None if !reaches_protected(&dir) => add(dir),
                None => add(f),
            }
        }
    }
    g.read.push(view.to_path_buf());
    g.write.push(out_dir.to_path_buf());
    Ok(g)
}

/// The interpreter a `#!` script names (through `env NAME`: NAME on `PATH`).
pub fn interpreter_of(script: &Path) -> Option<PathBuf> {
    use std::io::{BufRead, Read};
    let mut line = String::new();
    std::io::BufReader::new(std::fs::File::open(script).ok()?.take(256))
        .read_line(&mut line)
        .ok()?;
    let mut words = line.strip_prefix("#!")?.split_whitespace();
    let first = words.next()?;
    if first.ends_with("/env") {
        words
            .find(|w| !w.starts_with('-') && !w.contains('='))
            .and_then(resolve_program)
    } else {
        resolve_program(first)
    }
}

/// `PREFIX` of a program directory `PREFIX/bin` or `PREFIX/shims`, unless that is `/`.
fn install_prefix(dir: &Path) -> Option<PathBuf> {
    let name = dir.file_name()?.to_str()?;
    let prefix = dir.parent()?;
    (matches!(name, "bin" | "shims") && prefix != Path::new("/")).then(|| prefix.to_path_buf())
}

/// Where `program` is found: itself when it names a path, else the first match on `PATH`.
pub fn resolve_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return p.is_file().then(|| std::path::absolute(&p).unwrap_or(p));
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// Resource limits of one invocation, set with `setrlimit(2)` between fork and exec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest file any of its processes may write (`RLIMIT_FSIZE`): its
    /// explanation and its stderr log included.
    pub max_file_bytes: u64,
    /// Processes and threads of the invocation (`RLIMIT_NPROC`, counted in its own
    /// user namespace, so only its own tasks count; not set without namespaces).
    pub max_tasks: u64,
}

/// An invocation's confinement: a Landlock ruleset, namespaces and resource limits,
/// each optional, applied to a child between fork and exec by [`Sandbox::apply_to`].
#[derive(Default)]
pub struct Sandbox {
    ruleset: Option<OwnedFd>,
    namespaces: Option<crate::namespaces::IdMaps>,
    limits: Option<Limits>,
    /// The `cgroup.procs` files of the invocation's cgroup ([`crate::cgroup`]).
    cgroup_procs: Vec<std::ffi::CString>,
    /// Whether it may write files under its own `/proc` ([`Sandbox::with_writable_proc`]).
    writable_proc: bool,
}

impl Sandbox {
    /// The Landlock ruleset of these grants (namespaces and limits are added with
    /// [`Sandbox::in_namespaces`] and [`Sandbox::with_limits`]).
    pub fn new(grants: &Grants) -> Result<Sandbox, SandboxError> {
        let err = |e: &dyn std::fmt::Display| SandboxError::Ruleset(e.to_string());
        let read = AccessFs::from_read(TARGET_ABI);
        let all = AccessFs::from_all(TARGET_ABI);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(all)
            .map_err(|e| err(&e))?
            .scope(Scope::Signal | Scope::AbstractUnixSocket)
            .map_err(|e| err(&e))?
            .create()
            .map_err(|e| err(&e))?;
        let rules = grants
            .read
            .iter()
            .map(|p| (p, read))
            .chain(grants.write.iter().map(|p| (p, all)));
        for (path, access) in rules {
            let fd = PathFd::new(path)
                .map_err(|e| SandboxError::Ruleset(format!("{}: {e}", path.display())))?;
            let access = if path.is_dir() {
                access
            } else {
                access & AccessFs::from_file(TARGET_ABI)
            };
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| err(&e))?;
        }
        // `/dev/null` is written to by many programs; it holds nothing.
        if let Ok(fd) = PathFd::new("/dev/null") {
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, AccessFs::from_file(TARGET_ABI)))
                .map_err(|e| err(&e))?;
        }
        let ruleset: Option<OwnedFd> = ruleset.into();
        let ruleset =
            ruleset.ok_or_else(|| SandboxError::Ruleset("the kernel created no ruleset".into()))?;
        Ok(Sandbox {
            ruleset: Some(ruleset),
            ..Sandbox::default()
        })
    }

    /// Also runs the invocation in new user, PID, network, mount, IPC and UTS
    /// namespaces ([`crate::namespaces`]), when this kernel gives them
    /// ([`namespaces_available`]); unchanged otherwise.
    pub fn in_namespaces(mut self) -> Sandbox {
        if namespaces_available().is_ok() {
            self.namespaces = Some(crate::namespaces::IdMaps::of_this_process());
        }
        self
    }

    /// Also lets the invocation write files under its own `/proc` (a process's uid and
    /// gid maps): for the warm-start process ([`crate::zygote`]), whose forks enter
    /// user namespaces of their own after it is confined; never for a profiler.
    pub fn with_writable_proc(mut self) -> Sandbox {
        self.writable_proc = true;
        self
    }

    /// The Landlock ruleset, for a process that restricts itself
    /// ([`crate::zygote`]'s forks), with the rights on `/proc` it is to add for its own.
    pub fn into_ruleset(self) -> Option<(OwnedFd, u64)> {
        Some((self.ruleset?, AccessFs::from_read(TARGET_ABI).bits()))
    }

    pub fn with_limits(mut self, limits: Limits) -> Sandbox {
        self.limits = Some(limits);
        self
    }

    /// Also puts the invocation in `cgroup`, before anything else it does: every
    /// process it ever has is in it.
    pub fn in_cgroup(mut self, cgroup: &crate::cgroup::Cgroup) -> Sandbox {
        self.cgroup_procs = cgroup.procs_files();
        self
    }

    /// Whether the invocation runs in its own namespaces.
    pub fn has_namespaces(&self) -> bool {
        self.namespaces.is_some()
    }

    /// Makes `cmd`'s child confine itself before it executes the program: it dies
    /// with the harness's thread that started it (`PR_SET_PDEATHSIG`), moves into
    /// its cgroup, enters its namespaces, sets its limits, then restricts itself to
    /// the ruleset.
    pub fn apply_to(self, cmd: &mut Command) {
        use std::os::unix::process::CommandExt;
        let Sandbox {
            ruleset,
            namespaces,
            limits,
            cgroup_procs,
            writable_proc,
        } = self;
        let harness = nix::unistd::getpid();
        let proc_access = if writable_proc {
            (AccessFs::from_read(TARGET_ABI) | AccessFs::WriteFile).bits()
        } else {
            AccessFs::from_read(TARGET_ABI).bits()
        };
        // SAFETY: the closure makes system calls only (through nix's thin wrappers, whose
        // paths are short enough for their stack buffers); it allocates nothing and takes
        // no lock, as code between fork and exec must.
        unsafe {
            cmd.pre_exec(move || {
                use nix::sys::prctl;
                use nix::sys::resource::{setrlimit, Resource};
                prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
                if nix::unistd::getppid() != harness {
                    // The harness died before the line above: nothing may run unwatched.
                    crate::namespaces::exit_now(1);
                }
                for procs in &cgroup_procs {
                    // `0` names the writer; as root of the harness's user namespace
                    // still, so the move is allowed.
                    crate::namespaces::write_file(procs.as_c_str(), b"0")?;
                }
                if let Some(maps) = &namespaces {
                    crate::namespaces::enter(maps)?;
                    // The ruleset names the harness's /proc; the namespace's own
                    // /proc, mounted over it, shows only the invocation's processes.
                    if let Some(ruleset) = &ruleset {
                        grant_new_proc(ruleset, proc_access)?;
                    }
                }
                if let Some(l) = limits {
                    setrlimit(Resource::RLIMIT_FSIZE, l.max_file_bytes, l.max_file_bytes)?;
                    // Counted per user namespace: without one it would count every
                    // process of the harness's user on the machine.
                    if namespaces.is_some() {
                        setrlimit(Resource::RLIMIT_NPROC, l.max_tasks, l.max_tasks)?;
                    }
                    setrlimit(Resource::RLIMIT_CORE, 0, 0)?;
                }
                if let Some(ruleset) = &ruleset {
                    prctl::set_no_new_privs()?;
                    if libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
                        != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
}

/// `struct landlock_path_beneath_attr` (linux/landlock.h): packed.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Adds read access to the `/proc` mounted now to `ruleset`, between fork and exec.
fn grant_new_proc(ruleset: &OwnedFd, access: u64) -> std::io::Result<()> {
    use nix::fcntl::OFlag;
    let proc = nix::fcntl::open(
        "/proc",
        OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )?;
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: proc.as_raw_fd(),
    };
    // SAFETY: landlock_add_rule(2) reads the attribute struct it is given.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            1u32, // LANDLOCK_RULE_PATH_BENEATH
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Set (to anything) to behave as on a kernel without user namespaces: how the
/// fallback is tested on kernels that have them.
pub const PRETEND_NO_NAMESPACES: &str = "CAUSALBENCH_PRETEND_NO_NAMESPACES";

/// Whether this kernel lets the harness give each invocation its own namespaces
/// (tried once, in a child process), and why not.
pub fn namespaces_available() -> Result<(), String> {
    static PROBE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    if std::env::var_os(PRETEND_NO_NAMESPACES).is_some() {
        return Err(format!("{PRETEND_NO_NAMESPACES} is set"));
    }
    PROBE.get_or_init(crate::namespaces::probe).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_without_landlock_unless_allowed() {
        assert!(matches!(
            choose(None, false),
            Err(SandboxError::Unavailable { .. })
        ));
        assert!(matches!(
            choose(Some(2), false),
            Err(SandboxError::Unavailable { .. })
        ));
        assert_eq!(choose(None, true).unwrap(), Isolation::Unisolated);
        assert_eq!(
            choose(Some(7), false).unwrap(),
            Isolation::Landlock { abi: 7 }
        );
        let message = choose(None, false).unwrap_err().to_string();
        assert!(message.contains("--allow-unisolated"), "{message}");
    }

    #[test]
    fn a_script_beside_the_results_is_granted_alone() {
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("out");
        std::fs::create_dir_all(results.join("bundles")).unwrap();
        let script = dir.path().join("my.py");
        std::fs::write(&script, "").unwrap();
        let inside = results.join("bundles/b.json");
        std::fs::write(&inside, "").unwrap();
        let argv: Vec<String> = [
            "python3",
            script.to_str().unwrap(),
            inside.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec();
        let g = grants(
            &argv,
            Path::new("/v"),
            Path::new("/o"),
            std::slice::from_ref(&results),
            &[],
        )
        .unwrap();
        let real = canonical(&script);
        assert!(g.read.contains(&real), "{g:?}");
        assert!(
            !g.read.iter().any(|p| canonical(&results).starts_with(p)),
            "{g:?}"
        );
        // A script of its own directory is granted with that directory.
        let elsewhere = tempfile::tempdir().unwrap();
        let own = elsewhere.path().join("p.sh");
        std::fs::write(&own, "").unwrap();
        let argv = vec!["sh".to_string(), own.to_str().unwrap().to_string()];
        let g = grants(&argv, Path::new("/v"), Path::new("/o"), &[results], &[]).unwrap();
        assert!(g.read.contains(&canonical(elsewhere.path())), "{g:?}");
        // An executable script's interpreter comes with its installation.
        let exe = elsewhere.path().join("prof");
        std::fs::write(&exe, "#!/usr/bin/env -S sh -e\n").unwrap();
        let g = grants(
            &[exe.to_str().unwrap().to_string()],
            Path::new("/v"),
            Path::new("/o"),
            &[],
            &[],
        )
        .unwrap();
        let sh = resolve_program("sh").unwrap();
        let sh_prefix = install_prefix(&canonical(sh.parent().unwrap())).unwrap();
        assert!(g.read.contains(&sh_prefix), "{g:?}");
    }
}
