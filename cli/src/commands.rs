//! The single-step subcommands: each reads its inputs with the format readers
//! (bad input ⇒ exit 2 with file and place), does one stage, writes atomically.

use crate::{BackendArg, CollectorsArg, Failure, ModeArg};
use ground_truth::io::Readable;
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Bundle, Collectors, Explanation, Mode, Scenario, TraceView};
use std::path::{Path, PathBuf};

pub fn backend_kind(b: BackendArg) -> generator::BackendKind {
    match b {
        BackendArg::Auto => generator::BackendKind::Auto,
        BackendArg::Cuda => generator::BackendKind::Cuda,
        BackendArg::Sim => generator::BackendKind::Sim,
    }
}

/// The backend `backend` asks for; a backend this machine lacks is exit 2.
pub fn open_backend(backend: BackendArg) -> Result<Box<dyn generator::Backend>, Failure> {
    generator::select_backend(backend_kind(backend)).map_err(|e| match e {
        generator::RecordError::Unavailable(..) => Failure::unavailable(e),
        other => Failure::failed(other),
    })
}

fn write<T: Readable>(value: &T, out: &Path) -> Result<(), Failure> {
    value
        .write(out)
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", out.display())))
}

pub fn record(
    scenario: &Path,
    backend: BackendArg,
    repetition: u32,
    seed: Option<u64>,
    out: &Path,
) -> Result<(), Failure> {
    let mut sc = Scenario::read(scenario)?;
    if let Some(s) = seed {
        sc.seed = s;
    }
    let be = open_backend(backend)?;
    let t = std::time::Instant::now();
    let bundle = be.record(&sc, repetition).map_err(Failure::input)?;
    write(&bundle, out)?;
    eprintln!(
        "recorded {} on {} in {:.3} s: {} nodes, {} edges, {} records -> {}",
        bundle.id(),
        be.name(),
        t.elapsed().as_secs_f64(),
        bundle.ground_truth.nodes.len(),
        bundle.ground_truth.edges.len(),
        bundle.trace.len(),
        out.display()
    );
    Ok(())
}

pub fn view_spec(
    collectors: CollectorsArg,
    mode: ModeArg,
    loss: Option<f64>,
    targeted: bool,
    seed: u64,
) -> Result<ViewSpec, Failure> {
    let collectors = match collectors {
        CollectorsArg::Cupti => Collectors::Cupti,
        CollectorsArg::Host => Collectors::Host,
        CollectorsArg::Combined => Collectors::Combined,
        CollectorsArg::Kineto => Collectors::Kineto,
        CollectorsArg::KinetoHost => Collectors::KinetoHost,
    };
    let mode = match mode {
        ModeArg::Instrumented => Mode::Instrumented,
        ModeArg::Closed => Mode::Closed,
    };
    let loss = match (loss, targeted) {
        (_, true) => LossSpec::Targeted { seed },
        (Some(rate), false) if (0.0..=1.0).contains(&rate) => {
            if rate == 0.0 {
                LossSpec::None
            } else {
                LossSpec::Uniform { rate, seed }
            }
        }
        (Some(rate), false) => {
            return Err(Failure::input(format!(
                "--loss: expected a rate in [0, 1], found {rate}"
            )))
        }
        (None, false) => LossSpec::None,
    };
    Ok(ViewSpec {
        collectors,
        mode,
        loss,
    })
}

pub fn view(
    bundle: &Path,
    spec: ViewSpec,
    view_key: Option<&Path>,
    out: &Path,
) -> Result<(), Failure> {
    let key = match view_key {
        Some(path) => crate::manifest::key_file(path)?,
        None => views::ViewKey::random(),
    };
    let started = std::time::Instant::now();
    let b = Bundle::read(bundle)?;
    let read = started.elapsed();
    let d = views::derive_with_key(&b, spec, &key);
    let derived = started.elapsed();
    write(&d.view, out)?;
    let total = started.elapsed();
    eprintln!(
        "view {} of {}: {} records ({} removed by loss) -> {} in {:.3} s \
         (read {:.3} s, derive {:.3} s, write {:.3} s)",
        spec.label(),
        b.id(),
        d.view.records.len(),
        d.removed.len(),
        out.display(),
        total.as_secs_f64(),
        read.as_secs_f64(),
        (derived - read).as_secs_f64(),
        (total - derived).as_secs_f64(),
    );
    Ok(())
}

