//! The recorder on a Python process started with `python3 -X perf` (the torch
//! backend's executor, docs/torch-track.md "kineto+host"): a uprobe on a libc
//! function that a Python function calls (through ctypes, or through the
//! interpreter's own C code) records a user stack whose frames, symbolized through
//! the process's `/tmp/perf-PID.map`, name that Python function
//! (`py::QUALNAME:FILE`, perf_map.rs).
//!
//! Needs root (or CAP_BPF+CAP_PERFMON) and a Python with perf trampolines (3.12+):
//! `$CAUSALBENCH_PYTHON`, else every one of python3, python3.13, python3.12 and the
//! pyenv versions that has them. Without either the tests print `SKIP: ...` and
//! pass, unless CAUSALBENCH_REQUIRE_EBPF=1 is set and the recorder cannot start.
//!
//! Two ways to get the stack. The kernel's frame-pointer walk: a CPython built
//! without frame pointers ends it before the trampolines, which the first test
//! reports as a SKIP naming the interpreter, never as a pass. The stack copy
//! (`RecorderConfig::stack_copy_bytes`) unwound with the DWARF unwind tables: the
//! other tests, which must name the Python functions whatever the build.

use ebpf_recorder::{Recorder, RecorderConfig};
use ground_truth::trace::Record;
use ground_truth::SharedStack;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Calls `labs` through ctypes from `fence_here`, once the recorder is attached.
const CTYPES_SCRIPT: &str = r#"
import ctypes, sys
libc = ctypes.CDLL(None)
def fence_here(x):
    return libc.labs(x)
fence_here(-1)
print("ready", flush=True)
sys.stdin.readline()
for i in range(5):
    fence_here(-2 - i)
print("done", flush=True)
sys.stdin.readline()
"#;

/// Calls the interpreter's own `os.getppid` (C code of the interpreter, which
/// calls libc's `getppid`) from `fence_native`, once the recorder is attached.
const NATIVE_SCRIPT: &str = r#"
import os, sys
def fence_native():
    return os.getppid()
fence_native()
print("ready", flush=True)
sys.stdin.readline()
for i in range(5):
    fence_native()
print("done", flush=True)
sys.stdin.readline()
"#;

/// Bytes of stack the copy tests copy per call.
const COPY_BYTES: u32 = 16 * 1024;

/// The pyenv interpreters of this machine (`$PYENV_ROOT`, else ~/.pyenv).
fn pyenv_pythons() -> Vec<String> {
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")));
    let Some(versions) = root.map(|r| r.join("versions")) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = std::fs::read_dir(versions)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path().join("bin/python3"))
                .collect()
        })
        .unwrap_or_default();
    found.retain(|p| p.is_file());
    found.sort();
    found.into_iter().map(|p| p.display().to_string()).collect()
}

/// `$CAUSALBENCH_PYTHON` if set, else every distinct interpreter found here,
/// that has perf trampolines.
fn pythons_with_perf_trampolines() -> Vec<String> {
    let candidates: Vec<String> = match std::env::var("CAUSALBENCH_PYTHON") {
        Ok(p) if !p.is_empty() => vec![p],
        _ => ["python3", "python3.13", "python3.12"]
            .map(String::from)
            .into_iter()
            .chain(pyenv_pythons())
            .collect(),
    };
    let mut seen = Vec::new();
    candidates
        .into_iter()
        .filter(|p| {
            let out = Command::new(p)
                .args([
                    "-c",
                    "import sys; print(sys.executable); \
                     sys.exit(0 if hasattr(sys, 'activate_stack_trampoline') else 1)",
                ])
                .stderr(Stdio::null())
                .output();
            let Some(out) = out.ok().filter(|o| o.status.success()) else {
                return false;
            };
            let exe = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let exe = std::fs::canonicalize(&exe).unwrap_or_else(|_| PathBuf::from(exe));
            let new = !seen.contains(&exe);
            seen.push(exe);
            new
        })
        .collect()
}

fn libc_of(pid: u32) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
        .map(PathBuf::from)
}

