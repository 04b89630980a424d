//! Recording on the GPU: the twin and the injected run of each scenario,
//! many scenarios under one eBPF recorder session, and each run's bundle.

use super::*;

impl Session {
    pub(super) fn record(
        &mut self,
        sc: &Scenario,
        repetition: u32,
        stats: &mut Vec<RunStats>,
    ) -> Result<Bundle, String> {
        let host_on = self.host_on;
        let part = self.run_part(sc, repetition, stats, host_on)?;
        self.finish_part(sc, part, stats)
    }

    /// Records many runs under one eBPF recorder session (attaching and
    /// detaching its uprobes costs seconds, far more than a run): each run's
    /// host records are the ones inside its own window. The ring-buffer loss
    /// counter is the session's, so every bundle carries the batch total.
    pub(super) fn record_batch(
        &mut self,
        items: &[(Scenario, u32)],
    ) -> Vec<(Result<Bundle, String>, Vec<RunStats>)> {
        let rec = if self.host_on {
            host::start(&mut self.host_disabled)
        } else {
            None
        };
        let mut parts: Vec<(Result<Part, String>, Vec<RunStats>)> = Vec::new();
        for (sc, rep) in items {
            let mut st = Vec::new();
            let p = guarded("cuda backend", || self.run_part(sc, *rep, &mut st, false));
            parts.push((p, st));
        }
        if let Some(r) = rec {
            let tr = r.stop();
            let mut windows: Vec<(Ns, Ns, usize)> = parts
                .iter()
                .enumerate()
                .filter_map(|(i, (p, _))| p.as_ref().ok().map(|p| (p.window.0, p.window.1, i)))
                .collect();
            windows.sort_unstable();
            let mut split: Vec<Vec<ground_truth::trace::Record>> = vec![Vec::new(); parts.len()];
            let find = |t: Ns| -> Option<usize> {
                let k = windows.partition_point(|w| w.0 <= t);
                k.checked_sub(1)
                    .map(|j| windows[j])
                    .filter(|w| t <= w.1)
                    .map(|w| w.2)
            };
            for r in tr.records {
                use ground_truth::trace::Record as R;
                let at = match &r {
                    R::Uprobe { enter, .. } => find(*enter),
                    R::Sched {
                        switch_out,
                        switch_in,
                        ..
                    } => find(*switch_out).or_else(|| find(*switch_in)),
                    R::PageFault { ts, .. } => find(*ts),
                    _ => None,
                };
                if let Some(i) = at {
                    split[i].push(r);
                }
            }
            for (i, recs) in split.into_iter().enumerate() {
                if let Ok(p) = &mut parts[i].0 {
                    p.host = Some(ebpf_recorder::HostTrace {
                        records: recs,
                        ringbuffer_dropped: tr.ringbuffer_dropped,
                        stack_errors: tr.stack_errors,
                        stack_walks: tr.stack_walks,
                        stacks_reused: tr.stacks_reused,
                        stack_copies: tr.stack_copies,
                        stack_copies_dropped: tr.stack_copies_dropped,
                        stacks_unwound: tr.stacks_unwound,
                        faults_untimed: tr.faults_untimed,
                        fault_timing: tr.fault_timing,
                        library: tr.library.clone(),
                        probes: Vec::new(),
                        warnings: tr.warnings.clone(),
                    });
                }
            }
        }
        parts
            .into_iter()
            .zip(items)
            .map(|((p, mut st), (sc, _))| {
                let b =
                    p.and_then(|p| guarded("cuda backend", || self.finish_part(sc, p, &mut st)));
                (b, st)
            })
            .collect()
    }

