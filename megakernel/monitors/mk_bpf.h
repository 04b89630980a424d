/* The megakernel's hook program type (megakernel/README.md, "Monitor programs
 * as eBPF"): the context a program receives at a semantic hook, the map
 * declarations it may make and the helpers it may call. Mirrored by
 * megakernel/src/bpf/abi.rs (field table the verifier checks reads against)
 * and by the device interpreter in kernels/src/cuda/mk_bpf.cu.
 *
 * Restricted C: compiled with `clang -target bpf -O2 -mcpu=v2`; no loops
 * that clang does not unroll (the verifier rejects any back edge), no
 * globals other than map declarations.
 */
#ifndef MK_BPF_H
#define MK_BPF_H

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

/* Hooks: a program's section name says which one it runs at. */
#define MK_SEC_TASK_BEGIN "mk/task_begin"
#define MK_SEC_TASK_END "mk/task_end"
#define MK_SEC_DEP_WAIT "mk/dep_wait"

/* The context (80 bytes, read-only for observation programs). */
struct mk_bpf_ctx {
    u32 task;        /* stable task id */
    u32 class_id;    /* 0 attention, 1 gemm, 2 communication, 3 sampling */
    u32 task_gen;    /* decode step within the request */
    u32 req_gen;     /* request generation */
    u32 worker;      /* the worker running the task */
    u32 dep_event;   /* dep_wait: the event waited on; otherwise the event that dispatched the task */
    u64 ts_start;    /* task_begin/end: start of execution; dep_wait: wait begin (%globaltimer ns) */
    u64 ts_end;      /* task_end: end of execution; dep_wait: wait end; task_begin: = ts_start */
    u64 wait_ns;     /* dep_wait: the wait's length; task_end: the task's wait (0 if none) */
    u32 hook;        /* 0 task_begin, 1 task_end, 2 dep_wait */
    u32 queue_depth; /* scheduler state: tasks queued on this worker (read-only) */
    u32 route_hint;  /* scheduler state: written only by a scheduling program type */
    u32 priority;    /* scheduler state: written only by a scheduling program type */
    u64 notify_ns;   /* the task's dispatch latency: ready - its dependency event's completion */
    u64 queue_ns;    /* the task's queueing: taken up - ready (after any hold) */
};

/* Map declarations (section "maps"). */
#define MK_MAP_ARRAY 2
#define MK_MAP_RING 27
struct mk_map_def {
    u32 type;        /* MK_MAP_ARRAY (u32 keys) or MK_MAP_RING (records of value_size bytes) */
    u32 key_size;    /* 4 for arrays, 0 for a ring */
    u32 value_size;
    u32 max_entries; /* array entries, or ring records */
};
#define MK_MAP(name, kind, ksize, vsize, entries) \
    struct mk_map_def name __attribute__((section("maps"), used)) = {kind, ksize, vsize, entries}

/* Helpers (the kernel's ids for the same semantics). */
static void *(*mk_map_lookup)(void *map, const void *key) = (void *)1;
static long (*mk_map_update)(void *map, const void *key, const void *value, u64 flags) = (void *)2;
/* Copies `size` bytes into the ring's next record; -1 (and one `dropped`) when it is full. */
static long (*mk_ring_output)(void *map, const void *data, u64 size, u64 flags) = (void *)130;

#define SEC(name) __attribute__((section(name), used))

/* Adds `v` to entry `key` of array map `map` (atomically on the device). */
#define MK_ADD(map, key, v)                                  \
    do {                                                     \
        u32 mk_k_ = (key);                                   \
        u64 *mk_p_ = mk_map_lookup(&(map), &mk_k_);          \
        if (mk_p_) __sync_fetch_and_add(mk_p_, (u64)(v));    \
    } while (0)

#endif
