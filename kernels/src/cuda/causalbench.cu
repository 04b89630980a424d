// causalbench device kernels, compiled at run time with NVRTC (no nvcc needed).
//
// Every kernel takes `op_id` (u64), a pointer to a device log (array of
// cb_log_entry, may be null to disable logging) and the slot index it writes.
//
// Logging protocol (see kernels/src/lib.rs `LogEntry`, which mirrors this struct):
//   * thread 0 of every block reads %globaltimer when the block starts and when
//     it ends;
//   * every block atomically adds 1 to `blocks` and atomicMax-es its end time
//     into `last_end_ns` (so the log must be zeroed before first use, e.g. with
//     cuMemsetD8 / alloc_zeros);
//   * block 0 thread 0 writes `op_id`, `start_ns`, `end_ns` and `smid` with
//     plain stores (these fields need no initialisation);
//   * a CUDA graph's node is captured once with fixed arguments but runs once
//     per replay, so its slot may name a ring instead of one entry (CB_RING
//     set; kernels/src/lib.rs `LogRing`): entry `header` counts the replays
//     whose every block finished (its `blocks` field), and replay r writes
//     entry header + 1 + r. All blocks of replay r read r: the count moves
//     only when the last block of the replay has finished, and replays of
//     one graph exec run one after another (cuGraphLaunch orders a launch
//     behind the exec's previous launches). Replays past the ring's capacity
//     are not logged.
//
// %globaltimer is a wall-clock-based nanosecond counter (ticks every 32 ns on
// Hopper); it is a different clock domain from the host's CLOCK_MONOTONIC, so
// consumers calibrate an offset.

typedef unsigned long long cb_u64;
typedef unsigned int cb_u32;

struct cb_log_entry {
    cb_u64 op_id;        // offset 0
    cb_u64 start_ns;     // offset 8: block 0's first %globaltimer reading
    cb_u64 end_ns;       // offset 16: block 0's last %globaltimer reading
    cb_u32 smid;         // offset 24: %smid block 0 ran on
    cb_u32 blocks;       // offset 28: number of blocks that finished (atomicAdd)
    cb_u64 last_end_ns;  // offset 32: latest end over all blocks (atomicMax)
};                       // size 40, align 8

static_assert(sizeof(cb_log_entry) == 40, "cb_log_entry must be 40 bytes");

