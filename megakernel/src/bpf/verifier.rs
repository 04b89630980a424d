//! The host-side verifier of the hook program types. Every path through a
//! program is explored with an abstract state (register kinds, scalar ranges,
//! initialised stack bytes, spilled registers); a program passes only if
//! every path is safe:
//!
//! - bounded execution: no back edge at all (the control-flow graph is a DAG,
//!   so a program runs at most [`MAX_INSNS`] instructions; clang unrolls
//!   loops with a constant trip count), no unreachable instruction;
//! - registers are read only after they were written; r10 is read-only;
//! - context reads only inside one declared field ([`CTX_FIELDS`]), and no
//!   context write from an observation program (a scheduling program may
//!   write its writable fields);
//! - map access only through the helpers, with the key and value in bounds
//!   and initialised, and map values dereferenced only after a NULL check
//!   and only inside the value;
//! - stack accesses inside the 512-byte frame, reads only of written bytes;
//! - no division or modulo by a value that may be zero;
//! - no pointer arithmetic but adding a known constant, no pointer leaked
//!   into a map, r0 a scalar at exit.
//!
//! A rejection names the instruction (index and disassembly) and the reason.
//! Decoding uses `rbpf`'s instruction decoder and disassembler; the checks
//! are this program type's own (rbpf's verifier checks encodings only).

use super::abi::{
    MapKind, Program, ProgramSet, ProgramType, CTX_FIELDS, CTX_SIZE, HELPER_MAP_LOOKUP,
    HELPER_MAP_UPDATE, HELPER_RING_OUTPUT, MAX_INSNS, PSEUDO_MAP, STACK_SIZE,
};
use super::interp::{access_size as size_of, alu};
use rbpf::ebpf::{get_insn, Insn};

/// Why a program was rejected, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{program}: insn {insn} ({text}): {reason}")]
pub struct Rejection {
    pub program: String,
    pub insn: usize,
    pub text: String,
    pub reason: String,
}

/// Paths explored before a program is rejected as too complex to verify.
const MAX_STATES: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reg {
    Uninit,
    Scalar { min: u64, max: u64 },
    Ctx { off: i64 },
    Stack { off: i64 },
    MapPtr { map: usize },
    MapValue { map: usize, off: i64 },
    MapValueOrNull { map: usize, id: usize },
}

const UNKNOWN: Reg = Reg::Scalar {
    min: 0,
    max: u64::MAX,
};

fn exact(v: u64) -> Reg {
    Reg::Scalar { min: v, max: v }
}

impl Reg {
    fn is_pointer(self) -> bool {
        !matches!(self, Reg::Uninit | Reg::Scalar { .. })
    }
    fn constant(self) -> Option<u64> {
        match self {
            Reg::Scalar { min, max } if min == max => Some(min),
            _ => None,
        }
    }
    /// Whether every value `other` may hold is one `self` may hold. Every
    /// check is monotone in that order (a narrower range, the same pointer,
    /// a register an unset one stood for), and an unset register that is
    /// read rejects the whole program, so a state covered by one already
    /// explored from the same instruction needs no exploring of its own.
    fn covers(self, other: Reg) -> bool {
        match (self, other) {
            (Reg::Uninit, _) => true,
            (Reg::Scalar { min, max }, Reg::Scalar { min: lo, max: hi }) => min <= lo && hi <= max,
            (a, b) => a == b,
        }
    }
}

#[derive(Debug, Clone)]
struct State {
    regs: [Reg; 11],
    stack_init: [bool; STACK_SIZE],
    spill: [Option<Reg>; STACK_SIZE / 8],
}

impl State {
    /// [`Reg::covers`] for every register and stack byte: what `self` had
    /// written, `other` has written too, with values `self`'s cover.
    fn covers(&self, other: &State) -> bool {
        self.regs.iter().zip(&other.regs).all(|(a, b)| a.covers(*b))
            && self
                .stack_init
                .iter()
                .zip(&other.stack_init)
                .all(|(&a, &b)| !a || b)
            && self
                .spill
                .iter()
                .zip(&other.spill)
                .all(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => a.covers(*b),
                    // An unspilled written slot reads as an unknown scalar.
                    (Some(a), None) => a.covers(UNKNOWN),
                    (None, Some(b)) => !b.is_pointer(),
                    (None, None) => true,
                })
    }
}

