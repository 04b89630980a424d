//! Shared code gives facts, profilers interpret (issue 35): the reference profiler
//! (`src/causal_graph/`) is no dependency of any other built-in profiler, so changing
//! it leaves their explanations, and so their scores, byte-identical.
//!
//! Two checks: the module graph (no module reachable from another profiler names
//! `causal_graph`), and golden digests of the other built-in profilers' explanations
//! of a fixed set of views (`tests/golden/views/`, derived from the simulator's dev
//! split and committed, so a change of the simulator does not move them). The module
//! graph also holds that no profiler imports another, directly or through shared
//! modules, beyond the pairs ARCHITECTURE.md names (`hta_analyses` and `traceml` use
//! `hta`'s process machinery).
//!
//! Regenerate the views (after a change of the view format) with
//! `CAUSALBENCH_GOLDEN=views cargo test -p baselines --test shared_facts`, the
//! digests (after an intended change of a non-reference profiler, say which in the
//! commit) with `CAUSALBENCH_GOLDEN=digests`.
//!
//! `explanation_digests_of_a_view_dir` (ignored) prints every built-in profiler's
//! digest for the views of a directory, the reference's included: how a refactor of
//! the reference is checked to change nothing (baselines/README.md, "Thresholds").

use baselines::{builtin, builtin_names};
use ground_truth::{Explanation, Readable, TraceView};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The reference profiler: its module and its name.
const REFERENCE_MODULE: &str = "causal_graph";
const REFERENCE: &str = "causal-graph";

/// Dev-split scenarios the golden views come from: the first family instances.
const GOLDEN_CASES: usize = 8;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn golden_views_dir() -> PathBuf {
    crate_dir().join("tests/golden/views")
}

fn golden_digests_file() -> PathBuf {
    crate_dir().join("tests/golden/explanations.sha256")
}

/// The `crate::` and `super::` modules a source file names outside comments (a
/// top-level module's `super` is the crate root).
fn modules_named(source: &str) -> BTreeSet<String> {
    modules_named_at(source, 0)
}

/// The `crate::` modules a source file `depth` directories below `src/` names outside
/// comments, and those it names through as many `super::` as reach the crate root.
fn modules_named_at(source: &str, depth: usize) -> BTreeSet<String> {
    let code: String = source
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    for prefix in ["crate::".to_string(), "super::".repeat(depth + 1)] {
        let mut rest = code.as_str();
        while let Some(i) = rest.find(prefix.as_str()) {
            rest = &rest[i + prefix.len()..];
            let idents: Vec<&str> = if let Some(list) = rest.strip_prefix('{') {
                top_level_items(list)
                    .into_iter()
                    .map(|item| item.split("::").next().unwrap_or("").trim())
                    .collect()
            } else {
                vec![rest
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("")]
            };
            out.extend(
                idents
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
        }
    }
    out
}

/// The comma-separated items of a `use` list up to its closing brace (`list` starts
/// after the opening one), nested lists kept inside their item.
fn top_level_items(list: &str) -> Vec<&str> {
    let (mut depth, mut from, mut items) = (0usize, 0usize, Vec::new());
    for (i, c) in list.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&list[from..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&list[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    items.push(&list[from..]);
    items
}

/// The crate's top-level modules (`src/NAME.rs` or `src/NAME/mod.rs`) and their source,
/// `lib.rs` (the registry) left out.
fn top_level_modules() -> BTreeMap<String, String> {
    let src = crate_dir().join("src");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let (name, file) = if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            (name, path.join("mod.rs"))
        } else if path.extension().is_some_and(|x| x == "rs") {
            (
                path.file_stem().unwrap().to_string_lossy().to_string(),
                path,
            )
        } else {
            continue;
        };
        if name == "lib" || !file.exists() {
            continue;
        }
        out.insert(name, std::fs::read_to_string(file).unwrap());
    }
    out
}

#[test]
fn no_other_profiler_reaches_the_reference() {
    let modules = top_level_modules();
    assert!(modules.contains_key(REFERENCE_MODULE));
    // Names the crate root re-exports from the reference count as the reference.
    let reference_names = [REFERENCE_MODULE, "CausalGraph", "why_late"];
    for start in modules.keys().filter(|m| *m != REFERENCE_MODULE) {
        let mut seen = BTreeSet::from([start.clone()]);
        let mut todo = vec![(start.clone(), vec![start.clone()])];
        while let Some((m, route)) = todo.pop() {
            for named in modules_named(&modules[&m]) {
                assert!(
                    !reference_names.contains(&named.as_str()),
                    "{} reaches the reference through {} -> {named}: shared code holds \
                     facts only, a reference rule belongs in src/causal_graph/",
                    start,
                    route.join(" -> ")
                );
                if modules.contains_key(&named) && seen.insert(named.clone()) {
                    let mut next = route.clone();
                    next.push(named.clone());
                    todo.push((named, next));
                }
            }
        }
    }
}

#[test]
fn the_module_scan_sees_paths_and_lists() {
    let found = modules_named(
        "use crate::{analysis::{self, x}, index::Pos};\n// crate::causal_graph\nlet a = super::common::f();",
    );
    assert_eq!(
        found,
        BTreeSet::from(["analysis".into(), "index".into(), "common".into()])
    );
}

/// The profilers that may import another, and which: the analyzers run in a Python
/// process use the HTA adapter's process machinery (ARCHITECTURE.md, `baselines/`).
const ALLOWED_PROFILER_IMPORTS: &[(&str, &str)] = &[("hta_analyses", "hta"), ("traceml", "hta")];

/// Every source file of each top-level module of the crate (a directory module's files
/// below it too), with its depth below `src/`; `lib.rs` (the registry) left out.
fn module_files() -> BTreeMap<String, Vec<(usize, String)>> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<(usize, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, depth + 1, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push((depth, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let src = crate_dir().join("src");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let mut files = Vec::new();
        let name = if path.is_dir() {
            walk(&path, 1, &mut files);
            path.file_name().unwrap().to_string_lossy().to_string()
        } else if path.extension().is_some_and(|x| x == "rs") {
            files.push((0, std::fs::read_to_string(&path).unwrap()));
            path.file_stem().unwrap().to_string_lossy().to_string()
        } else {
            continue;
        };
        if name != "lib" && !files.is_empty() {
            out.insert(name, files);
        }
    }
    out
}

/// The names the crate root re-exports (`pub use MODULE::{A, B};` in `lib.rs`), each
/// with the module it comes from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in lib.lines() {
        let Some(path) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let path = path.trim_end_matches(';');
        let Some((module, items)) = path.split_once("::") else {
            continue;
        };
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.rsplit("::").next().unwrap_or("").trim();
            if !name.is_empty() {
                out.insert(name.to_string(), module.to_string());
            }
        }
    }
    out
}

