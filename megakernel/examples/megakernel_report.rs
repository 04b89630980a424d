//! Scores the megakernel track from case packs (what `megakernel_check` wrote,
//! on a GPU or the simulator):
//!
//! ```text
//! cargo run --release -p megakernel --example megakernel_report -- --packs DIR [--out DIR] [--unpack]
//! ```
//!
//! Writes `OUT/track-scores.jsonl` (one line per case × capture × profiler),
//! `OUT/track-leaderboard.json` and `.md`, and with `--unpack` every case as
//! `OUT/cases/ID.bundle.json` + `ID.tasks.json` (readable by `causalbench score`,
//! `export`, … and by `ground_truth::megakernel::TaskTelemetry::read`).

use megakernel::pack;
use std::path::PathBuf;

fn main() {
    let mut packs = None;
    let mut out = None;
    let mut unpack = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--packs" => packs = it.next().map(PathBuf::from),
            "--out" => out = it.next().map(PathBuf::from),
            "--unpack" => unpack = true,
            "-h" | "--help" => {
                println!("megakernel_report --packs DIR [--out DIR] [--unpack]");
                return;
            }
            other => {
                eprintln!("error: unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    let Some(packs) = packs else {
        eprintln!("error: --packs DIR is required");
        std::process::exit(2);
    };
    let out = out.unwrap_or_else(|| packs.clone());
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&packs) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(".cases.jsonl.gz"))
            .collect(),
        Err(e) => {
            eprintln!("error: {}: {e}", packs.display());
            std::process::exit(2);
        }
    };
    files.sort();
    let mut cases = Vec::new();
    for f in &files {
        match pack::read(f) {
            Ok(c) => cases.extend(c),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        }
    }
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("error: {}: {e}", out.display());
        std::process::exit(2);
    }
    if unpack {
        if let Err(e) = pack::unpack(&cases, &out.join("cases")) {
            eprintln!("error: unpacking: {e}");
            std::process::exit(1);
        }
    }
    let (scores, rows) = megakernel::track::leaderboard(&cases);
    let jsonl: String = scores
        .iter()
        .map(|s| serde_json::to_string(s).expect("scores serialize") + "\n")
        .collect();
    let md = evaluator::megakernel::track_markdown(&rows);
    let res = std::fs::write(out.join("track-scores.jsonl"), jsonl)
        .and_then(|_| {
            ground_truth::io::write_json_atomic(&out.join("track-leaderboard.json"), &rows)
        })
        .and_then(|_| std::fs::write(out.join("track-leaderboard.md"), &md));
    if let Err(e) = res {
        eprintln!("error: writing results: {e}");
        std::process::exit(1);
    }
    println!("{} cases from {} packs\n\n{md}", cases.len(), files.len());
}
