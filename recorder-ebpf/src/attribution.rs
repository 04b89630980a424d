//! Call-site attribution: which user stack belongs to which CUPTI API record.
//!
//! Two joins of uprobe records (with stacks) to CUPTI API records:
//! - **exact**: same thread, and the two intervals nested (the uprobe of the
//!   driver entry point inside a runtime API record, or a driver API record —
//!   whose CUPTI timestamps are taken inside the driver function — inside the
//!   uprobe). Among several candidates the closest one in time wins (and a
//!   uprobe whose function is the API record's own name wins over others).
//!   This needs no clock tolerance: both collectors use CLOCK_MONOTONIC.
//! - **nearest**: the uprobe whose entry is nearest in time to the API record's
//!   start, ignoring threads — the join published eBPF+CUPTI tools use, which
//!   matched 0 of 8,794 stacks in one published run (docs/analyzer-failures.md).
//!
//! [`AttributionReport`] has both answers per API record so the benchmark can
//! report how often nearest-timestamp picks the wrong call or the wrong stack.

use ground_truth::trace::{Record, Rid};
use ground_truth::Ns;

/// One CUPTI API call (from a `Record::Api`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiCall {
    pub rid: Rid,
    pub name: String,
    pub tid: u32,
    pub start: Ns,
    pub end: Ns,
    pub correlation_id: u32,
}

/// One probed call (from a `Record::Uprobe`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeCall {
    pub rid: Rid,
    pub function: String,
    pub tid: u32,
    pub enter: Ns,
    pub exit: Ns,
    pub stack: Vec<String>,
}

/// The two answers for one API record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSiteMatch {
    pub correlation_id: u32,
    pub api_rid: Rid,
    pub tid: u32,
    /// Uprobe matched by thread + nesting (index into `AttributionReport::probes`).
    pub exact: Option<usize>,
    /// Uprobe with the nearest entry time (index into `AttributionReport::probes`).
    pub nearest: Option<usize>,
    /// Both matched the same uprobe.
    pub same_call: bool,
    /// Both matched uprobes with identical stacks (nearest picked the right
    /// stack, possibly from another call).
    pub same_stack: bool,
}

/// Results of both joins over one trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttributionReport {
    pub probes: Vec<ProbeCall>,
    pub matches: Vec<CallSiteMatch>,
    /// API records considered.
    pub api_calls: usize,
    /// API records with an exact match.
    pub exact_matched: usize,
    /// API records with a nearest-timestamp match.
    pub nearest_matched: usize,
    /// Exactly matched records where nearest picked the same uprobe.
    pub nearest_same_call: usize,
    /// Exactly matched records where nearest picked a different stack (or none).
    pub nearest_wrong_stack: usize,
}

impl AttributionReport {
    /// The exactly matched stack of an API record, by correlation id.
    pub fn exact_stack(&self, correlation_id: u32) -> Option<&[String]> {
        self.matches
            .iter()
            .find(|m| m.correlation_id == correlation_id)
            .and_then(|m| m.exact)
            .map(|i| self.probes[i].stack.as_slice())
    }

    /// Share of exactly matched API records whose nearest-timestamp stack is wrong.
    pub fn nearest_wrong_rate(&self) -> f64 {
        if self.exact_matched == 0 {
            0.0
        } else {
            self.nearest_wrong_stack as f64 / self.exact_matched as f64
        }
    }
}

/// API records that launch work: `cu*Launch*` / `cuda*Launch*` (kernels, graphs).
pub fn is_launch_api(name: &str) -> bool {
    name.contains("Launch")
}

/// Joins the uprobe records of `records` to its API records whose name `wanted`
/// accepts (e.g. [`is_launch_api`]).
pub fn attribute_call_sites(
    records: &[Record],
    wanted: impl Fn(&str) -> bool,
) -> AttributionReport {
    let apis: Vec<ApiCall> = records
        .iter()
        .filter_map(|r| match r {
            Record::Api {
                rid,
                name,
                tid,
                start,
                end,
                correlation_id,
                ..
            } if wanted(name) => Some(ApiCall {
                rid: *rid,
                name: name.to_string(),
                tid: *tid,
                start: *start,
                end: *end,
                correlation_id: *correlation_id,
            }),
            _ => None,
        })
        .collect();
    let probes: Vec<ProbeCall> = records
        .iter()
        .filter_map(|r| match r {
            Record::Uprobe {
                rid,
                tid,
                function,
                enter,
                exit,
                stack,
                ..
            } => Some(ProbeCall {
                rid: *rid,
                function: function.to_string(),
                tid: *tid,
                enter: *enter,
                exit: *exit,
                stack: stack.iter().map(|f| f.to_string()).collect(),
            }),
            _ => None,
        })
        .collect();
    attribute(&apis, probes)
}

/// Launch attribution over a trace: [`attribute_call_sites`] with [`is_launch_api`].
pub fn attribute_launch_sites(records: &[Record]) -> AttributionReport {
    attribute_call_sites(records, is_launch_api)
}

fn nested(a: (Ns, Ns), b: (Ns, Ns)) -> bool {
    (a.0 <= b.0 && b.1 <= a.1) || (b.0 <= a.0 && a.1 <= b.1)
}

