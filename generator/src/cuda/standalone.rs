//! The workload as its own process (`causalbench workload`,
//! docs/collectors.md): one scenario's CUDA work run by the GPU backend's
//! executor without the project's CUPTI recorder in the process, so an
//! external collector can wrap it (`CUDA_INJECTION64_PATH`, `LD_PRELOAD`, a
//! launcher) or attach to it by PID, while the benchmark still knows the
//! truth: the one truth builder reads the executor's step log, the kernels'
//! `%globaltimer` log and CUDA events around copies and memsets
//! (`truth::build_stamped`), all in CLOCK_MONOTONIC through an offset this
//! module measures without CUPTI ([`clock`]) before and after every run,
//! interpolated linearly between the two (`truth::ClockFit`).
//!
//! [`Workload::open`] with `compare_cupti` runs the normal backend instead
//! (the project's CUPTI recorder in the process) and builds every run twice,
//! from CUPTI and from the stamps alone, so how far the two truths are apart
//! is measured on the same runs: per kernel |Δstart| and |Δend|, and whether
//! the label check keeps the same label.

mod clock;

pub use clock::ClockCalibration;

use super::copy_stamps::CopyStamps;
use super::recording::Part;
use super::*;
use ground_truth::graph::NodeKind;

/// One kernel of a run as both truths time it (`compare_cupti`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct KernelDelta {
    pub name: String,
    /// Stamps − CUPTI, start and end (ns).
    pub start_ns: i64,
    pub end_ns: i64,
}

/// One recorded scenario.
#[derive(Debug)]
pub struct Recorded {
    /// The truth from the workload's own stamps, with the stamps as records.
    pub bundle: Result<Bundle, String>,
    /// `compare_cupti`: the same runs' bundle with CUPTI's truth and records.
    pub cupti: Option<Result<Bundle, String>>,
    /// `compare_cupti`: the injected run's kernels under both truths.
    pub kernels: Vec<KernelDelta>,
    /// The injected run's window (CLOCK_MONOTONIC).
    pub window: (Ns, Ns),
    /// Every kernel of every run of the scenario (twin and quiet runs too),
    /// timed by its own stamps: what a collector's clock is aligned against.
    pub known: Vec<crate::collector::KnownKernel>,
    /// The injected run's clock offset, measured before and after it.
    pub clock: truth::ClockFit,
}

/// The GPU session of a workload process.
pub struct Workload {
    session: Session,
    stamps: CopyStamps,
    /// The offset measured when the session opened.
    clock: ClockCalibration,
    pinger: clock::Pinger,
    anchor: clock::Anchor,
    /// The project's CUPTI recorder is in the process (`compare_cupti`).
    cupti: bool,
    /// The kernels of the scenario being recorded, every run.
    known: Vec<crate::collector::KnownKernel>,
}

/// What is needed to run without CUPTI: a GPU, its driver and NVRTC.
fn probe_without_cupti() -> Result<(), String> {
    if !crate::backend::gpu_present() {
        return Err("no NVIDIA GPU or driver found (/dev/nvidiactl is absent)".into());
    }
    kernels::gpu::gpu_available().map_err(|e| e.to_string())?;
    kernels::ensure_nvrtc().map_err(|e| e.to_string())?;
    Ok(())
}

impl Session {
    /// A session that never calls CUPTI: its recorder is an offline one
    /// (records nothing, loads nothing) and no run flushes it.
    fn open_without_cupti() -> Result<Session, String> {
        probe_without_cupti()?;
        let session = Session::with_recorder(
            cupti::Recorder::offline(&[]),
            Some("not attached by the workload itself".into()),
        )?;
        // The executor's per-call binding would reach CUPTI's stacks.
        cupti::set_binding(false);
        Ok(session)
    }
}

