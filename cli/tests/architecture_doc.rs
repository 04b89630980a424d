//! ARCHITECTURE.md says only what holds, checked against the tree:
//! - every path it names (in backticks, and every `dir/FILE.md` it cites) exists, read from
//!   the workspace root or, in a crate's section of the code map, from that crate;
//! - every Rust path it names (`crate::module::item`, or `module::item` inside a crate's
//!   section) resolves to a module or an item of that crate, public where it is named
//!   from outside the crate (`evaluator::score_case`);
//! - every code name it gives alone (`run_with`, `BackendKind`, `FAULT_END_TOLERANCE_NS`)
//!   occurs in the workspace's code;
//! - every row of "Invariants and their tests" names at least one test as
//!   `file.rs::test_name`, and that file defines that function.
//!
//! A rename or a move that leaves the document behind fails here, not in a reader's head.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
mod common;

/// Backticked names with a `/` that are not paths of the repository: where a run writes
/// (`OUT/html/`, the results directory's `cases/` and `bundles/`), the perf map a process
/// writes at run time, and every crate's `src/`.
const NOT_REPOSITORY_PATHS: &[&str] = &[
    "OUT/html/",
    "cases/",
    "bundles/",
    "/tmp/perf-<pid>.map",
    "src/",
];

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn architecture() -> String {
    std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md")).unwrap()
}

/// One backticked span of the document: its text, its line, and the crate directory of the
/// code-map section it stands in (`generator` under "### `generator/` — …").
#[derive(Debug)]
struct Mention {
    text: String,
    line: usize,
    section_crate: Option<String>,
    heading: String,
}

/// The document without its fenced blocks (kept as empty lines, so line numbers hold).
fn prose(doc: &str) -> Vec<&str> {
    let mut fenced = false;
    doc.lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return "";
            }
            if fenced {
                ""
            } else {
                line
            }
        })
        .collect()
}

/// Every backticked span, with where it stands. A span may run over a line break.
fn mentions(doc: &str) -> Vec<Mention> {
    let mut found = Vec::new();
    let mut section_crate = None;
    let mut heading = String::new();
    let mut open: Option<(String, usize)> = None;
    for (index, line) in prose(doc).into_iter().enumerate() {
        let number = index + 1;
        if open.is_none() && line.starts_with('#') {
            heading = line.trim_start_matches('#').trim().to_string();
            section_crate = if line.starts_with("### `") {
                line.split('`')
                    .nth(1)
                    .map(|dir| dir.trim_end_matches('/').to_string())
            } else if line.starts_with("## ") {
                None
            } else {
                section_crate
            };
            continue;
        }
        for (i, piece) in line.split('`').enumerate() {
            if i > 0 {
                // A backtick between `piece`s: a span opens or closes.
                open = match open.take() {
                    None => Some((String::new(), number)),
                    Some((text, start)) => {
                        found.push(Mention {
                            text,
                            line: start,
                            section_crate: section_crate.clone(),
                            heading: heading.clone(),
                        });
                        None
                    }
                };
            }
            if let Some((text, _)) = open.as_mut() {
                text.push_str(piece);
            }
        }
        if let Some((text, _)) = open.as_mut() {
            text.push(' ');
        }
    }
    assert!(open.is_none(), "ARCHITECTURE.md has an unclosed backtick");
    found
}

/// A workspace crate: its package name, its directory and the file at its root.
#[derive(Debug, Clone)]
struct Crate {
    dir: PathBuf,
    root_file: PathBuf,
}