/// The two joins over explicit API calls and probed calls.
pub fn attribute(apis: &[ApiCall], probes: Vec<ProbeCall>) -> AttributionReport {
    // Probes sorted by entry for the nearest search.
    let mut by_enter: Vec<usize> = (0..probes.len()).collect();
    by_enter.sort_by_key(|&i| (probes[i].enter, i));
    let nearest_of = |t: Ns| -> Option<usize> {
        let k = by_enter.partition_point(|&i| probes[i].enter < t);
        let before = k.checked_sub(1).map(|j| by_enter[j]);
        let after = by_enter.get(k).copied();
        match (before, after) {
            (Some(b), Some(a)) => {
                if t - probes[b].enter <= probes[a].enter - t {
                    Some(b)
                } else {
                    Some(a)
                }
            }
            (x, None) | (None, x) => x,
        }
    };

    let mut report = AttributionReport {
        api_calls: apis.len(),
        ..Default::default()
    };
    for api in apis {
        let exact = probes
            .iter()
            .enumerate()
            .filter(|(_, p)| p.tid == api.tid && nested((api.start, api.end), (p.enter, p.exit)))
            .min_by_key(|(_, p)| {
                (
                    p.function != api.name,
                    p.enter.abs_diff(api.start) + p.exit.abs_diff(api.end),
                )
            })
            .map(|(i, _)| i);
        let nearest = nearest_of(api.start);
        let same_call = exact.is_some() && exact == nearest;
        let same_stack = match (exact, nearest) {
            (Some(e), Some(n)) => probes[e].stack == probes[n].stack,
            _ => false,
        };
        if exact.is_some() {
            report.exact_matched += 1;
            if same_call {
                report.nearest_same_call += 1;
            }
            if !same_stack {
                report.nearest_wrong_stack += 1;
            }
        }
        if nearest.is_some() {
            report.nearest_matched += 1;
        }
        report.matches.push(CallSiteMatch {
            correlation_id: api.correlation_id,
            api_rid: api.rid,
            tid: api.tid,
            exact,
            nearest,
            same_call,
            same_stack,
        });
    }
    report.probes = probes;
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(rid: Rid, tid: u32, start: Ns, end: Ns, corr: u32) -> Record {
        Record::Api {
            rid,
            domain: ground_truth::trace::ApiDomain::Runtime,
            cbid: 211,
            name: "cudaLaunchKernel".into(),
            tid,
            start,
            end,
            correlation_id: corr,
        }
    }

    fn probe(rid: Rid, tid: u32, enter: Ns, exit: Ns, site: &str) -> Record {
        Record::Uprobe {
            rid,
            tid,
            function: "cuLaunchKernel".into(),
            enter,
            exit,
            handle: 0,
            stack: ground_truth::SharedStack::from(vec![
                "libcuda.so.1!cuLaunchKernel".into(),
                format!("app!{site}").into(),
            ]),
        }
    }

    #[test]
    fn exact_join_survives_interleaved_threads_where_nearest_fails() {
        // Two threads launch at almost the same time; thread 2's uprobe entry is
        // nearer to thread 1's API start than thread 1's own uprobe.
        let recs = vec![
            api(1, 1, 1_000, 5_000, 10),
            probe(2, 1, 1_300, 4_000, "producer"),
            api(3, 2, 1_050, 6_000, 11),
            probe(4, 2, 1_100, 5_500, "consumer"),
        ];
        let r = attribute_launch_sites(&recs);
        assert_eq!(r.api_calls, 2);
        assert_eq!(r.exact_matched, 2);
        assert_eq!(r.exact_stack(10).unwrap()[1], "app!producer");
        assert_eq!(r.exact_stack(11).unwrap()[1], "app!consumer");
        let m10 = r.matches.iter().find(|m| m.correlation_id == 10).unwrap();
        assert!(!m10.same_call && !m10.same_stack);
        assert_eq!(r.nearest_wrong_stack, 1);
        assert!((r.nearest_wrong_rate() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn driver_api_inside_uprobe_is_exact() {
        // Driver-domain CUPTI timestamps are taken inside the probed function.
        let recs = vec![
            Record::Api {
                rid: 1,
                domain: ground_truth::trace::ApiDomain::Driver,
                cbid: 307,
                name: "cuLaunchKernel".into(),
                tid: 7,
                start: 2_000,
                end: 3_000,
                correlation_id: 5,
            },
            probe(2, 7, 1_900, 3_100, "site"),
        ];
        let r = attribute_launch_sites(&recs);
        assert_eq!(r.exact_matched, 1);
        assert_eq!(r.nearest_same_call, 1);
        assert_eq!(r.nearest_wrong_stack, 0);
    }

    #[test]
    fn no_uprobe_means_no_exact_match() {
        let recs = vec![
            api(1, 1, 1_000, 2_000, 3),
            probe(2, 9, 1_100, 1_200, "other"),
        ];
        let r = attribute_launch_sites(&recs);
        assert_eq!(r.exact_matched, 0);
        assert_eq!(r.nearest_matched, 1);
        assert_eq!(r.nearest_wrong_stack, 0);
        assert!(r.exact_stack(3).is_none());
    }
}
