//! Reading and writing the formats. Readers never panic on bad input: they
//! return a [`FormatError`] naming the file, the place (JSON path and/or line)
//! and what was expected. Writers are atomic (temp file + rename), so an
//! interrupted run never leaves a half-written file behind.

use crate::graph::NodeKind;
use crate::{Bundle, Explanation, Scenario, TraceView, SCHEMA_VERSION};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Bad input in a format file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    pub file: PathBuf,
    /// JSON path of the offending value (`.programs[0].steps[2]`), empty if unknown.
    pub path: String,
    /// `line L, column C` when the parser knows it.
    pub line: Option<String>,
    pub message: String,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = &self.line {
            write!(f, ":{l}")?;
        }
        if !self.path.is_empty() {
            write!(f, ": at {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for FormatError {}

impl FormatError {
    pub fn new(file: &Path, path: impl Into<String>, message: impl Into<String>) -> Self {
        FormatError {
            file: file.to_path_buf(),
            path: path.into(),
            line: None,
            message: message.into(),
        }
    }
}

/// A format that can be read from a file and checked beyond what serde checks.
pub trait Readable: DeserializeOwned + Serialize {
    /// Human name used in messages.
    const WHAT: &'static str;
    /// Semantic problems as (JSON path, message).
    fn problems(&self) -> Vec<(String, String)>;

    /// Reads and validates `file` (JSON; YAML too for scenarios).
    fn read(file: &Path) -> Result<Self, FormatError> {
        let bytes = std::fs::read(file)
            .map_err(|e| FormatError::new(file, "", format!("cannot read {}: {e}", Self::WHAT)))?;
        Self::parse(file, &bytes)
    }

    /// Parses bytes as if they came from `file`.
    fn parse(file: &Path, bytes: &[u8]) -> Result<Self, FormatError> {
        let value: Self = if is_yaml(file) {
            from_yaml(file, bytes)?
        } else {
            from_json(file, bytes)?
        };
        if let Some((path, message)) = value.problems().into_iter().next() {
            return Err(FormatError::new(file, format!(".{path}"), message));
        }
        Ok(value)
    }

    /// Atomically writes the value as JSON (pretty for small formats).
    fn write(&self, file: &Path) -> std::io::Result<()> {
        write_json_atomic(file, self)
    }
}

fn is_yaml(file: &Path) -> bool {
    matches!(
        file.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

fn json_path(p: &serde_path_to_error::Path) -> String {
    let s = p.to_string();
    if s == "." || s == "?" {
        String::new()
    } else if s.starts_with('[') {
        s
    } else {
        format!(".{s}")
    }
}

/// Deserializes JSON, reporting the JSON path and line of the first error.
pub fn from_json<T: DeserializeOwned>(file: &Path, bytes: &[u8]) -> Result<T, FormatError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = json_path(e.path());
        let inner = e.into_inner();
        let line =
            (inner.line() > 0).then(|| format!("line {}, column {}", inner.line(), inner.column()));
        FormatError {
            file: file.to_path_buf(),
            path,
            line,
            message: strip_position(&inner.to_string()),
        }
    })
}

/// Deserializes YAML, reporting the path and line of the first error.
pub fn from_yaml<T: DeserializeOwned>(file: &Path, bytes: &[u8]) -> Result<T, FormatError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| FormatError::new(file, "", format!("not UTF-8 text: {e}")))?;
    let de = serde_norway::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = json_path(e.path());
        let inner = e.into_inner();
        let line = inner
            .location()
            .map(|l| format!("line {}, column {}", l.line(), l.column()));
        let mut message = strip_position(&inner.to_string());
        // The YAML parser prefixes its own path; we report the path separately.
        if let Some(rest) = message.strip_prefix(&format!("{}: ", path.trim_start_matches('.'))) {
            message = rest.to_string();
        }
        FormatError {
            file: file.to_path_buf(),
            path,
            line,
            message,
        }
    })
}

/// serde's messages end with " at line X column Y"; we report the position separately.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// Writes JSON to a temp file beside `file`, then renames it into place.
pub fn write_json_atomic<T: Serialize + ?Sized>(file: &Path, value: &T) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    write_atomic(file, &bytes)
}

/// Writes bytes atomically: a reader sees the old file or the whole new one.
pub fn write_atomic(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = file.with_extension(format!(
        "{}.{}.tmp",
        file.extension().and_then(|e| e.to_str()).unwrap_or(""),
        std::process::id()
    ));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_data().ok();
    }
    std::fs::rename(&tmp, file)
}

fn version_problem(v: u32) -> Option<(String, String)> {
    (v != SCHEMA_VERSION).then(|| {
        (
            "schema_version".into(),
            format!("expected schema_version {SCHEMA_VERSION}, found {v}"),
        )
    })
}

impl Readable for Scenario {
    const WHAT: &'static str = "scenario";
    fn problems(&self) -> Vec<(String, String)> {
        self.check()
            .into_iter()
            .map(|p| (p.path, p.message))
            .collect()
    }
}

impl Readable for Bundle {
    const WHAT: &'static str = "run bundle";
    fn problems(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> =
            version_problem(self.schema_version).into_iter().collect();
        out.extend(
            self.manifest
                .scenario
                .check()
                .into_iter()
                .map(|p| (format!("manifest.scenario.{}", p.path), p.message)),
        );
        let mut rids = HashSet::with_capacity(self.trace.len());
        for (i, r) in self.trace.iter().enumerate() {
            if !rids.insert(r.rid()) {
                out.push((
                    format!("trace[{i}].rid"),
                    format!("duplicate rid {}", r.rid()),
                ));
                return out;
            }
        }
        out.extend(truth_problems(&self.ground_truth, &rids));
        out
    }
}

