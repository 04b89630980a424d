//! The name and noise attacks of docs/integrity.md on simulator bundles of the catalog,
//! each shown to fail: (a) a names-only probe sees the same kernel names, stack
//! frames and copy sizes with and without the injection; (b) "a preempted
//! `sched` record means cpu_deschedule" is wrong on many bundles; (c)
//! repetitions of one scenario give different symptom lateness.

use generator::sim::SimBackend;
use generator::Backend;
use ground_truth::io::Readable;
use ground_truth::trace::{Record, SwitchReason};
use ground_truth::{Bundle, CauseLabel, Scenario};
use std::collections::BTreeSet;

fn catalog() -> Vec<Scenario> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalog");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("catalog directory")
        .map(|e| e.expect("catalog entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| Scenario::read(p).expect("catalog scenario"))
        .collect()
}

fn scenario(name: &str) -> Scenario {
    catalog()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{name} is in the catalog"))
}

fn record(sc: &Scenario, rep: u32) -> Bundle {
    SimBackend::default()
        .record(sc, rep)
        .unwrap_or_else(|e| panic!("{}: {e}", sc.name))
}

/// What a names-only probe reads in the fullest view (every record of every
/// collector, which each narrower view only subsets): kernel names, stack
/// frames and the byte counts of copies and memsets.
#[derive(Debug, PartialEq, Eq)]
struct Names {
    kernels: BTreeSet<String>,
    frames: BTreeSet<String>,
    bytes: BTreeSet<u64>,
}

fn names(b: &Bundle) -> Names {
    let mut n = Names {
        kernels: BTreeSet::new(),
        frames: BTreeSet::new(),
        bytes: BTreeSet::new(),
    };
    for r in &b.trace {
        match r {
            Record::Kernel { detail, .. } => {
                n.kernels.insert(detail.name.to_string());
            }
            Record::Uprobe { stack, .. } => n.frames.extend(stack.iter().map(|f| f.to_string())),
            Record::Memcpy { detail, .. } => {
                n.bytes.insert(detail.bytes);
            }
            Record::Memset { detail, .. } => {
                n.bytes.insert(detail.bytes);
            }
            _ => {}
        }
    }
    n
}

/// (a) Injected work is anonymous: every bundle of an injected scenario shows
/// exactly the names its uninjected twin shows, so no names-only probe can tell
/// a pair's variants apart beyond what the application itself differs in.
#[test]
fn a_names_only_probe_sees_the_application_names_with_or_without_the_injection() {
    let suspicious = ["injector", "hog", "backlog", "unrelated", "causalbench"];
    let mut compared = 0;
    for sc in catalog() {
        let mut quiet = sc.clone();
        quiet.injection = None;
        for rep in 0..3 {
            let injected = names(&record(&sc, rep));
            let plain = names(&record(&quiet, rep));
            for s in injected.kernels.iter().chain(&injected.frames) {
                assert!(
                    !suspicious.iter().any(|w| s.contains(w)),
                    "{} r{rep}: `{s}` names the injector",
                    sc.name
                );
            }
            assert_eq!(injected, plain, "{} r{rep}", sc.name);
            compared += 1;
        }
    }
    assert!(compared >= 60, "only {compared} bundles compared");
}

/// (b) Background noise: a preempted `sched` record is no evidence of
/// cpu_deschedule, since real hosts preempt application threads anyway.
#[test]
fn a_preempted_record_alone_does_not_mean_cpu_deschedule() {
    let (mut others, mut others_preempted, mut deschedule_preempted) = (0, 0, 0);
    for sc in catalog() {
        for rep in 0..5 {
            let b = record(&sc, rep);
            let preempted = b.trace.iter().any(|r| {
                matches!(
                    r,
                    Record::Sched {
                        reason: SwitchReason::Preempted,
                        ..
                    }
                )
            });
            if sc.cause == CauseLabel::CpuDeschedule {
                deschedule_preempted += preempted as u32;
            } else {
                others += 1;
                others_preempted += preempted as u32;
            }
        }
    }
    let precision =
        deschedule_preempted as f64 / (deschedule_preempted + others_preempted).max(1) as f64;
    eprintln!(
        "probe `preempted sched => cpu_deschedule`: fires on {others_preempted} of {others} \
         non-deschedule bundles and {deschedule_preempted} deschedule bundles (precision {precision:.2})"
    );
    assert!(
        others_preempted * 5 >= others,
        "only {others_preempted} of {others} non-deschedule bundles have a natural preemption"
    );
    assert!(precision < 0.5, "the probe's precision is {precision:.2}");
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// (c) Repetitions differ: the twin's noise is independent of the run's, so
/// the negative control's symptom lateness varies from repetition to repetition.
#[test]
fn repetitions_give_different_symptom_lateness() {
    let sc = scenario("concurrent-work.harmless");
    let mut lateness_us: Vec<f64> = (0..20)
        .map(|rep| record(&sc, rep).ground_truth.symptoms[0].lateness_ns / 1000.0)
        .collect();
    lateness_us.sort_by(f64::total_cmp);
    let (p10, p50, p90) = (
        quantile(&lateness_us, 0.1),
        quantile(&lateness_us, 0.5),
        quantile(&lateness_us, 0.9),
    );
    eprintln!(
        "concurrent-work.harmless symptom lateness over 20 reps (us): p10 {p10:.1} p50 {p50:.1} p90 {p90:.1}"
    );
    let mut distinct = lateness_us.clone();
    distinct.dedup();
    assert!(distinct.len() >= 15, "{lateness_us:?}");
    assert!(p90 - p10 >= 2.0, "{lateness_us:?}");
    // Noise stays far below the catalog's smallest injection (1 ms).
    assert!(
        lateness_us.iter().all(|l| l.abs() < 200.0),
        "{lateness_us:?}"
    );
}

/// Noise is seeded: the same scenario and repetition give the same bytes.
#[test]
fn the_same_seed_gives_the_same_bundle() {
    for sc in catalog().iter().step_by(4) {
        let a = serde_json::to_vec(&record(sc, 1)).unwrap();
        let b = serde_json::to_vec(&record(sc, 1)).unwrap();
        assert!(a == b, "{}", sc.name);
    }
}

/// The simulator's default noise rates are the ones measured on the H200
/// corpus (docs/records.md, "Background noise"): natural preemptions and page
/// faults, those that no injected fault node owns, in the bundles without a host
/// injection, per second of application-thread activity (each thread's API span).
#[test]
fn the_default_noise_rates_are_the_h200_corpus_rates() {
    use ground_truth::graph::NodeKind;
    use ground_truth::scenario::InjectionKind;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/corpus/h200-580");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("SKIP: no corpus at {}", dir.display());
        return;
    };
    let mut paths: Vec<_> = entries
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".bundle.json.gz"))
        .collect();
    paths.sort();
    let (mut bundles, mut with_natural, mut preemptions, mut faults) = (0, 0, 0, 0);
    let (mut thread_s, mut off_cpu_us) = (0.0, Vec::new());
    for p in &paths {
        let b = Bundle::read(p).expect("corpus bundle");
        let host_injection = b.manifest.scenario.injection.as_ref().is_some_and(|i| {
            matches!(
                i.kind,
                InjectionKind::CpuDeschedule
                    | InjectionKind::HostPageFaultMinor
                    | InjectionKind::HostPageFaultMajor
            )
        });
        if host_injection {
            continue;
        }
        bundles += 1;
        let injected: BTreeSet<_> = b
            .ground_truth
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::InjectedFault)
            .flat_map(|n| n.rids.iter().copied())
            .collect();
        let mut spans: std::collections::BTreeMap<u32, (u64, u64)> = Default::default();
        let (mut p_here, mut f_here) = (0, 0);
        for r in b.trace.iter().filter(|r| !injected.contains(&r.rid())) {
            match r {
                Record::Api {
                    tid, start, end, ..
                } => {
                    let s = spans.entry(*tid).or_insert((*start, *end));
                    *s = (s.0.min(*start), s.1.max(*end));
                }
                Record::Sched {
                    reason,
                    switch_out,
                    switch_in,
                    ..
                } if *reason != SwitchReason::Blocked => {
                    p_here += 1;
                    off_cpu_us.push((switch_in - switch_out) as f64 / 1000.0);
                }
                Record::PageFault { .. } => f_here += 1,
                _ => {}
            }
        }
        // Every API-calling thread is active over the whole span of the run's calls.
        let first = spans.values().map(|s| s.0).min().unwrap_or(0);
        let last = spans.values().map(|s| s.1).max().unwrap_or(0);
        thread_s += (last - first) as f64 / 1e9 * spans.len() as f64;
        with_natural += (p_here + f_here > 0) as u32;
        preemptions += p_here;
        faults += f_here;
    }
    if bundles == 0 {
        eprintln!("SKIP: the corpus at {} has no bundles", dir.display());
        return;
    }
    off_cpu_us.sort_by(f64::total_cmp);
    let per_s = |n: u32| n as f64 / thread_s;
    eprintln!(
        "H200 corpus: {with_natural} of {bundles} bundles without a host injection have a natural \
         preemption or page fault; {preemptions} preemptions ({:.1}/thread-s), {faults} page faults \
         ({:.1}/thread-s) over {thread_s:.2} thread-s; off-CPU p10 {:.1} p50 {:.1} p90 {:.1} max {:.1} us",
        per_s(preemptions),
        per_s(faults),
        quantile(&off_cpu_us, 0.1),
        quantile(&off_cpu_us, 0.5),
        quantile(&off_cpu_us, 0.9),
        off_cpu_us.last().copied().unwrap_or(0.0),
    );
    let params = generator::sim::NoiseParams::default();
    // A recording's natural stalls are a Poisson count: a default rate agrees with the
    // corpus when the count it predicts lies within three standard deviations of the
    // count seen (re-recordings of the corpus differed by about 15 %).
    let agrees = |rate: f64, seen: u32| {
        (rate * thread_s - seen as f64).abs() <= 3.0 * (seen as f64).sqrt().max(1.0)
    };
    assert!(
        agrees(params.preemptions_per_s, preemptions),
        "preemptions: default {} /s, corpus {preemptions} in {thread_s:.2} thread-s",
        params.preemptions_per_s
    );
    assert!(
        agrees(params.faults_per_s, faults),
        "page faults: default {} /s, corpus {faults} in {thread_s:.2} thread-s",
        params.faults_per_s
    );
    let p50 = params.preemption_ns[1] as f64 / 1000.0;
    let corpus_p50 = quantile(&off_cpu_us, 0.5);
    assert!(
        (p50 - corpus_p50).abs() <= 0.35 * corpus_p50,
        "off-CPU p50: default {p50} us, corpus {corpus_p50} us"
    );
}

