//! The static HTML leaderboard (`causalbench report --html DIR`, and `OUT/html/` after
//! every `run`): pages that open from disk, offline, with nothing fetched. A report
//! stage: it reads the result set's formats (`scores.jsonl` and the leaderboard built
//! from it, `manifest.json`, and for the cases it shows their bundle, views and
//! explanations) and never a profiler's internals. What each page shows: docs/cli.md
//! ("The HTML leaderboard").
//!
//! - `index.html`: a ranked table and a plot per view (collectors × mode), and per
//!   profiler where it loses (`evaluator::shortfalls`);
//! - `family/NAME.html`, `question/NAME.html`: the same per family and per question type;
//! - `case/KEY.html`: one case, with its Perfetto traces beside it (`case/KEY.*.perfetto-trace`):
//!   the cases each profiler gets wrong (chosen by failure, across families), and the first
//!   scenarios of each family.

mod case;
mod html;
mod overview;
mod svg;

use crate::Failure;
use evaluator::{is_probe, CaseScore, Leaderboard, Shortfall};
use ground_truth::{Collectors, Mode};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Cases given a page of their own (with their traces) per family and backend: the
/// first repetition of the first scenarios by name. Bounds the site's size.
const CASES_PER_FAMILY: usize = 3;
/// Cases each profiler gets wrong given a page, each from another of its worst families.
const WRONG_PER_PROFILER: usize = 3;
/// Cases given a page of their own over the whole site.
const MAX_CASES: usize = 90;

/// A view as the leaderboard ranks it: collectors × mode (losses pooled as in its rows).
pub type ViewKey = (Collectors, Mode);

/// `collectors/mode`, as the pages name a view.
pub fn view_name(view: ViewKey) -> String {
    format!("{}/{}", view.0.as_str(), view.1.as_str())
}

/// One bundle of the result set, as scored.
#[derive(Debug, Clone)]
pub struct CaseRef {
    pub bundle: String,
    pub backend: String,
    pub family: String,
    pub scenario: String,
    pub variant: String,
    pub repetition: u32,
    /// The run's key of the bundle (`cases/KEY.jsonl`), when the result set has it.
    pub key: Option<String>,
}

impl CaseRef {
    /// The case page's file name stem.
    pub fn page(&self) -> String {
        html::slug(&format!("{}-{}", self.backend, self.bundle))
    }
}

/// What the pages are made from.
pub struct Site {
    pub results: PathBuf,
    pub scores: Vec<CaseScore>,
    pub leaderboard: Leaderboard,
    pub shortfalls: Vec<Shortfall>,
    /// Every scored bundle, by (bundle, backend).
    pub cases: BTreeMap<(String, String), CaseRef>,
    /// The cases with a page, by (bundle, backend).
    pub shown: BTreeSet<(String, String)>,
    /// One colour per profiler, every pair far enough apart to tell apart
    /// (`evaluator::palette::Palette`).
    pub palette: evaluator::palette::Palette,
    /// For a submission folder (`causalbench submit`): the entry's name, and what
    /// `check --rerun` found when it ran the command again (none before that).
    pub entry: Option<(String, Option<ground_truth::submission::Reproduction>)>,
}

impl Site {
    /// The views of the leaderboard: the headline view (the one profilers are ranked
    /// by, `Leaderboard::headline_view`) first, then collectors × mode order.
    pub fn views(&self) -> Vec<ViewKey> {
        let headline = self.leaderboard.headline_view();
        let mut views: Vec<ViewKey> = self
            .leaderboard
            .rows
            .iter()
            .map(|r| (r.collectors, r.mode))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        views.sort_by_key(|v| Some(*v) != headline);
        views
    }

    /// The link to a case's page from a page one directory below the root, if it has one.
    pub fn case_link(&self, bundle: &str, backend: &str) -> Option<String> {
        let id = (bundle.to_string(), backend.to_string());
        self.shown
            .contains(&id)
            .then(|| format!("../case/{}.html", self.cases[&id].page()))
    }
}

