//! Compiles the monitor programs (`monitors/*.bpf.c`, and the deliberately
//! unsafe ones the verifier's tests load, `monitors/unsafe/*.bpf.c`) with
//! `clang -target bpf -O2 -mcpu=v2` into ELF objects in OUT_DIR, the way
//! recorder-ebpf builds its programs. `bpf::programs` embeds them.
//!
//! Without clang (or with MK_BPF_NO_CLANG=1) the crate still builds with the
//! `mk_bpf_no_clang` cfg: the embedded program list is empty and the tests
//! that load programs say why and return.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn find_clang() -> Option<PathBuf> {
    if let Some(p) = env::var_os("CLANG")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
    {
        return Some(p);
    }
    let dirs: Vec<PathBuf> = env::var_os("PATH")
        .map(|p| env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.into_iter()
        .map(|d| d.join("clang"))
        .find(|p| p.is_file())
}

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(mk_bpf_no_clang)");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=monitors");
    println!("cargo:rerun-if-changed=monitors/unsafe");
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-env-changed=MK_BPF_NO_CLANG");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let mut entries = Vec::new();
    let clang = if env::var("MK_BPF_NO_CLANG").as_deref() == Ok("1") {
        None
    } else {
        find_clang()
    };
    match &clang {
        None => {
            println!("cargo:rustc-cfg=mk_bpf_no_clang");
            println!("cargo:warning=clang not found: megakernel monitor programs not built");
        }
        Some(clang) => {
            for (group, dir) in [("safe", "monitors"), ("unsafe", "monitors/unsafe")] {
                for src in sources(&manifest.join(dir)) {
                    println!("cargo:rerun-if-changed={}", src.display());
                    let stem = src
                        .file_name()
                        .and_then(|n| n.to_str())
                        .and_then(|n| n.strip_suffix(".bpf.c"))
                        .expect("a .bpf.c name")
                        .to_string();
                    let obj = out_dir.join(format!("{group}-{stem}.o"));
                    let st = Command::new(clang)
                        .args(["-target", "bpf", "-O2", "-mcpu=v2", "-g0", "-c"])
                        .arg(&src)
                        .arg("-o")
                        .arg(&obj)
                        .status()
                        .unwrap_or_else(|e| panic!("{}: {e}", clang.display()));
                    assert!(st.success(), "clang failed on {}", src.display());
                    entries.push(format!(
                        "    ({stem:?}, {:?}, include_bytes!({:?})),\n",
                        group == "unsafe",
                        obj.display().to_string()
                    ));
                }
            }
        }
    }
    let list = format!(
        "/// (name, deliberately unsafe, ELF object) of every program built from `monitors/`.\n\
         pub const BUILT: &[(&str, bool, &[u8])] = &[\n{}];\n",
        entries.concat()
    );
    fs::write(out_dir.join("mk_bpf_programs.rs"), list).expect("write program list");
}
