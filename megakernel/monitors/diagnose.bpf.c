/* The track's diagnosis as a program (megakernel/README.md, "The diagnosis
 * as a program"). At every task end the task's four phases (dispatch latency,
 * queueing, dependency wait, execution) go into per-class histograms, sums
 * and maxima; its worker's per-class task count and queue-pressure state are
 * updated; and a phase that more than doubles its class's longest span so far
 * is escalated to a bounded ring as a raw event, so the maxima the diagnosis
 * turns on survive a lost race between workers (map maxima are plain
 * compare-and-store: eBPF v2 has no atomic maximum). The host turns the maps
 * into the same aggregates the fixed aggregation monitor exports
 * (megakernel/src/bpf/diagnosis.rs), within the same telemetry budget.
 * diagnose_sampled.bpf.c is the same program aggregating one task in
 * SAMPLE_PERIOD, as the `aggregate-sampled` configuration does. */
#include "mk_bpf.h"

#ifndef SAMPLE_PERIOD
#define SAMPLE_PERIOD 1
#define SAMPLE_SEED 0
#endif

#define CLASSES 4
#define PHASES 4
#define BUCKETS 24
/* Queue depth whose upward crossing counts (the aggregation monitor's threshold). */
#define PRESSURE 4
/* Spans shorter than this are never escalated. */
#define ESCALATE_NS 4096ull

struct class_stats {
    u64 sum_ns[PHASES];
    u64 max_key[PHASES]; /* (span << 20) | task: the longest span and its task */
};

struct worker_state {
    u64 class_tasks;     /* 16 bits per class: tasks of that class this worker ran */
    u32 crossings;       /* upward crossings of PRESSURE by the depth seen at task ends */
    u16 max_depth;       /* deepest queue seen at a task end */
    u16 last_depth;      /* the depth seen at this worker's previous task end */
};

struct escalation {
    u32 task;
    u16 class_id;
    u16 phase;
    u64 span_ns;
};

MK_MAP(hist, MK_MAP_ARRAY, 4, 4, CLASSES * PHASES * BUCKETS); /* [(class * 4 + phase) * 24 + bucket] */
MK_MAP(stats, MK_MAP_ARRAY, 4, sizeof(struct class_stats), CLASSES);
MK_MAP(workers, MK_MAP_ARRAY, 4, sizeof(struct worker_state), 256);
MK_MAP(escalated, MK_MAP_RING, 0, sizeof(struct escalation), 64);

/* The verifier walks every path of a program, pruning a join only where the
 * state explored first covers the other: the bucket arithmetic is branch-free
 * (its partial results would differ at every join) and every failed lookup
 * exits. */

/* x, hidden from the optimiser (so that it does not turn arithmetic back into branches). */
static __attribute__((always_inline)) u64 opaque(u64 x) {
    asm volatile("" : "+r"(x));
    return x;
}
/* 1 when v (below 2^32) is not zero, else 0. */
#define NONZERO32(v) ((opaque((u64)(v)) + 0xffffffffull) >> 32)
/* The larger of a and b (a branch that rejoins: the verifier prunes the join). */
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* The histogram bucket of a span: [0, 512) ns is bucket 0, then one bucket
 * per power of two, the last one open (ground_truth::megakernel::bucket). */
static __attribute__((always_inline)) u64 bucket_of(u64 ns) {
    u64 x = ns >> 8, b = 0, s;
    s = NONZERO32(x >> 32) << 5; x >>= s; b += s;
    s = NONZERO32(x >> 16) << 4; x >>= s; b += s;
    s = NONZERO32(x >> 8) << 3; x >>= s; b += s;
    s = NONZERO32(x >> 4) << 2; x >>= s; b += s;
    s = NONZERO32(x >> 2) << 1; x >>= s; b += s;
    b += NONZERO32(x >> 1);
    return b < BUCKETS - 1 ? b : BUCKETS - 1;
}

/* Adds one task's span of `phase` to its class's histogram, sum and maximum;
 * with `escalate`, a span over ESCALATE_NS that more than doubles the longest
 * so far also goes to the ring. Exits the program if a lookup fails. */
/* The device's sampling hash (ground_truth::megakernel::sample_hash, "lowbias32"). */
static __attribute__((always_inline)) u32 sample_hash(u32 x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

#define ADD_PHASE(st, cls, phase, task, span, escalate)                           \
    do {                                                                          \
        u64 span_ = (span);                                                       \
        u32 k_ = ((cls) * PHASES + (phase)) * BUCKETS + (u32)bucket_of(span_);    \
        u32 *h_ = mk_map_lookup(&hist, &k_);                                      \
        if (!h_) return 0;                                                        \
        __sync_fetch_and_add(h_, 1);                                              \
        __sync_fetch_and_add(&(st)->sum_ns[phase], span_);                        \
        u64 cur_ = (st)->max_key[phase];                                          \
        u64 key_ = (span_ << 20) | ((task) & 0xfffff);                            \
        (st)->max_key[phase] = MAX(key_, cur_);                                 \
        if (escalate && span_ > MAX(2 * (cur_ >> 20), ESCALATE_NS - 1)) {       \
            struct escalation e_ = {(task), (u16)(cls), (u16)(phase), span_};     \
            mk_ring_output(&escalated, &e_, sizeof(e_), 0);                       \
        }                                                                         \
    } while (0)

SEC(MK_SEC_TASK_END) int diagnose(struct mk_bpf_ctx *ctx) {
    u32 cls = ctx->class_id;
    if (cls >= CLASSES) return 0;
    struct class_stats *st = mk_map_lookup(&stats, &cls);
    if (!st) return 0;
    u32 task = ctx->task;
    /* A task left out by sampling is not observed: the host's coverage counts aggregated tasks. */
    if (SAMPLE_PERIOD > 1 && sample_hash(task ^ SAMPLE_SEED) % SAMPLE_PERIOD != 0) return 0;
    /* Maxima of queueing and waiting decide causes: those are escalated. */
    ADD_PHASE(st, cls, 0, task, ctx->notify_ns, 0);
    ADD_PHASE(st, cls, 1, task, ctx->queue_ns, 1);
    ADD_PHASE(st, cls, 2, task, ctx->wait_ns, 1);
    ADD_PHASE(st, cls, 3, task, ctx->ts_end - ctx->ts_start, 0);
    /* One worker's hooks run one at a time: its own entry needs no atomics. */
    u32 w = ctx->worker;
    struct worker_state *ws = mk_map_lookup(&workers, &w);
    if (!ws) return 0;
    ws->class_tasks += 1ull << (16 * cls);
    u64 depth = ctx->queue_depth;
    if (depth > 0xffff) depth = 0xffff;
    ws->max_depth = MAX(depth, (u64)ws->max_depth);
    /* An upward crossing of PRESSURE since this worker's previous task end. */
    u64 above = NONZERO32(depth >> 2);            /* depth >= 4 */
    u64 was_below = 1 - NONZERO32(ws->last_depth >> 2);
    ws->crossings += above & was_below;
    ws->last_depth = depth;
    return 0;
}
