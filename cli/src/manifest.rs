//! The results directory's own records, written only by the harness
//! (`docs/integrity.md`): `manifest.json` (the sha256 of every bundle the run
//! scored, how external profilers were isolated) and `view-key` (the secret
//! that names views). Nothing a profiler could have written is trusted when
//! scoring: a bundle whose bytes no longer match its recorded hash is refused.

use crate::Failure;
use ground_truth::io::write_atomic;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub const MANIFEST_FILE: &str = "manifest.json";
pub const VIEW_KEY_FILE: &str = "view-key";

/// `manifest.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// How the external profilers of the last run were isolated; absent without any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<String>,
    /// External profilers of the last run: name → command template.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub external_profilers: BTreeMap<String, String>,
    /// Bundles by job key.
    #[serde(default)]
    pub bundles: BTreeMap<String, BundleHash>,
    /// The generated split the run recorded, with the seed it was drawn from
    /// (docs/scenario-space.md, "Splits"); absent for the catalog or a directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitRecord>,
    /// The part of the suite the run recorded (`run --shard K/N`, docs/scale-out.md);
    /// absent for the whole suite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::Shard>,
}

/// Which generated split a run drew, from which seed, and how many scenarios.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitRecord {
    pub split: String,
    pub seed: u64,
    pub cases: usize,
}

/// Where a bundle is and what its bytes hashed to when the harness read or wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleHash {
    /// Relative to the results directory when inside it, else absolute.
    pub path: PathBuf,
    pub sha256: String,
}

