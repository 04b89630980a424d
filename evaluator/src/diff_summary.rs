//! The one-screen summary of a [`Diff`]: verdict flips per profiler × family,
//! metrics that moved beyond their interval, and for each flip what differs in
//! the records it was scored on. The full tables go to a details file.

use crate::diff::{bundle_key, CaseKey, Diff};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Rows of each summary table shown; the rest is in the details.
pub const SUMMARY_ROWS: usize = 12;

/// Flips of one profiler × family.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlipGroup {
    pub regressions: u64,
    pub fixes: u64,
    /// Scored on one side only.
    pub other: u64,
    /// How often each record difference is behind this group's flips.
    pub causes: BTreeMap<String, u64>,
    /// Flips whose bundles are at hand and whose records do not differ.
    pub unexplained: u64,
}

impl Diff {
    /// Flips grouped by (profiler, family).
    pub fn flip_groups(&self) -> BTreeMap<(String, String), FlipGroup> {
        let mut groups: BTreeMap<(String, String), FlipGroup> = BTreeMap::new();
        for v in &self.verdicts {
            let g = groups
                .entry((v.case.profiler.clone(), v.family.clone()))
                .or_default();
            if v.is_regression() {
                g.regressions += 1;
            } else if v.is_fix() {
                g.fixes += 1;
            } else {
                g.other += 1;
            }
            match self.causes.get(&bundle_key(&v.case)) {
                Some(c) if c.is_empty() => g.unexplained += 1,
                Some(c) => {
                    for change in c {
                        *g.causes.entry(change.key()).or_default() += 1;
                    }
                }
                None => {}
            }
        }
        groups
    }

    /// ` (N changes within their interval or of analysis time hidden; --all lists
    /// them)` when [`Diff::hide_noise`] left some out, else nothing.
    pub fn hidden_note(&self) -> String {
        if self.hidden_metrics == 0 {
            String::new()
        } else {
            format!(
                " ({} more within their 95 % interval or of analysis time, hidden; `diff --all` lists them)",
                self.hidden_metrics
            )
        }
    }

    /// The profilers whose version or command changed, as a table (nothing when none).
    pub fn profilers_markdown(&self, md: &mut String) {
        let changed = self.changed_profilers();
        if changed.is_empty() {
            return;
        }
        let list = |v: &[String]| {
            if v.is_empty() {
                "absent".to_string()
            } else {
                v.join(", ")
            }
        };
        let command = |c: &Option<String>| {
            c.as_ref()
                .map_or("-".to_string(), |c| format!("`{}`", c.replace('|', "\\|")))
        };
        let _ = writeln!(md, "## Profilers that changed\n");
        let _ = writeln!(
            md,
            "A changed version or command explains what follows before the records do.\n"
        );
        let _ = writeln!(
            md,
            "| profiler | A version | B version | A command | B command |"
        );
        let _ = writeln!(md, "| --- | --- | --- | --- | --- |");
        for p in changed {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                p.profiler,
                list(&p.before_versions),
                list(&p.after_versions),
                command(&p.before_command),
                command(&p.after_command)
            );
        }
        md.push('\n');
    }

    /// What differs in the records of a case's bundle, at most `n` differences.
    pub fn cause_text(&self, case: &CaseKey, n: usize) -> String {
        match self.causes.get(&bundle_key(case)) {
            None => "bundles not at hand".into(),
            Some(c) if c.is_empty() => "no record kind or field differs".into(),
            Some(c) => {
                let mut shown: Vec<String> = c.iter().take(n).map(|x| x.to_string()).collect();
                if c.len() > n {
                    shown.push(format!("{} more", c.len() - n));
                }
                shown.join("; ")
            }
        }
    }

    /// The summary, Markdown that fits a screen; `details` names the file
    /// holding [`Diff::to_markdown`].
    pub fn summary_markdown(&self, details: Option<&str>) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# causalbench diff: {} → {}\n", self.a, self.b);
        let beyond: Vec<_> = self.metrics.iter().filter(|m| m.beyond_interval).collect();
        let _ = writeln!(
            md,
            "{} cases compared: {} verdicts correct→wrong, {} wrong→correct, {} scored on one side; \
             {} leaderboard metrics moved, {} beyond their 95 % interval{}; {} cases only in A, {} only in B.\n",
            self.cases_compared,
            self.regressions(),
            self.fixes(),
            self.verdicts.len() - self.regressions() - self.fixes(),
            self.metrics.len(),
            beyond.len(),
            self.hidden_note(),
            self.only_in_a.len(),
            self.only_in_b.len()
        );
        if self.is_empty() {
            let _ = writeln!(md, "No differences.");
            return md;
        }
        self.profilers_markdown(&mut md);
        let groups = self.flip_groups();
        if !groups.is_empty() {
            let mut rows: Vec<_> = groups.iter().collect();
            rows.sort_by_key(|(k, g)| {
                (
                    std::cmp::Reverse(g.regressions + g.fixes + g.other),
                    (*k).clone(),
                )
            });
            let _ = writeln!(md, "## Verdict flips by profiler × family\n");
            let _ = writeln!(
                md,
                "| profiler | family | correct→wrong | wrong→correct | what differs in the records (flips) |"
            );
            let _ = writeln!(md, "| --- | --- | ---: | ---: | --- |");
            for ((profiler, family), g) in rows.iter().take(SUMMARY_ROWS) {
                let mut causes: Vec<_> = g.causes.iter().collect();
                causes.sort_by_key(|(c, n)| (std::cmp::Reverse(**n), (*c).clone()));
                let mut text: Vec<String> = causes
                    .iter()
                    .take(2)
                    .map(|(c, n)| format!("{c} ({n})"))
                    .collect();
                if g.unexplained > 0 {
                    text.push(format!("none ({})", g.unexplained));
                }
                if text.is_empty() {
                    text.push("bundles not at hand".into());
                }
                let _ = writeln!(
                    md,
                    "| {profiler} | {family} | {} | {} | {} |",
                    g.regressions,
                    g.fixes,
                    text.join("; ")
                );
            }
            if rows.len() > SUMMARY_ROWS {
                let _ = writeln!(
                    md,
                    "\n{} more groups in the details.",
                    rows.len() - SUMMARY_ROWS
                );
            }
            md.push('\n');
        }
        if !beyond.is_empty() {
            let num = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{v:.3}"));
            let _ = writeln!(md, "## Metrics beyond their interval\n");
            let _ = writeln!(md, "| profiler | collectors | mode | metric | A | B |");
            let _ = writeln!(md, "| --- | --- | --- | --- | ---: | ---: |");
            let mut shown = beyond.clone();
            shown.sort_by(|x, y| {
                let d = |m: &crate::MetricChange| m.delta.map_or(0.0, f64::abs);
                d(y).total_cmp(&d(x))
            });
            for m in shown.iter().take(SUMMARY_ROWS) {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} |",
                    m.profiler,
                    m.collectors.as_str(),
                    m.mode.as_str(),
                    m.metric,
                    num(m.before),
                    num(m.after)
                );
            }
            md.push('\n');
        }
        if let Some(path) = details {
            let _ = writeln!(
                md,
                "Every flip, with what differs in its bundle's records, and every moved metric: {path}"
            );
        }
        md
    }
}
