//! Hook programs on the GPU: the megakernel compiled with the eBPF hook
//! interpreter (`kernels::megakernel::compile_ptx_with_hooks`), its program
//! slot in device memory (`struct mk_bpf_slot`: two banks of programs and map
//! declarations, two map arenas, a generation word, coverage counters), and
//! the host side of a swap: write the idle bank, then advance the
//! generation; workers pick it up at their next task.

use super::abi::{Hook, MapKind, ProgramSet};
use super::attach::Attachment;
use super::diagnosis::{self, Diagnosis};
pub use super::evaluate::Execution;
use super::evaluate::{Placement, ProgramExecutor};
use super::link::{CompiledKernel, Linked};
use crate::bundle::Env;
use crate::case::{Executor, Launch};
use crate::gpu::GpuExecutor;
use crate::schedule::Schedule;
use cudarc::driver::{CudaFunction, CudaModule, CudaSlice, DevicePtr};
use ground_truth::megakernel::{Capture, MonitorConfig};
use kernels::megakernel::{self as mk, bpf_slot as L};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn err<E: std::fmt::Debug>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e:?}")
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// `struct mk_bpf_bank` of `set`: its maps laid out as the host's
/// [`ProgramSet::layout`], its programs one after the other.
pub fn bank_bytes(set: &ProgramSet) -> Result<Vec<u8>, String> {
    let mut b = vec![0u8; L::BANK_BYTES];
    let (offsets, arena) = set.layout();
    if arena > L::ARENA_BYTES || set.maps.len() > L::MAX_MAPS {
        return Err(format!("{}: maps do not fit a device bank", set.name));
    }
    put32(&mut b, 0, set.maps.len() as u32);
    let mut at = 0usize;
    for p in &set.programs {
        let h = p.hook as usize;
        if at + p.insns() > L::MAX_INSNS {
            return Err(format!("{}: programs do not fit a device bank", set.name));
        }
        put32(&mut b, 8 + 4 * h, at as u32);
        put32(&mut b, 8 + 4 * (L::HOOK_KINDS + h), p.insns() as u32);
        b[L::BANK_INSNS + 8 * at..L::BANK_INSNS + 8 * (at + p.insns())].copy_from_slice(&p.code);
        at += p.insns();
    }
    for (i, m) in set.maps.iter().enumerate() {
        let d = L::BANK_MAPS + i * L::MAP_DESC_BYTES;
        for (k, v) in [
            m.kind.id(),
            m.key_size,
            m.value_size,
            m.max_entries,
            offsets[i] as u32,
            m.storage_bytes() as u32,
        ]
        .into_iter()
        .enumerate()
        {
            put32(&mut b, d + 4 * k, v);
        }
    }
    Ok(b)
}

/// The megakernel with hooks, loaded beside the plain one, and its slot.
pub struct DevicePrograms {
    _module: Arc<CudaModule>,
    func: CudaFunction,
    slot: Option<CudaSlice<u8>>,
    slot_ptr: u64,
    /// NVRTC compile + module load of the kernel with hooks, ns.
    pub compile_ns: u64,
    /// Registers per thread, static shared memory and local memory per thread
    /// of the plain kernel and of the kernel with hooks.
    pub resources: [(i32, i32, i32); 2],
}