/// The sha256 of a file's bytes, as hex.
pub fn sha256_file(path: &Path) -> Result<String, String> {
    let mut file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut h = Sha256::new();
    std::io::copy(&mut file, &mut h).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

impl Manifest {
    pub fn read(dir: &Path) -> Result<Manifest, Failure> {
        let path = dir.join(MANIFEST_FILE);
        match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Manifest::default()),
            Err(e) => Err(Failure::input(format!(
                "cannot read {}: {e}",
                path.display()
            ))),
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| Failure::input(format!("{}: {e}", path.display()))),
        }
    }

    pub fn write(&self, dir: &Path) -> Result<(), String> {
        let path = dir.join(MANIFEST_FILE);
        let text = serde_json::to_string_pretty(self).expect("manifest serializes");
        write_atomic(&path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Every recorded bundle whose bytes changed since (one message each).
    pub fn tampered(&self, dir: &Path) -> Vec<String> {
        self.bundles
            .iter()
            .filter_map(|(key, h)| check(dir, key, h).err())
            .collect()
    }
}

fn check(dir: &Path, key: &str, recorded: &BundleHash) -> Result<(), String> {
    let path = dir.join(&recorded.path);
    let now = sha256_file(&path)?;
    if now == recorded.sha256 {
        Ok(())
    } else {
        Err(format!(
            "{key}: {} was modified after the harness recorded it (sha256 {} in {MANIFEST_FILE}, now {now}): \
             its scores are not trusted",
            path.display(),
            recorded.sha256
        ))
    }
}

/// The manifest of a running `causalbench run`, shared by its workers.
pub struct RunManifest {
    dir: PathBuf,
    manifest: Mutex<Manifest>,
}

/// What a bundle file is to the manifest.
pub enum Known {
    /// Its bytes match the recorded hash.
    Intact,
    /// The manifest has no hash for it: it is not trusted, and is recorded again.
    Unknown,
}

impl RunManifest {
    pub fn open(dir: &Path) -> Result<RunManifest, Failure> {
        Ok(RunManifest {
            dir: dir.to_path_buf(),
            manifest: Mutex::new(Manifest::read(dir)?),
        })
    }

    /// Records how external profilers run in this run.
    pub fn set_external(
        &self,
        isolation: Option<String>,
        profilers: BTreeMap<String, String>,
    ) -> Result<(), String> {
        let mut m = self.manifest.lock().unwrap();
        m.isolation = isolation;
        m.external_profilers = profilers;
        m.write(&self.dir)
    }

    /// The split recorded by an earlier run into this directory, if any.
    pub fn split(&self) -> Option<SplitRecord> {
        self.manifest.lock().unwrap().split.clone()
    }

    /// Records the generated split this run draws.
    pub fn set_split(&self, split: SplitRecord) -> Result<(), String> {
        let mut m = self.manifest.lock().unwrap();
        m.split = Some(split);
        m.write(&self.dir)
    }

    /// Records the part of the suite this run records (`None`: all of it).
    pub fn set_shard(&self, shard: Option<crate::shard::Shard>) -> Result<(), String> {
        let mut m = self.manifest.lock().unwrap();
        m.shard = shard;
        m.write(&self.dir)
    }

    /// Hashes the bundle file `path` the harness just wrote or read for `key`.
    pub fn record(&self, key: &str, path: &Path) -> Result<(), String> {
        let sha256 = sha256_file(path).map_err(|e| format!("{key}: {e}"))?;
        // Inside the results directory: relative to it (the directory may move).
        // Outside (a replayed corpus): absolute, so that `report` run from any
        // working directory finds it again.
        let path = match path.strip_prefix(&self.dir) {
            Ok(inside) => inside.to_path_buf(),
            Err(_) => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        };
        let mut m = self.manifest.lock().unwrap();
        m.bundles
            .insert(key.to_string(), BundleHash { path, sha256 });
        m.write(&self.dir).map_err(|e| format!("{key}: {e}"))
    }

    /// Whether `key`'s bundle is the one the harness recorded; `Err` when it was changed.
    pub fn verify(&self, key: &str) -> Result<Known, String> {
        let recorded = self.manifest.lock().unwrap().bundles.get(key).cloned();
        match recorded {
            None => Ok(Known::Unknown),
            Some(h) => check(&self.dir, key, &h).map(|()| Known::Intact),
        }
    }
}

/// Refuses a bundle file that a results directory's manifest lists with other bytes.
/// A bundle outside any results directory has nothing to check against.
pub fn check_bundle_file(bundle: &Path) -> Result<(), Failure> {
    let real = bundle
        .canonicalize()
        .unwrap_or_else(|_| bundle.to_path_buf());
    for dir in real.ancestors().skip(1).take(2) {
        if !dir.join(MANIFEST_FILE).is_file() {
            continue;
        }
        let m = Manifest::read(dir)?;
        for (key, h) in &m.bundles {
            if dir.join(&h.path) == real {
                return check(dir, key, h).map_err(Failure::failed);
            }
        }
    }
    Ok(())
}

/// The results directory's view key, created (random, owner-only) on first use.
pub fn view_key(dir: &Path) -> Result<views::ViewKey, Failure> {
    key_file(&dir.join(VIEW_KEY_FILE))
}

/// The key kept in `path`, which is created with a random key when absent.
pub fn key_file(path: &Path) -> Result<views::ViewKey, Failure> {
    match std::fs::read_to_string(path) {
        Ok(text) => views::ViewKey::from_hex(&text)
            .map_err(|e| Failure::input(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = views::ViewKey::random();
            write_owner_only(path, &key.to_hex())?;
            Ok(key)
        }
        Err(e) => Err(Failure::input(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

fn write_owner_only(path: &Path, text: &str) -> Result<(), Failure> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::failed(format!("cannot create {}: {e}", dir.display())))?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{text}\n").as_bytes()))
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
}

/// Puts the unisolated-run warning at the top of `leaderboard.md` when the manifest
/// records one, and the known limits of each third-party row at its end.
pub fn mark_leaderboard(dir: &Path) -> Result<(), Failure> {
    let m = Manifest::read(dir)?;
    let path = dir.join(evaluator::LEADERBOARD_MD);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Failure::failed(format!("cannot read {}: {e}", path.display())))?;
    let mut marked = text.clone();
    if let Some(isolation) = m.isolation.filter(|i| i.starts_with("UNISOLATED")) {
        if !marked.starts_with("> **WARNING: UNISOLATED") {
            marked = format!(
                "> **WARNING: {isolation}.** Scores of external profilers are not trustworthy.\n\n{marked}"
            );
        }
    }
    let heading = "\n## Third-party rows\n";
    let notes: Vec<String> = baselines::row_notes()
        .into_iter()
        .filter(|(name, _)| marked.contains(&format!("| {name} |")))
        .map(|(name, note)| format!("- `{name}`: {note}\n"))
        .collect();
    if !notes.is_empty() && !marked.contains(heading) {
        marked.push_str(&format!("{heading}\n{}", notes.concat()));
    }
    if marked == text {
        return Ok(());
    }
    write_atomic(&path, marked.as_bytes())
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
}
