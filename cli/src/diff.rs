//! `causalbench diff`: what changed between two result sets, as a one-screen
//! summary with the details in a file; and `diff --versions`, the same
//! suite's corpora recorded under several CUPTI versions replayed and
//! compared at once (docs/cupti-versions.md).

use crate::Failure;
use evaluator::{Diff, Leaderboard, LEADERBOARD_JSON};
use ground_truth::io::Readable;
use ground_truth::Bundle;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct DiffArgs {
    /// Two results directories (`causalbench run --out`), A then B.
    #[arg(value_name = "DIR", num_args = 0..=2)]
    pub dirs: Vec<PathBuf>,
    /// Where the full diff goes (default: `diff-details.md` in B).
    #[arg(long, value_name = "FILE")]
    pub details: Option<PathBuf>,
    /// Corpora of one suite recorded under different CUPTI versions (the first is
    /// the reference): each is replayed into --out, and the versions compared.
    #[arg(long, value_name = "DIR", num_args = 2.., conflicts_with = "dirs")]
    pub versions: Vec<PathBuf>,
    /// With --versions: where the replays and the report go.
    #[arg(long, default_value = "out/cross-version")]
    pub out: PathBuf,
}

pub fn diff(args: DiffArgs) -> Result<(), Failure> {
    if !args.versions.is_empty() {
        return versions(&args.versions, &args.out);
    }
    let [a, b] = args.dirs.as_slice() else {
        return Err(Failure::input(
            "diff needs two results directories (A B), or --versions DIR DIR…",
        ));
    };
    let d = diff_with_causes(a, b)?;
    let details = args
        .details
        .clone()
        .unwrap_or_else(|| b.join("diff-details.md"));
    write(&details, &d.to_markdown())?;
    println!(
        "{}",
        d.summary_markdown(Some(&details.display().to_string()))
    );
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), Failure> {
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::failed(format!("cannot create {}: {e}", dir.display())))?;
    }
    std::fs::write(path, text)
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
}

/// The bundle files a results directory scored, by bundle id: the paths its
/// manifest recorded (a replay's corpus, or the run's own `bundles/`).
fn bundle_files(results: &Path) -> HashMap<String, PathBuf> {
    let mut files = HashMap::new();
    let Ok(manifest) = crate::manifest::Manifest::read(results) else {
        return files;
    };
    for entry in manifest.bundles.values() {
        // Inside the results directory: relative to it; a replayed corpus
        // elsewhere: as the run was given it (relative to where it ran).
        let inside = results.join(&entry.path);
        let path = if entry.path.is_absolute() || !inside.exists() {
            entry.path.clone()
        } else {
            inside
        };
        if let Some(id) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.split(".bundle.json").next())
        {
            files.insert(id.to_string(), path);
        }
    }
    files
}

/// The diff of two results directories, each flip explained by its bundles.
fn diff_with_causes(a: &Path, b: &Path) -> Result<Diff, Failure> {
    let mut d = evaluator::diff(a, b)?;
    let (fa, fb) = (bundle_files(a), bundle_files(b));
    let read = |files: &HashMap<String, PathBuf>, id: &str| -> Option<Bundle> {
        files.get(id).and_then(|p| Bundle::read(p).ok())
    };
    d.attach_causes(|id| read(&fa, id), |id| read(&fb, id));
    Ok(d)
}

/// What one corpus's CUPTI is and lacks, from its bundles' manifests.
struct Version {
    name: String,
    cupti: String,
    layout: String,
    clock: String,
    unobservable: Vec<String>,
    unobservable_records: u64,
    bundles: usize,
    /// What the records themselves show of the event evidence: CUDA_EVENT
    /// records, of them with a device timestamp and with a sync id; stream
    /// waits, of them with a sync id.
    events: [u64; 5],
}

fn version_of(corpus: &Path) -> Result<Version, Failure> {
    let name = corpus
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| corpus.display().to_string());
    let mut v = Version {
        name,
        cupti: String::new(),
        layout: "-".into(),
        clock: "-".into(),
        unobservable: Vec::new(),
        unobservable_records: 0,
        bundles: 0,
        events: [0; 5],
    };
    let entries = std::fs::read_dir(corpus).map_err(|e| {
        Failure::input(format!(
            "{}: cannot read corpus directory: {e}",
            corpus.display()
        ))
    })?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| ground_truth::io::is_bundle_file(p))
        .collect();
    files.sort();
    for path in files {
        let b = Bundle::read(&path).map_err(Failure::input)?;
        v.bundles += 1;
        v.unobservable_records += b.loss.cupti_unobservable;
        for r in &b.trace {
            match r {
                ground_truth::Record::CudaEvent {
                    ts, event_sync_id, ..
                } => {
                    v.events[0] += 1;
                    v.events[1] += (*ts > 0) as u64;
                    v.events[2] += (*event_sync_id > 0) as u64;
                }
                ground_truth::Record::Sync {
                    sync_type: ground_truth::trace::SyncType::StreamWaitEvent,
                    event_sync_id,
                    ..
                } => {
                    v.events[3] += 1;
                    v.events[4] += (*event_sync_id > 0) as u64;
                }
                _ => {}
            }
        }
        if v.cupti.is_empty() {
            v.cupti = b.manifest.cupti.clone();
            if let Some(c) = &b.manifest.cupti_capabilities {
                v.layout = c.record_layout.clone();
                v.clock = c.clock.clone();
                v.unobservable = c.unobservable.iter().map(|u| u.what.clone()).collect();
            }
        }
    }
    if v.bundles == 0 {
        return Err(Failure::input(format!(
            "{}: no bundle files (*.bundle.json, *.bundle.json.gz)",
            corpus.display()
        )));
    }
    Ok(v)
}

