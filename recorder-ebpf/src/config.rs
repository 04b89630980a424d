use std::path::PathBuf;
use std::time::Duration;

/// Which argument of a probed function is recorded as the uprobe's `handle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleArg {
    /// Record 0.
    None,
    /// The n-th integer argument, 1-based (x86-64 System V: 1–6 in registers,
    /// 7 and up read from the stack).
    Arg(u8),
    /// The u64 at byte `offset` of the struct that the n-th argument points to
    /// (e.g. `CUlaunchConfig::hStream` of `cuLaunchKernelEx`).
    ArgField { arg: u8, offset: u32 },
}

/// What to record, for which process.
#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// Target process (tgid). Only its threads are recorded.
    pub pid: u32,
    /// Library (or executable) whose functions get uprobes. `None`: the libcuda
    /// that the target maps (from /proc/PID/maps), else the usual install paths.
    pub library: Option<PathBuf>,
    /// Functions to probe: exact symbol names, or glob patterns with `*` and `?`
    /// (`cuMemcpy*Async*`). An exact name that is missing is an error; a pattern
    /// that matches nothing is reported in `HostTrace::warnings`. Empty: no
    /// uprobes (scheduler and page faults only).
    pub functions: Vec<String>,
    /// Per-function handle argument, first matching glob wins; functions that
    /// match none record their first argument (`HandleArg::Arg(1)`).
    pub handle_args: Vec<(String, HandleArg)>,
    /// Record sched_switch intervals of the target's threads.
    pub sched: bool,
    /// Record user page faults of the target's threads.
    pub page_faults: bool,
    /// Ring buffer size in bytes (rounded up to a power of two, at least one page).
    pub ringbuf_bytes: u32,
    /// Wake the polling thread once this many bytes wait in the ring buffer;
    /// below that it drains every `poll_interval`. `None`: a quarter of the
    /// ring buffer.
    pub wakeup_bytes: Option<u32>,
    /// Capacity of the user stack map (distinct stacks).
    pub max_stacks: u32,
    /// How each uprobe hit's user stack is captured.
    pub stacks: StackCapture,
    /// Bytes of user stack copied at each uprobe hit's entry and unwound after
    /// with the DWARF unwind tables of the mapped objects (`user_unwind.rs`), as
    /// `perf record --call-graph dwarf` does: the stack then reaches callers
    /// built without frame pointers (a CPython's Python frames above libtorch
    /// and the interpreter), where the kernel's frame-pointer walk stops. 0:
    /// off (the default; nothing is copied and the hit costs what it did).
    /// Rounded up to a multiple of 1 KiB; at most 64 KiB. Each hit reserves this
    /// much ring buffer, so `ringbuf_bytes` should hold a few thousand copies.
    pub stack_copy_bytes: u32,
    /// Attach a return probe to every probed function (the call's exit time).
    /// Without (a cost study's setting, `causalbench measure probe-cost`), each
    /// record's exit equals its entry.
    pub return_probes: bool,
    /// Attach all probed functions through one uprobe_multi link (kernel 6.6+;
    /// attaching and detaching in one batch), falling back to one link per
    /// function where the kernel refuses. False: one link per function.
    pub multi_link: bool,
    /// How long one ring-buffer poll waits before checking for stop.
    pub poll_interval: Duration,
}

/// How a uprobe hit's user stack is captured (values of the BPF program's
/// `stack_mode`; README "Cost per probe hit" has what each costs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u32)]
pub enum StackCapture {
    /// Walk the user stack on every hit (exact for every caller).
    #[default]
    EveryHit = 0,
    /// Walk it the first time a call site (return address at entry and the next
    /// return addresses of the frame-pointer chain) is seen; later hits from the
    /// same site record the same stack. Cheaper only where stacks are deep
    /// (frame pointers kept all the way up): on the H200 the walk of the
    /// generator's two-frame stacks cost no more than the site lookup
    /// (results/h200-580/measurements/probe-cost.json).
    PerSite = 1,
    /// No walk: each record carries only the call-site frame read at entry.
    None = 2,
}

