//! The ids by which trace records and truth nodes name each other: a truth node lists the
//! records that observe it and a symptom names its record, while a record stays free of
//! the truth. Kept apart from both `trace` and `graph` so that neither needs the other
//! for them (`trace::Rid` and `graph::NodeId` re-export them).

/// Stable record id, unique within a bundle and kept by every view derived from it.
pub type Rid = u64;

/// Index of a node in `GroundTruth::nodes`.
pub type NodeId = u32;
