/* Query `escalate-p99`: raw events of communication tasks that ran longer
 * than 12 µs, escalated into the ring only in decode steps after one whose
 * communication p99 crossed that bound (more than 1 % of its tasks over it).
 * Everything else stays a counter. */
#include "mk_bpf.h"

#define CLASS 2
#define BOUND_NS 12000ull

struct escalated {
    u32 task;
    u32 class_id;
    u32 task_gen;
    u32 req_gen;
    u64 exec_ns;
    u64 ts_end;
};

MK_MAP(over, MK_MAP_ARRAY, 4, 8, 64);  /* [req_gen * 16 + task_gen] tasks over the bound */
MK_MAP(total, MK_MAP_ARRAY, 4, 8, 64); /* [req_gen * 16 + task_gen] tasks */
MK_MAP(raw, MK_MAP_RING, 0, 32, 256);

SEC(MK_SEC_TASK_END) int escalate(struct mk_bpf_ctx *ctx) {
    if (ctx->class_id != CLASS) return 0;
    u64 exec = ctx->ts_end - ctx->ts_start;
    u32 key = (ctx->req_gen & 3) * 16 + (ctx->task_gen & 15);
    MK_ADD(total, key, 1);
    if (exec <= BOUND_NS) return 0;
    MK_ADD(over, key, 1);
    if (ctx->task_gen == 0) return 0;
    u32 prev = key - 1;
    u64 *n_over = mk_map_lookup(&over, &prev);
    u64 *n_all = mk_map_lookup(&total, &prev);
    if (!n_over || !n_all) return 0;
    if (*n_over * 100 <= *n_all) return 0;
    struct escalated e = {ctx->task, ctx->class_id, ctx->task_gen, ctx->req_gen, exec, ctx->ts_end};
    mk_ring_output(&raw, &e, sizeof(e), 0);
    return 0;
}
