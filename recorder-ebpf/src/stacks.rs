//! User stacks: raw addresses are normalized to (object file, file offset) while
//! the target process is alive (its mappings are needed), and symbolized from
//! the object files with blazesym after the run.
//!
//! Frame strings: `object!symbol` (e.g. `libcuda.so.1!cuLaunchKernel`,
//! `myapp!worker::launch`), `object+0xOFFSET` when the object has no symbol
//! there, `0xADDRESS` when the address is in no file-backed mapping.

use blazesym::normalize::{Normalizer, UserMeta};
use blazesym::symbolize::{source::Elf, source::Source, Input, Symbolized, Symbolizer};
use blazesym::Pid;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use crate::perf_map::PerfMap;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Loc {
    File { path: Arc<PathBuf>, offset: u64 },
    Unknown,
}

pub(crate) struct StackBook {
    pid: u32,
    normalizer: Normalizer,
    locs: HashMap<u64, Loc>,
    pending: BTreeSet<u64>,
    paths: HashMap<PathBuf, Arc<PathBuf>>,
    pub(crate) errors: Vec<String>,
}

impl StackBook {
    pub(crate) fn new(pid: u32) -> Self {
        StackBook {
            pid,
            normalizer: Normalizer::builder().enable_build_ids(false).build(),
            locs: HashMap::new(),
            pending: BTreeSet::new(),
            paths: HashMap::new(),
            errors: Vec::new(),
        }
    }

    /// Remember addresses to normalize at the next `flush`.
    pub(crate) fn note(&mut self, addrs: impl IntoIterator<Item = u64>) {
        for a in addrs {
            if a != 0 && !self.locs.contains_key(&a) {
                self.pending.insert(a);
            }
        }
    }

    /// Normalize the pending addresses against the target's current mappings.
    pub(crate) fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let addrs: Vec<u64> = std::mem::take(&mut self.pending).into_iter().collect();
        match self
            .normalizer
            .normalize_user_addrs(Pid::from(self.pid), &addrs)
        {
            Ok(out) => {
                for (addr, (offset, meta_idx)) in addrs.iter().zip(out.outputs.iter()) {
                    let loc = match out.meta.get(*meta_idx) {
                        Some(UserMeta::Elf(elf)) => {
                            let path = self
                                .paths
                                .entry(elf.path.clone())
                                .or_insert_with(|| Arc::new(elf.path.clone()))
                                .clone();
                            Loc::File {
                                path,
                                offset: *offset,
                            }
                        }
                        _ => Loc::Unknown,
                    };
                    self.locs.insert(*addr, loc);
                }
            }
            Err(e) => {
                if self.errors.len() < 8 {
                    self.errors.push(format!(
                        "normalizing user addresses of pid {}: {e}",
                        self.pid
                    ));
                }
                for a in addrs {
                    self.locs.insert(a, Loc::Unknown);
                }
            }
        }
    }

    /// Symbolize stacks (innermost first). Frames after the first are return
    /// addresses, symbolized at `address - 1` so a call at the very end of a
    /// function is attributed to that function.
    ///
    /// A frame inside a range of the process's perf map takes the map's name
    /// (see [`crate::perf_map`]), as bare text: the runtime's own name for it.
    pub(crate) fn symbolize(&mut self, stacks: &[Vec<u64>]) -> Vec<Vec<String>> {
        self.flush();
        let perf_map = PerfMap::load(self.pid);
        // (path, adjusted offset) -> frame string
        let mut want: HashMap<Arc<PathBuf>, BTreeSet<u64>> = HashMap::new();
        for st in stacks {
            for (i, a) in st.iter().enumerate() {
                if let Some(Loc::File { path, offset }) = self.locs.get(a) {
                    let off = if i > 0 {
                        offset.saturating_sub(1)
                    } else {
                        *offset
                    };
                    want.entry(path.clone()).or_default().insert(off);
                }
            }
        }
        let symbolizer = Symbolizer::builder()
            .enable_code_info(false)
            .enable_inlined_fns(false)
            .build();
        let mut names: HashMap<(Arc<PathBuf>, u64), String> = HashMap::new();
        for (path, offs) in want {
            let offs: Vec<u64> = offs.into_iter().collect();
            let module = crate::symbols::file_name(&path);
            let mut src = Elf::new(path.as_path());
            src.debug_syms = false;
            let res = symbolizer.symbolize(&Source::Elf(src), Input::FileOffset(&offs));
            match res {
                Ok(syms) => {
                    for (off, s) in offs.iter().zip(syms) {
                        let name = match s {
                            Symbolized::Sym(sym) => format!("{module}!{}", sym.name),
                            Symbolized::Unknown(_) => format!("{module}+0x{off:x}"),
                        };
                        names.insert((path.clone(), *off), name);
                    }
                }
                Err(e) => {
                    if self.errors.len() < 8 {
                        self.errors
                            .push(format!("symbolizing {}: {e}", path.display()));
                    }
                    for off in offs {
                        names.insert((path.clone(), off), format!("{module}+0x{off:x}"));
                    }
                }
            }
        }
        stacks
            .iter()
            .map(|st| {
                st.iter()
                    .enumerate()
                    .map(|(i, a)| {
                        let at = if i > 0 { a.saturating_sub(1) } else { *a };
                        if let Some(name) =
                            (!perf_map.is_empty()).then(|| perf_map.name(at)).flatten()
                        {
                            return name.to_string();
                        }
                        match self.locs.get(a) {
                            Some(Loc::File { path, offset }) => {
                                let off = if i > 0 {
                                    offset.saturating_sub(1)
                                } else {
                                    *offset
                                };
                                names
                                    .get(&(path.clone(), off))
                                    .cloned()
                                    .unwrap_or_else(|| format!("0x{a:x}"))
                            }
                            _ => format!("0x{a:x}"),
                        }
                    })
                    .collect()
            })
            .collect()
    }
}