/// States kept per jump target for pruning (beyond it, states are explored without being kept).
const KEPT_PER_TARGET: usize = 64;

type Check<T> = Result<T, String>;

struct Verifier<'a> {
    set: &'a ProgramSet,
    prog: &'a Program,
    ptype: ProgramType,
    insns: Vec<Insn>,
}

/// Unsigned range of `op` on two scalar ranges (sound over-approximation).
fn scalar_range(op: u8, a: (u64, u64), b: (u64, u64), is64: bool) -> (u64, u64) {
    let full = if is64 { u64::MAX } else { u32::MAX as u64 };
    if a.0 == a.1 && b.0 == b.1 {
        let v = alu(op, a.0, b.0, is64);
        return (v, v);
    }
    let r = match op {
        0x00 => match (
            a.1.checked_add(b.1),
            is64 || a.1.saturating_add(b.1) <= full,
        ) {
            (Some(hi), true) => (a.0 + b.0, hi),
            _ => (0, full),
        },
        0x10 if a.0 >= b.1 => (a.0 - b.1, a.1 - b.0),
        0x20 => match a.1.checked_mul(b.1) {
            Some(hi) if hi <= full => (a.0 * b.0, hi),
            _ => (0, full),
        },
        0x30 if b.0 > 0 => (a.0 / b.1, a.1 / b.0),
        0x90 if b.0 > 0 => (0, b.1 - 1),
        0x50 => (0, a.1.min(b.1)),
        0x70 if b.0 == b.1 && b.0 < if is64 { 64 } else { 32 } => (a.0 >> b.0, a.1 >> b.0),
        0xb0 => b,
        _ => (0, full),
    };
    if !is64 && r.1 > full {
        (0, full)
    } else {
        r
    }
}

impl<'a> Verifier<'a> {
    fn text(&self, pc: usize) -> String {
        let end = (pc + 2).min(self.insns.len()) * 8;
        rbpf::disassembler::to_insn_vec(&self.prog.code[pc * 8..end])
            .first()
            .map(|h| h.desc.clone())
            .unwrap_or_default()
    }

    fn reject(&self, pc: usize, reason: impl Into<String>) -> Rejection {
        Rejection {
            program: format!("{}:{}", self.set.name, self.prog.name),
            insn: pc,
            text: if pc < self.insns.len() {
                self.text(pc)
            } else {
                "end of program".into()
            },
            reason: reason.into(),
        }
    }

