//! Text rendering of the reference profiler's answer (`causalbench why-late`).

use super::graph::Graph;
use crate::index::Pos;
use ground_truth::trace::Record;
use ground_truth::{Evidence, Query, Question, TraceView};
use std::fmt::Write as _;

/// The reference profiler's answer for one late operation, as text
/// (`causalbench why-late`).
pub fn why_late(view: &TraceView, rid: u64) -> String {
    let g = Graph::build(view);
    let mut s = String::new();
    let Some(p) = g.ix.pos(rid) else {
        return format!("rid {rid} is not a record of this view\n");
    };
    let q = Query {
        id: format!("why-late-{rid}"),
        rid,
        question: Question::Cause,
    };
    let d = g.diagnose(&q);
    let _ = writeln!(s, "why is {} late?", g.describe(p));
    let _ = writeln!(s, "\ncritical chain (root first):");
    let path = &d.diagnosis.critical_path;
    for (i, &r) in path.iter().enumerate() {
        let pos = g.ix.pos(r).expect("path rids are view rids");
        if i > 0 {
            let prev = g.ix.pos(path[i - 1]).expect("path rids are view rids");
            match g.incoming(pos).iter().find(|e| e.src == prev) {
                Some(e) => {
                    let _ = writeln!(
                        s,
                        "   │ {} ({}, confidence {:.2})",
                        e.kind.as_str(),
                        ev_str(e.ev),
                        e.conf
                    );
                }
                None => {
                    let _ = writeln!(s, "   │ (no edge)");
                }
            }
        }
        let _ = writeln!(s, "  {}", g.describe(pos));
    }
    match d.diagnosis.first_unresolved {
        Some(r) => {
            let pos = g.ix.pos(r).expect("unresolved rid is a view rid");
            let kinds: Vec<&str> = g
                .missing
                .iter()
                .filter(|m| m.at == pos)
                .map(|m| m.kind.as_str())
                .collect();
            let _ =
                writeln!(
                s,
                "\nfirst unresolved boundary: {} — its gating {} predecessor is not in this view{}",
                g.describe(pos),
                kinds.first().copied().unwrap_or("?"),
                if g.loss_plausible { " (the collectors report loss)" } else { "" }
            );
        }
        None => {
            let _ = writeln!(s, "\nthe chain is complete in this view");
        }
    }
    if g.lacks_request_identity() {
        // What closed mode leaves out, and what stands in for it.
        let joined = g.joined_calls.len();
        let inferred_of = |kind| {
            g.edges
                .iter()
                .filter(|e| e.kind == kind && e.ev == Evidence::Inferred)
                .count()
        };
        let inferred = inferred_of(ground_truth::EdgeType::HostOrder);
        let handoffs = inferred_of(ground_truth::EdgeType::Handoff);
        let _ = writeln!(
            s,
            "\nmissing in this view: request identity (no external correlation or request \
             markers), NVTX ranges and task markers. Program order joined by thread and time \
             from the host collector's records: {joined} of {inferred} inferred host-order \
             edges (a gap the thread's stall records explain); {handoffs} handoffs between \
             threads inferred from timing that recurs; the verdict's confidence is lowered \
             accordingly{}",
            if g.has_ebpf {
                ""
            } else {
                " (no host records here: nothing is joined)"
            }
        );
    }
    let ph = d.diagnosis.phases;
    let _ = writeln!(
        s,
        "\nlateness vs peers ({} peer(s)): host enqueue {:.1} µs, queued→submitted {:.1} µs, submitted→start {:.1} µs, execution {:.1} µs",
        d.peers,
        ph.host_enqueue / 1e3,
        ph.queued_to_submitted / 1e3,
        ph.submitted_to_start / 1e3,
        ph.execution / 1e3
    );
    let _ = writeln!(s, "\ncauses:");
    for c in &d.diagnosis.causes {
        let _ = writeln!(s, "  {:<20} {:.2}", c.label.as_str(), c.score);
    }
    if let Some(a) = &d.diagnosis.answer {
        let _ = writeln!(s, "\nanswer: {a}");
    }
    s
}

fn ev_str(e: Evidence) -> &'static str {
    match e {
        Evidence::Explicit => "explicit",
        Evidence::Observed => "observed",
        Evidence::Inferred => "inferred",
        Evidence::Missing => "missing",
    }
}

impl Graph<'_> {
    pub fn describe(&self, p: Pos) -> String {
        let ix = &self.ix;
        let r = ix.rec(p);
        let what = match r {
            Record::Api { name, tid, .. } => format!("api {name} (thread {tid})"),
            Record::Uprobe { function, tid, .. } => format!("uprobe {function} (thread {tid})"),
            Record::Kernel { stream, detail, .. } if detail.graph_node_id != 0 => {
                let (name, graph_node_id) = (&detail.name, detail.graph_node_id);
                format!("kernel {name} (stream {stream}, graph node {graph_node_id})")
            }
            Record::Kernel { stream, detail, .. } => {
                format!("kernel {} (stream {stream})", detail.name)
            }
            Record::Memcpy {
                direction,
                stream,
                memory,
                detail,
                ..
            } => format!(
                "memcpy {direction:?} {} B {memory:?} (stream {stream})",
                detail.bytes
            )
            .to_lowercase(),
            Record::Memset { stream, detail, .. } => {
                format!("memset {} B (stream {stream})", detail.bytes)
            }
            Record::Sync {
                sync_type,
                stream,
                event_sync_id,
                ..
            } => {
                format!("sync {sync_type:?} (stream {stream}, event sync id {event_sync_id})")
            }
            Record::CudaEvent {
                stream,
                event_sync_id,
                ..
            } => format!("event record (stream {stream}, sync id {event_sync_id})"),
            Record::Marker {
                phase,
                queue,
                token,
                tid,
                ..
            } => {
                format!("marker {phase:?} queue `{queue}` token `{token}` (thread {tid})")
            }
            Record::Sched {
                reason,
                tid,
                switch_out,
                switch_in,
                ..
            } => {
                format!(
                    "sched {reason:?} thread {tid} for {:.1} µs",
                    (switch_in - switch_out) as f64 / 1e3
                )
            }
            Record::PageFault { major, tid, .. } => format!(
                "{} page fault (thread {tid})",
                if *major { "major" } else { "minor" }
            ),
            Record::Nvtx { name, .. } => format!("nvtx `{name}`"),
            Record::ExternalCorrelation { external_id, .. } => {
                format!("external correlation {external_id}")
            }
        };
        let (s, e) = r.interval();
        format!(
            "rid {} {what} [{:.3} → {:.3} ms]",
            r.rid(),
            s as f64 / 1e6,
            e as f64 / 1e6
        )
    }
}
