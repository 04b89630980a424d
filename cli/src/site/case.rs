//! One case's page: the bundle's facts, each profiler's verdict per view, the true and
//! each claimed critical path side by side, the reference profiler's `why-late` text, and
//! the case's Perfetto traces to download (written beside the page by the exporter).

use super::html::{esc, profiler, verdict_cell};
use super::{CaseRef, Site};
use crate::Failure;
use evaluator::{is_probe, CaseScore};
use ground_truth::io::Readable;
use ground_truth::{Bundle, Collectors, Explanation, Mode, NodeId, TraceView};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The view whose paths and `why-late` text the page shows: everything recorded,
/// application identity kept, no loss.
const REFERENCE_VIEWS: [(Collectors, Mode); 3] = [
    (Collectors::Combined, Mode::Instrumented),
    (Collectors::Cupti, Mode::Instrumented),
    (Collectors::Host, Mode::Instrumented),
];

/// The profiler whose `why-late` text and claimed edges the page carries.
const REFERENCE_PROFILER: &str = "causal-graph";

/// Trace files above this size are written gzip-compressed (the Perfetto UI opens both).
const GZIP_ABOVE: u64 = 1 << 20;

/// Where the run kept this case's bundle: `manifest.json`'s record of its key, else
/// `bundles/KEY.bundle.json`.
fn bundle_path(results: &Path, key: &str) -> Option<PathBuf> {
    let manifest = crate::manifest::Manifest::read(results).ok();
    let recorded = manifest.and_then(|m| m.bundles.get(key).map(|h| h.path.clone()));
    let candidates = recorded
        .into_iter()
        .flat_map(|p| [results.join(&p), p])
        .chain([results.join("bundles").join(format!("{key}.bundle.json"))]);
    candidates.into_iter().find(|p| p.is_file())
}