/// The entry of a submission folder and its reproduction, if `results` is one.
fn submission_entry(
    results: &Path,
) -> Result<Option<(String, Option<ground_truth::submission::Reproduction>)>, Failure> {
    use ground_truth::io::Readable;
    use ground_truth::submission::{Submission, METADATA_FILE};
    let meta = results.join(METADATA_FILE);
    if !meta.is_file() {
        return Ok(None);
    }
    let entry = Submission::read(&meta).map_err(|e| Failure::input(e.to_string()))?;
    // Only a reproduction of the explanations the entry holds is shown.
    let reproduction = crate::reproduction::reproduction_of(results)?;
    Ok(Some((entry.name, reproduction)))
}

/// What [`write`] produced.
pub struct Written {
    pub pages: usize,
    pub traces: usize,
    /// Bytes of the trace files written.
    pub trace_bytes: u64,
}

/// Writes the site for the result set in `results` into `out`; `leaderboard` is the
/// one `report`/`run` just built from the result set's `scores.jsonl`.
pub fn write(results: &Path, out: &Path, leaderboard: &Leaderboard) -> Result<Written, Failure> {
    let mut scores = evaluator::read_scores(&evaluator::scores_in(results))?;
    let mut leaderboard = leaderboard.clone();
    // A submitted entry's page ranks it among the built-in profilers on its own bundles.
    if let Some(builtin) = crate::submit_beside::builtin_scores(results)? {
        scores.extend(builtin);
        leaderboard = Leaderboard::from_scores(&scores);
    }
    let shortfalls = evaluator::shortfalls(&scores);
    let keys = case_keys(results)?;
    let mut cases: BTreeMap<(String, String), CaseRef> = BTreeMap::new();
    for s in &scores {
        let id = (s.bundle.clone(), s.backend.clone());
        cases.entry(id.clone()).or_insert_with(|| CaseRef {
            bundle: s.bundle.clone(),
            backend: s.backend.clone(),
            family: s.family.clone(),
            scenario: s.scenario.clone(),
            variant: s.variant.clone(),
            repetition: s.repetition,
            key: keys.get(&id).cloned(),
        });
    }
    let shown = choose_shown(&cases, &wrong_cases(&scores));
    let entry = submission_entry(results)?;
    let palette =
        evaluator::palette::Palette::for_profilers(scores.iter().map(|s| s.profiler.as_str()));
    let site = Site {
        palette,
        results: results.to_path_buf(),
        scores,
        leaderboard,
        shortfalls,
        cases,
        shown,
        entry,
    };
    for dir in ["family", "question", "case"] {
        let d = out.join(dir);
        std::fs::create_dir_all(&d)
            .map_err(|e| Failure::failed(format!("cannot create {}: {e}", d.display())))?;
    }
    let mut written = Written {
        pages: 0,
        traces: 0,
        trace_bytes: 0,
    };
    let mut put = |path: PathBuf, text: String| -> Result<(), Failure> {
        ground_truth::io::write_atomic(&path, text.as_bytes())
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))?;
        written.pages += 1;
        Ok(())
    };
    put(out.join("index.html"), overview::index(&site))?;
    for (name, page) in overview::family_pages(&site) {
        put(out.join("family").join(format!("{name}.html")), page)?;
    }
    for (name, page) in overview::question_pages(&site) {
        put(out.join("question").join(format!("{name}.html")), page)?;
    }
    let mut traces = Vec::new();
    for id in &site.shown {
        let case = &site.cases[id];
        let page = case::page(&site, case, &out.join("case"), &mut traces)?;
        put(out.join("case").join(format!("{}.html", case.page())), page)?;
    }
    written.traces = traces.len();
    written.trace_bytes = traces.iter().sum();
    Ok(written)
}

