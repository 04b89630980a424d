//! Bad input of every format gives exit code 2 and a message naming the file
//! and the place (JSON path or line), never a panic.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_causalbench"))
}

struct Outcome {
    code: i32,
    stderr: String,
}

fn run(args: &[&str]) -> Outcome {
    let out = bin().args(args).output().expect("runs");
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn catalog(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../catalog")
        .join(name)
}

fn good_scenario() -> String {
    std::fs::read_to_string(catalog("late-launch-vs-device-queueing.occupancy-hog.yaml")).unwrap()
}

/// Records a good bundle, its view and an explanation into `dir`.
fn pipeline(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (b, v, e) = (dir.join("b.json"), dir.join("v.json"), dir.join("e.json"));
    let sc = catalog("late-launch-vs-device-queueing.occupancy-hog.yaml");
    assert_eq!(
        run(&[
            "record",
            "--scenario",
            sc.to_str().unwrap(),
            "--backend",
            "sim",
            "--out",
            b.to_str().unwrap()
        ])
        .code,
        0
    );
    let r = view(&b, &v);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(&[
        "profile",
        "--profiler",
        "causal-graph",
        "--view",
        v.to_str().unwrap(),
        "--out",
        e.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    (b, v, e)
}

/// `causalbench view` of `bundle`, combined and instrumented, into `out`.
fn view(bundle: &Path, out: &Path) -> Outcome {
    run(&[
        "view",
        "--bundle",
        bundle.to_str().unwrap(),
        "--collectors",
        "combined",
        "--mode",
        "instrumented",
        "--out",
        out.to_str().unwrap(),
    ])
}

fn expect_bad(o: Outcome, file: &Path, place: &str) {
    assert_eq!(o.code, 2, "exit code; stderr: {}", o.stderr);
    assert!(
        o.stderr.contains(&file.display().to_string()),
        "names the file: {}",
        o.stderr
    );
    assert!(
        o.stderr.contains(place),
        "names the place `{place}`: {}",
        o.stderr
    );
    assert!(!o.stderr.contains("panicked"), "no panic: {}", o.stderr);
}

fn bad_scenario(text: &str, place: &str) {
    let d = tmp();
    let f = d.path().join("bad.yaml");
    std::fs::write(&f, text).unwrap();
    let out = d.path().join("b.json");
    expect_bad(
        run(&[
            "record",
            "--scenario",
            f.to_str().unwrap(),
            "--backend",
            "sim",
            "--out",
            out.to_str().unwrap(),
        ]),
        &f,
        place,
    );
}

#[test]
fn scenario_truncated() {
    let s = good_scenario();
    bad_scenario(&s[..s.len() / 2], "line");
}

#[test]
fn scenario_wrong_type() {
    bad_scenario(
        &good_scenario().replace("repetitions: 3", "repetitions: three"),
        ".repetitions",
    );
}

#[test]
fn scenario_unknown_key() {
    bad_scenario(
        &good_scenario().replace("mode: instrumented", "mode: instrumented\ncolour: blue"),
        "unknown field `colour`",
    );
}

#[test]
fn scenario_unknown_kind() {
    bad_scenario(
        &good_scenario().replace("kind: occupancy_pressure", "kind: cosmic_rays"),
        ".injection.kind",
    );
}

#[test]
fn scenario_dangling_reference() {
    bad_scenario(
        &good_scenario().replace("stream: compute, name: gemm", "stream: nowhere, name: gemm"),
        ".programs[0].steps[2].stream",
    );
}

#[test]
fn scenario_duplicate_ids() {
    bad_scenario(
        &good_scenario().replace("id: prep", "id: gemm"),
        ".programs[0].steps[2].id",
    );
}

#[test]
fn scenario_graph_cycle() {
    let text = std::fs::read_to_string(catalog("graph-replay-vs-direct-launch.graph-replay.yaml"))
        .unwrap()
        .replace("      - id: gemm\n        kernel: {name: gemm, duration_us: 500}", "      - id: gemm\n        kernel: {name: gemm, duration_us: 500}\n        after: [norm]");
    bad_scenario(&text, ".graphs[0].nodes[0].after[0]");
}

fn bad_json(kind: &str, mutate: impl Fn(&mut serde_json::Value), place: &str) {
    let d = tmp();
    let (b, v, e) = pipeline(d.path());
    let target = match kind {
        "bundle" => &b,
        "view" => &v,
        _ => &e,
    };
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(target).unwrap()).unwrap();
    mutate(&mut value);
    std::fs::write(target, serde_json::to_vec(&value).unwrap()).unwrap();
    let o = run(&[
        "score",
        "--bundle",
        b.to_str().unwrap(),
        "--view",
        v.to_str().unwrap(),
        "--explanation",
        e.to_str().unwrap(),
    ]);
    expect_bad(o, target, place);
}

#[test]
fn bundle_truncated() {
    let d = tmp();
    let (b, v, e) = pipeline(d.path());
    let bytes = std::fs::read(&b).unwrap();
    std::fs::write(&b, &bytes[..bytes.len() / 3]).unwrap();
    let o = run(&[
        "score",
        "--bundle",
        b.to_str().unwrap(),
        "--view",
        v.to_str().unwrap(),
        "--explanation",
        e.to_str().unwrap(),
    ]);
    expect_bad(o, &b, "line 1");
}

#[test]
fn bundle_wrong_type() {
    bad_json(
        "bundle",
        |v| v["manifest"]["repetition"] = "first".into(),
        ".manifest.repetition",
    );
}

#[test]
fn bundle_unknown_record_kind() {
    bad_json(
        "bundle",
        |v| v["trace"][3]["kind"] = "telepathy".into(),
        ".trace[3]",
    );
}

#[test]
fn bundle_dangling_edge() {
    bad_json(
        "bundle",
        |v| v["ground_truth"]["edges"][0]["dst"] = 999_999.into(),
        ".ground_truth.edges[0].dst",
    );
}

#[test]
fn bundle_duplicate_rid() {
    bad_json(
        "bundle",
        |v| {
            let rid = v["trace"][0]["rid"].clone();
            v["trace"][1]["rid"] = rid;
        },
        ".trace[1].rid",
    );
}

#[test]
fn bundle_cycle() {
    bad_json(
        "bundle",
        |v| {
            let e = v["ground_truth"]["edges"][0].clone();
            let back =
                serde_json::json!({"src": e["dst"], "dst": e["src"], "type": "stream_order"});
            v["ground_truth"]["edges"]
                .as_array_mut()
                .unwrap()
                .push(back);
        },
        "cycle",
    );
}

#[test]
fn view_wrong_type() {
    bad_json(
        "view",
        |v| v["spec"]["collectors"] = 3.into(),
        ".spec.collectors",
    );
}

#[test]
fn view_duplicate_rid() {
    bad_json(
        "view",
        |v| {
            let r = v["records"][0].clone();
            v["records"].as_array_mut().unwrap().push(r);
        },
        "duplicate rid",
    );
}

#[test]
fn view_dangling_query() {
    bad_json(
        "view",
        |v| v["queries"][0]["rid"] = 1_234_567_890u64.into(),
        ".queries[0].rid",
    );
}

#[test]
fn explanation_unknown_evidence() {
    bad_json(
        "explanation",
        |v| v["edges"][0]["evidence"] = "vibes".into(),
        ".edges[0].evidence",
    );
}

#[test]
fn explanation_bad_confidence() {
    bad_json(
        "explanation",
        |v| v["edges"][0]["confidence"] = 1.5.into(),
        ".edges[0].confidence",
    );
}

#[test]
fn explanation_duplicate_diagnosis() {
    bad_json(
        "explanation",
        |v| {
            let d = v["diagnoses"][0].clone();
            v["diagnoses"].as_array_mut().unwrap().push(d);
        },
        ".diagnoses[1].query",
    );
}

#[test]
fn bundle_duplicate_symptom_id() {
    let duplicate = |v: &mut serde_json::Value| {
        let s = v["ground_truth"]["symptoms"][0].clone();
        v["ground_truth"]["symptoms"]
            .as_array_mut()
            .unwrap()
            .push(s);
    };
    bad_json("bundle", duplicate, ".ground_truth.symptoms[1].id");
    // `view` refuses it too, so it never writes a view its own reader rejects.
    let d = tmp();
    let (b, _, _) = pipeline(d.path());
    let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(&b).unwrap()).unwrap();
    duplicate(&mut value);
    std::fs::write(&b, serde_json::to_vec(&value).unwrap()).unwrap();
    let out = d.path().join("dup-view.json");
    expect_bad(view(&b, &out), &b, ".ground_truth.symptoms[1].id");
    assert!(!out.exists());
}

/// `record --backend sim` of a scenario whose times would wrap nanosecond
/// timestamps: refused, naming the place, never recorded or clamped.
#[test]
fn record_refuses_times_past_the_nanosecond_range() {
    for (from, to, place) in [
        (
            "duration_us: 300",
            "duration_us: 1e16",
            ".programs[0].steps[2].duration_us",
        ),
        (
            "magnitude_us: 5000",
            "magnitude_us: 1e17",
            ".injection.magnitude_us",
        ),
    ] {
        let text = good_scenario();
        assert!(text.contains(from), "{from}");
        bad_scenario(&text.replacen(from, to, 1), place);
    }
}

#[test]
fn explanation_negative_wall_ms() {
    for wall in [-1e308, -1.0] {
        bad_json(
            "explanation",
            |v| v["meta"]["wall_ms"] = wall.into(),
            ".meta.wall_ms",
        );
    }
}

#[test]
fn explanation_for_another_view() {
    bad_json(
        "explanation",
        |v| v["meta"]["view"]["collectors"] = "host".into(),
        ".meta.view",
    );
}

#[test]
fn explanation_answers_a_query_the_view_lacks() {
    bad_json(
        "explanation",
        |v| v["diagnoses"][0]["query"] = "no-such-query".into(),
        ".diagnoses[0].query",
    );
}

#[test]
fn explanation_names_rids_the_view_lacks() {
    let absent = u64::MAX / 2;
    bad_json(
        "explanation",
        |v| v["edges"][0]["dst"] = absent.into(),
        ".edges[0].dst",
    );
    bad_json(
        "explanation",
        |v| v["diagnoses"][0]["critical_path"][0] = absent.into(),
        ".diagnoses[0].critical_path[0]",
    );
    bad_json(
        "explanation",
        |v| v["attribution"][0]["rid"] = absent.into(),
        ".attribution[0].rid",
    );
}

/// A machine without the CUDA backend refuses `--backend cuda` with exit 2 in
/// every subcommand (docs/cli.md, exit codes), before writing anything.
#[test]
fn unavailable_backend_exits_2_everywhere() {
    if gpu_present() {
        eprintln!("skipped: this machine has a usable GPU");
        return;
    }
    let d = tmp();
    let sc = catalog("late-launch-vs-device-queueing.occupancy-hog.yaml");
    let out = d.path().join("out");
    let (sc, out) = (sc.to_str().unwrap(), out.to_str().unwrap());
    for args in [
        vec![
            "record",
            "--scenario",
            sc,
            "--backend",
            "cuda",
            "--out",
            out,
        ],
        vec![
            "run",
            "--backend",
            "cuda",
            "--reps",
            "1",
            "--quiet",
            "--out",
            out,
        ],
        vec!["corpus", "record", "--reps", "1", "--out", out],
        vec![
            "megakernel",
            "run",
            "--backend",
            "cuda",
            "--reps",
            "1",
            "--out",
            out,
        ],
    ] {
        let o = run(&args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(!o.stderr.contains("panicked"), "{args:?}: {}", o.stderr);
    }
}

/// Whether this machine can open the CUDA backend at all.
fn gpu_present() -> bool {
    std::path::Path::new("/dev/nvidiactl").exists() || std::path::Path::new("/dev/nvidia0").exists()
}

/// `run` with nothing to score refuses with exit 2 instead of writing an empty leaderboard.
#[test]
fn run_with_nothing_to_score_exits_2() {
    let d = tmp();
    let empty = d.path().join("empty-corpus");
    std::fs::create_dir_all(&empty).unwrap();
    let out = d.path().join("out");
    let (empty, out_arg) = (empty.to_str().unwrap(), out.to_str().unwrap());
    for (nothing, says) in [
        (["--corpus", empty], "no bundle files"),
        (["--reps", "0"], "--reps"),
    ] {
        let mut args = vec!["run", "--backend", "sim", "--quiet", "--out", out_arg];
        args.extend(nothing);
        let o = run(&args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(says), "{args:?}: {}", o.stderr);
        assert!(!out.join("leaderboard.md").exists());
    }
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&["record"]).code, 2);
    assert_eq!(run(&["schema", "nonsense"]).code, 2);
    assert_eq!(run(&["frobnicate"]).code, 2);
}

