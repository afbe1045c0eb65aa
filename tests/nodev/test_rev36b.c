/* test_rev36b.c - hostile review 36b: injects, selective signalling and a channel's error state.
   t_reset_flushed_handle_not_inject failed on the header before its fix; t_inject_flush_after_reset
   pins the sentence of >>inject that was corrected (the behaviour was right, the doc was not). */
#include "fake_env.h"

#include <stdint.h>

/* Promise (>>inject: "a pending handle flushed by it names it too"; ERRORS: every failure has a
   matching sfv_last_error()). A send in flight (the peer posts no receive) is flushed by
   sfv_channel_reset, its handle not yet consumed; the channel is connected again and an inject
   on the NEW queue pair fails. The old handle, consumed then, said "flushed after inject #1
   (RDMA write, 8 B) failed: REM_ACCESS_ERR": an inject that ran after the reset had ended that
   send. It now says what ended it: the reset of the old queue pair. */
static void t_reset_flushed_handle_not_inject(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_gather_element g;
    sfv_pending h;
    sfv_work_completion wc;
    sfv_remote_mr bad;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    CHECK_OK(sfv_channel_post_send(a, &g, 1, &h)); /* b posts no receive: in flight (RNR) */
    CHECK_OK(sfv_channel_reset(a));                /* flushes it; the handle is not consumed yet */
    CHECK_OK(sfv_channel_reset(b));
    tf_connect(a, b);
    bad = tf_at(&e, 0);
    bad.rkey ^= 0x5555; /* no MR of b's: b refuses the write */
    CHECK_OK(sfv_channel_inject_write(a, "abcdefgh", 8, bad));
    CHECK_RESULT(sfv_channel_write(a, &g, 1, tf_at(&e, 1024), &wc), SFV_ERR_WORK); /* its wait polls the inject's failure */
    CHECK_MSG("flushed after inject #1 (RDMA write, 8 B) failed: REM_ACCESS_ERR"); /* work of the new QP: named */
    CHECK_RESULT(sfv_pending_wait(&h, 100, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    if (strstr(sfv_last_error()->message, "inject"))
        FAIL("a send the reset flushed is said flushed by an inject posted after the reset: %s", sfv_last_error()->message);
    CHECK_MSG("old queue pair");
    CHECK_RESULT(sfv_channel_post_send(a, &g, 1, &h), SFV_ERR_BROKEN); /* the new QP's refusals still name the inject */
    CHECK_MSG("inject #1 (RDMA write, 8 B) failed: REM_ACCESS_ERR");
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* Promise (>>inject, as corrected): a pending handle flushed by a failed inject names it when
   consumed before sfv_channel_reset; one consumed after the reset says that the old queue pair
   ended (the reset forgets the inject). The header said "a pending handle flushed by it names it
   too" with no such limit. */
static void t_inject_flush_after_reset(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_pending h1, h2, rx;
    sfv_remote_mr bad;
    sfv_gather_element g;
    sfv_scatter_element s;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    s = sfv_mr_scatter_element(e.mr, e.buf + 64, 8);
    bad = tf_at(&e, 0);
    bad.rkey ^= 0x5555;
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &rx));
    CHECK_OK(sfv_channel_inject_write(a, "abcdefgh", 8, bad)); /* fails: REM_ACCESS_ERR */
    CHECK_OK(sfv_channel_post_write(a, &g, 1, tf_at(&e, 1024), &h1)); /* flushed by it */
    CHECK_OK(sfv_channel_post_write(a, &g, 1, tf_at(&e, 1024), &h2)); /* flushed by it */
    CHECK_RESULT(sfv_pending_wait(&h1, 100, NULL), SFV_ERR_WORK); /* before the reset: named */
    CHECK_MSG("flushed after inject #1 (RDMA write, 8 B) failed: REM_ACCESS_ERR");
    CHECK_OK(sfv_channel_reset(a));
    CHECK_RESULT(sfv_pending_wait(&h2, 100, NULL), SFV_ERR_WORK); /* after it: the old queue pair */
    CHECK_MSG("old queue pair");
    CHECK_RESULT(sfv_pending_wait(&rx, 100, NULL), SFV_ERR_WORK);
    CHECK_MSG("old queue pair");
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_reset_flushed_handle_not_inject, 20),
    TEST(t_inject_flush_after_reset, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
