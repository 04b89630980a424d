//! CpuHog against a victim thread of this process that records gaps in its
//! own CLOCK_MONOTONIC readings. Both are pinned to the last allowed CPU.
//! Skips with a message when the privilege is missing or only one CPU exists.

use std::sync::mpsc;
use std::time::Duration;

use injectors::clock::{longest_gap_within, Gap};
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

/// One hog run against a fresh spinning victim: the report and the gaps the
/// victim saw in its own clock.
fn attempt(allow_fifo: bool) -> Result<(HogReport, Vec<Gap>), InjectorError> {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cpu = *allowed_cpus().last().expect("some CPU");
    // The victim spins long past the hog, so the hog lands inside its readings
    // even when a loaded machine is slow to start the hog.
    let (victim, tid) = spinning_victim(Duration::from_millis(1000), false);
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
    Ok((report, gaps))
}

/// How long the victim was off its CPU while the hog spun: the parts of its
/// clock gaps inside the hog's spin.
fn off_during_spin(gaps: &[Gap], report: &HogReport) -> Duration {
    gaps.iter()
        .map(|g| {
            let from = g.start_ns.max(report.hog_start_ns);
            let to = g.end_ns.min(report.hog_end_ns);
            Duration::from_nanos(to.saturating_sub(from))
        })
        .sum()
}

fn skip(test: &str, why: impl std::fmt::Display) {
    eprintln!("SKIP {test}: {why}");
}

/// The mechanism, not its magnitude: the hog spun on the victim's CPU for at
/// least the requested time, the victim was runnable (`R`) while it did, and
/// under `SCHED_FIFO` no instruction of the victim ran during the spin (one
/// gap of its own clock covers it). How much longer the victim stays off once
/// the hog is gone is up to the scheduler and a loaded machine: that belongs
/// to a measurement, not to this test.
#[test]
fn hog_deschedules_the_victim_for_the_requested_time() {
    const T: &str = "hog_deschedules_the_victim_for_the_requested_time";
    if allowed_cpus().len() < 2 {
        return skip(T, "needs at least 2 CPUs");
    }
    let (r, gaps) = match attempt(true) {
        Err(e @ InjectorError::PrivilegeMissing { .. }) => return skip(T, e),
        Err(e) => panic!("{e}"),
        Ok(outcome) => outcome,
    };
    assert_eq!(r.requested, REQUESTED);
    assert!(r.hog_spin() >= REQUESTED, "spun {:?}", r.hog_spin());
    assert_eq!(
        r.victim_state,
        Some('R'),
        "the victim was runnable while the hog spun"
    );
    if r.mechanism == HogMechanism::Fifo {
        let covering = gaps
            .iter()
            .find(|g| g.start_ns <= r.hog_start_ns && g.end_ns >= r.hog_end_ns);
        let covering = covering.unwrap_or_else(|| {
            panic!(
                "no victim gap covers the spin [{}, {}]: {:?}",
                r.hog_start_ns, r.hog_end_ns, gaps
            )
        });
        assert!(covering.duration() >= REQUESTED, "{covering:?}");
    } else {
        // Without the privilege of SCHED_FIFO the nice fallback ran: see below.
        assert_kept_off(&gaps, &r);
    }
}

/// Under nice −20 the victim keeps ~1 % of the CPU, so it may run short slices
/// during the spin: the victim was kept off its CPU during the spin, by some
/// amount (see `assert_kept_off` for why no fraction is asserted).
#[test]
fn nice_fallback_deschedules_the_victim() {
    const T: &str = "nice_fallback_deschedules_the_victim";
    if allowed_cpus().len() < 2 {
        return skip(T, "needs at least 2 CPUs");
    }
    let (r, gaps) = match attempt(false) {
        Err(e @ InjectorError::PrivilegeMissing { .. }) => return skip(T, e),
        Err(e) => panic!("{e}"),
        Ok(outcome) => outcome,
    };
    assert_eq!(r.mechanism, HogMechanism::Nice);
    assert!(r.hog_spin() >= REQUESTED, "spun {:?}", r.hog_spin());
    assert_eq!(
        r.victim_state,
        Some('R'),
        "the victim was runnable while the hog spun"
    );
    assert_kept_off(&gaps, &r);
}

