//! What the loaded CUPTI can observe: its release, the activity kinds it
//! accepted and refused, the record fields its layout lacks, and the clock
//! its timestamps are in. Written into every bundle's manifest
//! (docs/cupti-versions.md).

use crate::layout::RecordLayout;
use ground_truth::{CuptiCapabilities, Unobservable};

pub use ground_truth::bundle::cupti_release as release_of;

/// How record timestamps reach the trace clock (CLOCK_MONOTONIC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clock {
    /// CUPTI calls the recorder's CLOCK_MONOTONIC timestamp callback.
    Callback,
    /// The callback was refused: CUPTI's own clock, moved by the offset
    /// measured at start (`offset_ns`, to within `uncertainty_ns`).
    Shifted {
        refused: String,
        offset_ns: i64,
        uncertainty_ns: u64,
    },
}

impl Clock {
    pub fn shift(&self) -> i64 {
        match self {
            Clock::Callback => 0,
            Clock::Shifted { offset_ns, .. } => *offset_ns,
        }
    }

    fn describe(&self) -> String {
        match self {
            Clock::Callback => "CLOCK_MONOTONIC (timestamp callback)".into(),
            Clock::Shifted {
                refused,
                offset_ns,
                uncertainty_ns,
            } => format!(
                "CUPTI's own clock moved to CLOCK_MONOTONIC by {offset_ns} ns (±{uncertainty_ns} ns, measured at start; {refused})"
            ),
        }
    }
}

/// The outcome of enabling the activity kinds, in order.
#[derive(Debug, Clone, Default)]
pub struct KindOutcomes {
    pub enabled: Vec<(u32, &'static str)>,
    pub refused: Vec<(u32, &'static str, String)>,
}

impl KindOutcomes {
    pub fn observes(&self, kind: u32) -> bool {
        self.enabled.iter().any(|&(k, _)| k == kind)
    }
}

/// The manifest's account of one loaded CUPTI.
pub fn capabilities(
    api_version: u32,
    library: &str,
    layout: RecordLayout,
    clock: &Clock,
    kinds: &KindOutcomes,
) -> CuptiCapabilities {
    let mut unobservable: Vec<Unobservable> = kinds
        .refused
        .iter()
        .map(|(_, name, why)| Unobservable {
            what: (*name).to_string(),
            reason: why.clone(),
        })
        .collect();
    let refused = |kind: &str| kinds.refused.iter().any(|(_, n, _)| n == &kind);
    for field in layout.missing_fields() {
        let kind = field.split('.').next().unwrap_or(field);
        // A field of a kind that delivers no records at all is not listed twice.
        if !refused(kind) {
            unobservable.push(Unobservable {
                what: (*field).to_string(),
                reason: format!("not in the {} record layout", layout.name()),
            });
        }
    }
    CuptiCapabilities {
        api_version,
        release: release_of(api_version),
        library: library.to_string(),
        record_layout: layout.name().into(),
        clock: clock.describe(),
        kinds: kinds.enabled.iter().map(|(_, n)| n.to_string()).collect(),
        unobservable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::{KIND_CONCURRENT_KERNEL, KIND_CUDA_EVENT};

    #[test]
    fn releases_follow_the_api_version() {
        assert_eq!(release_of(22), "12.4");
        assert_eq!(release_of(26), "12.8");
        assert_eq!(release_of(130_001), "13.0");
        assert_eq!(release_of(130_401), "13.4");
    }

    #[test]
    fn a_refused_kind_and_missing_fields_are_listed_once_each() {
        let kinds = KindOutcomes {
            enabled: vec![(KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL")],
            refused: vec![(
                KIND_CUDA_EVENT,
                "CUDA_EVENT",
                "cuptiActivityEnable(CUDA_EVENT) failed: CUPTI_ERROR_INVALID_KIND".into(),
            )],
        };
        let c = capabilities(
            22,
            "/x/libcupti.so.12",
            RecordLayout::Cupti12_0,
            &Clock::Callback,
            &kinds,
        );
        let what: Vec<&str> = c.unobservable.iter().map(|u| u.what.as_str()).collect();
        assert_eq!(what, ["CUDA_EVENT", "SYNCHRONIZATION.cudaEventSyncId"]);
        assert_eq!(c.release, "12.4");
        assert_eq!(c.kinds, ["CONCURRENT_KERNEL"]);
        assert!(kinds.observes(KIND_CONCURRENT_KERNEL) && !kinds.observes(KIND_CUDA_EVENT));
    }
}
