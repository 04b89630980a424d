//! Compiles every kernel to PTX with NVRTC (no GPU needed).
//!
//! Skips with a message when NVRTC cannot be loaded, unless
//! `CAUSALBENCH_REQUIRE_NVRTC=1`, in which case that is a failure (CI sets it
//! after running `kernels/setup-nvrtc.sh`).

mod common;

use common::nvrtc_or_skip;
use kernels::{compile_ptx, Kernel, KernelError};

#[test]
fn every_kernel_compiles_to_ptx_for_hopper() {
    if !nvrtc_or_skip("every_kernel_compiles_to_ptx_for_hopper") {
        return;
    }
    let ptx = compile_ptx(None).expect("NVRTC compiles the causalbench kernels");
    assert!(
        ptx.contains(".target sm_90"),
        "PTX targets sm_90:\n{}",
        &ptx[..ptx.len().min(800)]
    );
    for k in Kernel::ALL {
        let entry = format!(".entry {}(", k.entry_point());
        assert!(ptx.contains(&entry), "{entry} missing from the PTX");
    }
    // The clock and SM id really are read through inline PTX.
    assert!(ptx.contains("%globaltimer"));
    assert!(ptx.contains("%smid"));
    // The hog's dynamic shared memory is declared.
    assert!(ptx.contains("cb_hog_smem"));
    eprintln!("compiled {} bytes of PTX for compute_90", ptx.len());
}

#[test]
fn compiles_for_other_architectures() {
    if !nvrtc_or_skip("compiles_for_other_architectures") {
        return;
    }
    for arch in ["compute_80", "sm_90"] {
        let ptx = compile_ptx(Some(arch)).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(ptx.contains(".entry cb_spin("), "{arch}");
    }
}

#[test]
fn a_bad_architecture_is_a_compile_error_not_a_panic() {
    if !nvrtc_or_skip("a_bad_architecture_is_a_compile_error_not_a_panic") {
        return;
    }
    match compile_ptx(Some("compute_1")) {
        Err(KernelError::Compile { arch, detail }) => {
            assert_eq!(arch, "compute_1");
            assert!(!detail.is_empty());
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
}
