//! Unwinding the user stacks copied at uprobe entries
//! (`RecorderConfig::stack_copy_bytes`), what `perf record --call-graph dwarf`
//! does: from the registers of the hit (ip, sp, bp) and the bytes of the stack
//! above sp, each frame's caller is found with the DWARF call-frame information
//! (`.eh_frame` through `.eh_frame_hdr`) of the object holding the frame's code,
//! so frames of code built without frame pointers (a distribution's CPython,
//! libtorch) are crossed, where the kernel's frame-pointer walk stops.
//!
//! The unwinder is framehop's (x86-64). Its modules are the executable
//! file-backed mappings of `/proc/PID/maps`, each with the load bias of its
//! file and the file's unwind sections (`object` reads the ELF, memmap2 maps
//! it once per file). The maps are read again, at most every
//! [`MAPS_RELOAD_INTERVAL`], when a frame lies in no known mapping (a library
//! loaded after the recording started).
//!
//! Code with no unwind information unwinds by frame pointer (framehop's
//! fallback), except CPython 3.12's perf trampolines (`-X perf`, the frames the
//! perf map names `py::QUALNAME:FILE`): copies, in anonymous executable memory,
//! of `sub $8,%rsp; call *%rcx; add $8,%rsp; ret`, which keep no frame pointer.
//! A return address in anonymous code right after those two instructions
//! (read from `/proc/PID/mem`) unwinds by that layout: the caller's return
//! address 8 bytes above sp, sp 16 bytes higher, rbp untouched. Trampolines that
//! push rbp (later CPythons) are frame-pointer code and take the fallback.

use crate::raw::StackCopy;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use memmap2::Mmap;
use object::{Object, ObjectSection, ObjectSegment};
use std::collections::HashMap;
use std::fs::File;
use std::ops::{Deref, Range};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most frames one unwound stack keeps (innermost first).
pub(crate) const MAX_FRAMES: usize = 128;

/// How often, at most, a frame outside every known mapping re-reads the maps.
const MAPS_RELOAD_INTERVAL: Duration = Duration::from_millis(10);

/// The code of CPython 3.12's x86-64 perf trampoline up to its call's return
/// address: `sub $8,%rsp; call *%rcx` (Python/asm_trampoline.S).
const TRAMPOLINE_BEFORE_RETURN: [u8; 6] = [0x48, 0x83, 0xec, 0x08, 0xff, 0xd1];

/// A byte range of a mapped file (an unwind section), as framehop takes it.
#[derive(Clone)]
pub(crate) struct FileBytes {
    map: Arc<Mmap>,
    range: Range<usize>,
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map[self.range.clone()]
    }
}

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub start: u64,
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    pub exec: bool,
    /// The mapped file; `None` for anonymous memory and `[heap]`-like regions.
    pub path: Option<PathBuf>,
}

/// Parses `/proc/PID/maps` (lines that do not parse are skipped), sorted by start.
pub(crate) fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(6, ' ');
            let (start, end) = fields.next()?.split_once('-')?;
            let perms = fields.next()?;
            let offset = fields.next()?;
            let _device = fields.next()?;
            let _inode = fields.next()?;
            let path = fields.next().map(str::trim).unwrap_or("");
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                exec: perms.as_bytes().get(2) == Some(&b'x'),
                path: path.starts_with('/').then(|| PathBuf::from(path)),
            })
        })
        .collect();
    out.sort_by_key(|m| m.start);
    out
}

/// What the unwinder needs of one ELF file.
struct ElfUnwind {
    map: Arc<Mmap>,
    /// (address range, file range) of `.eh_frame` and `.eh_frame_hdr`.
    eh_frame: (Range<u64>, Range<usize>),
    eh_frame_hdr: Option<(Range<u64>, Range<usize>)>,
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
    /// Loadable segments: (virtual address, file offset, file size).
    segments: Vec<(u64, u64, u64)>,
}

