//! docs/scale-out.md's Slurm recipe, run on a real (single-node) Slurm: a throw-away
//! cluster (`scripts/slurm/single-node.sh`: slurmctld + slurmd on localhost, munge),
//! the suite submitted as an array job of `scripts/slurm/causalbench-shard.sbatch` (one
//! shard per task, `run --shard K/N`), `scripts/slurm/causalbench-merge.sbatch` after
//! it (`report --merge`), and the merge compared with the unsharded run. Skipped with a
//! message unless Slurm and munge are installed and this runs as root, or
//! CAUSALBENCH_REQUIRE_SLURM=1 (CI), which turns the skip into a failure.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tiny suite: CI's time stays flat.
const SCENARIOS: &[&str] = &[
    "concurrent-work.harmful",
    "concurrent-work.harmless",
    "stale-identity.reused-event",
    "stale-identity.stale-handle",
];
const SHARDS: u32 = 3;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Why Slurm cannot run here, if it cannot.
fn missing() -> Option<String> {
    let found = |tool: &str| {
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
            .any(|dir| dir.join(tool).is_file())
    };
    let absent: Vec<&str> = ["munged", "slurmctld", "slurmd", "sbatch", "sinfo"]
        .into_iter()
        .filter(|t| !found(t))
        .collect();
    if !absent.is_empty() {
        return Some(format!(
            "not installed: {} (apt-get install slurm-wlm munge)",
            absent.join(", ")
        ));
    }
    // SAFETY: geteuid(2) has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (slurmd starts jobs as their submitter)".into());
    }
    None
}

/// The cluster of this test, stopped (its daemons killed by their pid files) on drop.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        // A port of this process: two test runs side by side get two clusters.
        let port = 17000 + (std::process::id() % 2000) * 2;
        let o = Command::new(root().join("scripts/slurm/single-node.sh"))
            .arg("start")
            .arg(dir)
            .env("SLURM_TEST_PORT", port.to_string())
            .output()
            .unwrap();
        let cluster = Cluster {
            dir: dir.to_path_buf(),
            conf: dir.join("slurm.conf"),
        };
        assert!(
            o.status.success(),
            "single-node.sh start: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        cluster
    }

    /// A Slurm client command of this cluster, in `work`, with the recipe's settings.
    fn client(&self, tool: &str, work: &Path, runs: &Path, run_args: &str) -> Command {
        let mut c = Command::new(tool);
        let path = format!(
            "{}:/usr/sbin:/sbin",
            std::env::var("PATH").unwrap_or_default()
        );
        c.current_dir(work)
            .env("PATH", path)
            .env("SLURM_CONF", &self.conf)
            .env("CAUSALBENCH", env!("CARGO_BIN_EXE_causalbench"))
            .env("CAUSALBENCH_RUNS", runs)
            .env("CAUSALBENCH_RUN_ARGS", run_args);
        c
    }

    /// Waits until `job` has ended; its `scontrol show job` line. (`sbatch --wait`
    /// would do, but it polls at growing intervals, up to 30 s after the job ended.)
    fn wait_for(&self, job: &str, work: &Path) -> String {
        // A bound on a hung cluster, not a timing expectation: the jobs take seconds.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(900);
        loop {
            let o = self
                .client("scontrol", work, work, "")
                .args(["show", "job", "-o", job])
                .output()
                .unwrap();
            let line = String::from_utf8_lossy(&o.stdout).to_string();
            let ended = [
                "COMPLETED",
                "FAILED",
                "CANCELLED",
                "TIMEOUT",
                "NODE_FAIL",
                "OUT_OF_MEMORY",
            ]
            .iter()
            .any(|s| line.contains(&format!("JobState={s}")));
            if ended {
                return line;
            }
            assert!(
                std::time::Instant::now() < give_up,
                "job {job} has not ended after 15 minutes: {line}\n{}",
                self.logs(work)
            );
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }

    fn logs(&self, work: &Path) -> String {
        let mut text = String::new();
        for dir in [work.join("logs"), self.dir.clone()] {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "log" || x == "out") {
                    let body = std::fs::read_to_string(&p).unwrap_or_default();
                    let tail: Vec<&str> = body.lines().rev().take(15).collect();
                    text.push_str(&format!("--- {}\n", p.display()));
                    for line in tail.into_iter().rev() {
                        text.push_str(line);
                        text.push('\n');
                    }
                }
            }
        }
        text
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(root().join("scripts/slurm/single-node.sh"))
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

