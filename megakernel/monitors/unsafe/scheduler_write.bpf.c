/* Unsafe for an observation program: steers the scheduler (route_hint). */
#include "../mk_bpf.h"
SEC(MK_SEC_TASK_BEGIN) int steer(struct mk_bpf_ctx *ctx) {
    ctx->route_hint = ctx->worker + 1;
    return 0;
}
