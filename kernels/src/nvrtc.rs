//! Finding and loading NVRTC without crashing.
//!
//! cudarc (feature `dynamic-loading`) `dlopen`s NVRTC by name on first use
//! and panics when it is missing. The names it tries for CUDA 13 include
//! `libnvrtc.so` and `libnvrtc.so.13`; the pip wheel `nvidia-cuda-nvrtc`
//! (13.0.x) ships `nvidia/cu13/lib/libnvrtc.so.13` and
//! `libnvrtc-builtins.so.13.0`, so putting that directory on
//! `LD_LIBRARY_PATH` is enough.
//!
//! Because `LD_LIBRARY_PATH` is read once at process start, this module also
//! looks in a few well-known directories itself (`$CAUSALBENCH_NVRTC_DIR`,
//! the directory `kernels/setup-nvrtc.sh` installs into, the CUDA toolkit's
//! lib directories). When it finds the library there it `dlopen`s the
//! builtins and `libnvrtc.so.13` by full path with `RTLD_GLOBAL`; the dynamic
//! loader then resolves cudarc's later `dlopen("libnvrtc.so.13")` to the
//! already-loaded object by its SONAME.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::KernelError;

/// Environment variable naming a directory that holds `libnvrtc.so.13`.
pub const NVRTC_DIR_ENV: &str = "CAUSALBENCH_NVRTC_DIR";

/// The library file cudarc resolves for CUDA 13 (SONAME of the wheel's library).
const NVRTC_SONAME: &str = "libnvrtc.so.13";

/// Directories searched, in order, when NVRTC is not loadable by name.
pub fn nvrtc_search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os(NVRTC_DIR_ENV) {
        dirs.push(PathBuf::from(d));
    }
    // Where kernels/setup-nvrtc.sh installs the wheel (keep in sync).
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    if let Some(c) = cache {
        dirs.push(c.join("causalbench/nvrtc/nvidia/cu13/lib"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/targets/x86_64-linux/lib"));
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs.push(PathBuf::from("/usr/lib/x86_64-linux-gnu"));
    dirs
}

fn present_by_name() -> bool {
    // SAFETY: only dlopen/dlclose of candidate names; no symbol is called.
    std::panic::catch_unwind(|| unsafe { cudarc::nvrtc::sys::is_culib_present() }).unwrap_or(false)
}

fn dlopen_global(path: &Path) -> Result<(), String> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{} contains a NUL byte", path.display()))?;
    // SAFETY: loading a shared library runs its initialisers; NVRTC's are
    // benign. The handle is intentionally leaked so the library stays loaded.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        // SAFETY: dlerror returns a thread-local C string or null.
        let msg = unsafe {
            let e = libc::dlerror();
            if e.is_null() {
                "unknown dlopen error".to_string()
            } else {
                std::ffi::CStr::from_ptr(e).to_string_lossy().into_owned()
            }
        };
        return Err(format!("dlopen({}): {msg}", path.display()));
    }
    Ok(())
}

fn preload_from(dir: &Path) -> Result<(), String> {
    let lib = dir.join(NVRTC_SONAME);
    if !lib.exists() {
        return Err(format!("{} does not exist", lib.display()));
    }
    // The builtins library is dlopen'ed by NVRTC itself by SONAME
    // (libnvrtc-builtins.so.13.N); preload it so that lookup succeeds.
    if let Ok(rd) = std::fs::read_dir(dir) {
        let mut builtins: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("libnvrtc-builtins.so.13"))
            })
            .collect();
        builtins.sort();
        for b in builtins {
            dlopen_global(&b)?;
        }
    }
    dlopen_global(&lib)
}

fn find_and_load() -> Result<(), String> {
    if present_by_name() {
        return Ok(());
    }
    let mut tried = Vec::new();
    for dir in nvrtc_search_dirs() {
        match preload_from(&dir) {
            Ok(()) if present_by_name() => return Ok(()),
            Ok(()) => tried.push(format!(
                "{}: loaded but cudarc still cannot open {NVRTC_SONAME}",
                dir.display()
            )),
            Err(e) => tried.push(e),
        }
    }
    Err(format!(
        "not found on the loader path (LD_LIBRARY_PATH={:?}) nor in: {}",
        std::env::var("LD_LIBRARY_PATH").unwrap_or_default(),
        tried.join("; ")
    ))
}

/// Make sure NVRTC can be loaded (searching the well-known directories once
/// per process). Never panics.
pub fn ensure_nvrtc() -> Result<(), KernelError> {
    static STATE: OnceLock<Result<(), String>> = OnceLock::new();
    STATE
        .get_or_init(find_and_load)
        .clone()
        .map_err(|detail| KernelError::NvrtcUnavailable { detail })
}
