//! Trace view → Kineto-format Chrome trace JSON (what `torch.profiler` writes with
//! CUPTI activities on), so tools built for PyTorch traces — Holistic Trace Analysis
//! (HTA) first — can read any causalbench view.
//!
//! What is written, following libkineto's `CuptiActivity.cpp` / `output_json.cpp`:
//! - CUDA API records: `ph: X`, `cat: cuda_runtime | cuda_driver`, on the host
//!   process/thread, `args {cbid, correlation}` (+ `External id` when an external
//!   correlation record names the call).
//! - kernels (`cat: kernel`), copies (`gpu_memcpy`, named `Memcpy HtoD (Pinned -> Device)`
//!   as Kineto names them) and memsets (`gpu_memset`): `pid` = device, `tid` = stream,
//!   `args {device, context, stream, correlation, ...}`.
//! - one `ac2g` flow per device activity: `ph: s` on the launching API call, `ph: f`
//!   (`bp: e`) on the activity, `id` = correlation id.
//! - synchronization records: `cat: cuda_sync`, named `Stream Wait Event`, `Event Sync`,
//!   `Stream Sync`, `Context Sync`, with `args {cuda_sync_kind, stream, correlation, device,
//!   context}` and, for event waits, `wait_on_stream` / `wait_on_cuda_event_record_corr_id` /
//!   `wait_on_cuda_event_id` joined through `event_sync_id` to the `cuda_event` record
//!   (−1 when that record is not in the view, as Kineto writes an unmatched wait). Event
//!   and context synchronizations carry stream −1, as CUPTI reports them.
//! - NVTX ranges as `user_annotation` slices; host handoff markers as instant events.
//! - one `ProfilerStep#1` `user_annotation` covering the whole view (HTA's critical-path
//!   analysis is scoped to a step annotation), `deviceProperties`, `distributedInfo`
//!   (rank 0), `schemaVersion`.
//!
//! Not written: `cuda_event` records (Kineto uses them only to fill the sync fields),
//! implicit copy fences (CUPTI has no such sync type), and eBPF host records (Kineto
//! records none). Every event carries `args["causalbench.rid"]` so an adapter can map a
//! tool's answer back to view rids.
//!
//! Times: Kineto writes microseconds; nanosecond precision is kept as three decimals
//! (as PyTorch ≥ 2.3 does), so `ts = ns / 1000`.

use ground_truth::trace::{
    ApiDomain, CopyDetail, CopyDirection, HostMemory, KernelDetail, MemsetDetail, Record, SyncType,
};
use ground_truth::{Ns, TraceView};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The `args` key carrying the view rid of an event.
pub const RID_ARG: &str = "causalbench.rid";
/// The step annotation's name (HTA: `annotation="ProfilerStep"`, `instance_id=0`).
pub const STEP_NAME: &str = "ProfilerStep#1";

/// Settings of a Kineto export.
#[derive(Debug, Clone)]
pub struct KinetoOptions {
    /// `deviceProperties[].name`.
    pub device_name: String,
    /// Streaming multiprocessors of the device (`numSms`).
    pub num_sms: u32,
}

impl Default for KinetoOptions {
    fn default() -> Self {
        // The simulator models an H200 (132 SMs); views carry no device facts.
        KinetoOptions {
            device_name: "NVIDIA H200 (causalbench)".into(),
            num_sms: 132,
        }
    }
}

fn us(ns: Ns) -> Value {
    // Three decimals of microseconds = nanoseconds.
    json!((ns as f64) / 1000.0)
}

fn dur_us(start: Ns, end: Ns) -> Value {
    us(end.saturating_sub(start))
}

/// Kineto's name of a sync type (`syncTypeString`).
pub fn sync_name(t: SyncType) -> Option<&'static str> {
    Some(match t {
        SyncType::StreamWaitEvent => "Stream Wait Event",
        SyncType::EventSynchronize => "Event Sync",
        SyncType::StreamSynchronize => "Stream Sync",
        SyncType::ContextSynchronize => "Context Sync",
        SyncType::ImplicitCopyFence => return None,
    })
}

/// Kineto's memcpy name: `Memcpy HtoD (Pinned -> Device)`.
pub fn memcpy_name(direction: CopyDirection, memory: HostMemory) -> String {
    let host = match memory {
        HostMemory::Pinned => "Pinned",
        HostMemory::Pageable => "Pageable",
    };
    match direction {
        CopyDirection::H2d => format!("Memcpy HtoD ({host} -> Device)"),
        CopyDirection::D2h => format!("Memcpy DtoH (Device -> {host})"),
        CopyDirection::D2d => "Memcpy DtoD (Device -> Device)".to_string(),
    }
}

