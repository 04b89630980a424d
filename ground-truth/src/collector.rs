//! A collector's records (baselines/COLLECTORS.md): what the converter a
//! collector's author writes makes of the collector's native output. The
//! records are trace records of this crate's format; the harness binds them
//! to the truth of the run they observed (`generator::collector`) and scores
//! them as a bundle's trace.

use crate::io::Readable;
use crate::trace::Record;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which clock the records' times are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CollectorClock {
    /// CLOCK_MONOTONIC nanoseconds (eBPF's `bpf_ktime_get_ns`, or a
    /// collector that converted its times itself).
    Monotonic,
    /// Nanoseconds on one clock of the collector's own (CUPTI's default
    /// timestamps): the harness finds the constant offset to CLOCK_MONOTONIC
    /// from the device records (baselines/COLLECTORS.md, "Clocks").
    Own,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CollectorRecords {
    pub schema_version: u32,
    /// The collector's name, as the leaderboard shows it (an identifier).
    pub collector: String,
    pub clock: CollectorClock,
    /// Records the collector says it lost (0 when it cannot tell).
    #[serde(default)]
    pub dropped: u64,
    /// Every record of the whole workload process, in any order; rids are
    /// assigned by the harness (any value is accepted here).
    pub records: Vec<Record>,
}

impl Readable for CollectorRecords {
    const WHAT: &'static str = "collector records";
    fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.schema_version != crate::SCHEMA_VERSION {
            out.push((
                "schema_version".into(),
                format!(
                    "expected schema_version {}, found {}",
                    crate::SCHEMA_VERSION,
                    self.schema_version
                ),
            ));
        }
        if let Some(e) = crate::identifier::identifier_problem(&self.collector) {
            out.push(("collector".into(), e));
        }
        out
    }
}
