//! GPU tests: load the PTX with the driver API, launch, check the device log.
//! Each test prints a skip message and passes when there is no GPU
//! (`/dev/nvidiactl` absent or libcuda not loadable) or no NVRTC.

use std::sync::Arc;

use cudarc::driver::{CudaContext, DevicePtr};
use kernels::gpu::{gpu_available, launch_config, open_context, Kernels, LogSlot};
use kernels::{ensure_nvrtc, Kernel, LogEntry};

fn setup(test: &str) -> Option<(Arc<CudaContext>, Kernels)> {
    if let Err(e) = gpu_available() {
        eprintln!("SKIP {test}: {e}");
        return None;
    }
    if let Err(e) = ensure_nvrtc() {
        eprintln!("SKIP {test}: {e}");
        return None;
    }
    let ctx = open_context(0).expect("open device 0");
    // Manage dependencies explicitly (docs/gpu-facts.md).
    unsafe { ctx.disable_event_tracking() };
    let k = Kernels::load(&ctx, None).expect("compile and load the kernels");
    eprintln!(
        "{test}: {} with {} SMs, hog dynamic smem {} B",
        ctx.name().unwrap_or_default(),
        k.num_sms(),
        k.hog_dynamic_smem_bytes()
    );
    Some((ctx, k))
}

fn show(what: &str, e: &LogEntry) {
    eprintln!(
        "{what}: op {} start {} dur {:.1} us (last block end +{:.1} us) smid {} blocks {}",
        e.op_id,
        e.start_ns,
        e.duration_ns() as f64 / 1e3,
        e.last_end_ns.saturating_sub(e.start_ns) as f64 / 1e3,
        e.smid,
        e.blocks
    );
}

#[test]
fn spin_kernel_runs_200us_and_logs() {
    let Some((ctx, k)) = setup("spin_kernel_runs_200us_and_logs") else {
        return;
    };
    let stream = ctx.default_stream();
    let log = k.alloc_log(&stream, 4).unwrap();
    let grid = k.num_sms();
    let slot = LogSlot::of(&log, &stream, 2).unwrap();
    unsafe {
        k.launch_spin(&stream, 0xC0FFEE, slot, 200_000, launch_config(grid, 128))
            .unwrap()
    };
    let entries = k.read_log(&stream, &log).unwrap();
    let e = entries[2];
    show("spin 200us", &e);
    assert!(e.is_written_for(0xC0FFEE), "{e:?}");
    assert!(e.duration_ns() >= 200_000, "{e:?}");
    assert!(e.duration_ns() < 200_000 + 50_000, "{e:?}");
    assert_eq!(e.blocks, grid);
    assert!(e.smid < k.num_sms(), "{e:?}");
    assert!(e.last_end_ns >= e.end_ns);
    // All blocks were resident together, so they ended together.
    assert!(e.last_end_ns - e.start_ns < 200_000 + 50_000, "{e:?}");
    // Neighbouring slots are untouched.
    assert_eq!(entries[1], LogEntry::default());
    assert_eq!(entries[3], LogEntry::default());
}

#[test]
fn every_kernel_launches_and_logs() {
    let Some((ctx, k)) = setup("every_kernel_launches_and_logs") else {
        return;
    };
    let stream = ctx.default_stream();
    let log = k.alloc_log(&stream, 8).unwrap();
    let n_bytes: usize = 64 << 20;
    let src = stream.alloc_zeros::<u8>(n_bytes).unwrap();
    let dst = stream.alloc_zeros::<u8>(n_bytes).unwrap();
    let out = stream
        .alloc_zeros::<f32>((k.num_sms() * 256) as usize)
        .unwrap();
    let (src_p, _a) = src.device_ptr(&stream);
    let (dst_p, _b) = dst.device_ptr(&stream);
    let (out_p, _c) = out.device_ptr(&stream);
    let cfg = launch_config(k.num_sms(), 256);
    unsafe {
        k.launch_empty(&stream, 1, LogSlot::of(&log, &stream, 0).unwrap(), cfg)
            .unwrap();
        k.launch_memory(
            &stream,
            2,
            LogSlot::of(&log, &stream, 1).unwrap(),
            src_p,
            dst_p,
            n_bytes as u64,
            4,
            cfg,
        )
        .unwrap();
        k.launch_compute(
            &stream,
            3,
            LogSlot::of(&log, &stream, 2).unwrap(),
            out_p,
            100_000,
            cfg,
        )
        .unwrap();
        k.launch_compute(
            &stream,
            4,
            LogSlot::of(&log, &stream, 3).unwrap(),
            0,
            100_000,
            cfg,
        )
        .unwrap();
        k.launch_occupancy_hog(
            &stream,
            5,
            LogSlot::of(&log, &stream, 4).unwrap(),
            100_000,
            8,
        )
        .unwrap();
        k.launch_spin(&stream, 6, LogSlot::NONE, 10_000, cfg)
            .unwrap();
    }
    let entries = k.read_log(&stream, &log).unwrap();
    for (i, name) in [
        "empty",
        "memory 4x64MiB",
        "compute 100k (out)",
        "compute 100k (no out)",
        "hog 8 SMs 100us",
    ]
    .iter()
    .enumerate()
    {
        show(name, &entries[i]);
        assert!(
            entries[i].is_written_for(i as u64 + 1),
            "{name}: {:?}",
            entries[i]
        );
    }
    assert_eq!(entries[0].blocks, 1);
    assert_eq!(entries[1].blocks, k.num_sms());
    assert!(
        entries[3].duration_ns() > 1_000,
        "compute loop was eliminated"
    );
    assert_eq!(entries[4].blocks, 8);
    assert!(entries[4].duration_ns() >= 100_000);
    let gb_s = (2 * 4 * n_bytes) as f64 / entries[1].duration_ns() as f64;
    eprintln!("memory kernel: {gb_s:.0} GB/s");
    // Each later kernel in the stream starts after the earlier one ended.
    for i in 1..5 {
        assert!(entries[i].start_ns >= entries[i - 1].end_ns, "slot {i}");
    }
}

