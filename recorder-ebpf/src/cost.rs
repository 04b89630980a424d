//! What one probe hit of the recorder costs, on the machine it runs on
//! (`causalbench measure probe-cost`; README "Cost per probe hit").
//!
//! Each mechanism is timed against the same work without it, in interleaved
//! repetitions of one process: a uprobe with and without its return probe and
//! with each way of capturing the stack, the stack copy for DWARF unwinding
//! included (on a libc function called through a pointer, so the binary may be
//! stripped), the `sched_switch` tracepoint (two
//! threads handing a token back and forth) and the page-fault tracepoints
//! (first touches of fresh anonymous pages). The cost of a hit is the median
//! time per operation with the mechanism minus the median without it.

use crate::{mapped_object, Recorder, RecorderConfig, RecorderError, StackCapture};
use std::hint::black_box;
use std::time::Instant;

/// The study's sizes.
#[derive(Debug, Clone, Copy)]
pub struct CostStudy {
    /// Calls of the probed function per timed loop.
    pub calls: u32,
    /// Token hand-offs (two context switches each) per timed loop.
    pub switches: u32,
    /// Fresh pages touched per timed loop.
    pub pages: u32,
    /// Interleaved repetitions of every configuration.
    pub reps: u32,
}

/// One configuration's timed loops.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Timed {
    pub name: String,
    /// Nanoseconds per operation, one value per repetition.
    pub ns_per_op: Vec<f64>,
    pub median_ns_per_op: f64,
    /// Median minus the median of the same work without the recorder.
    pub cost_ns_per_hit: f64,
    /// Records the recorder produced per operation (median over repetitions).
    pub records_per_op: f64,
    /// User-stack walks and reused stacks per operation (uprobe configurations).
    pub stack_walks_per_op: f64,
    pub stacks_reused_per_op: f64,
    /// Stacks copied for DWARF unwinding per operation.
    pub stack_copies_per_op: f64,
}

/// Everything the study measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProbeCost {
    pub calls: u32,
    pub switches: u32,
    pub pages: u32,
    pub reps: u32,
    /// The probed function and its library.
    pub probed: String,
    pub uprobes: Vec<Timed>,
    pub sched: Vec<Timed>,
    pub faults: Vec<Timed>,
}

type Probed = unsafe extern "C" fn(i64) -> i64;

/// `labs` of the libc this process maps: a function that costs a few
/// nanoseconds, so a loop of calls to it is nearly all probe cost.
fn probed_function() -> Result<(Probed, std::path::PathBuf), RecorderError> {
    let env = |detail: String| RecorderError::Load { detail };
    let lib = mapped_object(std::process::id(), |n| n.starts_with("libc.so"))
        .ok_or_else(|| env("no libc mapped in this process".into()))?;
    // SAFETY: dlsym on the default namespace with a NUL-terminated name; the
    // symbol is libc's `long labs(long)`.
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"labs".as_ptr()) };
    if sym.is_null() {
        return Err(env("libc has no `labs`".into()));
    }
    // SAFETY: `labs` has exactly this signature.
    Ok((
        unsafe { std::mem::transmute::<*mut libc::c_void, Probed>(sym) },
        lib,
    ))
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

/// One configuration: `None` runs the work without the recorder.
struct Config {
    name: &'static str,
    recorder: Option<RecorderConfig>,
}

/// Per configuration: (ns per op, records per op, walks per op, reused per op,
/// copies per op) of each repetition.
type Samples = Vec<Vec<(f64, f64, f64, f64, f64)>>;

/// Runs `configs` `reps` times in rotating order (so no configuration always
/// comes first), timing `work(ops)` under each.
fn interleave(
    configs: &[Config],
    reps: u32,
    ops: u32,
    work: &mut dyn FnMut(u32),
) -> Result<Vec<Timed>, RecorderError> {
    // One untimed pass first: page-in and the first uprobe hit's setup.
    work(ops.min(1000));
    let mut samples: Samples = vec![Vec::new(); configs.len()];
    for rep in 0..reps.max(1) as usize {
        for k in 0..configs.len() {
            let i = (k + rep) % configs.len();
            let rec = match &configs[i].recorder {
                Some(cfg) => Some(Recorder::start(cfg.clone())?),
                None => None,
            };
            let t0 = Instant::now();
            work(ops);
            let ns = t0.elapsed().as_nanos() as f64;
            let (records, walks, reused, copies) = match rec {
                Some(r) => {
                    let t = r.stop();
                    (
                        t.records.len() as f64,
                        t.stack_walks as f64,
                        t.stacks_reused as f64,
                        t.stack_copies as f64,
                    )
                }
                None => (0.0, 0.0, 0.0, 0.0),
            };
            let per = |x: f64| x / ops.max(1) as f64;
            samples[i].push((per(ns), per(records), per(walks), per(reused), per(copies)));
        }
    }
    let base = configs
        .iter()
        .position(|c| c.recorder.is_none())
        .map(|i| median(&samples[i].iter().map(|s| s.0).collect::<Vec<_>>()))
        .unwrap_or(0.0);
    Ok(configs
        .iter()
        .zip(samples)
        .map(|(c, s)| {
            let col = |f: fn(&(f64, f64, f64, f64, f64)) -> f64| {
                median(&s.iter().map(f).collect::<Vec<_>>())
            };
            let med = col(|x| x.0);
            Timed {
                name: c.name.to_string(),
                ns_per_op: s.iter().map(|x| x.0).collect(),
                median_ns_per_op: med,
                cost_ns_per_hit: med - base,
                records_per_op: col(|x| x.1),
                stack_walks_per_op: col(|x| x.2),
                stacks_reused_per_op: col(|x| x.3),
                stack_copies_per_op: col(|x| x.4),
            }
        })
        .collect())
}

