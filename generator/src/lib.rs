//! Workload generator: executes a scenario on a backend and records a run bundle
//! (manifest, ground truth, trace, loss accounting).
//!
//! What varies is the [`Backend`]: the deterministic simulator (`sim`) or the real
//! GPU (`cuda`). Backends only execute; both hand what happened to the one
//! recording path ([`record`]), so the ground truth and the record kinds
//! downstream stages see are the same.
//!
//! The injection plan ([`plan`]) and the symptom's answers ([`answers`]) are
//! likewise one for every backend.
//!
//! Architecture invariant: the simulator, the recording path, the plan and the
//! answers depend only on `ground-truth`; the GPU backend adds `kernels`,
//! `injectors`, `ebpf-recorder` and `recorder-cupti`. Never looks at views,
//! profilers or scores.

pub mod anonymous;
pub mod answers;
pub mod backend;
pub mod collector;
pub mod cuda;
pub mod keys;
pub mod label;
pub mod plan;
pub mod record;
pub mod sim;
pub mod torch;

pub use backend::{select_backend, Backend, BackendKind, RecordError};

pub use ground_truth::seed::mix;

/// A value in [-1, 1) derived from a key.
pub fn unit_noise(key: u64) -> f64 {
    ground_truth::seed::unit(key) * 2.0 - 1.0
}
