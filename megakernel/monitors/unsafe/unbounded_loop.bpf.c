/* Unsafe: a loop whose trip count depends on the context (a back edge). */
#include "../mk_bpf.h"
MK_MAP(out, MK_MAP_ARRAY, 4, 8, 1);
SEC(MK_SEC_TASK_END) int spin(struct mk_bpf_ctx *ctx) {
    u64 n = 0;
    for (u64 t = ctx->ts_start; t < ctx->ts_end; t += ctx->wait_ns + 1) n++;
    MK_ADD(out, 0, n);
    return 0;
}