/// The stacks of the calls of libc's `function` that `script`, run by `python`,
/// makes between its "ready" and "done" lines, with `stack_copy_bytes` of stack
/// copied per call; `None` (after printing why) where the recorder cannot run here.
fn record_python_calls(
    test: &str,
    python: &str,
    script: &str,
    function: &str,
    stack_copy_bytes: u32,
) -> Option<Vec<SharedStack>> {
    let mut child = Command::new(python)
        .args(["-X", "perf", "-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let mut cfg = RecorderConfig::new(pid);
    cfg.sched = false;
    cfg.page_faults = false;
    cfg.library = libc_of(pid);
    cfg.functions = vec![function.into()];
    cfg.stack_copy_bytes = stack_copy_bytes;
    let recorder = match Recorder::start(cfg) {
        Ok(r) => r,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            if e.is_environment() && std::env::var_os("CAUSALBENCH_REQUIRE_EBPF").is_none() {
                eprintln!("SKIP {test}: this machine cannot record eBPF host events: {e}");
                return None;
            }
            panic!("the recorder failed to start: {e}");
        }
    };
    writeln!(stdin, "go").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "done");
    // Stopped while the process lives: its maps and perf map symbolize the stacks.
    let trace = recorder.stop();
    writeln!(stdin, "exit").unwrap();
    let _ = child.wait();
    if stack_copy_bytes > 0 {
        assert_eq!(trace.stack_copies_dropped, 0, "{:?}", trace.warnings);
        assert!(
            trace.stack_copies >= 5,
            "{} stack copies",
            trace.stack_copies
        );
    }
    let stacks: Vec<SharedStack> = trace
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Uprobe {
                function: f, stack, ..
            } if &**f == function => Some(stack.clone()),
            _ => None,
        })
        .collect();
    assert!(
        stacks.len() >= 5,
        "{} {function} calls recorded",
        stacks.len()
    );
    eprintln!("{test}, {python}: first stack {:?}", stacks[0]);
    Some(stacks)
}

/// Where each stack names `frame` (a perf-map name's start), innermost first.
fn positions(stacks: &[SharedStack], frame: &str) -> Vec<Option<usize>> {
    stacks
        .iter()
        .map(|s| s.iter().position(|f| f.starts_with(frame)))
        .collect()
}

#[test]
fn a_python_frame_is_named_through_the_perf_map() {
    let Some(python) = pythons_with_perf_trampolines().into_iter().next() else {
        eprintln!("SKIP: no python3 with perf trampolines (-X perf needs Python 3.12+)");
        return;
    };
    let test = "frame-pointer walk";
    let Some(stacks) = record_python_calls(test, &python, CTYPES_SCRIPT, "labs", 0) else {
        return;
    };
    let named = positions(&stacks, "py::fence_here:<string>")
        .iter()
        .filter(|p| p.is_some())
        .count();
    if named == 0 && !stacks[0].iter().any(|f| f.starts_with("py::")) {
        eprintln!(
            "SKIP: {python} keeps no frame pointers: the stack walk ends before the \
             Python trampolines ({:?})",
            stacks[0]
        );
        return;
    }
    assert_eq!(
        named,
        stacks.len(),
        "every labs call names its Python function"
    );
}

/// The copied stacks of `function`'s calls name `python_function`, then, further
/// out, the module code that called it (the unwinding crossed the perf
/// trampoline between them), with at least `native_frames` frames inside it.
fn check_copied_stacks(
    test: &str,
    script: &str,
    function: &str,
    python_function: &str,
    native_frames: usize,
) {
    let pythons = pythons_with_perf_trampolines();
    if pythons.is_empty() {
        eprintln!("SKIP {test}: no python3 with perf trampolines (-X perf needs Python 3.12+)");
    }
    for python in pythons {
        let Some(stacks) = record_python_calls(test, &python, script, function, COPY_BYTES) else {
            return;
        };
        let callee = positions(&stacks, python_function);
        let caller = positions(&stacks, "py::<module>:<string>");
        for ((stack, callee), caller) in stacks.iter().zip(callee).zip(caller) {
            let (Some(callee), Some(caller)) = (callee, caller) else {
                panic!(
                    "{python}: {function} called from {python_function} from the module: {stack:?}"
                );
            };
            assert!(
                native_frames <= callee && callee < caller,
                "{python}: {function}, {native_frames}+ native frames, {python_function}, \
                 the module: {stack:?}"
            );
        }
    }
}

/// Through ctypes (libffi, the ctypes module, the interpreter).
#[test]
fn a_copied_stack_names_the_python_function() {
    check_copied_stacks(
        "stack copy, ctypes",
        CTYPES_SCRIPT,
        "labs",
        "py::fence_here:<string>",
        4,
    );
}

/// Through the interpreter's own C code (no ctypes): built without frame
/// pointers where the distribution's CPython is.
#[test]
fn a_copied_stack_crosses_the_interpreters_c_frames() {
    check_copied_stacks(
        "stack copy, native frames",
        NATIVE_SCRIPT,
        "getppid",
        "py::fence_native:<string>",
        3,
    );
}
