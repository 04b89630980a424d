//! What Kineto saw of a run, bound to the executor's ops: each CUDA call
//! Kineto recorded on a host thread lies inside the `cb:op:<id>:<token>`
//! annotation the executor wrapped that op's call in (its private
//! correlation, the way the CUDA backend binds CUPTI's records through a
//! recorder-private external correlation id), and each device activity and
//! synchronization event carries the correlation id of its call. Calls inside
//! `cb:h` (the executor's time-stamp kernels) are harness work, not kept.
//! Nothing here decides a time of the ground truth: these are the records a
//! profiler sees.

use ground_truth::trace::{ApiDomain, CopyDirection, HostMemory, Record, SyncType};
use ground_truth::Ns;
use kineto::{Activities, DeviceActivity, DeviceKind, HostCall, SyncActivity};
use std::collections::HashMap;

/// The executor's annotation of one op's call.
const OP_PREFIX: &str = "cb:op:";
/// The executor's annotation of its own harness work.
const HARNESS: &str = "cb:h";

/// Kineto's activities by the op they belong to.
#[derive(Debug, Default)]
pub struct Binding {
    pub calls: HashMap<u64, Vec<usize>>,
    pub device: HashMap<u64, Vec<usize>>,
    pub syncs: HashMap<u64, Vec<usize>>,
    /// Kineto's correlation id → the op whose call it was.
    pub op_of_correlation: HashMap<u64, u64>,
    /// Calls Kineto recorded inside the executor's harness annotations.
    pub harness_calls: usize,
    /// Calls of no op (the framework's own: device queries, allocations...).
    pub other_calls: usize,
    /// Kineto's clock minus CLOCK_MONOTONIC, removed from every time.
    pub shift_ns: i64,
    /// Kineto's thread ids → the OS thread ids the executor saw, where they differ.
    pub threads: HashMap<u64, u32>,
}

/// The entry point a kernel name is launched as (`executor.py`'s `entry_name`):
/// Kineto names the kernel by it.
pub fn entry_name(name: &str) -> String {
    let out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("k_{out}")
    } else {
        out
    }
}

/// The op id of an executor annotation `cb:op:<id>:<token>`.
pub fn annotated_op(name: &str) -> Option<u64> {
    let rest = name.strip_prefix(OP_PREFIX)?;
    rest.split(':').next()?.parse().ok()
}

/// Whether an annotation is the executor's own (never shown to a profiler).
pub fn is_executor_annotation(name: &str) -> bool {
    name == HARNESS || name.starts_with(OP_PREFIX)
}

