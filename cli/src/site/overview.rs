//! The pages above the cases: `index.html` (a ranked table, a plot and where each
//! profiler loses, per view), one page per family and one per question type.

use super::html::{esc, page, profiler, rate, rate_cell, slug};
use super::svg::{rate_bars, Bar};
use super::{view_name, Site, ViewKey};
use evaluator::{
    is_probe, part_rates, question_name, LeaderboardRow, Material, PartRates, Ranked, Shortfall,
    Tally, RANK_RULE,
};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Families, question types or phases named in one line of "where it loses".
const NAMED: usize = 3;

/// Higher is better; an undefined rate ranks last.
fn by_rate_desc(a: Option<f64>, b: Option<f64>) -> Ordering {
    match (a, b) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// The leaderboard rows of one view, probes left out, ranked by `evaluator::RANK_RULE`:
/// pair accuracy, then root-cause accuracy (top-1), then name; overlapping intervals
/// share a rank.
pub fn ranked(site: &Site, view: ViewKey) -> Vec<Ranked<'_>> {
    site.leaderboard.ranked_view(view.0, view.1)
}

fn shortfall<'a>(site: &'a Site, profiler: &str, view: ViewKey) -> Option<&'a Shortfall> {
    site.shortfalls
        .iter()
        .find(|s| s.profiler == profiler && (s.collectors, s.mode) == view)
}

/// `right/all` of a tally.
fn count(t: &Tally) -> String {
    format!("{}/{} right", t.correct, t.symptoms)
}

/// The groups of `tallies` with wrong answers, worst accuracy first.
fn worst(tallies: &[Tally]) -> Vec<&Tally> {
    let mut bad: Vec<&Tally> = tallies.iter().filter(|t| t.wrong() > 0).collect();
    bad.sort_by(|a, b| {
        by_rate_desc(b.accuracy(), a.accuracy())
            .then(b.wrong().cmp(&a.wrong()))
            .then(a.key.cmp(&b.key))
    });
    bad
}

/// The first [`NAMED`] tallies, each linked to its page in `dir`, with its count.
fn linked(tallies: &[&Tally], dir: &str, up: &str) -> Vec<String> {
    tallies
        .iter()
        .take(NAMED)
        .map(|t| {
            format!(
                "<a href=\"{up}{dir}/{}.html\">{}</a> ({})",
                slug(&t.key),
                esc(&t.key),
                count(t)
            )
        })
        .collect()
}

/// Where a profiler loses in a view, as HTML (links are from a page one directory
/// below the root when `depth` is 1, from the root when 0).
fn losses(site: &Site, profiler: &str, view: ViewKey, depth: usize) -> String {
    let Some(s) = shortfall(site, profiler, view) else {
        return "no loss-free case in this view".into();
    };
    let up = "../".repeat(depth);
    let mut parts = Vec::new();
    let families = worst(&s.by_family);
    if families.is_empty() {
        return "every loss-free symptom right".into();
    }
    let names = linked(&families, "family", &up);
    parts.push(format!("families: {}", names.join(", ")));
    let questions = linked(&worst(&s.by_question), "question", &up);
    if !questions.is_empty() {
        parts.push(format!("questions: {}", questions.join(", ")));
    }
    let phases: Vec<String> = s
        .overblamed
        .iter()
        .filter(|t| t.wrong() > 0)
        .take(NAMED)
        .map(|t| {
            let n = t.wrong();
            format!(
                "{} ({n} wrong answer{})",
                esc(&t.key),
                if n == 1 { "" } else { "s" }
            )
        })
        .collect();
    if !phases.is_empty() {
        parts.push(format!("blames beyond its share: {}", phases.join(", ")));
    }
    let worst_family = families.first().map(|t| t.key.as_str());
    if let Some(link) = wrong_case(site, profiler, view, worst_family) {
        let link = link
            .strip_prefix("../")
            .map_or(link.clone(), |l| format!("{up}{l}"));
        parts.push(format!(
            "e.g. <a class=\"drill\" href=\"{link}\">a case it gets wrong</a>"
        ));
    }
    parts.join("<br>")
}

/// The page of a shown case this profiler answers wrongly in this view (loss-free): in
/// its worst family of the view where one has a page, else in any.
fn wrong_case(
    site: &Site,
    profiler: &str,
    view: ViewKey,
    worst_family: Option<&str>,
) -> Option<String> {
    let wrong: Vec<&evaluator::CaseScore> = site
        .scores
        .iter()
        .filter(|c| c.profiler == profiler && (c.collectors, c.mode) == view && c.is_loss_free())
        .filter(|c| !c.symptoms.is_empty() && !c.all_correct())
        .collect();
    let linked = |c: &&evaluator::CaseScore| site.case_link(&c.bundle, &c.backend);
    wrong
        .iter()
        .filter(|c| Some(c.family.as_str()) == worst_family)
        .find_map(linked)
        .or_else(|| wrong.iter().find_map(linked))
}

