/* test_rev34a.c - hostile review of session 26's changes on the fake NIC: each test failed on
   the header before its fix. */
#include "fake_env.h"

#include <limits.h>

/* "No size or offset sum anywhere may wrap ... a function whose unsigned arithmetic wraps on
   purpose is marked SFV__WRAPS" (>>impl locks' ticket counters): a context's event lock, and the
   list of contexts' lock, turn once per taking; after 2^32 turns the counters go round. That
   must work (the turn after UINT_MAX is 0), and, as the wrap is on purpose, not trip clang's
   unsigned-integer-overflow sanitizer (build/nodev/uio/test_rev34a): it did, in
   sfv__spin_leave's serving + 1. */
static void t_ticket_lock_wraps(void) {
    tf_env e;
    sfv_event ev[4];
    size_t n = 9;
    tf_open(&e, 4096);
    /* the counters at their last value: the next turn wraps */
    e.ctx->ev_lock.next = e.ctx->ev_lock.serving = UINT_MAX;
    sfv__contexts_lock.next = sfv__contexts_lock.serving = UINT_MAX;
    CHECK_OK(sfv_context_events(e.ctx, ev, COUNT_OF(ev), &n));
    CHECK_EQ(n, 0);
    CHECK_OK(sfv_context_events(e.ctx, ev, COUNT_OF(ev), &n)); /* and the lock still turns */
    CHECK(e.ctx->ev_lock.next == e.ctx->ev_lock.serving);
    {   /* the contexts' lock: a second context is listed under it, and unlisted */
        sfv_context *c2;
        CHECK_OK(sfv_open_device(NULL, &c2));
        CHECK_OK(sfv_close_device(c2));
    }
    CHECK(sfv__contexts_lock.next == sfv__contexts_lock.serving);
    tf_close(&e);
}


/* Promise (>>batches: a send batch taken in part that the channel could not stop is
   SFV_ERR_DRIVER, "saying its buffers are still the NIC's"; session 26 made every such message
   name what to destroy, sfv__stuck_destroy, as sfv_destroy_channel refuses a multi-channel's
   channel). A batch on a multi-channel's channel, taken in part, whose flush the NIC never does
   and whose QP's destroy is refused, said "destroy the channel": the call that is refused. */
static void t_mc_batch_stuck_names_mc(void) {
    tf_env e;
    sfv_multi_channel *m1, *m2;
    sfv_gather_element g[3];
    sfv_pending p;
    int i;
    tf_open(&e, 4096);
    tf_mc_pair(&e, 50, &m1, &m2);
    for (i = 0; i < 3; i++) g[i] = sfv_mr_gather_element(e.mr, e.buf + 8 * i, 8);
    fk_set_no_flush(true);
    fk_fail_name("ibv_destroy_qp", 1000);
    fk_set_partial_post(1); /* the verb takes one of the three, then fails */
    fk_fail_name("ibv_post_send", 2); /* and then the abort's signaled mark, which would end it */
    CHECK_RESULT(sfv_channel_post_send_batch(sfv_multi_channel_peer(m1, 0), g, 1, 3, &p), SFV_ERR_DRIVER);
    CHECK_MSG("still the NIC's");
    CHECK_MSG("destroy the multi-channel");
    CHECK_RESULT(sfv_destroy_channel(sfv_multi_channel_peer(m1, 0)), SFV_ERR_INVALID); /* what the message said before */
    fk_reset();
    CHECK_OK(sfv_destroy_multi_channel(m1)); /* the verbs work again: the destroy stops it */
    CHECK_OK(sfv_destroy_multi_channel(m2));
    tf_close(&e);
}

/* Promise ("no size or offset arithmetic wraps", which the uio build enforces; session 26
   rewrote the batch count test `count - 1 < SFV_BATCH_MAX` as bounds). The request batches
   (sfv_channel_post_sends, _writes, _reads) kept it: a count of 0, which they refuse
   (SFV_ERR_INVALID), wrapped 0 - 1 before the refusal (build/nodev/uio/test_rev34a). The plain
   batches alongside, which the rewrite fixed. */
static void t_request_batch_count_zero(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_gather_element g;
    sfv_scatter_element s;
    sfv_send_request sr;
    sfv_write_request wr;
    sfv_read_request rr;
    sfv_pending p;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    s = sfv_mr_scatter_element(e.mr, e.buf + 64, 8);
    memset(&sr, 0, sizeof sr);
    sr.sges = &g;
    sr.n = 1;
    memset(&wr, 0, sizeof wr);
    wr.sges = &g;
    wr.n = 1;
    wr.remote = tf_at(&e, 128);
    memset(&rr, 0, sizeof rr);
    rr.sges = &s;
    rr.n = 1;
    rr.remote = tf_at(&e, 128);
    CHECK_RESULT(sfv_channel_post_sends(a, &sr, 0, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_writes(a, &wr, 0, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_reads(a, &rr, 0, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_send_batch(a, &g, 1, 0, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_receive_batch(b, &s, 1, 0, &p), SFV_ERR_INVALID);
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_ticket_lock_wraps, 10),
    TEST(t_mc_batch_stuck_names_mc, 20),
    TEST(t_request_batch_count_zero, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
