/* test_rev31e.c - hostile review 31e on the fake NIC: scopes and injects, a second look. Each test
   failed on the header at tag base. */
#include "fake_env.h"

/* ---- a scope whose fn failed, and whose drain could not stop the work fn left ---- */
/* Promise (>>channel, blocking calls: "only if the channel could not stop it (it was not flushed,
   and destroying the queue pair was refused) is the result SFV_ERR_DRIVER instead, saying the
   buffers are still the NIC's ... A scope's and a many-peer call's deadline end the same way").
   A scope's fn that failed with work left in flight on a NIC that never flushes, whose queue
   pair's destroy is refused: sfv_channel_scope said SFV_ERR_SCOPE_FN with fn's message only, and
   sfv_channel_manual_scope (which has no report) returned fn's own result, so the caller took
   back buffers the NIC could still read or write. Now the manual scope says SFV_ERR_DRIVER, and
   both messages say the buffers are still the NIC's. */
typedef struct tr_left { tf_env *e; int n; } tr_left;
static sfv_result tr_left_fn(sfv_channel *ch, void *user) {
    tr_left *u = (tr_left *)user;
    sfv_gather_element g = sfv_mr_gather_element(u->e->mr, u->e->buf, 8);
    sfv_pending p[4];
    int i;
    for (i = 0; i < u->n && i < 4; i++) /* the peer posts no receive: never done */
        if (sfv_channel_post_send(ch, &g, 1, &p[i]) != SFV_OK) return SFV_ERR_DRIVER;
    return sfv__fail(SFV_ERR_INVALID, EINVAL, "fn", "fn gives up"); /* its handles left to the scope */
}
static void tr_stuck_pair(tf_env *e, sfv_channel **a, sfv_channel **b) {
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    d.timeout_ms = 50;
    tf_pair(e, &d, a, b);
    fk_set_no_flush(true);
    fk_fail_name("ibv_destroy_qp", 1000);
}
static void t_scope_fn_failed_stuck(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_scope_report rep;
    tr_left u;
    tf_open(&e, 4096);
    u.e = &e;
    u.n = 4;
    /* manual: no report, so the result must say it */
    tr_stuck_pair(&e, &a, &b);
    CHECK_RESULT(sfv_channel_manual_scope(a, tr_left_fn, &u), SFV_ERR_DRIVER);
    CHECK_MSG("still the NIC's");
    CHECK_MSG("fn gives up");
    fk_reset();
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* automatic: fn's failure, and the message says the buffers are the NIC's */
    tr_stuck_pair(&e, &a, &b);
    CHECK_RESULT(sfv_channel_scope(a, tr_left_fn, &u, &rep), SFV_ERR_SCOPE_FN);
    CHECK_RESULT(rep.fn_result, SFV_ERR_INVALID);
    CHECK_RESULT(rep.first_error.result, SFV_ERR_DRIVER);
    CHECK_MSG("still the NIC's");
    CHECK_MSG("fn gives up");
    fk_reset();
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* a drain that stops the work (the NIC flushes): fn's own result, as before */
    tr_stuck_pair(&e, &a, &b);
    fk_reset();
    CHECK_RESULT(sfv_channel_manual_scope(a, tr_left_fn, &u), SFV_ERR_INVALID);
    CHECK_MSG("fn gives up");
    CHECK(strstr(sfv_last_error()->message, "NIC's") == NULL);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* ---- on_wc waiting for work already done ---- */
/* Promise (>>scopes, sfv_channel_scope_wc: on_wc may not "wait for work of it that has not
   completed (a poll, or a wait on work already done, still works)"). fn posts 40 sends with
   handles, all delivered (the peer has receives), and leaves them to the scope. on_wc, at the
   first completion, waits (a look, timeout 0) for the last send: done, but its completion lay in
   the CQ behind more than one poll's worth (16) of others, which the scope had not read yet; the
   wait was refused as "unfinished work", though the same wait outside a scope reads the CQ to its
   end and finds it. Now it is taken (and the scope does not hand it to on_wc again). */
typedef struct tr_done { tf_env *e; sfv_pending h[40]; int calls; sfv_result wait_last, wait_all; sfv_work_completion wc; } tr_done;
static sfv_result tr_done_fn(sfv_channel *ch, void *user) {
    tr_done *u = (tr_done *)user;
    sfv_gather_element g = sfv_mr_gather_element(u->e->mr, u->e->buf, 8);
    int i;
    for (i = 0; i < 40; i++)
        if (sfv_channel_post_send(ch, &g, 1, &u->h[i]) != SFV_OK) return SFV_ERR_DRIVER;
    return SFV_OK;
}
static void tr_done_cb(const sfv_work_completion *wc, void *user) {
    tr_done *u = (tr_done *)user;
    (void)wc;
    if (u->calls++ == 0) {
        u->wait_last = sfv_pending_wait(&u->h[39], 0, &u->wc);
        u->wait_all = sfv_pending_wait_all(&u->h[30], 2, -1, NULL); /* (with the channel's timeout: done, so no wait) */
    }
}
static void t_on_wc_waits_done_work(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_pending rx[40];
    sfv_scatter_element s;
    sfv_scope_report rep;
    tr_done u;
    int i;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    for (i = 0; i < 40; i++) {
        s = sfv_mr_scatter_element(e.mr, e.buf + 256 + 8 * i, 8);
        CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx[i]));
    }
    memset(&u, 0, sizeof u);
    u.e = &e;
    CHECK_OK(sfv_channel_scope_wc(a, tr_done_fn, &u, tr_done_cb, &u, &rep));
    CHECK_RESULT(u.wait_last, SFV_OK);
    CHECK_RESULT(u.wc.result, SFV_OK);
    CHECK(u.wc.opcode == SFV_WC_OP_SEND);
    CHECK_RESULT(u.wait_all, SFV_OK);
    CHECK_EQ(u.calls, 37); /* the three on_wc took are not handed to it again */
    CHECK_EQ(rep.auto_polled, 37);
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    CHECK(sfv_pending_done(&u.h[39]));
    CHECK_OK(sfv_pending_wait_all(rx, 40, 1000, NULL)); /* (work still in flight is refused as before: test_review.c t_on_wc_cannot_post_or_wait) */
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_scope_fn_failed_stuck, 30),
    TEST(t_on_wc_waits_done_work, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
