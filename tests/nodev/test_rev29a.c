/* test_rev29a.c - tests from the hostile review of session 29 (a): device events and recovery
   (>>events, the waits of >>impl completions, sfv_channel_reset). Each failed on the header
   before its fix. */
#include "fake_env.h"

/* What the NIC does on its own after an event that puts a QP in the error state (QP_FATAL) or
   while its link is down: the QP goes to ERR and the NIC flushes its work, completions the
   channel's wait finds before it looks at the event. Here the test moves the QP the way the
   device would (the raw QP: the test plays the NIC). */
static void tr_device_flushes(sfv_channel *a) {
    struct ibv_qp_attr qa;
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_ERR;
    CHECK(ibv_modify_qp(sfv_channel_raw_qp(a), &qa, IBV_QP_STATE) == 0);
}

/* >>events: "every pending handle of the channel then completes with SFV_ERR_WORK (WR_FLUSH_ERR,
   class LOCAL_RESOURCE for a port that went down, FATAL for a QP, CQ or device error) and a hint
   naming the event". The event was read (sfv_context_events) before the wait, but the flush the
   NIC made itself was classed as if nothing were known: a QP_FATAL's flushes said class
   LOCAL_RESOURCE and "most likely the peer sent something it refused", and a PORT_ERR's (the
   port back by the time the wait looked) the same, blaming the peer. */
static void t_device_flush_after_event_read(void) {
    static const int kinds[] = {IBV_EVENT_QP_FATAL, IBV_EVENT_PORT_ERR};
    size_t k;
    for (k = 0; k < COUNT_OF(kinds); k++) {
        tf_env e;
        sfv_channel *a, *b;
        sfv_pending rx, tx;
        sfv_work_completion wc;
        sfv_event ev[4];
        sfv_event_type by;
        size_t n;
        sfv_scatter_element s;
        sfv_gather_element g;
        const bool port = kinds[k] == IBV_EVENT_PORT_ERR;
        tf_open(&e, 4096);
        tf_pair(&e, NULL, &a, &b);
        s = sfv_mr_scatter_element(e.mr, e.buf, 64);
        g = sfv_mr_gather_element(e.mr, e.buf + 128, 64);
        CHECK_OK(sfv_channel_post_receive(a, &s, 1, &rx));
        CHECK_OK(sfv_channel_post_send(a, &g, 1, &tx)); /* b has no receive: in flight (RNR) */
        tr_device_flushes(a);
        fk_inject_async_event(sfv_context_raw(e.ctx), kinds[k], port ? NULL : (void *)sfv_channel_raw_qp(a), 1);
        if (port) fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_PORT_ACTIVE, NULL, 1); /* and back (the fake's port is ACTIVE) */
        CHECK_OK(sfv_context_events(e.ctx, ev, 4, &n));
        CHECK(sfv_channel_broken(a, &by) && by == (port ? SFV_EVENT_PORT_ERR : SFV_EVENT_QP_FATAL));
        CHECK_RESULT(sfv_pending_wait(&rx, 1000, &wc), SFV_ERR_WORK);
        CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
        if (wc.error_class != (port ? SFV_WORK_ERROR_LOCAL_RESOURCE : SFV_WORK_ERROR_FATAL) ||
            !strstr(sfv_last_error()->message, port ? "PORT_ERR" : "QP_FATAL"))
            FAIL("%s read before the wait: the device's flush came out class %s: %s", port ? "PORT_ERR" : "QP_FATAL",
                 sfv_work_error_class_str(wc.error_class), sfv_last_error()->message);
        CHECK_RESULT(sfv_pending_wait(&tx, 1000, &wc), SFV_ERR_WORK);
        CHECK_EQ(wc.error_class, port ? SFV_WORK_ERROR_LOCAL_RESOURCE : SFV_WORK_ERROR_FATAL);
        CHECK_MSG(port ? "PORT_ERR" : "QP_FATAL");
        /* and the reset recovers it, as after any such event */
        CHECK_OK(sfv_channel_reset(a));
        CHECK_OK(sfv_channel_reset(b));
        tf_connect(a, b);
        CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
        CHECK_OK(sfv_channel_send(a, &g, 1, NULL));
        CHECK_OK(sfv_pending_wait(&rx, 1000, NULL));
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        tf_close(&e);
    }
}

/* sfv_channel_reset: "Refused ... for a channel whose CQ or device failed (a CQ_ERR or
   DEVICE_FATAL event: the reset keeps the CQ) ...: SFV_ERR_BROKEN before anything is touched,
   destroy it", and every failure has a matching sfv_last_error(). Where an event a reset
   recovers broke the channel first (PORT_ERR, QP_FATAL) and the CQ_ERR or DEVICE_FATAL came
   after, the refusal named only the first ("the device reported PORT_ERR (its port went
   down)"): a program that waits for PORT_ACTIVE and resets again is refused for ever, told
   nothing of the CQ or of destroying the channel. */
static void t_reset_refusal_names_dead_cq(void) {
    static const int first[] = {IBV_EVENT_PORT_ERR, IBV_EVENT_QP_FATAL};
    static const int then[] = {IBV_EVENT_CQ_ERR, IBV_EVENT_DEVICE_FATAL};
    size_t i, j;
    for (i = 0; i < COUNT_OF(first); i++)
        for (j = 0; j < COUNT_OF(then); j++) {
            tf_env e;
            sfv_channel *a;
            sfv_event ev[4];
            size_t n;
            tf_open(&e, 4096);
            CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
            fk_inject_async_event(sfv_context_raw(e.ctx), first[i], first[i] == IBV_EVENT_PORT_ERR ? NULL : (void *)sfv_channel_raw_qp(a), 1);
            fk_inject_async_event(sfv_context_raw(e.ctx), then[j], then[j] == IBV_EVENT_CQ_ERR ? (void *)sfv_channel_raw_cq(a) : NULL, 0);
            CHECK_OK(sfv_context_events(e.ctx, ev, 4, &n));
            CHECK_EQ(n, 2);
            CHECK_RESULT(sfv_channel_reset(a), SFV_ERR_BROKEN);
            if (!strstr(sfv_last_error()->message, "destroy the channel") || strstr(sfv_last_error()->message, "PORT_ERR") ||
                strstr(sfv_last_error()->message, "QP_FATAL"))
                FAIL("reset after %s then %s: \"%s\"", sfv_event_type_str(ev[0].type), sfv_event_type_str(ev[1].type), sfv_last_error()->message);
            CHECK_MSG("CQ_ERR or DEVICE_FATAL");
            CHECK_OK(sfv_destroy_channel(a));
            tf_close(&e);
        }
}

static const harness_test TESTS[] = {
    TEST(t_device_flush_after_event_read, 20),
    TEST(t_reset_refusal_names_dead_cq, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