/// Summary of an export, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KinetoStats {
    pub runtime_events: usize,
    pub device_events: usize,
    pub sync_events: usize,
    pub flows: usize,
}

/// The host process id written for CPU events: the lowest host tid (the main thread's
/// tid is the process id on Linux), or 1 when the view has no host record.
fn host_pid(view: &TraceView) -> u32 {
    view.records
        .iter()
        .filter_map(|r| match r {
            Record::Api { tid, .. } | Record::Nvtx { tid, .. } | Record::Marker { tid, .. } => {
                Some(*tid)
            }
            _ => None,
        })
        .min()
        .unwrap_or(1)
}

/// Exports a view as a Kineto trace (a JSON object).
pub fn to_kineto(view: &TraceView, opts: &KinetoOptions) -> (Value, KinetoStats) {
    let mut out = Events::new(view, opts);
    for r in &view.records {
        match r {
            Record::Api { .. } => out.api(r),
            Record::Kernel { .. } | Record::Memcpy { .. } | Record::Memset { .. } => {
                out.device_op(r)
            }
            Record::Sync { .. } => out.sync(r),
            Record::Nvtx { .. } | Record::Marker { .. } => out.host_annotation(r),
            // Not in a Kineto trace (see the module doc).
            Record::CudaEvent { .. }
            | Record::ExternalCorrelation { .. }
            | Record::Uprobe { .. }
            | Record::Sched { .. }
            | Record::PageFault { .. } => {}
        }
    }
    let (s0, s1) = out.step_bounds();
    out.step_annotation(s0, s1);
    let stats = std::mem::take(&mut out.stats);
    (document(view, opts, out, s0), stats)
}

/// The joins the sync records and flows need: a `cuda_event` record by its sync id, an
/// external id and the launching API call by correlation id.
struct Joins<'v> {
    /// event sync id → (correlation id, stream) of its `cuda_event` record.
    event_by_sync_id: HashMap<u64, (u32, u32)>,
    external_by_correlation: HashMap<u32, u64>,
    api_by_correlation: HashMap<u32, &'v Record>,
}

impl<'v> Joins<'v> {
    fn of(view: &'v TraceView) -> Joins<'v> {
        let mut joins = Joins {
            event_by_sync_id: HashMap::new(),
            external_by_correlation: HashMap::new(),
            api_by_correlation: HashMap::new(),
        };
        for r in &view.records {
            match r {
                Record::CudaEvent {
                    event_sync_id,
                    correlation_id,
                    stream,
                    ..
                } => {
                    joins
                        .event_by_sync_id
                        .insert(*event_sync_id, (*correlation_id, *stream));
                }
                Record::ExternalCorrelation {
                    external_id,
                    correlation_id,
                    ..
                } => {
                    joins
                        .external_by_correlation
                        .insert(*correlation_id, *external_id);
                }
                Record::Api { correlation_id, .. } => {
                    joins.api_by_correlation.insert(*correlation_id, r);
                }
                _ => {}
            }
        }
        joins
    }
}

/// The trace's timed events as they are written, with what the metadata events need.
struct Events<'v> {
    pid: u32,
    opts: &'v KinetoOptions,
    joins: Joins<'v>,
    /// (time, order among events at that time, event).
    events: Vec<(Ns, u8, Value)>,
    host_tids: BTreeSet<u32>,
    /// (device, stream) of every device track.
    streams: BTreeSet<(u32, i64)>,
    /// Correlation ids whose `ac2g` start is written.
    flow_started: BTreeSet<u32>,
    /// Earliest positive start and latest end of the events.
    t0: Ns,
    t1: Ns,
    stats: KinetoStats,
}

