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

/// Faulting until a deadline lasts at least the requested time, stops
/// because of the deadline (not because the pages ran out) and every page
/// it touched faulted. How far past the deadline it ends is printed, not
/// asserted: one fault can take a busy machine's reclaim path for tens of
/// microseconds, which is the kernel's time, not the loop's (CI once saw
/// 89 µs with no preemption).
#[test]
fn faults_until_a_deadline_stop_at_the_deadline() {
    let mut pf = PageFaults::prepare(1 << 16, FaultKind::Minor).unwrap();
    let start = injectors::monotonic_ns();
    let r = pf.trigger_until(start + 1_000_000).unwrap();
    eprintln!(
        "until: {r:?}, ended {} ns after the deadline",
        r.end_ns.saturating_sub(start + 1_000_000)
    );
    assert!(r.pages_touched > 0 && r.pages_touched < 1 << 16, "{r:?}");
    assert!(r.end_ns >= start + 1_000_000, "ended before the deadline");
    assert!(
        r.minor_faults as f64 >= 0.9 * r.pages_touched as f64,
        "{r:?}"
    );
    assert_eq!(pf.resident_pages().unwrap(), r.pages_touched);
}

/// The deadline is checked before every page, so one already past touches
/// none: the loop's stopping rule without any timing in the assertion.
#[test]
fn a_deadline_already_past_touches_no_page() {
    let mut pf = PageFaults::prepare(64, FaultKind::Minor).unwrap();
    let r = pf.trigger_until(injectors::monotonic_ns()).unwrap();
    assert_eq!(r.pages_touched, 0, "{r:?}");
    assert_eq!(pf.resident_pages().unwrap(), 0);
}
