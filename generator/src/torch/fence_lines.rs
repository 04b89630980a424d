//! Which Python function forced each implicit-sync fence (docs/torch-track.md,
//! "The Python line of an implicit sync"), as each collector's stacks say it, scored
//! against the truth.
//!
//! A fence is a pageable device-to-host copy of the truth: its call blocks the
//! Python thread until the stream drains (the scenario language's implicit sync;
//! `.item()` and `.tolist()` are the same copy made by torch). The truth is by
//! construction: every copy of a scenario is issued by the executor's `copy`
//! method (`executor.py`, run as `python3 -c`, so its file is `<string>`), at the
//! line [`truth_frame`] reads from the embedded source. The answers:
//! - Kineto's `with_stack` Python events: the innermost frame of the program's own
//!   file enclosing Kineto's record of the fence's call on the same thread;
//! - the eBPF host recorder's user stack of the libcuda call made inside the
//!   fence's call (`python3 -X perf` names CPython frames `py::QUALNAME:FILE` in
//!   `/tmp/perf-PID.map`): its innermost frame of the program's own file.
//!
//! A fence with no such frame is counted as unanswered, never guessed.

use super::EXECUTOR_SOURCE;
use ground_truth::trace::{CopyDirection, HostMemory, Record};
use ground_truth::{Bundle, EdgeType, Node, NodeId, NodeKind};
use std::collections::HashMap;

/// The file name CPython gives code run by `python3 -c`: the executor's frames.
pub const PROGRAM_FILE: &str = "<string>";

/// A Python frame as both collectors can name it: file and function name (the
/// code object's `co_name`), with the definition line where the collector gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonFrame {
    pub file: String,
    pub function: String,
    pub line: Option<u32>,
}

impl PythonFrame {
    /// The same function: file and name (a collector without lines still matches).
    pub fn same_function(&self, other: &PythonFrame) -> bool {
        self.file == other.file && self.function == other.function
    }

    /// Kineto's `python_function` name: `FILE(LINE): NAME`.
    pub fn from_kineto(name: &str) -> Option<PythonFrame> {
        let (head, function) = name.split_once("): ")?;
        let (file, line) = head.rsplit_once('(')?;
        Some(PythonFrame {
            file: file.to_string(),
            function: function.trim().to_string(),
            line: line.parse().ok(),
        })
    }

    /// A perf-map name of CPython's `-X perf` trampolines: `py::QUALNAME:FILE`.
    pub fn from_perf_map(name: &str) -> Option<PythonFrame> {
        let rest = name.strip_prefix("py::")?;
        let (qualname, file) = rest.split_once(':')?;
        Some(PythonFrame {
            file: file.to_string(),
            function: qualname.rsplit('.').next().unwrap_or(qualname).to_string(),
            line: None,
        })
    }
}

/// The frame that issues every copy of a scenario: the executor's `copy` method.
pub fn truth_frame() -> PythonFrame {
    let line = EXECUTOR_SOURCE
        .lines()
        .position(|l| l.trim_start().starts_with("def copy("))
        .map(|i| i as u32 + 1);
    PythonFrame {
        file: PROGRAM_FILE.to_string(),
        function: "copy".to_string(),
        line,
    }
}

/// One implicit-sync fence of a bundle: the blocking copy's call.
#[derive(Debug, Clone, PartialEq)]
pub struct Fence {
    /// The truth's node of the copy.
    pub node: NodeId,
    /// The call's record in the bundle (Kineto's correlation id, thread, interval).
    pub correlation: u64,
    pub tid: u32,
    pub start: u64,
    pub end: u64,
    /// The call node's records: the recording joined its host records to it
    /// (`cuda::host::attach`: same thread, nested in the call).
    pub call_rids: Vec<u64>,
}

/// The implicit-sync fences of a bundle's truth: pageable device-to-host copies,
/// each with its launching call's record.
pub fn fences(bundle: &Bundle) -> Vec<Fence> {
    let records: HashMap<u64, &Record> = bundle.trace.iter().map(|r| (r.rid(), r)).collect();
    let nodes: HashMap<NodeId, &Node> = bundle
        .ground_truth
        .nodes
        .iter()
        .map(|n| (n.id, n))
        .collect();
    let is_fence_copy = |node: &Node| {
        node.kind == NodeKind::Memcpy
            && node.rids.iter().any(|rid| {
                matches!(
                    records.get(rid),
                    Some(Record::Memcpy {
                        direction: CopyDirection::D2h,
                        memory: HostMemory::Pageable,
                        ..
                    })
                )
            })
    };
    let mut out = Vec::new();
    for edge in &bundle.ground_truth.edges {
        if edge.kind != EdgeType::Launch {
            continue;
        }
        let (Some(call), Some(copy)) = (nodes.get(&edge.src), nodes.get(&edge.dst)) else {
            continue;
        };
        if !is_fence_copy(copy) {
            continue;
        }
        let api = call.rids.iter().find_map(|rid| match records.get(rid) {
            Some(Record::Api {
                correlation_id,
                tid,
                start,
                end,
                ..
            }) => Some((*correlation_id, *tid, *start, *end)),
            _ => None,
        });
        if let Some((correlation, tid, start, end)) = api {
            out.push(Fence {
                node: copy.id,
                correlation: u64::from(correlation),
                tid,
                start,
                end,
                call_rids: call.rids.to_vec(),
            });
        }
    }
    out
}

