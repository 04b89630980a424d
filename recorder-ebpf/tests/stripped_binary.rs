//! A stripped executable still finds the extent of its own functions (from its
//! unwind tables), so the GPU backend's call-site trampolines keep their perf
//! map names in a stripped `causalbench`. The test copies this very test
//! binary, strips the copy with binutils, runs the copy's
//! `reports_an_own_function_extent` and compares its answer with the symbol
//! table's answer in this unstripped process.

use ebpf_recorder::perf_map::{own_function_extent, symbol_table_extent};
use std::hint::black_box;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;

#[inline(never)]
fn extent_probe_function(x: u64) -> u64 {
    black_box(x.wrapping_mul(0x9e37_79b9).rotate_right(11))
}

/// What the stripped copy prints (libtest may put the test's name before it on
/// the line): `EXTENT <start - addr> <size> <symbol table found>`.
const REPORT_PREFIX: &str = "EXTENT ";

/// Run in the stripped copy by `stripped_copy_finds_its_own_function_extent`;
/// on its own it only checks that this binary finds the extent.
#[test]
#[ignore = "run on a stripped copy by stripped_copy_finds_its_own_function_extent"]
fn reports_an_own_function_extent() {
    let addr = extent_probe_function as *const () as u64;
    black_box(extent_probe_function(black_box(5)));
    let (start, size) = own_function_extent(addr).expect("no extent for an own function");
    let from_symbols = symbol_table_extent(addr).is_some();
    println!(
        "{REPORT_PREFIX}{} {size} {from_symbols}",
        start.wrapping_sub(addr)
    );
}

/// Strips `binary` in place with `strip`, else `objcopy`; `false` when
/// neither tool is installed.
fn strip_all(binary: &Path) -> bool {
    for tool in ["strip", "objcopy"] {
        match Command::new(tool).arg("--strip-all").arg(binary).status() {
            Ok(status) => {
                assert!(
                    status.success(),
                    "{tool} --strip-all {}: {status}",
                    binary.display()
                );
                return true;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => panic!("running {tool}: {e}"),
        }
    }
    false
}

#[test]
fn stripped_copy_finds_its_own_function_extent() {
    let addr = extent_probe_function as *const () as u64;
    black_box(extent_probe_function(black_box(5)));
    let Some((start, size)) = symbol_table_extent(addr) else {
        eprintln!("SKIP stripped_copy: this test binary has no symbol table to compare with");
        return;
    };
    assert_eq!(start, addr);

    let exe = std::env::current_exe().expect("this test binary's path");
    let copy = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("stripped-extent-{}", std::process::id()));
    std::fs::copy(&exe, &copy).expect("copying the test binary");
    if !strip_all(&copy) {
        let _ = std::fs::remove_file(&copy);
        eprintln!("SKIP stripped_copy: neither `strip` nor `objcopy` (binutils) is installed");
        return;
    }
    let out = Command::new(&copy)
        .args(["--ignored", "--exact", "reports_an_own_function_extent"])
        .args(["--nocapture", "--test-threads=1"])
        .output()
        .expect("running the stripped copy");
    let _ = std::fs::remove_file(&copy);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "stripped copy failed:\n{stdout}\n{stderr}"
    );
    let report = stdout
        .lines()
        .find_map(|line| Some(line.split_once(REPORT_PREFIX)?.1))
        .unwrap_or_else(|| panic!("no `{REPORT_PREFIX}` line from the stripped copy:\n{stdout}"));
    let fields: Vec<&str> = report.split(' ').collect();
    assert_eq!(
        fields,
        ["0", &size.to_string(), "false"],
        "stripped copy's (start - function address, size, symbol table found)"
    );
}
