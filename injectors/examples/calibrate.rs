//! Calibrate the host injectors on this machine and print the numbers:
//! `cargo run --release -p injectors --example calibrate [-- ROUNDS]`
//! (as root for the CPU hog and ptrace parts).
//!
//! - minor/major page-fault cost (median per fault);
//! - CpuHog (fifo and nice) and PtraceHold accuracy: the victim's longest
//!   self-observed gap for a 5 ms request, over ROUNDS runs (default 10).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use injectors::clock::{longest_gap_within, Gap};
use injectors::page_faults::{calibrate, FaultKind};
use injectors::{allowed_cpus, gettid, spin_recording_gaps, CpuHog, PtraceHold};

const REQ: Duration = Duration::from_millis(5);

fn summary(name: &str, gaps: &mut [f64]) {
    if gaps.is_empty() {
        println!("{name}: no data");
        return;
    }
    gaps.sort_by(f64::total_cmp);
    let med = gaps[gaps.len() / 2];
    let within = gaps.iter().filter(|g| (**g - 5.0).abs() <= 1.5).count();
    println!(
        "{name}: 5 ms request -> victim gap median {med:.3} ms, min {:.3}, max {:.3}, {within}/{} within ±30 %",
        gaps[0],
        gaps[gaps.len() - 1],
        gaps.len()
    );
}

fn victim_main() {
    let h = std::thread::spawn(|| {
        println!("tid {}", gettid());
        spin_recording_gaps(
            Duration::from_millis(300),
            Duration::from_micros(200),
            4096,
            || false,
        )
    });
    for g in h.join().unwrap() {
        println!("gap {} {}", g.start_ns, g.end_ns);
    }
    println!("done");
}

fn hog_round(fifo: bool) -> Option<(String, f64, Option<Duration>)> {
    let cpu = *allowed_cpus().last()?;
    let (tx, rx) = mpsc::channel();
    let v = std::thread::spawn(move || {
        tx.send(gettid()).unwrap();
        spin_recording_gaps(
            Duration::from_millis(200),
            Duration::from_micros(200),
            4096,
            || false,
        )
    });
    let tid = rx.recv().ok()?;
    std::thread::sleep(Duration::from_millis(30));
    let r = CpuHog::new(std::process::id() as i32, tid)
        .on_cpu(cpu)
        .with_fifo(fifo)
        .run(REQ);
    let gaps = v.join().ok()?;
    match r {
        Ok(r) => {
            let g = longest_gap_within(&gaps, r.hog_start_ns - 1_000_000, r.hog_end_ns + 1_000_000)
                .map(|g| g.duration().as_secs_f64() * 1e3)
                .unwrap_or(0.0);
            Some((r.mechanism.as_str().to_string(), g, r.victim_run_delay))
        }
        Err(e) => {
            println!("CpuHog: {e}");
            None
        }
    }
}

fn ptrace_round() -> Option<(f64, Duration)> {
    let mut child = Command::new(std::env::current_exe().ok()?)
        .arg("--victim")
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    let mut lines = BufReader::new(child.stdout.take()?).lines();
    let tid: i32 = lines.next()?.ok()?.strip_prefix("tid ")?.parse().ok()?;
    std::thread::sleep(Duration::from_millis(30));
    let r = PtraceHold::new(child.id() as i32, tid).and_then(|h| h.hold(REQ));
    let mut gaps = Vec::new();
    for l in lines.map_while(Result::ok) {
        if let Some(rest) = l.strip_prefix("gap ") {
            let v: Vec<u64> = rest
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            gaps.push(Gap {
                start_ns: v[0],
                end_ns: v[1],
            });
        }
    }
    let _ = child.wait();
    match r {
        Ok(r) => {
            let g = longest_gap_within(&gaps, r.interrupt_ns, r.resumed_ns + 1_000_000)
                .map(|g| g.duration().as_secs_f64() * 1e3)
                .unwrap_or(0.0);
            Some((g, r.stop_latency()))
        }
        Err(e) => {
            println!("PtraceHold: {e}");
            None
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--victim") {
        return victim_main();
    }
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    println!("cpus allowed: {:?}", allowed_cpus());

    for (kind, n) in [(FaultKind::Minor, 16384), (FaultKind::Major, 2048)] {
        match calibrate(kind, n, 5) {
            Ok(c) => println!(
                "{kind:?} faults: {:.2} us/fault (median of 5 x {n} pages), {:.0} % of pages faulted",
                c.per_fault.as_secs_f64() * 1e6,
                c.fault_ratio * 100.0
            ),
            Err(e) => println!("{kind:?} faults: {e}"),
        }
    }

    for fifo in [true, false] {
        let mut gaps = Vec::new();
        let mut mech = String::new();
        let mut rd = Vec::new();
        for _ in 0..rounds {
            if let Some((m, g, d)) = hog_round(fifo) {
                mech = m;
                gaps.push(g);
                if let Some(d) = d {
                    rd.push(d.as_secs_f64() * 1e3);
                }
            }
        }
        rd.sort_by(f64::total_cmp);
        summary(&format!("CpuHog ({mech})"), &mut gaps);
        if !rd.is_empty() {
            println!("  victim run_delay median {:.3} ms", rd[rd.len() / 2]);
        }
    }

    let mut gaps = Vec::new();
    let mut lat = Vec::new();
    for _ in 0..rounds {
        if let Some((g, l)) = ptrace_round() {
            gaps.push(g);
            lat.push(l.as_secs_f64() * 1e6);
        }
    }
    summary("PtraceHold", &mut gaps);
    lat.sort_by(f64::total_cmp);
    if !lat.is_empty() {
        println!(
            "  interrupt -> stop latency median {:.1} us",
            lat[lat.len() / 2]
        );
    }
}
