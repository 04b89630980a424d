//! The PTX cache: a second compile of the same source and options reads the
//! entry the first wrote, a damaged entry is compiled again, another
//! architecture is another entry, and `off` writes nothing. (Its own test
//! binary: it sets the cache directory for the whole process.)

mod common;

use common::nvrtc_or_skip;
use kernels::compile_ptx;
use kernels::ptx_cache::PTX_CACHE_ENV;

fn entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|r| r.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn compiles_once_then_reads_the_cache() {
    if !nvrtc_or_skip("compiles_once_then_reads_the_cache") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("causalbench-ptx-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var(PTX_CACHE_ENV, &dir);

    let first = compile_ptx(None).expect("compiles");
    let written = entries(&dir);
    assert_eq!(written.len(), 1, "one entry: {written:?}");
    assert_eq!(std::fs::read_to_string(&written[0]).unwrap(), first);

    // A hit returns the entry itself: mark it (still valid PTX) and read it back.
    let marked = format!("{first}\n// cached\n");
    std::fs::write(&written[0], &marked).unwrap();
    assert_eq!(compile_ptx(None).unwrap(), marked);

    // A damaged entry is compiled again and replaced.
    std::fs::write(&written[0], "not ptx").unwrap();
    assert_eq!(compile_ptx(None).unwrap(), first);
    assert_eq!(std::fs::read_to_string(&written[0]).unwrap(), first);

    // Another architecture is another entry; the megakernel its own.
    compile_ptx(Some("compute_80")).expect("compiles for sm_80");
    kernels::megakernel::compile_ptx(None).expect("megakernel compiles");
    assert_eq!(entries(&dir).len(), 3, "{:?}", entries(&dir));

    // Off: nothing read, nothing written.
    std::env::set_var(PTX_CACHE_ENV, "off");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(compile_ptx(None).unwrap(), first);
    assert!(!dir.exists());
    std::env::remove_var(PTX_CACHE_ENV);
}
