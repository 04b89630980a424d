//! The backend seam: how a scenario is executed.

use ground_truth::{Bundle, Scenario};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("scenario `{0}` cannot run: {1}")]
    Invalid(String, String),
    #[error("backend `{0}` is not available here: {1}")]
    Unavailable(&'static str, String),
}

/// Executes scenarios and records bundles.
pub trait Backend: Send + Sync {
    fn name(&self) -> &'static str;
    /// Records one repetition of `scenario` (its no-injection twin is run too, so
    /// lateness is measured, not assumed).
    fn record(&self, scenario: &Scenario, repetition: u32) -> Result<Bundle, RecordError>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Auto,
    Cuda,
    Sim,
}

/// Is an NVIDIA GPU with a driver present on this machine?
pub fn gpu_present() -> bool {
    std::path::Path::new("/dev/nvidiactl").exists() || std::path::Path::new("/dev/nvidia0").exists()
}

/// Resolves `auto` and returns the backend, or says why it can't.
pub fn select_backend(kind: BackendKind) -> Result<Box<dyn Backend>, RecordError> {
    match kind {
        BackendKind::Sim => Ok(Box::new(crate::sim::SimBackend::default())),
        BackendKind::Auto if !gpu_present() => Ok(Box::new(crate::sim::SimBackend::default())),
        BackendKind::Auto | BackendKind::Cuda => Err(RecordError::Unavailable(
            "cuda",
            if gpu_present() {
                "this build has no CUDA backend yet; use --backend sim".into()
            } else {
                "no NVIDIA GPU or driver found (/dev/nvidiactl is absent)".into()
            },
        )),
    }
}
