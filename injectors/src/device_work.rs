//! Plain-data descriptions of the GPU-side injections and their sizing.
//!
//! The generator executes these on the GPU (with the `kernels` crate and
//! cudarc); here they are only data plus arithmetic, so they are testable
//! anywhere. Sizes come from measured device facts ([`DeviceFacts::H200`]
//! holds the numbers of SPEC §9), never from assumptions: e.g. concurrent
//! host↔device copies on the H200 host are *serialized* by the copy engine,
//! so PCIe contention delays a victim copy by the total duration of the
//! copies queued ahead of it, not by sharing bandwidth.

use std::time::Duration;

use ground_truth::scenario::InjectionKind;
use ground_truth::trace::{CopyDirection, HostMemory};

/// Measured facts a plan is sized from.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct DeviceFacts {
    pub num_sms: u32,
    /// Pinned host↔device bandwidth, bytes/s.
    pub pinned_bytes_per_s: f64,
    /// Pageable host↔device bandwidth, bytes/s.
    pub pageable_bytes_per_s: f64,
    /// Whether concurrent host↔device copies on different streams run one
    /// after the other (true on the H200 host).
    pub copies_serialize: bool,
    /// Largest single bulk copy to issue.
    pub max_copy_bytes: u64,
}

impl DeviceFacts {
    /// NVIDIA H200 host of SPEC §9: 132 SMs; a 256 MiB pinned H2D copy takes
    /// ≈ 4.9 ms (≈ 54.8 GB/s), a pageable one ≈ 80 ms (≈ 3.4 GB/s); copies
    /// on different streams serialize.
    pub const H200: DeviceFacts = DeviceFacts {
        num_sms: 132,
        pinned_bytes_per_s: 268_435_456.0 / 4.9e-3,
        pageable_bytes_per_s: 268_435_456.0 / 80e-3,
        copies_serialize: true,
        max_copy_bytes: 256 << 20,
    };

    /// Host↔device bandwidth for `memory` (device-to-device copies are not
    /// PCIe-bound; this returns the pinned figure for them as a floor).
    pub fn copy_bytes_per_s(&self, memory: HostMemory) -> f64 {
        match memory {
            HostMemory::Pinned => self.pinned_bytes_per_s,
            HostMemory::Pageable => self.pageable_bytes_per_s,
        }
    }
}

/// Bytes a copy at `bw_bytes_per_s` moves in `dur` (rounded up, ≥ 1).
pub fn bytes_for_duration(bw_bytes_per_s: f64, dur: Duration) -> u64 {
    if !(bw_bytes_per_s.is_finite() && bw_bytes_per_s > 0.0) {
        return 1;
    }
    ((bw_bytes_per_s * dur.as_secs_f64()).ceil() as u64).max(1)
}

/// Time a copy of `bytes` takes at `bw_bytes_per_s`.
pub fn duration_for_bytes(bw_bytes_per_s: f64, bytes: u64) -> Duration {
    if !(bw_bytes_per_s.is_finite() && bw_bytes_per_s > 0.0) {
        return Duration::MAX;
    }
    Duration::from_secs_f64(bytes as f64 / bw_bytes_per_s)
}

/// `bytes` rounded up to a multiple of `align` (a power of two or not).
pub fn round_up(bytes: u64, align: u64) -> u64 {
    if align <= 1 {
        return bytes;
    }
    bytes.div_ceil(align) * align
}

/// A co-running kernel holding `sms` SMs for `duration` (the `kernels`
/// crate's `cb_occupancy_hog`: grid = `sms`, one block per SM with the
/// maximum dynamic shared memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct OccupancyHog {
    pub sms: u32,
    pub duration: Duration,
}

/// Bulk copies on their own streams, issued just before the victim copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BulkCopies {
    pub direction: CopyDirection,
    pub memory: HostMemory,
    pub bytes_per_copy: u64,
    pub copies: u32,
    /// Streams to spread them over (one per copy).
    pub streams: u32,
    /// Expected delay of a victim copy queued behind all of them.
    pub expected_delay: Duration,
}

