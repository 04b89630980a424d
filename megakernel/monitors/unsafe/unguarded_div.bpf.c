/* Unsafe: divides by a context field that may be zero. */
#include "../mk_bpf.h"
MK_MAP(out, MK_MAP_ARRAY, 4, 8, 1);
SEC(MK_SEC_TASK_END) int ratio(struct mk_bpf_ctx *ctx) {
    volatile u64 d = ctx->wait_ns;
    MK_ADD(out, 0, (ctx->ts_end - ctx->ts_start) / d);
    return 0;
}
