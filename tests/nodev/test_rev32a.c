/* test_rev32a.c - hostile review 32a on the fake NIC (round 31's fixes, and what they left
   around them): each test failed on the header at tag base. */
#include "fake_env.h"

/* Promise (sfv_dealloc_pd: what a create that failed part-way could not take apart goes once its
   destroy is taken; "no leak"; round 31 made a channel's create leave a refused CQ to its PD).
   sfv_create_srq failing after its CQ was made (the SRQ's create refused, or its limit's
   ibv_modify_srq) destroyed the SRQ and the CQ ignoring the verbs' results: a refused
   ibv_destroy_cq lost the CQ, holding the device for good (sfv_close_device's last reference
   then kept it, EBUSY), and a refused ibv_destroy_srq lost the SRQ. Now they are left to the PD
   as a channel's are, and sfv_dealloc_pd destroys them again. */
static long tr_calls_of(const char *verb) {
    long i, n = fk_calls(), k = 0;
    for (i = 1; i <= n; i++)
        if (fk_call_name(i) && strcmp(fk_call_name(i), verb) == 0) k++;
    return k;
}
static void t_create_srq_cleanup_refused(void) {
    static const char *const fails[][2] = {
        {"ibv_create_srq", "ibv_destroy_cq"},
        {"ibv_modify_srq", "ibv_destroy_cq"},
        {"ibv_modify_srq", "ibv_destroy_srq"},
    };
    size_t i;
    for (i = 0; i < COUNT_OF(fails); i++) {
        sfv_context *ctx;
        sfv_pd *pd;
        sfv_srq *srq = (sfv_srq *)1;
        sfv_srq_desc d;
        fk_reset();
        CHECK_OK(sfv_open_device(NULL, &ctx));
        CHECK_OK(sfv_alloc_pd(ctx, &pd));
        memset(&d, 0, sizeof d);
        d.limit = 4; /* (armed by ibv_modify_srq) */
        fk_fail_name(fails[i][0], 1);
        fk_fail_name(fails[i][1], 1);
        CHECK(sfv_create_srq(pd, &d, &srq) != SFV_OK);
        CHECK(srq == NULL);
        CHECK(strcmp(sfv_last_error()->verb, fails[i][0]) == 0); /* the create's own failure, not the cleanup's */
        CHECK(fk_failed() && strcmp(fk_failed(), fails[i][1]) == 0);
        fk_fail_name(fails[i][0], 0);
        fk_fail_name(fails[i][1], 0);
        fk_fail_nth(0); /* (counts the calls from here) */
        CHECK_OK(sfv_close_device(ctx)); /* (the PD holds it) */
        CHECK_OK(sfv_dealloc_pd(pd));
        if (fk_live_total() != 0) FAIL("%s failed, %s refused: %ld fake objects left", fails[i][0], fails[i][1], fk_live_total());
        if (strcmp(fails[i][1], "ibv_destroy_srq") == 0 && tr_calls_of("ibv_destroy_srq") != 1)
            FAIL("%s failed, %s refused: the SRQ was not destroyed again", fails[i][0], fails[i][1]);
    }
}

static const harness_test TESTS[] = {
    TEST(t_create_srq_cleanup_refused, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
