//! PtraceHold stops one (non-main) thread of a child process for 5 ms; the
//! child's thread records gaps in its own CLOCK_MONOTONIC readings.
//!
//! The child is this test binary re-executed with `CB_PTRACE_VICTIM=1`
//! running only `victim_helper`, which prints `CBVICTIM tid <tid>`, spins in
//! a second thread recording gaps, then prints each gap as
//! `CBVICTIM gap <start_ns> <end_ns>` and `CBVICTIM done`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use injectors::clock::{longest_gap_within, Gap};
use injectors::{gettid, spin_recording_gaps, InjectorError, PtraceHold};

const REQUESTED: Duration = Duration::from_millis(5);

/// Not a test on its own: the victim process's body when re-executed.
#[test]
fn victim_helper() {
    if std::env::var("CB_PTRACE_VICTIM").as_deref() != Ok("1") {
        return;
    }
    let h = std::thread::spawn(|| {
        println!("CBVICTIM tid {}", gettid());
        spin_recording_gaps(
            Duration::from_millis(600),
            Duration::from_micros(200),
            4096,
            || false,
        )
    });
    let gaps = h.join().unwrap();
    for g in gaps {
        println!("CBVICTIM gap {} {}", g.start_ns, g.end_ns);
    }
    println!("CBVICTIM done");
}

/// The text after `marker` (libtest may print its own prefix on the line).
fn after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    line.find(marker).map(|i| &line[i + marker.len()..])
}

struct Victim {
    child: std::process::Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Victim {
    fn spawn() -> (Victim, i32) {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "victim_helper",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CB_PTRACE_VICTIM", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("re-exec the test binary");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let tid = loop {
            let l = lines.next().expect("victim output").unwrap();
            if let Some(t) = after(&l, "CBVICTIM tid ") {
                break t.trim().parse::<i32>().unwrap();
            }
        };
        (Victim { child, lines }, tid)
    }

    fn gaps(mut self) -> Vec<Gap> {
        let mut gaps = Vec::new();
        for l in self.lines.by_ref() {
            let l = l.unwrap();
            if let Some(rest) = after(&l, "CBVICTIM gap ") {
                let v: Vec<u64> = rest
                    .split_whitespace()
                    .map(|x| x.parse().unwrap())
                    .collect();
                gaps.push(Gap {
                    start_ns: v[0],
                    end_ns: v[1],
                });
            } else if l.contains("CBVICTIM done") {
                break;
            }
        }
        let _ = self.child.wait();
        gaps
    }
}

#[test]
fn ptrace_hold_stops_a_child_thread() {
    let (victim, tid) = Victim::spawn();
    let pid = victim.child.id() as i32;
    assert_ne!(pid, tid, "the victim thread is not the child's main thread");
    std::thread::sleep(Duration::from_millis(50));
    let hold = PtraceHold::new(pid, tid).unwrap();
    let report = match hold.hold(REQUESTED) {
        Ok(r) => r,
        Err(e @ InjectorError::PrivilegeMissing { .. }) => {
            eprintln!("SKIP ptrace_hold_stops_a_child_thread: {e}");
            let _ = victim.gaps();
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let gaps = victim.gaps();
    let gap = longest_gap_within(&gaps, report.interrupt_ns, report.resumed_ns + 1_000_000)
        .expect("the victim saw a gap during the hold");
    eprintln!(
        "ptrace hold: held {:?} (stop latency {:?}), victim gap {:?}, state during hold {:?}",
        report.held(),
        report.stop_latency(),
        gap.duration(),
        report.state_during
    );
    assert!(report.held() >= REQUESTED);
    assert_eq!(report.state_during, Some('t'), "tracing stop");
    // The victim ran no instruction while it was held: one gap of its own
    // clock covers the whole hold. How much longer the gap is depends on the
    // scheduler after the detach, which a busy machine stretches: not judged.
    assert!(
        gaps.iter()
            .any(|g| g.start_ns <= report.stopped_ns && g.end_ns >= report.resumed_ns),
        "no victim gap covers the hold [{}, {}] (longest near it: {:?})",
        report.stopped_ns,
        report.resumed_ns,
        gap.duration()
    );
}

#[test]
fn own_thread_group_is_refused() {
    let me = std::process::id() as i32;
    assert!(matches!(
        PtraceHold::new(me, gettid()),
        Err(InjectorError::OwnThreadGroup { .. })
    ));
    // Another thread of ours, named with a foreign pid, is still ours.
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        tx.send(gettid()).unwrap();
        let _ = stop_rx.recv();
    });
    let other = rx.recv().unwrap();
    let e = PtraceHold::new(1, other).unwrap_err();
    assert!(matches!(e, InjectorError::OwnThreadGroup { .. }), "{e}");
    assert!(e.to_string().contains("own thread group"));
    stop_tx.send(()).unwrap();
    t.join().unwrap();
}

#[test]
fn missing_thread_is_an_error() {
    assert!(matches!(
        PtraceHold::new(1, 999_999_999),
        Err(InjectorError::NoSuchThread { .. })
    ));
}
