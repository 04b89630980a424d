/* Query `step-max-wait`: the longest dependency wait of every decode step of
 * every request. Each worker's hooks run one at a time, so a per-(step,
 * worker) maximum needs no atomics; the host reduces over workers. */
#include "mk_bpf.h"

MK_MAP(max_wait, MK_MAP_ARRAY, 4, 8, 4096); /* [(req_gen * 8 + task_gen) * 256 + worker] */

SEC(MK_SEC_DEP_WAIT) int step_max(struct mk_bpf_ctx *ctx) {
    u32 key = (((ctx->req_gen & 1) * 8 + (ctx->task_gen & 7)) << 8) | (ctx->worker & 255);
    u64 *m = mk_map_lookup(&max_wait, &key);
    if (m && ctx->wait_ns > *m) *m = ctx->wait_ns;
    return 0;
}
