//! Long-lived processes of the harness (batch servers, zygotes) are started from one
//! thread that lives as long as the harness, and killed with their process group.
//! A file of its own so that the servers ([`crate::external_server`]) and the
//! zygotes ([`crate::zygote`]) that start them need not name each other for it.

use std::process::{Child, Command};
use std::sync::{mpsc, Mutex, OnceLock};

/// Kills a process's group (and with its relay, its PID namespace).
pub(crate) fn kill_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals that process group.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

/// A command and where its process goes.
type SpawnJob = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `cmd` from one thread that lives as long as the harness: a confined child
/// dies with the thread that started it (`PR_SET_PDEATHSIG`).
pub(crate) fn spawn_from_keeper(cmd: Command) -> std::io::Result<Child> {
    static KEEPER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (send, jobs) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("causalbench-server-keeper".into())
            .spawn(move || {
                for (mut cmd, reply) in jobs {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("a thread starts");
        Mutex::new(send)
    });
    let (reply, child) = mpsc::channel();
    keeper
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((cmd, reply))
        .map_err(|_| std::io::Error::other("the server keeper thread is gone"))?;
    child
        .recv()
        .map_err(|_| std::io::Error::other("the server keeper thread is gone"))?
}