/// One op's call as the executor timed it: (op id, thread, start, end,
/// what the name of its working call contains, `Op::api_key`), CLOCK_MONOTONIC.
pub type TimedCall = (u64, u32, Ns, Ns, &'static str);

/// How far outside an op's own call interval a Kineto call may be stamped
/// and still be that op's (the clocks' residual offset).
const CALL_SLACK_NS: i64 = 3_000;

/// Binds Kineto's activities to the executor's ops. `shift_ns` is Kineto's
/// clock minus CLOCK_MONOTONIC as the executor read the two clocks around
/// the run (on the H200, Kineto's calls then lie inside the executor's own
/// call intervals within a microsecond). A call on a thread where
/// Kineto kept no annotation (kineto#443: other threads' operators) is bound
/// to the op whose own call interval on that thread contains it.
pub fn bind(acts: &Activities, shift_ns: i64, ops: &[TimedCall]) -> Binding {
    let mut b = Binding {
        shift_ns,
        ..Default::default()
    };
    // Per thread: the executor's annotations, by start.
    let mut spans: HashMap<u64, Vec<(i64, i64, Option<u64>)>> = HashMap::new();
    for a in &acts.annotations {
        if a.category != "user_annotation" || !is_executor_annotation(&a.name) {
            continue;
        }
        spans
            .entry(a.tid)
            .or_default()
            .push((a.start, a.end, annotated_op(&a.name)));
    }
    for v in spans.values_mut() {
        v.sort_unstable_by_key(|s| (s.0, s.1));
    }
    for (i, c) in acts.calls.iter().enumerate() {
        let owner = spans.get(&c.tid).and_then(|v| {
            let k = v.partition_point(|s| s.0 <= c.start);
            // The innermost (latest-starting) annotation that still contains the call.
            v[..k].iter().rev().find(|s| s.1 >= c.end).map(|s| s.2)
        });
        match owner {
            Some(Some(op)) => {
                b.calls.entry(op).or_default().push(i);
                b.op_of_correlation.insert(c.correlation, op);
            }
            Some(None) => b.harness_calls += 1,
            None => b.other_calls += 1,
        }
    }
    let by_id: HashMap<u64, &TimedCall> = ops.iter().map(|o| (o.0, o)).collect();
    for (op, calls) in &b.calls {
        if let Some(o) = by_id.get(op) {
            for &c in calls {
                b.threads.insert(acts.calls[c].tid, o.1);
            }
        }
    }
    let mut per_thread: HashMap<u32, Vec<&TimedCall>> = HashMap::new();
    for o in ops {
        per_thread.entry(o.1).or_default().push(o);
    }
    for v in per_thread.values_mut() {
        v.sort_unstable_by_key(|o| o.2);
    }
    let unannotated: Vec<usize> = acts
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            !spans
                .get(&c.tid)
                .is_some_and(|v| v.iter().any(|s| s.0 <= c.start && c.end <= s.1))
        })
        .map(|(i, _)| i)
        .collect();
    // Kineto names some threads by another number than the OS thread id (a
    // worker thread where Kineto kept no annotation): each Kineto thread is
    // the executor thread most of whose op intervals hold its calls.
    let within =
        |o: &TimedCall, t: i64, slack: i64| o.2 as i64 - slack <= t && t <= o.3 as i64 + slack;
    let mut votes: HashMap<u64, HashMap<u32, usize>> = HashMap::new();
    for &i in &unannotated {
        let c = &acts.calls[i];
        let t = c.start - b.shift_ns;
        let end = c.end - b.shift_ns;
        for o in ops
            .iter()
            .filter(|o| within(o, t, CALL_SLACK_NS) && within(o, end, CALL_SLACK_NS))
        {
            *votes.entry(c.tid).or_default().entry(o.1).or_default() += 1;
        }
    }
    for (k, v) in votes {
        if b.threads.contains_key(&k) {
            continue;
        }
        if let Some((&tid, _)) = v.iter().max_by_key(|(t, n)| (**n, std::cmp::Reverse(**t))) {
            b.threads.insert(k, tid);
        }
    }
    let nearest = |tid: u32, t: i64, slack: i64| -> Option<&TimedCall> {
        per_thread
            .get(&tid)?
            .iter()
            .copied()
            .find(|o| within(o, t, slack))
    };
    for &i in &unannotated {
        let c = &acts.calls[i];
        let (start, end) = (c.start - b.shift_ns, c.end - b.shift_ns);
        let fits =
            |o: &&TimedCall| within(o, start, CALL_SLACK_NS) && within(o, end, CALL_SLACK_NS);
        let mapped = b.threads.get(&c.tid).copied();
        // An op's working call (its kind's API) held by the op's own call
        // interval: on the thread Kineto's thread maps to, else the only such op.
        let keyed: Vec<&TimedCall> = ops
            .iter()
            .filter(|o| c.name.contains(o.4))
            .filter(fits)
            .collect();
        let found = keyed
            .iter()
            .copied()
            .find(|o| Some(o.1) == mapped)
            .or_else(|| (keyed.len() == 1).then(|| keyed[0]))
            .or_else(|| {
                nearest(mapped?, start, CALL_SLACK_NS).filter(|o| within(o, end, CALL_SLACK_NS))
            });
        if let Some(o) = found {
            b.other_calls -= 1;
            b.calls.entry(o.0).or_default().push(i);
            b.op_of_correlation.insert(c.correlation, o.0);
        }
    }
    for (i, d) in acts.device.iter().enumerate() {
        if let Some(&op) = b.op_of_correlation.get(&d.correlation) {
            b.device.entry(op).or_default().push(i);
        }
    }
    for (i, s) in acts.syncs.iter().enumerate() {
        if let Some(&op) = b.op_of_correlation.get(&s.correlation) {
            b.syncs.entry(op).or_default().push(i);
        }
    }
    b
}

