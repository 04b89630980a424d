//! The megakernel track (docs/design.md, "The megakernel track").
//!
//! When a compiler fuses a model into one persistent kernel, CUPTI sees one
//! long kernel and every logical operator becomes a task scheduled inside it.
//! This crate runs such a kernel — `kernels/src/cuda/megakernel.cu` on a GPU
//! ([`gpu`]), or its deterministic model ([`sim`]) — over task graphs built
//! from `megakernel/catalog/*.yaml` ([`schedule`]), with task-level injections
//! realised as data in the graph, captures from each device monitor
//! configuration ([`monitor`]), and writes each case as a standard run bundle
//! plus a task-telemetry sidecar ([`bundle`], [`case`]).
//!
//! Architecture: depends on `ground-truth` (formats), `kernels` (the CUDA
//! source and its struct mirrors), `views` (the base view of a case) and
//! `recorder-cupti` (the CUPTI reference recorder, on a GPU). cudarc loads
//! CUDA dynamically: everything but [`gpu`] runs without a GPU.

pub mod bpf;
pub mod bundle;
pub mod case;
pub mod catalog;
pub mod gpu;
pub mod monitor;
pub mod pack;
pub mod schedule;
pub mod signature;
pub mod sim;
pub mod track;

pub use case::{run_family, CaseResult, Executor, FamilyOptions, Launch, SimExecutor};

/// Seeded mixing of (seed, key) with the project's one mixing function.
pub fn mix2(seed: u64, key: u64) -> u64 {
    ground_truth::seed::mix(seed ^ ground_truth::seed::mix(key))
}
