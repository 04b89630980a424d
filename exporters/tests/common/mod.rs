#![allow(dead_code)]
//! Shared helpers: catalog bundles on the simulator, the optional-Python skip rule.

use ground_truth::{Bundle, Readable, Scenario};
use std::path::PathBuf;

pub fn catalog(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("catalog")
        .join(format!("{name}.yaml"))
}

pub fn bundle(name: &str) -> Bundle {
    let sc = Scenario::read(&catalog(name)).expect("catalog scenario reads");
    generator::select_backend(generator::BackendKind::Sim)
        .expect("sim backend")
        .record(&sc, 0)
        .expect("records")
}

/// CI sets CAUSALBENCH_REQUIRE_HTA=1: then a missing HTA / Perfetto protos fails the test
/// instead of skipping it.
pub fn required() -> bool {
    std::env::var("CAUSALBENCH_REQUIRE_HTA").is_ok_and(|v| v == "1")
}

/// Prints the skip message, or panics when the dependency is required.
pub fn skip(what: &str) {
    let msg = format!(
        "SKIPPED: {what}; install with `bash baselines/hta/setup-hta.sh` \
         (CAUSALBENCH_REQUIRE_HTA=1 turns this skip into a failure)"
    );
    if required() {
        panic!("{msg}");
    }
    eprintln!("{msg}");
}