/// Spin kernels enqueued on the victim's stream just before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct StreamBacklog {
    pub kernels: u32,
    pub each: Duration,
    pub grid: u32,
}

/// A device-side injection, as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeviceWork {
    /// `occupancy_pressure`: hold every SM for the magnitude.
    OccupancyHog(OccupancyHog),
    /// `pcie_contention`: copies queued ahead of the victim copy.
    BulkCopies(BulkCopies),
    /// `stream_backlog`: extra kernels ahead of the victim in its stream.
    StreamBacklog(StreamBacklog),
    /// `event_wait`, `graph_dependency`, `sync_wait`, `kernel_slowdown`:
    /// the target device op runs `extra` longer (a spin kernel's duration
    /// grows by `extra`).
    LengthenTarget { extra: Duration },
    /// `delayed_memcpy`: the target copy's own transfer is slowed by
    /// staging it through pageable memory instead of pinned memory; the
    /// expected slowdown for its size is `expected_extra`.
    PageableStaging {
        bytes: u64,
        expected_extra: Duration,
    },
    /// `unrelated_work` (negative control): a spin kernel on another stream
    /// using only `grid` blocks (a quarter of the SMs), leaving room for the
    /// target.
    UnrelatedSpin { grid: u32, duration: Duration },
}

/// Longest single kernel of a stream backlog.
pub const BACKLOG_MAX_KERNEL: Duration = Duration::from_millis(1);

/// `n` equal kernels of at most `max_each` that add up to `total`.
pub fn split_duration(total: Duration, max_each: Duration) -> (u32, Duration) {
    if total.is_zero() || max_each.is_zero() {
        return (1, total);
    }
    let n = total.as_nanos().div_ceil(max_each.as_nanos()).max(1) as u32;
    (n, total / n)
}

/// Bulk copies whose serialized total is `delay` (or, where copies share
/// bandwidth instead, whose concurrent transfer halves a victim copy's rate
/// for `delay`).
pub fn bulk_copies_for_delay(
    facts: &DeviceFacts,
    direction: CopyDirection,
    memory: HostMemory,
    delay: Duration,
) -> BulkCopies {
    let bw = facts.copy_bytes_per_s(memory);
    let total = bytes_for_duration(bw, delay);
    let copies = total.div_ceil(facts.max_copy_bytes.max(1)).max(1) as u32;
    let bytes_per_copy = round_up(total.div_ceil(copies as u64), 4096);
    let expected_delay = duration_for_bytes(bw, bytes_per_copy * copies as u64);
    BulkCopies {
        direction,
        memory,
        bytes_per_copy,
        copies,
        streams: copies,
        expected_delay,
    }
}

/// What the target is, for plans that depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TargetInfo {
    /// Direction and size of the target copy (copy injections).
    pub copy: Option<(CopyDirection, u64)>,
    /// Grid of the target kernel (backlog kernels use the same).
    pub grid: Option<u32>,
}

