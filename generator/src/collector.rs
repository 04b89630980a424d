//! A collector's records bound to the truth of the run they observed
//! (baselines/COLLECTORS.md): the workload's bundle (`causalbench workload`,
//! truth from its own stamps) with its trace replaced by what an external
//! collector recorded of the same process, so the views, profilers and
//! metrics read a real collector's records.
//!
//! Binding is the recorder's job, done here by time alone, the way
//! `cuda/host` binds eBPF records: the collector's clock is moved onto
//! CLOCK_MONOTONIC ([`align`]), records outside the injected run's window are
//! dropped (the workload's twin and quiet runs, its setup), device records
//! go to the device node of their kind they overlap best, call records
//! (CUPTI API records, uprobes) to the call node of their thread they lie in,
//! scheduler and page-fault records to the injected fault of their thread
//! they overlap. The truth itself (times, edges, labels) is the workload's
//! and never changes.

use crate::record::RidScramble;
use ground_truth::collector::{CollectorClock, CollectorRecords};
use ground_truth::graph::{Boundary, EdgeType, NodeId, NodeKind};
use ground_truth::trace::{Record, Rid};
use ground_truth::{Bundle, Collectors, Mode, Ns, ViewSpec};
use std::collections::{HashMap, HashSet};

/// How far a device record may lie from its node (start plus end) and still
/// be its observation: clock alignment error plus the collector's own
/// timestamp placement.
const DEVICE_TOLERANCE_NS: i64 = 20_000;
/// Margin around the injected run's truth in which records count as its own.
const WINDOW_MARGIN_NS: Ns = 50_000;

/// A kernel the workload ran, in CLOCK_MONOTONIC (from its stamps): what a
/// collector's own clock is aligned against.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct KnownKernel {
    pub name: String,
    pub start: Ns,
    pub end: Ns,
}

/// What binding one bundle did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Binding {
    /// CLOCK_MONOTONIC − the collector's clock (0 for a monotonic collector).
    pub offset_ns: i64,
    /// Kernels that agreed with the chosen offset within 2 µs, of those compared.
    pub aligned_kernels: usize,
    pub records_in_window: usize,
    pub records_owned: usize,
    pub device_nodes: usize,
    pub device_nodes_observed: usize,
    pub call_nodes: usize,
    pub call_nodes_observed: usize,
    /// Collector thread ids read as OS thread ids (by the calls they lie in).
    pub threads_mapped: usize,
}

fn start_of(r: &Record) -> Option<Ns> {
    Some(match r {
        Record::Api { start, .. }
        | Record::Kernel { start, .. }
        | Record::Memcpy { start, .. }
        | Record::Memset { start, .. }
        | Record::Sync { start, .. }
        | Record::Nvtx { start, .. } => *start,
        Record::CudaEvent { ts, .. } | Record::Marker { ts, .. } | Record::PageFault { ts, .. } => {
            *ts
        }
        Record::Uprobe { enter, .. } => *enter,
        Record::Sched { switch_out, .. } => *switch_out,
        Record::ExternalCorrelation { .. } => return None,
    })
}

fn shift(r: &mut Record, by: i64) {
    let s = |t: &mut Ns| {
        if *t > 0 {
            *t = (*t as i64 + by).max(0) as Ns
        }
    };
    match r {
        Record::Api { start, end, .. }
        | Record::Sync { start, end, .. }
        | Record::Nvtx { start, end, .. } => {
            s(start);
            s(end)
        }
        Record::Kernel {
            queued,
            submitted,
            start,
            end,
            ..
        }
        | Record::Memcpy {
            queued,
            submitted,
            start,
            end,
            ..
        }
        | Record::Memset {
            queued,
            submitted,
            start,
            end,
            ..
        } => {
            s(queued);
            s(submitted);
            s(start);
            s(end)
        }
        Record::CudaEvent { ts, .. } | Record::Marker { ts, .. } | Record::PageFault { ts, .. } => {
            s(ts)
        }
        Record::Uprobe { enter, exit, .. } => {
            s(enter);
            s(exit)
        }
        Record::Sched {
            switch_out,
            switch_in,
            ..
        } => {
            s(switch_out);
            s(switch_in)
        }
        Record::ExternalCorrelation { .. } => {}
    }
}

