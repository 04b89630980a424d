/* Query `skew-phase`: which communication phase a routing skew lands in.
 * A gemm task that is the second (or later) of its operator on one worker is
 * a skewed task of the phase its operator releases (the gemm's trigger event,
 * dep_event + 1 in the track's event numbering); communication waits are
 * summed per phase (the event they wait on). */
#include "mk_bpf.h"

#define GEMM 1
#define COMMUNICATION 2

MK_MAP(cur_phase, MK_MAP_ARRAY, 4, 8, 512); /* per worker: the gemm operator it last ran */
MK_MAP(run_count, MK_MAP_ARRAY, 4, 8, 512); /* per worker: its tasks of that operator */
MK_MAP(skewed, MK_MAP_ARRAY, 4, 8, 128);    /* per phase: gemm tasks beyond one per worker */
MK_MAP(wait_sum, MK_MAP_ARRAY, 4, 8, 128);  /* per phase: communication wait ns */

SEC(MK_SEC_TASK_BEGIN) int skew_count(struct mk_bpf_ctx *ctx) {
    if (ctx->class_id != GEMM) return 0;
    u32 w = ctx->worker;
    u64 phase = (u64)ctx->dep_event + 1;
    u64 *cur = mk_map_lookup(&cur_phase, &w);
    u64 *n = mk_map_lookup(&run_count, &w);
    if (!cur || !n) return 0;
    if (*cur != phase + 1) { /* stored + 1 so that 0 means "none yet" */
        *cur = phase + 1;
        *n = 0;
    }
    *n += 1;
    if (*n >= 2) MK_ADD(skewed, (u32)phase, 1);
    return 0;
}

SEC(MK_SEC_DEP_WAIT) int skew_wait(struct mk_bpf_ctx *ctx) {
    if (ctx->class_id != COMMUNICATION) return 0;
    MK_ADD(wait_sum, ctx->dep_event, ctx->wait_ns);
    return 0;
}
