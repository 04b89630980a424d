//! `timestamp-join`: nearest-timestamp stitching, as trace viewers and
//! linkers without correlation ids do.
//!
//! **Evidence it uses**: timestamps only. Each device op's parent is the most
//! recent host call (`api` record, or `uprobe` when no api record covers it) of
//! a matching kind (a launch for a kernel, a memcpy call for a copy...) that
//! started before the op started, on any thread; when no call of a matching kind
//! exists, any call. Streams are lanes ordered by start time (inferred). The
//! request of a device op is the latest request token seen in time before its
//! parent call (task marker on the parent's thread, else the latest
//! `request_begin` of any thread), `unknown` when there is none. Causes come
//! from timing gaps compared with peers (same operation elsewhere in the view):
//! a large parent→start gap is device-side queueing (the lane's previous op
//! ending just as it started ⇒ backlog, else work overlapping on another lane ⇒
//! contention), a long op is a slow op, a large host gap before the parent call is
//! host-side (a scheduler or page-fault record overlapping the gap on the parent's
//! thread names the stall, as an overlay of all records on one timeline shows it).
//!
//! **What it cannot know**: correlation ids, events, graph structure, request
//! identity across threads (confounders interleaved in time are misattributed),
//! which call launched which op when calls interleave, and whether a record is missing (it always
//! claims its path complete). All its edges are `inferred`, with a confidence
//! that decays with the time gap.

use crate::analysis::{self, ranked, significant, Peers, NOISE_NS};
use crate::common::{attribution, attribution_targets, finish, nvtx_name, Output};
use crate::index::{call_site_frame, median, CallKind, Index, Pos};
use crate::Profiler;
use ground_truth::trace::{MarkerPhase, Record};
use ground_truth::{
    CauseLabel, Diagnosis, EdgeType, Evidence, Explanation, Phases, Question, TraceView,
};
use std::collections::HashMap;
use std::time::Instant;

pub struct TimestampJoin;

struct TimestampJoinIndex<'a> {
    ix: Index<'a>,
    /// Calls by category (0 kernel launches, 1 memcpy, 2 memset), plus all calls.
    by_cat: [Vec<Pos>; 3],
}

impl<'a> TimestampJoinIndex<'a> {
    fn parent(&self, op: Pos) -> Option<Pos> {
        let ix = &self.ix;
        let t = ix.start(op);
        let cat = match ix.rec(op) {
            Record::Kernel { .. } => 0,
            Record::Memcpy { .. } => 1,
            Record::Memset { .. } => 2,
            _ => return last_before(ix, &ix.all_calls, t),
        };
        last_before(ix, &self.by_cat[cat], t).or_else(|| last_before(ix, &ix.all_calls, t))
    }

    fn token(&self, call: Pos, fallback_t: u64) -> Option<String> {
        let ix = &self.ix;
        let r = ix.rec(call);
        if let Some(tid) = r.tid() {
            if let Some(t) = ix.task_token_on(tid, r.interval().0) {
                return Some(t);
            }
        }
        let k = ix.markers.partition_point(|&m| ix.start(m) <= fallback_t);
        ix.markers[..k].iter().rev().find_map(|&m| match ix.rec(m) {
            Record::Marker {
                phase: MarkerPhase::RequestBegin,
                token,
                ..
            } if !token.is_empty() => Some(token.to_string()),
            _ => None,
        })
    }

    fn host_gap(&self, call: Pos) -> Option<f64> {
        let prev = self.ix.prev_call(call)?;
        Some(self.ix.start(call).saturating_sub(self.ix.end(prev)) as f64)
    }
}

fn last_before(ix: &Index, v: &[Pos], t: u64) -> Option<Pos> {
    let k = v.partition_point(|&p| ix.start(p) <= t);
    (k > 0).then(|| v[k - 1])
}

fn join_confidence(gap_ns: f64) -> f64 {
    (0.9 * (-gap_ns / 500_000.0).exp()).clamp(0.05, 0.9)
}

