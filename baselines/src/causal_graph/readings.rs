//! How the reference reads records a recorder gets wrong. The shared index
//! gives the records as they stand (`crate::index`); these readings are the
//! reference's own, so they move no other profiler's answers.

use super::thresholds::{HOST_GAP_SHARE, LAST_UNTIMED_FAULT_CAP_NS, STALL_NS};
use crate::analysis::{self, DevPhases};
use crate::index::{HostStalls, Index, Pos};
use ground_truth::trace::Record;
use ground_truth::{CauseLabel, Ns, Phases};

/// Rule 6c, a queue time before the launch is no queue time: a device op's
/// (queued, submitted, start, end), a `queued` earlier than its launching call
/// began read as not measured (0). Nothing is queued before it is launched,
/// yet the H200's CUPTI gives graph-node kernels such a time (1,528 of 2,007
/// graph kernels in 200 views of `results/dev-corpus/h200-580`,
/// docs/gpu-facts.md); taken at face value the launch gated the node before
/// the call and a graph launched 2.5 ms late read `event_wait`. Without the
/// call it is kept as it is.
pub(crate) fn device_times(ix: &Index, p: Pos) -> Option<(Ns, Ns, Ns, Ns)> {
    let (mut q, s, st, e) = ix.device_times(p)?;
    if q > 0 && ix.launch_api(p).is_some_and(|a| q < ix.start(a)) {
        cov_mark::hit!(queued_before_launch);
        q = 0;
    }
    Some((q, s, st, e))
}

/// A device op's phases ([`analysis::dev_phases_from`]) from [`device_times`].
pub(crate) fn dev_phases(ix: &Index, p: Pos) -> Option<DevPhases> {
    analysis::dev_phases_from(ix, p, device_times(ix, p)?)
}

/// Per-phase excess of a device op over its peers ([`analysis::device_excess_by`])
/// from [`dev_phases`].
pub(crate) fn device_excess(ix: &Index, peers: &[Pos], p: Pos) -> Phases {
    analysis::device_excess_by(peers, p, |k| dev_phases(ix, k))
}

/// Rule 7g, an untimed page fault lasts until its thread goes on: the
/// thread's stalls in `[from, to]` ([`Index::host_stalls`]), its last untimed
/// fault counted until `to` (the call it delayed), capped at
/// [`LAST_UNTIMED_FAULT_CAP_NS`]. The index counts it no time, only because
/// no later fault was recorded: after 72 faults in 180 µs the 395 µs the last
/// one held its thread read as host compute (H200 dev `page-fault` symptoms).
pub(crate) fn host_stalls(ix: &Index, tid: u32, from: Ns, to: Ns) -> HostStalls {
    let mut st = ix.host_stalls(tid, from, to);
    let Some(f) = st.last_untimed_fault else {
        return st;
    };
    let start = ix.start(f);
    // The thread was back in its own code by its next call at the latest: a
    // fault long before the call asked about, with calls between, held the
    // thread no longer than until the first of them.
    let next_call = ix.thread(tid).and_then(|th| {
        let i = th.calls.partition_point(|&c| ix.start(c) <= start);
        th.calls.get(i).map(|&c| ix.start(c))
    });
    let until = next_call.map_or(to, |c| c.min(to));
    if until < to {
        cov_mark::hit!(untimed_fault_ends_by_the_next_call);
    }
    if until.saturating_sub(start) > LAST_UNTIMED_FAULT_CAP_NS {
        cov_mark::hit!(last_untimed_fault_capped);
    }
    let end = start + until.saturating_sub(start).min(LAST_UNTIMED_FAULT_CAP_NS);
    let (lo, hi) = (start.max(from), end.min(to));
    if hi >= lo {
        cov_mark::hit!(last_untimed_fault_lasts);
        st.fault_ns += (hi - lo) as f64;
        // The index counted the fault only when it began inside the interval.
        if start < from {
            st.faults += 1;
            st.last_fault = Some(f);
            if let Record::PageFault { major: true, .. } = ix.rec(f) {
                st.major += 1;
            }
        }
    }
    st
}

/// The larger of a thread's stalls and what it is: its scheduler time
/// (`cpu_deschedule`), or its page-fault time when that is longer
/// (`host_page_fault`).
pub(crate) fn larger_stall(st: &HostStalls) -> (CauseLabel, f64) {
    if st.desched_ns >= st.fault_ns {
        (CauseLabel::CpuDeschedule, st.desched_ns)
    } else {
        (CauseLabel::HostPageFault, st.fault_ns)
    }
}

/// How much a host gap may grow over its peers' gap `norm` (ns) by what any
/// host has: [`STALL_NS`], as for a stall, or [`HOST_GAP_SHARE`] of the gap
/// (a thread waiting milliseconds for its next task waits a varying time, in
/// proportion).
pub(super) fn host_jitter(norm: f64) -> f64 {
    STALL_NS.max(HOST_GAP_SHARE * norm)
}

/// The excess over `norm`, the usual host gap or queue wait, that is
/// lateness: beyond `spread`, how far the usual ones stray, and the host's
/// own jitter ([`host_jitter`]). Every reading of a host gap uses it: grown
/// host work (`grown_gap`), a host phase's gap and queue wait
/// (`peers.rs` `host_excess`), closed mode's unjoined gap
/// (`diagnosis.rs` `unjoined_gap_beyond_peers`) and the held chain's late
/// gap (`requests.rs`).
pub(super) fn host_gap_floor(norm: f64, spread: f64) -> f64 {
    spread.max(host_jitter(norm))
}

/// How far a host gap of `own` ns grew beyond `norm`, the usual gap, when
/// the excess passes [`host_gap_floor`]: grown host work, read alike against
/// a launch's peers (`grown_host_gap`) and a peerless path's other calls
/// (`host_gap_that_held`).
pub(super) fn grown_gap(own: f64, norm: f64, spread: f64) -> Option<f64> {
    let excess = own - norm;
    (excess > host_gap_floor(norm, spread)).then_some(excess)
}
