//! Event edges (event record → stream wait, by `event_sync_id`) and sync edges
//! (device work → the blocking host call that waited for it).

use super::graph::Graph;
use super::thresholds::{
    BLOCKING_COPY_CONFIDENCE, BLOCKING_COPY_RETURN_SLACK_NS, EVENT_BY_HANDLE_CONFIDENCE,
    EVENT_SYNC_BY_HANDLE_CONFIDENCE, SYNC_WAITED_ON_CONFIDENCE,
};
use crate::index::FastMap;
use crate::index::Pos;
use ground_truth::trace::{HostMemory, MarkerPhase, Record, SyncType};
use ground_truth::{EdgeType, Evidence, Ns};

impl Graph<'_> {
    /// Event record → wait (by event_sync_id), and device work → blocking host calls.
    pub(super) fn event_and_sync_edges(&mut self) {
        let ix = &self.ix;
        let mut by_esid: FastMap<u64, Pos> = FastMap::default();
        let mut by_handle: FastMap<u64, Vec<Pos>> = FastMap::default();
        let mut syncs = Vec::new();
        for (i, r) in ix.recs.iter().enumerate() {
            let p = i as Pos;
            match r {
                Record::CudaEvent {
                    event_sync_id,
                    event,
                    ..
                } => {
                    if *event_sync_id != 0 {
                        by_esid.insert(*event_sync_id, p);
                    }
                    by_handle.entry(*event).or_default().push(p);
                }
                Record::Sync { .. } => syncs.push(p),
                _ => {}
            }
        }
        for v in by_handle.values_mut() {
            v.sort_by_key(|&p| self.enqueue_key(p));
        }
        let mc = self.missing_conf();
        let mut add = Vec::new();
        let mut miss = Vec::new();
        // The exits of the last unit of a stream enqueued before t that were still
        // running at t (only those made the call wait).
        let waited_on = |s: u32, t: Ns, from: Ns| -> Vec<Pos> {
            let Some(v) = self.stream_units.get(&s) else {
                return vec![];
            };
            let k = v.partition_point(|(key, _)| *key < t);
            if k == 0 {
                return vec![];
            }
            v[k - 1]
                .1
                .iter()
                .copied()
                .filter(|&e| ix.end(e) > from)
                .collect()
        };
        for p in syncs {
            let Record::Sync {
                sync_type,
                stream,
                event,
                event_sync_id,
                correlation_id,
                start,
                ..
            } = ix.rec(p)
            else {
                continue;
            };
            let host_call = ix.api_of_corr(*correlation_id).unwrap_or(p);
            let call_start = ix.start(host_call).min(*start);
            match sync_type {
                SyncType::StreamWaitEvent | SyncType::EventSynchronize => {
                    let wait = *sync_type == SyncType::StreamWaitEvent;
                    let (kind, dst) = if wait {
                        (EdgeType::Event, p)
                    } else {
                        (EdgeType::Sync, host_call)
                    };
                    if *event_sync_id != 0 {
                        match by_esid.get(event_sync_id) {
                            Some(&e) => add.push((e, dst, kind, Evidence::Explicit, 1.0)),
                            None => miss.push((p, kind)),
                        }
                    } else if let Some(v) = by_handle.get(event) {
                        // No sync id: the most recent record of the handle before the
                        // call is the one CUDA waits for (right unless a record of it
                        // was lost, hence not explicit).
                        let k = v.partition_point(|&e| self.enqueue_key(e) <= call_start);
                        if k > 0 {
                            let e = v[k - 1];
                            if wait {
                                add.push((
                                    e,
                                    dst,
                                    kind,
                                    Evidence::Inferred,
                                    EVENT_BY_HANDLE_CONFIDENCE,
                                ));
                            } else if ix.end(e) > call_start {
                                add.push((
                                    e,
                                    dst,
                                    kind,
                                    Evidence::Observed,
                                    EVENT_SYNC_BY_HANDLE_CONFIDENCE,
                                ));
                            }
                        }
                    }
                }
                SyncType::StreamSynchronize | SyncType::ImplicitCopyFence => {
                    let t = ix.launch_api(p).map(|a| ix.start(a)).unwrap_or(call_start);
                    for d in waited_on(*stream, t, call_start) {
                        add.push((
                            d,
                            host_call,
                            EdgeType::Sync,
                            Evidence::Observed,
                            SYNC_WAITED_ON_CONFIDENCE,
                        ));
                    }
                }
                SyncType::ContextSynchronize => {
                    let mut ss: Vec<u32> = self.stream_units.keys().copied().collect();
                    ss.sort_unstable();
                    for s in ss {
                        for d in waited_on(s, call_start, call_start) {
                            add.push((
                                d,
                                host_call,
                                EdgeType::Sync,
                                Evidence::Observed,
                                SYNC_WAITED_ON_CONFIDENCE,
                            ));
                        }
                    }
                }
            }
        }
        // A blocking (pageable) copy: the host could not go on until it finished,
        // so it gates the thread's next host operation.
        for &d in &ix.device_ops {
            let r = ix.rec(d);
            if !matches!(r, Record::Memcpy { memory: HostMemory::Pageable, direction, .. } if *direction != ground_truth::trace::CopyDirection::D2d)
            {
                continue;
            }
            let Some(api) = ix.launch_api(d) else {
                continue;
            };
            if ix.end(api) + BLOCKING_COPY_RETURN_SLACK_NS < ix.end(d) {
                continue;
            }
            let Some(tid) = ix.rec(api).tid() else {
                continue;
            };
            if let Some(next) = self.next_host_op(tid, api) {
                add.push((
                    d,
                    next,
                    EdgeType::Sync,
                    Evidence::Observed,
                    BLOCKING_COPY_CONFIDENCE,
                ));
            }
        }
        for (a, b, k, ev, c) in add {
            self.add(a, b, k, ev, c);
        }
        for (p, k) in miss {
            self.add_missing(p, k, mc);
        }
    }

    /// The next host call or enqueue on `tid` after `call`, in the same task.
    pub(super) fn next_host_op(&self, tid: u32, call: Pos) -> Option<Pos> {
        let ix = &self.ix;
        let th = ix.thread(tid)?;
        let t = ix.start(call);
        let k = th.calls.partition_point(|&c| ix.start(c) <= t);
        let next_call = th.calls.get(k).copied();
        let km = th.markers.partition_point(|&m| ix.start(m) < ix.end(call));
        let next_marker = th.markers.get(km).copied();
        match (next_call, next_marker) {
            (Some(c), Some(m)) if ix.start(m) <= ix.start(c) => matches!(
                ix.rec(m),
                Record::Marker {
                    phase: MarkerPhase::Enqueue,
                    ..
                }
            )
            .then_some(m),
            (Some(c), _) => Some(c),
            (None, Some(m)) => matches!(
                ix.rec(m),
                Record::Marker {
                    phase: MarkerPhase::Enqueue,
                    ..
                }
            )
            .then_some(m),
            (None, None) => None,
        }
    }
}
