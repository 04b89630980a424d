//! The simulator at scale, phase by phase: a launch-bound scenario of N ops
//! (default 1 000 000) simulated alone, recorded in memory, and (given a path)
//! written as a bundle file the way `causalbench record` writes it.
//!
//! `cargo run --release -p generator --example record_scale -- 1000000 [BUNDLE]`
//! (`SIM_ONLY=1`: the simulation alone.) The criterion benchmark
//! (`cargo bench -p generator --bench sim`) measures the same phases.

use generator::Backend;
use ground_truth::io::Readable;
use std::time::Instant;

fn main() {
    let ops: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let out = std::env::args().nth(2);
    let sc = generator::sim::launch_bound_scenario(ops);
    let be = generator::sim::SimBackend::default();

    let t = Instant::now();
    let nodes = generator::sim::simulate_only(&be, &sc);
    let sim = t.elapsed().as_secs_f64();
    println!(
        "simulation alone: {ops} ops in {sim:.3} s ({:.2} M ops/s, {nodes} nodes)",
        ops as f64 / sim / 1e6
    );
    if std::env::var_os("SIM_ONLY").is_some() {
        return;
    }

    let t = Instant::now();
    let bundle = be.record(&sc, 0).expect("records");
    let rec = t.elapsed().as_secs_f64();
    println!(
        "recorded in memory: {rec:.3} s ({:.2} M ops/s): {} nodes, {} edges, {} records",
        ops as f64 / rec / 1e6,
        bundle.ground_truth.nodes.len(),
        bundle.ground_truth.edges.len(),
        bundle.trace.len()
    );
    let Some(out) = out else { return };
    let path = std::path::Path::new(&out);
    let t = Instant::now();
    bundle.write(path).expect("writes");
    let write = t.elapsed().as_secs_f64();
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    println!(
        "written: {write:.3} s ({:.0} MB, {:.2} GB/s); record + write {:.3} s",
        size as f64 / 1e6,
        size as f64 / write / 1e9,
        rec + write
    );
}
