//! The scenario-size limit (README "Limits"): what a scenario may ask for is
//! refused at read time, before a backend allocates anything for it, and
//! times can never overflow the nanosecond timestamps of a bundle.

use super::{Scenario, Step};

/// Operations a scenario may execute: every request of every program, every
/// step of every request and every node of every graph launch, counted twice
/// when the scenario has an injection (its no-injection twin runs too). What a
/// recording holds in memory grows with this count, about 0.8 KB per
/// operation on the simulator (`causalbench measure large`: 8.2 GB at 10.1 M):
/// at the limit a recording stays under 10 GB, and the large case of issue 20
/// (`causalbench measure large --ops 10000000`, ten million launches, 10.1 M
/// operations) fits.
pub const MAX_SCENARIO_OPS: u64 = 12_000_000;

/// Host threads, every thread of every pool counted (the GPU backend starts
/// each one).
pub const MAX_HOST_THREADS: u64 = 1024;

/// Repetitions of one scenario (each is a bundle of its own).
pub const MAX_REPETITIONS: u32 = 10_000;

/// Bytes of one copy or memset (the GPU backend allocates them).
pub const MAX_TRANSFER_BYTES: u64 = 16 << 30;

/// Microseconds all of a scenario's times may add up to (every duration of
/// every request, the arrivals and the injection): about 11.6 days, so
/// nanosecond timestamps (u64) stay far from overflowing.
pub const MAX_SCENARIO_TIME_US: f64 = 1e12;

/// Threads per block that CUDA allows.
pub const MAX_BLOCK_THREADS: u32 = 1024;

/// Blocks per grid that CUDA allows (in x).
pub const MAX_GRID_BLOCKS: u32 = (1 << 31) - 1;

/// Problems with what `scenario` asks for, as (path, message).
pub(super) fn size_problems(scenario: &Scenario, bad: &mut dyn FnMut(String, String)) {
    for (path, name) in [
        ("name", &scenario.name),
        ("family", &scenario.family),
        ("variant", &scenario.variant),
    ] {
        if let Some(message) = crate::identifier::identifier_problem(name) {
            bad(path.into(), message);
        }
    }
    if scenario.repetitions > MAX_REPETITIONS {
        bad(
            "repetitions".into(),
            format!(
                "{} repetitions, over the limit of {MAX_REPETITIONS}",
                scenario.repetitions
            ),
        );
    }
    let threads: u64 = scenario.threads.iter().map(|t| u64::from(t.count)).sum();
    if threads > MAX_HOST_THREADS {
        bad(
            "threads".into(),
            format!("{threads} host threads, over the limit of {MAX_HOST_THREADS}"),
        );
    }
    let graph = |name: &str| scenario.graphs.iter().find(|g| g.name == name);
    let mut ops = 0u64;
    let mut time_us = scenario.injection.as_ref().map_or(0.0, |i| i.magnitude_us);
    for p in &scenario.programs {
        let requests = u64::from(p.requests);
        // The request itself, then its steps.
        let mut per_request_ops = 1u64;
        let mut per_request_us = 0.0;
        for s in &p.steps {
            per_request_ops += 1;
            match s {
                Step::HostWork { duration_us, .. } | Step::Kernel { duration_us, .. } => {
                    per_request_us += duration_us
                }
                Step::GraphLaunch { graph: name, .. } => {
                    if let Some(g) = graph(name) {
                        per_request_ops += g.nodes.len() as u64;
                        per_request_us += g.nodes.iter().map(|n| n.kernel.duration_us).sum::<f64>();
                    }
                }
                _ => {}
            }
        }
        ops = ops.saturating_add(requests.saturating_mul(per_request_ops));
        time_us += p.offset_us
            + p.interval_us * requests.saturating_sub(1) as f64
            + per_request_us * requests as f64;
    }
    let twin = if scenario.injection.is_some() { 2 } else { 1 };
    let ops = ops.saturating_mul(twin);
    if ops > MAX_SCENARIO_OPS {
        bad(
            "programs".into(),
            format!(
                "the programs execute {ops} operations (requests × (1 + steps){}), over the \
                 limit of {MAX_SCENARIO_OPS}",
                if twin == 2 {
                    ", twice: the no-injection twin runs too"
                } else {
                    ""
                }
            ),
        );
    }
    if time_us > MAX_SCENARIO_TIME_US {
        bad(
            "programs".into(),
            format!(
                "the scenario's times add up to {time_us:e} µs, over the limit of \
                 {MAX_SCENARIO_TIME_US:e} µs"
            ),
        );
    }
}

/// A time in µs: finite, non-negative and within [`MAX_SCENARIO_TIME_US`].
pub(super) fn check_time(v: f64, path: &str, bad: &mut dyn FnMut(String, String)) {
    if !(v.is_finite() && v >= 0.0) {
        bad(
            path.to_string(),
            format!("expected a finite, non-negative number, found {v}"),
        );
    } else if v > MAX_SCENARIO_TIME_US {
        bad(
            path.to_string(),
            format!("{v:e} µs is over the limit of {MAX_SCENARIO_TIME_US:e} µs"),
        );
    }
}

/// Bytes of one copy or memset: at most [`MAX_TRANSFER_BYTES`].
pub(super) fn check_bytes(bytes: u64, path: &str, bad: &mut dyn FnMut(String, String)) {
    if bytes > MAX_TRANSFER_BYTES {
        bad(
            path.to_string(),
            format!("{bytes} bytes, over the limit of {MAX_TRANSFER_BYTES}"),
        );
    }
}

/// A launch shape CUDA accepts.
pub(super) fn check_shape(grid: u32, block: u32, path: &str, bad: &mut dyn FnMut(String, String)) {
    if grid == 0 || block == 0 {
        bad(
            format!("{path}.grid"),
            "grid and block must be at least 1".into(),
        );
    }
    if grid > MAX_GRID_BLOCKS {
        bad(
            format!("{path}.grid"),
            format!("{grid} blocks, over CUDA's limit of {MAX_GRID_BLOCKS}"),
        );
    }
    if block > MAX_BLOCK_THREADS {
        bad(
            format!("{path}.block"),
            format!("{block} threads per block, over CUDA's limit of {MAX_BLOCK_THREADS}"),
        );
    }
}
