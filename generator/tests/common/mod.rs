//! What the hand-written scenario tests share: a scenario from its body (the
//! fields every test case shares are added here) and its recording on the
//! simulator.

#![allow(dead_code)]

use generator::sim::SimBackend;
use generator::Backend;
use ground_truth::io::Readable;
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