impl ElfUnwind {
    fn read(path: &Path) -> Result<Option<ElfUnwind>, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: mapped read-only; the unwinder reads it through bounds-checked
        // parsers only (a file rewritten while mapped gives wrong stacks, no more).
        let map = unsafe { Mmap::map(&file) }.map_err(|e| format!("{}: {e}", path.display()))?;
        let elf = object::File::parse(&*map).map_err(|e| format!("{}: {e}", path.display()))?;
        let section = |name: &str| {
            let s = elf.section_by_name(name)?;
            let (offset, size) = s.file_range()?;
            // A malformed file's ranges may overflow: they then cover nothing.
            let end = offset.checked_add(size)?;
            Some((
                s.address()..s.address().checked_add(s.size())?,
                usize::try_from(offset).ok()?..usize::try_from(end).ok()?,
            ))
        };
        let Some(eh_frame) = section(".eh_frame") else {
            return Ok(None);
        };
        let range_of = |name: &str| section(name).map(|(r, _)| r);
        let segments = elf
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (s.address(), offset, size)
            })
            .collect();
        Ok(Some(ElfUnwind {
            eh_frame_hdr: section(".eh_frame_hdr"),
            text: range_of(".text"),
            got: range_of(".got"),
            eh_frame,
            segments,
            map: map.into(),
        }))
    }

    /// The load bias of `mapping` (a mapping of this file): where the file's
    /// address 0 lies in the process.
    fn load_bias(&self, mapping: &Mapping) -> Option<u64> {
        const PAGE: u64 = 4096;
        // The loader maps each segment from its offset's page; neighbouring
        // segments may share that page, so the segment that starts the mapping
        // wins over one that merely covers it.
        let page_of = |offset: u64| offset & !(PAGE - 1);
        let &(vaddr, offset, _) = self
            .segments
            .iter()
            .find(|&&(_, offset, _)| page_of(offset) == mapping.offset)
            .or_else(|| {
                self.segments.iter().rev().find(|&&(_, offset, size)| {
                    page_of(offset) <= mapping.offset
                        && mapping.offset < offset.saturating_add(size.max(1))
                })
            })?;
        Some(
            mapping
                .start
                .wrapping_add(offset)
                .wrapping_sub(mapping.offset)
                .wrapping_sub(vaddr),
        )
    }

    fn module(&self, name: &Path, mapping: &Mapping, bias: u64) -> Module<FileBytes> {
        let bytes = |range: &Range<usize>| {
            let end = range.end.min(self.map.len());
            FileBytes {
                map: self.map.clone(),
                range: range.start.min(end)..end,
            }
        };
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.clone(),
            got_svma: self.got.clone(),
            eh_frame_svma: Some(self.eh_frame.0.clone()),
            eh_frame: Some(bytes(&self.eh_frame.1)),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|h| h.0.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|h| bytes(&h.1)),
            text: None,
            stubs_svma: None,
            stub_helper_svma: None,
            unwind_info: None,
            debug_frame: None,
            text_segment_svma: None,
            text_segment: None,
        };
        Module::new(
            name.display().to_string(),
            mapping.start..mapping.end,
            bias,
            info,
        )
    }
}

/// The unwinder of one process's copied stacks (see the module's documentation).
pub(crate) struct UserUnwinder {
    pid: u32,
    unwinder: UnwinderX86_64<FileBytes>,
    cache: CacheX86_64,
    mappings: Vec<Mapping>,
    /// Start address → the mapping a module was added for.
    modules: HashMap<u64, Mapping>,
    /// Per file: its unwind data (`None`: none, or unreadable).
    files: HashMap<PathBuf, Option<Arc<ElfUnwind>>>,
    /// Per return address in anonymous code: whether a perf trampoline's call precedes it.
    trampolines: HashMap<u64, bool>,
    memory: Option<File>,
    maps_read: Option<Instant>,
    /// Problems met (at most 8).
    pub(crate) errors: Vec<String>,
}

impl UserUnwinder {
    pub(crate) fn new(pid: u32) -> Self {
        let mut unwinder = UserUnwinder {
            pid,
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            mappings: Vec::new(),
            modules: HashMap::new(),
            files: HashMap::new(),
            trampolines: HashMap::new(),
            memory: File::open(format!("/proc/{pid}/mem")).ok(),
            maps_read: None,
            errors: Vec::new(),
        };
        unwinder.read_maps();
        unwinder
    }

    fn error(&mut self, message: String) {
        if self.errors.len() < 8 {
            self.errors.push(message);
        }
    }

