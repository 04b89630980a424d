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
