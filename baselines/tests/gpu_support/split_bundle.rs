//! A bundle of a GPU split committed under `results/` (recorded on the
//! device), read by the tests that replay recorded cases without a GPU.

use ground_truth::{Bundle, Readable};

/// Bundle `name` (without its repetition) of the GPU split `results/{split}`.
pub fn split_bundle(split: &str, name: &str) -> Bundle {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results")
        .join(split)
        .join(format!("{name}.r0.bundle.json.gz"));
    Bundle::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