/// The offset (CLOCK_MONOTONIC − collector clock) that puts the most of the
/// collector's kernel records on a kernel the workload ran with the same
/// name, start within 1 µs: every pair votes for its difference, the densest
/// 1 µs bin (with its neighbours) wins, and the median of its votes is the
/// offset. Returns the offset and how many kernels agree within 2 µs.
pub fn align(records: &[Record], known: &[KnownKernel]) -> Result<(i64, usize), String> {
    let mut by_name: HashMap<&str, Vec<Ns>> = HashMap::new();
    for k in known {
        by_name.entry(k.name.as_str()).or_default().push(k.start);
    }
    let mut votes: HashMap<i64, Vec<i64>> = HashMap::new();
    let mut compared = 0usize;
    for r in records {
        let Record::Kernel { start, detail, .. } = r else {
            continue;
        };
        let Some(starts) = by_name.get(detail.name.as_str()) else {
            continue;
        };
        compared += 1;
        for &k in starts {
            let d = k as i64 - *start as i64;
            votes.entry(d.div_euclid(1_000)).or_default().push(d);
        }
    }
    let support = |bin: i64| -> usize {
        (bin - 1..=bin + 1)
            .map(|b| votes.get(&b).map_or(0, Vec::len))
            .sum()
    };
    let best = votes
        .keys()
        .copied()
        .max_by_key(|&b| (support(b), std::cmp::Reverse(b)))
        .ok_or_else(|| {
            format!(
                "cannot align the collector's clock: none of its {compared} kernel records has the name of a kernel the workload ran"
            )
        })?;
    let mut near: Vec<i64> = (best - 1..=best + 1)
        .flat_map(|b| votes.get(&b).cloned().unwrap_or_default())
        .collect();
    near.sort_unstable();
    let offset = near[near.len() / 2];
    let agreeing = near.iter().filter(|d| (*d - offset).abs() <= 2_000).count();
    if agreeing < 3.min(known.len()) {
        return Err(format!(
            "cannot align the collector's clock: the best offset puts only {agreeing} of {compared} kernel records on a kernel of the workload"
        ));
    }
    Ok((offset, agreeing))
}

/// A collector whose thread ids are not the OS's (CUPTI's default thread id
/// is `pthread_self`'s): each of its ids is read as the OS thread whose call
/// nodes contain most of its API records' midpoints. Returns how many ids
/// were mapped; ids the truth already knows stay.
fn map_threads(records: &mut [Record], truth: &ground_truth::GroundTruth) -> usize {
    let os: HashSet<u32> = truth.nodes.iter().filter_map(|n| n.detail.thread).collect();
    let mut calls: Vec<(Ns, Ns, u32)> = truth
        .nodes
        .iter()
        .filter(|n| is_call(n.kind))
        .filter_map(|n| Some((n.start, n.end, n.detail.thread?)))
        .collect();
    calls.sort_unstable();
    let mut votes: HashMap<u32, HashMap<u32, usize>> = HashMap::new();
    for r in records.iter() {
        let Record::Api {
            tid, start, end, ..
        } = r
        else {
            continue;
        };
        if os.contains(tid) {
            continue;
        }
        let mid = start / 2 + end.max(start) / 2;
        let upto = calls.partition_point(|c| c.0 <= mid);
        // Calls are short: the few that started last before `mid` are the candidates.
        for c in calls[upto.saturating_sub(64)..upto]
            .iter()
            .filter(|c| mid <= c.1)
        {
            *votes.entry(*tid).or_default().entry(c.2).or_default() += 1;
        }
    }
    let map: HashMap<u32, u32> = votes
        .into_iter()
        .filter_map(|(from, to)| {
            to.into_iter()
                .max_by_key(|&(t, n)| (n, std::cmp::Reverse(t)))
                .map(|(t, _)| (from, t))
        })
        .collect();
    for r in records.iter_mut() {
        if let Record::Api { tid, .. } | Record::Nvtx { tid, .. } = r {
            if let Some(&t) = map.get(tid) {
                *tid = t;
            }
        }
    }
    map.len()
}

fn device_kind(r: &Record) -> Option<&'static [NodeKind]> {
    match r {
        Record::Kernel { .. } => Some(&[NodeKind::Kernel, NodeKind::GraphNode]),
        Record::Memcpy { .. } => Some(&[NodeKind::Memcpy]),
        Record::Memset { .. } => Some(&[NodeKind::Memset]),
        _ => None,
    }
}

