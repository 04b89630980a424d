//! The seam every backend implements and shares: the [`Backend`] trait, its
//! [`RecordError`], the [`check`] each backend runs before executing anything and the
//! host probe [`gpu_present`]. A file of its own, apart from the backends' selection
//! (`backend.rs`), because the backends and the recording path they call name it.

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

/// Is an NVIDIA GPU with a driver present on this machine?
pub fn gpu_present() -> bool {
    std::path::Path::new("/dev/nvidiactl").exists() || std::path::Path::new("/dev/nvidia0").exists()
}
