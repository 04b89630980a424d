//! Reading and writing the formats. Readers never panic on bad input: they
//! return a [`FormatError`] naming the file, the place (JSON path and/or line)
//! and what was expected. Writers are atomic (temp file + rename), so an
//! interrupted run never leaves a half-written file behind.

mod atomic;
mod chunked;
mod compact;
mod limits;
mod parallel_read;
mod parallel_write;

pub use atomic::{
    remove_stale_temp_files, write_atomic, write_atomic_streaming, write_json_atomic,
};
pub use compact::{
    from_compact, is_compact, to_compact, wants_compact, COMPACT_MAGIC, COMPACT_SUFFIX,
    COMPACT_VERSION,
};
pub use limits::{bounded_echo, read_input, InputBytes, InputLimits, MAX_ECHO_CHARS, MAX_NESTING};

use crate::graph::NodeKind;
use crate::{Bundle, Explanation, Scenario, TraceView, SCHEMA_VERSION};
use atomic::write_atomic_with;
use chunked::ChunkedWriter;
use rustc_hash::FxHashSet;
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

/// Whether `path` names a run bundle file: `*.bundle.json`, or the same
/// gzip-compressed, `*.bundle.json.gz`.
pub fn is_bundle_file(path: &Path) -> bool {
    path.file_name()
        .map(|n| n.to_string_lossy())
        .is_some_and(|n| n.ends_with(".bundle.json") || n.ends_with(".bundle.json.gz"))
}

/// A format that can be read from a file and checked beyond what serde checks.
pub trait Readable: DeserializeOwned + Serialize {
    /// Human name used in messages.
    const WHAT: &'static str;
    /// Semantic problems as (JSON path, message).
    fn problems(&self) -> Vec<(String, String)>;

    /// Reads and validates `file` (JSON; YAML too for scenarios) within the
    /// default [`InputLimits`]. A gzip-compressed file (any name; recognized
    /// by its magic bytes) is decompressed first.
    fn read(file: &Path) -> Result<Self, FormatError> {
        Self::read_within(file, &InputLimits::DEFAULT)
    }

    /// [`Readable::read`] within `limits`.
    fn read_within(file: &Path, limits: &InputLimits) -> Result<Self, FormatError> {
        Self::parse(file, &read_input(file, Self::WHAT, limits)?)
    }

    /// Parses bytes as if they came from `file`.
    fn parse(file: &Path, bytes: &[u8]) -> Result<Self, FormatError> {
        let value: Self = if is_compact(bytes) {
            from_compact(file, bytes)?
        } else if is_yaml(file) {
            from_yaml(file, bytes)?
        } else if let Some(value) = Self::parse_json_quickly(bytes) {
            value
        } else {
            from_json_tracked(file, bytes)?
        };
        if let Some((path, message)) = value.problems().into_iter().next() {
            return Err(FormatError::new(
                file,
                format!(".{path}"),
                bounded_echo(message),
            ));
        }
        Ok(value)
    }

    /// The value in JSON `bytes`, by the fastest parser that accepts exactly
    /// what `Deserialize` accepts; `None` for bad input, which is then parsed
    /// again, tracked, to name the place of the error.
    fn parse_json_quickly(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }

    /// Atomically writes the value as JSON (pretty for small formats), or in the
    /// compact encoding when the file name asks for it ([`wants_compact`]).
    fn write(&self, file: &Path) -> std::io::Result<()> {
        if wants_compact(file) {
            return self.write_compact(file);
        }
        write_json_atomic(file, self)
    }

    /// Atomically writes the value in the compact encoding (docs/records.md).
    fn write_compact(&self, file: &Path) -> std::io::Result<()> {
        write_atomic(file, &to_compact(self)?)
    }
}

