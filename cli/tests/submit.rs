//! A leaderboard entry end to end (baselines/PROTOCOL.md, "Getting onto the
//! leaderboard"): `submit` writes the folder, `check` accepts it as written and
//! rejects it with an edited score, a missing explanation or a swapped bundle;
//! `check --rerun` marks it reproduced.

mod common;

use common::{causalbench, copy_dir, minimal_profiler, python3};
use std::path::{Path, PathBuf};

/// A copy of the entry in `base`, damaged by `damage`, and what `check` says of it.
fn check_damaged(entry: &Path, base: &Path, name: &str, damage: impl Fn(&Path)) -> (i32, String) {
    let copy = base.join(name);
    copy_dir(entry, &copy);
    damage(&copy);
    let (code, _, err) = causalbench(&["check", copy.to_str().unwrap()]);
    (code, err)
}

fn metadata(entry: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(entry.join("metadata.json")).unwrap()).unwrap()
}

fn first_file_below(dir: &Path) -> PathBuf {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_file() {
                return p;
            }
            stack.push(p);
        }
    }
    panic!("no file below {}", dir.display());
}

#[test]
fn submit_writes_an_entry_that_check_accepts_and_rejects_when_damaged() {
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
        "--profiler-version",
        "0.1",
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
    let meta = metadata(&entry);
    assert_eq!(meta["name"], "minimal");
    assert_eq!(meta["version"], "0.1");
    assert_eq!(meta["split"]["split"], "dev");
    assert_eq!(meta["collectors"], serde_json::json!(["cupti"]));
    assert!(meta["views"]
        .as_array()
        .unwrap()
        .iter()
        .all(|v| v.as_str().unwrap().starts_with("cupti-")));
    let bundles = meta["bundles"].as_object().unwrap();
    assert!(bundles.len() >= 2, "{meta}");
    assert!(entry.join("scores.jsonl").is_file());
    assert!(entry.join("logs").is_dir());

    // The metadata validates against the published schema.
    let (code, schema, _) = causalbench(&["schema", "submission"]);
    assert_eq!(code, 0);
    let schema: serde_json::Value = serde_json::from_str(&schema).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&meta), "metadata.json fails its schema");

    let (code, out, err) = causalbench(&["check", entry.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("accepted"), "{out}");

    // An edited score.
    let (code, err) = check_damaged(&entry, dir.path(), "edited-score", |d| {
        let path = d.join("scores.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        let mut first: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        let ms = first["analysis_ms"].as_f64().unwrap();
        first["analysis_ms"] = serde_json::json!(ms + 1.0);
        lines[0] = first.to_string();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    });
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("REJECTED") && err.contains(".analysis_ms"),
        "{err}"
    );

    // A missing explanation.
    let (code, err) = check_damaged(&entry, dir.path(), "missing-explanation", |d| {
        std::fs::remove_file(first_file_below(&d.join("explanations"))).unwrap();
    });
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("REJECTED") && err.contains("no explanation"),
        "{err}"
    );

    // A swapped bundle: one bundle's file holds another's bytes.
    let files: Vec<String> = bundles
        .values()
        .map(|b| b["path"].as_str().unwrap().to_string())
        .collect();
    let (code, err) = check_damaged(&entry, dir.path(), "swapped-bundle", |d| {
        std::fs::copy(d.join(&files[1]), d.join(&files[0])).unwrap();
    });
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("REJECTED") && err.contains("swapped or edited"),
        "{err}"
    );

    // Run again, the same explanations: reproduced.
    let (code, out, err) = causalbench(&[
        "check",
        entry.to_str().unwrap(),
        "--rerun",
        "--allow-unisolated",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("reproduced"), "{out}");
    let reproduction: serde_json::Value =
        serde_json::from_slice(&std::fs::read(entry.join("reproduction.json")).unwrap()).unwrap();
    assert_eq!(reproduction["reproduced"], true, "{reproduction}");

    // The entry's site marks it reproduced beside its name.
    let site = dir.path().join("site");
    let (code, _, err) = causalbench(&[
        "report",
        "--results",
        entry.to_str().unwrap(),
        "--html",
        site.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    let name = metadata(&entry)["name"].as_str().unwrap().to_string();
    let row = index
        .lines()
        .find(|l| l.contains("class=\"reproduced\""))
        .unwrap_or_else(|| panic!("no reproduced mark in the index"));
    assert!(row.contains(&name), "{row}");
}
