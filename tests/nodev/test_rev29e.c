/* test_rev29e.c - hostile review 29e on the fake NIC: devices, contexts, PDs, CQs, GIDs. Each
   test failed on the header at tag base. */
#include "fake_env.h"

#include <fcntl.h>
#include <unistd.h>

/* >>devices: "A negative value from the driver reads 0" (sfv_device_attr), and >>pd and cq:
   sfv_create_cq's "min_entries: 1 .. the device's max_cqe (sfv_query_device)". A driver whose
   max_cqe is negative (an int: -1 for "no limit", or a u32 cap above INT_MAX) read 0 in
   sfv_query_device, but sfv_create_cq compared min_entries with (uint32_t)max_cqe, 2^32 - 1:
   every size passed, 16 made a CQ, UINT32_MAX reached ibv_create_cq as cqe -1; a channel's
   cq_entries passed the same check. Refused now, before any verb, naming the limit. */
static void t_negative_max_cqe_reads_zero(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_cq *cq = (sfv_cq *)1;
    sfv_channel *ch = (sfv_channel *)1;
    sfv_device_attr a;
    fk_set_max_cqe(-1);
    CHECK_OK(sfv_open_device(NULL, &ctx));
    CHECK_OK(sfv_query_device(ctx, &a));
    CHECK_EQ(a.max_cqe, 0);
    CHECK_RESULT(sfv_create_cq(ctx, 16, &cq), SFV_ERR_INVALID);
    CHECK(cq == NULL);
    CHECK(strcmp(sfv_last_error()->verb, "sfv_create_cq") == 0);
    CHECK_MSG("max_cqe");
    cq = (sfv_cq *)1;
    CHECK_RESULT(sfv_create_cq(ctx, UINT32_MAX, &cq), SFV_ERR_INVALID);
    CHECK(cq == NULL);
    CHECK(strcmp(sfv_last_error()->verb, "sfv_create_cq") == 0); /* not the verb's refusal of cqe -1 */
    CHECK_EQ(fk_live(FK_CQ), 0);
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    CHECK_RESULT(sfv_create_channel(pd, NULL, &ch), SFV_ERR_INVALID);
    CHECK(ch == NULL);
    CHECK_MSG("cq_entries");
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    fk_reset();
    CHECK_EQ(fk_live_total(), 0);
}

/* A file standing in for fake0's uverbs node (its dev_path), there at open. */
static void t29_node(char *path) {
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    fk_set_dev_path(path);
}

/* >>events, A DEVICE DELETED while open: whoever reads a context's events "also looks whether the
   device's uverbs node is still in sysfs, and where it was there at open and is gone now (or is
   another node) acts as on DEVICE_FATAL"; a wait "ends within 10 ms (busy)" with class FATAL. A
   second context over the same verbs context (sfv_context_wrap of an opened one's
   sfv_context_raw) made after the node went looked for a node of its own at its wrap: none (or
   the node of the device that took the number since), so it never saw the deletion, and a
   receive on its channel waited to its deadline; its events never said DEVICE_FATAL. Deleted (a) before anyone noticed, (b) and
   noticed through the first context, (c) with another device's node in its place. */
static void t_twin_wrapped_after_deletion(void) {
    int variant;
    for (variant = 0; variant < 3; variant++) {
        char path[] = "/tmp/sfv_r29e_uverbsXXXXXX", other[] = "/tmp/sfv_r29e_otherXXXXXX";
        sfv_context *ctx, *twin;
        sfv_pd *pd;
        sfv_mr *mr;
        sfv_channel *b;
        sfv_pending rx;
        sfv_work_completion wc;
        sfv_scatter_element in;
        sfv_event ev[8];
        sfv_event_type by = SFV_EVENT_OTHER;
        size_t n = 0;
        static unsigned char buf[64];
        sfv_result r;
        double t0;
        t29_node(path);
        CHECK_OK(sfv_open_device(NULL, &ctx));
        if (variant == 2) {
            const int fd = mkstemp(other); /* made while the first is there: another inode */
            CHECK(fd >= 0);
            close(fd);
            CHECK(rename(other, path) == 0);
        } else {
            CHECK(unlink(path) == 0);
        }
        if (variant == 1) {
            CHECK_OK(sfv_context_events(ctx, ev, 8, &n));
            CHECK_EQ(n, 1);
            CHECK_EQ(ev[0].type, SFV_EVENT_DEVICE_FATAL);
        }
        CHECK_OK(sfv_context_wrap(sfv_context_raw(ctx), false, &twin));
        CHECK_OK(sfv_context_events(twin, ev, 8, &n)); /* the twin's reader learns of it too */
        if (n != 1 || ev[0].type != SFV_EVENT_DEVICE_FATAL) FAIL("variant %d: the twin queued %zu events, no DEVICE_FATAL", variant, n);
        CHECK_OK(sfv_alloc_pd(twin, &pd));
        CHECK_OK(sfv_reg_mr_local(pd, buf, sizeof buf, &mr));
        CHECK_OK(sfv_create_channel(pd, NULL, &b));
        {
            sfv_endpoint eb;
            CHECK_OK(sfv_channel_endpoint(b, &eb));
            r = sfv_channel_handshake(b, &eb);
        }
        if (r == SFV_OK) {
            in = sfv_mr_scatter_element(mr, buf, 32);
            CHECK_OK(sfv_channel_post_receive(b, &in, 1, &rx));
            t0 = test_seconds();
            r = sfv_pending_wait(&rx, 1500, &wc);
            if (r == SFV_ERR_TIMEOUT)
                FAIL("variant %d: the twin never saw the deletion: a receive waited %.2f s to its deadline", variant, test_seconds() - t0);
            CHECK_EQ(r, SFV_ERR_WORK);
            CHECK_EQ(wc.error_class, SFV_WORK_ERROR_FATAL);
        }
        CHECK(sfv_channel_broken(b, &by));
        CHECK_EQ(by, SFV_EVENT_DEVICE_FATAL);
        CHECK_OK(sfv_destroy_channel(b));
        CHECK_OK(sfv_dereg_mr(mr));
        CHECK_OK(sfv_dealloc_pd(pd));
        CHECK_OK(sfv_close_device(twin));
        CHECK_OK(sfv_close_device(ctx));
        unlink(path);
        fk_set_dev_path(NULL);
        CHECK_EQ(fk_live_total(), 0);
    }
}

static const harness_test TESTS[] = {
    TEST(t_negative_max_cqe_reads_zero, 10),
    TEST(t_twin_wrapped_after_deletion, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
