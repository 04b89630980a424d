//! The shape of the code that ARCHITECTURE.md ("Code shape") promises, enforced on every
//! workspace crate's `src/`:
//! - no import circle between the files of one crate: a file's edges are the files its
//!   `use` declarations and paths (`crate::…`, `super::…`, `self::…`, a child module's
//!   name) name, a re-export followed to the file that defines the item;
//! - no source file over [`MAX_FILE_LINES`] lines and no function over
//!   [`MAX_FUNCTION_LINES`] lines.
//!
//! Each known exception is listed below with the reason it stands; an exception that no
//! longer occurs fails the test too, so the lists only shrink.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

const MAX_FILE_LINES: usize = 1_000;
const MAX_FUNCTION_LINES: usize = 200;

/// Import circles that stand, as the sorted files of the circle (relative to the
/// workspace root): none since issue 37 broke the last; break a new one by moving what
/// both sides need into a file of its own rather than listing it here.
const KNOWN_CIRCLES: &[&[&str]] = &[];

/// Functions over the limit that stand, as `file: function` (matched by file): none since
/// issue 37 split the last; split a new one into its steps rather than listing it here.
const KNOWN_LONG_FUNCTIONS: &[&str] = &[];

/// Files over the limit that stand: none.
const KNOWN_LONG_FILES: &[&str] = &[];

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// The `src/` directory of every workspace crate, from the workspace's member list.
fn crate_sources() -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("Cargo.toml lists the workspace members");
    let sources: Vec<PathBuf> = members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| workspace_root().join(m).join("src"))
        .filter(|src| src.is_dir())
        .collect();
    assert!(
        sources.len() >= 10,
        "expected the whole workspace: {sources:?}"
    );
    sources
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A module path within one crate, `[]` being the crate root.
type ModulePath = Vec<String>;

/// The module path a file of `src/` holds: `a/b.rs` and `a/b/mod.rs` are `a::b`;
/// `lib.rs` and `main.rs` the root. `None` for a file no module declaration reaches by
/// the default layout (a `bin/` target's root, a `build.rs`).
fn module_of(src: &Path, file: &Path) -> Option<ModulePath> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().to_string())
        .collect();
    let last = parts.pop()?;
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    match last.as_str() {
        "lib.rs" | "main.rs" if parts.is_empty() => Some(parts),
        "mod.rs" => Some(parts),
        name => {
            parts.push(name.strip_suffix(".rs")?.to_string());
            Some(parts)
        }
    }
}

/// What one file says about modules and names: the inline modules it holds, its
/// imports (by the module they are written in) and every path it names.
#[derive(Default)]
struct FileFacts {
    /// Inline modules (`mod tests { … }`), as module paths.
    inline_modules: BTreeSet<ModulePath>,
    /// `use` declarations: (module written in, local name, full path, public).
    imports: Vec<(ModulePath, String, Vec<String>, bool)>,
    /// Paths named in code: (module written in, segments).
    paths: Vec<(ModulePath, Vec<String>)>,
    /// Functions with a body: (name, first line, last line).
    functions: Vec<(String, usize, usize)>,
}

struct Collector {
    module: ModulePath,
    facts: FileFacts,
}

