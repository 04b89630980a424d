//! The controls of the GPU megakernel: the same work as a kernel per
//! operator and as its CUDA-graph capture, against the persistent kernel.

use super::{err, GpuExecutor, BLOCK_THREADS};
use crate::schedule::Schedule;
use cudarc::driver::DevicePtr;
use ground_truth::megakernel::{MonitorConfig, CLASSES};
use kernels::megakernel as mk;
use recorder_cupti::Raw;

impl GpuExecutor {
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
