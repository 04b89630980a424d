//! Fixtures are records built from the structs generated from the CUPTI
//! headers (cudarc's bindings of the CUDA 13.0 headers, which keep the
//! 12.x struct versions `Kernel9`, `Memcpy5`, `Synchronization` and
//! `CudaEvent`), turned into the bytes CUPTI would write, then decoded.

use super::*;
use cudarc::cupti::sys as cs;
use std::mem::{offset_of, size_of};

fn bytes_of<T>(record: &T) -> Vec<u8> {
    // SAFETY: plain-old-data structs read as bytes.
    unsafe { std::slice::from_raw_parts(record as *const T as *const u8, size_of::<T>()) }.to_vec()
}

fn zeroed<T>() -> T {
    // SAFETY: every field of these C structs is an integer, enum or pointer,
    // for which all-zero bytes are valid.
    unsafe { std::mem::zeroed() }
}

fn no_name(_: u64) -> String {
    String::new()
}

const LAYOUTS: [RecordLayout; 3] = [
    RecordLayout::Cupti12_0,
    RecordLayout::Cupti12_8,
    RecordLayout::Cupti13_0,
];

#[test]
fn offsets_are_those_of_the_header_structs() {
    use at::*;
    type A = cs::CUpti_ActivityAPI;
    assert_eq!(
        [
            api::CBID,
            api::START,
            api::END,
            api::THREAD,
            api::CORR,
            api::SIZE
        ],
        [
            offset_of!(A, cbid),
            offset_of!(A, start),
            offset_of!(A, end),
            offset_of!(A, threadId),
            offset_of!(A, correlationId),
            size_of::<A>()
        ]
    );
    macro_rules! kernel_offsets {
        ($t:ty) => {
            [
                offset_of!($t, start),
                offset_of!($t, end),
                offset_of!($t, deviceId),
                offset_of!($t, contextId),
                offset_of!($t, streamId),
                offset_of!($t, gridX),
                offset_of!($t, blockX),
                offset_of!($t, correlationId),
                offset_of!($t, name),
                offset_of!($t, queued),
                offset_of!($t, submitted),
                offset_of!($t, graphNodeId),
                offset_of!($t, graphId),
                offset_of!($t, channelID),
            ]
        };
    }
    let ours = [
        kernel::START,
        kernel::END,
        kernel::DEVICE,
        kernel::CONTEXT,
        kernel::STREAM,
        kernel::GRID,
        kernel::BLOCK,
        kernel::CORR,
        kernel::NAME,
        kernel::QUEUED,
        kernel::SUBMITTED,
        kernel::GRAPH_NODE,
        kernel::GRAPH,
        kernel::CHANNEL,
    ];
    assert_eq!(ours, kernel_offsets!(cs::CUpti_ActivityKernel9));
    assert_eq!(ours, kernel_offsets!(cs::CUpti_ActivityKernel10));
    assert_eq!(
        offset_of!(cs::CUpti_ActivityKernel9, gridZ),
        kernel::GRID + 8
    );
    assert_eq!(
        offset_of!(cs::CUpti_ActivityKernel9, blockZ),
        kernel::BLOCK + 8
    );
    macro_rules! copy_offsets {
        ($t:ty) => {
            [
                offset_of!($t, copyKind),
                offset_of!($t, srcKind),
                offset_of!($t, dstKind),
                offset_of!($t, bytes),
                offset_of!($t, start),
                offset_of!($t, end),
                offset_of!($t, deviceId),
                offset_of!($t, contextId),
                offset_of!($t, streamId),
                offset_of!($t, correlationId),
                offset_of!($t, graphNodeId),
                offset_of!($t, graphId),
                offset_of!($t, channelID),
            ]
        };
    }
    let ours = [
        memcpy::COPY_KIND,
        memcpy::SRC_KIND,
        memcpy::DST_KIND,
        memcpy::BYTES,
        memcpy::START,
        memcpy::END,
        memcpy::DEVICE,
        memcpy::CONTEXT,
        memcpy::STREAM,
        memcpy::CORR,
        memcpy::GRAPH_NODE,
        memcpy::GRAPH,
        memcpy::CHANNEL,
    ];
    assert_eq!(ours, copy_offsets!(cs::CUpti_ActivityMemcpy5));
    assert_eq!(ours, copy_offsets!(cs::CUpti_ActivityMemcpy6));
    type M = cs::CUpti_ActivityMemset4;
    assert_eq!(
        [
            memset::BYTES,
            memset::START,
            memset::END,
            memset::DEVICE,
            memset::CONTEXT,
            memset::STREAM,
            memset::CORR,
            memset::SIZE
        ],
        [
            offset_of!(M, bytes),
            offset_of!(M, start),
            offset_of!(M, end),
            offset_of!(M, deviceId),
            offset_of!(M, contextId),
            offset_of!(M, streamId),
            offset_of!(M, correlationId),
            size_of::<M>()
        ]
    );
    macro_rules! sync_offsets {
        ($t:ty) => {
            [
                offset_of!($t, type_),
                offset_of!($t, start),
                offset_of!($t, end),
                offset_of!($t, correlationId),
                offset_of!($t, streamId),
                offset_of!($t, cudaEventId),
            ]
        };
    }
    let ours = [
        sync::TYPE,
        sync::START,
        sync::END,
        sync::CORR,
        sync::STREAM,
        sync::EVENT,
    ];
    assert_eq!(ours, sync_offsets!(cs::CUpti_ActivitySynchronization));
    assert_eq!(ours, sync_offsets!(cs::CUpti_ActivitySynchronization2));
    assert_eq!(
        offset_of!(cs::CUpti_ActivitySynchronization2, cudaEventSyncId),
        sync::SYNC_ID
    );
    type E1 = cs::CUpti_ActivityCudaEvent;
    type E2 = cs::CUpti_ActivityCudaEvent2;
    for (corr, stream, event) in [
        (
            offset_of!(E1, correlationId),
            offset_of!(E1, streamId),
            offset_of!(E1, eventId),
        ),
        (
            offset_of!(E2, correlationId),
            offset_of!(E2, streamId),
            offset_of!(E2, eventId),
        ),
    ] {
        assert_eq!(
            [corr, stream, event],
            [event::CORR, event::STREAM, event::EVENT]
        );
    }
    assert_eq!(offset_of!(E2, deviceTimestamp), event::DEVICE_TS);
    assert_eq!(offset_of!(E2, cudaEventSyncId), event::SYNC_ID);
    type X = cs::CUpti_ActivityExternalCorrelation;
    assert_eq!(
        [ext::KIND, ext::ID, ext::CORR, ext::SIZE],
        [
            offset_of!(X, externalKind),
            offset_of!(X, externalId),
            offset_of!(X, correlationId),
            size_of::<X>()
        ]
    );
}