    /// Structure: lengths, opcodes, registers, jump targets (forward only), reachability.
    fn structure(&self) -> Result<(), Rejection> {
        let n = self.insns.len();
        if n == 0 {
            return Err(self.reject(0, "empty program"));
        }
        if n > MAX_INSNS {
            return Err(self.reject(MAX_INSNS, format!("{n} instructions (at most {MAX_INSNS})")));
        }
        let mut second_half = vec![false; n];
        let mut pc = 0;
        while pc < n {
            if self.insns[pc].opc == 0x18 {
                if pc + 1 >= n {
                    return Err(self.reject(pc, "lddw without its second half"));
                }
                second_half[pc + 1] = true;
                pc += 2;
            } else {
                pc += 1;
            }
        }
        let mut reach = vec![false; n];
        reach[0] = true;
        for pc in 0..n {
            if second_half[pc] || !reach[pc] {
                continue;
            }
            let i = &self.insns[pc];
            if i.dst > 10 || i.src > 10 {
                return Err(self.reject(pc, "register number above r10"));
            }
            let class = i.opc & 7;
            let op = i.opc & 0xf0;
            let mut next = vec![];
            match class {
                0x05 if op == 0x90 => {}
                0x05 if op == 0x80 => next.push(pc + 1),
                0x05 => {
                    if !matches!(op, 0x00..=0x70 | 0xa0..=0xd0) {
                        return Err(self.reject(pc, "unknown jump opcode"));
                    }
                    let target = pc as i64 + 1 + i.off as i64;
                    if target <= pc as i64 {
                        return Err(self.reject(
                            pc,
                            format!(
                                "back edge to insn {target}: loops are not allowed \
                                 (the control-flow graph must be a DAG)"
                            ),
                        ));
                    }
                    if target as usize >= n {
                        return Err(self.reject(pc, format!("jump to {target}, past the end")));
                    }
                    if second_half[target as usize] {
                        return Err(self.reject(pc, "jump into the middle of an lddw"));
                    }
                    next.push(target as usize);
                    if op != 0x00 {
                        next.push(pc + 1);
                    }
                }
                0x06 => return Err(self.reject(pc, "32-bit jumps (BPF_JMP32) are not supported")),
                0x00 if i.opc == 0x18 => next.push(pc + 2),
                0x00 => {
                    return Err(self.reject(pc, "packet access (BPF_ABS / BPF_IND) is not allowed"))
                }
                _ => next.push(pc + 1),
            }
            for t in next {
                if t >= n {
                    return Err(self.reject(pc, "execution falls off the end of the program"));
                }
                reach[t] = true;
            }
        }
        if let Some(pc) = (0..n).find(|&p| !reach[p] && !second_half[p]) {
            return Err(self.reject(pc, "unreachable instruction"));
        }
        Ok(())
    }

    fn read(&self, st: &State, r: u8) -> Check<Reg> {
        match st.regs[r as usize] {
            Reg::Uninit => Err(format!("r{r} is read before it was written")),
            v => Ok(v),
        }
    }

    /// Checks an access of `size` bytes at `base + off`; returns the value a load yields.
    fn access(
        &self,
        st: &mut State,
        base: Reg,
        off: i64,
        size: usize,
        write: Option<Reg>,
    ) -> Check<Reg> {
        match base {
            Reg::Ctx { off: o } => {
                let at = o + off;
                let field = CTX_FIELDS.iter().find(|f| {
                    at >= f.offset as i64 && at + size as i64 <= (f.offset + f.size) as i64
                });
                let Some(f) = field else {
                    return Err(if at < 0 || at + size as i64 > CTX_SIZE as i64 {
                        format!(
                            "context access at offset {at} ({size} bytes) is outside the \
                             {CTX_SIZE}-byte context"
                        )
                    } else {
                        format!("context access at offset {at} ({size} bytes) is not inside one declared field")
                    });
                };
                if write.is_some() {
                    return Err(match (self.ptype, f.scheduler_state, f.writable) {
                        (ProgramType::Observation, true, _) => format!(
                            "write to scheduler-state field `{}` from an observation program",
                            f.name
                        ),
                        (ProgramType::Scheduling, _, true) => return Ok(UNKNOWN),
                        _ => format!("write to read-only context field `{}`", f.name),
                    });
                }
                Ok(Reg::Scalar {
                    min: 0,
                    max: if size == 8 {
                        u64::MAX
                    } else {
                        (1u64 << (8 * size)) - 1
                    },
                })
            }
            Reg::Stack { off: o } => {
                let at = o + off;
                if at < -(STACK_SIZE as i64) || at + size as i64 > 0 {
                    return Err(format!(
                        "stack access at fp{at:+} ({size} bytes) is outside the {STACK_SIZE}-byte frame"
                    ));
                }
                let lo = (STACK_SIZE as i64 + at) as usize;
                let slot = lo / 8;
                let aligned = lo.is_multiple_of(8) && size == 8;
                if let Some(v) = write {
                    for b in &mut st.stack_init[lo..lo + size] {
                        *b = true;
                    }
                    for s in lo / 8..(lo + size).div_ceil(8) {
                        st.spill[s] = None;
                    }
                    if aligned {
                        st.spill[slot] = Some(v);
                    } else if v.is_pointer() {
                        return Err(
                            "a pointer is spilled to the stack unaligned or narrowed".into()
                        );
                    }
                    return Ok(v);
                }
                if !st.stack_init[lo..lo + size].iter().all(|&b| b) {
                    return Err(format!(
                        "read of uninitialised stack at fp{at:+} ({size} bytes)"
                    ));
                }
                if aligned {
                    if let Some(v) = st.spill[slot] {
                        return Ok(v);
                    }
                }
                if (lo / 8..(lo + size).div_ceil(8))
                    .any(|s| st.spill[s].is_some_and(|r| r.is_pointer()))
                {
                    return Err("partial read of a spilled pointer".into());
                }
                Ok(UNKNOWN)
            }
            Reg::MapValue { map, off: o } => {
                let d = &self.set.maps[map];
                let at = o + off;
                if d.kind != MapKind::Array {
                    return Err(format!(
                        "map `{}` is a ring: it is written only by mk_ring_output",
                        d.name
                    ));
                }
                if at < 0 || at + size as i64 > d.value_size as i64 {
                    return Err(format!(
                        "access at offset {at} ({size} bytes) of a value of map `{}` ({} bytes)",
                        d.name, d.value_size
                    ));
                }
                if write.is_some_and(|v| v.is_pointer()) {
                    return Err(format!(
                        "a pointer is stored into map `{}` (it would leak an address)",
                        d.name
                    ));
                }
                Ok(UNKNOWN)
            }
            Reg::MapValueOrNull { map, .. } => Err(format!(
                "dereference of a map `{}` lookup result that may be NULL (check it first)",
                self.set.maps[map].name
            )),
            Reg::MapPtr { map } => Err(format!(
                "map `{}` accessed directly: maps are reached only through helpers",
                self.set.maps[map].name
            )),
            Reg::Scalar { .. } | Reg::Uninit => Err("memory access through a non-pointer".into()),
        }
    }

