//! The protobuf encoder: the model as a Perfetto `Trace` message.

use super::model::{Arg, Model, TrackKind};
use super::proto;
use ground_truth::Ns;
use std::io::Write;

/// One event of the time-ordered stream written out.
pub(super) struct StreamEvent {
    pub(super) ts: Ns,
    /// 0 end, 1 begin, 2 instant starting flows, 3 other instant.
    pub(super) class: u8,
    pub(super) depth: i64,
    pub(super) slice: usize,
}

pub(super) fn ordered_events(m: &Model) -> Vec<StreamEvent> {
    let mut evs = Vec::with_capacity(m.slices.len() * 2);
    for (i, s) in m.slices.iter().enumerate() {
        if s.instant {
            let class = if s.flows_out.is_empty() { 3 } else { 2 };
            evs.push(StreamEvent {
                ts: s.start,
                class,
                depth: 0,
                slice: i,
            });
        } else {
            evs.push(StreamEvent {
                ts: s.start,
                class: 1,
                depth: s.depth as i64,
                slice: i,
            });
            evs.push(StreamEvent {
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

pub(super) fn annotation(name: &str, a: &Arg) -> proto::DebugAnnotation {
    let mut d = proto::DebugAnnotation {
        name: Some(name.to_string()),
        ..Default::default()
    };
    match a {
        Arg::U(v) => d.uint_value = Some(*v),
        Arg::I(v) => d.int_value = Some(*v),
        Arg::F(v) => d.double_value = Some(*v),
        Arg::S(v) => d.string_value = Some(v.to_string()),
        Arg::B(v) => d.bool_value = Some(*v),
    }
    d
}

/// Sequence id of every packet (one writer).
pub const SEQUENCE_ID: u32 = 0x00ca_5a1b;

/// The model as a Perfetto protobuf trace (`Trace` message bytes).
pub fn encode_perfetto(m: &Model) -> Vec<u8> {
    let mut out = Vec::new();
    write_perfetto(m, &mut out).expect("writing to memory cannot fail");
    out
}

/// Writes the model as a Perfetto protobuf trace, packet by packet: the bytes of
/// [`encode_perfetto`], but only one packet is ever held in memory. A `Trace` is
/// its repeated field 1, so each packet goes out as its key, length and message.
pub fn write_perfetto(m: &Model, out: &mut dyn Write) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut put = |packet: proto::TracePacket| {
        buf.clear();
        prost::encoding::message::encode(TRACE_PACKET_FIELD, &packet, &mut buf);
        out.write_all(&buf)
    };
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
        put(proto::TracePacket {
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            sequence_flags: (k == 0).then_some(proto::SEQ_INCREMENTAL_STATE_CLEARED),
            track_descriptor: Some(d),
            ..Default::default()
        })?;
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
        put(proto::TracePacket {
            timestamp: Some(e.ts),
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            track_event: Some(ev),
            ..Default::default()
        })?;
    }
    Ok(())
}

/// The field number of `Trace.packet`.
const TRACE_PACKET_FIELD: u32 = 1;
