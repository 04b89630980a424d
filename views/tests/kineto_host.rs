//! The `kineto+host` view of a torch bundle (docs/torch-track.md, "kineto+host"):
//! it exists where the eBPF host recorder ran beside Kineto, and keeps Kineto's
//! records and the host recorder's; the `kineto` view keeps no host record.

use ground_truth::trace::{Record, Source};
use ground_truth::{Bundle, Collectors, Readable};
use std::path::PathBuf;

#[test]
fn kineto_host_views_exist_only_with_host_records_and_keep_them() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../results/corpus/h200-580-kineto/implicit-synchronization.copy-forced-fence.r0.bundle.json.gz",
    );
    if !path.is_file() {
        eprintln!("skipped: {} is not committed", path.display());
        return;
    }
    let recorded = Bundle::read(&path).unwrap();
    let kinds = |b: &Bundle| -> Vec<Collectors> {
        let mut c: Vec<Collectors> = views::standard_specs_of(b)
            .iter()
            .map(|s| s.collectors)
            .collect();
        c.dedup();
        c
    };
    // The corpus was recorded with the host recorder: both kinds of view.
    assert_eq!(
        kinds(&recorded),
        vec![Collectors::Kineto, Collectors::KinetoHost]
    );
    // Without its host records the bundle has only the `kineto` views.
    let mut bundle = recorded.clone();
    bundle.trace.retain(|r| r.source() != Source::Ebpf);
    assert_eq!(kinds(&bundle), vec![Collectors::Kineto]);
    // One host record on the fence's thread, as the recorder would add it.
    let (tid, start) = bundle
        .trace
        .iter()
        .find_map(|r| match r {
            Record::Api { tid, start, .. } => Some((*tid, *start)),
            _ => None,
        })
        .unwrap();
    let rid = bundle.trace.iter().map(|r| r.rid()).max().unwrap() + 1;
    bundle.trace.push(Record::Uprobe {
        rid,
        tid,
        function: "cuMemcpyDtoHAsync_v2".into(),
        enter: start,
        exit: start + 10,
        handle: 0,
        stack: vec!["py::Run.copy:<string>".into()].into(),
    });
    assert_eq!(
        kinds(&bundle),
        vec![Collectors::Kineto, Collectors::KinetoHost]
    );
    for spec in views::standard_specs_of(&bundle)
        .into_iter()
        .filter(|s| s.loss == ground_truth::view::LossSpec::None)
    {
        let view = views::derive(&bundle, spec).view;
        let host = view
            .records
            .iter()
            .filter(|r| r.source() == Source::Ebpf)
            .count();
        let device = view
            .records
            .iter()
            .filter(|r| r.source() == Source::Cupti)
            .count();
        assert!(device > 0, "{}: Kineto's records", spec.label());
        let expected = usize::from(spec.collectors == Collectors::KinetoHost);
        assert_eq!(host, expected, "{}", spec.label());
    }
}
