//! Files: `scores.jsonl` (read and write), `leaderboard.{md,csv,json}` (write).
//! Every write is atomic (`ground_truth::io::write_atomic`); every read returns a
//! [`FormatError`] naming the file and line instead of panicking.

use crate::axes::AxisRow;
use crate::bootstrap::Interval;
use crate::buckets::HEADLINE_AXIS;
use crate::leaderboard::{
    csv_header, is_probe, Leaderboard, LeaderboardRow, Material, CI_METRICS, CSV_COLUMNS,
};

/// What the rows were scored on, as `leaderboard.md` says it under its title
/// (baselines/PROTOCOL.md, "Hidden splits").
fn material_note(rows: &[&LeaderboardRow]) -> String {
    let public = rows
        .iter()
        .filter(|r| r.material == Material::Public)
        .count();
    let mark = Material::Public.mark();
    if public == 0 {
        "Every row was scored on a hidden split: its seed was drawn by the harness and \
         never reachable by a profiler (baselines/PROTOCOL.md, \"Hidden splits\").\n"
            .to_string()
    } else if public == rows.len() {
        format!(
            "Every row is marked *{mark}*: it was scored on public material (the catalog, \
             the dev split, a corpus, or a split whose seed was given), which a profiler \
             can reproduce and look up instead of analysing. Only a hidden split's scores \
             measure causal analysis (baselines/PROTOCOL.md, \"Hidden splits\").\n"
        )
    } else {
        format!(
            "Rows marked *{mark}* were scored on public material (the catalog, the dev \
             split, a corpus, or a split whose seed was given); the others, and the \
             ranking, on a hidden split only (baselines/PROTOCOL.md, \"Hidden splits\").\n"
        )
    }
}
use crate::score::CaseScore;
use crate::EvalError;
use ground_truth::io::{parser_message, read_input, write_atomic, InputLimits};
use ground_truth::{Collectors, FormatError, Mode};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// File names inside a results directory.
pub const SCORES_FILE: &str = "scores.jsonl";

/// The case scores of a results directory: `scores.jsonl`, or its gzip-compressed
/// `scores.jsonl.gz` (how large committed result sets are stored) when only that exists.
pub fn scores_in(dir: &Path) -> PathBuf {
    let plain = dir.join(SCORES_FILE);
    let packed = dir.join(format!("{SCORES_FILE}.gz"));
    if !plain.exists() && packed.is_file() {
        packed
    } else {
        plain
    }
}
pub const LEADERBOARD_MD: &str = "leaderboard.md";
pub const LEADERBOARD_CSV: &str = "leaderboard.csv";
pub const LEADERBOARD_JSON: &str = "leaderboard.json";
pub const AXES_CSV: &str = "axes.csv";

/// Columns of `axes.csv`, in order.
pub const AXES_COLUMNS: &[&str] = &[
    "profiler",
    "collectors",
    "mode",
    "axis",
    "bucket",
    "instances",
    "cases",
    "pairs",
    "pair_accuracy",
    "pair_accuracy_ci_low",
    "pair_accuracy_ci_high",
    "symptoms",
    "root_cause_top1",
    "root_cause_top1_ci_low",
    "root_cause_top1_ci_high",
];

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> EvalError + '_ {
    move |source| EvalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `scores.jsonl` text: one compact JSON object per line, each line ending in `\n`.
pub fn scores_to_jsonl(scores: &[CaseScore]) -> String {
    let mut out = String::new();
    for s in scores {
        out.push_str(&serde_json::to_string(s).expect("case scores serialize"));
        out.push('\n');
    }
    out
}

/// Writes `scores.jsonl` atomically.
pub fn write_scores(path: &Path, scores: &[CaseScore]) -> Result<(), EvalError> {
    write_atomic(path, scores_to_jsonl(scores).as_bytes()).map_err(io_err(path))
}

/// Reads `scores.jsonl` within the readers' input limits
/// (`ground_truth::io::InputLimits`). Blank lines are skipped; the first bad
/// line is reported as `FILE:line N, column C: at PATH: message`.
pub fn read_scores(path: &Path) -> Result<Vec<CaseScore>, FormatError> {
    let bytes = read_input(path, "case scores", &InputLimits::DEFAULT)?;
    parse_scores(path, &bytes)
}

