//! causalbench injectors: real, measured causes of delay.
//!
//! Host side (Linux, no GPU needed):
//! - [`CpuHog`]: deschedule a chosen thread by CPU contention (a pinned hog
//!   thread at `SCHED_FIFO`, or nice −20 where real-time is refused);
//! - [`PtraceHold`]: stop one thread of another process with
//!   `PTRACE_SEIZE` + `PTRACE_INTERRUPT` for a requested time;
//! - [`PageFaults`]: minor (fresh anonymous pages) or major (file pages
//!   evicted from the page cache) faults on the victim thread, counted with
//!   `getrusage(RUSAGE_THREAD)`.
//!
//! Device-side injections (occupancy hog, bulk copies, stream backlog, ...)
//! are planned by the generator (`generator/src/plan.rs`, one plan for every
//! backend) and issued as real work by its GPU backend.
//!
//! Every mechanism reports what it really did (mechanism used, measured
//! times in CLOCK_MONOTONIC), for the ground truth's measured magnitude.
//! Missing privileges are errors that name the capability, never panics.

pub mod clock;
pub mod cpu_hog;
pub mod error;
pub mod page_faults;
pub mod ptrace_hold;

pub use clock::{gettid, monotonic_ns, spin_recording_gaps, Gap};
pub use cpu_hog::{
    allowed_cpus, probe_mechanism, process_cpus, CpuHog, HogMechanism, HogReport, PinnedHere,
    ReadyHog,
};
pub use error::{InjectorError, Result};
pub use page_faults::{
    calibrate as calibrate_faults, FaultCalibration, FaultKind, FaultReport, PageFaults,
};
pub use ptrace_hold::{HoldReport, PtraceHold};