/// The nice fallback's mechanism, not its magnitude: the hog ran on the
/// victim's CPU, and the victim, runnable, lost the CPU to it at least once
/// (a clock gap of its own inside the spin). How much of the spin the victim
/// loses is the scheduler's choice: under EEVDF the victim finishes the slice
/// it holds, and on a loaded CI machine other tasks share the CPU too (it was
/// off 2.4 ms of a 6.4 ms spin, 5 ms asked, there), so a fraction asserted
/// here fails a busy machine.
fn assert_kept_off(gaps: &[Gap], r: &HogReport) {
    let cpu = *allowed_cpus().last().expect("some CPU");
    assert_eq!(r.cpu, cpu, "the hog ran on the victim's CPU");
    let off = off_during_spin(gaps, r);
    assert!(
        off > Duration::ZERO,
        "the victim never left its CPU during the hog's {:?} spin ({REQUESTED:?} asked)",
        r.hog_spin()
    );
    // No check of `victim_run_delay`: the kernel adds a wait to it only when the
    // task runs again, which may be after the hog's report was taken (CI saw a
    // 5.4 ms gap with a run delay of 0).
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
    // As if the victim had asked 3 ms ago.
    let requested_at = injectors::monotonic_ns() - 3_000_000;
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
    assert!(r.hog_end_ns >= deadline, "hog ended before its deadline");
    // It did not spin the whole duration from its own start, which came at
    // least 3 ms after the request (only a hog switched out for 3 ms at its
    // end could: how soon after the deadline it stops is not judged).
    assert!(r.hog_start_ns >= requested_at + 3_000_000);
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
    let mut displaced = Vec::new();
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
        // the time it was switched out while the caller spun.
        let off = off_during_spin(&gaps, &r);
        let spun = r.hog_spin();
        eprintln!("run_here: landed after {landed} ns, spun {spun:?}, victim off {off:?}");
        // The hog spun on the victim's CPU until the anchored deadline.
        assert_eq!(r.cpu, cpu);
        assert!(r.hog_end_ns >= requested_at + REQUESTED.as_nanos() as u64);
        // How fast the caller lands is the scheduler's business (another
        // thread on the victim's CPU keeps its slice): not judged, but a caller
        // that landed past half the request left too short a spin to judge.
        if spun < REQUESTED / 2 {
            seen.push((landed, spun));
            continue;
        }
        // While the caller spun there, the victim was off its CPU for at
        // least half of it: how large a share the scheduler still hands the
        // SCHED_IDLE victim depends on the kernel and the machine's load, so
        // a shorter share only makes this attempt one more try.
        if off >= spun / 2 {
            return;
        }
        displaced.push((spun, off));
    }
    // No attempt reached half. The mechanism is still judged: a caller that
    // spun on the victim's CPU displaced it for a share well above noise in
    // some attempt (a caller that never landed there displaces it for ~0).
    if let Some((spun, off)) = displaced
        .iter()
        .max_by_key(|(spun, off)| off.as_nanos() * 1000 / spun.as_nanos().max(1))
    {
        eprintln!(
            "run_here: the victim kept more than half its CPU in every attempt: {displaced:?}"
        );
        assert!(
            *off >= *spun / 10,
            "the victim was off for only {off:?} of {spun:?} in its best attempt"
        );
        return;
    }
    skip(
        T,
        format!("the caller landed past half the request every time: {seen:?}"),
    );
}

/// A readied hog is pinned where it runs at nice -20, and gets its affinity
/// and priority back when dropped.
#[test]
fn a_ready_hog_is_pinned_and_raised_until_dropped() {
    const T: &str = "a_ready_hog_is_pinned_and_raised_until_dropped";
    std::thread::spawn(|| {
        let before = allowed_cpus();
        let nice = || unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let Some(ready) = injectors::ReadyHog::take() else {
            return skip(T, "the kernel refused to raise or pin the thread");
        };
        let here = nix::sched::sched_getcpu().unwrap();
        assert_eq!(allowed_cpus(), vec![here]);
        assert_eq!(nice(), -20);
        drop(ready);
        assert_eq!(allowed_cpus(), before);
        assert_eq!(nice(), 0);
    })
    .join()
    .unwrap();
}

/// A readied hog, pinned to its own CPU, may still deschedule a victim on
/// another CPU of the process (the H200 recording of 85edb9a refused every
/// deschedule: "CPU 2 is not usable here (this process may run on CPUs [5])").
#[test]
fn a_ready_hog_reaches_a_victim_on_another_cpu() {
    const T: &str = "a_ready_hog_reaches_a_victim_on_another_cpu";
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        return skip(T, "needs at least 2 CPUs");
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (victim, tid) = spinning_victim(Duration::from_millis(100), true);
    let (first, last) = (cpus[0], *cpus.last().unwrap());
    let res = std::thread::spawn(move || {
        let mut one = nix::sched::CpuSet::new();
        one.set(first).unwrap();
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &one).unwrap();
        let Some(_ready) = injectors::ReadyHog::take() else {
            return None;
        };
        Some(
            CpuHog::new(std::process::id() as i32, tid)
                .on_cpu(last)
                .with_fifo(false)
                .run_here(Duration::from_millis(2)),
        )
    })
    .join()
    .unwrap();
    victim.join().unwrap();
    match res {
        None => skip(T, "the kernel refused to ready the hog"),
        Some(Err(e @ InjectorError::PrivilegeMissing { .. })) => skip(T, e),
        Some(r) => assert_eq!(r.expect("the hog reaches the victim's CPU").cpu, last),
    }
}