    fn run_part(
        &mut self,
        sc: &Scenario,
        repetition: u32,
        stats: &mut Vec<RunStats>,
        host_on: bool,
    ) -> Result<Part, String> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| format!("binding the context: {e:?}"))?;
        let seed = crate::mix(sc.seed ^ crate::mix(repetition as u64 + 1));
        let fail = |what: &str, errors: &[String]| -> Result<(), String> {
            if errors.is_empty() {
                Ok(())
            } else {
                Err(format!("{what} failed: {}", errors.join("; ")))
            }
        };
        self.prepare(sc, None)?;
        let mut twin = None;
        let mut plan = None;
        let mut quiet = None;
        if let Some(inj) = &sc.injection {
            let log = self.execute(sc, None, seed)?;
            let mut out = truth::build(sc, &log, None, &self.recorder, false);
            out.stats.twin = true;
            stats.push(out.stats.clone());
            fail("the no-injection twin run", &log.errors)?;
            if crate::label::applies(sc) {
                // A second run without the injection, under the injected run's
                // own conditions (host collector included): how far this
                // scenario's ops move from everything but the injection. Its
                // seed is the injected run's and the twin's: on the GPU the seed
                // only makes the scenario's choices (which pool member takes a
                // randomized queue's work), and the noise is the machine's own,
                // as the simulator draws its quiet run's noise independently
                // but keeps its choices (sim/mod.rs). A seed of its own made
                // other choices, and their timing counted as noise.
                let (quiet_log, _) = self.execute_host(sc, None, seed, host_on)?;
                fail("the second no-injection run", &quiet_log.errors)?;
                quiet = Some(truth::build(sc, &quiet_log, None, &self.recorder, false));
            }
            // Sized from this machine's own noise (label::sized_injection).
            let sized = quiet.as_ref().and_then(|q| {
                use crate::label::QuietRun;
                let (twin, quiet) = (
                    QuietRun::of(&out.builder, &out.keys, out.origin),
                    QuietRun::of(&q.builder, &q.keys, q.origin),
                );
                crate::label::sized_injection(sc, &twin, &quiet)
            });
            let inj = sized.as_ref().unwrap_or(inj);
            let tw = plan::Twin {
                nodes: &out.builder.truth.nodes,
                keys: &out.keys,
                origin: out.origin,
            };
            let sms = self.info.sms;
            let mut costs: HashMap<bool, Result<f64, String>> = HashMap::new();
            for major in [false, true] {
                if (major && inj.kind == ground_truth::scenario::InjectionKind::HostPageFaultMajor)
                    || (!major
                        && inj.kind == ground_truth::scenario::InjectionKind::HostPageFaultMinor)
                {
                    costs.insert(major, self.fault_cost(major));
                }
            }
            let p = plan::plan(sc, inj, &tw, sms, seed, |major| {
                costs
                    .remove(&major)
                    .unwrap_or_else(|| Err("no fault calibration".into()))
            });
            plan = Some(p);
            twin = Some(out);
        }
        self.prepare(sc, plan.as_ref())?;
        let (mut log, mut host_trace) = self.execute_host(sc, plan.as_ref(), seed, host_on)?;
        // A deschedule whose victim was not actually switched out for most of
        // the requested time did not inject what the scenario says: run again.
        for _ in 0..2 {
            let short = log
                .stalls
                .iter()
                .any(|s| s.switched_out_ns.is_some_and(|g| g < s.requested_ns / 2));
            if !short {
                break;
            }
            (log, host_trace) = self.execute_host(sc, plan.as_ref(), seed, host_on)?;
        }
        let out = truth::build(sc, &log, plan.as_ref(), &self.recorder, true);
        Ok(Part {
            seed,
            repetition,
            out,
            twin,
            quiet,
            window: (log.origin, log.end),
            errors: log.errors,
            host: host_trace,
        })
    }

    pub(super) fn finish_part(
        &mut self,
        sc: &Scenario,
        part: Part,
        stats: &mut Vec<RunStats>,
    ) -> Result<Bundle, String> {
        let Part {
            seed,
            repetition,
            mut out,
            twin,
            quiet,
            window,
            errors,
            host: host_trace,
        } = part;
        let fail = |what: &str, errors: &[String]| -> Result<(), String> {
            if errors.is_empty() {
                Ok(())
            } else {
                Err(format!("{what} failed: {}", errors.join("; ")))
            }
        };
        let with_host = host_trace.is_some();
        if let Some(h) = host_trace {
            let hs = host::attach(&mut out.builder, h, window, 0);
            out.loss.ringbuffer_dropped = hs.ringbuffer_dropped;
            out.stats.records = out.builder.trace.len();
            out.stats.host = Some(hs);
        }
        stats.push(out.stats.clone());
        let cross_check = CrossCheck {
            kernels: out.stats.clock.kernels as u64,
            clock_offset_ns: out.stats.clock.offset_ns,
            max_start_diff_ns: out.stats.clock.max_start_dev_ns,
            max_end_diff_ns: out.stats.clock.max_end_dev_ns,
            spin_overhead_ns: self.spin_overhead_ns,
            device_ops: out.stats.device_ops as u64,
            device_ops_bound: out.stats.bound as u64,
            call_sites_exact: out
                .stats
                .host
                .as_ref()
                .map_or(0, |h| h.call_sites_exact as u64),
            call_sites_nearest_wrong: out
                .stats
                .host
                .as_ref()
                .map_or(0, |h| h.call_sites_nearest_wrong as u64),
        };
        fail("the recorded run", &errors)?;
        let clock = out.stats.clock.clone();
        let origin = out.origin;
        let keys = out.keys;
        let loss = out.loss;
        let injections = out.injections;
        let (mut truth, trace) = out.builder.finish(seed);
        truth.injections = injections;
        fn as_quiet(r: &truth::Output) -> crate::label::QuietRun<'_> {
            crate::label::QuietRun {
                truth: &r.builder.truth,
                keys: &r.keys,
                origin: r.origin,
            }
        }
        answers::add_checked_symptom(
            sc,
            &mut truth,
            &trace,
            &keys,
            origin,
            twin.as_ref().map(as_quiet).as_ref(),
            quiet.as_ref().map(as_quiet).as_ref(),
        )?;
        let check = format!(
            "; CUPTI vs %globaltimer over {} kernels (offset-calibrated): max |start diff| {} ns, max |end diff| {} ns; spin kernels shortened by the measured {} ns launch overhead",
            clock.kernels, clock.max_start_dev_ns, clock.max_end_dev_ns, self.spin_overhead_ns
        );
        for inj in &mut truth.injections {
            inj.mechanism.push_str(&check);
        }
        let mut collectors = vec!["cupti".to_string()];
        if with_host {
            collectors.push("ebpf".into());
        }
        if sc.mode == Mode::Instrumented {
            collectors.push("app".into());
        }
        let v = self.info.driver_cuda;
        Ok(Bundle {
            schema_version: SCHEMA_VERSION,
            manifest: Manifest {
                scenario: sc.clone(),
                seed,
                repetition,
                backend: "cuda".into(),
                gpu: format!(
                    "{} ({} SMs, compute capability {}.{})",
                    self.info.name, self.info.sms, self.info.cc.0, self.info.cc.1
                ),
                driver: self
                    .info
                    .driver_release
                    .clone()
                    .unwrap_or_else(|| format!("CUDA driver API {v}")),
                cuda: format!("{}.{}", v / 1000, (v % 1000) / 10),
                cupti: format!(
                    "CUPTI {} (API version {})",
                    self.recorder.capabilities.release, self.recorder.version
                ),
                tool_version: env!("CARGO_PKG_VERSION").into(),
                host: self.host.clone(),
                collectors,
                cross_check: Some(cross_check),
                cupti_capabilities: Some(self.recorder.capabilities()),
            },
            ground_truth: truth,
            trace,
            loss,
        })
    }
}

/// A recorded run before its bundle is assembled (host records pending).
pub(super) struct Part {
    pub(super) seed: u64,
    pub(super) repetition: u32,
    pub(super) out: truth::Output,
    pub(super) twin: Option<truth::Output>,
    /// The second no-injection run the label check's noise floor is measured
    /// on, where the check applies.
    pub(super) quiet: Option<truth::Output>,
    pub(super) window: (Ns, Ns),
    pub(super) errors: Vec<String>,
    pub(super) host: Option<ebpf_recorder::HostTrace>,
}
