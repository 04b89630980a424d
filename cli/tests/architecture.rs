//! The dependency rules of ARCHITECTURE.md, enforced: the table under "Dependency rules"
//! says which causalbench crates each crate may depend on, and this test reads
//! `cargo metadata` and fails when a crate depends on one its row does not allow, or when a
//! workspace crate has no row at all (a new crate states its rule before it lands).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
mod common;

/// The crate → allowed workspace dependencies table of ARCHITECTURE.md. `*` allows every
/// workspace crate; `—` allows none.
#[derive(Debug, Default)]
struct Rules {
    allowed: BTreeMap<String, Option<BTreeSet<String>>>,
}

/// One workspace crate's workspace dependencies, by dependency kind.
#[derive(Debug, Default)]
struct CrateDeps {
    normal: BTreeSet<String>,
    dev: BTreeSet<String>,
}

fn parse_rules(architecture: &str) -> Rules {
    let section = architecture
        .split("## Dependency rules")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Dependency rules` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut rules = Rules::default();
    for line in section.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells.len() < 2 || !cells[0].starts_with('`') {
            continue;
        }
        let name = cells[0].trim_matches('`').to_string();
        let allowed = match cells[1] {
            "*" => None,
            "—" | "-" | "" => Some(BTreeSet::new()),
            list => Some(
                list.split(',')
                    .map(|d| d.trim().trim_matches('`').to_string())
                    .filter(|d| !d.is_empty())
                    .collect(),
            ),
        };
        rules.allowed.insert(name, allowed);
    }
    rules
}

/// Workspace crates and their dependencies on each other, from `cargo metadata` JSON.
fn parse_metadata(metadata: &serde_json::Value) -> BTreeMap<String, CrateDeps> {
    let packages = metadata["packages"]
        .as_array()
        .expect("metadata has packages");
    let members: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    let mut crates = BTreeMap::new();
    for package in packages {
        let mut deps = CrateDeps::default();
        for dep in package["dependencies"].as_array().unwrap() {
            let name = dep["name"].as_str().unwrap().to_string();
            if !members.contains(&name) {
                continue;
            }
            match dep["kind"].as_str() {
                Some("dev") => deps.dev.insert(name),
                _ => deps.normal.insert(name),
            };
        }
        crates.insert(package["name"].as_str().unwrap().to_string(), deps);
    }
    crates
}

/// Every breach of the rules, one line each. Normal and build dependencies must be in the
/// crate's row; dev-dependencies (tests making their inputs with earlier stages) may use any
/// crate but the binary, so that no library's tests depend on the CLI.
fn violations(rules: &Rules, crates: &BTreeMap<String, CrateDeps>) -> Vec<String> {
    let mut found = Vec::new();
    for (name, deps) in crates {
        let Some(allowed) = rules.allowed.get(name) else {
            found.push(format!(
                "crate `{name}` has no row in ARCHITECTURE.md's dependency rules"
            ));
            continue;
        };
        if let Some(allowed) = allowed {
            for dep in deps.normal.difference(allowed) {
                found.push(format!(
                    "crate `{name}` depends on `{dep}`, which its rule does not allow"
                ));
            }
        }
        if name != "causalbench" && deps.dev.contains("causalbench") {
            found.push(format!(
                "crate `{name}`'s tests depend on the `causalbench` binary crate"
            ));
        }
    }
    for name in rules.allowed.keys() {
        if !crates.contains_key(name) {
            found.push(format!(
                "ARCHITECTURE.md's dependency rules name `{name}`, which is not a workspace crate"
            ));
        }
    }
    found
}

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

#[test]
fn crates_depend_only_on_what_architecture_allows() {
    let root = workspace_root();
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let rules = parse_rules(&architecture);
    let metadata = common::workspace_metadata(root);
    let crates = parse_metadata(&metadata);
    assert!(
        crates.len() >= 10,
        "expected the whole workspace, got {crates:?}"
    );
    let found = violations(&rules, &crates);
    assert!(
        found.is_empty(),
        "dependency rules broken:\n{}",
        found.join("\n")
    );
}

