/* test_review20b.c - from a hostile review of devices, GIDs, MRs and wrapping, on the fake NIC of
   fake_verbs.c: each test failed on the header before its fix. */
#define _GNU_SOURCE
#include "fake_verbs.h" /* the allocator safeverbs.h is given: counted, and told when to fail */
#define SFV_MALLOC(sz) fk_malloc(sz)
#define SFV_CALLOC(n, sz) fk_calloc(n, sz)
#define SFV_FREE(p) fk_free(p)
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "harness.h"

#include <fcntl.h>

/* A DMA-BUF MR is addressed at its iova (sfv_mr_addr says so): rdma-core's ibv_reg_dmabuf_mr
   sets mr->addr to the offset into the buffer, which is not where the NIC addresses it. Its
   region, containment and elements are the iova's. */
static void t_dmabuf_mr_at_iova(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_gather_element g;
    const uint64_t offset = 0x10, iova = 0x200000010ull;
    fk_set_dmabuf(true);
    CHECK_OK(sfv_open_device(NULL, &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    CHECK_OK(sfv_reg_dmabuf_mr_shared(pd, 3, offset, 4096, iova, &mr));
    CHECK_EQ(sfv_mr_addr(mr), iova);
    CHECK_EQ(sfv_mr_length(mr), 4096);
    CHECK_EQ(sfv_mr_remote(mr).addr, iova);
    CHECK(sfv_mr_encloses(mr, (const void *)(uintptr_t)iova, 4096));
    CHECK(!sfv_mr_encloses(mr, (const void *)(uintptr_t)offset, 1));
    CHECK_OK(sfv_mr_gather_element_checked(mr, (const void *)(uintptr_t)(iova + 8), 64, &g));
    CHECK(g.addr == iova + 8 && g.length == 64 && g.lkey == sfv_mr_lkey(mr));
    CHECK_OK(sfv_dereg_mr(mr));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    CHECK_EQ(fk_live_total(), 0);
}

/* A GID table longer than 256 entries (rxe's has 1024) whose best GID sits past index 255: a
   queue pair's GRH takes an 8-bit sgid_index, so sfv_choose_gid must pick among 0 .. 255, and a
   channel must use the index it chose (it truncated 280 to 24, an empty entry, and advertised
   the GID of 280: the handshake failed). */
static void t_choose_gid_past_255(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_channel *a, *b;
    sfv_channel_desc d, r;
    sfv_endpoint ea, eb;
    sfv_gid_entry e;
    uint32_t i = 77;
    fk_set_gid_table(300, 280);
    CHECK_OK(sfv_open_device(NULL, &ctx));
    CHECK_OK(sfv_query_gid(ctx, 1, 280, &e)); /* there, and the best */
    CHECK_EQ(sfv_gid_preference(&e), 4);
    CHECK_OK(sfv_choose_gid(ctx, 1, &i));
    CHECK(i <= 255);
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    memset(&d, 0, sizeof d);
    CHECK_OK(sfv_channel_desc_resolve(pd, &d, &r));
    CHECK(r.gid_index_set && r.gid_index == i);
    CHECK_OK(sfv_create_channel(pd, &d, &a));
    CHECK_OK(sfv_create_channel(pd, &d, &b));
    CHECK_OK(sfv_channel_endpoint(a, &ea));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK_OK(sfv_query_gid(ctx, 1, sfv_channel_get_desc(a)->gid_index, &e));
    CHECK(ea.has_gid && memcmp(&e.gid, &ea.gid, sizeof e.gid) == 0); /* the GID it advertises is the one it uses */
    CHECK_OK(sfv_channel_handshake(a, &eb));
    CHECK_OK(sfv_channel_handshake(b, &ea));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    CHECK_EQ(fk_live_total(), 0);
}

static int g_errors;
static char g_first[320];
static void count_errors(void *user, sfv_log_level level, const char *message) {
    (void)user;
    if (level == SFV_LOG_ERROR && g_errors++ == 0) snprintf(g_first, sizeof g_first, "%s", message);
}

/* The log's errors are the failures a call records in sfv_last_error: a successful
   sfv_choose_gid (or channel creation, which picks a GID) records none, and logs none for the
   empty table entries it skips (an InfiniBand port: one GID, the rest of the table empty; a
   real one has 128 entries, so a channel logged 127 errors). */
static void t_choose_gid_logs_no_error(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_channel *ch;
    sfv_channel_desc d;
    uint32_t i = 77;
    fk_set_link_layer(1); /* InfiniBand: GID 0, then 3 empty entries */
    CHECK_OK(sfv_open_device(NULL, &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    sfv_set_log(count_errors, NULL, SFV_LOG_ERROR);
    CHECK_OK(sfv_choose_gid(ctx, 1, &i));
    CHECK_EQ(i, 0);
    memset(&d, 0, sizeof d);
    CHECK_OK(sfv_create_channel(pd, &d, &ch));
    if (g_errors) FAIL("%d errors logged by calls that succeeded; the first: %s", g_errors, g_first);
    CHECK_RESULT(sfv_query_gid(ctx, 1, 2, &(sfv_gid_entry){0}), SFV_ERR_NOT_FOUND); /* a call that fails still logs */
    CHECK_EQ(g_errors, 1);
    sfv_set_log(NULL, NULL, SFV_LOG_OFF);
    CHECK_OK(sfv_destroy_channel(ch));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    CHECK_EQ(fk_live_total(), 0);
}

/* A refusal names the function that was called (sfv_error.verb), not one it calls. */
static void t_choose_gid_null_context(void) {
    uint32_t i = 77;
    CHECK_RESULT(sfv_choose_gid(NULL, 1, &i), SFV_ERR_INVALID);
    CHECK_EQ(i, 0);
    if (strcmp(sfv_last_error()->verb, "sfv_choose_gid") != 0) FAIL("verb %s: %s", sfv_last_error()->verb, sfv_last_error()->message);
}

/* sfv_context_wrap: "on failure `raw` is still yours": as it was, its async fd's flags included
   (it made the fd non-blocking before refusing a port that is down). */
static void t_wrap_keeps_async_fd(void) {
    struct ibv_device **devs;
    struct ibv_context *raw;
    sfv_context *c = NULL;
    int n = 0, fl0;
    devs = ibv_get_device_list(&n);
    CHECK(devs && n >= 1);
    raw = ibv_open_device(devs[0]);
    ibv_free_device_list(devs);
    CHECK(raw != NULL);
    fl0 = fcntl(raw->async_fd, F_GETFL);
    CHECK(fl0 >= 0 && !(fl0 & O_NONBLOCK));
    fk_set_port_state(1); /* DOWN */
    CHECK_RESULT(sfv_context_wrap(raw, false, &c), SFV_ERR_RESOURCE);
    CHECK(c == NULL);
    CHECK_EQ(fcntl(raw->async_fd, F_GETFL), fl0);
    fk_set_port_state(4);
    CHECK_OK(sfv_context_wrap(raw, false, &c));
    CHECK(fcntl(raw->async_fd, F_GETFL) & O_NONBLOCK); /* safeverbs reads the events without blocking */
    CHECK_OK(sfv_close_device(c));
    CHECK_EQ(ibv_close_device(raw), 0);
    CHECK_EQ(fk_live_total(), 0);
}

static const harness_test TESTS[] = {
    TEST(t_dmabuf_mr_at_iova, 10),
    TEST(t_choose_gid_past_255, 10),
    TEST(t_choose_gid_logs_no_error, 10),
    TEST(t_choose_gid_null_context, 10),
    TEST(t_wrap_keeps_async_fd, 10),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
