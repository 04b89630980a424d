//! Page-fault injection counted with getrusage(RUSAGE_THREAD).

use std::time::Duration;

use injectors::page_faults::{calibrate, default_fault_dir, FaultKind, PageFaults};
use injectors::InjectorError;

const N: usize = 2048;

#[test]
fn minor_faults_are_counted_on_the_triggering_thread() {
    let mut pf = PageFaults::prepare(N, FaultKind::Minor).unwrap();
    assert_eq!(pf.resident_pages().unwrap(), 0);
    // Prepared on this thread, triggered on another (the victim).
    let (pf_back, r) = std::thread::spawn(move || {
        let r = pf.trigger().unwrap();
        (pf, r)
    })
    .join()
    .unwrap();
    eprintln!(
        "minor: {} faults ({} major) for {} pages in {:?}, {:?}/fault",
        r.minor_faults,
        r.major_faults,
        r.pages_touched,
        r.elapsed(),
        r.per_fault()
    );
    assert!(r.minor_faults as f64 >= 0.9 * N as f64, "{r:?}");
    assert_eq!(pf_back.resident_pages().unwrap(), N);
    // Re-armed pages fault again.
    let mut pf = pf_back;
    let r2 = pf.trigger().unwrap();
    assert!(r2.minor_faults as f64 >= 0.9 * N as f64, "{r2:?}");
}

#[test]
fn major_faults_read_evicted_file_pages() {
    let dir = default_fault_dir();
    let mut pf = match PageFaults::prepare(N, FaultKind::Major) {
        Ok(pf) => pf,
        Err(e @ InjectorError::NoMajorFaults { .. }) => {
            eprintln!("SKIP major_faults_read_evicted_file_pages: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let resident = pf.resident_pages().unwrap();
    if resident as f64 > 0.5 * N as f64 {
        eprintln!(
            "SKIP major_faults_read_evicted_file_pages: the filesystem at {} kept {resident}/{N} pages cached after POSIX_FADV_DONTNEED",
            dir.display()
        );
        return;
    }
    let r = pf.trigger().unwrap();
    eprintln!(
        "major in {}: {} major + {} minor faults for {} pages in {:?}, {:?}/major fault",
        dir.display(),
        r.major_faults,
        r.minor_faults,
        r.pages_touched,
        r.elapsed(),
        r.per_fault()
    );
    assert!(r.major_faults as f64 >= 0.5 * N as f64, "{r:?}");
    // Re-arming evicts the pages again.
    pf.rearm().unwrap();
    let r2 = pf.trigger().unwrap();
    assert!(r2.major_faults as f64 >= 0.5 * N as f64, "{r2:?}");
}

#[test]
fn calibration_gives_a_per_fault_cost() {
    let c = calibrate(FaultKind::Minor, 4096, 3).unwrap();
    eprintln!(
        "minor calibration: {:?}/fault, ratio {:.2}",
        c.per_fault, c.fault_ratio
    );
    assert!(c.per_fault > Duration::ZERO && c.per_fault < Duration::from_millis(1));
    assert!(c.fault_ratio >= 0.9);
}

/// The calling thread's involuntary context switches so far.
fn involuntary_switches() -> i64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage of this thread.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) }, 0);
    u.ru_nivcsw
}

/// Faulting until a deadline lasts the requested time (to within a few
/// faults) and every page it touched faulted.
#[test]
fn faults_until_a_deadline_stop_at_the_deadline() {
    let mut pf = PageFaults::prepare(1 << 16, FaultKind::Minor).unwrap();
    let preempted_before = involuntary_switches();
    let start = injectors::monotonic_ns();
    let r = pf.trigger_until(start + 1_000_000).unwrap();
    let preempted = involuntary_switches() - preempted_before;
    eprintln!("until: {r:?}, {preempted} involuntary switches");
    assert!(r.pages_touched > 0 && r.pages_touched < 1 << 16, "{r:?}");
    let overshoot = r.end_ns.saturating_sub(start + 1_000_000);
    assert!(r.end_ns >= start + 1_000_000, "ended before the deadline");
    // The deadline is checked before every page, so past it the loop stops
    // within a fault or two, unless the scheduler took the CPU meanwhile (a
    // busy machine's choice, not the loop's: then only the page count says
    // it stopped).
    assert!(
        overshoot < 50_000 || preempted > 0,
        "ended {overshoot} ns after the deadline without being preempted"
    );
    assert!(
        r.minor_faults as f64 >= 0.9 * r.pages_touched as f64,
        "{r:?}"
    );
    assert_eq!(pf.resident_pages().unwrap(), r.pages_touched);
}
