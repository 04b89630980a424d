//! One cgroup per external invocation (`docs/integrity.md`, "Cgroups"): every
//! process of the invocation is in it from before the program starts, so the
//! harness can bound them (memory, process count), kill them all when the
//! invocation ends or times out (`setsid()` and double forks included), and read
//! what they cost together (CPU time, peak memory), orphans included.
//!
//! The cgroup is a directory made beside nothing else, under this process's own
//! cgroup, in each hierarchy that gives one of the mechanisms: the unified (v2)
//! hierarchy for `cgroup.kill` and `cpu.stat`, and for `memory.max` and `pids.max`
//! where those controllers are delegated to it; otherwise the v1 `memory` and `pids`
//! hierarchies of a hybrid system (cgroups(7)). The child of the harness moves
//! itself into each directory between fork and exec ([`Cgroup::procs_files`],
//! used by [`crate::sandbox::Sandbox::in_cgroup`]), before it enters its
//! namespaces, so nothing it starts is ever outside. Without a writable cgroup
//! hierarchy (a container's read-only `/sys/fs/cgroup`, a kernel without cgroup v2)
//! [`Cgroup::for_invocation`] says why, and the invocation runs as before: PID
//! namespace, process group, rlimits and `wait4(2)`'s rusage. What is in force is
//! recorded ([`describe`]).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What one invocation's cgroup limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupLimits {
    /// Memory of all its processes together (`memory.max`; v1 `memory.limit_in_bytes`):
    /// past it the kernel's OOM killer ends the invocation.
    pub max_memory_bytes: u64,
    /// Processes and threads at once (`pids.max`): a fork bomb stops there.
    pub max_tasks: u64,
}

/// Which hierarchy gives a mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    fn name(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }
}

/// The cgroup mechanisms an invocation gets on this machine, each with the
/// hierarchy that gives it (`None`: not in force).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mechanisms {
    /// Every process killed at once (`cgroup.kill`, v2), else one by one from `cgroup.procs`.
    pub kill: Option<Version>,
    /// The memory limit and the peak memory of the whole invocation.
    pub memory: Option<Version>,
    /// The process-count limit.
    pub tasks: Option<Version>,
    /// CPU time of the whole invocation (`cpu.stat`).
    pub cpu: Option<Version>,
}

impl Mechanisms {
    /// One line for `manifest.json` and the leaderboard's note.
    pub fn describe(&self) -> String {
        let each = [
            ("kill", self.kill),
            ("memory limit", self.memory),
            ("task limit", self.tasks),
            ("cpu time", self.cpu),
        ];
        let on: Vec<String> = each
            .iter()
            .filter_map(|(what, v)| v.map(|v| format!("{what} ({})", v.name())))
            .collect();
        let off: Vec<&str> = each
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(what, _)| *what)
            .collect();
        let mut line = format!("cgroup per invocation: {}", on.join(", "));
        if !off.is_empty() {
            line += &format!("; without {}", off.join(", "));
        }
        line
    }
}

/// What the cgroup measured of an invocation, once its processes are gone.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// User plus system CPU time of every process that was in it, in milliseconds.
    pub cpu_ms: Option<f64>,
    /// The most memory its processes held together, in KiB.
    pub peak_memory_kib: Option<u64>,
    /// Processes of it the OOM killer ended at its memory limit.
    pub oom_kills: u64,
}

/// Set (to anything) to behave as on a machine without a writable cgroup
/// hierarchy: how the fallback is tested where there is one.
pub const PRETEND_NO_CGROUP: &str = "CAUSALBENCH_PRETEND_NO_CGROUP";

/// How the invocations' cgroups are named: `PREFIX<harness pid>-<n>`.
const PREFIX: &str = "causalbench-";

/// One directory of the invocation's cgroup and what it gives.
#[derive(Debug)]
struct Dir {
    path: PathBuf,
    version: Version,
}

/// The cgroup of one invocation. Dropping it kills what is left in it and removes it.
#[derive(Debug)]
pub struct Cgroup {
    dirs: Vec<Dir>,
    mechanisms: Mechanisms,
    limits: CgroupLimits,
}

/// This process's cgroup directory in each hierarchy of interest.
#[derive(Debug, Default)]
struct Places {
    unified: Option<PathBuf>,
    v1_memory: Option<PathBuf>,
    v1_pids: Option<PathBuf>,
}