#[test]
fn record_sizes_are_those_of_each_release_structs() {
    use RecordLayout::*;
    let size = |l: RecordLayout, k| l.record_size(k).unwrap();
    assert_eq!(
        size(Cupti12_0, KIND_CONCURRENT_KERNEL),
        size_of::<cs::CUpti_ActivityKernel9>()
    );
    assert_eq!(
        size(Cupti12_8, KIND_CONCURRENT_KERNEL),
        size_of::<cs::CUpti_ActivityKernel9>()
    );
    assert_eq!(
        size(Cupti13_0, KIND_CONCURRENT_KERNEL),
        size_of::<cs::CUpti_ActivityKernel10>()
    );
    assert_eq!(
        size(Cupti12_0, KIND_MEMCPY),
        size_of::<cs::CUpti_ActivityMemcpy5>()
    );
    // 12.8's Memcpy6 appends `copyCount` to Memcpy5, as 13.0's does.
    assert_eq!(
        size(Cupti12_8, KIND_MEMCPY),
        size_of::<cs::CUpti_ActivityMemcpy5>() + 8
    );
    assert_eq!(
        size(Cupti13_0, KIND_MEMCPY),
        size_of::<cs::CUpti_ActivityMemcpy6>()
    );
    assert_eq!(
        size(Cupti12_0, KIND_SYNCHRONIZATION),
        size_of::<cs::CUpti_ActivitySynchronization>()
    );
    assert_eq!(
        size(Cupti12_0, KIND_CUDA_EVENT),
        size_of::<cs::CUpti_ActivityCudaEvent>()
    );
    for l in [Cupti12_8, Cupti13_0] {
        assert_eq!(
            size(l, KIND_SYNCHRONIZATION),
            size_of::<cs::CUpti_ActivitySynchronization2>()
        );
        assert_eq!(
            size(l, KIND_CUDA_EVENT),
            size_of::<cs::CUpti_ActivityCudaEvent2>()
        );
    }
}

