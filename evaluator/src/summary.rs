//! The ranking table: the head of `leaderboard.md` and, alone, the summary `run` prints.
//! Narrow on purpose (the headline view, the key columns: it fits an 80-column
//! terminal for ordinary profiler names); every view and column stays in
//! `leaderboard.md`, `leaderboard.csv` and the HTML site.

use crate::leaderboard::Leaderboard;
use crate::ranking::RANK_RULE;
use std::fmt::Write as _;
use std::path::Path;

/// The terminal width the summary is written for.
const WIDTH: usize = 80;

/// `text` broken into lines of at most `width` characters, at spaces (a longer word
/// keeps its own line).
fn wrap(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines.join("\n")
}

/// `0.917` or `n/a`.
fn rate(x: Option<f64>) -> String {
    x.map_or_else(|| "n/a".into(), |v| format!("{v:.3}"))
}

/// Markdown table with every column padded to its widest cell, so that it reads as a
/// table in a terminal too. `right[i]`: column i is numeric (right-aligned).
fn aligned(header: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([header[i].chars().count(), 3])
            .max()
            .unwrap_or(3)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .zip(right)
            .map(|((c, &w), &r)| {
                if r {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    let rule: Vec<String> = widths
        .iter()
        .zip(right)
        .map(|(&w, &r)| {
            if r {
                format!("{}:", "-".repeat(w - 1))
            } else {
                "-".repeat(w)
            }
        })
        .collect();
    out.push_str(&line(rule));
    for r in rows {
        out.push_str(&line(r.clone()));
    }
    out
}

impl Leaderboard {
    /// The ranking section: the headline view's rows in rank order, with the rule.
    pub fn ranking_markdown(&self) -> String {
        let mut md = String::new();
        let Some((collectors, mode)) = self.headline_view() else {
            let _ = writeln!(md, "No profiler rows to rank.");
            return md;
        };
        let material = match self.headline_material() {
            crate::Material::Hidden => "scored on the hidden split only (rows of public \
                                        material are not ranked)"
                .to_string(),
            crate::Material::Public => format!(
                "scored on public material ({}: a profiler can have memorized it)",
                crate::Material::Public.mark()
            ),
        };
        let intro = format!(
            "Headline view: {}/{} (collectors/mode), {material}. {RANK_RULE}",
            collectors.as_str(),
            mode.as_str()
        );
        let _ = writeln!(md, "{}\n", wrap(&intro, WIDTH));
        let rows: Vec<Vec<String>> = self
            .ranked_view(collectors, mode)
            .iter()
            .map(|r| {
                let row = r.row;
                let pair = match (row.pair_accuracy, row.ci.get("pair_accuracy")) {
                    (Some(v), Some(i)) => format!("{v:.3} [{:.3}, {:.3}]", i.low, i.high),
                    (v, _) => rate(v),
                };
                vec![
                    r.rank.to_string(),
                    row.profiler.clone(),
                    pair,
                    rate(row.root_cause_top1),
                    row.cases.to_string(),
                    row.crashed.to_string(),
                ]
            })
            .collect();
        md.push_str(&aligned(
            &[
                "rank",
                "profiler",
                "pair accuracy [95 %]",
                "top-1",
                "cases",
                "crashed",
            ],
            &[true, false, true, true, true, true],
            &rows,
        ));
        let unranked: Vec<String> = self
            .ranked_profilers()
            .into_iter()
            .filter(|(rank, _)| rank.is_none())
            .map(|(_, p)| p)
            .collect();
        if !unranked.is_empty() {
            let _ = writeln!(
                md,
                "\n{}",
                wrap(
                    &format!(
                        "Not in the headline view (other views only): {}.",
                        unranked.join(", ")
                    ),
                    WIDTH
                )
            );
        }
        md
    }

    /// What `run` prints at the end: the ranking, and where the full tables are.
    pub fn summary(&self, results: &Path) -> String {
        format!(
            "## Ranking\n\n{}\n{}",
            self.ranking_markdown(),
            wrap(
                &format!(
                    "Every view and column: {} (also leaderboard.csv, html/index.html).",
                    results.join(crate::LEADERBOARD_MD).display()
                ),
                WIDTH
            )
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_the_narrow_ranking_and_leaderboard_md_orders_rows_by_it() {
        use crate::ranking::tests::row;
        use ground_truth::{Collectors, Mode};
        let mut lb = Leaderboard::default();
        for (name, value, ci) in [
            ("zeta", 0.9, (0.8, 1.0)),
            ("alpha", 0.0, (0.0, 0.1)),
            ("beta", 0.0, (0.0, 0.1)),
        ] {
            lb.rows.push(row(name, Some(value), Some(ci)));
            let mut closed = row(name, Some(value), Some(ci));
            closed.mode = Mode::Closed;
            lb.rows.push(closed);
        }
        let mut host_only = row("host-only", Some(1.0), None);
        host_only.collectors = Collectors::Host;
        lb.rows.push(host_only);
        let summary = lb.summary(Path::new("out"));
        assert!(
            summary.lines().all(|l| l.chars().count() <= WIDTH),
            "{summary}"
        );
        let ranks: Vec<&str> = summary
            .lines()
            .filter(|l| l.starts_with("|  "))
            .map(|l| l.split('|').nth(2).unwrap().trim())
            .collect();
        assert_eq!(ranks, ["zeta", "alpha", "beta"], "{summary}");
        assert!(summary.contains("|    2 | alpha"), "{summary}");
        assert!(summary.contains("|    2 | beta"), "{summary}");
        assert!(summary.contains("share a rank"), "{summary}");
        assert!(summary.contains("host-only"), "{summary}");
        assert!(!summary.contains("edge_precision"), "{summary}");
        // leaderboard.md: the same ranking first, then every view in ranking order.
        let md = lb.to_markdown();
        let every = &md[md.find("## Every view").unwrap()..];
        let order: Vec<&str> = every
            .lines()
            .filter_map(|l| l.strip_prefix("| "))
            .map(|l| l.split(" |").next().unwrap())
            // Every row here is of public material, and marked so.
            .filter_map(|p| p.strip_suffix(" *(public — memorizable)*"))
            .filter(|p| ["zeta", "alpha", "beta", "host-only"].contains(p))
            .collect();
        assert_eq!(
            order,
            [
                "zeta",
                "zeta",
                "alpha",
                "alpha",
                "beta",
                "beta",
                "host-only"
            ]
        );
        assert!(md.find("## Ranking").unwrap() < md.find("## Every view").unwrap());
    }

    #[test]
    fn wrap_breaks_at_spaces_within_the_width() {
        assert_eq!(wrap("aa bb cc dd", 5), "aa bb\ncc dd");
        assert_eq!(wrap("a longword b", 4), "a\nlongword\nb");
    }

    #[test]
    fn aligned_pads_every_column_to_its_widest_cell() {
        let t = aligned(
            &["rank", "profiler"],
            &[true, false],
            &[vec!["1".into(), "causal-graph".into()]],
        );
        assert_eq!(
            t,
            "| rank | profiler     |\n| ---: | ------------ |\n|    1 | causal-graph |\n"
        );
    }
}
