//! `PageFaults`: make the victim thread take real page faults.
//!
//! - **Minor**: N fresh pages of an anonymous private mapping (4 KiB pages,
//!   transparent huge pages disabled on it with `MADV_NOHUGEPAGE`), one byte
//!   written per page: every touch allocates and zeroes a page.
//! - **Major**: a file of N pages on a disk-backed filesystem, written and
//!   `fsync`ed, mapped read-only, `MADV_RANDOM` (no readahead, so no
//!   neighbouring pages are read in with each fault) and
//!   `POSIX_FADV_DONTNEED` (drops the file's clean pages from the page
//!   cache, so fault-around has nothing to map); one byte is then read per
//!   page: every touch waits for a disk read. On tmpfs/ramfs pages never leave
//!   memory and major faults are impossible ([`InjectorError::NoMajorFaults`]).
//!
//! Use: [`PageFaults::prepare`] anywhere (it may be moved to another thread),
//! then [`PageFaults::trigger`] **on the victim thread**; the report counts
//! that thread's faults with `getrusage(RUSAGE_THREAD)` before and after.
//! [`PageFaults::rearm`] makes the same pages fault again. No privilege is
//! needed.

use std::ffi::c_void;
use std::fs::File;
use std::io::Write;
use std::num::NonZeroUsize;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::Duration;

use nix::sys::mman::{madvise, mmap, mmap_anonymous, munmap, MapFlags, MmapAdvise, ProtFlags};
use nix::sys::resource::{getrusage, UsageWho};

use crate::clock::{gettid, monotonic_ns};
use crate::error::{sys, InjectorError, Result};

const MECH: &str = "PageFaults";

/// Environment variable naming the directory for major-fault files.
pub const FAULT_DIR_ENV: &str = "CAUSALBENCH_FAULT_DIR";

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    Minor,
    Major,
}

/// What one trigger did, counted on the triggering thread.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FaultReport {
    pub kind: FaultKind,
    pub tid: i32,
    pub pages_touched: usize,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl FaultReport {
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.end_ns - self.start_ns)
    }
    /// Faults of the requested kind.
    pub fn faults(&self) -> u64 {
        match self.kind {
            FaultKind::Minor => self.minor_faults,
            FaultKind::Major => self.major_faults,
        }
    }
    /// Elapsed time per fault of the requested kind.
    pub fn per_fault(&self) -> Option<Duration> {
        let n = self.faults();
        (n > 0).then(|| self.elapsed() / n as u32)
    }
}

/// Prepared pages that fault when touched.
#[derive(Debug)]
pub struct PageFaults {
    kind: FaultKind,
    n_pages: usize,
    page: usize,
    map: NonNull<c_void>,
    len: usize,
    file: Option<File>,
    dir: Option<PathBuf>,
    armed: bool,
}

// SAFETY: the mapping is owned exclusively by this value; moving it to the
// victim thread to trigger is the intended use.
unsafe impl Send for PageFaults {}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;

fn fs_type(path: &Path) -> Option<i64> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and out pointer.
    (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0).then_some(st.f_type as i64)
}

fn memory_fs_name(path: &Path) -> Option<&'static str> {
    match fs_type(path)? {
        TMPFS_MAGIC => Some("tmpfs"),
        RAMFS_MAGIC => Some("ramfs"),
        _ => None,
    }
}

/// Directory for major-fault files: `$CAUSALBENCH_FAULT_DIR`, else
/// `/var/tmp`, else the temp dir — the first that exists and is not
/// memory-backed (falls back to `/var/tmp` for the error message).
pub fn default_fault_dir() -> PathBuf {
    let mut cands = Vec::new();
    if let Some(d) = std::env::var_os(FAULT_DIR_ENV) {
        return PathBuf::from(d);
    }
    cands.push(PathBuf::from("/var/tmp"));
    cands.push(std::env::temp_dir());
    cands
        .iter()
        .find(|d| d.is_dir() && memory_fs_name(d).is_none())
        .cloned()
        .unwrap_or_else(|| cands[0].clone())
}

fn rusage_faults() -> Result<(u64, u64)> {
    let u = getrusage(UsageWho::RUSAGE_THREAD).map_err(sys(MECH, "getrusage(RUSAGE_THREAD)"))?;
    Ok((u.minor_page_faults() as u64, u.major_page_faults() as u64))
}

impl PageFaults {
    /// Prepare `n_pages` pages; major-fault files go to [`default_fault_dir`].
    pub fn prepare(n_pages: usize, kind: FaultKind) -> Result<Self> {
        Self::prepare_in(n_pages, kind, &default_fault_dir())
    }

