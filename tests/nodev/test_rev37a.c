/* test_rev37a.c - hostile review 37a on the fake NIC: session 27's changes (a context, PD or SRQ
   released once, SFV__DROP_ONCE; rc_pingpong's options). Each test failed at tag base, before
   its fix. Broken contracts are counted, not fatal: a program may define SFV_ASSERT so
   (test_assert_returns.c), and a release refused as a second one is then seen as a count. */
static int asserts; /* contracts broken so far */
#define SFV_ASSERT(c)        \
    do {                     \
        if (!(c)) asserts++; \
    } while (0)
#include "fake_env.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>

#define main rc_pingpong_main
#include "../../examples/rc_pingpong.c"
#undef main

/* ---- a PD's orphans, refused again ---- */
/* Promise (LIFETIME: "Every release returns sfv_result: one the verb refuses ... keeps the
   object, and the caller's reference, so the call can be repeated"; sfv_dealloc_pd: what a
   failed call could not take apart "goes once their destroy is taken"; no leak). A channel
   create that failed at INIT left its QP to the PD (ibv_destroy_qp refused); sfv_dealloc_pd's
   retry was refused again: the call said SFV_OK, dropped the caller's reference, and nothing
   ever retried the QP again, so the QP, its CQ, the PD and the device stayed for good (and,
   since session 27, the one way left to retry, sfv_dealloc_pd again, is a release twice:
   SFV_ASSERT, SFV_ERR_INVALID). Now the refusal fails the call, naming the verb, and keeps the
   caller's reference: the call repeated frees everything. */
static void t_dealloc_pd_orphan_refused_again(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_channel *ch = NULL;
    int before;
    fk_reset();
    CHECK_OK(sfv_open_device(NULL, &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    fk_fail_name("ibv_modify_qp", 1);  /* the create fails at INIT ... */
    fk_fail_name("ibv_destroy_qp", 3); /* ... its QP refuses to go (twice in the create), and once more in the dealloc */
    CHECK(sfv_create_channel(pd, NULL, &ch) != SFV_OK);
    CHECK(ch == NULL);
    CHECK_EQ(fk_live(FK_QP), 1); /* left to the PD */
    before = asserts;
    CHECK_RESULT(sfv_dealloc_pd(pd), SFV_ERR_DRIVER); /* was SFV_OK, the QP, CQ, PD and device kept for good */
    CHECK(strcmp(sfv_last_error()->verb, "ibv_destroy_qp") == 0);
    CHECK(strstr(sfv_last_error()->message, "call sfv_dealloc_pd again") != NULL);
    fk_reset(); /* the verb takes it now */
    CHECK_OK(sfv_close_device(ctx)); /* (the PD holds it) */
    CHECK_OK(sfv_dealloc_pd(pd));    /* the caller's reference, kept: not a release twice */
    CHECK_EQ(asserts, before);
    CHECK_EQ(fk_live_total(), 0);
}

/* ---- a parent kept quietly ---- */
/* Promise (LIFETIME: a parent released by its last child's destroy "is kept quietly if its own
   verb refuses"; "a context, PD or SRQ released again WHILE ITS CHILDREN KEEP IT ALIVE is a
   broken contract"). A PD whose last child (an MR) released it, its ibv_dealloc_pd refused, and
   a context whose last child (a CQ) released it, its ibv_close_device refused, are alive with
   no child: releasing them again took them back (test_review's t_quiet_parent_keeps_last_error
   does so). Session 27's release-once flag stayed set on them, so that release was refused as
   a release twice (SFV_ASSERT, which aborts by default: test_review failed at tag base), and
   nothing could ever free them. Now the kept reference is the caller's again. */
static void t_quiet_parent_released_again(void) {
    tf_env e;
    sfv_cq *cq;
    int before = asserts;
    tf_open(&e, 4096);
    CHECK_OK(sfv_create_cq(e.ctx, 16, &cq));
    CHECK_OK(sfv_dealloc_pd(e.pd));    /* the caller's: the MR keeps it */
    CHECK_OK(sfv_close_device(e.ctx)); /* the caller's: the PD and the CQ keep it */
    fk_fail_name("ibv_dealloc_pd", 1);
    CHECK_OK(sfv_dereg_mr(e.mr)); /* the PD's last reference: kept quietly */
    CHECK_EQ(fk_live(FK_PD), 1);
    CHECK_OK(sfv_dealloc_pd(e.pd)); /* was SFV_ERR_INVALID, "released already", and SFV_ASSERT */
    CHECK_EQ(fk_live(FK_PD), 0);
    fk_fail_name("ibv_close_device", 1);
    CHECK_OK(sfv_destroy_cq(cq)); /* the context's last reference: kept quietly */
    CHECK_EQ(fk_live(FK_CONTEXT), 1);
    CHECK_OK(sfv_close_device(e.ctx)); /* (the same) */
    CHECK_EQ(asserts, before);
    fk_reset();
    free(e.buf);
    CHECK_EQ(fk_live_total(), 0);
}

/* ---- rc_pingpong's options ---- */
#include "run_example.h"
/* rc_pingpong with args (NULL-terminated), at most limit_s seconds (run_example) */
static int r37_run(const char *const *args, unsigned limit_s) { return run_example(rc_pingpong_main, args, limit_s); }

/* Promise (examples/rc_pingpong.c: its options are ibv_rc_pingpong's, refusing only verbs
   safeverbs does not offer). ibv_rc_pingpong's -g is -1 by default and takes -1 (no index
   given); rc_pingpong refused -g -1 as a usage error (exit 2). Now -1 is its default too, the
   channel's choice: the options pass, and the run stops only at the device (none named so:
   exit 1). The numbers are read as ibv_rc_pingpong's strtol(..., 0) reads them, octal with a
   leading 0 included (-s 010 is 8: the header comment said decimal or 0x hex only, now fixed;
   this part passed at base too), and "09" is no number. */
static void t_rc_pingpong_gid_minus_one(void) {
    static const char *const gid[] = {"rc_pingpong", "-d", "no-such-dev", "-g", "-1", NULL};
    static const char *const gid_long[] = {"rc_pingpong", "-d", "no-such-dev", "--gid-idx=-1", NULL};
    static const char *const gid_under[] = {"rc_pingpong", "-d", "no-such-dev", "-g", "-2", NULL};
    static const char *const octal[] = {"rc_pingpong", "-d", "no-such-dev", "-s", "010", NULL};
    static const char *const not_octal[] = {"rc_pingpong", "-d", "no-such-dev", "-s", "09", NULL};
    int rc;
    if ((rc = r37_run(gid, 5)) != 1) FAIL("rc_pingpong -g -1: exit %d, want 1 (options taken, no such device)", rc);
    if ((rc = r37_run(gid_long, 5)) != 1) FAIL("rc_pingpong --gid-idx=-1: exit %d, want 1", rc);
    if ((rc = r37_run(gid_under, 5)) != 2) FAIL("rc_pingpong -g -2: exit %d, want the usage's 2", rc);
    if ((rc = r37_run(octal, 5)) != 1) FAIL("rc_pingpong -s 010: exit %d, want 1 (options taken)", rc);
    if ((rc = r37_run(not_octal, 5)) != 2) FAIL("rc_pingpong -s 09: exit %d, want the usage's 2", rc);
}

static const harness_test TESTS[] = {
    TEST(t_dealloc_pd_orphan_refused_again, 10),
    TEST(t_quiet_parent_released_again, 10),
    TEST(t_rc_pingpong_gid_minus_one, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
