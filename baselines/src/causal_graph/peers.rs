//! Lateness against peers: the same operation in other requests of the view, and
//! each phase's excess over the peers' median.

use super::graph::Graph;
use super::readings;
use super::thresholds::{
    DEVICE_SHARE, MAX_HANDOFF_LINKS, MAX_HOST_PEERS, MAX_TASK_STEPS, NOISE_NS,
};
use crate::analysis::{self, PHASE_COUNT};
use crate::index::FastMap;
use crate::index::{call_site_frame_memo, median, Pos};
use ground_truth::trace::{MarkerPhase, Record};
use ground_truth::{CauseLabel, EdgeType, Evidence, Ns, Phases, SharedStr};

/// `Graph::position` of a record that is no device op with a request token.
pub(super) const NO_POSITION: u32 = u32::MAX;

/// An op in enqueue order: (enqueue time, rid, position in the view).
type Placed = (Ns, u64, Pos);

impl Graph<'_> {
    /// Host-side lateness of a call: (gap since its host predecessor, queue waits
    /// of its handoff chain, total time since its request began).
    /// When the work another thread handed call `call` (an inferred or
    /// observed handoff edge) arrived, at the latest the call's start; 0
    /// without a handoff.
    pub(super) fn work_arrived(&self, call: Pos) -> Ns {
        let ix = &self.ix;
        self.incoming_of(call, EdgeType::Handoff)
            .map_or(0, |h| ix.end(h.src).min(ix.start(call)))
    }

    pub(super) fn host_measure(&self, call: Pos) -> HostMeasure {
        let ix = &self.ix;
        let mut m = HostMeasure::default();
        let start = ix.start(call);
        if let Some(e) = self.incoming_of(call, EdgeType::HostOrder) {
            // A call another thread handed work to (closed mode: a handoff
            // inferred from timing that recurs) was ready once the work
            // arrived, as a task's first call is after its task marker: the
            // thread's idle time before, polling or not, is no gap of its own.
            let handed = self.work_arrived(call);
            if handed > ix.end(e.src) {
                cov_mark::hit!(ready_when_handed_work);
            }
            m.ready = ix.end(e.src).max(handed);
            m.gap = Some(start.saturating_sub(m.ready) as f64);
            m.gap_inferred = e.ev == Evidence::Inferred;
        } else {
            m.ready = start;
        }
        // Follow the handoff chain back through task_begin markers.
        let mut cur = call;
        for _ in 0..MAX_HANDOFF_LINKS {
            let Some(t) = self.task_of(cur) else { break };
            if let Some(e) = self.incoming_of(t, EdgeType::Handoff) {
                m.queue_wait = Some(
                    m.queue_wait.unwrap_or(0.0)
                        + ix.start(t).saturating_sub(ix.start(e.src)) as f64,
                );
                cur = e.src;
                continue;
            }
            if let Some(e) = self.incoming_of(t, EdgeType::Request) {
                m.since_request = Some(start.saturating_sub(ix.start(e.src)) as f64);
                // Arrival → first task: the request waited to be picked up.
                m.queue_wait = Some(
                    m.queue_wait.unwrap_or(0.0)
                        + ix.start(t).saturating_sub(ix.start(e.src)) as f64,
                );
            }
            break;
        }
        if m.since_request.is_none() {
            // Closed mode: the chain's beginning stands in for the request's.
            if let Some(&began) = self.chain_began.get(&call) {
                m.since_request = Some(start.saturating_sub(began) as f64);
            }
        }
        m
    }

    /// The task_begin marker of the host task a host operation belongs to.
    pub(super) fn task_of(&self, mut x: Pos) -> Option<Pos> {
        // Without markers no walk back finds one (closed mode): walking a
        // thread's whole history for nothing made each host measure linear.
        if self.ix.markers.is_empty() {
            return None;
        }
        for _ in 0..MAX_TASK_STEPS {
            match self.ix.rec(x) {
                Record::Marker {
                    phase: MarkerPhase::TaskBegin,
                    ..
                } => return Some(x),
                Record::Marker {
                    phase: MarkerPhase::Enqueue,
                    ..
                } => x = self.incoming_of(x, EdgeType::Handoff)?.src,
                _ => x = self.incoming_of(x, EdgeType::HostOrder)?.src,
            }
        }
        None
    }

    /// The gap before launch call `call` since its thread's previous call
    /// ([`Graph::host_measure`]) against the same gaps before its device
    /// `peers`' launch calls: how far it exceeds their median, their median
    /// and their spread (all 0 where no peer's gap is known).
    pub(super) fn launch_gap_against_peers(&self, call: Pos, peers: &[Pos]) -> GapAgainstPeers {
        let ix = &self.ix;
        let gaps: Vec<f64> = peers
            .iter()
            .filter_map(|&k| ix.launch_api(k))
            .filter_map(|c| self.host_measure(c).gap)
            .collect();
        GapAgainstPeers {
            peer_gaps: gaps.len(),
            spread: analysis::peer_spread(&gaps),
            median: median(gaps.clone()).unwrap_or(0.0),
            excess: analysis::excess(self.host_measure(call).gap, gaps, 0.0),
        }
    }

    /// Peers of a host call: same entry point, same call-site frame when known.
    pub(super) fn call_peers(&self, call: Pos) -> Vec<Pos> {
        let ix = &self.ix;
        let name = ix.call_name(call);
        let mut library = FastMap::default();
        let site = ix
            .stack(call)
            .and_then(|s| call_site_frame_memo(s, &mut library));
        ix.all_calls
            .iter()
            .copied()
            .filter(|&c| {
                c != call
                    && ix.call_name(c) == name
                    && ix
                        .stack(c)
                        .and_then(|s| call_site_frame_memo(s, &mut library))
                        == site
            })
            .collect()
    }

    /// Host-side excess of a call over its peers, and the host causes ranked.
    pub(super) fn host_excess(
        &self,
        call: Pos,
        peer_calls: &[Pos],
    ) -> (f64, Vec<(CauseLabel, f64)>) {
        let ix = &self.ix;
        let own = self.host_measure(call);
        let pm: Vec<HostMeasure> = peer_calls
            .iter()
            .take(MAX_HOST_PEERS)
            .map(|&c| self.host_measure(c))
            .collect();
        let gaps: Vec<f64> = pm.iter().filter_map(|m| m.gap).collect();
        let waits: Vec<f64> = pm.iter().filter_map(|m| m.queue_wait).collect();
        let gap_x = analysis::excess(own.gap, gaps.clone(), 0.0);
        let wait_x = analysis::excess(own.queue_wait, waits.clone(), 0.0);
        let tid = ix.rec(call).tid().unwrap_or(0);
        let st = readings::host_stalls(ix, tid, own.ready.min(ix.start(call)), ix.start(call));
        // Without peers there is no normal gap or queue wait to compare with: only
        // what the thread's stall records explain is lateness (the structural
        // reading of the host chain, `host_structural`, names the rest). A gap to
        // an inferred predecessor (closed mode: maybe another task's call) includes
        // idle time likewise.
        // With peers, the part of the gap no stall record explains is lateness only
        // beyond the peers' own spread of gaps (host jitter is not lateness), and
        // so is a queue wait beyond the peers' spread of queue waits: a handoff's
        // wake-up varies from request to request (on the H200 the quiet runs'
        // drift grows from 77 µs without handoffs to 400–540 µs with six to eight,
        // docs/scenario-space.md), and that variation is no queueing delay.
        let stalled = st.desched_ns + st.fault_ns;
        let (gap_x, wait_x) = if pm.is_empty() {
            (stalled, 0.0)
        } else {
            // Beyond the spread, a gap or wait counts only beyond the host's
            // own jitter too (`readings::host_gap_floor`), as grown host work
            // does in the counterfactual (`candidates.rs` `grown_host_gap`):
            // two or three peers' spread says little of a host's noise.
            let floor = |v: Vec<f64>| {
                let spread = analysis::peer_spread(&v);
                (
                    spread,
                    readings::host_gap_floor(median(v).unwrap_or(0.0), spread),
                )
            };
            let (gap_spread_alone, gap_spread) = floor(gaps);
            let (wait_spread_alone, wait_spread) = floor(waits);
            let unexplained = (gap_x - stalled).max(0.0);
            if (wait_x > wait_spread_alone && wait_x <= wait_spread)
                || (unexplained > gap_spread_alone && unexplained <= gap_spread)
            {
                cov_mark::hit!(host_phase_within_host_jitter);
            }
            let wait_x = if wait_x > wait_spread {
                wait_x
            } else {
                if wait_x > 0.0 {
                    // Rule 4: a handoff's wake-up varies from request to request.
                    cov_mark::hit!(queue_wait_within_spread);
                }
                0.0
            };
            if unexplained > gap_spread {
                (gap_x, wait_x)
            } else {
                (gap_x.min(stalled), wait_x)
            }
        };
        let gap_x = if own.gap_inferred {
            gap_x.min(st.desched_ns + st.fault_ns)
        } else {
            gap_x
        };
        let total = gap_x + wait_x;
        let mut v = vec![
            (
                CauseLabel::CpuDeschedule,
                st.desched_ns.min(gap_x.max(st.desched_ns)),
            ),
            (
                CauseLabel::HostPageFault,
                st.fault_ns + if st.major > 0 { NOISE_NS } else { 0.0 },
            ),
            (CauseLabel::HandoffQueueing, wait_x),
            (
                CauseLabel::HostCompute,
                (gap_x - st.desched_ns - st.fault_ns).max(0.0),
            ),
        ];
        v.retain(|x| x.1 > 0.0);
        if v.is_empty() {
            v.push((CauseLabel::HostCompute, 1.0));
        }
        (total.max(st.desched_ns + st.fault_ns), v)
    }

    /// [`Graph::position`] of `p`.
    fn position_of(&self, p: Pos) -> Option<u32> {
        Some(self.position[p as usize]).filter(|&i| i != NO_POSITION)
    }

    /// Peers of a device op: the same operation in other requests of the view —
    /// the same kernel name / copy shape *at the same place*: the same call-site
    /// frame when stacks show it, and the same position among that operation's
    /// instances in its request. A kernel name launched from several call
    /// contexts is several operations; with request tokens, an instance at
    /// another position is never a peer, even when no peer is left. The same
    /// stream is preferred when some peer shares it (recreated streams get new ids).
    pub(super) fn device_peers(&self, p: Pos) -> Vec<Pos> {
        let ix = &self.ix;
        let all = self.peers.of(ix, p);
        let mut library = FastMap::default();
        let mut site = |k: Pos| {
            ix.launch_api(k)
                .and_then(|a| ix.stack(a))
                .and_then(|s| call_site_frame_memo(s, &mut library))
        };
        let tok = |k: Pos| self.token(k);
        let (my_site, my_tok) = (site(p), tok(p));
        let my_pos = self.position_of(p);
        let mut placed: Vec<Pos> = Vec::new();
        for k in all {
            if site(k) == my_site
                && (my_tok.is_none() || tok(k) != my_tok)
                && (my_tok.is_none() || self.position_of(k) == my_pos)
            {
                placed.push(k);
            }
        }
        let stream = ix.rec(p).stream();
        let same_stream: Vec<Pos> = placed
            .iter()
            .copied()
            .filter(|&k| ix.rec(k).stream() == stream)
            .collect();
        if same_stream.is_empty() {
            placed
        } else {
            same_stream
        }
    }

    /// Each device op's position among the instances of its operation (peer key)
    /// in its request, in enqueue order; ops without a request token are left out.
    pub(super) fn positions(&self) -> Vec<u32> {
        let ix = &self.ix;
        let mut groups: FastMap<(analysis::PeerKey, SharedStr), Vec<Placed>> = FastMap::default();
        for &p in &ix.device_ops {
            let (Some(key), Some(tok)) = (analysis::peer_key(ix.rec(p)), self.token(p)) else {
                continue;
            };
            groups
                .entry((key, tok))
                .or_default()
                .push((self.enqueue_key(p), ix.rid(p), p));
        }
        let mut out = vec![NO_POSITION; ix.recs.len()];
        for mut v in groups.into_values() {
            v.sort_unstable();
            for (i, &(_, _, p)) in v.iter().enumerate() {
                out[p as usize] = i as u32;
            }
        }
        out
    }

    /// The noise floor of each phase (host, queued→submitted, submitted→start,
    /// execution): an excess is lateness only above it. Device phases: how far the
    /// peers themselves stray from their median, and a quarter of the op's typical
    /// execution time ([`DEVICE_SHARE`]: smaller device-side delays are what the
    /// application's own concurrent work causes, and the benchmark scores lateness
    /// from 0.3× the normal latency up, docs/design.md). The host phase: only
    /// [`NOISE_NS`], whatever the device op's length — its excess is either a stall
    /// the thread's scheduler or page-fault records show, or a host gap longer than
    /// the peers'. Without peers every floor is [`NOISE_NS`] (the phases are then
    /// absolute waits and stall times, which the records explain).
    pub(super) fn phase_floors(&self, peers: &[Pos]) -> [f64; PHASE_COUNT] {
        let ix = &self.ix;
        let pp: Vec<analysis::DevPhases> = peers
            .iter()
            .filter_map(|&q| readings::dev_phases(ix, q))
            .collect();
        let spread = |v: Vec<f64>| analysis::peer_spread(&v);
        // The op's normal latency is its own execution (docs/scenario-space.md,
        // `magnitude_ratio`: a kernel's duration, a copy's transfer), not its
        // enqueue-to-end time: an op deep in a gating chain normally waits in its
        // queue for the whole chain ahead of it, and a floor proportional to that
        // wait would hide a delay of the chain's root however large it is beside
        // the op itself.
        let typical_execution = median_execution(&pp).unwrap_or(0.0);
        // Judged for the op asked about, an upstream op's delay counts from a
        // quarter of the shorter of the two latencies: docs/design.md scores the
        // asked op's lateness against its own latency, and a hold of a long root
        // that is small beside the root can be most of a short symptom's.
        let scale = typical_execution.min(self.asked_latency.get());
        if self.asked_latency.get() < typical_execution {
            // Rule 4: an upstream op judged for a shorter op asked about.
            cov_mark::hit!(floor_from_the_asked_latency);
        }
        let base = NOISE_NS.max(DEVICE_SHARE * scale);
        [
            NOISE_NS,
            base.max(spread(
                pp.iter().filter_map(|d| d.queued_to_submitted).collect(),
            )),
            base.max(spread(
                pp.iter().filter_map(|d| d.submitted_to_start).collect(),
            )),
            base.max(spread(pp.iter().map(|d| d.execution).collect())),
        ]
    }

    /// The typical execution (ns) of `p`'s operation: the median over `p` and
    /// its peers; infinite for what is no device op.
    pub(super) fn typical_execution_of(&self, p: Pos) -> f64 {
        let pp: Vec<analysis::DevPhases> = self
            .device_peers(p)
            .into_iter()
            .chain([p])
            .filter_map(|k| readings::dev_phases(&self.ix, k))
            .collect();
        median_execution(&pp).unwrap_or(f64::INFINITY)
    }

    /// The normal latency of the op asked about, as docs/scenario-space.md
    /// defines it for `magnitude_ratio`: a device op's typical execution; a
    /// blocking host call's, that of the device op it waited for (its wait
    /// normally lasts as long as that op runs); infinite for anything else.
    pub(super) fn normal_latency_of(&self, p: Pos) -> f64 {
        let ix = &self.ix;
        if ix.rec(p).is_device_op() {
            return self.typical_execution_of(p);
        }
        self.call_of(p)
            .and_then(|c| self.incoming_of(c, EdgeType::Sync))
            .filter(|e| ix.rec(e.src).is_device_op())
            .map_or(f64::INFINITY, |e| {
                // Rule 7f: a wait is late by what it waited for.
                cov_mark::hit!(wait_latency_is_the_waited_op);
                self.typical_execution_of(e.src)
            })
    }

    /// Per-phase excess of a device op over its peers, host side included.
    pub(super) fn device_phases(&self, p: Pos, peers: &[Pos]) -> (Phases, Vec<(CauseLabel, f64)>) {
        let ix = &self.ix;
        let r = ix.rec(p);
        let mut ph = readings::device_excess(ix, peers, p);
        // Graph nodes have no queued/submitted: the wait after the launch call is
        // the dependency wait.
        if matches!(r, Record::Kernel { detail, .. } if detail.graph_node_id != 0) {
            let wait = |k: Pos| {
                ix.launch_api(k)
                    .map(|a| ix.start(k).saturating_sub(ix.end(a)) as f64)
            };
            ph.queued_to_submitted = analysis::excess(
                wait(p),
                peers.iter().filter_map(|&k| wait(k)).collect(),
                0.0,
            );
            ph.submitted_to_start = 0.0;
        }
        let mut host_causes = Vec::new();
        if let Some(a) = ix.launch_api(p) {
            let peer_calls: Vec<Pos> = peers.iter().filter_map(|&k| ix.launch_api(k)).collect();
            let (hx, hv) = self.host_excess(a, &peer_calls);
            ph.host_enqueue = hx;
            host_causes = hv;
        }
        (ph, host_causes)
    }
}

/// A launch's gap before it against its peers' (`launch_gap_against_peers`).
#[derive(Debug, Clone, Copy)]
pub(super) struct GapAgainstPeers {
    /// How many peers' gaps are known.
    pub peer_gaps: usize,
    /// How far the launch's gap exceeds the peers' median gap (ns, ≥ 0).
    pub excess: f64,
    /// The peers' median gap (ns).
    pub median: f64,
    /// The peers' spread of gaps around their median (ns).
    pub spread: f64,
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct HostMeasure {
    /// Call start minus when it was ready ([`HostMeasure::ready`]).
    pub(super) gap: Option<f64>,
    /// Sum of queue waits (task_begin − enqueue) along the handoff chain.
    pub(super) queue_wait: Option<f64>,
    pub(super) since_request: Option<f64>,
    /// The predecessor was only inferred (no task markers).
    pub(super) gap_inferred: bool,
    /// When the call's host predecessor finished, or the work another thread
    /// handed it arrived when that was later.
    pub(super) ready: Ns,
}

/// The median execution of device ops' phases (`None` without any).
fn median_execution(pp: &[analysis::DevPhases]) -> Option<f64> {
    median(pp.iter().map(|d| d.execution).collect())
}
