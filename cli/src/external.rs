//! External profilers in `causalbench run --profiler NAME=CMD`: parsed once,
//! run isolated on every view of every case (`baselines/PROTOCOL.md`,
//! `docs/integrity.md`), and scored under their given name.

use crate::Failure;
use baselines::sandbox::{self, Isolation};
use baselines::{Confinement, ExternalCommand};
use ground_truth::{Explanation, TraceView};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// One `NAME=CMD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalProfiler {
    pub name: String,
    pub template: String,
}

/// Reads `NAME=CMD`: an identifier (ground_truth::identifier) no built-in profiler has.
pub fn parse(arg: &str) -> Result<ExternalProfiler, Failure> {
    let bad = |why: &str| Failure::input(format!("--profiler `{arg}`: {why} (expected NAME=CMD)"));
    let (name, template) = arg.split_once('=').ok_or_else(|| bad("no `=`"))?;
    let name = name.trim();
    // The name names files (explanations/…/NAME.json, logs/…/NAME.stderr.log):
    // never `.`, `..` or a hidden file.
    if let Some(problem) = ground_truth::identifier::identifier_problem(name) {
        return Err(bad(&format!("NAME: {problem}")));
    }
    if baselines::builtin(name).is_some() || baselines::optional_names().contains(&name) {
        return Err(bad("NAME is taken by a built-in profiler"));
    }
    // The leaderboard lists `probe-*` rows as the floor, not among the profilers.
    if evaluator::is_probe(name) {
        return Err(bad("NAME is reserved for the project's leakage probes"));
    }
    if template.trim().is_empty() {
        return Err(bad("CMD is empty"));
    }
    // A template that cannot be split fails now, not on the first view.
    ExternalCommand::new(template)
        .arguments(Path::new("view"), Path::new("out"))
        .map_err(|e| bad(&e.to_string()))?;
    Ok(ExternalProfiler {
        name: name.to_string(),
        template: template.to_string(),
    })
}

/// The external profilers of a run and how they are run.
pub struct Externals {
    pub profilers: Vec<ExternalProfiler>,
    pub isolation: Option<Isolation>,
    pub timeout: Duration,
    /// The collectors whose views they are run on (all when empty).
    pub collectors: Vec<ground_truth::Collectors>,
    /// The modes whose views they are run on (all when empty).
    pub modes: Vec<ground_truth::Mode>,
    /// [`Externals::programs`], computed once per run.
    programs: std::sync::OnceLock<BTreeMap<String, serde_json::Value>>,
    /// The lanes drawn so far ([`Externals::lane_of`]): per family instance, each
    /// variant's.
    lanes: Mutex<HashMap<(String, Option<u64>), Vec<(String, u32)>>>,
}

/// Lanes a family instance's first variant is drawn among: at least as many as an
/// instance has variants (docs/scenario-space.md: two or three).
const LANES: u32 = 3;

impl Externals {
    /// No external profiler (the jobs of tests).
    #[cfg(test)]
    pub fn none() -> Externals {
        Externals {
            profilers: Vec::new(),
            isolation: None,
            timeout: baselines::external::DEFAULT_TIMEOUT,
            collectors: Vec::new(),
            modes: Vec::new(),
            programs: std::sync::OnceLock::new(),
            lanes: Mutex::default(),
        }
    }

    /// Parses the `--profiler` arguments and decides isolation once, warning loudly when there is none.
    pub fn new(
        args: &[String],
        allow_unisolated: bool,
        timeout: Duration,
    ) -> Result<Externals, Failure> {
        let profilers: Vec<ExternalProfiler> =
            args.iter().map(|a| parse(a)).collect::<Result<_, _>>()?;
        let mut seen = std::collections::HashSet::new();
        if let Some(p) = profilers.iter().find(|p| !seen.insert(&p.name)) {
            return Err(Failure::input(format!(
                "--profiler: `{}` is given twice",
                p.name
            )));
        }
        let isolation = if profilers.is_empty() {
            None
        } else {
            let isolation = sandbox::detect(allow_unisolated).map_err(Failure::input)?;
            if isolation == Isolation::Unisolated {
                eprintln!(
                    "causalbench: WARNING: this kernel has no usable Landlock: external profilers run \
                     UNISOLATED and could read bundles (the ground truth) and other views. \
                     This is recorded in manifest.json and leaderboard.md."
                );
            }
            Some(isolation)
        };
        Ok(Externals {
            profilers,
            isolation,
            timeout,
            collectors: Vec::new(),
            modes: Vec::new(),
            programs: std::sync::OnceLock::new(),
            lanes: Mutex::default(),
        })
    }

