//! Bundle (optionally one view of it) and explanation → Perfetto.
//!
//! Two traces per case, each in Perfetto's native protobuf format (a `Trace` message:
//! a stream of `TracePacket`s with `TrackDescriptor`s and `TrackEvent`s, encoded with
//! hand-written `prost` messages whose field numbers are those of Perfetto's
//! `trace_packet.proto`, `track_event.proto`, `track_descriptor.proto`,
//! `debug_annotation.proto`) and as Chrome JSON:
//!
//! - **truth** ([`truth_model`]): every record with an interval is a slice (a
//!   zero-length record an instant) on the track of its host thread or device stream;
//!   every ground-truth edge is a flow from the slice of its source node to an instant
//!   named `← TYPE` on the track of its destination; nodes no shown record observes
//!   (lost records, nodes without records) get a slice on the `ground truth · unrecorded
//!   nodes` track so every flow has both ends. The symptom's slice is prefixed `⚠`, the
//!   injection target's `💉`, and both are marked by instants on the `marks` track.
//! - **claimed** ([`claimed_model`]): the same slices; one flow per claimed edge
//!   (`src ≠ dst`, both records shown) ending at an instant named
//!   `← TYPE · EVIDENCE CONF ✓|✗` (✓ = the edge is in the ground truth), so instants of one
//!   evidence class share a name and a colour; `missing` claims are instants
//!   `missing predecessor (claimed)`; each diagnosis is an instant on the profiler's track.
//!
//! Tracks: process `host` with one thread track per host thread (API calls on the thread
//! track itself; NVTX, uprobes, scheduler, page faults and markers on child tracks);
//! process `GPU d` with one track per stream (device ops, event records; stream
//! syncs on a child track) and a `synchronization` track; process `causalbench` with
//! the marks. Records that overlap without nesting go to extra child lanes (`… #2`),
//! since Perfetto slices on one track must nest.

