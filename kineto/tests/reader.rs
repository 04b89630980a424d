//! The Kineto reader: what it types, and that bad input is an error naming
//! the file and the JSON path, never a panic.

use kineto::{parse, Activities, DeviceKind, FlowPhase};
use std::path::Path;

const TRACE: &str = r#"{
  "schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "cb:op:3:1000", "pid": 10, "tid": 11,
     "ts": 10.5, "dur": 20.0, "args": {"External id": 4}},
    {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 10, "tid": 11,
     "ts": 12.0, "dur": 3.25, "args": {"External id": 4, "cbid": 307, "correlation": 77}},
    {"ph": "X", "cat": "kernel", "name": "cb_spin", "pid": 0, "tid": 7, "ts": 20.0, "dur": 100.0,
     "args": {"device": 0, "context": 1, "stream": 7, "correlation": 77,
              "grid": [132, 1, 1], "block": [128, 1, 1]}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0,
     "tid": 7, "ts": 130.0, "dur": 5.0,
     "args": {"device": 0, "context": 1, "stream": 7, "correlation": 78, "bytes": 4096}},
    {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 8, "ts": 30.0,
     "dur": 0.0, "args": {"stream": 8, "correlation": 80, "wait_on_stream": 7,
                          "wait_on_cuda_event_record_corr_id": -1}},
    {"ph": "s", "id": 77, "pid": 10, "tid": 11, "ts": 12.0, "cat": "ac2g", "name": "ac2g"},
    {"ph": "f", "id": 77, "pid": 0, "tid": 7, "ts": 20.0, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}
  ]
}"#;

fn activities(text: &str) -> Result<Activities, String> {
    let file = Path::new("trace.json");
    let trace = parse(file, text.as_bytes()).map_err(|e| e.to_string())?;
    Activities::from_trace(file, &trace).map_err(|e| e.to_string())
}

#[test]
fn types_every_category_it_uses_in_nanoseconds_of_the_base() {
    let a = activities(TRACE).unwrap();
    let base = 1_700_000_000_000_000_000i64;
    assert_eq!(a.annotations.len(), 1);
    assert_eq!(a.annotations[0].start, base + 10_500);
    assert_eq!(a.annotations[0].end, base + 30_500);
    assert_eq!(a.calls.len(), 1);
    assert!(a.calls[0].driver);
    assert_eq!((a.calls[0].correlation, a.calls[0].cbid), (77, 307));
    assert_eq!(a.calls[0].end - a.calls[0].start, 3_250);
    assert_eq!(a.device.len(), 2);
    assert_eq!(a.device[0].kind, DeviceKind::Kernel);
    assert_eq!(a.device[0].grid, [132, 1, 1]);
    assert_eq!(a.device[1].kind, DeviceKind::Memcpy);
    assert_eq!(a.device[1].bytes, 4096);
    assert_eq!(a.syncs.len(), 1);
    assert_eq!(a.syncs[0].wait_on_event_record, None, "-1 is not known");
    assert_eq!(a.syncs[0].wait_on_stream, Some(7));
    assert_eq!(a.flows.len(), 2);
    assert_eq!(a.flows[1].phase, FlowPhase::Finish);
    assert_eq!(a.other, 1);
}

#[test]
fn bad_values_name_the_event_and_field() {
    let cases = [
        (
            TRACE.replacen(
                "\"ts\": 12.0, \"dur\": 3.25",
                "\"ts\": \"soon\", \"dur\": 3.25",
                1,
            ),
            ".traceEvents[1].ts",
        ),
        (
            TRACE.replacen("\"correlation\": 77}}", "\"correlation\": 77.5}}", 1),
            ".traceEvents[1].args.correlation",
        ),
        (
            TRACE.replacen("\"grid\": [132, 1, 1]", "\"grid\": [132, 1]", 1),
            ".traceEvents[2].args.grid",
        ),
        (
            TRACE.replacen("\"dur\": 20.0", "\"dur\": -2.0", 1),
            ".traceEvents[0].dur",
        ),
        (
            TRACE.replacen("\"ph\": \"M\",", "", 1),
            ".traceEvents[7].ph",
        ),
    ];
    for (text, path) in cases {
        let err = activities(&text).unwrap_err();
        assert!(err.contains(path), "{err} should name {path}");
        assert!(err.starts_with("trace.json"), "{err}");
    }
}

#[test]
fn malformed_json_is_an_error_with_a_line() {
    let err = activities("{\"traceEvents\": [ {\"ph\": ").unwrap_err();
    assert!(err.contains("line"), "{err}");
    let err = activities("{\"events\": []}").unwrap_err();
    assert!(err.contains("traceEvents"), "{err}");
}

#[test]
fn files_over_the_limit_are_refused_before_parsing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.json");
    std::fs::write(&file, TRACE).unwrap();
    let limits = ground_truth::io::InputLimits::DEFAULT.at_most(100);
    let err = kineto::read_within(&file, &limits).unwrap_err().to_string();
    assert!(err.contains("input limit"), "{err}");
    assert!(kineto::read(&file).is_ok());
}