/// JSON with every measured wall time taken out (it differs between any two runs).
fn without_timing(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| k != "analysis_ms" && k != "mean_analysis_ms")
                .map(|(k, v)| (k, without_timing(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_timing).collect()),
        other => other,
    }
}

fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| without_timing(serde_json::from_str(l).unwrap()))
        .collect()
}

#[test]
fn a_slurm_array_job_of_shards_merges_into_the_unsharded_run() {
    if let Some(why) = missing() {
        let msg = format!(
            "SKIPPED: no single-node Slurm here: {why} (CAUSALBENCH_REQUIRE_SLURM=1 turns this \
             skip into a failure)"
        );
        if std::env::var("CAUSALBENCH_REQUIRE_SLURM").is_ok_and(|v| v == "1") {
            panic!("{msg}");
        }
        eprintln!("{msg}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    for name in SCENARIOS {
        let file = format!("{name}.yaml");
        std::fs::copy(root().join("catalog").join(&file), suite.join(&file)).unwrap();
    }
    let run_args = format!(
        "--backend sim --suite {} --profilers builtin --reps 1 --megakernel-reps 1",
        suite.display()
    );
    let (work, runs) = (tmp.path().join("work"), tmp.path().join("runs"));
    std::fs::create_dir_all(work.join("logs")).unwrap();
    let cluster = Cluster::start(&tmp.path().join("slurm"));

    // docs/scale-out.md: the array, then the merge after it.
    let o = cluster
        .client("sbatch", &work, &runs, &run_args)
        .args(["--parsable", &format!("--array=1-{SHARDS}")])
        .arg(root().join("scripts/slurm/causalbench-shard.sbatch"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "sbatch: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let job = String::from_utf8_lossy(&o.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    assert!(job.parse::<u64>().is_ok(), "job id `{job}`");
    let o = cluster
        .client("sbatch", &work, &runs, &run_args)
        .args(["--parsable", &format!("--dependency=afterok:{job}")])
        .arg(root().join("scripts/slurm/causalbench-merge.sbatch"))
        .arg(&job)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "sbatch: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let merge_job = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let state = cluster.wait_for(&merge_job, &work);
    assert!(
        state.contains("JobState=COMPLETED") && state.contains("ExitCode=0:0"),
        "the merge job did not complete: {state}\n{}",
        cluster.logs(&work)
    );
    let run_dir = runs.join(format!("run-{job}"));
    for k in 1..=SHARDS {
        let manifest = run_dir.join(format!("shard-{k}")).join("manifest.json");
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
        assert_eq!(m["shard"]["index"], k, "{}", manifest.display());
        assert_eq!(m["shard"]["count"], SHARDS);
    }
    let merged = run_dir.join("merged");

    // The same suite, unsharded, on this machine.
    let whole = tmp.path().join("whole");
    let mut args: Vec<String> = vec!["run".into(), "--quiet".into(), "--out".into()];
    args.push(whole.display().to_string());
    args.extend(run_args.split_whitespace().map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = common::causalbench(&args);
    assert_eq!(code, 0, "{err}");

    assert_eq!(
        json_lines(&whole.join("scores.jsonl")),
        json_lines(&merged.join("scores.jsonl")),
        "scores.jsonl: the merge is not the unsharded run"
    );
    let leaderboard = |dir: &Path| {
        without_timing(
            serde_json::from_slice(&std::fs::read(dir.join("leaderboard.json")).unwrap()).unwrap(),
        )
    };
    assert_eq!(leaderboard(&whole), leaderboard(&merged));
    assert_eq!(
        std::fs::read(whole.join("axes.csv")).unwrap(),
        std::fs::read(merged.join("axes.csv")).unwrap()
    );
    drop(cluster);
}