    /// Reads the process's maps and brings the modules in line with them.
    fn read_maps(&mut self) {
        self.maps_read = Some(Instant::now());
        let text = match std::fs::read_to_string(format!("/proc/{}/maps", self.pid)) {
            Ok(t) => t,
            Err(e) => {
                self.error(format!("reading /proc/{}/maps: {e}", self.pid));
                return;
            }
        };
        self.mappings = parse_maps(&text);
        let current: HashMap<u64, &Mapping> = self
            .mappings
            .iter()
            .filter(|m| m.exec && m.path.is_some())
            .map(|m| (m.start, m))
            .collect();
        let gone: Vec<u64> = self
            .modules
            .iter()
            .filter(|(start, m)| current.get(start) != Some(m))
            .map(|(start, _)| *start)
            .collect();
        for start in gone {
            self.unwinder.remove_module(start);
            self.modules.remove(&start);
        }
        let new: Vec<Mapping> = current
            .values()
            .filter(|m| !self.modules.contains_key(&m.start))
            .map(|m| (*m).clone())
            .collect();
        for mapping in new {
            let Some(path) = mapping.path.clone() else {
                continue;
            };
            let elf = match self.files.get(&path) {
                Some(known) => known.clone(),
                None => {
                    let read = ElfUnwind::read(&path).unwrap_or_else(|e| {
                        self.error(format!("unwind tables of {e}"));
                        None
                    });
                    let read = read.map(Arc::new);
                    self.files.insert(path.clone(), read.clone());
                    read
                }
            };
            let Some(elf) = elf else { continue };
            let Some(bias) = elf.load_bias(&mapping) else {
                continue;
            };
            self.unwinder.add_module(elf.module(&path, &mapping, bias));
            self.modules.insert(mapping.start, mapping);
        }
    }

    fn mapping_of(&self, address: u64) -> Option<&Mapping> {
        let k = self.mappings.partition_point(|m| m.start <= address);
        let m = self.mappings.get(k.checked_sub(1)?)?;
        (address < m.end).then_some(m)
    }

    /// Makes sure a frame at `address` is unwound with the current modules.
    fn know(&mut self, address: u64) {
        let stale = self
            .maps_read
            .is_none_or(|t| t.elapsed() >= MAPS_RELOAD_INTERVAL);
        if self.mapping_of(address).is_none() && stale {
            self.read_maps();
        }
    }

    /// Whether `return_address` follows the call of a CPython perf trampoline
    /// that keeps no frame pointer.
    fn after_trampoline_call(&mut self, return_address: u64) -> bool {
        let anonymous_code = self
            .mapping_of(return_address)
            .is_some_and(|m| m.exec && m.path.is_none());
        if !anonymous_code {
            return false;
        }
        if let Some(&known) = self.trampolines.get(&return_address) {
            return known;
        }
        let mut code = [0u8; TRAMPOLINE_BEFORE_RETURN.len()];
        let at = return_address.wrapping_sub(code.len() as u64);
        let is = self
            .memory
            .as_ref()
            .is_some_and(|mem| mem.read_exact_at(&mut code, at).is_ok())
            && code == TRAMPOLINE_BEFORE_RETURN;
        self.trampolines.insert(return_address, is);
        is
    }

    /// The frames of a copied stack, innermost first: the instruction pointer,
    /// then return addresses, until the copy ends, a frame has no caller, or
    /// [`MAX_FRAMES`].
    pub(crate) fn unwind(&mut self, copy: &StackCopy) -> Vec<u64> {
        let (base, stack) = (copy.sp, copy.stack);
        let mut read_stack = |address: u64| -> Result<u64, ()> {
            let at = usize::try_from(address.checked_sub(base).ok_or(())?).map_err(|_| ())?;
            let word = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(word.try_into().map_err(|_| ())?))
        };
        let mut regs = UnwindRegsX86_64::new(copy.ip, copy.sp, copy.bp);
        let mut frames = vec![copy.ip];
        let mut address = FrameAddress::from_instruction_pointer(copy.ip);
        while frames.len() < MAX_FRAMES {
            self.know(address.address_for_lookup());
            let caller =
                if address.is_return_address() && self.after_trampoline_call(address.address()) {
                    let sp = regs.sp();
                    read_stack(sp.wrapping_add(8)).ok().inspect(|_| {
                        regs.set_sp(sp.wrapping_add(16));
                    })
                } else {
                    self.unwinder
                        .unwind_frame(address, &mut regs, &mut self.cache, &mut read_stack)
                        .ok()
                        .flatten()
                };
            let Some(next) = caller.and_then(FrameAddress::from_return_address) else {
                break;
            };
            frames.push(next.address());
            address = next;
        }
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hint::black_box;

