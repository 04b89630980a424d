//! The compiled attach path without a GPU (megakernel/README.md, "Compiled
//! monitors"): every shipped monitor program is verified, translated to C
//! (`bpf::translate`), compiled on the host with the system C compiler and
//! run on the hook contexts the simulator recorded while the reference
//! interpreter ran the same program; maps, coverage counters and executed
//! instruction counts must be equal byte for byte. The unsafe programs are
//! still refused by the verifier, so they never reach the translator. The
//! translations and the megakernel whose hooks call them also compile with
//! NVRTC (skipped without NVRTC unless `CAUSALBENCH_REQUIRE_NVRTC=1`).

use ground_truth::megakernel::MonitorConfig;
use kernels::megakernel::bpf_slot as L;
use megakernel::bpf::abi::{Context, Hook};
use megakernel::bpf::evaluate::graphs;
use megakernel::bpf::translate::{function_name, translate, Translation};
use megakernel::bpf::{load, programs, verify, Attachment, ProgramType};
use megakernel::sim::{run_with_programs, SimCosts};
use std::io::Write;
use std::process::{Command, Stdio};

/// Compiles `t` with a `main` that runs each (hook, context) record of stdin
/// through the translated functions (bank generation 1, like a fresh
/// [`Attachment`]) and writes the whole slot to stdout.
fn host_binary(t: &Translation, dir: &std::path::Path) -> std::path::PathBuf {
    let mut c = t.source.clone();
    c += &format!(
        r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static mk_u32 u32_at(const unsigned char* b, int at) {{ mk_u32 v; memcpy(&v, b + at, 4); return v; }}
static mk_u64 u64_at(const unsigned char* b, int at) {{ mk_u64 v; memcpy(&v, b + at, 8); return v; }}
int main(void) {{
    unsigned char* slot = (unsigned char*)calloc({slot}, 1);
    unsigned char rec[84];
    while (fread(rec, 1, sizeof rec, stdin) == sizeof rec) {{
        const unsigned char* c = rec + 4;
        void (*f)(mk_u8*, mk_u32, mk_u32, mk_u32, mk_u32, mk_u32, mk_u32, mk_u32, mk_u64, mk_u64, mk_u64, mk_u32, mk_u64, mk_u64) =
            u32_at(rec, 0) == 0 ? {b} : u32_at(rec, 0) == 1 ? {e} : {w};
        f(slot, 1u, u32_at(c, 0), u32_at(c, 4), u32_at(c, 8), u32_at(c, 12), u32_at(c, 16), u32_at(c, 20),
          u64_at(c, 24), u64_at(c, 32), u64_at(c, 40), u32_at(c, 52), u64_at(c, 64), u64_at(c, 72));
    }}
    fwrite(slot, 1, {slot}, stdout);
    return 0;
}}
"#,
        slot = L::SLOT_BYTES,
        b = function_name(Hook::TaskBegin),
        e = function_name(Hook::TaskEnd),
        w = function_name(Hook::DepWait),
    );
    let src = dir.join(format!("{}.c", t.set));
    let bin = dir.join(&t.set);
    std::fs::write(&src, c).unwrap();
    let out = Command::new("cc")
        .args(["-O2", "-fno-strict-aliasing", "-w", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("a C compiler (cc) on the host");
    assert!(
        out.status.success(),
        "{}: cc failed:\n{}",
        t.set,
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

fn run_host(bin: &std::path::Path, events: &[(Hook, Context)]) -> Vec<u8> {
    let mut input = Vec::with_capacity(events.len() * 84);
    for (h, c) in events {
        input.extend_from_slice(&(*h as u32).to_le_bytes());
        input.extend_from_slice(&c.to_bytes());
    }
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout.len(), L::SLOT_BYTES);
    out.stdout
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

#[test]
fn compiled_and_interpreted_programs_agree_on_recorded_task_events() {
    if let Some(why) = programs::unavailable() {
        eprintln!("SKIP compiled_and_interpreted_programs_agree_on_recorded_task_events: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenarios = megakernel::catalog::load().expect("catalog");
    // A static and a dynamic graph of two injections, 32 workers.
    let pick: Vec<_> = scenarios
        .into_iter()
        .filter(|s| {
            [
                "mk-exec-vs-notify.late-notify",
                "mk-skew-vs-slow-class.skewed",
            ]
            .contains(&s.name.as_str())
        })
        .collect();
    let g = graphs(&pick, 32);
    let mut checked = 0;
    for (name, unsafe_program, elf) in programs::BUILT {
        if *unsafe_program {
            continue;
        }
        let set = load(name, elf).unwrap();
        let att = Attachment::new(set).unwrap();
        let t = translate(&att).unwrap_or_else(|e| panic!("{e}"));
        let bin = host_binary(&t, dir.path());
        let mut wrote = false;
        for graph in &g {
            let mut interp = att.clone();
            interp.recorded = Some(Vec::new());
            run_with_programs(
                &graph.schedule,
                &MonitorConfig::none(),
                7,
                &SimCosts::default(),
                Some(&mut interp),
            );
            let events = interp.recorded.take().unwrap();
            assert!(!events.is_empty(), "{name}: no hook ran");
            let slot = run_host(&bin, &events);
            let arena = L::ARENAS + L::ARENA_BYTES;
            let n = interp.maps.arena.len();
            assert!(
                slot[arena..arena + n] == interp.maps.arena[..],
                "{name} on {} ({}): the compiled program's maps differ from the interpreter's",
                graph.name,
                graph.kind
            );
            for c in 0..8 {
                assert_eq!(
                    u64_at(&slot, L::ELIGIBLE + 8 * c),
                    interp.eligible[c],
                    "{name}"
                );
                assert_eq!(
                    u64_at(&slot, L::OBSERVED + 8 * c),
                    interp.observed[c],
                    "{name}"
                );
                assert_eq!(
                    u64_at(&slot, L::DROPPED + 8 * c),
                    interp.dropped[c],
                    "{name}"
                );
            }
            assert_eq!(
                u64_at(&slot, L::INSNS),
                interp.insns,
                "{name}: executed instructions"
            );
            wrote |= interp.maps.arena.iter().any(|&b| b != 0);
            checked += 1;
        }
        assert!(wrote, "{name}: its maps stayed empty on every graph");
    }
    assert!(checked >= 2 * 8, "{checked} (program, graph) pairs checked");
}

#[test]
fn unsafe_programs_never_reach_the_translator() {
    if let Some(why) = programs::unavailable() {
        eprintln!("SKIP unsafe_programs_never_reach_the_translator: {why}");
        return;
    }
    let mut refused = 0;
    for (name, unsafe_program, elf) in programs::BUILT {
        if !*unsafe_program {
            continue;
        }
        let set = load(name, elf).unwrap();
        assert!(
            verify(&set, ProgramType::Observation).is_err(),
            "{name} verified"
        );
        // A translation needs an attachment, and only a verified set attaches.
        assert!(Attachment::new(set).is_err(), "{name} attached");
        refused += 1;
    }
    assert_eq!(refused, 6);
}

fn nvrtc_or_skip(test: &str) -> bool {
    match kernels::ensure_nvrtc() {
        Ok(()) => true,
        Err(e) => {
            if std::env::var("CAUSALBENCH_REQUIRE_NVRTC").as_deref() == Ok("1") {
                panic!("CAUSALBENCH_REQUIRE_NVRTC=1 but {e}");
            }
            eprintln!("SKIP {test}: {e}");
            false
        }
    }
}

#[test]
fn translations_and_the_megakernel_that_calls_them_compile_with_nvrtc() {
    if !nvrtc_or_skip("translations_and_the_megakernel_that_calls_them_compile_with_nvrtc") {
        return;
    }
    let cubin = kernels::megakernel::compile_cubin_with_compiled_hooks("sm_90")
        .unwrap_or_else(|e| panic!("{e}"));
    // A relocatable ELF (the driver links it with a program's PTX at attach time).
    assert_eq!(&cubin[..4], b"\x7fELF");
    if let Some(why) = programs::unavailable() {
        eprintln!("SKIP (programs part): {why}");
        return;
    }
    for (name, unsafe_program, elf) in programs::BUILT {
        if *unsafe_program {
            continue;
        }
        let att = Attachment::new(load(name, elf).unwrap()).unwrap();
        let t = translate(&att).unwrap();
        let ptx = kernels::megakernel::compile_hook_ptx(&t.source, None)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for h in Hook::ALL {
            assert!(
                ptx.contains(&format!(".visible .func {}(", function_name(h))),
                "{name}: {} not defined in its PTX",
                function_name(h)
            );
        }
        // The context and the stack stay in registers: no local memory.
        assert!(!ptx.contains(".local"), "{name}: local memory in\n{ptx}");
    }
}
