//! Operator attribution of a `torch.compile`d model's kernels
//! (docs/torch-track.md, "The compiled case"): which of the model's operators
//! each kernel's device time belongs to, as three methods a profiler has
//! would say it, scored against the truth Inductor's own provenance gives.
//!
//! The material is what `scripts/torch-device/compile_probe.py` writes on the
//! GPU: Kineto's trace of the compiled model, the FX graph Dynamo handed to
//! Inductor (its nodes are the model's operators: `h` is `self.norm(x)`),
//! and Inductor's debug trace — the generated `output_code.py`, whose `call()`
//! launches the kernels in order, each call preceded by its metadata comment
//! (`# Topologically Sorted Source Nodes: [h, sum_1, gate], Original ATen:
//! [...]`) and its provenance handle, and the provenance mapping from each
//! handle to the post-grad nodes it computes and from those to the model's
//! nodes.
//!
//! - **Truth**: the kernel's call site in `call()` (the n-th kernel of a step
//!   on the stream is the n-th call: one stream, program order), its handle's
//!   post-grad nodes, and their model nodes (`cppCodeToPost`, `postToPre`).
//! - **CUPTI correlation**: the kernel's launch call (same correlation id), the
//!   innermost ATen operator (`cpu_op` `aten::*`) enclosing it on its thread,
//!   and the model node of that operator's type, when only one node has it.
//! - **NVTX enclosure**: the innermost `record_function("op:...")` annotation
//!   enclosing the launch, and the model nodes of that annotated region.
//! - **Inductor's metadata**: a Triton kernel's name finds its call in the
//!   output code, whose comment lists the source nodes; a library kernel (a
//!   GEMM, named by its vendor) is the k-th library call of its step, as the
//!   k-th library launch under the step's `## Call CompiledFxGraph` operator.
//!
//! A kernel is attributed rightly when a method's set of model nodes is the
//! truth's set: naming one of the three operators a fused kernel computes is
//! attributed, not right.

use ground_truth::io::{read_input, FormatError, InputLimits};
use kineto::{Activities, Annotation, DeviceKind, HostCall};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The probe's files, found in its output directory.
#[derive(Debug, Clone)]
pub struct ProbeFiles {
    pub trace: PathBuf,
    pub graph: PathBuf,
    pub output_code: PathBuf,
    pub provenance: PathBuf,
}

impl ProbeFiles {
    /// `compiled.kineto.json[.gz]`, `graph.json` and, under `inductor/`, the one
    /// `output_code.py` with a provenance mapping beside it.
    pub fn find(dir: &Path) -> Result<ProbeFiles, FormatError> {
        let trace = ["compiled.kineto.json.gz", "compiled.kineto.json"]
            .iter()
            .map(|n| dir.join(n))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                FormatError::new(
                    dir,
                    "compiled.kineto.json",
                    "missing: not a compile probe's output",
                )
            })?;
        let graph = dir.join("graph.json");
        let mut found = Vec::new();
        let mut pending = vec![dir.join("inductor")];
        while let Some(d) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    pending.push(p);
                } else if p.file_name().is_some_and(|n| n == PROVENANCE_FILE)
                    && p.with_file_name("output_code.py").is_file()
                {
                    found.push(p);
                }
            }
        }
        found.sort();
        match found.as_slice() {
            [provenance] => Ok(ProbeFiles {
                trace,
                graph,
                output_code: provenance.with_file_name("output_code.py"),
                provenance: provenance.clone(),
            }),
            [] => Err(FormatError::new(
                dir,
                "inductor/",
                format!("no output_code.py with {PROVENANCE_FILE} beside it"),
            )),
            _ => Err(FormatError::new(
                dir,
                "inductor/",
                format!(
                    "{} compiled graphs with provenance: expected one",
                    found.len()
                ),
            )),
        }
    }
}

const PROVENANCE_FILE: &str = "inductor_provenance_tracking_node_mappings.json";

