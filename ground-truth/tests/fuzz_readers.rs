//! Parser fuzzing with proptest: arbitrary and mutated inputs never panic a
//! reader; they parse or return a `FormatError` that names the file.

use ground_truth::io::Readable;
use ground_truth::{Bundle, Explanation, Scenario, TraceView};
use proptest::prelude::*;
use std::path::Path;

const SCENARIO: &str = include_str!("../../catalog/stale-identity.reused-event.yaml");
const VIEW: &str = r#"{"schema_version":1,"bundle":"00ff","spec":{"collectors":"combined","mode":"instrumented","loss":{"kind":"uniform","rate":0.05,"seed":3}},
"queries":[{"id":"q0","rid":7,"question":"cause"}],"collector_loss":{"cupti_dropped":1,"cupti_timestamps_dropped":0,"ringbuffer_dropped":0},
"records":[{"kind":"api","rid":5,"domain":"runtime","cbid":211,"name":"cudaLaunchKernel","tid":9,"start":100,"end":104,"correlation_id":3},
{"kind":"kernel","rid":7,"name":"k","stream":13,"context":1,"device":0,"correlation_id":3,"queued":101,"submitted":101,"start":110,"end":200,"grid":[1,1,1],"block":[32,1,1],"channel":0},
{"kind":"uprobe","rid":8,"tid":9,"function":"cuLaunchKernel","enter":101,"exit":103,"handle":4096,"stack":["cuLaunchKernel","app!main"]}]}"#;
const EXPLANATION: &str = r#"{"schema_version":1,"meta":{"profiler":"p","version":"1","view":{"collectors":"cupti","mode":"closed","loss":{"kind":"none"}},"wall_ms":0.5},
"edges":[{"src":5,"dst":7,"type":"launch","evidence":"explicit","confidence":1.0}],"attribution":[{"rid":7,"request":"unknown"}],
"diagnoses":[{"query":"q0","causes":[{"label":"stream_backlog","score":0.9}],"critical_path":[5,7],"phases":{"host_enqueue":0,"queued_to_submitted":0,"submitted_to_start":9,"execution":0},"complete":true}]}"#;

#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    Replace(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Replace(i, b)),
        (
            any::<usize>(),
            prop::collection::vec(
                prop::sample::select(b"{}[]\":,-0123456789.eE truefalsnul".to_vec()),
                1..8
            )
        )
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<usize>(), 1usize..40).prop_map(|(i, n)| Mutation::Delete(i, n)),
    ]
}

fn apply(text: &str, muts: &[Mutation]) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    for m in muts {
        let len = b.len().max(1);
        match m {
            Mutation::Truncate(i) => b.truncate(i % len),
            Mutation::Replace(i, x) => {
                if !b.is_empty() {
                    let i = i % b.len();
                    b[i] = *x;
                }
            }
            Mutation::Insert(i, v) => {
                let i = i % (b.len() + 1);
                b.splice(i..i, v.iter().copied());
            }
            Mutation::Delete(i, n) => {
                if !b.is_empty() {
                    let i = i % b.len();
                    let end = (i + n).min(b.len());
                    b.drain(i..end);
                }
            }
        }
    }
    b
}

fn no_panic<T: Readable>(file: &str, bytes: &[u8]) {
    match T::parse(Path::new(file), bytes) {
        Ok(_) => {}
        Err(e) => assert!(e.to_string().starts_with(file), "error names the file: {e}"),
    }
}

#[test]
fn seeds_parse() {
    Scenario::parse(Path::new("s.yaml"), SCENARIO.as_bytes()).unwrap();
    TraceView::parse(Path::new("v.json"), VIEW.as_bytes()).unwrap();
    Explanation::parse(Path::new("e.json"), EXPLANATION.as_bytes()).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn mutated_scenarios(muts in prop::collection::vec(mutation(), 1..4)) {
        no_panic::<Scenario>("s.yaml", &apply(SCENARIO, &muts));
    }

    #[test]
    fn mutated_views(muts in prop::collection::vec(mutation(), 1..4)) {
        no_panic::<TraceView>("v.json", &apply(VIEW, &muts));
    }

    #[test]
    fn mutated_explanations(muts in prop::collection::vec(mutation(), 1..4)) {
        no_panic::<Explanation>("e.json", &apply(EXPLANATION, &muts));
    }

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        no_panic::<Bundle>("b.json", &bytes);
        no_panic::<Scenario>("s.yaml", &bytes);
        no_panic::<TraceView>("v.json", &bytes);
    }
}

// Abuse cases: every reader refuses input past the limits of README "Limits"
// with an error naming the limit, quickly and without holding the input.

use ground_truth::io::{InputLimits, MAX_NESTING};
use std::io::Write;

