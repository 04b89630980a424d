//! External profilers in `causalbench run --profiler NAME=CMD`: parsed once,
//! run isolated on every view of every case (`baselines/PROTOCOL.md`,
//! `docs/integrity.md`), and scored under their given name.

use crate::Failure;
use baselines::sandbox::{self, Isolation};
use baselines::{Confinement, ExternalCommand};
use ground_truth::{Explanation, TraceView};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One `NAME=CMD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalProfiler {
    pub name: String,
    pub template: String,
}

/// Reads `NAME=CMD`: a name of letters, digits, `.`, `_` and `-` that no built-in profiler has.
pub fn parse(arg: &str) -> Result<ExternalProfiler, Failure> {
    let bad = |why: &str| Failure::input(format!("--profiler `{arg}`: {why} (expected NAME=CMD)"));
    let (name, template) = arg.split_once('=').ok_or_else(|| bad("no `=`"))?;
    let name = name.trim();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(bad("NAME must be letters, digits, `.`, `_` or `-`"));
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
}

impl Externals {
    /// No external profiler (the jobs of tests).
    #[cfg(test)]
    pub fn none() -> Externals {
        Externals {
            profilers: Vec::new(),
            isolation: None,
            timeout: baselines::external::DEFAULT_TIMEOUT,
            collectors: Vec::new(),
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
        })
    }

    /// Whether the external profilers are run on views of this kind.
    pub fn reads_view(&self, spec: &ground_truth::ViewSpec) -> bool {
        self.collectors.is_empty() || self.collectors.contains(&spec.collectors)
    }

    /// What the manifest records: name → template.
    pub fn templates(&self) -> BTreeMap<String, String> {
        self.profilers
            .iter()
            .map(|p| (p.name.clone(), p.template.clone()))
            .collect()
    }

    /// Runs `profiler` on `view`, kept in the file `view_path`, keeping its explanation at
    /// `explanation` and its stderr at `log`; the results directory `results` stays out of
    /// its reach. An explanation that does not answer `view` fails like a crashed profiler.
    pub fn explain(
        &self,
        profiler: &ExternalProfiler,
        view: &TraceView,
        view_path: &Path,
        explanation: &Path,
        log: PathBuf,
        results: &Path,
    ) -> Result<Explanation, String> {
        let confinement = match self.isolation {
            Some(Isolation::Unisolated) => Confinement::IsolatedIfAvailable,
            _ => Confinement::Isolated,
        };
        let mut e = ExternalCommand::new(&profiler.template)
            .with_timeout(self.timeout)
            .with_confinement(confinement)
            .protecting(results)
            .with_stderr_log(&log)
            .run_on(view, view_path, explanation)
            .map_err(|e| format!("{e} (its stderr is in {})", log.display()))?;
        // The harness names the row: a profiler cannot pass for another.
        e.meta.profiler = profiler.name.clone();
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