/// Replays one corpus with the built-in profilers into `out`.
fn replay(corpus: &Path, out: &Path) -> Result<(), Failure> {
    #[derive(clap::Parser)]
    struct Replay {
        #[command(flatten)]
        run: crate::run::RunArgs,
    }
    let args = [
        "run".into(),
        "--corpus".into(),
        corpus.as_os_str().to_owned(),
        "--out".into(),
        out.as_os_str().to_owned(),
        "--megakernel-reps".into(),
        "0".into(),
        "--profilers".into(),
        "builtin".into(),
        "--quiet".into(),
    ];
    let parsed = <Replay as clap::Parser>::try_parse_from(args)
        .map_err(|e| Failure::failed(format!("replay arguments: {e}")))?;
    crate::run::run(parsed.run)
}

fn leaderboard(results: &Path) -> Result<Leaderboard, Failure> {
    let path = results.join(LEADERBOARD_JSON);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Failure::failed(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| Failure::input(format!("{}: {e}", path.display())))
}

fn versions(corpora: &[PathBuf], out: &Path) -> Result<(), Failure> {
    let mut found = Vec::new();
    for corpus in corpora {
        let v = version_of(corpus)?;
        let results = out.join(&v.name);
        eprintln!("causalbench: replaying {} ({})", corpus.display(), v.cupti);
        replay(corpus, &results)?;
        found.push((v, results));
    }
    let boards: Vec<Leaderboard> = found
        .iter()
        .map(|(_, r)| leaderboard(r))
        .collect::<Result<_, _>>()?;
    let mut md = String::new();
    let names: Vec<&str> = found.iter().map(|(v, _)| v.name.as_str()).collect();
    let _ = writeln!(
        md,
        "Pair accuracy (95 % interval) of each profiler on CUPTI-only views, per CUPTI version \
         ({} bundles each; loss-free views, `evaluator/METRICS.md`):\n",
        found.first().map_or(0, |(v, _)| v.bundles)
    );
    let _ = writeln!(md, "| profiler | mode | {} |", names.join(" | "));
    let _ = writeln!(md, "| --- | --- |{}", " ---: |".repeat(names.len()));
    let mut rows: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (i, board) in boards.iter().enumerate() {
        for r in board
            .rows
            .iter()
            .filter(|r| r.collectors == ground_truth::Collectors::Cupti)
        {
            let cell = match (r.pair_accuracy, r.ci.get("pair_accuracy")) {
                (Some(p), Some(ci)) => format!("{p:.3} [{:.3}, {:.3}]", ci.low, ci.high),
                (Some(p), None) => format!("{p:.3}"),
                _ => "n/a".into(),
            };
            let row = rows
                .entry((r.profiler.clone(), r.mode.as_str().to_string()))
                .or_insert_with(|| vec!["-".to_string(); boards.len()]);
            row[i] = cell;
        }
    }
    for ((profiler, mode), cells) in &rows {
        let _ = writeln!(md, "| {profiler} | {mode} | {} |", cells.join(" | "));
    }
    let _ = writeln!(md, "\nWhat each version records and lacks:\n");
    let _ = writeln!(
        md,
        "| corpus | CUPTI | record layout | clock | manifest: cannot observe | records accounted unobservable | CUDA_EVENT records (with device timestamp, with sync id) | stream waits with a sync id |"
    );
    let _ = writeln!(md, "| --- | --- | --- | --- | --- | ---: | --- | --- |");
    for (v, _) in &found {
        let lacks = if v.unobservable.is_empty() {
            "-".to_string()
        } else {
            v.unobservable.join(", ")
        };
        let e = v.events;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {lacks} | {} | {} ({}, {}) | {} of {} |",
            v.name,
            v.cupti,
            v.layout,
            v.clock,
            v.unobservable_records,
            e[0],
            e[1],
            e[2],
            e[4],
            e[3]
        );
    }
    let _ = writeln!(
        md,
        "\nVerdict flips against the reference `{}` (details per pair next to this report):\n",
        names[0]
    );
    let _ = writeln!(
        md,
        "| versus | correct→wrong | wrong→correct | metrics beyond interval | most frequent differences in the records behind the flips |"
    );
    let _ = writeln!(md, "| --- | ---: | ---: | ---: | --- |");
    let reference = &found[0].1;
    for (v, results) in &found[1..] {
        let d = diff_with_causes(reference, results)?;
        let details = out.join(format!("diff-{}-{}.md", names[0], v.name));
        write(
            &details,
            &format!("{}\n{}", d.summary_markdown(None), d.to_markdown()),
        )?;
        let mut causes: BTreeMap<String, u64> = BTreeMap::new();
        for g in d.flip_groups().values() {
            for (c, n) in &g.causes {
                *causes.entry(c.clone()).or_default() += n;
            }
        }
        let mut causes: Vec<_> = causes.into_iter().collect();
        causes.sort_by_key(|(c, n)| (std::cmp::Reverse(*n), c.clone()));
        let shown: Vec<String> = causes
            .iter()
            .take(3)
            .map(|(c, n)| format!("{c} ({n} flips)"))
            .collect();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            v.name,
            d.regressions(),
            d.fixes(),
            d.metrics.iter().filter(|m| m.beyond_interval).count(),
            if shown.is_empty() {
                "-".into()
            } else {
                shown.join("; ")
            }
        );
    }
    let report = out.join("cross-version.md");
    write(&report, &md)?;
    println!("{md}");
    eprintln!("causalbench: cross-version report in {}", report.display());
    Ok(())
}