/// Noise never makes a case's label wrong: every injection still moves its
/// symptom by about its magnitude, in every repetition, and the fault nodes
/// and edges the ground truth had without noise are still there.
#[test]
fn noise_stays_below_every_injection_of_the_catalog() {
    use ground_truth::scenario::InjectionKind;
    for sc in catalog() {
        let Some(inj) = &sc.injection else { continue };
        for rep in 0..5 {
            let b = record(&sc, rep);
            let lateness_us = b.ground_truth.symptoms[0].lateness_ns / 1000.0;
            eprintln!(
                "{} r{rep}: {:?} magnitude {} us, lateness {lateness_us:.1} us",
                sc.name, inj.kind, inj.magnitude_us
            );
            let harmless = matches!(
                inj.kind,
                InjectionKind::UnrelatedWork | InjectionKind::RecordLoss
            ) || sc.cause == CauseLabel::None;
            if harmless {
                continue;
            }
            assert!(
                lateness_us > 0.5 * inj.magnitude_us,
                "{} r{rep}: lateness {lateness_us:.1} us for a {} us injection",
                sc.name,
                inj.magnitude_us
            );
        }
    }
}

/// The injector's thread is not always the one with the highest thread id.
#[test]
fn the_injector_thread_id_is_not_always_the_last() {
    use ground_truth::graph::EdgeType;
    let sc = scenario("late-launch-vs-device-queueing.occupancy-hog");
    let mut highest = 0;
    for rep in 0..10 {
        let b = record(&sc, rep);
        let truth = &b.ground_truth;
        let hog = truth.injections[0]
            .fault_node
            .expect("the hog delayed the target");
        let call = truth
            .edges
            .iter()
            .find(|e| e.dst == hog && e.kind == EdgeType::Launch)
            .expect("a launched kernel")
            .src;
        let rids = &truth.nodes[call as usize].rids;
        let tid_of = |r: &Record| match r {
            Record::Api { tid, .. } => Some(*tid),
            _ => None,
        };
        let tid = b
            .trace
            .iter()
            .filter(|r| rids.contains(&r.rid()))
            .find_map(tid_of)
            .expect("the call's api record");
        let max = b.trace.iter().filter_map(tid_of).max().unwrap();
        highest += (tid == max) as u32;
    }
    assert!(
        highest < 10,
        "the injector had the highest tid in every repetition"
    );
}

/// A scenario's `names:` pool names its injected kernels.
#[test]
fn injected_kernels_take_their_names_from_the_pool() {
    let mut sc = scenario("late-launch-vs-device-queueing.occupancy-hog");
    sc.names = vec!["attn_fwd".into(), "gemm".into()];
    let seen = names(&record(&sc, 0)).kernels;
    let expected: BTreeSet<String> = ["prep", "gemm", "attn_fwd"].map(String::from).into();
    assert_eq!(seen, expected);
}
