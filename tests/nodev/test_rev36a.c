/* test_rev36a.c - hostile review 36a of scopes on the fake NIC (sfv_channel_scope and its kinds,
   unsignaled posts and the scope's fence, nested scopes, what fn and on_wc may call): each test
   failed on the header at tag base, before its fix. Broken contracts are counted, not fatal:
   a program may define SFV_ASSERT so (test_assert_returns.c), and the call then still keeps
   every promise it can. */
static int asserts; /* contracts broken so far */
#define SFV_ASSERT(c)        \
    do {                     \
        if (!(c)) asserts++; \
    } while (0)
#include "fake_env.h"

/* ---- a nested scope fences only its own unsignaled work ---- */
/* Promise (>>scopes): "a scope waits only for what was posted from the moment it opened, and
   leaves older work in flight as it was"; the fence: "if the last work THE SCOPE leaves on the
   send queue is unsignaled, the scope posts a signaled zero-length RDMA write". An inner
   sfv_channel_scope that posted nothing, opened right after the outer scope's unsignaled send,
   posted the fence for the outer scope's send and waited for it: the peer had no receive posted
   yet (RNR, retried), so the inner scope waited out its deadline, flushed the channel (the
   outer scope's send lost) and returned SFV_ERR_SCOPE_AUTOPOLL for work it never posted. (A
   manual inner scope leaves the fence to the scope around it already.) Now a scope fences only
   unsignaled work posted inside it; the outer scope fences its own, after fn posted the
   receive the send needs. */