fn is_call(k: NodeKind) -> bool {
    matches!(
        k,
        NodeKind::ApiCall | NodeKind::Synchronization | NodeKind::GraphLaunch
    )
}

/// `stamped` (the workload's bundle) with `set`'s records of its injected run
/// as its trace, bound to its nodes; `known`: every kernel the workload ran
/// (for a collector on its own clock).
pub fn bind(
    stamped: &Bundle,
    set: &CollectorRecords,
    known: &[KnownKernel],
) -> Result<(Bundle, Binding), String> {
    let truth = &stamped.ground_truth;
    let mut binding = Binding::default();
    let mut records = set.records.clone();
    if set.clock == CollectorClock::Own {
        let (offset, agreeing) = align(&records, known)?;
        binding.offset_ns = offset;
        binding.aligned_kernels = agreeing;
        for r in &mut records {
            shift(r, offset);
        }
    }
    let timed = truth.nodes.iter().filter(|n| n.start > 0);
    let from = timed.clone().map(|n| n.start).min().unwrap_or(0);
    let to = timed.map(|n| n.end.max(n.start)).max().unwrap_or(0);
    let (from, to) = (from.saturating_sub(WINDOW_MARGIN_NS), to + WINDOW_MARGIN_NS);
    let inside: Vec<Record> = records
        .into_iter()
        .filter(|r| start_of(r).is_some_and(|t| (from..=to).contains(&t)))
        .collect();
    let correlations: HashSet<u32> = inside
        .iter()
        .filter_map(|r| match r {
            Record::Api { correlation_id, .. } => Some(*correlation_id),
            _ => None,
        })
        .collect();
    let mut kept = inside;
    binding.threads_mapped = map_threads(&mut kept, truth);
    kept.extend(set.records.iter().filter(|r| {
        matches!(r, Record::ExternalCorrelation { correlation_id, .. } if correlations.contains(correlation_id))
    }).cloned());
    binding.records_in_window = kept.len();

    // Device nodes by start, per kind; call and fault nodes per thread.
    let mut device: Vec<(Ns, NodeId)> = truth
        .nodes
        .iter()
        .filter(|n| n.kind.is_device_op())
        .map(|n| (n.start, n.id))
        .collect();
    device.sort_unstable();
    let mut calls: HashMap<u32, Vec<NodeId>> = HashMap::new();
    let mut faults: HashMap<u32, Vec<NodeId>> = HashMap::new();
    for n in &truth.nodes {
        if let Some(t) = n.detail.thread {
            if is_call(n.kind) {
                calls.entry(t).or_default().push(n.id);
            } else if n.kind == NodeKind::InjectedFault {
                faults.entry(t).or_default().push(n.id);
            }
        }
    }
    binding.device_nodes = device.len();
    binding.call_nodes = calls.values().map(Vec::len).sum();
    let mut taken: HashSet<NodeId> = HashSet::new();
    let mut owner: Vec<Option<NodeId>> = vec![None; kept.len()];
    let node = |id: NodeId| &truth.nodes[id as usize];
    for (i, r) in kept.iter().enumerate() {
        owner[i] = if let Some(kinds) = device_kind(r) {
            let (s, e) = match r {
                Record::Kernel { start, end, .. }
                | Record::Memcpy { start, end, .. }
                | Record::Memset { start, end, .. } => (*start as i64, *end as i64),
                _ => unreachable!("device records only"),
            };
            let lo = device.partition_point(|d| (d.0 as i64) < s - DEVICE_TOLERANCE_NS);
            device[lo..]
                .iter()
                .take_while(|d| (d.0 as i64) <= s + DEVICE_TOLERANCE_NS)
                .filter(|d| !taken.contains(&d.1) && kinds.contains(&node(d.1).kind))
                .map(|d| {
                    let n = node(d.1);
                    ((n.start as i64 - s).abs() + (n.end as i64 - e).abs(), d.1)
                })
                .filter(|c| c.0 <= 2 * DEVICE_TOLERANCE_NS)
                .min()
                .map(|c| c.1)
        } else {
            let (tid, s, e, fault) = match r {
                Record::Api {
                    tid, start, end, ..
                } => (*tid, *start, *end, false),
                Record::Uprobe {
                    tid, enter, exit, ..
                } => (*tid, *enter, *exit, false),
                Record::Sched {
                    tid,
                    switch_out,
                    switch_in,
                    ..
                } => (*tid, *switch_out, *switch_in, true),
                Record::PageFault { tid, ts, .. } => (*tid, *ts, *ts, true),
                _ => continue,
            };
            let pool = if fault { &faults } else { &calls };
            let mid = s / 2 + e.max(s) / 2;
            pool.get(&tid).and_then(|ns| {
                ns.iter()
                    .copied()
                    .filter(|&id| {
                        let n = node(id);
                        if fault {
                            s <= n.end && e.max(s) >= n.start
                        } else {
                            n.start <= mid && mid <= n.end
                        }
                    })
                    .min_by_key(|&id| node(id).end - node(id).start)
            })
        };
        if let Some(n) = owner[i] {
            if device_kind(r).is_some() {
                taken.insert(n);
            }
        }
    }

    let mut out = stamped.clone();
    for n in &mut out.ground_truth.nodes {
        n.rids = Default::default();
    }
    let scramble = RidScramble::new(kept.len() as u64 + 1, stamped.manifest.seed ^ 0xC011_EC70);
    let mut trace = Vec::with_capacity(kept.len());
    for (i, mut r) in kept.into_iter().enumerate() {
        let rid: Rid = scramble.apply(i as Rid + 1);
        *r.rid_mut() = rid;
        if let Some(n) = owner[i] {
            out.ground_truth.nodes[n as usize].rids.push(rid);
        }
        trace.push(r);
    }
    binding.records_owned = owner.iter().flatten().count();
    binding.device_nodes_observed = taken.len();
    binding.call_nodes_observed = out
        .ground_truth
        .nodes
        .iter()
        .filter(|n| is_call(n.kind) && !n.rids.is_empty())
        .count();
    rebind_symptoms(&mut out, &trace)?;
    out.trace = trace;
    out.manifest.collectors = vec![format!("own:{}", set.collector)];
    out.loss = ground_truth::LossAccounting {
        cupti_dropped: set.dropped,
        ..Default::default()
    };
    Ok((out, binding))
}

