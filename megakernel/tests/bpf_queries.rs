//! The program-only queries on simulated task logs: the reference
//! interpreter's answers (read from the programs' maps) equal the ground
//! truth computed from the full task log of the same launch, on static and on
//! dynamic (data-dependent MoE routing) task graphs.

use megakernel::bpf::evaluate::{graphs, run, summarize, SimPrograms};
use megakernel::bpf::programs;
use megakernel::catalog;
use megakernel::sim::SimCosts;

#[test]
fn every_query_is_answered_exactly_on_static_and_dynamic_graphs() {
    if let Some(why) = programs::unavailable() {
        eprintln!("SKIP every_query_is_answered_exactly_on_static_and_dynamic_graphs: {why}");
        return;
    }
    let all = catalog::load().expect("catalog");
    // One variant per kind of injection, on a small machine to keep the test short.
    let pick: Vec<_> = all
        .into_iter()
        .filter(|s| {
            [
                "mk-exec-vs-notify.late-notify",
                "mk-exec-vs-notify.slow-class",
                "mk-skew-vs-slow-class.skewed",
                "mk-burst-vs-starve.starved",
            ]
            .contains(&s.name.as_str())
        })
        .collect();
    assert_eq!(pick.len(), 4);
    let g = graphs(&pick, 32);
    assert_eq!(g.len(), 10);
    // Dynamic routing moved gemm tasks in at least one graph.
    assert!(g
        .chunks(2)
        .any(|p| p[0].schedule.tasks != p[1].schedule.tasks));
    let rows = run(&mut SimPrograms(SimCosts::default()), &g, 7).expect("runs");
    assert_eq!(rows.len(), 10 * 5);
    for r in &rows {
        assert!(
            r.ebpf_correct,
            "{} {} {}: eBPF {:?} vs truth {:?}",
            r.graph, r.kind, r.query, r.ebpf, r.truth
        );
        assert_eq!(r.ebpf_coverage, 1.0);
    }
    // The questions are not trivial: some answers are non-zero, and the
    // fixed configuration misses some of them.
    for r in &rows {
        eprintln!(
            "{} {} {}: truth {:?} config {:?}",
            r.graph,
            r.kind,
            r.query,
            &r.truth[..r.truth.len().min(6)],
            &r.config[..r.config.len().min(6)]
        );
    }
    for q in megakernel::bpf::queries::QUERIES.iter() {
        assert!(
            rows.iter()
                .any(|r| r.query == q.name && r.truth.iter().any(|&v| v != 0)),
            "{}: every answer is zero",
            q.name
        );
    }
    let wrong = rows.iter().filter(|r| !r.config_correct).count();
    for s in summarize(&rows) {
        eprintln!("{s:?}");
    }
    assert!(wrong > 0, "the fixed configuration answered everything");
}
