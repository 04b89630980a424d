//! How the pipeline's cost grows with the work: each stage measured at a base size, ×10
//! and ×100, and the fitted growth exponent (the slope of log time against log size)
//! printed beside it. An exponent above about 1.2 is super-linear work to fix, or to
//! name in the closing note of issue 20.
//!
//! - simulator: in the requests (the launch-bound case, `generator::sim::
//!   launch_bound_scenario`), in the streams (`many_streams_scenario`), in the requests of
//!   the four-handoff catalog case;
//! - the view derivation, every built-in profiler and the evaluator, on the launch-bound
//!   case's bundle;
//! - the exports: Perfetto (truth model and its protobuf) and Kineto.
//!
//! `cargo bench -p causalbench --bench growth` (add `-- views` etc. to pick stages).

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion};
use generator::sim::SimBackend;
use generator::Backend;
use ground_truth::io::Readable;
use ground_truth::labels::{Collectors, Mode};
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Bundle, Scenario, TraceView};
use std::time::Instant;

const GROWTH: [u64; 3] = [1, 10, 100];

/// The least-squares slope of ln(seconds) against ln(size).
fn exponent(points: &[(f64, f64)]) -> f64 {
    let logs: Vec<(f64, f64)> = points.iter().map(|(n, t)| (n.ln(), t.ln())).collect();
    let count = logs.len() as f64;
    let mean_x = logs.iter().map(|p| p.0).sum::<f64>() / count;
    let mean_y = logs.iter().map(|p| p.1).sum::<f64>() / count;
    let covariance: f64 = logs.iter().map(|(x, y)| (x - mean_x) * (y - mean_y)).sum();
    let variance: f64 = logs.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    covariance / variance
}

/// Benches `work` at each size of `sizes` in `group` (criterion's samples), keeps the
/// fastest mean per iteration of each size and prints the fitted exponent.
fn grow<S: Copy + std::fmt::Display + Into<f64>>(
    (group, group_name): &mut (BenchmarkGroup<WallTime>, &str),
    stage: &str,
    sizes: &[S],
    mut work: impl FnMut(S),
) {
    let mut points = Vec::new();
    for &size in sizes {
        let mut best = f64::INFINITY;
        group.bench_function(BenchmarkId::new(stage, size), |b| {
            b.iter_custom(|iters| {
                let started = Instant::now();
                for _ in 0..iters {
                    work(size);
                }
                let took = started.elapsed();
                best = best.min(took.as_secs_f64() / iters as f64);
                took
            })
        });
        points.push((size.into(), best));
    }
    let figures: Vec<String> = sizes
        .iter()
        .zip(&points)
        .map(|(size, (_, seconds))| format!("{size}: {:.3} ms", seconds * 1e3))
        .collect();
    println!(
        "growth: {group_name}/{stage}: exponent {:.2} ({})",
        exponent(&points),
        figures.join(", ")
    );
}

fn group<'a>(c: &'a mut Criterion, name: &'a str) -> (BenchmarkGroup<'a, WallTime>, &'a str) {
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    (group, name)
}

fn catalog(name: &str) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../catalog")
        .join(format!("{name}.yaml"));
    Scenario::read(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// The four-handoff case with `times` as many requests in each program.
fn handoffs(times: u32) -> Scenario {
    let mut scenario = catalog("request-identity-through-handoffs.hops-4");
    for program in &mut scenario.programs {
        program.requests *= times;
    }
    scenario
}

fn launch_bound_bundle(ops: u32) -> Bundle {
    SimBackend::default()
        .record(&generator::sim::launch_bound_scenario(ops), 0)
        .expect("the launch-bound case records")
}

const SPEC: ViewSpec = ViewSpec {
    collectors: Collectors::Combined,
    mode: Mode::Instrumented,
    loss: LossSpec::None,
};

fn simulator(c: &mut Criterion) {
    let backend = SimBackend::default();
    let mut g = group(c, "simulator");
    let requests: Vec<u32> = GROWTH.iter().map(|&k| 1_000 * k as u32).collect();
    let cases: Vec<Scenario> = requests
        .iter()
        .map(|&n| generator::sim::launch_bound_scenario(n))
        .collect();
    grow(&mut g, "requests", &requests, |n| {
        let i = requests.iter().position(|&r| r == n).expect("a size");
        generator::sim::simulate_only(&backend, &cases[i]);
    });
    let streams: Vec<u32> = GROWTH.iter().map(|&k| 10 * k as u32).collect();
    grow(&mut g, "streams", &streams, |n| {
        backend
            .record(&generator::sim::many_streams_scenario(n), 0)
            .expect("records");
    });
    let times: Vec<u32> = GROWTH.iter().map(|&k| k as u32).collect();
    grow(&mut g, "handoff-requests", &times, |k| {
        backend.record(&handoffs(k), 0).expect("records");
    });
    g.0.finish();
}

/// The launch-bound case's bundle and view at each size.
fn cases() -> Vec<(u32, Bundle, TraceView)> {
    GROWTH
        .iter()
        .map(|&k| {
            let ops = 1_000 * k as u32;
            let bundle = launch_bound_bundle(ops);
            let view = views::derive(&bundle, SPEC).view;
            (ops, bundle, view)
        })
        .collect()
}

fn pipeline(c: &mut Criterion) {
    let cases = cases();
    let sizes: Vec<u32> = cases.iter().map(|c| c.0).collect();
    let at = |n: u32| &cases[sizes.iter().position(|&s| s == n).expect("a size")];
    let mut g = group(c, "pipeline");
    grow(&mut g, "views", &sizes, |n| {
        views::derive(&at(n).1, SPEC);
    });
    for name in baselines::builtin_names() {
        let profiler = baselines::builtin(name).expect("a built-in profiler");
        grow(&mut g, name, &sizes, |n| {
            profiler.explain(&at(n).2);
        });
    }
    let profiler = baselines::builtin("causal-graph").expect("the reference profiler");
    let explanations: Vec<_> = cases.iter().map(|c| profiler.explain(&c.2)).collect();
    grow(&mut g, "evaluator", &sizes, |n| {
        let i = sizes.iter().position(|&s| s == n).expect("a size");
        evaluator::score_case(&cases[i].1, &cases[i].2, &explanations[i]);
    });
    grow(&mut g, "perfetto-export", &sizes, |n| {
        let (_, bundle, view) = at(n);
        exporters::perfetto::encode_perfetto(&exporters::perfetto::truth_model(bundle, Some(view)));
    });
    grow(&mut g, "kineto-export", &sizes, |n| {
        exporters::kineto::to_kineto_string(&at(n).2, &Default::default());
    });
    g.0.finish();
}

criterion_group!(benches, simulator, pipeline);
criterion_main!(benches);