/// Runs the whole study in this process.
pub fn probe_cost(study: CostStudy) -> Result<ProbeCost, RecorderError> {
    let pid = std::process::id();
    let (labs, libc_path) = probed_function()?;
    let quiet = || {
        let mut cfg = RecorderConfig::new(pid);
        cfg.sched = false;
        cfg.page_faults = false;
        cfg
    };
    let uprobe = |stacks: StackCapture, return_probes: bool| {
        let mut cfg = quiet();
        cfg.library = Some(libc_path.clone());
        cfg.functions = vec!["labs".into()];
        cfg.stacks = stacks;
        cfg.return_probes = return_probes;
        Some(cfg)
    };
    let copying = |bytes: u32| {
        let mut cfg = uprobe(StackCapture::EveryHit, true);
        if let Some(cfg) = cfg.as_mut() {
            cfg.stack_copy_bytes = bytes;
        }
        cfg
    };
    let uprobe_configs = [
        Config {
            name: "no recorder",
            recorder: None,
        },
        Config {
            name: "uprobe, no stack",
            recorder: uprobe(StackCapture::None, false),
        },
        Config {
            name: "uprobe + uretprobe, no stack",
            recorder: uprobe(StackCapture::None, true),
        },
        Config {
            name: "uprobe + uretprobe, stack once per call site",
            recorder: uprobe(StackCapture::PerSite, true),
        },
        Config {
            name: "uprobe + uretprobe, stack every hit",
            recorder: uprobe(StackCapture::EveryHit, true),
        },
        Config {
            name: "uprobe + uretprobe, stack every hit, stack copied (16 KiB)",
            recorder: copying(16 * 1024),
        },
        Config {
            name: "uprobe + uretprobe, stack every hit, stack copied (32 KiB)",
            recorder: copying(32 * 1024),
        },
    ];
    let uprobes = interleave(&uprobe_configs, study.reps, study.calls, &mut |n| {
        let mut acc = 0i64;
        for i in 0..n {
            // SAFETY: `labs` takes and returns a long.
            acc = acc.wrapping_add(unsafe { labs(black_box(i as i64 - 7)) });
        }
        black_box(acc);
    })?;

    let sched_configs = [
        Config {
            name: "no recorder",
            recorder: None,
        },
        Config {
            name: "sched_switch tracepoint",
            recorder: Some(RecorderConfig {
                sched: true,
                ..quiet()
            }),
        },
    ];
    let sched = interleave(&sched_configs, study.reps, study.switches, &mut |n| {
        hand_offs(n)
    })?;

    let fault_configs = [
        Config {
            name: "no recorder",
            recorder: None,
        },
        Config {
            name: "page-fault tracepoints",
            recorder: Some(RecorderConfig {
                page_faults: true,
                ..quiet()
            }),
        },
    ];
    let faults = interleave(&fault_configs, study.reps, study.pages, &mut |n| {
        touch_fresh_pages(n)
    })?;

    Ok(ProbeCost {
        calls: study.calls,
        switches: study.switches,
        pages: study.pages,
        reps: study.reps,
        probed: format!("labs in {}", libc_path.display()),
        uprobes,
        sched,
        faults,
    })
}

/// `n` hand-offs of a token between this thread and another one over a
/// channel pair: every hand-off blocks one thread and wakes the other.
fn hand_offs(n: u32) {
    let (to_peer, peer_rx) = std::sync::mpsc::sync_channel::<u32>(0);
    let (to_me, my_rx) = std::sync::mpsc::sync_channel::<u32>(0);
    let peer = std::thread::spawn(move || {
        while let Ok(v) = peer_rx.recv() {
            if to_me.send(v).is_err() {
                break;
            }
        }
    });
    for i in 0..n {
        if to_peer.send(i).is_err() || my_rx.recv().is_err() {
            break;
        }
    }
    drop(to_peer);
    let _ = peer.join();
}

/// First touches of `n` fresh anonymous pages: one minor fault each.
fn touch_fresh_pages(n: u32) {
    let page = 4096usize;
    let len = n.max(1) as usize * page;
    // SAFETY: a private anonymous mapping of `len` bytes, unmapped below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return;
    }
    // Base pages only: a transparent huge page would take a whole run's
    // touches in one fault.
    // SAFETY: advice on the mapping made above.
    unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
    for i in 0..n as usize {
        // SAFETY: inside the mapping.
        unsafe { std::ptr::write_volatile((p as *mut u8).add(i * page), 1) };
    }
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(p, len) };
}
