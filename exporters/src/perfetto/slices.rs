//! What both traces share: a slice for every shown record, the symptom and injection
//! marks, and flows between slices.

use super::layout::{group_of, Builder, Group, Texts};
use super::model::{Arg, Flow, Slice, HOST_PID_FALLBACK};
use ground_truth::trace::{Record, Rid};
use ground_truth::{Bundle, Node, NodeId, TraceView};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// The records shown: the view's, or the whole trace.
pub(super) fn shown<'a>(bundle: &'a Bundle, view: Option<&'a TraceView>) -> &'a [Record] {
    view.map(|v| v.records.as_slice())
        .unwrap_or(bundle.trace.as_slice())
}

pub(super) struct Base {
    pub(super) b: Builder,
    /// Slice index of each shown record.
    pub(super) slice_of_rid: HashMap<Rid, usize>,
    /// Slice index standing for each node (its best shown record, or an unrecorded slice).
    pub(super) slice_of_node: HashMap<NodeId, usize>,
}

pub(super) fn host_pid(records: &[Record]) -> u32 {
    records
        .iter()
        .filter_map(|r| r.tid())
        .min()
        .unwrap_or(HOST_PID_FALLBACK)
}

/// Slices for every shown record, symptom and injection marks.
pub(super) fn base(bundle: &Bundle, view: Option<&TraceView>, title: String) -> Base {
    let records = shown(bundle, view);
    let mut b = Builder::new(title, host_pid(records));
    let truth = &bundle.ground_truth;
    let owner = truth.rid_owner();
    let mut slice_of_rid = HashMap::new();
    for r in records {
        let texts = &mut b.texts;
        let Some(g) = group_of(r) else { continue };
        let (start, end) = r.interval();
        let mut args = vec![("rid", Arg::U(r.rid()))];
        if let Some(&n) = owner.get(&r.rid()) {
            let node = &truth.nodes[n as usize];
            args.push(("node", Arg::U(n as u64)));
            args.push(("node_kind", Arg::S(texts.get(&enum_str(&node.kind)))));
            if let Some(req) = &node.request {
                args.push(("request", Arg::S(texts.get(req))));
            }
        }
        args.extend(
            record_args(r, texts)
                .into_iter()
                .filter(|(k, _)| *k != "rid"),
        );
        args.shrink_to_fit();
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

pub(super) fn enum_str<T: serde::Serialize>(v: &T) -> String {
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

pub(super) fn mark_symptoms_and_injection(bundle: &Bundle, base: &mut Base) {
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
            sl.args.push(("symptom", Arg::text(s.id.clone())));
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
            Slice::instant(
                0,
                t,
                name,
                "symptom",
                vec![
                    ("query", Arg::text(s.id.clone())),
                    ("rid", Arg::U(s.rid)),
                    ("cause", Arg::text(s.cause.to_string())),
                    ("question", Arg::text(enum_str(&s.question))),
                    ("answer", Arg::text(s.answer.clone().unwrap_or_default())),
                ],
            ),
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
            sl.args.push(("injected", Arg::text(inj.kind.clone())));
        }
        base.b.add(
            Group::Cb("marks".into()),
            Slice::instant(
                0,
                t,
                format!(
                    "INJECTED {} +{:.0} µs ({})",
                    inj.kind, inj.measured_us, inj.mechanism
                ),
                "injection",
                vec![
                    ("kind", Arg::text(inj.kind.clone())),
                    ("mechanism", Arg::text(inj.mechanism.clone())),
                    ("requested_us", Arg::F(inj.requested_us)),
                    ("measured_us", Arg::F(inj.measured_us)),
                    (
                        "target_node",
                        target.map(|n| Arg::U(n as u64)).unwrap_or(Arg::text("?")),
                    ),
                ],
            ),
        );
    }
}

/// Adds a flow from slice `from` to an instant named `name` on `to`'s track.
pub(super) fn add_flow(
    b: &mut Builder,
    from: usize,
    to: usize,
    name: String,
    args: Vec<(&'static str, Arg)>,
) {
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
    let mut end = Slice::instant(track, t, name.clone(), "flow", args);
    end.flows_in.push(id);
    let e = b.add(g, end);
    b.model.slices[from].flows_out.push(id);
    b.model.flows.push(Flow {
        id,
        name,
        from,
        to: e,
    });
}

/// A short name for a record's slice.
pub(super) fn record_name(r: &Record) -> String {
    match r {
        Record::Api { name, .. } => name.to_string(),
        Record::Kernel { detail, .. } => detail.name.to_string(),
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

/// The name of a record field as a static string. The names are the fields
/// of [`Record`], a closed set, so each is leaked once and shared by every
/// slice after it.
fn field_name(name: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(&known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// The record's fields as debug annotations.
pub(super) fn record_args(r: &Record, texts: &mut Texts) -> Vec<(&'static str, Arg)> {
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
                Value::String(s) => Arg::S(texts.get(&s)),
                Value::Bool(b) => Arg::B(b),
                other => Arg::S(texts.get(&other.to_string())),
            };
            out.push((field_name(&k), a));
        }
    }
    out
}

/// Which of a node's records stands for it: device activity, then API call, sync, event
/// record, marker, NVTX, uprobe, scheduler, page fault.
pub(super) fn kind_rank(r: &Record) -> u8 {
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
