/* Tasks that ended, per class: the program the live-swap check runs twice
 * (before and after a swap, each in its own bank's maps), so the two
 * counts must add up to every task exactly once. */
#include "mk_bpf.h"

MK_MAP(ended, MK_MAP_ARRAY, 4, 8, 8); /* per class */

SEC(MK_SEC_TASK_END) int task_count(struct mk_bpf_ctx *ctx) {
    MK_ADD(ended, ctx->class_id & 7, 1);
    return 0;
}
