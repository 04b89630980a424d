//! Simulator speed: simulated operations per second, and a 1-million-op
//! scenario recorded end to end. `cargo bench -p generator`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use generator::sim::SimBackend;
use generator::Backend;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("sim");
    g.sample_size(10);
    for ops in [100_000u32, 1_000_000] {
        let sc = generator::sim::launch_bound_scenario(ops);
        let be = SimBackend::default();
        g.throughput(Throughput::Elements(ops as u64));
        g.bench_function(format!("record_{ops}_ops"), |b| {
            b.iter(|| be.record(&sc, 0).expect("records"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
