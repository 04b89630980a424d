// causalbench persistent megakernel, compiled at run time with NVRTC.
//
// One block per worker (one worker per SM by default) runs a device-side task
// graph to completion, the way a compiler-fused model (Mirage MPK, Event
// Tensor) runs every logical operator as a task inside one long kernel:
//
//   * task descriptors (`mk_task`): class id, routed worker, body (timed spin
//     or memory-bound copy) and cost, the event whose completion dispatches the
//     task, the event it triggers at its end, an optional event it waits on
//     after it was dequeued, task generation and request generation;
//   * dependency counters (`mk_event`): an event completes when `target` tasks
//     triggered it; the worker that completes it dispatches its dependents
//     (ready) into their routed worker's queue (assigned), in parallel over the
//     block's threads;
//   * per-worker ready queues: multi-producer single-consumer, one slot per
//     task routed to the worker (the host knows the routing, so a queue never
//     overflows); the worker takes tasks in the order they became ready.
//
// Semantic hooks (ABI version MK_ABI_VERSION, mirrored in kernels/src/megakernel.rs):
// task ready, assigned, start, end, dependency wait begin/end (with the event
// waited on) and queue pressure crossing a threshold. Every hook event carries
// a 64-bit %globaltimer timestamp and stable ids (task, class, worker, task
// generation, request generation) and goes to the emitting worker's ring buffer,
// with per-class coverage counters (eligible, observed, dropped). What is
// recorded is decided by a monitor configuration read from device memory at
// launch (`mk_monitor_config`): which hook kinds, task classes and request
// generations; a sampling period; a minimum span for span-closing events; the
// ring capacity (a telemetry budget); whether to aggregate per-class phase
// histograms in place of (or beside) the log. A new question is a new
// configuration (a 64-byte copy), not a rebuilt kernel.
//
// Injections are data, not code: a task class's cost, a routing, a postponed
// event notification (`mk_event.postpone_ns`) and a starved ready task
// (`mk_task.hold_ns`) are all fields of the task graph the host uploads.
//
// Every spin loop has a deadline (`mk_params.deadline_ns`): a malformed graph
// sets an error bit and the kernel returns instead of hanging the GPU.

typedef unsigned long long mk_u64;
typedef unsigned int mk_u32;
typedef unsigned short mk_u16;

#define MK_ABI_VERSION 1u
#define MK_NONE 0xffffffffu
#define MK_MAX_CLASSES 8
#define MK_PHASES 4   // 0 notify (dispatch latency), 1 queue, 2 dependency wait, 3 execution
#define MK_BUCKETS 24 // log2 buckets: bucket b >= 1 holds [2^(b+8), 2^(b+9)) ns, bucket 0 [0, 512), the last is open

// Hook kinds (bit i of mk_monitor_config.event_mask enables kind i).
#define MK_HOOK_READY 0u
#define MK_HOOK_ASSIGNED 1u
#define MK_HOOK_START 2u
#define MK_HOOK_END 3u
#define MK_HOOK_WAIT_BEGIN 4u
#define MK_HOOK_WAIT_END 5u
#define MK_HOOK_QUEUE_PRESSURE 6u

// Monitor flags.
#define MK_MON_LOG 1u
#define MK_MON_AGGREGATE 2u

// Error bits (mk_state.error).
#define MK_ERR_ABI 1u
#define MK_ERR_DEADLINE 2u
#define MK_ERR_QUEUE 4u

// Task bodies.
#define MK_BODY_SPIN 0u
#define MK_BODY_MEMORY 1u