impl RecorderConfig {
    /// Scheduler + page faults for `pid`, no uprobes.
    pub fn new(pid: u32) -> Self {
        RecorderConfig {
            pid,
            library: None,
            functions: Vec::new(),
            handle_args: Vec::new(),
            sched: true,
            page_faults: true,
            ringbuf_bytes: 16 << 20,
            wakeup_bytes: None,
            max_stacks: 16384,
            stacks: StackCapture::EveryHit,
            stack_copy_bytes: 0,
            return_probes: true,
            multi_link: true,
            poll_interval: Duration::from_millis(20),
        }
    }

    /// The CUDA driver entry points of docs/records.md in the libcuda the target maps,
    /// with each call's stream (or event / graph exec) as its handle.
    pub fn cuda(pid: u32) -> Self {
        RecorderConfig {
            functions: CUDA_FUNCTIONS.iter().map(|s| s.to_string()).collect(),
            handle_args: cuda_handle_args(),
            ..RecorderConfig::new(pid)
        }
    }

    /// The stack copy size the BPF program gets: `stack_copy_bytes` rounded up
    /// to whole chunks; an error above the largest copy.
    pub(crate) fn stack_copy_size(&self) -> Result<u32, String> {
        use crate::raw::{STACK_COPY_CHUNK, STACK_COPY_MAX};
        if self.stack_copy_bytes > STACK_COPY_MAX {
            return Err(format!(
                "stack_copy_bytes {} exceeds the largest stack copy, {STACK_COPY_MAX} bytes",
                self.stack_copy_bytes
            ));
        }
        Ok(self.stack_copy_bytes.div_ceil(STACK_COPY_CHUNK) * STACK_COPY_CHUNK)
    }

    /// The handle argument of a resolved function name.
    pub fn handle_arg_for(&self, name: &str) -> HandleArg {
        self.handle_args
            .iter()
            .find(|(pat, _)| glob_match(pat, name))
            .map(|(_, h)| *h)
            .unwrap_or(HandleArg::Arg(1))
    }
}

/// Driver entry points recorded by `RecorderConfig::cuda` (glob patterns; the
/// `_ptsz`/`_ptds` per-thread-default-stream and `_v2` variants are covered).
pub const CUDA_FUNCTIONS: &[&str] = &[
    "cuLaunchKernel",
    "cuLaunchKernel_ptsz",
    "cuLaunchKernelEx",
    "cuLaunchKernelEx_ptsz",
    "cuGraphLaunch",
    "cuGraphLaunch_ptsz",
    "cuMemcpy*Async*",
    "cuMemsetD*",
    "cuEventRecord*",
    "cuStreamWaitEvent*",
    "cuStreamSynchronize*",
    "cuEventSynchronize",
    "cuCtxSynchronize",
];