/// The checker itself catches a forbidden dependency: the real rules, with the real
/// metadata plus `views` depending on `generator` (a view must not reach back into the
/// stage that recorded its bundle).
#[test]
fn a_forbidden_dependency_is_reported() {
    let architecture = std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md")).unwrap();
    let rules = parse_rules(&architecture);
    let metadata = serde_json::json!({"packages": [
        {"name": "ground-truth", "dependencies": []},
        {"name": "generator", "dependencies": [{"name": "ground-truth", "kind": null}]},
        {"name": "views", "dependencies": [
            {"name": "ground-truth", "kind": null},
            {"name": "generator", "kind": null}
        ]},
    ]});
    let crates = parse_metadata(&metadata);
    let found = violations(&rules, &crates);
    assert!(
        found
            .iter()
            .any(|v| v == "crate `views` depends on `generator`, which its rule does not allow"),
        "{found:?}"
    );
    // The same edge as a dev-dependency is allowed: tests make bundles with the generator.
    let metadata = serde_json::json!({"packages": [
        {"name": "views", "dependencies": [{"name": "generator", "kind": "dev"}]},
        {"name": "generator", "dependencies": []},
    ]});
    let crates = parse_metadata(&metadata);
    assert!(!violations(&rules, &crates)
        .iter()
        .any(|v| v.starts_with("crate `views`")));
}

#[test]
fn an_unlisted_crate_is_reported() {
    let rules =
        parse_rules("## Dependency rules\n| crate | may depend on |\n|---|---|\n| `a` | — |\n");
    let metadata = serde_json::json!({"packages": [
        {"name": "a", "dependencies": []},
        {"name": "b", "dependencies": [{"name": "a", "kind": null}]},
    ]});
    let found = violations(&rules, &parse_metadata(&metadata));
    assert_eq!(
        found,
        vec!["crate `b` has no row in ARCHITECTURE.md's dependency rules".to_string()]
    );
}

/// ARCHITECTURE.md, `ground-truth`: every format it defines carries `schema_version`, a
/// required field of its schema.
#[test]
fn every_ground_truth_format_carries_schema_version() {
    let mut without = Vec::new();
    for (name, _) in ground_truth::schema::NAMES {
        let text = ground_truth::schema::schema(name).expect("a listed name has a schema");
        let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        let required = schema["required"]
            .as_array()
            .is_some_and(|r| r.iter().any(|f| f == "schema_version"));
        if !required {
            without.push(*name);
        }
    }
    assert!(
        without.is_empty(),
        "formats without a required schema_version: {without:?}"
    );
}

/// A dev-dependency on the binary crate breaks the rule even where a normal one would be
/// allowed; any other dev-dependency is the tests' own business.
#[test]
fn a_dev_dependency_on_the_binary_is_reported() {
    let architecture = std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md")).unwrap();
    let rules = parse_rules(&architecture);
    let metadata = serde_json::json!({"packages": [
        {"name": "causalbench", "dependencies": []},
        {"name": "evaluator", "dependencies": [
            {"name": "causalbench", "kind": "dev"},
            {"name": "megakernel", "kind": "dev"}
        ]},
        {"name": "megakernel", "dependencies": []},
    ]});
    let found: Vec<String> = violations(&rules, &parse_metadata(&metadata))
        .into_iter()
        .filter(|v| v.starts_with("crate "))
        .collect();
    assert_eq!(
        found,
        vec!["crate `evaluator`'s tests depend on the `causalbench` binary crate".to_string()]
    );
}

// ---------------------------------------------------------------------------------------
// The invariants of ARCHITECTURE.md's code map that the dependency table cannot hold: what
// some files of a crate may name, checked on the source with `syn`.

/// What one file's code names: every path (`a::b::c`, the first segments kept) and every
/// `use` tree's paths, comments and string literals left out; `#[cfg(test)]` modules left
/// out where asked.
#[derive(Default)]
struct Named {
    paths: BTreeSet<Vec<String>>,
    /// Method calls: (method, number of arguments).
    method_calls: Vec<(String, usize)>,
    skip_tests: bool,
}

impl<'ast> syn::visit::Visit<'ast> for Named {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let is_test = m.attrs.iter().any(|a| {
            a.path().is_ident("cfg")
                && a.parse_args::<syn::Path>()
                    .is_ok_and(|p| p.is_ident("test"))
        });
        if !(self.skip_tests && is_test) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.paths
            .insert(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        fn walk(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut BTreeSet<Vec<String>>) {
            match tree {
                syn::UseTree::Path(p) => {
                    prefix.push(p.ident.to_string());
                    walk(&p.tree, prefix, out);
                    prefix.pop();
                }
                syn::UseTree::Name(n) => {
                    let mut path = prefix.clone();
                    path.push(n.ident.to_string());
                    out.insert(path);
                }
                syn::UseTree::Rename(r) => {
                    let mut path = prefix.clone();
                    path.push(r.ident.to_string());
                    out.insert(path);
                }
                syn::UseTree::Glob(_) => {
                    out.insert(prefix.clone());
                }
                syn::UseTree::Group(g) => {
                    for t in &g.items {
                        walk(t, prefix, out);
                    }
                }
            }
        }
        walk(&u.tree, &mut Vec::new(), &mut self.paths);
    }
    fn visit_expr_method_call(&mut self, c: &'ast syn::ExprMethodCall) {
        self.method_calls.push((c.method.to_string(), c.args.len()));
        syn::visit::visit_expr_method_call(self, c);
    }
}