/// The run's key of each scored bundle: `cases/KEY.jsonl` holds the scores of one
/// bundle, so its first line names the bundle and backend.
fn case_keys(results: &Path) -> Result<BTreeMap<(String, String), String>, Failure> {
    let mut keys = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(results.join("cases")) else {
        return Ok(keys);
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(key) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".jsonl"))
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Failure::failed(format!("cannot read {}: {e}", path.display())))?;
        let Some(first) = text.lines().next() else {
            continue;
        };
        let score: CaseScore = serde_json::from_str(first)
            .map_err(|e| Failure::input(format!("{}: line 1: {e}", path.display())))?;
        keys.insert((score.bundle, score.backend), key.to_string());
    }
    Ok(keys)
}

/// Per profiler (probes apart), the cases it gets wrong, chosen by failure across
/// families ([`worst_by_family`], at most [`WRONG_PER_PROFILER`]); then, for each view
/// in which none of those is wrong, that view's worst case, so that every view's row
/// can link a case it gets wrong.
fn wrong_cases(scores: &[CaseScore]) -> BTreeMap<String, Vec<(String, String)>> {
    let mut by_profiler: BTreeMap<&str, Vec<&CaseScore>> = BTreeMap::new();
    for c in scores.iter().filter(|c| {
        c.is_loss_free() && !c.symptoms.is_empty() && !c.all_correct() && !is_probe(&c.profiler)
    }) {
        by_profiler.entry(&c.profiler).or_default().push(c);
    }
    by_profiler
        .into_iter()
        .map(|(profiler, wrong)| {
            let mut chosen = worst_by_family(&wrong, WRONG_PER_PROFILER);
            let views: BTreeSet<ViewKey> = wrong.iter().map(|c| (c.collectors, c.mode)).collect();
            for view in views {
                let in_view: Vec<&CaseScore> = wrong
                    .iter()
                    .copied()
                    .filter(|c| (c.collectors, c.mode) == view)
                    .collect();
                let shown = in_view
                    .iter()
                    .any(|c| chosen.contains(&(c.bundle.clone(), c.backend.clone())));
                if !shown {
                    chosen.extend(worst_by_family(&in_view, 1));
                }
            }
            (profiler.to_string(), chosen)
        })
        .collect()
}

/// Of the wrongly answered case scores `wrong`: the families by scores (most first), and
/// from each the case (bundle, backend) with the most; ties by name; `n` at most.
fn worst_by_family(wrong: &[&CaseScore], n: usize) -> Vec<(String, String)> {
    // family → case → wrong views.
    let mut families: BTreeMap<&str, BTreeMap<(&str, &str), u32>> = BTreeMap::new();
    for c in wrong {
        *families
            .entry(&c.family)
            .or_default()
            .entry((&c.bundle, &c.backend))
            .or_default() += 1;
    }
    let mut worst: Vec<(u32, (&str, &str))> = families
        .values()
        .filter_map(|cases| {
            let total = cases.values().sum::<u32>();
            let (case, _) = cases
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))?;
            Some((total, *case))
        })
        .collect();
    worst.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    worst
        .into_iter()
        .take(n)
        .map(|(_, (bundle, backend))| (bundle.to_string(), backend.to_string()))
        .collect()
}

