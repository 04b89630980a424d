//! The backend seam: how a scenario is executed.

use ground_truth::{Bundle, Scenario};

#[derive(Debug, Clone, thiserror::Error)]
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

    /// Records every (scenario, repetition), in order. The default records them
    /// one by one; a backend whose runs share an expensive setup records them
    /// under one.
    fn record_many(&self, items: &[(Scenario, u32)]) -> Vec<Result<Bundle, RecordError>> {
        items
            .iter()
            .map(|(scenario, repetition)| self.record(scenario, *repetition))
            .collect()
    }

    /// Whether [`Backend::record_many`] costs much less than one `record` per
    /// item, so that a suite is best recorded batch by batch rather than bundle
    /// by bundle in parallel workers.
    fn records_in_batches(&self) -> bool {
        false
    }
}

/// Rejects a scenario that cannot run, naming its first problem (every
/// backend checks before executing anything).
pub fn check(scenario: &Scenario) -> Result<(), RecordError> {
    match scenario.check().first() {
        Some(p) => Err(RecordError::Invalid(
            scenario.name.clone(),
            format!("{}: {}", p.path, p.message),
        )),
        None => Ok(()),
    }
}

/// Every backend: `Auto` is the GPU where it loads, else the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Auto,
    Cuda,
    Sim,
    /// The PyTorch track's backend (docs/torch-track.md): never chosen by
    /// `Auto`; its executor starts with the first run, which says
    /// [`RecordError::Unavailable`] where python3 with torch cannot run it.
    Torch,
}

/// Is an NVIDIA GPU with a driver present on this machine?
pub fn gpu_present() -> bool {
    std::path::Path::new("/dev/nvidiactl").exists() || std::path::Path::new("/dev/nvidia0").exists()
}

/// Resolves `auto` and returns the backend, or says why it can't. `auto` is
/// the GPU when one is present and the CUDA backend loads (driver, CUPTI,
/// NVRTC), else the simulator.
pub fn select_backend(kind: BackendKind) -> Result<Box<dyn Backend>, RecordError> {
    match kind {
        BackendKind::Sim => Ok(Box::new(crate::sim::SimBackend::default())),
        BackendKind::Torch => Ok(Box::new(crate::torch::TorchBackend::new(None))),
        BackendKind::Cuda => Ok(Box::new(crate::cuda::CudaBackend::new()?)),
        BackendKind::Auto => match crate::cuda::CudaBackend::new() {
            Ok(b) => Ok(Box::new(b)),
            Err(e) => {
                if gpu_present() {
                    eprintln!("causalbench: {e}; using the simulator");
                }
                Ok(Box::new(crate::sim::SimBackend::default()))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each backend that needs no GPU to be made is selected by its kind.
    #[test]
    fn every_backend_is_selected_by_its_kind() {
        for (kind, name) in [(BackendKind::Sim, "sim"), (BackendKind::Torch, "torch")] {
            let backend = select_backend(kind).expect("needs no GPU to be made");
            assert_eq!(backend.name(), name);
        }
    }
}
