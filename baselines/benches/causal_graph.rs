//! causal-graph on a synthetic 1-million-record view (target: < 5 s).
//! `cargo bench -p baselines --bench causal_graph`

use baselines::{synth::synthetic_view, CausalGraph, Profiler};
use criterion::{criterion_group, criterion_main, Criterion};
use std::time::{Duration, Instant};

fn bench(c: &mut Criterion) {
    let t0 = Instant::now();
    let view = synthetic_view(1_000_000);
    eprintln!(
        "built a view of {} records in {:.2} s",
        view.records.len(),
        t0.elapsed().as_secs_f64()
    );
    let t0 = Instant::now();
    let e = CausalGraph.explain(&view);
    eprintln!(
        "causal-graph: {} edges, {} diagnoses, {:.0} ms (one cold run)",
        e.edges.len(),
        e.diagnoses.len(),
        t0.elapsed().as_secs_f64() * 1000.0
    );
    let mut g = c.benchmark_group("causal_graph");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .warm_up_time(Duration::from_secs(1));
    g.bench_function("explain_1M_records", |b| {
        b.iter(|| std::hint::black_box(CausalGraph.explain(&view)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
