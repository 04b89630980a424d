//! The static HTML leaderboard as a person sees it, loaded in headless Chromium: the
//! ranking is in leaderboard order, a drill-down link on the index leads to its case's
//! page (paths, `why-late`, a Perfetto trace), and no link or source is broken. Skipped
//! with a message when Chromium is not installed, unless CAUSALBENCH_REQUIRE_CHROMIUM=1 (CI).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Chromium's binary on PATH (Debian: `chromium`), if any.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// The DOM of `page` after Chromium loaded it from disk.
fn dump_dom(browser: &Path, page: &Path, profile: &Path) -> String {
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let o = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dom = String::from_utf8(o.stdout).unwrap();
    assert!(dom.contains("<h1>"), "{url} did not load: {dom}");
    dom
}

/// Every `href="…"` and `src="…"` of a page, unescaped.
fn links(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in ["href=\"", "src=\""] {
        let mut rest = html;
        while let Some(i) = rest.find(attr) {
            rest = &rest[i + attr.len()..];
            let end = rest.find('"').unwrap();
            out.push(rest[..end].replace("&amp;", "&"));
            rest = &rest[end..];
        }
    }
    out
}

/// Rows of the ranking table of `view` (`collectors/mode`), profiler names in order.
fn ranking(dom: &str, view: &str) -> Vec<String> {
    let start = dom
        .find(&format!("data-view=\"{view}\""))
        .unwrap_or_else(|| panic!("no ranking of view {view}"));
    let table = &dom[start..start + dom[start..].find("</table>").unwrap()];
    table
        .split("<td class=\"profiler\">")
        .skip(1)
        .map(|cell| {
            let cell = &cell[..cell.find("</td>").unwrap()];
            // Marks (public material, reproduced) follow the name, after a space.
            let cell = cell.split(" <span").next().unwrap();
            // The swatch is an empty span; the name follows it.
            cell[cell.rfind('>').unwrap() + 1..].to_string()
        })
        .collect()
}

/// Per row of the ranking table of `view`: the profiler and its "a case it gets wrong"
/// link, if any.
fn drill_links(dom: &str, view: &str) -> Vec<(String, Option<String>)> {
    let start = dom.find(&format!("data-view=\"{view}\"")).unwrap();
    let table = &dom[start..start + dom[start..].find("</table>").unwrap()];
    let names = ranking(dom, view);
    table
        .split("<td class=\"profiler\">")
        .skip(1)
        .zip(names)
        .map(|(row, name)| {
            let row = &row[..row.find("</tr>").unwrap_or(row.len())];
            let link = row
                .split("class=\"drill\" href=\"")
                .nth(1)
                .map(|rest| rest[..rest.find('"').unwrap()].replace("&amp;", "&"));
            (name, link)
        })
        .collect()
}

/// The rank cells of the ranking table of `view`, in order.
fn ranks(dom: &str, view: &str) -> Vec<usize> {
    let start = dom.find(&format!("data-view=\"{view}\"")).unwrap();
    let table = &dom[start..start + dom[start..].find("</table>").unwrap()];
    table
        .split("<td class=\"num rank\">")
        .skip(1)
        .map(|cell| cell[..cell.find("</td>").unwrap()].parse().unwrap())
        .collect()
}

