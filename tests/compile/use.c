/* A user translation unit: the declarations alone, with the header included twice. */
#include "safeverbs.h"
#include "safeverbs.h"
#include <string.h>

int main(void) {
    sfv_remote_mr r = sfv_remote_mr_make(0, 16, 1), o;
    sfv_channel_desc desc;
    sfv_device_attr attr;
    /* The raw accessors without <infiniband/verbs.h>: pointers to incomplete types. */
    struct ibv_context *raw = sfv_context_raw(NULL);
    struct ibv_qp *qp = sfv_channel_raw_qp(NULL);
    memset(&desc, 0, sizeof desc);
    (void)desc;
    if (raw || qp || sfv_query_device(NULL, &attr) != SFV_ERR_INVALID) return 1;
#ifdef SAFEVERBS_RDMACM /* the RDMA-CM part, declared only with the macro (links -lrdmacm) */
    if (sfv_cm_close(NULL, 0) != SFV_OK || sfv_cm_fd(NULL) != -1) return 1;
#endif
    return sfv_remote_mr_sub(r, 4, &o) == SFV_OK && o.length == 12 ? 0 : 1;
}