    /// Whether the external profilers are run on views of this kind.
    pub fn reads_view(&self, spec: &ground_truth::ViewSpec) -> bool {
        (self.collectors.is_empty() || self.collectors.contains(&spec.collectors))
            && (self.modes.is_empty() || self.modes.contains(&spec.mode))
    }

    /// The lane of `bundle`'s views: a server profiler's process only ever answers views
    /// of one lane ([`baselines::external_server`], PROTOCOL.md "Batch form"). Each
    /// variant of a family instance gets a lane no other variant of it has, drawn at
    /// random, so no process sees two variants of one pair, and which variant a lane
    /// holds says nothing about its label.
    pub fn lane_of(&self, bundle: &ground_truth::Bundle) -> u32 {
        let scenario = &bundle.manifest.scenario;
        let unit = (
            scenario.family.clone(),
            scenario.space.as_ref().map(|p| p.instance),
        );
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        lane_in(lanes.entry(unit).or_default(), &scenario.variant)
    }

    /// What the manifest records: name → template.
    pub fn templates(&self) -> BTreeMap<String, String> {
        self.profilers
            .iter()
            .map(|p| (p.name.clone(), p.template.clone()))
            .collect()
    }

    /// What a finished case's scores depend on, per profiler: its template and the
    /// content (sha256) of every file and directory its command names — the program
    /// as found on `PATH`, a `#!` script's interpreter, a script, a directory of code
    /// given as an argument — so that a rerun after the program changed scores again
    /// (`run`'s resume fingerprint).
    pub fn programs(&self) -> &BTreeMap<String, serde_json::Value> {
        self.programs.get_or_init(|| {
            self.profilers
                .iter()
                .map(|p| {
                    let mut identity = program_identity(&p.template);
                    // The views it is run on: a run narrowed otherwise scores again.
                    if !self.collectors.is_empty() || !self.modes.is_empty() {
                        identity["views"] = serde_json::json!({
                            "collectors": self.collectors,
                            "modes": self.modes,
                        });
                    }
                    (p.name.clone(), identity)
                })
                .collect()
        })
    }

    /// Runs `profiler` on `view`, kept in the file `view_path`, keeping its explanation at
    /// `explanation` and its stderr at `log`, with what the harness measured of the
    /// invocation (for its case score); the results directory `results` stays out of
    /// its reach. A server profiler answers it in the process of its `lane`
    /// ([`Externals::lane_of`]).
    ///
    /// A failure of the program on this view (it failed, hung, or wrote no valid
    /// explanation of it) is its own crash on this case: the explanation returned claims
    /// nothing and says why in `meta.failure` (evaluator/METRICS.md, "Crashes"), so it is
    /// scored, counted and shown as that profiler's, and no other profiler's case
    /// changes. `Err` is a failure of the harness only (it could not start or confine
    /// the program). The explanation's `meta.wall_ms` is the harness's measurement; the
    /// program's own figure is kept beside it as `reported_wall_ms`, its claim.
    pub fn explain(
        &self,
        profiler: &ExternalProfiler,
        view: &TraceView,
        view_path: &Path,
        explanation: &Path,
        log: PathBuf,
        results: &Path,
        lane: u32,
    ) -> Result<(Explanation, Option<evaluator::InvocationCost>), String> {
        let confinement = match self.isolation {
            Some(Isolation::Unisolated) => Confinement::IsolatedIfAvailable,
            _ => Confinement::Isolated,
        };
        let (result, cost) = ExternalCommand::new(&profiler.template)
            .with_timeout(self.timeout)
            .with_confinement(confinement)
            .protecting(results)
            .with_stderr_log(&log)
            .in_lane(lane)
            .run_measured(view, view_path, explanation);
        let wall_ms = cost.map_or(0.0, |c| c.wall_ms);
        let (mut e, reported_wall_ms) = match result {
            Ok(e) => {
                let reported = e.meta.wall_ms;
                (e, Some(reported))
            }
            Err(err) if err.is_the_programs() => {
                eprintln!(
                    "causalbench: {}: {}: {err} (its stderr is in {}); counted as its crash on this case",
                    profiler.name,
                    view.spec.label(),
                    log.display()
                );
                let summary = err.summary(explanation);
                let failed = baselines::external::failure_explanation(
                    view,
                    &profiler.name,
                    &summary,
                    wall_ms,
                );
                (failed, None)
            }
            Err(err) => return Err(format!("{err} (its stderr is in {})", log.display())),
        };
        // The harness names the row and times it: a profiler can pass for no other,
        // nor claim another cost.
        e.meta.profiler = profiler.name.clone();
        e.meta.wall_ms = wall_ms;
        let invocation = cost.map(|c| evaluator::InvocationCost {
            wall_ms: c.wall_ms,
            cpu_ms: c.cpu_ms,
            max_rss_kib: c.max_rss_kib,
            reported_wall_ms: reported_wall_ms.filter(|m| m.is_finite()),
        });
        Ok((e, invocation))
    }
}