#[test]
fn occupancy_hog_holds_the_sms_it_is_asked_to() {
    let Some((ctx, k)) = setup("occupancy_hog_holds_the_sms_it_is_asked_to") else {
        return;
    };
    assert_eq!(k.hog_blocks_per_sm().unwrap(), 1, "one hog block per SM");
    let n = k.num_sms();
    let hog_stream = ctx.new_stream().unwrap();
    let victim_stream = ctx.new_stream().unwrap();
    let log = k.alloc_log(&hog_stream, 4).unwrap();
    hog_stream.synchronize().unwrap();
    let hold = 2_000_000u64;

    // 1. The hog holds every SM: a victim launched just after cannot start
    //    until the hog's blocks end.
    unsafe {
        k.launch_occupancy_hog(
            &hog_stream,
            10,
            LogSlot::of(&log, &hog_stream, 0).unwrap(),
            hold,
            n,
        )
        .unwrap();
        std::thread::sleep(std::time::Duration::from_micros(300));
        k.launch_spin(
            &victim_stream,
            11,
            LogSlot::of(&log, &victim_stream, 1).unwrap(),
            50_000,
            launch_config(n, 128),
        )
        .unwrap();
    }
    ctx.synchronize().unwrap();
    // 2. The hog holds half the SMs: a victim of half the SMs' blocks runs
    //    beside it at once.
    unsafe {
        k.launch_occupancy_hog(
            &hog_stream,
            12,
            LogSlot::of(&log, &hog_stream, 2).unwrap(),
            hold,
            n / 2,
        )
        .unwrap();
        std::thread::sleep(std::time::Duration::from_micros(300));
        k.launch_spin(
            &victim_stream,
            13,
            LogSlot::of(&log, &victim_stream, 3).unwrap(),
            50_000,
            launch_config(n / 2, 128),
        )
        .unwrap();
    }
    ctx.synchronize().unwrap();
    let e = k.read_log(&hog_stream, &log).unwrap();
    for (i, name) in [
        "hog all SMs",
        "victim (all held)",
        "hog half SMs",
        "victim (half held)",
    ]
    .iter()
    .enumerate()
    {
        show(name, &e[i]);
        assert!(e[i].is_written_for(10 + i as u64), "{name}: {:?}", e[i]);
    }
    assert_eq!(e[0].blocks, n);
    assert_eq!(e[2].blocks, n / 2);
    // Victim 1 waited for the hog (its start is at or after the hog's end,
    // minus the spread of block end times).
    assert!(
        e[1].start_ns + 20_000 >= e[0].end_ns,
        "victim started {} ns before the full hog ended",
        e[0].end_ns as i64 - e[1].start_ns as i64
    );
    // Victim 2 ran beside the hog, well before it ended.
    assert!(
        e[3].end_ns < e[2].end_ns,
        "victim beside a half hog should finish first: victim end {} hog end {}",
        e[3].end_ns,
        e[2].end_ns
    );
}

#[test]
fn iteration_models_predict_durations() {
    let Some((ctx, k)) = setup("iteration_models_predict_durations") else {
        return;
    };
    let stream = ctx.default_stream();
    let cfg = launch_config(k.num_sms(), 256);
    for (kernel, bytes) in [
        (Kernel::MemoryBound, 256u64 << 20),
        (Kernel::ComputeBound, 0),
    ] {
        let m = k.calibrate_iterations(&stream, kernel, cfg, bytes).unwrap();
        let it = m.iterations_for(1_000_000);
        eprintln!("{kernel:?}: {m:?}; 1 ms -> {it} iterations");
        assert!(m.ns_per_iteration > 0.0, "{m:?}");
        // Check the prediction with a real launch.
        let log = k.alloc_log(&stream, 1).unwrap();
        let src = stream.alloc_zeros::<u8>(bytes.max(16) as usize).unwrap();
        let dst = stream.alloc_zeros::<u8>(bytes.max(16) as usize).unwrap();
        let out = stream
            .alloc_zeros::<f32>((k.num_sms() * 256) as usize)
            .unwrap();
        let (s, _a) = src.device_ptr(&stream);
        let (d, _b) = dst.device_ptr(&stream);
        let (o, _c) = out.device_ptr(&stream);
        let slot = LogSlot::of(&log, &stream, 0).unwrap();
        unsafe {
            match kernel {
                Kernel::MemoryBound => k
                    .launch_memory(&stream, 7, slot, s, d, bytes, it, cfg)
                    .unwrap(),
                _ => k.launch_compute(&stream, 7, slot, o, it, cfg).unwrap(),
            }
        }
        let e = k.read_log(&stream, &log).unwrap()[0];
        let got = e.last_end_ns - e.start_ns;
        eprintln!(
            "{kernel:?}: {it} iterations ran {:.1} us (wanted 1000)",
            got as f64 / 1e3
        );
        assert!((700_000..1_300_000).contains(&got), "{kernel:?}: {got} ns");
    }
}
