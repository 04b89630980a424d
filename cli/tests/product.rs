//! The workflows that produce the published GPU figures are subcommands:
//! each has `--help`; without a GPU the GPU-only ones stop with a message that
//! says so (exit 1), never a panic; the megakernel track runs and reports on
//! the simulator; `list` shows the track's families.

use std::process::{Command, Output};

fn causalbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args(args)
        .output()
        .expect("causalbench runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const SUBCOMMANDS: &[&[&str]] = &[
    &["corpus"],
    &["corpus", "record"],
    &["measure"],
    &["measure", "injections"],
    &["measure", "pairs"],
    &["measure", "starve"],
    &["measure", "ebpf-overhead"],
    &["measure", "launch-overhead"],
    &["megakernel"],
    &["megakernel", "run"],
    &["megakernel", "report"],
];

#[test]
fn every_new_subcommand_has_help() {
    for sub in SUBCOMMANDS {
        let mut args = sub.to_vec();
        args.push("--help");
        let o = causalbench(&args);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
        assert!(
            out.contains(&format!("Usage: causalbench {}", sub.join(" "))),
            "{args:?}:\n{out}"
        );
    }
}

fn gpu_here() -> bool {
    std::path::Path::new("/dev/nvidiactl").exists() || std::path::Path::new("/dev/nvidia0").exists()
}

#[test]
fn gpu_subcommands_without_a_gpu_say_so() {
    if gpu_here() {
        eprintln!("skipped: this machine has a GPU, so these commands would record on it");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let cases: Vec<Vec<String>> = vec![
        vec![
            "corpus".into(),
            "record".into(),
            "--out".into(),
            out("corpus"),
        ],
        vec![
            "measure".into(),
            "injections".into(),
            "--out".into(),
            out("i.json"),
        ],
        vec![
            "measure".into(),
            "pairs".into(),
            "--out".into(),
            out("p.json"),
        ],
        vec![
            "measure".into(),
            "starve".into(),
            "--out".into(),
            out("s.json"),
        ],
        vec![
            "measure".into(),
            "ebpf-overhead".into(),
            "--out".into(),
            out("e.json"),
        ],
        vec![
            "measure".into(),
            "launch-overhead".into(),
            "--out".into(),
            out("l.json"),
        ],
    ];
    for args in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = causalbench(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        let command = format!("`{} {}` needs a GPU", args[0], args[1]);
        assert!(err.contains(&command), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "nothing is written without a GPU"
    );
    let o = causalbench(&[
        "megakernel",
        "run",
        "--backend",
        "cuda",
        "--out",
        &out("mk"),
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("needs a GPU"), "{err}");
}

#[test]
fn a_bad_suite_is_bad_input_before_any_gpu_is_needed() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-suite");
    let o = causalbench(&[
        "corpus",
        "record",
        "--suite",
        missing.to_str().unwrap(),
        "--out",
        dir.path().join("c").to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no-such-suite"), "{err}");
}

#[test]
fn megakernel_report_without_packs_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let o = causalbench(&[
        "megakernel",
        "report",
        "--packs",
        dir.path().to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no case packs"), "{err}");
}

#[test]
fn list_shows_the_megakernel_families() {
    let o = causalbench(&["list"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("megakernel track: 8 scenarios in 4 families"),
        "{out}"
    );
    for family in [
        "mk-exec-vs-notify",
        "mk-skew-vs-slow-class",
        "mk-burst-vs-starve",
        "mk-notify-vs-starve",
    ] {
        assert!(out.contains(family), "{family} not listed:\n{out}");
    }
    assert!(out.contains("mk-task-log"), "{out}");
}

/// A reader that closed its end of the pipe (`causalbench list | head -1`)
/// ends a command quietly with success, never a panic: the pipe's read end
/// is closed before the command starts, so its first write fails.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    for args in [&["list"][..], &["schema", "view"][..]] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_causalbench"))
            .args(args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("causalbench runs");
        let err = text(&out.stderr);
        assert!(out.status.success(), "{args:?}: {:?}\n{err}", out.status);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
