//! `check` verifies every file a published entry shows (issue 34): `leaderboard.md`,
//! `leaderboard.csv`, `axes.csv` and every page of `html/` are regenerated from the
//! entry's case scores and an edited or added one is refused with exit 2, naming it;
//! a hand-written `reproduction.json` is ignored and never shown as "reproduced",
//! while the one `check --rerun` writes is (cli/src/published.rs).

mod common;

use common::{causalbench, copy_dir, python3, submit_minimal};
use std::path::Path;

/// A copy of the entry in `base`, changed by `change`, and what `check` says of it.
fn check_changed(
    entry: &Path,
    base: &Path,
    name: &str,
    change: impl Fn(&Path),
) -> (i32, String, String) {
    let copy = base.join(name);
    copy_dir(entry, &copy);
    change(&copy);
    causalbench(&["check", copy.to_str().unwrap()])
}

fn append(path: &Path, text: &str) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes.extend_from_slice(text.as_bytes());
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn check_refuses_an_edited_published_file_and_ignores_a_written_reproduction() {
    if !python3() {
        eprintln!("skipped: needs python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let entry = dir.path().join("entry");
    let (code, _, err) = submit_minimal(&entry);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = causalbench(&["check", entry.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("published files regenerated"), "{out}");

    // Each published file, edited: refused, named.
    for file in [
        "leaderboard.md",
        "leaderboard.csv",
        "axes.csv",
        "html/index.html",
    ] {
        let name = format!("edited-{}", file.replace('/', "-"));
        let (code, _, err) = check_changed(&entry, dir.path(), &name, |d| {
            append(&d.join(file), "\n| minimal | 1.000 |\n")
        });
        assert_eq!(code, 2, "{file}: {err}");
        assert!(
            err.contains("REJECTED") && err.contains(file) && err.contains("was edited"),
            "{file}: {err}"
        );
    }
    // A page no score gives.
    let (code, _, err) = check_changed(&entry, dir.path(), "extra-page", |d| {
        std::fs::write(d.join("html/winner.html"), "<p>first place</p>").unwrap()
    });
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("html/winner.html"), "{err}");

    // A hand-written reproduction: ignored, said so, shown nowhere.
    let forged = r#"{"schema_version":1,"reproduced":true,"compared":1,
        "machine":{"hostname":"h","os":"linux","arch":"x86_64","cpu_model":"c","cpus":1},
        "tool_version":"0.1.0"}"#;
    let copy = dir.path().join("forged-reproduction");
    copy_dir(&entry, &copy);
    std::fs::write(copy.join("reproduction.json"), forged).unwrap();
    let (code, out, err) = causalbench(&["check", copy.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("IGNORED"), "{out}");
    let site = dir.path().join("forged-site");
    let (code, _, err) = causalbench(&[
        "report",
        "--results",
        copy.to_str().unwrap(),
        "--html",
        site.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(!index.contains("class=\"reproduced\""), "{index}");
    // A site edited to show it: refused.
    let (code, _, err) = check_changed(&entry, dir.path(), "forged-badge", |d| {
        std::fs::write(d.join("reproduction.json"), forged).unwrap();
        let path = d.join("html/index.html");
        let text = std::fs::read_to_string(&path).unwrap().replacen(
            "<span class=\"unverified\">not re-run</span>",
            "<span class=\"reproduced\">reproduced</span>",
            1,
        );
        std::fs::write(&path, text).unwrap();
    });
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("html/index.html"), "{err}");

    // `check --rerun` writes the reproduction, with what it compared, and the entry's
    // site shows it; a plain check then accepts the folder as it is.
    let (code, _, err) = causalbench(&[
        "check",
        entry.to_str().unwrap(),
        "--rerun",
        "--allow-unisolated",
    ]);
    assert_eq!(code, 0, "{err}");
    let reproduction: serde_json::Value =
        serde_json::from_slice(&std::fs::read(entry.join("reproduction.json")).unwrap()).unwrap();
    assert_eq!(
        reproduction["explanations_sha256"].as_str().map(str::len),
        Some(64),
        "{reproduction}"
    );
    let index = std::fs::read_to_string(entry.join("html/index.html")).unwrap();
    assert!(index.contains("class=\"reproduced\""));
    let (code, out, err) = causalbench(&["check", entry.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("describes these explanations"), "{out}");
}
