//! CpuHog against a victim thread of this process that records gaps in its
//! own CLOCK_MONOTONIC readings. Both are pinned to the last allowed CPU.
//! Skips with a message when the privilege is missing or only one CPU exists.

use std::sync::mpsc;
use std::time::Duration;

use injectors::clock::longest_gap_within;
use injectors::{
    allowed_cpus, gettid, spin_recording_gaps, CpuHog, HogMechanism, HogReport, InjectorError,
};

const REQUESTED: Duration = Duration::from_millis(5);

/// The hog tests share one CPU: run them one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A victim thread of this process spinning for `run` and recording the gaps
/// in its own clock readings (optionally at `SCHED_IDLE`, as the GPU
/// backend's victim lowers itself so any normal thread landing on its CPU
/// preempts it at once); returns it with its thread id once it is spinning.
fn spinning_victim(
    run: Duration,
    idle: bool,
) -> (std::thread::JoinHandle<Vec<injectors::clock::Gap>>, i32) {
    let (tx, rx) = mpsc::channel();
    let victim = std::thread::spawn(move || {
        if idle {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: changes the calling thread's own policy.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
        }
        tx.send(gettid()).unwrap();
        spin_recording_gaps(run, Duration::from_micros(200), 4096, || false)
    });
    let tid = rx.recv().unwrap();
    std::thread::sleep(run / 5);
    (victim, tid)
}

/// One hog run against a fresh spinning victim: the report and the victim's
/// longest self-observed gap around the hog.
fn attempt(allow_fifo: bool) -> Result<(HogReport, Duration), InjectorError> {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cpu = *allowed_cpus().last().expect("some CPU");
    let (victim, tid) = spinning_victim(Duration::from_millis(250), false);
    let res = CpuHog::new(std::process::id() as i32, tid)
        .on_cpu(cpu)
        .with_fifo(allow_fifo)
        .run(REQUESTED);
    let gaps = victim.join().unwrap();
    let report = res?;
    let gap = longest_gap_within(
        &gaps,
        report.hog_start_ns.saturating_sub(1_000_000),
        report.hog_end_ns + 1_000_000,
    )
    .map(|g| g.duration())
    .unwrap_or_default();
    eprintln!(
        "hog {:?} on CPU {}: spun {:?}, victim gap {:?}, victim run_delay {:?}, victim state {:?}",
        report.mechanism,
        report.cpu,
        report.hog_spin(),
        gap,
        report.victim_run_delay,
        report.victim_state
    );
    Ok((report, gap))
}

fn skip(test: &str, why: impl std::fmt::Display) {
    eprintln!("SKIP {test}: {why}");
}

fn within(d: Duration, target: Duration, tol: f64) -> bool {
    let (d, t) = (d.as_secs_f64(), target.as_secs_f64());
    (d - t).abs() <= tol * t
}

#[test]
fn hog_deschedules_the_victim_for_the_requested_time() {
    const T: &str = "hog_deschedules_the_victim_for_the_requested_time";
    if allowed_cpus().len() < 2 {
        return skip(T, "needs at least 2 CPUs");
    }
    // Best of 3: another process on the machine may take the CPU right after
    // the hog and lengthen one gap.
    let mut seen = Vec::new();
    for _ in 0..3 {
        match attempt(true) {
            Err(e @ InjectorError::PrivilegeMissing { .. }) => return skip(T, e),
            Err(e) => panic!("{e}"),
            Ok((r, gap)) => {
                assert!(r.hog_spin() >= REQUESTED);
                assert_eq!(r.requested, REQUESTED);
                // Under SCHED_FIFO the victim was switched out runnable: its
                // runqueue wait grew. (schedstat is updated when the victim
                // next runs, which on a busy machine can be after we read it.)
                let runnable = r.mechanism != HogMechanism::Fifo
                    || r.victim_run_delay
                        .is_none_or(|rd| rd >= REQUESTED.mul_f64(0.7))
                    || busy_machine();
                if within(gap, REQUESTED, 0.30) && runnable {
                    return;
                }
                seen.push((r.mechanism, gap, r.victim_run_delay));
            }
        }
    }
    panic!("victim gap never within ±30 % of {REQUESTED:?}: {seen:?}");
}

#[test]
fn nice_fallback_deschedules_the_victim() {
    const T: &str = "nice_fallback_deschedules_the_victim";
    if allowed_cpus().len() < 2 {
        return skip(T, "needs at least 2 CPUs");
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        match attempt(false) {
            Err(e @ InjectorError::PrivilegeMissing { .. }) => return skip(T, e),
            Err(e) => panic!("{e}"),
            Ok((r, gap)) => {
                assert_eq!(r.mechanism, HogMechanism::Nice);
                // Under nice −20 the victim keeps ~1 % of the CPU, so it may
                // run a short slice inside the window: the longest gap is at
                // least half the request. (On a busy machine other threads
                // may keep it off longer once the hog is gone.)
                if gap >= REQUESTED / 2 && (gap <= REQUESTED.mul_f64(1.3) || busy_machine()) {
                    return;
                }
                seen.push(gap);
            }
        }
    }
    panic!("nice hog never switched the victim out for ≥ half of {REQUESTED:?}: {seen:?}");
}