fn named_in(file: &Path, skip_tests: bool) -> Named {
    let text = std::fs::read_to_string(file).unwrap();
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut named = Named {
        skip_tests,
        ..Named::default()
    };
    syn::visit::Visit::visit_file(&mut named, &ast);
    named
}

/// The `.rs` files under `path` (itself, if it is a file), sorted.
fn rust_files(path: &Path) -> Vec<std::path::PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// Every path of the files under `dir` (relative to the workspace root) that starts with
/// one of `forbidden` (each a path prefix, `["kineto"]` or `["crate", "cuda"]`), as
/// `file: path`.
fn forbidden_paths(dirs: &[&str], forbidden: &[&[&str]]) -> Vec<String> {
    let mut found = Vec::new();
    for dir in dirs {
        let path = workspace_root().join(dir);
        assert!(path.exists(), "{dir} does not exist");
        for file in rust_files(&path) {
            // One segment is a local name (`kernels` the count), not a crate's path.
            for named in named_in(&file, false)
                .paths
                .into_iter()
                .filter(|p| p.len() > 1)
            {
                if forbidden.iter().any(|f| {
                    named.starts_with(&f.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                }) {
                    found.push(format!(
                        "{}: {}",
                        file.strip_prefix(workspace_root()).unwrap().display(),
                        named.join("::")
                    ));
                }
            }
        }
    }
    found
}

/// The GPU crates and the workspace crates other than `ground-truth`, as code names them.
const GPU_AND_OTHER_CRATES: &[&[&str]] = &[
    &["kernels"],
    &["injectors"],
    &["ebpf_recorder"],
    &["recorder_cupti"],
    &["kineto"],
    &["cudarc"],
    &["libbpf_rs"],
    &["scenario_space"],
    &["views"],
    &["baselines"],
    &["evaluator"],
    &["exporters"],
    &["megakernel"],
];

/// ARCHITECTURE.md, `generator/`: the simulator, the recording path, the injection plan
/// and the answers use only `ground-truth` (of the causalbench and GPU crates), and none
/// of them reaches into the GPU or PyTorch backend.
#[test]
fn the_simulator_and_the_recording_path_use_only_ground_truth() {
    let mut forbidden = GPU_AND_OTHER_CRATES.to_vec();
    forbidden.extend([
        &["crate", "cuda"][..],
        &["crate", "torch"],
        &["super", "cuda"],
        &["super", "torch"],
    ]);
    let found = forbidden_paths(
        &[
            "generator/src/sim",
            "generator/src/record",
            "generator/src/plan.rs",
            "generator/src/answers.rs",
        ],
        &forbidden,
    );
    assert!(
        found.is_empty(),
        "the simulator and the recording path name a GPU backend or another crate:\n{}",
        found.join("\n")
    );
}

/// ARCHITECTURE.md, `generator/`: no backend creates a scenario step's nodes or edges
/// itself; only `record/` calls the run builder's `node(kind, name, info, start, end)` and
/// `edge(src, dst, kind)` (tests left out, which build small truths by hand).
#[test]
fn no_backend_makes_nodes_or_edges_itself() {
    let src = workspace_root().join("generator/src");
    let record = src.join("record");
    let mut found = Vec::new();
    for file in rust_files(&src) {
        if file.starts_with(&record) || file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        for (method, args) in named_in(&file, true).method_calls {
            if (method == "node" && args == 5) || (method == "edge" && args == 3) {
                found.push(format!(
                    "{}: .{method}(…{args} arguments)",
                    file.strip_prefix(workspace_root()).unwrap().display()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "truth nodes or edges made outside generator/src/record/:\n{}",
        found.join("\n")
    );
}

/// ARCHITECTURE.md, `kineto/`: the reader knows nothing of scenarios or truth; of
/// `ground-truth` it uses only the input machinery (`io`: limits, gzip, `FormatError`).
#[test]
fn the_kineto_reader_knows_nothing_of_scenarios_or_truth() {
    let src = workspace_root().join("kineto/src");
    let mut found = Vec::new();
    for file in rust_files(&src) {
        for path in named_in(&file, false).paths {
            if path.first().is_some_and(|p| p == "ground_truth")
                && path.get(1).is_some_and(|p| p != "io")
            {
                found.push(format!(
                    "{}: {}",
                    file.strip_prefix(workspace_root()).unwrap().display(),
                    path.join("::")
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "kineto names ground-truth beyond its input machinery:\n{}",
        found.join("\n")
    );
}

/// ARCHITECTURE.md, `megakernel/`: task-level truth comes from the case's task log, never
/// from a profiler: of the crate's files only `track` (the pipeline after recording, which
/// runs the track's profilers) names `baselines`.
#[test]
fn the_megakernel_truth_names_no_profiler() {
    let src = workspace_root().join("megakernel/src");
    let mut found = Vec::new();
    for file in rust_files(&src) {
        if file == src.join("track.rs") {
            continue;
        }
        if named_in(&file, false)
            .paths
            .iter()
            .any(|p| p.first().is_some_and(|p| p == "baselines"))
        {
            found.push(
                file.strip_prefix(workspace_root())
                    .unwrap()
                    .display()
                    .to_string(),
            );
        }
    }
    assert!(
        found.is_empty(),
        "megakernel files other than track.rs name baselines: {found:?}"
    );
}

/// ARCHITECTURE.md, `megakernel/`: the hook ABI version is one number on every side: the
/// CUDA source's `MK_ABI_VERSION`, the Rust mirror's `ABI_VERSION` (kernels), and the
/// formats' `HOOK_ABI_VERSION` (ground-truth), which the telemetry reader checks.
#[test]
fn the_hook_abi_version_is_one_number_on_every_side() {
    let read = |p: &str| std::fs::read_to_string(workspace_root().join(p)).unwrap();
    let cuda = read("kernels/src/cuda/megakernel.cu");
    let mirror = read("kernels/src/megakernel.rs");
    let version = ground_truth::megakernel::HOOK_ABI_VERSION;
    assert!(
        cuda.contains(&format!("#define MK_ABI_VERSION {version}u")),
        "megakernel.cu's MK_ABI_VERSION is not {version}"
    );
    assert!(
        mirror.contains(&format!("pub const ABI_VERSION: u32 = {version};")),
        "kernels' ABI_VERSION is not {version}"
    );
}

/// ARCHITECTURE.md, `views/`: a view is a function of (bundle, spec, key), the key
/// deciding only the view's opaque id.
#[test]
fn a_view_depends_on_its_key_only_through_its_id() {
    use ground_truth::view::{LossSpec, ViewSpec};
    use ground_truth::{Collectors, Mode, Readable};
    let scenario = ground_truth::Scenario::read(
        &workspace_root().join("catalog/dependency-vs-overlap.event-edge.yaml"),
    )
    .unwrap();
    let bundle = generator::select_backend(generator::BackendKind::Sim)
        .unwrap()
        .record(&scenario, 0)
        .unwrap();
    let (a, b) = (views::ViewKey::random(), views::ViewKey::random());
    for loss in [
        LossSpec::None,
        LossSpec::Uniform { rate: 0.3, seed: 7 },
        LossSpec::Targeted { seed: 7 },
    ] {
        for mode in [Mode::Instrumented, Mode::Closed] {
            let spec = ViewSpec {
                collectors: Collectors::Combined,
                mode,
                loss,
            };
            let under_a = views::derive_with_key(&bundle, spec, &a);
            let mut under_b = views::derive_with_key(&bundle, spec, &b);
            assert_ne!(
                under_a.view.bundle, under_b.view.bundle,
                "the key names the view"
            );
            under_b.view.bundle = under_a.view.bundle.clone();
            assert_eq!(under_a.view, under_b.view, "{spec:?}");
            assert_eq!(under_a.removed, under_b.removed, "{spec:?}");
            let again = views::derive_with_key(&bundle, spec, &a);
            assert_eq!(again.view, under_a.view, "{spec:?}");
        }
    }
}

/// ARCHITECTURE.md, `megakernel/`: without a GPU the track's GPU executor returns an
/// error, never panics. (On a machine with a GPU, `megakernel/tests/gpu.rs` opens it.)
#[test]
fn the_megakernel_gpu_executor_is_an_error_without_a_gpu() {
    if generator::backend::gpu_present() {
        eprintln!("skipped: this machine has a GPU");
        return;
    }
    assert!(megakernel::gpu::GpuExecutor::open(false).is_err());
    assert!(megakernel::gpu::GpuExecutor::open(true).is_err());
}

/// ARCHITECTURE.md, `kernels/`: no nvcc at build time: the crate has no build script (its
/// CUDA C is compiled at run time with NVRTC).
#[test]
fn the_kernels_crate_has_no_build_script() {
    let dir = workspace_root().join("kernels");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(!dir.join("build.rs").exists(), "kernels/build.rs exists");
    assert!(
        !manifest
            .lines()
            .any(|l| l.trim_start().starts_with("build")),
        "kernels/Cargo.toml names a build script"
    );
}
