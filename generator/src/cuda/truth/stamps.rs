//! Truth without CUPTI (`causalbench workload`, docs/collectors.md): the one
//! truth builder's observer when the project's CUPTI recorder is not in the
//! process (an external collector may own CUPTI there; only one subscriber
//! can exist). Each call's span is the executor's own measurement, each
//! kernel's times its `%globaltimer` log entry, each copy's and memset's the
//! CUDA events around it (`cuda::copy_stamps`), all moved into
//! CLOCK_MONOTONIC by an offset measured without CUPTI
//! (`cuda::standalone::clock`). The records it adds are the workload's own
//! stamps in the trace-record format, so the bundle replays like any other;
//! a collector's records replace them (`crate::collector`).

use super::clock_fit::ClockFit;
use super::*;
use crate::record::log::Op as StepOp;
use crate::record::truth::{Measured, Observer};
use ground_truth::trace::{
    ApiDomain, CopyDetail, KernelDetail, MemsetDetail, SharedDetail, SyncType,
};

/// What the workload measured about its device work besides the kernels' log.
#[derive(Debug, Clone, Default)]
pub struct Stamps {
    /// CLOCK_MONOTONIC − `%globaltimer`, measured around the run.
    pub clock: ClockFit,
    /// Copies', memsets' and stream waits' (start, end) in `%globaltimer`
    /// ns, by op id (CUDA events around them, `cuda::copy_stamps`).
    pub copies: HashMap<u64, (Ns, Ns)>,
}

struct StampObserver<'a> {
    log: &'a RunLog,
    stamps: &'a Stamps,
    ops: HashMap<u64, &'a Op>,
    /// Per graph, the launch whose replay the log slots hold (the last).
    last_launch: HashMap<usize, u64>,
    stats: RunStats,
}

impl<'a> StampObserver<'a> {
    fn own(&self, op: &StepOp) -> &'a Op {
        self.ops[&op.id]
    }

    fn mono(&self, g: Ns) -> Ns {
        self.stamps.clock.to_mono(g)
    }

    /// A kernel's (start, end) from its log entry, in CLOCK_MONOTONIC.
    fn logged(&self, slot: Option<u32>, id: u64) -> Option<(Ns, Ns)> {
        let e = slot
            .and_then(|s| self.log.device_log.get(s as usize))
            .filter(|e| e.is_written_for(id))?;
        Some((
            self.mono(e.start_ns),
            self.mono(e.last_end_ns.max(e.end_ns)),
        ))
    }
}

fn correlation(op: u64) -> u32 {
    op as u32
}