/// A gzip stream of `{` and `len` spaces (valid JSON whitespace), written
/// as a stream: megabytes compress to kilobytes.
fn gzip_bomb(len: usize) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(b"{").unwrap();
    let spaces = vec![b' '; 1 << 16];
    for _ in 0..len / spaces.len() {
        enc.write_all(&spaces).unwrap();
    }
    enc.finish().unwrap()
}

#[test]
fn a_gzip_stream_expanding_a_thousandfold_is_refused_for_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let bomb = gzip_bomb(16 << 20);
    assert!(bomb.len() < 100_000, "{} bytes", bomb.len());
    type Read = fn(&Path) -> Result<(), ground_truth::FormatError>;
    let checks: [(&str, Read); 4] = [
        ("b.bundle.json.gz", |f| Bundle::read(f).map(drop)),
        ("v.json.gz", |f| TraceView::read(f).map(drop)),
        ("e.json.gz", |f| Explanation::read(f).map(drop)),
        ("s.yaml", |f| Scenario::read(f).map(drop)),
    ];
    for (name, read) in checks {
        let file = dir.path().join(name);
        std::fs::write(&file, &bomb).unwrap();
        let e = read(&file).unwrap_err();
        assert_eq!(e.file, file);
        assert!(
            e.message.contains("the limit of a gzip stream's expansion"),
            "{e}"
        );
    }
}

#[test]
fn input_past_the_largest_size_is_refused_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let limit = VIEW.len() as u64 - 1;
    let limits = InputLimits::DEFAULT.at_most(limit);
    let named = format!("the input limit of {limit} bytes");
    let plain = dir.path().join("v.json");
    std::fs::write(&plain, VIEW).unwrap();
    let e = TraceView::read_within(&plain, &limits).unwrap_err();
    assert!(e.message.contains(&format!("over {named}")), "{e}");
    // Compressed within the expansion limit, but past the largest size.
    let packed = dir.path().join("v.json.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(VIEW.as_bytes()).unwrap();
    let compressed = enc.finish().unwrap();
    assert!((compressed.len() as u64) < limit);
    std::fs::write(&packed, compressed).unwrap();
    let e = TraceView::read_within(&packed, &limits).unwrap_err();
    assert!(e.message.contains(&format!("past {named}")), "{e}");
    assert!(TraceView::read(&packed).is_ok());
    // A file that never ends is read only up to the limit.
    let e = TraceView::read_within(Path::new("/dev/zero"), &limits).unwrap_err();
    assert!(e.message.contains(&format!("over {named}")), "{e}");
}

#[test]
fn a_huge_wrong_typed_value_is_not_echoed_whole() {
    let huge = "y".repeat(1 << 20);
    let scenario = SCENARIO.replacen("seed:", &format!("seed: \"{huge}\"\nx_seed:"), 1);
    let view = VIEW.replacen(
        "\"bundle\":\"00ff\"",
        &format!("\"bundle\":[\"{huge}\"]"),
        1,
    );
    let key = VIEW.replacen("\"bundle\"", &format!("\"{huge}\""), 1);
    for (file, e) in [
        (
            "s.yaml",
            Scenario::parse(Path::new("s.yaml"), scenario.as_bytes()).unwrap_err(),
        ),
        (
            "v.json",
            TraceView::parse(Path::new("v.json"), view.as_bytes()).unwrap_err(),
        ),
        (
            "v.json",
            TraceView::parse(Path::new("v.json"), key.as_bytes()).unwrap_err(),
        ),
    ] {
        let shown = e.to_string();
        assert!(shown.starts_with(file), "{shown}");
        assert!(
            shown.len() < 1000,
            "{} bytes: {}",
            shown.len(),
            &shown[..300]
        );
    }
}

