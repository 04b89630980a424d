//! What the GPU backend measures about itself: the eBPF collector's overhead
//! and the executor's launch overhead against a direct cudarc loop.

use super::*;

/// Launch-overhead benchmark: the generator's executor against a direct
/// cudarc loop launching the same number of empty kernels (interleaved).
#[derive(Debug, Clone, Default)]
pub struct Overhead {
    pub kernels: u32,
    /// Host time from the first to the last launch call, per repetition.
    pub direct_ns: Vec<u64>,
    pub generator_ns: Vec<u64>,
    /// The direct loop with the recorder's per-call binding (push/pop of the
    /// op's external correlation id), i.e. the binding's own cost.
    pub direct_bound_ns: Vec<u64>,
    /// The generator on the same workload in closed mode (no request token
    /// on CUPTI's external-correlation stack).
    pub generator_closed_ns: Vec<u64>,
    pub spin_overhead_ns: u64,
    /// Whole `record` of the same workload (execution, flush, ground truth).
    pub record_ns: Vec<u64>,
    /// median(generator) / median(direct).
    pub ratio: f64,
    /// Device ops of the generator runs bound to a CUPTI record.
    pub bound: usize,
    pub device_ops: usize,
}

/// eBPF collector overhead: the launch-bound scenario through the executor,
/// with and without the host recorder attached (interleaved repetitions).
#[derive(Debug, Clone, Default)]
pub struct EbpfOverhead {
    pub kernels: u32,
    /// Host time from the first to the last call, per repetition.
    pub without_ns: Vec<u64>,
    pub with_ns: Vec<u64>,
    /// median(with) / median(without).
    pub ratio: f64,
    /// Uprobe records per recorded repetition, and ring-buffer losses.
    pub uprobes: Vec<usize>,
    pub ringbuffer_dropped: Vec<u64>,
    /// Recorder start (attach) and stop (drain + symbolize) times, ns.
    pub start_ns: Vec<u64>,
    pub stop_ns: Vec<u64>,
    /// Why the recorder could not run (then nothing was measured).
    pub error: Option<String>,
}

