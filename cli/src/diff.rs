//! `causalbench diff`: what changed between two result sets, as a one-screen
//! summary with the details in a file; and `diff --versions`, the same
//! suite's corpora recorded under several CUPTI versions replayed and
//! compared at once (docs/cupti-versions.md).

use crate::Failure;
use evaluator::{CaseKey, Diff, Leaderboard, LEADERBOARD_JSON};
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
    /// Also list metric changes within their 95 % interval and of the analysis time
    /// (hidden by default as noise).
    #[arg(long)]
    pub all: bool,
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
    let mut d = diff_with_causes(a, b)?;
    if !args.all {
        d.hide_noise();
    }
    let details = args
        .details
        .clone()
        .unwrap_or_else(|| b.join("diff-details.md"));
    write(&details, &d.to_markdown())?;
    outln!(
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

/// The bundle files a results directory scored: by file name stem (`sim-NAME.r0`
/// for its own recordings, `NAME.r0` for a replayed corpus's) and by the manifest's
/// job key, each where it is now (`None`: no longer there) and with the sha256 the
/// run read or wrote it with (`None` when found in `bundles/` without a manifest entry).
#[derive(Default)]
struct BundleFiles {
    by_name: HashMap<String, (Option<PathBuf>, Option<String>)>,
}

impl BundleFiles {
    fn of(results: &Path) -> BundleFiles {
        let mut files = BundleFiles::default();
        // The run's own recordings, wherever the manifest says they are.
        if let Ok(entries) = std::fs::read_dir(results.join("bundles")) {
            for path in entries.flatten().map(|e| e.path()) {
                if let Some(stem) = bundle_stem(&path) {
                    files.by_name.insert(stem, (Some(path), None));
                }
            }
        }
        let Ok(manifest) = crate::manifest::Manifest::read(results) else {
            return files;
        };
        for (key, entry) in &manifest.bundles {
            let path = resolve(results, &entry.path);
            let hash = Some(entry.sha256.clone());
            if let Some(stem) = bundle_stem(&entry.path) {
                files.by_name.insert(stem, (path.clone(), hash.clone()));
            }
            files.by_name.insert(key.clone(), (path, hash));
        }
        files
    }

    /// The candidates for a case's bundle, most specific first.
    fn find(&self, case: &CaseKey) -> Vec<&(Option<PathBuf>, Option<String>)> {
        [
            format!("{}-{}", case.backend, case.bundle),
            format!("corpus-{}", case.bundle),
            case.bundle.clone(),
        ]
        .iter()
        .filter_map(|name| self.by_name.get(name))
        .collect()
    }
}

/// `NAME` of `NAME.bundle.json[.gz]`.
fn bundle_stem(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    ground_truth::io::is_bundle_file(path)
        .then(|| name.split(".bundle.json").next().map(str::to_string))
        .flatten()
}

/// Where a manifest's bundle path is now: inside the results directory (relative to
/// it), absolute, or a replayed corpus given relative to where the run ran: this
/// directory or one above the results directory (a repository's root).
fn resolve(results: &Path, path: &Path) -> Option<PathBuf> {
    if path.is_absolute() {
        return path.is_file().then(|| path.to_path_buf());
    }
    let mut bases: Vec<PathBuf> = vec![results.to_path_buf(), PathBuf::from(".")];
    if let Ok(abs) = results.canonicalize() {
        bases.extend(abs.ancestors().skip(1).map(Path::to_path_buf));
    }
    bases
        .into_iter()
        .map(|b| b.join(path))
        .find(|p| p.is_file())
}

/// A case's bundle from `files`: the first candidate that reads and is that case's
/// bundle (its id and backend).
fn bundle_in(files: &BundleFiles, case: &CaseKey) -> Option<(Bundle, Option<String>)> {
    files.find(case).into_iter().find_map(|(path, hash)| {
        Bundle::read(path.as_ref()?)
            .ok()
            .filter(|b| b.id() == case.bundle && b.manifest.backend == case.backend)
            .map(|b| (b, hash.clone()))
    })
}

/// The diff of two results directories, each flip explained by its bundles. A bundle
/// found in either directory stands for the other side's too when both manifests
/// record the same bytes (a corpus replayed by both, kept by one).
fn diff_with_causes(a: &Path, b: &Path) -> Result<Diff, Failure> {
    let mut d = evaluator::diff(a, b)?;
    let (fa, fb) = (BundleFiles::of(a), BundleFiles::of(b));
    let hashes = |files: &BundleFiles, case: &CaseKey| -> Vec<String> {
        files
            .find(case)
            .into_iter()
            .filter_map(|(_, h)| h.clone())
            .collect()
    };
    let side = |mine: &BundleFiles, other: &BundleFiles, case: &CaseKey| -> Option<Bundle> {
        if let Some((bundle, _)) = bundle_in(mine, case) {
            return Some(bundle);
        }
        let wanted = hashes(mine, case);
        bundle_in(other, case)
            .filter(|(_, hash)| hash.as_ref().is_some_and(|h| wanted.contains(h)))
            .map(|(bundle, _)| bundle)
    };
    d.attach_causes(|case| side(&fa, &fb, case), |case| side(&fb, &fa, case));
    let commands = |dir: &Path| {
        crate::manifest::Manifest::read(dir)
            .map(|m| m.external_profilers)
            .unwrap_or_default()
    };
    d.attach_commands(&commands(a), &commands(b));
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
    outln!("{md}");
    eprintln!("causalbench: cross-version report in {}", report.display());
    Ok(())
}
