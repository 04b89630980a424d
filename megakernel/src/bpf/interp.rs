//! The reference interpreter of verified hook programs: the semantics the
//! simulator runs and the device interpreter (`kernels/src/cuda/mk_bpf.cu`)
//! mirrors instruction for instruction. Pointers are tagged 64-bit values
//! (region in bits 60–63, map index in bits 48–55, byte offset below), and
//! every access is bounds-checked again at run time, so even a program the
//! verifier should not have passed faults cleanly instead of corrupting
//! memory.

use super::abi::{
    Context, MapKind, ProgramSet, CTX_SIZE, HELPER_MAP_LOOKUP, HELPER_MAP_UPDATE,
    HELPER_RING_OUTPUT, PSEUDO_MAP, RING_HEADER, STACK_SIZE,
};

const TAG_SHIFT: u32 = 60;
const TAG_CTX: u64 = 1;
const TAG_STACK: u64 = 2;
const TAG_MAP_VALUE: u64 = 3;
const TAG_MAP: u64 = 4;
const MAP_SHIFT: u32 = 48;
const OFFSET_MASK: u64 = (1 << MAP_SHIFT) - 1;

/// The maps of one attached program set: one arena, laid out by [`ProgramSet::layout`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Maps {
    pub offsets: Vec<usize>,
    pub arena: Vec<u8>,
}

impl Maps {
    pub fn new(set: &ProgramSet) -> Maps {
        let (offsets, size) = set.layout();
        Maps {
            offsets,
            arena: vec![0; size],
        }
    }

    /// Entry `i` of array map `map` as a u64 (value_size 8) or u32 (value_size 4).
    pub fn value(&self, set: &ProgramSet, map: usize, i: usize) -> u64 {
        let d = &set.maps[map];
        let at = self.offsets[map] + i * d.value_size as usize;
        read_le(&self.arena[at..at + (d.value_size as usize).min(8)])
    }

    /// Every entry of array map `name`.
    pub fn array(&self, set: &ProgramSet, name: &str) -> Vec<u64> {
        let Some(m) = set.map_index(name) else {
            return Vec::new();
        };
        (0..set.maps[m].max_entries as usize)
            .map(|i| self.value(set, m, i))
            .collect()
    }

    /// (records written, records dropped) of ring map `map`.
    pub fn ring_counts(&self, set: &ProgramSet, map: usize) -> (u32, u32) {
        let at = self.offsets[map];
        let reserved = read_le(&self.arena[at..at + 4]) as u32;
        let dropped = read_le(&self.arena[at + 4..at + 8]) as u32;
        (reserved.min(set.maps[map].max_entries), dropped)
    }

    /// The records of ring map `name`.
    pub fn ring(&self, set: &ProgramSet, name: &str) -> Vec<Vec<u8>> {
        let Some(m) = set.map_index(name) else {
            return Vec::new();
        };
        let (n, _) = self.ring_counts(set, m);
        let vs = set.maps[m].value_size as usize;
        let base = self.offsets[m] + RING_HEADER;
        (0..n as usize)
            .map(|i| self.arena[base + i * vs..base + (i + 1) * vs].to_vec())
            .collect()
    }
}

fn read_le(b: &[u8]) -> u64 {
    let mut v = [0u8; 8];
    v[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(v)
}

/// What one run did (the simulator's cost model counts these).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    pub insns: u64,
    pub helper_calls: u64,
    /// Ring outputs refused for lack of room.
    pub ring_dropped: u64,
}

/// A run-time fault (a verified program never raises one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("insn {insn}: {what}")]
pub struct Fault {
    pub insn: usize,
    pub what: String,
}

/// 64- or 32-bit ALU operation `op` (the BPF_OP bits) on scalars; division
/// and modulo by zero give 0 and the dividend (eBPF semantics) although the
/// verifier rejects any that is not excluded.
pub fn alu(op: u8, a: u64, b: u64, is64: bool) -> u64 {
    let (a, b) = if is64 {
        (a, b)
    } else {
        (a as u32 as u64, b as u32 as u64)
    };
    let sh = if is64 { b & 63 } else { b & 31 };
    let r = match op {
        0x00 => a.wrapping_add(b),
        0x10 => a.wrapping_sub(b),
        0x20 => a.wrapping_mul(b),
        0x30 => a.checked_div(b).unwrap_or(0),
        0x40 => a | b,
        0x50 => a & b,
        0x60 => a.wrapping_shl(sh as u32),
        0x70 => {
            if is64 {
                a >> sh
            } else {
                ((a as u32) >> sh) as u64
            }
        }
        0x80 => a.wrapping_neg(),
        0x90 => a.checked_rem(b).unwrap_or(a),
        0xa0 => a ^ b,
        0xb0 => b,
        0xc0 => {
            if is64 {
                ((a as i64) >> sh) as u64
            } else {
                ((a as u32 as i32) >> sh) as u32 as u64
            }
        }
        _ => 0,
    };
    if is64 {
        r
    } else {
        r as u32 as u64
    }
}