impl Workload {
    /// The session (with the project's CUPTI recorder when `compare_cupti`),
    /// its clock calibration and copy stamps.
    pub fn open(compare_cupti: bool) -> Result<Workload, RecordError> {
        let unavailable = |m: String| RecordError::Unavailable("cuda", m);
        guarded("opening the workload's GPU session", || {
            let mut session = if compare_cupti {
                let mut s = Session::open()?;
                // The normal backend's runs, without its in-process host recorder.
                s.host_on = false;
                s
            } else {
                Session::open_without_cupti()?
            };
            let arch = format!("compute_{}{}", session.info.cc.0, session.info.cc.1);
            let pinger = clock::Pinger::new(&arch)?;
            let clock = pinger.measure()?;
            let anchor = clock::Anchor::new(&mut session)?;
            if !compare_cupti {
                session.spin_overhead_ns = clock::spin_overhead(&mut session)?;
            }
            Ok(Workload {
                session,
                stamps: CopyStamps::new()?,
                clock,
                pinger,
                anchor,
                cupti: compare_cupti,
                known: Vec::new(),
            })
        })
        .map_err(unavailable)
    }

    pub fn clock(&self) -> &ClockCalibration {
        &self.clock
    }

    pub fn spin_overhead_ns(&self) -> u64 {
        self.session.spin_overhead_ns
    }

    /// Compiles and warms up every kernel of `sc` ahead of its runs (so a
    /// collector attached after this sees only the runs' own work).
    pub fn prepare(&mut self, sc: &Scenario) -> Result<(), RecordError> {
        crate::backend::check(sc)?;
        self.session
            .prepare(sc, None)
            .map_err(|m| RecordError::Invalid(sc.name.clone(), m))
    }

    /// Runs `sc` as the GPU backend does (the no-injection twin, the second
    /// quiet run where the label check applies, the injected run) and builds
    /// its truth from the stamps (and from CUPTI when `compare_cupti`).
    pub fn record(&mut self, sc: &Scenario, repetition: u32) -> Result<Recorded, RecordError> {
        crate::backend::check(sc)?;
        guarded("workload", || self.record_inner(sc, repetition))
            .map_err(|m| RecordError::Invalid(sc.name.clone(), m))
    }

    /// One execution: the device log cleared, the anchor event recorded, the
    /// executor run with copy stamps (and CUPTI's records when it is here).
    fn execute(
        &mut self,
        sc: &Scenario,
        plan: Option<&plan::Plan>,
        seed: u64,
    ) -> Result<(exec::RunLog, truth::Stamps), String> {
        let run = self.execute_once(sc, plan, seed)?;
        self.known.extend(known_kernels(&run.0, &run.1.clock));
        Ok(run)
    }

