//! Pieces of analysis several baselines share: peers (other instances of the
//! same operation in the view, the only reference a profiler has since it never
//! sees the no-injection twin), per-phase excess over peers, and cause ranking.

use crate::index::{median, Index, Pos};
use ground_truth::trace::{CopyDirection, HostMemory, Record};
use ground_truth::{CauseLabel, Ns, Phases, RankedCause, SharedStr};
use std::collections::HashMap;

/// Lateness below this is noise (ns).
pub const NOISE_NS: f64 = 20_000.0;

/// How far back before a call with no host predecessor on its thread (ns) that
/// thread's scheduler and page-fault records still count as stalls of the call.
pub const STALL_LOOKBACK_NS: ground_truth::Ns = 50_000_000;

/// How far the peers stray: the largest distance of a value from their median
/// (0 without values).
pub fn peer_spread(values: &[f64]) -> f64 {
    median(values.to_vec()).map_or(0.0, |m| {
        values.iter().map(|x| (x - m).abs()).fold(0.0, f64::max)
    })
}

/// What makes two device ops "the same operation" for peer comparison.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PeerKey {
    Kernel(SharedStr),
    GraphNode(u32, u64),
    Copy(CopyDirection, HostMemory, u64),
    /// Copies of one direction and memory kind on one stream, whatever their
    /// size: the fallback when no copy of the same shape exists (the same
    /// transfer step whose payload changed between requests).
    CopyOnStream(CopyDirection, HostMemory, u32),
    Memset(u64),
}

pub fn peer_key(r: &Record) -> Option<PeerKey> {
    match r {
        Record::Kernel { detail, .. } => Some(PeerKey::Kernel(detail.name.clone())),
        Record::Memcpy {
            direction,
            memory,
            detail,
            ..
        } => Some(PeerKey::Copy(*direction, *memory, detail.bytes)),
        Record::Memset { detail, .. } => Some(PeerKey::Memset(detail.bytes)),
        _ => None,
    }
}

fn copy_on_stream_key(r: &Record) -> Option<PeerKey> {
    match r {
        Record::Memcpy {
            direction,
            memory,
            stream,
            ..
        } => Some(PeerKey::CopyOnStream(*direction, *memory, *stream)),
        _ => None,
    }
}

/// Device ops grouped by peer key (graph nodes also by (graph, node)).
pub struct Peers {
    by_key: HashMap<PeerKey, Vec<Pos>>,
}

impl Peers {
    pub fn new(ix: &Index) -> Self {
        let mut by_key: HashMap<PeerKey, Vec<Pos>> = HashMap::new();
        for &p in &ix.device_ops {
            let r = ix.rec(p);
            if let Some(k) = peer_key(r) {
                by_key.entry(k).or_default().push(p);
            }
            if let Some(k) = copy_on_stream_key(r) {
                by_key.entry(k).or_default().push(p);
            }
            if let Record::Kernel { detail, .. } = r {
                if detail.graph_node_id != 0 {
                    by_key
                        .entry(PeerKey::GraphNode(detail.graph_id, detail.graph_node_id))
                        .or_default()
                        .push(p);
                }
            }
        }
        Peers { by_key }
    }

    /// How many device ops share `r`'s peer key (itself included; 0 for a
    /// record with none), without gathering them.
    pub fn instances(&self, r: &Record) -> usize {
        peer_key(r)
            .and_then(|k| self.by_key.get(&k))
            .map_or(0, Vec::len)
    }

    /// Other instances of the same operation (graph node replays first).
    pub fn of(&self, ix: &Index, p: Pos) -> Vec<Pos> {
        let r = ix.rec(p);
        if let Record::Kernel { detail, .. } = r {
            if detail.graph_node_id != 0 {
                if let Some(v) = self
                    .by_key
                    .get(&PeerKey::GraphNode(detail.graph_id, detail.graph_node_id))
                {
                    if v.len() > 1 {
                        return v.iter().copied().filter(|&q| q != p).collect();
                    }
                }
            }
        }
        let others = |k: Option<PeerKey>| -> Vec<Pos> {
            k.and_then(|k| self.by_key.get(&k))
                .map(|v| v.iter().copied().filter(|&q| q != p).collect())
                .unwrap_or_default()
        };
        let same = others(peer_key(r));
        if same.is_empty() {
            others(copy_on_stream_key(r))
        } else {
            same
        }
    }
}

