/* Unsafe: uses a map lookup's result without checking it for NULL. */
#include "../mk_bpf.h"
MK_MAP(out, MK_MAP_ARRAY, 4, 8, 4);
SEC(MK_SEC_TASK_END) int blind(struct mk_bpf_ctx *ctx) {
    u32 key = ctx->class_id;
    u64 *v = mk_map_lookup(&out, &key);
    *v += 1;
    return 0;
}