#[test]
fn api_versions_map_to_their_layouts() {
    use RecordLayout::*;
    for (v, l) in [
        (18, Cupti12_0),
        (22, Cupti12_0),
        (24, Cupti12_0),
        (26, Cupti12_8),
        (28, Cupti12_8),
        (130_001, Cupti13_0),
        (130_401, Cupti13_0),
    ] {
        assert_eq!(RecordLayout::of_api_version(v), Ok(l), "API version {v}");
    }
    let err = RecordLayout::of_api_version(17).unwrap_err();
    assert!(err.contains("older than CUDA 12.0"), "{err}");
}

fn kernel9() -> cs::CUpti_ActivityKernel9 {
    let mut k: cs::CUpti_ActivityKernel9 = zeroed();
    k.kind = cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 1_000;
    k.end = 3_000;
    k.deviceId = 0;
    k.contextId = 1;
    k.streamId = 7;
    k.gridX = 132;
    k.gridY = 1;
    k.gridZ = 1;
    k.blockX = 128;
    k.blockY = 1;
    k.blockZ = 1;
    k.correlationId = 42;
    k.name = 0xABCD as *const _;
    k.queued = 900;
    k.submitted = 950;
    k.graphNodeId = 5;
    k.graphId = 3;
    k.channelID = 9;
    k
}

fn expected_kernel(shift: u64) -> Raw {
    Raw::Kernel {
        name: "spin@0xabcd".into(),
        device: 0,
        context: 1,
        stream: 7,
        corr: 42,
        graph_id: 3,
        graph_node_id: 5,
        queued: 900 + shift,
        submitted: 950 + shift,
        start: 1_000 + shift,
        end: 3_000 + shift,
        grid: [132, 1, 1],
        block: [128, 1, 1],
        channel: 9,
    }
}

fn named(p: u64) -> String {
    format!("spin@{p:#x}")
}

#[test]
fn kernel_records_of_each_layout_decode() {
    let k9 = bytes_of(&kernel9());
    for l in [RecordLayout::Cupti12_0, RecordLayout::Cupti12_8] {
        assert_eq!(decode(&k9, l, 0, named), Ok(expected_kernel(0)), "{l:?}");
    }
    // 13.0's Kernel10 is Kernel9 with `isDeviceLaunched` appended.
    let mut k10 = k9.clone();
    k10.resize(size_of::<cs::CUpti_ActivityKernel10>(), 0);
    k10[208] = 1;
    assert_eq!(
        decode(&k10, RecordLayout::Cupti13_0, 0, named),
        Ok(expected_kernel(0))
    );
    // A Kernel9 record is too short for the 13.0 layout: refused, not over-read.
    assert_eq!(
        decode(&k9, RecordLayout::Cupti13_0, 0, named),
        Err(Undecoded::Truncated {
            kind: KIND_CONCURRENT_KERNEL,
            len: 208
        })
    );
}

#[test]
fn the_clock_shift_moves_every_provided_timestamp() {
    let mut k = kernel9();
    k.queued = 0; // not provided: stays 0
    let got = decode(&bytes_of(&k), RecordLayout::Cupti12_0, 10_000, named).unwrap();
    let Raw::Kernel {
        queued,
        submitted,
        start,
        end,
        ..
    } = got
    else {
        panic!("{got:?}")
    };
    assert_eq!((queued, submitted, start, end), (0, 10_950, 11_000, 13_000));
    let back = decode(&bytes_of(&kernel9()), RecordLayout::Cupti12_0, -500, named).unwrap();
    assert!(matches!(back, Raw::Kernel { start: 500, .. }), "{back:?}");
}