impl Collector {
    fn use_tree(&mut self, prefix: Vec<String>, tree: &syn::UseTree, public: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                let mut prefix = prefix;
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, public);
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let mut path = prefix;
                if name != "self" {
                    path.push(name.clone());
                }
                let local = if name == "self" {
                    path.last().cloned().unwrap_or_default()
                } else {
                    name
                };
                self.facts
                    .imports
                    .push((self.module.clone(), local, path, public));
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix;
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                self.facts
                    .imports
                    .push((self.module.clone(), r.rename.to_string(), path, public));
            }
            syn::UseTree::Glob(_) => {
                self.facts.paths.push((self.module.clone(), prefix));
            }
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    self.use_tree(prefix.clone(), item, public);
                }
            }
        }
    }

    /// A function's lines: from `fn` to its closing brace (doc comments not counted).
    fn function(&mut self, name: String, start: proc_macro2::Span, block: &syn::Block) {
        let first = start.start().line;
        let last = block.brace_token.span.close().end().line;
        self.facts.functions.push((name, first, last));
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if item.content.is_some() {
            self.module.push(item.ident.to_string());
            self.facts.inline_modules.insert(self.module.clone());
            syn::visit::visit_item_mod(self, item);
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let public = !matches!(item.vis, syn::Visibility::Inherited);
        self.use_tree(Vec::new(), &item.tree, public);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.facts.paths.push((self.module.clone(), segments));
        syn::visit::visit_path(self, path);
    }

    /// Macro arguments are tokens, not syntax: `crate :: a :: b` sequences in them count.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        syn::visit::visit_macro(self, mac);
        let mut flat = Vec::new();
        flatten(mac.tokens.clone(), &mut flat);
        let mut i = 0;
        while i < flat.len() {
            if matches!(flat[i].as_str(), "crate" | "super" | "self") {
                let mut segments = vec![flat[i].clone()];
                let mut j = i + 1;
                while flat.get(j).is_some_and(|t| t == "::") {
                    match flat.get(j + 1) {
                        Some(next) if next != "::" && next != "?" => segments.push(next.clone()),
                        _ => break,
                    }
                    j += 2;
                }
                if segments.len() > 1 {
                    self.facts.paths.push((self.module.clone(), segments));
                }
                i = j;
            } else {
                i += 1;
            }
        }
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.function(
            item.sig.ident.to_string(),
            item.sig.fn_token.span,
            &item.block,
        );
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.function(
            item.sig.ident.to_string(),
            item.sig.fn_token.span,
            &item.block,
        );
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if let Some(block) = &item.default {
            self.function(item.sig.ident.to_string(), item.sig.fn_token.span, block);
        }
        syn::visit::visit_trait_item_fn(self, item);
    }
}

/// A token stream as a flat list of identifiers and `::` punctuation (others as `?`).
fn flatten(tokens: proc_macro2::TokenStream, out: &mut Vec<String>) {
    let mut iter = tokens.into_iter().peekable();
    while let Some(token) = iter.next() {
        match token {
            proc_macro2::TokenTree::Group(g) => {
                out.push("?".into());
                flatten(g.stream(), out);
                out.push("?".into());
            }
            proc_macro2::TokenTree::Ident(i) => out.push(i.to_string()),
            proc_macro2::TokenTree::Punct(p) if p.as_char() == ':' => {
                if let Some(proc_macro2::TokenTree::Punct(q)) = iter.peek() {
                    if q.as_char() == ':' {
                        iter.next();
                        out.push("::".into());
                        continue;
                    }
                }
                out.push("?".into());
            }
            _ => out.push("?".into()),
        }
    }
}

fn facts_of(file: &Path, module: &ModulePath) -> FileFacts {
    let text = std::fs::read_to_string(file).unwrap();
    let syntax =
        syn::parse_file(&text).unwrap_or_else(|e| panic!("{} does not parse: {e}", relative(file)));
    let mut collector = Collector {
        module: module.clone(),
        facts: FileFacts::default(),
    };
    collector.visit_file(&syntax);
    collector.facts
}

/// One crate's files and what they say.
struct CrateFiles {
    /// Module path → file, for every module that is a file.
    file_of: BTreeMap<ModulePath, PathBuf>,
    /// Inline module path → the file that holds it.
    inline: BTreeMap<ModulePath, PathBuf>,
    facts: BTreeMap<PathBuf, (ModulePath, FileFacts)>,
}

impl CrateFiles {
    fn read(src: &Path) -> CrateFiles {
        let mut crate_files = CrateFiles {
            file_of: BTreeMap::new(),
            inline: BTreeMap::new(),
            facts: BTreeMap::new(),
        };
        for file in rust_files(src) {
            let Some(module) = module_of(src, &file) else {
                continue;
            };
            let facts = facts_of(&file, &module);
            for inline in &facts.inline_modules {
                crate_files.inline.insert(inline.clone(), file.clone());
            }
            crate_files.file_of.insert(module.clone(), file.clone());
            crate_files.facts.insert(file, (module, facts));
        }
        crate_files
    }

    fn is_module(&self, path: &[String]) -> bool {
        self.file_of.contains_key(path) || self.inline.contains_key(path)
    }

    fn file_holding(&self, module: &[String]) -> Option<&PathBuf> {
        self.file_of.get(module).or_else(|| self.inline.get(module))
    }

    /// The local names `use` brings into `module`: name → full path as written.
    fn imported(&self, module: &[String], name: &str) -> Option<&Vec<String>> {
        let file = self.file_holding(module)?;
        self.facts[file]
            .1
            .imports
            .iter()
            .find(|(m, local, _, _)| m == module && local == name)
            .map(|(_, _, path, _)| path)
    }