/// Each symptom's record and first unresolved boundaries, read again in the
/// collector's records (as `answers::symptom` reads them in the recorder's):
/// the symptom's own record (a device or sync record first), else its
/// launching call's; none is a case the collector cannot be asked about.
fn rebind_symptoms(b: &mut Bundle, trace: &[Record]) -> Result<(), String> {
    let by_rid: HashMap<Rid, &Record> = trace.iter().map(|r| (r.rid(), r)).collect();
    let truth = &mut b.ground_truth;
    let mut launchers: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
    for e in &truth.edges {
        if e.kind == EdgeType::Launch {
            launchers.entry(e.dst).or_default().push(e.src);
        }
    }
    let mut symptoms = std::mem::take(&mut truth.symptoms);
    for s in &mut symptoms {
        let own = &truth.nodes[s.node as usize].rids;
        let primary = own
            .iter()
            .copied()
            .find(|r| {
                by_rid
                    .get(r)
                    .is_some_and(|rec| rec.is_device_op() || matches!(rec, Record::Sync { .. }))
            })
            .or_else(|| own.first().copied())
            .or_else(|| {
                launchers
                    .get(&s.node)?
                    .iter()
                    .find_map(|&l| truth.nodes[l as usize].rids.first().copied())
            })
            .ok_or_else(|| {
                format!(
                    "the collector observed neither the symptom `{}` nor the call that launched it",
                    truth.nodes[s.node as usize].name
                )
            })?;
        s.rid = primary;
        let kept = |collectors: Collectors, mode: Mode, id: NodeId| {
            truth.nodes[id as usize].rids.iter().any(|r| {
                by_rid
                    .get(r)
                    .is_some_and(|rec| ViewSpec::keeps(collectors, mode, rec))
            })
        };
        let mut boundaries = Vec::new();
        for collectors in Collectors::ALL {
            for mode in [Mode::Instrumented, Mode::Closed] {
                let edge =
                    truth.first_unresolved(&s.critical_path, |id| kept(collectors, mode, id));
                boundaries.push(Boundary {
                    collectors,
                    mode,
                    edge,
                });
            }
        }
        s.boundaries = boundaries;
    }
    truth.symptoms = symptoms;
    Ok(())
}
