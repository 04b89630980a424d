//! Monitor programs as eBPF (megakernel/README.md, "Monitor programs as
//! eBPF"): restricted C under `megakernel/monitors/` compiled by clang's BPF
//! target at build time ([`programs`]), read from ELF ([`loader`]), checked
//! by a host-side verifier for the hook program types ([`verifier`]), and
//! executed by an interpreter of the same bytecode ([`interp`]: the reference
//! semantics the simulator runs and the device interpreter in
//! `kernels/src/cuda/mk_bpf.cu` mirrors). [`attach`] is a verified program
//! set attached at the hooks with its maps and coverage; [`queries`] are the
//! diagnostic questions that need programs, with their ground truth;
//! [`diagnosis`] is the track's diagnosis as a program, read by the track's
//! aggregate profiler like the fixed aggregation monitor.

pub mod abi;
pub mod attach;
pub mod attach_cost;
pub mod device;
pub mod diagnosis;
pub mod evaluate;
pub mod interp;
pub mod link;
pub mod loader;
pub mod perturbation;
pub mod programs;
pub mod queries;
pub mod report;
pub mod section;
pub mod translate;
pub mod verifier;

pub use abi::{Context, Hook, MapDef, MapKind, ProgramSet, ProgramType};
pub use attach::Attachment;
pub use loader::{load, LoadError};
pub use verifier::{verify, Rejection};
