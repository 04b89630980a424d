//! Raw CUPTI activity records as trace records (`ground_truth::trace::Record`,
//! rid 0: the recording path numbers them). CUPTI says everything a record
//! needs except what only the caller knows about the call that produced it
//! ([`CallFacts`]).

use crate::activity::{Raw, Recorder};
use ground_truth::trace::{ApiDomain, CopyDirection, HostMemory, Record, SyncType};

/// CUpti_ActivitySynchronizationType values.
pub const SYNC_EVENT_SYNCHRONIZE: u32 = 1;
pub const SYNC_STREAM_WAIT_EVENT: u32 = 2;
pub const SYNC_STREAM_SYNCHRONIZE: u32 = 3;
pub const SYNC_CONTEXT_SYNCHRONIZE: u32 = 4;

/// What the caller knows of the call a record belongs to.
#[derive(Debug, Clone, Copy)]
pub struct CallFacts {
    /// The raw event handle the call named (event records, event waits and
    /// event synchronizations carry it; CUPTI gives only its own event id).
    pub event_handle: u64,
    /// The copy the call asked for, used where CUPTI's copy or memory kind is
    /// one this conversion does not know.
    pub copy: (CopyDirection, HostMemory),
}

impl Default for CallFacts {
    fn default() -> Self {
        CallFacts {
            event_handle: 0,
            copy: (CopyDirection::H2d, HostMemory::Pinned),
        }
    }
}

/// The synchronization kind of a CUPTI synchronization type, if it is one the
/// record contract has.
pub fn sync_type(raw: u32) -> Option<SyncType> {
    Some(match raw {
        SYNC_EVENT_SYNCHRONIZE => SyncType::EventSynchronize,
        SYNC_STREAM_WAIT_EVENT => SyncType::StreamWaitEvent,
        SYNC_STREAM_SYNCHRONIZE => SyncType::StreamSynchronize,
        SYNC_CONTEXT_SYNCHRONIZE => SyncType::ContextSynchronize,
        _ => return None,
    })
}