    /// `size` readable, initialised bytes at pointer `p` (a helper argument).
    fn readable(&self, st: &mut State, p: Reg, size: usize, what: &str) -> Check<()> {
        match p {
            Reg::Stack { .. } | Reg::MapValue { .. } => {
                for k in 0..size {
                    self.access(st, p, k as i64, 1, None)
                        .map_err(|e| format!("{what}: {e}"))?;
                }
                Ok(())
            }
            _ => Err(format!("{what} must point to the stack or a map value")),
        }
    }

    fn call(&self, st: &mut State, pc: usize, id: i32) -> Check<()> {
        let map_arg = |st: &State, kind: MapKind| -> Check<usize> {
            match st.regs[1] {
                Reg::MapPtr { map } if self.set.maps[map].kind == kind => Ok(map),
                Reg::MapPtr { map } => Err(format!(
                    "map `{}` is not of the kind this helper takes",
                    self.set.maps[map].name
                )),
                _ => Err("r1 must be a map reference".into()),
            }
        };
        match id {
            HELPER_MAP_LOOKUP | HELPER_MAP_UPDATE => {
                let map = map_arg(st, MapKind::Array)?;
                let d = self.set.maps[map].clone();
                let key = self.read(st, 2)?;
                self.readable(st, key, d.key_size as usize, "the key (r2)")?;
                if id == HELPER_MAP_UPDATE {
                    let v = self.read(st, 3)?;
                    self.readable(st, v, d.value_size as usize, "the value (r3)")?;
                    self.read(st, 4)?;
                    st.regs[0] = UNKNOWN;
                } else {
                    st.regs[0] = Reg::MapValueOrNull { map, id: pc };
                }
            }
            HELPER_RING_OUTPUT => {
                let map = map_arg(st, MapKind::Ring)?;
                let vs = self.set.maps[map].value_size as u64;
                let Reg::Scalar { min, max } = self.read(st, 3)? else {
                    return Err("the size (r3) must be a scalar".into());
                };
                if min == 0 || max > vs {
                    return Err(format!(
                        "the size (r3) may be {min}..={max}: it must be 1..={vs} (the ring's record)"
                    ));
                }
                let data = self.read(st, 2)?;
                self.readable(st, data, max as usize, "the data (r2)")?;
                self.read(st, 4)?;
                st.regs[0] = UNKNOWN;
            }
            other => {
                return Err(format!(
                    "call to helper {other}, which this program type does not offer"
                ))
            }
        }
        for r in 1..=5 {
            st.regs[r] = Reg::Uninit;
        }
        Ok(())
    }

