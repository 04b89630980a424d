//! Helpers shared by the NVRTC compile tests.

use kernels::ensure_nvrtc;

/// Whether NVRTC can be loaded. Without it the test is skipped with a message,
/// unless `CAUSALBENCH_REQUIRE_NVRTC=1`, in which case that is a failure (CI
/// sets it after running `kernels/setup-nvrtc.sh`).
pub fn nvrtc_or_skip(test: &str) -> bool {
    match ensure_nvrtc() {
        Ok(()) => true,
        Err(e) => {
            if std::env::var("CAUSALBENCH_REQUIRE_NVRTC").as_deref() == Ok("1") {
                panic!("CAUSALBENCH_REQUIRE_NVRTC=1 but {e}");
            }
            eprintln!("SKIP {test}: {e}");
            false
        }
    }
}