impl Observer for StampObserver<'_> {
    fn call(&mut self, op: &StepOp) -> (String, (Ns, Ns)) {
        let o = self.own(op);
        self.stats.api_ops += 1;
        (expected_api(&o.what).to_string(), (o.t0, o.t1))
    }

    fn call_records(&mut self, b: &mut RunBuilder, op: &StepOp, call: NodeId) {
        let o = self.own(op);
        let name = expected_api(&o.what);
        b.record(Some(call), |rid| Record::Api {
            rid,
            domain: ApiDomain::Driver,
            cbid: 0,
            name: name.into(),
            tid: o.tid,
            start: o.t0,
            end: o.t1,
            correlation_id: correlation(o.id),
        });
    }

    fn device_times(&mut self, op: &StepOp, call_end: Ns) -> Measured {
        let o = self.own(op);
        self.stats.device_ops += 1;
        let times = match &o.what {
            What::Kernel { .. } => self.logged(o.slot, o.id),
            What::Copy { .. } | What::Memset { .. } => self
                .stamps
                .copies
                .get(&o.id)
                .map(|&(s, e)| (self.mono(s), self.mono(e))),
            _ => None,
        };
        if times.is_some() {
            self.stats.bound += 1;
        } else if self.stats.unbound.len() < 20 {
            self.stats
                .unbound
                .push(format!("op {} ({})", o.id, expected_api(&o.what)));
        }
        let (start, end) = times.unwrap_or((call_end, call_end));
        Measured::Recorded {
            queued: None,
            submitted: None,
            start,
            end,
        }
    }

    fn device_records(&mut self, b: &mut RunBuilder, op: &StepOp, dev: NodeId) {
        let o = self.own(op);
        let (start, end) = {
            let n = &b.truth.nodes[dev as usize];
            (n.start, n.end)
        };
        let stream = o.stream_cupti;
        let correlation_id = correlation(o.id);
        let record = move |rid| match &o.what {
            What::Kernel {
                name, grid, block, ..
            } => Record::Kernel {
                rid,
                stream,
                correlation_id,
                queued: 0,
                submitted: 0,
                start,
                end,
                detail: SharedDetail::from(KernelDetail {
                    name: o.entry.as_deref().unwrap_or(name).into(),
                    context: 1,
                    device: 0,
                    graph_id: 0,
                    graph_node_id: 0,
                    grid: [*grid, 1, 1],
                    block: [*block, 1, 1],
                    channel: 0,
                }),
            },
            What::Copy {
                direction,
                bytes,
                memory,
                ..
            } => Record::Memcpy {
                rid,
                direction: *direction,
                memory: *memory,
                stream,
                correlation_id,
                queued: 0,
                submitted: 0,
                start,
                end,
                detail: SharedDetail::from(CopyDetail {
                    bytes: *bytes,
                    context: 1,
                    device: 0,
                    graph_id: 0,
                    graph_node_id: 0,
                    channel: 0,
                }),
            },
            _ => Record::Memset {
                rid,
                stream,
                correlation_id,
                queued: 0,
                submitted: 0,
                start,
                end,
                detail: SharedDetail::from(MemsetDetail {
                    bytes: match &o.what {
                        What::Memset { bytes, .. } => *bytes,
                        _ => 0,
                    },
                    context: 1,
                    device: 0,
                }),
            },
        };
        b.record(Some(dev), record);
    }

    fn event_reached(&mut self, _op: &StepOp, _queued: Ns) -> Option<Ns> {
        None
    }

    fn event_records(&mut self, _b: &mut RunBuilder, _op: &StepOp, _dev: NodeId, _queued: Ns) {}

    /// A stream wait's record: the events around the wait on its stream
    /// say when the stream reached it and when it went on (CUPTI's own
    /// SYNCHRONIZATION record of a wait spans the host call instead); a wait
    /// without stamps keeps its node's times, so the symptom a wait is still
    /// has a record to be asked about.
    fn wait_records(&mut self, b: &mut RunBuilder, op: &StepOp, dev: NodeId) {
        let o = self.own(op);
        let (start, end) = match self.stamps.copies.get(&o.id) {
            Some(&(s, e)) => (self.mono(s), self.mono(e)),
            None => {
                let n = &b.truth.nodes[dev as usize];
                (n.start, n.end)
            }
        };
        let (stream, correlation_id) = (o.stream_cupti, correlation(o.id));
        b.record(Some(dev), |rid| Record::Sync {
            rid,
            sync_type: SyncType::StreamWaitEvent,
            stream,
            event: o.handle,
            event_sync_id: 0,
            correlation_id,
            start,
            end,
        });
    }

    /// Each replay's nodes are timed by their own ring entries. A replay
    /// without one (a plain slot's earlier replays, a ring past its
    /// capacity) lasts what a logged replay did, from when it could start.
    fn graph_node_times(
        &mut self,
        op: &StepOp,
        gi: usize,
        ni: usize,
        replay: usize,
        ready: Ns,
    ) -> (Ns, Ns) {
        let o = self.own(op);
        self.stats.device_ops += 1;
        let meta = &self.log.graphs[gi];
        let id = graph_op_id(gi, ni);
        let last = self.last_launch.get(&gi) == Some(&o.id);
        if let Some(times) = self.logged(meta.replay_slot(ni, replay, last), id) {
            self.stats.bound += 1;
            return times;
        }
        let logged = meta
            .node_slots(ni)
            .into_iter()
            .rev()
            .find_map(|slot| self.logged(Some(slot), id));
        let Some((start, end)) = logged else {
            return (ready, ready);
        };
        self.stats.bound += 1;
        (ready, ready + (end - start))
    }

    fn graph_node_records(
        &mut self,
        b: &mut RunBuilder,
        op: &StepOp,
        ni: usize,
        dev: NodeId,
        _key: Option<&StepKey>,
    ) {
        let o = self.own(op);
        let What::GraphLaunch { graph, .. } = o.what else {
            return;
        };
        let (start, end) = {
            let n = &b.truth.nodes[dev as usize];
            (n.start, n.end)
        };
        let name = self.log.graphs[graph].entries[ni].clone();
        let (stream, correlation_id) = (o.stream_cupti, correlation(o.id));
        b.record(Some(dev), |rid| Record::Kernel {
            rid,
            stream,
            correlation_id,
            queued: 0,
            submitted: 0,
            start,
            end,
            detail: SharedDetail::from(KernelDetail {
                name: name.as_str().into(),
                context: 1,
                device: 0,
                graph_id: graph as u32 + 1,
                graph_node_id: ni as u64,
                grid: [1, 1, 1],
                block: [1, 1, 1],
                channel: 0,
            }),
        });
    }

    /// A host synchronization's record spans its call, as CUPTI's
    /// SYNCHRONIZATION record of it does; the workload stamps the call
    /// itself, so a symptom that is a synchronization has its record here
    /// too (without it, the label check refused such a case: "no device or
    /// sync record").
    fn sync_records(&mut self, b: &mut RunBuilder, op: &StepOp, call: NodeId) {
        let o = self.own(op);
        let What::Sync { target } = o.what else {
            return;
        };
        let (sync_type, stream, event) = match target {
            SyncTarget::Stream => (SyncType::StreamSynchronize, o.stream_cupti, 0),
            SyncTarget::Event => (SyncType::EventSynchronize, 0, o.handle),
            SyncTarget::Device => (SyncType::ContextSynchronize, 0, 0),
        };
        b.record(Some(call), |rid| Record::Sync {
            rid,
            sync_type,
            stream,
            event,
            event_sync_id: 0,
            correlation_id: correlation(o.id),
            start: o.t0,
            end: o.t1,
        });
    }
}

