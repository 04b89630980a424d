//! The megakernel on a real GPU (cudarc, dynamic loading: builds and runs
//! without CUDA; every entry point returns an error instead of panicking when
//! there is no GPU).
//!
//! One [`GpuExecutor`] compiles `megakernel.cu` once, keeps its buffers, and per
//! launch uploads the task graph, applies the monitor configuration (one
//! 64-byte copy, timed), launches one block of 128 threads per worker, and reads
//! back the state, coverage, aggregates and each worker's ring. When the CUPTI
//! reference recorder (`recorder-cupti`) could be started, the kernel's start and
//! end come from its activity record (CLOCK_MONOTONIC), as kernel-level CUPTI
//! sees them; otherwise from the kernel's own `%globaltimer` readings.

use crate::bundle::{Env, KernelObs};
use crate::case::{Executor, Launch};
use crate::monitor::{capture_from_device, device_config};
use crate::schedule::Schedule;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
    PushKernelArg,
};
use ground_truth::megakernel::{MonitorConfig, PcSampling, CLASSES};
use kernels::megakernel as mk;
use recorder_cupti::{Raw, Recorder};
use std::sync::Arc;
use std::time::Instant;

/// Threads per worker block.
pub const BLOCK_THREADS: u32 = 128;

fn err<E: std::fmt::Debug>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e:?}")
}

struct Buffers {
    n_tasks: usize,
    n_events: usize,
    n_deps: usize,
    workers: usize,
    queue_cap: usize,
    ring_alloc: usize,
    tasks: CudaSlice<mk::Task>,
    events: CudaSlice<mk::Event>,
    deps: CudaSlice<u32>,
    roots: CudaSlice<u32>,
    worker_ntasks: CudaSlice<u32>,
    event_count: CudaSlice<u32>,
    event_done: CudaSlice<u64>,
    ready_ts: CudaSlice<u64>,
    queue: CudaSlice<u32>,
    queue_tail: CudaSlice<u32>,
    queue_head: CudaSlice<u32>,
    ring: CudaSlice<mk::HookEvent>,
    ring_count: CudaSlice<u32>,
    coverage: CudaSlice<mk::Coverage>,
    agg: CudaSlice<mk::Aggregates>,
    worker_class: CudaSlice<u32>,
    crossings: CudaSlice<u32>,
    max_depth: CudaSlice<u32>,
    state: CudaSlice<mk::State>,
    scratch_src: CudaSlice<u8>,
    scratch_dst: CudaSlice<u8>,
    scratch_vecs: usize,
    params: CudaSlice<mk::Params>,
    config: CudaSlice<mk::MonitorConfig>,
}

/// The megakernel on GPU 0.
pub struct GpuExecutor {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    pub(crate) func: CudaFunction,
    pub num_sms: u32,
    pub recorder: Option<Recorder>,
    /// Why the CUPTI recorder is absent, if it is.
    pub recorder_error: Option<String>,
    buf: Option<Buffers>,
    env: Env,
    /// NVRTC compile + module load of the megakernel, ns (the cost a rebuilt kernel would pay).
    pub rebuild_ns: u64,
    pub ptx: String,
    /// Give up on a launch after this long (device-side deadline).
    pub deadline_ns: u64,
    tid: u32,
    /// The kernel with the eBPF hooks (`bpf::device`) and its program slot's device address.
    pub(crate) hook_kernel: Option<(CudaFunction, u64)>,
}

