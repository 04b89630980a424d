//! Function extents from the unwind tables of the objects loaded in this
//! process. The `.eh_frame` FDE (frame description entry) that covers an
//! address gives the first instruction and the length of the function holding
//! it exactly — the compiler emits one FDE per function, from its first
//! instruction to its last — and `strip` keeps `.eh_frame` and `.eh_frame_hdr`,
//! because unwinding (panics, backtraces) needs them at run time. This is how a
//! stripped executable still finds its own functions
//! ([`crate::perf_map::own_function_extent`]).
//!
//! The tables are read where the dynamic loader mapped them: `dl_iterate_phdr`
//! gives each object's load bias and program headers, `PT_GNU_EH_FRAME` locates
//! `.eh_frame_hdr` (its sorted table of function starts points into
//! `.eh_frame`), the way the system unwinder finds them. Addresses therefore
//! come out relocated by the load bias, and no file is opened or parsed.

use gimli::{BaseAddresses, EhFrame, EhFrameHdr, NativeEndian, UnwindSection};
use std::ffi::{c_int, c_void};

/// The extent `(start, size)` of the function containing `addr` in this
/// process, from the FDE covering it; `None` when no loaded object has unwind
/// information for `addr`.
pub(crate) fn fde_extent(addr: u64) -> Option<(u64, u64)> {
    struct Search {
        addr: u64,
        found: Option<(u64, u64)>,
    }

    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `dl_iterate_phdr` passes a valid `info` for the duration of
        // the call and our `data`, a `Search` that outlives the iteration.
        let (info, search) = unsafe { (&*info, &mut *data.cast::<Search>()) };
        let program_headers = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: `dlpi_phdr` points to `dlpi_phnum` program headers.
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        let object = LoadedObject {
            bias: info.dlpi_addr,
            program_headers,
        };
        if !object.maps(search.addr) {
            return 0; // next object
        }
        search.found = object.fde_extent(search.addr);
        1 // the object holding `addr` answered: stop
    }

    let mut search = Search { addr, found: None };
    // SAFETY: `visit` only reads what the loader hands it, within the call
    // (the loader keeps every object loaded while it iterates).
    unsafe { libc::dl_iterate_phdr(Some(visit), (&raw mut search).cast()) };
    search.found
}

/// One object as the loader mapped it, valid while `dl_iterate_phdr` visits it.
struct LoadedObject<'a> {
    bias: u64,
    program_headers: &'a [libc::Elf64_Phdr],
}

impl<'a> LoadedObject<'a> {
    /// Whether one of the object's loaded segments spans `addr`.
    fn maps(&self, addr: u64) -> bool {
        self.program_headers.iter().any(|header| {
            let start = self.bias.wrapping_add(header.p_vaddr);
            header.p_type == libc::PT_LOAD
                && (start..start.saturating_add(header.p_memsz)).contains(&addr)
        })
    }

    /// The bytes from `addr` to the end of the file-backed part of the
    /// readable loaded segment holding it.
    fn readable_from(&self, addr: u64) -> Option<&'a [u8]> {
        let end = self.program_headers.iter().find_map(|header| {
            let start = self.bias.wrapping_add(header.p_vaddr);
            let end = start.saturating_add(header.p_filesz);
            let readable = header.p_type == libc::PT_LOAD && header.p_flags & libc::PF_R != 0;
            (readable && (start..end).contains(&addr)).then_some(end)
        })?;
        // SAFETY: the loader maps the file-backed part of a readable PT_LOAD
        // segment readable, and keeps it mapped while `dl_iterate_phdr` visits
        // the object, which outlives `'a`.
        Some(unsafe { std::slice::from_raw_parts(addr as *const u8, (end - addr) as usize) })
    }

    fn fde_extent(&self, addr: u64) -> Option<(u64, u64)> {
        let hdr_header = self
            .program_headers
            .iter()
            .find(|header| header.p_type == libc::PT_GNU_EH_FRAME)?;
        let hdr_addr = self.bias.wrapping_add(hdr_header.p_vaddr);
        let hdr_bytes = self.readable_from(hdr_addr)?;
        let hdr_bytes = &hdr_bytes[..hdr_bytes.len().min(hdr_header.p_memsz as usize)];
        let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_addr);
        let address_size = std::mem::size_of::<usize>() as u8;
        let hdr = EhFrameHdr::new(hdr_bytes, NativeEndian)
            .parse(&bases, address_size)
            .ok()?;
        let eh_frame_addr = hdr.eh_frame_ptr().direct().ok()?;
        // `.eh_frame` has no length of its own here; gimli reads only the
        // entries the table points to, within the segment.
        let eh_frame = EhFrame::new(self.readable_from(eh_frame_addr)?, NativeEndian);
        let bases = bases.set_eh_frame(eh_frame_addr);
        let fde = hdr
            .table()?
            .fde_for_address(&eh_frame, &bases, addr, EhFrame::cie_from_offset)
            .ok()?;
        Some((fde.initial_address(), fde.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hint::black_box;

    #[inline(never)]
    fn covered_function(x: u64) -> u64 {
        black_box(x.wrapping_mul(17).rotate_left(3))
    }

    static DATA: [u8; 64] = [7; 64];

    /// From the function's first byte to its last, and not one byte further.
    #[test]
    fn the_fde_spans_exactly_the_function() {
        let addr = covered_function as *const () as u64;
        black_box(covered_function(black_box(1)));
        let extent = fde_extent(addr);
        let (start, size) = extent.expect("an FDE for an own function");
        assert_eq!((start, fde_extent(addr + size - 1)), (addr, extent));
        assert_ne!(fde_extent(addr + size), extent);
    }

    #[test]
    fn no_extent_outside_code() {
        let on_stack = 0u64;
        assert_eq!(fde_extent(black_box(&on_stack) as *const u64 as u64), None);
        assert_eq!(fde_extent(DATA.as_ptr() as u64), None);
        assert_eq!(fde_extent(0x10), None);
    }
}
