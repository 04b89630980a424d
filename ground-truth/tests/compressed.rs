//! Gzip-compressed files (the shipped corpus is stored that way) read like
//! their plain text; a damaged stream is a `FormatError` naming the file.

use flate2::write::GzEncoder;
use flate2::Compression;
use ground_truth::io::{is_bundle_file, Readable};
use ground_truth::TraceView;
use proptest::prelude::*;
use std::io::Write;
use std::path::Path;

const VIEW: &str = r#"{"schema_version":1,"bundle":"00ff","spec":{"collectors":"combined","mode":"instrumented","loss":{"kind":"none"}},
"queries":[{"id":"q0","rid":7,"question":"cause"}],"collector_loss":{"cupti_dropped":0,"cupti_timestamps_dropped":0,"ringbuffer_dropped":0},
"records":[{"kind":"api","rid":5,"domain":"runtime","cbid":211,"name":"cudaLaunchKernel","tid":9,"start":100,"end":104,"correlation_id":3},
{"kind":"kernel","rid":7,"name":"k","stream":13,"context":1,"device":0,"correlation_id":3,"queued":101,"submitted":101,"start":110,"end":200,"grid":[1,1,1],"block":[32,1,1],"channel":0}]}"#;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::best());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[test]
fn compressed_and_plain_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("v.json");
    let packed = dir.path().join("v.json.gz");
    std::fs::write(&plain, VIEW).unwrap();
    std::fs::write(&packed, gzip(VIEW.as_bytes())).unwrap();
    assert_eq!(
        TraceView::read(&plain).unwrap(),
        TraceView::read(&packed).unwrap()
    );
}

#[test]
fn a_truncated_stream_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let packed = dir.path().join("v.json.gz");
    let bytes = gzip(VIEW.as_bytes());
    std::fs::write(&packed, &bytes[..bytes.len() / 2]).unwrap();
    let e = TraceView::read(&packed).unwrap_err();
    assert_eq!(e.file, packed);
    assert!(e.message.contains("gzip"), "{e}");
}

#[test]
fn bundle_file_names() {
    assert!(is_bundle_file(Path::new("d/a.r0.bundle.json")));
    assert!(is_bundle_file(Path::new("d/a.r0.bundle.json.gz")));
    assert!(!is_bundle_file(Path::new("d/recording-summary.json")));
    assert!(!is_bundle_file(Path::new("d/a.bundle.json.zst")));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Damaged compressed input never panics the reader.
    #[test]
    fn damaged_streams_do_not_panic(at in 0usize..400, byte in any::<u8>(), cut in 0usize..400) {
        let dir = tempfile::tempdir().unwrap();
        let packed = dir.path().join("v.json.gz");
        let mut bytes = gzip(VIEW.as_bytes());
        let n = bytes.len();
        bytes[2 + at % (n - 2)] = byte;
        bytes.truncate(2 + cut % (n - 1));
        std::fs::write(&packed, &bytes).unwrap();
        if let Err(e) = TraceView::read(&packed) {
            prop_assert_eq!(e.file, packed);
        }
    }
}