__device__ __forceinline__ cb_u64 cb_globaltimer() {
    cb_u64 t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ cb_u32 cb_smid() {
    cb_u32 id;
    asm volatile("mov.u32 %0, %smid;" : "=r"(id));
    return id;
}

__device__ __forceinline__ bool cb_is_thread0() {
    return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
}

__device__ __forceinline__ bool cb_is_block0() {
    return blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
}

#define CB_RING 0x80000000u
#define CB_RING_CAP_SHIFT 20
#define CB_RING_CAP_MASK 0x7ffu
#define CB_RING_HEADER_MASK 0xfffffu

// The ring header of `slot`, or null when `slot` names one entry.
__device__ __forceinline__ cb_log_entry* cb_ring_header(cb_log_entry* log, cb_u32 slot) {
    return (slot & CB_RING) != 0u ? log + (slot & CB_RING_HEADER_MASK) : nullptr;
}

// The entry this run of the kernel writes, or null past a ring's capacity.
__device__ __forceinline__ cb_log_entry* cb_log_target(cb_log_entry* log, cb_u32 slot) {
    cb_log_entry* ring = cb_ring_header(log, slot);
    if (ring == nullptr) return log + slot;
    const cb_u32 cap = (slot >> CB_RING_CAP_SHIFT) & CB_RING_CAP_MASK;
    const cb_u32 replay = *(volatile cb_u32*)&ring->blocks;
    return replay < cap ? ring + 1 + replay : nullptr;
}

// A ring's block: the last block of a replay (the one whose count completes
// the grid) moves the header's replay count on. Waiting for that count is an
// atomic's round trip the plain path does not take (its atomics' results are
// unused, so they are fire-and-forget reductions), and it is part of the
// kernel's run as CUPTI sees it, so the block's end is stamped after it.
__device__ __forceinline__ void cb_log_ring_block(cb_log_entry* log, cb_u32 slot, cb_u64 op_id,
                                                  cb_u64 start, cb_u64 end) {
    cb_log_entry* e = cb_log_target(log, slot);
    if (e == nullptr) return;
    if (cb_is_block0()) {
        e->op_id = op_id;
        e->start_ns = start;
        e->end_ns = end;
        e->smid = cb_smid();
    }
    __threadfence();
    const cb_u32 done = atomicAdd(&e->blocks, 1u) + 1u;
    atomicMax(&e->last_end_ns, cb_globaltimer());
    if (done == gridDim.x * gridDim.y * gridDim.z) {
        __threadfence();
        atomicAdd(&cb_ring_header(log, slot)->blocks, 1u);
    }
}

// Called by thread 0 of every block when the block is done.
__device__ __forceinline__ void cb_log_block(cb_log_entry* log, cb_u32 slot, cb_u64 op_id,
                                             cb_u64 start, cb_u64 end) {
    if (log == nullptr) return;
    if (cb_ring_header(log, slot) != nullptr) {
        cb_log_ring_block(log, slot, op_id, start, end);
        return;
    }
    cb_log_entry* e = log + slot;
    if (cb_is_block0()) {
        e->op_id = op_id;
        e->start_ns = start;
        e->end_ns = end;
        e->smid = cb_smid();
    }
    atomicMax(&e->last_end_ns, end);
    __threadfence();
    atomicAdd(&e->blocks, 1u);
}

// Thread 0 spins until `deadline` on %globaltimer; returns its last reading.
__device__ __forceinline__ cb_u64 cb_spin_until(cb_u64 deadline) {
    cb_u64 now = cb_globaltimer();
    while (now < deadline) {
        now = cb_globaltimer();
    }
    return now;
}

// Timed spin: every block runs for `duration_ns` from its own first reading.
// Thread 0 reads the start time and broadcasts it through shared memory; only
// thread 0 spins, the rest of the block waits at the barrier. When the grid
// fits on the GPU at once all blocks start (and so end) together; blocks that
// cannot be resident (another kernel holds the SMs, or more blocks than fit)
// start later and end `duration_ns` after *their* start, so the kernel's
// measured length grows under occupancy pressure, as a real kernel's would.
extern "C" __global__ void cb_spin(cb_u64 op_id, cb_log_entry* log, cb_u32 slot,
                                   cb_u64 duration_ns) {
    __shared__ cb_u64 s_start;
    if (cb_is_thread0()) {
        s_start = cb_globaltimer();
    }
    __syncthreads();
    const cb_u64 start = s_start;
    if (cb_is_thread0()) {
        const cb_u64 end = cb_spin_until(start + duration_ns);
        cb_log_block(log, slot, op_id, start, end);
    }
    __syncthreads();
}

// Memory-bound: grid-stride copy of `n_vec` 16-byte elements from `src` to
// `dst`, repeated `iterations` times (each pass xors the pass number in, and
// src/dst are not __restrict__, so passes cannot be merged by the compiler).
// Bytes moved per launch = 2 * 16 * n_vec * iterations (read + write).
extern "C" __global__ void cb_memory(cb_u64 op_id, cb_log_entry* log, cb_u32 slot,
                                     const uint4* src, uint4* dst, cb_u64 n_vec,
                                     cb_u32 iterations) {
    __shared__ cb_u64 s_start;
    if (cb_is_thread0()) {
        s_start = cb_globaltimer();
    }
    __syncthreads();
    const cb_u64 nthreads = (cb_u64)blockDim.x * blockDim.y * blockDim.z;
    const cb_u64 block_lin =
        (cb_u64)blockIdx.x + (cb_u64)gridDim.x * ((cb_u64)blockIdx.y + (cb_u64)gridDim.y * blockIdx.z);
    const cb_u64 thread_lin =
        (cb_u64)threadIdx.x + (cb_u64)blockDim.x * ((cb_u64)threadIdx.y + (cb_u64)blockDim.y * threadIdx.z);
    const cb_u64 stride = nthreads * gridDim.x * gridDim.y * gridDim.z;
    for (cb_u32 it = 0; it < iterations; ++it) {
        for (cb_u64 i = block_lin * nthreads + thread_lin; i < n_vec; i += stride) {
            uint4 v = src[i];
            v.x ^= it;
            dst[i] = v;
        }
    }
    __syncthreads();
    if (cb_is_thread0()) {
        cb_log_block(log, slot, op_id, s_start, cb_globaltimer());
    }
}

// Compute-bound: each thread runs `iterations` rounds of 8 independent FMA
// chains (8 FMAs per round, 16 flops). The result is written to `out[global
// thread index]` when `out` is non-null; with a null `out` it is written only
// behind a data-dependent condition the compiler cannot prove false, so the
// loop is never eliminated.
extern "C" __global__ void cb_compute(cb_u64 op_id, cb_log_entry* log, cb_u32 slot, float* out,
                                      cb_u32 iterations) {
    __shared__ cb_u64 s_start;
    if (cb_is_thread0()) {
        s_start = cb_globaltimer();
    }
    __syncthreads();
    const cb_u64 nthreads = (cb_u64)blockDim.x * blockDim.y * blockDim.z;
    const cb_u64 block_lin =
        (cb_u64)blockIdx.x + (cb_u64)gridDim.x * ((cb_u64)blockIdx.y + (cb_u64)gridDim.y * blockIdx.z);
    const cb_u64 thread_lin =
        (cb_u64)threadIdx.x + (cb_u64)blockDim.x * ((cb_u64)threadIdx.y + (cb_u64)blockDim.y * threadIdx.z);
    const cb_u64 gid = block_lin * nthreads + thread_lin;
    const float a = 1.0000001f;
    const float b = 1.0e-7f * (float)(thread_lin & 7);
    float x0 = (float)thread_lin, x1 = x0 + 1.f, x2 = x0 + 2.f, x3 = x0 + 3.f;
    float x4 = x0 + 4.f, x5 = x0 + 5.f, x6 = x0 + 6.f, x7 = x0 + 7.f;
    for (cb_u32 it = 0; it < iterations; ++it) {
        x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
        x4 = fmaf(x4, a, b); x5 = fmaf(x5, a, b); x6 = fmaf(x6, a, b); x7 = fmaf(x7, a, b);
    }
    const float r = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
    if (out != nullptr) {
        out[gid] = r;
    } else if (r == -1.0f) {
        // Unreachable in practice; keeps the FMA loop alive without an output buffer.
        asm volatile("trap;");
    }
    __syncthreads();
    if (cb_is_thread0()) {
        cb_log_block(log, slot, op_id, s_start, cb_globaltimer());
    }
}

// Occupancy hog: holds SMs for `duration_ns`.
//
// How the number of SMs held is controlled: launch with grid = the number of
// SMs to hold, and dynamic shared memory = the device's opt-in maximum per
// block (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 227 KiB on
// Hopper; enable it first with cuFuncSetAttribute(
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)). One such block (plus the
// 1 KiB per block the driver reserves) fills an SM's shared memory, so the
// block scheduler can place at most one hog block per SM and no block of any
// other kernel fits beside it: `grid` SMs are held, the rest stay free.
// Blocks spin on %globaltimer like cb_spin. The shared memory is touched once
// so the allocation is real.
extern "C" __global__ void cb_occupancy_hog(cb_u64 op_id, cb_log_entry* log, cb_u32 slot,
                                            cb_u64 duration_ns) {
    extern __shared__ unsigned char cb_hog_smem[];
    __shared__ cb_u64 s_start;
    if (cb_is_thread0()) {
        s_start = cb_globaltimer();
        cb_hog_smem[0] = 1;
    }
    __syncthreads();
    const cb_u64 start = s_start;
    if (cb_is_thread0()) {
        const cb_u64 end = cb_spin_until(start + duration_ns);
        cb_log_block(log, slot, op_id, start, end);
    }
    __syncthreads();
}

// Empty kernel for launch-overhead measurements: block 0 thread 0 logs (start
// and end are two back-to-back readings); other blocks do nothing at all.
extern "C" __global__ void cb_empty(cb_u64 op_id, cb_log_entry* log, cb_u32 slot) {
    if (log != nullptr && cb_is_thread0() && cb_is_block0()) {
        const cb_u64 t = cb_globaltimer();
        cb_log_entry* e = cb_log_target(log, slot);
        if (e == nullptr) return;
        e->op_id = op_id;
        e->start_ns = t;
        e->end_ns = cb_globaltimer();
        e->smid = cb_smid();
        e->last_end_ns = e->end_ns;
        e->blocks = 1;
        cb_log_entry* ring = cb_ring_header(log, slot);
        if (ring != nullptr) {
            __threadfence();
            atomicAdd(&ring->blocks, 1u);
        }
    }
}
