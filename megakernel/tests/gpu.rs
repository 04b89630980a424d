//! The megakernel on a real GPU. Skips with a message (and passes) when there
//! is no GPU or no NVRTC; `causalbench megakernel run` is the full GPU experiment.

use ground_truth::megakernel::{HookKind, MonitorConfig};
use megakernel::case::{run_family, Executor, FamilyOptions};
use megakernel::gpu::GpuExecutor;
use megakernel::{catalog, schedule};

fn open(test: &str) -> Option<GpuExecutor> {
    if let Err(e) = kernels::gpu::gpu_available() {
        eprintln!("SKIP {test}: {e}");
        return None;
    }
    if let Err(e) = kernels::ensure_nvrtc() {
        eprintln!("SKIP {test}: {e}");
        return None;
    }
    Some(GpuExecutor::open(false).expect("open the GPU and load the megakernel"))
}

#[test]
fn twin_runs_every_task_and_logs_every_hook() {
    let Some(mut g) = open("twin_runs_every_task_and_logs_every_hook") else {
        return;
    };
    let all = catalog::load().unwrap();
    let s = schedule::build(&all[0], g.default_workers(), None);
    let l = g.launch(&s, &MonitorConfig::task_log(u32::MAX), 1).unwrap();
    assert_eq!(l.error, 0);
    let starts = l.capture.events_of(HookKind::Start);
    assert_eq!(starts, s.tasks.len());
    let cov = l.capture.total_coverage();
    assert_eq!(cov.eligible, cov.observed);
    assert_eq!(cov.dropped, 0);
    eprintln!(
        "{} tasks on {} workers: {:.1} µs, {} events",
        s.tasks.len(),
        s.workers,
        l.capture.kernel_ns as f64 / 1e3,
        l.capture.events.len()
    );
}

#[test]
fn a_family_pairs_within_5_percent_on_the_gpu() {
    let Some(mut g) = open("a_family_pairs_within_5_percent_on_the_gpu") else {
        return;
    };
    let all = catalog::load().unwrap();
    let fam = &catalog::families(&all)[0].1;
    let res = run_family(
        &mut g,
        fam,
        &FamilyOptions {
            measure_launches: 3,
            ..Default::default()
        },
    )
    .unwrap();
    let (a, b) = (res[0].kernel_ns as f64, res[1].kernel_ns as f64);
    assert!((a - b).abs() / a < 0.05, "{a} vs {b}");
}

#[test]
fn the_diagnosis_program_aggregates_every_task_on_the_gpu_as_the_fixed_monitor_does() {
    let test = "the_diagnosis_program_aggregates_every_task_on_the_gpu_as_the_fixed_monitor_does";
    if megakernel::bpf::programs::unavailable().is_some() {
        eprintln!("SKIP {test}: no monitor programs built");
        return;
    }
    let Some(g) = open(test) else {
        return;
    };
    let mut g = megakernel::bpf::device::GpuPrograms::new(g).expect("load the kernel with hooks");
    let all = catalog::load().unwrap();
    let s = schedule::build(&all[0], g.default_workers(), None);
    let d = megakernel::bpf::diagnosis::FULL;
    let l = g
        .launch_ebpf(&s, 1, &d)
        .expect("the GPU runs hook programs")
        .unwrap();
    assert_eq!(l.error, 0);
    let ebpf = l
        .capture
        .aggregates
        .as_ref()
        .expect("aggregates from the maps");
    let fixed = g.launch(&s, &MonitorConfig::aggregate(), 1).unwrap();
    let fixed = fixed.capture.aggregates.unwrap();
    // The same tasks per class and per worker as the compiled-in monitor.
    for (e, f) in ebpf.classes.iter().zip(&fixed.classes) {
        assert_eq!(e.tasks, f.tasks, "class {}", e.class);
        assert_eq!(e.worker_tasks, f.worker_tasks, "class {}", e.class);
    }
    let cov = l.capture.total_coverage();
    assert_eq!(
        (cov.eligible, cov.observed, cov.dropped),
        (s.tasks.len() as u64, s.tasks.len() as u64, 0)
    );
    assert!(
        l.capture.bytes_exported <= 5_184,
        "{} B",
        l.capture.bytes_exported
    );
}
