//! `check` reads only the entry folder's own regular files, bounded in size, and
//! refuses what it cannot score (issue 34): each damage below made `check` hang,
//! read outside the folder, hash 50 GiB or score an impossible kernel before; now
//! each is rejected with exit 2, naming the file.

mod common;

use common::{causalbench, copy_dir, minimal_profiler, python3};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `check DIR`, killed if it has not ended after a generous minute (a FIFO
/// made it wait forever): (exit code, stderr).
fn check(dir: &Path) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args(["check", dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("check {} hangs", dir.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn metadata(entry: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(entry.join("metadata.json")).unwrap()).unwrap()
}

fn write_metadata(entry: &Path, meta: &serde_json::Value) {
    std::fs::write(
        entry.join("metadata.json"),
        serde_json::to_string_pretty(meta).unwrap(),
    )
    .unwrap();
}

/// The first bundle of the entry: (key, path relative to the entry).
fn first_bundle(entry: &Path) -> (String, String) {
    let meta = metadata(entry);
    let (key, file) = meta["bundles"].as_object().unwrap().iter().next().unwrap();
    (key.clone(), file["path"].as_str().unwrap().to_string())
}

fn sha256(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads the path it is given.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// A bundle of the entry whose first kernel's times are set by `times`, its hash
/// in metadata.json updated to match.
fn with_kernel_times(entry: &Path, times: impl Fn(&mut serde_json::Value)) {
    let (key, rel) = first_bundle(entry);
    let path = entry.join(&rel);
    let mut bundle: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let kernel = bundle["trace"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["kind"] == "kernel")
        .expect("a kernel record");
    times(kernel);
    std::fs::write(&path, serde_json::to_vec(&bundle).unwrap()).unwrap();
    let mut meta = metadata(entry);
    meta["bundles"][&key]["sha256"] = sha256(&path).into();
    write_metadata(entry, &meta);
}

#[test]
fn check_rejects_what_it_must_not_read_or_score() {
    if !python3() {
        eprintln!("skipped: needs python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let entry = dir.path().join("entry");
    let profiler = minimal_profiler();
    let (code, _, err) = causalbench(&[
        "submit",
        "--profiler",
        &profiler,
        "--suite",
        "dev",
        "--cases",
        "2",
        "--reps",
        "1",
        "--collectors",
        "cupti",
        "--allow-unisolated",
        "--out",
        entry.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(check(&entry).0, 0);
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let (_, bundle_rel) = first_bundle(&entry);
    let explanation = {
        let mut stack = vec![entry.join("explanations")];
        let mut found: Option<PathBuf> = None;
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                } else if found.is_none() {
                    found = Some(e.path().strip_prefix(&entry).unwrap().to_path_buf());
                }
            }
        }
        found.unwrap()
    };
    type Damage = Box<dyn Fn(&Path)>;
    let bundle_rel2 = bundle_rel.clone();
    let outside2 = outside.clone();
    let explanation2 = explanation.clone();
    let explanation3 = explanation.clone();
    let cases: Vec<(&str, &str, Damage)> = vec![
        (
            "scores-fifo",
            "not a regular file",
            Box::new(|e| {
                std::fs::remove_file(e.join("scores.jsonl")).unwrap();
                mkfifo(&e.join("scores.jsonl"));
            }),
        ),
        (
            "metadata-fifo",
            "not a regular file",
            Box::new(|e| {
                std::fs::remove_file(e.join("metadata.json")).unwrap();
                mkfifo(&e.join("metadata.json"));
            }),
        ),
        (
            "bundle-link-out",
            "symbolic link",
            Box::new(move |e| {
                let b = e.join(&bundle_rel2);
                let copy = outside2.join("b.json");
                std::fs::copy(&b, &copy).unwrap();
                std::fs::remove_file(&b).unwrap();
                std::os::unix::fs::symlink(&copy, &b).unwrap();
            }),
        ),
        (
            "bundle-dotdot",
            "inside",
            Box::new(|e| {
                let mut meta = metadata(e);
                let key = first_bundle(e).0;
                meta["bundles"][&key]["path"] = "../outside/b.json".into();
                write_metadata(e, &meta);
            }),
        ),
        (
            "bundle-dev-zero",
            "inside",
            Box::new(|e| {
                let mut meta = metadata(e);
                let key = first_bundle(e).0;
                meta["bundles"][&key]["path"] = "/dev/zero".into();
                write_metadata(e, &meta);
            }),
        ),
        (
            "bundle-sparse-50gib",
            "over the limit",
            Box::new(move |e| {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(e.join(&bundle_rel))
                    .unwrap();
                f.set_len(50 << 30).unwrap();
            }),
        ),
        (
            "explanation-300mb",
            "over the limit",
            Box::new(move |e| {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(e.join(&explanation2))
                    .unwrap();
                f.set_len(300 << 20).unwrap();
            }),
        ),
        (
            "foreign-explanation",
            "foreign",
            Box::new(move |e| {
                let own = e.join(&explanation3);
                std::fs::copy(&own, own.with_file_name("someone-else.json")).unwrap();
            }),
        ),
        (
            "name-dotdot",
            "expected an identifier",
            Box::new(|e| {
                let mut meta = metadata(e);
                meta["name"] = "..".into();
                write_metadata(e, &meta);
            }),
        ),
        (
            "kernel-ends-before-it-starts",
            "before it starts",
            Box::new(|e| {
                with_kernel_times(e, |k| {
                    let start = k["start"].as_u64().unwrap();
                    k["end"] = (start - 1).into();
                })
            }),
        ),
        (
            "kernel-ends-at-the-last-nanosecond",
            "2^64-1",
            Box::new(|e| with_kernel_times(e, |k| k["end"] = u64::MAX.into())),
        ),
    ];
    for (name, why, damage) in cases {
        let copy = dir.path().join(name);
        copy_dir(&entry, &copy);
        damage(&copy);
        let (code, err) = check(&copy);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(
            err.contains("REJECTED") && err.contains(why),
            "{name}: {err}"
        );
    }
}