/// `raw` as a trace record (rid 0), or `None` for the recorder's own external
/// correlation records and synchronization types the contract does not have.
/// API records are named through `names` (callback id → function name).
pub fn to_record(raw: &Raw, facts: &CallFacts, names: &Recorder) -> Option<Record> {
    Some(match raw {
        Raw::Api {
            driver,
            cbid,
            start,
            end,
            tid,
            corr,
        } => Record::Api {
            rid: 0,
            domain: if *driver {
                ApiDomain::Driver
            } else {
                ApiDomain::Runtime
            },
            cbid: *cbid,
            name: names.api_name(*driver, *cbid).into(),
            tid: *tid,
            start: *start,
            end: *end,
            correlation_id: *corr,
        },
        Raw::Kernel {
            name,
            device,
            context,
            stream,
            corr,
            graph_id,
            graph_node_id,
            queued,
            submitted,
            start,
            end,
            grid,
            block,
            channel,
        } => Record::Kernel {
            rid: 0,
            stream: *stream,
            correlation_id: *corr,
            queued: *queued,
            submitted: *submitted,
            start: *start,
            end: *end,
            detail: ground_truth::trace::KernelDetail {
                name: name.as_str().into(),
                context: *context,
                device: *device,
                graph_id: *graph_id,
                graph_node_id: *graph_node_id,
                grid: *grid,
                block: *block,
                channel: *channel,
            }
            .into(),
        },
        Raw::Memcpy {
            copy_kind,
            src_kind,
            dst_kind,
            bytes,
            start,
            end,
            device,
            context,
            stream,
            corr,
            graph_id,
            graph_node_id,
            channel,
        } => {
            let (asked_direction, asked_memory) = facts.copy;
            // CUpti_ActivityMemcpyKind: HTOD 1, DTOH 2, DTOD 8.
            let direction = match copy_kind {
                1 => CopyDirection::H2d,
                2 => CopyDirection::D2h,
                8 => CopyDirection::D2d,
                _ => asked_direction,
            };
            let host_kind = match direction {
                CopyDirection::H2d => *src_kind,
                CopyDirection::D2h => *dst_kind,
                CopyDirection::D2d => 0,
            };
            // CUpti_ActivityMemoryKind: PAGEABLE 1, PINNED 2.
            let memory = match host_kind {
                1 => HostMemory::Pageable,
                2 => HostMemory::Pinned,
                _ => asked_memory,
            };
            Record::Memcpy {
                rid: 0,
                direction,
                memory,
                stream: *stream,
                correlation_id: *corr,
                queued: 0,
                submitted: 0,
                start: *start,
                end: *end,
                detail: ground_truth::trace::CopyDetail {
                    bytes: *bytes,
                    context: *context,
                    device: *device,
                    graph_id: *graph_id,
                    graph_node_id: *graph_node_id,
                    channel: *channel,
                }
                .into(),
            }
        }
        Raw::Memset {
            bytes,
            start,
            end,
            device,
            context,
            stream,
            corr,
        } => Record::Memset {
            rid: 0,
            stream: *stream,
            correlation_id: *corr,
            queued: 0,
            submitted: 0,
            start: *start,
            end: *end,
            detail: ground_truth::trace::MemsetDetail {
                bytes: *bytes,
                context: *context,
                device: *device,
            }
            .into(),
        },
        Raw::Sync {
            sync_type: raw_type,
            start,
            end,
            corr,
            stream,
            sync_id,
            ..
        } => {
            let st = sync_type(*raw_type)?;
            let event = if matches!(st, SyncType::EventSynchronize | SyncType::StreamWaitEvent) {
                facts.event_handle
            } else {
                0
            };
            // CUPTI marks absent values with all-ones; the contract says 0.
            let invalid = |v: u64| v >= u32::MAX as u64;
            Record::Sync {
                rid: 0,
                sync_type: st,
                stream: if *stream == u32::MAX { 0 } else { *stream },
                event,
                event_sync_id: if invalid(*sync_id) { 0 } else { *sync_id },
                correlation_id: *corr,
                start: *start,
                end: *end,
            }
        }
        Raw::CudaEvent {
            corr,
            stream,
            ts,
            sync_id,
            ..
        } => Record::CudaEvent {
            rid: 0,
            event: facts.event_handle,
            event_sync_id: *sync_id,
            stream: *stream,
            correlation_id: *corr,
            ts: *ts,
        },
        Raw::ExtCorr { .. } => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_takes_cuptis_kinds_and_falls_back_to_what_was_asked() {
        let names = Recorder::offline(&[]);
        let copy = |copy_kind, src_kind| Raw::Memcpy {
            copy_kind,
            src_kind,
            dst_kind: 0,
            bytes: 4096,
            start: 10,
            end: 20,
            device: 0,
            context: 1,
            stream: 13,
            corr: 5,
            graph_id: 0,
            graph_node_id: 0,
            channel: 2,
        };
        let facts = CallFacts {
            event_handle: 0,
            copy: (CopyDirection::D2h, HostMemory::Pageable),
        };
        let kinds = |raw: &Raw| match to_record(raw, &facts, &names) {
            Some(Record::Memcpy {
                direction, memory, ..
            }) => (direction, memory),
            other => panic!("{other:?}"),
        };
        assert_eq!(kinds(&copy(1, 2)), (CopyDirection::H2d, HostMemory::Pinned));
        assert_eq!(
            kinds(&copy(99, 0)),
            (CopyDirection::D2h, HostMemory::Pageable)
        );
    }

    #[test]
    fn a_wait_carries_the_callers_event_and_absent_ids_become_zero() {
        let names = Recorder::offline(&[]);
        let wait = Raw::Sync {
            sync_type: SYNC_STREAM_WAIT_EVENT,
            start: 1,
            end: 2,
            corr: 3,
            stream: u32::MAX,
            event_id: 1,
            sync_id: u64::MAX,
        };
        let facts = CallFacts {
            event_handle: 0xE0,
            ..Default::default()
        };
        match to_record(&wait, &facts, &names) {
            Some(Record::Sync {
                sync_type,
                stream,
                event,
                event_sync_id,
                ..
            }) => {
                assert_eq!(sync_type, SyncType::StreamWaitEvent);
                assert_eq!((stream, event, event_sync_id), (0, 0xE0, 0));
            }
            other => panic!("{other:?}"),
        }
        let unknown = Raw::Sync {
            sync_type: 77,
            start: 1,
            end: 2,
            corr: 3,
            stream: 0,
            event_id: 0,
            sync_id: 0,
        };
        assert!(to_record(&unknown, &facts, &names).is_none());
    }

    #[test]
    fn api_records_are_named_by_callback_id() {
        let names = Recorder::offline(&[(true, 307, "cuLaunchKernel")]);
        let api = Raw::Api {
            driver: true,
            cbid: 307,
            start: 1,
            end: 2,
            tid: 9,
            corr: 4,
        };
        match to_record(&api, &CallFacts::default(), &names) {
            Some(Record::Api { name, domain, .. }) => {
                assert_eq!(&*name, "cuLaunchKernel");
                assert_eq!(domain, ApiDomain::Driver);
            }
            other => panic!("{other:?}"),
        }
    }
}