    fn alu_step(&self, st: &mut State, i: &Insn) -> Check<()> {
        let is64 = i.opc & 7 == 0x07;
        let op = i.opc & 0xf0;
        if i.dst == 10 {
            return Err("r10 (the frame pointer) is read-only".into());
        }
        let src = if i.opc & 0x08 != 0 && op != 0xd0 {
            self.read(st, i.src)?
        } else if is64 {
            exact(i.imm as i64 as u64)
        } else {
            exact(i.imm as u32 as u64)
        };
        if op == 0xb0 {
            if !is64 && src.is_pointer() {
                return Err("a pointer is narrowed to 32 bits".into());
            }
            st.regs[i.dst as usize] = match src {
                Reg::Scalar { min, max } if !is64 && max > u32::MAX as u64 => {
                    let _ = min;
                    Reg::Scalar {
                        min: 0,
                        max: u32::MAX as u64,
                    }
                }
                v => v,
            };
            return Ok(());
        }
        let dst = self.read(st, i.dst)?;
        if op == 0xd0 {
            if dst.is_pointer() {
                return Err("byte swap of a pointer".into());
            }
            st.regs[i.dst as usize] = UNKNOWN;
            return Ok(());
        }
        if matches!(op, 0x30 | 0x90) {
            match src {
                Reg::Scalar { min, .. } if min > 0 => {}
                Reg::Scalar { .. } => {
                    return Err(format!(
                        "{} by a value that may be zero (guard the divisor first)",
                        if op == 0x30 { "division" } else { "modulo" }
                    ))
                }
                _ => return Err("division by a pointer".into()),
            }
        }
        let add_off = |p: Reg, k: i64| -> Check<Reg> {
            Ok(match p {
                Reg::Ctx { off } => Reg::Ctx { off: off + k },
                Reg::Stack { off } => Reg::Stack { off: off + k },
                Reg::MapValue { map, off } => Reg::MapValue { map, off: off + k },
                _ => return Err("arithmetic on a map reference or a possibly-NULL pointer".into()),
            })
        };
        let out = match (dst, src) {
            (Reg::Scalar { min: a0, max: a1 }, Reg::Scalar { min: b0, max: b1 }) => {
                let (min, max) = scalar_range(op, (a0, a1), (b0, b1), is64);
                Reg::Scalar { min, max }
            }
            (p, s) if p.is_pointer() && !s.is_pointer() && is64 && matches!(op, 0x00 | 0x10) => {
                let k = s
                    .constant()
                    .ok_or("a pointer plus an unknown scalar (only constant offsets are allowed)")?
                    as i64;
                add_off(p, if op == 0x00 { k } else { -k })?
            }
            (s, p) if p.is_pointer() && !s.is_pointer() && is64 && op == 0x00 => {
                let k = s.constant().ok_or(
                    "a pointer plus an unknown scalar (only constant offsets are allowed)",
                )?;
                add_off(p, k as i64)?
            }
            _ => return Err("pointer arithmetic other than adding a constant".into()),
        };
        st.regs[i.dst as usize] = out;
        Ok(())
    }

