//! The megakernel track inside a results directory (`causalbench run`,
//! `causalbench report`, `causalbench megakernel report`): every family of
//! `megakernel/catalog/` recorded on an executor (the simulator, or the GPU)
//! and packed per family under `DIR/megakernel/`, scored by the track's own
//! profilers and metrics (`evaluator/METRICS.md` §5), and written as
//! `DIR/track-scores.jsonl`, `DIR/track-leaderboard.{json,md}` and the
//! "Megakernel track" section of `DIR/leaderboard.md`.

use crate::shard::Shard;
use crate::Failure;
use evaluator::megakernel::{track_leaderboard, track_markdown, TrackCase, TrackRow};
use ground_truth::megakernel::MkScenario;
use megakernel::case::{run_family, Executor, FamilyOptions};
use megakernel::pack::{self, PackedCase};
use std::path::{Path, PathBuf};

/// Where `causalbench run` keeps the track's case packs, under its results directory.
pub const PACKS_DIR: &str = "megakernel";
pub const SCORES_FILE: &str = "track-scores.jsonl";
pub const LEADERBOARD_JSON: &str = "track-leaderboard.json";
pub const LEADERBOARD_MD: &str = "track-leaderboard.md";
/// Heading of the track's section in `leaderboard.md`.
pub const SECTION: &str = "## Megakernel track";

/// Case packs of a directory (`*.cases.jsonl.gz`), sorted.
pub fn pack_files(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Failure::input(format!(
            "{}: cannot read pack directory: {e}",
            dir.display()
        ))
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".cases.jsonl.gz"))
        .collect();
    files.sort();
    Ok(files)
}

/// Where a family's pack is kept in a directory.
pub fn pack_path(dir: &Path, family: &str) -> PathBuf {
    dir.join(format!("{family}.cases.jsonl.gz"))
}

/// The track's scenarios by family, or a failure naming the bad file.
pub fn families() -> Result<Vec<(String, Vec<MkScenario>)>, Failure> {
    let scenarios = megakernel::catalog::load()?;
    Ok(megakernel::catalog::families(&scenarios))
}

/// Opens the executor `causalbench run` records the track on: the GPU when the
/// main suite runs on it (`cuda`), the simulator otherwise.
pub fn executor(backend: &str) -> Result<Box<dyn Executor>, Failure> {
    if backend == "cuda" {
        // With the kernel with hooks beside the plain one: the diagnosis
        // programs' captures (`ebpf`, `ebpf-sampled`) are recorded on the GPU too.
        let gpu = megakernel::gpu::GpuExecutor::open(true)
            .and_then(megakernel::bpf::device::GpuPrograms::new)
            .map_err(|e| {
                Failure::failed(format!("the megakernel track cannot open the GPU: {e}"))
            })?;
        Ok(Box::new(gpu))
    } else {
        Ok(Box::new(megakernel::SimExecutor::default()))
    }
}

/// Launches per measurement of the unmonitored kernel: the simulator is
/// deterministic; on a GPU the median of three steadies the calibration.
pub fn measure_launches(backend: &str) -> u32 {
    if backend == "sim" {
        1
    } else {
        3
    }
}

/// The pack of an earlier (or interrupted) run, when it holds exactly
/// `variants` × repetitions `0..reps` recorded on `backend`.
fn finished_pack(
    path: &Path,
    variants: &[MkScenario],
    reps: u32,
    backend: &str,
) -> Option<Vec<PackedCase>> {
    let cases = pack::read(path).ok()?;
    let mut seen: Vec<(String, u32)> = cases
        .iter()
        .filter(|c| c.bundle.manifest.backend == backend)
        .map(|c| {
            (
                c.telemetry.scenario.name.clone(),
                c.bundle.manifest.repetition,
            )
        })
        .collect();
    seen.sort();
    let mut expected: Vec<(String, u32)> = variants
        .iter()
        .flat_map(|v| (0..reps).map(move |r| (v.name.clone(), r)))
        .collect();
    expected.sort();
    (seen == expected && cases.len() == expected.len()).then_some(cases)
}

/// The track's part of `causalbench run`. A run that records its suite
/// records the track too, on its backend's executor (`reps` repetitions; 0
/// leaves the track out); a run that only replays a corpus replays the
/// track's packs of that corpus (`CORPUS/megakernel/`) when it has them.
pub fn in_run(
    out: &Path,
    backend: &str,
    recording: bool,
    corpus: Option<&Path>,
    reps: u32,
    shard: Shard,
) -> Result<Option<Vec<TrackRow>>, Failure> {
    if recording {
        return run_in(out, backend, reps, shard);
    }
    let Some(packs) = corpus.map(|c| c.join(PACKS_DIR)).filter(|p| p.is_dir()) else {
        return Ok(None);
    };
    let mut cases = Vec::new();
    for f in pack_files(&packs)? {
        let name = f.file_name().unwrap_or_default().to_string_lossy();
        let family = name.strip_suffix(".cases.jsonl.gz").unwrap_or(&name);
        if shard.holds(&Shard::track_key(family)) {
            cases.extend(pack::read(&f)?);
        }
    }
    if cases.is_empty() {
        return Ok(None);
    }
    let (_, rows) = write(out, &cases)?;
    append_section(out, &rows)?;
    Ok(Some(rows))
}

