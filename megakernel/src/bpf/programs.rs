//! The monitor programs built from `megakernel/monitors/` by build.rs.

include!(concat!(env!("OUT_DIR"), "/mk_bpf_programs.rs"));

/// The ELF object of program `name` (deliberately unsafe ones included).
pub fn object(name: &str) -> Option<&'static [u8]> {
    BUILT
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, b)| *b)
}

/// Why no programs are embedded, when none are (clang was missing at build time).
pub fn unavailable() -> Option<&'static str> {
    BUILT
        .is_empty()
        .then_some("megakernel was built without clang: no monitor programs embedded")
}
