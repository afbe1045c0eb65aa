// The README's idioms in C++ (its "Use it" and "Many peers" snippets, C++ form): they must build
// without a warning under -Wall -Wextra -Wpedantic -Wshadow -Werror (make all builds this).
#include "safeverbs.h"
#include <cstdio>

int readme_use_it(void);
int readme_use_it(void) {
    sfv_context *ctx; sfv_pd *pd; sfv_mr *mr; sfv_channel *ch;
    sfv_endpoint me, peer;
    static char buf[4096];
    if (sfv_open_device("rxe0", &ctx) != SFV_OK) {
        std::fprintf(stderr, "%s\n", sfv_last_error()->message);
        return 1;
    }
    if (sfv_alloc_pd(ctx, &pd) || sfv_reg_mr_local(pd, buf, sizeof buf, &mr)) return 1;
    sfv_channel_desc desc = SFV_ZERO_INIT;   /* zero = every default; in C++ also desc{} */
    sfv_channel_desc desc2{};
    (void)desc2;
    if (sfv_create_channel(pd, &desc, &ch) || sfv_channel_endpoint(ch, &me)) return 1;
    peer = me;
    if (sfv_channel_handshake(ch, &peer)) return 1;
    sfv_scatter_element in  = sfv_mr_scatter_element(mr, buf + 2048, 2048);
    sfv_gather_element  out = sfv_mr_gather_element(mr, buf, 5);
    sfv_pending rx;
    if (sfv_channel_post_receive(ch, &in, 1, &rx) || sfv_channel_send(ch, &out, 1, NULL)) return 1;
    sfv_work_completion wc;
    if (sfv_pending_wait(&rx, -1, &wc) == SFV_OK)
        std::printf("got %u bytes\n", wc.byte_len);
    sfv_node_desc nd = SFV_ZERO_INIT;
    nd.barrier = SFV_BARRIER_DISSEMINATION;   /* an enum, not an int, in C++ */
    nd.world_size = 1;
    sfv_node *node;
    if (sfv_create_node(pd, &nd, &node) == SFV_OK) (void)sfv_destroy_node(node);
    (void)sfv_destroy_channel(ch); (void)sfv_dereg_mr(mr);
    (void)sfv_dealloc_pd(pd); (void)sfv_close_device(ctx);
    return 0;
}