/// The index page.
/// The mark beside a submitted entry's name: whether `check --rerun` ran its
/// command again and got the same explanations (docs/cli.md, "Submissions").
fn reproduced_mark(site: &Site, name: &str) -> String {
    match &site.entry {
        Some((entry, Some(r))) if entry == name && r.reproduced => format!(
            " <span class=\"reproduced\" title=\"check --rerun: {} explanations the same\">reproduced</span>",
            r.compared
        ),
        Some((entry, Some(r))) if entry == name => format!(
            " <span class=\"not-reproduced\" title=\"{}\">not reproduced</span>",
            esc(r.first_difference.as_deref().unwrap_or("explanations differ"))
        ),
        Some((entry, None)) if entry == name => {
            " <span class=\"unverified\">not re-run</span>".to_string()
        }
        _ => String::new(),
    }
}

/// The mark beside a row scored on public material (baselines/PROTOCOL.md, "Hidden
/// splits"): its scores can come from a lookup table as well as from analysis.
fn material_mark(row: &LeaderboardRow) -> String {
    match row.material {
        Material::Public => format!(
            " <span class=\"public\" title=\"scored on public material (the catalog, the dev \
             split, a corpus, or a split whose seed was given): a profiler can reproduce it \
             and look the answers up\">{}</span>",
            Material::Public.mark()
        ),
        Material::Hidden => String::new(),
    }
}

/// What the ranked rows were scored on, said once above the views.
fn material_note(site: &Site) -> String {
    let mark = Material::Public.mark();
    match site.leaderboard.headline_material() {
        Material::Hidden => format!(
            "<p class=\"material\">Ranked on the hidden split only: its seed was drawn by the \
             harness and never reachable by a profiler. Rows scored on public material are \
             listed beneath each view, marked <em>{mark}</em>, and not ranked.</p>"
        ),
        Material::Public => format!(
            "<p class=\"material\">Every row is marked <em>{mark}</em>: it was scored on public \
             material (the catalog, the dev split, a corpus, or a split whose seed was given), \
             which a profiler can reproduce and look up instead of analysing. Only scores on \
             a hidden split measure causal analysis (baselines/PROTOCOL.md, \"Hidden \
             splits\").</p>"
        ),
    }
}

