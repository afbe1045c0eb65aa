/* test_rev32d.c - hostile review 32d on the fake NIC: wait modes, completion channels and the
   blocking waits. Each test failed on the header before its fix. */
#include "fake_env.h"

#include <limits.h>
#include <poll.h>

static sfv_channel_desc r_desc(sfv_wait_mode mode, uint32_t timeout_ms) {
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    d.wait_mode = mode;
    d.timeout_ms = timeout_ms;
    return d;
}
static int r_readable(int fd, int ms) {
    struct pollfd pfd;
    pfd.fd = fd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    return poll(&pfd, 1, ms) > 0;
}

/* Promise (sfv_channel_fd): "In your own event loop, keep this order ... (1) sfv_channel_arm,
   (2) poll every pending handle you wait for (sfv_pending_poll) and handle what is done, (3)
   only if none was done, sleep in poll/epoll on the fd ... The channel's own waits do exactly
   this"; >>events: "in your own event loop, watch sfv_context_event_fd beside sfv_channel_fd",
   and "the first wait that notices [the break] ... flushes everything in flight: every pending
   handle of the channel then completes with SFV_ERR_WORK". The channel's own waits look at the
   channel's state before they arm; sfv_channel_arm did not. A loop that read an event breaking
   its channel (sfv_context_events, its event fd readable) then armed, polled (SFV_NOT_DONE) and
   slept on an fd that never became readable: nothing flushed the work, and on a device that
   sends no flush the loop slept for ever. Where the device fails every verb after its
   DEVICE_FATAL, the arm failed (SFV_ERR_DRIVER, ibv_req_notify_cq) with the event unread and
   the work in flight, where the waits read the event and flush. */
static void t_loop_arm_flushes_broken_channel(void) {
    int k;
    for (k = 0; k < 2; k++) {
        tf_env e;
        sfv_channel_desc d = r_desc(SFV_WAIT_EVENT, 2000);
        sfv_channel *a, *b;
        sfv_pending rx, tx;
        sfv_work_completion wc;
        sfv_scatter_element s;
        sfv_gather_element g;
        sfv_event ev[4];
        sfv_result r;
        size_t n;
        tf_open(&e, 256);
        tf_pair(&e, &d, &a, &b);
        s = sfv_mr_scatter_element(e.mr, e.buf, 8);
        g = sfv_mr_gather_element(e.mr, e.buf + 64, 8);
        /* the loop's earlier rounds: one message came, its event woke the loop and was taken (the
           CQ not armed now) */
        CHECK_OK(sfv_channel_post_receive(a, &s, 1, &rx));
        CHECK_OK(sfv_channel_arm(a));
        CHECK_RESULT(sfv_pending_poll(&rx, &wc), SFV_NOT_DONE);
        CHECK_OK(sfv_channel_post_send(b, &g, 1, &tx));
        CHECK_OK(sfv_pending_wait(&tx, 1000, NULL));
        CHECK(r_readable(sfv_channel_fd(a), 1000));
        CHECK_OK(sfv_channel_ack_events(a));
        CHECK_OK(sfv_pending_poll(&rx, &wc));
        /* the next round: armed, nothing done, asleep */
        CHECK_OK(sfv_channel_post_receive(a, &s, 1, &rx));
        if (k == 0) {
            CHECK_OK(sfv_channel_arm(a));
            CHECK_RESULT(sfv_pending_poll(&rx, &wc), SFV_NOT_DONE);
        }
        if (k == 0) { /* the QP fails; the loop reads the event (its event fd woke it) */
            fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_QP_FATAL, sfv_channel_raw_qp(a), 0);
            CHECK_OK(sfv_context_events(e.ctx, ev, 4, &n));
            CHECK_EQ(n, 1);
        } else { /* the device fails as the loop wakes: its event unread, every verb refused from now on */
            fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_DEVICE_FATAL, NULL, 0);
            fk_fail_name("ibv_req_notify_cq", 1000);
        }
        /* the next round, as documented */
        r = sfv_channel_arm(a);
        if (r != SFV_OK) FAIL("case %d: sfv_channel_arm on a channel an event broke: %s (%s)", k, sfv_result_str(r), sfv_last_error()->message);
        r = sfv_pending_poll(&rx, &wc);
        if (r == SFV_NOT_DONE && !r_readable(sfv_channel_fd(a), 200))
            FAIL("case %d: after the event that broke the channel, the loop's poll says NOT_DONE and its fd stays silent: it sleeps for ever", k);
        if (r == SFV_NOT_DONE) {
            CHECK_OK(sfv_channel_ack_events(a));
            r = sfv_pending_poll(&rx, &wc);
        }
        CHECK_RESULT(r, SFV_ERR_WORK);
        CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
        CHECK_EQ(wc.error_class, SFV_WORK_ERROR_FATAL);
        fk_fail_name("ibv_req_notify_cq", 0);
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        tf_close(&e);
    }
}

static const harness_test TESTS[] = {
    TEST(t_loop_arm_flushes_broken_channel, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
