/* test_rev31b.c - hostile review 31b on the fake NIC: device events, recovery and the SRQ, a
   second look (>>events, >>srq, sfv_channel_reset). Each test failed on the header before its
   fix. */
#include "fake_env.h"

/* An SRQ with a channel `a` on it, connected to `b` (a receive queue of its own), and one receive
   posted to the SRQ. */
typedef struct tv_srq { tf_env e; sfv_srq *srq; sfv_channel *a, *b; sfv_pending rx; } tv_srq;
static void tv_open(tv_srq *t) {
    sfv_channel_desc d;
    sfv_scatter_element s;
    tf_open(&t->e, 4096);
    CHECK_OK(sfv_create_srq(t->e.pd, NULL, &t->srq));
    memset(&d, 0, sizeof d);
    d.timeout_ms = 300;
    d.srq = t->srq;
    CHECK_OK(sfv_create_channel(t->e.pd, &d, &t->a));
    d.srq = NULL;
    CHECK_OK(sfv_create_channel(t->e.pd, &d, &t->b));
    tf_connect(t->a, t->b);
    s = sfv_mr_scatter_element(t->e.mr, t->e.buf, 64);
    CHECK_OK(sfv_srq_post_receive(t->srq, &s, 1, &t->rx));
}
static void tv_close(tv_srq *t) {
    CHECK_OK(sfv_destroy_channel(t->a));
    CHECK_OK(sfv_destroy_channel(t->b));
    CHECK_OK(sfv_destroy_srq(t->srq));
    tf_close(&t->e);
}
/* Raises `type` on the SRQ (SRQ_ERR), its CQ (CQ_ERR) or the device (DEVICE_FATAL), and reads it. */
static void tv_event(tv_srq *t, int type) {
    sfv_event ev[4];
    size_t n;
    void *object = type == IBV_EVENT_SRQ_ERR ? (void *)sfv_srq_raw(t->srq)
                 : type == IBV_EVENT_CQ_ERR  ? (void *)sfv_channel_raw_qp(t->a)->recv_cq /* the SRQ's CQ */
                                             : NULL;
    fk_inject_async_event(sfv_context_raw(t->e.ctx), type, object, 0);
    CHECK_OK(sfv_context_events(t->e.ctx, ev, 4, &n));
    CHECK_EQ(n, 1);
}

/* Promise: every failure has a matching sfv_last_error() (>>events: "A channel broken by an event
   stops taking posts (SFV_ERR_BROKEN, the message names the event)"; the SRQ's own refusals say
   "SRQ", as its other ones do: "the SRQ is in the error state", "over the SRQ's"). Input: an
   SRQ that an event broke (SRQ_ERR, CQ_ERR of its CQ, DEVICE_FATAL), then sfv_srq_post_receive.
   It said "the channel is broken: the device reported SRQ_ERR": the program called no channel,
   and the channels on the SRQ said the same words of themselves. */
static void t_srq_post_after_event_names_srq(void) {
    static const int kinds[] = {IBV_EVENT_SRQ_ERR, IBV_EVENT_CQ_ERR, IBV_EVENT_DEVICE_FATAL};
    size_t k;
    for (k = 0; k < COUNT_OF(kinds); k++) {
        tv_srq t;
        sfv_pending rx2;
        sfv_scatter_element s;
        tv_open(&t);
        tv_event(&t, kinds[k]);
        s = sfv_mr_scatter_element(t.e.mr, t.e.buf + 64, 64);
        CHECK_RESULT(sfv_srq_post_receive(t.srq, &s, 1, &rx2), SFV_ERR_BROKEN);
        if (!strstr(sfv_last_error()->message, "the SRQ is broken") ||
            !strstr(sfv_last_error()->message, sfv_event_type_str((sfv_event_type)(k == 0 ? SFV_EVENT_SRQ_ERR : k == 1 ? SFV_EVENT_CQ_ERR : SFV_EVENT_DEVICE_FATAL))))
            FAIL("a post to the SRQ after %d: \"%s\"", kinds[k], sfv_last_error()->message);
        CHECK_RESULT(sfv_srq_post_receive_batch(t.srq, &s, 1, 1, &rx2), SFV_ERR_BROKEN);
        CHECK_MSG("the SRQ is broken");
        CHECK_RESULT(sfv_pending_wait(&t.rx, -1, NULL), SFV_ERR_WORK); /* flushed */
        tv_close(&t);
    }
}

/* Promise (sfv_channel_reset): refused "for a channel whose CQ or device failed (a CQ_ERR or
   DEVICE_FATAL event: the reset keeps the CQ) or whose SRQ failed ...: SFV_ERR_BROKEN before
   anything is touched, destroy it", with a matching sfv_last_error(). Input: a channel on an SRQ,
   then DEVICE_FATAL (which breaks the SRQ as well). The refusal said only "the SRQ failed ...: no
   queue pair takes from it again; destroy it and make a new one": nothing of the device, and a
   program that did as told made a new SRQ and channel on a device that had failed. Its own CQ's
   CQ_ERR with the SRQ failing too said the same. The channel's own CQ or device comes first now;
   the SRQ's failure alone still says the SRQ. */
static void t_srq_channel_reset_after_device_fatal(void) {
    tv_srq t;
    sfv_event ev[4];
    size_t n;
    tv_open(&t);
    tv_event(&t, IBV_EVENT_DEVICE_FATAL);
    CHECK_RESULT(sfv_channel_reset(t.a), SFV_ERR_BROKEN);
    if (!strstr(sfv_last_error()->message, "DEVICE_FATAL") || !strstr(sfv_last_error()->message, "destroy the channel") ||
        strstr(sfv_last_error()->message, "make a new one"))
        FAIL("reset of a channel on an SRQ after DEVICE_FATAL: \"%s\"", sfv_last_error()->message);
    CHECK(sfv_channel_raw_qp(t.a) != NULL); /* nothing touched */
    tv_close(&t);
    /* its own CQ failed, and then the SRQ */
    tv_open(&t);
    fk_inject_async_event(sfv_context_raw(t.e.ctx), IBV_EVENT_CQ_ERR, sfv_channel_raw_cq(t.a), 0);
    fk_inject_async_event(sfv_context_raw(t.e.ctx), IBV_EVENT_SRQ_ERR, sfv_srq_raw(t.srq), 0);
    CHECK_OK(sfv_context_events(t.e.ctx, ev, 4, &n));
    CHECK_EQ(n, 2);
    CHECK_RESULT(sfv_channel_reset(t.a), SFV_ERR_BROKEN);
    CHECK_MSG("the channel's CQ or its device failed");
    CHECK_MSG("destroy the channel");
    tv_close(&t);
    /* the SRQ alone: the SRQ is named, as before */
    tv_open(&t);
    tv_event(&t, IBV_EVENT_SRQ_ERR);
    CHECK_RESULT(sfv_channel_reset(t.a), SFV_ERR_BROKEN);
    CHECK_MSG("the SRQ failed");
    tv_close(&t);
}

static const harness_test TESTS[] = {
    TEST(t_srq_post_after_event_names_srq, 20),
    TEST(t_srq_channel_reset_after_device_fatal, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