/// Whether conditional jump `op` (BPF_OP bits of a BPF_JMP) is taken.
pub fn jump_taken(op: u8, a: u64, b: u64) -> bool {
    match op {
        0x10 => a == b,
        0x20 => a > b,
        0x30 => a >= b,
        0x40 => a & b != 0,
        0x50 => a != b,
        0x60 => (a as i64) > (b as i64),
        0x70 => (a as i64) >= (b as i64),
        0xa0 => a < b,
        0xb0 => a <= b,
        0xc0 => (a as i64) < (b as i64),
        0xd0 => (a as i64) <= (b as i64),
        _ => false,
    }
}

/// Bytes a load or store of opcode `opc` moves (its BPF_SIZE bits).
pub fn access_size(opc: u8) -> usize {
    match opc & 0x18 {
        0x00 => 4,
        0x08 => 2,
        0x10 => 1,
        _ => 8,
    }
}

struct Machine<'a> {
    set: &'a ProgramSet,
    ctx: [u8; CTX_SIZE],
    stack: [u8; STACK_SIZE],
    maps: &'a mut Maps,
}

impl Machine<'_> {
    /// The bytes `size` long at tagged address `addr`.
    fn slice(&mut self, addr: u64, size: usize) -> Option<&mut [u8]> {
        let off = (addr & OFFSET_MASK) as usize;
        match addr >> TAG_SHIFT {
            TAG_CTX => self.ctx.get_mut(off..off.checked_add(size)?),
            TAG_STACK => self.stack.get_mut(off..off.checked_add(size)?),
            TAG_MAP_VALUE => {
                let m = ((addr >> MAP_SHIFT) & 0xff) as usize;
                let d = self.set.maps.get(m)?;
                let len = d.storage_bytes();
                if off.checked_add(size)? > len {
                    return None;
                }
                let base = self.maps.offsets[m];
                self.maps.arena.get_mut(base + off..base + off + size)
            }
            _ => None,
        }
    }

    fn load(&mut self, addr: u64, size: usize) -> Option<u64> {
        self.slice(addr, size).map(|b| read_le(b))
    }

    fn store(&mut self, addr: u64, size: usize, v: u64) -> Option<()> {
        let b = self.slice(addr, size)?;
        b.copy_from_slice(&v.to_le_bytes()[..size]);
        Some(())
    }

    fn helper(&mut self, id: i32, r: &[u64; 11], stats: &mut RunStats) -> Option<u64> {
        stats.helper_calls += 1;
        let map_of = |v: u64| -> Option<usize> {
            (v >> TAG_SHIFT == TAG_MAP).then_some((v & 0xff) as usize)
        };
        match id {
            HELPER_MAP_LOOKUP | HELPER_MAP_UPDATE => {
                let m = map_of(r[1])?;
                let d = self.set.maps.get(m)?.clone();
                if d.kind != MapKind::Array {
                    return None;
                }
                let key = self.load(r[2], 4)? as u32;
                if key >= d.max_entries {
                    return Some(if id == HELPER_MAP_LOOKUP { 0 } else { u64::MAX });
                }
                let off = key as u64 * d.value_size as u64;
                let value = (TAG_MAP_VALUE << TAG_SHIFT) | ((m as u64) << MAP_SHIFT) | off;
                if id == HELPER_MAP_LOOKUP {
                    return Some(value);
                }
                let src = self.slice(r[3], d.value_size as usize)?.to_vec();
                self.slice(value, d.value_size as usize)?
                    .copy_from_slice(&src);
                Some(0)
            }
            HELPER_RING_OUTPUT => {
                let m = map_of(r[1])?;
                let d = self.set.maps.get(m)?.clone();
                let size = r[3] as usize;
                if d.kind != MapKind::Ring || size == 0 || size > d.value_size as usize {
                    return None;
                }
                let data = self.slice(r[2], size)?.to_vec();
                let head = (TAG_MAP_VALUE << TAG_SHIFT) | ((m as u64) << MAP_SHIFT);
                let slot = self.load(head, 4)?;
                self.store(head, 4, slot + 1)?;
                if slot >= d.max_entries as u64 {
                    let dropped = self.load(head + 4, 4)?;
                    self.store(head + 4, 4, dropped + 1)?;
                    stats.ring_dropped += 1;
                    return Some(u64::MAX);
                }
                let at = head + (RING_HEADER as u64) + slot * d.value_size as u64;
                self.slice(at, size)?.copy_from_slice(&data);
                Some(0)
            }
            _ => None,
        }
    }
}