/// The cases that get a page, at most [`MAX_CASES`], taken in rounds: each profiler's
/// worst wrong case ([`wrong_cases`]), then per family and backend the first repetition
/// of the first scenario by name; then each profiler's further wrong cases, then each
/// family's next scenarios, up to [`CASES_PER_FAMILY`].
fn choose_shown(
    cases: &BTreeMap<(String, String), CaseRef>,
    wrong: &BTreeMap<String, Vec<(String, String)>>,
) -> BTreeSet<(String, String)> {
    let mut by_family: BTreeMap<(&str, &str), BTreeMap<&str, &CaseRef>> = BTreeMap::new();
    for c in cases.values() {
        let scenarios = by_family
            .entry((c.family.as_str(), c.backend.as_str()))
            .or_default();
        let first = scenarios.entry(c.scenario.as_str()).or_insert(c);
        if c.repetition < first.repetition {
            *first = c;
        }
    }
    let wrong_round = |round: usize| -> Vec<(String, String)> {
        wrong
            .values()
            .filter_map(|w| w.get(round).cloned())
            .collect()
    };
    let family_round = |round: usize| -> Vec<(String, String)> {
        by_family
            .values()
            .filter_map(|scenarios| scenarios.values().nth(round))
            .map(|c| (c.bundle.clone(), c.backend.clone()))
            .collect()
    };
    // Round-robin over profilers and families, so that the cap leaves every profiler
    // a case it gets wrong and every family a case; then the further wrong cases, then
    // the further scenarios.
    let most_wrong = wrong.values().map(Vec::len).max().unwrap_or(0);
    let order = wrong_round(0)
        .into_iter()
        .chain(family_round(0))
        .chain((1..most_wrong).flat_map(wrong_round))
        .chain((1..CASES_PER_FAMILY).flat_map(family_round));
    let mut shown = BTreeSet::new();
    for id in order {
        if shown.len() < MAX_CASES && cases.contains_key(&id) {
            shown.insert(id);
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(family: &str, scenario: &str, repetition: u32) -> CaseRef {
        CaseRef {
            bundle: format!("{scenario}.r{repetition}"),
            backend: "sim".into(),
            family: family.into(),
            scenario: scenario.into(),
            variant: "v".into(),
            repetition,
            key: None,
        }
    }

    #[test]
    fn shown_cases_are_first_repetitions_bounded_per_family_and_in_all() {
        let mut cases = BTreeMap::new();
        for family in 0..40 {
            for scenario in 0..5 {
                for repetition in [2, 0, 1] {
                    let c = case(
                        &format!("f{family:02}"),
                        &format!("f{family:02}.s{scenario}"),
                        repetition,
                    );
                    cases.insert((c.bundle.clone(), c.backend.clone()), c);
                }
            }
        }
        let shown = choose_shown(&cases, &BTreeMap::new());
        assert_eq!(shown.len(), MAX_CASES);
        assert!(
            shown.iter().all(|(bundle, _)| bundle.ends_with(".r0")),
            "{shown:?}"
        );
        // Round-robin: every family keeps a case under the cap, none more than its share.
        let mut per_family: BTreeMap<&str, usize> = BTreeMap::new();
        for id in &shown {
            *per_family.entry(cases[id].family.as_str()).or_default() += 1;
        }
        assert_eq!(per_family.len(), 40);
        assert!(per_family
            .values()
            .all(|&n| (1..=CASES_PER_FAMILY).contains(&n)));
    }

    #[test]
    fn each_profilers_wrong_cases_get_pages_first_under_the_cap() {
        let mut cases = BTreeMap::new();
        for family in 0..60 {
            for scenario in 0..3 {
                let c = case(
                    &format!("f{family:02}"),
                    &format!("f{family:02}.s{scenario}"),
                    0,
                );
                cases.insert((c.bundle.clone(), c.backend.clone()), c);
            }
        }
        // Late families' last scenarios: not among the first cases per family, but
        // before the families' second and third.
        let id = |f: usize| (format!("f{f:02}.s2.r0"), "sim".to_string());
        let wrong: BTreeMap<String, Vec<(String, String)>> = [
            ("p".to_string(), vec![id(59), id(58), id(57)]),
            ("q".to_string(), vec![id(56)]),
        ]
        .into_iter()
        .collect();
        let shown = choose_shown(&cases, &wrong);
        assert_eq!(shown.len(), MAX_CASES);
        for f in [59, 58, 57, 56] {
            assert!(shown.contains(&id(f)), "f{f}: {shown:?}");
        }
    }

    #[test]
    fn names_become_safe_file_names_and_text_safe_html() {
        assert_eq!(html::slug("sim-a.b_c.r0"), "sim-a.b_c.r0");
        assert_eq!(html::slug("../x/y"), "_.._x_y");
        assert_eq!(html::slug(""), "_");
        assert_eq!(
            html::esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