/// The top-level modules each module's files name, a name the crate root re-exports
/// counted as its module.
fn module_imports(
    files: &BTreeMap<String, Vec<(usize, String)>>,
    reexported: &BTreeMap<String, String>,
) -> BTreeMap<String, BTreeSet<String>> {
    files
        .iter()
        .map(|(module, sources)| {
            let named = sources
                .iter()
                .flat_map(|(depth, source)| modules_named_at(source, *depth))
                .map(|n| reexported.get(&n).cloned().unwrap_or(n))
                .filter(|n| n != module && files.contains_key(n))
                .collect();
            (module.clone(), named)
        })
        .collect()
}

/// The modules that implement a profiler (`Profiler`, or the megakernel track's
/// `TaskProfiler`).
fn profiler_modules(files: &BTreeMap<String, Vec<(usize, String)>>) -> BTreeSet<String> {
    files
        .iter()
        .filter(|(_, sources)| {
            sources.iter().any(|(_, source)| {
                source.lines().any(|l| {
                    let code = l.split("//").next().unwrap_or("");
                    code.trim_start().starts_with("impl ") && code.contains("Profiler for ")
                })
            })
        })
        .map(|(m, _)| m.clone())
        .collect()
}

/// Every route by which a profiler module reaches another profiler module, directly or
/// through shared (non-profiler) modules, other than the allowed pairs.
fn cross_profiler_imports(
    imports: &BTreeMap<String, BTreeSet<String>>,
    profilers: &BTreeSet<String>,
    allowed: &[(&str, &str)],
) -> Vec<String> {
    let mut found = Vec::new();
    for start in profilers {
        let mut seen = BTreeSet::from([start.clone()]);
        let mut todo = vec![vec![start.clone()]];
        while let Some(route) = todo.pop() {
            let last = route.last().unwrap();
            for named in imports.get(last).into_iter().flatten() {
                if !seen.insert(named.clone()) {
                    continue;
                }
                let mut next = route.clone();
                next.push(named.clone());
                if !profilers.contains(named) {
                    todo.push(next);
                } else if !allowed.contains(&(start.as_str(), named.as_str())) {
                    found.push(next.join(" -> "));
                }
            }
        }
    }
    found
}