fn is_yaml(file: &Path) -> bool {
    matches!(
        file.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

/// The JSON path of a parser's error; a key of any length is cut short.
fn json_path(p: &serde_path_to_error::Path) -> String {
    let s = bounded_echo(p.to_string());
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
    // Tracking the path costs about as much as parsing itself (a gigabyte
    // bundle: 9 s instead of 5), and only a failed parse needs it: parse
    // untracked first, and parse again, tracked, to name the place of an error.
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(_) => from_json_tracked(file, bytes),
    }
}

/// [`from_json`] with the JSON path tracked all the way.
fn from_json_tracked<T: DeserializeOwned>(file: &Path, bytes: &[u8]) -> Result<T, FormatError> {
    let error = |path: String, inner: serde_json::Error| FormatError {
        file: file.to_path_buf(),
        path,
        line: (inner.line() > 0)
            .then(|| format!("line {}, column {}", inner.line(), inner.column())),
        message: parser_message(&inner.to_string()),
    };
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut *de)
        .map_err(|e| error(json_path(e.path()), e.into_inner()))?;
    // Only whitespace may follow the value, as `serde_json::from_slice` requires.
    de.end().map_err(|e| error(String::new(), e))?;
    Ok(value)
}

/// Deserializes YAML, reporting the path and line of the first error.
pub fn from_yaml<T: DeserializeOwned>(file: &Path, bytes: &[u8]) -> Result<T, FormatError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| FormatError::new(file, "", format!("not UTF-8 text: {e}")))?;
    if let Some(line) = limits::yaml_flow_too_deep(text) {
        return Err(FormatError {
            line: Some(format!("line {line}")),
            ..FormatError::new(file, "", limits::nesting_message())
        });
    }
    let de = serde_norway::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = json_path(e.path());
        let inner = e.into_inner();
        let line = inner
            .location()
            .map(|l| format!("line {}, column {}", l.line(), l.column()));
        let mut message = parser_message(&inner.to_string());
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

/// A parser's message as a reader reports it: without the position, which
/// is reported separately, naming the nesting limit where the parser stopped
/// at it, and with a quoted value cut short ([`bounded_echo`]).
pub fn parser_message(msg: &str) -> String {
    if limits::is_recursion_limit(msg) {
        return limits::nesting_message();
    }
    // serde's messages end with " at line X column Y".
    let msg = match msg.rfind(" at line ") {
        Some(i) => &msg[..i],
        None => msg,
    };
    with_valid_values(msg)
}

/// serde's words before the valid values of an unknown variant or field.
const EXPECTED_ONE_OF: &str = ", expected one of ";

/// `msg` with the value it quotes cut short but every valid value it lists kept,
/// wrapped onto indented lines: an author who wrote a wrong label needs the whole
/// list, and it comes from our types, not from the input.
fn with_valid_values(msg: &str) -> String {
    // The list follows the quoted value, which may itself contain the words.
    let Some(at) = msg.rfind(EXPECTED_ONE_OF) else {
        return bounded_echo(msg.to_string());
    };
    let head = bounded_echo(msg[..at].to_string());
    let values: Vec<&str> = msg[at + EXPECTED_ONE_OF.len()..].split(", ").collect();
    format!(
        "{head}; expected one of these {}:{}",
        values.len(),
        wrapped(&values, 80)
    )
}

