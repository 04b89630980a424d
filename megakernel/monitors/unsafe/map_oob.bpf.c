/* Unsafe: writes past the end of a map value (8 bytes) through a lookup. */
#include "../mk_bpf.h"
MK_MAP(out, MK_MAP_ARRAY, 4, 8, 4);
SEC(MK_SEC_TASK_END) int overrun(struct mk_bpf_ctx *ctx) {
    u32 key = 0;
    u64 *v = mk_map_lookup(&out, &key);
    if (v) v[1] = ctx->task;
    return 0;
}
