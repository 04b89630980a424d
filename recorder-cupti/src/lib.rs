//! The CUPTI reference recorder of causalbench's GPU runs ([`activity`]) and
//! the conversion of its raw activity records into trace records
//! ([`convert`], the record contract of `docs/records.md`).
//!
//! Used by the generator's GPU backend (every scenario call bound to its op
//! through a recorder-private external correlation id) and by the megakernel
//! track (kernel-level records of the persistent kernel).
//!
//! Architecture invariant: depends only on `ground-truth` (its record types)
//! and cudarc, which loads CUPTI dynamically: the crate builds and runs without
//! CUDA, and [`ensure_cupti`] says what is missing instead of panicking.

pub mod activity;
pub mod capability;
pub mod convert;
pub mod layout;
pub mod raw;

pub use activity::{
    ensure_cupti, loaded_library, pop, pop_token, push, push_token, set_binding, starve_buffers,
    Flushed, Raw, Recorder, CUPTI_LIB_VAR, EXT_OP, EXT_REQUEST,
};
pub use convert::{to_record, CallFacts};
pub use layout::RecordLayout;

/// CLOCK_MONOTONIC nanoseconds: the trace clock, and the clock CUPTI's
/// timestamps are put in (`Recorder::start` registers it).
pub fn now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
