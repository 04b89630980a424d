//! Stopping the eBPF recorder names every captured user stack (recorder-ebpf/src/stacks.rs).
//! This bench names 100,000 synthetic stacks of this process (frames drawn from a few
//! thousand addresses inside its own code, as a launch loop's stacks come from a few call
//! sites) and prints the time per 100,000 stacks beside the target: at most 1 s.

use criterion::{criterion_group, criterion_main, Criterion};
use ebpf_recorder::StackBook;
use std::time::Instant;

const STACKS: usize = 100_000;
const DEPTH: usize = 16;

#[inline(never)]
fn anchor(x: u64) -> u64 {
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// `count` stacks from `distinct` different stacks over `addresses` distinct addresses of
/// this process's code.
fn synthetic_stacks(count: usize, distinct: usize, addresses: u64) -> Vec<Vec<u64>> {
    let base = anchor as *const () as usize as u64;
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let shapes: Vec<Vec<u64>> = (0..distinct)
        .map(|_| {
            (0..DEPTH)
                .map(|_| base + (next() % addresses) * 16)
                .collect()
        })
        .collect();
    (0..count).map(|i| shapes[i % distinct].clone()).collect()
}

/// A book that has normalized every address of `stacks`, as the recorder's book has by
/// the time it stops (it normalizes while the target runs).
fn normalized(stacks: &[Vec<u64>]) -> StackBook {
    let mut book = StackBook::new(std::process::id());
    for st in stacks {
        book.note(st.iter().copied());
    }
    book.flush();
    book
}

fn bench(c: &mut Criterion) {
    for (label, distinct) in [("500 distinct", 500), ("all distinct", STACKS)] {
        let stacks = synthetic_stacks(STACKS, distinct, 4_000);
        let mut book = normalized(&stacks);
        let started = Instant::now();
        let frames: usize = book.symbolize(&stacks).iter().map(Vec::len).sum();
        println!(
            "symbolize: {STACKS} stacks ({label}, {frames} frames over 4000 addresses) in {:.3} s (target ≤ 1 s)",
            started.elapsed().as_secs_f64()
        );
        let mut group = c.benchmark_group("symbolize");
        group.sample_size(10);
        group.bench_function(format!("{STACKS} stacks, {label}"), |b| {
            b.iter(|| book.symbolize(&stacks))
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
