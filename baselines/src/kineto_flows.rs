//! `kineto-flows`: the links Kineto itself draws in its trace, scored as a
//! profiler's claims (docs/torch-track.md). Kineto's `ac2g` flow arrows join a
//! CUDA call to the device activity it launched by correlation id, and its
//! `cuda_sync` events name the stream wait's waited-on event record by the
//! correlation id of its `cudaEventRecord` call (`wait_on_cuda_event_record_corr_id`,
//! the record's `event_sync_id` in a torch bundle). This profiler claims exactly
//! those links and nothing else: launch edges call → activity, and an event
//! edge from the waited-on record's call to the wait. It diagnoses no cause.
//! It reads `kineto` views only ([`reads_view`]).

use crate::common::{empty_diagnosis, finish, Output};
use crate::index::{Index, Pos};
use crate::Profiler;
use ground_truth::trace::{Record, SyncType};
use ground_truth::{Collectors, EdgeType, Evidence, Explanation, TraceView, ViewSpec};
use std::collections::HashMap;
use std::time::Instant;

pub const NAME: &str = "kineto-flows";

/// Kineto's flows exist in Kineto's traces only.
pub fn reads_view(spec: &ViewSpec) -> bool {
    matches!(spec.collectors, Collectors::Kineto | Collectors::KinetoHost)
}

pub struct KinetoFlows;

impl Profiler for KinetoFlows {
    fn name(&self) -> &str {
        NAME
    }
    fn version(&self) -> &str {
        crate::VERSION
    }
    fn explain(&self, view: &TraceView) -> Explanation {
        let t0 = Instant::now();
        let ix = Index::new(view);
        let mut out = Output::default();
        let mut call_of_corr: HashMap<u32, Pos> = HashMap::new();
        for (i, r) in ix.recs.iter().enumerate() {
            if let Record::Api { correlation_id, .. } = r {
                call_of_corr.insert(*correlation_id, i as Pos);
            }
        }
        for (i, r) in ix.recs.iter().enumerate() {
            let dst = i as Pos;
            match r {
                Record::Kernel { correlation_id, .. }
                | Record::Memcpy { correlation_id, .. }
                | Record::Memset { correlation_id, .. } => {
                    if let Some(&call) = call_of_corr.get(correlation_id) {
                        out.edge(&ix, call, dst, EdgeType::Launch, Evidence::Explicit, 1.0);
                    }
                }
                Record::Sync {
                    sync_type: SyncType::StreamWaitEvent,
                    event_sync_id,
                    ..
                } if *event_sync_id != 0 => {
                    let record_call = u32::try_from(*event_sync_id)
                        .ok()
                        .and_then(|c| call_of_corr.get(&c));
                    if let Some(&src) = record_call {
                        out.edge(&ix, src, dst, EdgeType::Event, Evidence::Explicit, 1.0);
                    }
                }
                _ => {}
            }
        }
        for q in &view.queries {
            out.diagnoses.push(empty_diagnosis(q));
        }
        finish(self.name(), view, t0, out)
    }
}