struct mk_task {          // 48 bytes
    mk_u32 class_id;
    mk_u32 worker;        // routed worker (queue)
    mk_u32 body;          // MK_BODY_*
    mk_u32 cost;          // spin: ns; memory: passes over the worker's scratch slice
    mk_u32 dep_event;     // dispatched when this event completes (MK_NONE: a root)
    mk_u32 trigger_event; // incremented at the end (MK_NONE: none)
    mk_u32 wait_event;    // waited on after dequeue (MK_NONE: none)
    mk_u32 hold_ns;       // starvation injection: not taken up before ready + hold_ns
    mk_u32 task_gen;      // task generation (decode step of its request)
    mk_u32 req_gen;       // request generation
    mk_u32 mem_vecs;      // memory body: 16-byte elements per pass
    mk_u32 extra_ns;      // class-delay injection: spin this long after the body
};
static_assert(sizeof(mk_task) == 48, "mk_task must be 48 bytes");

struct mk_event {         // 16 bytes
    mk_u32 target;        // triggers needed
    mk_u32 first_dep;     // dependents: deps[first_dep .. first_dep + n_dep)
    mk_u32 n_dep;
    mk_u32 postpone_ns;   // notification injection: waiters see the completion postpone_ns late
};
static_assert(sizeof(mk_event) == 16, "mk_event must be 16 bytes");

// One hook event in a ring buffer (32 bytes).
struct mk_hook_event {
    mk_u64 ts;            // %globaltimer ns, 64-bit (never wraps)
    mk_u32 task;
    mk_u32 worker;        // worker the event is about (queue owner for ready/assigned/pressure)
    mk_u32 aux;           // ready/wait: event id; assigned: queue depth after the push; pressure: depth
    mk_u16 kind;          // MK_HOOK_*
    mk_u16 class_id;
    mk_u32 task_gen;
    mk_u32 req_gen;
};
static_assert(sizeof(mk_hook_event) == 32, "mk_hook_event must be 32 bytes");

// Monitor configuration, read from device memory at launch (64 bytes).
struct mk_monitor_config {
    mk_u32 version;       // must equal MK_ABI_VERSION
    mk_u32 flags;         // MK_MON_LOG | MK_MON_AGGREGATE (0: hooks compiled in, nothing recorded)
    mk_u32 class_mask;    // bit c: task class c is eligible
    mk_u32 event_mask;    // bit k: hook kind k is logged
    mk_u32 req_gen_min;   // eligible request generations [min, max]
    mk_u32 req_gen_max;
    mk_u32 sample_period; // 0/1: every task; N: tasks with mk_hash(task ^ seed) % N == 0
    mk_u32 sample_seed;
    mk_u64 min_span_ns;   // END / WAIT_END logged only for spans >= this
    mk_u32 ring_capacity; // events per worker ring (<= the ring allocated)
    mk_u32 pressure_threshold; // queue depth whose upward crossing emits QUEUE_PRESSURE (0: off)
    mk_u32 reserved[4];
};
static_assert(sizeof(mk_monitor_config) == 64, "mk_monitor_config must be 64 bytes");

// Aggregates (zeroed per launch).
struct mk_aggregates {
    mk_u32 hist[MK_MAX_CLASSES][MK_PHASES][MK_BUCKETS];
    mk_u64 sum_ns[MK_MAX_CLASSES][MK_PHASES];
    // (longest phase ns << 20) | task id: the longest span and which task had it.
    mk_u64 max_key[MK_MAX_CLASSES][MK_PHASES];
    mk_u64 tasks[MK_MAX_CLASSES];
};
static_assert(sizeof(mk_aggregates) == 3648, "mk_aggregates must be 3648 bytes");

// Coverage counters per class: eligible, observed, dropped (zeroed per launch).
struct mk_coverage {
    mk_u64 eligible[MK_MAX_CLASSES];
    mk_u64 observed[MK_MAX_CLASSES];
    mk_u64 dropped[MK_MAX_CLASSES];
};

// Per-launch mutable state (zeroed per launch).
struct mk_state {
    mk_u64 first_start;   // atomicMin of worker starts (host writes ~0 first)
    mk_u64 last_end;      // atomicMax of worker ends
    mk_u32 error;
    mk_u32 tasks_done;
    mk_u32 pad[2];
};