impl Profiler for TimestampJoin {
    fn name(&self) -> &str {
        "timestamp-join"
    }
    fn version(&self) -> &str {
        crate::VERSION
    }
    fn explain(&self, view: &TraceView) -> Explanation {
        let t0 = Instant::now();
        let ix = Index::new(view);
        let mut by_cat: [Vec<Pos>; 3] = Default::default();
        for &c in &ix.all_calls {
            match ix.call_kind(c) {
                CallKind::KernelLaunch | CallKind::GraphLaunch => by_cat[0].push(c),
                CallKind::Memcpy => by_cat[1].push(c),
                CallKind::Memset => by_cat[2].push(c),
                _ => {}
            }
        }
        let tj = TimestampJoinIndex { ix, by_cat };
        let ix = &tj.ix;
        let peers = Peers::new(ix);
        let mut out = Output::default();
        let mut parents: HashMap<Pos, Pos> = HashMap::new();
        let mut last_on_stream: HashMap<u32, Pos> = HashMap::new();
        let mut lane_pred: HashMap<Pos, Pos> = HashMap::new();
        for &op in &ix.device_ops {
            if let Some(p) = tj.parent(op) {
                parents.insert(op, p);
                let gap = ix.start(op).saturating_sub(ix.start(p)) as f64;
                out.edge(
                    ix,
                    p,
                    op,
                    EdgeType::Launch,
                    Evidence::Inferred,
                    join_confidence(gap),
                );
            }
            let s = ix.rec(op).stream().unwrap_or(0);
            if let Some(prev) = last_on_stream.insert(s, op) {
                lane_pred.insert(op, prev);
                out.edge(ix, prev, op, EdgeType::StreamOrder, Evidence::Inferred, 0.6);
            }
        }
        for p in attribution_targets(ix) {
            let call = parents.get(&p).copied().or_else(|| {
                matches!(ix.rec(p), Record::Api { .. } | Record::Uprobe { .. }).then_some(p)
            });
            let tok = call.and_then(|c| tj.token(c, ix.start(p)));
            out.attribution.push(attribution(ix, p, tok));
        }
        for q in &view.queries {
            let Some(p) = ix.pos(q.rid) else {
                out.diagnoses.push(crate::common::empty_diagnosis(q));
                continue;
            };
            let is_dev = ix.rec(p).is_device_op();
            let call = if is_dev {
                parents.get(&p).copied()
            } else {
                Some(ix.canonical_call(p))
            };
            let mut ph = Phases::default();
            let mut causes = vec![];
            let peer_ops = if is_dev { peers.of(ix, p) } else { vec![] };
            let typical = analysis::typical_latency(ix, &peer_ops);
            if let Some(c) = call {
                // Host gap before the parent call vs the peers' parents.
                let peer_calls: Vec<Pos> = if is_dev {
                    peer_ops
                        .iter()
                        .filter_map(|o| parents.get(o).copied())
                        .collect()
                } else {
                    ix.all_calls
                        .iter()
                        .copied()
                        .filter(|&x| x != c && ix.call_name(x) == ix.call_name(c))
                        .take(512)
                        .collect()
                };
                ph.host_enqueue = analysis::excess(
                    tj.host_gap(c),
                    peer_calls.iter().filter_map(|&x| tj.host_gap(x)).collect(),
                    0.0,
                );
                if is_dev {
                    let gap = |o: Pos, par: Pos| ix.start(o).saturating_sub(ix.start(par)) as f64;
                    let own = gap(p, c);
                    let base = median(
                        peer_ops
                            .iter()
                            .filter_map(|&o| parents.get(&o).map(|&par| gap(o, par)))
                            .collect(),
                    );
                    ph.submitted_to_start = (own - base.unwrap_or(own)).max(0.0);
                    let dur = |o: Pos| (ix.end(o) - ix.start(o)) as f64;
                    let base = median(peer_ops.iter().map(|&o| dur(o)).collect());
                    ph.execution = (dur(p) - base.unwrap_or(dur(p))).max(0.0);
                }
            }
            let is_copy = matches!(ix.rec(p), Record::Memcpy { .. });
            let (d, v) = analysis::dominant(&ph);
            if !significant(v, typical) {
                ph = Phases::default();
                causes.push((CauseLabel::None, 1.0));
                causes.push((CauseLabel::HostCompute, 0.2));
            } else {
                match d {
                    0 => {
                        // Scheduler and page-fault records overlapping the host gap on
                        // the parent call's thread, by timestamp.
                        let st = call
                            .and_then(|c| {
                                let tid = ix.rec(c).tid()?;
                                let from = ix.prev_call(c).map(|x| ix.end(x))?;
                                Some(ix.host_stalls(tid, from, ix.start(c)))
                            })
                            .unwrap_or_default();
                        causes.push((CauseLabel::HostCompute, v - st.desched_ns - st.fault_ns));
                        causes.push((CauseLabel::CpuDeschedule, st.desched_ns.max(v * 0.1)));
                        causes.push((CauseLabel::HostPageFault, st.fault_ns));
                    }
                    2 => {
                        let from = call.map(|c| ix.start(c)).unwrap_or(0);
                        // The lane's previous op ended right when this one started,
                        // after the parent call: the lane was busy.
                        let busy_lane = lane_pred.get(&p).is_some_and(|&lp| {
                            ix.end(lp) > from && ix.end(lp) + NOISE_NS as u64 >= ix.start(p)
                        });
                        if busy_lane {
                            causes.push((CauseLabel::StreamBacklog, v * 1.5));
                        }
                        if is_copy {
                            let o = analysis::overlap_by_others(ix, p, from, ix.start(p), |r| {
                                matches!(r, Record::Memcpy { .. })
                            });
                            causes.push(if o > 0.0 {
                                (CauseLabel::PcieContention, v)
                            } else {
                                (CauseLabel::StreamBacklog, v)
                            });
                        } else {
                            let o = analysis::overlap_by_others(ix, p, from, ix.start(p), |r| {
                                matches!(r, Record::Kernel { .. })
                            });
                            causes.push(if o > 0.0 {
                                (CauseLabel::OccupancyPressure, v)
                            } else {
                                (CauseLabel::StreamBacklog, v)
                            });
                        }
                        causes.push((CauseLabel::StreamBacklog, v * 0.5));
                    }
                    _ => causes.push(if is_copy {
                        (CauseLabel::SlowCopy, v)
                    } else {
                        (CauseLabel::OccupancyPressure, v)
                    }),
                }
            }
            let mut path = Vec::new();
            if let Some(c) = call {
                if let Some(prev) = ix.prev_call(c) {
                    path.push(ix.rid(prev));
                }
                if c != p {
                    path.push(ix.rid(c));
                }
            }
            path.push(ix.rid(p));
            let answer = match q.question {
                Question::CallSite => call
                    .and_then(|c| ix.stack(c))
                    .and_then(call_site_frame)
                    .map(str::to_string),
                Question::Operator => call.and_then(|c| {
                    let r = ix.rec(c);
                    ix.nvtx_enclosing_on(r.tid()?, r.interval().0)
                        .map(|n| nvtx_name(ix, n))
                }),
                _ => None,
            };
            out.diagnoses.push(Diagnosis {
                query: q.id.clone(),
                causes: ranked(causes),
                critical_path: path,
                phases: ph,
                complete: true,
                first_unresolved: None,
                answer,
            });
        }
        finish(self.name(), view, t0, out)
    }
}