/// Parses `scores.jsonl` bytes as if they came from `file`: exactly one case
/// score per line.
pub fn parse_scores(file: &Path, bytes: &[u8]) -> Result<Vec<CaseScore>, FormatError> {
    let mut out = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let lineno = i + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let error = |path: String, inner: serde_json::Error| FormatError {
            file: file.to_path_buf(),
            path,
            line: Some(format!("line {lineno}, column {}", inner.column())),
            message: format!(
                "expected one case score (a JSON object) per line: {}",
                parser_message(&inner.to_string())
            ),
        };
        let de = &mut serde_json::Deserializer::from_slice(line);
        let score: CaseScore = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
            let p = ground_truth::io::bounded_echo(e.path().to_string());
            let path = if p == "." {
                String::new()
            } else {
                format!(".{p}")
            };
            error(path, e.into_inner())
        })?;
        // A second value on the line is an error, not a score dropped unread.
        de.end().map_err(|e| error(String::new(), e))?;
        out.push(score);
    }
    Ok(out)
}

fn fixed(x: Option<f64>, decimals: usize, none: &str) -> String {
    match x {
        Some(v) if v.is_finite() => {
            let s = format!("{v:.decimals$}");
            // Never print "-0.000".
            if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
                s[1..].to_string()
            } else {
                s
            }
        }
        _ => none.to_string(),
    }
}

fn row_cells(r: &LeaderboardRow, decimals: usize, none: &str) -> Vec<String> {
    let f = |x: Option<f64>| fixed(x, decimals, none);
    vec![
        r.profiler.clone(),
        r.collectors.as_str().to_string(),
        r.mode.as_str().to_string(),
        r.cases.to_string(),
        f(r.pair_accuracy),
        f(r.root_cause_top1),
        f(r.root_cause_top3),
        f(r.edge_precision),
        f(r.edge_recall),
        f(r.edge_f1),
        r.false_causal_edges.to_string(),
        f(r.request_correct),
        f(r.request_wrong),
        f(r.request_abstained),
        f(r.critical_path_fidelity),
        f(r.unresolved_recall),
        f(r.false_confidence_rate),
        f(r.brier),
        f(r.analysis_ms),
        r.pairs.to_string(),
        r.symptoms.to_string(),
        f(r.symptom_accuracy),
        f(r.phase_blame_error),
        r.lossy_cases.to_string(),
        r.unresolved_symptoms.to_string(),
    ]
}

/// The `*_ci_low`, `*_ci_high` cells of a row, in [`CI_METRICS`] order.
fn ci_cells(r: &LeaderboardRow, decimals: usize, none: &str) -> Vec<String> {
    CI_METRICS
        .iter()
        .flat_map(|m| {
            let i = r.ci.get(*m);
            [
                fixed(i.map(|i| i.low), decimals, none),
                fixed(i.map(|i| i.high), decimals, none),
            ]
        })
        .collect()
}

/// `value [low, high]` for the markdown tables (3 decimals).
fn with_ci(value: Option<f64>, ci: Option<&Interval>) -> String {
    let v = fixed(value, 3, "n/a");
    match (value, ci) {
        (Some(_), Some(i)) => format!(
            "{v} [{}, {}]",
            fixed(Some(i.low), 3, ""),
            fixed(Some(i.high), 3, "")
        ),
        _ => v,
    }
}

/// `accuracy [low, high] (pairs)` for the headline and per-axis tables.
fn pairs_cell(accuracy: Option<f64>, ci: Option<Interval>, pairs: u64) -> String {
    format!("{} ({pairs})", with_ci(accuracy, ci.as_ref()))
}

/// A pair-unit count or score sum: an integer when whole, else up to 2 decimals.
fn count(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x}")
    } else {
        format!("{:.2}", x).trim_end_matches('0').to_string()
    }
}

fn axis_cells(r: &AxisRow) -> Vec<String> {
    let f = |x: Option<f64>| fixed(x, 6, "");
    vec![
        r.profiler.clone(),
        r.collectors.as_str().to_string(),
        r.mode.as_str().to_string(),
        r.axis.clone(),
        r.bucket.clone(),
        r.instances.to_string(),
        r.cases.to_string(),
        r.pairs.to_string(),
        f(r.pair_accuracy),
        f(r.pair_accuracy_ci.map(|i| i.low)),
        f(r.pair_accuracy_ci.map(|i| i.high)),
        r.symptoms.to_string(),
        f(r.root_cause_top1),
        f(r.root_cause_top1_ci.map(|i| i.low)),
        f(r.root_cause_top1_ci.map(|i| i.high)),
    ]
}