#[test]
fn no_profiler_imports_another() {
    let files = module_files();
    let lib = std::fs::read_to_string(crate_dir().join("src/lib.rs")).unwrap();
    let profilers = profiler_modules(&files);
    for (module, other) in ALLOWED_PROFILER_IMPORTS {
        assert!(
            profilers.contains(*module) && profilers.contains(*other),
            "the allowed import {module} -> {other} names a module that is no profiler"
        );
    }
    for module in [
        "timestamp_join",
        "cupti_correlation",
        "ebpf_host",
        "nvtx_enclosure",
        REFERENCE_MODULE,
    ] {
        assert!(
            profilers.contains(module),
            "{module} is not seen as a profiler"
        );
    }
    let found = cross_profiler_imports(
        &module_imports(&files, &reexports(&lib)),
        &profilers,
        ALLOWED_PROFILER_IMPORTS,
    );
    assert!(
        found.is_empty(),
        "a profiler imports another (what both need belongs in shared code: `index`, \
         `analysis`, `common`):\n{}",
        found.join("\n")
    );
}

/// The check catches what it is for: a planted import of one profiler by another,
/// directly, through a shared module, through a name the crate root re-exports, and
/// from a nested file through `super::super::`; the allowed pairs pass.
#[test]
fn a_planted_profiler_import_is_caught() {
    let file = |source: &str| vec![(0, source.to_string())];
    let files = BTreeMap::from([
        (
            "a_profiler".to_string(),
            file("use crate::common::x;\nimpl Profiler for A {}"),
        ),
        (
            "b_profiler".to_string(),
            file("use crate::{index, OtherB};\nimpl Profiler for B {}"),
        ),
        (
            "c_profiler".to_string(),
            vec![
                (0, "impl crate::Profiler for C {}".to_string()),
                (
                    1,
                    "use super::graph;\nlet y = super::super::a_profiler::f();".to_string(),
                ),
            ],
        ),
        ("hta".to_string(), file("impl Profiler for Hta {}")),
        (
            "traceml".to_string(),
            file("use crate::hta::one_line;\nimpl Profiler for T {}"),
        ),
        (
            "common".to_string(),
            file("// crate::a_profiler\nuse crate::index::Pos;"),
        ),
        ("index".to_string(), file("use super::b_profiler::Thing;")),
        ("d_profiler".to_string(), file("impl TaskProfiler for D {}")),
    ]);
    let reexported = BTreeMap::from([("OtherB".to_string(), "d_profiler".to_string())]);
    let profilers = profiler_modules(&files);
    assert_eq!(
        profilers,
        BTreeSet::from(
            [
                "a_profiler",
                "b_profiler",
                "c_profiler",
                "d_profiler",
                "hta",
                "traceml"
            ]
            .map(String::from)
        )
    );
    let found = cross_profiler_imports(
        &module_imports(&files, &reexported),
        &profilers,
        &[("traceml", "hta")],
    );
    assert_eq!(
        found,
        [
            "a_profiler -> common -> index -> b_profiler",
            "b_profiler -> d_profiler",
            "c_profiler -> a_profiler",
        ]
    );
}

/// An explanation's digest: its JSON with the measured wall time zeroed.
fn digest(mut e: Explanation) -> String {
    e.meta.wall_ms = 0.0;
    let bytes = serde_json::to_vec(&e).unwrap();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn read_view(path: &Path) -> TraceView {
    TraceView::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `file profiler digest` lines of the views in `dir` (sorted by file name) for `profilers`.
fn digests(dir: &Path, profilers: &[&str]) -> Vec<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".view.json.gz"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let view = read_view(&f);
        let file = f.file_name().unwrap().to_string_lossy().to_string();
        for &name in profilers {
            let p = builtin(name).unwrap();
            out.push(format!("{file} {name} {}", digest(p.explain(&view))));
        }
    }
    out
}

/// Records `cases` dev-split scenarios on the simulator and writes every standard view
/// of each into `dir`.
fn write_dev_views(dir: &Path, cases: usize) {
    let backend = generator::select_backend(generator::BackendKind::Sim).unwrap();
    let scenarios =
        scenario_space::generate(scenario_space::Split::Dev, scenario_space::DEV_SEED, cases);
    for sc in scenarios.iter().take(cases) {
        write_views(dir, &sc.name, &backend.record(sc, 0).unwrap());
    }
}