/// Kineto's answer for a fence: the innermost `python_function` of the program's
/// file that encloses Kineto's record of the fence's call on the call's thread.
pub fn from_kineto_stacks(fence: &Fence, trace: &kineto::Activities) -> Option<PythonFrame> {
    let call = trace
        .calls
        .iter()
        .find(|c| c.correlation == fence.correlation)?;
    trace
        .annotations
        .iter()
        .filter(|a| {
            a.category == "python_function"
                && a.tid == call.tid
                && a.start <= call.start
                && call.end <= a.end
        })
        .filter_map(|a| Some((a.start, PythonFrame::from_kineto(&a.name)?)))
        .filter(|(_, f)| f.file == PROGRAM_FILE)
        .max_by_key(|(start, _)| *start)
        .map(|(_, f)| f)
}

/// The eBPF host recorder's answer for a fence: the innermost frame of the program's
/// file in the user stack of a libcuda call made inside the fence's call: a host
/// record the recording joined to the call, else one on its thread nested in the
/// call's interval (the bundle's clock).
pub fn from_host_stacks(fence: &Fence, records: &[Record]) -> Option<PythonFrame> {
    records.iter().find_map(|r| match r {
        Record::Uprobe {
            rid,
            tid,
            enter,
            exit,
            stack,
            ..
        } if fence.call_rids.contains(rid)
            || (*tid == fence.tid && fence.start <= *enter && *exit <= fence.end) =>
        {
            stack
                .iter()
                .filter_map(|frame| PythonFrame::from_perf_map(frame))
                .find(|f| f.file == PROGRAM_FILE)
        }
        _ => None,
    })
}

/// How many fences a source named, and how many of those rightly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FenceScore {
    pub fences: usize,
    pub answered: usize,
    pub correct: usize,
}

impl FenceScore {
    pub fn add(&mut self, answer: Option<&PythonFrame>, truth: &PythonFrame) {
        self.fences += 1;
        if let Some(frame) = answer {
            self.answered += 1;
            if frame.same_function(truth) {
                self.correct += 1;
            }
        }
    }

    /// The share of fences named rightly (`None` without fences).
    pub fn share(&self) -> Option<f64> {
        (self.fences > 0).then(|| self.correct as f64 / self.fences as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_collectors_names_parse_to_the_same_function() {
        let k = PythonFrame::from_kineto("<string>(567): copy").unwrap();
        assert_eq!(k.line, Some(567));
        let p = PythonFrame::from_perf_map("py::Run.copy:<string>").unwrap();
        assert!(k.same_function(&p));
        assert_eq!(truth_frame().function, "copy");
        assert!(truth_frame().line.is_some());
        assert!(PythonFrame::from_kineto("<built-in function monotonic_ns>").is_none());
        assert!(PythonFrame::from_perf_map("cuMemcpyDtoHAsync_v2").is_none());
        let lib = PythonFrame::from_kineto("torch/cuda/streams.py(37): __new__").unwrap();
        assert_eq!(lib.file, "torch/cuda/streams.py");
        assert!(!lib.same_function(&k));
    }

    #[test]
    fn a_host_stack_names_the_program_frame_of_the_fence_call() {
        let fence = Fence {
            node: 1,
            correlation: 7,
            tid: 42,
            start: 100,
            end: 200,
            call_rids: vec![9],
        };
        let uprobe = |tid, enter, stack: &[&str]| Record::Uprobe {
            rid: 1,
            tid,
            function: "cuMemcpyDtoHAsync_v2".into(),
            enter,
            exit: enter + 10,
            handle: 0,
            stack: stack
                .iter()
                .map(|s| ground_truth::SharedStr::from(*s))
                .collect(),
        };
        let stack = [
            "libcuda.so.1+0x10",
            "py::Tensor.copy_:torch/x.py",
            "py::Run.copy:<string>",
        ];
        let records = vec![uprobe(41, 120, &stack), uprobe(42, 300, &stack)];
        assert_eq!(
            from_host_stacks(&fence, &records),
            None,
            "other thread, or after"
        );
        let records = vec![uprobe(42, 120, &stack)];
        let frame = from_host_stacks(&fence, &records).unwrap();
        // A record joined to the call counts whatever its clock says.
        let mut joined = uprobe(41, 900, &stack);
        if let Record::Uprobe { rid, .. } = &mut joined {
            *rid = 9;
        }
        assert!(from_host_stacks(&fence, &[joined]).is_some());
        assert!(frame.same_function(&truth_frame()));
        let mut score = FenceScore::default();
        score.add(Some(&frame), &truth_frame());
        score.add(None, &truth_frame());
        assert_eq!((score.fences, score.answered, score.correct), (2, 1, 1));
        assert_eq!(score.share(), Some(0.5));
    }
}
