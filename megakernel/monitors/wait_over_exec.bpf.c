/* Query `wait-over-exec`: per class, the tasks that waited on a dependency
 * longer than they then executed: a comparison of two spans of the same
 * task, which per-phase histograms cannot make. */
#include "mk_bpf.h"

MK_MAP(waited_longer, MK_MAP_ARRAY, 4, 8, 8); /* per class */

SEC(MK_SEC_TASK_END) int wait_over_exec(struct mk_bpf_ctx *ctx) {
    u64 exec = ctx->ts_end - ctx->ts_start;
    if (ctx->wait_ns <= exec) return 0;
    MK_ADD(waited_longer, ctx->class_id & 7, 1);
    return 0;
}