impl Binding {
    pub fn time(&self, t: i64) -> Ns {
        (t - self.shift_ns).max(0) as Ns
    }
}

/// The record of a Kineto CUDA call.
pub fn call_record(b: &Binding, c: &HostCall, rid: u64) -> Record {
    Record::Api {
        rid,
        domain: if c.driver {
            ApiDomain::Driver
        } else {
            ApiDomain::Runtime
        },
        cbid: c.cbid,
        name: c.name.as_str().into(),
        tid: b.threads.get(&c.tid).copied().unwrap_or(c.tid as u32),
        start: b.time(c.start),
        end: b.time(c.end),
        correlation_id: c.correlation as u32,
    }
}

/// Kineto names a copy "Memcpy HtoD (Pinned -> Device)".
fn copy_kind(name: &str) -> (CopyDirection, HostMemory) {
    let direction = if name.contains("DtoH") {
        CopyDirection::D2h
    } else if name.contains("HtoD") {
        CopyDirection::H2d
    } else {
        CopyDirection::D2d
    };
    let memory = if name.contains("Pinned") {
        HostMemory::Pinned
    } else {
        HostMemory::Pageable
    };
    (direction, memory)
}

/// The record of a Kineto device activity.
pub fn device_record(b: &Binding, d: &DeviceActivity, rid: u64) -> Record {
    let (start, end) = (b.time(d.start), b.time(d.end));
    match d.kind {
        DeviceKind::Kernel => Record::Kernel {
            rid,
            stream: d.stream,
            correlation_id: d.correlation as u32,
            queued: 0,
            submitted: 0,
            start,
            end,
            detail: ground_truth::trace::KernelDetail {
                name: d.name.as_str().into(),
                context: d.context,
                device: d.device,
                graph_id: 0,
                graph_node_id: d.graph_node_id,
                grid: d.grid,
                block: d.block,
                channel: 0,
            }
            .into(),
        },
        DeviceKind::Memcpy => {
            let (direction, memory) = copy_kind(&d.name);
            Record::Memcpy {
                rid,
                direction,
                memory,
                stream: d.stream,
                correlation_id: d.correlation as u32,
                queued: 0,
                submitted: 0,
                start,
                end,
                detail: ground_truth::trace::CopyDetail {
                    bytes: d.bytes,
                    context: d.context,
                    device: d.device,
                    graph_id: 0,
                    graph_node_id: 0,
                    channel: 0,
                }
                .into(),
            }
        }
        DeviceKind::Memset => Record::Memset {
            rid,
            stream: d.stream,
            correlation_id: d.correlation as u32,
            queued: 0,
            submitted: 0,
            start,
            end,
            detail: ground_truth::trace::MemsetDetail {
                bytes: d.bytes,
                context: d.context,
                device: d.device,
            }
            .into(),
        },
    }
}

/// Kineto's synchronization kinds.
pub fn sync_type(name: &str) -> Option<SyncType> {
    match name {
        "Stream Wait Event" => Some(SyncType::StreamWaitEvent),
        "Stream Sync" => Some(SyncType::StreamSynchronize),
        "Event Sync" => Some(SyncType::EventSynchronize),
        "Context Sync" => Some(SyncType::ContextSynchronize),
        _ => None,
    }
}

/// The record of a Kineto synchronization event. The event record waited on
/// is named by the correlation id of its `cudaEventRecord` call, Kineto's
/// only link (0 where Kineto left it at -1).
pub fn sync_record(b: &Binding, s: &SyncActivity, rid: u64) -> Option<Record> {
    Some(Record::Sync {
        rid,
        sync_type: sync_type(&s.name)?,
        stream: s.stream,
        event: 0,
        event_sync_id: s.wait_on_event_record.unwrap_or(0),
        correlation_id: s.correlation as u32,
        start: b.time(s.start),
        end: b.time(s.end),
    })
}
