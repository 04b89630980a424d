//! Per-call-site launch trampolines, so the launching stack of a kernel says
//! which call site of the scenario launched it.
//!
//! A real application launches the same kernel from different places in its
//! code, and a host collector tells them apart by the return address of the
//! driver call. The generator launches every kernel from one function, so
//! without help every stack would end in the same frame. Each distinct
//! `call_site` of a scenario is therefore given its own trampoline — a
//! separate compiled function that makes the driver call — and the
//! trampoline's code range is named after the call site in this process's
//! perf map (`/tmp/perf-<pid>.map`), the convention by which Python's perf
//! trampolines and JITs name their code for native profilers. The eBPF
//! recorder reads the map when it symbolizes, so the call-site frame of a
//! recorded stack is the scenario's label, exactly as the simulator writes it.
//!
//! Call sites are registered while a scenario is prepared, never during the
//! recorded run (finding a function's extent reads the executable's symbol
//! table or, when it is stripped, its unwind tables, which `strip` keeps: see
//! `ebpf_recorder::perf_map::own_function_extent`). A stripped executable
//! therefore keeps its call sites. A call site that could not be registered
//! (more than [`TRAMPOLINES`] distinct sites, or no symbol and no unwind entry
//! for its trampoline) launches through the common path and its stack shows
//! the generic launch frame.

use super::driver::{launch, Args, Func, LaunchVia};
use cudarc::driver::sys::{self, CUresult};
use ebpf_recorder::perf_map::{own_function_extent, PerfMapWriter};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

type Trampoline = unsafe fn(&Func, u32, u32, sys::CUstream, &mut Args, LaunchVia) -> CUresult;

macro_rules! trampolines {
    ($($n:literal => $name:ident),* $(,)?) => {
        $(
            #[inline(never)]
            unsafe fn $name(
                func: &Func,
                grid: u32,
                block: u32,
                stream: sys::CUstream,
                args: &mut Args,
                via: LaunchVia,
            ) -> CUresult {
                // A constant of its own keeps LLVM's function merging from
                // folding the trampolines into one address.
                std::hint::black_box($n);
                // SAFETY: the caller's contract is `launch`'s.
                let r = unsafe { launch(func, grid, block, stream, args, via) };
                // Used after the call, so the driver call is not a tail call
                // and its return address stays inside this trampoline.
                std::hint::black_box(r)
            }
        )*
        const TRAMPOLINES_TABLE: &[Trampoline] = &[$($name),*];
    };
}

trampolines!(
    0 => site_00,
    1 => site_01,
    2 => site_02,
    3 => site_03,
    4 => site_04,
    5 => site_05,
    6 => site_06,
    7 => site_07,
    8 => site_08,
    9 => site_09,
    10 => site_10,
    11 => site_11,
    12 => site_12,
    13 => site_13,
    14 => site_14,
    15 => site_15,
    16 => site_16,
    17 => site_17,
    18 => site_18,
    19 => site_19,
    20 => site_20,
    21 => site_21,
    22 => site_22,
    23 => site_23,
    24 => site_24,
    25 => site_25,
    26 => site_26,
    27 => site_27,
    28 => site_28,
    29 => site_29,
    30 => site_30,
    31 => site_31,
    32 => site_32,
    33 => site_33,
    34 => site_34,
    35 => site_35,
    36 => site_36,
    37 => site_37,
    38 => site_38,
    39 => site_39,
    40 => site_40,
    41 => site_41,
    42 => site_42,
    43 => site_43,
    44 => site_44,
    45 => site_45,
    46 => site_46,
    47 => site_47,
    48 => site_48,
    49 => site_49,
    50 => site_50,
    51 => site_51,
    52 => site_52,
    53 => site_53,
    54 => site_54,
    55 => site_55,
    56 => site_56,
    57 => site_57,
    58 => site_58,
    59 => site_59,
    60 => site_60,
    61 => site_61,
    62 => site_62,
    63 => site_63
);

/// How many distinct call sites get a trampoline of their own.
pub const TRAMPOLINES: usize = TRAMPOLINES_TABLE.len();

#[derive(Default)]
struct Registry {
    by_label: HashMap<Arc<str>, usize>,
    perf_map: Option<PerfMapWriter>,
    warned: bool,
}

fn registry() -> &'static RwLock<Registry> {
    static REGISTRY: OnceLock<RwLock<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// Gives `label` a trampoline named after it in the perf map (idempotent).
/// Returns a warning when it cannot; launches from `label` then use the
/// common path.
pub fn register(label: &str) -> Result<(), String> {
    static SERIAL: Mutex<()> = Mutex::new(());
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if registry().read().unwrap().by_label.contains_key(label) {
        return Ok(());
    }
    let mut reg = registry().write().unwrap();
    let i = reg.by_label.len();
    let fail = |reg: &mut Registry, why: String| {
        if std::mem::replace(&mut reg.warned, true) {
            Ok(())
        } else {
            Err(format!(
                "call site `{label}` launches through the common path: {why}"
            ))
        }
    };
    let Some(&t) = TRAMPOLINES_TABLE.get(i) else {
        return fail(
            &mut reg,
            format!("more than {TRAMPOLINES} distinct call sites"),
        );
    };
    let Some((start, size)) = own_function_extent(t as *const () as u64) else {
        return fail(
            &mut reg,
            "the executable has no symbol or unwind entry for its trampoline".into(),
        );
    };
    if reg.perf_map.is_none() {
        match PerfMapWriter::create() {
            Ok(w) => reg.perf_map = Some(w),
            Err(e) => return fail(&mut reg, format!("writing the perf map: {e}")),
        }
    }
    if let Err(e) = reg
        .perf_map
        .as_mut()
        .unwrap()
        .name_range(start, size, label)
    {
        return fail(&mut reg, format!("writing the perf map: {e}"));
    }
    reg.by_label.insert(Arc::from(label), i);
    Ok(())
}

/// The launch function for a call site: its trampoline when registered.
pub fn launcher(label: Option<&str>) -> Trampoline {
    label
        .and_then(|l| registry().read().unwrap().by_label.get(l).copied())
        .map(|i| TRAMPOLINES_TABLE[i])
        .unwrap_or(launch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trampolines_are_distinct_functions() {
        let mut addrs: Vec<usize> = TRAMPOLINES_TABLE
            .iter()
            .map(|&t| t as *const () as usize)
            .collect();
        addrs.sort();
        addrs.dedup();
        assert_eq!(addrs.len(), TRAMPOLINES);
    }

    #[test]
    fn registered_sites_are_named_in_the_perf_map() {
        if let Err(e) = register("model.py:attention:41") {
            eprintln!("skipping: {e}");
            return;
        }
        register("model.py:attention:41").unwrap();
        let t = launcher(Some("model.py:attention:41")) as *const () as u64;
        let is_trampoline = |a: u64| {
            TRAMPOLINES_TABLE
                .iter()
                .any(|&x| x as *const () as u64 == a)
        };
        assert!(is_trampoline(t));
        assert!(!is_trampoline(
            launcher(Some("never registered")) as *const () as u64
        ));
        let map =
            std::fs::read_to_string(ebpf_recorder::perf_map::perf_map_path(std::process::id()))
                .unwrap();
        let line = map
            .lines()
            .find(|l| l.ends_with(" model.py:attention:41"))
            .expect("perf map line");
        let start = u64::from_str_radix(line.split(' ').next().unwrap(), 16).unwrap();
        assert_eq!(start, t);
    }
}
