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

mod controls;
mod pc_sampling;

pub use controls::Controls;

use crate::bundle::{Env, KernelObs};
use crate::case::{Executor, Launch};
use crate::monitor::{capture_from_device, device_config};
use crate::schedule::Schedule;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
    PushKernelArg,
};
use ground_truth::megakernel::{MonitorConfig, CLASSES};
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
