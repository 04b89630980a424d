//! The one recording path: what each scenario step produces in the ground
//! truth (nodes, edges) and which records observe it, for every backend.
//!
//! A backend only executes: it says what happened — times, the raw records
//! of its collectors, its own loss counters — and calls the rules here, so
//! the simulator and the GPU cannot disagree on what a step means
//! (docs/records.md is the contract these rules implement).
//!
//! - [`builder`]: the primitives (nodes, edges, records, rid scrambling).
//! - [`steps`]: the per-step rules (request arrival, host task, handoff, API
//!   call, device op, event record, stream wait, graph node, synchronization,
//!   injected host fault).
//! - [`faults`]: which injected device work is the fault of a delayed op, and
//!   the injection record of device-side injections.
//! - [`contention`]: which device work of another stream, the application's
//!   included, held the resource an op waited for.
//! - [`log`] and [`truth`]: the one truth builder of the backends that run
//!   scenarios outside the simulator (the GPU and PyTorch backends): a
//!   backend-neutral step log each converts its own log into, built into the
//!   truth by one `build`, with the backend's observations bound through an
//!   [`truth::Observer`].

pub mod builder;
pub mod contention;
pub mod faults;
pub mod log;
pub mod steps;
pub mod truth;

pub use builder::{NodeInfo, RidScramble, RunBuilder};
pub use steps::{DeviceOp, DeviceTimes, Pickup};