impl Session {
    pub(super) fn ebpf_overhead(&mut self, n: u32, reps: u32) -> Result<EbpfOverhead, String> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| format!("binding the context: {e:?}"))?;
        let sc = crate::sim::launch_bound_scenario(n);
        self.prepare(&sc, None)?;
        let window = |log: &exec::RunLog| {
            let (mut first, mut last) = (u64::MAX, 0u64);
            for t in &log.threads {
                for op in &t.ops {
                    first = first.min(op.t0);
                    last = last.max(op.t1);
                }
            }
            last.saturating_sub(first)
        };
        let mut o = EbpfOverhead {
            kernels: n,
            ..Default::default()
        };
        // One unmeasured plain run first (page-in).
        for rep in 0..reps.max(1) + 1 {
            for with in if rep % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            } {
                if rep == 0 && with {
                    // Attaching costs seconds: only the plain run warms up.
                    continue;
                }
                let (log, trace) = if with {
                    self.recorder.flush()?;
                    let t0 = now();
                    let Some(rec) = host::start(&mut self.host_disabled) else {
                        o.error = self.host_disabled.clone();
                        return Ok(o);
                    };
                    let t1 = now();
                    let dev = self.device();
                    let log = exec::Exec::new(&sc, &dev, None, rep as u64)?.run();
                    let t2 = now();
                    let tr = rec.stop();
                    if rep > 0 {
                        o.start_ns.push(t1 - t0);
                        o.stop_ns.push(now() - t2);
                    }
                    (log, Some(tr))
                } else {
                    (self.execute(&sc, None, rep as u64)?, None)
                };
                if !log.errors.is_empty() {
                    return Err(log.errors.join("; "));
                }
                if rep == 0 {
                    continue;
                }
                if let Some(tr) = trace {
                    o.with_ns.push(window(&log));
                    o.uprobes.push(
                        tr.records
                            .iter()
                            .filter(|r| matches!(r, ground_truth::trace::Record::Uprobe { .. }))
                            .count(),
                    );
                    o.ringbuffer_dropped.push(tr.ringbuffer_dropped);
                } else {
                    o.without_ns.push(window(&log));
                }
            }
        }
        self.recorder.flush()?;
        let med = |v: &[u64]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v[v.len() / 2] as f64
        };
        o.ratio = med(&o.with_ns) / med(&o.without_ns).max(1.0);
        Ok(o)
    }

    pub(super) fn launch_overhead(&mut self, n: u32, reps: u32) -> Result<Overhead, String> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| format!("binding the context: {e:?}"))?;
        let sc = crate::sim::launch_bound_scenario(n);
        let mut closed_sc = sc.clone();
        closed_sc.mode = Mode::Closed;
        self.prepare(&sc, None)?;
        let arch = format!("compute_{}{}", self.info.cc.0, self.info.cc.1);
        let k = kernels::gpu::Kernels::load(&self.ctx, Some(&arch)).map_err(|e| e.to_string())?;
        let s1 = self.ctx.new_stream().map_err(|e| format!("{e:?}"))?;
        let s2 = self.ctx.new_stream().map_err(|e| format!("{e:?}"))?;
        let cfg = kernels::gpu::launch_config(1, 32);
        let mut o = Overhead {
            kernels: n,
            ..Default::default()
        };
        for rep in 0..reps.max(1) {
            // Direct cudarc loop.
            let t0 = now();
            for i in 0..n {
                let s = if i % 2 == 0 { &s1 } else { &s2 };
                // SAFETY: no buffers are involved (the log is disabled).
                unsafe { k.launch_empty(s, i as u64, kernels::gpu::LogSlot::NONE, cfg) }
                    .map_err(|e| e.to_string())?;
            }
            let t1 = now();
            o.direct_ns.push(t1 - t0);
            s1.synchronize().map_err(|e| format!("{e:?}"))?;
            s2.synchronize().map_err(|e| format!("{e:?}"))?;
            // Direct loop with the binding.
            let t0 = now();
            for i in 0..n {
                let s = if i % 2 == 0 { &s1 } else { &s2 };
                cupti::push(i as u64 + 1, None);
                // SAFETY: as above.
                let r = unsafe { k.launch_empty(s, i as u64, kernels::gpu::LogSlot::NONE, cfg) };
                cupti::pop(false);
                r.map_err(|e| e.to_string())?;
            }
            let t1 = now();
            o.direct_bound_ns.push(t1 - t0);
            s1.synchronize().map_err(|e| format!("{e:?}"))?;
            s2.synchronize().map_err(|e| format!("{e:?}"))?;
            // The generator: same kernels through the executor and recorder.
            let window = |log: &exec::RunLog| {
                let (mut first, mut last) = (u64::MAX, 0u64);
                for t in &log.threads {
                    for op in &t.ops {
                        first = first.min(op.t0);
                        last = last.max(op.t1);
                    }
                }
                last.saturating_sub(first)
            };
            let closed = self.execute(&closed_sc, None, rep as u64)?;
            o.generator_closed_ns.push(window(&closed));
            drop(closed);
            let r0 = now();
            let log = self.execute(&sc, None, rep as u64)?;
            o.generator_ns.push(window(&log));
            let out = truth::build(&sc, &log, None, &self.recorder, true);
            let _ = out.builder.finish(1);
            o.record_ns.push(now() - r0);
            o.bound += out.stats.bound;
            o.device_ops += out.stats.device_ops;
            if !log.errors.is_empty() {
                return Err(log.errors.join("; "));
            }
        }
        self.recorder.flush()?;
        let med = |v: &[u64]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v[v.len() / 2] as f64
        };
        o.ratio = med(&o.generator_ns) / med(&o.direct_ns).max(1.0);
        o.spin_overhead_ns = self.spin_overhead_ns;
        Ok(o)
    }
}

/// The four collector configurations the views model, with the view that
/// stands for each (docs/design.md, "Views"), and whether it turns CUPTI and
/// the eBPF host recorder on.
const CONFIGURATIONS: [(&str, Option<&str>, bool, bool); 4] = [
    ("none", None, false, false),
    ("cupti", Some("cupti"), true, false),
    ("ebpf", Some("host"), false, true),
    ("cupti+ebpf", Some("combined"), true, true),
];

