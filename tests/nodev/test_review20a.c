/* test_review20a.c - review of multi-channels, nodes, SRQs and leases on the fake NIC: an SRQ's
   last reference dropped by a channel's destroy that the SRQ's destroy refuses, and a launcher's
   rank or size that is no decimal number. */
#define _GNU_SOURCE
#include "fake_verbs.h"
#define SFV_MALLOC(sz) fk_malloc(sz)
#define SFV_CALLOC(n, sz) fk_calloc(n, sz)
#define SFV_FREE(p) fk_free(p)
#define SFV__ABORT_DRAIN_NS 300000000ull
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "harness.h"

typedef struct tr_env {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    unsigned char *buf;
    size_t len;
} tr_env;

static void tr_open(tr_env *e, size_t len) {
    memset(e, 0, sizeof *e);
    e->len = len;
    e->buf = (unsigned char *)calloc(1, len);
    CHECK(e->buf);
    CHECK_OK(sfv_open_device(NULL, &e->ctx));
    CHECK_OK(sfv_alloc_pd(e->ctx, &e->pd));
    CHECK_OK(sfv_reg_mr_shared(e->pd, e->buf, len, &e->mr));
}
static void tr_close(tr_env *e) {
    sfv_dereg_mr(e->mr);
    sfv_dealloc_pd(e->pd);
    sfv_close_device(e->ctx);
    free(e->buf);
    CHECK_EQ(fk_live_total(), 0);
}
/* An SRQ whose caller's reference is gone goes with its last channel. When that channel's
   destroy finds the SRQ's destroy refused (ibv_destroy_srq, or then its CQ's ibv_destroy_cq),
   the failure is reported, not SFV_OK with the SRQ, its CQ, PD and context left behind for good
   (and the verb's failure in sfv_last_error after a success), and the destroy can be repeated,
   which frees everything, the SRQ's receives flushed. */
static void tr_srq_channel(tr_env *e, sfv_srq **srq, sfv_channel **a, sfv_pending *rx) {
    sfv_channel_desc d;
    sfv_scatter_element s = sfv_mr_scatter_element(e->mr, e->buf, 64);
    CHECK_OK(sfv_create_srq(e->pd, NULL, srq));
    memset(&d, 0, sizeof d);
    d.srq = *srq;
    CHECK_OK(sfv_create_channel(e->pd, &d, a));
    CHECK_OK(sfv_srq_post_receive(*srq, &s, 1, rx)); /* still posted when the SRQ goes */
    CHECK_OK(sfv_destroy_srq(*srq)); /* the caller's reference: the channel keeps the SRQ */
}
static void t_srq_last_ref_destroy_fails(void) {
    tr_env e;
    sfv_srq *srq;
    sfv_channel *a;
    sfv_pending rx;
    long i, n, second_cq = 0;
    int seen = 0;
    tr_open(&e, 4096);
    tr_srq_channel(&e, &srq, &a, &rx);
    fk_fail_name("ibv_destroy_srq", 1);
    CHECK_RESULT(sfv_destroy_channel(a), SFV_ERR_DRIVER);
    CHECK(strcmp(sfv_last_error()->verb, "ibv_destroy_srq") == 0);
    fk_fail_name("ibv_destroy_srq", 0);
    CHECK_OK(sfv_destroy_channel(a)); /* the retry frees the rest */
    CHECK_EQ(fk_live(FK_CQ), 0);
    /* the SRQ's CQ refuses (its SRQ is gone by then): the same */
    tr_srq_channel(&e, &srq, &a, &rx);
    fk_fail_nth(0); /* (counts the calls from here) */
    CHECK_OK(sfv_destroy_channel(a));
    for (i = 1, n = fk_calls(); i <= n && !second_cq; i++)
        if (fk_call_name(i) && strcmp(fk_call_name(i), "ibv_destroy_cq") == 0 && ++seen == 2) second_cq = i;
    CHECK(second_cq > 0);
    tr_srq_channel(&e, &srq, &a, &rx);
    fk_fail_nth(second_cq);
    CHECK_RESULT(sfv_destroy_channel(a), SFV_ERR_DRIVER);
    CHECK(fk_failed() && strcmp(fk_failed(), "ibv_destroy_cq") == 0);
    fk_fail_nth(0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_EQ(fk_live(FK_CQ), 0);
    tr_close(&e);
}

/* A launcher's variable that is no plain decimal number is refused: strtoull takes " -1" (a
   leading blank hides the sign from a test of the first byte) as 2^64 - 1, which passed as a
   world of SIZE_MAX ranks. */
static void t_launcher_rank_negative_size(void) {
    static const char *const bad[][2] = {{"0", " -1"}, {"0", "\t-2"}, {" -1", "4"}};
    size_t i, r = 9, n = 9;
    for (i = 0; i < COUNT_OF(bad); i++) {
        unsetenv("PMI_RANK"); unsetenv("PMI_SIZE"); unsetenv("SLURM_PROCID"); unsetenv("SLURM_NTASKS");
        setenv("OMPI_COMM_WORLD_RANK", bad[i][0], 1);
        setenv("OMPI_COMM_WORLD_SIZE", bad[i][1], 1);
        CHECK_RESULT(sfv_launcher_rank(&r, &n), SFV_ERR_INVALID);
        CHECK(r == 0 && n == 0);
    }
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    CHECK_OK(sfv_launcher_rank(&r, &n));
    CHECK(r == 1 && n == 4);
}

static const harness_test TESTS[] = {
    TEST(t_launcher_rank_negative_size, 10),
    TEST(t_srq_last_ref_destroy_fails, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
