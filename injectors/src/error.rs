use std::path::PathBuf;

/// Errors of the injectors. Every missing privilege says which capability is
/// needed; nothing in this crate panics on a refused system call.
#[derive(Debug, thiserror::Error)]
pub enum InjectorError {
    #[error("{mechanism} needs {capability} {why}: run as root (or grant {capability})")]
    PrivilegeMissing {
        mechanism: &'static str,
        capability: &'static str,
        why: &'static str,
    },
    #[error("{mechanism}: {call} failed: {errno}")]
    Sys {
        mechanism: &'static str,
        call: String,
        #[source]
        errno: nix::errno::Errno,
    },
    #[error("{mechanism}: {what}: {source}")]
    Io {
        mechanism: &'static str,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("PtraceHold cannot stop thread {tid} of process {pid}: it belongs to the caller's own thread group (Linux refuses to ptrace a thread of one's own process); run the victim in another process")]
    OwnThreadGroup { pid: i32, tid: i32 },
    #[error("thread {tid} is not a thread of process {pid} (no /proc/{pid}/task/{tid})")]
    NoSuchThread { pid: i32, tid: i32 },
    #[error("CPU {cpu} is not usable here (this process may run on CPUs {allowed:?})")]
    BadCpu { cpu: usize, allowed: Vec<usize> },
    #[error("major page faults are impossible on {fs} at {dir}: its pages never leave memory; use a directory on a disk-backed filesystem (set CAUSALBENCH_FAULT_DIR)")]
    NoMajorFaults { fs: String, dir: PathBuf },
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("the hog thread panicked")]
    HogPanicked,
}

pub type Result<T, E = InjectorError> = std::result::Result<T, E>;

pub(crate) fn sys(
    mechanism: &'static str,
    call: impl Into<String>,
) -> impl FnOnce(nix::errno::Errno) -> InjectorError {
    let call = call.into();
    move |errno| InjectorError::Sys {
        mechanism,
        call,
        errno,
    }
}
