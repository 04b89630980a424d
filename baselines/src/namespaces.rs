//! One invocation's own namespaces (`docs/integrity.md`, "Namespaces"): entered by
//! the child between fork and exec, after which it cannot see the harness's
//! processes, reach any network, or leave anything running when it ends.
//!
//! The child unshares a new user namespace (its own uid mapped to 0 inside, as
//! `unshare --map-root-user` does, so that no privilege is needed) together with new
//! PID, network, mount, IPC and UTS namespaces, then forks: the new process is PID 1
//! of the new PID namespace and goes on to execute the program, after mounting a
//! fresh `/proc` (only its own processes) over a private copy of the mount tree.
//! The process the harness started stays outside as a relay: it waits for PID 1
//! and exits as it did, so the harness's `wait4` sees the program's status and,
//! in its rusage, the program's CPU time and peak memory.
//!
//! What ends the invocation: when PID 1 exits or is killed, the kernel kills every
//! other process of its PID namespace, `setsid()` or not (pid_namespaces(7)). PID 1
//! dies with the relay (`PR_SET_PDEATHSIG`), and the relay with the harness thread
//! that started it (set in [`crate::sandbox::Sandbox::apply_to`]). The new network
//! namespace has only a loopback device, down: no connection goes anywhere, not
//! even to 127.0.0.1.
//!
//! Everything here runs between fork and exec in a process forked from a
//! multithreaded one: system calls only, through nix's wrappers, no allocation.

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::MsFlags;
use nix::sched::CloneFlags;
use nix::sys::stat::Mode;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{ForkResult, Pid};

/// The namespaces an invocation gets.
const FLAGS: CloneFlags = CloneFlags::CLONE_NEWUSER
    .union(CloneFlags::CLONE_NEWPID)
    .union(CloneFlags::CLONE_NEWNET)
    .union(CloneFlags::CLONE_NEWNS)
    .union(CloneFlags::CLONE_NEWIPC)
    .union(CloneFlags::CLONE_NEWUTS);

/// The uid and gid maps the child writes, formatted in the parent.
#[derive(Debug, Clone)]
pub(crate) struct IdMaps {
    uid: Vec<u8>,
    gid: Vec<u8>,
}

impl IdMaps {
    /// This process's uid and gid, as 0 inside the new user namespace.
    pub(crate) fn of_this_process() -> IdMaps {
        IdMaps {
            uid: format!("0 {} 1\n", nix::unistd::geteuid()).into_bytes(),
            gid: format!("0 {} 1\n", nix::unistd::getegid()).into_bytes(),
        }
    }
}

pub(crate) fn write_file<P: ?Sized + nix::NixPath>(path: &P, bytes: &[u8]) -> nix::Result<()> {
    let fd = nix::fcntl::open(path, OFlag::O_WRONLY | OFlag::O_CLOEXEC, Mode::empty())?;
    match nix::unistd::write(&fd, bytes)? {
        n if n == bytes.len() => Ok(()),
        _ => Err(Errno::EIO),
    }
}

/// Enters the namespaces. Returns in the process that is to execute the program
/// (PID 1 of the new PID namespace); the process that called it waits for that
/// one and exits as it did, never returning.
pub(crate) fn enter(maps: &IdMaps) -> nix::Result<()> {
    // The relay never executes a program, so it keeps the harness's signal handlers:
    // a SIGCHLD handler of the harness's (the wait-timeout crate installs one) would
    // run in it when PID 1 ends, on descriptors the relay has closed.
    // SAFETY: resetting a disposition to the default touches no memory.
    unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGCHLD,
            nix::sys::signal::SigHandler::SigDfl,
        )?;
    }
    nix::sched::unshare(FLAGS)?;
    write_file("/proc/self/setgroups", b"deny")?;
    write_file("/proc/self/uid_map", &maps.uid)?;
    write_file("/proc/self/gid_map", &maps.gid)?;
    // SAFETY: the child makes system calls only (see the module comment).
    match unsafe { nix::unistd::fork() }? {
        ForkResult::Parent { child } => relay(child),
        ForkResult::Child => {}
    }
    // Its parent, the relay, lies outside the namespace (getppid() is 0 here), so a
    // relay killed in the instant before this line is not detected; the harness
    // kills the whole process group as well (baselines/src/external.rs).
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
    // Mounts made here must not propagate back to the harness's mount namespace.
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )?;
    nix::mount::mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )?;
    Ok(())
}

/// Ends this process at once, running nothing of the parent's (no atexit handler,
/// no flush of buffers it copied at fork).
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit(2) ends the process; it touches no memory.
    unsafe { libc::_exit(code) }
}

/// The relay: waits for PID 1 of the namespace and ends as it ended.
fn relay(child: Pid) -> ! {
    // Every descriptor goes, std's exec-error pipe included: while the relay held it,
    // the harness's `spawn` would wait for the whole invocation.
    // SAFETY: close_range(2) touches no memory.
    unsafe {
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
    }
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => exit_now(code),
            Ok(WaitStatus::Signaled(_, signal, _)) => {
                // SAFETY: resetting a disposition and raising a signal touch no memory.
                unsafe {
                    let _ = nix::sys::signal::signal(signal, nix::sys::signal::SigHandler::SigDfl);
                }
                let _ = nix::sys::signal::raise(signal);
                exit_now(128 + signal as i32)
            }
            Err(Errno::EINTR) | Ok(_) => continue,
            Err(_) => exit_now(127),
        }
    }
}

/// Tries [`enter`] in a child process: `Err` says why this kernel (or its
/// configuration, a container's seccomp filter say) refuses.
pub(crate) fn probe() -> Result<(), String> {
    let maps = IdMaps::of_this_process();
    // SAFETY: the child makes system calls only and ends with _exit.
    match unsafe { nix::unistd::fork() } {
        Err(e) => Err(format!("fork: {e}")),
        Ok(ForkResult::Child) => {
            let code = match enter(&maps) {
                Ok(()) => 0,
                Err(e) => e as i32,
            };
            exit_now(code)
        }
        Ok(ForkResult::Parent { child }) => loop {
            match waitpid(child, None) {
                Ok(WaitStatus::Exited(_, 0)) => return Ok(()),
                Ok(WaitStatus::Exited(_, code)) => {
                    return Err(format!(
                        "cannot enter new user, PID, network and mount namespaces: {}",
                        Errno::from_raw(code).desc()
                    ))
                }
                Ok(WaitStatus::Signaled(_, signal, _)) => {
                    return Err(format!("the namespace probe died of {signal}"))
                }
                Err(Errno::EINTR) | Ok(_) => continue,
                Err(e) => return Err(format!("waiting for the namespace probe: {e}")),
            }
        },
    }
}
