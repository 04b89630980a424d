//! What the GPU-only subcommands (`corpus record`, `measure …`) share: opening
//! the CUDA backend with a message that says what the command needed, and
//! writing their JSON results atomically.

use crate::Failure;
use generator::cuda::CudaBackend;
use serde_json::Value;
use std::path::Path;

/// The CUDA backend, or a refusal (exit 2, [`Failure::unavailable`]) naming
/// the command that needs a GPU and why the backend is unavailable.
pub fn open(command: &str) -> Result<CudaBackend, Failure> {
    CudaBackend::new().map_err(|e| {
        Failure::unavailable(format!(
            "`{command}` needs a GPU: {e}; \
             without one, `causalbench run --backend sim` records on the simulator"
        ))
    })
}

/// Switches the eBPF host recorder on or off for the backend's runs.
pub fn host_recorder(be: &CudaBackend, on: bool) -> Result<(), Failure> {
    be.set_host_recorder(on).map_err(Failure::failed)
}

/// Writes `value` as pretty JSON to `path` atomically, creating its directory.
pub fn write_json(path: &Path, value: &Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value).expect("JSON values serialize");
    ground_truth::io::write_atomic(path, text.as_bytes())
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
}