/// A truth node in words.
fn node_text(bundle: &Bundle, id: NodeId) -> String {
    let Some(n) = bundle.ground_truth.nodes.get(id as usize) else {
        return format!("node {id}");
    };
    let kind = serde_json::to_value(n.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{:?}", n.kind));
    let place = match (n.detail.stream, n.detail.thread) {
        (Some(s), _) => format!(" (stream {s})"),
        (None, Some(t)) => format!(" (thread {t})"),
        (None, None) => String::new(),
    };
    // The node id tells apart two nodes that read alike (two launches of one kernel).
    format!("{kind} {}{place} · node {id}", n.name.as_str())
}

/// The page of one case; the traces it links are written into `dir`, their sizes
/// pushed onto `traces`.
pub fn page(
    site: &Site,
    case: &CaseRef,
    dir: &Path,
    traces: &mut Vec<u64>,
) -> Result<String, Failure> {
    let scores: Vec<&CaseScore> = site
        .scores
        .iter()
        .filter(|s| s.bundle == case.bundle && s.backend == case.backend)
        .collect();
    let mut b = String::new();
    let _ = write!(
        b,
        "<table><tr><th>bundle</th><td>{}</td></tr><tr><th>backend</th><td>{}</td></tr>\
         <tr><th>family</th><td><a href=\"../family/{}.html\">{}</a></td></tr>\
         <tr><th>variant</th><td>{}</td></tr><tr><th>scenario</th><td>{}</td></tr>\
         <tr><th>repetition</th><td>{}</td></tr></table>",
        esc(&case.bundle),
        esc(&case.backend),
        super::html::slug(&case.family),
        esc(&case.family),
        esc(&case.variant),
        esc(&case.scenario),
        case.repetition
    );
    b.push_str(&verdicts(&site.palette, &scores));
    let files = case
        .key
        .as_deref()
        .and_then(|key| bundle_path(&site.results, key).map(|p| (key, p)));
    match files {
        Some((key, path)) => {
            let bundle = Bundle::read(&path)?;
            b.push_str(&details(site, case, key, &bundle, &scores, dir, traces)?);
        }
        None => b.push_str(
            "<p class=\"note\">The bundle of this case is not in the result set: only its \
             scores are shown.</p>",
        ),
    }
    Ok(super::html::page(&format!("Case {}", case.bundle), 1, &b))
}

/// Each profiler's verdict per loss-free view: every symptom right or not, and the
/// cause or answer it claimed.
fn verdicts(palette: &evaluator::palette::Palette, scores: &[&CaseScore]) -> String {
    let mut views: Vec<(Collectors, Mode)> = scores
        .iter()
        .filter(|s| s.is_loss_free())
        .map(|s| (s.collectors, s.mode))
        .collect();
    views.sort();
    views.dedup();
    let mut rows: BTreeMap<&str, HashMap<(Collectors, Mode), &CaseScore>> = BTreeMap::new();
    for s in scores.iter().filter(|s| s.is_loss_free()) {
        rows.entry(&s.profiler)
            .or_default()
            .insert((s.collectors, s.mode), s);
    }
    let mut b = String::from(
        "<h2>Verdicts</h2><p class=\"note\">Loss-free views; ✓ every symptom answered \
         right, ✗ not; the claimed cause or answer of the first symptom.</p>\
         <table class=\"verdicts\"><tr><th>profiler</th>",
    );
    for v in &views {
        let _ = write!(b, "<th>{}</th>", esc(&super::view_name(*v)));
    }
    b.push_str("</tr>");
    for (name, cells) in rows.iter().filter(|(p, _)| !is_probe(p)) {
        let _ = write!(b, "<tr><td>{}</td>", profiler(palette, name));
        for v in &views {
            match cells.get(v) {
                Some(s) => {
                    let claimed = s.symptoms.first().map_or_else(String::new, |y| {
                        y.claimed_answer
                            .clone()
                            .or(y.claimed_cause.map(|c| c.as_str().to_string()))
                            .unwrap_or_else(|| "no answer".into())
                    });
                    let asked = (!s.symptoms.is_empty()).then(|| s.all_correct());
                    b.push_str(&verdict_cell(asked, &claimed));
                }
                None => b.push_str(&verdict_cell(None, "not run")),
            }
        }
        b.push_str("</tr>");
    }
    b.push_str("</table>");
    b
}

/// What needs the bundle: symptoms, paths, `why-late`, traces.
fn details(
    site: &Site,
    case: &CaseRef,
    key: &str,
    bundle: &Bundle,
    scores: &[&CaseScore],
    dir: &Path,
    traces: &mut Vec<u64>,
) -> Result<String, Failure> {
    let mut b = String::new();
    let reference = REFERENCE_VIEWS.iter().find_map(|&(collectors, mode)| {
        let label = ground_truth::ViewSpec {
            collectors,
            mode,
            loss: ground_truth::view::LossSpec::None,
        }
        .label();
        let path = site
            .results
            .join("views")
            .join(key)
            .join(format!("{label}.json"));
        path.is_file().then_some((label, path))
    });
    let view = match &reference {
        Some((_, path)) => Some(TraceView::read(path)?),
        None => None,
    };
    let explanation = |name: &str| -> Result<Option<Explanation>, Failure> {
        let Some((label, _)) = &reference else {
            return Ok(None);
        };
        let path = site
            .results
            .join("explanations")
            .join(key)
            .join(label)
            .join(format!("{name}.json"));
        Ok(if path.is_file() {
            Some(Explanation::read(&path)?)
        } else {
            None
        })
    };
    let owner = bundle.ground_truth.rid_owner();
    let mut profilers: Vec<&str> = scores
        .iter()
        .map(|s| s.profiler.as_str())
        .filter(|p| !is_probe(p))
        .collect();
    profilers.sort();
    profilers.dedup();
    let mut explanations = Vec::new();
    for p in &profilers {
        if let Some(x) = explanation(p)? {
            explanations.push(x);
        }
    }
    let view_label = reference
        .as_ref()
        .map(|(l, _)| l.as_str())
        .unwrap_or("none");
    for symptom in &bundle.ground_truth.symptoms {
        let _ = write!(
            b,
            "<h2>Symptom {}</h2><p>question <a href=\"../question/{q}.html\">{q}</a>; true \
             cause <b>{}</b>{}; {:.1}&nbsp;µs late against the no-injection twin.{}</p>",
            esc(&symptom.id),
            symptom.cause.as_str(),
            symptom
                .answer
                .as_deref()
                .map(|a| format!(", expected answer <code>{}</code>", esc(a)))
                .unwrap_or_default(),
            symptom.lateness_ns / 1e3,
            symptom
                .label
                .as_ref()
                .map(|l| format!(" Label check: {}.", esc(&l.reason)))
                .unwrap_or_default(),
            q = evaluator::question_name(symptom.question),
        );
        let on_path: std::collections::HashSet<NodeId> =
            symptom.critical_path.iter().copied().collect();
        let _ = write!(
            b,
            "<h3>Critical path, true and claimed (view {})</h3><div class=\"paths\">\
             <div class=\"truth\"><b>true (root first)</b><ol>",
            esc(view_label)
        );
        for &n in &symptom.critical_path {
            let _ = write!(b, "<li>{}</li>", esc(&node_text(bundle, n)));
        }
        b.push_str("</ol></div>");
        for x in &explanations {
            let _ = write!(
                b,
                "<div class=\"claimed\"><b>{}</b>",
                profiler(&site.palette, &x.meta.profiler)
            );
            match x.diagnoses.iter().find(|d| d.query == symptom.id) {
                Some(d) if !d.critical_path.is_empty() => {
                    b.push_str("<ol>");
                    for rid in &d.critical_path {
                        let (class, text) = match owner.get(rid) {
                            Some(&n) if on_path.contains(&n) => ("onpath", node_text(bundle, n)),
                            Some(&n) => (
                                "offpath",
                                format!("{} — not on the true path", node_text(bundle, n)),
                            ),
                            None => ("offpath", format!("rid {rid}: no truth node")),
                        };
                        let _ = write!(b, "<li class=\"{class}\">{}</li>", esc(&text));
                    }
                    b.push_str("</ol>");
                }
                Some(_) => b.push_str("<p class=\"note\">no path claimed</p>"),
                None => b.push_str("<p class=\"note\">no diagnosis</p>"),
            }
            b.push_str("</div>");
        }
        b.push_str("</div>");
        if let Some(v) = &view {
            let rid = v
                .queries
                .iter()
                .find(|q| q.id == symptom.id)
                .map_or(symptom.rid, |q| q.rid);
            let _ = write!(
                b,
                "<h3>why-late ({REFERENCE_PROFILER}, view {})</h3><pre class=\"why-late\">{}</pre>",
                esc(view_label),
                esc(&baselines::why_late(v, rid))
            );
        }
    }
    let reference_explanation = explanations
        .iter()
        .find(|x| x.meta.profiler == REFERENCE_PROFILER);
    b.push_str(&trace_links(
        case,
        bundle,
        view.as_ref(),
        reference_explanation,
        dir,
        traces,
    )?);
    Ok(b)
}

/// Exports the case's Perfetto traces beside its page and links them.
fn trace_links(
    case: &CaseRef,
    bundle: &Bundle,
    view: Option<&TraceView>,
    explanation: Option<&Explanation>,
    dir: &Path,
    traces: &mut Vec<u64>,
) -> Result<String, Failure> {
    let stem = case.page();
    let scratch = dir.join(format!("{stem}.export"));
    let cannot = |e: std::io::Error| {
        Failure::failed(format!("cannot write into {}: {e}", scratch.display()))
    };
    std::fs::create_dir_all(&scratch).map_err(cannot)?;
    let written =
        exporters::perfetto::export_case(bundle, view, explanation, &scratch).map_err(cannot)?;
    let mut b = String::from(
        "<h2>Perfetto traces</h2><p class=\"note\">Download, then open in the Perfetto UI \
         (ui.perfetto.dev, \"Open trace file\"); the trace never leaves your machine.</p><ul>",
    );
    for file in written
        .files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "perfetto-trace"))
    {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("trace");
        let what = if name.starts_with("truth") {
            "the truth: every recorded operation and true edge"
        } else {
            "the reference profiler's claimed edges"
        };
        let (target, bytes) = place_trace(file, &dir.join(format!("{stem}.{name}")))?;
        traces.push(bytes);
        let link = target
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let _ = write!(
            b,
            "<li><a class=\"trace\" href=\"{}\" download>{}</a>: {what} ({:.0}&nbsp;KiB)</li>",
            esc(&link),
            esc(&link),
            bytes as f64 / 1024.0
        );
    }
    b.push_str("</ul>");
    std::fs::remove_dir_all(&scratch).map_err(cannot)?;
    Ok(b)
}

/// Moves a trace to `target`, gzip-compressed (`target.gz`) when it is large; returns
/// where it went and its size.
fn place_trace(file: &Path, target: &Path) -> Result<(PathBuf, u64), Failure> {
    let failed =
        |p: &Path, e: std::io::Error| Failure::failed(format!("cannot write {}: {e}", p.display()));
    let size = std::fs::metadata(file).map_err(|e| failed(file, e))?.len();
    if size <= GZIP_ABOVE {
        std::fs::rename(file, target).map_err(|e| failed(target, e))?;
        return Ok((target.to_path_buf(), size));
    }
    let gz = PathBuf::from(format!("{}.gz", target.display()));
    let mut input = std::fs::File::open(file).map_err(|e| failed(file, e))?;
    let output = std::fs::File::create(&gz).map_err(|e| failed(&gz, e))?;
    let mut encoder = flate2::write::GzEncoder::new(output, flate2::Compression::default());
    std::io::copy(&mut input, &mut encoder).map_err(|e| failed(&gz, e))?;
    encoder.finish().map_err(|e| failed(&gz, e))?;
    let _ = std::fs::remove_file(target);
    let size = std::fs::metadata(&gz).map_err(|e| failed(&gz, e))?.len();
    Ok((gz, size))
}
