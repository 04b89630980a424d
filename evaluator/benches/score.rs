//! Scale benchmark: `score_case` on a synthetic case of N nodes vs N claimed edges.
//! N = 1M always; N = 10M only with `CAUSALBENCH_BENCH_10M=1` (it needs ~6 GB).
//! For a one-shot time + peak-memory measurement use `examples/score_scale.rs`.

mod synth;

use criterion::{criterion_group, criterion_main, Criterion};
use std::time::Duration;

fn bench(c: &mut Criterion) {
    let mut sizes = vec![1_000_000usize];
    if std::env::var("CAUSALBENCH_BENCH_10M").is_ok_and(|v| v == "1") {
        sizes.push(10_000_000);
    }
    let mut g = c.benchmark_group("score_case");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10))
        .sampling_mode(criterion::SamplingMode::Flat);
    for n in sizes {
        for sparse in [false, true] {
            let inputs = synth::build(n, sparse);
            let name = format!(
                "{}M_nodes_{}",
                n / 1_000_000,
                if sparse { "sparse_rids" } else { "dense_rids" }
            );
            g.bench_function(name, |b| {
                b.iter(|| evaluator::score_case(&inputs.bundle, &inputs.view, &inputs.explanation))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