use ground_truth::trace::{Record, Rid};
use ground_truth::{Bundle, EdgeType, Evidence, Explanation, Node, NodeId, Ns, TraceView};
use prost::Message;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Hand-written Perfetto protos (field numbers from perfetto/protos/perfetto/trace/*).
pub mod proto {
    /// `perfetto.protos.Trace`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Trace {
        #[prost(message, repeated, tag = "1")]
        pub packet: Vec<TracePacket>,
    }

    /// `perfetto.protos.TracePacket` (the fields used here).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TracePacket {
        #[prost(uint64, optional, tag = "8")]
        pub timestamp: Option<u64>,
        #[prost(uint32, optional, tag = "10")]
        pub trusted_packet_sequence_id: Option<u32>,
        #[prost(message, optional, tag = "11")]
        pub track_event: Option<TrackEvent>,
        #[prost(uint32, optional, tag = "13")]
        pub sequence_flags: Option<u32>,
        #[prost(message, optional, tag = "60")]
        pub track_descriptor: Option<TrackDescriptor>,
    }

    /// `TrackEvent.Type`.
    pub const TYPE_SLICE_BEGIN: i32 = 1;
    pub const TYPE_SLICE_END: i32 = 2;
    pub const TYPE_INSTANT: i32 = 3;
    /// `TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`.
    pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
    /// `TrackDescriptor.ChildTracksOrdering.EXPLICIT`.
    pub const CHILD_ORDERING_EXPLICIT: i32 = 3;

    /// `perfetto.protos.TrackEvent` (the fields used here).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TrackEvent {
        #[prost(message, repeated, tag = "4")]
        pub debug_annotations: Vec<DebugAnnotation>,
        #[prost(int32, optional, tag = "9")]
        pub r#type: Option<i32>,
        #[prost(uint64, optional, tag = "11")]
        pub track_uuid: Option<u64>,
        #[prost(string, repeated, tag = "22")]
        pub categories: Vec<String>,
        #[prost(string, optional, tag = "23")]
        pub name: Option<String>,
        #[prost(fixed64, repeated, packed = "false", tag = "47")]
        pub flow_ids: Vec<u64>,
        #[prost(fixed64, repeated, packed = "false", tag = "48")]
        pub terminating_flow_ids: Vec<u64>,
    }

    /// `perfetto.protos.DebugAnnotation` (name + one scalar value).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct DebugAnnotation {
        #[prost(bool, optional, tag = "2")]
        pub bool_value: Option<bool>,
        #[prost(uint64, optional, tag = "3")]
        pub uint_value: Option<u64>,
        #[prost(int64, optional, tag = "4")]
        pub int_value: Option<i64>,
        #[prost(double, optional, tag = "5")]
        pub double_value: Option<f64>,
        #[prost(string, optional, tag = "6")]
        pub string_value: Option<String>,
        #[prost(string, optional, tag = "10")]
        pub name: Option<String>,
    }

    /// `perfetto.protos.TrackDescriptor` (the fields used here).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TrackDescriptor {
        #[prost(uint64, optional, tag = "1")]
        pub uuid: Option<u64>,
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
        #[prost(message, optional, tag = "3")]
        pub process: Option<ProcessDescriptor>,
        #[prost(message, optional, tag = "4")]
        pub thread: Option<ThreadDescriptor>,
        #[prost(uint64, optional, tag = "5")]
        pub parent_uuid: Option<u64>,
        #[prost(int32, optional, tag = "11")]
        pub child_ordering: Option<i32>,
        #[prost(int32, optional, tag = "12")]
        pub sibling_order_rank: Option<i32>,
    }

    /// `perfetto.protos.ProcessDescriptor`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProcessDescriptor {
        #[prost(int32, optional, tag = "1")]
        pub pid: Option<i32>,
        #[prost(string, optional, tag = "6")]
        pub process_name: Option<String>,
    }

    /// `perfetto.protos.ThreadDescriptor`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ThreadDescriptor {
        #[prost(int32, optional, tag = "1")]
        pub pid: Option<i32>,
        #[prost(int32, optional, tag = "2")]
        pub tid: Option<i32>,
        #[prost(string, optional, tag = "5")]
        pub thread_name: Option<String>,
    }
}

/// What a track is.
#[derive(Debug, Clone, PartialEq)]
pub enum TrackKind {
    Process {
        pid: u32,
    },
    Thread {
        pid: u32,
        tid: u32,
    },
    /// A named track under `parent`.
    Named,
}

#[derive(Debug, Clone)]
pub struct Track {
    pub uuid: u64,
    pub parent: Option<u64>,
    pub name: String,
    pub kind: TrackKind,
    /// Position among siblings.
    pub rank: i32,
}

/// A debug-annotation value.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    U(u64),
    I(i64),
    F(f64),
    S(String),
    B(bool),
}

/// A slice (`end > start`) or an instant (`instant`).
#[derive(Debug, Clone)]
pub struct Slice {
    pub track: u64,
    pub start: Ns,
    pub end: Ns,
    pub instant: bool,
    pub name: String,
    pub category: &'static str,
    pub args: Vec<(String, Arg)>,
    /// Flows leaving this slice.
    pub flows_out: Vec<u64>,
    /// Flows ending at this slice.
    pub flows_in: Vec<u64>,
    /// Nesting depth on its track (set by lane assignment).
    pub depth: u32,
}

/// A flow between two slices (indices into `Model::slices`).
#[derive(Debug, Clone)]
pub struct Flow {
    pub id: u64,
    pub name: String,
    pub from: usize,
    pub to: usize,
}

/// The exported picture: tracks, slices and flows; written as protobuf or JSON.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub title: String,
    pub tracks: Vec<Track>,
    pub slices: Vec<Slice>,
    pub flows: Vec<Flow>,
    /// Edges that could not be drawn (an end not shown), with why.
    pub skipped: Vec<String>,
}

/// Counts of an export, for logs and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelStats {
    pub tracks: usize,
    pub thread_tracks: usize,
    pub stream_tracks: usize,
    pub slices: usize,
    pub instants: usize,
    pub flows: usize,
}

impl Model {
    pub fn stats(&self) -> ModelStats {
        ModelStats {
            tracks: self.tracks.len(),
            thread_tracks: self
                .tracks
                .iter()
                .filter(|t| matches!(t.kind, TrackKind::Thread { .. }))
                .count(),
            stream_tracks: self
                .tracks
                .iter()
                .filter(|t| {
                    t.name.starts_with("stream ")
                        && t.parent.is_some_and(|p| {
                            self.tracks.iter().any(|q| {
                                q.uuid == p
                                    && matches!(q.kind, TrackKind::Process { pid } if pid >= GPU_PID_BASE)
                            })
                        })
                })
                .count(),
            slices: self.slices.iter().filter(|s| !s.instant).count(),
            instants: self.slices.iter().filter(|s| s.instant).count(),
            flows: self.flows.len(),
        }
    }
}

const HOST_PID_FALLBACK: u32 = 1;
/// Synthetic pids of the GPU and causalbench processes (clear of real tids).
const GPU_PID_BASE: u32 = 0x7f00_0000;
const CB_PID: u32 = 0x7e00_0000;

/// Where a record goes: (group key, lane-group label) before lane assignment.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Group {
    Thread(u32, &'static str),
    Stream(u32, u32, &'static str),
    GpuSync(u32),
    Cb(String),
}

struct Builder {
    model: Model,
    host_pid: u32,
    next_uuid: u64,
    /// Base track of each group (lane 0) and its extra lanes.
    lanes: BTreeMap<Group, Vec<u64>>,
    process_tracks: BTreeMap<u32, u64>,
    thread_tracks: BTreeMap<u32, u64>,
    stream_tracks: BTreeMap<(u32, u32), u64>,
    /// Pending slices per group, laid out in `layout`.
    pending: BTreeMap<Group, Vec<usize>>,
    /// The group of every slice.
    group: Vec<Group>,
}

impl Builder {
    fn new(title: String, host_pid: u32) -> Self {
        Builder {
            model: Model {
                title,
                ..Default::default()
            },
            host_pid,
            next_uuid: 1,
            lanes: BTreeMap::new(),
            process_tracks: BTreeMap::new(),
            thread_tracks: BTreeMap::new(),
            stream_tracks: BTreeMap::new(),
            pending: BTreeMap::new(),
            group: Vec::new(),
        }
    }

    fn track(&mut self, parent: Option<u64>, name: String, kind: TrackKind, rank: i32) -> u64 {
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        self.model.tracks.push(Track {
            uuid,
            parent,
            name,
            kind,
            rank,
        });
        uuid
    }

    fn process(&mut self, pid: u32, name: &str, rank: i32) -> u64 {
        if let Some(&u) = self.process_tracks.get(&pid) {
            return u;
        }
        let u = self.track(None, name.to_string(), TrackKind::Process { pid }, rank);
        self.process_tracks.insert(pid, u);
        u
    }

    fn thread(&mut self, tid: u32) -> u64 {
        if let Some(&u) = self.thread_tracks.get(&tid) {
            return u;
        }
        let pid = self.host_pid;
        self.process(pid, "host", 0);
        let u = self.track(
            None,
            format!("thread {tid}"),
            TrackKind::Thread { pid, tid },
            tid as i32,
        );
        self.thread_tracks.insert(tid, u);
        u
    }

    fn stream(&mut self, device: u32, stream: u32) -> u64 {
        if let Some(&u) = self.stream_tracks.get(&(device, stream)) {
            return u;
        }
        let p = self.process(GPU_PID_BASE + device, &format!("GPU {device}"), 1);
        let u = self.track(
            Some(p),
            format!("stream {stream}"),
            TrackKind::Named,
            stream as i32,
        );
        self.stream_tracks.insert((device, stream), u);
        u
    }

    /// Lane 0 of a group (creating its track).
    fn base(&mut self, g: &Group) -> u64 {
        if let Some(v) = self.lanes.get(g) {
            return v[0];
        }
        let u = match g {
            Group::Thread(tid, "api") => self.thread(*tid),
            Group::Thread(tid, label) => {
                let t = self.thread(*tid);
                let rank = [
                    "nvtx",
                    "uprobe",
                    "sched",
                    "page faults",
                    "markers",
                    "unrecorded",
                ]
                .iter()
                .position(|l| l == label)
                .unwrap_or(9) as i32;
                self.track(
                    Some(t),
                    format!("thread {tid} · {label}"),
                    TrackKind::Named,
                    rank,
                )
            }
            Group::Stream(d, s, "ops") => self.stream(*d, *s),
            Group::Stream(d, s, label) => {
                let t = self.stream(*d, *s);
                self.track(
                    Some(t),
                    format!("stream {s} · {label}"),
                    TrackKind::Named,
                    0,
                )
            }
            Group::GpuSync(d) => {
                let p = self.process(GPU_PID_BASE + d, &format!("GPU {d}"), 1);
                self.track(
                    Some(p),
                    "synchronization".to_string(),
                    TrackKind::Named,
                    i32::MAX,
                )
            }
            Group::Cb(label) => {
                let p = self.process(CB_PID, "causalbench", -1);
                self.track(Some(p), label.clone(), TrackKind::Named, 0)
            }
        };
        self.lanes.insert(g.clone(), vec![u]);
        u
    }

    /// Adds a slice to a group; its track is decided in `layout`.
    fn add(&mut self, g: Group, mut s: Slice) -> usize {
        s.track = self.base(&g);
        let i = self.model.slices.len();
        self.model.slices.push(s);
        self.group.push(g.clone());
        self.pending.entry(g).or_default().push(i);
        i
    }

    /// Puts every group's slices on lanes where they nest; instants stay on lane 0.
    fn layout(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for (g, mut idx) in pending {
            idx.sort_by(|&a, &b| {
                let (x, y) = (&self.model.slices[a], &self.model.slices[b]);
                (x.start, std::cmp::Reverse(x.end), a).cmp(&(y.start, std::cmp::Reverse(y.end), b))
            });
            let mut stacks: Vec<Vec<Ns>> = vec![Vec::new()];
            for i in idx {
                let (start, end, instant) = {
                    let s = &self.model.slices[i];
                    (s.start, s.end, s.instant)
                };
                if instant {
                    continue;
                }
                let mut chosen = None;
                for (li, st) in stacks.iter_mut().enumerate() {
                    while st.last().is_some_and(|&e| e <= start) {
                        st.pop();
                    }
                    if st.last().is_none_or(|&top| end <= top) {
                        chosen = Some((li, st.len() as u32));
                        st.push(end);
                        break;
                    }
                }
                let (lane, depth) = chosen.unwrap_or_else(|| {
                    stacks.push(vec![end]);
                    (stacks.len() - 1, 0)
                });
                while self.lanes[&g].len() <= lane {
                    let n = self.lanes[&g].len();
                    let base = self.lanes[&g][0];
                    let name = format!(
                        "{} #{}",
                        self.model
                            .tracks
                            .iter()
                            .find(|t| t.uuid == base)
                            .map(|t| t.name.clone())
                            .unwrap_or_default(),
                        n + 1
                    );
                    let u = self.track(Some(base), name, TrackKind::Named, n as i32);
                    self.lanes.get_mut(&g).unwrap().push(u);
                }
                let s = &mut self.model.slices[i];
                s.track = self.lanes[&g][lane];
                s.depth = depth;
            }
        }
    }
}

/// The group (track) a record's slice belongs to.
fn group_of(r: &Record) -> Option<Group> {
    Some(match r {
        Record::Api { tid, .. } => Group::Thread(*tid, "api"),
        Record::Nvtx { tid, .. } => Group::Thread(*tid, "nvtx"),
        Record::Uprobe { tid, .. } => Group::Thread(*tid, "uprobe"),
        Record::Sched { tid, .. } => Group::Thread(*tid, "sched"),
        Record::PageFault { tid, .. } => Group::Thread(*tid, "page faults"),
        Record::Marker { tid, .. } => Group::Thread(*tid, "markers"),
        Record::Kernel { device, stream, .. }
        | Record::Memcpy { device, stream, .. }
        | Record::Memset { device, stream, .. } => Group::Stream(*device, *stream, "ops"),
        Record::CudaEvent { stream, .. } => Group::Stream(0, *stream, "ops"),
        Record::Sync {
            sync_type, stream, ..
        } => match sync_type {
            ground_truth::trace::SyncType::StreamWaitEvent
            | ground_truth::trace::SyncType::StreamSynchronize => Group::Stream(0, *stream, "sync"),
            _ => Group::GpuSync(0),
        },
        Record::ExternalCorrelation { .. } => return None,
    })
}

/// A short name for a record's slice.
fn record_name(r: &Record) -> String {
    match r {
        Record::Api { name, .. } => name.to_string(),
        Record::Kernel { name, .. } => name.to_string(),
        Record::Memcpy {
            direction, memory, ..
        } => crate::kineto::memcpy_name(*direction, *memory),
        Record::Memset { .. } => "Memset (Device)".into(),
        Record::Sync { sync_type, .. } => crate::kineto::sync_name(*sync_type)
            .unwrap_or("Implicit copy fence")
            .to_string(),
        Record::CudaEvent { event_sync_id, .. } => format!("event record #{event_sync_id}"),
        Record::ExternalCorrelation { .. } => "external correlation".into(),
        Record::Nvtx { name, .. } => name.to_string(),
        Record::Marker {
            phase,
            queue,
            token,
            ..
        } => {
            let p = serde_json::to_value(phase)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            format!("{p} {queue} {token}")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        }
        Record::Uprobe { function, .. } => function.to_string(),
        Record::Sched { reason, .. } => format!(
            "switched out ({})",
            serde_json::to_value(reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ),
        Record::PageFault { major, .. } => {
            if *major {
                "major page fault".into()
            } else {
                "minor page fault".into()
            }
        }
    }
}

/// The record's fields as debug annotations.
fn record_args(r: &Record) -> Vec<(String, Arg)> {
    let mut out = Vec::new();
    if let Value::Object(m) = serde_json::to_value(r).unwrap_or(Value::Null) {
        for (k, v) in m {
            let a = match v {
                Value::Number(n) => {
                    if let Some(u) = n.as_u64() {
                        Arg::U(u)
                    } else if let Some(i) = n.as_i64() {
                        Arg::I(i)
                    } else {
                        Arg::F(n.as_f64().unwrap_or(0.0))
                    }
                }
                Value::String(s) => Arg::S(s),
                Value::Bool(b) => Arg::B(b),
                other => Arg::S(other.to_string()),
            };
            out.push((k, a));
        }
    }
    out
}

/// Which of a node's records stands for it: device activity, then API call, sync, event
/// record, marker, NVTX, uprobe, scheduler, page fault.
fn kind_rank(r: &Record) -> u8 {
    match r {
        Record::Kernel { .. } | Record::Memcpy { .. } | Record::Memset { .. } => 0,
        Record::Api { .. } => 1,
        Record::Sync { .. } => 2,
        Record::CudaEvent { .. } => 3,
        Record::Marker { .. } => 4,
        Record::Nvtx { .. } => 5,
        Record::Uprobe { .. } => 6,
        Record::Sched { .. } => 7,
        Record::PageFault { .. } => 8,
        Record::ExternalCorrelation { .. } => 9,
    }
}

/// The records shown: the view's, or the whole trace.
fn shown<'a>(bundle: &'a Bundle, view: Option<&'a TraceView>) -> &'a [Record] {
    view.map(|v| v.records.as_slice())
        .unwrap_or(bundle.trace.as_slice())
}

struct Base {
    b: Builder,
    /// Slice index of each shown record.
    slice_of_rid: HashMap<Rid, usize>,
    /// Slice index standing for each node (its best shown record, or an unrecorded slice).
    slice_of_node: HashMap<NodeId, usize>,
}

fn host_pid(records: &[Record]) -> u32 {
    records
        .iter()
        .filter_map(|r| r.tid())
        .min()
        .unwrap_or(HOST_PID_FALLBACK)
}

/// Slices for every shown record, symptom and injection marks.
fn base(bundle: &Bundle, view: Option<&TraceView>, title: String) -> Base {
    let records = shown(bundle, view);
    let mut b = Builder::new(title, host_pid(records));
    let truth = &bundle.ground_truth;
    let owner = truth.rid_owner();
    let mut slice_of_rid = HashMap::new();
    for r in records {
        let Some(g) = group_of(r) else { continue };
        let (start, end) = r.interval();
        let mut args = vec![("rid".to_string(), Arg::U(r.rid()))];
        if let Some(&n) = owner.get(&r.rid()) {
            let node = &truth.nodes[n as usize];
            args.push(("node".into(), Arg::U(n as u64)));
            args.push(("node_kind".into(), Arg::S(enum_str(&node.kind))));
            if let Some(req) = &node.request {
                args.push(("request".into(), Arg::S(req.to_string())));
            }
        }
        args.extend(record_args(r).into_iter().filter(|(k, _)| k != "rid"));
        let i = b.add(
            g,
            Slice {
                track: 0,
                start,
                end: end.max(start),
                instant: end <= start,
                name: record_name(r),
                category: r.kind_name(),
                args,
                flows_out: Vec::new(),
                flows_in: Vec::new(),
                depth: 0,
            },
        );
        slice_of_rid.insert(r.rid(), i);
    }
    let rank_of: HashMap<Rid, u8> = records.iter().map(|r| (r.rid(), kind_rank(r))).collect();
    let mut slice_of_node = HashMap::new();
    for n in &truth.nodes {
        let best = n
            .rids
            .iter()
            .filter_map(|rid| slice_of_rid.get(rid).map(|&i| (rid, i)))
            .min_by_key(|&(rid, i)| (rank_of.get(rid).copied().unwrap_or(9), i))
            .map(|(_, i)| i);
        if let Some(i) = best {
            slice_of_node.insert(n.id, i);
        }
    }
    let mut base = Base {
        b,
        slice_of_rid,
        slice_of_node,
    };
    mark_symptoms_and_injection(bundle, &mut base);
    base
}

fn enum_str<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The node an injection was aimed at: its fault node, else the target step's node of
/// the requested request instance (by start time).
pub fn injection_target(bundle: &Bundle) -> Option<NodeId> {
    let truth = &bundle.ground_truth;
    if let Some(n) = truth.injections.iter().find_map(|i| i.fault_node) {
        return Some(n);
    }
    let inj = bundle.manifest.scenario.injection.as_ref()?;
    let mut cands: Vec<&Node> = truth
        .nodes
        .iter()
        .filter(|n| n.step.as_deref() == Some(inj.target.as_str()))
        .collect();
    cands.sort_by_key(|n| (n.start, n.id));
    cands
        .get((inj.request as usize).min(cands.len().saturating_sub(1)))
        .map(|n| n.id)
}

fn mark_symptoms_and_injection(bundle: &Bundle, base: &mut Base) {
    let truth = &bundle.ground_truth;
    for s in &truth.symptoms {
        let node = &truth.nodes[s.node as usize];
        let at = base
            .slice_of_rid
            .get(&s.rid)
            .or_else(|| base.slice_of_node.get(&s.node))
            .copied();
        let t = at
            .map(|i| base.b.model.slices[i].start)
            .unwrap_or(node.start);
        if let Some(i) = at {
            let sl = &mut base.b.model.slices[i];
            sl.name = format!("⚠ {}", sl.name);
            sl.args.push(("symptom".into(), Arg::S(s.id.clone())));
        }
        let name = format!(
            "SYMPTOM {}: {} — true cause {}, {:.1} µs late",
            s.id,
            node.name,
            s.cause,
            s.lateness_ns / 1000.0
        );
        base.b.add(
            Group::Cb("marks".into()),
            Slice {
                track: 0,
                start: t,
                end: t,
                instant: true,
                name,
                category: "symptom",
                args: vec![
                    ("query".into(), Arg::S(s.id.clone())),
                    ("rid".into(), Arg::U(s.rid)),
                    ("cause".into(), Arg::S(s.cause.to_string())),
                    ("question".into(), Arg::S(enum_str(&s.question))),
                    (
                        "answer".into(),
                        Arg::S(s.answer.clone().unwrap_or_default()),
                    ),
                ],
                flows_out: Vec::new(),
                flows_in: Vec::new(),
                depth: 0,
            },
        );
    }
    if let Some(inj) = truth.injections.first() {
        let target = injection_target(bundle);
        let at = target.and_then(|n| base.slice_of_node.get(&n).copied());
        let t = at
            .map(|i| base.b.model.slices[i].start)
            .or_else(|| target.map(|n| truth.nodes[n as usize].start))
            .unwrap_or(0);
        if let Some(i) = at {
            let sl = &mut base.b.model.slices[i];
            sl.name = format!("💉 {}", sl.name);
            sl.args.push(("injected".into(), Arg::S(inj.kind.clone())));
        }
        base.b.add(
            Group::Cb("marks".into()),
            Slice {
                track: 0,
                start: t,
                end: t,
                instant: true,
                name: format!(
                    "INJECTED {} +{:.0} µs ({})",
                    inj.kind, inj.measured_us, inj.mechanism
                ),
                category: "injection",
                args: vec![
                    ("kind".into(), Arg::S(inj.kind.clone())),
                    ("mechanism".into(), Arg::S(inj.mechanism.clone())),
                    ("requested_us".into(), Arg::F(inj.requested_us)),
                    ("measured_us".into(), Arg::F(inj.measured_us)),
                    (
                        "target_node".into(),
                        target
                            .map(|n| Arg::U(n as u64))
                            .unwrap_or(Arg::S("?".into())),
                    ),
                ],
                flows_out: Vec::new(),
                flows_in: Vec::new(),
                depth: 0,
            },
        );
    }
}

/// Adds a flow from slice `from` to an instant named `name` on `to`'s track.
fn add_flow(b: &mut Builder, from: usize, to: usize, name: String, args: Vec<(String, Arg)>) {
    let (src, dst) = (&b.model.slices[from], &b.model.slices[to]);
    // The flow must end no earlier than it starts (trace processors link flow ids in
    // time order): at dst's start, or — when dst began first (a wait that an event or a
    // sync released) — where the source's completion lands inside dst.
    let t = if dst.start >= src.start {
        dst.start
    } else {
        src.start.max(src.end.min(dst.end))
    };
    let track = dst.track;
    let id = b.model.flows.len() as u64 + 1;
    let g = b.group[to].clone();
    let end = Slice {
        track,
        start: t,
        end: t,
        instant: true,
        name: name.clone(),
        category: "flow",
        args,
        flows_out: Vec::new(),
        flows_in: vec![id],
        depth: 0,
    };
    let e = b.add(g, end);
    b.model.slices[from].flows_out.push(id);
    b.model.flows.push(Flow {
        id,
        name,
        from,
        to: e,
    });
}

/// Ground truth: slices for the shown records, a flow for every true edge.
pub fn truth_model(bundle: &Bundle, view: Option<&TraceView>) -> Model {
    let title = match view {
        Some(v) => format!("{} · truth · view {}", bundle.id(), v.spec.label()),
        None => format!("{} · truth", bundle.id()),
    };
    let mut base = base(bundle, view, title);
    let truth = &bundle.ground_truth;
    // Nodes on an edge that no shown record observes get a slice of their own.
    let on_edges: HashSet<NodeId> = truth.edges.iter().flat_map(|e| [e.src, e.dst]).collect();
    let mut ids: Vec<NodeId> = on_edges.into_iter().collect();
    ids.sort_unstable();
    for n in ids {
        if base.slice_of_node.contains_key(&n) {
            continue;
        }
        let node = &truth.nodes[n as usize];
        let g = Group::Cb("ground truth · unrecorded nodes".into());
        let i = base.b.add(
            g,
            Slice {
                track: 0,
                start: node.start,
                end: node.end.max(node.start),
                instant: node.end <= node.start,
                name: format!("(unrecorded) {}", node.name),
                category: "unrecorded_node",
                args: vec![
                    ("node".into(), Arg::U(n as u64)),
                    ("node_kind".into(), Arg::S(enum_str(&node.kind))),
                    ("rids".into(), Arg::S(format!("{:?}", node.rids))),
                ],
                flows_out: Vec::new(),
                flows_in: Vec::new(),
                depth: 0,
            },
        );
        base.slice_of_node.insert(n, i);
    }
    for e in &truth.edges {
        let (from, to) = (base.slice_of_node[&e.src], base.slice_of_node[&e.dst]);
        add_flow(
            &mut base.b,
            from,
            to,
            format!("← {}", e.kind.as_str()),
            vec![
                ("type".into(), Arg::S(e.kind.as_str().into())),
                ("src_node".into(), Arg::U(e.src as u64)),
                ("dst_node".into(), Arg::U(e.dst as u64)),
            ],
        );
    }
    base.b.layout();
    base.b.model
}

fn evidence_str(e: Evidence) -> String {
    enum_str(&e)
}

/// A profiler's claims: slices for the shown records, a flow per claimed edge, named by
/// evidence class and marked ✓ (in the ground truth) or ✗.
pub fn claimed_model(bundle: &Bundle, view: Option<&TraceView>, x: &Explanation) -> Model {
    let title = format!(
        "{} · claimed by {} · view {}",
        bundle.id(),
        x.meta.profiler,
        x.meta.view.label()
    );
    let mut base = base(bundle, view, title);
    let truth = &bundle.ground_truth;
    let owner = truth.rid_owner();
    let true_edges: HashSet<(NodeId, NodeId, EdgeType)> =
        truth.edges.iter().map(|e| (e.src, e.dst, e.kind)).collect();
    for c in &x.edges {
        let ok = match (owner.get(&c.src), owner.get(&c.dst)) {
            (Some(&s), Some(&d)) => true_edges.contains(&(s, d, c.kind)),
            _ => false,
        };
        let mark = if ok { "✓" } else { "✗" };
        let (Some(&to), from) = (base.slice_of_rid.get(&c.dst), base.slice_of_rid.get(&c.src))
        else {
            base.b.model.skipped.push(format!(
                "{} {}→{}: rid {} not shown",
                c.kind.as_str(),
                c.src,
                c.dst,
                c.dst
            ));
            continue;
        };
        let args = vec![
            ("type".into(), Arg::S(c.kind.as_str().into())),
            ("evidence".into(), Arg::S(evidence_str(c.evidence))),
            ("confidence".into(), Arg::F(c.confidence)),
            ("src_rid".into(), Arg::U(c.src)),
            ("dst_rid".into(), Arg::U(c.dst)),
            ("in_truth".into(), Arg::B(ok)),
        ];
        if c.evidence == Evidence::Missing || c.src == c.dst {
            let t = base.b.model.slices[to].start;
            let g = base.b.group[to].clone();
            base.b.add(
                g,
                Slice {
                    track: 0,
                    start: t,
                    end: t,
                    instant: true,
                    name: format!(
                        "missing predecessor (claimed {} {})",
                        c.kind.as_str(),
                        evidence_str(c.evidence)
                    ),
                    category: "missing",
                    args,
                    flows_out: Vec::new(),
                    flows_in: Vec::new(),
                    depth: 0,
                },
            );
            continue;
        }
        let Some(&from) = from else {
            base.b.model.skipped.push(format!(
                "{} {}→{}: rid {} not shown",
                c.kind.as_str(),
                c.src,
                c.dst,
                c.src
            ));
            continue;
        };
        add_flow(
            &mut base.b,
            from,
            to,
            format!(
                "← {} · {} {:.2} {mark}",
                c.kind.as_str(),
                evidence_str(c.evidence),
                c.confidence
            ),
            args,
        );
    }
    // One instant per diagnosis on the profiler's track, at the queried record.
    let label = format!("{} · diagnoses", x.meta.profiler);
    for d in &x.diagnoses {
        let sym = truth.symptoms.iter().find(|s| s.id == d.query);
        let rid = sym.map(|s| s.rid);
        let t = rid
            .and_then(|r| base.slice_of_rid.get(&r))
            .map(|&i| base.b.model.slices[i].start)
            .unwrap_or(0);
        let claimed = d
            .causes
            .first()
            .map(|c| format!("{} ({:.2})", c.label, c.score))
            .unwrap_or_else(|| "no cause".into());
        let verdict = match (sym, d.causes.first()) {
            (Some(s), Some(c)) if s.cause == c.label => format!("✓ true cause {}", s.cause),
            (Some(s), _) => format!("✗ true cause {}", s.cause),
            _ => String::new(),
        };
        base.b.add(
            Group::Cb(label.clone()),
            Slice {
                track: 0,
                start: t,
                end: t,
                instant: true,
                name: format!("{}: {claimed} {verdict}", d.query),
                category: "diagnosis",
                args: vec![
                    ("query".into(), Arg::S(d.query.clone())),
                    ("complete".into(), Arg::B(d.complete)),
                    (
                        "critical_path".into(),
                        Arg::S(format!("{:?}", d.critical_path)),
                    ),
                    (
                        "causes".into(),
                        Arg::S(
                            d.causes
                                .iter()
                                .map(|c| format!("{} {:.3}", c.label, c.score))
                                .collect::<Vec<_>>()
                                .join(", "),
                        ),
                    ),
                    (
                        "answer".into(),
                        Arg::S(d.answer.clone().unwrap_or_default()),
                    ),
                ],
                flows_out: Vec::new(),
                flows_in: Vec::new(),
                depth: 0,
            },
        );
    }
    base.b.layout();
    base.b.model
}

/// One event of the time-ordered stream written out.
struct Ev {
    ts: Ns,
    /// 0 end, 1 begin, 2 instant starting flows, 3 other instant.
    class: u8,
    depth: i64,
    slice: usize,
}

fn ordered_events(m: &Model) -> Vec<Ev> {
    let mut evs = Vec::with_capacity(m.slices.len() * 2);
    for (i, s) in m.slices.iter().enumerate() {
        if s.instant {
            let class = if s.flows_out.is_empty() { 3 } else { 2 };
            evs.push(Ev {
                ts: s.start,
                class,
                depth: 0,
                slice: i,
            });
        } else {
            evs.push(Ev {
                ts: s.start,
                class: 1,
                depth: s.depth as i64,
                slice: i,
            });
            evs.push(Ev {
                ts: s.end,
                class: 0,
                depth: -(s.depth as i64),
                slice: i,
            });
        }
    }
    evs.sort_by_key(|e| (e.ts, e.class, e.depth, e.slice));
    evs
}

fn annotation(name: &str, a: &Arg) -> proto::DebugAnnotation {
    let mut d = proto::DebugAnnotation {
        name: Some(name.to_string()),
        ..Default::default()
    };
    match a {
        Arg::U(v) => d.uint_value = Some(*v),
        Arg::I(v) => d.int_value = Some(*v),
        Arg::F(v) => d.double_value = Some(*v),
        Arg::S(v) => d.string_value = Some(v.clone()),
        Arg::B(v) => d.bool_value = Some(*v),
    }
    d
}

/// Sequence id of every packet (one writer).
pub const SEQUENCE_ID: u32 = 0x00ca_5a1b;

/// The model as a Perfetto protobuf trace (`Trace` message bytes).
pub fn encode_perfetto(m: &Model) -> Vec<u8> {
    let mut packets = Vec::with_capacity(m.tracks.len() + m.slices.len() * 2);
    for (k, t) in m.tracks.iter().enumerate() {
        let mut d = proto::TrackDescriptor {
            uuid: Some(t.uuid),
            parent_uuid: t.parent,
            sibling_order_rank: Some(t.rank),
            child_ordering: Some(proto::CHILD_ORDERING_EXPLICIT),
            ..Default::default()
        };
        match t.kind {
            TrackKind::Process { pid } => {
                d.process = Some(proto::ProcessDescriptor {
                    pid: Some(pid as i32),
                    process_name: Some(t.name.clone()),
                });
            }
            TrackKind::Thread { pid, tid } => {
                d.thread = Some(proto::ThreadDescriptor {
                    pid: Some(pid as i32),
                    tid: Some(tid as i32),
                    thread_name: Some(t.name.clone()),
                });
            }
            TrackKind::Named => d.name = Some(t.name.clone()),
        }
        packets.push(proto::TracePacket {
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            sequence_flags: (k == 0).then_some(proto::SEQ_INCREMENTAL_STATE_CLEARED),
            track_descriptor: Some(d),
            ..Default::default()
        });
    }
    for e in ordered_events(m) {
        let s = &m.slices[e.slice];
        let ev = if e.class == 0 {
            proto::TrackEvent {
                r#type: Some(proto::TYPE_SLICE_END),
                track_uuid: Some(s.track),
                ..Default::default()
            }
        } else {
            proto::TrackEvent {
                r#type: Some(if s.instant {
                    proto::TYPE_INSTANT
                } else {
                    proto::TYPE_SLICE_BEGIN
                }),
                track_uuid: Some(s.track),
                name: Some(s.name.clone()),
                categories: vec![s.category.to_string()],
                debug_annotations: s.args.iter().map(|(k, a)| annotation(k, a)).collect(),
                flow_ids: s.flows_out.clone(),
                terminating_flow_ids: s.flows_in.clone(),
            }
        };
        packets.push(proto::TracePacket {
            timestamp: Some(e.ts),
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            track_event: Some(ev),
            ..Default::default()
        });
    }
    proto::Trace { packet: packets }.encode_to_vec()
}

/// The model as Chrome JSON (`traceEvents`): tracks become (pid, tid) pairs, flows
/// `ph: s` / `ph: f` (`bp: e`) pairs.
pub fn to_chrome_json(m: &Model) -> Value {
    // pid and tid of every track.
    let mut pid_tid: HashMap<u64, (u32, u32)> = HashMap::new();
    let by_uuid: HashMap<u64, &Track> = m.tracks.iter().map(|t| (t.uuid, t)).collect();
    let mut events = Vec::new();
    let mut synthetic = 0x7000_0000u32;
    for t in &m.tracks {
        match t.kind {
            TrackKind::Process { pid } => {
                events.push(
                    json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                                   "args": {"name": t.name}}),
                );
                events.push(
                    json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                                   "args": {"sort_index": t.rank}}),
                );
            }
            TrackKind::Thread { pid, tid } => {
                pid_tid.insert(t.uuid, (pid, tid));
                events.push(
                    json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                                   "args": {"name": t.name}}),
                );
            }
            TrackKind::Named => {
                // The process of the nearest ancestor that has one.
                let mut p = t.parent;
                let mut pid = 0;
                while let Some(u) = p {
                    let a = by_uuid[&u];
                    match a.kind {
                        TrackKind::Process { pid: x } | TrackKind::Thread { pid: x, .. } => {
                            pid = x;
                            break;
                        }
                        TrackKind::Named => p = a.parent,
                    }
                }
                synthetic += 1;
                pid_tid.insert(t.uuid, (pid, synthetic));
                events.push(
                    json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": synthetic,
                                   "args": {"name": t.name}}),
                );
            }
        }
    }
    let us = |ns: Ns| (ns as f64) / 1000.0;
    for s in &m.slices {
        let (pid, tid) = pid_tid.get(&s.track).copied().unwrap_or((0, 0));
        let args: serde_json::Map<String, Value> = s
            .args
            .iter()
            .map(|(k, a)| {
                (
                    k.clone(),
                    match a {
                        Arg::U(v) => json!(v),
                        Arg::I(v) => json!(v),
                        Arg::F(v) => json!(v),
                        Arg::S(v) => json!(v),
                        Arg::B(v) => json!(v),
                    },
                )
            })
            .collect();
        if s.instant {
            events.push(
                json!({"ph": "i", "s": "t", "name": s.name, "cat": s.category,
                               "pid": pid, "tid": tid, "ts": us(s.start), "args": args}),
            );
        } else {
            events.push(
                json!({"ph": "X", "name": s.name, "cat": s.category, "pid": pid,
                               "tid": tid, "ts": us(s.start), "dur": us(s.end - s.start),
                               "args": args}),
            );
        }
    }
    for f in &m.flows {
        let (a, b) = (&m.slices[f.from], &m.slices[f.to]);
        let (pa, ta) = pid_tid.get(&a.track).copied().unwrap_or((0, 0));
        let (pb, tb) = pid_tid.get(&b.track).copied().unwrap_or((0, 0));
        events.push(
            json!({"ph": "s", "id": f.id, "name": f.name, "cat": "flow", "pid": pa,
                           "tid": ta, "ts": us(a.start)}),
        );
        events.push(
            json!({"ph": "f", "bp": "e", "id": f.id, "name": f.name, "cat": "flow",
                           "pid": pb, "tid": tb, "ts": us(b.start)}),
        );
    }
    json!({"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"title": m.title}})
}

/// Files written by [`export_case`].
#[derive(Debug, Clone, Default)]
pub struct Written {
    pub files: Vec<std::path::PathBuf>,
    pub truth: ModelStats,
    pub claimed: Option<ModelStats>,
    pub skipped: Vec<String>,
}

/// Writes `truth.perfetto-trace` + `truth.json`, and with an explanation
/// `claimed.perfetto-trace` + `claimed.json`, into `dir`.
pub fn export_case(
    bundle: &Bundle,
    view: Option<&TraceView>,
    explanation: Option<&Explanation>,
    dir: &std::path::Path,
) -> std::io::Result<Written> {
    let mut w = Written::default();
    let put = |name: &str, bytes: &[u8], w: &mut Written| -> std::io::Result<()> {
        let p = dir.join(name);
        crate::write_file(&p, bytes)?;
        w.files.push(p);
        Ok(())
    };
    let t = truth_model(bundle, view);
    w.truth = t.stats();
    put("truth.perfetto-trace", &encode_perfetto(&t), &mut w)?;
    put(
        "truth.json",
        serde_json::to_string(&to_chrome_json(&t))
            .unwrap()
            .as_bytes(),
        &mut w,
    )?;
    if let Some(x) = explanation {
        let c = claimed_model(bundle, view, x);
        w.claimed = Some(c.stats());
        w.skipped = c.skipped.clone();
        put("claimed.perfetto-trace", &encode_perfetto(&c), &mut w)?;
        put(
            "claimed.json",
            serde_json::to_string(&to_chrome_json(&c))
                .unwrap()
                .as_bytes(),
            &mut w,
        )?;
    }
    Ok(w)
}