impl<'v> Events<'v> {
    fn new(view: &'v TraceView, opts: &'v KinetoOptions) -> Events<'v> {
        Events {
            pid: host_pid(view),
            opts,
            joins: Joins::of(view),
            events: Vec::new(),
            host_tids: BTreeSet::new(),
            streams: BTreeSet::new(),
            flow_started: BTreeSet::new(),
            t0: Ns::MAX,
            t1: 0,
            stats: KinetoStats::default(),
        }
    }

    fn span(&mut self, s: Ns, e: Ns) {
        if s > 0 {
            self.t0 = self.t0.min(s);
        }
        self.t1 = self.t1.max(e);
    }

    /// A CUDA runtime or driver call.
    fn api(&mut self, r: &Record) {
        let Record::Api {
            domain,
            cbid,
            name,
            tid,
            start,
            end,
            correlation_id,
            ..
        } = r
        else {
            return;
        };
        let pid = self.pid;
        self.host_tids.insert(*tid);
        self.span(*start, *end);
        let mut args = Map::new();
        args.insert("cbid".into(), json!(cbid));
        args.insert("correlation".into(), json!(correlation_id));
        if let Some(x) = self.joins.external_by_correlation.get(correlation_id) {
            args.insert("External id".into(), json!(x));
        }
        args.insert(RID_ARG.into(), json!(r.rid()));
        let cat = match domain {
            ApiDomain::Runtime => "cuda_runtime",
            ApiDomain::Driver => "cuda_driver",
        };
        self.events.push((
            *start,
            1,
            json!({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                   "ts": us(*start), "dur": dur_us(*start, *end), "args": args}),
        ));
        self.stats.runtime_events += 1;
    }

    /// A kernel, copy or memset on its device and stream, with its `ac2g` flow from the
    /// launching call.
    fn device_op(&mut self, r: &Record) {
        let (queued, _submitted, start, end) = r.device_times().expect("device op");
        let stream = r.stream().expect("device op");
        let corr = r.correlation_id().expect("device op");
        self.span(start, end);
        let (cat, name, device, mut args) = device_op_args(r, self.opts, queued);
        if let Some(x) = self.joins.external_by_correlation.get(&corr) {
            args.insert("External id".into(), json!(x));
        }
        args.insert(RID_ARG.into(), json!(r.rid()));
        self.streams.insert((device, stream as i64));
        self.events.push((
            start,
            1,
            json!({"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream,
                   "ts": us(start), "dur": dur_us(start, end), "args": args}),
        ));
        self.stats.device_events += 1;
        // ac2g: one start per launching call, one end per activity.
        if let Some(Record::Api {
            tid,
            start: api_start,
            ..
        }) = self.joins.api_by_correlation.get(&corr)
        {
            if self.flow_started.insert(corr) {
                self.events.push((
                    *api_start,
                    2,
                    json!({"ph": "s", "id": corr, "pid": self.pid, "tid": tid,
                           "ts": us(*api_start), "cat": "ac2g", "name": "ac2g"}),
                ));
            }
            self.events.push((
                start,
                2,
                json!({"ph": "f", "id": corr, "pid": device, "tid": stream,
                       "ts": us(start), "cat": "ac2g", "name": "ac2g", "bp": "e"}),
            ));
            self.stats.flows += 1;
        }
    }

    /// A synchronization Kineto writes (`cuda_sync`), an event wait joined to its record.
    fn sync(&mut self, r: &Record) {
        let Record::Sync {
            sync_type,
            stream,
            event,
            event_sync_id,
            correlation_id,
            start,
            end,
            ..
        } = r
        else {
            return;
        };
        let Some(name) = sync_name(*sync_type) else {
            return;
        };
        self.span(*start, *end);
        // CUPTI reports no stream for event and context synchronizations.
        let s: i64 = match sync_type {
            SyncType::StreamWaitEvent | SyncType::StreamSynchronize => *stream as i64,
            _ => -1,
        };
        let mut args = Map::new();
        args.insert("cuda_sync_kind".into(), json!(name));
        if matches!(
            sync_type,
            SyncType::StreamWaitEvent | SyncType::EventSynchronize
        ) {
            let (corr, st) = self
                .joins
                .event_by_sync_id
                .get(event_sync_id)
                .map(|&(c, s)| (c as i64, s as i64))
                .unwrap_or((-1, -1));
            args.insert("wait_on_stream".into(), json!(st));
            args.insert("wait_on_cuda_event_record_corr_id".into(), json!(corr));
            args.insert("wait_on_cuda_event_id".into(), json!(event));
        }
        args.insert("stream".into(), json!(s));
        args.insert("correlation".into(), json!(correlation_id));
        args.insert("device".into(), json!(0));
        args.insert("context".into(), json!(1));
        args.insert(RID_ARG.into(), json!(r.rid()));
        self.streams.insert((0, s));
        self.events.push((
            *start,
            1,
            json!({"ph": "X", "cat": "cuda_sync", "name": name, "pid": 0, "tid": s,
                   "ts": us(*start), "dur": dur_us(*start, *end), "args": args}),
        ));
        self.stats.sync_events += 1;
    }

    /// An NVTX range (`user_annotation`) or a handoff marker (an instant event).
    fn host_annotation(&mut self, r: &Record) {
        let (pid, rid) = (self.pid, r.rid());
        match r {
            Record::Nvtx {
                tid,
                name,
                start,
                end,
                ..
            } => {
                self.host_tids.insert(*tid);
                self.span(*start, *end);
                self.events.push((
                    *start,
                    0,
                    json!({"ph": "X", "cat": "user_annotation", "name": name, "pid": pid,
                           "tid": tid, "ts": us(*start), "dur": dur_us(*start, *end),
                           "args": {RID_ARG: rid}}),
                ));
            }
            Record::Marker {
                tid,
                phase,
                queue,
                token,
                ts,
                ..
            } => {
                self.host_tids.insert(*tid);
                self.span(*ts, *ts);
                let phase = serde_json::to_value(phase).unwrap_or(Value::Null);
                self.events.push((
                    *ts,
                    3,
                    json!({"ph": "i", "s": "t", "cat": "causalbench_marker",
                           "name": format!("{} {}", phase.as_str().unwrap_or("marker"), queue).trim_end(),
                           "pid": pid, "tid": tid, "ts": us(*ts),
                           "args": {"token": token, "queue": queue, RID_ARG: rid}}),
                ));
            }
            _ => {}
        }
    }

    /// The step annotation's bounds: every event, with a microsecond each side.
    fn step_bounds(&mut self) -> (Ns, Ns) {
        if self.t0 == Ns::MAX {
            self.t0 = 0;
            self.t1 = 0;
        }
        (self.t0.saturating_sub(1_000), self.t1 + 1_000)
    }

    /// The step annotation covers every event, on the lowest host thread.
    fn step_annotation(&mut self, s0: Ns, s1: Ns) {
        let pid = self.pid;
        let step_tid = self.host_tids.iter().next().copied().unwrap_or(pid);
        self.events.push((
            s0,
            0,
            json!({"ph": "X", "cat": "user_annotation", "name": STEP_NAME, "pid": pid,
                   "tid": step_tid, "ts": us(s0), "dur": dur_us(s0, s1),
                   "args": {"External id": 0}}),
        ));
        self.host_tids.insert(step_tid);
    }
}

