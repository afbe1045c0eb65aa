/* test_rev28d.c - hostile review 28d on the fake NIC: scopes and pending handles under misuse.
   Each test failed on the header before its fix. */
#include "fake_env.h"

/* ---- a scope whose work the channel cannot stop ---- */
/* Promise (>>channel, blocking calls, "A scope's and a many-peer call's deadline end the same
   way"): after a deadline the flush may add up to 5 s, after which the QP is destroyed; where
   nothing stops the work (not flushed, the destroy refused) the result says the buffers are still
   the NIC's. A scope whose deadline passed with work the NIC never flushes and whose QP's destroy
   is refused aborted the channel again for every work request it still had, each abort waiting
   out its whole drain (5 s; 0.3 s here): 16 sends took 16 drains past the deadline, a full queue
   more than ten minutes. And its verdict said "the channel flushed its work" of buffers that were
   still the NIC's. Now: one drain, and the message says the buffers are the NIC's. */
typedef struct tr_sends { tf_env *e; int n; } tr_sends;
static sfv_result tr_sends_fn(sfv_channel *ch, void *user) {
    tr_sends *u = (tr_sends *)user;
    sfv_gather_element g = sfv_mr_gather_element(u->e->mr, u->e->buf, 8);
    int i;
    for (i = 0; i < u->n; i++) {
        const sfv_result r = sfv_channel_post_send(ch, &g, 1, NULL); /* the peer posts no receive: never done */
        if (r) return r;
    }
    return SFV_OK;
}
static void t_scope_stuck_one_drain(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_scope_report rep;
    tr_sends u;
    double t0, took;
    memset(&d, 0, sizeof d);
    d.timeout_ms = 50;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    u.e = &e;
    u.n = 16;
    fk_set_no_flush(true);
    fk_fail_name("ibv_destroy_qp", 1000);
    t0 = test_seconds();
    CHECK_RESULT(sfv_channel_scope(a, tr_sends_fn, &u, &rep), SFV_ERR_SCOPE_AUTOPOLL);
    took = test_seconds() - t0;
    if (took > 1.5) FAIL("the scope took %.2f s: its deadline (0.05 s) and one drain (0.3 s) only", took);
    CHECK_EQ(rep.failed, 16);
    CHECK_RESULT(rep.first_error.result, SFV_ERR_DRIVER);
    CHECK_MSG("still the NIC's");
    CHECK(strstr(sfv_last_error()->message, "flushed its work") == NULL);
    fk_reset(); /* the NIC flushes again, and the destroy is taken */
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_scope_stuck_one_drain, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
