//! Records this process's own CUDA driver calls on a GPU host: loads libcuda
//! with dlopen (no CUDA toolkit needed), starts the recorder with
//! `RecorderConfig::cuda`, makes a few launches, copies, memsets, event records,
//! waits and syncs from a worker thread, and prints what was recorded.
//!
//! `cargo run -p ebpf-recorder --example cuda_probe` (as root, on a GPU host).
//! Exits 0 with a message where there is no libcuda or no GPU.

use ebpf_recorder::{Recorder, RecorderConfig};
use ground_truth::trace::Record;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CString};

type CuResult = c_int;

struct Cuda {
    lib: *mut c_void,
}

// SAFETY: a dlopen handle may be used from any thread.
unsafe impl Send for Cuda {}
// SAFETY: dlsym is thread-safe.
unsafe impl Sync for Cuda {}

impl Cuda {
    fn open() -> Option<Cuda> {
        let name = CString::new("libcuda.so.1").unwrap();
        // SAFETY: dlopen with a valid name.
        let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        (!lib.is_null()).then_some(Cuda { lib })
    }

    fn sym<T: Copy>(&self, name: &str) -> T {
        let c = CString::new(name).unwrap();
        // SAFETY: dlsym on an open handle.
        let p = unsafe { libc::dlsym(self.lib, c.as_ptr()) };
        assert!(!p.is_null(), "libcuda lacks {name}");
        assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
        // SAFETY: T is the function pointer type of `name` (cuda.h).
        unsafe { std::mem::transmute_copy(&p) }
    }
}

fn check(what: &str, r: CuResult) {
    assert_eq!(r, 0, "{what} failed with CUresult {r}");
}

const PTX: &str = ".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry causalbench_empty()\n{\n\tret;\n}\n";

