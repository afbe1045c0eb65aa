/* A consumer of an installed safeverbs (tests/consumers/): the API without the implementation.
   Opens the device named by argv[1] (or SAFEVERBS_TEST_DEVICE, or the first one), connects a
   channel to itself and sends "hello" to its own receive. Prints "consumer ok" and exits 0. */
#include <safeverbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !SAFEVERBS_VERSION_AT_LEAST(0, 4, 0)
#error "this consumer needs safeverbs 0.4.0 or newer"
#endif

#define TRY(call)                                                                    \
    do {                                                                             \
        if ((call) != SFV_OK) {                                                      \
            fprintf(stderr, "%s: %s\n", #call, sfv_last_error()->message);           \
            return 1;                                                                \
        }                                                                            \
    } while (0)

int main(int argc, char **argv) {
    const char *dev = argc > 1 ? argv[1] : getenv("SAFEVERBS_TEST_DEVICE");
    static char buf[64] = "hello";
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_channel *ch;
    sfv_endpoint me;
    sfv_channel_desc desc;
    sfv_pending rx;
    sfv_work_completion wc;
    memset(&desc, 0, sizeof desc);
    TRY(sfv_open_device(dev, &ctx));
    TRY(sfv_alloc_pd(ctx, &pd));
    TRY(sfv_reg_mr_local(pd, buf, sizeof buf, &mr));
    TRY(sfv_create_channel(pd, &desc, &ch));
    TRY(sfv_channel_endpoint(ch, &me));
    TRY(sfv_channel_handshake(ch, &me));
    sfv_scatter_element in = sfv_mr_scatter_element(mr, buf + 32, 32);
    sfv_gather_element out = sfv_mr_gather_element(mr, buf, 6);
    TRY(sfv_channel_post_receive(ch, &in, 1, &rx));
    TRY(sfv_channel_send(ch, &out, 1, NULL));
    TRY(sfv_pending_wait(&rx, 10000, &wc));
    if (wc.byte_len != 6 || strcmp(buf + 32, "hello") != 0) {
        fprintf(stderr, "received %u bytes: \"%.32s\"\n", wc.byte_len, buf + 32);
        return 1;
    }
    TRY(sfv_destroy_channel(ch));
    TRY(sfv_dereg_mr(mr));
    TRY(sfv_dealloc_pd(pd));
    TRY(sfv_close_device(ctx));
    printf("consumer ok: safeverbs %s, %u bytes looped back\n", SAFEVERBS_VERSION_STRING, wc.byte_len);
    return 0;
}