/// Writes every standard view of `bundle` into `dir` as `NAME.SPEC.view.json.gz`.
fn write_views(dir: &Path, name: &str, bundle: &ground_truth::Bundle) {
    std::fs::create_dir_all(dir).unwrap();
    for spec in views::standard_specs_of(bundle) {
        let view = views::derive(bundle, spec).view;
        let file = dir.join(format!("{name}.{}.view.json.gz", spec.label()));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&serde_json::to_vec(&view).unwrap()).unwrap();
        std::fs::write(&file, gz.finish().unwrap()).unwrap();
    }
}

/// Writes every standard view of each of the first `count` bundles (by file name) of
/// `dir` into `out`: a recorded corpus (`results/dev-corpus/`) as views.
fn write_corpus_views(dir: &Path, count: usize, out: &Path) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".bundle.json.gz"))
        .collect();
    files.sort();
    for f in files.iter().take(count) {
        let bundle = ground_truth::Bundle::read(f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy();
        write_views(out, name.trim_end_matches(".bundle.json.gz"), &bundle);
    }
}

fn non_reference() -> Vec<&'static str> {
    builtin_names()
        .iter()
        .copied()
        .filter(|&n| n != REFERENCE)
        .collect()
}

#[test]
fn other_profilers_explain_the_golden_views_as_before() {
    let mode = std::env::var("CAUSALBENCH_GOLDEN").unwrap_or_default();
    if mode == "views" {
        let dir = golden_views_dir();
        if dir.exists() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
        write_dev_views(&dir, GOLDEN_CASES);
    }
    let found = digests(&golden_views_dir(), &non_reference());
    if mode == "views" || mode == "digests" {
        let mut f = std::fs::File::create(golden_digests_file()).unwrap();
        for line in &found {
            writeln!(f, "{line}").unwrap();
        }
        return;
    }
    let mut expected = String::new();
    std::fs::File::open(golden_digests_file())
        .unwrap()
        .read_to_string(&mut expected)
        .unwrap();
    let expected: Vec<&str> = expected.lines().collect();
    assert!(!found.is_empty());
    let differing: Vec<String> = found
        .iter()
        .filter(|l| !expected.contains(&l.as_str()))
        .cloned()
        .collect();
    assert!(
        differing.is_empty() && found.len() == expected.len(),
        "explanations of non-reference profilers changed (a reference rule in shared \
         code?); if intended, regenerate with CAUSALBENCH_GOLDEN=digests:\n{}",
        differing.join("\n")
    );
}

/// Every built-in profiler's digests for the views of `$CAUSALBENCH_DIGEST_VIEWS`
/// (written first from `$CAUSALBENCH_DIGEST_CASES` dev-split scenarios, and from the
/// first `$CAUSALBENCH_DIGEST_CORPUS_COUNT` bundles of `$CAUSALBENCH_DIGEST_CORPUS`,
/// when those are set), printed, or compared with `$CAUSALBENCH_DIGEST_EXPECT` when
/// that file exists (and written there otherwise).
#[test]
#[ignore]
fn explanation_digests_of_a_view_dir() {
    let dir = PathBuf::from(std::env::var("CAUSALBENCH_DIGEST_VIEWS").expect("a view dir"));
    if let Some(cases) = std::env::var("CAUSALBENCH_DIGEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
    {
        write_dev_views(&dir, cases);
    }
    if let Ok(corpus) = std::env::var("CAUSALBENCH_DIGEST_CORPUS") {
        let count = std::env::var("CAUSALBENCH_DIGEST_CORPUS_COUNT")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(usize::MAX);
        write_corpus_views(Path::new(&corpus), count, &dir);
    }
    let found = digests(&dir, builtin_names());
    match std::env::var("CAUSALBENCH_DIGEST_EXPECT").map(PathBuf::from) {
        Ok(expect) if expect.exists() => {
            let text = std::fs::read_to_string(&expect).unwrap();
            let expected: BTreeSet<&str> = text.lines().collect();
            let differing: Vec<&String> = found
                .iter()
                .filter(|l| !expected.contains(l.as_str()))
                .collect();
            println!("{} digests, {} differ", found.len(), differing.len());
            for d in &differing {
                println!("differs: {d}");
            }
            assert!(differing.is_empty());
        }
        Ok(expect) => std::fs::write(expect, found.join("\n") + "\n").unwrap(),
        Err(_) => println!("{}", found.join("\n")),
    }
}
