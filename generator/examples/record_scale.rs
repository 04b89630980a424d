//! Records a launch-bound scenario of N ops on the simulator and prints the time
//! taken: `cargo run --release -p generator --example record_scale -- 1000000`.

use generator::Backend;
use std::time::Instant;

fn main() {
    let ops: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let sc = generator::sim::launch_bound_scenario(ops);
    let be = generator::sim::SimBackend::default();
    let t = Instant::now();
    let nodes = generator::sim::simulate_only(&be, &sc);
    let sim = t.elapsed().as_secs_f64();
    println!(
        "simulation alone: {ops} ops in {sim:.3} s ({:.0} ops/s, {nodes} nodes)",
        ops as f64 / sim
    );
    if std::env::var_os("SIM_ONLY").is_some() {
        return;
    }
    let t = Instant::now();
    let b = generator::sim::SimBackend::default()
        .record(&sc, 0)
        .expect("records");
    let rec = t.elapsed().as_secs_f64();
    if let Some(out) = std::env::args().nth(2) {
        let t = Instant::now();
        ground_truth::io::Readable::write(&b, std::path::Path::new(&out)).expect("writes");
        let w = t.elapsed().as_secs_f64();
        let size = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
        println!(
            "written in {w:.3} s ({:.0} MB); end to end {:.3} s",
            size as f64 / 1e6,
            rec + w
        );
    }
    println!(
        "{ops} ops recorded in {rec:.3} s ({:.0} ops/s): {} nodes, {} edges, {} records",
        ops as f64 / rec,
        b.ground_truth.nodes.len(),
        b.ground_truth.edges.len(),
        b.trace.len()
    );
}