/// Device-side phases of one op as CUPTI reports them (None when a timestamp is 0).
#[derive(Debug, Clone, Copy, Default)]
pub struct DevPhases {
    pub queued_to_submitted: Option<f64>,
    pub submitted_to_start: Option<f64>,
    pub execution: f64,
}

fn phases_of(q: Ns, s: Ns, st: Ns, e: Ns) -> DevPhases {
    DevPhases {
        queued_to_submitted: (q > 0 && s >= q).then(|| (s - q) as f64),
        submitted_to_start: (s > 0 && st >= s).then(|| (st - s) as f64),
        execution: e.saturating_sub(st) as f64,
    }
}

/// Own value minus the peers' median, clamped at 0; the own value minus
/// `default_base` when there are no peers.
pub fn excess(own: Option<f64>, peer_vals: Vec<f64>, default_base: f64) -> f64 {
    let Some(own) = own else { return 0.0 };
    let base = median(peer_vals).unwrap_or(default_base);
    (own - base).max(0.0)
}

/// Device phases, filling in what CUPTI leaves out: copies and memsets carry no
/// queued/submitted on real hardware, so queued is taken as the launching call's
/// start and submitted as the moment the stream let the op go: its previous op
/// ended and the event of a stream wait ahead of it fired.
pub fn dev_phases_in(ix: &Index, p: Pos) -> Option<DevPhases> {
    dev_phases_from(ix, p, ix.device_times(p)?)
}

/// [`dev_phases_in`] from the (queued, submitted, start, end) a profiler read
/// for `p` (the record's own, or as the profiler corrects them).
pub fn dev_phases_from(ix: &Index, p: Pos, times: (Ns, Ns, Ns, Ns)) -> Option<DevPhases> {
    let r = ix.rec(p);
    let (q, s, start, end) = times;
    let mut d = phases_of(q, s, start, end);
    let graph_node = matches!(r, Record::Kernel { detail, .. } if detail.graph_node_id != 0);
    if q == 0 && s == 0 && !graph_node {
        let Some(queued) = ix.launch_api(p).map(|a| ix.start(a)) else {
            return Some(d);
        };
        let stream = r.stream();
        let k = ix.device_ops.partition_point(|&o| ix.start(o) < start);
        // The stream's previous op: the nearest earlier-starting op of the same stream.
        let prev_end = ix.device_ops[..k]
            .iter()
            .rev()
            .take(256)
            .find(|&&o| o != p && ix.rec(o).stream() == stream)
            .map(|&o| ix.end(o))
            .unwrap_or(0);
        // A stream wait enqueued ahead of it held it until its event fired:
        // that wait is the gate, not the SMs (the H200's memsets and copies
        // carry no submitted time of their own).
        let fired = stream.map_or(0, |s| ix.wait_fired_before(s, queued));
        let submitted = queued.max(prev_end).max(fired).min(start);
        d.queued_to_submitted = Some(submitted.saturating_sub(queued) as f64);
        d.submitted_to_start = Some(start.saturating_sub(submitted) as f64);
    }
    Some(d)
}

/// Per-phase excess of a device op over its peers, from device timestamps only.
pub fn device_excess(ix: &Index, peers: &[Pos], p: Pos) -> Phases {
    device_excess_by(peers, p, |k| dev_phases_in(ix, k))
}