    /// `segments` written in `module` as an absolute module path within the crate, or
    /// `None` for a path into another crate or the standard library.
    fn absolute(&self, module: &[String], segments: &[String], depth: usize) -> Option<ModulePath> {
        let (first, rest) = segments.split_first()?;
        let mut base: ModulePath = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => {
                let mut base = module.to_vec();
                base.pop()?;
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            name => {
                let mut child = module.to_vec();
                child.push(name.to_string());
                if self.is_module(&child) {
                    child.extend(rest.iter().cloned());
                    return Some(child);
                }
                // A name a `use` of this module brought in.
                let imported = self.imported(module, name)?;
                if depth > 8 || imported.as_slice() == segments {
                    return None;
                }
                let mut full = self.absolute(module, imported, depth + 1)?;
                full.extend(rest.iter().cloned());
                return Some(full);
            }
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file that defines what an absolute path names: the longest module prefix's
    /// file, or, where that module only re-exports the name, the file it comes from.
    fn defining_file(&self, path: &[String], depth: usize) -> Option<PathBuf> {
        let prefix_len = (0..=path.len())
            .rev()
            .find(|&n| self.is_module(&path[..n]))?;
        let module = &path[..prefix_len];
        let file = self.file_holding(module)?.clone();
        if let Some(name) = path.get(prefix_len) {
            if depth < 8 {
                if let Some(imported) = self.imported(module, name) {
                    if let Some(target) = self.absolute(module, imported, 0) {
                        let mut target = target;
                        target.extend(path[prefix_len + 1..].iter().cloned());
                        if let Some(defining) = self.defining_file(&target, depth + 1) {
                            return Some(defining);
                        }
                    }
                }
            }
        }
        Some(file)
    }

    /// File → the other files of the crate it names, but its own descendants: a module
    /// composes its children (declares them, re-exports them, calls them), so only what
    /// a file names outside its own subtree can close a circle.
    fn edges(&self) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
        let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        for (file, (own_module, facts)) in &self.facts {
            let named = facts
                .imports
                .iter()
                .map(|(m, _, path, _)| (m, path))
                .chain(facts.paths.iter().map(|(m, path)| (m, path)));
            let targets = edges.entry(file.clone()).or_default();
            for (module, path) in named {
                let Some(absolute) = self.absolute(module, path, 0) else {
                    continue;
                };
                let Some(target) = self.defining_file(&absolute, 0) else {
                    continue;
                };
                let descendant = self.facts[&target].0.starts_with(own_module);
                if &target != file && !descendant {
                    targets.insert(target);
                }
            }
        }
        edges
    }
}

/// Every import circle of a graph: its strongly connected components of more than one
/// file (Tarjan's algorithm), each as sorted files.
fn circles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a PathBuf) {
            let i = self.index.len();
            self.index.insert(node, i);
            self.low.insert(node, i);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self.edges.get(node).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top.clone());
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    walk.found
}

