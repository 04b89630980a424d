//! The dependency rules of ARCHITECTURE.md, enforced: the table under "Dependency rules"
//! says which causalbench crates each crate may depend on, and this test reads
//! `cargo metadata` and fails when a crate depends on one its row does not allow, or when a
//! workspace crate has no row at all (a new crate states its rule before it lands).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

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
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
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
