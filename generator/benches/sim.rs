//! Simulator speed on the launch-bound scenario (`sim::launch_bound_scenario`,
//! the same as `benches/scenarios/launch-bound-1m.yaml` at 1 M ops), in
//! simulated operations per second (criterion's `elem/s`):
//!
//! - `simulate`: the model alone, on one core (what the no-injection twin run
//!   costs);
//! - `record`: a bundle recorded in memory (model, records, answers);
//! - `record_and_write`: recorded and written as a bundle file, as
//!   `causalbench record` does;
//! - `read_back`: that file read and checked, as `causalbench view` and the
//!   evaluator do.
//!
//! `cargo bench -p generator --bench sim` (add `-- simulate` etc. to pick one).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use generator::sim::SimBackend;
use generator::Backend;
use ground_truth::io::Readable;

fn bench(c: &mut Criterion) {
    let be = SimBackend::default();
    let dir = tempfile::tempdir().expect("a temp dir");
    let out = dir.path().join("launch-bound.bundle.json");
    let mut g = c.benchmark_group("sim");
    g.sample_size(10);
    for ops in [100_000u32, 1_000_000] {
        let sc = generator::sim::launch_bound_scenario(ops);
        g.throughput(Throughput::Elements(ops as u64));
        g.bench_function(format!("simulate/{ops}"), |b| {
            b.iter(|| generator::sim::simulate_only(&be, &sc))
        });
        // Dropping a bundle is not part of recording it.
        g.bench_function(format!("record/{ops}"), |b| {
            b.iter_batched(
                || (),
                |()| be.record(&sc, 0).expect("records"),
                BatchSize::PerIteration,
            )
        });
        g.bench_function(format!("record_and_write/{ops}"), |b| {
            b.iter_batched(
                // Each iteration writes a new file to a settled disk: the previous
                // file's deletion and writeback (a gigabyte at 1 M ops) would
                // otherwise run into the next iteration's timing.
                || {
                    std::fs::remove_file(&out).ok();
                    // SAFETY: sync(2) takes no arguments and only flushes file systems.
                    unsafe { libc::sync() };
                },
                |()| {
                    let bundle = be.record(&sc, 0).expect("records");
                    bundle.write(&out).expect("writes");
                    bundle
                },
                BatchSize::PerIteration,
            )
        });
        be.record(&sc, 0)
            .expect("records")
            .write(&out)
            .expect("writes");
        g.bench_function(format!("read_back/{ops}"), |b| {
            b.iter_batched(
                || (),
                |()| ground_truth::Bundle::read(&out).expect("reads its own bundle"),
                BatchSize::PerIteration,
            )
        });
    }
    // Kernels on as many streams (issue #17: cubic in the streams before the
    // SM pool became a step function).
    for streams in [1_000u32, 5_000] {
        let sc = generator::sim::many_streams_scenario(streams);
        g.throughput(Throughput::Elements(streams as u64));
        g.bench_function(format!("record_many_streams/{streams}"), |b| {
            b.iter(|| be.record(&sc, 0).expect("records"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