/// [`device_excess`] with each op's phases as `phases_of` reads them.
pub fn device_excess_by(
    peers: &[Pos],
    p: Pos,
    phases_of: impl Fn(Pos) -> Option<DevPhases>,
) -> Phases {
    let Some(own) = phases_of(p) else {
        return Phases::default();
    };
    let pp: Vec<DevPhases> = peers.iter().filter_map(|&q| phases_of(q)).collect();
    let has_peers = !pp.is_empty();
    Phases {
        host_enqueue: 0.0,
        queued_to_submitted: excess(
            own.queued_to_submitted,
            pp.iter().filter_map(|d| d.queued_to_submitted).collect(),
            0.0,
        ),
        submitted_to_start: excess(
            own.submitted_to_start,
            pp.iter().filter_map(|d| d.submitted_to_start).collect(),
            0.0,
        ),
        // Without peers a profiler cannot tell a long op from a slow one.
        execution: if has_peers {
            excess(
                Some(own.execution),
                pp.iter().map(|d| d.execution).collect(),
                0.0,
            )
        } else {
            0.0
        },
    }
}

/// Index of the largest phase (0 host, 1 queued→submitted, 2 submitted→start, 3 execution).
pub fn dominant(ph: &Phases) -> (usize, f64) {
    ph.as_array().iter().copied().enumerate().fold(
        (0, 0.0),
        |best, (i, v)| if v > best.1 { (i, v) } else { best },
    )
}

/// Is `excess` more than noise, relative to a typical duration `typical`?
pub fn significant(excess: f64, typical: f64) -> bool {
    excess > NOISE_NS.max(0.25 * typical)
}

/// Other device ops on a different stream that ran during `[from, to]`,
/// matching `pred`; returns the overlapped time.
pub fn overlap_by_others(
    ix: &Index,
    me: Pos,
    from: Ns,
    to: Ns,
    pred: impl Fn(&Record) -> bool,
) -> f64 {
    if to <= from {
        return 0.0;
    }
    let my_stream = ix.rec(me).stream();
    let mut total = 0.0;
    // Ops are sorted by start; anything starting after `to` cannot overlap. Long
    // ops starting well before `from` are found by scanning back a bounded window.
    let k = ix.device_ops.partition_point(|&q| ix.start(q) < to);
    for &q in ix.device_ops[..k].iter().rev().take(4096) {
        if q == me {
            continue;
        }
        let r = ix.rec(q);
        if r.stream() == my_stream || !pred(r) {
            continue;
        }
        let (s, e) = r.interval();
        let lo = s.max(from);
        let hi = e.min(to);
        if hi > lo {
            total += (hi - lo) as f64;
        }
    }
    total
}

/// Cause ranking: merges duplicate labels (max), sorts by score, normalizes to sum 1.
pub fn ranked(v: Vec<(CauseLabel, f64)>) -> Vec<RankedCause> {
    let mut best: Vec<(CauseLabel, f64)> = Vec::new();
    for (l, s) in v {
        let s = if s.is_finite() { s.max(0.0) } else { 0.0 };
        match best.iter_mut().find(|(b, _)| *b == l) {
            Some(e) => e.1 = e.1.max(s),
            None => best.push((l, s)),
        }
    }
    best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let total: f64 = best.iter().map(|x| x.1).sum();
    best.into_iter()
        .map(|(label, s)| RankedCause {
            label,
            score: if total > 0.0 {
                (s / total * 1000.0).round() / 1000.0
            } else {
                0.0
            },
        })
        .collect()
}

/// The phases of [`Phases::as_array`], by index.
pub const HOST_PHASE: usize = 0;
pub const QUEUE_PHASE: usize = 1;
pub const START_PHASE: usize = 2;
pub const EXECUTION_PHASE: usize = 3;
/// How many phases [`Phases::as_array`] has.
pub const PHASE_COUNT: usize = 4;