/// The workspace crates, by the name Rust code calls them (`ground_truth`) and by their
/// directory (`ground-truth`, `recorder-ebpf`), from `cargo metadata`.
fn crates() -> (BTreeMap<String, Crate>, BTreeMap<String, Crate>) {
    let metadata = common::workspace_metadata(workspace_root());
    let mut by_name = BTreeMap::new();
    let mut by_dir = BTreeMap::new();
    for package in metadata["packages"].as_array().unwrap() {
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap());
        let dir = manifest.parent().unwrap().to_path_buf();
        let targets = package["targets"].as_array().unwrap();
        let root = ["lib", "bin"].iter().find_map(|kind| {
            targets.iter().find(|t| {
                t["kind"].as_array().unwrap().iter().any(|k| k == kind)
                    && (*kind == "lib" || t["name"] == package["name"])
            })
        });
        let root = root.expect("a crate has a library or its binary");
        let krate = Crate {
            dir: dir.clone(),
            root_file: PathBuf::from(root["src_path"].as_str().unwrap()),
        };
        let code_name = root["name"].as_str().unwrap().replace('-', "_");
        by_name.insert(code_name, krate.clone());
        let dir_name = dir.strip_prefix(workspace_root()).unwrap();
        by_dir.insert(dir_name.display().to_string(), krate);
    }
    (by_name, by_dir)
}

/// Every file and directory under `dir`, `target/` and `results/` left out.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if name == "target" || name == ".git" || path == workspace_root().join("results") {
                continue;
            }
            if path.is_dir() {
                stack.push(path.clone());
            }
            found.push(path);
        }
    }
    found.sort();
    found
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
fn glob_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.starts_with(head)
                && (head.len()..=name.len())
                    .any(|i| glob_matches(tail, &name[i..]) && name.is_char_boundary(i))
        }
    }
}

/// Whether `path` names something in the tree from `base`; its last part may be a glob.
fn exists_from(base: &Path, path: &str) -> bool {
    let path = path.trim_end_matches('/');
    let (parent, last) = path.rsplit_once('/').unwrap_or(("", path));
    if !last.contains('*') {
        return base.join(path).exists();
    }
    std::fs::read_dir(base.join(parent)).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| glob_matches(last, &e.file_name().to_string_lossy()))
    })
}

/// Whether a path named in a crate's section is a file or module of that crate: from the
/// crate's directory, from its `src/`, as a module (`io/limits` is `src/io/limits.rs`), or
/// as the tail of one (the paragraph names its parent: `truth/stamps` under `cuda`).
fn exists_in_crate(krate: &Crate, path: &str, files: &[PathBuf]) -> bool {
    let trimmed = path.trim_end_matches('/');
    let src = krate.dir.join("src");
    if exists_from(&krate.dir, path) || exists_from(&src, path) {
        return true;
    }
    let tails = [
        format!("/{trimmed}"),
        format!("/{trimmed}.rs"),
        format!("/{trimmed}/mod.rs"),
    ];
    files.iter().any(|f| {
        f.starts_with(&krate.dir) && {
            let f = f.display().to_string();
            tails.iter().any(|t| f.ends_with(t.as_str()))
        }
    })
}

/// Whether a mention is meant as a path of the tree: it has a `/` (or is a source file's
/// name) and no space.
fn is_path(text: &str) -> bool {
    let source_file = [".rs", ".py", ".cu", ".sh"]
        .iter()
        .any(|ext| text.ends_with(ext));
    !text.contains(char::is_whitespace) && (text.contains('/') || source_file)
}

/// The `dir/FILE.md` citations of the prose (`docs/records.md`, `baselines/PROTOCOL.md`).
fn cited_documents(doc: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (index, line) in prose(doc).into_iter().enumerate() {
        for word in line.split(|c: char| c.is_whitespace() || "`(),;:\"".contains(c)) {
            let word = word.trim_end_matches(['.', ']']);
            if word.ends_with(".md") && word.contains('/') && !word.contains('*') {
                found.push((word.to_string(), index + 1));
            }
        }
    }
    found
}

