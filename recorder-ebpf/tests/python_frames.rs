//! The recorder on a Python process started with `python3 -X perf` (the torch
//! backend's executor, docs/torch-track.md "kineto+host"): a uprobe on a libc
//! function that a Python function calls through ctypes records a user stack whose
//! frames, symbolized through the process's `/tmp/perf-PID.map`, name that Python
//! function (`py::QUALNAME:FILE`, perf_map.rs).
//!
//! Needs root (or CAP_BPF+CAP_PERFMON) and a Python with perf trampolines (3.12+:
//! `$CAUSALBENCH_PYTHON`, else the first of python3, python3.13, python3.12 that has
//! them). Without either the test prints `SKIP: ...` and passes, unless
//! CAUSALBENCH_REQUIRE_EBPF=1 is set and the recorder cannot start. The stack walk
//! follows frame pointers: a CPython built without them may end the walk before the
//! trampolines, which the test reports as a SKIP naming the interpreter, never as a
//! pass.

use ebpf_recorder::{Recorder, RecorderConfig};
use ground_truth::trace::Record;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

/// Calls `labs` through ctypes from `fence_here`, once the recorder is attached.
const SCRIPT: &str = r#"
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

fn python_with_perf_trampolines() -> Option<String> {
    let candidates: Vec<String> = std::env::var("CAUSALBENCH_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
        .into_iter()
        .chain(["python3", "python3.13", "python3.12"].map(String::from))
        .collect();
    candidates.into_iter().find(|p| {
        Command::new(p)
            .args([
                "-c",
                "import sys; sys.exit(0 if hasattr(sys, 'activate_stack_trampoline') else 1)",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

fn libc_of(pid: u32) -> Option<std::path::PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
        .map(std::path::PathBuf::from)
}

#[test]
fn a_python_frame_is_named_through_the_perf_map() {
    let Some(python) = python_with_perf_trampolines() else {
        eprintln!("SKIP: no python3 with perf trampolines (-X perf needs Python 3.12+)");
        return;
    };
    let mut child = Command::new(&python)
        .args(["-X", "perf", "-c", SCRIPT])
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
    cfg.functions = vec!["labs".into()];
    let recorder = match Recorder::start(cfg) {
        Ok(r) => r,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            if e.is_environment() && std::env::var_os("CAUSALBENCH_REQUIRE_EBPF").is_none() {
                eprintln!("SKIP: this machine cannot record eBPF host events: {e}");
                return;
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
    let stacks: Vec<&ground_truth::SharedStack> = trace
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Uprobe {
                function, stack, ..
            } if &**function == "labs" => Some(stack),
            _ => None,
        })
        .collect();
    assert!(stacks.len() >= 5, "{} labs calls recorded", stacks.len());
    let named = stacks
        .iter()
        .filter(|s| s.iter().any(|f| f.starts_with("py::fence_here:<string>")))
        .count();
    eprintln!(
        "{python}: {named} of {} stacks name py::fence_here; first: {:?}",
        stacks.len(),
        stacks[0]
    );
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