pub fn profile(
    profiler: Option<String>,
    cmd: Option<String>,
    timeout: u64,
    allow_unisolated: bool,
    kineto_trace: Option<PathBuf>,
    view: &Path,
    out: &Path,
) -> Result<(), Failure> {
    let explanation = match (profiler, cmd) {
        (Some(name), _) if name == baselines::hta::NAME && kineto_trace.is_some() => {
            let v = TraceView::read(view)?;
            let trace = kineto_trace.expect("matched above");
            baselines::Profiler::explain(&baselines::HtaCriticalPath::on_native_trace(trace), &v)
        }
        (Some(name), _) if baselines::hta_analyses::Analysis::of_name(&name).is_some() => {
            let analysis = baselines::hta_analyses::Analysis::of_name(&name).expect("matched");
            let v = TraceView::read(view)?;
            let p = baselines::hta_analyses::HtaAnalysis::new(analysis, kineto_trace);
            baselines::Profiler::explain(&p, &v)
        }
        (Some(name), _) => {
            let p = baselines::builtin(&name).ok_or_else(|| {
                Failure::input(format!(
                    "no built-in profiler named `{name}` (known: {}; probes: {})",
                    baselines::builtin_names().join(", "),
                    baselines::probe_names().join(", ")
                ))
            })?;
            let v = TraceView::read(view)?;
            p.explain(&v)
        }
        (None, Some(cmd)) => {
            // Validate the view first so a bad input is reported as ours, not the tool's.
            TraceView::read(view)?;
            let isolation = baselines::sandbox::detect(allow_unisolated).map_err(Failure::input)?;
            if isolation == baselines::sandbox::Isolation::Unisolated {
                eprintln!(
                    "causalbench: WARNING: this kernel has no usable Landlock: the profiler runs \
                     UNISOLATED and can read every file you can"
                );
            }
            let ext = baselines::ExternalCommand::new(&cmd)
                .with_timeout(std::time::Duration::from_secs(timeout))
                .with_confinement(baselines::Confinement::IsolatedIfAvailable);
            // An explanation that is not one (bad format, too large) is bad input: exit 2.
            ext.run(view, out).map_err(|e| match e {
                baselines::ExternalError::Invalid(_)
                | baselines::ExternalError::TooLarge { .. } => Failure::input(e),
                other => Failure::failed(other),
            })?
        }
        (None, None) => {
            return Err(Failure::input(
                "give --profiler NAME or --cmd 'PROGRAM {view} {out}'",
            ))
        }
    };
    write(&explanation, out)?;
    eprintln!(
        "{}: {} edges, {} diagnoses in {:.1} ms -> {}",
        explanation.meta.profiler,
        explanation.edges.len(),
        explanation.diagnoses.len(),
        explanation.meta.wall_ms,
        out.display()
    );
    Ok(())
}

pub fn score(bundle: &Path, view: &Path, explanation: &Path, json: bool) -> Result<(), Failure> {
    crate::manifest::check_bundle_file(bundle)?;
    let b = Bundle::read(bundle)?;
    let v = TraceView::read(view)?;
    let e = Explanation::read(explanation)?;
    e.check_against(explanation, &v)?;
    // The view's id is opaque and the view is a file anyone could edit: it is
    // matched by deriving it again from the bundle.
    if !views::derived_from(&v, &b) {
        return Err(Failure::input(format!(
            "{}: this view was not derived from bundle {}",
            view.display(),
            bundle.display()
        )));
    }
    let s = evaluator::score_case(&b, &v, &e);
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&s).expect("scores serialize")
        );
    } else {
        outln!(
            "{}",
            evaluator::scores_to_jsonl(std::slice::from_ref(&s)).trim_end()
        );
    }
    Ok(())
}

pub fn why_late(view: &Path, rid: u64) -> Result<(), Failure> {
    let v = TraceView::read(view)?;
    if !v.records.iter().any(|r| r.rid() == rid) {
        return Err(Failure::input(format!(
            "{}: rid {rid} is not a record of this view",
            view.display()
        )));
    }
    outln!("{}", baselines::why_late(&v, rid));
    Ok(())
}

