//! The agreement of two backends on the same generated scenarios (docs/scenario-space.md,
//! "Simulator against GPU"): cases matched by scenario name; per axis bucket, how often
//! the label check reached the same verdict, how the symptoms' lateness compares, and
//! how often each profiler's verdict (correct or not) is the same on both.

use crate::EvalError;
use ground_truth::io::Readable;
use ground_truth::scenario::AxisValue;
use ground_truth::Bundle;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The view whose profiler verdicts are compared: every collector, instrumented, no loss.
pub const AGREEMENT_VIEW: &str = "combined-instrumented-none";

/// A symptom lateness below this (µs) on the first backend gives no lateness ratio.
const LATENESS_FLOOR_US: f64 = 1.0;

/// What one backend says of one scenario.
#[derive(Debug, Clone)]
pub struct Side {
    /// The label check's verdict of the first symptom (`unchecked` without one).
    pub verdict: String,
    pub lateness_us: f64,
    pub axes: BTreeMap<String, AxisValue>,
    pub backend: String,
}

/// Per (scenario, profiler): whether the profiler answered every question right in
/// [`AGREEMENT_VIEW`].
pub type ProfilerVerdicts = BTreeMap<(String, String), bool>;

/// Agreement counts of one axis bucket.
#[derive(Debug, Default)]
struct Tally {
    cases: usize,
    same_verdict: usize,
    lateness_ratios: Vec<f64>,
    /// Per profiler: (compared, same verdict).
    profilers: BTreeMap<String, (usize, usize)>,
}

/// The agreement of backend B with backend A, per (axis, bucket).
#[derive(Debug)]
pub struct Agreement {
    tallies: BTreeMap<(String, String), Tally>,
    /// Scenarios recorded on both.
    pub matched: usize,
    /// (A's backend, B's backend).
    pub backends: (String, String),
}