/// Records (or reuses from `OUT/megakernel/`) every family × `reps` on the
/// executor of `backend`, scores the track into `out` (its files and its
/// section of `leaderboard.md`) and returns its rows; `None` when `reps` is 0 or the
/// shard holds none of the families.
pub fn run_in(
    out: &Path,
    backend: &str,
    reps: u32,
    shard: Shard,
) -> Result<Option<Vec<TrackRow>>, Failure> {
    let families: Vec<(String, Vec<MkScenario>)> = families()?
        .into_iter()
        .filter(|(family, _)| shard.holds(&Shard::track_key(family)))
        .collect();
    if reps == 0 || families.is_empty() {
        return Ok(None);
    }
    let dir = out.join(PACKS_DIR);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", dir.display())))?;
    let bar = crate::progress::bar(families.len() * reps as usize, "megakernel cases");
    let mut executor: Option<Box<dyn Executor>> = None;
    let mut cases = Vec::new();
    for (family, variants) in &families {
        let path = pack_path(&dir, family);
        if let Some(done) = finished_pack(&path, variants, reps, backend) {
            cases.extend(done);
            bar.inc(reps as u64);
            continue;
        }
        if executor.is_none() {
            executor = Some(self::executor(backend)?);
        }
        let ex = executor.as_deref_mut().expect("opened above");
        bar.set_message(family.clone());
        let mut packed = Vec::new();
        for repetition in 0..reps {
            let options = FamilyOptions {
                repetition,
                measure_launches: measure_launches(backend),
                ..Default::default()
            };
            let recorded = run_family(ex, variants, &options).map_err(|e| {
                Failure::failed(format!("megakernel family {family} r{repetition}: {e}"))
            })?;
            packed.extend(recorded.into_iter().map(|c| PackedCase {
                bundle: c.bundle,
                telemetry: c.telemetry,
            }));
            bar.inc(1);
        }
        pack::write(&path, &packed)
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))?;
        cases.extend(packed);
    }
    bar.finish_and_clear();
    let (_, rows) = write(out, &cases)?;
    append_section(out, &rows)?;
    Ok(Some(rows))
}

/// Scores `cases` with every track profiler and writes the track's files into
/// `out`; returns how many scores and the rows.
pub fn write(out: &Path, cases: &[PackedCase]) -> Result<(usize, Vec<TrackRow>), Failure> {
    let (scores, rows) = megakernel::track::leaderboard(cases);
    write_scores(out, &scores)?;
    write_leaderboard(out, &rows)?;
    Ok((scores.len(), rows))
}

pub fn write_scores(out: &Path, scores: &[TrackCase]) -> Result<(), Failure> {
    let jsonl: String = scores
        .iter()
        .map(|s| serde_json::to_string(s).expect("scores serialize") + "\n")
        .collect();
    let path = out.join(SCORES_FILE);
    ground_truth::io::write_atomic(&path, jsonl.as_bytes())
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
}

fn write_leaderboard(out: &Path, rows: &[TrackRow]) -> Result<(), Failure> {
    let failed = |path: PathBuf| {
        move |e: std::io::Error| Failure::failed(format!("cannot write {}: {e}", path.display()))
    };
    let json = out.join(LEADERBOARD_JSON);
    ground_truth::io::write_json_atomic(&json, rows).map_err(failed(json.clone()))?;
    let md = out.join(LEADERBOARD_MD);
    ground_truth::io::write_atomic(&md, track_markdown(rows).as_bytes()).map_err(failed(md.clone()))
}

/// The track's section of `leaderboard.md`.
pub fn section(rows: &[TrackRow]) -> String {
    format!(
        "{SECTION}\n\nThe megakernel families (`megakernel/catalog/`), scored with the track's \
         own metrics (`evaluator/METRICS.md` §5); per-case scores in `{SCORES_FILE}`.\n\n{}\n{}",
        track_markdown(rows),
        megakernel::bpf::section::section(rows)
    )
}

/// Appends the track's section to `out/leaderboard.md` (which the evaluator
/// has just rewritten without it).
pub fn append_section(out: &Path, rows: &[TrackRow]) -> Result<(), Failure> {
    let path = out.join(evaluator::LEADERBOARD_MD);
    let main = std::fs::read_to_string(&path)
        .map_err(|e| Failure::failed(format!("cannot read {}: {e}", path.display())))?;
    let text = format!("{}\n\n{}", main.trim_end(), section(rows));
    ground_truth::io::write_atomic(&path, text.as_bytes())
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
}

/// Reads `track-scores.jsonl`; a bad line is an input error naming file and line.
pub fn read_scores(path: &Path) -> Result<Vec<TrackCase>, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::input(format!("{}: cannot read track scores: {e}", path.display()))
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = PathBuf::from(format!("{}:{}", path.display(), i + 1));
        out.push(ground_truth::io::from_json(&at, line.as_bytes())?);
    }
    Ok(out)
}

/// `causalbench report`'s part: when `dir` has track scores, rebuilds the
/// track's leaderboard files and section from them; returns the rows.
pub fn report_in(dir: &Path) -> Result<Option<Vec<TrackRow>>, Failure> {
    let path = dir.join(SCORES_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let rows = track_leaderboard(&read_scores(&path)?);
    write_leaderboard(dir, &rows)?;
    append_section(dir, &rows)?;
    Ok(Some(rows))
}
