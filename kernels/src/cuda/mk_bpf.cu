// Interpreter of verified hook programs (eBPF bytecode) for the persistent
// megakernel, compiled in front of megakernel.cu when MK_BPF_HOOKS is defined
// (kernels::megakernel::compile_ptx_with_hooks). It mirrors the reference
// interpreter megakernel/src/bpf/interp.rs instruction for instruction: the
// same tagged pointers (region in bits 60-63, map index in bits 48-55, byte
// offset below), the same helpers (1 map lookup, 2 map update, 130 ring
// output), and a run-time bounds check on every access, so a program the
// host-side verifier should have refused faults (counted as dropped) instead
// of touching memory it does not own.
//
// The host writes a verified set into the idle bank of `mk_bpf_slot` (its
// programs, map declarations and zeroed map arena) and then advances
// `generation`; each worker reads the generation word once per task (while
// its scheduling thread finishes the task before: mk_bpf_epoch) and applies it
// from the next task's start (a task epoch), so a swap takes effect between
// tasks, while the persistent kernel runs, and never in the middle of one.

typedef unsigned long long mk_u64;
typedef unsigned int mk_u32;

#define MK_BPF_MAX_INSNS 1024
#define MK_BPF_MAX_MAPS 8
#define MK_BPF_HOOK_KINDS 3 // 0 task begin, 1 task end, 2 dependency wait
#define MK_BPF_ARENA_BYTES 65536
#define MK_BPF_STACK 512
#define MK_BPF_CTX 80
#define MK_BPF_RING_HEADER 16
#define MK_BPF_MAP_ARRAY 2u
#define MK_BPF_MAP_RING 27u

struct mk_bpf_map_desc {  // 32 bytes
    mk_u32 kind, key_size, value_size, max_entries;
    mk_u32 offset;        // bytes into the bank's arena
    mk_u32 storage;       // bytes of storage (8-byte aligned)
    mk_u32 pad[2];
};
static_assert(sizeof(mk_bpf_map_desc) == 32, "mk_bpf_map_desc must be 32 bytes");

struct mk_bpf_bank {      // one verified program set
    mk_u32 n_maps;
    mk_u32 pad;
    mk_u32 prog_start[MK_BPF_HOOK_KINDS]; // first instruction of each hook's program
    mk_u32 prog_len[MK_BPF_HOOK_KINDS];   // 0: no program at that hook
    mk_bpf_map_desc maps[MK_BPF_MAX_MAPS];
    mk_u64 insns[MK_BPF_MAX_INSNS];
};
static_assert(sizeof(mk_bpf_bank) == 8480, "mk_bpf_bank must be 8480 bytes");

struct mk_bpf_slot {
    mk_u32 generation;    // the host advances it after writing bank[generation & 1]
    mk_u32 placement;     // 0: a set whose one program is at task end runs deferred (mk_bpf_epoch::defers); 1: inline
    mk_u64 eligible[8];   // per class: hook events with a program attached
    mk_u64 observed[8];   // per class: runs that completed
    mk_u64 dropped[8];    // per class: ring outputs refused, runs that faulted
    mk_u64 insns;         // instructions executed
    mk_bpf_bank bank[2];
    unsigned char arena[2][MK_BPF_ARENA_BYTES];
    mk_u64 hook_ns[MK_BPF_HOOK_KINDS]; // per hook: %globaltimer ns spent in runs of its program, all workers
    mk_u64 exec_ns[MK_BPF_HOOK_KINDS]; // of which in the interpreter's dispatch loop (mk_bpf_exec; 0 compiled)
};
static_assert(sizeof(mk_bpf_slot) == 148288, "mk_bpf_slot must be 148288 bytes");