    /// Prepare `n_pages` pages; a major-fault file is created in `dir`
    /// (unlinked at once, so nothing is left behind).
    pub fn prepare_in(n_pages: usize, kind: FaultKind, dir: &Path) -> Result<Self> {
        if n_pages == 0 || n_pages > (16 << 20) {
            return Err(InjectorError::Invalid(format!(
                "PageFaults needs 1..={} pages, got {n_pages}",
                16 << 20
            )));
        }
        let page = page_size();
        let len = n_pages * page;
        let nz = NonZeroUsize::new(len).expect("non-zero");
        match kind {
            FaultKind::Minor => {
                // SAFETY: fresh anonymous mapping, owned by the result.
                let map = unsafe {
                    mmap_anonymous(
                        None,
                        nz,
                        ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                        MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE,
                    )
                }
                .map_err(sys(MECH, format!("mmap({len} bytes anonymous)")))?;
                let me = PageFaults {
                    kind,
                    n_pages,
                    page,
                    map,
                    len,
                    file: None,
                    dir: None,
                    armed: true,
                };
                // Keep faults at 4 KiB granularity even with THP "always".
                // SAFETY: range is our mapping.
                unsafe { madvise(map, len, MmapAdvise::MADV_NOHUGEPAGE) }
                    .map_err(sys(MECH, "madvise(MADV_NOHUGEPAGE)"))?;
                Ok(me)
            }
            FaultKind::Major => {
                if let Some(fs) = memory_fs_name(dir) {
                    return Err(InjectorError::NoMajorFaults {
                        fs: fs.to_string(),
                        dir: dir.to_path_buf(),
                    });
                }
                let io = |what: String| {
                    move |source| InjectorError::Io {
                        mechanism: MECH,
                        what,
                        source,
                    }
                };
                let mut file = tempfile::tempfile_in(dir)
                    .map_err(io(format!("creating a file in {}", dir.display())))?;
                let chunk: Vec<u8> = (0..(256 * page)).map(|i| (i % 251) as u8 | 1).collect();
                let mut left = len;
                while left > 0 {
                    let n = left.min(chunk.len());
                    file.write_all(&chunk[..n])
                        .map_err(io("writing the fault file".into()))?;
                    left -= n;
                }
                file.sync_all()
                    .map_err(io("fsync of the fault file".into()))?;
                // SAFETY: maps our own file read-only; the mapping is owned by
                // the result and unmapped on drop.
                let map = unsafe {
                    mmap(
                        None,
                        nz,
                        ProtFlags::PROT_READ,
                        MapFlags::MAP_SHARED,
                        &file,
                        0,
                    )
                }
                .map_err(sys(MECH, format!("mmap({len} bytes of the fault file)")))?;
                let mut me = PageFaults {
                    kind,
                    n_pages,
                    page,
                    map,
                    len,
                    file: Some(file),
                    dir: Some(dir.to_path_buf()),
                    armed: false,
                };
                me.rearm()?;
                Ok(me)
            }
        }
    }

    pub fn kind(&self) -> FaultKind {
        self.kind
    }

    pub fn n_pages(&self) -> usize {
        self.n_pages
    }

    /// Directory of the major-fault file.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Pages of the mapping currently resident in memory (`mincore`).
    pub fn resident_pages(&self) -> Result<usize> {
        let mut vec = vec![0u8; self.n_pages];
        // SAFETY: the range is our mapping; vec has one byte per page.
        let rc = unsafe { libc::mincore(self.map.as_ptr(), self.len, vec.as_mut_ptr()) };
        if rc != 0 {
            return Err(sys(MECH, "mincore")(nix::errno::Errno::last()));
        }
        Ok(vec.iter().filter(|b| **b & 1 == 1).count())
    }

    /// Make every page fault again on the next trigger: drop our page-table
    /// entries (`MADV_DONTNEED`) and, for a file, its page cache
    /// (`POSIX_FADV_DONTNEED`, after `MADV_RANDOM` to disable readahead).
    pub fn rearm(&mut self) -> Result<()> {
        // SAFETY: the range is our mapping; for a private anonymous mapping
        // MADV_DONTNEED discards the pages (later reads see zeroes, which is
        // fine: the content is never used).
        unsafe { madvise(self.map, self.len, MmapAdvise::MADV_DONTNEED) }
            .map_err(sys(MECH, "madvise(MADV_DONTNEED)"))?;
        if let Some(f) = &self.file {
            // SAFETY: as above.
            unsafe { madvise(self.map, self.len, MmapAdvise::MADV_RANDOM) }
                .map_err(sys(MECH, "madvise(MADV_RANDOM)"))?;
            // SAFETY: plain syscalls on our own fd.
            unsafe { libc::fdatasync(f.as_raw_fd()) };
            let rc = unsafe {
                libc::posix_fadvise(
                    f.as_raw_fd(),
                    0,
                    self.len as libc::off_t,
                    libc::POSIX_FADV_DONTNEED,
                )
            };
            if rc != 0 {
                return Err(sys(MECH, "posix_fadvise(POSIX_FADV_DONTNEED)")(
                    nix::errno::Errno::from_raw(rc),
                ));
            }
        }
        self.armed = true;
        Ok(())
    }

    /// Touch one byte per page on the calling thread (write for minor, read
    /// for major) and count the faults it took. Re-arms first when a previous
    /// trigger consumed the pages.
    pub fn trigger(&mut self) -> Result<FaultReport> {
        self.touch(None)
    }

