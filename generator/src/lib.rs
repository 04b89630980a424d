//! Workload generator: executes a scenario on a backend and records a run bundle
//! (manifest, ground truth, trace, loss accounting).
//!
//! What varies is the [`Backend`]: the deterministic simulator (`sim`) or the real
//! GPU (`cuda`). Both hand a [`build::RunBuilder`] the same facts, so the ground
//! truth and the record kinds downstream stages see are the same.
//!
//! Architecture invariant: depends only on `ground-truth`; never looks at views,
//! profilers or scores.

pub mod anonymous;
pub mod answers;
pub mod backend;
pub mod build;
pub mod cuda;
pub mod keys;
pub mod sim;

pub use backend::{select_backend, Backend, BackendKind, RecordError};

pub use ground_truth::seed::mix;

/// A value in [-1, 1) derived from a key.
pub fn unit_noise(key: u64) -> f64 {
    ground_truth::seed::unit(key) * 2.0 - 1.0
}