impl Session {
    /// `measure collectors`: the launch-bound workload (`launches` empty
    /// kernels) and the realistic one (`kernels` kernels of 10–100 µs), each
    /// run `reps` times under every collector configuration in rotating
    /// order. A configuration without CUPTI disables its activity kinds and
    /// the executor's per-call binding; CUPTI stays loaded.
    pub(super) fn collector_costs(
        &mut self,
        launches: u32,
        kernels: u32,
        reps: u32,
    ) -> Result<ground_truth::costs::CollectorCosts, String> {
        use ground_truth::costs::{median, ConfigurationCost, WorkloadCost};
        self.ctx
            .bind_to_thread()
            .map_err(|e| format!("binding the context: {e:?}"))?;
        let mut costs = ground_truth::costs::CollectorCosts {
            schema_version: ground_truth::costs::COSTS_SCHEMA_VERSION,
            machine: format!(
                "{} ({} SMs), driver {}, CUPTI API version {}, causalbench {}",
                self.info.name,
                self.info.sms,
                self.info.driver_release.clone().unwrap_or_default(),
                self.recorder.version,
                env!("CARGO_PKG_VERSION")
            ),
            reps,
            workloads: Vec::new(),
            error: None,
        };
        let workloads = [
            ("launch-bound", crate::sim::launch_bound_scenario(launches)),
            ("realistic", crate::sim::realistic_scenario(kernels)),
        ];
        for (name, sc) in workloads {
            self.prepare(&sc, None)?;
            // Unmeasured: page-in, module loads, the first launch's setup.
            let warm = self.execute(&sc, None, 0)?;
            if !warm.errors.is_empty() {
                return Err(warm.errors.join("; "));
            }
            let operations: u64 = warm.threads.iter().map(|t| t.ops.len() as u64).sum();
            drop(warm);
            // Per configuration: wall ns, records, bytes of each repetition.
            let mut runs: Vec<Vec<(u64, f64, f64)>> = vec![Vec::new(); CONFIGURATIONS.len()];
            let mut failure = None;
            for rep in 0..reps.max(1) as usize {
                for k in 0..CONFIGURATIONS.len() {
                    let i = (k + rep) % CONFIGURATIONS.len();
                    let (_, _, with_cupti, with_ebpf) = CONFIGURATIONS[i];
                    match self.collector_run(&sc, rep as u64 + 1, with_cupti, with_ebpf) {
                        Ok(r) => runs[i].push(r),
                        Err(e) => failure = Some(e),
                    }
                }
            }
            // Whatever happened, CUPTI records again for what follows.
            self.recorder.set_activities(true)?;
            cupti::set_binding(true);
            if let Some(e) = failure {
                costs.error = Some(format!("{name}: {e}"));
                break;
            }
            let configurations = CONFIGURATIONS
                .iter()
                .zip(&runs)
                .map(|((collectors, view, _, _), r)| {
                    let ratios: Vec<f64> = r
                        .iter()
                        .zip(&runs[0])
                        .map(|(run, none)| run.0 as f64 / none.0.max(1) as f64)
                        .collect();
                    let per_op = |x: f64| x / operations.max(1) as f64;
                    ConfigurationCost {
                        collectors: collectors.to_string(),
                        view: view.map(str::to_string),
                        wall_ns: r.iter().map(|x| x.0).collect(),
                        overhead_median: median(&ratios),
                        overhead_min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
                        overhead_max: ratios.iter().copied().fold(0.0, f64::max),
                        ratios,
                        records_per_op: per_op(median(&r.iter().map(|x| x.1).collect::<Vec<_>>())),
                        bytes_per_op: per_op(median(&r.iter().map(|x| x.2).collect::<Vec<_>>())),
                    }
                })
                .collect();
            costs.workloads.push(WorkloadCost {
                workload: name.into(),
                description: sc.description.clone(),
                operations,
                configurations,
            });
        }
        Ok(costs)
    }

    /// One timed run of `sc` under one configuration: wall ns, then the
    /// records its collectors produced and their bytes as bundle JSON.
    fn collector_run(
        &mut self,
        sc: &Scenario,
        seed: u64,
        with_cupti: bool,
        with_ebpf: bool,
    ) -> Result<(u64, f64, f64), String> {
        self.recorder.set_activities(with_cupti)?;
        cupti::set_binding(with_cupti);
        // SAFETY: no arguments.
        check_cuda("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })?;
        self.recorder.flush()?;
        // Attaching costs milliseconds and is not the workload's cost.
        let host = if with_ebpf {
            match host::start(&mut self.host_disabled) {
                Some(r) => Some(r),
                None => {
                    return Err(format!(
                        "the eBPF host recorder cannot run: {}",
                        self.host_disabled.clone().unwrap_or_default()
                    ))
                }
            }
        } else {
            None
        };
        let dev = self.device();
        let t0 = now();
        let log = exec::Exec::new(sc, &dev, None, seed)?.run();
        let wall = now() - t0;
        let trace = host.map(|r| r.stop());
        if !log.errors.is_empty() {
            return Err(log.errors.join("; "));
        }
        let mut records = 0.0;
        let mut bytes = 0.0;
        let mut count = |r: &ground_truth::trace::Record| {
            records += 1.0;
            bytes += serde_json::to_vec(r).map(|b| b.len()).unwrap_or(0) as f64;
        };
        if with_cupti {
            let out = truth::build(sc, &log, None, &self.recorder, true);
            let (_, recs) = out.builder.finish(1);
            recs.iter().for_each(&mut count);
        }
        if let Some(t) = &trace {
            t.records.iter().for_each(&mut count);
        }
        Ok((wall, records, bytes))
    }
}
