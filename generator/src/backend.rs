//! The backend seam: how a scenario is executed.
//!
//! What every backend implements and shares ([`Backend`], [`RecordError`], [`check`],
//! [`gpu_present`]) is in `seam`, a file of its own, so that the backends, which this
//! module selects, and the recording path they call, name it without naming the
//! selection.

mod seam;

pub use seam::{check, gpu_present, Backend, RecordError};

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