impl GpuExecutor {
    /// Opens GPU 0 (starting the CUPTI recorder first when `cupti`), compiles
    /// and loads the megakernel.
    pub fn open(cupti: bool) -> Result<GpuExecutor, String> {
        kernels::gpu::gpu_available().map_err(|e| e.to_string())?;
        let (recorder, recorder_error) = if cupti {
            match recorder_cupti::ensure_cupti().and_then(|_| Recorder::start()) {
                Ok(r) => (Some(r), None),
                Err(e) => (None, Some(e)),
            }
        } else {
            (None, Some("not requested".into()))
        };
        let ctx = kernels::gpu::open_context(0).map_err(|e| e.to_string())?;
        // SAFETY: dependencies are managed explicitly (one stream, synchronized).
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(err("creating a stream"))?;
        let t = Instant::now();
        let ptx = mk::compile_ptx(None).map_err(|e| e.to_string())?;
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx.clone()))
            .map_err(err("loading the megakernel module"))?;
        let func = module
            .load_function(mk::ENTRY)
            .map_err(err("looking up mk_persistent"))?;
        let rebuild_ns = t.elapsed().as_nanos() as u64;
        let num_sms = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(err("reading the SM count"))? as u32;
        let mut drv = 0i32;
        // SAFETY: valid out pointer.
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut drv) };
        let env = Env {
            backend: "cuda".into(),
            gpu: ctx.name().unwrap_or_default(),
            driver: kernels::gpu::driver_release().unwrap_or_else(|| "unknown".into()),
            cuda: format!("{}.{}", drv / 1000, (drv % 1000) / 10),
            cupti: recorder
                .as_ref()
                .map(|r| r.version.to_string())
                .unwrap_or_else(|| "unavailable".into()),
            host: std::fs::read_to_string("/etc/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
        };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        Ok(GpuExecutor {
            ctx,
            stream,
            _module: module,
            func,
            num_sms,
            recorder,
            recorder_error,
            buf: None,
            env,
            rebuild_ns,
            ptx,
            deadline_ns: 2_000_000_000,
            tid,
            hook_kernel: None,
        })
    }

    /// What a new monitor question would cost if monitors were compiled in:
    /// NVRTC compile + module load + function lookup of the megakernel, warm
    /// (NVRTC already loaded), ns.
    pub fn measure_rebuild(&self) -> Result<u64, String> {
        let t = Instant::now();
        let ptx = mk::compile_ptx(None).map_err(|e| e.to_string())?;
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .map_err(err("loading the megakernel module"))?;
        module
            .load_function(mk::ENTRY)
            .map_err(err("looking up mk_persistent"))?;
        Ok(t.elapsed().as_nanos() as u64)
    }

    fn ensure_buffers(&mut self, s: &Schedule) -> Result<(), String> {
        let workers = s.workers as usize;
        let n_tasks = s.tasks.len();
        let queue_cap = s.worker_ntasks().into_iter().max().unwrap_or(1).max(1) as usize;
        let ring_alloc = 4 * queue_cap + 3 * n_tasks + 64;
        let fits = self.buf.as_ref().is_some_and(|b| {
            b.n_tasks >= n_tasks
                && b.n_events >= s.events.len()
                && b.n_deps >= s.deps.len().max(1)
                && b.workers == workers
                && b.queue_cap >= queue_cap
                && b.ring_alloc >= ring_alloc
                && b.scratch_vecs >= s.mem_vecs as usize
        });
        if fits {
            return Ok(());
        }
        self.buf = None;
        let st = &self.stream;
        let z = |what: &str| format!("allocating {what}");
        let scratch_vecs = (s.mem_vecs as usize).max(1);
        let b = Buffers {
            n_tasks,
            n_events: s.events.len(),
            n_deps: s.deps.len().max(1),
            workers,
            queue_cap,
            ring_alloc,
            tasks: st.alloc_zeros(n_tasks).map_err(err(&z("tasks")))?,
            events: st
                .alloc_zeros(s.events.len().max(1))
                .map_err(err(&z("events")))?,
            deps: st
                .alloc_zeros(s.deps.len().max(1))
                .map_err(err(&z("deps")))?,
            roots: st.alloc_zeros(n_tasks.max(1)).map_err(err(&z("roots")))?,
            worker_ntasks: st.alloc_zeros(workers).map_err(err(&z("worker counts")))?,
            event_count: st
                .alloc_zeros(s.events.len().max(1))
                .map_err(err(&z("event counters")))?,
            event_done: st
                .alloc_zeros(s.events.len().max(1))
                .map_err(err(&z("event times")))?,
            ready_ts: st.alloc_zeros(n_tasks).map_err(err(&z("ready times")))?,
            queue: st
                .alloc_zeros(workers * queue_cap)
                .map_err(err(&z("queues")))?,
            queue_tail: st.alloc_zeros(workers).map_err(err(&z("queue tails")))?,
            queue_head: st.alloc_zeros(workers).map_err(err(&z("queue heads")))?,
            ring: st
                .alloc_zeros(workers * ring_alloc)
                .map_err(err(&z("rings")))?,
            ring_count: st.alloc_zeros(workers).map_err(err(&z("ring counts")))?,
            coverage: st.alloc_zeros(1).map_err(err(&z("coverage")))?,
            agg: st.alloc_zeros(1).map_err(err(&z("aggregates")))?,
            worker_class: st
                .alloc_zeros(mk::MAX_CLASSES * workers)
                .map_err(err(&z("worker-class counts")))?,
            crossings: st.alloc_zeros(workers).map_err(err(&z("pressure")))?,
            max_depth: st.alloc_zeros(workers).map_err(err(&z("depths")))?,
            state: st.alloc_zeros(1).map_err(err(&z("state")))?,
            scratch_src: st
                .alloc_zeros(workers * scratch_vecs * 16)
                .map_err(err(&z("scratch")))?,
            scratch_dst: st
                .alloc_zeros(workers * scratch_vecs * 16)
                .map_err(err(&z("scratch")))?,
            scratch_vecs,
            params: st.alloc_zeros(1).map_err(err(&z("params")))?,
            config: st.alloc_zeros(1).map_err(err(&z("config")))?,
        };
        self.buf = Some(b);
        Ok(())
    }

    /// Applies a monitor configuration to the loaded kernel: one 64-byte copy
    /// and a synchronize. Returns the time it took.
    pub fn apply_config(&mut self, cfg: &MonitorConfig) -> Result<u64, String> {
        let b = self.buf.as_mut().ok_or("no buffers yet")?;
        let mut dc = [device_config(cfg)];
        if let Some((_, slot)) = &self.hook_kernel {
            dc[0].reserved[..2].copy_from_slice(&[*slot as u32, (*slot >> 32) as u32]);
        }
        let t = Instant::now();
        self.stream
            .memcpy_htod(&dc, &mut b.config)
            .map_err(err("copying the monitor configuration"))?;
        self.stream.synchronize().map_err(err("synchronizing"))?;
        Ok(t.elapsed().as_nanos() as u64)
    }

    fn upload(&mut self, s: &Schedule) -> Result<(), String> {
        self.ensure_buffers(s)?;
        let st = self.stream.clone();
        let b = self.buf.as_mut().expect("allocated");
        // The schedule already holds the device structs: upload them as they are.
        let (tasks, events) = (&s.tasks, &s.events);
        let e = err("uploading the task graph");
        st.memcpy_htod(tasks, &mut b.tasks.slice_mut(..tasks.len()))
            .map_err(e)?;
        st.memcpy_htod(events, &mut b.events.slice_mut(..events.len()))
            .map_err(err("uploading events"))?;
        if !s.deps.is_empty() {
            st.memcpy_htod(&s.deps, &mut b.deps.slice_mut(..s.deps.len()))
                .map_err(err("uploading deps"))?;
        }
        st.memcpy_htod(&s.roots, &mut b.roots.slice_mut(..s.roots.len()))
            .map_err(err("uploading roots"))?;
        st.memcpy_htod(&s.worker_ntasks(), &mut b.worker_ntasks)
            .map_err(err("uploading worker counts"))?;
        let zero = err("zeroing the state");
        st.memset_zeros(&mut b.event_count).map_err(zero)?;
        st.memset_zeros(&mut b.event_done).map_err(err("zeroing"))?;
        st.memset_zeros(&mut b.ready_ts).map_err(err("zeroing"))?;
        st.memset_zeros(&mut b.queue).map_err(err("zeroing"))?;
        st.memset_zeros(&mut b.queue_tail).map_err(err("zeroing"))?;
        st.memset_zeros(&mut b.queue_head).map_err(err("zeroing"))?;
        st.memset_zeros(&mut b.ring_count).map_err(err("zeroing"))?;
        st.memset_zeros(&mut b.coverage).map_err(err("zeroing"))?;
        st.memset_zeros(&mut b.agg).map_err(err("zeroing"))?;
        st.memset_zeros(&mut b.worker_class)
            .map_err(err("zeroing"))?;
        st.memset_zeros(&mut b.crossings).map_err(err("zeroing"))?;
        st.memset_zeros(&mut b.max_depth).map_err(err("zeroing"))?;
        let state = [mk::State {
            first_start: u64::MAX,
            ..Default::default()
        }];
        st.memcpy_htod(&state, &mut b.state)
            .map_err(err("initializing the state"))?;
        let p = |x: &dyn Fn() -> u64| x();
        let params = [mk::Params {
            n_tasks: s.tasks.len() as u32,
            n_events: s.events.len() as u32,
            n_workers: s.workers,
            n_roots: s.roots.len() as u32,
            queue_cap: b.queue_cap as u32,
            ring_alloc: b.ring_alloc as u32,
            n_classes: CLASSES.len() as u32,
            pad0: 0,
            deadline_ns: self.deadline_ns,
            tasks: p(&|| b.tasks.device_ptr(&st).0),
            events: p(&|| b.events.device_ptr(&st).0),
            deps: p(&|| b.deps.device_ptr(&st).0),
            roots: p(&|| b.roots.device_ptr(&st).0),
            worker_ntasks: p(&|| b.worker_ntasks.device_ptr(&st).0),
            event_count: p(&|| b.event_count.device_ptr(&st).0),
            event_done: p(&|| b.event_done.device_ptr(&st).0),
            ready_ts: p(&|| b.ready_ts.device_ptr(&st).0),
            queue: p(&|| b.queue.device_ptr(&st).0),
            queue_tail: p(&|| b.queue_tail.device_ptr(&st).0),
            queue_head: p(&|| b.queue_head.device_ptr(&st).0),
            ring: p(&|| b.ring.device_ptr(&st).0),
            ring_count: p(&|| b.ring_count.device_ptr(&st).0),
            coverage: p(&|| b.coverage.device_ptr(&st).0),
            agg: p(&|| b.agg.device_ptr(&st).0),
            worker_class_tasks: p(&|| b.worker_class.device_ptr(&st).0),
            pressure_crossings: p(&|| b.crossings.device_ptr(&st).0),
            max_depth: p(&|| b.max_depth.device_ptr(&st).0),
            state: p(&|| b.state.device_ptr(&st).0),
            scratch_src: p(&|| b.scratch_src.device_ptr(&st).0),
            scratch_dst: p(&|| b.scratch_dst.device_ptr(&st).0),
            scratch_vecs: b.scratch_vecs as u64,
        }];
        st.memcpy_htod(&params, &mut b.params)
            .map_err(err("uploading the parameters"))?;
        Ok(())
    }

    /// Drains the CUPTI recorder and returns the last megakernel's record.
    fn cupti_kernel(&self) -> Option<KernelObs> {
        let r = self.recorder.as_ref()?;
        let f = r.flush().ok()?;
        let mut kernel = None;
        for raw in &f.records {
            if let Raw::Kernel {
                name,
                device,
                context,
                stream,
                corr,
                queued,
                submitted,
                start,
                end,
                ..
            } = raw
            {
                if name.contains(mk::ENTRY) {
                    kernel = Some(KernelObs {
                        queued: *queued,
                        submitted: *submitted,
                        start: *start,
                        end: *end,
                        correlation_id: *corr,
                        stream: *stream,
                        context: *context,
                        device: *device,
                        ..Default::default()
                    });
                }
            }
        }
        let mut k = kernel?;
        for raw in &f.records {
            if let Raw::Api {
                start,
                end,
                corr,
                tid,
                ..
            } = raw
            {
                if *corr == k.correlation_id {
                    k.api_start = *start;
                    k.api_end = *end;
                    k.tid = *tid;
                }
            }
        }
        Some(k)
    }

    fn launch_raw(&mut self) -> Result<(u64, u64), String> {
        let b = self.buf.as_ref().ok_or("no buffers")?;
        let cfg = LaunchConfig {
            grid_dim: (b.workers as u32, 1, 1),
            block_dim: (BLOCK_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let pp = b.params.device_ptr(&self.stream).0;
        let cp = b.config.device_ptr(&self.stream).0;
        let a0 = recorder_cupti::now();
        let func = self.hook_kernel.as_ref().map_or(&self.func, |(f, _)| f);
        let mut lb = self.stream.launch_builder(func);
        lb.arg(&pp).arg(&cp);
        // SAFETY: every buffer the parameters point at lives in `self.buf`
        // until the synchronize below.
        unsafe { lb.launch(cfg) }.map_err(err("launching mk_persistent"))?;
        let a1 = recorder_cupti::now();
        self.stream
            .synchronize()
            .map_err(err("waiting for mk_persistent"))?;
        Ok((a0, a1))
    }

    /// Runs `s` once with no readback of telemetry (the controls' comparison point).
    pub fn launch_only(&mut self, s: &Schedule, cfg: &MonitorConfig) -> Result<u64, String> {
        self.upload(s)?;
        self.apply_config(cfg)?;
        self.launch_raw()?;
        let b = self.buf.as_ref().expect("allocated");
        let st = self
            .stream
            .clone_dtoh(&b.state)
            .map_err(err("reading state"))?[0];
        let _ = self.cupti_kernel();
        Ok(st.last_end.saturating_sub(st.first_start))
    }

    /// Outer duration of the kernel-per-operator build and of its CUDA-graph
    /// capture, same work (spin tasks as `cb_spin` blocks, memory tasks as
    /// `cb_memory`), `reps` launches each; also the megakernel's own for comparison.
    pub fn controls(&mut self, s: &Schedule, reps: u32) -> Result<Controls, String> {
        let k = kernels::gpu::Kernels::load(&self.ctx, None).map_err(|e| e.to_string())?;
        let st = self.stream.clone();
        let bytes = (s.mem_vecs as usize * 16).max(16) * s.workers as usize;
        let src = st
            .alloc_zeros::<u8>(bytes)
            .map_err(err("control scratch"))?;
        let dst = st
            .alloc_zeros::<u8>(bytes)
            .map_err(err("control scratch"))?;
        let sp = src.device_ptr(&st).0;
        let dp = dst.device_ptr(&st).0;
        let enqueue = |k: &kernels::gpu::Kernels| -> Result<(), String> {
            for op in &s.ops {
                let t = s.tasks[op.first_task as usize];
                let cfg = kernels::gpu::launch_config(op.n_tasks, BLOCK_THREADS);
                // SAFETY: the scratch buffers outlive every launch (synchronized below).
                unsafe {
                    if t.body == mk::BODY_MEMORY {
                        k.launch_memory(
                            &st,
                            op.first_task as u64,
                            kernels::gpu::LogSlot::NONE,
                            sp,
                            dp,
                            (t.mem_vecs as u64 * 16 * op.n_tasks as u64).min(bytes as u64) & !15,
                            t.cost.max(1),
                            cfg,
                        )
                        .map_err(|e| e.to_string())?;
                        if t.extra_ns > 0 {
                            k.launch_spin(
                                &st,
                                0,
                                kernels::gpu::LogSlot::NONE,
                                t.extra_ns as u64,
                                cfg,
                            )
                            .map_err(|e| e.to_string())?;
                        }
                    } else {
                        k.launch_spin(
                            &st,
                            op.first_task as u64,
                            kernels::gpu::LogSlot::NONE,
                            t.cost as u64 + t.extra_ns as u64,
                            cfg,
                        )
                        .map_err(|e| e.to_string())?;
                    }
                }
            }
            Ok(())
        };
        let timed = |f: &dyn Fn() -> Result<(), String>| -> Result<u64, String> {
            let e0 = st
                .record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(err("event"))?;
            f()?;
            let e1 = st
                .record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(err("event"))?;
            let ms = e0.elapsed_ms(&e1).map_err(err("elapsed"))?;
            Ok((ms as f64 * 1e6) as u64)
        };
        let mut per_op = Vec::new();
        for _ in 0..reps.max(1) {
            per_op.push(timed(&|| enqueue(&k))?);
        }
        // What kernel-level CUPTI sees of the per-operator build: one kernel
        // record per operator (plus the class-delay spin of a memory op), in
        // launch order; mean duration per class.
        let _ = self.recorder.as_ref().map(|r| r.flush());
        enqueue(&k)?;
        st.synchronize().map_err(err("sync"))?;
        let mut per_class_kernel_us = Vec::new();
        if let Some(f) = self.recorder.as_ref().and_then(|r| r.flush().ok()) {
            let mut ks: Vec<(u64, u64)> = f
                .records
                .iter()
                .filter_map(|r| match r {
                    Raw::Kernel {
                        name, start, end, ..
                    } if name.starts_with("cb_") => Some((*start, *end)),
                    _ => None,
                })
                .collect();
            ks.sort_unstable();
            let mut classes_in_order = Vec::new();
            for op in &s.ops {
                let t = s.tasks[op.first_task as usize];
                classes_in_order.push(op.class);
                if t.body == mk::BODY_MEMORY && t.extra_ns > 0 {
                    classes_in_order.push(op.class);
                }
            }
            if ks.len() == classes_in_order.len() {
                let mut sum = vec![(0f64, 0u32); CLASSES.len()];
                // A memory op's extra spin kernel counts toward its operator.
                let mut i = 0;
                for op in &s.ops {
                    let t = s.tasks[op.first_task as usize];
                    let mut d = ks[i].1.saturating_sub(ks[i].0);
                    i += 1;
                    if t.body == mk::BODY_MEMORY && t.extra_ns > 0 {
                        d += ks[i].1.saturating_sub(ks[i].0);
                        i += 1;
                    }
                    if let Some(x) = sum.get_mut(op.class as usize) {
                        x.0 += d as f64 / 1e3;
                        x.1 += 1;
                    }
                }
                per_class_kernel_us = sum
                    .iter()
                    .map(|(t, n)| if *n == 0 { 0.0 } else { t / *n as f64 })
                    .collect();
            }
        }
        st.begin_capture(
            cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        )
        .map_err(err("begin capture"))?;
        let cap = enqueue(&k);
        let graph = st
            .end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))
            .map_err(err("end capture"))?;
        cap?;
        let graph = graph.ok_or("stream capture produced no graph")?;
        graph.upload().map_err(err("graph upload"))?;
        let mut graph_ns = Vec::new();
        for _ in 0..reps.max(1) {
            graph_ns.push(timed(&|| graph.launch().map_err(err("graph launch")))?);
        }
        st.synchronize().map_err(err("sync"))?;
        let _ = self.recorder.as_ref().map(|r| r.flush());
        let mut mega = Vec::new();
        for _ in 0..reps.max(1) {
            mega.push(self.launch_only(s, &MonitorConfig::none())?);
        }
        Ok(Controls {
            per_class_kernel_us,
            kernels_per_run: s.ops.len() as u32
                + s.ops
                    .iter()
                    .filter(|o| {
                        let t = s.tasks[o.first_task as usize];
                        t.body == mk::BODY_MEMORY && t.extra_ns > 0
                    })
                    .count() as u32,
            kernel_per_op_ns: per_op,
            cuda_graph_ns: graph_ns,
            megakernel_ns: mega,
        })
    }

    /// CUPTI PC sampling of the megakernel, one launch per schedule: enable,
    /// select every stall reason, start/stop control, parsed output into a
    /// buffer of `max_pcs` PC records; per launch start → launch → stop, then
    /// attribute each PC record by the function it is in (`mk_body_<class>`,
    /// `mk_wait_loop`, `mk_idle_*`). Every CUPTI result is reported; the first
    /// failure ends the collection (`available: false` with the reason).
    pub fn pc_sampling_collect(&mut self, schedules: &[&Schedule]) -> Vec<(PcSampling, u64)> {
        use cudarc::cupti::sys as cs;
        let ctx = self.ctx.cu_ctx();
        let mut steps: Vec<String> = Vec::new();
        let fail = |steps: &Vec<String>, n: usize| -> Vec<(PcSampling, u64)> {
            (0..n)
                .map(|_| {
                    (
                        PcSampling {
                            available: false,
                            detail: format!("PC sampling unavailable: {}", steps.join("; ")),
                            class_samples: Vec::new(),
                            wait_samples: 0,
                            idle_samples: 0,
                        },
                        0,
                    )
                })
                .collect()
        };
        let n = schedules.len();
        let ok = |r: cs::CUptiResult| r == cs::CUptiResult::CUPTI_SUCCESS;
        // Buffers outlive every CUPTI call that can write into them.
        const MAX_PCS: usize = 8192;
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
            let mut en = cs::CUpti_PCSamplingEnableParams {
                size: std::mem::size_of::<cs::CUpti_PCSamplingEnableParams>(),
                pPriv: std::ptr::null_mut(),
                ctx: ctx as _,
            };
            let r = cs::cuptiPCSamplingEnable(&mut en);
            steps.push(format!("enable: {r:?}"));
            if !ok(r) {
                return Err(());
            }
            let mut nreasons: usize = 0;
            let mut nr = cs::CUpti_PCSamplingGetNumStallReasonsParams {
                size: std::mem::size_of::<cs::CUpti_PCSamplingGetNumStallReasonsParams>(),
                pPriv: std::ptr::null_mut(),
                ctx: ctx as _,
                numStallReasons: &mut nreasons,
            };
            let r = cs::cuptiPCSamplingGetNumStallReasons(&mut nr);
            steps.push(format!("stall reasons: {r:?} ({nreasons})"));
            if !ok(r) || nreasons == 0 {
                return Err(());
            }
            let mut index = vec![0u32; nreasons];
            let mut names_buf = vec![vec![0 as std::ffi::c_char; 128]; nreasons];
            let mut names: Vec<*mut std::ffi::c_char> =
                names_buf.iter_mut().map(|b| b.as_mut_ptr()).collect();
            let mut gr = cs::CUpti_PCSamplingGetStallReasonsParams {
                size: std::mem::size_of::<cs::CUpti_PCSamplingGetStallReasonsParams>(),
                pPriv: std::ptr::null_mut(),
                ctx: ctx as _,
                numStallReasons: nreasons,
                stallReasonIndex: index.as_mut_ptr(),
                stallReasons: names.as_mut_ptr(),
            };
            let r = cs::cuptiPCSamplingGetStallReasons(&mut gr);
            steps.push(format!("stall reason names: {r:?}"));
            if !ok(r) {
                return Err(());
            }
            let mut buf = PcBuffer::new(MAX_PCS, nreasons);
            // A second buffer for cuptiPCSamplingGetData (what the range left over).
            let mut buf2 = PcBuffer::new(MAX_PCS, nreasons);
            let attr =
                |t: cs::CUpti_PCSamplingConfigurationAttributeType,
                 d: cs::CUpti_PCSamplingConfigurationInfo__bindgen_ty_1| {
                    cs::CUpti_PCSamplingConfigurationInfo {
                        attributeType: t,
                        attributeStatus: cs::CUptiResult::CUPTI_SUCCESS,
                        attributeData: d,
                    }
                };
            type A = cs::CUpti_PCSamplingConfigurationAttributeType;
            type U = cs::CUpti_PCSamplingConfigurationInfo__bindgen_ty_1;
            let mut cfg = vec![
                attr(
                    A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON,
                    U {
                        stallReasonData:
                            cs::CUpti_PCSamplingConfigurationInfo__bindgen_ty_1__bindgen_ty_3 {
                                stallReasonCount: nreasons,
                                pStallReasonIndex: index.as_mut_ptr(),
                            },
                    },
                ),
                attr(
                    A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD,
                    U {
                        samplingPeriodData:
                            cs::CUpti_PCSamplingConfigurationInfo__bindgen_ty_1__bindgen_ty_2 {
                                samplingPeriod: 12,
                            },
                    },
                ),
                attr(
                    A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL,
                    U {
                        enableStartStopControlData:
                            cs::CUpti_PCSamplingConfigurationInfo__bindgen_ty_1__bindgen_ty_7 {
                                enableStartStopControl: 1,
                            },
                    },
                ),
                attr(
                    A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT,
                    U {
                        outputDataFormatData:
                            cs::CUpti_PCSamplingConfigurationInfo__bindgen_ty_1__bindgen_ty_8 {
                                outputDataFormat:
                                    cs::CUpti_PCSamplingOutputDataFormat::CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED,
                            },
                    },
                ),
                attr(
                    A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER,
                    U {
                        samplingDataBufferData:
                            cs::CUpti_PCSamplingConfigurationInfo__bindgen_ty_1__bindgen_ty_9 {
                                samplingDataBuffer: (&mut buf.data as *mut cs::CUpti_PCSamplingData)
                                    .cast(),
                            },
                    },
                ),
            ];
            let mut cp = cs::CUpti_PCSamplingConfigurationInfoParams {
                size: std::mem::size_of::<cs::CUpti_PCSamplingConfigurationInfoParams>(),
                pPriv: std::ptr::null_mut(),
                ctx: ctx as _,
                numAttributes: cfg.len(),
                pPCSamplingConfigurationInfo: cfg.as_mut_ptr(),
            };
            let r = cs::cuptiPCSamplingSetConfigurationAttribute(&mut cp);
            steps.push(format!("configure: {r:?}"));
            if !ok(r) {
                return Err(());
            }
            let mut out = Vec::new();
            for s in schedules {
                let mut sp = cs::CUpti_PCSamplingStartParams {
                    size: std::mem::size_of::<cs::CUpti_PCSamplingStartParams>(),
                    pPriv: std::ptr::null_mut(),
                    ctx: ctx as _,
                };
                let r = cs::cuptiPCSamplingStart(&mut sp);
                if !ok(r) {
                    steps.push(format!("start: {r:?}"));
                    return Err(());
                }
                let run = self.launch_only(s, &MonitorConfig::none());
                let mut stp = cs::CUpti_PCSamplingStopParams {
                    size: std::mem::size_of::<cs::CUpti_PCSamplingStopParams>(),
                    pPriv: std::ptr::null_mut(),
                    ctx: ctx as _,
                };
                let r = cs::cuptiPCSamplingStop(&mut stp);
                let run_ns = match (&run, ok(r)) {
                    (Ok(ns), true) => *ns,
                    _ => {
                        steps.push(format!("stop: {r:?}; launch: {:?}", run.err()));
                        return Err(());
                    }
                };
                buf2.data.totalNumPcs = 0;
                buf2.data.totalSamples = 0;
                buf2.data.droppedSamples = 0;
                let mut gd = cs::CUpti_PCSamplingGetDataParams {
                    size: std::mem::size_of::<cs::CUpti_PCSamplingGetDataParams>(),
                    pPriv: std::ptr::null_mut(),
                    ctx: ctx as _,
                    pcSamplingData: (&mut buf2.data as *mut cs::CUpti_PCSamplingData).cast(),
                };
                let get = cs::cuptiPCSamplingGetData(&mut gd);
                let mut class_samples = vec![0u64; CLASSES.len()];
                let (mut wait, mut idle, mut other) = (0u64, 0u64, 0u64);
                let filled = buf.data.totalNumPcs.min(MAX_PCS);
                let filled2 = if ok(get) {
                    buf2.data.totalNumPcs.min(MAX_PCS)
                } else {
                    0
                };
                for pc in buf.pcs[..filled].iter().chain(buf2.pcs[..filled2].iter()) {
                    let k = pc.stallReasonCount.min(nreasons);
                    let samples: u64 = (0..k)
                        .map(|j| (*pc.stallReason.add(j)).samples as u64)
                        .sum();
                    let name = if pc.functionName.is_null() {
                        String::new()
                    } else {
                        std::ffi::CStr::from_ptr(pc.functionName)
                            .to_string_lossy()
                            .into_owned()
                    };
                    if let Some(c) = CLASSES
                        .iter()
                        .position(|c| name.contains(&format!("mk_body_{c}")))
                    {
                        class_samples[c] += samples;
                    } else if name.contains("mk_wait_loop") {
                        wait += samples;
                    } else if name.contains("mk_idle_") {
                        idle += samples;
                    } else {
                        other += samples;
                    }
                }
                out.push((PcSampling {
                    available: true,
                    detail: format!(
                        "CUPTI PC sampling, period 2^12 cycles: {} + {} PCs (GetData: {:?}), {} + {} samples ({} dropped, {} more PCs not read), {} in scheduler code outside the loops",
                        filled,
                        filled2,
                        get,
                        buf.data.totalSamples as u64,
                        buf2.data.totalSamples as u64,
                        buf.data.droppedSamples as u64 + buf2.data.droppedSamples as u64,
                        buf.data.remainingNumPcs as u64 + buf2.data.remainingNumPcs as u64,
                        other
                    ),
                    class_samples,
                    wait_samples: wait,
                    idle_samples: idle,
                }, run_ns));
                // Reset the buffer's counts for the next launch.
                buf.data.totalNumPcs = 0;
                buf.data.remainingNumPcs = 0;
                buf.data.totalSamples = 0;
                buf.data.droppedSamples = 0;
            }
            let mut dp = cs::CUpti_PCSamplingDisableParams {
                size: std::mem::size_of::<cs::CUpti_PCSamplingDisableParams>(),
                pPriv: std::ptr::null_mut(),
                ctx: ctx as _,
            };
            let r = cs::cuptiPCSamplingDisable(&mut dp);
            steps.push(format!("disable: {r:?}"));
            drop(names_buf);
            Ok(out)
        }));
        match res {
            Ok(Ok(v)) => v,
            Ok(Err(())) => fail(&steps, n),
            Err(p) => {
                steps.push(format!(
                    "CUPTI PC sampling could not be called: {}",
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                ));
                fail(&steps, n)
            }
        }
    }
}

