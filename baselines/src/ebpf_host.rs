//! `ebpf-host`: what an eBPF host profiler sees (uprobes on libcuda entry
//! points with user stacks, scheduler switch intervals, user page faults), plus
//! the application's queue hooks when the application is instrumented (the
//! handoff markers stand for uprobes on its own queue functions).
//!
//! **Evidence it uses**: per-thread program order of driver calls
//! (`host_order`, observed), scheduler and page-fault records of the calling
//! thread between its previous call and the call (`fault`, observed), handoff
//! markers (`handoff`, observed). Device timing is unknown to it: when the view
//! also holds CUPTI records, a device op is joined to the launch uprobe whose
//! [enter, exit] contains the op's CUPTI `queued` time (else the latest launch
//! uprobe before its start) — an `inferred` launch edge, since eBPF has no
//! correlation id. Request: the token of the host task the calling thread was
//! running (markers), else `unknown`. Call site: the first stack frame outside
//! the CUDA libraries.
//!
//! **Causes**: host causes only. A preempted/traced `sched` interval before the
//! call ⇒ `cpu_deschedule`; page faults ⇒ `host_page_fault`; a queue wait longer
//! than the peers' ⇒ `handoff_queueing`; a longer host gap otherwise ⇒
//! `host_compute`; nothing anomalous on the host ⇒ `none`.
//!
//! **What it cannot know**: anything that happens on the device (occupancy,
//! backlog, copies, events, graphs), which device op a call created beyond a
//! timestamp join, and missing device records.

use crate::analysis::{self, ranked, significant, NOISE_NS};
use crate::common::{attribution, attribution_targets, finish, Output};
use crate::index::{call_site_frame, Index, Pos};
use crate::Profiler;
use ground_truth::trace::{MarkerPhase, Record};
use ground_truth::{
    CauseLabel, Diagnosis, EdgeType, Evidence, Explanation, Phases, Question, TraceView,
};
use std::collections::HashMap;
use std::time::Instant;

pub struct EbpfHost;

struct EbpfHostIndex<'a> {
    ix: Index<'a>,
    /// Launch-like uprobes of every thread, sorted by enter.
    launches: Vec<Pos>,
}

impl<'a> EbpfHostIndex<'a> {
    /// The uprobe behind a record: itself, the api's paired uprobe, or for a
    /// device op the launch uprobe joined by time.
    fn call_of(&self, p: Pos) -> Option<(Pos, f64)> {
        let ix = &self.ix;
        match ix.rec(p) {
            Record::Uprobe { .. } => Some((p, 1.0)),
            Record::Api { .. } => ix.uprobe_of_api(p).map(|u| (u, 1.0)),
            r if r.is_device_op() => {
                let (q, _, s, _) = r.device_times()?;
                let k = self
                    .launches
                    .partition_point(|&u| ix.start(u) <= if q > 0 { q } else { s });
                let cands = &self.launches[..k];
                if q > 0 {
                    if let Some(&u) = cands
                        .iter()
                        .rev()
                        .take(64)
                        .find(|&&u| ix.end(u) >= q && ix.call_kind(u).can_create(r))
                    {
                        return Some((u, 0.7));
                    }
                }
                cands
                    .iter()
                    .rev()
                    .find(|&&u| ix.call_kind(u).can_create(r))
                    .map(|&u| (u, 0.3))
            }
            _ => None,
        }
    }