/// `items` joined with ", " on lines of at most `width` characters, each line
/// starting with a newline and two spaces.
fn wrapped(items: &[&str], width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for (i, item) in items.iter().enumerate() {
        let text = if i + 1 < items.len() {
            format!("{item},")
        } else {
            item.to_string()
        };
        if line == 0 || line + 1 + text.chars().count() > width {
            out.push_str("\n  ");
            line = 2;
        } else {
            out.push(' ');
            line += 1;
        }
        out.push_str(&text);
        line += text.chars().count();
    }
    out
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

    /// A bundle can reach gigabytes: its node, edge and record arrays are
    /// parsed on all cores.
    fn parse_json_quickly(bytes: &[u8]) -> Option<Self> {
        parallel_read::parse_bundle(bytes)
    }

    /// A bundle can reach gigabytes: written as `write_json_atomic` would,
    /// with its node, edge and record arrays serialized on all cores.
    fn write(&self, file: &Path) -> std::io::Result<()> {
        if wants_compact(file) {
            return self.write_compact(file);
        }
        write_atomic_with(file, |out| write_bundle(out, self))
    }

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
        let mut rids = FxHashSet::with_capacity_and_hasher(self.trace.len(), Default::default());
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

/// The bytes of `serde_json::to_writer(out, bundle)`, field by field in
/// declaration order (a test holds the two equal), with the large arrays
/// written by [`parallel_write::write_array`].
fn write_bundle(out: &mut ChunkedWriter, b: &Bundle) -> std::io::Result<()> {
    fn json<T: Serialize>(out: &mut ChunkedWriter, value: &T) -> std::io::Result<()> {
        serde_json::to_writer(out, value).map_err(std::io::Error::other)
    }
    let gt = &b.ground_truth;
    out.write_all(b"{\"schema_version\":")?;
    json(out, &b.schema_version)?;
    out.write_all(b",\"manifest\":")?;
    json(out, &b.manifest)?;
    out.write_all(b",\"ground_truth\":{\"nodes\":")?;
    parallel_write::write_array(out, &gt.nodes)?;
    out.write_all(b",\"edges\":")?;
    parallel_write::write_array(out, &gt.edges)?;
    out.write_all(b",\"symptoms\":")?;
    json(out, &gt.symptoms)?;
    out.write_all(b",\"injections\":")?;
    json(out, &gt.injections)?;
    out.write_all(b"},\"trace\":")?;
    parallel_write::write_array(out, &b.trace)?;
    out.write_all(b",\"loss\":")?;
    json(out, &b.loss)?;
    out.write_all(b"}")
}

/// Structural checks of a ground truth: ids, references, acyclicity, launch parents.
fn truth_problems(gt: &crate::GroundTruth, trace_rids: &FxHashSet<u64>) -> Vec<(String, String)> {
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
    // A symptom's id is the id of its query in every view: two symptoms with
    // one id would make views that their own reader refuses.
    let mut symptom_ids: HashMap<&str, usize> = HashMap::new();
    for (i, s) in gt.symptoms.iter().enumerate() {
        if let Some(first) = symptom_ids.insert(&s.id, i) {
            out.push((
                format!("ground_truth.symptoms[{i}].id"),
                format!("duplicate symptom id `{}` (also symptoms[{first}])", s.id),
            ));
        }
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

    /// A view of a large bundle is nearly as large: its records are parsed on
    /// all cores.
    fn parse_json_quickly(bytes: &[u8]) -> Option<Self> {
        parallel_read::parse_view(bytes)
    }
    fn problems(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> =
            version_problem(self.schema_version).into_iter().collect();
        let mut rids = FxHashSet::with_capacity_and_hasher(self.records.len(), Default::default());
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

/// Longest `meta.failure` of an explanation.
pub const MAX_FAILURE_MESSAGE: usize = 1024;

impl Readable for Explanation {
    const WHAT: &'static str = "explanation";
    fn problems(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> =
            version_problem(self.schema_version).into_iter().collect();
        // A self-reported cost reaches the leaderboard: -1e308 ms must not.
        let wall_ms = self.meta.wall_ms;
        if !(wall_ms.is_finite() && wall_ms >= 0.0) {
            out.push((
                "meta.wall_ms".into(),
                format!("expected a finite number of milliseconds >= 0, found {wall_ms}"),
            ));
        }
        // The message reaches the leaderboard: one line of bounded length.
        if let Some(failure) = &self.meta.failure {
            if failure.len() > MAX_FAILURE_MESSAGE || failure.contains('\n') {
                out.push((
                    "meta.failure".into(),
                    format!(
                        "expected one line of at most {MAX_FAILURE_MESSAGE} bytes, found {} bytes",
                        failure.len()
                    ),
                ));
            }
        }
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

impl Explanation {
    /// [`Explanation::problem_against`] as the error of the explanation read
    /// from `file`: an explanation that answers another view is bad input.
    pub fn check_against(&self, file: &Path, view: &TraceView) -> Result<(), FormatError> {
        match self.problem_against(view) {
            Some((path, message)) => Err(FormatError::new(
                file,
                format!(".{path}"),
                bounded_echo(message),
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