pub fn index(site: &Site) -> String {
    let mut b = String::new();
    let backends: BTreeSet<&str> = site.scores.iter().map(|s| s.backend.as_str()).collect();
    let _ = write!(
        b,
        "<p>{} case scores over {} bundles ({}); {} cases have a page of their own. Ranked by \
         pair accuracy (every variant of a family instance right), then root-cause accuracy \
         (top-1); 95&nbsp;% cluster-bootstrap intervals beneath each rate \
         (evaluator/METRICS.md). Each view is ranked and plotted on its own: a view is what \
         a profiler was shown (collectors × mode), never pooled with another; the headline \
         view comes first.</p><p class=\"rank-rule\">{}</p>",
        site.scores.len(),
        site.cases.len(),
        esc(&backends.into_iter().collect::<Vec<_>>().join(", ")),
        site.shown.len(),
        esc(RANK_RULE)
    );
    b.push_str(&material_note(site));
    let _ = write!(b, "<p>Views: ");
    for view in site.views() {
        let name = view_name(view);
        let _ = write!(b, "<a href=\"#{}\">{}</a> ", slug(&name), esc(&name));
    }
    b.push_str("</p>");
    for view in site.views() {
        let name = view_name(view);
        let rows = ranked(site, view);
        let _ = write!(
            b,
            "<h2 id=\"{}\">View {}{}</h2>\n<table class=\"ranking\" data-view=\"{}\"><tr><th>rank</th>\
             <th>profiler</th><th>pair accuracy</th><th>root cause top-1</th><th>symptom accuracy</th>\
             <th>critical-path fidelity</th><th>cases</th><th>analyzer crashes</th><th>where it loses</th></tr>\n",
            slug(&name),
            esc(&name),
            if Some(view) == site.leaderboard.headline_view() {
                " (headline: the ranking of leaderboard.md)"
            } else {
                ""
            },
            esc(&name)
        );
        for Ranked { rank, row: r } in &rows {
            let ci = |m: &str| r.ci.get(m);
            let _ = writeln!(
                b,
                "<tr><td class=\"num rank\">{}</td><td class=\"profiler\">{}{}{}</td>{}{}{}{}<td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                rank,
                profiler(&site.palette, &r.profiler),
                reproduced_mark(site, &r.profiler),
                material_mark(r),
                rate_cell(r.pair_accuracy, ci("pair_accuracy")),
                rate_cell(r.root_cause_top1, ci("root_cause_top1")),
                rate_cell(r.symptom_accuracy, ci("symptom_accuracy")),
                rate_cell(r.critical_path_fidelity, ci("critical_path_fidelity")),
                r.cases,
                r.crashed,
                losses(site, &r.profiler, view, 0)
            );
        }
        b.push_str("</table>\n");
        let unranked: Vec<String> = site
            .leaderboard
            .rows
            .iter()
            .filter(|r| (r.collectors, r.mode) == view && !is_probe(&r.profiler))
            .filter(|r| r.material != site.leaderboard.headline_material())
            .map(|r| {
                format!(
                    "{} {}{}",
                    esc(&r.profiler),
                    rate(r.pair_accuracy),
                    material_mark(r)
                )
            })
            .collect();
        if !unranked.is_empty() {
            let _ = write!(
                b,
                "<p class=\"note unranked\">Not ranked, public material: {}</p>\n",
                unranked.join("; ")
            );
        }
        let bars: Vec<Bar> = rows
            .iter()
            .map(|r| Bar {
                profiler: &r.row.profiler,
                colour: site.palette.colour(&r.row.profiler),
                value: r.row.pair_accuracy,
                ci: r.row.ci.get("pair_accuracy"),
            })
            .collect();
        b.push_str(&rate_bars(&format!("Pair accuracy, view {name}"), &bars));
        let probes: Vec<&LeaderboardRow> = site
            .leaderboard
            .rows
            .iter()
            .filter(|r| (r.collectors, r.mode) == view && is_probe(&r.profiler))
            .collect();
        if !probes.is_empty() {
            b.push_str("<p class=\"note\">Leakage probes (the floor, docs/integrity.md): ");
            let named: Vec<String> = probes
                .iter()
                .map(|r| format!("{} {}", esc(&r.profiler), rate(r.pair_accuracy)))
                .collect();
            let _ = write!(b, "{}</p>", named.join(", "));
        }
    }
    for (id, title, dir, names) in [
        ("families", "Families", "family", families(site)),
        ("questions", "Question types", "question", questions(site)),
    ] {
        let _ = write!(b, "<h2 id=\"{id}\">{title}</h2><ul>");
        for name in names {
            let _ = write!(
                b,
                "<li><a href=\"{dir}/{}.html\">{}</a></li>",
                slug(&name),
                esc(&name)
            );
        }
        b.push_str("</ul>");
    }
    b.push_str("<h2 id=\"cases\">Cases with a page</h2><ul>");
    for id in &site.shown {
        let c = &site.cases[id];
        let _ = write!(
            b,
            "<li><a href=\"case/{}.html\">{}</a> ({}, {})</li>",
            c.page(),
            esc(&c.bundle),
            esc(&c.backend),
            esc(&c.family)
        );
    }
    b.push_str("</ul>");
    page("causalbench leaderboard", 0, &b)
}

fn families(site: &Site) -> BTreeSet<String> {
    site.scores.iter().map(|s| s.family.clone()).collect()
}

fn questions(site: &Site) -> BTreeSet<String> {
    site.scores
        .iter()
        .flat_map(|s| s.symptoms.iter().map(|y| question_name(y.question)))
        .collect()
}

/// Per view, a table of the ranked profilers, one column per header: the cells of a
/// profiler's row from `cells` (its leaderboard row, the view), as HTML cells.
fn per_view_tables(
    site: &Site,
    headers: &[&str],
    cells: impl Fn(&LeaderboardRow, ViewKey) -> Vec<String>,
) -> String {
    let mut b = String::new();
    for view in site.views() {
        let _ = write!(
            b,
            "<h2>View {}</h2><table><tr><th>profiler</th>",
            esc(&view_name(view))
        );
        for h in headers {
            let _ = write!(b, "<th>{}</th>", esc(h));
        }
        b.push_str("</tr>");
        for Ranked { row: r, .. } in ranked(site, view) {
            let _ = write!(
                b,
                "<tr><td>{}</td>{}</tr>",
                profiler(&site.palette, &r.profiler),
                cells(r, view).concat()
            );
        }
        b.push_str("</table>");
    }
    b
}

/// `right/all right` of a part's symptoms, as a cell.
fn right_cell(rates: Option<&PartRates>) -> String {
    format!(
        "<td class=\"num\">{}</td>",
        rates.map_or_else(
            || "n/a".into(),
            |p| format!("{}/{} right", p.correct, p.symptoms)
        )
    )
}