#[test]
fn sync_and_event_records_lack_their_ids_before_12_8() {
    let mut s1: cs::CUpti_ActivitySynchronization = zeroed();
    s1.kind = cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s1.type_ = cs::CUpti_ActivitySynchronizationType::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
    s1.start = 10;
    s1.end = 20;
    s1.correlationId = 4;
    s1.streamId = 13;
    s1.cudaEventId = 2;
    let want = |sync_id| Raw::Sync {
        sync_type: 2,
        start: 10,
        end: 20,
        corr: 4,
        stream: 13,
        event_id: 2,
        sync_id,
    };
    // A 12.0–12.6 record is 40 bytes: whatever follows it in the buffer is
    // another record, never its sync id.
    let mut buffer = bytes_of(&s1);
    buffer.extend_from_slice(&[0xFF; 16]);
    assert_eq!(
        decode(&buffer, RecordLayout::Cupti12_0, 0, no_name),
        Ok(want(0))
    );
    let mut s2: cs::CUpti_ActivitySynchronization2 = zeroed();
    s2.kind = s1.kind;
    s2.type_ = s1.type_;
    s2.start = 10;
    s2.end = 20;
    s2.correlationId = 4;
    s2.streamId = 13;
    s2.cudaEventId = 2;
    s2.cudaEventSyncId = 77;
    for l in [RecordLayout::Cupti12_8, RecordLayout::Cupti13_0] {
        assert_eq!(decode(&bytes_of(&s2), l, 0, no_name), Ok(want(77)), "{l:?}");
    }
    // The 12.0 record is too short for the later layouts.
    assert!(decode(&bytes_of(&s1), RecordLayout::Cupti12_8, 0, no_name).is_err());

    let mut e1: cs::CUpti_ActivityCudaEvent = zeroed();
    e1.kind = cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CUDA_EVENT;
    e1.correlationId = 8;
    e1.streamId = 13;
    e1.eventId = 2;
    let mut buffer = bytes_of(&e1);
    buffer.extend_from_slice(&[0xEE; 32]);
    assert_eq!(
        decode(&buffer, RecordLayout::Cupti12_0, 0, no_name),
        Ok(Raw::CudaEvent {
            corr: 8,
            stream: 13,
            event_id: 2,
            ts: 0,
            sync_id: 0
        })
    );
    let mut e2: cs::CUpti_ActivityCudaEvent2 = zeroed();
    e2.kind = e1.kind;
    e2.correlationId = 8;
    e2.streamId = 13;
    e2.eventId = 2;
    e2.deviceTimestamp = 5_000;
    e2.cudaEventSyncId = 77;
    assert_eq!(
        decode(&bytes_of(&e2), RecordLayout::Cupti12_8, 100, no_name),
        Ok(Raw::CudaEvent {
            corr: 8,
            stream: 13,
            event_id: 2,
            ts: 5_100,
            sync_id: 77
        })
    );
}

#[test]
fn copies_memsets_api_and_correlation_records_decode_in_every_layout() {
    let mut c: cs::CUpti_ActivityMemcpy5 = zeroed();
    c.kind = cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY;
    c.copyKind = 1;
    c.srcKind = 2;
    c.dstKind = 3;
    c.bytes = 1 << 20;
    c.start = 5;
    c.end = 6;
    c.streamId = 14;
    c.correlationId = 15;
    c.graphId = 1;
    c.graphNodeId = 2;
    c.channelID = 3;
    let mut m: cs::CUpti_ActivityMemset4 = zeroed();
    m.kind = cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET;
    m.bytes = 64;
    m.start = 7;
    m.end = 8;
    m.streamId = 16;
    m.correlationId = 17;
    let mut a: cs::CUpti_ActivityAPI = zeroed();
    a.kind = cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = 307;
    a.start = 1;
    a.end = 2;
    a.threadId = 4242;
    a.correlationId = 15;
    let mut x: cs::CUpti_ActivityExternalCorrelation = zeroed();
    x.kind = cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x.externalKind = cs::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    x.externalId = 1 << 40;
    x.correlationId = 15;
    for l in LAYOUTS {
        let mut copy = bytes_of(&c);
        copy.resize(l.record_size(KIND_MEMCPY).unwrap(), 0);
        assert_eq!(
            decode(&copy, l, 0, no_name),
            Ok(Raw::Memcpy {
                copy_kind: 1,
                src_kind: 2,
                dst_kind: 3,
                bytes: 1 << 20,
                start: 5,
                end: 6,
                device: 0,
                context: 0,
                stream: 14,
                corr: 15,
                graph_id: 1,
                graph_node_id: 2,
                channel: 3
            }),
            "{l:?}"
        );
        assert_eq!(
            decode(&bytes_of(&m), l, 0, no_name),
            Ok(Raw::Memset {
                bytes: 64,
                start: 7,
                end: 8,
                device: 0,
                context: 0,
                stream: 16,
                corr: 17
            })
        );
        assert_eq!(
            decode(&bytes_of(&a), l, 0, no_name),
            Ok(Raw::Api {
                driver: true,
                cbid: 307,
                start: 1,
                end: 2,
                tid: 4242,
                corr: 15
            })
        );
        assert_eq!(
            decode(&bytes_of(&x), l, 0, no_name),
            Ok(Raw::ExtCorr {
                ext_kind: crate::EXT_OP,
                ext_id: 1 << 40,
                corr: 15
            })
        );
        assert_eq!(
            decode(&[3, 0, 0, 0, 0, 0, 0, 0], l, 0, no_name),
            Err(Undecoded::UnknownKind(3))
        );
    }
}
