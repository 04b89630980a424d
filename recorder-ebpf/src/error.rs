use std::path::PathBuf;

/// Why the recorder could not start. Callers treat every variant as "continue
/// without host records": none of them is a bug in the caller.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// Not root and without CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN).
    #[error("eBPF recording needs root or CAP_BPF+CAP_PERFMON (or CAP_SYS_ADMIN); {detail}")]
    NotPrivileged { detail: String },

    /// The kernel exposes no BTF (CONFIG_DEBUG_INFO_BTF); tp_btf/fexit programs
    /// and CO-RE relocations need it.
    #[error("kernel BTF not found at {path}: eBPF recording needs a kernel built with CONFIG_DEBUG_INFO_BTF=y")]
    NoBtf { path: PathBuf },

    /// tracefs is not mounted, mounting it failed, and the kernel has no uprobe
    /// PMU (so uprobes would have to be created through tracefs).
    #[error("tracefs is not mounted at /sys/kernel/tracing and mounting it failed ({detail}); run `mount -t tracefs tracefs /sys/kernel/tracing` as root")]
    NoTracefs { detail: String },

    /// The target process does not exist (or /proc is not readable).
    #[error("target process {pid} not found: {detail}")]
    NoProcess { pid: u32, detail: String },

    /// The library to probe could not be found (not mapped by the target, not at
    /// the given path).
    #[error("library to probe not found: {detail}")]
    LibraryNotFound { detail: String },

    /// A function to probe is not a symbol of the library (exact names), or a
    /// pattern matched no function.
    #[error("symbol `{function}` not found in {}", library.display())]
    SymbolNotFound { function: String, library: PathBuf },

    /// Reading the library's symbols failed.
    #[error("cannot read symbols of {}: {detail}", library.display())]
    Symbols { library: PathBuf, detail: String },

    /// Invalid configuration (too many functions, bad argument index, ...).
    #[error("invalid recorder configuration: {0}")]
    Config(String),

    /// The crate was built without clang, so it carries no BPF programs.
    #[error("ebpf-recorder was built without clang, so it has no BPF programs; install clang, libelf-dev and zlib1g-dev and rebuild")]
    NotBuilt,

    /// libbpf failed to open or load the BPF object (verifier rejection, missing
    /// kernel feature).
    #[error("loading the BPF programs failed: {detail}")]
    Load { detail: String },

    /// Attaching one program failed.
    #[error("attaching {what} failed: {detail}")]
    Attach { what: String, detail: String },

    /// The background thread could not be started or died during start-up.
    #[error("recorder thread failed: {0}")]
    Thread(String),
}

impl RecorderError {
    /// True for the variants that mean "this machine cannot record host events"
    /// (as opposed to a wrong configuration): no privileges, no BTF, no tracefs,
    /// no BPF programs built in.
    pub fn is_environment(&self) -> bool {
        matches!(
            self,
            RecorderError::NotPrivileged { .. }
                | RecorderError::NoBtf { .. }
                | RecorderError::NoTracefs { .. }
                | RecorderError::NotBuilt
        )
    }
}