#[test]
fn every_path_in_architecture_exists() {
    let doc = architecture();
    let (_, by_dir) = crates();
    let root = workspace_root();
    let files = walk(root);
    let mut missing = Vec::new();
    for m in mentions(&doc) {
        let text = m.text.trim();
        // A test named as `file.rs::test`: the file is the path.
        let text = text
            .split_once(".rs::")
            .map_or(text, |(file, _)| &text[..file.len() + ".rs".len()]);
        if !is_path(text) || NOT_REPOSITORY_PATHS.contains(&text) {
            continue;
        }
        let in_crate = m
            .section_crate
            .as_ref()
            .and_then(|dir| by_dir.get(dir))
            .is_some_and(|krate| exists_in_crate(krate, text, &files));
        if !in_crate && !exists_from(root, text) {
            missing.push(format!("line {} ({}): `{text}`", m.line, m.heading));
        }
    }
    for (path, line) in cited_documents(&doc) {
        if !root.join(&path).is_file() {
            missing.push(format!("line {line}: {path}"));
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist:\n{}",
        missing.join("\n")
    );
}

/// A module of a crate, by its path from the crate root (`[]` is the root).
fn module_file(krate: &Crate, module: &[String]) -> Option<PathBuf> {
    if module.is_empty() {
        return Some(krate.root_file.clone());
    }
    let src = krate.root_file.parent().unwrap();
    let base = module.iter().fold(src.to_path_buf(), |p, m| p.join(m));
    [base.with_extension("rs"), base.join("mod.rs")]
        .into_iter()
        .find(|f| f.is_file())
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file).unwrap();
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// What a name of a module is: the items of a file named so, or the `use` leaves that
/// bring the name in, as the paths they import.
enum Found {
    /// A definition, and whether it is `pub`.
    Item { public: bool },
    /// A module declared in the file (`mod name;`), and whether it is `pub`.
    Module { public: bool },
    /// A `use` bringing the name in: the path it imports, and whether it re-exports.
    Import { path: Vec<String>, public: bool },
    /// A glob import (`pub use x::*`) the name may come through.
    Glob { path: Vec<String>, public: bool },
}

fn is_public(vis: &syn::Visibility) -> bool {
    matches!(vis, syn::Visibility::Public(_))
}

fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((n.ident.to_string(), path));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((r.rename.to_string(), path));
        }
        syn::UseTree::Glob(_) => out.push(("*".to_string(), prefix.clone())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, out);
            }
        }
    }
}

fn item_name(item: &syn::Item) -> Option<(String, bool)> {
    let (ident, vis) = match item {
        syn::Item::Fn(i) => (&i.sig.ident, &i.vis),
        syn::Item::Struct(i) => (&i.ident, &i.vis),
        syn::Item::Enum(i) => (&i.ident, &i.vis),
        syn::Item::Trait(i) => (&i.ident, &i.vis),
        syn::Item::Type(i) => (&i.ident, &i.vis),
        syn::Item::Const(i) => (&i.ident, &i.vis),
        syn::Item::Static(i) => (&i.ident, &i.vis),
        syn::Item::Union(i) => (&i.ident, &i.vis),
        syn::Item::Macro(i) => return i.ident.as_ref().map(|id| (id.to_string(), true)),
        _ => return None,
    };
    Some((ident.to_string(), is_public(vis)))
}