#[inline(never)]
fn causalbench_launch_site(
    launch: unsafe extern "C" fn(
        *mut c_void,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        *mut c_void,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> CuResult,
    f: *mut c_void,
    stream: *mut c_void,
) {
    // SAFETY: valid function and stream; the kernel takes no parameters.
    let r = unsafe {
        launch(
            f,
            1,
            1,
            1,
            32,
            1,
            1,
            0,
            stream,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    check("cuLaunchKernel", r);
}

fn main() {
    let Some(cuda) = Cuda::open() else {
        println!("no libcuda.so.1 on this machine; nothing to record");
        return;
    };
    let pid = std::process::id();
    let rec = match Recorder::start(RecorderConfig::cuda(pid)) {
        Ok(r) => r,
        Err(e) => {
            println!("recorder unavailable: {e}");
            return;
        }
    };
    println!(
        "recording {} with {} probes in {:?} (fault timing {})",
        pid,
        rec.probes().len(),
        rec.library(),
        rec.fault_timing()
    );

    let names: Vec<&str> = rec.probes().iter().map(|p| p.function.as_str()).collect();
    println!("probes: {}", names.join(" "));

    let cu_init: unsafe extern "C" fn(c_uint) -> CuResult = cuda.sym("cuInit");
    // SAFETY: cuInit(0).
    let r = unsafe { cu_init(0) };
    if r != 0 {
        println!("cuInit failed ({r}): no usable GPU");
        let t = rec.stop();
        println!("{} host records", t.records.len());
        return;
    }
    let cuda = std::sync::Arc::new(cuda);
    let c2 = cuda.clone();
    let worker = std::thread::spawn(move || unsafe {
        let cuda = c2;
        let tid = libc::syscall(libc::SYS_gettid) as u32;
        let mut dev: c_int = 0;
        check(
            "cuDeviceGet",
            cuda.sym::<unsafe extern "C" fn(*mut c_int, c_int) -> CuResult>("cuDeviceGet")(
                &mut dev, 0,
            ),
        );
        let mut ctx: *mut c_void = std::ptr::null_mut();
        check(
            "cuDevicePrimaryCtxRetain",
            cuda.sym::<unsafe extern "C" fn(*mut *mut c_void, c_int) -> CuResult>(
                "cuDevicePrimaryCtxRetain",
            )(&mut ctx, dev),
        );
        check(
            "cuCtxSetCurrent",
            cuda.sym::<unsafe extern "C" fn(*mut c_void) -> CuResult>("cuCtxSetCurrent")(ctx),
        );
        let mut stream: *mut c_void = std::ptr::null_mut();
        check(
            "cuStreamCreate",
            cuda.sym::<unsafe extern "C" fn(*mut *mut c_void, c_uint) -> CuResult>(
                "cuStreamCreate",
            )(&mut stream, 1),
        );
        let mut event: *mut c_void = std::ptr::null_mut();
        check(
            "cuEventCreate",
            cuda.sym::<unsafe extern "C" fn(*mut *mut c_void, c_uint) -> CuResult>("cuEventCreate")(
                &mut event, 0,
            ),
        );
        let ptx = CString::new(PTX).unwrap();
        let mut module: *mut c_void = std::ptr::null_mut();
        check(
            "cuModuleLoadData",
            cuda.sym::<unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CuResult>(
                "cuModuleLoadData",
            )(&mut module, ptx.as_ptr().cast()),
        );
        let mut func: *mut c_void = std::ptr::null_mut();
        let kname = CString::new("causalbench_empty").unwrap();
        check(
            "cuModuleGetFunction",
            cuda.sym::<unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> CuResult>(
                "cuModuleGetFunction",
            )(&mut func, module, kname.as_ptr()),
        );
        let launch = cuda.sym("cuLaunchKernel");
        for _ in 0..10 {
            causalbench_launch_site(launch, func, stream);
        }
        let n = 1 << 20;
        let mut dptr: u64 = 0;
        check(
            "cuMemAlloc",
            cuda.sym::<unsafe extern "C" fn(*mut u64, usize) -> CuResult>("cuMemAlloc_v2")(
                &mut dptr, n,
            ),
        );
        check(
            "cuMemsetD8Async",
            cuda.sym::<unsafe extern "C" fn(u64, u8, usize, *mut c_void) -> CuResult>(
                "cuMemsetD8Async",
            )(dptr, 0, n, stream),
        );
        let host = vec![1u8; n];
        check(
            "cuMemcpyHtoDAsync",
            cuda.sym::<unsafe extern "C" fn(u64, *const c_void, usize, *mut c_void) -> CuResult>(
                "cuMemcpyHtoDAsync_v2",
            )(dptr, host.as_ptr().cast(), n, stream),
        );
        check(
            "cuEventRecord",
            cuda.sym::<unsafe extern "C" fn(*mut c_void, *mut c_void) -> CuResult>("cuEventRecord")(
                event, stream,
            ),
        );
        check(
            "cuStreamWaitEvent",
            cuda.sym::<unsafe extern "C" fn(*mut c_void, *mut c_void, c_uint) -> CuResult>(
                "cuStreamWaitEvent",
            )(stream, event, 0),
        );
        check(
            "cuStreamSynchronize",
            cuda.sym::<unsafe extern "C" fn(*mut c_void) -> CuResult>("cuStreamSynchronize")(
                stream,
            ),
        );
        check(
            "cuEventSynchronize",
            cuda.sym::<unsafe extern "C" fn(*mut c_void) -> CuResult>("cuEventSynchronize")(event),
        );
        check(
            "cuCtxSynchronize",
            cuda.sym::<unsafe extern "C" fn() -> CuResult>("cuCtxSynchronize")(),
        );
        (tid, stream as u64, event as u64)
    });
    let (tid, stream, event) = worker.join().unwrap();
    let trace = rec.stop();

    let mut by_fn: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    let mut example = None;
    for r in &trace.records {
        if let Record::Uprobe {
            tid: t,
            function,
            handle,
            stack,
            enter,
            exit,
            ..
        } = r
        {
            let e = by_fn.entry(function.as_str()).or_default();
            e.0 += 1;
            if *t == tid {
                e.1 += 1;
            }
            if *handle == stream || *handle == event {
                e.2 += 1;
            }
            if function == "cuLaunchKernel" && example.is_none() {
                example = Some((stack.clone(), exit - enter));
            }
        }
    }
    println!("worker tid {tid}, stream 0x{stream:x}, event 0x{event:x}");
    println!("function: records, on worker, handle = stream/event");
    for (f, (n, on_tid, h)) in &by_fn {
        println!("  {f}: {n}, {on_tid}, {h}");
    }
    if let Some((stack, d)) = example {
        println!("cuLaunchKernel took {d} ns; stack: {stack:?}");
    }
    let kinds = trace.records.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.kind_name()).or_insert(0usize) += 1;
        m
    });
    println!(
        "records {kinds:?}, ringbuffer_dropped {}, stack_errors {}, fault_timing {}",
        trace.ringbuffer_dropped, trace.stack_errors, trace.fault_timing
    );
    for w in &trace.warnings {
        println!("warning: {w}");
    }
}