/// The ranks the index must show for rows in `expected_ranking`'s order: profilers whose
/// pair-accuracy intervals overlap, directly or through a chain, share a rank (one more
/// than the number of profilers above them); undefined last. Written out here on its own
/// so that the test does not trust `evaluator::rank_rows`.
fn expected_ranks(
    leaderboard: &serde_json::Value,
    ordered: &[String],
    view: (&str, &str),
) -> Vec<usize> {
    let row = |p: &str| {
        leaderboard["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["profiler"] == p && r["collectors"] == view.0 && r["mode"] == view.1)
            .unwrap()
            .clone()
    };
    let span = |r: &serde_json::Value| {
        let v = r["pair_accuracy"].as_f64()?;
        let ci = &r["ci"]["pair_accuracy"];
        Some(match (ci["low"].as_f64(), ci["high"].as_f64()) {
            (Some(l), Some(h)) => (l.min(v), h.max(v)),
            _ => (v, v),
        })
    };
    let spans: Vec<Option<(f64, f64)>> = ordered.iter().map(|p| span(&row(p))).collect();
    // Two rows are in one group when a chain of overlapping intervals joins them.
    let n = spans.len();
    let mut group: Vec<usize> = (0..n).collect();
    let find = |g: &Vec<usize>, mut i: usize| {
        while g[i] != i {
            i = g[i];
        }
        i
    };
    for i in 0..n {
        for j in 0..n {
            let joined = match (spans[i], spans[j]) {
                (Some(a), Some(b)) => a.0 <= b.1 && b.0 <= a.1,
                (None, None) => true,
                _ => false,
            };
            if joined {
                let (a, b) = (find(&group, i), find(&group, j));
                group[a.max(b)] = a.min(b);
            }
        }
    }
    (0..n)
        .map(|i| {
            1 + (0..n)
                .filter(|&j| find(&group, j) != find(&group, i) && j < i)
                .count()
        })
        .collect()
}

/// The order the index must show: pair accuracy, then root-cause accuracy, then name
/// (higher first, undefined last), probes apart.
fn expected_ranking(leaderboard: &serde_json::Value, collectors: &str, mode: &str) -> Vec<String> {
    let key = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NEG_INFINITY);
    let mut rows: Vec<&serde_json::Value> = leaderboard["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["collectors"] == collectors && r["mode"] == mode)
        .filter(|r| !r["profiler"].as_str().unwrap().starts_with("probe-"))
        .collect();
    rows.sort_by(|a, b| {
        key(&b["pair_accuracy"])
            .total_cmp(&key(&a["pair_accuracy"]))
            .then(key(&b["root_cause_top1"]).total_cmp(&key(&a["root_cause_top1"])))
            .then(a["profiler"].as_str().cmp(&b["profiler"].as_str()))
    });
    rows.iter()
        .map(|r| r["profiler"].as_str().unwrap().to_string())
        .collect()
}

/// Every link of `page` resolves: a file for a path, an element id for a fragment.
fn assert_links_resolve(page: &Path, html: &str) {
    for link in links(html) {
        assert!(
            !link.contains("://") && !link.starts_with("//"),
            "{}: {link} leaves the disk (the site must work offline)",
            page.display()
        );
        let (path, fragment) = link.split_once('#').unwrap_or((&link, ""));
        let target = if path.is_empty() {
            page.to_path_buf()
        } else {
            page.parent().unwrap().join(path)
        };
        assert!(target.is_file(), "{}: broken link {link}", page.display());
        if !fragment.is_empty() {
            let text = std::fs::read_to_string(&target).unwrap();
            assert!(
                text.contains(&format!("id=\"{fragment}\"")),
                "{}: no element #{fragment} in {}",
                page.display(),
                target.display()
            );
        }
    }
}

fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            html_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "html") {
            out.push(p);
        }
    }
}