fn csv_text<I: IntoIterator<Item = Vec<String>>>(header: &[String], rows: I) -> String {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    w.write_record(header).expect("writing to memory");
    for r in rows {
        w.write_record(r).expect("writing to memory");
    }
    String::from_utf8(w.into_inner().expect("writing to memory")).expect("CSV of UTF-8 strings")
}

impl Leaderboard {
    /// `leaderboard.csv`: header [`csv_header`], one row per profiler × collectors ×
    /// mode; numbers with 6 decimals; undefined values as empty cells.
    pub fn to_csv(&self) -> String {
        csv_text(
            &csv_header(),
            self.rows.iter().map(|r| {
                let mut cells = row_cells(r, 6, "");
                cells.extend(ci_cells(r, 6, ""));
                cells
            }),
        )
    }

    /// `axes.csv`: header [`AXES_COLUMNS`], one row per profiler × collectors × mode ×
    /// axis × bucket (generated cases only; only the header without them).
    pub fn to_axes_csv(&self) -> String {
        let header: Vec<String> = AXES_COLUMNS.iter().map(|c| c.to_string()).collect();
        csv_text(&header, self.axes.iter().map(axis_cells))
    }

    /// `leaderboard.json`, pretty-printed, ending in a newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("leaderboard serializes");
        s.push('\n');
        s
    }

    /// `leaderboard.md`: the leaderboard table and the per-family pair-accuracy table.
    pub fn to_markdown(&self) -> String {
        let mut md = String::new();
        // Probes are the floor, not contestants: they have their own appendix.
        let mut ranked: Vec<&LeaderboardRow> = self
            .rows
            .iter()
            .filter(|r| !is_probe(&r.profiler))
            .collect();
        let cases: u64 = ranked.iter().map(|r| r.cases + r.lossy_cases).sum();
        // Rows in ranking order (each profiler's rank in the headline view), then view.
        let order: Vec<String> = self
            .ranked_profilers()
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        ranked.sort_by_key(|r| order.iter().position(|p| *p == r.profiler));
        let _ = writeln!(md, "# causalbench leaderboard\n");
        let _ = writeln!(
            md,
            "{} profiler × collectors × mode rows from {} scored cases. Accuracy columns use loss-free \
             views; `unresolved_recall`, `false_confidence_rate` and `brier` pool every view. \
             Definitions: `evaluator/METRICS.md`. `n/a`: undefined (nothing to measure).\n",
            ranked.len(),
            cases
        );
        let _ = writeln!(md, "{}", material_note(&ranked));
        let _ = writeln!(md, "## Ranking\n\n{}", self.ranking_markdown());
        let _ = writeln!(
            md,
            "## Every view\n\nProfilers in ranking order, each with all of its views.\n"
        );
        let cols = &CSV_COLUMNS[..19];
        let _ = writeln!(md, "| {} |", cols.join(" | "));
        let _ = writeln!(
            md,
            "|{}|",
            cols.iter()
                .enumerate()
                .map(|(i, _)| if i < 3 { " --- " } else { " ---: " })
                .collect::<Vec<_>>()
                .join("|")
        );
        for r in &ranked {
            let mut cells = row_cells(r, 3, "n/a");
            if r.material == Material::Public {
                cells[0] = format!("{} *({})*", r.profiler, r.material.mark());
            }
            for (i, col) in cols.iter().enumerate() {
                if CI_METRICS.contains(col) {
                    cells[i] = with_ci(Leaderboard::metric(r, col), r.ci.get(*col));
                }
            }
            let _ = writeln!(md, "| {} |", cells[..19].join(" | "));
        }
        let _ = writeln!(
            md,
            "\n`[low, high]`: 95 % cluster-bootstrap interval; the resampled unit is the family \
             instance (a catalog family counts as one), so repetitions and variants of one \
             structure are not independent evidence. A wide interval means few independent \
             pairs, not a noisy profiler. Pair units per row: {}.",
            ranked
                .iter()
                .map(|r| r.pairs)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );

        let probes: Vec<String> = self
            .profilers()
            .into_iter()
            .filter(|p| is_probe(p))
            .collect();
        let profilers = order;
        self.headline_markdown(&mut md, &profilers);
        let _ = writeln!(md, "\n## Pair accuracy by family\n");
        let _ = writeln!(
            md,
            "Mean over pair units (family instance × backend × view, its repetitions averaged) of \
             the share of repetitions in which every variant was diagnosed correctly; all \
             collectors and modes pooled. Cells: accuracy (score sum/pair units).\n"
        );
        self.families_markdown(&mut md, &profilers);
        self.axes_markdown(&mut md, &profilers);
        self.backends_markdown(&mut md, &profilers);
        self.versions_markdown(&mut md);
        self.crashes_markdown(&mut md);
        if !probes.is_empty() {
            self.probes_markdown(&mut md, &probes);
        }
        md
    }

    /// The analyzers' crashes, each message with its count: a crash is an outcome of its
    /// own, not an abstention (evaluator/METRICS.md, "Crashes").
    fn crashes_markdown(&self, md: &mut String) {
        if self.crashes.is_empty() {
            return;
        }
        let _ = writeln!(md, "\n## Analyzer crashes\n");
        let _ = writeln!(
            md,
            "Cases (all views) on which an analyzer raised instead of answering. They are \
             scored as answering nothing (every rate above counts them) and listed here with \
             the analyzer's own message.\n"
        );
        let _ = writeln!(
            md,
            "| profiler | collectors | mode | cases | families | message |"
        );
        let _ = writeln!(md, "| --- | --- | --- | ---: | --- | --- |");
        for c in &self.crashes {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | `{}` |",
                c.profiler,
                c.collectors.as_str(),
                c.mode.as_str(),
                c.cases,
                c.families.join(", "),
                c.message.replace('|', "\\|").replace('`', "'")
            );
        }
    }

    /// The appendix: the leakage probes' pair accuracy, the floor a profiler has to beat.
    fn probes_markdown(&self, md: &mut String, probes: &[String]) {
        let _ = writeln!(
            md,
            "\n## Appendix — floor: probes that use no causal reasoning\n"
        );
        let _ = writeln!(
            md,
            "Each probe answers from one kind of surface evidence only (names, record kinds, \
             structure) and abstains on everything else (`docs/integrity.md`). A profiler's pair \
             accuracy means something only well above theirs. Pooled: every family, collectors \
             and mode.\n"
        );
        let _ = writeln!(md, "| probe | pairs correct | pairs | pair_accuracy |");
        let _ = writeln!(md, "| --- | ---: | ---: | ---: |");
        for p in probes {
            let (pairs, correct) = self.pooled_pairs(p);
            let accuracy = (pairs > 0).then(|| correct / pairs as f64);
            let _ = writeln!(
                md,
                "| {p} | {} | {pairs} | {} |",
                count(correct),
                fixed(accuracy, 3, "n/a")
            );
        }
        let _ = writeln!(md);
        self.families_markdown(md, probes);
    }

    /// Pair accuracy per family (rows) and profiler (columns), collectors and modes pooled.
    fn families_markdown(&self, md: &mut String, profilers: &[String]) {
        let mut fams: BTreeMap<&str, BTreeMap<&str, String>> = BTreeMap::new();
        for f in &self.families_pooled {
            fams.entry(&f.family).or_default().insert(
                &f.profiler,
                format!(
                    "{} ({}/{})",
                    fixed(f.pair_accuracy, 3, "n/a"),
                    count(f.pairs_correct),
                    f.pairs
                ),
            );
        }
        if fams.is_empty() {
            let _ = writeln!(
                md,
                "No pair groups (a family needs two variants scored on the same view)."
            );
        } else {
            let _ = writeln!(md, "| family | {} |", profilers.join(" | "));
            let _ = writeln!(md, "| --- |{}", " ---: |".repeat(profilers.len()));
            for (fam, cells) in &fams {
                let row: Vec<String> = profilers
                    .iter()
                    .map(|p| {
                        cells
                            .get(p.as_str())
                            .cloned()
                            .unwrap_or_else(|| "n/a".into())
                    })
                    .collect();
                let _ = writeln!(md, "| {} | {} |", fam, row.join(" | "));
            }
        }
    }

    /// The version column: pair accuracy per CUPTI version of CUPTI-fed rows,
    /// when the scored recordings mix CUPTI versions.
    fn versions_markdown(&self, md: &mut String) {
        if self.versions.is_empty() {
            return;
        }
        let _ = writeln!(md, "\n## By CUPTI version\n");
        let _ = writeln!(
            md,
            "Pair accuracy of the rows that read CUPTI records, per CUPTI version the GPU bundles \
             were recorded with (docs/cupti-versions.md); the rows above pool versions.\n"
        );
        let _ = writeln!(
            md,
            "| profiler | collectors | mode | CUPTI | pairs | pair_accuracy |"
        );
        let _ = writeln!(md, "| --- | --- | --- | --- | ---: | ---: |");
        for r in self
            .versions
            .iter()
            .filter(|r| r.collectors != Collectors::Host && !r.cupti.is_empty())
        {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                r.profiler,
                r.collectors.as_str(),
                r.mode.as_str(),
                r.cupti,
                r.pairs,
                fixed(r.pair_accuracy, 3, "n/a")
            );
        }
    }

    /// Per-backend pair accuracy (combined collectors, instrumented) and the
    /// sim-to-real agreement, when more than one backend was scored.
    fn backends_markdown(&self, md: &mut String, profilers: &[String]) {
        let backends: std::collections::BTreeSet<&str> =
            self.backends.iter().map(|b| b.backend.as_str()).collect();
        if backends.len() < 2 {
            return;
        }
        let _ = writeln!(md, "\n## By backend (combined collectors, instrumented)\n");
        let _ = writeln!(
            md,
            "Pair accuracy per backend; the rows above pool backends.\n"
        );
        let names: Vec<&str> = backends.iter().copied().collect();
        let _ = writeln!(md, "| profiler | {} |", names.join(" | "));
        let _ = writeln!(md, "| --- |{}", " ---: |".repeat(names.len()));
        for p in profilers {
            let cells: Vec<String> = names
                .iter()
                .map(|b| {
                    self.backends
                        .iter()
                        .find(|r| {
                            r.backend == *b
                                && r.profiler == *p
                                && r.collectors == Collectors::Combined
                                && r.mode == Mode::Instrumented
                        })
                        .map(|r| {
                            format!("{} ({} pairs)", fixed(r.pair_accuracy, 3, "n/a"), r.pairs)
                        })
                        .unwrap_or_else(|| "n/a".into())
                })
                .collect();
            let _ = writeln!(md, "| {} | {} |", p, cells.join(" | "));
        }
        if !self.sim_to_real.is_empty() {
            let _ = writeln!(md, "\n## Sim-to-real agreement\n");
            let _ = writeln!(
                md,
                "Share of family × collectors × mode groups in which the simulator and the GPU give the \
                 same verdict (pair accuracy ≥ 0.5 or not) for the profiler.\n"
            );
            let _ = writeln!(
                md,
                "| profiler | groups | agreeing | agreement |\n| --- | ---: | ---: | ---: |"
            );
            for r in self.sim_to_real.iter().filter(|r| !is_probe(&r.profiler)) {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} |",
                    r.profiler,
                    r.groups,
                    r.agreeing,
                    fixed(r.agreement, 3, "n/a")
                );
            }
        }
    }

    /// The acceptance headline: pair accuracy at magnitude ratio ≥ 0.3 and below it,
    /// per backend (combined collectors, instrumented).
    fn headline_markdown(&self, md: &mut String, profilers: &[String]) {
        let _ = writeln!(
            md,
            "\n## Headline: pair accuracy by injection magnitude (combined collectors, instrumented)\n"
        );
        if self.headline.is_empty() {
            let _ = writeln!(
                md,
                "No generated cases with a `{HEADLINE_AXIS}` axis in this result set (catalog \
                 scenarios carry no axes)."
            );
            return;
        }
        let _ = writeln!(
            md,
            "Generated pairs whose injected magnitude is at least 0.3 × the symptom's normal \
             latency, and, shown beside them, the pairs below (`mixed`: variants on both sides). \
             Cells: pair accuracy [95 % interval] (pair units).\n"
        );
        let classes: std::collections::BTreeSet<&str> = self
            .headline
            .iter()
            .map(|h| h.magnitude_ratio.as_str())
            .collect();
        // `>=0.3` first: it is the headline; the curve below it follows.
        let mut classes: Vec<&str> = classes.into_iter().collect();
        classes.sort_by_key(|c| (*c != ">=0.3", *c == "mixed", c.to_string()));
        let _ = writeln!(
            md,
            "| profiler | backend | {} |",
            classes
                .iter()
                .map(|c| format!("magnitude_ratio {c}"))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let _ = writeln!(md, "| --- | --- |{}", " ---: |".repeat(classes.len()));
        let backends: std::collections::BTreeSet<&str> =
            self.headline.iter().map(|h| h.backend.as_str()).collect();
        for p in profilers {
            for b in &backends {
                let cells: Vec<String> = classes
                    .iter()
                    .map(|c| {
                        self.headline
                            .iter()
                            .find(|h| {
                                &h.profiler == p && h.backend == *b && h.magnitude_ratio == *c
                            })
                            .map(|h| pairs_cell(h.pair_accuracy, h.pair_accuracy_ci, h.pairs))
                            .unwrap_or_else(|| "n/a".into())
                    })
                    .collect();
                if cells.iter().any(|c| c != "n/a") {
                    let _ = writeln!(md, "| {p} | {b} | {} |", cells.join(" | "));
                }
            }
        }
    }

    /// Per axis, pair accuracy per bucket (rows) and profiler (columns), combined
    /// collectors, instrumented; `axes.csv` has every view.
    fn axes_markdown(&self, md: &mut String, profilers: &[String]) {
        let _ = writeln!(
            md,
            "\n## Where each profiler breaks: per-axis breakdown (combined collectors, instrumented)\n"
        );
        let rows: Vec<&AxisRow> = self
            .axes
            .iter()
            .filter(|r| r.collectors == Collectors::Combined && r.mode == Mode::Instrumented)
            .collect();
        if rows.is_empty() {
            let _ = writeln!(
                md,
                "No generated cases in this result set (catalog scenarios carry no axes)."
            );
            return;
        }
        let _ = writeln!(
            md,
            "Generated cases only, by the bucket of one sampled axis at a time (bins: \
             `evaluator/METRICS.md`). Cells: pair accuracy [95 % interval] (pair units); \
             `axes.csv` has every view and the top-1 rate.\n"
        );
        let mut axes: BTreeMap<&str, Vec<&AxisRow>> = BTreeMap::new();
        for r in rows {
            axes.entry(r.axis.as_str()).or_default().push(r);
        }
        for (axis, rows) in axes {
            let _ = writeln!(md, "### {axis}\n");
            let _ = writeln!(md, "| bucket | {} |", profilers.join(" | "));
            let _ = writeln!(md, "| --- |{}", " ---: |".repeat(profilers.len()));
            // Rows arrive in bucket order (`evaluator/src/axes.rs` sorts them so).
            let mut buckets: Vec<&str> = Vec::new();
            for r in &rows {
                if !buckets.contains(&r.bucket.as_str()) {
                    buckets.push(&r.bucket);
                }
            }
            for b in buckets {
                let cells: Vec<String> = profilers
                    .iter()
                    .map(|p| {
                        rows.iter()
                            .find(|r| &r.profiler == p && r.bucket == b)
                            .map(|r| pairs_cell(r.pair_accuracy, r.pair_accuracy_ci, r.pairs))
                            .unwrap_or_else(|| "n/a".into())
                    })
                    .collect();
                let _ = writeln!(md, "| {b} | {} |", cells.join(" | "));
            }
            let _ = writeln!(md);
        }
    }

    /// Writes `leaderboard.md`, `leaderboard.csv`, `leaderboard.json` and `axes.csv` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), EvalError> {
        for (name, text) in [
            (LEADERBOARD_MD, self.to_markdown()),
            (LEADERBOARD_CSV, self.to_csv()),
            (LEADERBOARD_JSON, self.to_json()),
            (AXES_CSV, self.to_axes_csv()),
        ] {
            let p = dir.join(name);
            write_atomic(&p, text.as_bytes()).map_err(io_err(&p))?;
        }
        Ok(())
    }
}