#[test]
fn bad_requests_are_errors() {
    let me = std::process::id() as i32;
    let tid = gettid();
    assert!(matches!(
        CpuHog::new(me, tid).run(Duration::ZERO),
        Err(InjectorError::Invalid(_))
    ));
    assert!(matches!(
        CpuHog::new(me, 999_999_999).run(Duration::from_millis(1)),
        Err(InjectorError::NoSuchThread { .. })
    ));
    assert!(matches!(
        CpuHog::new(me, tid)
            .on_cpu(100_000)
            .run(Duration::from_millis(1)),
        Err(InjectorError::BadCpu { .. })
    ));
}

/// Anchored at the request, the hog's own start-up is part of the stall: it
/// stops at request + duration, not at its start + duration.
#[test]
fn anchored_hog_ends_at_request_plus_duration() {
    const T: &str = "anchored_hog_ends_at_request_plus_duration";
    if allowed_cpus().len() < 2 {
        return skip(T, "needs at least 2 CPUs");
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cpu = *allowed_cpus().last().expect("some CPU");
    let (victim, tid) = spinning_victim(Duration::from_millis(100), false);
    // As if the victim had asked 1 ms ago.
    let requested_at = injectors::monotonic_ns() - 1_000_000;
    let res = CpuHog::new(std::process::id() as i32, tid)
        .on_cpu(cpu)
        .with_fifo(false)
        .requested_at(requested_at)
        .run(REQUESTED);
    victim.join().unwrap();
    let r = match res {
        Err(e @ InjectorError::PrivilegeMissing { .. }) => return skip(T, e),
        r => r.expect("hog"),
    };
    // Stops at the anchored deadline (a spawned hog that only got a CPU after
    // the deadline, on a loaded machine, stops at once).
    let deadline = requested_at + REQUESTED.as_nanos() as u64;
    let due = deadline.max(r.hog_start_ns);
    assert!(r.hog_end_ns >= deadline, "hog ended before its deadline");
    // On a busy machine the hog itself may be switched out past its deadline.
    assert!(
        r.hog_end_ns <= due + 200_000 || busy_machine(),
        "hog ended {} ns after its deadline (started {} ns after the request)",
        r.hog_end_ns as i64 - deadline as i64,
        r.hog_start_ns as i64 - requested_at as i64
    );
    assert!(r.hog_spin() < REQUESTED, "spun {:?}", r.hog_spin());
}

/// The calling thread as the hog: it lands on the victim's CPU, spins until
/// the anchored deadline, and gets its own affinity back.
#[test]
fn run_here_makes_the_caller_the_hog() {
    const T: &str = "run_here_makes_the_caller_the_hog";
    if allowed_cpus().len() < 2 {
        return skip(T, "needs at least 2 CPUs");
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cpu = *allowed_cpus().last().expect("some CPU");
    // Best of 3: on a loaded machine the caller itself may wait for a CPU.
    let mut seen = Vec::new();
    for _ in 0..3 {
        // At SCHED_IDLE: a nice 0 victim would keep its EEVDF slice first.
        let (victim, tid) = spinning_victim(Duration::from_millis(100), true);
        let before = allowed_cpus();
        let requested_at = injectors::monotonic_ns();
        let res = CpuHog::new(std::process::id() as i32, tid)
            .on_cpu(cpu)
            .with_fifo(false)
            .requested_at(requested_at)
            .run_here(REQUESTED);
        let gaps = victim.join().unwrap();
        let r = match res {
            Err(e @ InjectorError::PrivilegeMissing { .. }) => return skip(T, e),
            r => r.expect("hog"),
        };
        assert_eq!(allowed_cpus(), before, "the caller's affinity is restored");
        let landed = r.hog_start_ns - requested_at;
        // EEVDF may still hand the SCHED_IDLE victim a short slice: count all
        // the time it was switched out.
        let off: Duration = gaps
            .iter()
            .filter(|g| g.end_ns >= requested_at && g.start_ns <= r.hog_end_ns + 1_000_000)
            .map(|g| g.duration())
            .sum();
        eprintln!("run_here: landed after {landed} ns, victim switched out {off:?}");
        // The hog spun on the victim's CPU, within the anchored deadline, and
        // the victim was off its CPU while it did.
        assert_eq!(r.cpu, cpu);
        assert!(r.hog_end_ns >= requested_at + REQUESTED.as_nanos() as u64);
        assert!(off > Duration::ZERO, "the victim was never switched out");
        if landed < 1_000_000 && off >= REQUESTED / 2 {
            return;
        }
        seen.push((landed, off));
    }
    // How fast the caller lands is only the scheduler's promise on a quiet
    // machine: another process's thread on the victim's CPU keeps its slice.
    if busy_machine() {
        return skip(
            T,
            format!(
                "timing not judged on a busy machine (load {:?}): {seen:?}",
                loadavg()
            ),
        );
    }
    panic!("the caller never landed within 1 ms and held the victim off for half the request: {seen:?}");
}

fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// More runnable threads than half the CPUs, on average over the last minute.
fn busy_machine() -> bool {
    loadavg().is_some_and(|l| l > 0.5 * allowed_cpus().len() as f64)
}
