/* test_rev30d.c - hostile review 30d on the fake NIC: handles' lifetimes, teardown order and
   thread safety. (Its bug, a DMA-BUF MR deregistered while another thread posts, was found by
   30a too: test_rev30a's t_dmabuf_dereg_beside_post.) t_destroy_refused_ends_leases checks a doc
   sentence corrected by the review; t_sweep_srq is a failure sweep of the create calls
   test_sweep.c does not reach (an SRQ with a limit, a channel on it, a lease), which found nothing. */
#include "fake_env.h"
#include <unistd.h>

/* ---- a failure sweep: an SRQ, a channel on it, a lease ---- */
/* Every create "set[s] their out-parameters to NULL/zero on failure", with a matching
   sfv_last_error(), and leaves nothing behind: each call of the scenario (verbs and allocations)
   fails in turn; the public call that met it fails naming it, and after the teardown the fake
   holds no object and no memory window (ASan: no leak). */
static long g_k;
static bool g_hit;
#define STEP(call) step_(#call, __LINE__, (call))
static bool step_(const char *what, int line, sfv_result r) {
    const bool hit = fk_failed() != NULL && !g_hit;
    if (r == SFV_OK) {
        if (hit) { g_hit = true; } /* absorbed */
        return true;
    }
    if (!hit) FAIL("k=%ld line %d: %s -> %s without a fault (%s)", g_k, line, what, sfv_result_str(r), sfv_last_error()->message);
    g_hit = true;
    if (strcmp(sfv_last_error()->verb, fk_failed()) != 0 && !strstr(sfv_last_error()->message, fk_failed()))
        FAIL("k=%ld line %d: %s failed by %s but the last error names %s: %s", g_k, line, what, fk_failed(), sfv_last_error()->verb, sfv_last_error()->message);
    return false;
}

static void sc_srq(void) {
    sfv_context *ctx = NULL; sfv_pd *pd = NULL; sfv_mr *mr = NULL; sfv_srq *srq = NULL;
    sfv_channel *a = NULL, *b = NULL; sfv_lease *l = NULL;
    static unsigned char buf[8192];
    sfv_srq_desc sd; sfv_channel_desc d;
    sfv_pending rx;
    memset(&sd, 0, sizeof sd); sd.limit = 4;
    memset(&d, 0, sizeof d);
    if (!STEP(sfv_open_device(NULL, &ctx))) goto out;
    if (!STEP(sfv_alloc_pd(ctx, &pd))) goto out;
    if (!STEP(sfv_reg_mr_access(pd, buf, sizeof buf, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_MW_BIND, &mr))) goto out;
    if (!STEP(sfv_create_srq(pd, &sd, &srq))) goto out;
    d.srq = srq;
    if (!STEP(sfv_create_channel(pd, &d, &a))) goto out;
    d.srq = NULL;
    if (!STEP(sfv_create_channel(pd, &d, &b))) goto out;
    {
        sfv_scatter_element s = sfv_mr_scatter_element(mr, buf, 64);
        if (!STEP(sfv_srq_post_receive(srq, &s, 1, &rx))) goto out;
    }
    {
        sfv_endpoint ea, eb;
        if (!STEP(sfv_channel_endpoint(a, &ea))) goto out;
        if (!STEP(sfv_channel_endpoint(b, &eb))) goto out;
        if (!STEP(sfv_channel_handshake(a, &eb))) goto out;
        if (!STEP(sfv_channel_handshake(b, &ea))) goto out;
    }
    if (!STEP(sfv_lease_grant(a, mr, 0, 128, SFV_ACCESS_REMOTE_WRITE, &l))) goto out;
out:
    fk_fail_nth(0);
    if (l) CHECK_OK(sfv_lease_revoke(l));
    if (srq) CHECK_OK(sfv_destroy_srq(srq));
    if (sfv_destroy_channel(a) != SFV_OK) CHECK_OK(sfv_destroy_channel(a));
    if (sfv_destroy_channel(b) != SFV_OK) CHECK_OK(sfv_destroy_channel(b));
    if (sfv_dereg_mr(mr) != SFV_OK) CHECK_OK(sfv_dereg_mr(mr));
    if (sfv_dealloc_pd(pd) != SFV_OK) CHECK_OK(sfv_dealloc_pd(pd));
    if (sfv_close_device(ctx) != SFV_OK) CHECK_OK(sfv_close_device(ctx));
    if (fk_live_total() != 0 || fk_mw_count() != 0) FAIL("k=%ld (%s): %ld live, %ld mws", g_k, fk_failed() ? fk_failed() : "-", fk_live_total(), fk_mw_count());
}

static void sweep(void (*sc)(void), void (*setup)(void)) {
    for (g_k = 1; g_k < 2000; g_k++) {
        fk_reset();
        if (setup) setup();
        g_hit = false;
        fk_fail_nth(g_k);
        sc();
        if (!g_hit && !fk_failed()) break;
    }
    printf("  %ld sites\n", g_k);
}
static void mw_on(void) { fk_set_mw(true); }
static void t_sweep_srq(void) { sweep(sc_srq, mw_on); }


/* ---- a channel's destroy refused, and its leases ---- */
/* sfv_destroy_channel said "nothing is freed if the queue pair's destroy refused", the channel
   "stays valid". Its leases' windows are deallocated before the queue pair's destroy (a window
   bound to the QP holds it: >>leases), so a refused destroy has ended them already: the peer's
   access through a lease fails from then on, though the channel still works and its leases are
   still to be revoked. The sentence says so now; this checks what it says. */
static void t_destroy_refused_ends_leases(void) {
    tf_env e;
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_channel *a, *b;
    sfv_lease *l;
    sfv_gather_element g;
    sfv_scatter_element s;
    sfv_pending rx;
    sfv_work_completion wc;
    static unsigned char buf[4096];
    memset(&e, 0, sizeof e);
    fk_set_mw(true);
    CHECK_OK(sfv_open_device(NULL, &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    CHECK_OK(sfv_reg_mr_access(pd, buf, sizeof buf, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_MW_BIND, &mr));
    e.pd = pd;
    tf_pair(&e, NULL, &a, &b);
    CHECK_OK(sfv_lease_grant(a, mr, 0, 256, SFV_ACCESS_REMOTE_WRITE, &l));
    g = sfv_mr_gather_element(mr, buf + 1024, 8);
    CHECK_OK(sfv_channel_write(b, &g, 1, sfv_lease_remote(l), NULL)); /* the lease works */
    fk_fail_name("ibv_destroy_qp", 1);
    CHECK_RESULT(sfv_destroy_channel(a), SFV_ERR_DRIVER);
    s = sfv_mr_scatter_element(mr, buf + 2048, 8); /* the channel still works ... */
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &rx));
    CHECK_OK(sfv_channel_send(b, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    /* ... but its lease is over: the peer's write through it is refused */
    CHECK_RESULT(sfv_channel_write(b, &g, 1, sfv_lease_remote(l), &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_REM_ACCESS_ERR);
    CHECK_EQ(fk_mw_count(), 0);
    CHECK_OK(sfv_lease_revoke(l));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dereg_mr(mr));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    CHECK_EQ(fk_live_total(), 0);
}

static const harness_test TESTS[] = {
    TEST(t_destroy_refused_ends_leases, 10),
    TEST(t_sweep_srq, 60),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