pub fn report(results: &Path, html: Option<&Path>) -> Result<(), Failure> {
    let tampered = crate::manifest::Manifest::read(results)?.tampered(results);
    if !tampered.is_empty() {
        return Err(Failure::failed(tampered.join("\n")));
    }
    let r = evaluator::report(results).map_err(eval_failure)?;
    outln!("{}", r.leaderboard.to_markdown());
    if let Some(rows) = crate::track::report_in(results)? {
        outln!("{}", crate::track::section(&rows));
    }
    crate::manifest::mark_leaderboard(results)?;
    eprintln!(
        "{} case scores; wrote {} files under {}",
        r.cases,
        r.files.len(),
        results.display()
    );
    if let Some(dir) = html {
        write_site(results, dir, &r.leaderboard)?;
    }
    Ok(())
}

/// Writes the static HTML leaderboard of `results` into `dir` and says where it is.
pub fn write_site(
    results: &Path,
    dir: &Path,
    leaderboard: &evaluator::Leaderboard,
) -> Result<(), Failure> {
    let w = crate::site::write(results, dir, leaderboard)?;
    eprintln!(
        "html: {} pages, {} Perfetto traces ({:.1} MiB); open {} in a browser",
        w.pages,
        w.traces,
        w.trace_bytes as f64 / (1024.0 * 1024.0),
        dir.join("index.html").display()
    );
    Ok(())
}

pub fn eval_failure(e: evaluator::EvalError) -> Failure {
    match e {
        evaluator::EvalError::Format(f) => Failure::input(f),
        other => Failure::failed(other),
    }
}

pub fn schema(name: &str) -> Result<(), Failure> {
    let text = ground_truth::schema::schema(name)
        .or_else(|| evaluator::schema(name))
        .ok_or_else(|| {
            let names: Vec<&str> = ground_truth::schema::NAMES
                .iter()
                .chain(evaluator::SCHEMA_NAMES)
                .map(|(n, _)| *n)
                .collect();
            Failure::input(format!(
                "no format named `{name}` (known: {})",
                names.join(", ")
            ))
        })?;
    outln!("{text}");
    Ok(())
}

pub fn list(suite: &str) -> Result<(), Failure> {
    let scenarios = crate::catalog::load_suite(suite, None)?;
    let mut families: Vec<&str> = scenarios.iter().map(|s| s.family.as_str()).collect();
    families.dedup();
    outln!(
        "{} scenarios in {} families (suite `{suite}`)\n",
        scenarios.len(),
        families.len()
    );
    outln!(
        "{:<36} {:<22} {:<18} {:<10} question",
        "family",
        "variant",
        "true cause",
        "injection"
    );
    for s in &scenarios {
        outln!(
            "{:<36} {:<22} {:<18} {:<10} {:?}",
            s.family,
            s.variant,
            s.cause.as_str(),
            s.injection
                .as_ref()
                .map(|i| i.kind.as_str())
                .unwrap_or("none"),
            s.symptom.question
        );
    }
    list_megakernel()?;
    outln!("\nprofilers: {}", baselines::builtin_names().join(", "));
    outln!(
        "probes:    {} (no causal reasoning: --profilers probes, docs/integrity.md)",
        baselines::probe_names().join(", ")
    );
    outln!(
        "megakernel track profilers: {}",
        baselines::megakernel::TRACK_NAMES.join(", ")
    );
    outln!(
        "formats:   {}",
        ground_truth::schema::NAMES
            .iter()
            .chain(evaluator::SCHEMA_NAMES)
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// The megakernel track's families (`megakernel/catalog/`), which `run` scores
/// in their own leaderboard section.
fn list_megakernel() -> Result<(), Failure> {
    let families = crate::track::families()?;
    let scenarios: usize = families.iter().map(|(_, v)| v.len()).sum();
    outln!(
        "\nmegakernel track: {scenarios} scenarios in {} families (megakernel/catalog)\n",
        families.len()
    );
    outln!(
        "{:<36} {:<22} {:<24} {:<14} kernel lateness",
        "family",
        "variant",
        "true cause",
        "task class"
    );
    for s in families.iter().flat_map(|(_, v)| v) {
        let lateness = match &s.injection.match_variant {
            Some(v) => format!("as variant {v}"),
            None => format!("{} us", s.injection.magnitude_us),
        };
        outln!(
            "{:<36} {:<22} {:<24} {:<14} {lateness}",
            s.family,
            s.variant,
            s.cause.as_str(),
            s.injection.class,
        );
    }
    Ok(())
}
