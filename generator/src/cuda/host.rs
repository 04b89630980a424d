//! The eBPF host collector of the reference recorder: the `ebpf-recorder`
//! crate attached to this very process (the workload runs in it) for the
//! recorded run, its records merged into the bundle with owners assigned the
//! way the simulator assigns them (docs/records.md):
//!
//! - a `uprobe` belongs to the API-call node of the call it is nested in: same
//!   thread, and the uprobe interval inside the call's CUPTI API record (or the
//!   API record inside the uprobe: CUPTI takes driver-domain timestamps inside
//!   the probed function). A call whose API record was lost is matched by the
//!   host-measured interval of the call (which wraps the driver call);
//! - `sched` records with reason preempted/traced overlapping an injected
//!   `cpu_deschedule` on the same thread belong to that `InjectedFault` node;
//! - `page_fault` records inside an injected page-fault window on the same
//!   thread belong to that fault node;
//! - everything else inside the run's window is kept, owned by no node.
//!   Host records of the recorder's own setup and teardown (outside the
//!   window and nested in no call of the run) are dropped, as CUPTI records of
//!   harness work are.

use crate::record::RunBuilder;
use ebpf_recorder::{attribution, HostTrace, Recorder, RecorderConfig};
use ground_truth::graph::{EdgeType, NodeId, NodeKind};
use ground_truth::trace::{Record, SwitchReason};
use ground_truth::Ns;
use std::collections::HashMap;

/// What merging one run's host records did (for the backend's measurements).
#[derive(Debug, Clone, Default)]
pub struct HostStats {
    pub uprobes: usize,
    pub uprobes_owned: usize,
    pub sched: usize,
    pub sched_owned: usize,
    pub page_faults: usize,
    pub page_faults_owned: usize,
    /// Host records dropped as outside the run (setup/teardown of the harness).
    pub dropped_outside: usize,
    pub ringbuffer_dropped: u64,
    pub stack_errors: u64,
    /// Kernel nodes (direct launches and graph nodes) of the run.
    pub kernels: usize,
    /// Of those, kernels whose launching call owns a uprobe with a stack that
    /// has the call-site frame (≥ 2 frames).
    pub kernels_with_call_site: usize,
    /// Launch API records (`*Launch*`) of the trace.
    pub launch_calls: usize,
    /// Launch API records joined exactly (same thread, nested intervals).
    pub call_sites_exact: usize,
    /// Exactly joined launch records whose nearest-timestamp uprobe is another call.
    pub nearest_other_call: usize,
    /// Exactly joined launch records whose nearest-timestamp stack is different.
    pub call_sites_nearest_wrong: usize,
    /// Distinct call-site frames (second stack frame) of the launch uprobes.
    pub call_site_frames: Vec<String>,
    pub warnings: Vec<String>,
}

/// Starts the recorder on this process, or says once why it can't and
/// remembers that (`disabled`), so later runs go on without host records.
pub fn start(disabled: &mut Option<String>) -> Option<Recorder> {
    start_with(RecorderConfig::cuda(std::process::id()), disabled)
}

/// [`start`] with a configuration of the caller's (the torch backend's, which
/// copies stacks to reach the Python frames).
pub fn start_with(cfg: RecorderConfig, disabled: &mut Option<String>) -> Option<Recorder> {
    if disabled.is_some() {
        return None;
    }
    match Recorder::start(cfg) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!(
                "causalbench: the eBPF host recorder cannot run here ({e}); recording without host records (manifest collectors omit \"ebpf\")"
            );
            *disabled = Some(e.to_string());
            None
        }
    }
}

struct Call {
    start: Ns,
    end: Ns,
    node: NodeId,
    name: String,
}

/// One interval inside the other, each end allowed `slack` ns outside.
fn nested(a: (Ns, Ns), b: (Ns, Ns), slack: Ns) -> bool {
    let inside = |x: (Ns, Ns), y: (Ns, Ns)| x.0 <= y.0 + slack && y.1 <= x.1 + slack;
    inside(a, b) || inside(b, a)
}