    /// Previous host operation on the uprobe's thread (uprobe or task marker).
    fn prev_op(&self, u: Pos) -> Option<Pos> {
        let ix = &self.ix;
        let tid = ix.rec(u).tid()?;
        let th = ix.thread(tid)?;
        let t = ix.start(u);
        let k = th.uprobes.partition_point(|&x| ix.start(x) < t);
        let pu = (k > 0).then(|| th.uprobes[k - 1]);
        let pm = ix.last_marker_on(tid, t, |r| {
            matches!(
                r,
                Record::Marker {
                    phase: MarkerPhase::TaskBegin,
                    ..
                }
            )
        });
        match (pu, pm) {
            (Some(a), Some(b)) => Some(if ix.start(b) >= ix.end(a) { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    fn gap(&self, u: Pos) -> Option<f64> {
        self.prev_op(u)
            .map(|p| self.ix.start(u).saturating_sub(self.ix.end(p)) as f64)
    }

    /// Queue wait of the task the call runs in (task_begin − matching enqueue).
    fn queue_wait(&self, u: Pos) -> Option<f64> {
        let ix = &self.ix;
        let tid = ix.rec(u).tid()?;
        let tb = ix.last_marker_on(tid, ix.start(u), |r| {
            matches!(
                r,
                Record::Marker {
                    phase: MarkerPhase::TaskBegin,
                    ..
                }
            )
        })?;
        let Record::Marker {
            queue, token, ts, ..
        } = ix.rec(tb)
        else {
            return None;
        };
        if queue.is_empty() {
            return Some(0.0);
        }
        let k = ix.markers.partition_point(|&m| ix.start(m) <= *ts);
        ix.markers[..k].iter().rev().find_map(|&m| match ix.rec(m) {
            Record::Marker {
                phase: MarkerPhase::Enqueue,
                queue: q2,
                token: t2,
                ts: e,
                ..
            } if q2 == queue && t2 == token => Some((ts - e) as f64),
            _ => None,
        })
    }
}

impl Profiler for EbpfHost {
    fn name(&self) -> &str {
        "ebpf-host"
    }
    fn version(&self) -> &str {
        crate::VERSION
    }
    fn explain(&self, view: &TraceView) -> Explanation {
        let t0 = Instant::now();
        let ix = Index::new(view);
        let mut launches: Vec<Pos> = Vec::new();
        for th in ix.threads.values() {
            launches.extend(
                th.uprobes
                    .iter()
                    .copied()
                    .filter(|&u| ix.call_kind(u).launches_work()),
            );
        }
        launches.sort_by_key(|&u| (ix.start(u), ix.rid(u)));
        let eb = EbpfHostIndex { ix, launches };
        let ix = &eb.ix;
        let mut out = Output::default();
        // Host order, faults and handoffs.
        let mut tids: Vec<u32> = ix.threads.keys().copied().collect();
        tids.sort_unstable();
        for &tid in &tids {
            let th = &ix.threads[&tid];
            for &u in &th.uprobes {
                let prev = eb.prev_op(u);
                if let Some(p) = prev {
                    // Program order is causal within a task; without task markers
                    // (closed mode) consecutive calls may belong to different tasks.
                    let ev = if !ix.markers.is_empty() {
                        Evidence::Observed
                    } else {
                        Evidence::Inferred
                    };
                    out.edge(
                        ix,
                        p,
                        u,
                        EdgeType::HostOrder,
                        ev,
                        if ev == Evidence::Observed { 0.9 } else { 0.6 },
                    );
                }
                let from = prev.map(|p| ix.end(p)).unwrap_or(
                    ix.start(u)
                        .saturating_sub(crate::analysis::STALL_LOOKBACK_NS),
                );
                let st = ix.host_stalls(tid, from, ix.start(u));
                if st.desched_ns >= NOISE_NS {
                    if let Some(s) = st.last_sched {
                        out.edge(ix, s, u, EdgeType::Fault, Evidence::Observed, 0.85);
                    }
                }
                if st.fault_ns >= NOISE_NS || st.major > 0 {
                    if let Some(f) = st.last_fault {
                        out.edge(ix, f, u, EdgeType::Fault, Evidence::Observed, 0.85);
                    }
                }
            }
        }
        let mut enq: HashMap<(&str, &str), Pos> = HashMap::new();
        for &m in &ix.markers {
            if let Record::Marker {
                phase,
                queue,
                token,
                ..
            } = ix.rec(m)
            {
                match phase {
                    MarkerPhase::Enqueue => {
                        enq.insert((queue, token), m);
                    }
                    MarkerPhase::TaskBegin if !queue.is_empty() => {
                        if let Some(&e) = enq.get(&(queue.as_str(), token.as_str())) {
                            out.edge(ix, e, m, EdgeType::Handoff, Evidence::Observed, 0.9);
                        }
                    }
                    _ => {}
                }
            }
        }
        for &op in &ix.device_ops {
            if let Some((u, conf)) = eb.call_of(op) {
                out.edge(ix, u, op, EdgeType::Launch, Evidence::Inferred, conf);
            }
        }
        for p in attribution_targets(ix) {
            let tok = eb.call_of(p).and_then(|(u, _)| {
                let r = ix.rec(u);
                ix.task_token_on(r.tid()?, r.interval().0)
            });
            out.attribution.push(attribution(ix, p, tok));
        }
        for q in &view.queries {
            let Some(p) = ix.pos(q.rid) else {
                out.diagnoses.push(crate::common::empty_diagnosis(q));
                continue;
            };
            let Some((u, _)) = eb.call_of(p) else {
                out.diagnoses.push(Diagnosis {
                    critical_path: vec![q.rid],
                    ..crate::common::empty_diagnosis(q)
                });
                continue;
            };
            let name = ix.call_name(u);
            let site = ix.stack(u).and_then(call_site_frame);
            let peers: Vec<Pos> = eb
                .launches
                .iter()
                .chain(ix.all_calls.iter())
                .copied()
                .filter(|&x| x != u && matches!(ix.rec(x), Record::Uprobe { .. }))
                .filter(|&x| {
                    ix.call_name(x) == name && ix.stack(x).and_then(call_site_frame) == site
                })
                .take(512)
                .collect();
            let gap_x = analysis::excess(
                eb.gap(u),
                peers.iter().filter_map(|&x| eb.gap(x)).collect(),
                0.0,
            );
            let wait_x = analysis::excess(
                eb.queue_wait(u),
                peers.iter().filter_map(|&x| eb.queue_wait(x)).collect(),
                0.0,
            );
            let tid = ix.rec(u).tid().unwrap_or(0);
            let prev = eb.prev_op(u);
            let from = prev.map(|x| ix.end(x)).unwrap_or(
                ix.start(u)
                    .saturating_sub(crate::analysis::STALL_LOOKBACK_NS),
            );
            let st = ix.host_stalls(tid, from, ix.start(u));
            let mut causes = vec![
                (CauseLabel::CpuDeschedule, st.desched_ns),
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
            causes.retain(|c| significant(c.1, 0.0));
            let host = gap_x + wait_x;
            let late = !causes.is_empty();
            if !late {
                causes = vec![(CauseLabel::None, 1.0), (CauseLabel::HostCompute, 0.2)];
            }
            let mut path = Vec::new();
            if let Some(s) = st.last_sched.filter(|_| st.desched_ns >= NOISE_NS) {
                path.push(ix.rid(s));
            } else if let Some(f) = st.last_fault.filter(|_| st.fault_ns >= NOISE_NS) {
                path.push(ix.rid(f));
            } else if let Some(x) = prev {
                path.push(ix.rid(x));
            }
            path.push(ix.rid(u));
            if u != p {
                path.push(ix.rid(p));
            }
            let answer = match q.question {
                Question::CallSite => site.map(str::to_string),
                Question::Operator => ix
                    .nvtx_enclosing_on(tid, ix.start(u))
                    .map(|n| crate::common::nvtx_name(ix, n)),
                _ => None,
            };
            out.diagnoses.push(Diagnosis {
                query: q.id.clone(),
                causes: ranked(causes),
                critical_path: path,
                phases: Phases {
                    host_enqueue: if late {
                        host.max(st.desched_ns + st.fault_ns)
                    } else {
                        0.0
                    },
                    ..Phases::default()
                },
                complete: true,
                first_unresolved: None,
                answer,
            });
        }
        finish(self.name(), view, t0, out)
    }
}
