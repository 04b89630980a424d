/* Unsafe: reads 8 bytes past the end of the 80-byte context. */
#include "../mk_bpf.h"
MK_MAP(out, MK_MAP_ARRAY, 4, 8, 1);
SEC(MK_SEC_TASK_END) int peek(struct mk_bpf_ctx *ctx) {
    u64 beyond = *(volatile u64 *)((char *)ctx + 80);
    MK_ADD(out, 0, beyond);
    return 0;
}