// Everything the kernel reads, in device memory.
struct mk_params {
    mk_u32 n_tasks, n_events, n_workers, n_roots;
    mk_u32 queue_cap;     // slots per worker queue (>= tasks routed to any worker)
    mk_u32 ring_alloc;    // events allocated per worker ring
    mk_u32 n_classes;
    mk_u32 pad0;
    mk_u64 deadline_ns;   // relative: spin loops give up after this long
    const mk_task* tasks;
    const mk_event* events;
    const mk_u32* deps;           // dependents of events (task ids)
    const mk_u32* roots;          // tasks with no dep_event
    const mk_u32* worker_ntasks;  // tasks routed to each worker
    mk_u32* event_count;          // [n_events]
    mk_u64* event_done;           // [n_events] completion time (0 = not yet)
    mk_u64* ready_ts;             // [n_tasks]
    mk_u32* queue;                // [n_workers][queue_cap]: task id + 1, 0 = empty
    mk_u32* queue_tail;           // [n_workers]
    mk_u32* queue_head;           // [n_workers]
    mk_hook_event* ring;          // [n_workers][ring_alloc]
    mk_u32* ring_count;           // [n_workers] reservations (may exceed capacity: the excess was dropped)
    mk_coverage* coverage;
    mk_aggregates* agg;
    mk_u32* worker_class_tasks;   // [MK_MAX_CLASSES][n_workers]
    mk_u32* pressure_crossings;   // [n_workers]
    mk_u32* max_depth;            // [n_workers]
    mk_state* state;
    uint4* scratch_src;           // memory bodies: [n_workers][scratch_vecs]
    uint4* scratch_dst;
    mk_u64 scratch_vecs;
};
static_assert(sizeof(mk_params) == 216, "mk_params must be 216 bytes");