/// What the items of one file say of `name`.
fn lookup(items: &[syn::Item], name: &str) -> Vec<Found> {
    let mut found = Vec::new();
    for item in items {
        if let Some((ident, public)) = item_name(item) {
            if ident == name {
                found.push(Found::Item { public });
            }
        }
        match item {
            syn::Item::Mod(m) if m.ident == name => found.push(Found::Module {
                public: is_public(&m.vis),
            }),
            syn::Item::Use(u) => {
                let mut leaves = Vec::new();
                use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
                for (leaf, path) in leaves {
                    let public = is_public(&u.vis);
                    if leaf == name {
                        found.push(Found::Import { path, public });
                    } else if leaf == "*" {
                        found.push(Found::Glob { path, public });
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// Where a resolution stands: a crate and a module path in it.
type Place<'a> = (&'a Crate, Vec<String>);

/// The place a `use` path starts from, written in `module` of `krate`.
fn use_start<'a>(
    crates: &'a BTreeMap<String, Crate>,
    krate: &'a Crate,
    module: &[String],
    path: &[String],
) -> Option<(Place<'a>, usize)> {
    let first = path.first()?.as_str();
    match first {
        "crate" => Some(((krate, Vec::new()), 1)),
        "self" => Some(((krate, module.to_vec()), 1)),
        "super" => {
            let mut up = module.to_vec();
            let mut used = 0;
            while path.get(used).is_some_and(|s| s == "super") {
                up.pop()?;
                used += 1;
            }
            Some(((krate, up), used))
        }
        _ => match crates.get(first) {
            Some(other)
                if module_file(krate, &[module, &[first.to_string()]].concat()).is_none() =>
            {
                Some(((other, Vec::new()), 1))
            }
            _ => Some(((krate, module.to_vec()), 0)),
        },
    }
}

/// Whether `rest` names something from `place`: a module by the default file layout, an
/// item of the module's file, an item it imports (followed), a method or an associated
/// item of a type it defines. `public` asks that every step be visible outside the crate.
fn resolves(
    crates: &BTreeMap<String, Crate>,
    place: Place<'_>,
    rest: &[String],
    public: bool,
    depth: usize,
) -> bool {
    let (krate, module) = place;
    let Some((name, tail)) = rest.split_first() else {
        return true;
    };
    if depth > 16 {
        return false;
    }
    let Some(file) = module_file(krate, &module) else {
        return false;
    };
    let items = parse(&file).items;
    for found in lookup(&items, name) {
        let ok = match found {
            Found::Module { public: p } => {
                let mut child = module.clone();
                child.push(name.clone());
                (p || !public) && resolves(crates, (krate, child), tail, public, depth + 1)
            }
            Found::Item { public: p } => {
                (p || !public) && (tail.is_empty() || associated(krate, name, tail))
            }
            Found::Import { path, public: p } => {
                (p || !public)
                    && use_start(crates, krate, &module, &path).is_some_and(|((k, m), used)| {
                        let to = [&path[used..], tail].concat();
                        // Past a `pub use` the path may run through private modules
                        // of the same crate; into another crate it must be public.
                        let crossed = !std::ptr::eq(k, krate);
                        resolves(crates, (k, m), &to, crossed, depth + 1)
                    })
            }
            Found::Glob { path, public: p } => {
                (p || !public)
                    && use_start(crates, krate, &module, &path).is_some_and(|((k, m), used)| {
                        let to = [&path[used..], rest].concat();
                        let crossed = !std::ptr::eq(k, krate);
                        resolves(crates, (k, m), &to, crossed, depth + 1)
                    })
            }
        };
        if ok {
            return true;
        }
    }
    false
}

/// Whether `Type::name` is an associated item or a variant of a type of the crate (by
/// name: any `impl` of a type so named, any enum so named).
fn associated(krate: &Crate, ty: &str, tail: &[String]) -> bool {
    let [name] = tail else {
        return false;
    };
    let src = krate.root_file.parent().unwrap();
    walk(src)
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
        .any(|f| {
            parse(f).items.iter().any(|item| match item {
                syn::Item::Impl(i) => {
                    let self_named = matches!(&*i.self_ty, syn::Type::Path(p)
                        if p.path.segments.last().is_some_and(|s| s.ident == ty));
                    self_named
                        && i.items.iter().any(|ii| match ii {
                            syn::ImplItem::Fn(f) => f.sig.ident == name,
                            syn::ImplItem::Const(c) => c.ident == name,
                            _ => false,
                        })
                }
                syn::Item::Enum(e) => e.ident == ty && e.variants.iter().any(|v| v.ident == name),
                _ => false,
            })
        })
}

/// Every module of a crate by the default file layout, as module paths.
fn modules(krate: &Crate) -> Vec<Vec<String>> {
    let src = krate.root_file.parent().unwrap();
    walk(src)
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
        .filter_map(|f| {
            let rel = f.strip_prefix(src).ok()?.with_extension("");
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().to_string())
                .collect();
            if parts.last().is_some_and(|l| l == "mod") {
                parts.pop();
            }
            Some(parts)
        })
        .collect()
}

/// Whether a mention is a Rust path: identifiers joined by `::`, perhaps called (`()`).
fn rust_path(text: &str) -> Option<Vec<String>> {
    let text = text.trim().trim_end_matches("()");
    let segments: Vec<String> = text.split("::").map(str::to_string).collect();
    let ident = |s: &String| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    (segments.len() > 1 && segments.iter().all(ident)).then_some(segments)
}

#[test]
fn every_rust_path_in_architecture_resolves() {
    let doc = architecture();
    let (by_name, by_dir) = crates();
    let mut unresolved = Vec::new();
    let mut checked = 0;
    for m in mentions(&doc) {
        let Some(path) = rust_path(&m.text) else {
            continue;
        };
        checked += 1;
        let ok = if let Some(krate) = by_name.get(&path[0]) {
            // Named from outside its crate: public all the way.
            let public = krate.root_file.ends_with("lib.rs");
            resolves(&by_name, (krate, Vec::new()), &path[1..], public, 0)
        } else if let Some(krate) = m.section_crate.as_ref().and_then(|d| by_dir.get(d)) {
            // Named inside its crate's section: from the root, or from any module of that
            // name (`steps::Pickup` under `record`).
            resolves(&by_name, (krate, Vec::new()), &path, false, 0)
                || modules(krate)
                    .into_iter()
                    .filter(|module| module.last() == Some(&path[0]))
                    .any(|module| resolves(&by_name, (krate, module), &path[1..], false, 0))
        } else {
            false
        };
        if !ok {
            unresolved.push(format!("line {} ({}): `{}`", m.line, m.heading, m.text));
        }
    }
    assert!(
        checked >= 20,
        "expected the document's Rust paths, found {checked}"
    );
    assert!(
        unresolved.is_empty(),
        "ARCHITECTURE.md names Rust paths that do not resolve (a public item of a crate, or \
         a module or item of the section's crate):\n{}",
        unresolved.join("\n")
    );
}

/// The workspace's code and build files, as text (what a code name must occur in).
fn code_text() -> String {
    let extensions = [
        "rs", "cu", "cuh", "c", "h", "py", "sh", "toml", "yaml", "proto",
    ];
    walk(workspace_root())
        .into_iter()
        .filter(|f| {
            f.is_file()
                && (f
                    .extension()
                    .is_some_and(|e| extensions.iter().any(|x| e == *x))
                    || f.starts_with(workspace_root().join(".ci")))
        })
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `word` occurs in `text` as a whole identifier.
fn occurs_as_word(text: &str, word: &str) -> bool {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

#[test]
fn every_code_name_in_architecture_occurs_in_the_code() {
    let doc = architecture();
    let code = code_text();
    let mut absent = BTreeSet::new();
    let mut checked = 0;
    for m in mentions(&doc) {
        let text = m.text.trim().trim_end_matches("()");
        // A code name: one identifier that no English word is (an `_` or a capital).
        let identifier = !text.is_empty()
            && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !text.starts_with(|c: char| c.is_ascii_digit());
        if !identifier || !text.contains(|c: char| c == '_' || c.is_ascii_uppercase()) {
            continue;
        }
        checked += 1;
        if !occurs_as_word(&code, text) {
            absent.insert(format!("line {} ({}): `{text}`", m.line, m.heading));
        }
    }
    assert!(
        checked >= 40,
        "expected the document's code names, found {checked}"
    );
    assert!(
        absent.is_empty(),
        "ARCHITECTURE.md names what no code holds:\n{}",
        absent.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// The rows of the table under "Invariants and their tests": (line, invariant, tests cell).
fn invariant_rows(doc: &str) -> Vec<(usize, String, String)> {
    let section = doc
        .split("## Invariants and their tests")
        .nth(1)
        .expect("ARCHITECTURE.md has an `## Invariants and their tests` section");
    let section = section.split("\n## ").next().unwrap();
    let offset = doc[..doc.find("## Invariants and their tests").unwrap()]
        .lines()
        .count();
    section
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with('|') && !l.starts_with("|---"))
        .skip(1) // the header
        .map(|(i, l)| {
            let cells: Vec<&str> = l.trim().trim_matches('|').split('|').collect();
            let last = cells.last().unwrap_or(&"").trim().to_string();
            let first = cells[..cells.len() - 1].join("|").trim().to_string();
            (offset + i, first, last)
        })
        .collect()
}

#[test]
fn every_invariant_names_a_test_that_exists() {
    let doc = architecture();
    let rows = invariant_rows(&doc);
    assert!(
        rows.len() >= 10,
        "expected the invariants table, got {rows:?}"
    );
    let mut wrong = Vec::new();
    for (line, invariant, tests) in rows {
        let named: Vec<&str> = tests
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|t| t.contains(".rs::"))
            .collect();
        if named.is_empty() {
            wrong.push(format!(
                "line {line}: `{invariant}` names no test as `file.rs::test_name`"
            ));
        }
        for test in named {
            let (file, function) = test.split_once(".rs::").unwrap();
            let file = workspace_root().join(format!("{file}.rs"));
            let defines = std::fs::read_to_string(&file)
                .is_ok_and(|text| occurs_as_word(&text, &format!("fn {function}")));
            if !defines {
                wrong.push(format!("line {line}: `{test}`: no such test function"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md's invariants table names tests that do not exist:\n{}",
        wrong.join("\n")
    );
}

/// The checks see what they are meant to: a span over a line break, a section's crate, a
/// path that does not exist, a private item named from outside its crate.
#[test]
fn the_checks_catch_what_they_are_for() {
    let doc = "# A\n\n### `generator/` — g\nsee `record::\nsteps` and `nowhere/at_all.rs`\n\n## B\n`x::y`\n";
    let found = mentions(doc);
    assert_eq!(found[0].text, "record:: steps");
    assert_eq!(found[0].section_crate.as_deref(), Some("generator"));
    assert_eq!(found[1].line, 5);
    assert_eq!(found[2].section_crate, None);
    let (by_name, by_dir) = crates();
    let files = walk(workspace_root());
    let generator = &by_dir["generator"];
    assert!(exists_in_crate(generator, "record/steps", &files));
    assert!(!exists_in_crate(generator, "nowhere/at_all.rs", &files));
    assert!(exists_from(workspace_root(), "catalog/*.yaml"));
    assert!(!exists_from(workspace_root(), "catalog/*.nothing"));
    let path = |p: &str| rust_path(p).unwrap();
    assert!(resolves(
        &by_name,
        (generator, vec![]),
        &path("generator::select_backend")[1..],
        true,
        0
    ));
    assert!(!resolves(
        &by_name,
        (generator, vec![]),
        &path("generator::no_such_item")[1..],
        true,
        0
    ));
    // `scenario_space::build` is a private module: a path from outside does not reach it.
    let space = &by_name["scenario_space"];
    assert!(!resolves(
        &by_name,
        (space, vec![]),
        &path("scenario_space::build")[1..],
        true,
        0
    ));
    assert!(resolves(
        &by_name,
        (space, vec![]),
        &path("scenario_space::build")[1..],
        false,
        0
    ));
    assert!(rust_path("builtin(name)").is_none());
    assert!(occurs_as_word("let run_with = 1;", "run_with"));
    assert!(!occurs_as_word("let run_without = 1;", "run_with"));
}
