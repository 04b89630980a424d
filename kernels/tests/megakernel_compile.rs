//! Compiles the persistent megakernel to PTX with NVRTC (no GPU needed).
//! Skips with a message without NVRTC unless `CAUSALBENCH_REQUIRE_NVRTC=1`.

mod common;

use common::nvrtc_or_skip;
use kernels::megakernel;

#[test]
fn megakernel_compiles_to_ptx_for_hopper() {
    if !nvrtc_or_skip("megakernel_compiles_to_ptx_for_hopper") {
        return;
    }
    let ptx = megakernel::compile_ptx(None).unwrap_or_else(|e| panic!("{e}"));
    assert!(ptx.contains(".target sm_90"));
    assert!(ptx.contains(&format!(".entry {}(", megakernel::ENTRY)));
    // 64-bit device clock for every hook timestamp.
    assert!(ptx.contains("%globaltimer"));
    // Ring reservations and coverage counters are atomics.
    assert!(
        ptx.contains("atom.global.add.u32")
            || ptx.contains("atom.add.u32")
            || ptx.contains("red.global.add")
    );
    // Each class body, the wait loop and the idle loop are separate functions
    // (a PC sample names the function it hit).
    for f in [
        "mk_body_attention",
        "mk_body_gemm",
        "mk_body_communication",
        "mk_body_sampling",
        "mk_wait_loop",
        "mk_idle_pop",
        "mk_idle_hold",
    ] {
        assert!(
            ptx.lines().any(|l| l.starts_with(".func") && l.contains(f)),
            "{f} is not its own function"
        );
    }
    eprintln!("megakernel: {} bytes of PTX", ptx.len());
}

#[test]
fn megakernel_compiles_for_ampere_too() {
    if !nvrtc_or_skip("megakernel_compiles_for_ampere_too") {
        return;
    }
    let ptx = megakernel::compile_ptx(Some("compute_80")).unwrap_or_else(|e| panic!("{e}"));
    assert!(ptx.contains(".entry mk_persistent("));
}

#[test]
fn megakernel_with_ebpf_hooks_compiles_to_ptx() {
    if !nvrtc_or_skip("megakernel_with_ebpf_hooks_compiles_to_ptx") {
        return;
    }
    let ptx = megakernel::compile_ptx_with_hooks(None).unwrap_or_else(|e| panic!("{e}"));
    assert!(ptx.contains(&format!(".entry {}(", megakernel::ENTRY)));
    // The interpreter is its own code, reached from the hooks.
    assert!(ptx.contains("mk_bpf_run_hook"), "no interpreter in the PTX");
    let plain = megakernel::compile_ptx(None).unwrap_or_else(|e| panic!("{e}"));
    assert!(!plain.contains("mk_bpf_run_hook"));
    eprintln!(
        "megakernel: {} bytes of PTX with the eBPF hooks, {} without",
        ptx.len(),
        plain.len()
    );
}