typedef struct r36_nest {
    tf_env *e;
    sfv_channel *b;
    sfv_pending rx;
    sfv_result inner;
    sfv_scope_report rep;
    double secs;
} r36_nest;
static sfv_result r36_nothing(sfv_channel *ch, void *user) {
    (void)ch, (void)user;
    return SFV_OK;
}
static sfv_result r36_outer_unsignaled(sfv_channel *ch, void *user) {
    r36_nest *t = (r36_nest *)user;
    const sfv_gather_element g = sfv_mr_gather_element(t->e->mr, t->e->buf, 8);
    const sfv_scatter_element s = sfv_mr_scatter_element(t->e->mr, t->e->buf + 2048, 64);
    double t0;
    sfv_result r = sfv_channel_post_send_unsignaled(ch, &g, 1); /* b has no receive yet: it waits (RNR) */
    if (r) return r;
    t0 = test_seconds();
    t->inner = sfv_channel_scope(ch, r36_nothing, NULL, &t->rep);
    t->secs = test_seconds() - t0;
    return sfv_channel_post_receive(t->b, &s, 1, &t->rx); /* now the send can land */
}
static void t_nested_scope_fences_only_its_own(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scope_report rep;
    r36_nest t;
    sfv_result r;
    memset(&d, 0, sizeof d);
    d.timeout_ms = 3000;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    memset(&t, 0, sizeof t);
    t.e = &e;
    t.b = b;
    r = sfv_channel_scope(a, r36_outer_unsignaled, &t, &rep);
    if (t.inner != SFV_OK)
        FAIL("the inner scope, which posted nothing, returned %s after %.2f s (auto_polled %zu, failed %zu)", sfv_result_str(t.inner), t.secs,
             t.rep.auto_polled, t.rep.failed);
    CHECK_EQ(t.rep.auto_polled, 0);
    CHECK_EQ(t.rep.failed, 0);
    CHECK(t.secs < 1.0); /* not the deadline (3 s; a loaded machine can stall a call for a while) */
    if (r != SFV_OK) FAIL("the outer scope returned %s (failed %zu): %s", sfv_result_str(r), rep.failed, sfv_last_error()->message);
    CHECK_EQ(rep.failed, 0);
    CHECK_OK(sfv_pending_wait(&t.rx, 1000, NULL)); /* the outer scope's send arrived */
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* ---- a manual scope never succeeds over work fn left ---- */
/* Promise (top of the header): every failure is an sfv_result; a broken contract goes through
   SFV_ASSERT, and where a program's SFV_ASSERT returns, the call keeps every promise it can
   ("never a success", test_assert_returns.c). A manual scope whose fn returned SFV_OK but left a
   write unconsumed (a broken contract), a write the peer refused (REM_ACCESS_ERR, the channel
   broken), drained it, reported the contract, and returned SFV_OK with no last error: the
   caller saw success for work that failed. Now it returns SFV_ERR_INVALID, saying how many
   work requests fn left and how many of them failed. */
static sfv_result r36_leave_bad_write(sfv_channel *ch, void *user) {
    static sfv_pending p; /* left unconsumed: the broken contract */
    const tf_env *e = (const tf_env *)user;
    const sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf, 8);
    return sfv_channel_post_write(ch, &g, 1, sfv_remote_mr_make(sfv_mr_addr(e->mr) + 64, 8, sfv_mr_rkey(e->mr) + 99), &p); /* no such key */
}
static void t_manual_scope_left_work_not_ok(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    int before;
    memset(&d, 0, sizeof d);
    d.timeout_ms = 300;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    before = asserts;
    CHECK_RESULT(sfv_channel_manual_scope(a, r36_leave_bad_write, &e), SFV_ERR_INVALID);
    CHECK_EQ(asserts, before + 1);
    CHECK_MSG("left 1 work request(s) unconsumed");
    CHECK_MSG("1 of them failed");
    CHECK_EQ(sfv_channel_outstanding(a), 0); /* drained all the same */
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* ---- on_wc and work the channel could not stop ---- */
/* Promise (sfv_channel_scope_wc): "The work's buffers are free when on_wc runs." Not for work
   the channel could not stop (the NIC flushes nothing, the queue pair's destroy is refused): the
   scope hands it to on_wc all the same, its buffers still the NIC's. The behaviour is right (the
   completion says SFV_ERR_DRIVER, the last error in on_wc names the wait and says the buffers
   are the NIC's, the scope's verdict too); the sentence was false, and now names the exception.
   This test pins the behaviour the corrected sentence states (it passes at tag base too: the
   fix is to the words only). */
typedef struct r36_stuck { int n; sfv_result result; char verb[32]; int says_nic; } r36_stuck;
static void r36_stuck_wc(const sfv_work_completion *wc, void *user) {
    r36_stuck *t = (r36_stuck *)user;
    if (t->n++ == 0) {
        t->result = wc->result;
        snprintf(t->verb, sizeof t->verb, "%s", sfv_last_error()->verb);
        t->says_nic = strstr(sfv_last_error()->message, "still the NIC's") != NULL;
    }
}
static sfv_result r36_send_unmatched(sfv_channel *ch, void *user) {
    const tf_env *e = (const tf_env *)user;
    const sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf, 8);
    return sfv_channel_post_send(ch, &g, 1, NULL); /* the peer posts no receive: never done */
}
static void t_on_wc_stuck_buffers_said(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scope_report rep;
    r36_stuck t;
    memset(&d, 0, sizeof d);
    d.timeout_ms = 50;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    memset(&t, 0, sizeof t);
    fk_set_no_flush(true);
    fk_fail_name("ibv_destroy_qp", 1000);
    CHECK_RESULT(sfv_channel_scope_wc(a, r36_send_unmatched, &e, r36_stuck_wc, &t, &rep), SFV_ERR_SCOPE_AUTOPOLL);
    CHECK_EQ(t.n, 1);
    CHECK_RESULT(t.result, SFV_ERR_DRIVER);
    CHECK(strcmp(t.verb, "wait") == 0); /* (a failed poll's SFV_ERR_DRIVER, whose work was flushed, names ibv_poll_cq) */
    CHECK(t.says_nic);
    CHECK_MSG("still the NIC's"); /* the scope's verdict */
    fk_reset(); /* the NIC flushes again, and the destroy is taken */
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_nested_scope_fences_only_its_own, 20),
    TEST(t_manual_scope_left_work_not_ok, 20),
    TEST(t_on_wc_stuck_buffers_said, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