#[test]
fn every_subcommand_has_help() {
    for sub in [
        "run", "record", "view", "profile", "score", "why-late", "report", "diff", "schema", "list",
    ] {
        let o = bin().args([sub, "--help"]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{sub} --help");
    }
}

#[test]
fn bundle_node_rid_not_in_trace() {
    bad_json(
        "bundle",
        |v| v["ground_truth"]["nodes"][2]["rids"][0] = 987_654_321u64.into(),
        ".ground_truth.nodes[2].rids[0]",
    );
}

#[test]
fn scenario_past_the_limits() {
    let good = good_scenario();
    let with = |from: &str, to: &str| {
        assert!(good.contains(from), "{from}");
        good.replacen(from, to, 1)
    };
    bad_scenario(
        &with(
            "name: late-launch-vs-device-queueing.occupancy-hog",
            "name: ../../escape",
        ),
        ".name",
    );
    bad_scenario(
        &with("requests: 3", "requests: 10000000"),
        "over the limit of 12000000",
    );
}

#[test]
fn a_gzip_bomb_is_refused_naming_the_limit() {
    use std::io::Write;
    let d = tmp();
    let f = d.path().join("b.bundle.json.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(b"{").unwrap();
    for _ in 0..256 {
        enc.write_all(&[b' '; 1 << 16]).unwrap();
    }
    std::fs::write(&f, enc.finish().unwrap()).unwrap();
    let out = d.path().join("v.json");
    expect_bad(
        run(&[
            "view",
            "--bundle",
            f.to_str().unwrap(),
            "--collectors",
            "combined",
            "--mode",
            "instrumented",
            "--out",
            out.to_str().unwrap(),
        ]),
        &f,
        "the limit of a gzip stream's expansion",
    );
}

#[test]
fn two_scores_on_one_line_are_refused_with_the_line() {
    let d = tmp();
    let f = d.path().join("scores.jsonl");
    std::fs::write(&f, "{} {}\n").unwrap();
    expect_bad(
        run(&["report", "--results", d.path().to_str().unwrap()]),
        &f,
        "line 1",
    );
}

#[test]
fn huge_repetitions_are_refused_before_anything_runs() {
    let d = tmp();
    let o = run(&[
        "run",
        "--backend",
        "sim",
        "--reps",
        "1000000000",
        "--out",
        d.path().to_str().unwrap(),
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("10000"), "{}", o.stderr);
}
