//! Kineto's completeness (docs/torch-track.md, "Completeness"): what each recorded
//! bundle's Kineto trace held of its truth, as a corpus keeps it (`completeness.json`,
//! one [`RunCompleteness`] per bundle), and the per-family section of `leaderboard.md`
//! that sums it, so a reader sees whether a wrong answer came from the collector or the
//! analyzer.

use super::truth::Completeness;
use std::collections::BTreeMap;
use std::path::Path;

/// The file of a corpus directory holding every bundle's [`RunCompleteness`].
pub const COMPLETENESS_FILE: &str = "completeness.json";

/// The heading of the completeness section in `leaderboard.md`.
pub const COMPLETENESS_HEADING: &str = "\n## Kineto's completeness (PyTorch track)\n";

/// What one bundle's recording saw of Kineto's completeness, for the
/// corpus's `completeness.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunCompleteness {
    pub scenario: String,
    pub family: String,
    pub repetition: u32,
    pub counts: Completeness,
}

/// The runs of every corpus's [`COMPLETENESS_FILE`], in the corpora's order; a corpus
/// without one adds none. The error names the file that cannot be read or parsed.
pub fn read_runs(corpora: &[&Path]) -> Result<Vec<RunCompleteness>, String> {
    let mut runs: Vec<RunCompleteness> = Vec::new();
    for dir in corpora {
        let file = dir.join(COMPLETENESS_FILE);
        if !file.is_file() {
            continue;
        }
        let bytes = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let more: Vec<RunCompleteness> =
            ground_truth::io::from_json(&file, &bytes).map_err(|e| e.to_string())?;
        runs.extend(more);
    }
    Ok(runs)
}

/// The completeness section of the `corpora` (its heading, then [`table`]); `None`
/// when no corpus has a [`COMPLETENESS_FILE`].
pub fn section(corpora: &[&Path]) -> Result<Option<String>, String> {
    let runs = read_runs(corpora)?;
    if runs.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!("{COMPLETENESS_HEADING}\n{}", table(&runs))))
}

/// `leaderboard` (the text of `leaderboard.md`) with `section` in place of its
/// completeness section and whatever followed it, or after it where it has none.
pub fn with_section(leaderboard: &str, section: &str) -> String {
    let kept = leaderboard
        .find(COMPLETENESS_HEADING)
        .map_or(leaderboard, |at| &leaderboard[..at]);
    format!("{kept}{section}")
}

/// `seen/total (linked)` cells per family: device ops, cross-stream event edges,
/// graph-node kernels, other-thread ops.
pub fn table(runs: &[RunCompleteness]) -> String {
    let mut by_family: BTreeMap<&str, (usize, Completeness)> = BTreeMap::new();
    for r in runs {
        let (n, c) = by_family.entry(r.family.as_str()).or_default();
        *n += 1;
        let k = &r.counts;
        c.device_ops += k.device_ops;
        c.device_ops_seen += k.device_ops_seen;
        c.device_ops_linked += k.device_ops_linked;
        c.event_edges += k.event_edges;
        c.event_edges_seen += k.event_edges_seen;
        c.event_edges_linked += k.event_edges_linked;
        c.graph_kernels += k.graph_kernels;
        c.graph_kernels_seen += k.graph_kernels_seen;
        c.graph_kernels_linked += k.graph_kernels_linked;
        c.other_thread_ops += k.other_thread_ops;
        c.other_thread_ops_seen += k.other_thread_ops_seen;
        c.other_thread_ops_linked += k.other_thread_ops_linked;
    }
    let cell = |total: u64, seen: u64, linked: u64| -> String {
        if total == 0 {
            "—".into()
        } else {
            format!(
                "{:.3} / {:.3} ({seen}/{total}, {linked} linked)",
                seen as f64 / total as f64,
                linked as f64 / total as f64
            )
        }
    };
    let mut s = String::from(
        "Share of the truth in Kineto's trace at all / with correct links (seen/total): \
         device ops with their launch call, cross-stream event edges whose wait names the \
         record's call, graph-node kernels with their graph launch, and calls made on \
         another thread than the request's first with their device work \
         (docs/torch-track.md, \"Completeness\").\n\n\
         | family | runs | device ops | event edges | graph-node kernels | other-thread ops |\n\
         | --- | ---: | --- | --- | --- | --- |\n",
    );
    for (family, (n, c)) in by_family {
        s.push_str(&format!(
            "| {family} | {n} | {} | {} | {} | {} |\n",
            cell(c.device_ops, c.device_ops_seen, c.device_ops_linked),
            cell(c.event_edges, c.event_edges_seen, c.event_edges_linked),
            cell(
                c.graph_kernels,
                c.graph_kernels_seen,
                c.graph_kernels_linked
            ),
            cell(
                c.other_thread_ops,
                c.other_thread_ops_seen,
                c.other_thread_ops_linked
            ),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(family: &str, device_ops: u64, seen: u64) -> RunCompleteness {
        RunCompleteness {
            scenario: format!("{family}-a"),
            family: family.into(),
            repetition: 0,
            counts: Completeness {
                device_ops,
                device_ops_seen: seen,
                device_ops_linked: seen,
                ..Completeness::default()
            },
        }
    }

    #[test]
    fn the_table_sums_each_family_and_the_section_replaces_an_older_one() {
        let t = table(&[run("b", 4, 2), run("a", 2, 2), run("b", 4, 4)]);
        let rows: Vec<&str> = t
            .lines()
            .filter(|l| l.starts_with("| a |") || l.starts_with("| b |"))
            .collect();
        assert_eq!(
            rows,
            [
                "| a | 1 | 1.000 / 1.000 (2/2, 2 linked) | — | — | — |",
                "| b | 2 | 0.750 / 0.750 (6/8, 6 linked) | — | — | — |"
            ]
        );
        let new = format!("{COMPLETENESS_HEADING}\nnew\n");
        let once = with_section("# Leaderboard\n", &new);
        assert_eq!(once, format!("# Leaderboard\n{new}"));
        let old = format!("# Leaderboard\n{COMPLETENESS_HEADING}\nold\n\n## Later\n");
        assert_eq!(with_section(&old, &new), once);
    }
}