    /// The states after a conditional jump: (taken, not taken); None where infeasible.
    fn branch(&self, st: &State, i: &Insn) -> Check<(Option<State>, Option<State>)> {
        let op = i.opc & 0xf0;
        let a = self.read(st, i.dst)?;
        let b = if i.opc & 0x08 != 0 {
            self.read(st, i.src)?
        } else {
            exact(i.imm as i64 as u64)
        };
        if let (Reg::MapValueOrNull { map, id }, Some(0), 0x10 | 0x50) = (a, b.constant(), op) {
            let with = |v: Reg| {
                let mut s = st.clone();
                for r in s.regs.iter_mut() {
                    if *r == a {
                        *r = v;
                    }
                }
                for r in s.spill.iter_mut().flatten() {
                    if matches!(*r, Reg::MapValueOrNull { id: j, .. } if j == id) {
                        *r = v;
                    }
                }
                s
            };
            let null = with(exact(0));
            let valid = with(Reg::MapValue { map, off: 0 });
            return Ok(if op == 0x10 {
                (Some(null), Some(valid))
            } else {
                (Some(valid), Some(null))
            });
        }
        if a.is_pointer() || b.is_pointer() {
            return Err("comparison of a pointer (only a lookup result against 0)".into());
        }
        let (Reg::Scalar { min, max }, Some(c)) = (a, b.constant()) else {
            return Ok((Some(st.clone()), Some(st.clone())));
        };
        let range = |lo: u64, hi: u64| (lo <= hi).then_some(Reg::Scalar { min: lo, max: hi });
        let eq = range(min.max(c), max.min(c));
        let ne = if c == min && c == max {
            None
        } else if c == min {
            range(min + 1, max)
        } else if c == max {
            range(min, max - 1)
        } else {
            Some(a)
        };
        let (taken, fall) = match op {
            0x10 => (eq, ne),
            0x50 => (ne, eq),
            0x20 => (
                c.checked_add(1).and_then(|c1| range(min.max(c1), max)),
                range(min, max.min(c)),
            ),
            0x30 => (
                range(min.max(c), max),
                c.checked_sub(1).and_then(|c1| range(min, max.min(c1))),
            ),
            0xa0 => (
                c.checked_sub(1).and_then(|c1| range(min, max.min(c1))),
                range(min.max(c), max),
            ),
            0xb0 => (
                range(min, max.min(c)),
                c.checked_add(1).and_then(|c1| range(min.max(c1), max)),
            ),
            _ => (Some(a), Some(a)),
        };
        let with = |v: Option<Reg>| {
            v.map(|v| {
                let mut s = st.clone();
                s.regs[i.dst as usize] = v;
                s
            })
        };
        Ok((with(taken), with(fall)))
    }