/// The note on a part's intervals.
const PART_NOTE: &str = "<p class=\"note\">Loss-free views. 95&nbsp;% cluster-bootstrap \
    intervals beneath each rate; the resampled unit is the family instance (a catalog family \
    is one, so its interval is a point), as in the leaderboard (evaluator/METRICS.md).</p>";

/// One page per family: per view, each profiler's pair and symptom accuracy on it with
/// their intervals, and the family's cases with each profiler's loss-free verdicts.
pub fn family_pages(site: &Site) -> Vec<(String, String)> {
    families(site)
        .into_iter()
        .map(|family| {
            let rates = part_rates(
                &site.scores,
                &format!("family {family}"),
                |c| c.family == family,
                |_| true,
            );
            let mut b = String::from(PART_NOTE);
            b.push_str(&per_view_tables(
                site,
                &["pair accuracy", "symptom accuracy", "symptoms right"],
                |r, view| {
                    let p = rates.get(&(r.profiler.clone(), view.0, view.1));
                    vec![
                        rate_cell(
                            p.and_then(|p| p.pair_accuracy),
                            p.and_then(|p| p.pair_accuracy_ci.as_ref()),
                        ),
                        rate_cell(
                            p.and_then(|p| p.symptom_accuracy),
                            p.and_then(|p| p.symptom_accuracy_ci.as_ref()),
                        ),
                        right_cell(p),
                    ]
                },
            ));
            b.push_str(&cases_table(site, |c| c.family == family));
            (slug(&family), page(&format!("Family {family}"), 1, &b))
        })
        .collect()
}

/// One page per question type: per view, each profiler's accuracy on it with its
/// interval.
pub fn question_pages(site: &Site) -> Vec<(String, String)> {
    questions(site)
        .into_iter()
        .map(|question| {
            let rates = part_rates(
                &site.scores,
                &format!("question {question}"),
                |_| true,
                |s| question_name(s.question) == question,
            );
            let mut b = String::from(PART_NOTE);
            b.push_str(&per_view_tables(
                site,
                &["accuracy", "symptoms right"],
                |r, view| {
                    let p = rates.get(&(r.profiler.clone(), view.0, view.1));
                    vec![
                        rate_cell(
                            p.and_then(|p| p.symptom_accuracy),
                            p.and_then(|p| p.symptom_accuracy_ci.as_ref()),
                        ),
                        right_cell(p),
                    ]
                },
            ));
            let asks = |c: &evaluator::CaseScore| {
                c.symptoms
                    .iter()
                    .any(|s| question_name(s.question) == question)
            };
            b.push_str(&cases_table(site, asks));
            (
                slug(&question),
                page(&format!("Question type {question}"), 1, &b),
            )
        })
        .collect()
}

/// The bundles whose case scores pass `keep`: per profiler, loss-free views answered
/// right out of those asked, linked to the case's page where it has one.
fn cases_table(site: &Site, keep: impl Fn(&evaluator::CaseScore) -> bool) -> String {
    /// Per profiler: loss-free views right, views asked.
    type Row<'a> = BTreeMap<&'a str, (u32, u32)>;
    // (bundle, backend) → profiler → (right, asked)
    let mut cells: BTreeMap<(&str, &str), Row> = BTreeMap::new();
    let mut profilers: BTreeSet<&str> = BTreeSet::new();
    for c in site
        .scores
        .iter()
        .filter(|c| c.is_loss_free() && !c.symptoms.is_empty() && keep(c))
    {
        profilers.insert(&c.profiler);
        let cell = cells
            .entry((&c.bundle, &c.backend))
            .or_default()
            .entry(&c.profiler)
            .or_default();
        cell.0 += u32::from(c.all_correct());
        cell.1 += 1;
    }
    let profilers: Vec<&str> = profilers.into_iter().filter(|p| !is_probe(p)).collect();
    let mut b = String::from(
        "<h2>Cases</h2><p class=\"note\">Loss-free views a profiler answered right, out of \
         those it was asked in.</p><table><tr><th>bundle</th><th>backend</th>",
    );
    for p in &profilers {
        let _ = write!(b, "<th>{}</th>", profiler(&site.palette, p));
    }
    b.push_str("</tr>");
    for ((bundle, backend), row) in &cells {
        let name = match site.case_link(bundle, backend) {
            Some(link) => format!("<a href=\"{link}\">{}</a>", esc(bundle)),
            None => esc(bundle),
        };
        let _ = write!(b, "<tr><td>{name}</td><td>{}</td>", esc(backend));
        for p in &profilers {
            let text = row
                .get(p)
                .map_or_else(|| "—".into(), |(right, asked)| format!("{right}/{asked}"));
            let _ = write!(b, "<td class=\"num\">{text}</td>");
        }
        b.push_str("</tr>");
    }
    b.push_str("</table>");
    b
}
