//! What attaching a new question costs on the compiling path, stage by stage
//! (megakernel/README.md, "Compiled monitors"): verify (the gate), translate
//! (eBPF → CUDA C), NVRTC (CUDA C → relocatable PTX), the driver's compile
//! and link of that PTX beside the megakernel's cubin, the module load, and
//! the swap (the slot's bank and arena written, the generation advanced; the
//! next launch runs the linked kernel). Off the GPU only the host stages
//! (verify, translate, NVRTC) can be measured.

use super::device::{resources, GpuPrograms};
use super::perturbation::{attachment, median};
use super::translate::translate;
use serde_json::{json, Value};
use std::time::Instant;

/// The programs a new question attaches: every query's, the diagnosis programs and the probe.
pub fn programs() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = super::queries::QUERIES.iter().map(|q| q.program).collect();
    v.extend(super::diagnosis::ALL.iter().map(|d| d.program));
    v.push("task_count");
    v
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Per program, `reps` fresh attaches (no cache): each stage's median, the
/// first attach's total, and the linked kernel's registers and local memory.
pub fn on_gpu(g: &mut GpuPrograms, reps: u32) -> Result<Value, String> {
    g.compiled.as_ref().map_err(|e| e.clone())?;
    let mut out = Vec::new();
    let mut pending = Vec::new();
    for name in programs() {
        let mut st: [Vec<u64>; 6] = Default::default();
        let mut first_total = 0;
        let mut res = (0, 0, 0);
        let mut sizes = (0, 0);
        for rep in 0..reps.max(1) {
            let (att, _, verify_ns) = attachment(name)?;
            let l = g.compiled.as_ref().map_err(|e| e.clone())?.attach(&att)?;
            res = resources(&l.func)?;
            sizes = (l.c_bytes, l.ptx_bytes);
            let t = l.times;
            st[0].push(verify_ns);
            st[1].push(t.translate_ns);
            st[2].push(t.nvrtc_ns);
            st[3].push(t.link_ns);
            st[4].push(t.load_ns);
            pending.push((name, att, rep));
            if rep == 0 {
                first_total = verify_ns + t.translate_ns + t.nvrtc_ns + t.link_ns + t.load_ns;
            }
        }
        // The swap: the program's bank and zeroed arena written, the generation advanced.
        for (_, att, _) in pending.drain(..) {
            st[5].push(g.swap_ns(&att)?);
        }
        let m: Vec<u64> = st.iter().map(|v| median(v.clone())).collect();
        out.push(json!({
            "program": name,
            "verify_ms": ms(m[0]), "translate_ms": ms(m[1]), "nvrtc_ms": ms(m[2]),
            "driver_link_ms": ms(m[3]), "load_ms": ms(m[4]), "swap_ms": ms(m[5]),
            "total_ms": ms(m.iter().sum()),
            "first_attach_ms": ms(first_total + m[5]),
            "c_bytes": sizes.0, "ptx_bytes": sizes.1,
            "linked_kernel": {"regs": res.0, "shared_bytes": res.1, "local_bytes": res.2},
        }));
    }
    let k = g.compiled.as_ref().map_err(|e| e.clone())?;
    Ok(json!({
        "megakernel_compiled_hooks_build_ms": ms(k.compile_ns),
        "arch": k.arch,
        "programs": out,
    }))
}

/// Per program, the host stages only (verify, translate, NVRTC), one attach each.
pub fn on_host() -> Result<Value, String> {
    let mut out = Vec::new();
    for name in programs() {
        let (att, _, verify_ns) = attachment(name)?;
        let t = Instant::now();
        let tr = translate(&att).map_err(|e| e.to_string())?;
        let translate_ns = t.elapsed().as_nanos() as u64;
        let t = Instant::now();
        let nvrtc = kernels::megakernel::compile_hook_ptx(&tr.source, None);
        let nvrtc_ns = t.elapsed().as_nanos() as u64;
        out.push(json!({
            "program": name,
            "verify_ms": ms(verify_ns), "translate_ms": ms(translate_ns),
            "nvrtc_ms": nvrtc.as_ref().ok().map(|_| ms(nvrtc_ns)),
            "nvrtc_error": nvrtc.err().map(|e| e.to_string()),
            "c_bytes": tr.source.len(),
        }));
    }
    Ok(
        json!({"programs": out, "note": "no GPU: the driver's link, the load and the swap are not measured"}),
    )
}