#ifdef MK_BPF_COMPILED
// Compiled with MK_BPF_COMPILED (kernels::megakernel::compile_cubin_with_compiled_hooks,
// relocatable device code): the hooks call the verified program set translated to
// CUDA C (megakernel/src/bpf/translate.rs), compiled and linked in at attach time
// (megakernel/src/bpf/device.rs). Same arguments: the slot, the bank generation and
// the context's fields; each function keeps the slot's coverage counters itself.
#define MK_BPF_HOOK_DECL(name)                                                                \
    extern "C" __device__ void name(unsigned char* slot, mk_u32 gen, mk_u32 task,              \
                                    mk_u32 class_id, mk_u32 task_gen, mk_u32 req_gen,          \
                                    mk_u32 worker, mk_u32 dep_event, mk_u64 ts_start,          \
                                    mk_u64 ts_end, mk_u64 wait_ns, mk_u32 queue_depth,         \
                                    mk_u64 notify_ns, mk_u64 queue_ns);
MK_BPF_HOOK_DECL(mk_bpf_hook_task_begin)
MK_BPF_HOOK_DECL(mk_bpf_hook_task_end)
MK_BPF_HOOK_DECL(mk_bpf_hook_dep_wait)
#endif

__device__ __forceinline__ mk_u64 mk_bpf_now() {
    mk_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

struct mk_bpf_machine {
    const mk_bpf_bank* bank;
    unsigned char* arena;
    // 8-byte aligned, like the arena's maps, so that aligned accesses are one word.
    __align__(8) unsigned char ctx[MK_BPF_CTX];
    __align__(8) unsigned char stack[MK_BPF_STACK];
};

#define MK_BPF_TAG_CTX 1ull
#define MK_BPF_TAG_STACK 2ull
#define MK_BPF_TAG_VALUE 3ull
#define MK_BPF_TAG_MAP 4ull
#define MK_BPF_OFF_MASK ((1ull << 48) - 1ull)

// The bytes `size` long at tagged address `a`, or NULL.
__device__ unsigned char* mk_bpf_resolve(mk_bpf_machine* m, mk_u64 a, mk_u32 size) {
    const mk_u64 off = a & MK_BPF_OFF_MASK;
    switch (a >> 60) {
        case MK_BPF_TAG_CTX: return off + size <= MK_BPF_CTX ? m->ctx + off : 0;
        case MK_BPF_TAG_STACK: return off + size <= MK_BPF_STACK ? m->stack + off : 0;
        case MK_BPF_TAG_VALUE: {
            const mk_u32 mi = (mk_u32)((a >> 48) & 0xffu);
            if (mi >= m->bank->n_maps) return 0;
            const mk_bpf_map_desc& d = m->bank->maps[mi];
            return off + size <= d.storage ? m->arena + d.offset + off : 0;
        }
        default: return 0;
    }
}

// A bounds-checked access of `size` bytes: one word-wide load or store when
// `p` is aligned to its size (what clang emits for the context, the stack and
// map values, which are all 8-byte aligned), byte by byte otherwise. A word
// also reads a map value other workers update atomically in one piece.
__device__ __forceinline__ mk_u64 mk_bpf_get(const unsigned char* p, mk_u32 size) {
    if (((mk_u64)p & (mk_u64)(size - 1u)) == 0) {
        switch (size) {
            case 8: return *(const mk_u64*)p;
            case 4: return *(const mk_u32*)p;
            case 2: return *(const unsigned short*)p;
            default: return *p;
        }
    }
    mk_u64 v = 0;
    for (mk_u32 k = 0; k < size; ++k) v |= (mk_u64)p[k] << (8u * k);
    return v;
}

__device__ __forceinline__ void mk_bpf_put(unsigned char* p, mk_u32 size, mk_u64 v) {
    if (((mk_u64)p & (mk_u64)(size - 1u)) == 0) {
        switch (size) {
            case 8: *(mk_u64*)p = v; return;
            case 4: *(mk_u32*)p = (mk_u32)v; return;
            case 2: *(unsigned short*)p = (unsigned short)v; return;
            default: *p = (unsigned char)v; return;
        }
    }
    for (mk_u32 k = 0; k < size; ++k) p[k] = (unsigned char)(v >> (8u * k));
}

// `n` bytes from `src` to `dst`: whole words when both are 8-byte aligned and n is a multiple of 8.
__device__ __forceinline__ void mk_bpf_copy(unsigned char* dst, const unsigned char* src, mk_u32 n) {
    if ((((mk_u64)dst | (mk_u64)src | (mk_u64)n) & 7u) == 0) {
        for (mk_u32 k = 0; k < n; k += 8) *(mk_u64*)(dst + k) = *(const mk_u64*)(src + k);
        return;
    }
    for (mk_u32 k = 0; k < n; ++k) dst[k] = src[k];
}

__device__ __forceinline__ mk_u32 mk_bpf_size(mk_u32 opc) {
    switch (opc & 0x18u) { case 0x00u: return 4; case 0x08u: return 2; case 0x10u: return 1; default: return 8; }
}

__device__ mk_u64 mk_bpf_alu(mk_u32 op, mk_u64 a, mk_u64 b, bool is64) {
    if (!is64) { a = (mk_u32)a; b = (mk_u32)b; }
    const mk_u32 sh = (mk_u32)(is64 ? (b & 63u) : (b & 31u));
    mk_u64 r;
    switch (op) {
        case 0x00: r = a + b; break;
        case 0x10: r = a - b; break;
        case 0x20: r = a * b; break;
        case 0x30: r = b ? a / b : 0; break;
        case 0x40: r = a | b; break;
        case 0x50: r = a & b; break;
        case 0x60: r = a << sh; break;
        case 0x70: r = is64 ? a >> sh : (mk_u64)((mk_u32)a >> sh); break;
        case 0x80: r = (mk_u64)(-(long long)a); break;
        case 0x90: r = b ? a % b : a; break;
        case 0xa0: r = a ^ b; break;
        case 0xb0: r = b; break;
        case 0xc0: r = is64 ? (mk_u64)((long long)a >> sh) : (mk_u64)(mk_u32)((int)(mk_u32)a >> sh); break;
        default: r = 0; break;
    }
    return is64 ? r : (mk_u64)(mk_u32)r;
}

__device__ bool mk_bpf_jump(mk_u32 op, mk_u64 a, mk_u64 b) {
    switch (op) {
        case 0x10: return a == b;
        case 0x20: return a > b;
        case 0x30: return a >= b;
        case 0x40: return (a & b) != 0;
        case 0x50: return a != b;
        case 0x60: return (long long)a > (long long)b;
        case 0x70: return (long long)a >= (long long)b;
        case 0xa0: return a < b;
        case 0xb0: return a <= b;
        case 0xc0: return (long long)a < (long long)b;
        case 0xd0: return (long long)a <= (long long)b;
        default: return false;
    }
}

// A helper call; returns false on bad arguments (a fault).
__device__ bool mk_bpf_helper(mk_bpf_machine* m, int id, mk_u64* r, mk_u64* ring_dropped) {
    if ((r[1] >> 60) != MK_BPF_TAG_MAP) return false;
    const mk_u32 mi = (mk_u32)(r[1] & 0xffu);
    if (mi >= m->bank->n_maps) return false;
    const mk_bpf_map_desc& d = m->bank->maps[mi];
    const mk_u64 value_base = (MK_BPF_TAG_VALUE << 60) | ((mk_u64)mi << 48);
    if (id == 1 || id == 2) {
        if (d.kind != MK_BPF_MAP_ARRAY) return false;
        const unsigned char* kp = mk_bpf_resolve(m, r[2], 4);
        if (!kp) return false;
        const mk_u32 key = (mk_u32)mk_bpf_get(kp, 4);
        if (key >= d.max_entries) { r[0] = id == 1 ? 0ull : ~0ull; return true; }
        const mk_u64 value = value_base | ((mk_u64)key * d.value_size);
        if (id == 1) { r[0] = value; return true; }
        const unsigned char* src = mk_bpf_resolve(m, r[3], d.value_size);
        unsigned char* dst = mk_bpf_resolve(m, value, d.value_size);
        if (!src || !dst) return false;
        mk_bpf_copy(dst, src, d.value_size);
        r[0] = 0;
        return true;
    }
    if (id == 130) {
        const mk_u32 size = (mk_u32)r[3];
        if (d.kind != MK_BPF_MAP_RING || size == 0 || size > d.value_size) return false;
        const unsigned char* src = mk_bpf_resolve(m, r[2], size);
        if (!src) return false;
        mk_u32* head = (mk_u32*)(m->arena + d.offset);
        const mk_u32 slot = atomicAdd(head, 1u);
        if (slot >= d.max_entries) {
            atomicAdd(head + 1, 1u);
            *ring_dropped += 1;
            r[0] = ~0ull;
            return true;
        }
        unsigned char* dst = m->arena + d.offset + MK_BPF_RING_HEADER + (mk_u64)slot * d.value_size;
        mk_bpf_copy(dst, src, size);
        r[0] = 0;
        return true;
    }
    return false;
}

// Runs the program at `start` (`len` instructions); false on a fault.
__device__ bool mk_bpf_exec(mk_bpf_machine* m, mk_u32 start, mk_u32 len, mk_u64* executed,
                            mk_u64* ring_dropped) {
    mk_u64 r[11];
    for (int k = 0; k < 11; ++k) r[k] = 0;
    r[1] = MK_BPF_TAG_CTX << 60;
    r[10] = (MK_BPF_TAG_STACK << 60) | MK_BPF_STACK;
    const mk_u64* code = m->bank->insns + start;
    mk_u32 pc = 0;
    // The verifier admits no back edge, so a program runs at most `len`
    // instructions; the bound is enforced here too.
    for (mk_u32 steps = 0; steps <= len && pc < len; ++steps) {
        const mk_u64 w = code[pc];
        const mk_u32 opc = (mk_u32)(w & 0xffu);
        const mk_u32 dst = (mk_u32)((w >> 8) & 0xfu), src = (mk_u32)((w >> 12) & 0xfu);
        const int off = (int)(short)((w >> 16) & 0xffffu);
        const int imm32 = (int)(mk_u32)(w >> 32);
        const mk_u64 imm = (mk_u64)(long long)imm32;
        if (dst > 10 || src > 10) return false;
        *executed += 1;
        const mk_u32 cls = opc & 7u, op = opc & 0xf0u;
        const bool x = (opc & 0x08u) != 0;
        switch (cls) {
            case 0x04: case 0x07: {
                const bool is64 = cls == 0x07;
                if (op == 0xd0) {
                    mk_u64 v = r[dst];
                    if (!x) v = imm32 == 16 ? (mk_u64)(unsigned short)v : imm32 == 32 ? (mk_u64)(mk_u32)v : v;
                    else if (imm32 == 16) v = (mk_u64)__byte_perm((mk_u32)v, 0, 0x0001) & 0xffffu;
                    else if (imm32 == 32) v = (mk_u64)__byte_perm((mk_u32)v, 0, 0x0123);
                    else v = ((mk_u64)__byte_perm((mk_u32)v, 0, 0x0123) << 32) | __byte_perm((mk_u32)(v >> 32), 0, 0x0123);
                    r[dst] = v;
                } else {
                    r[dst] = mk_bpf_alu(op, r[dst], x ? r[src] : imm, is64);
                }
                ++pc;
                break;
            }
            case 0x05:
                if (op == 0x00) { pc = (mk_u32)((int)pc + 1 + off); break; }
                if (op == 0x80) {
                    if (!mk_bpf_helper(m, imm32, r, ring_dropped)) return false;
                    ++pc;
                    break;
                }
                if (op == 0x90) return true;
                pc = mk_bpf_jump(op, r[dst], x ? r[src] : imm) ? (mk_u32)((int)pc + 1 + off) : pc + 1;
                break;
            case 0x01: {
                const mk_u32 size = mk_bpf_size(opc);
                const unsigned char* p = mk_bpf_resolve(m, r[src] + (mk_u64)(long long)off, size);
                if (!p) return false;
                r[dst] = mk_bpf_get(p, size);
                ++pc;
                break;
            }
            case 0x02: case 0x03: {
                const mk_u32 size = mk_bpf_size(opc);
                const mk_u64 a = r[dst] + (mk_u64)(long long)off;
                unsigned char* p = mk_bpf_resolve(m, a, size);
                if (!p) return false;
                const mk_u64 v = cls == 0x02 ? imm : r[src];
                if ((opc & 0xe0u) == 0xc0u) {
                    // Atomic add: map values are shared by every worker.
                    if (size == 8 && ((mk_u64)p & 7u) == 0) atomicAdd((mk_u64*)p, v);
                    else if (size == 4 && ((mk_u64)p & 3u) == 0) atomicAdd((mk_u32*)p, (mk_u32)v);
                    else return false;
                } else {
                    mk_bpf_put(p, size, v);
                }
                ++pc;
                break;
            }
            case 0x00:
                if (opc != 0x18u || pc + 1 >= len) return false;
                if (src == 1) r[dst] = (MK_BPF_TAG_MAP << 60) | (mk_u64)(mk_u32)imm32;
                else r[dst] = (code[pc + 1] & 0xffffffff00000000ull) | (mk_u64)(mk_u32)imm32;
                pc += 2;
                break;
            default:
                return false;
        }
    }
    return false;
}

// One hook: runs the bank's program for `hook` on this context. The caller
// calls it only for a hook its epoch (mk_bpf_epoch) says has a program, so a
// hook without one costs the scheduling thread no load and no call (its own
// function, so a PC sample in it names the monitor, not the scheduler).
__device__ __noinline__ void mk_bpf_run_hook(mk_bpf_slot* slot, mk_u32 gen, mk_u32 hook, mk_u32 task,
                                mk_u32 class_id, mk_u32 task_gen, mk_u32 req_gen, mk_u32 worker,
                                mk_u32 dep_event, mk_u64 ts_start, mk_u64 ts_end, mk_u64 wait_ns,
                                mk_u32 queue_depth, mk_u64 notify_ns, mk_u64 queue_ns) {
    // Time in the program, so that a kernel's stretch can be set against what the hooks took.
    const mk_u64 t_in = mk_bpf_now();
#ifdef MK_BPF_COMPILED
    switch (hook) {
        case 0u: mk_bpf_hook_task_begin((unsigned char*)slot, gen, task, class_id, task_gen, req_gen, worker,
                                        dep_event, ts_start, ts_end, wait_ns, queue_depth, notify_ns, queue_ns); break;
        case 1u: mk_bpf_hook_task_end((unsigned char*)slot, gen, task, class_id, task_gen, req_gen, worker,
                                      dep_event, ts_start, ts_end, wait_ns, queue_depth, notify_ns, queue_ns); break;
        default: mk_bpf_hook_dep_wait((unsigned char*)slot, gen, task, class_id, task_gen, req_gen, worker,
                                      dep_event, ts_start, ts_end, wait_ns, queue_depth, notify_ns, queue_ns); break;
    }
    atomicAdd(&slot->hook_ns[hook], mk_bpf_now() - t_in);
    return;
#endif
    const mk_bpf_bank* bank = &slot->bank[gen & 1u];
    const mk_u32 len = bank->prog_len[hook];
    const mk_u32 cls = class_id < 8u ? class_id : 7u;
    atomicAdd(&slot->eligible[cls], 1ull);
    mk_bpf_machine m;
    m.bank = bank;
    m.arena = slot->arena[gen & 1u];
    mk_bpf_put(m.ctx + 0, 4, task);
    mk_bpf_put(m.ctx + 4, 4, class_id);
    mk_bpf_put(m.ctx + 8, 4, task_gen);
    mk_bpf_put(m.ctx + 12, 4, req_gen);
    mk_bpf_put(m.ctx + 16, 4, worker);
    mk_bpf_put(m.ctx + 20, 4, dep_event);
    mk_bpf_put(m.ctx + 24, 8, ts_start);
    mk_bpf_put(m.ctx + 32, 8, ts_end);
    mk_bpf_put(m.ctx + 40, 8, wait_ns);
    mk_bpf_put(m.ctx + 48, 4, hook);
    mk_bpf_put(m.ctx + 52, 4, queue_depth);
    mk_bpf_put(m.ctx + 56, 8, 0ull);
    mk_bpf_put(m.ctx + 64, 8, notify_ns);
    mk_bpf_put(m.ctx + 72, 8, queue_ns);
    mk_u64 executed = 0, ring_dropped = 0;
    const mk_u64 t_exec = mk_bpf_now();
    const bool ok = mk_bpf_exec(&m, bank->prog_start[hook], len, &executed, &ring_dropped);
    atomicAdd(&slot->exec_ns[hook], mk_bpf_now() - t_exec);
    atomicAdd(&slot->insns, executed);
    if (ok) atomicAdd(&slot->observed[cls], 1ull);
    if (!ok || ring_dropped) atomicAdd(&slot->dropped[cls], ok ? ring_dropped : 1ull);
    atomicAdd(&slot->hook_ns[hook], mk_bpf_now() - t_in);
}

// A task-end run handed to another warp of the worker (megakernel.cu): the
// scheduling thread (thread 0) records the context at the task end and goes
// on, and thread 32, idle while thread 0 spins the next task's body, runs the
// program then (megakernel/README.md, "Compiled monitors on the H200": the
// diagnosis's 343 instructions per task end were the worker's critical path).
struct mk_bpf_deferred {
    // taken: the tasks of the worker's queue taken up to this one (its queue depth
    // is the tail thread 32 read at the task's end less this).
    mk_u32 pending, gen, task, class_id, task_gen, req_gen, worker, dep_event, taken, pad;
    mk_u64 ts_start, ts_end, wait_ns, notify_ns, queue_ns;
};

// What the hooks of one task need to know of the attached set: its bank
// generation, which hooks have a program (bit h for hook h) and whether the
// task-end program runs deferred. The scheduling thread reads it from shared
// memory at each task's start; thread 32 reads the slot into it while thread 0
// does a task's end-of-task work (megakernel.cu), so the swap check and the
// bank header cost the scheduling thread no global load (megakernel/README.md,
// "Where a hook's fixed cost went").
struct mk_bpf_epoch {
    mk_u32 gen, hooks, defers, pad;
};

// Only a set whose one program is at task end is deferred: one worker's runs
// then still follow one another (the next one is handed over after this one
// ended), and no begin or wait program of the same worker runs beside it.
__device__ void mk_bpf_read_epoch(const mk_bpf_slot* slot, volatile mk_bpf_epoch* e) {
    if (slot == 0) {
        e->gen = 0u; e->hooks = 0u; e->defers = 0u;
        return;
    }
    const mk_u32 gen = ((const volatile mk_u32*)&slot->generation)[0];
    // The host writes the bank before it advances the generation.
    __threadfence();
    const volatile mk_u32* len = slot->bank[gen & 1u].prog_len;
    mk_u32 hooks = 0u;
    for (mk_u32 h = 0; h < MK_BPF_HOOK_KINDS; ++h) hooks |= (len[h] != 0u ? 1u : 0u) << h;
    const mk_u32 placement = ((const volatile mk_u32*)&slot->placement)[0];
    e->gen = gen;
    e->hooks = hooks;
    e->defers = blockDim.x > 32u && placement == 0u && hooks == (1u << 1) ? 1u : 0u;
}

// `tail_at_end`: the worker queue's tail thread 32 read at the task's end.
__device__ __forceinline__ void mk_bpf_run_deferred(mk_bpf_slot* slot, volatile mk_bpf_deferred* d,
                                                    mk_u32 tail_at_end) {
    if (!d->pending) return;
    d->pending = 0u;
    mk_bpf_run_hook(slot, d->gen, 1u, d->task, d->class_id, d->task_gen, d->req_gen, d->worker,
                    d->dep_event, d->ts_start, d->ts_end, d->wait_ns, tail_at_end - d->taken,
                    d->notify_ns, d->queue_ns);
}