/// A device op's category, name, device and `args` (without the external id and rid).
fn device_op_args(
    r: &Record,
    opts: &KinetoOptions,
    queued: Ns,
) -> (&'static str, String, u32, Map<String, Value>) {
    let (_, _, start, end) = r.device_times().expect("device op");
    let stream = r.stream().expect("device op");
    let corr = r.correlation_id().expect("device op");
    match r {
        Record::Kernel { detail, .. } => {
            let KernelDetail {
                name,
                context,
                device,
                grid,
                block,
                ..
            } = &**detail;
            let blocks = (grid[0] as u64 * grid[1] as u64 * grid[2] as u64) as f64;
            let mut a = op_args(*device, *context, stream, corr);
            a.insert("queued".into(), us(queued));
            a.insert("registers per thread".into(), json!(32));
            a.insert("shared memory".into(), json!(0));
            a.insert(
                "blocks per SM".into(),
                json!(blocks / opts.num_sms.max(1) as f64),
            );
            a.insert("grid".into(), json!(grid));
            a.insert("block".into(), json!(block));
            ("kernel", name.to_string(), *device, a)
        }
        Record::Memcpy {
            direction,
            memory,
            detail,
            ..
        } => {
            let CopyDetail {
                bytes,
                context,
                device,
                ..
            } = &**detail;
            let mut a = op_args(*device, *context, stream, corr);
            a.insert("bytes".into(), json!(bytes));
            a.insert(
                "memory bandwidth (GB/s)".into(),
                bandwidth(*bytes, start, end),
            );
            ("gpu_memcpy", memcpy_name(*direction, *memory), *device, a)
        }
        Record::Memset { detail, .. } => {
            let MemsetDetail {
                bytes,
                context,
                device,
            } = &**detail;
            let mut a = op_args(*device, *context, stream, corr);
            a.insert("bytes".into(), json!(bytes));
            a.insert(
                "memory bandwidth (GB/s)".into(),
                bandwidth(*bytes, start, end),
            );
            ("gpu_memset", "Memset (Device)".to_string(), *device, a)
        }
        _ => unreachable!("device_op_args of a device op"),
    }
}