    fn execute_once(
        &mut self,
        sc: &Scenario,
        plan: Option<&plan::Plan>,
        seed: u64,
    ) -> Result<(exec::RunLog, truth::Stamps), String> {
        let s = &mut self.session;
        // SAFETY: clearing our own device log.
        check_cuda("clearing the device log", unsafe {
            sys::cuMemsetD8_v2(s.log, 0, s.log_slots as usize * kernels::LogEntry::SIZE)
        })?;
        // SAFETY: no arguments.
        check_cuda("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })?;
        // The offset before the run (with the device idle; under CUPTI the
        // ping kernel's records go with the flush below).
        let before = self.pinger.measure()?;
        if self.cupti {
            // Whatever setup recorded is not part of the run.
            s.recorder.flush()?;
        }
        let anchor = self.anchor.record(s)?;
        let dev = exec::Device {
            recorder: self.cupti.then_some(&s.recorder),
            copy_stamps: Some(&self.stamps),
            ..s.device()
        };
        let log = exec::Exec::new(sc, &dev, plan, seed).map(|e| e.run())?;
        let copies = self.stamps.times(anchor.event(), anchor.read(s)?);
        // And after it, once its work is done (under CUPTI the ping's
        // records go with the next run's flush).
        // SAFETY: no arguments.
        check_cuda("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })?;
        let after = self.pinger.measure()?;
        Ok((
            log,
            truth::Stamps {
                clock: truth::ClockFit::between(before, after),
                copies,
            },
        ))
    }

    /// The run's truth from the stamps, and from CUPTI when it is here.
    fn build(
        &self,
        sc: &Scenario,
        run: &(exec::RunLog, truth::Stamps),
        plan: Option<&plan::Plan>,
        keep: bool,
    ) -> (truth::Output, Option<truth::Output>) {
        let stamped = truth::build_stamped(sc, &run.0, plan, &run.1, keep);
        let cupti = self
            .cupti
            .then(|| truth::build(sc, &run.0, plan, &self.session.recorder, keep));
        (stamped, cupti)
    }

    fn record_inner(&mut self, sc: &Scenario, repetition: u32) -> Result<Recorded, String> {
        self.session
            .ctx
            .bind_to_thread()
            .map_err(|e| format!("binding the context: {e:?}"))?;
        let seed = crate::mix(sc.seed ^ crate::mix(repetition as u64 + 1));
        self.known.clear();
        let fail = |what: &str, errors: &[String]| -> Result<(), String> {
            if errors.is_empty() {
                Ok(())
            } else {
                Err(format!("{what} failed: {}", errors.join("; ")))
            }
        };
        self.session.prepare(sc, None)?;
        let (mut twin, mut quiet) = ((None, None), (None, None));
        let mut plan = None;
        if let Some(inj) = &sc.injection {
            let run = self.execute(sc, None, seed)?;
            fail("the no-injection twin run", &run.0.errors)?;
            let (a, b) = self.build(sc, &run, None, false);
            twin = (Some(a), b);
            if crate::label::applies(sc) {
                let run = self.execute(sc, None, seed)?;
                fail("the second no-injection run", &run.0.errors)?;
                let (a, b) = self.build(sc, &run, None, false);
                quiet = (Some(a), b);
            }
            // The runs are sized by the truth the backend records with: CUPTI's
            // when it is here (the normal backend's runs), else the stamps'.
            let (t, q) = match (&twin, &quiet) {
                ((_, Some(t)), (_, q)) if self.cupti => (t, q.as_ref()),
                ((t, _), (q, _)) => (t.as_ref().expect("twin built"), q.as_ref()),
            };
            let sized = q.and_then(|q| {
                use crate::label::QuietRun;
                crate::label::sized_injection(
                    sc,
                    &QuietRun::of(&t.builder, &t.keys, t.origin),
                    &QuietRun::of(&q.builder, &q.keys, q.origin),
                )
            });
            let inj = sized.as_ref().unwrap_or(inj);
            let tw = plan::Twin {
                nodes: &t.builder.truth.nodes,
                keys: &t.keys,
                origin: t.origin,
            };
            let mut costs: HashMap<bool, Result<f64, String>> = HashMap::new();
            for major in [false, true] {
                use ground_truth::scenario::InjectionKind as K;
                if (major && inj.kind == K::HostPageFaultMajor)
                    || (!major && inj.kind == K::HostPageFaultMinor)
                {
                    costs.insert(major, self.session.fault_cost(major));
                }
            }
            plan = Some(plan::plan(
                sc,
                inj,
                &tw,
                self.session.info.sms,
                seed,
                |major| {
                    costs
                        .remove(&major)
                        .unwrap_or_else(|| Err("no fault calibration".into()))
                },
            ));
        }
        self.session.prepare(sc, plan.as_ref())?;
        let mut run = self.execute(sc, plan.as_ref(), seed)?;
        // As the backend does: a deschedule that did not switch its victim out
        // for most of the requested time did not inject what the scenario says.
        for _ in 0..2 {
            let short = run
                .0
                .stalls
                .iter()
                .any(|s| s.switched_out_ns.is_some_and(|g| g < s.requested_ns / 2));
            if !short {
                break;
            }
            run = self.execute(sc, plan.as_ref(), seed)?;
        }
        let (stamped, cupti_out) = self.build(sc, &run, plan.as_ref(), true);
        let window = (run.0.origin, run.0.end);
        let clock = run.1.clock;
        let kernels = cupti_out
            .as_ref()
            .map(|c| kernel_deltas(&stamped, c))
            .unwrap_or_default();
        let part =
            |out: truth::Output, twin: Option<truth::Output>, quiet: Option<truth::Output>| Part {
                seed,
                repetition,
                out,
                twin,
                quiet,
                window,
                errors: run.0.errors.clone(),
                host: None,
            };
        let mut stats = Vec::new();
        let cupti = cupti_out.map(|c| {
            let p = part(c, twin.1.take(), quiet.1.take());
            guarded("cuda backend", || {
                self.session.finish_part(sc, p, &mut stats)
            })
        });
        let p = part(stamped, twin.0.take(), quiet.0.take());
        let bundle = guarded("workload", || self.session.finish_part(sc, p, &mut stats))
            .map(|b| as_stamped(b, &clock));
        Ok(Recorded {
            bundle,
            cupti,
            kernels,
            window,
            known: std::mem::take(&mut self.known),
            clock,
        })
    }
}

/// The manifest of a bundle whose truth and records are the workload's own
/// stamps (`finish_part` writes the CUPTI backend's), with the injected run's
/// clock offset.
fn as_stamped(mut b: Bundle, clock: &truth::ClockFit) -> Bundle {
    let (c, drift) = (&clock.before, clock.drift_ns());
    let m = &mut b.manifest;
    m.collectors = vec!["stamps".into()];
    m.cupti = format!(
        "none: truth from the executor's step log, %globaltimer and CUDA events; clock offset {} ns before the run, {drift:+} ns after it, interpolated (round trip {} ns, {} pings each)",
        c.offset_ns, c.round_trip_ns, c.pings
    );
    m.cupti_capabilities = None;
    if let Some(x) = &mut m.cross_check {
        x.clock_offset_ns = c.offset_ns;
    }
    let note = format!(
        "; truth without CUPTI (causalbench workload): kernels from %globaltimer, copies, memsets and stream waits from CUDA events, clock offset {} ns ({drift:+} ns over the run) measured by {} host-device pings before and after it",
        c.offset_ns, c.pings
    );
    for inj in &mut b.ground_truth.injections {
        if let Some(i) = inj.mechanism.find("; CUPTI vs %globaltimer") {
            inj.mechanism.truncate(i);
        }
        inj.mechanism.push_str(&note);
    }
    b
}

/// Every kernel of `log` its own stamps timed, in CLOCK_MONOTONIC (a graph's
/// nodes: every replay its log ring holds).
fn known_kernels(
    log: &exec::RunLog,
    clock: &truth::ClockFit,
) -> Vec<crate::collector::KnownKernel> {
    let mono = |g: Ns| clock.to_mono(g);
    let entry = |slot: u32, id: u64| {
        log.device_log
            .get(slot as usize)
            .filter(|e| e.is_written_for(id))
    };
    let mut out = Vec::new();
    for o in log.threads.iter().flat_map(|t| t.ops.iter()) {
        if let (exec::What::Kernel { .. }, Some(slot), Some(name)) = (&o.what, o.slot, &o.entry) {
            if let Some(e) = entry(slot, o.id) {
                out.push(crate::collector::KnownKernel {
                    name: name.clone(),
                    start: mono(e.start_ns),
                    end: mono(e.last_end_ns.max(e.end_ns)),
                });
            }
        }
    }
    for (gi, g) in log.graphs.iter().enumerate() {
        for (ni, name) in g.entries.iter().enumerate() {
            for slot in g.node_slots(ni) {
                if let Some(e) = entry(slot, exec::graph_op_id(gi, ni)) {
                    out.push(crate::collector::KnownKernel {
                        name: name.clone(),
                        start: mono(e.start_ns),
                        end: mono(e.last_end_ns.max(e.end_ns)),
                    });
                }
            }
        }
    }
    out
}

/// The kernels of two truths of one run (same step log, so the same nodes
/// in the same order): stamps − CUPTI, start and end.
fn kernel_deltas(stamped: &truth::Output, cupti: &truth::Output) -> Vec<KernelDelta> {
    let (a, b) = (&stamped.builder.truth.nodes, &cupti.builder.truth.nodes);
    a.iter()
        .zip(b)
        .filter(|(x, y)| {
            matches!(x.kind, NodeKind::Kernel | NodeKind::GraphNode)
                && x.kind == y.kind
                && x.name == y.name
                && !y.rids.is_empty()
        })
        .map(|(x, y)| KernelDelta {
            name: x.name.to_string(),
            start_ns: x.start as i64 - y.start as i64,
            end_ns: x.end as i64 - y.end as i64,
        })
        .collect()
}
