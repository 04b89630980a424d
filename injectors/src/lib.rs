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
//! Device side: [`device_work`] describes the GPU injections (occupancy hog,
//! bulk copies, stream backlog, ...) as data, sized from measured device
//! facts; the generator executes them.
//!
//! Every mechanism reports what it really did (mechanism used, measured
//! times in CLOCK_MONOTONIC), for the ground truth's measured magnitude.
//! Missing privileges are errors that name the capability, never panics.

pub mod clock;
pub mod cpu_hog;
pub mod device_work;
pub mod error;
pub mod page_faults;
pub mod ptrace_hold;

pub use clock::{gettid, monotonic_ns, spin_recording_gaps, Gap};
pub use cpu_hog::{allowed_cpus, probe_mechanism, CpuHog, HogMechanism, HogReport};
pub use device_work::{bytes_for_duration, duration_for_bytes, DeviceFacts, DeviceWork};
pub use error::{InjectorError, Result};
pub use page_faults::{
    calibrate as calibrate_faults, FaultCalibration, FaultKind, FaultReport, PageFaults,
};
pub use ptrace_hold::{HoldReport, PtraceHold};