__device__ __forceinline__ mk_u64 mk_now() {
    mk_u64 t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

// Integer hash used for sampling (mirrored by ground_truth::megakernel::sample_hash).
__device__ __forceinline__ mk_u32 mk_hash(mk_u32 x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

__device__ __forceinline__ mk_u32 mk_bucket(mk_u64 ns) {
    if (ns < 512ull) return 0;
    mk_u32 b = 63u - (mk_u32)__clzll((long long)ns) - 8u;
    return b >= MK_BUCKETS ? MK_BUCKETS - 1 : b;
}

struct mk_ctx {
    const mk_params* p;
    mk_monitor_config cfg;
    mk_u32 worker;
    mk_u64 deadline;
};

__device__ __forceinline__ bool mk_eligible(const mk_ctx& c, const mk_task& t) {
    return (c.cfg.class_mask >> (t.class_id & 31u)) & 1u
        && t.req_gen >= c.cfg.req_gen_min && t.req_gen <= c.cfg.req_gen_max;
}

__device__ __forceinline__ bool mk_sampled(const mk_ctx& c, mk_u32 task) {
    return c.cfg.sample_period <= 1u || mk_hash(task ^ c.cfg.sample_seed) % c.cfg.sample_period == 0u;
}

// One hook. `span` is the closed span's length for END / WAIT_END (else 0).
__device__ void mk_hook(const mk_ctx& c, mk_u32 kind, mk_u32 task_id, const mk_task& t,
                        mk_u32 about_worker, mk_u32 aux, mk_u64 ts, mk_u64 span) {
    if ((c.cfg.flags & MK_MON_LOG) == 0u) return;
    if (((c.cfg.event_mask >> kind) & 1u) == 0u) return;
    if (!mk_eligible(c, t)) return;
    if ((kind == MK_HOOK_END || kind == MK_HOOK_WAIT_END) && span < c.cfg.min_span_ns) return;
    const mk_u32 cls = t.class_id < MK_MAX_CLASSES ? t.class_id : MK_MAX_CLASSES - 1;
    atomicAdd(&c.p->coverage->eligible[cls], 1ull);
    if (!mk_sampled(c, task_id)) return;
    const mk_u32 slot = atomicAdd(&c.p->ring_count[c.worker], 1u);
    if (slot >= c.cfg.ring_capacity || slot >= c.p->ring_alloc) {
        atomicAdd(&c.p->coverage->dropped[cls], 1ull);
        return;
    }
    mk_hook_event e;
    e.ts = ts;
    e.task = task_id;
    e.worker = about_worker;
    e.aux = aux;
    e.kind = (mk_u16)kind;
    e.class_id = (mk_u16)t.class_id;
    e.task_gen = t.task_gen;
    e.req_gen = t.req_gen;
    c.p->ring[(mk_u64)c.worker * c.p->ring_alloc + slot] = e;
    atomicAdd(&c.p->coverage->observed[cls], 1ull);
}

__device__ void mk_aggregate(const mk_ctx& c, mk_u32 task_id, const mk_task& t,
                             const mk_u64 phase[MK_PHASES]) {
    if ((c.cfg.flags & MK_MON_AGGREGATE) == 0u) return;
    if (!mk_eligible(c, t)) return;
    const mk_u32 cls = t.class_id < MK_MAX_CLASSES ? t.class_id : MK_MAX_CLASSES - 1;
    // In log-less aggregation the coverage counts tasks, not events.
    if ((c.cfg.flags & MK_MON_LOG) == 0u) atomicAdd(&c.p->coverage->eligible[cls], 1ull);
    if (!mk_sampled(c, task_id)) return;
    mk_aggregates* a = c.p->agg;
    for (int k = 0; k < MK_PHASES; ++k) {
        atomicAdd(&a->hist[cls][k][mk_bucket(phase[k])], 1u);
        atomicAdd(&a->sum_ns[cls][k], phase[k]);
        atomicMax(&a->max_key[cls][k], (phase[k] << 20) | (mk_u64)(task_id & 0xfffffu));
    }
    atomicAdd(&a->tasks[cls], 1ull);
    atomicAdd(&c.p->worker_class_tasks[(mk_u64)cls * c.p->n_workers + c.worker], 1u);
    if ((c.cfg.flags & MK_MON_LOG) == 0u) atomicAdd(&c.p->coverage->observed[cls], 1ull);
}

__device__ __forceinline__ bool mk_timed_out(const mk_ctx& c, mk_u64 now) {
    if (now > c.deadline) {
        atomicOr(&c.p->state->error, MK_ERR_DEADLINE);
        return true;
    }
    return false;
}

// Push `task_id` (ready now) to its worker's queue; called by any thread.
__device__ void mk_dispatch(const mk_ctx& c, mk_u32 task_id, mk_u32 event_id, mk_u64 now) {
    const mk_params* p = c.p;
    const mk_task t = p->tasks[task_id];
    const mk_u32 w = t.worker < p->n_workers ? t.worker : 0u;
    ((volatile mk_u64*)p->ready_ts)[task_id] = now;
    mk_hook(c, MK_HOOK_READY, task_id, t, w, event_id, now, 0);
    const mk_u32 slot = atomicAdd(&p->queue_tail[w], 1u);
    if (slot >= p->queue_cap) {
        atomicOr(&p->state->error, MK_ERR_QUEUE);
        return;
    }
    __threadfence();
    ((volatile mk_u32*)p->queue)[(mk_u64)w * p->queue_cap + slot] = task_id + 1u;
    const mk_u32 head = ((volatile mk_u32*)p->queue_head)[w];
    const mk_u32 depth = slot + 1u > head ? slot + 1u - head : 1u;
    mk_hook(c, MK_HOOK_ASSIGNED, task_id, t, w, depth, now, 0);
    atomicMax(&p->max_depth[w], depth);
    if (c.cfg.pressure_threshold != 0u && depth == c.cfg.pressure_threshold) {
        atomicAdd(&p->pressure_crossings[w], 1u);
        mk_hook(c, MK_HOOK_QUEUE_PRESSURE, task_id, t, w, depth, now, 0);
    }
}

// 16-byte elements of a memory body's slice one warp takes at a time.
#define MK_CHUNK_VECS 128u

// Task bodies. Each class has its own (non-inlined) code region, as each
// operator of a real megakernel does, so a PC sample says which class ran;
// the dependency-wait and idle loops are shared code of the scheduler.
// `chunk` is the block's shared chunk counter, zero when the body starts.
__device__ __forceinline__ void mk_body(const mk_params* p, const mk_task& t, mk_u32 worker,
                                        mk_u64 start, mk_u32 tid, mk_u32* chunk) {
    if (t.body == MK_BODY_SPIN) {
        if (tid == 0) {
            const mk_u64 until = start + t.cost;
            mk_u64 now = mk_now();
            while (now < until) now = mk_now();
        }
    } else {
        // The slice is handed out chunk by chunk to whichever warp is free, as
        // a megakernel's operator hands out its tiles: a warp lent to other
        // work (thread 32 running a deferred hook program, mk_bpf.cu) takes
        // fewer chunks instead of holding the others at the body's barrier.
        const mk_u64 base = (mk_u64)worker * p->scratch_vecs;
        const mk_u64 n = t.mem_vecs < p->scratch_vecs ? t.mem_vecs : p->scratch_vecs;
        const mk_u32 lane = tid & 31u;
        const mk_u32 lanes = blockDim.x - (tid & ~31u) < 32u ? blockDim.x - (tid & ~31u) : 32u;
        const unsigned mask = lanes == 32u ? 0xffffffffu : (1u << lanes) - 1u;
        const mk_u64 per_it = (n + MK_CHUNK_VECS - 1u) / MK_CHUNK_VECS;
        const mk_u64 chunks = per_it * t.cost;
        for (;;) {
            mk_u32 k = 0u;
            if (lane == 0u) k = atomicAdd(chunk, 1u);
            k = __shfl_sync(mask, k, 0);
            if (k >= chunks) break;
            const mk_u32 it = (mk_u32)(k / per_it);
            const mk_u64 j0 = (k % per_it) * MK_CHUNK_VECS;
            const mk_u64 j1 = j0 + MK_CHUNK_VECS < n ? j0 + MK_CHUNK_VECS : n;
            for (mk_u64 j = j0 + lane; j < j1; j += lanes) {
                uint4 v = p->scratch_src[base + j];
                v.x ^= it;
                p->scratch_dst[base + j] = v;
            }
        }
    }
    __syncthreads();
    // Class-delay injection: the class's own code runs longer.
    if (tid == 0 && t.extra_ns != 0u) {
        const mk_u64 until = mk_now() + t.extra_ns;
        while (mk_now() < until) {}
    }
}

__device__ __noinline__ void mk_body_attention(const mk_params* p, const mk_task& t,
                                               mk_u32 worker, mk_u64 start, mk_u32 tid, mk_u32* chunk) {
    mk_body(p, t, worker, start, tid, chunk);
}
__device__ __noinline__ void mk_body_gemm(const mk_params* p, const mk_task& t, mk_u32 worker,
                                          mk_u64 start, mk_u32 tid, mk_u32* chunk) {
    mk_body(p, t, worker, start, tid, chunk);
}
__device__ __noinline__ void mk_body_communication(const mk_params* p, const mk_task& t,
                                                   mk_u32 worker, mk_u64 start, mk_u32 tid, mk_u32* chunk) {
    mk_body(p, t, worker, start, tid, chunk);
}
__device__ __noinline__ void mk_body_sampling(const mk_params* p, const mk_task& t,
                                              mk_u32 worker, mk_u64 start, mk_u32 tid, mk_u32* chunk) {
    mk_body(p, t, worker, start, tid, chunk);
}
__device__ __noinline__ void mk_body_other(const mk_params* p, const mk_task& t,
                                           mk_u32 worker, mk_u64 start, mk_u32 tid, mk_u32* chunk) {
    mk_body(p, t, worker, start, tid, chunk);
}

// Scheduler idle loop: spin until `*slot` is non-zero or the deadline passes.
__device__ __noinline__ mk_u32 mk_idle_pop(const mk_ctx& c, volatile mk_u32* slot, int* abort) {
    mk_u32 v = *slot;
    while (v == 0u) {
        if (mk_timed_out(c, mk_now())) { *abort = 1; break; }
        v = *slot;
    }
    return v;
}

// Scheduler idle loop for a starved task: not taken up before `until`.
__device__ __noinline__ mk_u64 mk_idle_hold(const mk_ctx& c, mk_u64 until, int* abort) {
    mk_u64 now = mk_now();
    while (now < until) {
        if (mk_timed_out(c, now)) { *abort = 1; break; }
        now = mk_now();
    }
    return now;
}

// Dependency-wait loop (shared by every class): until the event's completion
// is visible (completion + postponement).
__device__ __noinline__ mk_u64 mk_wait_loop(const mk_ctx& c, volatile mk_u64* done,
                                           mk_u64 postpone_ns, int* abort) {
    mk_u64 now = mk_now();
    for (;;) {
        const mk_u64 d = *done;
        if (d != 0 && now >= d + postpone_ns) break;
        if (mk_timed_out(c, now)) { *abort = 1; break; }
        now = mk_now();
    }
    return now;
}

extern "C" __global__ void mk_persistent(const mk_params* __restrict__ params,
                                         const mk_monitor_config* __restrict__ config) {
    __shared__ mk_u32 s_task;
    __shared__ mk_u32 s_complete;
    __shared__ mk_u64 s_now;
    __shared__ int s_abort;
    __shared__ mk_u32 s_chunk;
    mk_ctx c;
    c.p = params;
    c.cfg = *config;
    c.worker = blockIdx.x;
    const mk_params* p = params;
    const mk_u32 tid = threadIdx.x;
    const mk_u64 t0 = mk_now();
    c.deadline = t0 + p->deadline_ns;
    if (tid == 0) {
        s_abort = 0;
        if (c.cfg.version != MK_ABI_VERSION) {
            atomicOr(&p->state->error, MK_ERR_ABI);
            c.cfg.flags = 0u;   // record nothing rather than misread the configuration
        }
        atomicMin(&p->state->first_start, t0);
    }
    if (c.cfg.version != MK_ABI_VERSION) c.cfg.flags = 0u;
    if (c.worker >= p->n_workers) return;
#ifdef MK_BPF_HOOKS
    // Compiled with the eBPF hooks (mk_bpf.cu): the program slot's address
    // travels in the configuration's first two reserved words.
    mk_bpf_slot* const bpf_slot =
        (mk_bpf_slot*)(((mk_u64)c.cfg.reserved[1] << 32) | (mk_u64)c.cfg.reserved[0]);
    // The epoch this task's hooks use, and the one thread 32 reads for the next task.
    mk_bpf_epoch bpf = {0u, 0u, 0u, 0u};
    __shared__ mk_bpf_epoch s_bpf_next;
    // The task-end run thread 32 makes during the next task (mk_bpf_epoch::defers).
    __shared__ mk_bpf_deferred s_bpf_end;
    // Thread 32's reading of the queue's tail at the last task's end.
    mk_u32 bpf_tail_at_end = 0u;
    if (tid == 0) {
        s_bpf_end.pending = 0u;
        mk_bpf_read_epoch(bpf_slot, &s_bpf_next);
    }
#endif
    // Worker 0 dispatches the roots.
    if (c.worker == 0) {
        for (mk_u32 i = tid; i < p->n_roots; i += blockDim.x) {
            mk_dispatch(c, p->roots[i], MK_NONE, t0);
        }
    }
    __syncthreads();
    const mk_u32 n_mine = p->worker_ntasks[c.worker];
    volatile mk_u32* my_queue = (volatile mk_u32*)p->queue + (mk_u64)c.worker * p->queue_cap;
    for (mk_u32 i = 0; i < n_mine; ++i) {
        if (tid == 0) {
            // Take the next ready task (idle while the queue is empty).
            int ab = 0;
            const mk_u32 v = mk_idle_pop(c, my_queue + i, &ab);
            if (ab) s_abort = 1;
            s_task = v == 0u ? MK_NONE : v - 1u;
            s_chunk = 0u;
            ((volatile mk_u32*)p->queue_head)[c.worker] = i + 1u;
            __threadfence();
#ifdef MK_BPF_HOOKS
            // A task epoch: a program set the host swapped in applies from this task on.
            bpf.gen = s_bpf_next.gen; bpf.hooks = s_bpf_next.hooks; bpf.defers = s_bpf_next.defers;
#endif
        }
        __syncthreads();
        if (s_abort) break;
        const mk_u32 task_id = s_task;
        const mk_task t = p->tasks[task_id];
        mk_u64 ph[MK_PHASES] = {0, 0, 0, 0};
        mk_u64 t_start = 0;
        if (tid == 0) {
            const mk_u64 ready = ((volatile mk_u64*)p->ready_ts)[task_id];
            if (t.dep_event != MK_NONE) {
                const mk_u64 done = ((volatile mk_u64*)p->event_done)[t.dep_event];
                ph[0] = ready > done ? ready - done : 0;
            }
            mk_u64 now = mk_now();
            // Starvation injection: the ready task is not taken up before ready + hold.
            if (t.hold_ns != 0u) {
                int ab = 0;
                now = mk_idle_hold(c, ready + t.hold_ns, &ab);
                if (ab) s_abort = 1;
            }
            ph[1] = now > ready ? now - ready : 0;
            if (t.wait_event != MK_NONE) {
                const mk_event ev = p->events[t.wait_event];
                const mk_u64 wb = now;
                mk_hook(c, MK_HOOK_WAIT_BEGIN, task_id, t, c.worker, t.wait_event, wb, 0);
                volatile mk_u64* done = (volatile mk_u64*)p->event_done + t.wait_event;
                int ab = 0;
                now = mk_wait_loop(c, done, ev.postpone_ns, &ab);
                if (ab) s_abort = 1;
                ph[2] = now - wb;
                mk_hook(c, MK_HOOK_WAIT_END, task_id, t, c.worker, t.wait_event, now, ph[2]);
#ifdef MK_BPF_HOOKS
                if (bpf.hooks & (1u << 2)) {
                    mk_bpf_run_hook(bpf_slot, bpf.gen, 2u, task_id, t.class_id, t.task_gen, t.req_gen,
                                    c.worker, t.wait_event, wb, now, ph[2],
                                    ((volatile mk_u32*)p->queue_tail)[c.worker] - (i + 1u), ph[0], ph[1]);
                    now = mk_now();
                }
#endif
            }
            t_start = now;
            s_now = t_start;
            mk_hook(c, MK_HOOK_START, task_id, t, c.worker, 0, t_start, 0);
#ifdef MK_BPF_HOOKS
            if (bpf.hooks & 1u) {
                mk_bpf_run_hook(bpf_slot, bpf.gen, 0u, task_id, t.class_id, t.task_gen, t.req_gen,
                                c.worker, t.dep_event, t_start, t_start, ph[2],
                                ((volatile mk_u32*)p->queue_tail)[c.worker] - (i + 1u), ph[0], ph[1]);
            }
#endif
        }
        __syncthreads();
        if (s_abort) break;
#ifdef MK_BPF_HOOKS
        // The previous task's deferred task-end run, beside this task's body.
        if (tid == 32u) mk_bpf_run_deferred(bpf_slot, &s_bpf_end, bpf_tail_at_end);
#endif
        // Body: each class in its own code region.
        switch (t.class_id) {
            case 0: mk_body_attention(p, t, c.worker, s_now, tid, &s_chunk); break;
            case 1: mk_body_gemm(p, t, c.worker, s_now, tid, &s_chunk); break;
            case 2: mk_body_communication(p, t, c.worker, s_now, tid, &s_chunk); break;
            case 3: mk_body_sampling(p, t, c.worker, s_now, tid, &s_chunk); break;
            default: mk_body_other(p, t, c.worker, s_now, tid, &s_chunk); break;
        }
        __syncthreads();
#ifdef MK_BPF_HOOKS
        // The next task's epoch, read while thread 0 finishes this task.
        // (A block of one warp has no thread 32: its thread 0 reads it.) Thread
        // 32 also reads the queue's tail at this task's end for the deferred
        // run's queue depth, which thread 0 then need not load.
        if (tid == (blockDim.x > 32u ? 32u : 0u)) {
            mk_bpf_read_epoch(bpf_slot, &s_bpf_next);
            bpf_tail_at_end = ((volatile mk_u32*)p->queue_tail)[c.worker];
        }
#endif
        if (tid == 0) {
            const mk_u64 end = mk_now();
            ph[3] = end - t_start;
            mk_hook(c, MK_HOOK_END, task_id, t, c.worker, 0, end, ph[3]);
#ifdef MK_BPF_HOOKS
            if (bpf.defers) {
                volatile mk_bpf_deferred* d = &s_bpf_end;
                d->gen = bpf.gen; d->task = task_id; d->class_id = t.class_id;
                d->task_gen = t.task_gen; d->req_gen = t.req_gen; d->worker = c.worker;
                d->dep_event = t.dep_event; d->ts_start = t_start; d->ts_end = end;
                d->wait_ns = ph[2];
                d->taken = i + 1u;
                d->notify_ns = ph[0]; d->queue_ns = ph[1];
                d->pending = 1u;
            } else if (bpf.hooks & (1u << 1)) {
                mk_bpf_run_hook(bpf_slot, bpf.gen, 1u, task_id, t.class_id, t.task_gen, t.req_gen,
                                c.worker, t.dep_event, t_start, end, ph[2],
                                ((volatile mk_u32*)p->queue_tail)[c.worker] - (i + 1u), ph[0], ph[1]);
            }
#endif
            mk_aggregate(c, task_id, t, ph);
            s_complete = 0u;
            if (t.trigger_event != MK_NONE) {
                __threadfence();
                const mk_event ev = p->events[t.trigger_event];
                const mk_u32 before = atomicAdd(&p->event_count[t.trigger_event], 1u);
                if (before + 1u == ev.target) {
                    mk_u64 done = mk_now();
                    ((volatile mk_u64*)p->event_done)[t.trigger_event] = done;
                    __threadfence();
                    s_complete = 1u;
                    // Dependents are dispatched now; a postponed notification
                    // (ev.postpone_ns) only delays what waiters see.
                    s_now = done;
                }
            }
            atomicAdd(&p->state->tasks_done, 1u);
        }
        __syncthreads();
        if (s_complete) {
            const mk_event ev = p->events[t.trigger_event];
            for (mk_u32 k = tid; k < ev.n_dep; k += blockDim.x) {
                mk_dispatch(c, p->deps[ev.first_dep + k], t.trigger_event, s_now);
            }
        }
        __syncthreads();
    }
#ifdef MK_BPF_HOOKS
    // The last task's deferred run, before the worker's end is taken.
    if (tid == 32u) mk_bpf_run_deferred(bpf_slot, &s_bpf_end, bpf_tail_at_end);
#endif
    __syncthreads();
    if (tid == 0) atomicMax(&p->state->last_end, mk_now());
}