/// Runs program `code` of `set` on `ctx` against `maps`.
pub fn run(
    set: &ProgramSet,
    code: &[u8],
    ctx: &Context,
    maps: &mut Maps,
) -> Result<RunStats, Fault> {
    let mut m = Machine {
        set,
        ctx: ctx.to_bytes(),
        stack: [0; STACK_SIZE],
        maps,
    };
    let mut r = [0u64; 11];
    r[1] = TAG_CTX << TAG_SHIFT;
    r[10] = (TAG_STACK << TAG_SHIFT) | STACK_SIZE as u64;
    let n = code.len() / 8;
    let mut pc = 0usize;
    let mut stats = RunStats::default();
    loop {
        if pc >= n {
            return Err(Fault {
                insn: pc,
                what: "ran off the end".into(),
            });
        }
        let i = rbpf::ebpf::get_insn(code, pc);
        stats.insns += 1;
        let fault = |what: &str| Fault {
            insn: pc,
            what: what.into(),
        };
        let (dst, src) = (i.dst as usize, i.src as usize);
        if dst > 10 || src > 10 {
            return Err(fault("bad register"));
        }
        let imm = i.imm as i64 as u64;
        let class = i.opc & 0x07;
        let op = i.opc & 0xf0;
        let x = i.opc & 0x08 != 0;
        match class {
            0x04 | 0x07 => {
                let is64 = class == 0x07;
                let b = if x { r[src] } else { imm };
                r[dst] = if op == 0xd0 {
                    // Byte swap (BPF_END): to little endian is the identity here.
                    let v = r[dst];
                    let big = x;
                    match (i.imm, big) {
                        (16, false) => v as u16 as u64,
                        (32, false) => v as u32 as u64,
                        (16, true) => (v as u16).swap_bytes() as u64,
                        (32, true) => (v as u32).swap_bytes() as u64,
                        (_, true) => v.swap_bytes(),
                        _ => v,
                    }
                } else {
                    alu(op, r[dst], b, is64)
                };
            }
            0x05 => match op {
                0x00 => {
                    pc = (pc as i64 + 1 + i.off as i64) as usize;
                    continue;
                }
                0x80 => {
                    let v = m
                        .helper(i.imm, &r, &mut stats)
                        .ok_or_else(|| fault("helper call on bad arguments"))?;
                    r[0] = v;
                }
                0x90 => return Ok(stats),
                _ => {
                    let b = if x { r[src] } else { imm };
                    if jump_taken(op, r[dst], b) {
                        pc = (pc as i64 + 1 + i.off as i64) as usize;
                        continue;
                    }
                }
            },
            0x01 => {
                let a = r[src].wrapping_add(i.off as i64 as u64);
                r[dst] = m
                    .load(a, access_size(i.opc))
                    .ok_or_else(|| fault("load out of bounds"))?;
            }
            0x02 | 0x03 => {
                let a = r[dst].wrapping_add(i.off as i64 as u64);
                let v = if class == 0x02 { imm } else { r[src] };
                let size = access_size(i.opc);
                let v = if i.opc & 0xe0 == 0xc0 {
                    let old = m.load(a, size).ok_or_else(|| fault("xadd out of bounds"))?;
                    old.wrapping_add(v)
                } else {
                    v
                };
                m.store(a, size, v)
                    .ok_or_else(|| fault("store out of bounds"))?;
            }
            0x00 if i.opc == 0x18 => {
                let hi = rbpf::ebpf::get_insn(code, pc + 1).imm as u32 as u64;
                r[dst] = if i.src == PSEUDO_MAP {
                    (TAG_MAP << TAG_SHIFT) | (i.imm as u32 as u64)
                } else {
                    (hi << 32) | (i.imm as u32 as u64)
                };
                pc += 2;
                continue;
            }
            _ => return Err(fault("unsupported opcode")),
        }
        pc += 1;
    }
}