/// One CUPTI PC-sampling output buffer: `max_pcs` PC records, each with room
/// for every stall reason. `data` points into `pcs` and each of `pcs` into
/// `_reasons`; the vectors' heap storage does not move when the struct does,
/// but `data` itself must stay put once its address is given to CUPTI.
struct PcBuffer {
    _reasons: Vec<Vec<cudarc::cupti::sys::CUpti_PCSamplingStallReason>>,
    pcs: Vec<cudarc::cupti::sys::CUpti_PCSamplingPCData>,
    data: cudarc::cupti::sys::CUpti_PCSamplingData,
}

impl PcBuffer {
    fn new(max_pcs: usize, nreasons: usize) -> Self {
        use cudarc::cupti::sys as cs;
        let mut reasons: Vec<Vec<cs::CUpti_PCSamplingStallReason>> = (0..max_pcs)
            .map(|_| {
                vec![
                    cs::CUpti_PCSamplingStallReason {
                        pcSamplingStallReasonIndex: 0,
                        samples: 0,
                    };
                    nreasons
                ]
            })
            .collect();
        let mut pcs: Vec<cs::CUpti_PCSamplingPCData> = reasons
            .iter_mut()
            .map(|r| {
                // SAFETY: a plain C struct of integers and pointers; all-zero is
                // what CUPTI expects in the fields not set here.
                let mut d: cs::CUpti_PCSamplingPCData = unsafe { std::mem::zeroed() };
                d.size = std::mem::size_of::<cs::CUpti_PCSamplingPCData>();
                d.stallReason = r.as_mut_ptr();
                d
            })
            .collect();
        // SAFETY: as above.
        let mut data: cs::CUpti_PCSamplingData = unsafe { std::mem::zeroed() };
        data.size = std::mem::size_of::<cs::CUpti_PCSamplingData>();
        data.collectNumPcs = max_pcs;
        data.pPcData = pcs.as_mut_ptr();
        PcBuffer {
            _reasons: reasons,
            pcs,
            data,
        }
    }
}