/// A circle with the edges inside it, for the failure message.
fn describe(circle: &[PathBuf], edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> String {
    let members: BTreeSet<&PathBuf> = circle.iter().collect();
    let mut lines = Vec::new();
    for from in circle {
        for to in edges[from].iter().filter(|t| members.contains(t)) {
            lines.push(format!("  {} -> {}", relative(from), relative(to)));
        }
    }
    lines.join("\n")
}

/// Compares what was found with the known exceptions: new findings and stale exceptions.
fn unexpected(found: &BTreeSet<String>, known: &[String]) -> Vec<String> {
    let known: BTreeSet<&String> = known.iter().collect();
    let mut problems: Vec<String> = found
        .iter()
        .filter(|f| !known.contains(f))
        .cloned()
        .collect();
    problems.extend(
        known
            .iter()
            .filter(|k| !found.contains(**k))
            .map(|k| format!("{k} (a known exception that no longer occurs: remove it)")),
    );
    problems
}

#[test]
fn no_crate_has_an_import_circle_between_its_files() {
    let mut found: Vec<BTreeSet<String>> = Vec::new();
    let mut details = Vec::new();
    for src in crate_sources() {
        let edges = CrateFiles::read(&src).edges();
        for circle in circles(&edges) {
            let files: BTreeSet<String> = circle.iter().map(|f| relative(f)).collect();
            let name = files.iter().cloned().collect::<Vec<_>>().join(" ");
            details.push(format!("{name}:\n{}", describe(&circle, &edges)));
            found.push(files);
        }
    }
    // A circle within a known one (it shrank, or split) stands; one with a file no known
    // circle has is new; a known circle none of whose files is in a circle is stale.
    let known: Vec<BTreeSet<String>> = KNOWN_CIRCLES
        .iter()
        .map(|c| c.iter().map(|f| f.to_string()).collect())
        .collect();
    let mut problems: Vec<String> = found
        .iter()
        .filter(|f| !known.iter().any(|k| f.is_subset(k)))
        .map(|f| f.iter().cloned().collect::<Vec<_>>().join(" "))
        .collect();
    problems.extend(
        known
            .iter()
            .filter(|k| !found.iter().any(|f| !f.is_disjoint(k)))
            .map(|k| {
                let name = k.iter().cloned().collect::<Vec<_>>().join(" ");
                format!("{name} (a known exception that no longer occurs: remove it)")
            }),
    );
    assert!(
        problems.is_empty(),
        "import circles between files (break each by moving what both sides need into a \
         file of its own):\n{}\n\ndetails:\n{}",
        problems.join("\n"),
        details.join("\n")
    );
}

#[test]
fn no_source_file_is_over_the_limit() {
    let mut found = BTreeSet::new();
    for src in crate_sources() {
        for file in rust_files(&src) {
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            if lines > MAX_FILE_LINES {
                found.insert(relative(&file));
            }
        }
    }
    let known: Vec<String> = KNOWN_LONG_FILES.iter().map(|s| s.to_string()).collect();
    let problems = unexpected(&found, &known);
    assert!(
        problems.is_empty(),
        "source files over {MAX_FILE_LINES} lines:\n{}",
        problems.join("\n")
    );
}

#[test]
fn no_function_is_over_the_limit() {
    // Counted per file, so that renaming a listed function (work in progress elsewhere)
    // does not fail the test; a file with more long functions than listed does.
    let mut found: BTreeMap<String, usize> = BTreeMap::new();
    let mut lengths = Vec::new();
    for src in crate_sources() {
        for file in rust_files(&src) {
            let module = module_of(&src, &file).unwrap_or_default();
            for (name, first, last) in facts_of(&file, &module).functions {
                let lines = last + 1 - first;
                if lines > MAX_FUNCTION_LINES {
                    lengths.push(format!("{}: {name} ({lines} lines)", relative(&file)));
                    *found.entry(relative(&file)).or_default() += 1;
                }
            }
        }
    }
    let mut known: BTreeMap<String, usize> = BTreeMap::new();
    for entry in KNOWN_LONG_FUNCTIONS {
        let file = entry.split(": ").next().unwrap_or(entry);
        *known.entry(file.to_string()).or_default() += 1;
    }
    let mut problems = Vec::new();
    for (file, &n) in &found {
        let allowed = known.get(file).copied().unwrap_or(0);
        if n > allowed {
            problems.push(format!(
                "{file}: {n} functions over the limit, {allowed} listed"
            ));
        }
    }
    for (file, &n) in &known {
        let have = found.get(file).copied().unwrap_or(0);
        if have < n {
            problems.push(format!(
                "{file}: {n} listed, {have} over the limit (a known exception that no longer \
                 occurs: remove it)"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines:\n{}\n\nlengths:\n{}",
        problems.join("\n"),
        lengths.join("\n")
    );
}

/// The checker itself: a circle through a re-export and a `super::` path is found, and a
/// parent that only declares its children is not in a circle with them.
#[test]
fn the_circle_checker_finds_a_circle_through_a_reexport() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |name: &str, text: &str| {
        let path = src.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\npub use c::Shared;\nmod tests { use super::*; }\n",
    );
    write("a.rs", "pub fn f() { crate::b::g(); }\n");
    write("b.rs", "pub fn g() { let _ = crate::Shared; }\n");
    write(
        "c.rs",
        "pub struct Shared;\nfn h() { println!(\"{}\", super::a::f()); }\n",
    );
    let files = CrateFiles::read(src);
    let found = circles(&files.edges());
    let names: Vec<Vec<String>> = found
        .iter()
        .map(|c| {
            c.iter()
                .map(|f| f.file_name().unwrap().to_string_lossy().to_string())
                .collect()
        })
        .collect();
    assert_eq!(names, vec![vec!["a.rs", "b.rs", "c.rs"]], "{names:?}");
}