impl Places {
    /// From `/proc/self/mountinfo` (where each hierarchy is mounted, and which of
    /// its cgroups is the mount's root) and `/proc/self/cgroup` (ours in each).
    fn of_this_process() -> Places {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let own_path = |v1_controller: Option<&str>| -> Option<String> {
            own.lines().find_map(|line| {
                let mut parts = line.splitn(3, ':');
                let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                let matches = match v1_controller {
                    None => id == "0" && controllers.is_empty(),
                    Some(c) => controllers.split(',').any(|x| x == c),
                };
                matches.then(|| path.to_string())
            })
        };
        let mut places = Places::default();
        for line in mountinfo.lines() {
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let fields: Vec<&str> = left.split(' ').collect();
            let rfields: Vec<&str> = right.split(' ').collect();
            let (Some(root), Some(point), Some(fstype), Some(options)) = (
                fields.get(3),
                fields.get(4),
                rfields.first(),
                rfields.get(2),
            ) else {
                continue;
            };
            let dir = |own: Option<String>| -> Option<PathBuf> {
                let own = own?;
                let rel = own.strip_prefix(root).unwrap_or(&own);
                let dir = Path::new(point).join(rel.trim_start_matches('/'));
                dir.is_dir().then_some(dir)
            };
            match *fstype {
                "cgroup2" if places.unified.is_none() => places.unified = dir(own_path(None)),
                "cgroup" => {
                    let has = |c: &str| options.split(',').any(|o| o == c);
                    if has("memory") && places.v1_memory.is_none() {
                        places.v1_memory = dir(own_path(Some("memory")));
                    }
                    if has("pids") && places.v1_pids.is_none() {
                        places.v1_pids = dir(own_path(Some("pids")));
                    }
                }
                _ => {}
            }
        }
        places
    }
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::write(path, value)
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The value of `key` in a flat-keyed cgroup file (`cpu.stat`, `memory.events`).
fn keyed(path: &Path, key: &str) -> Option<u64> {
    read(path)?.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn lists(path: &Path, word: &str) -> bool {
    read(path).is_some_and(|s| s.split_whitespace().any(|w| w == word))
}

impl Cgroup {
    /// A new cgroup for one invocation under these limits, or why this machine
    /// gives none (no cgroup hierarchy this process may write to).
    pub fn for_invocation(limits: CgroupLimits) -> Result<Cgroup, String> {
        if std::env::var_os(PRETEND_NO_CGROUP).is_some() {
            return Err(format!("{PRETEND_NO_CGROUP} is set"));
        }
        static NEXT: AtomicU64 = AtomicU64::new(0);
        static CLEANED: std::sync::Once = std::sync::Once::new();
        let places = Places::of_this_process();
        CLEANED.call_once(|| remove_stale(&places));
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut group = Cgroup {
            dirs: Vec::new(),
            mechanisms: Mechanisms::default(),
            limits,
        };
        let mut why = Vec::new();
        match &places.unified {
            Some(parent) => match group.make_unified(parent, &name) {
                Ok(()) => {}
                Err(e) => why.push(format!("{}: {e}", parent.join(&name).display())),
            },
            None => why.push("no cgroup v2 hierarchy of this process is mounted".to_string()),
        }
        if group.mechanisms.memory.is_none() {
            if let Some(parent) = &places.v1_memory {
                let dir = parent.join(&name);
                let made = std::fs::create_dir(&dir).and_then(|()| {
                    group.dirs.push(Dir {
                        path: dir.clone(),
                        version: Version::V1,
                    });
                    write(
                        &dir.join("memory.limit_in_bytes"),
                        &limits.max_memory_bytes.to_string(),
                    )
                });
                match made {
                    Ok(()) => {
                        // Swap counted in the limit too, where the kernel accounts it.
                        let _ = write(
                            &dir.join("memory.memsw.limit_in_bytes"),
                            &limits.max_memory_bytes.to_string(),
                        );
                        group.mechanisms.memory = Some(Version::V1);
                    }
                    Err(e) => why.push(format!("{}: {e}", dir.display())),
                }
            }
        }
        if group.mechanisms.tasks.is_none() {
            if let Some(parent) = &places.v1_pids {
                let dir = parent.join(&name);
                let made = std::fs::create_dir(&dir).and_then(|()| {
                    group.dirs.push(Dir {
                        path: dir.clone(),
                        version: Version::V1,
                    });
                    write(&dir.join("pids.max"), &limits.max_tasks.to_string())
                });
                match made {
                    Ok(()) => group.mechanisms.tasks = Some(Version::V1),
                    Err(e) => why.push(format!("{}: {e}", dir.display())),
                }
            }
        }
        if group.dirs.is_empty() {
            return Err(format!("cannot create a cgroup ({})", why.join("; ")));
        }
        if group.mechanisms.kill.is_none() {
            group.mechanisms.kill = Some(Version::V1);
        }
        Ok(group)
    }

    /// The unified hierarchy's directory: kill and CPU time always, memory and
    /// process count where those controllers can be enabled for it.
    fn make_unified(&mut self, parent: &Path, name: &str) -> std::io::Result<()> {
        // Delegating a controller to children fails (EBUSY) in a cgroup that holds
        // processes, the root excepted: then the v1 hierarchies are tried instead.
        for controller in ["memory", "pids"] {
            if lists(&parent.join("cgroup.controllers"), controller)
                && !lists(&parent.join("cgroup.subtree_control"), controller)
            {
                let _ = write(
                    &parent.join("cgroup.subtree_control"),
                    &format!("+{controller}"),
                );
            }
        }
        let dir = parent.join(name);
        std::fs::create_dir(&dir)?;
        self.dirs.push(Dir {
            path: dir.clone(),
            version: Version::V2,
        });
        if dir.join("cgroup.kill").exists() {
            self.mechanisms.kill = Some(Version::V2);
        }
        if dir.join("cpu.stat").exists() {
            self.mechanisms.cpu = Some(Version::V2);
        }
        let controllers = dir.join("cgroup.controllers");
        if lists(&controllers, "memory") {
            write(
                &dir.join("memory.max"),
                &self.limits.max_memory_bytes.to_string(),
            )?;
            let _ = write(&dir.join("memory.swap.max"), "0");
            // The whole invocation ends at its limit, not one process of it.
            let _ = write(&dir.join("memory.oom.group"), "1");
            self.mechanisms.memory = Some(Version::V2);
        }
        if lists(&controllers, "pids") {
            write(&dir.join("pids.max"), &self.limits.max_tasks.to_string())?;
            self.mechanisms.tasks = Some(Version::V2);
        }
        Ok(())
    }

    /// What this cgroup enforces and measures.
    pub fn mechanisms(&self) -> Mechanisms {
        self.mechanisms
    }

    pub fn limits(&self) -> CgroupLimits {
        self.limits
    }

    /// The `cgroup.procs` file of each directory: writing `0` to each moves the
    /// writer in. Made here, so that the child needs no allocation between fork and exec.
    pub fn procs_files(&self) -> Vec<CString> {
        self.dirs
            .iter()
            .filter_map(|d| CString::new(d.path.join("cgroup.procs").as_os_str().as_bytes()).ok())
            .collect()
    }

    /// The processes in it now (their ids in this process's PID namespace).
    fn pids(&self) -> Vec<libc::pid_t> {
        let mut pids: Vec<libc::pid_t> = self
            .dirs
            .iter()
            .filter_map(|d| read(&d.path.join("cgroup.procs")))
            .flat_map(|s| {
                s.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<_>>()
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Kills every process in it, `setsid()` or not, and waits (at most a few
    /// seconds) until they are gone.
    pub fn kill(&self) {
        let unified = self.dirs.iter().find(|d| d.version == Version::V2);
        if let Some(dir) = unified.filter(|_| self.mechanisms.kill == Some(Version::V2)) {
            let _ = write(&dir.path.join("cgroup.kill"), "1");
        }
        // Without cgroup.kill: one by one, again until none is left (a process
        // forking meanwhile is bounded by the task limit and killed next round).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = self.pids();
            if left.is_empty() || Instant::now() > deadline {
                return;
            }
            for pid in left {
                // SAFETY: kill(2) touches no memory.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// What it measured; read once its processes are gone, to be complete.
    pub fn usage(&self) -> Usage {
        let mut usage = Usage::default();
        for dir in &self.dirs {
            let p = &dir.path;
            match dir.version {
                Version::V2 => {
                    if let Some(us) = keyed(&p.join("cpu.stat"), "usage_usec") {
                        usage.cpu_ms = Some(us as f64 / 1000.0);
                    }
                    if self.mechanisms.memory == Some(Version::V2) {
                        let peak = read(&p.join("memory.peak")).and_then(|s| s.trim().parse().ok());
                        usage.peak_memory_kib = peak.map(|b: u64| b / 1024);
                        usage.oom_kills += keyed(&p.join("memory.events"), "oom_kill").unwrap_or(0);
                    }
                }
                Version::V1 => {
                    if let Some(peak) = read(&p.join("memory.max_usage_in_bytes"))
                        .and_then(|s| s.trim().parse::<u64>().ok())
                    {
                        usage.peak_memory_kib = Some(peak / 1024);
                        usage.oom_kills +=
                            keyed(&p.join("memory.oom_control"), "oom_kill").unwrap_or(0);
                    }
                }
            }
        }
        usage
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill();
        for dir in &self.dirs {
            remove_dir(&dir.path);
        }
    }
}

/// Removes an empty cgroup directory; a v1 one may refuse (EBUSY) for a moment
/// after its last process died.
fn remove_dir(path: &Path) {
    for _ in 0..200 {
        match std::fs::remove_dir(path) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Kills and removes the cgroups that harnesses killed before they could (their
/// pid in the name no longer runs): what a `kill -9` of `run` left behind outside
/// namespaces does not outlive the next harness's first invocation.
fn remove_stale(places: &Places) {
    for parent in [&places.unified, &places.v1_memory, &places.v1_pids]
        .into_iter()
        .flatten()
    {
        let Ok(entries) = std::fs::read_dir(parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(owner) = name
                .strip_prefix(PREFIX)
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<libc::pid_t>().ok())
            else {
                continue;
            };
            // SAFETY: kill(2) with signal 0 only asks whether the process exists.
            let alive = unsafe { libc::kill(owner, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
            if alive {
                continue;
            }
            let stale = Cgroup {
                dirs: vec![Dir {
                    path: entry.path(),
                    version: if entry.path().join("cgroup.kill").exists() {
                        Version::V2
                    } else {
                        Version::V1
                    },
                }],
                mechanisms: Mechanisms {
                    kill: entry
                        .path()
                        .join("cgroup.kill")
                        .exists()
                        .then_some(Version::V2),
                    ..Mechanisms::default()
                },
                limits: CgroupLimits {
                    max_memory_bytes: 0,
                    max_tasks: 0,
                },
            };
            drop(stale);
        }
    }
}

/// What cgroup mechanisms invocations get on this machine (tried once, with a
/// cgroup made and removed), or why none.
pub fn available() -> Result<Mechanisms, String> {
    static PROBE: std::sync::OnceLock<Result<Mechanisms, String>> = std::sync::OnceLock::new();
    if std::env::var_os(PRETEND_NO_CGROUP).is_some() {
        return Err(format!("{PRETEND_NO_CGROUP} is set"));
    }
    PROBE
        .get_or_init(|| {
            Cgroup::for_invocation(CgroupLimits {
                max_memory_bytes: u64::MAX / 2,
                max_tasks: 1,
            })
            .map(|g| g.mechanisms())
        })
        .clone()
}

/// How results record it: the mechanisms in force, or that there are none and why.
pub fn describe() -> String {
    match available() {
        Ok(m) => m.describe(),
        Err(why) => format!(
            "NO cgroup ({why}): memory unlimited, task limit by rlimit only, \
             cost from wait4 (orphans not counted)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanisms_say_what_is_missing() {
        let m = Mechanisms {
            kill: Some(Version::V2),
            memory: Some(Version::V1),
            tasks: None,
            cpu: Some(Version::V2),
        };
        assert_eq!(
            m.describe(),
            "cgroup per invocation: kill (v2), memory limit (v1), cpu time (v2); without task limit"
        );
    }

    #[test]
    fn keyed_files_are_read_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cpu.stat");
        std::fs::write(&p, "usage_usec 1500\nuser_usec 1000\n").unwrap();
        assert_eq!(keyed(&p, "usage_usec"), Some(1500));
        assert_eq!(keyed(&p, "nr_periods"), None);
    }
}