    #[test]
    fn parses_maps_lines() {
        let maps = parse_maps(
            "7f0000002000-7f0000003000 r-xp 00001000 08:01 42   /usr/lib/lib with space.so\n\
             7f0000001000-7f0000002000 r--p 00000000 08:01 42   /usr/lib/lib with space.so\n\
             7f0000004000-7f0000005000 rwxp 00000000 00:00 0 \n\
             7ffd00000000-7ffd00001000 rw-p 00000000 00:00 0    [stack]\n\
             not a line\n",
        );
        assert_eq!(maps.len(), 4);
        assert_eq!(maps[0].start, 0x7f00_0000_1000);
        assert_eq!(
            maps[1],
            Mapping {
                start: 0x7f00_0000_2000,
                end: 0x7f00_0000_3000,
                offset: 0x1000,
                exec: true,
                path: Some(PathBuf::from("/usr/lib/lib with space.so")),
            }
        );
        assert!(maps[2].exec && maps[2].path.is_none());
        assert!(!maps[3].exec && maps[3].path.is_none());
    }

    /// This thread's registers and the stack above them, as the BPF program
    /// copies them at a uprobe's entry: ip, sp and bp of one instruction.
    #[inline(never)]
    fn snapshot(bytes: usize) -> (u64, u64, u64, Vec<u8>) {
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: reads three registers; touches no memory and no flags.
        unsafe {
            std::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
                options(nomem, nostack, preserves_flags),
            );
        }
        // Up to `bytes`, within the mapping holding sp (as the BPF copy stops at
        // the top of the stack).
        let maps = parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap());
        let top = maps
            .iter()
            .find(|m| m.start <= sp && sp < m.end)
            .expect("sp lies in a mapping")
            .end;
        let bytes = bytes.min((top - sp) as usize);
        let mut stack = vec![0u8; bytes];
        // SAFETY: `sp..sp + bytes` is this thread's live stack, its callers'
        // frames, inside one mapping.
        unsafe { std::ptr::copy_nonoverlapping(sp as *const u8, stack.as_mut_ptr(), bytes) };
        (ip, sp, bp, stack)
    }

    #[inline(never)]
    fn inner_caller(depth: u64) -> (u64, u64, u64, Vec<u8>) {
        let s = snapshot(black_box(16 * 1024));
        black_box(depth);
        s
    }

    #[inline(never)]
    fn outer_caller(depth: u64) -> (u64, u64, u64, Vec<u8>) {
        let s = inner_caller(black_box(depth + 1));
        black_box(depth);
        s
    }

    /// A snapshot of this thread's own stack unwinds through its callers, each
    /// return address inside the function that made the call, in order.
    #[test]
    fn unwinds_a_snapshot_of_this_threads_stack() {
        let (ip, sp, bp, stack) = outer_caller(black_box(1));
        let copy = StackCopy {
            tid: 0,
            enter: 0,
            function: 0,
            ip,
            sp,
            bp,
            stack: &stack,
        };
        let mut unwinder = UserUnwinder::new(std::process::id());
        let frames = unwinder.unwind(&copy);
        let extent = |f: fn(u64) -> (u64, u64, u64, Vec<u8>)| {
            crate::perf_map::own_function_extent(f as *const () as u64)
                .expect("an extent for a test function")
        };
        let holds = |addr: u64, (start, size): (u64, u64)| start <= addr && addr < start + size;
        let snapshot_extent = crate::perf_map::own_function_extent(snapshot as *const () as u64)
            .expect("an extent for snapshot");
        assert!(holds(frames[0], snapshot_extent), "{frames:x?}");
        // Return addresses: the call instruction ends right before them.
        assert!(holds(frames[1] - 1, extent(inner_caller)), "{frames:x?}");
        assert!(holds(frames[2] - 1, extent(outer_caller)), "{frames:x?}");
        assert!(
            frames.len() > 4,
            "the test harness's frames follow: {frames:x?}"
        );
        assert!(unwinder.errors.is_empty(), "{:?}", unwinder.errors);
        // Cut the copy short: the walk ends where the bytes end, never past.
        let short = StackCopy {
            stack: &stack[..64],
            ..copy
        };
        assert!(unwinder.unwind(&short).len() < frames.len());
    }
}
