//! Tests of the readers and writers (`io.rs`).

use super::chunked::CHUNK;
use super::*;

#[test]
fn an_unknown_variant_lists_every_valid_value_wrapped_and_cuts_only_the_value() {
    let value = "x".repeat(10_000);
    let valid: Vec<String> = (0..40).map(|i| format!("`label_number_{i}`")).collect();
    let msg = format!(
        "unknown variant `{value}`, expected one of {} at line 1 column 9",
        valid.join(", ")
    );
    let m = parser_message(&msg);
    for v in &valid {
        assert!(m.contains(v.as_str()), "{v} missing: {m}");
    }
    assert!(m.contains("expected one of these 40:"), "{m}");
    assert!(m.chars().count() < 2_000, "the value is cut: {m}");
    assert!(!m.contains("at line"), "{m}");
    let lines: Vec<&str> = m.lines().skip(1).collect();
    assert!(lines.len() > 1, "{m}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("  ") && l.chars().count() <= 80),
        "{m}"
    );
    // A short message without a list is unchanged.
    assert_eq!(
        parser_message("expected `a` or `b` at line 1 column 2"),
        "expected `a` or `b`"
    );
}

#[test]
fn large_outputs_are_written_whole_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.bin");
    // Several chunks plus a tail, with a pattern that shows misordering.
    let bytes: Vec<u8> = (0..(3 * CHUNK + 12_345)).map(|i| (i % 251) as u8).collect();
    write_atomic(&file, &bytes).unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    let values: Vec<u64> = (0..2_000_000).collect();
    write_json_atomic(&file, &values).unwrap();
    assert_eq!(
        std::fs::read(&file).unwrap(),
        serde_json::to_vec(&values).unwrap()
    );
}

/// Every record kind with every field set, repeated past the size at
/// which the arrays are serialized in parallel.
pub(super) fn big_bundle() -> Bundle {
    let scenario = Scenario::parse(
        Path::new("dependency-vs-overlap.event-edge.yaml"),
        include_bytes!("../../../catalog/dependency-vs-overlap.event-edge.yaml"),
    )
    .unwrap();
    let ground_truth = big_truth(scenario.cause);
    Bundle {
        schema_version: crate::SCHEMA_VERSION,
        manifest: crate::Manifest {
            scenario,
            seed: 1,
            repetition: 0,
            backend: "sim".into(),
            gpu: "g".into(),
            driver: "d".into(),
            cuda: "c".into(),
            cupti: "p".into(),
            tool_version: "0".into(),
            host: "h".into(),
            collectors: vec!["cupti".into()],
            cross_check: Some(Default::default()),
            cupti_capabilities: None,
        },
        ground_truth,
        trace: (0..7_000).flat_map(one_record_of_each_kind).collect(),
        loss: crate::LossAccounting {
            cupti_dropped: 1,
            cupti_timestamps_dropped: 2,
            ringbuffer_dropped: 3,
            cupti_unobservable: 4,
        },
    }
}

/// A shared string, as records and nodes hold names.
fn shared(t: &str) -> crate::SharedStr {
    crate::SharedStr::from(t)
}

