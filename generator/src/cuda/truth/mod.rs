//! Builds the ground truth and the trace of one real run from what the
//! executor knows by construction (which call created which op on which
//! stream, which record each wait targeted, graph dependencies, handoffs) and
//! what CUPTI measured, bound by correlation id: every generator call carried
//! a recorder-private external correlation id (CUSTOM0 = op id), so each CUPTI
//! API record, and through its correlation id each device record, belongs to
//! exactly one op. The executor's log is converted into the backend-neutral
//! step log ([`neutral`]) and built by the one truth builder
//! (`crate::record::truth`, docs/records.md) the PyTorch backend builds
//! through too; CUPTI's records are bound to its nodes here ([`device`]: the
//! [`crate::record::truth::Observer`] of CUPTI).

mod binding;
mod clock;
pub mod clock_fit;
mod device;
mod neutral;
mod stamps;

pub use clock_fit::{ClockFit, ClockSample};
pub use stamps::{build_stamped, Stamps};

use super::cupti::{self, Raw};
use super::exec::{graph_op_id, Op, RunLog, What};
use super::plan::Plan;
use crate::keys::{Keys, StepKey};
use crate::record::steps::Observed;
use crate::record::RunBuilder;
use ground_truth::bundle::LossAccounting;
use ground_truth::graph::{InjectionRecord, NodeId};
use ground_truth::scenario::{KernelKind, Scenario, SyncTarget};
use ground_truth::trace::{CopyDirection, Record, Rid};
use ground_truth::{Mode, Ns};
use recorder_cupti::convert::{
    CallFacts, SYNC_CONTEXT_SYNCHRONIZE, SYNC_EVENT_SYNCHRONIZE, SYNC_STREAM_SYNCHRONIZE,
    SYNC_STREAM_WAIT_EVENT,
};
use std::collections::{HashMap, HashSet};
// What the unit tests (`tests.rs`, `use super::*`) build their logs from.
#[cfg(test)]
use {
    super::exec::{DevRef, HostEv},
    ground_truth::graph::NodeKind,
};

/// CUPTI vs `%globaltimer` agreement of the kernels of one run.
#[derive(Debug, Clone, Default)]
pub struct ClockCheck {
    pub kernels: usize,
    /// Median (CUPTI start − globaltimer start): the clock offset.
    pub offset_ns: i64,
    pub max_start_dev_ns: i64,
    pub max_end_dev_ns: i64,
    /// Share of kernels whose start and end both agree within 2 µs.
    pub within_2us: f64,
    /// Every kernel's worst deviation (ns), for aggregation.
    pub devs: Vec<i64>,
}

/// What a run measured about itself (not part of the bundle format).
#[derive(Debug, Clone, Default)]
pub struct RunStats {
    pub scenario: String,
    pub twin: bool,
    /// Kernels, copies, memsets and graph-node kernels the run issued.
    pub device_ops: usize,
    /// Of those, how many a CUPTI device record was bound to by correlation id.
    pub bound: usize,
    pub unbound: Vec<String>,
    pub api_ops: usize,
    pub api_bound: usize,
    pub clock: ClockCheck,
    /// Spin kernels of ≥ 100 µs: (requested ns, CUPTI duration ns).
    pub spin: Vec<(u64, u64)>,
    pub records: usize,
    /// CUPTI records not bound to any generator call (harness work), not kept.
    pub harness_records: usize,
    pub unknown_records: u64,
    pub cupti_dropped: u64,
    pub errors: Vec<String>,
    pub wall_ns: u64,
    /// The eBPF host collector's part of the run (None: not recorded).
    pub host: Option<super::host::HostStats>,
}

pub struct Output {
    pub builder: RunBuilder,
    pub keys: Keys,
    pub loss: LossAccounting,
    pub injections: Vec<InjectionRecord>,
    pub stats: RunStats,
    pub origin: Ns,
}

/// CUPTI's records of one run, bound to its ops by correlation id, and what
/// the run measured about itself.
struct CuptiObserver<'a> {
    sc: &'a Scenario,
    log: &'a RunLog,
    plan: Option<&'a Plan>,
    rec: &'a cupti::Recorder,
    instrumented: bool,
    ops: HashMap<u64, &'a Op>,
    corrs: HashMap<u64, Vec<u32>>,
    by_corr: HashMap<u32, Vec<usize>>,
    tokens: HashMap<u32, Vec<u64>>,
    used: HashSet<usize>,
    loss: LossAccounting,
    stats: RunStats,
    clock_offset: Option<i64>,
    /// The graph launch whose nodes are being bound, and each node's kernel record.
    graph_assigned: (u64, Vec<Option<usize>>),
}

