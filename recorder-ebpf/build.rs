//! Builds src/bpf/recorder.bpf.c with clang (libbpf-cargo's SkeletonBuilder) and
//! generates the Rust skeleton into OUT_DIR.
//!
//! vmlinux.h: generated from the build machine's kernel BTF with bpftool when
//! bpftool and /sys/kernel/btf/vmlinux are present (the programs are CO-RE, so
//! the object still loads on other kernels); otherwise the committed minimal
//! header src/bpf/vmlinux_min.h is used. Set EBPF_RECORDER_MINIMAL_VMLINUX=1 to
//! force the minimal header.
//!
//! Without clang (or with EBPF_RECORDER_NO_BPF=1) the crate still builds, with
//! the `ebpf_recorder_no_bpf` cfg: `Recorder::start` then returns
//! `RecorderError::NotBuilt`. libbpf-sys (vendored libbpf) still needs a C
//! compiler, libelf-dev and zlib1g-dev.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const SRC: &str = "src/bpf/recorder.bpf.c";
const MIN_VMLINUX: &str = "src/bpf/vmlinux_min.h";

fn find_tool(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = env::var_os("PATH")
        .map(|p| env::split_paths(&p).collect())
        .unwrap_or_default();
    for extra in [
        "/usr/sbin",
        "/usr/local/sbin",
        "/sbin",
        "/usr/bin",
        "/usr/local/bin",
    ] {
        dirs.push(PathBuf::from(extra));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// `bpftool btf dump file /sys/kernel/btf/vmlinux format c`, checked for sanity.
fn generate_vmlinux(dst: &Path) -> Result<(), String> {
    let btf = Path::new("/sys/kernel/btf/vmlinux");
    if !btf.exists() {
        return Err("no /sys/kernel/btf/vmlinux".into());
    }
    let bpftool = find_tool("bpftool").ok_or("bpftool not found")?;
    let out = Command::new(&bpftool)
        .args(["btf", "dump", "file"])
        .arg(btf)
        .args(["format", "c"])
        .output()
        .map_err(|e| format!("{}: {e}", bpftool.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            bpftool.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    if !text.contains("struct task_struct {") || !text.contains("__VMLINUX_H__") {
        return Err("bpftool output lacks struct task_struct".into());
    }
    fs::write(dst, &out.stdout).map_err(|e| format!("write {}: {e}", dst.display()))
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ebpf_recorder_no_bpf)");
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-changed={MIN_VMLINUX}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=EBPF_RECORDER_MINIMAL_VMLINUX");
    println!("cargo:rerun-if-env-changed=CLANG");

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let skel = out_dir.join("recorder.skel.rs");

    println!("cargo:rerun-if-env-changed=EBPF_RECORDER_NO_BPF");
    let clang = env::var_os("CLANG")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| find_tool("clang"))
        .filter(|_| env::var_os("EBPF_RECORDER_NO_BPF").is_none_or(|v| v == "0"));
    let Some(clang) = clang else {
        println!(
            "cargo:warning=ebpf-recorder: clang not found (or EBPF_RECORDER_NO_BPF set); building \
             without BPF programs (Recorder::start will return NotBuilt). Install clang, libelf-dev, zlib1g-dev."
        );
        println!("cargo:rustc-cfg=ebpf_recorder_no_bpf");
        return;
    };

    let include = out_dir.join("include");
    fs::create_dir_all(&include).expect("create include dir");
    let vmlinux = include.join("vmlinux.h");
    let forced_min = env::var_os("EBPF_RECORDER_MINIMAL_VMLINUX").is_some_and(|v| v != "0");
    let generated = if forced_min {
        Err("EBPF_RECORDER_MINIMAL_VMLINUX set".to_string())
    } else {
        generate_vmlinux(&vmlinux)
    };
    if let Err(why) = generated {
        println!("cargo:warning=ebpf-recorder: using the minimal vmlinux header ({why})");
        fs::copy(MIN_VMLINUX, &vmlinux).expect("copy minimal vmlinux.h");
    }

    let mut args = vec!["-I".to_string(), include.display().to_string()];
    args.push("-Wall".into());
    args.push("-Wno-unused-function".into());
    if let Err(e) = libbpf_cargo::SkeletonBuilder::new()
        .source(SRC)
        .clang(&clang)
        .clang_args(args)
        .build_and_generate(&skel)
    {
        panic!("ebpf-recorder: building {SRC} failed: {e:#}");
    }
}