/// The `i`th run of records: one of each kind, every field set, rids `12 i + 1 ..`.
fn one_record_of_each_kind(i: u64) -> [crate::trace::Record; 12] {
    use crate::trace::*;
    let rid = i * 12 + 1;
    [
        Record::Api {
            rid,
            domain: ApiDomain::Driver,
            cbid: 7,
            name: shared("cuLaunchKernel"),
            tid: 3,
            start: i,
            end: i + 1,
            correlation_id: 9,
        },
        Record::Kernel {
            rid: rid + 1,
            stream: 1,
            correlation_id: 4,
            queued: 7,
            submitted: 8,
            start: 9,
            end: 10,
            detail: crate::trace::KernelDetail {
                name: shared("k\"q"),
                context: 2,
                device: 3,
                graph_id: 5,
                graph_node_id: 6,
                grid: [1, 2, 3],
                block: [4, 5, 6],
                channel: 11,
            }
            .into(),
        },
        Record::Memcpy {
            rid: rid + 2,
            direction: CopyDirection::D2h,
            memory: HostMemory::Pageable,
            stream: 2,
            correlation_id: 5,
            queued: 8,
            submitted: 9,
            start: 10,
            end: 11,
            detail: crate::trace::CopyDetail {
                bytes: 1,
                context: 3,
                device: 4,
                graph_id: 6,
                graph_node_id: 7,
                channel: 12,
            }
            .into(),
        },
        Record::Memset {
            rid: rid + 3,
            stream: 2,
            correlation_id: 5,
            queued: 6,
            submitted: 7,
            start: 8,
            end: 9,
            detail: crate::trace::MemsetDetail {
                bytes: 1,
                context: 3,
                device: 4,
            }
            .into(),
        },
        Record::Sync {
            rid: rid + 4,
            sync_type: SyncType::EventSynchronize,
            stream: 1,
            event: 2,
            event_sync_id: 3,
            correlation_id: 4,
            start: 5,
            end: 6,
        },
        Record::CudaEvent {
            rid: rid + 5,
            event: 1,
            event_sync_id: 2,
            stream: 3,
            correlation_id: 4,
            ts: 5,
        },
        Record::ExternalCorrelation {
            rid: rid + 6,
            external_kind: shared("request"),
            external_id: 1,
            correlation_id: 2,
        },
        Record::Nvtx {
            rid: rid + 7,
            tid: 1,
            name: shared("attention"),
            start: 2,
            end: 3,
        },
        Record::Marker {
            rid: rid + 8,
            tid: 1,
            phase: MarkerPhase::Enqueue,
            queue: shared("q"),
            token: shared("7"),
            ts: 2,
        },
        Record::Uprobe {
            rid: rid + 9,
            tid: 1,
            function: shared("cuLaunchKernel"),
            enter: 2,
            exit: 3,
            handle: 4,
            stack: vec![shared("a"), shared("b")].into(),
        },
        Record::Sched {
            rid: rid + 10,
            tid: 1,
            cpu: 2,
            switch_out: 3,
            switch_in: 4,
            reason: SwitchReason::Traced,
        },
        Record::PageFault {
            rid: rid + 11,
            tid: 1,
            ts: 2,
            duration: 3,
            address: 4,
            major: true,
        },
    ]
}

/// A chain of 70,000 nodes with every field set (edges cycling through the edge types)
/// and one symptom with the scenario's cause.
fn big_truth(cause: crate::CauseLabel) -> crate::GroundTruth {
    use crate::graph::{Edge, EdgeType, Node, Phases, Symptom};
    let n = 70_000u32;
    let nodes = (0..n)
        .map(|i| Node {
            id: i,
            kind: NodeKind::Kernel,
            name: shared("k"),
            request: (i % 2 == 0).then(|| shared("1")),
            step: Some(shared("producer")),
            detail: crate::graph::NodeDetail {
                thread: Some(4),
                stream: (i % 3 == 0).then_some(13),
                call_site: Some(shared("app!site")),
                operator: Some(shared("mlp")),
            }
            .into(),
            generation: i % 2,
            start: 1,
            end: 2,
            queued: (i % 5) as u64,
            submitted: 4,
            rids: [i as u64].into_iter().collect(),
        })
        .collect();
    let edges = (1..n)
        .map(|i| Edge {
            src: i - 1,
            dst: i,
            kind: EdgeType::ALL[i as usize % 9],
        })
        .collect();
    let symptom = Symptom {
        id: "q0".into(),
        node: 1,
        rid: 2,
        question: crate::Question::Cause,
        cause,
        answer: None,
        lateness_ns: 1.5,
        critical_path: vec![0, 1],
        phases: Phases::default(),
        boundaries: vec![],
        label: None,
    };
    crate::GroundTruth {
        nodes,
        edges,
        symptoms: vec![symptom],
        injections: vec![],
    }
}

/// A bundle small enough to mutate many times, and its view.
pub(super) fn small_bundle_and_view() -> (Bundle, TraceView) {
    let mut bundle = big_bundle();
    bundle.ground_truth.nodes.truncate(4);
    bundle.ground_truth.edges.truncate(3);
    bundle.trace.truncate(14);
    let view = TraceView {
        schema_version: crate::SCHEMA_VERSION,
        bundle: bundle.id(),
        spec: crate::ViewSpec {
            collectors: crate::Collectors::Combined,
            mode: crate::Mode::Instrumented,
            loss: crate::view::LossSpec::Uniform { rate: 0.5, seed: 3 },
        },
        queries: vec![crate::view::Query {
            id: "q0".into(),
            rid: 2,
            question: crate::Question::Cause,
        }],
        collector_loss: bundle.loss,
        records: bundle.trace.clone(),
    };
    (bundle, view)
}

/// The quick parser of `T` accepts `bytes` exactly when the tracked parser
/// does, and then reads the same value.
fn parsers_agree<T: Readable + PartialEq + fmt::Debug>(bytes: &[u8]) {
    let quick = T::parse_json_quickly(bytes);
    let tracked = from_json_tracked::<T>(Path::new("f.json"), bytes);
    match (quick, tracked) {
        (Some(q), Ok(t)) => assert!(q == t, "the parsers read different values"),
        (None, Err(_)) => {}
        (q, t) => panic!(
            "quick parser accepted: {}, tracked parser: {t:?}\n{}",
            q.is_some(),
            String::from_utf8_lossy(bytes)
        ),
    }
}

