//! Finding the library to probe and the file offsets of its functions.

use crate::config::{glob_match, is_glob, HandleArg, RecorderConfig};
use crate::error::RecorderError;
use blazesym::inspect::{source::Elf, source::Source, Inspector};
use blazesym::SymType;
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// One uprobe target: a function of the probed library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTarget {
    /// Symbol name recorded as `Record::Uprobe::function`.
    pub function: String,
    /// File offset of the function's first instruction (what the uprobe is placed on).
    pub file_offset: u64,
    /// Which argument is recorded as the handle.
    pub handle: HandleArg,
}

/// The library (or executable) to probe and the targets resolved in it.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    pub library: Option<PathBuf>,
    pub targets: Vec<ProbeTarget>,
    pub warnings: Vec<String>,
}

/// The first mapping of the target whose file name starts with `libcuda.so`.
pub fn libcuda_in_maps(pid: u32) -> Option<PathBuf> {
    mapped_object(pid, |name| name.starts_with("libcuda.so"))
}

/// The first file-backed mapping of `pid` whose file name satisfies `want`.
pub fn mapped_object(pid: u32, want: impl Fn(&str) -> bool) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&want))
}

const LIBCUDA_PATHS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/local/nvidia/lib64/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib/libcuda.so.1",
    "/usr/local/cuda/lib64/stubs/libcuda.so",
    "/usr/lib/wsl/lib/libcuda.so.1",
];

fn find_library(cfg: &RecorderConfig) -> Result<PathBuf, RecorderError> {
    if let Some(lib) = &cfg.library {
        return if lib.is_file() {
            Ok(lib.canonicalize().unwrap_or_else(|_| lib.clone()))
        } else {
            Err(RecorderError::LibraryNotFound {
                detail: format!("{} does not exist", lib.display()),
            })
        };
    }
    if let Some(lib) = libcuda_in_maps(cfg.pid) {
        return Ok(lib);
    }
    // Not mapped yet (the workload may load CUDA after the recorder starts): the
    // uprobe is placed on the file, so the installed libcuda works as well.
    // Skip the toolkit's link stub: it has the symbols but is never loaded.
    LIBCUDA_PATHS
        .iter()
        .map(PathBuf::from)
        .filter(|p| !p.to_string_lossy().contains("/stubs/"))
        .find(|p| p.is_file())
        .map(|p| p.canonicalize().unwrap_or(p))
        .ok_or_else(|| RecorderError::LibraryNotFound {
            detail: format!(
                "process {} maps no libcuda.so and none is installed at {}; pass RecorderConfig::library",
                cfg.pid,
                LIBCUDA_PATHS[..3].join(", ")
            ),
        })
}

/// Resolves `cfg.functions` in the library: exact names must exist; glob
/// patterns expand to every matching function. Functions at the same address
/// (aliases) get one uprobe, named after the exact name asked for, else the
/// shortest alias.
pub fn resolve(cfg: &RecorderConfig) -> Result<Resolved, RecorderError> {
    if cfg.functions.is_empty() {
        return Ok(Resolved::default());
    }
    let library = find_library(cfg)?;
    let inspector = Inspector::new();
    // ELF symbol tables only: with debug_syms set, blazesym's for_each consults
    // *only* DWARF, which libcuda (and any stripped binary) lacks.
    let mut elf = Elf::new(&library);
    elf.debug_syms = false;
    let src = Source::Elf(elf);
    let sym_err = |e: blazesym::Error| RecorderError::Symbols {
        library: library.clone(),
        detail: e.to_string(),
    };

    // offset -> (preferred name, is exact)
    let mut by_offset: BTreeMap<u64, (String, bool)> = BTreeMap::new();
    let mut add = |name: &str, off: u64, exact: bool| {
        let e = by_offset
            .entry(off)
            .or_insert_with(|| (name.to_string(), exact));
        let better =
            (exact && !e.1) || (exact == e.1 && (name.len(), name) < (e.0.len(), e.0.as_str()));
        if better {
            *e = (name.to_string(), exact);
        }
    };

    let exact: Vec<&str> = cfg
        .functions
        .iter()
        .filter(|f| !is_glob(f))
        .map(|s| s.as_str())
        .collect();
    if !exact.is_empty() {
        let found = inspector.lookup(&src, &exact).map_err(sym_err)?;
        for (name, syms) in exact.iter().zip(found) {
            let sym = syms
                .iter()
                .find(|s| s.sym_type == SymType::Function && s.file_offset.is_some())
                .or_else(|| syms.iter().find(|s| s.file_offset.is_some()));
            match sym {
                Some(s) => add(name, s.file_offset.unwrap(), true),
                None => {
                    return Err(RecorderError::SymbolNotFound {
                        function: name.to_string(),
                        library: library.clone(),
                    })
                }
            }
        }
    }

    let globs: Vec<&str> = cfg
        .functions
        .iter()
        .filter(|f| is_glob(f))
        .map(|s| s.as_str())
        .collect();
    let mut warnings = Vec::new();
    if !globs.is_empty() {
        let mut hits = vec![0usize; globs.len()];
        inspector
            .for_each(&src, |sym| {
                if let (SymType::Function, Some(off)) = (sym.sym_type, sym.file_offset) {
                    for (i, g) in globs.iter().enumerate() {
                        if glob_match(g, &sym.name) {
                            hits[i] += 1;
                            add(&sym.name, off, false);
                        }
                    }
                }
                ControlFlow::Continue(())
            })
            .map_err(sym_err)?;
        for (g, n) in globs.iter().zip(hits) {
            if n == 0 {
                warnings.push(format!(
                    "pattern `{g}` matched no function in {}",
                    library.display()
                ));
            }
        }
    }

    if by_offset.is_empty() {
        return Err(RecorderError::SymbolNotFound {
            function: cfg.functions.join(", "),
            library,
        });
    }
    let targets = by_offset
        .into_iter()
        .map(|(file_offset, (function, _))| ProbeTarget {
            handle: cfg.handle_arg_for(&function),
            function,
            file_offset,
        })
        .collect::<Vec<_>>();
    if targets.len() > crate::raw::MAX_FUNCS {
        return Err(RecorderError::Config(format!(
            "{} functions to probe, at most {}",
            targets.len(),
            crate::raw::MAX_FUNCS
        )));
    }
    Ok(Resolved {
        library: Some(library),
        targets,
        warnings,
    })
}

/// The executable of the current process, resolved (for probing functions of a
/// test binary).
pub fn current_exe() -> std::io::Result<PathBuf> {
    std::fs::read_link("/proc/self/exe")
}

pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
