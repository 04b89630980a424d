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
mod tests {
    use super::chunked::CHUNK;
    use super::*;

    #[test]
    fn an_unknown_variant_lists_every_valid_value_wrapped_and_cuts_only_the_value() {
        let value = "x".repeat(10_000);
        let valid: Vec<String> = (0..40).map(|i| format!("`label_number_{i}`")).collect();
        let msg = format!(
            "unknown variant `{value}`, expected one of {} at line 1 column 9",
            valid.join(", ")
        );
        let m = parser_message(&msg);
        for v in &valid {
            assert!(m.contains(v.as_str()), "{v} missing: {m}");
        }
        assert!(m.contains("expected one of these 40:"), "{m}");
        assert!(m.chars().count() < 2_000, "the value is cut: {m}");
        assert!(!m.contains("at line"), "{m}");
        let lines: Vec<&str> = m.lines().skip(1).collect();
        assert!(lines.len() > 1, "{m}");
        assert!(
            lines
                .iter()
                .all(|l| l.starts_with("  ") && l.chars().count() <= 80),
            "{m}"
        );
        // A short message without a list is unchanged.
        assert_eq!(
            parser_message("expected `a` or `b` at line 1 column 2"),
            "expected `a` or `b`"
        );
    }

    #[test]
    fn large_outputs_are_written_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big.bin");
        // Several chunks plus a tail, with a pattern that shows misordering.
        let bytes: Vec<u8> = (0..(3 * CHUNK + 12_345)).map(|i| (i % 251) as u8).collect();
        write_atomic(&file, &bytes).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), bytes);
        let values: Vec<u64> = (0..2_000_000).collect();
        write_json_atomic(&file, &values).unwrap();
        assert_eq!(
            std::fs::read(&file).unwrap(),
            serde_json::to_vec(&values).unwrap()
        );
    }

    /// Every record kind with every field set, repeated past the size at
    /// which the arrays are serialized in parallel.
    pub(super) fn big_bundle() -> Bundle {
        use crate::graph::{Edge, EdgeType, Node, Phases, Symptom};
        use crate::trace::*;
        let scenario = Scenario::parse(
            Path::new("dependency-vs-overlap.event-edge.yaml"),
            include_bytes!("../../catalog/dependency-vs-overlap.event-edge.yaml"),
        )
        .unwrap();
        let s = |t: &str| crate::SharedStr::from(t);
        let records = |i: u64| {
            let rid = i * 12 + 1;
            [
                Record::Api {
                    rid,
                    domain: ApiDomain::Driver,
                    cbid: 7,
                    name: s("cuLaunchKernel"),
                    tid: 3,
                    start: i,
                    end: i + 1,
                    correlation_id: 9,
                },
                Record::Kernel {
                    rid: rid + 1,
                    stream: 1,
                    correlation_id: 4,
                    queued: 7,
                    submitted: 8,
                    start: 9,
                    end: 10,
                    detail: crate::trace::KernelDetail {
                        name: s("k\"q"),
                        context: 2,
                        device: 3,
                        graph_id: 5,
                        graph_node_id: 6,
                        grid: [1, 2, 3],
                        block: [4, 5, 6],
                        channel: 11,
                    }
                    .into(),
                },
                Record::Memcpy {
                    rid: rid + 2,
                    direction: CopyDirection::D2h,
                    memory: HostMemory::Pageable,
                    stream: 2,
                    correlation_id: 5,
                    queued: 8,
                    submitted: 9,
                    start: 10,
                    end: 11,
                    detail: crate::trace::CopyDetail {
                        bytes: 1,
                        context: 3,
                        device: 4,
                        graph_id: 6,
                        graph_node_id: 7,
                        channel: 12,
                    }
                    .into(),
                },
                Record::Memset {
                    rid: rid + 3,
                    stream: 2,
                    correlation_id: 5,
                    queued: 6,
                    submitted: 7,
                    start: 8,
                    end: 9,
                    detail: crate::trace::MemsetDetail {
                        bytes: 1,
                        context: 3,
                        device: 4,
                    }
                    .into(),
                },
                Record::Sync {
                    rid: rid + 4,
                    sync_type: SyncType::EventSynchronize,
                    stream: 1,
                    event: 2,
                    event_sync_id: 3,
                    correlation_id: 4,
                    start: 5,
                    end: 6,
                },
                Record::CudaEvent {
                    rid: rid + 5,
                    event: 1,
                    event_sync_id: 2,
                    stream: 3,
                    correlation_id: 4,
                    ts: 5,
                },
                Record::ExternalCorrelation {
                    rid: rid + 6,
                    external_kind: s("request"),
                    external_id: 1,
                    correlation_id: 2,
                },
                Record::Nvtx {
                    rid: rid + 7,
                    tid: 1,
                    name: s("attention"),
                    start: 2,
                    end: 3,
                },
                Record::Marker {
                    rid: rid + 8,
                    tid: 1,
                    phase: MarkerPhase::Enqueue,
                    queue: s("q"),
                    token: s("7"),
                    ts: 2,
                },
                Record::Uprobe {
                    rid: rid + 9,
                    tid: 1,
                    function: s("cuLaunchKernel"),
                    enter: 2,
                    exit: 3,
                    handle: 4,
                    stack: vec![s("a"), s("b")].into(),
                },
                Record::Sched {
                    rid: rid + 10,
                    tid: 1,
                    cpu: 2,
                    switch_out: 3,
                    switch_in: 4,
                    reason: SwitchReason::Traced,
                },
                Record::PageFault {
                    rid: rid + 11,
                    tid: 1,
                    ts: 2,
                    duration: 3,
                    address: 4,
                    major: true,
                },
            ]
        };
        let n = 70_000u32;
        let nodes = (0..n)
            .map(|i| Node {
                id: i,
                kind: NodeKind::Kernel,
                name: s("k"),
                request: (i % 2 == 0).then(|| s("1")),
                step: Some(s("producer")),
                detail: crate::graph::NodeDetail {
                    thread: Some(4),
                    stream: (i % 3 == 0).then_some(13),
                    call_site: Some(s("app!site")),
                    operator: Some(s("mlp")),
                }
                .into(),
                generation: i % 2,
                start: 1,
                end: 2,
                queued: (i % 5) as u64,
                submitted: 4,
                rids: [i as u64].into_iter().collect(),
            })
            .collect();
        let edges = (1..n)
            .map(|i| Edge {
                src: i - 1,
                dst: i,
                kind: EdgeType::ALL[i as usize % 9],
            })
            .collect();
        let symptom = Symptom {
            id: "q0".into(),
            node: 1,
            rid: 2,
            question: crate::Question::Cause,
            cause: scenario.cause,
            answer: None,
            lateness_ns: 1.5,
            critical_path: vec![0, 1],
            phases: Phases::default(),
            boundaries: vec![],
            label: None,
        };
        Bundle {
            schema_version: crate::SCHEMA_VERSION,
            manifest: crate::Manifest {
                scenario,
                seed: 1,
                repetition: 0,
                backend: "sim".into(),
                gpu: "g".into(),
                driver: "d".into(),
                cuda: "c".into(),
                cupti: "p".into(),
                tool_version: "0".into(),
                host: "h".into(),
                collectors: vec!["cupti".into()],
                cross_check: Some(Default::default()),
                cupti_capabilities: None,
            },
            ground_truth: crate::GroundTruth {
                nodes,
                edges,
                symptoms: vec![symptom],
                injections: vec![],
            },
            trace: (0..7_000).flat_map(records).collect(),
            loss: crate::LossAccounting {
                cupti_dropped: 1,
                cupti_timestamps_dropped: 2,
                ringbuffer_dropped: 3,
                cupti_unobservable: 4,
            },
        }
    }

    /// A bundle small enough to mutate many times, and its view.
    pub(super) fn small_bundle_and_view() -> (Bundle, TraceView) {
        let mut bundle = big_bundle();
        bundle.ground_truth.nodes.truncate(4);
        bundle.ground_truth.edges.truncate(3);
        bundle.trace.truncate(14);
        let view = TraceView {
            schema_version: crate::SCHEMA_VERSION,
            bundle: bundle.id(),
            spec: crate::ViewSpec {
                collectors: crate::Collectors::Combined,
                mode: crate::Mode::Instrumented,
                loss: crate::view::LossSpec::Uniform { rate: 0.5, seed: 3 },
            },
            queries: vec![crate::view::Query {
                id: "q0".into(),
                rid: 2,
                question: crate::Question::Cause,
            }],
            collector_loss: bundle.loss,
            records: bundle.trace.clone(),
        };
        (bundle, view)
    }

    /// The quick parser of `T` accepts `bytes` exactly when the tracked parser
    /// does, and then reads the same value.
    fn parsers_agree<T: Readable + PartialEq + fmt::Debug>(bytes: &[u8]) {
        let quick = T::parse_json_quickly(bytes);
        let tracked = from_json_tracked::<T>(Path::new("f.json"), bytes);
        match (quick, tracked) {
            (Some(q), Ok(t)) => assert!(q == t, "the parsers read different values"),
            (None, Err(_)) => {}
            (q, t) => panic!(
                "quick parser accepted: {}, tracked parser: {t:?}\n{}",
                q.is_some(),
                String::from_utf8_lossy(bytes)
            ),
        }
    }

    #[test]
    fn the_quick_parsers_read_what_was_written() {
        let bundle = big_bundle();
        let bytes = serde_json::to_vec(&bundle).unwrap();
        let quick = Bundle::parse_json_quickly(&bytes).expect("a well-formed bundle");
        assert!(quick == bundle);
        let (_, mut view) = small_bundle_and_view();
        view.records = bundle.trace.clone();
        let bytes = serde_json::to_vec(&view).unwrap();
        assert!(TraceView::parse_json_quickly(&bytes).expect("a well-formed view") == view);
    }

    #[test]
    fn large_files_are_parsed_from_a_map_and_errors_still_name_the_place() {
        let bundle = big_bundle();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("b.bundle.json");
        // JSON may end in any amount of whitespace: a few megabytes of bundle,
        // a file large enough to be mapped.
        let mut bytes = serde_json::to_vec_pretty(&bundle).unwrap();
        bytes.resize(limits::MAP_FROM_BYTES as usize + 1, b' ');
        std::fs::write(&file, &bytes).unwrap();
        assert!(matches!(
            read_input(&file, "run bundle", &InputLimits::DEFAULT).unwrap(),
            InputBytes::Mapped(_)
        ));
        // (This test bundle's nodes name rids it does not have: the read gets as
        // far as the semantic checks, as a parse of the bytes in memory does.)
        let from_map = Bundle::read(&file).unwrap_err();
        assert_eq!(from_map, Bundle::parse(&file, &bytes).unwrap_err());
        assert!(
            from_map.message.contains("dangling reference to rid"),
            "{from_map}"
        );
        let at = bytes.windows(7).position(|w| w == b"\"seed\":").unwrap();
        bytes[at + 8] = b'x';
        std::fs::write(&file, &bytes).unwrap();
        let err = Bundle::read(&file).unwrap_err();
        assert_eq!(err.path, ".manifest.scenario.seed", "{err}");
        assert!(err.line.is_some(), "{err}");
    }

    #[test]
    fn text_after_the_value_is_an_error_with_its_line() {
        let (bundle, _) = small_bundle_and_view();
        let mut bytes = serde_json::to_vec_pretty(&bundle).unwrap();
        bytes.extend_from_slice(b"\n{}");
        let err = Bundle::parse(Path::new("b.json"), &bytes).unwrap_err();
        assert!(err.message.contains("trailing characters"), "{err}");
        assert!(err.line.is_some(), "{err}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]
        #[test]
        fn quick_and_tracked_parsers_agree_on_damaged_files(
            at in proptest::prelude::any::<proptest::sample::Index>(),
            len in 0usize..6,
            insert in proptest::collection::vec(
                proptest::sample::select(b"{}[]\":,-0123456789.eE truefalsnul".to_vec()),
                0..6,
            ),
        ) {
            static TEXTS: std::sync::LazyLock<[Vec<u8>; 2]> = std::sync::LazyLock::new(|| {
                let (bundle, view) = small_bundle_and_view();
                [serde_json::to_vec(&bundle).unwrap(), serde_json::to_vec(&view).unwrap()]
            });
            for text in TEXTS.iter() {
                let start = at.index(text.len());
                let end = (start + len).min(text.len());
                let damaged = [&text[..start], &insert[..], &text[end..]].concat();
                parsers_agree::<Bundle>(&damaged);
                parsers_agree::<TraceView>(&damaged);
            }
        }
    }

    #[test]
    fn bundles_are_written_as_serde_writes_them() {
        let bundle = big_bundle();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("b.bundle.json");
        bundle.write(&file).unwrap();
        let written = std::fs::read(&file).unwrap();
        assert!(written == serde_json::to_vec(&bundle).unwrap());
        // And what is left out (zero times, generations) reads back the same.
        let back: Bundle = from_json(&file, &written).unwrap();
        assert!(back == bundle);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temp_file() {
        struct Fails;
        impl Serialize for Fails {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("no"))
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out.json");
        write_atomic(&file, b"old").unwrap();
        let big: Vec<u64> = (0..2_000_000).collect();
        assert!(write_json_atomic(&file, &(big, Fails)).is_err());
        assert_eq!(std::fs::read(&file).unwrap(), b"old");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "the temp file was removed");
    }
}