/// Registers per thread, static shared memory and local memory per thread of `f`.
pub fn resources(f: &CudaFunction) -> Result<(i32, i32, i32), String> {
    use cudarc::driver::sys::CUfunction_attribute_enum as A;
    let a = |k| {
        f.get_attribute(k)
            .map_err(err("reading a function attribute"))
    };
    Ok((
        a(A::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
        a(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
        a(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
    ))
}

/// The GPU with hook programs.
pub struct GpuPrograms {
    pub gpu: GpuExecutor,
    pub dev: DevicePrograms,
    /// The megakernel with compiled hooks (relocatable), or why there is none.
    pub compiled: Result<CompiledKernel, String>,
    /// How launches with a program set attached run it.
    pub execution: Execution,
    /// Where a task-end-only set runs (the slot's `placement` word).
    pub placement: Placement,
    /// Program sets linked so far, by set name (a set is compiled once).
    linked: HashMap<String, Linked>,
    /// Why a compiled launch fell back to the interpreter, once per reason.
    pub fallbacks: Vec<String>,
}

impl GpuPrograms {
    /// Compiles and loads the kernel with hooks on an open GPU, and allocates its slot.
    pub fn new(gpu: GpuExecutor) -> Result<GpuPrograms, String> {
        let t = Instant::now();
        let ptx = mk::compile_ptx_with_hooks(None).map_err(|e| e.to_string())?;
        let module = gpu
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .map_err(err("loading the megakernel with hooks"))?;
        let func = module
            .load_function(mk::ENTRY)
            .map_err(err("looking up mk_persistent (hooks)"))?;
        let compile_ns = t.elapsed().as_nanos() as u64;
        let resources = [resources(&gpu.func)?, resources(&func)?];
        let slot = gpu
            .stream
            .alloc_zeros::<u8>(L::SLOT_BYTES)
            .map_err(err("allocating the program slot"))?;
        let slot_ptr = slot.device_ptr(&gpu.stream).0;
        let compiled = CompiledKernel::new(&gpu.ctx);
        Ok(GpuPrograms {
            compiled,
            execution: Execution::Compiled,
            placement: Placement::default(),
            linked: HashMap::new(),
            fallbacks: Vec::new(),
            gpu,
            dev: DevicePrograms {
                _module: module,
                func,
                slot: Some(slot),
                slot_ptr,
                compile_ns,
                resources,
            },
        })
    }

    /// The whole slot with `att`'s set in bank `generation & 1`, its arena
    /// and the counters zeroed, placed as `placement` says.
    fn slot_image(att: &Attachment, placement: Placement) -> Result<Vec<u8>, String> {
        let mut img = vec![0u8; L::SLOT_BYTES];
        put32(&mut img, L::GENERATION, att.generation);
        put32(
            &mut img,
            L::PLACEMENT,
            (placement == Placement::Inline) as u32,
        );
        let bank = (att.generation & 1) as usize;
        let at = L::BANKS + bank * L::BANK_BYTES;
        img[at..at + L::BANK_BYTES].copy_from_slice(&bank_bytes(&att.set)?);
        Ok(img)
    }

    fn read_back(&mut self, att: &mut Attachment, img: &[u8]) {
        let bank = (att.generation & 1) as usize;
        let arena = L::ARENAS + bank * L::ARENA_BYTES;
        let n = att.maps.arena.len();
        att.maps.arena.copy_from_slice(&img[arena..arena + n]);
        for c in 0..att.eligible.len() {
            att.eligible[c] = get64(img, L::ELIGIBLE + 8 * c);
            att.observed[c] = get64(img, L::OBSERVED + 8 * c);
            att.dropped[c] = get64(img, L::DROPPED + 8 * c);
        }
        att.insns = get64(img, L::INSNS);
        att.device_hook_ns = (0..L::HOOK_KINDS)
            .map(|h| get64(img, L::HOOK_NS + 8 * h))
            .sum();
        att.device_exec_ns = (0..L::HOOK_KINDS)
            .map(|h| get64(img, L::EXEC_NS + 8 * h))
            .sum();
    }

    /// `att`'s set compiled and linked into the megakernel (once per set name).
    pub fn linked(&mut self, att: &Attachment) -> Result<Linked, String> {
        if let Some(l) = self.linked.get(&att.set.name) {
            return Ok(l.clone());
        }
        let k = self.compiled.as_ref().map_err(|e| e.clone())?;
        let l = k.attach(att)?;
        self.linked.insert(att.set.name.clone(), l.clone());
        Ok(l)
    }

    /// The kernel a launch with `att` attached runs: the linked one when
    /// compiling, else (or when compiling failed: the reason is kept in
    /// [`Self::fallbacks`]) the interpreter's.
    fn kernel_for(&mut self, att: &Attachment) -> CudaFunction {
        if self.execution == Execution::Compiled {
            match self.linked(att) {
                Ok(l) => return l.func,
                Err(e) => {
                    let why = format!("{}: {e}", att.set.name);
                    if !self.fallbacks.contains(&why) {
                        eprintln!("causalbench: compiled hooks unavailable, interpreting ({why})");
                        self.fallbacks.push(why);
                    }
                }
            }
        }
        self.dev.func.clone()
    }

    fn slot(&mut self) -> &mut CudaSlice<u8> {
        self.dev.slot.as_mut().expect("the slot is back")
    }

    /// Host-side swap cost: writing one bank (and zeroing its arena's used
    /// part) and advancing the generation, synchronized, ns.
    pub fn swap_ns(&mut self, att: &Attachment) -> Result<u64, String> {
        let bank = bank_bytes(&att.set)?;
        let b = (att.generation & 1) as usize;
        let st = self.gpu.stream.clone();
        let used = att.maps.arena.len();
        let zero = vec![0u8; used];
        let gen = att.generation.to_le_bytes();
        let t = Instant::now();
        let slot = self.slot();
        let at = L::BANKS + b * L::BANK_BYTES;
        st.memcpy_htod(&bank, &mut slot.slice_mut(at..at + L::BANK_BYTES))
            .map_err(err("writing a bank"))?;
        let ar = L::ARENAS + b * L::ARENA_BYTES;
        if used > 0 {
            st.memcpy_htod(&zero, &mut slot.slice_mut(ar..ar + used))
                .map_err(err("zeroing an arena"))?;
        }
        st.memcpy_htod(&gen, &mut slot.slice_mut(0..4))
            .map_err(err("advancing the generation"))?;
        st.synchronize().map_err(err("synchronizing"))?;
        Ok(t.elapsed().as_nanos() as u64)
    }

    /// One launch with `a` attached, swapping in `b` (generation + 1) from a
    /// second stream `delay` after the launch while the kernel runs. Fills
    /// both attachments' maps from their banks' arenas.
    pub fn live_swap(
        &mut self,
        s: &Schedule,
        a: &mut Attachment,
        b: &mut Attachment,
        delay: Duration,
    ) -> Result<(), String> {
        b.generation = a.generation + 1;
        let img = Self::slot_image(a, self.placement)?;
        let st = self.gpu.stream.clone();
        st.memcpy_htod(&img, self.slot())
            .map_err(err("uploading the slot"))?;
        st.synchronize().map_err(err("synchronizing"))?;
        let bank = bank_bytes(&b.set)?;
        let bi = (b.generation & 1) as usize;
        let gen = b.generation.to_le_bytes();
        let mut slot = self.dev.slot.take().expect("the slot is here");
        let side = self.gpu.ctx.new_stream().map_err(err("a second stream"))?;
        let swapper = std::thread::spawn(move || -> Result<(CudaSlice<u8>, bool), String> {
            // Wait (at most 2 s) until the kernel runs bank A — its first hook
            // counted — then `delay` more, then swap from this second stream.
            let t0 = Instant::now();
            let mut counters = vec![0u8; 64];
            let mut running = false;
            while t0.elapsed() < Duration::from_secs(2) {
                side.memcpy_dtoh(&slot.slice(L::ELIGIBLE..L::ELIGIBLE + 64), &mut counters)
                    .map_err(err("polling the slot"))?;
                if counters.iter().any(|&c| c != 0) {
                    running = true;
                    break;
                }
            }
            std::thread::sleep(delay);
            let at = L::BANKS + bi * L::BANK_BYTES;
            side.memcpy_htod(&bank, &mut slot.slice_mut(at..at + L::BANK_BYTES))
                .map_err(err("writing the idle bank"))?;
            side.memcpy_htod(&gen, &mut slot.slice_mut(0..4))
                .map_err(err("advancing the generation"))?;
            side.synchronize().map_err(err("synchronizing the swap"))?;
            Ok((slot, running))
        });
        self.gpu.hook_kernel = Some((self.dev.func.clone(), self.dev.slot_ptr));
        let launched = self
            .gpu
            .launch(s, &MonitorConfig::none(), 0)
            .map(|l| l.error);
        self.gpu.hook_kernel = None;
        let (slot, running) = swapper.join().map_err(|_| "the swap thread panicked")??;
        self.dev.slot = Some(slot);
        match launched? {
            0 => {}
            e => return Err(format!("device error bits {e:#x}")),
        }
        if !running {
            return Err("the kernel had not started when the swap was due".into());
        }
        let img = st
            .clone_dtoh(self.slot())
            .map_err(err("reading the slot"))?;
        self.read_back(a, &img);
        self.read_back(b, &img);
        Ok(())
    }
}

impl GpuPrograms {
    /// Uploads the slot with `att`'s set in its bank (synchronized); ns.
    fn upload(&mut self, att: &Attachment) -> Result<u64, String> {
        let t = Instant::now();
        let img = Self::slot_image(att, self.placement)?;
        let st = self.gpu.stream.clone();
        st.memcpy_htod(&img, self.slot())
            .map_err(err("uploading the slot"))?;
        st.synchronize().map_err(err("synchronizing"))?;
        Ok(t.elapsed().as_nanos() as u64)
    }

    /// One launch of `s` with `att` attached (uploaded first by [`Self::upload`]):
    /// the kernel with hooks launched and, when it ran clean, its maps and
    /// coverage read back; the launch's device errors are the caller's to judge.
    fn launch_attached(
        &mut self,
        s: &Schedule,
        cfg: &MonitorConfig,
        seed: u64,
        att: &mut Attachment,
    ) -> Result<Launch, String> {
        let st = self.gpu.stream.clone();
        let func = self.kernel_for(att);
        self.gpu.hook_kernel = Some((func, self.dev.slot_ptr));
        let l = self.gpu.launch(s, cfg, seed);
        self.gpu.hook_kernel = None;
        let l = l?;
        if l.error == 0 {
            let img = st
                .clone_dtoh(self.slot())
                .map_err(err("reading the slot"))?;
            self.read_back(att, &img);
        }
        Ok(l)
    }
}

impl ProgramExecutor for GpuPrograms {
    fn executions(&self) -> Vec<Execution> {
        match self.compiled {
            Ok(_) => vec![Execution::Compiled, Execution::Interpreted],
            Err(_) => vec![Execution::Interpreted],
        }
    }
    fn set_execution(&mut self, e: Execution) {
        self.execution = e;
    }
    fn defers(&self) -> bool {
        true
    }
    fn set_placement(&mut self, p: Placement) {
        self.placement = p;
    }
    fn launch_programs(
        &mut self,
        s: &Schedule,
        cfg: &MonitorConfig,
        seed: u64,
        programs: Option<&mut Attachment>,
    ) -> Result<Capture, String> {
        let l = match programs {
            Some(att) => {
                self.upload(att)?;
                self.launch_attached(s, cfg, seed, att)?
            }
            None => self.gpu.launch(s, cfg, seed)?,
        };
        match l.error {
            0 => Ok(l.capture),
            e => Err(format!("device error bits {e:#x}")),
        }
    }
}

/// The track's executor on a GPU that runs hook programs: every launch as
/// the plain GPU's, plus the diagnosis programs' (`bpf::diagnosis`) at the
/// hooks, attached (loaded, verified, uploaded) before each launch.
impl Executor for GpuPrograms {
    fn env(&self) -> Env {
        self.gpu.env()
    }
    fn default_workers(&self) -> u32 {
        self.gpu.default_workers()
    }
    fn launch(&mut self, s: &Schedule, cfg: &MonitorConfig, seed: u64) -> Result<Launch, String> {
        self.gpu.launch(s, cfg, seed)
    }
    fn launch_pc_sampling(&mut self, s: &Schedule, seed: u64) -> Option<Result<Launch, String>> {
        self.gpu.launch_pc_sampling(s, seed)
    }
    fn launch_ebpf(
        &mut self,
        s: &Schedule,
        seed: u64,
        d: &Diagnosis,
    ) -> Option<Result<Launch, String>> {
        let mut run = || -> Result<Launch, String> {
            // Attaching a program: load + verify on the host, then the slot's upload.
            let t = Instant::now();
            let mut att = d.attach()?;
            let attach_ns = t.elapsed().as_nanos() as u64 + self.upload(&att)?;
            let mut l = self.launch_attached(s, &d.config(), seed, &mut att)?;
            if l.error == 0 {
                l.capture = diagnosis::capture(d, &att, s.workers, l.capture.kernel_ns, attach_ns)?;
            }
            Ok(l)
        };
        Some(run())
    }
}

/// Hooks the set has a program for (for reports).
pub fn hooks_of(set: &ProgramSet) -> Vec<Hook> {
    set.programs.iter().map(|p| p.hook).collect()
}

/// Ring maps of a set (for reports).
pub fn rings_of(set: &ProgramSet) -> usize {
    set.maps.iter().filter(|m| m.kind == MapKind::Ring).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::{load, programs};

    #[test]
    fn a_bank_holds_the_programs_and_maps_where_the_device_reads_them() {
        let Some(elf) = programs::object("slo_waits") else {
            eprintln!("SKIP a_bank_holds_the_programs_and_maps_where_the_device_reads_them: no programs built");
            return;
        };
        let set = load("slo_waits", elf).unwrap();
        let b = bank_bytes(&set).unwrap();
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        assert_eq!(b.len(), L::BANK_BYTES);
        assert_eq!(u32_at(0), 2);
        let end = set.program(Hook::TaskEnd).unwrap();
        let wait = set.program(Hook::DepWait).unwrap();
        // No task_begin program; task_end first, then dep_wait.
        assert_eq!(
            u32_at(8 + 4 * (L::HOOK_KINDS + Hook::TaskBegin as usize)),
            0
        );
        assert_eq!(u32_at(8 + 4 * Hook::TaskEnd as usize), 0);
        assert_eq!(u32_at(8 + 4 * Hook::DepWait as usize), end.insns() as u32);
        assert_eq!(
            u32_at(8 + 4 * (L::HOOK_KINDS + Hook::DepWait as usize)),
            wait.insns() as u32
        );
        let at = L::BANK_INSNS + 8 * end.insns();
        assert_eq!(&b[at..at + wait.code.len()], &wait.code[..]);
        // Map 1 (`count`): array, 4-byte keys, 8-byte values, one entry, after map 0's 512 bytes.
        let d = L::BANK_MAPS + L::MAP_DESC_BYTES;
        assert_eq!(
            (u32_at(d), u32_at(d + 4), u32_at(d + 8), u32_at(d + 12)),
            (2, 4, 8, 1)
        );
        assert_eq!((u32_at(d + 16), u32_at(d + 20)), (512, 8));
    }
}