#[test]
fn deeply_nested_input_is_refused_naming_the_limit() {
    // 400 KB of nesting (the YAML parser alone would take minutes).
    let deep = "[".repeat(400_000);
    let yaml = format!("schema_version: 1\nname: {deep}\n");
    let e = Scenario::parse(Path::new("s.yaml"), yaml.as_bytes()).unwrap_err();
    assert!(e.message.contains("nesting limit"), "{e}");
    assert_eq!(e.line.as_deref(), Some("line 2"), "{e}");
    let json = VIEW.replacen("\"records\":[", &format!("\"records\":[{{\"a\":{deep}"), 1);
    let e = TraceView::parse(Path::new("v.json"), json.as_bytes()).unwrap_err();
    assert!(e.message.contains("nesting limit"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Nesting well inside the limit is read as usual (and refused for its
    /// type); past it, every format names the limit.
    #[test]
    fn nesting_is_refused_exactly_past_the_limit(
        depth in 0usize..(2 * MAX_NESTING),
        kinds in prop::collection::vec(any::<bool>(), 2 * MAX_NESTING),
        block in any::<bool>(),
    ) {
        let opens: String = kinds[..depth].iter().map(|&m| if m { "{\"a\":" } else { "[" }).collect();
        // A step is buffered whole before its `op` is known: the reader
        // descends into every level.
        let yaml = if block {
            let mut s = String::from("programs:\n- steps:\n  - a:");
            for i in 0..depth {
                s.push_str(&format!("\n{}- ", " ".repeat(2 * i + 4)));
            }
            s + "x\n"
        } else {
            format!("programs: [{{steps: [{{a: {}x", opens.replace("\"a\"", "a"))
        };
        // A record is buffered whole before its kind is known: the reader
        // descends into every level.
        let json = VIEW.replacen("\"records\":[", &format!("\"records\":[{{\"a\":{opens}"), 1);
        let errors = [
            Scenario::parse(Path::new("s.yaml"), yaml.as_bytes()).unwrap_err(),
            TraceView::parse(Path::new("v.json"), json.as_bytes()).unwrap_err(),
        ];
        for e in errors {
            let nesting = e.message.contains("nesting limit");
            if depth <= MAX_NESTING - 8 {
                prop_assert!(!nesting, "depth {}: {}", depth, e);
            } else if depth > MAX_NESTING + 1 {
                prop_assert!(nesting, "depth {}: {}", depth, e);
            }
        }
    }
}

/// The scenario seed with `from` replaced by `to` (once), and the problem
/// its reader reports.
fn scenario_error(from: &str, to: &str) -> ground_truth::FormatError {
    assert!(SCENARIO.contains(from), "{from}");
    let text = SCENARIO.replacen(from, to, 1);
    Scenario::parse(Path::new("s.yaml"), text.as_bytes()).unwrap_err()
}

#[test]
fn scenario_names_are_identifiers() {
    for name in ["../../escape", "a/b", "..", ".hidden", "-x", "a b"] {
        let e = scenario_error(
            "name: stale-identity.reused-event",
            &format!("name: \"{name}\""),
        );
        assert_eq!(e.path, ".name", "{name}: {e}");
        assert!(e.message.contains("expected an identifier"), "{e}");
    }
    let e = scenario_error("family: stale-identity", "family: x/y");
    assert_eq!(e.path, ".family", "{e}");
}

#[test]
fn times_that_would_overflow_nanoseconds_are_refused() {
    let e = scenario_error("duration_us: 500", "duration_us: 1e16");
    assert_eq!(e.path, ".programs[0].steps[0].duration_us", "{e}");
    assert!(e.message.contains("over the limit"), "{e}");
    let e = scenario_error("magnitude_us: 3500", "magnitude_us: 1e17");
    assert_eq!(e.path, ".injection.magnitude_us", "{e}");
    let e = scenario_error("interval_us: 25000", "interval_us: -1");
    assert_eq!(e.path, ".programs[0].interval_us", "{e}");
    // Each time within the limit, together past it.
    let e = scenario_error("duration_us: 500", "duration_us: 5e11");
    assert_eq!(e.path, ".programs", "{e}");
    assert!(e.message.contains("times add up to"), "{e}");
}

#[test]
fn scenario_sizes_past_the_limit_are_refused_before_anything_runs() {
    let e = scenario_error("requests: 3", "requests: 10000000");
    assert_eq!(e.path, ".programs", "{e}");
    assert!(e.message.contains("over the limit of 12000000"), "{e}");
    let e = scenario_error(
        "  - name: host\n",
        "  - name: host\n    count: 4000000000\n",
    );
    assert_eq!(e.path, ".threads", "{e}");
    assert!(e.message.contains("over the limit of 1024"), "{e}");
    let e = scenario_error("repetitions: 3", "repetitions: 1000000000");
    assert_eq!(e.path, ".repetitions", "{e}");
    let e = scenario_error("grid: 64}", "grid: 64, block: 4096}");
    assert_eq!(e.path, ".programs[0].steps[0].block", "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Every name a scenario reader accepts is one plain path component.
    #[test]
    fn accepted_names_stay_inside_their_directory(name in "[a-z./ _-]{0,12}") {
        let text = SCENARIO.replacen(
            "name: stale-identity.reused-event",
            &format!("name: \"{name}\""),
            1,
        );
        let read = Scenario::parse(Path::new("s.yaml"), text.as_bytes());
        if read.is_ok() {
            let mut parts = Path::new(&name).components();
            prop_assert!(matches!(parts.next(), Some(std::path::Component::Normal(_))));
            prop_assert!(parts.next().is_none(), "{}", name);
            prop_assert!(!name.starts_with('.'));
        }
    }
}
