//! CUPTI PC sampling of the GPU megakernel, attributed by the code region
//! (task-class body, the shared wait loop, the scheduler's idle loop) each
//! sampled PC lies in.

use super::GpuExecutor;
use crate::schedule::Schedule;
use ground_truth::megakernel::{MonitorConfig, PcSampling, CLASSES};

use cudarc::cupti::sys as cs;

/// PC records each output buffer holds. Buffers outlive every CUPTI call that can
/// write into them.
const MAX_PCS: usize = 8192;

fn ok(r: cs::CUptiResult) -> bool {
    r == cs::CUptiResult::CUPTI_SUCCESS
}

/// `n` launches' results when the collection failed: why, every CUPTI step so far.
fn unavailable(steps: &[String], n: usize) -> Vec<(PcSampling, u64)> {
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
}

impl GpuExecutor {
    /// CUPTI PC sampling of the megakernel, one launch per schedule: enable,
    /// select every stall reason, start/stop control, parsed output into a
    /// buffer of `max_pcs` PC records; per launch start → launch → stop, then
    /// attribute each PC record by the function it is in (`mk_body_<class>`,
    /// `mk_wait_loop`, `mk_idle_*`). Every CUPTI result is reported; the first
    /// failure ends the collection (`available: false` with the reason).
    pub fn pc_sampling_collect(&mut self, schedules: &[&Schedule]) -> Vec<(PcSampling, u64)> {
        let ctx = self.ctx.cu_ctx();
        let mut steps: Vec<String> = Vec::new();
        let n = schedules.len();
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
            // Kept until sampling is disabled: CUPTI is given pointers into them.
            let mut reasons = StallReasons::query(ctx, &mut steps)?;
            let nreasons = reasons.index.len();
            let mut buf = PcBuffer::new(MAX_PCS, nreasons);
            // A second buffer for cuptiPCSamplingGetData (what the range left over).
            let mut buf2 = PcBuffer::new(MAX_PCS, nreasons);
            let mut cfg = sampling_configuration(&mut reasons.index, &mut buf);
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
                out.push(
                    self.sample_one_launch(ctx, s, &mut buf, &mut buf2, nreasons, &mut steps)?,
                );
            }
            let mut dp = cs::CUpti_PCSamplingDisableParams {
                size: std::mem::size_of::<cs::CUpti_PCSamplingDisableParams>(),
                pPriv: std::ptr::null_mut(),
                ctx: ctx as _,
            };
            let r = cs::cuptiPCSamplingDisable(&mut dp);
            steps.push(format!("disable: {r:?}"));
            drop(reasons.names_buf);
            Ok(out)
        }));
        match res {
            Ok(Ok(v)) => v,
            Ok(Err(())) => unavailable(&steps, n),
            Err(p) => {
                steps.push(format!(
                    "CUPTI PC sampling could not be called: {}",
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                ));
                unavailable(&steps, n)
            }
        }
    }

    /// One launch of `s` between PC-sampling start and stop, its samples read from
    /// `buf` (filled during the range) and `buf2` (what GetData returns after it) and
    /// attributed by code region; `buf`'s counts are reset for the next launch.
    unsafe fn sample_one_launch(
        &mut self,
        ctx: cudarc::driver::sys::CUcontext,
        s: &Schedule,
        buf: &mut PcBuffer,
        buf2: &mut PcBuffer,
        nreasons: usize,
        steps: &mut Vec<String>,
    ) -> Result<(PcSampling, u64), ()> {
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
        let filled = buf.data.totalNumPcs.min(MAX_PCS);
        let filled2 = if ok(get) {
            buf2.data.totalNumPcs.min(MAX_PCS)
        } else {
            0
        };
        let regions = RegionSamples::of(
            buf.pcs[..filled].iter().chain(buf2.pcs[..filled2].iter()),
            nreasons,
        );
        let sampling = PcSampling {
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
                regions.other
            ),
            class_samples: regions.class_samples,
            wait_samples: regions.wait,
            idle_samples: regions.idle,
        };
        // Reset the buffer's counts for the next launch.
        buf.data.totalNumPcs = 0;
        buf.data.remainingNumPcs = 0;
        buf.data.totalSamples = 0;
        buf.data.droppedSamples = 0;
        Ok((sampling, run_ns))
    }
}

/// The device's stall reasons: their indices and the buffers CUPTI wrote their names
/// into.
struct StallReasons {
    index: Vec<u32>,
    names_buf: Vec<Vec<std::ffi::c_char>>,
    /// Pointers into `names_buf`, as CUPTI takes them.
    _names: Vec<*mut std::ffi::c_char>,
}

impl StallReasons {
    /// How many stall reasons the device has, then their indices and names; a failure,
    /// or none, ends the collection.
    unsafe fn query(
        ctx: cudarc::driver::sys::CUcontext,
        steps: &mut Vec<String>,
    ) -> Result<StallReasons, ()> {
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
        Ok(StallReasons {
            index,
            names_buf,
            _names: names,
        })
    }
}

/// The configuration: every stall reason of `index`, period 2^12 cycles, start/stop
/// control, parsed output into `buf`. CUPTI is given pointers into `index` and `buf`.
fn sampling_configuration(
    index: &mut [u32],
    buf: &mut PcBuffer,
) -> Vec<cs::CUpti_PCSamplingConfigurationInfo> {
    let attr = |t: cs::CUpti_PCSamplingConfigurationAttributeType,
                d: cs::CUpti_PCSamplingConfigurationInfo__bindgen_ty_1| {
        cs::CUpti_PCSamplingConfigurationInfo {
            attributeType: t,
            attributeStatus: cs::CUptiResult::CUPTI_SUCCESS,
            attributeData: d,
        }
    };
    type A = cs::CUpti_PCSamplingConfigurationAttributeType;
    type U = cs::CUpti_PCSamplingConfigurationInfo__bindgen_ty_1;
    vec![
        attr(
            A::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON,
            U {
                stallReasonData:
                    cs::CUpti_PCSamplingConfigurationInfo__bindgen_ty_1__bindgen_ty_3 {
                        stallReasonCount: index.len(),
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
    ]
}

/// Samples by the code region their PC lies in: a task class's body, the shared
/// wait loop, the scheduler's idle loop, or other scheduler code.
struct RegionSamples {
    class_samples: Vec<u64>,
    wait: u64,
    idle: u64,
    other: u64,
}

impl RegionSamples {
    /// Each PC record's samples (over its first `nreasons` stall reasons), attributed
    /// by the name of the function it is in.
    unsafe fn of<'p>(
        pcs: impl Iterator<Item = &'p cs::CUpti_PCSamplingPCData>,
        nreasons: usize,
    ) -> RegionSamples {
        let mut r = RegionSamples {
            class_samples: vec![0u64; CLASSES.len()],
            wait: 0,
            idle: 0,
            other: 0,
        };
        for pc in pcs {
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
                r.class_samples[c] += samples;
            } else if name.contains("mk_wait_loop") {
                r.wait += samples;
            } else if name.contains("mk_idle_") {
                r.idle += samples;
            } else {
                r.other += samples;
            }
        }
        r
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