/// The whole trace document: metadata events (process and thread names), the timed
/// events in order, device properties and the top-level fields.
fn document(view: &TraceView, opts: &KinetoOptions, out: Events, s0: Ns) -> Value {
    let Events {
        pid,
        mut events,
        host_tids,
        streams,
        ..
    } = out;
    // Order: by time, enclosing annotations before what they enclose, flows last.
    events.sort_by_key(|e| (e.0, e.1));

    let mut trace_events: Vec<Value> = Vec::new();
    trace_events.push(
        json!({"name": "process_name", "ph": "M", "ts": us(s0), "pid": pid, "tid": 0,
                             "args": {"name": "causalbench host"}}),
    );
    trace_events.push(
        json!({"name": "process_labels", "ph": "M", "ts": us(s0), "pid": pid, "tid": 0,
                             "args": {"labels": "CPU"}}),
    );
    for tid in &host_tids {
        trace_events.push(
            json!({"name": "thread_name", "ph": "M", "ts": us(s0), "pid": pid,
                                 "tid": tid, "args": {"name": format!("thread {tid}")}}),
        );
    }
    let devices: BTreeSet<u32> = streams.iter().map(|&(d, _)| d).collect();
    for d in &devices {
        trace_events.push(
            json!({"name": "process_name", "ph": "M", "ts": us(s0), "pid": d, "tid": 0,
                                 "args": {"name": format!("GPU {d}")}}),
        );
        trace_events.push(
            json!({"name": "process_labels", "ph": "M", "ts": us(s0), "pid": d, "tid": 0,
                                 "args": {"labels": format!("GPU {d}")}}),
        );
    }
    for (d, s) in &streams {
        let name = if *s < 0 {
            "sync (no stream)".to_string()
        } else {
            format!("stream {s}")
        };
        trace_events.push(
            json!({"name": "thread_name", "ph": "M", "ts": us(s0), "pid": d,
                                 "tid": s, "args": {"name": name}}),
        );
    }
    trace_events.extend(events.into_iter().map(|e| e.2));

    let device_properties: Vec<Value> = devices
        .iter()
        .chain(devices.is_empty().then_some(&0))
        .map(|d| {
            json!({"id": d, "name": opts.device_name, "totalGlobalMem": 150_754_820_096u64,
                   "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
                   "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
                   "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
                   "sharedMemPerMultiprocessor": 233472, "numSms": opts.num_sms,
                   "sharedMemPerBlockOptin": 232448})
        })
        .collect();
    let mut top = BTreeMap::new();
    top.insert("schemaVersion", json!(1));
    top.insert("deviceProperties", json!(device_properties));
    top.insert(
        "distributedInfo",
        json!({"backend": "nccl", "rank": 0, "world_size": 1}),
    );
    top.insert(
        "traceName",
        json!(format!(
            "causalbench view {} ({})",
            view.bundle,
            view.spec.label()
        )),
    );
    top.insert("displayTimeUnit", json!("ms"));
    top.insert("baseTimeNanoseconds", json!(0));
    top.insert("traceEvents", json!(trace_events));
    json!(top)
}

fn bandwidth(bytes: u64, start: Ns, end: Ns) -> Value {
    // bytes / ns == GB/s
    if end > start {
        json!(bytes as f64 / (end - start) as f64)
    } else {
        json!("N/A")
    }
}

/// Exports a view as Kineto JSON text.
pub fn to_kineto_string(view: &TraceView, opts: &KinetoOptions) -> String {
    serde_json::to_string(&to_kineto(view, opts).0).expect("JSON values serialize")
}

/// Writes a view as a Kineto trace file (atomically).
pub fn write_kineto(
    view: &TraceView,
    opts: &KinetoOptions,
    path: &std::path::Path,
) -> std::io::Result<KinetoStats> {
    let (v, stats) = to_kineto(view, opts);
    crate::write_file(
        path,
        serde_json::to_string(&v).expect("serializes").as_bytes(),
    )?;
    Ok(stats)
}

/// The args every device op's event carries (Kineto's names).
fn op_args(device: u32, context: u32, stream: u32, correlation: u32) -> Map<String, Value> {
    let mut a = Map::new();
    a.insert("device".into(), json!(device));
    a.insert("context".into(), json!(context));
    a.insert("stream".into(), json!(stream));
    a.insert("correlation".into(), json!(correlation));
    a
}