#[test]
fn the_quick_parsers_read_what_was_written() {
    let bundle = big_bundle();
    let bytes = serde_json::to_vec(&bundle).unwrap();
    let quick = Bundle::parse_json_quickly(&bytes).expect("a well-formed bundle");
    assert!(quick == bundle);
    let (_, mut view) = small_bundle_and_view();
    view.records = bundle.trace.clone();
    let bytes = serde_json::to_vec(&view).unwrap();
    assert!(TraceView::parse_json_quickly(&bytes).expect("a well-formed view") == view);
}

#[test]
fn large_files_are_parsed_from_a_map_and_errors_still_name_the_place() {
    let bundle = big_bundle();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("b.bundle.json");
    // JSON may end in any amount of whitespace: a few megabytes of bundle,
    // a file large enough to be mapped.
    let mut bytes = serde_json::to_vec_pretty(&bundle).unwrap();
    bytes.resize(limits::MAP_FROM_BYTES as usize + 1, b' ');
    std::fs::write(&file, &bytes).unwrap();
    assert!(matches!(
        read_input(&file, "run bundle", &InputLimits::DEFAULT).unwrap(),
        InputBytes::Mapped(_)
    ));
    // (This test bundle's nodes name rids it does not have: the read gets as
    // far as the semantic checks, as a parse of the bytes in memory does.)
    let from_map = Bundle::read(&file).unwrap_err();
    assert_eq!(from_map, Bundle::parse(&file, &bytes).unwrap_err());
    assert!(
        from_map.message.contains("dangling reference to rid"),
        "{from_map}"
    );
    let at = bytes.windows(7).position(|w| w == b"\"seed\":").unwrap();
    bytes[at + 8] = b'x';
    std::fs::write(&file, &bytes).unwrap();
    let err = Bundle::read(&file).unwrap_err();
    assert_eq!(err.path, ".manifest.scenario.seed", "{err}");
    assert!(err.line.is_some(), "{err}");
}

#[test]
fn text_after_the_value_is_an_error_with_its_line() {
    let (bundle, _) = small_bundle_and_view();
    let mut bytes = serde_json::to_vec_pretty(&bundle).unwrap();
    bytes.extend_from_slice(b"\n{}");
    let err = Bundle::parse(Path::new("b.json"), &bytes).unwrap_err();
    assert!(err.message.contains("trailing characters"), "{err}");
    assert!(err.line.is_some(), "{err}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]
    #[test]
    fn quick_and_tracked_parsers_agree_on_damaged_files(
        at in proptest::prelude::any::<proptest::sample::Index>(),
        len in 0usize..6,
        insert in proptest::collection::vec(
            proptest::sample::select(b"{}[]\":,-0123456789.eE truefalsnul".to_vec()),
            0..6,
        ),
    ) {
        static TEXTS: std::sync::LazyLock<[Vec<u8>; 2]> = std::sync::LazyLock::new(|| {
            let (bundle, view) = small_bundle_and_view();
            [serde_json::to_vec(&bundle).unwrap(), serde_json::to_vec(&view).unwrap()]
        });
        for text in TEXTS.iter() {
            let start = at.index(text.len());
            let end = (start + len).min(text.len());
            let damaged = [&text[..start], &insert[..], &text[end..]].concat();
            parsers_agree::<Bundle>(&damaged);
            parsers_agree::<TraceView>(&damaged);
        }
    }
}

#[test]
fn bundles_are_written_as_serde_writes_them() {
    let bundle = big_bundle();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("b.bundle.json");
    bundle.write(&file).unwrap();
    let written = std::fs::read(&file).unwrap();
    assert!(written == serde_json::to_vec(&bundle).unwrap());
    // And what is left out (zero times, generations) reads back the same.
    let back: Bundle = from_json(&file, &written).unwrap();
    assert!(back == bundle);
}

#[test]
fn a_failed_write_leaves_the_old_file_and_no_temp_file() {
    struct Fails;
    impl Serialize for Fails {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("no"))
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.json");
    write_atomic(&file, b"old").unwrap();
    let big: Vec<u64> = (0..2_000_000).collect();
    assert!(write_json_atomic(&file, &(big, Fails)).is_err());
    assert_eq!(std::fs::read(&file).unwrap(), b"old");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "the temp file was removed");
}
