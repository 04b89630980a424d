//! `hta-critical-path` on the native Kineto traces of the committed PyTorch corpus
//! (results/corpus/h200-580-kineto, docs/torch-track.md): every record of a loss-free
//! `kineto` view that Kineto's trace has is joined to its event, and HTA's answer on one
//! native trace is a valid explanation, scored like any profiler's. The HTA part is
//! skipped (with a message) when HTA is not installed, unless CAUSALBENCH_REQUIRE_HTA=1.

use baselines::hta::{self, HtaCriticalPath};
use baselines::hta_native::{native_trace_beside, rids_of_events};
use baselines::Profiler;
use ground_truth::trace::Record;
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Bundle, Collectors, Mode, Readable};
use std::collections::HashSet;
use std::path::PathBuf;

fn corpus() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../results/corpus/h200-580-kineto");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: {} is not committed", dir.display());
        None
    }
}

fn kineto_view(mode: Mode) -> ViewSpec {
    ViewSpec {
        collectors: Collectors::Kineto,
        mode,
        loss: LossSpec::None,
    }
}

/// The records of a view that stand for one event of Kineto's trace.
fn joinable(r: &Record) -> bool {
    matches!(
        r,
        Record::Api { .. }
            | Record::Kernel { .. }
            | Record::Memcpy { .. }
            | Record::Memset { .. }
            | Record::Sync { .. }
    )
}

#[test]
fn every_kineto_record_of_a_view_is_joined_to_one_native_event() {
    let Some(dir) = corpus() else { return };
    let (mut records, mut joined, mut bundles) = (0usize, 0usize, 0usize);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".bundle.json.gz"))
        .collect();
    paths.sort();
    // One bundle of each scenario variant (the first repetition) keeps the test short.
    for path in paths
        .iter()
        .filter(|p| p.to_string_lossy().contains(".r0."))
    {
        let trace = native_trace_beside(path).expect("the native trace beside the bundle");
        let activities = kineto::read_activities(&trace).unwrap();
        let bundle = Bundle::read(path).unwrap();
        let view = views::derive(&bundle, kineto_view(Mode::Closed)).view;
        let rids = rids_of_events(&activities, &view);
        let distinct: HashSet<u64> = rids.values().copied().collect();
        assert_eq!(
            distinct.len(),
            rids.len(),
            "{}: a rid joined twice",
            path.display()
        );
        records += view.records.iter().filter(|r| joinable(r)).count();
        joined += rids.len();
        bundles += 1;
    }
    eprintln!("{joined} of {records} records joined over {bundles} bundles");
    assert!(bundles >= 20, "{bundles} scenario variants");
    // Every record of a torch bundle's kineto view is one of Kineto's events.
    assert_eq!(joined, records);
}

#[test]
fn hta_on_a_native_trace_explains_and_is_scored() {
    let Some(dir) = corpus() else { return };
    let bundle_path = dir.join("dependency-vs-overlap.event-edge.r0.bundle.json.gz");
    let bundle = Bundle::read(&bundle_path).unwrap();
    let spec = kineto_view(Mode::Closed);
    let view = views::derive(&bundle, spec).view;
    // Without the native trace HTA does not answer a kineto view at all.
    assert!(baselines::profiler_for(hta::NAME, &spec, None).is_none());
    let lossy = ViewSpec {
        loss: LossSpec::Targeted { seed: 1 },
        ..spec
    };
    assert!(baselines::profiler_for(hta::NAME, &lossy, Some(&bundle_path)).is_none());
    if !hta::hta_available() {
        let msg =
            "SKIPPED: HolisticTraceAnalysis is not importable (bash baselines/hta/setup-hta.sh)";
        if std::env::var("CAUSALBENCH_REQUIRE_HTA").is_ok_and(|v| v == "1") {
            panic!("{msg}");
        }
        eprintln!("{msg}");
        return;
    }
    // An HTA without the file says why instead of answering from an export.
    let x = HtaCriticalPath::default().explain(&view);
    let failure = x.meta.failure.as_deref().unwrap_or_default();
    assert!(failure.contains("no native Kineto trace"), "{failure}");
    let p = baselines::profiler_for(hta::NAME, &spec, Some(&bundle_path)).unwrap();
    let x = p.explain(&view);
    assert!(x.meta.failure.is_none(), "{:?}", x.meta.failure);
    x.check_against(&bundle_path, &view).unwrap();
    assert!(!x.edges.is_empty());
    assert!(x.diagnoses.iter().all(|d| d.complete));
    let s = evaluator::score_case(&bundle, &view, &x);
    assert_eq!(s.profiler, hta::NAME);
    // HTA's launch links on Kineto's own trace are the true launch edges.
    let launches = x
        .edges
        .iter()
        .filter(|e| e.kind == ground_truth::EdgeType::Launch)
        .count();
    assert!(launches > 0);
    eprintln!(
        "{} edges ({launches} launches), precision {:?}, claimed {:?}",
        x.edges.len(),
        s.edges.precision,
        s.symptoms.first().and_then(|y| y.claimed_cause)
    );
}
