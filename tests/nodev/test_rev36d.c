/* test_rev36d.c - hostile review 36d on the fake NIC: the waits (pending handles, deadlines,
   event mode) and the blocking calls. Both findings were sentences of the header that the
   behaviour did not keep (the behaviour was right, the sentences were fixed): each test pins
   the behaviour the corrected sentence states. */
#include "fake_env.h"

#include <limits.h>

static sfv_channel_desc r_desc(sfv_wait_mode mode, uint32_t timeout_ms) {
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    d.wait_mode = mode;
    d.timeout_ms = timeout_ms;
    return d;
}

/* Promise (>>channel, the blocking calls: "On SFV_ERR_TIMEOUT (or a wait that fails ...) the
   channel has flushed the work (and is broken), so the buffers are free again ... the
   SFV_ERR_DRIVERs differ in sfv_last_error()->verb"). The sentence named only ibv_poll_cq as a
   wait that fails, and "ibv_poll_cq" against "wait" as the two verbs; an SFV_WAIT_EVENT wait also
   fails when ibv_req_notify_cq (or poll(2)) does, with that verb and its errno's result, and the
   blocking call then flushes as for a failed poll: the buffers are free, the channel broken. */
static void t_event_blocking_arm_fails(void) {
    tf_env e;
    sfv_channel_desc d = r_desc(SFV_WAIT_EVENT, 2000);
    sfv_channel *a, *b;
    sfv_pending rx;
    sfv_work_completion wc;
    sfv_scatter_element s;
    sfv_gather_element g;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    s = sfv_mr_scatter_element(e.mr, e.buf, 8);
    g = sfv_mr_gather_element(e.mr, e.buf + 64, 8);
    /* a pending wait whose arm fails: that failure, the work still tracked (wait again) */
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &rx));
    fk_fail_name("ibv_req_notify_cq", 1);
    CHECK_RESULT(sfv_pending_wait(&rx, 100, &wc), SFV_ERR_DRIVER);
    CHECK(strcmp(sfv_last_error()->verb, "ibv_req_notify_cq") == 0);
    CHECK_EQ(wc.result, SFV_ERR_DRIVER);
    CHECK(!sfv_pending_done(&rx) && !sfv_channel_broken(a, NULL));
    CHECK_OK(sfv_channel_send(b, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, 100, &wc));
    CHECK_EQ(wc.byte_len, 8);
    /* a blocking call whose arm fails: that verb's failure, the work flushed, the channel broken */
    fk_fail_name("ibv_req_notify_cq", 1);
    CHECK_RESULT(sfv_channel_receive(a, &s, 1, &wc), SFV_ERR_DRIVER);
    CHECK(strcmp(sfv_last_error()->verb, "ibv_req_notify_cq") == 0);
    CHECK_EQ(wc.result, SFV_ERR_DRIVER);
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    CHECK(sfv_channel_broken(a, NULL));
    CHECK_EQ(sfv_channel_outstanding(a), 0); /* consumed: its buffer is free */
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* Promise (sfv_pending_wait: "0: one look, no sleep"; >>events: "the first wait (or
   sfv_channel_arm) that notices it moves its QP to the error state and flushes everything in
   flight"). A look (or any wait) that notices an event's break waits for the flush it starts,
   up to SFV__ABORT_DRAIN_NS (5 s; 0.3 s in these tests) on a NIC slow to flush, whatever its
   own timeout; the sentence said a look never waits. Both wait modes: the look ends with the
   work flushed (SFV_ERR_WORK, class FATAL), after the drain's time and not much more. */
static void t_look_waits_for_event_flush(void) {
    int m;
    for (m = 0; m < 2; m++) {
        tf_env e;
        sfv_channel_desc d = r_desc(m ? SFV_WAIT_EVENT : SFV_WAIT_BUSY, 5000);
        sfv_channel *a, *b;
        sfv_pending rx;
        sfv_work_completion wc;
        sfv_scatter_element s;
        sfv_event ev[2];
        size_t n;
        double t0, took;
        tf_open(&e, 4096);
        tf_pair(&e, &d, &a, &b);
        s = sfv_mr_scatter_element(e.mr, e.buf, 8);
        CHECK_OK(sfv_channel_post_receive(a, &s, 1, &rx));
        fk_set_no_flush(true);
        fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_QP_FATAL, sfv_channel_raw_qp(a), 0);
        CHECK_OK(sfv_context_events(e.ctx, ev, 2, &n)); /* read elsewhere: the look finds the break */
        CHECK_EQ(n, 1);
        t0 = test_seconds();
        CHECK_RESULT(sfv_pending_wait(&rx, 0, &wc), SFV_ERR_WORK);
        took = test_seconds() - t0;
        CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
        CHECK_EQ(wc.error_class, SFV_WORK_ERROR_FATAL);
        if (took < 0.25 || took > 2.0) FAIL("mode %d: the look took %.3f s, want the abort's drain (0.3 s)", m, took);
        fk_reset();
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        tf_close(&e);
    }
}

static const harness_test TESTS[] = {
    TEST(t_event_blocking_arm_fails, 20),
    TEST(t_look_waits_for_event_flush, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