/// Where the stream (or event / graph exec) handle is among the arguments of the
/// driver entry points in [`CUDA_FUNCTIONS`] (cuda.h prototypes).
pub fn cuda_handle_args() -> Vec<(String, HandleArg)> {
    use HandleArg::*;
    let t: &[(&str, HandleArg)] = &[
        // cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, hStream, params, extra)
        ("cuLaunchKernel", Arg(9)),
        ("cuLaunchKernel_*", Arg(9)),
        // cuLaunchKernelEx(const CUlaunchConfig *config, ...): config->hStream at 32
        ("cuLaunchKernelEx*", ArgField { arg: 1, offset: 32 }),
        // cuGraphLaunch(hGraphExec, hStream): the graph exec
        ("cuGraphLaunch*", Arg(1)),
        // batch copies: the stream's position differs between CUDA 12.8 and 13
        ("cuMemcpy*BatchAsync*", None),
        // cuMemcpy2DAsync / 3DAsync / 3DPeerAsync / 2DUnalignedAsync(p, hStream)
        ("cuMemcpy2D*Async*", Arg(2)),
        ("cuMemcpy3D*Async*", Arg(2)),
        // cuMemcpyPeerAsync(dst, dstCtx, src, srcCtx, n, hStream)
        ("cuMemcpyPeerAsync*", Arg(6)),
        // cuMemcpyHtoAAsync(dstArray, off, src, n, hStream), cuMemcpyAtoHAsync(dst, srcArray, off, n, hStream)
        ("cuMemcpyHtoAAsync*", Arg(5)),
        ("cuMemcpyAtoHAsync*", Arg(5)),
        // cuMemcpyAsync / HtoD / DtoH / DtoD (dst, src, n, hStream)
        ("cuMemcpy*Async*", Arg(4)),
        // cuMemsetD2D{8,16,32}Async(dst, pitch, value, width, height, hStream)
        ("cuMemsetD2D*Async*", Arg(6)),
        // cuMemsetD{8,16,32}Async(dst, value, n, hStream)
        ("cuMemsetD*Async*", Arg(4)),
        // synchronous memsets have no stream
        ("cuMemsetD*", None),
        // cuEventRecord(hEvent, hStream), cuEventRecordWithFlags(hEvent, hStream, flags)
        ("cuEventRecord*", Arg(1)),
        // cuStreamWaitEvent(hStream, hEvent, flags)
        ("cuStreamWaitEvent*", Arg(1)),
        ("cuStreamSynchronize*", Arg(1)),
        ("cuEventSynchronize*", Arg(1)),
        ("cuCtxSynchronize*", None),
    ];
    t.iter().map(|(p, h)| (p.to_string(), *h)).collect()
}

/// Glob match with `*` (any run) and `?` (one character).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0usize, 0usize);
    let (mut star, mut mark) = (None::<usize>, 0usize);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

pub(crate) fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("cuMemcpy*Async*", "cuMemcpyHtoDAsync_v2"));
        assert!(glob_match("cuMemcpy*Async*", "cuMemcpyAsync"));
        assert!(!glob_match("cuMemcpy*Async*", "cuMemcpyHtoD_v2"));
        assert!(glob_match("cuEventRecord*", "cuEventRecord"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("cuLaunchKernel", "cuLaunchKernelEx"));
    }

    #[test]
    fn stack_copy_sizes() {
        let mut c = RecorderConfig::new(1);
        assert_eq!(c.stack_copy_size(), Ok(0));
        c.stack_copy_bytes = 1;
        assert_eq!(c.stack_copy_size(), Ok(1024));
        c.stack_copy_bytes = 32 * 1024;
        assert_eq!(c.stack_copy_size(), Ok(32 * 1024));
        c.stack_copy_bytes = 64 * 1024 + 1;
        assert!(c.stack_copy_size().is_err());
    }

    #[test]
    fn cuda_handles() {
        let c = RecorderConfig::cuda(1);
        assert_eq!(c.handle_arg_for("cuLaunchKernel"), HandleArg::Arg(9));
        assert_eq!(c.handle_arg_for("cuLaunchKernel_ptsz"), HandleArg::Arg(9));
        assert_eq!(
            c.handle_arg_for("cuLaunchKernelEx"),
            HandleArg::ArgField { arg: 1, offset: 32 }
        );
        assert_eq!(c.handle_arg_for("cuMemcpyHtoDAsync_v2"), HandleArg::Arg(4));
        assert_eq!(c.handle_arg_for("cuMemcpy2DAsync_v2"), HandleArg::Arg(2));
        assert_eq!(c.handle_arg_for("cuMemsetD32Async"), HandleArg::Arg(4));
        assert_eq!(c.handle_arg_for("cuMemsetD2D8Async"), HandleArg::Arg(6));
        assert_eq!(c.handle_arg_for("cuMemsetD8_v2"), HandleArg::None);
        assert_eq!(c.handle_arg_for("cuCtxSynchronize"), HandleArg::None);
        assert_eq!(c.handle_arg_for("somethingElse"), HandleArg::Arg(1));
    }
}