/// One node of the FX graph Dynamo handed to Inductor (`graph.json`).
#[derive(Debug, Clone, Deserialize)]
pub struct GraphNode {
    pub name: String,
    pub op: String,
    pub target: String,
    #[serde(default)]
    pub module: Vec<String>,
    /// The `record_function("op:...")` region its source line is in.
    #[serde(default)]
    pub region: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct Graph {
    nodes: Vec<GraphNode>,
}

#[derive(Debug, Clone, Deserialize)]
struct Provenance {
    #[serde(rename = "cppCodeToPost")]
    code_to_post: BTreeMap<String, Vec<String>>,
    #[serde(rename = "postToPre")]
    post_to_pre: BTreeMap<String, Vec<String>>,
}

/// One kernel launch of the compiled graph's `call()`, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSite {
    /// Inductor's provenance handle, e.g. `extern_kernels.addmm:2`.
    pub handle: String,
    /// The Triton kernel launched (`NAME.run(...)`), or `None` for a library call.
    pub triton: Option<String>,
    /// The metadata comment's source nodes.
    pub source_nodes: Vec<String>,
}

/// The call sites of `call()` in an Inductor output code: each launch line
/// after its `# [Provenance debug handles]` comment, with the source nodes of
/// the metadata comment before that.
pub fn call_sites(file: &Path, text: &str) -> Result<Vec<CallSite>, FormatError> {
    let mut sites = Vec::new();
    let mut in_call = false;
    let mut nodes: Option<Vec<String>> = None;
    let mut handle: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with("def call(") {
            in_call = true;
            continue;
        }
        if !in_call {
            continue;
        }
        if !line.starts_with(' ') && !t.is_empty() {
            break; // the end of the class or function holding call()
        }
        if let Some(rest) = t.strip_prefix("# Topologically Sorted Source Nodes: [") {
            let list = rest.split(']').next().unwrap_or("");
            nodes = Some(
                list.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
            );
        } else if let Some(h) = t.strip_prefix("# [Provenance debug handles] ") {
            handle = Some(h.trim().to_string());
        } else if let Some(h) = &handle {
            let triton = t.split_once(".run(").map(|(name, _)| name.to_string());
            if triton.is_some() || t.starts_with("extern_kernels.") {
                let source_nodes = nodes.take().ok_or_else(|| {
                    FormatError::new(
                        file,
                        format!("line {}", n + 1),
                        "a launch without its metadata comment",
                    )
                })?;
                if let Some(name) = &triton {
                    if !h.starts_with(&format!("{name}:")) {
                        return Err(FormatError::new(
                            file,
                            format!("line {}", n + 1),
                            format!("launch of {name} after the provenance handle {h}"),
                        ));
                    }
                }
                sites.push(CallSite {
                    handle: h.clone(),
                    triton,
                    source_nodes,
                });
                handle = None;
            }
        }
    }
    if sites.is_empty() {
        return Err(FormatError::new(
            file,
            "call()",
            "no kernel launch with a provenance handle",
        ));
    }
    Ok(sites)
}

/// One method's answer for one kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "nodes")]
pub enum Answer {
    /// These model nodes.
    Nodes(BTreeSet<String>),
    /// An operator type several model nodes share (two `linear`s): attributed,
    /// to no one operator.
    Ambiguous(BTreeSet<String>),
    Unattributed,
}

impl Answer {
    fn attributed(&self) -> bool {
        !matches!(self, Answer::Unattributed)
    }
    fn is(&self, truth: &BTreeSet<String>) -> bool {
        matches!(self, Answer::Nodes(n) if n == truth)
    }
}

/// The methods, in the order the report lists them.
pub const METHODS: [&str; 3] = ["cupti-correlation", "nvtx-enclosure", "inductor-metadata"];

/// One kernel name's launches, summed.
#[derive(Debug, Clone, Serialize)]
pub struct KernelRow {
    pub kernel: String,
    pub handle: String,
    pub launches: usize,
    pub device_ns: i64,
    pub truth: BTreeSet<String>,
    /// Per method (METHODS order), the answer of its first launch.
    pub answers: Vec<Answer>,
    /// Per method, the launches answered rightly.
    pub right: Vec<usize>,
}

