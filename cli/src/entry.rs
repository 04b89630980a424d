//! The files of a submitted entry as `submit` writes and `check` reads them: how a
//! file inside the entry's folder is read safely ([`entry_file`]), the line that says
//! what the entry was scored on ([`mark_public`]), and a scratch folder outside it.

use crate::Failure;
use ground_truth::io::write_atomic;
use ground_truth::submission::SplitDraw;
use std::path::{Path, PathBuf};

/// What the entry's split is, as `submit`, `check` and `leaderboard.md` say it.
pub(crate) fn material(split: &SplitDraw) -> String {
    if split.public {
        format!(
            "public — memorizable: the {} split, seed {}, is public material",
            split.split, split.seed
        )
    } else {
        format!(
            "hidden split: seed {} drawn by submit out of the profiler's reach",
            split.seed
        )
    }
}

/// Puts the entry's material at the top of its `leaderboard.md` (every row of an entry
/// is scored on its one split).
pub(crate) fn mark_public(out: &Path, split: &SplitDraw) -> Result<(), Failure> {
    let path = out.join(evaluator::LEADERBOARD_MD);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let line = format!(
        "> **{}** (baselines/PROTOCOL.md, \"Hidden splits\")\n\n",
        material(split)
    );
    if text.starts_with(&line) {
        return Ok(());
    }
    write_atomic(&path, (line + &text).as_bytes())
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
}

/// `relative` inside the entry's folder `dir`, as `check` may read it: a relative path
/// without `..`, reached through no symbolic link, naming a regular file (never a FIFO,
/// a device or a directory, which would hang or feed the reader without end) of at
/// most `limit` bytes. Refused with exit 2 otherwise.
pub(crate) fn entry_file(
    dir: &Path,
    relative: impl AsRef<Path>,
    limit: u64,
) -> Result<PathBuf, String> {
    use std::path::Component;
    let relative = relative.as_ref();
    let shown = relative.display();
    let mut path = dir.to_path_buf();
    for part in relative.components() {
        match part {
            Component::Normal(name) => path.push(name),
            _ => {
                return Err(format!(
                    "{shown}: a file of the entry is named by a plain relative path inside it"
                ))
            }
        }
        let meta = std::fs::symlink_metadata(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("no file at {}", path.display()),
            _ => format!("cannot read {}: {e}", path.display()),
        })?;
        if meta.file_type().is_symlink() {
            return Err(format!(
                "{} is a symbolic link: check reads only the folder's own files",
                path.display()
            ));
        }
    }
    let meta = std::fs::symlink_metadata(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("no file at {}", path.display()),
        _ => format!("cannot read {}: {e}", path.display()),
    })?;
    if !meta.file_type().is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() > limit {
        return Err(format!(
            "{} is {} bytes, over the limit of {limit}",
            path.display(),
            meta.len()
        ));
    }
    Ok(path)
}

/// A private scratch directory outside the entry's folder.
pub(crate) fn tempdir() -> Result<PathBuf, Failure> {
    let dir = std::env::temp_dir().join(format!(
        "causalbench-check-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}