/// Structural checks of a ground truth: ids, references, acyclicity, launch parents.
fn truth_problems(gt: &crate::GroundTruth, trace_rids: &HashSet<u64>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let n = gt.nodes.len();
    for (i, node) in gt.nodes.iter().enumerate() {
        if node.id as usize != i {
            out.push((
                format!("ground_truth.nodes[{i}].id"),
                format!(
                    "expected node id {i} (ids are positions), found {}",
                    node.id
                ),
            ));
            return out;
        }
        // A lost record is not a node's rid at all, so every rid must be in the trace.
        if let Some((j, r)) = node
            .rids
            .iter()
            .enumerate()
            .find(|(_, r)| !trace_rids.contains(r))
        {
            out.push((
                format!("ground_truth.nodes[{i}].rids[{j}]"),
                format!("dangling reference to rid {r}, which is not a record of the trace"),
            ));
            return out;
        }
    }
    for (i, e) in gt.edges.iter().enumerate() {
        for (end, id) in [("src", e.src), ("dst", e.dst)] {
            if id as usize >= n {
                out.push((
                    format!("ground_truth.edges[{i}].{end}"),
                    format!("dangling reference to node {id} (there are {n} nodes)"),
                ));
                return out;
            }
        }
    }
    if let Some(cycle_at) = find_cycle(n, &gt.edges) {
        out.push((
            "ground_truth.edges".into(),
            format!("the graph has a cycle through node {cycle_at}"),
        ));
        return out;
    }
    let mut launch_parents = vec![0u32; n];
    for e in &gt.edges {
        if e.kind == crate::EdgeType::Launch {
            launch_parents[e.dst as usize] += 1;
        }
    }
    for (i, node) in gt.nodes.iter().enumerate() {
        if node.kind.is_device_op() && launch_parents[i] != 1 {
            out.push((
                format!("ground_truth.nodes[{i}]"),
                format!(
                    "device op must have exactly one launch parent, found {}",
                    launch_parents[i]
                ),
            ));
        }
        if node.kind == NodeKind::Request && launch_parents[i] != 0 {
            out.push((
                format!("ground_truth.nodes[{i}]"),
                "a request cannot be launched".into(),
            ));
        }
    }
    for (i, s) in gt.symptoms.iter().enumerate() {
        if s.node as usize >= n {
            out.push((
                format!("ground_truth.symptoms[{i}].node"),
                format!("dangling reference to node {}", s.node),
            ));
        }
        if let Some(bad) = s.critical_path.iter().find(|&&p| p as usize >= n) {
            out.push((
                format!("ground_truth.symptoms[{i}].critical_path"),
                format!("dangling reference to node {bad}"),
            ));
        }
    }
    out
}

/// Returns a node on a cycle, if any (iterative three-colour DFS).
pub fn find_cycle(n: usize, edges: &[crate::Edge]) -> Option<u32> {
    let mut adj: Vec<Vec<u32>> = vec![Vec::new(); n];
    for e in edges {
        adj[e.src as usize].push(e.dst);
    }
    let mut colour = vec![0u8; n];
    for root in 0..n {
        if colour[root] != 0 {
            continue;
        }
        let mut stack: Vec<(u32, usize)> = vec![(root as u32, 0)];
        colour[root] = 1;
        while let Some(&mut (v, ref mut i)) = stack.last_mut() {
            if *i < adj[v as usize].len() {
                let w = adj[v as usize][*i];
                *i += 1;
                match colour[w as usize] {
                    0 => {
                        colour[w as usize] = 1;
                        stack.push((w, 0));
                    }
                    1 => return Some(w),
                    _ => {}
                }
            } else {
                colour[v as usize] = 2;
                stack.pop();
            }
        }
    }
    None
}

impl Readable for TraceView {
    const WHAT: &'static str = "trace view";
    fn problems(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> =
            version_problem(self.schema_version).into_iter().collect();
        let mut rids = HashSet::with_capacity(self.records.len());
        for (i, r) in self.records.iter().enumerate() {
            if !rids.insert(r.rid()) {
                out.push((
                    format!("records[{i}].rid"),
                    format!("duplicate rid {}", r.rid()),
                ));
                return out;
            }
        }
        let mut ids = HashSet::new();
        for (i, q) in self.queries.iter().enumerate() {
            if !ids.insert(&q.id) {
                out.push((
                    format!("queries[{i}].id"),
                    format!("duplicate query id `{}`", q.id),
                ));
            }
            if !rids.contains(&q.rid) {
                out.push((
                    format!("queries[{i}].rid"),
                    format!("rid {} is not a record of this view", q.rid),
                ));
            }
        }
        out
    }
}

impl Readable for Explanation {
    const WHAT: &'static str = "explanation";
    fn problems(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> =
            version_problem(self.schema_version).into_iter().collect();
        for (i, e) in self.edges.iter().enumerate() {
            if !(0.0..=1.0).contains(&e.confidence) {
                out.push((
                    format!("edges[{i}].confidence"),
                    format!("expected a number in [0, 1], found {}", e.confidence),
                ));
            }
        }
        let mut queries: HashMap<&str, usize> = HashMap::new();
        for (i, d) in self.diagnoses.iter().enumerate() {
            if let Some(prev) = queries.insert(&d.query, i) {
                out.push((
                    format!("diagnoses[{i}].query"),
                    format!("query `{}` already answered by diagnoses[{prev}]", d.query),
                ));
            }
            for (j, c) in d.causes.iter().enumerate() {
                if !c.score.is_finite() {
                    out.push((
                        format!("diagnoses[{i}].causes[{j}].score"),
                        "expected a finite number".into(),
                    ));
                }
            }
        }
        out
    }
}
