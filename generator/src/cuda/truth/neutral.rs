//! The executor's run log in the backend-neutral form the one truth builder
//! reads (`crate::record::log`): requests, host events, every call's op with
//! its stream order and waits, and injected host stalls.

use super::super::exec::{self, Op, RunLog, What};
use crate::record::log::{self as neutral, DevRef, OpKind};
use ground_truth::scenario::InjectionKind;

pub(super) fn step_log(log: &RunLog) -> neutral::StepLog {
    neutral::StepLog {
        requests: log
            .requests
            .iter()
            .map(|r| neutral::Request {
                program: r.program,
                index: r.index,
                token: r.token,
            })
            .collect(),
        arrivals: log
            .arrivals
            .iter()
            .map(|a| neutral::Arrival {
                request: a.request,
                t: a.t,
                tid: a.tid,
            })
            .collect(),
        threads: log
            .threads
            .iter()
            .enumerate()
            .map(|(ti, t)| neutral::ThreadLog {
                tid: t.tid,
                injector: log.injector == Some(ti),
                events: t.events.clone(),
            })
            .collect(),
        ops: log
            .threads
            .iter()
            .flat_map(|t| t.ops.iter())
            .map(op)
            .collect(),
        stalls: log
            .stalls
            .iter()
            .map(|s| neutral::Stall {
                tid: s.tid,
                t0: s.t0,
                t1: s.t1,
                kind: s.kind,
                mechanism: s.mechanism.clone(),
                requested_ns: s.requested_ns,
                switched_out_ns: s.switched_out_ns,
                // A host delay is the application's own work grown; a
                // preemption or page faults are a fault node of their own.
                fault_before: (s.kind != InjectionKind::HostDelay).then(|| s.skey.clone()),
            })
            .collect(),
    }
}

fn dev_ref(r: &exec::DevRef) -> DevRef {
    DevRef {
        op: r.op,
        graph_node: r.gnode,
    }
}

fn op(o: &Op) -> neutral::Op {
    let on_stream = !matches!(o.what, What::Sync { .. });
    neutral::Op {
        id: o.id,
        request: o.request,
        skey: o.skey.clone(),
        kind: match &o.what {
            What::Kernel { name, .. } => OpKind::Kernel {
                name: name.clone().into(),
            },
            What::Copy { direction, .. } => OpKind::Copy {
                direction: *direction,
            },
            What::Memset { .. } => OpKind::Memset,
            What::EventRecord { .. } => OpKind::EventRecord,
            What::StreamWait { .. } => OpKind::StreamWait,
            What::GraphLaunch { graph, .. } => OpKind::GraphLaunch { graph: *graph },
            What::Sync { .. } => OpKind::Sync,
            What::Recreate => OpKind::Recreate,
        },
        t0: o.t0,
        tid: Some(o.tid),
        stream: on_stream.then_some(o.stream_cupti),
        generation: o.generation,
        call_site: o.call_site.clone().map(Into::into),
        operator: o.operator.clone().map(Into::into),
        prev: o.prev.as_slice().iter().map(dev_ref).collect(),
        event_src: o.event_src,
        waited: o.waited.iter().map(dev_ref).collect(),
        outside_host_order: false,
        delays_target: o.injected && o.delays_target,
    }
}
