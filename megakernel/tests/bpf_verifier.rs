//! The hook program type's loader and verifier: the monitor programs built
//! from `megakernel/monitors/` load and pass; each unsafe program (built
//! from `monitors/unsafe/`, or assembled here) is rejected with its reason
//! and the instruction it is at.

use megakernel::bpf::abi::{Hook, MapDef, MapKind, Program, ProgramSet, ProgramType};
use megakernel::bpf::{load, programs, verify, Rejection};

fn built_or_skip(test: &str) -> bool {
    if let Some(why) = programs::unavailable() {
        eprintln!("SKIP {test}: {why}");
        return false;
    }
    true
}

fn reject_built(name: &str) -> Rejection {
    let set = load(name, programs::object(name).expect("built")).expect("loads");
    let r = verify(&set, ProgramType::Observation).expect_err("must be rejected");
    eprintln!("{r}");
    r
}

#[test]
fn every_monitor_program_loads_and_verifies() {
    if !built_or_skip("every_monitor_program_loads_and_verifies") {
        return;
    }
    let safe: Vec<_> = programs::BUILT.iter().filter(|(_, u, _)| !u).collect();
    assert!(safe.len() >= 5, "{} monitor programs", safe.len());
    for (name, _, elf) in safe {
        let set = load(name, elf).unwrap_or_else(|e| panic!("{e}"));
        assert!(!set.programs.is_empty() && !set.maps.is_empty(), "{name}");
        verify(&set, ProgramType::Observation).unwrap_or_else(|e| panic!("{e}"));
    }
    let set = load("slo_waits", programs::object("slo_waits").unwrap()).unwrap();
    let hooks: Vec<Hook> = set.programs.iter().map(|p| p.hook).collect();
    assert_eq!(hooks, vec![Hook::TaskEnd, Hook::DepWait]);
    assert_eq!(set.maps[0].name, "slow_step");
    assert_eq!(set.maps[0].max_entries, 64);
    let ring = load("escalate_p99", programs::object("escalate_p99").unwrap()).unwrap();
    assert!(ring
        .maps
        .iter()
        .any(|m| m.kind == MapKind::Ring && m.value_size == 32));
}

#[test]
fn an_unbounded_loop_is_rejected() {
    if !built_or_skip("an_unbounded_loop_is_rejected") {
        return;
    }
    let r = reject_built("unbounded_loop");
    assert!(r.reason.contains("back edge"), "{r}");
}

#[test]
fn an_out_of_context_read_is_rejected() {
    if !built_or_skip("an_out_of_context_read_is_rejected") {
        return;
    }
    let r = reject_built("out_of_context");
    assert!(r.reason.contains("outside the 80-byte context"), "{r}");
    assert!(r.text.contains("+0x50") || r.text.contains("80"), "{r}");
}

