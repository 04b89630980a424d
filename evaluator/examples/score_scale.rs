//! Scores one synthetic case of N nodes against N claimed edges and prints the
//! time and memory it took:
//!
//! ```text
//! cargo run --release -p evaluator --example score_scale -- 10000000 [--sparse]
//! ```
//!
//! `--sparse` scatters rids over the u64 range (the hashed rid index) instead of
//! numbering them densely (the flat one, the recorder's usual numbering).

#[path = "../benches/synth/mod.rs"]
mod synth;

use std::time::Instant;

/// (VmRSS, VmHWM) of this process in MiB, from /proc/self/status.
fn mem_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args
        .iter()
        .find_map(|a| a.replace('_', "").parse().ok())
        .unwrap_or(1_000_000);
    let sparse = args.iter().any(|a| a == "--sparse");
    let t = Instant::now();
    let inputs = synth::build(n, sparse);
    let build_s = t.elapsed().as_secs_f64();
    let (rss_inputs, _) = mem_mib();
    println!(
        "N = {n} nodes, {} truth edges, {} view records, {} claimed edges, rids {}",
        inputs.bundle.ground_truth.edges.len(),
        inputs.view.records.len(),
        inputs.explanation.edges.len(),
        if sparse {
            "sparse (hashed index)"
        } else {
            "dense (flat index)"
        }
    );
    println!("inputs built in {build_s:.2} s; RSS with inputs {rss_inputs:.0} MiB");
    let t = Instant::now();
    let score = evaluator::score_case(&inputs.bundle, &inputs.view, &inputs.explanation);
    let score_s = t.elapsed().as_secs_f64();
    let (_, hwm) = mem_mib();
    println!("score_case: {score_s:.3} s");
    println!(
        "peak RSS (VmHWM) {hwm:.0} MiB in all; scorer working memory ≈ {:.0} MiB above the inputs",
        hwm - rss_inputs
    );
    println!(
        "precision {:?} recall {:?} f1 {:?} brier {:?} claims {} tp {} truth {} duplicates {} unmapped {} missing {}",
        score.edges.precision,
        score.edges.recall,
        score.edges.f1,
        score.edges.brier,
        score.edges.counts.claims,
        score.edges.counts.true_positives,
        score.edges.counts.truth,
        score.edges.duplicate_claims,
        score.edges.unmapped_claims,
        score.edges.missing_claims
    );
    println!(
        "symptoms {} (correct {}), unresolved {}",
        score.symptoms.len(),
        score.symptoms.iter().filter(|s| s.correct).count(),
        score.symptoms.iter().filter(|s| s.unresolved).count()
    );
}
