//! The Chrome JSON encoder: the model as `traceEvents`.

use super::model::{Arg, Model, Track, TrackKind};
use ground_truth::Ns;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Write;

/// The model as Chrome JSON (`traceEvents`): tracks become (pid, tid) pairs, flows
/// `ph: s` / `ph: f` (`bp: e`) pairs.
pub fn to_chrome_json(m: &Model) -> Value {
    let mut events = Vec::new();
    for_each_event(m, |e| {
        events.push(e);
        Ok(())
    })
    .expect("collecting in memory cannot fail");
    json!({"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"title": m.title}})
}

/// Writes the model as Chrome JSON, event by event: the bytes of
/// `serde_json::to_writer(out, &to_chrome_json(m))` (its keys in the same,
/// sorted, order), but only one event is ever held in memory.
pub fn write_chrome_json(m: &Model, out: &mut dyn Write) -> std::io::Result<()> {
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":")?;
    serde_json::to_writer(&mut *out, &json!({"title": m.title}))?;
    out.write_all(b",\"traceEvents\":[")?;
    let mut first = true;
    for_each_event(m, |e| {
        if !std::mem::take(&mut first) {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, &e)?;
        Ok(())
    })?;
    out.write_all(b"]}")
}

/// Hands every Chrome JSON event of the model to `emit`, in order.
fn for_each_event(
    m: &Model,
    mut emit: impl FnMut(Value) -> std::io::Result<()>,
) -> std::io::Result<()> {
    // pid and tid of every track.
    let mut pid_tid: HashMap<u64, (u32, u32)> = HashMap::new();
    let by_uuid: HashMap<u64, &Track> = m.tracks.iter().map(|t| (t.uuid, t)).collect();
    let mut synthetic = 0x7000_0000u32;
    for t in &m.tracks {
        match t.kind {
            TrackKind::Process { pid } => {
                emit(
                    json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                                   "args": {"name": t.name}}),
                )?;
                emit(
                    json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                                   "args": {"sort_index": t.rank}}),
                )?;
            }
            TrackKind::Thread { pid, tid } => {
                pid_tid.insert(t.uuid, (pid, tid));
                emit(
                    json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                                   "args": {"name": t.name}}),
                )?;
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
                emit(
                    json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": synthetic,
                                   "args": {"name": t.name}}),
                )?;
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
                    k.to_string(),
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
            emit(
                json!({"ph": "i", "s": "t", "name": s.name, "cat": s.category,
                               "pid": pid, "tid": tid, "ts": us(s.start), "args": args}),
            )?;
        } else {
            emit(
                json!({"ph": "X", "name": s.name, "cat": s.category, "pid": pid,
                               "tid": tid, "ts": us(s.start), "dur": us(s.end - s.start),
                               "args": args}),
            )?;
        }
    }
    for f in &m.flows {
        let (a, b) = (&m.slices[f.from], &m.slices[f.to]);
        let (pa, ta) = pid_tid.get(&a.track).copied().unwrap_or((0, 0));
        let (pb, tb) = pid_tid.get(&b.track).copied().unwrap_or((0, 0));
        emit(
            json!({"ph": "s", "id": f.id, "name": f.name, "cat": "flow", "pid": pa,
                           "tid": ta, "ts": us(a.start)}),
        )?;
        emit(
            json!({"ph": "f", "bp": "e", "id": f.id, "name": f.name, "cat": "flow",
                           "pid": pb, "tid": tb, "ts": us(b.start)}),
        )?;
    }
    Ok(())
}