/// Per method: the share of kernel time attributed at all, and rightly.
#[derive(Debug, Clone, Serialize)]
pub struct MethodScore {
    pub method: String,
    pub attributed_share: f64,
    pub right_share: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AttributionReport {
    pub kernels: usize,
    pub device_ns: i64,
    pub methods: Vec<MethodScore>,
    pub rows: Vec<KernelRow>,
}

/// The kernel-type names an ATen operator of the trace and a graph node's
/// target share: `aten::addmm` is a `linear`'s GEMM, `aten::native_layer_norm`
/// a `layer_norm`; any other `aten::NAME` is the node whose target is `NAME`.
fn operator_type(aten: &str) -> &str {
    let name = aten.strip_prefix("aten::").unwrap_or(aten);
    match name {
        "addmm" | "mm" | "matmul" | "linear" => "linear",
        "native_layer_norm" | "layer_norm" => "layer_norm",
        other => other,
    }
}

/// A graph node's operator type from its target text (`<function layer_norm at
/// 0x..>`, `<built-in method sigmoid of ...>`, `<built-in function add>`, `sum`).
fn node_type(target: &str) -> String {
    let t = target.trim_start_matches('<');
    let t = t
        .strip_prefix("built-in method ")
        .or_else(|| t.strip_prefix("built-in function "))
        .or_else(|| t.strip_prefix("function "))
        .unwrap_or(t);
    t.split([' ', '>']).next().unwrap_or(t).to_string()
}

/// Scores the three methods on one probe's output.
pub fn score(files: &ProbeFiles) -> Result<AttributionReport, FormatError> {
    let graph: Graph = read_json(&files.graph)?;
    let provenance: Provenance = read_json(&files.provenance)?;
    let bytes = read_input(
        &files.output_code,
        "Inductor output code",
        &InputLimits::DEFAULT,
    )?;
    let code = std::str::from_utf8(&bytes)
        .map_err(|e| FormatError::new(&files.output_code, "", format!("not UTF-8: {e}")))?;
    let sites = call_sites(&files.output_code, code)?;
    let activities = kineto::read_activities(&files.trace)?;
    score_material(files, &graph.nodes, &provenance, &sites, &activities)
}

/// A JSON input of the probe, within the project's input limits; an error names
/// its JSON path.
fn read_json<T: serde::de::DeserializeOwned>(file: &Path) -> Result<T, FormatError> {
    let bytes = read_input(file, "compile probe file", &InputLimits::DEFAULT)?;
    ground_truth::io::from_json(file, &bytes)
}

fn score_material(
    files: &ProbeFiles,
    nodes: &[GraphNode],
    provenance: &Provenance,
    sites: &[CallSite],
    activities: &Activities,
) -> Result<AttributionReport, FormatError> {
    let operators: Vec<&GraphNode> = nodes
        .iter()
        .filter(|n| n.op == "call_function" || n.op == "call_method")
        .collect();
    // Truth per call site: its handle's post-grad nodes, their model nodes.
    let mut truth = Vec::new();
    for site in sites {
        let post = provenance.code_to_post.get(&site.handle).ok_or_else(|| {
            FormatError::new(
                &files.provenance,
                format!(".cppCodeToPost.{}", site.handle),
                "missing",
            )
        })?;
        let pre: BTreeSet<String> = post
            .iter()
            .flat_map(|p| provenance.post_to_pre.get(p).into_iter().flatten().cloned())
            .collect();
        truth.push(pre);
    }
    let mut kernels: Vec<_> = activities
        .device
        .iter()
        .filter(|d| d.kind == DeviceKind::Kernel)
        .collect();
    kernels.sort_by_key(|k| (k.start, k.index));
    if kernels.is_empty() || kernels.len() % sites.len() != 0 {
        return Err(FormatError::new(
            &files.trace,
            ".traceEvents",
            format!(
                "{} kernels for {} launches per step: not whole steps of the compiled graph",
                kernels.len(),
                sites.len()
            ),
        ));
    }
    let calls: BTreeMap<u64, &HostCall> = activities
        .calls
        .iter()
        .map(|c| (c.correlation, c))
        .collect();
    let region_nodes = |region: &str| -> BTreeSet<String> {
        operators
            .iter()
            .filter(|n| n.region.as_deref() == Some(region))
            .map(|n| n.name.clone())
            .collect()
    };
    let library_sites: Vec<usize> = (0..sites.len())
        .filter(|&i| sites[i].triton.is_none())
        .collect();
    let mut rows: BTreeMap<usize, KernelRow> = BTreeMap::new();
    let mut totals = [(0i64, 0i64); METHODS.len()];
    let mut device_ns = 0i64;
    // Library launches seen so far in each step (keyed by the step's
    // `## Call CompiledFxGraph` annotation), for the metadata method.
    let mut library_seen: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, kernel) in kernels.iter().enumerate() {
        let site_index = i % sites.len();
        let site = &sites[site_index];
        if let Some(name) = &site.triton {
            if &kernel.name != name {
                return Err(FormatError::new(
                    &files.trace,
                    format!(".traceEvents[{}].name", kernel.index),
                    format!(
                        "kernel {} where the compiled graph launches {name}",
                        kernel.name
                    ),
                ));
            }
        }
        let enclosing: Vec<&Annotation> = match calls.get(&kernel.correlation) {
            Some(call) => {
                let mut e: Vec<_> = activities
                    .annotations
                    .iter()
                    .filter(|a| a.tid == call.tid && a.start <= call.start && call.start <= a.end)
                    .collect();
                e.sort_by_key(|a| std::cmp::Reverse((a.start, std::cmp::Reverse(a.end))));
                e // innermost first
            }
            None => Vec::new(),
        };
        let correlation = match enclosing
            .iter()
            .find(|a| a.category == "cpu_op" && a.name.starts_with("aten::"))
        {
            Some(op) => {
                let ty = operator_type(&op.name);
                let candidates: BTreeSet<String> = operators
                    .iter()
                    .filter(|n| node_type(&n.target) == ty)
                    .map(|n| n.name.clone())
                    .collect();
                match candidates.len() {
                    0 => Answer::Unattributed,
                    1 => Answer::Nodes(candidates),
                    _ => Answer::Ambiguous(candidates),
                }
            }
            None => Answer::Unattributed,
        };
        let nvtx = match enclosing
            .iter()
            .find(|a| a.category == "user_annotation" && a.name.starts_with("op:"))
        {
            Some(a) => match region_nodes(&a.name) {
                n if n.is_empty() => Answer::Unattributed,
                n => Answer::Nodes(n),
            },
            None => Answer::Unattributed,
        };
        let metadata_site = match &site.triton {
            Some(_) => sites
                .iter()
                .find(|s| s.triton.as_deref() == Some(kernel.name.as_str())),
            None => {
                let step = enclosing
                    .iter()
                    .find(|a| a.name.starts_with("## Call CompiledFxGraph"))
                    .map(|a| a.index);
                step.and_then(|step| {
                    let seen = library_seen.entry(step).or_insert(0);
                    let site = library_sites.get(*seen).map(|&j| &sites[j]);
                    *seen += 1;
                    site
                })
            }
        };
        let metadata = match metadata_site {
            Some(s) => Answer::Nodes(s.source_nodes.iter().cloned().collect()),
            None => Answer::Unattributed,
        };
        let answers = vec![correlation, nvtx, metadata];
        let duration = (kernel.end - kernel.start).max(0);
        device_ns += duration;
        let row = rows.entry(site_index).or_insert_with(|| KernelRow {
            kernel: kernel.name.clone(),
            handle: site.handle.clone(),
            launches: 0,
            device_ns: 0,
            truth: truth[site_index].clone(),
            answers: answers.clone(),
            right: vec![0; METHODS.len()],
        });
        row.launches += 1;
        row.device_ns += duration;
        for (m, answer) in answers.iter().enumerate() {
            if answer.attributed() {
                totals[m].0 += duration;
            }
            if answer.is(&truth[site_index]) {
                totals[m].1 += duration;
                row.right[m] += 1;
            }
        }
    }
    let share = |ns: i64| {
        if device_ns > 0 {
            ns as f64 / device_ns as f64
        } else {
            0.0
        }
    };
    Ok(AttributionReport {
        kernels: kernels.len(),
        device_ns,
        methods: METHODS
            .iter()
            .zip(totals)
            .map(|(m, (attributed, right))| MethodScore {
                method: m.to_string(),
                attributed_share: share(attributed),
                right_share: share(right),
            })
            .collect(),
        rows: rows.into_values().collect(),
    })
}