/// The device work for an injection, or `None` for injections executed on
/// the host (`cpu_deschedule`, `host_delay`, page faults: see `CpuHog`,
/// `PtraceHold`, `PageFaults`) or by the recorder (`record_loss`).
pub fn plan(
    kind: InjectionKind,
    magnitude: Duration,
    facts: &DeviceFacts,
    target: TargetInfo,
) -> Option<DeviceWork> {
    match kind {
        InjectionKind::OccupancyPressure => Some(DeviceWork::OccupancyHog(OccupancyHog {
            sms: facts.num_sms,
            duration: magnitude,
        })),
        InjectionKind::PcieContention => {
            let direction = target.copy.map(|c| c.0).unwrap_or(CopyDirection::H2d);
            Some(DeviceWork::BulkCopies(bulk_copies_for_delay(
                facts,
                direction,
                HostMemory::Pinned,
                magnitude,
            )))
        }
        InjectionKind::StreamBacklog => {
            let (kernels, each) = split_duration(magnitude, BACKLOG_MAX_KERNEL);
            Some(DeviceWork::StreamBacklog(StreamBacklog {
                kernels,
                each,
                grid: target.grid.unwrap_or(facts.num_sms),
            }))
        }
        InjectionKind::EventWait
        | InjectionKind::GraphDependency
        | InjectionKind::SyncWait
        | InjectionKind::KernelSlowdown => Some(DeviceWork::LengthenTarget { extra: magnitude }),
        InjectionKind::DelayedMemcpy => {
            let bytes = target.copy.map(|c| c.1).unwrap_or(0);
            let extra = duration_for_bytes(facts.pageable_bytes_per_s, bytes)
                .saturating_sub(duration_for_bytes(facts.pinned_bytes_per_s, bytes));
            Some(DeviceWork::PageableStaging {
                bytes,
                expected_extra: extra,
            })
        }
        InjectionKind::UnrelatedWork => Some(DeviceWork::UnrelatedSpin {
            grid: (facts.num_sms / 4).max(1),
            duration: magnitude,
        }),
        InjectionKind::CpuDeschedule
        | InjectionKind::HostDelay
        | InjectionKind::HostPageFaultMinor
        | InjectionKind::HostPageFaultMajor
        | InjectionKind::RecordLoss => None,
    }
}