pub fn build(
    sc: &Scenario,
    log: &RunLog,
    plan: Option<&Plan>,
    rec: &cupti::Recorder,
    keep_records: bool,
) -> Output {
    let raws = &log.flushed.records;
    let mut op_of_corr: HashMap<u32, u64> = HashMap::new();
    let mut tokens: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut by_corr: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, r) in raws.iter().enumerate() {
        match r {
            Raw::ExtCorr {
                ext_kind,
                ext_id,
                corr,
            } => {
                if *ext_kind == cupti::EXT_OP {
                    op_of_corr.insert(*corr, *ext_id);
                } else if *ext_kind == cupti::EXT_REQUEST {
                    tokens.entry(*corr).or_default().push(*ext_id);
                }
            }
            r => by_corr.entry(r.corr()).or_default().push(i),
        }
    }
    let mut corrs: HashMap<u64, Vec<u32>> = HashMap::new();
    for (&c, &op) in &op_of_corr {
        corrs.entry(op).or_default().push(c);
    }
    for v in corrs.values_mut() {
        v.sort_unstable();
    }
    let harness = raws
        .iter()
        .filter(|r| !matches!(r, Raw::ExtCorr { .. }) && !op_of_corr.contains_key(&r.corr()))
        .count();
    let ops: HashMap<u64, &Op> = log
        .threads
        .iter()
        .flat_map(|t| t.ops.iter())
        .map(|o| (o.id, o))
        .collect();
    let mut cupti = CuptiObserver {
        sc,
        log,
        plan,
        rec,
        instrumented: sc.mode == Mode::Instrumented,
        ops,
        corrs,
        by_corr,
        tokens,
        used: HashSet::new(),
        loss: LossAccounting {
            cupti_dropped: log.flushed.dropped,
            ..Default::default()
        },
        stats: RunStats {
            scenario: sc.name.clone(),
            harness_records: harness,
            unknown_records: log.flushed.unknown,
            cupti_dropped: log.flushed.dropped,
            errors: log.errors.clone(),
            wall_ns: log.end.saturating_sub(log.origin),
            ..Default::default()
        },
        clock_offset: None,
        graph_assigned: (u64::MAX, Vec::new()),
    };
    cupti.clock_check();
    let steps = neutral::step_log(log);
    let truth =
        crate::record::truth::build(sc, &steps, plan.map(|p| &p.plan), &mut cupti, keep_records);
    cupti.stats.records = truth.builder.trace.len();
    Output {
        builder: truth.builder,
        keys: truth.keys,
        loss: cupti.loss,
        injections: truth.injections,
        stats: cupti.stats,
        origin: log.origin,
    }
}

fn median(mut v: Vec<i64>) -> i64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

fn with_rid(mut r: Record, rid: u64) -> Record {
    *r.rid_mut() = rid;
    r
}

/// The driver entry point an op calls (names an API node whose record was lost).
fn expected_api(w: &What) -> &'static str {
    match w {
        What::Kernel {
            launch: ground_truth::scenario::LaunchApi::DriverEx,
            ..
        } => "cuLaunchKernelEx",
        What::Kernel { .. } => "cuLaunchKernel",
        What::Copy { direction, .. } => match direction {
            CopyDirection::H2d => "cuMemcpyHtoDAsync_v2",
            CopyDirection::D2h => "cuMemcpyDtoHAsync_v2",
            CopyDirection::D2d => "cuMemcpyDtoDAsync_v2",
        },
        What::Memset { .. } => "cuMemsetD8Async",
        What::EventRecord { .. } => "cuEventRecord",
        What::StreamWait { .. } => "cuStreamWaitEvent",
        What::GraphLaunch { .. } => "cuGraphLaunch",
        What::Sync {
            target: SyncTarget::Stream,
        } => "cuStreamSynchronize",
        What::Sync {
            target: SyncTarget::Event,
        } => "cuEventSynchronize",
        What::Sync {
            target: SyncTarget::Device,
        } => "cuCtxSynchronize",
        What::Recreate => "recreate",
    }
}

#[cfg(test)]
mod tests;
