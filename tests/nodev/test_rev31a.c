/* test_rev31a.c - from a hostile review of session 25's changes (channels, MRs a failed create
   could not take apart, left to their PD for sfv_dealloc_pd), on the fake NIC: each test failed
   on the header before its fix. */
#include "fake_env.h"

/* Promise (sfv_dealloc_pd: what a call that failed part-way could not take apart goes once its
   destroy is taken; "no leak"): a channel's create that failed after its CQ was made (the QP's
   create refused, say) destroyed the CQ and the completion channel ignoring the verbs' results:
   a refused ibv_destroy_cq (or ibv_destroy_comp_channel) lost them, holding the device for good
   (sfv_close_device's last reference then failed, EBUSY). Now they are left to the PD like a
   refused QP, and sfv_dealloc_pd destroys them again: the fake holds nothing afterwards. */
static void t_create_cleanup_cq_refused(void) {
    static const char *const fails[][2] = {
        {"ibv_create_qp", "ibv_destroy_cq"},
        {"ibv_create_qp", "ibv_destroy_comp_channel"},
        {"ibv_create_cq", "ibv_destroy_comp_channel"}, /* (before the channel has its PD) */
    };
    size_t i;
    for (i = 0; i < COUNT_OF(fails); i++) {
        sfv_context *ctx;
        sfv_pd *pd;
        sfv_channel *ch = (sfv_channel *)1;
        sfv_channel_desc d;
        fk_reset();
        CHECK_OK(sfv_open_device(NULL, &ctx));
        CHECK_OK(sfv_alloc_pd(ctx, &pd));
        memset(&d, 0, sizeof d);
        d.wait_mode = SFV_WAIT_EVENT; /* with a completion channel */
        fk_fail_name(fails[i][0], 1);
        fk_fail_name(fails[i][1], 1);
        CHECK_RESULT(sfv_create_channel(pd, &d, &ch), SFV_ERR_RESOURCE);
        CHECK(ch == NULL);
        CHECK(strcmp(sfv_last_error()->verb, fails[i][0]) == 0); /* the create's own failure, not the cleanup's */
        CHECK(fk_failed() && strcmp(fk_failed(), fails[i][1]) == 0);
        fk_fail_name(fails[i][0], 0);
        fk_fail_name(fails[i][1], 0);
        CHECK_OK(sfv_close_device(ctx)); /* (the PD holds it) */
        CHECK_OK(sfv_dealloc_pd(pd));
        if (fk_live_total() != 0) FAIL("%s failed, %s refused: %ld fake objects left", fails[i][0], fails[i][1], fk_live_total());
    }
}

/* Promise (>>srq Lifetime: "every channel on it holds one [reference], so the SRQ goes when its
   last channel does"; teardown in any order): a channel's create on an SRQ whose QP's destroy
   was refused left that QP, on the SRQ, to the PD without a reference on the SRQ: the caller's
   sfv_destroy_srq then went to the verb, which refused (EBUSY: a QP is on it), and after
   sfv_dealloc_pd and sfv_close_device the SRQ, its CQ, the PD and the device were left for good.
   Now the left QP holds the SRQ as a channel does: sfv_destroy_srq drops the caller's reference
   (SFV_OK), and the SRQ goes with the QP in sfv_dealloc_pd. */
static void t_create_cleanup_srq_held(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_srq *srq;
    sfv_channel *ch = (sfv_channel *)1;
    sfv_channel_desc d;
    fk_reset();
    CHECK_OK(sfv_open_device(NULL, &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    CHECK_OK(sfv_create_srq(pd, NULL, &srq));
    memset(&d, 0, sizeof d);
    d.srq = srq;
    fk_fail_name("ibv_modify_qp", 1);  /* to INIT: the create fails after its QP was made */
    fk_fail_name("ibv_destroy_qp", 2); /* and that QP's destroy is refused, then its retry */
    CHECK_RESULT(sfv_create_channel(pd, &d, &ch), SFV_ERR_DRIVER);
    CHECK(ch == NULL);
    fk_fail_name("ibv_modify_qp", 0);
    fk_fail_name("ibv_destroy_qp", 0);
    CHECK_OK(sfv_destroy_srq(srq)); /* the caller's reference: the left QP keeps the SRQ */
    CHECK_OK(sfv_dealloc_pd(pd));   /* the QP, then the SRQ, then the PD */
    CHECK_OK(sfv_close_device(ctx));
    CHECK_EQ(fk_live_total(), 0);
}

/* Promise (sfv_dealloc_pd, as above; "no leak"): sfv_create_node failing after its barrier MR
   was registered (the second MR's registration refused) deregisters it; when ibv_dereg_mr
   refused, the MR was dropped, still holding the PD: sfv_dealloc_pd and sfv_close_device then
   returned SFV_OK with the MR, the PD and the device left for good. Now the PD keeps the MR with
   its memory, and sfv_dealloc_pd deregisters it again, then frees that memory. */
static void t_create_node_dereg_refused(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_node *node = NULL;
    sfv_node_desc nd;
    long i, n, second = 0;
    int seen = 0;
    fk_reset();
    CHECK_OK(sfv_open_device(NULL, &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    memset(&nd, 0, sizeof nd);
    nd.world_size = 2;
    fk_fail_nth(0); /* (counts the calls from here) */
    CHECK_OK(sfv_create_node(pd, &nd, &node));
    for (i = 1, n = fk_calls(); i <= n && !second; i++)
        if (fk_call_name(i) && strcmp(fk_call_name(i), "ibv_reg_mr") == 0 && ++seen == 2) second = i;
    CHECK_OK(sfv_destroy_node(node));
    CHECK(second > 0);
    fk_fail_nth(second); /* the second MR's registration */
    fk_fail_name("ibv_dereg_mr", 1); /* and the first's deregistration */
    CHECK_RESULT(sfv_create_node(pd, &nd, &node), SFV_ERR_RESOURCE);
    CHECK(node == NULL);
    CHECK(strcmp(sfv_last_error()->verb, "ibv_reg_mr") == 0);
    CHECK(fk_failed() && strcmp(fk_failed(), "ibv_dereg_mr") == 0);
    fk_fail_nth(0);
    fk_fail_name("ibv_dereg_mr", 0);
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    CHECK_EQ(fk_live_total(), 0);
}

static const harness_test TESTS[] = {
    TEST(t_create_cleanup_cq_refused, 10),
    TEST(t_create_cleanup_srq_held, 10),
    TEST(t_create_node_dereg_refused, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