/// What a late device phase names, for a copy (`copy`) or another device op:
/// the cause first (weight 1), then the alternatives with their weight beside
/// it. The one phase-to-cause table of every profiler (it existed twice, in
/// `common`'s CUPTI reading and in the reference's diagnosis, and had
/// diverged; the reference's alternatives were kept, see baselines/README.md,
/// "One phase-to-cause table"). The host phase names nothing here: the host
/// collector's records do.
/// - queued→submitted: the op waited for its stream (a stream wait's event is
///   the alternative);
/// - submitted→start: it waited for the resource other work held, the copy
///   engine or the SMs (a slow copy, a backlog behind it, the alternatives);
/// - execution: a copy's transfer was slow (the link shared, the
///   alternative); a kernel ran long, sharing the SMs (a graph node's
///   dependents wait for it: `graph_dependency`, the alternative).
pub fn phase_causes(phase: usize, copy: bool) -> &'static [(CauseLabel, f64)] {
    use CauseLabel::*;
    match (phase, copy) {
        (QUEUE_PHASE, _) => &[(StreamBacklog, 1.0), (EventWait, 0.5)],
        (START_PHASE, true) => &[(PcieContention, 1.0), (SlowCopy, 0.2)],
        (START_PHASE, false) => &[(OccupancyPressure, 1.0), (StreamBacklog, 0.3)],
        (EXECUTION_PHASE, true) => &[(SlowCopy, 1.0), (PcieContention, 0.3)],
        (EXECUTION_PHASE, false) => &[(OccupancyPressure, 1.0), (GraphDependency, 0.1)],
        _ => &[],
    }
}

/// The cause a late device phase names ([`phase_causes`]'s first).
pub fn phase_cause(phase: usize, copy: bool) -> Option<CauseLabel> {
    phase_causes(phase, copy).first().map(|c| c.0)
}

/// Device-side cause ranking used by the CUPTI-only baselines: the dominant
/// device phase decides (no host evidence), through [`phase_causes`].
pub fn device_phase_causes(
    ix: &Index,
    p: Pos,
    ex: &Phases,
    typical: f64,
) -> Vec<(CauseLabel, f64)> {
    let r = ix.rec(p);
    let is_copy = matches!(r, Record::Memcpy { .. });
    let (d, v) = dominant(ex);
    if !significant(v, typical) {
        return vec![(CauseLabel::None, 1.0), (CauseLabel::HostCompute, 0.2)];
    }
    let mut out = Vec::new();
    // A pageable copy waiting in its queue: its call held the host until the
    // stream drained (docs/gpu-facts.md), an implicit fence.
    if d == QUEUE_PHASE
        && matches!(
            r,
            Record::Memcpy {
                memory: HostMemory::Pageable,
                ..
            }
        )
    {
        out.push((CauseLabel::ImplicitSync, v));
    }
    // The host phase is never dominant here (the callers zero it): the
    // execution's causes stand for it as they always did.
    let phase = if d == HOST_PHASE { EXECUTION_PHASE } else { d };
    out.extend(
        phase_causes(phase, is_copy)
            .iter()
            .map(|&(l, w)| (l, v * w)),
    );
    for (i, &x) in ex.as_array().iter().enumerate() {
        if i != d && significant(x, typical) {
            if let Some(l) = phase_cause(i, is_copy) {
                out.push((l, x * 0.5));
            }
        }
    }
    out
}

/// Typical total latency of an op's peers (queued or start → end), for thresholds.
pub fn typical_latency(ix: &Index, peers: &[Pos]) -> f64 {
    median(
        peers
            .iter()
            .filter_map(|&q| ix.device_times(q))
            .map(|(q, _, s, e)| e.saturating_sub(if q > 0 { q } else { s }) as f64)
            .collect(),
    )
    .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranked_merges_sorts_and_normalizes() {
        let r = ranked(vec![
            (CauseLabel::SlowCopy, 1.0),
            (CauseLabel::None, 3.0),
            (CauseLabel::SlowCopy, 2.0),
        ]);
        assert_eq!(r[0].label, CauseLabel::None);
        assert_eq!(r[1].label, CauseLabel::SlowCopy);
        assert!((r[0].score - 0.6).abs() < 1e-9);
    }
}