/// The truth of `log` from the workload's own stamps alone (no CUPTI record
/// is read, even where the log holds some).
pub fn build_stamped(
    sc: &Scenario,
    log: &RunLog,
    plan: Option<&Plan>,
    stamps: &Stamps,
    keep_records: bool,
) -> Output {
    let ops: HashMap<u64, &Op> = log
        .threads
        .iter()
        .flat_map(|t| t.ops.iter())
        .map(|o| (o.id, o))
        .collect();
    let mut last_launch: HashMap<usize, (Ns, u64)> = HashMap::new();
    for o in ops.values() {
        if let What::GraphLaunch { graph, .. } = o.what {
            let l = last_launch.entry(graph).or_insert((0, 0));
            if o.t0 >= l.0 {
                *l = (o.t0, o.id);
            }
        }
    }
    let mut observer = StampObserver {
        log,
        stamps,
        ops,
        last_launch: last_launch
            .into_iter()
            .map(|(g, (_, op))| (g, op))
            .collect(),
        stats: RunStats {
            scenario: sc.name.clone(),
            errors: log.errors.clone(),
            wall_ns: log.end.saturating_sub(log.origin),
            ..Default::default()
        },
    };
    let steps = neutral::step_log(log);
    let truth = crate::record::truth::build(
        sc,
        &steps,
        plan.map(|p| &p.plan),
        &mut observer,
        keep_records,
    );
    observer.stats.records = truth.builder.trace.len();
    Output {
        builder: truth.builder,
        keys: truth.keys,
        loss: LossAccounting::default(),
        injections: truth.injections,
        stats: observer.stats,
        origin: log.origin,
    }
}
