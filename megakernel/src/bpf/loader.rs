//! Reads a clang-built BPF ELF object: the program sections (`mk/<hook>`),
//! the map declarations (symbols of section `maps`, `struct mk_map_def`) and
//! the relocations that make an `lddw` refer to a map; the relocated
//! instructions carry the map's index (src = [`PSEUDO_MAP`]).

use super::abi::{
    Hook, MapDef, MapKind, Program, ProgramSet, MAX_MAPS, MAX_MAP_BYTES, MAX_PROGRAMS, PSEUDO_MAP,
};
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SectionIndex};

/// Why an object could not be loaded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LoadError {
    #[error("{0}: not a BPF ELF object: {1}")]
    Elf(String, String),
    #[error("{0}: section `{1}` is not a hook of this program type (mk/task_begin, mk/task_end, mk/dep_wait)")]
    UnknownHook(String, String),
    #[error("{0}: hook {1} has two programs")]
    DuplicateHook(String, String),
    #[error("{0}: no program section")]
    NoPrograms(String),
    #[error("{0}: map `{1}`: {2}")]
    BadMap(String, String, String),
    #[error("{0}: section `{1}` offset {2}: {3}")]
    BadRelocation(String, String, u64, String),
    #[error("{0}: {1}")]
    Limit(String, String),
}

const MAP_DEF_BYTES: u64 = 16;

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// Parses `elf` (named `name` in errors) into a program set.
pub fn load(name: &str, elf: &[u8]) -> Result<ProgramSet, LoadError> {
    let n = || name.to_string();
    let file = object::File::parse(elf).map_err(|e| LoadError::Elf(n(), e.to_string()))?;
    if file.architecture() != object::Architecture::Bpf {
        return Err(LoadError::Elf(
            n(),
            format!("architecture {:?}", file.architecture()),
        ));
    }
    // Maps: one symbol per declaration in section `maps`, in offset order.
    let maps_section = file.section_by_name("maps");
    let mut maps: Vec<(u64, MapDef)> = Vec::new();
    if let Some(sec) = &maps_section {
        let data = sec.data().map_err(|e| LoadError::Elf(n(), e.to_string()))?;
        for sym in file.symbols() {
            if sym.section_index() != Some(sec.index()) || sym.name().unwrap_or("").is_empty() {
                continue;
            }
            let map_name = sym.name().unwrap_or("").to_string();
            let off = sym.address();
            if sym.size() != MAP_DEF_BYTES || off % MAP_DEF_BYTES != 0 {
                return Err(LoadError::BadMap(
                    n(),
                    map_name,
                    format!("a declaration is {MAP_DEF_BYTES} bytes (struct mk_map_def)"),
                ));
            }
            let o = off as usize;
            if o + 16 > data.len() {
                return Err(LoadError::BadMap(n(), map_name, "outside section".into()));
            }
            let (kind, key, value, entries) = (
                u32_at(data, o),
                u32_at(data, o + 4),
                u32_at(data, o + 8),
                u32_at(data, o + 12),
            );
            let kind = match kind {
                2 => MapKind::Array,
                27 => MapKind::Ring,
                k => {
                    return Err(LoadError::BadMap(
                        n(),
                        map_name,
                        format!("type {k}: only MK_MAP_ARRAY (2) and MK_MAP_RING (27)"),
                    ))
                }
            };
            let key_ok = match kind {
                MapKind::Array => key == 4,
                MapKind::Ring => key == 0,
            };
            if !key_ok || value == 0 || value % 4 != 0 || entries == 0 {
                return Err(LoadError::BadMap(
                    n(),
                    map_name,
                    format!(
                        "key {key} / value {value} / entries {entries}: arrays have 4-byte keys, \
                         rings none; values are non-empty multiples of 4 bytes"
                    ),
                ));
            }
            maps.push((
                off,
                MapDef {
                    name: map_name,
                    kind,
                    key_size: key,
                    value_size: value,
                    max_entries: entries,
                },
            ));
        }
    }
    maps.sort_by_key(|(o, _)| *o);
    let map_offsets: Vec<u64> = maps.iter().map(|(o, _)| *o).collect();
    let maps: Vec<MapDef> = maps.into_iter().map(|(_, m)| m).collect();
    if maps.len() > MAX_MAPS {
        return Err(LoadError::Limit(
            n(),
            format!("{} maps (at most {MAX_MAPS})", maps.len()),
        ));
    }
    let bytes: usize = maps.iter().map(MapDef::storage_bytes).sum();
    if bytes > MAX_MAP_BYTES {
        return Err(LoadError::Limit(
            n(),
            format!("{bytes} bytes of maps (at most {MAX_MAP_BYTES})"),
        ));
    }
    let maps_index: Option<SectionIndex> = maps_section.as_ref().map(|s| s.index());
    let mut programs: Vec<Program> = Vec::new();
    for sec in file.sections() {
        let sname = sec.name().unwrap_or("").to_string();
        if sec.kind() != object::SectionKind::Text || sec.size() == 0 {
            continue;
        }
        let hook =
            Hook::from_section(&sname).ok_or_else(|| LoadError::UnknownHook(n(), sname.clone()))?;
        if programs.iter().any(|p| p.hook == hook) {
            return Err(LoadError::DuplicateHook(n(), sname));
        }
        let mut code = sec
            .data()
            .map_err(|e| LoadError::Elf(n(), e.to_string()))?
            .to_vec();
        if code.len() % 8 != 0 {
            return Err(LoadError::Elf(
                n(),
                format!("section `{sname}` is not a whole number of instructions"),
            ));
        }
        for (off, rel) in sec.relocations() {
            let bad = |why: String| LoadError::BadRelocation(n(), sname.clone(), off, why);
            let RelocationTarget::Symbol(si) = rel.target() else {
                return Err(bad("relocation not against a symbol".into()));
            };
            let sym = file.symbol_by_index(si).map_err(|e| bad(e.to_string()))?;
            if sym.section_index().is_none() || sym.section_index() != maps_index {
                let target = sym
                    .section_index()
                    .and_then(|i| file.section_by_index(i).ok())
                    .and_then(|s| s.name().ok().map(str::to_string))
                    .unwrap_or_else(|| sym.name().unwrap_or("?").to_string());
                return Err(bad(format!(
                    "refers to `{target}`: globals other than map declarations are not supported"
                )));
            }
            let map = map_offsets
                .iter()
                .position(|&o| o == sym.address())
                .ok_or_else(|| bad("refers into `maps` but not to a declaration".into()))?;
            let at = off as usize;
            if !at.is_multiple_of(8) || at + 16 > code.len() || code[at] != 0x18 {
                return Err(bad("a map reference must be an lddw".into()));
            }
            code[at + 1] = (code[at + 1] & 0x0f) | (PSEUDO_MAP << 4);
            code[at + 4..at + 8].copy_from_slice(&(map as u32).to_le_bytes());
        }
        let prog_name = file
            .symbols()
            .find(|s| s.section_index() == Some(sec.index()) && s.address() == 0 && s.is_global())
            .and_then(|s| s.name().ok().map(str::to_string))
            .unwrap_or_else(|| sname.clone());
        programs.push(Program {
            name: prog_name,
            hook,
            code,
        });
    }
    if programs.is_empty() {
        return Err(LoadError::NoPrograms(n()));
    }
    if programs.len() > MAX_PROGRAMS {
        return Err(LoadError::Limit(
            n(),
            format!("{} programs", programs.len()),
        ));
    }
    programs.sort_by_key(|p| p.hook);
    Ok(ProgramSet {
        name: name.to_string(),
        programs,
        maps,
    })
}
