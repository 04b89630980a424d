//! `causalbench agreement`: how far two backends agree on the same generated
//! scenarios (docs/scenario-space.md, "Simulator against GPU"). Cases are
//! matched by scenario name; for each axis bucket it reports how often the
//! label check reached the same verdict, how the symptoms' lateness compares,
//! and how often each profiler's verdict (correct or not) is the same on both.

use crate::Failure;
use ground_truth::io::Readable;
use ground_truth::scenario::AxisValue;
use ground_truth::Bundle;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `causalbench agreement`'s options.
#[derive(clap::Args)]
pub struct AgreementArgs {
    /// Results directory of the first backend (e.g. `run --suite dev --backend sim`).
    #[arg(long)]
    pub a: PathBuf,
    /// Its bundles (default: A/bundles).
    #[arg(long)]
    pub a_bundles: Option<PathBuf>,
    /// Results directory of the second backend (e.g. `run --corpus` of a GPU corpus).
    #[arg(long)]
    pub b: PathBuf,
    /// Its bundles (default: B/bundles; for a replayed corpus, the corpus directory).
    #[arg(long)]
    pub b_bundles: Option<PathBuf>,
    /// Write the report here as well as printing it.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// What one backend says of one scenario.
struct Side {
    verdict: String,
    lateness_us: f64,
    axes: BTreeMap<String, AxisValue>,
    backend: String,
}

/// Agreement counts of one axis bucket.
#[derive(Default)]
struct Tally {
    cases: usize,
    same_verdict: usize,
    lateness_ratios: Vec<f64>,
    /// Per profiler: (compared, same verdict).
    profilers: BTreeMap<String, (usize, usize)>,
}

pub fn agreement(args: &AgreementArgs) -> Result<(), Failure> {
    let a = sides(args.a_bundles.as_deref().unwrap_or(&args.a.join("bundles")))?;
    let b = sides(args.b_bundles.as_deref().unwrap_or(&args.b.join("bundles")))?;
    let verdicts = |dir: &Path| -> Result<BTreeMap<(String, String), bool>, Failure> {
        let path = evaluator::scores_in(dir);
        let scores = evaluator::read_scores(&path).map_err(|e| Failure::input(e.to_string()))?;
        Ok(scores
            .into_iter()
            .filter(|c| c.view == "combined-instrumented-none")
            .map(|c| ((c.scenario.clone(), c.profiler.clone()), c.all_correct()))
            .collect())
    };
    let (va, vb) = (verdicts(&args.a)?, verdicts(&args.b)?);
    let mut tallies: BTreeMap<(String, String), Tally> = BTreeMap::new();
    let mut matched = 0;
    let backends = (
        a.values()
            .next()
            .map(|s| s.backend.clone())
            .unwrap_or_default(),
        b.values()
            .next()
            .map(|s| s.backend.clone())
            .unwrap_or_default(),
    );
    for (name, sa) in &a {
        let Some(sb) = b.get(name) else { continue };
        matched += 1;
        let mut buckets = vec![("all".to_string(), "all".to_string())];
        buckets.extend(sa.axes.iter().map(|(axis, v)| {
            (
                axis.clone(),
                evaluator::bucket(axis, v).map_or_else(|| v.to_string(), |b| b.label),
            )
        }));
        for bucket in buckets {
            let t = tallies.entry(bucket).or_default();
            t.cases += 1;
            t.same_verdict += usize::from(sa.verdict == sb.verdict);
            if sa.lateness_us.abs() > 1.0 {
                t.lateness_ratios.push(sb.lateness_us / sa.lateness_us);
            }
            for ((scenario, profiler), ok_a) in va.range((name.clone(), String::new())..) {
                if scenario != name {
                    break;
                }
                if let Some(ok_b) = vb.get(&(scenario.clone(), profiler.clone())) {
                    let e = t.profilers.entry(profiler.clone()).or_default();
                    e.0 += 1;
                    e.1 += usize::from(ok_a == ok_b);
                }
            }
        }
    }
    if matched == 0 {
        return Err(Failure::input(format!(
            "no scenario is in both {} and {}: nothing to compare",
            args.a.display(),
            args.b.display()
        )));
    }
    let text = render(&tallies, matched, &backends);
    println!("{text}");
    if let Some(out) = &args.out {
        ground_truth::io::write_atomic(out, text.as_bytes())
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", out.display())))?;
    }
    Ok(())
}

/// Every generated bundle of `dir` by scenario name (the first repetition).
fn sides(dir: &Path) -> Result<BTreeMap<String, Side>, Failure> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Failure::input(format!("{}: cannot read bundles: {e}", dir.display())))?;
    let mut out = BTreeMap::new();
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    for path in files {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !(name.ends_with(".bundle.json") || name.ends_with(".bundle.json.gz")) {
            continue;
        }
        let bundle = Bundle::read(&path).map_err(|e| Failure::input(e.to_string()))?;
        let Some(space) = bundle.manifest.scenario.space.clone() else {
            continue;
        };
        let Some(symptom) = bundle.ground_truth.symptoms.first() else {
            continue;
        };
        let verdict = symptom
            .label
            .as_ref()
            .map_or("unchecked", |l| l.verdict.as_str())
            .to_string();
        out.entry(bundle.manifest.scenario.name.clone())
            .or_insert(Side {
                verdict,
                lateness_us: symptom.lateness_ns / 1e3,
                axes: space.axes,
                backend: bundle.manifest.backend.clone(),
            });
    }
    Ok(out)
}

fn render(
    tallies: &BTreeMap<(String, String), Tally>,
    matched: usize,
    backends: &(String, String),
) -> String {
    let profilers: std::collections::BTreeSet<&String> =
        tallies.values().flat_map(|t| t.profilers.keys()).collect();
    let mut s = format!(
        "# Agreement: {} against {}\n\n{matched} generated scenarios recorded on both. `label`: the \
         label check reached the same verdict (kept, relabelled none, dropped, indeterminate); `lateness`: median \
         of the symptom's lateness on {} over {}; per profiler: the same verdict (correct or wrong) \
         in the combined/instrumented view, over the cases both scored.\n\n| axis | bucket | cases | label | lateness |",
        backends.1, backends.0, backends.1, backends.0
    );
    for p in &profilers {
        s.push_str(&format!(" {p} |"));
    }
    s.push_str("\n|---|---|---|---|---|");
    for _ in &profilers {
        s.push_str("---|");
    }
    s.push('\n');
    for ((axis, bucket), t) in tallies {
        let mut ratios = t.lateness_ratios.clone();
        ratios.sort_by(f64::total_cmp);
        let median = ratios
            .get(ratios.len() / 2)
            .map_or("—".to_string(), |m| format!("{m:.2}"));
        s.push_str(&format!(
            "| {axis} | {bucket} | {} | {:.2} | {median} |",
            t.cases,
            t.same_verdict as f64 / t.cases as f64
        ));
        for p in &profilers {
            match t.profilers.get(*p) {
                Some(&(n, same)) if n > 0 => {
                    s.push_str(&format!(" {:.2} ({n}) |", same as f64 / n as f64))
                }
                _ => s.push_str(" — |"),
            }
        }
        s.push('\n');
    }
    s
}
