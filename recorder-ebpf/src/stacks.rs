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
use ground_truth::SharedStr;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use crate::perf_map::PerfMap;

/// One frame of a stack: its address, and whether it is a return address (any frame
/// but the innermost), which is looked up one byte earlier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Frame {
    address: u64,
    is_return: bool,
}

impl Frame {
    fn lookup_address(self) -> u64 {
        if self.is_return {
            self.address.saturating_sub(1)
        } else {
            self.address
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Loc {
    File { path: Arc<PathBuf>, offset: u64 },
    Unknown,
}

/// The addresses of a process's user stacks, normalized while it runs and symbolized
/// after (see the module's documentation).
pub struct StackBook {
    pid: u32,
    normalizer: Normalizer,
    locs: HashMap<u64, Loc>,
    pending: BTreeSet<u64>,
    paths: HashMap<PathBuf, Arc<PathBuf>>,
    /// Normalization and symbolization failures (at most 8).
    pub errors: Vec<String>,
}

impl StackBook {
    pub fn new(pid: u32) -> Self {
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
    pub fn note(&mut self, addrs: impl IntoIterator<Item = u64>) {
        for a in addrs {
            if a != 0 && !self.locs.contains_key(&a) {
                self.pending.insert(a);
            }
        }
    }

    /// Normalize the pending addresses against the target's current mappings.
    pub fn flush(&mut self) {
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
    ///
    /// Each distinct stack, and each distinct frame, is named once: a run's
    /// 100,000 calls come from a few call sites, and every copy of a name is the
    /// same shared string.
    pub fn symbolize(&mut self, stacks: &[Vec<u64>]) -> Vec<Vec<SharedStr>> {
        self.flush();
        let mut unique: FxHashMap<&[u64], usize> = FxHashMap::default();
        let mut distinct: Vec<&[u64]> = Vec::new();
        let which: Vec<usize> = stacks
            .iter()
            .map(|st| {
                *unique.entry(st.as_slice()).or_insert_with(|| {
                    distinct.push(st);
                    distinct.len() - 1
                })
            })
            .collect();
        // The distinct stacks as indices into the distinct frames.
        let mut frame_ids: FxHashMap<Frame, usize> = FxHashMap::default();
        let mut frames: Vec<Frame> = Vec::new();
        let shapes: Vec<Vec<usize>> = distinct
            .iter()
            .map(|st| {
                st.iter()
                    .enumerate()
                    .map(|(i, &address)| {
                        let frame = Frame {
                            address,
                            is_return: i > 0,
                        };
                        *frame_ids.entry(frame).or_insert_with(|| {
                            frames.push(frame);
                            frames.len() - 1
                        })
                    })
                    .collect()
            })
            .collect();
        let names = self.frame_names(&frames);
        let named: Vec<Vec<SharedStr>> = shapes
            .iter()
            .map(|ids| ids.iter().map(|&id| names[id].clone()).collect())
            .collect();
        which.into_iter().map(|i| named[i].clone()).collect()
    }

    /// The name of every frame: the perf map's, else the object's symbol (one
    /// blazesym pass per object over its distinct offsets), else the raw address.
    fn frame_names(&mut self, frames: &[Frame]) -> Vec<SharedStr> {
        let perf_map = PerfMap::load(self.pid);
        let mut names: Vec<Option<SharedStr>> = vec![None; frames.len()];
        // Object → offset → the frames (by index) that land there.
        let mut want: HashMap<Arc<PathBuf>, BTreeMap<u64, Vec<usize>>> = HashMap::new();
        for (id, frame) in frames.iter().enumerate() {
            let at = frame.lookup_address();
            if let Some(name) = (!perf_map.is_empty()).then(|| perf_map.name(at)).flatten() {
                names[id] = Some(name.into());
                continue;
            }
            match self.locs.get(&frame.address) {
                Some(Loc::File { path, offset }) => {
                    let offset = if frame.is_return {
                        offset.saturating_sub(1)
                    } else {
                        *offset
                    };
                    want.entry(path.clone())
                        .or_default()
                        .entry(offset)
                        .or_default()
                        .push(id);
                }
                _ => names[id] = Some(format!("0x{:x}", frame.address).into()),
            }
        }
        let symbolizer = Symbolizer::builder()
            .enable_code_info(false)
            .enable_inlined_fns(false)
            .build();
        for (path, by_offset) in want {
            let offsets: Vec<u64> = by_offset.keys().copied().collect();
            let module = crate::symbols::file_name(&path);
            let mut src = Elf::new(path.as_path());
            src.debug_syms = false;
            let symbolized = symbolizer
                .symbolize(&Source::Elf(src), Input::FileOffset(&offsets))
                .map_err(|e| {
                    if self.errors.len() < 8 {
                        self.errors
                            .push(format!("symbolizing {}: {e}", path.display()));
                    }
                })
                .ok();
            for (i, (offset, ids)) in by_offset.into_iter().enumerate() {
                let name: SharedStr = match symbolized.as_ref().and_then(|s| s.get(i)) {
                    Some(Symbolized::Sym(sym)) => format!("{module}!{}", sym.name).into(),
                    _ => format!("{module}+0x{offset:x}").into(),
                };
                for id in ids {
                    names[id] = Some(name.clone());
                }
            }
        }
        names
            .into_iter()
            .map(|n| n.expect("every frame is named above"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naming before each distinct frame was named once: every frame of every stack
    /// looked up on its own (kept here as the reference the cache must agree with).
    fn frame_by_frame(book: &StackBook, stacks: &[Vec<u64>]) -> Vec<Vec<String>> {
        let perf_map = PerfMap::load(book.pid);
        let symbolizer = Symbolizer::builder()
            .enable_code_info(false)
            .enable_inlined_fns(false)
            .build();
        let name_of = |i: usize, a: u64| -> String {
            let at = if i > 0 { a.saturating_sub(1) } else { a };
            if let Some(name) = perf_map.name(at) {
                return name.to_string();
            }
            let Some(Loc::File { path, offset }) = book.locs.get(&a) else {
                return format!("0x{a:x}");
            };
            let off = if i > 0 {
                offset.saturating_sub(1)
            } else {
                *offset
            };
            let module = crate::symbols::file_name(path);
            let mut src = Elf::new(path.as_path());
            src.debug_syms = false;
            match symbolizer.symbolize(&Source::Elf(src), Input::FileOffset(&[off])) {
                Ok(syms) => match syms.into_iter().next() {
                    Some(Symbolized::Sym(sym)) => format!("{module}!{}", sym.name),
                    _ => format!("{module}+0x{off:x}"),
                },
                Err(_) => format!("{module}+0x{off:x}"),
            }
        };
        stacks
            .iter()
            .map(|st| st.iter().enumerate().map(|(i, &a)| name_of(i, a)).collect())
            .collect()
    }

    #[inline(never)]
    fn first_known_function(x: u64) -> u64 {
        x.wrapping_mul(31).rotate_left(7)
    }

    #[inline(never)]
    fn second_known_function(x: u64) -> u64 {
        x ^ 0x5555
    }

    /// Stacks of this process: addresses inside its own functions (as innermost frames
    /// and as return addresses), an address one past a function's start (a return
    /// address there names the function before), and addresses in no mapping.
    fn own_stacks() -> Vec<Vec<u64>> {
        let first = first_known_function as *const () as usize as u64;
        let second = second_known_function as *const () as usize as u64;
        let test = own_stacks as *const () as usize as u64;
        let unmapped = 0x10;
        vec![
            vec![first, second + 4, test + 8],
            vec![second, first + 1, unmapped],
            vec![first, second + 4, test + 8],
            vec![test, test, first],
            vec![unmapped, second + 1],
            vec![],
        ]
    }

    /// A book of this process that has normalized every address of `stacks`.
    fn normalized(stacks: &[Vec<u64>]) -> StackBook {
        let mut book = StackBook::new(std::process::id());
        for st in stacks {
            book.note(st.iter().copied());
        }
        book.flush();
        book
    }

    #[test]
    fn each_frame_named_once_gives_the_names_frame_by_frame_gave() {
        let stacks = own_stacks();
        let mut book = normalized(&stacks);
        let expected = frame_by_frame(&normalized(&stacks), &stacks);
        let named: Vec<Vec<String>> = book
            .symbolize(&stacks)
            .into_iter()
            .map(|st| st.into_iter().map(String::from).collect())
            .collect();
        assert_eq!(named, expected);
        // The test itself must be able to fail: this binary's functions have names.
        let first = &named[0][0];
        if first.contains('!') {
            assert!(first.contains("first_known_function"), "{named:?}");
        } else {
            eprintln!("SKIP the name check: this test binary has no symbol table ({first})");
        }
        assert_eq!(named[1][2], "0x10", "an address in no mapping stays raw");
        assert!(named[5].is_empty());
    }

    #[test]
    fn repeated_stacks_share_their_names() {
        let stacks = own_stacks();
        let named = normalized(&stacks).symbolize(&stacks);
        assert_eq!(named[0], named[2]);
        assert!(std::ptr::eq(named[0][0].as_str(), named[2][0].as_str()));
    }
}
