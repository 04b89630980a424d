//! Every numeric threshold and weight of the reference's diagnosis, in one table.
//!
//! Each entry says its value and unit (in its name and type), why it has that
//! value, and where it was measured. The diagnosis files (`DIAGNOSIS_FILES`)
//! name these constants and hold no bare numeric literal besides 0, 1 and 2 as
//! counts or indices (`tests/thresholds.rs` holds it). These are the
//! reference's own: the shared code's constants (`crate::analysis`) serve the
//! other profilers, so tuning one here moves no other profiler's row.

use ground_truth::Ns;

/// The diagnosis files, relative to `src/causal_graph/`: the sources whose
/// numeric literals must come from this table.
pub const DIAGNOSIS_FILES: &[&str] = &[
    "diagnosis.rs",
    "gating.rs",
    "peers.rs",
    "readings.rs",
    "structural.rs",
];

// ---- Noise and clocks ----

/// Lateness below this is noise. Unit: ns (20 µs). Why: the simulator's and
/// the H200's background preemptions and jitter stay below it between quiet
/// runs of small scenarios (docs/scenario-space.md, "Noise floor"). Also the
/// floor of a host stall that earns a `fault` edge and of a phase excess.
pub const NOISE_NS: f64 = 20_000.0;

/// The clock agreement a device-timed difference is trusted to. Unit: ns
/// (2 µs). Why: the GPU's CUPTI and `%globaltimer` agree within it
/// (docs/gpu-facts.md), the label check's granularity too
/// (docs/scenario-space.md, "Noise floor").
pub const CLOCK_NS: f64 = 2_000.0;

/// How many times the peers' own spread a host-side lateness must pass.
/// Unit: times the spread. Why: the label check calls a symptom late only
/// beyond three times the drift between two quiet runs (docs/scenario-space.md,
/// "Labels from the truth"); a profiler's only sample of that noise is how far
/// the peers stray from each other, so it asks the same margin of it where the
/// noise is the threads' wake-up jitter (rules 7, 7b, 7c).
pub const SPREAD_MARGIN: f64 = 3.0;

// ---- Host records ----

/// How far back before a call with no host predecessor on its thread that
/// thread's scheduler and page-fault records still count as stalls of the
/// call. Unit: ns (50 ms). Why: longer than any stall the scenarios inject
/// (docs/scenario-space.md), short enough not to reach the previous request.
pub const STALL_LOOKBACK_NS: Ns = 50_000_000;

/// Longest time the thread's last untimed page fault counts (rule 7g). Unit:
/// ns (200 µs). Why: a major fault's order of magnitude, the same cap the
/// shared index puts on an untimed fault before another fault
/// (`index::UNTIMED_FAULT_CAP_NS`). Measured: after 72 faults in 180 µs on
/// the H200 dev corpus the last one held its thread 395 µs.
pub const LAST_UNTIMED_FAULT_CAP_NS: Ns = 200_000;

// ---- Cause weights ----

/// Weight of `pcie_contention` for a copy that waited to start while no other
/// copy was seen on the link. Unit: times the late phase. Why: the wait is
/// still the copy engine's most likely, but nothing shows who held it.
pub const UNSEEN_LINK_CONTENTION: f64 = 0.5;

/// Weight of `occupancy_pressure` for a kernel that waited to start while no
/// other kernel was seen running. Unit: times the late phase. Why: as
/// [`UNSEEN_LINK_CONTENTION`], for the SMs.
pub const UNSEEN_SM_CONTENTION: f64 = 0.6;

/// Factor on `slow_copy`'s alternative weight for a copy that waited to start
/// with no other copy seen on the link. Unit: times its table weight
/// (`analysis::phase_causes`). Why: without contention seen, the copy itself
/// is the likelier culprit.
pub const UNSEEN_CONTENTION_SLOW_COPY: f64 = 2.0;