/// The controls' outer durations (ns per run).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Controls {
    /// Mean duration of one operator's kernel(s) per class, as kernel-level
    /// CUPTI sees the per-operator build (empty without the CUPTI recorder).
    pub per_class_kernel_us: Vec<f64>,
    pub kernels_per_run: u32,
    pub kernel_per_op_ns: Vec<u64>,
    pub cuda_graph_ns: Vec<u64>,
    pub megakernel_ns: Vec<u64>,
}

impl Executor for GpuExecutor {
    fn env(&self) -> Env {
        self.env.clone()
    }
    fn default_workers(&self) -> u32 {
        self.num_sms
    }
    fn launch(&mut self, s: &Schedule, cfg: &MonitorConfig, _seed: u64) -> Result<Launch, String> {
        if s.workers > self.num_sms {
            return Err(format!(
                "{} workers do not fit on {} SMs (a persistent kernel needs every worker resident)",
                s.workers, self.num_sms
            ));
        }
        self.upload(s)?;
        let apply_ns = self.apply_config(cfg)?;
        let (a0, a1) = self.launch_raw()?;
        let st = self.stream.clone();
        let b = self.buf.as_ref().expect("allocated");
        let r = |what: &str| format!("reading {what}");
        let state = st.clone_dtoh(&b.state).map_err(err(&r("state")))?[0];
        let cov = st.clone_dtoh(&b.coverage).map_err(err(&r("coverage")))?[0];
        let agg = st.clone_dtoh(&b.agg).map_err(err(&r("aggregates")))?[0];
        let wc = st
            .clone_dtoh(&b.worker_class)
            .map_err(err(&r("worker counts")))?;
        let crossings = st.clone_dtoh(&b.crossings).map_err(err(&r("pressure")))?;
        let depth = st.clone_dtoh(&b.max_depth).map_err(err(&r("depth")))?;
        let counts = st
            .clone_dtoh(&b.ring_count)
            .map_err(err(&r("ring counts")))?;
        let mut events = Vec::new();
        if cfg.log {
            let cap = (cfg.ring_capacity as usize).min(b.ring_alloc);
            for (w, &c) in counts.iter().enumerate() {
                let n = (c as usize).min(cap);
                if n == 0 {
                    continue;
                }
                let base = w * b.ring_alloc;
                let mut v = vec![mk::HookEvent::default(); n];
                st.memcpy_dtoh(&b.ring.slice(base..base + n), &mut v)
                    .map_err(err(&r("a ring")))?;
                events.extend(v);
            }
        }
        let device_ns = state.last_end.saturating_sub(state.first_start);
        let kernel = match self.cupti_kernel() {
            Some(k) => k,
            None => KernelObs {
                api_start: a0,
                api_end: a1,
                queued: 0,
                submitted: 0,
                start: a1,
                end: a1 + device_ns,
                correlation_id: 0,
                stream: 0,
                context: 0,
                device: 0,
                tid: self.tid,
            },
        };
        let kernel_ns = kernel.end.saturating_sub(kernel.start);
        let capture = capture_from_device(
            cfg,
            CLASSES.len(),
            s.workers,
            kernel_ns,
            apply_ns,
            events,
            &cov,
            &agg,
            &wc,
            &crossings,
            &depth,
        );
        Ok(Launch {
            capture,
            kernel,
            device_start: state.first_start,
            error: state.error,
        })
    }
}
