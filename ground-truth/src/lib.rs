//! Shared formats of causalbench. Every stage of the pipeline
//! (scenario → bundle → view → explanation → scores) speaks through the types
//! defined here, so no stage needs another stage's internals.
//!
//! Architecture invariant: this crate depends on no other causalbench crate and
//! performs no I/O beyond reading and writing its own formats.

pub mod bundle;
pub mod collector;
pub mod costs;
pub mod explanation;
pub mod graph;
pub mod identifier;
mod ids;
pub mod io;
pub mod labels;
pub mod megakernel;
pub mod scenario;
pub mod schema;
pub mod seed;
mod shared_detail;
pub mod shared_stack;
pub mod shared_str;
pub mod submission;
pub mod trace;
pub mod view;
mod wire_form;

pub use bundle::{Bundle, CrossCheck, CuptiCapabilities, LossAccounting, Manifest, Unobservable};
pub use explanation::{
    Attribution, ClaimedEdge, Diagnosis, Explanation, ExplanationMeta, RankedCause,
};
pub use graph::{Edge, EdgeType, GroundTruth, Node, NodeId, NodeKind, Phases, Symptom};
pub use io::{FormatError, Readable};
pub use labels::{CauseLabel, Collectors, Evidence, Mode, Question};
pub use scenario::Scenario;
pub use shared_stack::SharedStack;
pub use shared_str::SharedStr;
pub use trace::{Record, Rid};
pub use view::{Query, TraceView, ViewSpec};

/// Version of every file format this build reads and writes. Readers reject
/// any other version with a clear message instead of guessing.
pub const SCHEMA_VERSION: u32 = 1;

/// Nanoseconds on CLOCK_MONOTONIC, the one clock domain of host and device records.
pub type Ns = u64;