/// The lane of `variant` among the lanes its instance's variants `taken` so far: its
/// own when it has one, else one no other variant has, at random among the first free
/// ones ([`LANES`] of them for the first variant).
fn lane_in(taken: &mut Vec<(String, u32)>, variant: &str) -> u32 {
    if let Some((_, lane)) = taken.iter().find(|(v, _)| v == variant) {
        return *lane;
    }
    let free: Vec<u32> = (0..)
        .filter(|l| !taken.iter().any(|(_, t)| t == l))
        .take((LANES as usize).saturating_sub(taken.len()).max(1))
        .collect();
    let lane = free[rand::random_range(0..free.len())];
    taken.push((variant.to_string(), lane));
    lane
}

/// A template and the content of what it names ([`Externals::programs`]).
fn program_identity(template: &str) -> serde_json::Value {
    let args = ExternalCommand::new(template)
        .arguments(Path::new("{view}"), Path::new("{out}"))
        .unwrap_or_default();
    let mut named: BTreeMap<String, String> = BTreeMap::new();
    let program = args.first().and_then(|p| sandbox::resolve_program(p));
    let interpreter = program.as_deref().and_then(sandbox::interpreter_of);
    let paths = program
        .into_iter()
        .chain(interpreter)
        .chain(args.iter().skip(1).map(PathBuf::from));
    for path in paths {
        let key = path.display().to_string();
        if named.contains_key(&key) {
            continue;
        }
        if path.is_file() {
            named.insert(
                key,
                crate::manifest::sha256_file(&path).unwrap_or_else(|e| e),
            );
        } else if path.is_dir() {
            named.insert(key, tree_sha256(&path));
        }
    }
    serde_json::json!({ "template": template, "content_sha256": named })
}

/// Most files of a directory of code that are hashed; beyond, the count stands for them.
const MAX_TREE_FILES: usize = 100_000;

/// One sha256 over a directory's regular files (relative path and content, in order;
/// links are not followed).
fn tree_sha256(dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() => files.push(entry.path()),
                _ => {}
            }
        }
        if files.len() > MAX_TREE_FILES {
            break;
        }
    }
    files.sort();
    let mut h = Sha256::new();
    h.update(files.len().to_le_bytes());
    for f in files.iter().take(MAX_TREE_FILES) {
        h.update(
            f.strip_prefix(dir)
                .unwrap_or(f)
                .as_os_str()
                .as_encoded_bytes(),
        );
        h.update([0]);
        if let Ok(mut file) = std::fs::File::open(f) {
            let _ = std::io::copy(&mut file, &mut h);
        }
        h.update([0]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variants_of_an_instance_get_lanes_of_their_own() {
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let mut taken = Vec::new();
            let a = lane_in(&mut taken, "a");
            let b = lane_in(&mut taken, "b");
            let c = lane_in(&mut taken, "c");
            assert!(a != b && b != c && a != c, "{a} {b} {c}");
            assert_eq!(lane_in(&mut taken, "b"), b, "a variant keeps its lane");
            assert!(a < LANES && b < LANES && c < LANES);
            seen.insert(a);
        }
        // Which lane the first variant gets is drawn, not fixed by its name or order.
        assert_eq!(seen.len(), LANES as usize);
    }

    #[test]
    fn parses_name_and_command() {
        let p = parse("mine=python3 my.py {view} {out}").unwrap();
        assert_eq!(p.name, "mine");
        assert_eq!(p.template, "python3 my.py {view} {out}");
        for bad in [
            "mine",
            "=x",
            "a b=x",
            "causal-graph=x",
            "mine=",
            "mine=x 'open",
            ".=x",
            "..=x",
            ".hidden=x",
            "-opt=x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
