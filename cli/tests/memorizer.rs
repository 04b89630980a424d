//! Standing audit (issue 34, docs/integrity.md "Public material"): a contestant
//! that memorizes public material instead of analysing. Offline, as any submitter
//! could, it regenerates the dev split with the simulator and keeps, for every view,
//! the truth's causes keyed by the view's records; the table ships with its program.
//! On the dev split it must be (nearly) perfect, which is why those rows are marked
//! *public — memorizable*; on a split whose seed the harness drew it finds nothing
//! and stays at the floor, which is why only hidden splits rank.

mod common;

use common::python3;
use std::path::Path;
use std::process::Command;

/// The key of a view: its spec and records, as the memorizer sees them.
const KEY_PY: &str = r#"import hashlib, json
def key(view):
    return hashlib.sha256(json.dumps([view["spec"], view["records"]], sort_keys=True).encode()).hexdigest()
"#;

/// Builds the table from a results folder of public material: view key → the truth's
/// cause of each of the view's queries.
const BUILD_PY: &str = r#"import glob, json, os, sys
from memokey import key
results, table_path = sys.argv[1], sys.argv[2]
manifest = json.load(open(os.path.join(results, "manifest.json")))
table = {}
for job, bundle_file in manifest["bundles"].items():
    bundle = json.load(open(os.path.join(results, bundle_file["path"])))
    causes = {s["id"]: s["cause"] for s in bundle["ground_truth"]["symptoms"]}
    for path in glob.glob(os.path.join(results, "views", job, "*.json")):
        view = json.load(open(path))
        table[key(view)] = {q["id"]: causes[q["id"]] for q in view["queries"] if q["id"] in causes}
json.dump(table, open(table_path, "w"))
print(len(table))
"#;

/// The contestant: looks the view up; answers nothing it has not memorized.
const MEMO_PY: &str = r#"import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
from memokey import key
table_path, view_path, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
view = json.load(open(view_path))
known = json.load(open(table_path)).get(key(view), {})
diagnoses = []
for q in view["queries"]:
    causes = [{"label": known[q["id"]], "score": 1.0}] if q["id"] in known else []
    diagnoses.append({"query": q["id"], "causes": causes, "critical_path": [q["rid"]], "complete": True})
json.dump({"schema_version": view["schema_version"],
           "meta": {"profiler": "memo", "version": "1", "view": view["spec"], "wall_ms": 1.0},
           "edges": [], "attribution": [], "diagnoses": diagnoses}, open(out_path, "w"))
"#;

/// `causalbench run` on the simulator with `args`, into `out`.
fn run(out: &Path, args: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_causalbench"))
        .arg("run")
        .args(["--backend", "sim", "--reps", "1", "--megakernel-reps", "0"])
        .args([
            "--profilers",
            "probe-names",
            "--allow-unisolated",
            "--quiet",
        ])
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The memorizer's pooled pair accuracy in a results folder, and its rows' materials.
fn memo_rows(out: &Path) -> (f64, Vec<String>) {
    let lb: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("leaderboard.json")).unwrap()).unwrap();
    let (mut pairs, mut correct) = (0u64, 0.0);
    for f in lb["families_pooled"].as_array().unwrap() {
        if f["profiler"] == "memo" {
            pairs += f["pairs"].as_u64().unwrap();
            correct += f["pairs_correct"].as_f64().unwrap();
        }
    }
    assert!(pairs > 0, "no pair scored for memo");
    let mut materials: Vec<String> = lb["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["profiler"] == "memo")
        .map(|r| r["material"].as_str().unwrap().to_string())
        .collect();
    materials.dedup();
    (correct / pairs as f64, materials)
}

#[test]
fn a_memorizer_is_perfect_on_public_material_and_at_the_floor_on_a_hidden_split() {
    if !python3() {
        eprintln!("skipped: needs python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("memo");
    std::fs::create_dir(&tools).unwrap();
    std::fs::write(tools.join("memokey.py"), KEY_PY).unwrap();
    std::fs::write(tools.join("build.py"), BUILD_PY).unwrap();
    std::fs::write(tools.join("memo.py"), MEMO_PY).unwrap();
    let cases = ["--cases", "4"];
    // The submitter's preparation: the public dev split, regenerated.
    let public = dir.path().join("public");
    run(&public, &[&["--suite", "dev"][..], &cases].concat());
    let table = tools.join("table.json");
    let built = Command::new("python3")
        .arg(tools.join("build.py"))
        .arg(&public)
        .arg(&table)
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let profiler = format!(
        "memo=python3 {} {} {{view}} {{out}}",
        tools.join("memo.py").display(),
        table.display()
    );
    let contestant = [
        "--profiler",
        &profiler,
        "--collectors",
        "combined",
        "--modes",
        "instrumented",
    ];

    // Scored on the dev split: the table answers every case.
    let dev = dir.path().join("dev");
    run(
        &dev,
        &[&["--suite", "dev"][..], &cases, &contestant].concat(),
    );
    let (accuracy, materials) = memo_rows(&dev);
    eprintln!("memo on the dev split: pair accuracy {accuracy:.3}");
    assert!(accuracy >= 0.95, "memorized, yet {accuracy:.3}");
    assert_eq!(materials, ["public"]);

    // Scored on a split whose seed the harness drew: nothing to look up.
    let hidden = dir.path().join("hidden");
    run(
        &hidden,
        &[&["--suite", "test"][..], &cases, &contestant].concat(),
    );
    let (accuracy, materials) = memo_rows(&hidden);
    eprintln!("memo on a hidden split: pair accuracy {accuracy:.3}");
    assert!(
        accuracy <= 0.05,
        "a hidden split was memorizable: {accuracy:.3}"
    );
    assert_eq!(materials, ["hidden"]);
}
