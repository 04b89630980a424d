//! Hidden splits (issue 34): `submit` on the test split without a seed draws one
//! itself, and the profiler it scores finds it nowhere it can look (command lines,
//! environments and `/proc` of every process it can see, its own environment, every
//! file it can read under the temporary folder, its working folder and the folder
//! above its view) nor can ask anyone for it (no TCP connection gets through); an
//! entry on the dev split or on a seed given to `submit` is marked public, and so is
//! each of its rows on the leaderboard and the site.

mod common;

use common::{causalbench, python3};
use std::path::Path;

/// Writes every command line and environment it can find to stderr, every long
/// number in any file it can read where a harness keeps things, and whether it
/// reached the test's TCP listener (the port is its third argument), then abstains.
const SNOOP_PY: &str = r#"import glob, json, os, re, socket, sys
for f in glob.glob("/proc/[0-9]*/cmdline") + glob.glob("/proc/[0-9]*/environ"):
    try:
        print(f, open(f, "rb").read().replace(b"\0", b" ").decode(errors="replace"), file=sys.stderr)
    except OSError as e:
        print(f, e, file=sys.stderr)
print("env", dict(os.environ), file=sys.stderr)
numbers, readable, tried = set(), 0, 0
for top in ["/tmp", os.getcwd(), os.path.dirname(os.path.dirname(sys.argv[1]))]:
    for root, dirs, files in os.walk(top):
        tried += len(files)
        if tried > 3000:
            break
        for name in files[:200]:
            try:
                text = open(os.path.join(root, name), "rb").read(1 << 16)
            except OSError:
                continue
            readable += 1
            numbers.update(re.findall(rb"[0-9]{8,20}", text)[:100])
print("files", readable, b" ".join(sorted(numbers)[:20000]).decode(), file=sys.stderr)
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[3])), timeout=2)
    print("tcp: CONNECTED", file=sys.stderr)
except OSError as e:
    print("tcp: refused", e, file=sys.stderr)
view = json.load(open(sys.argv[1]))
json.dump({"schema_version": 1,
           "meta": {"profiler": "x", "version": "1", "view": view["spec"], "wall_ms": 1.0}},
          open(sys.argv[2], "w"))
"#;

fn submit(tools: &Path, out: &Path, extra: &[&str]) -> serde_json::Value {
    let script = tools.join("snoop.py");
    std::fs::write(&script, SNOOP_PY).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let profiler = format!("snoop=python3 {} {{view}} {{out}} {port}", script.display());
    let mut args = vec![
        "submit",
        "--profiler",
        &profiler,
        "--cases",
        "2",
        "--reps",
        "1",
        "--collectors",
        "cupti",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, _, err) = causalbench(&args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_slice(&std::fs::read(out.join("metadata.json")).unwrap()).unwrap()
}

fn logs(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            found.extend(logs(&p));
        } else if p.to_string_lossy().ends_with(".stderr.log") {
            found.push(std::fs::read_to_string(&p).unwrap());
        }
    }
    found
}

/// The materials of the rows of `dir`'s `leaderboard.json`, each once.
fn materials(dir: &Path) -> Vec<String> {
    let board: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("leaderboard.json")).unwrap()).unwrap();
    let mut found: Vec<String> = board["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["material"].as_str().unwrap().to_string())
        .collect();
    found.dedup();
    found
}

#[test]
fn a_hidden_seed_is_nowhere_the_profiler_can_look() {
    if !python3()
        || baselines::sandbox::detect(false).is_err()
        || baselines::sandbox::namespaces_available().is_err()
    {
        eprintln!("skipped: needs python3, Landlock and namespaces");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let hidden = dir.path().join("hidden");
    let meta = submit(tools.path(), &hidden, &["--suite", "test"]);
    assert_eq!(meta["split"]["public"], false, "{meta}");
    let seed = meta["split"]["seed"].as_u64().unwrap().to_string();
    let seen = logs(&hidden.join("logs"));
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|l| l.contains("env {")), "{:?}", seen[0]);
    // It looked through files and tried the network: no seed, no connection.
    assert!(seen.iter().all(|l| l.contains("\nfiles ")), "{:?}", seen[0]);
    assert!(
        seen.iter().all(|l| l.contains("tcp: refused")),
        "{:?}",
        seen[0]
    );
    assert!(
        seen.iter().all(|l| !l.contains(&seed)),
        "the seed {seed} was visible"
    );
    let md = std::fs::read_to_string(hidden.join("leaderboard.md")).unwrap();
    assert!(md.starts_with("> **hidden split"), "{md}");
    // Each row says what it was scored on; no row of a hidden split is marked public.
    assert_eq!(materials(&hidden), ["hidden"]);
    assert!(!md.contains("*(public — memorizable)*"), "{md}");
    let html = std::fs::read_to_string(hidden.join("html/index.html")).unwrap();
    assert!(!html.contains("class=\"public\""), "{html}");
    assert!(html.contains("Ranked on the hidden split only"), "{html}");
    let (code, out, err) = causalbench(&["check", hidden.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("hidden split"), "{out}");
    // Submitted again into the same folder, the split is material the submitter has seen.
    let again = submit(tools.path(), &hidden, &["--suite", "test"]);
    assert_eq!(again["split"]["public"], true, "{again}");
    // A seed given on the command line is public, though the profiler cannot read
    // it from the harness's command line either.
    let given_dir = dir.path().join("given");
    let given = submit(
        tools.path(),
        &given_dir,
        &["--suite", "test", "--split-seed", "8675309123457"],
    );
    assert_eq!(given["split"]["public"], true, "{given}");
    assert_eq!(materials(&given_dir), ["public"]);
    let md = std::fs::read_to_string(given_dir.join("leaderboard.md")).unwrap();
    assert!(md.contains("| snoop *(public — memorizable)* |"), "{md}");
    let html = std::fs::read_to_string(given_dir.join("html/index.html")).unwrap();
    assert!(html.contains("class=\"public\""), "{html}");
    assert!(logs(&given_dir.join("logs"))
        .iter()
        .all(|l| !l.contains("8675309123457")));
    // So is the dev split.
    let dev = dir.path().join("dev");
    assert_eq!(
        submit(tools.path(), &dev, &["--suite", "dev"])["split"]["public"],
        true
    );
    let md = std::fs::read_to_string(dev.join("leaderboard.md")).unwrap();
    assert!(md.starts_with("> **public — memorizable"), "{md}");
}
