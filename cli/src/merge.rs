//! `causalbench report --merge DIR…` (docs/scale-out.md): the result directories of the
//! shards of one run (`run --shard K/N`, `shard.rs`) combined into the leaderboard one
//! machine would have written. The leaderboard's intervals are seeded by content
//! (evaluator/METRICS.md, "Confidence intervals"), so they do not depend on the split.

use crate::manifest::{Manifest, SplitRecord};
use crate::shard::Shard;
use crate::Failure;
use evaluator::megakernel::TrackCase;
use evaluator::CaseScore;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What one shard's result directory contributes to a merge.
struct ShardResults {
    dir: PathBuf,
    manifest: Manifest,
    scores: Vec<CaseScore>,
    track: Vec<TrackCase>,
}

fn read_shard(dir: &Path) -> Result<ShardResults, Failure> {
    let manifest = Manifest::read(dir)?;
    let tampered = manifest.tampered(dir);
    if !tampered.is_empty() {
        return Err(Failure::failed(tampered.join("\n")));
    }
    let scores_path = dir.join(evaluator::SCORES_FILE);
    let scores = evaluator::read_scores(&scores_path)?;
    let track_path = dir.join(crate::track::SCORES_FILE);
    let track = if track_path.is_file() {
        crate::track::read_scores(&track_path)?
    } else {
        Vec::new()
    };
    Ok(ShardResults {
        dir: dir.to_path_buf(),
        manifest,
        scores,
        track,
    })
}

/// The shards must be the N parts of one split of one suite: every `K/N` once, the same N,
/// the same generated split.
fn check_cover(shards: &[ShardResults]) -> Result<(), Failure> {
    let named: Vec<(&Path, Shard)> = shards
        .iter()
        .map(|s| (s.dir.as_path(), s.manifest.shard.unwrap_or(Shard::WHOLE)))
        .collect();
    let count = named[0].1.count;
    let mut seen = BTreeSet::new();
    for (dir, shard) in &named {
        if shard.count != count {
            return Err(Failure::input(format!(
                "--merge: {} holds shard {shard}, {} shard {}: shards of different splits",
                dir.display(),
                named[0].0.display(),
                named[0].1
            )));
        }
        if !seen.insert(shard.index) {
            return Err(Failure::input(format!(
                "--merge: shard {shard} given twice ({})",
                dir.display()
            )));
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|k| !seen.contains(k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(Failure::input(format!(
            "--merge: shard {} missing: a partial merge would not be the suite's leaderboard",
            missing.join(", ")
        )));
    }
    let split = |s: &ShardResults| s.manifest.split.clone();
    let first: Option<SplitRecord> = split(&shards[0]);
    if let Some(other) = shards.iter().find(|s| split(s) != first) {
        return Err(Failure::input(format!(
            "--merge: {} and {} ran different generated splits ({:?} vs {:?}): pass the same \
             --split-seed to every shard",
            shards[0].dir.display(),
            other.dir.display(),
            first,
            split(other)
        )));
    }
    Ok(())
}

/// The merged manifest: every shard's bundle hashes (paths made reachable from `out`), the
/// split, and the loudest isolation any shard ran its external profilers under.
fn merged_manifest(shards: &[ShardResults], out: &Path) -> Result<Manifest, Failure> {
    let mut merged = Manifest {
        split: shards[0].manifest.split.clone(),
        ..Manifest::default()
    };
    for shard in shards {
        let m = &shard.manifest;
        let unisolated =
            |i: &Option<String>| i.as_ref().is_some_and(|i| i.starts_with("UNISOLATED"));
        if merged.isolation.is_none()
            || (unisolated(&m.isolation) && !unisolated(&merged.isolation))
        {
            merged.isolation.clone_from(&m.isolation);
        }
        merged
            .external_profilers
            .extend(m.external_profilers.clone());
        let dir = shard
            .dir
            .canonicalize()
            .map_err(|e| Failure::input(format!("cannot resolve {}: {e}", shard.dir.display())))?;
        let shard_of = m.shard.unwrap_or(Shard::WHOLE);
        // A shard resumed in a copy of another run's directory lists that run's bundles too.
        for (key, hash) in m.bundles.iter().filter(|(key, _)| shard_of.holds(key)) {
            let mut hash = hash.clone();
            let path = dir.join(&hash.path);
            hash.path = path
                .strip_prefix(out)
                .map(Path::to_path_buf)
                .unwrap_or(path);
            if merged.bundles.insert(key.clone(), hash).is_some() {
                return Err(Failure::input(format!(
                    "--merge: case {key} is in more than one shard ({})",
                    shard.dir.display()
                )));
            }
        }
    }
    Ok(merged)
}

/// `causalbench report --merge DIR… --results OUT`.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<(), Failure> {
    let shards = dirs
        .iter()
        .map(|d| read_shard(d))
        .collect::<Result<Vec<_>, _>>()?;
    check_cover(&shards)?;
    std::fs::create_dir_all(out)
        .map_err(|e| Failure::failed(format!("cannot create {}: {e}", out.display())))?;
    let out_real = out
        .canonicalize()
        .map_err(|e| Failure::failed(format!("cannot resolve {}: {e}", out.display())))?;
    if let Some(s) = shards
        .iter()
        .find(|s| s.dir.canonicalize().is_ok_and(|d| d == out_real))
    {
        return Err(Failure::input(format!(
            "--results {} is one of the shards merged: the merge would overwrite it",
            s.dir.display()
        )));
    }
    let manifest = merged_manifest(&shards, &out_real)?;
    let mut scores = Vec::new();
    let mut cases = BTreeSet::new();
    for shard in &shards {
        for s in &shard.scores {
            if !cases.insert((&s.bundle, &s.backend, &s.profiler, &s.view)) {
                return Err(Failure::input(format!(
                    "--merge: {}: the score of {} × {} × {} is in another shard too",
                    shard.dir.display(),
                    s.bundle,
                    s.profiler,
                    s.view
                )));
            }
        }
        scores.extend(shard.scores.iter().cloned());
    }
    let report = evaluator::write_results(out, &scores).map_err(crate::commands::eval_failure)?;
    // The track's scores in the order one machine writes them: family by family.
    let mut track: Vec<TrackCase> = shards.iter().flat_map(|s| s.track.clone()).collect();
    let track_rows = if track.is_empty() {
        None
    } else {
        let order: Vec<String> = crate::track::families()?
            .into_iter()
            .map(|(family, _)| family)
            .collect();
        track.sort_by_key(|c| order.iter().position(|f| *f == c.family));
        crate::track::write_scores(out, &track)?;
        crate::track::report_in(out)?
    };
    manifest.write(out).map_err(Failure::failed)?;
    crate::manifest::mark_leaderboard(out)?;
    outln!("{}", report.leaderboard.to_markdown());
    if let Some(rows) = &track_rows {
        outln!("{}", crate::track::section(rows));
    }
    eprintln!(
        "causalbench: merged {} shards: {} case scores into {}",
        shards.len(),
        report.cases,
        out.display()
    );
    Ok(())
}