/// Every generated bundle of `dir` by scenario name (the first repetition).
pub fn sides(dir: &Path) -> Result<BTreeMap<String, Side>, EvalError> {
    let entries = std::fs::read_dir(dir).map_err(|source| EvalError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = BTreeMap::new();
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    for path in files {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !(name.ends_with(".bundle.json") || name.ends_with(".bundle.json.gz")) {
            continue;
        }
        let bundle = Bundle::read(&path)?;
        let Some(space) = bundle.manifest.scenario.space.clone() else {
            continue;
        };
        let Some(symptom) = bundle.ground_truth.symptoms.first() else {
            continue;
        };
        let verdict = symptom
            .label
            .as_ref()
            .map_or("unchecked", |l| l.verdict.as_str())
            .to_string();
        out.entry(bundle.manifest.scenario.name.clone())
            .or_insert(Side {
                verdict,
                lateness_us: symptom.lateness_ns / 1e3,
                axes: space.axes,
                backend: bundle.manifest.backend.clone(),
            });
    }
    Ok(out)
}

/// The profiler verdicts of a results directory's `scores.jsonl`.
pub fn profiler_verdicts(results_dir: &Path) -> Result<ProfilerVerdicts, EvalError> {
    let scores = crate::read_scores(&crate::scores_in(results_dir))?;
    Ok(scores
        .into_iter()
        .filter(|c| c.view == AGREEMENT_VIEW)
        .map(|c| ((c.scenario.clone(), c.profiler.clone()), c.all_correct()))
        .collect())
}

/// Compares the two backends' sides and profiler verdicts, scenario by scenario.
pub fn compare(
    a: &BTreeMap<String, Side>,
    b: &BTreeMap<String, Side>,
    verdicts_a: &ProfilerVerdicts,
    verdicts_b: &ProfilerVerdicts,
) -> Agreement {
    let backend_of = |sides: &BTreeMap<String, Side>| {
        sides
            .values()
            .next()
            .map(|s| s.backend.clone())
            .unwrap_or_default()
    };
    let mut agreement = Agreement {
        tallies: BTreeMap::new(),
        matched: 0,
        backends: (backend_of(a), backend_of(b)),
    };
    for (name, sa) in a {
        let Some(sb) = b.get(name) else { continue };
        agreement.matched += 1;
        let mut buckets = vec![("all".to_string(), "all".to_string())];
        buckets.extend(sa.axes.iter().map(|(axis, v)| {
            (
                axis.clone(),
                crate::bucket(axis, v).map_or_else(|| v.to_string(), |b| b.label),
            )
        }));
        for bucket in buckets {
            let t = agreement.tallies.entry(bucket).or_default();
            t.cases += 1;
            t.same_verdict += usize::from(sa.verdict == sb.verdict);
            if sa.lateness_us.abs() > LATENESS_FLOOR_US {
                t.lateness_ratios.push(sb.lateness_us / sa.lateness_us);
            }
            for ((scenario, profiler), ok_a) in verdicts_a.range((name.clone(), String::new())..) {
                if scenario != name {
                    break;
                }
                if let Some(ok_b) = verdicts_b.get(&(scenario.clone(), profiler.clone())) {
                    let e = t.profilers.entry(profiler.clone()).or_default();
                    e.0 += 1;
                    e.1 += usize::from(ok_a == ok_b);
                }
            }
        }
    }
    agreement
}

impl Agreement {
    /// The report, a Markdown table of every (axis, bucket).
    pub fn render(&self) -> String {
        let (backends, matched) = (&self.backends, self.matched);
        let profilers: BTreeSet<&String> = self
            .tallies
            .values()
            .flat_map(|t| t.profilers.keys())
            .collect();
        let mut s = format!(
            "# Agreement: {} against {}\n\n{matched} generated scenarios recorded on both. `label`: the \
             label check reached the same verdict (kept, relabelled none, dropped, indeterminate); `lateness`: median \
             of the symptom's lateness on {} over {}; per profiler: the same verdict (correct or wrong) \
             in the combined/instrumented view, over the cases both scored.\n\n| axis | bucket | cases | label | lateness |",
            backends.1, backends.0, backends.1, backends.0
        );
        for p in &profilers {
            s.push_str(&format!(" {p} |"));
        }
        s.push_str("\n|---|---|---|---|---|");
        for _ in &profilers {
            s.push_str("---|");
        }
        s.push('\n');
        for ((axis, bucket), t) in &self.tallies {
            let mut ratios = t.lateness_ratios.clone();
            ratios.sort_by(f64::total_cmp);
            let median = ratios
                .get(ratios.len() / 2)
                .map_or("—".to_string(), |m| format!("{m:.2}"));
            s.push_str(&format!(
                "| {axis} | {bucket} | {} | {:.2} | {median} |",
                t.cases,
                t.same_verdict as f64 / t.cases as f64
            ));
            for p in &profilers {
                match t.profilers.get(*p) {
                    Some(&(n, same)) if n > 0 => {
                        s.push_str(&format!(" {:.2} ({n}) |", same as f64 / n as f64))
                    }
                    _ => s.push_str(" — |"),
                }
            }
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(verdict: &str, lateness_us: f64, depth: f64, backend: &str) -> Side {
        Side {
            verdict: verdict.into(),
            lateness_us,
            axes: [("gating_depth".to_string(), AxisValue::Number(depth))].into(),
            backend: backend.into(),
        }
    }

    #[test]
    fn agreement_counts_same_verdicts_lateness_ratios_and_profiler_verdicts_per_bucket() {
        let a: BTreeMap<String, Side> = [
            ("s1".to_string(), side("kept", 100.0, 1.0, "sim")),
            ("s2".to_string(), side("kept", 50.0, 9.0, "sim")),
            ("only-a".to_string(), side("kept", 10.0, 1.0, "sim")),
        ]
        .into();
        let b: BTreeMap<String, Side> = [
            ("s1".to_string(), side("kept", 200.0, 1.0, "cuda")),
            ("s2".to_string(), side("dropped", 50.0, 9.0, "cuda")),
        ]
        .into();
        let key = |s: &str, p: &str| (s.to_string(), p.to_string());
        let va: ProfilerVerdicts = [(key("s1", "p"), true), (key("s2", "p"), true)].into();
        let vb: ProfilerVerdicts = [(key("s1", "p"), true), (key("s2", "p"), false)].into();
        let agreement = compare(&a, &b, &va, &vb);
        assert_eq!(agreement.matched, 2);
        assert_eq!(agreement.backends, ("sim".to_string(), "cuda".to_string()));
        let text = agreement.render();
        assert!(text.starts_with("# Agreement: cuda against sim"), "{text}");
        // Both scenarios: one label verdict of two the same, lateness ratios 2 and 1
        // (median the upper), the profiler's verdict the same once in two.
        assert!(
            text.contains("| all | all | 2 | 0.50 | 2.00 | 0.50 (2) |"),
            "{text}"
        );
        assert!(
            text.contains("| gating_depth | 1 | 1 | 1.00 | 2.00 | 1.00 (1) |"),
            "{text}"
        );
        assert!(
            text.contains("| gating_depth | 9+ | 1 | 0.00 | 1.00 | 0.00 (1) |"),
            "{text}"
        );
    }
}
