//! NVRTC compilation with an on-disk PTX cache, shared by the kernels and the
//! megakernel: a warm `record --backend cuda` loads PTX instead of compiling.
//!
//! The cache key is everything that determines the PTX: the source, its file
//! name, the compile options (which carry the architecture) and the NVRTC
//! version. Entries are written atomically and only for successful compiles, so
//! a compile error is never hidden; an unreadable or damaged entry is compiled
//! again. `CAUSALBENCH_PTX_CACHE` names the directory (`off` disables the
//! cache); by default it is `$XDG_CACHE_HOME/causalbench/ptx`, else
//! `~/.cache/causalbench/ptx`.

use crate::{describe_compile_error, ensure_nvrtc, panic_text, KernelError};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// The environment variable naming the cache directory (`off`: no cache).
pub const PTX_CACHE_ENV: &str = "CAUSALBENCH_PTX_CACHE";

/// The cache directory, or `None` when the cache is off or no home is known.
pub fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os(PTX_CACHE_ENV) {
        Some(v) if v == "off" => None,
        Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|d| d.join("causalbench").join("ptx")),
    }
}

/// The loaded NVRTC's version, as part of the key (`None` if it cannot say).
fn nvrtc_version() -> Option<(i32, i32)> {
    std::panic::catch_unwind(|| {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two valid out pointers.
        let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        (r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS).then_some((major, minor))
    })
    .ok()
    .flatten()
}

/// The cache key of one compile.
pub fn cache_key(
    source: &str,
    name: &str,
    options: &[String],
    nvrtc: Option<(i32, i32)>,
) -> String {
    let mut h = Sha256::new();
    for part in [source, name, &options.join("\u{1f}"), &format!("{nvrtc:?}")] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// What a cache entry must look like to be used: PTX text NVRTC wrote.
fn looks_like_ptx(text: &str) -> bool {
    text.contains(".version") && text.contains(".target")
}

/// Compiles `source` (named `name`) with `options` for `arch`, or returns the
/// cached PTX of the same compile.
pub fn compile(
    source: &str,
    name: &str,
    options: Vec<String>,
    arch: &str,
) -> Result<String, KernelError> {
    ensure_nvrtc()?;
    let entry = cache_dir().map(|d| {
        let key = cache_key(source, name, &options, nvrtc_version());
        d.join(format!("{key}.ptx"))
    });
    if let Some(text) = entry
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .filter(|t| looks_like_ptx(t))
    {
        return Ok(text);
    }
    let ptx = compile_uncached(source, name, options, arch)?;
    if let Some(path) = &entry {
        // A cache that cannot be written is only slower: never an error.
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = ground_truth::io::write_atomic(path, ptx.as_bytes());
    }
    Ok(ptx)
}

fn compile_uncached(
    source: &str,
    name: &str,
    options: Vec<String>,
    arch: &str,
) -> Result<String, KernelError> {
    let opts = cudarc::nvrtc::CompileOptions {
        options,
        name: Some(name.to_string()),
        ..Default::default()
    };
    // cudarc panics when a symbol is missing from the loaded library; never
    // let that cross our API.
    let res = std::panic::catch_unwind(|| cudarc::nvrtc::compile_ptx_with_opts(source, opts));
    match res {
        Ok(Ok(ptx)) => {
            std::panic::catch_unwind(|| ptx.to_src()).map_err(|p| KernelError::Compile {
                arch: arch.to_string(),
                detail: format!("PTX is not valid UTF-8: {}", panic_text(&p)),
            })
        }
        Ok(Err(e)) => Err(KernelError::Compile {
            arch: arch.to_string(),
            detail: describe_compile_error(&e),
        }),
        Err(p) => Err(KernelError::NvrtcUnavailable {
            detail: panic_text(&p),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::cache_key;

    #[test]
    fn every_input_of_the_compile_changes_the_key() {
        let opts = |arch: &str| vec![format!("--gpu-architecture={arch}")];
        let base = cache_key("src", "a.cu", &opts("compute_90"), Some((13, 0)));
        assert_eq!(
            base,
            cache_key("src", "a.cu", &opts("compute_90"), Some((13, 0)))
        );
        for other in [
            cache_key("src2", "a.cu", &opts("compute_90"), Some((13, 0))),
            cache_key("src", "b.cu", &opts("compute_90"), Some((13, 0))),
            cache_key("src", "a.cu", &opts("compute_80"), Some((13, 0))),
            cache_key("src", "a.cu", &opts("compute_90"), Some((12, 8))),
            cache_key("src", "a.cu", &opts("compute_90"), None),
        ] {
            assert_ne!(base, other);
        }
        // Parts are length-prefixed: moving text between them changes the key.
        assert_ne!(
            cache_key("ab", "c", &[], None),
            cache_key("a", "bc", &[], None)
        );
    }
}
