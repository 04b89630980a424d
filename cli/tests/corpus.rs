//! The shipped H200 corpus replays to exactly the committed leaderboard: the
//! evaluation is deterministic (analysis times aside, which are measurements).

use std::path::Path;
use std::process::Command;

mod common;
use common::verdicts;

const CORPUS: &str = "results/corpus/h200-580";
const RESULTS: &str = "results/h200-580";

/// Replays `corpus` with the built-in profilers into `out`; fails the test
/// on any failed case.
fn replay(root: &Path, corpus: &Path, extra: &[&str], out: &Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .current_dir(root)
        .args(["run", "--corpus"])
        .arg(corpus)
        .args(["--profilers", "builtin", "--quiet"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}: {}",
        corpus.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn corpus_replays_to_the_committed_leaderboard() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let committed = root.join(RESULTS).join("leaderboard.json");
    assert!(
        committed.is_file(),
        "{} must be committed",
        committed.display()
    );
    let out = tempfile::tempdir().unwrap();
    replay(&root, Path::new(CORPUS), &[], out.path());
    let fresh = verdicts(&out.path().join("leaderboard.json"));
    assert!(
        fresh == verdicts(&committed),
        "replaying {CORPUS} no longer gives {RESULTS}/leaderboard.json"
    );
}

/// Issue 7's call-site measure on the real traces: every kernel launched from
/// a scenario call site has, on its launching call, a uprobe whose stack names
/// that call site (the recorder read the backend's perf map), ≥ 99 %.
#[test]
fn recorded_stacks_name_every_kernels_call_site() {
    use ground_truth::graph::{EdgeType, NodeKind};
    use ground_truth::io::Readable;
    use ground_truth::trace::Record;
    use std::collections::HashMap;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(CORPUS);
    let (mut kernels, mut recovered) = (0usize, 0usize);
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !ground_truth::io::is_bundle_file(&path) {
            continue;
        }
        let b = ground_truth::Bundle::read(&path).unwrap();
        let records: HashMap<u64, &Record> = b.trace.iter().map(|r| (r.rid(), r)).collect();
        let launcher: HashMap<u32, u32> = b
            .ground_truth
            .edges
            .iter()
            .filter(|e| e.kind == EdgeType::Launch)
            .map(|e| (e.dst, e.src))
            .collect();
        for n in &b.ground_truth.nodes {
            let Some(site) = n.detail.call_site.as_deref() else {
                continue;
            };
            if n.kind != NodeKind::Kernel {
                continue;
            }
            kernels += 1;
            let call = &b.ground_truth.nodes[launcher[&n.id] as usize];
            let frame = call.rids.iter().find_map(|r| match records.get(r) {
                Some(Record::Uprobe { stack, .. }) => baselines::index::call_site_frame(stack),
                _ => None,
            });
            if frame == Some(site) {
                recovered += 1;
            } else if wrong.len() < 5 {
                wrong.push(format!("{}: {site} vs {frame:?}", b.id()));
            }
        }
    }
    eprintln!("call sites recovered from real stacks: {recovered}/{kernels}");
    assert!(kernels >= 100, "only {kernels} kernels with a call site");
    assert!(
        recovered as f64 >= 0.99 * kernels as f64,
        "{recovered}/{kernels} recovered; e.g. {wrong:?}"
    );
}

/// Each corpus recorded under another CUPTI version
/// (`results/corpus/h200-580-cupti*`, docs/cupti-versions.md) replays to
/// exactly the leaderboard committed for it in `results/cross-version/`.
#[test]
fn each_cupti_version_corpus_replays_to_its_committed_leaderboard() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut corpora: Vec<_> = std::fs::read_dir(root.join("results/corpus"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("h200-580-cupti"))
        })
        .collect();
    corpora.sort();
    assert!(
        corpora.len() >= 4,
        "at least four CUPTI versions are committed, found {corpora:?}"
    );
    for corpus in corpora {
        let name = corpus.file_name().unwrap().to_str().unwrap().to_string();
        let committed = root
            .join("results/cross-version")
            .join(&name)
            .join("leaderboard.json");
        assert!(
            committed.is_file(),
            "{} must be committed",
            committed.display()
        );
        let out = tempfile::tempdir().unwrap();
        replay(&root, &corpus, &["--megakernel-reps", "0"], out.path());
        assert!(
            verdicts(&out.path().join("leaderboard.json")) == verdicts(&committed),
            "replaying {name} no longer gives {}",
            committed.display()
        );
    }
}