/// `causalbench run` on the simulator over these catalog scenarios, one repetition, no
/// megakernel track, into `dir/results` (returned).
fn run_sim(dir: &Path, scenarios: &[&str], extra: &[&str]) -> PathBuf {
    let suite = dir.join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalog");
    for name in scenarios {
        let f = format!("{name}.yaml");
        std::fs::copy(catalog.join(&f), suite.join(&f)).unwrap();
    }
    let out = dir.join("results");
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .args(["run", "--backend", "sim", "--quiet", "--reps", "1"])
        .args(["--megakernel-reps", "0"])
        .args(extra)
        .arg("--suite")
        .arg(&suite)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

#[test]
fn the_html_leaderboard_ranks_drills_down_and_has_no_broken_link() {
    let Some(browser) = chromium() else {
        let msg = "SKIPPED: Chromium is not installed (Debian: apt-get install chromium, or \
                   bash scripts/setup.sh as root); CAUSALBENCH_REQUIRE_CHROMIUM=1 turns this \
                   skip into a failure";
        if std::env::var("CAUSALBENCH_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1") {
            panic!("{msg}");
        }
        eprintln!("{msg}");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = run_sim(
        dir.path(),
        &[
            "dependency-vs-overlap.event-edge",
            "dependency-vs-overlap.independent",
            "call-site-attribution.site-a",
            "call-site-attribution.site-b",
        ],
        &[],
    );
    let site = out.join("html");
    let index = site.join("index.html");
    assert!(index.is_file(), "run wrote no html/index.html");
    let profile = dir.path().join("chromium-profile");
    let dom = dump_dom(&browser, &index, &profile);

    // The ranking a person reads is the leaderboard's order.
    let leaderboard: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("leaderboard.json")).unwrap()).unwrap();
    for (collectors, mode) in [("combined", "instrumented"), ("host", "closed")] {
        let view = format!("{collectors}/{mode}");
        let shown = ranking(&dom, &view);
        assert_eq!(shown, expected_ranking(&leaderboard, collectors, mode));
        assert!(shown.len() >= 5, "{shown:?}");
        // Ties share a rank: overlapping intervals, equal values above all.
        let got = ranks(&dom, &view);
        assert_eq!(
            got,
            expected_ranks(&leaderboard, &shown, (collectors, mode)),
            "{view}"
        );
        let value = |p: &str| {
            leaderboard["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["profiler"] == p && r["collectors"] == collectors && r["mode"] == mode)
                .unwrap()["pair_accuracy"]
                .clone()
        };
        assert!(
            got.windows(2).any(|w| w[0] == w[1]),
            "{view}: this result set has profilers whose intervals overlap: {got:?}"
        );
        for i in 1..shown.len() {
            if value(&shown[i]) == value(&shown[i - 1]) {
                assert_eq!(
                    got[i],
                    got[i - 1],
                    "{view}: {} and {} tie",
                    shown[i - 1],
                    shown[i]
                );
            }
        }
    }
    assert!(
        dom.contains("share a rank"),
        "the index states the ranking rule"
    );

    // Every profiler that gets a case wrong in a view links, in that view's row, a
    // page of a case it gets wrong, which shows it wrong.
    let scores: Vec<serde_json::Value> = std::fs::read_to_string(out.join("scores.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut drilled = std::collections::BTreeSet::new();
    for (collectors, mode) in [("combined", "instrumented"), ("host", "closed")] {
        let view = format!("{collectors}/{mode}");
        for (profiler, link) in drill_links(&dom, &view) {
            let wrong = scores.iter().any(|c| {
                c["profiler"] == profiler.as_str()
                    && c["collectors"] == collectors
                    && c["mode"] == mode
                    && c["loss"] == "none"
                    && c["symptoms"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|y| y["correct"] == false)
            });
            assert_eq!(
                link.is_some(),
                wrong,
                "{view}: {profiler}'s wrong-case link"
            );
            if let Some(link) = link {
                let page = site.join(&link);
                let verdicts = std::fs::read_to_string(&page).unwrap();
                let row = verdicts
                    .split("<tr>")
                    .find(|r| r.contains(&format!("</span>{profiler}</td>")))
                    .unwrap_or_else(|| panic!("{link} has no verdicts of {profiler}"));
                assert!(
                    row.contains("class=\"bad\""),
                    "{link} shows {profiler} wrong: {row}"
                );
                drilled.insert(link);
            }
        }
    }
    assert!(
        drilled.len() > 1,
        "profilers' wrong cases are not all one case: {drilled:?}"
    );

    // Family pages carry intervals beneath their rates.
    let family = links(&dom)
        .into_iter()
        .find(|l| l.starts_with("family/"))
        .expect("the index links no family");
    let family_dom = dump_dom(&browser, &site.join(&family), &profile);
    assert!(
        family_dom.contains("pair accuracy") && family_dom.contains("class=\"ci\""),
        "{family} shows no interval"
    );

    // A drill-down link of the index leads to its case's page.
    let drill = links(&dom)
        .into_iter()
        .find(|l| l.starts_with("case/"))
        .expect("the index links no case");
    let case_page = site.join(&drill);
    let case_dom = dump_dom(&browser, &case_page, &profile);
    for what in [
        "<h1>Case ",
        "class=\"truth\"",
        "class=\"claimed\"",
        "why-late",
        "class=\"verdicts\"",
    ] {
        assert!(case_dom.contains(what), "{drill} shows no {what}");
    }
    let trace = links(&case_dom)
        .into_iter()
        .find(|l| l.contains(".perfetto-trace"))
        .expect("the case page links no Perfetto trace");
    let trace = case_page.parent().unwrap().join(trace);
    assert!(
        std::fs::metadata(&trace).unwrap().len() > 0,
        "{}",
        trace.display()
    );

    // No broken link: in what Chromium loaded, and in every page written.
    assert_links_resolve(&index, &dom);
    assert_links_resolve(&case_page, &case_dom);
    let mut pages = Vec::new();
    html_files(&site, &mut pages);
    assert!(pages.len() > 5, "{pages:?}");
    for page in &pages {
        assert_links_resolve(page, &std::fs::read_to_string(page).unwrap());
    }
}

/// `report --html` rebuilds the site of a result set, and a damaged file it reads is
/// refused with its place (exit 2), not a panic (no browser needed).
#[test]
fn report_html_rebuilds_the_site_and_refuses_a_damaged_leaderboard() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_sim(
        dir.path(),
        &["dependency-vs-overlap.event-edge"],
        &["--profilers", "causal-graph"],
    );
    let bin = env!("CARGO_BIN_EXE_causalbench");
    let site = dir.path().join("site");
    let report = |site: &Path| {
        Command::new(bin)
            .args(["report", "--results"])
            .arg(&out)
            .arg("--html")
            .arg(site)
            .output()
            .unwrap()
    };
    let o = report(&site);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let case = site.join("case/sim-dependency-vs-overlap.event-edge.r0.html");
    let text = std::fs::read_to_string(&case).unwrap();
    assert!(
        text.contains("why-late") && text.contains(".perfetto-trace"),
        "{text}"
    );
    assert!(std::fs::read_to_string(site.join("index.html"))
        .unwrap()
        .contains("causal-graph"));

    // A damaged view of a shown case is refused with its file, exit 2, not a panic.
    let view =
        out.join("views/sim-dependency-vs-overlap.event-edge.r0/combined-instrumented-none.json");
    std::fs::write(&view, br#"{"schema_version": 1, "records": 3}"#).unwrap();
    let o = report(&dir.path().join("site2"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("combined-instrumented-none.json"),
        "{stderr}"
    );
}
