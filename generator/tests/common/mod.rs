//! What the hand-written scenario tests share: a scenario from its body (the
//! fields every test case shares are added here) and its recording on the
//! simulator.

#![allow(dead_code)]

use generator::sim::SimBackend;
use generator::Backend;
use ground_truth::graph::{EdgeType, GroundTruth, LabelVerdict, NodeId};
use ground_truth::io::Readable;
use ground_truth::labels::CauseLabel;
use ground_truth::{Bundle, Scenario};

/// A scenario of `body` (its cause, seed and structure) after the fields
/// every test case shares.
pub fn scenario(body: &str) -> Scenario {
    parse(body).expect("scenario")
}

/// The same, or the reader's error.
pub fn parse(body: &str) -> Result<Scenario, ground_truth::io::FormatError> {
    let yaml = format!(
        "schema_version: 1\nname: test-case\nfamily: test\nvariant: case\n\
         description: \"a hand-written test case\"\n\
         mode: instrumented\nrepetitions: 1\n{body}"
    );
    Scenario::parse(std::path::Path::new("test.yaml"), yaml.as_bytes())
}

/// The scenario recorded once on the simulator.
pub fn record(sc: &Scenario) -> Bundle {
    SimBackend::default().record(sc, 0).expect("recorded")
}

/// The edge types along the first symptom's true path (where two nodes are
/// linked twice, the edge that gates later).
pub fn path_edges(t: &GroundTruth) -> Vec<EdgeType> {
    let path: &[NodeId] = &t.symptoms[0].critical_path;
    path.windows(2)
        .filter_map(|w| {
            t.edges
                .iter()
                .filter(|e| e.src == w[0] && e.dst == w[1])
                .map(|e| e.kind)
                .max_by_key(|&k| t.gating_time(w[0], w[1], k))
        })
        .collect()
}

/// The label check kept the first symptom's label, and it is `label`.
pub fn assert_kept(b: &Bundle, label: CauseLabel) {
    let s = &b.ground_truth.symptoms[0];
    let check = s.label.as_ref().expect("a timing case is checked");
    assert_eq!(
        check.verdict,
        LabelVerdict::Kept,
        "{}: {} (path edges {:?})",
        b.manifest.scenario.variant,
        check.reason,
        path_edges(&b.ground_truth)
    );
    assert_eq!(s.cause, label);
}

/// Lateness within 10 % of the asked magnitude (the acceptance of issue
/// "Truth, simulator and injector defects").
pub fn assert_moved_by(b: &Bundle, magnitude_us: f64) {
    let late_us = b.ground_truth.symptoms[0].lateness_ns / 1e3;
    assert!(
        (late_us - magnitude_us).abs() <= 0.1 * magnitude_us,
        "{late_us:.1} µs late for {magnitude_us} µs asked"
    );
}