    /// Like [`trigger`](Self::trigger), but stops touching pages once
    /// CLOCK_MONOTONIC reaches `deadline_ns` (or the pages run out): the
    /// stall lasts as long as requested however much a fault costs right now,
    /// and every microsecond of it is spent in real faults. Prepare more pages
    /// than the expected count so they do not run out first.
    pub fn trigger_until(&mut self, deadline_ns: u64) -> Result<FaultReport> {
        self.touch(Some(deadline_ns))
    }

    fn touch(&mut self, deadline_ns: Option<u64>) -> Result<FaultReport> {
        if !self.armed {
            self.rearm()?;
        }
        let base = self.map.as_ptr() as *mut u8;
        let (min0, maj0) = rusage_faults()?;
        let start_ns = monotonic_ns();
        let mut sum: u32 = 0;
        let mut touched = self.n_pages;
        for i in 0..self.n_pages {
            // The clock read (vDSO, ~20 ns) is far cheaper than a fault.
            if deadline_ns.is_some_and(|d| monotonic_ns() >= d) {
                touched = i;
                break;
            }
            // SAFETY: i * page < len, inside our mapping; volatile so every
            // access really happens.
            unsafe {
                let p = base.add(i * self.page);
                match self.kind {
                    FaultKind::Minor => std::ptr::write_volatile(p, 1),
                    FaultKind::Major => sum = sum.wrapping_add(std::ptr::read_volatile(p) as u32),
                }
            }
        }
        let end_ns = monotonic_ns();
        let (min1, maj1) = rusage_faults()?;
        std::hint::black_box(sum);
        self.armed = false;
        Ok(FaultReport {
            kind: self.kind,
            tid: gettid(),
            pages_touched: touched,
            minor_faults: min1.saturating_sub(min0),
            major_faults: maj1.saturating_sub(maj0),
            start_ns,
            end_ns,
        })
    }
}

impl Drop for PageFaults {
    fn drop(&mut self) {
        // SAFETY: our mapping, unmapped once.
        let _ = unsafe { munmap(self.map, self.len) };
    }
}

/// Per-fault cost of `kind` on this machine, from `rounds` triggers of
/// `n_pages` pages on the calling thread (median per-fault time).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FaultCalibration {
    pub kind: FaultKind,
    pub n_pages: usize,
    pub per_fault: Duration,
    /// Median share of touched pages that faulted with the requested kind.
    pub fault_ratio: f64,
    pub reports: Vec<FaultReport>,
}

pub fn calibrate(kind: FaultKind, n_pages: usize, rounds: usize) -> Result<FaultCalibration> {
    calibrate_in(kind, n_pages, rounds, &default_fault_dir())
}

pub fn calibrate_in(
    kind: FaultKind,
    n_pages: usize,
    rounds: usize,
    dir: &Path,
) -> Result<FaultCalibration> {
    let mut pf = PageFaults::prepare_in(n_pages, kind, dir)?;
    let mut reports = Vec::new();
    for _ in 0..rounds.max(1) {
        pf.rearm()?;
        reports.push(pf.trigger()?);
    }
    let mut per: Vec<Duration> = reports.iter().filter_map(|r| r.per_fault()).collect();
    per.sort();
    let mut ratio: Vec<f64> = reports
        .iter()
        .map(|r| r.faults() as f64 / n_pages as f64)
        .collect();
    ratio.sort_by(f64::total_cmp);
    Ok(FaultCalibration {
        kind,
        n_pages,
        per_fault: per.get(per.len() / 2).copied().unwrap_or_default(),
        fault_ratio: ratio[ratio.len() / 2],
        reports,
    })
}

/// Pages to touch for about `delay` at `per_fault` each (at least 1).
pub fn pages_for_delay(per_fault: Duration, delay: Duration) -> usize {
    if per_fault.is_zero() {
        return 1;
    }
    ((delay.as_nanos() as f64 / per_fault.as_nanos() as f64).round() as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_for_delay_rounds() {
        assert_eq!(
            pages_for_delay(Duration::from_nanos(3100), Duration::from_millis(5)),
            1613
        );
        assert_eq!(pages_for_delay(Duration::ZERO, Duration::from_millis(5)), 1);
        assert_eq!(
            pages_for_delay(Duration::from_micros(100), Duration::from_micros(10)),
            1
        );
    }

    #[test]
    fn rejects_bad_sizes() {
        assert!(matches!(
            PageFaults::prepare(0, FaultKind::Minor),
            Err(InjectorError::Invalid(_))
        ));
    }

    #[test]
    fn tmpfs_is_refused_for_major_faults() {
        let shm = Path::new("/dev/shm");
        if memory_fs_name(shm).is_none() {
            eprintln!("SKIP tmpfs_is_refused_for_major_faults: /dev/shm is not tmpfs here");
            return;
        }
        match PageFaults::prepare_in(4, FaultKind::Major, shm) {
            Err(InjectorError::NoMajorFaults { fs, .. }) => assert_eq!(fs, "tmpfs"),
            other => panic!("expected NoMajorFaults, got {other:?}"),
        }
    }
}
