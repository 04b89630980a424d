//! The perf map convention (`/tmp/perf-<pid>.map`): a runtime that generates
//! or repurposes code (JITs, Python 3.12's `-X perf` trampolines, V8, JVM
//! agents) writes one line per code range, `START SIZE name` with START and
//! SIZE in hexadecimal, so native stack profilers can name frames that no ELF
//! symbol describes meaningfully.
//!
//! The recorder reads the map of the target process when it symbolizes stacks
//! and gives its names precedence over ELF symbols: the runtime that wrote the
//! line knows what the code stands for (a Python function, a call site of the
//! model), the ELF symbol only which trampoline ran. [`PerfMapWriter`] is the
//! writing side, for a workload in this process that wants its call sites
//! named (the GPU backend's per-call-site launch trampolines).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

/// The perf map path of `pid`.
pub fn perf_map_path(pid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/perf-{pid}.map"))
}

/// Code ranges of one process's perf map, sorted by start.
#[derive(Debug, Clone, Default)]
pub(crate) struct PerfMap {
    ranges: Vec<(u64, u64, String)>,
}

impl PerfMap {
    /// The map of `pid`; empty when the process wrote none.
    pub(crate) fn load(pid: u32) -> Self {
        std::fs::read_to_string(perf_map_path(pid))
            .map(|text| Self::parse(&text))
            .unwrap_or_default()
    }

    /// Lines that do not parse are skipped: the map is advisory.
    pub(crate) fn parse(text: &str) -> Self {
        let mut ranges: Vec<(u64, u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut it = line.trim().splitn(3, ' ');
                let start = u64::from_str_radix(it.next()?.trim_start_matches("0x"), 16).ok()?;
                let size = u64::from_str_radix(it.next()?.trim_start_matches("0x"), 16).ok()?;
                let name = it.next()?.trim();
                (size > 0 && !name.is_empty()).then(|| (start, start + size, name.to_string()))
            })
            .collect();
        // A later line for the same start replaces an earlier one (code reused).
        ranges.reverse();
        ranges.sort_by_key(|r| r.0);
        ranges.dedup_by_key(|r| r.0);
        PerfMap { ranges }
    }

    /// The name of the range holding `addr`.
    pub(crate) fn name(&self, addr: u64) -> Option<&str> {
        let k = self.ranges.partition_point(|r| r.0 <= addr);
        let (_, end, name) = self.ranges.get(k.checked_sub(1)?)?;
        (addr < *end).then_some(name.as_str())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// Appends lines to this process's perf map. The first writer of a process
/// truncates a stale map left by an earlier process with the same pid.
pub struct PerfMapWriter {
    file: File,
}

impl PerfMapWriter {
    pub fn create() -> std::io::Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(perf_map_path(std::process::id()))?;
        Ok(PerfMapWriter { file })
    }

    /// Names the code range `[start, start + size)`.
    pub fn name_range(&mut self, start: u64, size: u64, name: &str) -> std::io::Result<()> {
        // One write per line so a concurrent reader never sees half a line.
        let line = format!("{start:x} {size:x} {}\n", name.replace('\n', " "));
        self.file.write_all(line.as_bytes())
    }
}

/// The extent `(start, size)` of the function of this process containing
/// `addr`: from the executable's symbol table, else — a stripped executable —
/// from its unwind tables (the `.eh_frame` entry covering `addr`, see
/// `unwind_tables.rs`); `None` when neither describes `addr`.
///
/// The symbol table is asked first because it also covers code built without
/// unwind tables; where both describe a function they give the same extent
/// (the tests compare them, on this binary and on a stripped copy).
pub fn own_function_extent(addr: u64) -> Option<(u64, u64)> {
    symbol_table_extent(addr).or_else(|| crate::unwind_tables::fde_extent(addr))
}

/// The extent `(start, size)` of the function of this process containing
/// `addr`, from the symbol tables of its objects only (blazesym); `None` when
/// there is no sized symbol there (a stripped executable).
pub fn symbol_table_extent(addr: u64) -> Option<(u64, u64)> {
    use blazesym::symbolize::{source::Process, source::Source, Input, Symbolized, Symbolizer};
    let symbolizer = Symbolizer::new();
    let mut src = Process::new(blazesym::Pid::Slf);
    src.perf_map = false;
    let out = symbolizer
        .symbolize_single(&Source::Process(src), Input::AbsAddr(addr))
        .ok()?;
    match out {
        // `sym.addr` is the ELF's address; `offset` is where `addr` lies in it.
        Symbolized::Sym(sym) => {
            let start = addr - sym.offset as u64;
            let size = sym.size? as u64;
            // A symbol that does not reach `addr` is not its function.
            (addr < start + size).then_some((start, size))
        }
        Symbolized::Unknown(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_looks_up_ranges() {
        let m = PerfMap::parse(
            "7f0000001000 40 model.py:attention:41\n\
             garbage line\n\
             7f0000002000 20 py::forward:model.py\n\
             7f0000001000 40 model.py:attention:42\n",
        );
        assert_eq!(m.name(0x7f00_0000_1000), Some("model.py:attention:42"));
        assert_eq!(m.name(0x7f00_0000_103f), Some("model.py:attention:42"));
        assert_eq!(m.name(0x7f00_0000_1040), None);
        assert_eq!(m.name(0x7f00_0000_2010), Some("py::forward:model.py"));
        assert_eq!(m.name(0x10), None);
    }

    #[inline(never)]
    fn some_function(x: u64) -> u64 {
        std::hint::black_box(x.wrapping_mul(31).rotate_left(7))
    }

    #[test]
    fn finds_the_extent_of_an_own_function() {
        let addr = some_function as *const () as u64;
        let _ = some_function(3);
        let (start, size) = own_function_extent(addr).expect("an extent for an own function");
        assert_eq!(start, addr);
        assert!(size > 0 && size < 4096, "size {size}");
    }

    /// The unwind-table answer (what a stripped binary gets) is the symbol
    /// table's, on a function that has both.
    #[test]
    fn unwind_tables_agree_with_the_symbol_table() {
        let addr = some_function as *const () as u64;
        let Some(from_symbols) = symbol_table_extent(addr) else {
            eprintln!("SKIP unwind_tables_agree_with_the_symbol_table: this test binary has no symbol table");
            return;
        };
        assert_eq!(crate::unwind_tables::fde_extent(addr), Some(from_symbols));
        assert_eq!(
            crate::unwind_tables::fde_extent(addr + 1),
            Some(from_symbols)
        );
    }
}