/// The report as Markdown: the method table, then one row per kernel.
pub fn markdown(report: &AttributionReport) -> String {
    let mut out = String::new();
    out.push_str("| method | kernel time attributed | attributed to the right operator(s) |\n|---|---:|---:|\n");
    for m in &report.methods {
        out.push_str(&format!(
            "| {} | {:.1} % | {:.1} % |\n",
            m.method,
            100.0 * m.attributed_share,
            100.0 * m.right_share
        ));
    }
    out.push_str(&format!(
        "\n{} kernel launches, {:.1} µs of device time.\n\n| kernel | launches | share of device time | truth (model nodes) | {} |\n|---|---:|---:|---|{}\n",
        report.kernels,
        report.device_ns as f64 / 1e3,
        METHODS.join(" | "),
        "---|".repeat(METHODS.len())
    ));
    let show = |a: &Answer| match a {
        Answer::Nodes(n) => n.iter().cloned().collect::<Vec<_>>().join(", "),
        Answer::Ambiguous(n) => format!(
            "one of {}",
            n.iter().cloned().collect::<Vec<_>>().join(", ")
        ),
        Answer::Unattributed => "—".to_string(),
    };
    for r in &report.rows {
        let cells: Vec<String> = r
            .answers
            .iter()
            .zip(&r.right)
            .map(|(a, right)| format!("{} ({right}/{})", show(a), r.launches))
            .collect();
        out.push_str(&format!(
            "| `{}` | {} | {:.1} % | {} | {} |\n",
            r.kernel,
            r.launches,
            100.0 * r.device_ns as f64 / report.device_ns.max(1) as f64,
            r.truth.iter().cloned().collect::<Vec<_>>().join(", "),
            cells.join(" | ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODE: &str = "\
class Runner:
    def call(self, args):
        with torch.cuda._DeviceGuard(0):
            # Topologically Sorted Source Nodes: [h, sum_1], Original ATen: [aten.native_layer_norm, aten.sum]
            # [Provenance debug handles] triton_per_fused_0:1
            stream0 = get_raw_stream(0)
            triton_per_fused_0.run(buf3, stream=stream0)
            # Topologically Sorted Source Nodes: [u], Original ATen: [aten.addmm]
            # [Provenance debug handles] extern_kernels.addmm:2
            extern_kernels.addmm(a, b, out=buf7)
        return (buf7, )

runner = Runner()
";

    #[test]
    fn call_sites_pair_each_launch_with_its_comment_and_handle() {
        let sites = call_sites(Path::new("output_code.py"), CODE).unwrap();
        assert_eq!(
            sites,
            vec![
                CallSite {
                    handle: "triton_per_fused_0:1".into(),
                    triton: Some("triton_per_fused_0".into()),
                    source_nodes: vec!["h".into(), "sum_1".into()],
                },
                CallSite {
                    handle: "extern_kernels.addmm:2".into(),
                    triton: None,
                    source_nodes: vec!["u".into()],
                },
            ]
        );
    }

    #[test]
    fn a_launch_after_another_kernels_handle_is_an_error_naming_the_line() {
        let bad = CODE.replace("triton_per_fused_0:1", "triton_other_3:1");
        let err = call_sites(Path::new("output_code.py"), &bad)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 7") && err.contains("triton_other_3:1"),
            "{err}"
        );
        let none = call_sites(Path::new("o.py"), "def f():\n    pass\n")
            .unwrap_err()
            .to_string();
        assert!(none.contains("no kernel launch"), "{none}");
    }

    #[test]
    fn operator_types_match_graph_targets() {
        assert_eq!(
            node_type("<function layer_norm at 0x7f63a033c680>"),
            "layer_norm"
        );
        assert_eq!(
            node_type("<built-in method sigmoid of type object at 0x7f>"),
            "sigmoid"
        );
        assert_eq!(node_type("<built-in function linear>"), "linear");
        assert_eq!(node_type("sum"), "sum");
        assert_eq!(operator_type("aten::addmm"), "linear");
        assert_eq!(operator_type("aten::native_layer_norm"), "layer_norm");
        assert_eq!(operator_type("aten::gelu"), "gelu");
    }
}