/// Bytes of a target copy whose pageable-staging slowdown is `extra` (the
/// size at which `delayed_memcpy` of magnitude `extra` is exact).
pub fn pageable_bytes_for_extra(facts: &DeviceFacts, extra: Duration) -> u64 {
    let per_byte = 1.0 / facts.pageable_bytes_per_s - 1.0 / facts.pinned_bytes_per_s;
    if per_byte <= 0.0 {
        return 0;
    }
    round_up((extra.as_secs_f64() / per_byte).ceil() as u64, 4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: f64) -> Duration {
        Duration::from_secs_f64(x / 1e3)
    }

    #[test]
    fn bytes_and_durations_round_trip() {
        let bw = DeviceFacts::H200.pinned_bytes_per_s;
        let b = bytes_for_duration(bw, ms(4.9));
        assert!((b as i64 - 268_435_456).abs() <= 1, "{b}");
        let d = duration_for_bytes(bw, 256 << 20);
        assert!((d.as_secs_f64() - 4.9e-3).abs() < 1e-9, "{d:?}");
        assert_eq!(bytes_for_duration(1e9, Duration::from_micros(1)), 1000);
        assert_eq!(bytes_for_duration(0.0, ms(1.0)), 1);
        assert_eq!(bytes_for_duration(f64::NAN, ms(1.0)), 1);
        assert_eq!(duration_for_bytes(0.0, 5), Duration::MAX);
    }

    #[test]
    fn round_up_works() {
        assert_eq!(round_up(1, 4096), 4096);
        assert_eq!(round_up(4096, 4096), 4096);
        assert_eq!(round_up(4097, 4096), 8192);
        assert_eq!(round_up(7, 0), 7);
        assert_eq!(round_up(10, 3), 12);
    }

    #[test]
    fn split_duration_caps_each_kernel() {
        assert_eq!(split_duration(ms(5.0), ms(1.0)), (5, ms(1.0)));
        let (n, each) = split_duration(ms(2.5), ms(1.0));
        assert_eq!(n, 3);
        assert!(each <= ms(1.0) && each * 3 <= ms(2.5) + Duration::from_nanos(3));
        assert_eq!(split_duration(Duration::ZERO, ms(1.0)), (1, Duration::ZERO));
    }

    #[test]
    fn pcie_contention_is_sized_from_serialized_copies() {
        let f = DeviceFacts::H200;
        // 5 ms at 54.8 GB/s ≈ 261 MiB > 256 MiB: two copies.
        let c = bulk_copies_for_delay(&f, CopyDirection::H2d, HostMemory::Pinned, ms(5.0));
        assert_eq!(c.copies, 2);
        assert_eq!(c.streams, 2);
        assert_eq!(c.bytes_per_copy % 4096, 0);
        assert!(c.bytes_per_copy <= f.max_copy_bytes);
        let err = (c.expected_delay.as_secs_f64() - 5e-3).abs();
        assert!(err < 1e-6, "{:?}", c.expected_delay);
        // 1 ms fits in one copy.
        let c1 = bulk_copies_for_delay(&f, CopyDirection::D2h, HostMemory::Pinned, ms(1.0));
        assert_eq!(c1.copies, 1);
        assert_eq!(c1.direction, CopyDirection::D2h);
    }

    #[test]
    fn plans_cover_every_device_injection() {
        let f = DeviceFacts::H200;
        let t = TargetInfo {
            copy: Some((CopyDirection::H2d, 64 << 20)),
            grid: Some(66),
        };
        let m = ms(5.0);
        match plan(InjectionKind::OccupancyPressure, m, &f, t) {
            Some(DeviceWork::OccupancyHog(h)) => assert_eq!(
                h,
                OccupancyHog {
                    sms: 132,
                    duration: m
                }
            ),
            other => panic!("{other:?}"),
        }
        match plan(InjectionKind::StreamBacklog, m, &f, t) {
            Some(DeviceWork::StreamBacklog(b)) => {
                assert_eq!((b.kernels, b.each, b.grid), (5, ms(1.0), 66));
            }
            other => panic!("{other:?}"),
        }
        for k in [
            InjectionKind::EventWait,
            InjectionKind::GraphDependency,
            InjectionKind::SyncWait,
            InjectionKind::KernelSlowdown,
        ] {
            assert_eq!(
                plan(k, m, &f, t),
                Some(DeviceWork::LengthenTarget { extra: m })
            );
        }
        match plan(InjectionKind::DelayedMemcpy, m, &f, t) {
            Some(DeviceWork::PageableStaging {
                bytes,
                expected_extra,
            }) => {
                assert_eq!(bytes, 64 << 20);
                // 64 MiB: 20 ms pageable − 1.225 ms pinned.
                assert!(
                    (expected_extra.as_secs_f64() - 18.775e-3).abs() < 1e-6,
                    "{expected_extra:?}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            plan(InjectionKind::UnrelatedWork, m, &f, t),
            Some(DeviceWork::UnrelatedSpin { grid: 33, .. })
        ));
        assert!(matches!(
            plan(InjectionKind::PcieContention, m, &f, t),
            Some(DeviceWork::BulkCopies(_))
        ));
        for k in [
            InjectionKind::CpuDeschedule,
            InjectionKind::HostDelay,
            InjectionKind::HostPageFaultMinor,
            InjectionKind::HostPageFaultMajor,
            InjectionKind::RecordLoss,
        ] {
            assert_eq!(plan(k, m, &f, t), None);
        }
    }

    #[test]
    fn pageable_size_for_extra_inverts_the_plan() {
        let f = DeviceFacts::H200;
        let bytes = pageable_bytes_for_extra(&f, ms(5.0));
        let t = TargetInfo {
            copy: Some((CopyDirection::H2d, bytes)),
            grid: None,
        };
        match plan(InjectionKind::DelayedMemcpy, ms(5.0), &f, t) {
            Some(DeviceWork::PageableStaging { expected_extra, .. }) => {
                assert!(
                    (expected_extra.as_secs_f64() - 5e-3).abs() < 1e-5,
                    "{expected_extra:?}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn device_work_serializes_with_a_kind_tag() {
        let w = DeviceWork::OccupancyHog(OccupancyHog {
            sms: 8,
            duration: ms(1.0),
        });
        let v = serde_json::to_value(w).unwrap();
        assert_eq!(v["kind"], "occupancy_hog");
        assert_eq!(v["sms"], 8);
    }
}
