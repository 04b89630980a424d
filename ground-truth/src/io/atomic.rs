//! Atomic writers: the new content goes to a temp file beside the target,
//! `NAME.PID.tmp`, which is then renamed into place, so a reader sees the old
//! file or the whole new one. A writer killed before the rename (kill -9)
//! leaves its temp file behind; the next writer into the same directory
//! removes the temp files of processes that are no longer alive.

use super::chunked::ChunkedWriter;
use serde::Serialize;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Writes JSON to a temp file beside `file`, then renames it into place. The
/// value is serialized straight into the file: a gigabyte bundle is never held
/// in memory twice.
pub fn write_json_atomic<T: Serialize + ?Sized>(file: &Path, value: &T) -> std::io::Result<()> {
    write_atomic_with(file, |out| {
        serde_json::to_writer(out, value).map_err(std::io::Error::other)
    })
}

/// Writes bytes atomically: a reader sees the old file or the whole new one.
pub fn write_atomic(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(file, |out| out.write_all(bytes))
}

/// Lets `fill` stream the new content into a temp file beside `file` (in large
/// chunks: small writes are cheap), then renames it into place: an output of
/// any size is never held in memory whole.
pub fn write_atomic_streaming(
    file: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    write_atomic_with(file, |out| fill(out))
}

/// Lets `fill` write the new content to a temp file beside `file`, then renames
/// it into place; on failure the temp file is removed and `file` is untouched.
pub(super) fn write_atomic_with(
    file: &Path,
    fill: impl FnOnce(&mut ChunkedWriter) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)?;
    }
    remove_stale_temp_files_once(dir.unwrap_or(Path::new(".")));
    let mut tmp = file.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let written = std::fs::File::create(&tmp).and_then(|f| {
        let mut out = ChunkedWriter::new(f);
        fill(&mut out)?;
        let f = out.finish()?;
        f.sync_data().ok();
        Ok(())
    });
    match written {
        Ok(()) => std::fs::rename(&tmp, file),
        Err(e) => {
            std::fs::remove_file(&tmp).ok();
            Err(e)
        }
    }
}

/// Removes the stale temp files in `dir` the first time this process writes
/// there: a run writes thousands of files into one directory, and listing it
/// once is enough (a writer that dies later is cleaned up by the next run).
fn remove_stale_temp_files_once(dir: &Path) {
    static SWEPT: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    // Keyed by the path as written: a directory named two ways is only
    // listed twice.
    let first = SWEPT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get_or_insert_with(HashSet::new)
        .insert(dir.to_path_buf());
    if first {
        remove_stale_temp_files(dir);
    }
}

/// Removes every `NAME.PID.tmp` in `dir` whose process is no longer alive.
/// Failures are ignored: a temp file left is only untidy.
pub fn remove_stale_temp_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temp_file_pid) else {
            continue;
        };
        if pid != std::process::id() && !process_alive(pid) {
            std::fs::remove_file(entry.path()).ok();
        }
    }
}

/// The writer's pid in a temp file name `NAME.EXT.PID.tmp`.
fn temp_file_pid(name: &str) -> Option<u32> {
    let stem = name.strip_suffix(".tmp")?;
    let (base, pid) = stem.rsplit_once('.')?;
    (!base.is_empty() && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Whether a process with this id exists (a process of another user counts).
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 sends nothing; it only asks whether `pid` exists.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_files_of_dead_writers_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let live = std::os::unix::process::parent_id();
        let stale = dir.path().join(format!("a.json.{dead}.tmp"));
        let in_progress = dir.path().join(format!("b.json.{live}.tmp"));
        let other = dir.path().join("notes.tmp");
        for f in [&stale, &in_progress, &other] {
            std::fs::write(f, b"{").unwrap();
        }
        write_atomic(&dir.path().join("c.json"), b"{}").unwrap();
        assert!(!stale.exists(), "the dead writer's temp file is removed");
        assert!(in_progress.exists(), "a live writer's temp file is kept");
        assert!(other.exists(), "files not named as temp files are kept");
        assert_eq!(std::fs::read(dir.path().join("c.json")).unwrap(), b"{}");
    }

    #[test]
    fn temp_file_names() {
        assert_eq!(temp_file_pid("x.bundle.json.123.tmp"), Some(123));
        assert_eq!(temp_file_pid("x.json.tmp"), None);
        assert_eq!(temp_file_pid(".123.tmp"), None);
        assert_eq!(temp_file_pid("x.12a.tmp"), None);
    }
}