#[test]
fn a_scheduler_state_write_from_an_observation_program_is_rejected() {
    if !built_or_skip("a_scheduler_state_write_from_an_observation_program_is_rejected") {
        return;
    }
    let r = reject_built("scheduler_write");
    assert!(
        r.reason
            .contains("write to scheduler-state field `route_hint` from an observation program"),
        "{r}"
    );
    // The same program is fine for the scheduling program type.
    let set = load("s", programs::object("scheduler_write").unwrap()).unwrap();
    verify(&set, ProgramType::Scheduling).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn an_unguarded_division_is_rejected() {
    if !built_or_skip("an_unguarded_division_is_rejected") {
        return;
    }
    let r = reject_built("unguarded_div");
    assert!(
        r.reason.contains("division by a value that may be zero"),
        "{r}"
    );
}

#[test]
fn an_unchecked_lookup_result_is_rejected() {
    if !built_or_skip("an_unchecked_lookup_result_is_rejected") {
        return;
    }
    let r = reject_built("null_deref");
    assert!(r.reason.contains("may be NULL"), "{r}");
}

#[test]
fn a_map_value_overrun_is_rejected() {
    if !built_or_skip("a_map_value_overrun_is_rejected") {
        return;
    }
    let r = reject_built("map_oob");
    assert!(
        r.reason.contains("of a value of map `out` (8 bytes)"),
        "{r}"
    );
}

/// A set of one program assembled from text, with one 4-entry u64 array map.
fn asm(text: &str) -> ProgramSet {
    let code: Vec<u8> = rbpf::assembler::assemble(text).unwrap_or_else(|e| panic!("{e}"));
    ProgramSet {
        name: "asm".into(),
        programs: vec![Program {
            name: "p".into(),
            hook: Hook::TaskEnd,
            code,
        }],
        maps: vec![MapDef {
            name: "m".into(),
            kind: MapKind::Array,
            key_size: 4,
            value_size: 8,
            max_entries: 4,
        }],
    }
}

fn rejected(text: &str) -> Rejection {
    verify(&asm(text), ProgramType::Observation).expect_err("must be rejected")
}

#[test]
fn hand_assembled_unsafe_programs_are_rejected_with_the_instruction() {
    let r = rejected("mov r0, r3\nexit");
    assert_eq!(r.insn, 0);
    assert!(r.reason.contains("r3 is read before it was written"), "{r}");
    let r = rejected("ldxdw r0, [r10+8]\nexit");
    assert!(r.reason.contains("outside the 512-byte frame"), "{r}");
    let r = rejected("ldxdw r0, [r10-8]\nexit");
    assert!(r.reason.contains("uninitialised stack"), "{r}");
    let r = rejected("mov r0, 0\ncall 6\nexit");
    assert_eq!(r.insn, 1);
    assert!(r.reason.contains("helper 6"), "{r}");
    let r = rejected("mov r10, 0\nmov r0, 0\nexit");
    assert!(r.reason.contains("read-only"), "{r}");
    let r = rejected("mov r0, 0\nja -2\nexit");
    assert_eq!(r.insn, 1);
    assert!(r.reason.contains("back edge"), "{r}");
    let r = rejected("mov r0, 1\njeq r0, 0, +1\nexit\nmov r0, 2");
    assert!(r.reason.contains("falls off the end"), "{r}");
    let r = rejected("mov r0, 1\nexit\nmov r0, 2\nexit");
    assert_eq!(r.insn, 2);
    assert!(r.reason.contains("unreachable"), "{r}");
    let r = rejected("ldxw r0, [r1+2]\nexit");
    assert!(r.reason.contains("not inside one declared field"), "{r}");
    let r = rejected("mov r2, r1\nadd r2, r0\nexit");
    assert!(r.reason.contains("r0 is read before"), "{r}");
    let r = rejected("ldxdw r2, [r1+40]\nadd r1, r2\nmov r0, 0\nexit");
    assert!(r.reason.contains("only constant offsets"), "{r}");
    let r = rejected("mov r0, r1\nexit");
    assert!(r.reason.contains("returning a pointer"), "{r}");
}

#[test]
fn guards_and_constant_offsets_are_accepted() {
    // A divisor checked against zero, a context field read through an
    // adjusted pointer, a key on the stack, a checked lookup.
    let ok = "ldxdw r2, [r1+40]\n\
              ldxdw r0, [r1+32]\n\
              jeq r2, 0, +1\n\
              div r0, r2\n\
              add r1, 8\n\
              ldxw r3, [r1+0]\n\
              stxw [r10-4], r3\n\
              mov r2, r10\n\
              add r2, -4\n\
              lddw r1, 0\n\
              call 1\n\
              jeq r0, 0, +2\n\
              mov r1, 1\n\
              stxdw [r0+0], r1\n\
              mov r0, 0\n\
              exit";
    let mut set = asm(ok);
    // The assembler has no map references: mark the lddw as one (map 0).
    let code = &mut set.programs[0].code;
    code[9 * 8 + 1] |= megakernel::bpf::abi::PSEUDO_MAP << 4;
    verify(&set, ProgramType::Observation).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn joined_paths_are_pruned_only_when_an_explored_state_covers_them() {
    // Thirty diamonds in a row: 2^30 paths, each join covered by the state
    // explored first (r0 unknown either way), so it verifies quickly.
    let mut text = String::from("ldxdw r2, [r1+40]\nmov r0, 0\n");
    for _ in 0..30 {
        text += "jeq r2, 0, +1\nadd r0, 1\n";
    }
    text += "mov r0, 0\nexit";
    verify(&asm(&text), ProgramType::Observation).unwrap_or_else(|e| panic!("{e}"));
    // A join where the path explored second brings a pointer is not
    // covered by the scalar one explored first: returning r3 is found.
    let r = rejected(
        "ldxdw r2, [r1+40]\n\
         mov r3, r10\n\
         jeq r2, 0, +1\n\
         mov r3, 0\n\
         mov r0, r3\n\
         exit",
    );
    assert!(r.reason.contains("returning a pointer"), "{r}");
    // Nor is a wider scalar covered by a narrower one: the division by a
    // value that may be zero is found on the path explored second.
    let r = rejected(
        "ldxdw r2, [r1+40]\n\
         ldxdw r3, [r1+72]\n\
         jeq r2, 0, +1\n\
         mov r3, 1\n\
         mov r0, 8\n\
         div r0, r3\n\
         exit",
    );
    assert!(r.reason.contains("may be zero"), "{r}");
}