fn overlap(a: (Ns, Ns), b: (Ns, Ns)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Merges `host` into the run being built (`window`: the run's own interval).
/// `clock_slack` is how far the calls' records may sit off the host recorder's
/// clock (ns): 0 where both read CLOCK_MONOTONIC (CUPTI), more where the calls'
/// times were aligned to it by an estimated offset (Kineto's, `torch`).
pub fn attach(b: &mut RunBuilder, host: HostTrace, window: (Ns, Ns), clock_slack: Ns) -> HostStats {
    let mut st = HostStats {
        ringbuffer_dropped: host.ringbuffer_dropped,
        stack_errors: host.stack_errors,
        warnings: host.warnings.clone(),
        ..Default::default()
    };
    let index: HashMap<u64, usize> = b
        .trace
        .iter()
        .enumerate()
        .map(|(i, r)| (r.rid(), i))
        .collect();
    // Calls per thread: their CUPTI API records, or the node's own interval
    // when the API record was lost.
    let mut calls: HashMap<u32, Vec<Call>> = HashMap::new();
    let mut stalls: Vec<(NodeId, &'static str, u32, Ns, Ns)> = Vec::new();
    for n in &b.truth.nodes {
        match n.kind {
            NodeKind::ApiCall | NodeKind::GraphLaunch | NodeKind::Synchronization => {
                let mut any = false;
                for r in n.rids.iter() {
                    if let Some(Record::Api {
                        tid,
                        start,
                        end,
                        name,
                        ..
                    }) = index.get(r).map(|&i| &b.trace[i])
                    {
                        any = true;
                        calls.entry(*tid).or_default().push(Call {
                            start: *start,
                            end: *end,
                            node: n.id,
                            name: name.to_string(),
                        });
                    }
                }
                if let (false, Some(tid)) = (any, n.detail.thread) {
                    calls.entry(tid).or_default().push(Call {
                        start: n.start,
                        end: n.end,
                        node: n.id,
                        name: n.name.to_string(),
                    });
                }
            }
            NodeKind::InjectedFault => {
                let kind = match &*n.name {
                    "cpu_deschedule" => "sched",
                    "host_page_fault_minor" | "host_page_fault_major" => "fault",
                    _ => continue,
                };
                if let Some(tid) = n.detail.thread {
                    stalls.push((n.id, kind, tid, n.start, n.end));
                }
            }
            _ => {}
        }
    }
    for v in calls.values_mut() {
        v.sort_by_key(|c| c.start);
    }
    let in_window = |a: Ns, z: Ns| overlap((a, z.max(a + 1)), window);
    for rec in host.records {
        let owner: Option<NodeId> = match &rec {
            Record::Uprobe {
                tid,
                enter,
                exit,
                function,
                ..
            } => {
                st.uprobes += 1;
                let owner = calls.get(tid).and_then(|v| {
                    // Candidates start no later than the uprobe's exit.
                    let k = v.partition_point(|c| c.start <= *exit);
                    v[..k]
                        .iter()
                        .rev()
                        .take(64)
                        .filter(|c| nested((c.start, c.end), (*enter, *exit), clock_slack))
                        .min_by_key(|c| {
                            (
                                c.name != **function,
                                c.start.abs_diff(*enter) + c.end.abs_diff(*exit),
                            )
                        })
                        .map(|c| c.node)
                });
                if owner.is_none() && !in_window(*enter, *exit) {
                    st.dropped_outside += 1;
                    continue;
                }
                if owner.is_some() {
                    st.uprobes_owned += 1;
                }
                owner
            }
            Record::Sched {
                tid,
                switch_out,
                switch_in,
                reason,
                ..
            } => {
                if !in_window(*switch_out, *switch_in) {
                    st.dropped_outside += 1;
                    continue;
                }
                st.sched += 1;
                let owner = if matches!(reason, SwitchReason::Preempted | SwitchReason::Traced) {
                    stalls
                        .iter()
                        .find(|s| {
                            s.1 == "sched"
                                && s.2 == *tid
                                && overlap((*switch_out, *switch_in), (s.3, s.4))
                        })
                        .map(|s| s.0)
                } else {
                    None
                };
                if owner.is_some() {
                    st.sched_owned += 1;
                }
                owner
            }
            Record::PageFault { tid, ts, .. } => {
                if !in_window(*ts, *ts) {
                    st.dropped_outside += 1;
                    continue;
                }
                st.page_faults += 1;
                let owner = stalls
                    .iter()
                    .find(|s| s.1 == "fault" && s.2 == *tid && s.3 <= *ts && *ts <= s.4)
                    .map(|s| s.0);
                if owner.is_some() {
                    st.page_faults_owned += 1;
                }
                owner
            }
            _ => None,
        };
        // `record` also lists the rid on the owner node.
        let mut rec = rec;
        b.record(owner, |rid| {
            *rec.rid_mut() = rid;
            rec
        });
    }
    measure_call_sites(b, &mut st);
    st
}

/// Call-site recovery over the merged trace: per kernel, does its launching
/// call own a uprobe with the call-site frame; per launch API record, the
/// exact join and the nearest-timestamp join (ebpf_recorder::attribution).
fn measure_call_sites(b: &RunBuilder, st: &mut HostStats) {
    let index: HashMap<u64, usize> = b
        .trace
        .iter()
        .enumerate()
        .map(|(i, r)| (r.rid(), i))
        .collect();
    let has_site = |n: NodeId| {
        b.truth.nodes[n as usize].rids.iter().any(|r| {
            matches!(index.get(r).map(|&i| &b.trace[i]),
                Some(Record::Uprobe { stack, .. }) if stack.len() >= 2)
        })
    };
    let mut launcher: HashMap<NodeId, NodeId> = HashMap::new();
    for e in &b.truth.edges {
        if e.kind == EdgeType::Launch {
            launcher.insert(e.dst, e.src);
        }
    }
    for n in &b.truth.nodes {
        if n.kind == NodeKind::Kernel {
            st.kernels += 1;
            if launcher.get(&n.id).is_some_and(|&a| has_site(a)) {
                st.kernels_with_call_site += 1;
            }
        }
    }
    let report = attribution::attribute_launch_sites(&b.trace);
    st.launch_calls = report.api_calls;
    st.call_sites_exact = report.exact_matched;
    st.nearest_other_call = report
        .exact_matched
        .saturating_sub(report.nearest_same_call);
    st.call_sites_nearest_wrong = report.nearest_wrong_stack;
    let mut frames: Vec<String> = report
        .matches
        .iter()
        .filter_map(|m| m.exact)
        .filter_map(|i| report.probes[i].stack.get(1).cloned())
        .collect();
    frames.sort();
    frames.dedup();
    st.call_site_frames = frames;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::NodeInfo;
    use ground_truth::trace::ApiDomain;

    #[test]
    fn owners_follow_the_simulator() {
        let mut b = RunBuilder::new(true);
        let call = b.node(
            NodeKind::ApiCall,
            "cuLaunchKernel",
            NodeInfo {
                thread: Some(7),
                ..Default::default()
            },
            1_000,
            2_000,
        );
        b.record(Some(call), |rid| Record::Api {
            rid,
            domain: ApiDomain::Driver,
            cbid: 307,
            name: "cuLaunchKernel".into(),
            tid: 7,
            start: 1_100,
            end: 1_900,
            correlation_id: 1,
        });
        let k = b.node(NodeKind::Kernel, "k", NodeInfo::default(), 3_000, 4_000);
        b.edge(call, k, EdgeType::Launch);
        let f = b.node(
            NodeKind::InjectedFault,
            "cpu_deschedule",
            NodeInfo {
                thread: Some(7),
                ..Default::default()
            },
            100,
            900,
        );
        let host = HostTrace {
            records: vec![
                Record::Uprobe {
                    rid: 0,
                    tid: 7,
                    function: "cuLaunchKernel".into(),
                    enter: 1_050,
                    exit: 1_950,
                    handle: 5,
                    stack: ["libcuda.so.1!cuLaunchKernel", "app!site"]
                        .into_iter()
                        .collect(),
                },
                Record::Uprobe {
                    rid: 1,
                    tid: 8,
                    function: "cuLaunchKernel".into(),
                    enter: 1_050,
                    exit: 1_950,
                    handle: 5,
                    stack: Default::default(),
                },
                Record::Sched {
                    rid: 2,
                    tid: 7,
                    cpu: 1,
                    switch_out: 200,
                    switch_in: 800,
                    reason: SwitchReason::Preempted,
                },
                Record::Sched {
                    rid: 3,
                    tid: 7,
                    cpu: 1,
                    switch_out: 2_200,
                    switch_in: 2_800,
                    reason: SwitchReason::Blocked,
                },
                Record::Uprobe {
                    rid: 4,
                    tid: 7,
                    function: "cuMemsetD8_v2".into(),
                    enter: 90_000,
                    exit: 91_000,
                    handle: 0,
                    stack: Default::default(),
                },
            ],
            ringbuffer_dropped: 3,
            ..Default::default()
        };
        let st = attach(&mut b, host, (0, 10_000), 0);
        assert_eq!(st.uprobes, 3);
        assert_eq!(st.uprobes_owned, 1);
        assert_eq!(st.dropped_outside, 1);
        assert_eq!((st.sched, st.sched_owned), (2, 1));
        assert_eq!((st.kernels, st.kernels_with_call_site), (1, 1));
        assert_eq!((st.launch_calls, st.call_sites_exact), (1, 1));
        assert_eq!(st.ringbuffer_dropped, 3);
        assert_eq!(b.truth.nodes[call as usize].rids.len(), 2);
        assert_eq!(b.truth.nodes[f as usize].rids.len(), 1);
        assert_eq!(b.trace.len(), 5);
    }

    /// A uprobe that entered a little before the call record around it began
    /// (the call's clock aligned to the recorder's by an estimate) is the
    /// call's only within the slack it is given.
    #[test]
    fn a_call_on_an_aligned_clock_owns_a_uprobe_within_the_slack() {
        let run = |slack| {
            let mut b = RunBuilder::new(true);
            let call = b.node(
                NodeKind::ApiCall,
                "cudaMemcpyAsync",
                NodeInfo {
                    thread: Some(7),
                    ..Default::default()
                },
                10_000,
                20_000,
            );
            b.record(Some(call), |rid| Record::Api {
                rid,
                domain: ApiDomain::Runtime,
                cbid: 41,
                name: "cudaMemcpyAsync".into(),
                tid: 7,
                start: 10_000,
                end: 20_000,
                correlation_id: 1,
            });
            let host = HostTrace {
                records: vec![Record::Uprobe {
                    rid: 0,
                    tid: 7,
                    function: "cuMemcpyDtoHAsync_v2".into(),
                    enter: 7_800,
                    exit: 18_000,
                    handle: 0,
                    stack: Default::default(),
                }],
                ..Default::default()
            };
            attach(&mut b, host, (0, 30_000), slack).uprobes_owned
        };
        assert_eq!(run(0), 0);
        assert_eq!(run(1_000), 0);
        assert_eq!(run(5_000), 1);
    }
}
