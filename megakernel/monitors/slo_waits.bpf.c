/* Query `slo-waits`: dependency waits longer than 20 µs in request
 * generation 1, counted only while the SLO predicate holds: the previous
 * decode step of the same request had a communication task that executed
 * longer than 12 µs (its SLO). The predicate is state one hook leaves for another (task_end sets
 * it, dep_wait reads it); a configuration has no such state. */
#include "mk_bpf.h"

#define WAIT_NS 20000ull
#define SLO_CLASS 2
#define EXEC_SLO_NS 12000ull

MK_MAP(slow_step, MK_MAP_ARRAY, 4, 8, 64); /* [req_gen * 16 + task_gen] = 1 when breached */
MK_MAP(count, MK_MAP_ARRAY, 4, 8, 1);

SEC(MK_SEC_TASK_END) int slo_mark(struct mk_bpf_ctx *ctx) {
    if (ctx->class_id != SLO_CLASS || ctx->ts_end - ctx->ts_start <= EXEC_SLO_NS) return 0;
    u32 key = (ctx->req_gen & 3) * 16 + (ctx->task_gen & 15);
    u64 *flag = mk_map_lookup(&slow_step, &key);
    if (flag) *flag = 1;
    return 0;
}

SEC(MK_SEC_DEP_WAIT) int slo_waits(struct mk_bpf_ctx *ctx) {
    if (ctx->req_gen != 1 || ctx->wait_ns <= WAIT_NS || ctx->task_gen == 0) return 0;
    u32 key = (ctx->req_gen & 3) * 16 + ((ctx->task_gen - 1) & 15);
    u64 *flag = mk_map_lookup(&slow_step, &key);
    if (!flag || *flag == 0) return 0;
    MK_ADD(count, 0, 1);
    return 0;
}