    fn explore(&self) -> Result<(), Rejection> {
        let mut init = State {
            regs: [Reg::Uninit; 11],
            stack_init: [false; STACK_SIZE],
            spill: [None; STACK_SIZE / 8],
        };
        init.regs[1] = Reg::Ctx { off: 0 };
        init.regs[10] = Reg::Stack { off: 0 };
        let mut work = vec![(0usize, init)];
        let mut visited = 0usize;
        // Where paths join (jump targets), a state covered by one already
        // explored from there is pruned: sequential branches then cost their
        // sum, not their product, as the kernel's verifier prunes.
        let mut target = vec![false; self.insns.len() + 1];
        for (pc, i) in self.insns.iter().enumerate() {
            if i.opc & 7 == 0x05 && !matches!(i.opc & 0xf0, 0x80 | 0x90) {
                let t = pc as i64 + 1 + i.off as i64;
                if let Some(slot) = usize::try_from(t).ok().and_then(|t| target.get_mut(t)) {
                    *slot = true;
                }
            }
        }
        let mut kept: Vec<Vec<State>> = vec![Vec::new(); self.insns.len() + 1];
        while let Some((pc, mut st)) = work.pop() {
            if target.get(pc).copied().unwrap_or(false) {
                if kept[pc].iter().any(|old| old.covers(&st)) {
                    continue;
                }
                if kept[pc].len() < KEPT_PER_TARGET {
                    kept[pc].push(st.clone());
                }
            }
            visited += 1;
            if visited > MAX_STATES {
                return Err(self.reject(
                    pc,
                    format!("more than {MAX_STATES} paths: too complex to verify"),
                ));
            }
            let i = &self.insns[pc];
            let class = i.opc & 7;
            let op = i.opc & 0xf0;
            let step: Check<Vec<(usize, State)>> = (|| match class {
                0x04 | 0x07 => {
                    self.alu_step(&mut st, i)?;
                    Ok(vec![(pc + 1, st.clone())])
                }
                0x05 => match op {
                    0x90 => match st.regs[0] {
                        Reg::Scalar { .. } => Ok(vec![]),
                        Reg::Uninit => Err("exit with r0 unset".into()),
                        _ => Err("exit returning a pointer".into()),
                    },
                    0x80 => {
                        if i.src != 0 {
                            return Err(
                                "calls to other functions are not allowed (helpers only)".into()
                            );
                        }
                        self.call(&mut st, pc, i.imm)?;
                        Ok(vec![(pc + 1, st.clone())])
                    }
                    0x00 => Ok(vec![((pc as i64 + 1 + i.off as i64) as usize, st.clone())]),
                    _ => {
                        let target = (pc as i64 + 1 + i.off as i64) as usize;
                        let (t, f) = self.branch(&st, i)?;
                        let mut v = vec![];
                        if let Some(t) = t {
                            v.push((target, t));
                        }
                        if let Some(f) = f {
                            v.push((pc + 1, f));
                        }
                        Ok(v)
                    }
                },
                0x01 => {
                    if i.opc & 0xe0 != 0x60 {
                        return Err("only BPF_MEM loads".into());
                    }
                    if i.dst == 10 {
                        return Err("r10 (the frame pointer) is read-only".into());
                    }
                    let base = self.read(&st, i.src)?;
                    let v = self.access(&mut st, base, i.off as i64, size_of(i.opc), None)?;
                    st.regs[i.dst as usize] = v;
                    Ok(vec![(pc + 1, st.clone())])
                }
                0x02 | 0x03 => {
                    let mode = i.opc & 0xe0;
                    let size = size_of(i.opc);
                    let v = if class == 0x02 {
                        exact(i.imm as i64 as u64)
                    } else {
                        self.read(&st, i.src)?
                    };
                    let base = self.read(&st, i.dst)?;
                    match mode {
                        0x60 => {}
                        0xc0 if class == 0x03 && i.imm == 0 && size >= 4 => {
                            if !matches!(base, Reg::MapValue { .. } | Reg::Stack { .. }) {
                                return Err("atomic add only on a map value or the stack".into());
                            }
                            if v.is_pointer() {
                                return Err("atomic add of a pointer".into());
                            }
                            self.access(&mut st, base, i.off as i64, size, None)?;
                        }
                        _ => return Err("only BPF_MEM stores and atomic add (no fetch)".into()),
                    }
                    let stored = if size == 8 {
                        v
                    } else if v.is_pointer() {
                        return Err("a pointer is narrowed by a store".into());
                    } else {
                        UNKNOWN
                    };
                    self.access(&mut st, base, i.off as i64, size, Some(stored))?;
                    Ok(vec![(pc + 1, st.clone())])
                }
                0x00 => {
                    if i.dst == 10 {
                        return Err("r10 (the frame pointer) is read-only".into());
                    }
                    let hi = self.insns[pc + 1].imm as u32 as u64;
                    st.regs[i.dst as usize] = match i.src {
                        0 => exact((hi << 32) | i.imm as u32 as u64),
                        PSEUDO_MAP => {
                            let m = i.imm as u32 as usize;
                            if m >= self.set.maps.len() {
                                return Err(format!("reference to map {m}, which is not declared"));
                            }
                            Reg::MapPtr { map: m }
                        }
                        s => return Err(format!("lddw with source {s} (only constants and maps)")),
                    };
                    Ok(vec![(pc + 2, st.clone())])
                }
                _ => Err("unsupported instruction class".into()),
            })();
            match step {
                Ok(next) => work.extend(next),
                Err(reason) => return Err(self.reject(pc, reason)),
            }
        }
        Ok(())
    }
}

/// Verifies every program of `set` for program type `ptype`.
pub fn verify(set: &ProgramSet, ptype: ProgramType) -> Result<(), Rejection> {
    for prog in &set.programs {
        let insns = (0..prog.code.len() / 8)
            .map(|k| get_insn(&prog.code, k))
            .collect();
        let v = Verifier {
            set,
            prog,
            ptype,
            insns,
        };
        v.structure()?;
        v.explore()?;
    }
    Ok(())
}
