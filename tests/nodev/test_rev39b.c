/* test_rev39b.c - hostile review 39b: atomics, completions and CQs, and the RDMA-CM's
   DEVICE_REMOVAL, on the fake NIC (and the fake librdmacm, compiled into this file: the Makefile
   links this test with fake_verbs.c only). Each test failed on the header before its fix. */
#define SAFEVERBS_RDMACM
#include "fake_env.h"
#include "fake_rdmacm.h"
#include "fake_rdmacm.c"

#define PORT 7539

static fkcm_event r9_ev(int type) {
    fkcm_event e;
    memset(&e, 0, sizeof e);
    e.type = type;
    return e;
}

/* The CM's DEVICE_REMOVAL is this side's device going away, not the peer leaving (0cbfec9 made
   an established connection say so): one that ends a connect's or an accept's wait says so
   too. It said "the connection to ... ended" with errno ECONNRESET (connect), and "the
   connecting peer did not complete the connection" (accept): the peer blamed for our device. */
static void t_cm_device_removal_while_connecting(void) {
    static const enum fkcm_fn steps[] = {FKCM_RESOLVE_ADDR, FKCM_RESOLVE_ROUTE, FKCM_CONNECT};
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_cm_listener *l;
    sfv_cm_request *q;
    sfv_cm_conn *c;
    size_t s;
    fkcm_event ev = r9_ev(RDMA_CM_EVENT_DEVICE_REMOVAL);
    fk_reset();
    fkcm_reset();
    CHECK_OK(sfv_open_device("fake0", &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    for (s = 0; s < COUNT_OF(steps); s++) {
        fkcm_on(steps[s], &ev, 1);
        CHECK_RESULT(sfv_cm_connect(pd, NULL, FKCM_ADDR0, PORT, NULL, NULL, 0, 1000, &c), SFV_ERR_BROKEN);
        CHECK(c == NULL);
        CHECK_EQ(sfv_last_error()->errnum, ENODEV);
        CHECK_MSG("the device was removed");
    }
    /* accept: the event that ends its wait for ESTABLISHED */
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    {
        fkcm_event rq = r9_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
        rq.qpn = 0x99;
        rq.initiator_depth = rq.responder_resources = 4;
        fkcm_push(sfv_cm_listener_fd(l), &rq);
    }
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    fkcm_on(FKCM_ACCEPT, &ev, 1);
    CHECK_RESULT(sfv_cm_accept(q, pd, NULL, NULL, 0, 1000, &c), SFV_ERR_DRIVER);
    CHECK(c == NULL);
    CHECK_EQ(sfv_last_error()->errnum, ENODEV);
    CHECK_MSG("the device was removed");
    CHECK(strstr(sfv_last_error()->message, "peer") == NULL);
    CHECK_OK(sfv_cm_destroy_listener(l));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    CHECK_EQ(fkcm_unacked(), 0);
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fk_live_total(), 0);
}

/* A connection whose device is removed while a receive waits, on a NIC that flushes nothing
   then (a device going away may not): the channel destroys its queue pair to stop the work, and
   the wait ends in class FATAL, "the device was removed". The posts after it must say the same
   (SFV_ERR_BROKEN, errno ENODEV: the header's "later posts say SFV_ERR_BROKEN" with the cause);
   they said "the channel has no queue pair ... sfv_channel_reset makes a new one" (errno EIO),
   as if nothing but a lost queue pair were wrong. The peer's disconnect the same (ECONNRESET). */
static void t_cm_gone_without_flush_posts_say_why(void) {
    static const int how[] = {RDMA_CM_EVENT_DEVICE_REMOVAL, RDMA_CM_EVENT_DISCONNECTED};
    size_t h;
    for (h = 0; h < COUNT_OF(how); h++) {
        sfv_context *ctx;
        sfv_pd *pd;
        sfv_mr *mr;
        sfv_channel *peer;
        sfv_cm_conn *c;
        sfv_channel_desc d;
        sfv_endpoint ep;
        sfv_pending rx;
        sfv_work_completion wc;
        unsigned char buf[256];
        sfv_scatter_element in;
        fkcm_event ev = r9_ev(how[h]);
        fk_reset();
        fkcm_reset();
        CHECK_OK(sfv_open_device("fake0", &ctx));
        CHECK_OK(sfv_alloc_pd(ctx, &pd));
        CHECK_OK(sfv_reg_mr_local(pd, buf, sizeof buf, &mr));
        in = sfv_mr_scatter_element(mr, buf, 64);
        CHECK_OK(sfv_create_channel(pd, NULL, &peer));
        CHECK_OK(sfv_channel_endpoint(peer, &ep));
        fkcm_set_peer(ep.qpn, ep.psn);
        memset(&d, 0, sizeof d);
        CHECK_OK(sfv_cm_connect(pd, NULL, FKCM_ADDR0, PORT, &d, NULL, 0, 1000, &c));
        CHECK_OK(sfv_channel_endpoint(sfv_cm_channel(c), &ep));
        CHECK_OK(sfv_channel_handshake(peer, &ep));
        CHECK_OK(sfv_channel_post_receive(sfv_cm_channel(c), &in, 1, &rx));
        fk_set_no_flush(true);
        ev.delay_ms = 50;
        fkcm_push(sfv_cm_fd(c), &ev);
        CHECK_RESULT(sfv_pending_wait(&rx, 5000, &wc), SFV_ERR_WORK);
        CHECK_EQ(wc.error_class, how[h] == RDMA_CM_EVENT_DEVICE_REMOVAL ? SFV_WORK_ERROR_FATAL : SFV_WORK_ERROR_TRANSPORT);
        CHECK_MSG(how[h] == RDMA_CM_EVENT_DEVICE_REMOVAL ? "the device was removed" : "the peer disconnected");
        CHECK_RESULT(sfv_channel_post_receive(sfv_cm_channel(c), &in, 1, &rx), SFV_ERR_BROKEN);
        CHECK_EQ(sfv_last_error()->errnum, how[h] == RDMA_CM_EVENT_DEVICE_REMOVAL ? ENODEV : ECONNRESET);
        CHECK_MSG(how[h] == RDMA_CM_EVENT_DEVICE_REMOVAL ? "its device was removed" : "the peer disconnected");
        fk_set_no_flush(false);
        CHECK_OK(sfv_cm_close(c, 100));
        CHECK_OK(sfv_destroy_channel(peer));
        CHECK_OK(sfv_dereg_mr(mr));
        CHECK_OK(sfv_dealloc_pd(pd));
        CHECK_OK(sfv_close_device(ctx));
        CHECK_EQ(fkcm_live_ids(), 0);
        CHECK_EQ(fk_live_total(), 0);
    }
}

/* A listener whose device went (the CM's DEVICE_REMOVAL of its own id): sfv_cm_get_request
   read the event and went on waiting, to its deadline, every call after it too (SFV_ERR_TIMEOUT,
   no word of the device); now SFV_ERR_BROKEN, ENODEV, "the listener's device was removed", at
   once and on every later call; requests queued before the removal are still handed out first. */
static void t_cm_listener_device_removed(void) {
    sfv_cm_listener *l;
    sfv_cm_request *q;
    fkcm_event rq = r9_ev(RDMA_CM_EVENT_CONNECT_REQUEST), rm = r9_ev(RDMA_CM_EVENT_DEVICE_REMOVAL);
    double t0;
    fk_reset();
    fkcm_reset();
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    rq.qpn = 0x99;
    fkcm_push(sfv_cm_listener_fd(l), &rq);
    fkcm_push(sfv_cm_listener_fd(l), &rm);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    CHECK_OK(sfv_cm_reject(q, NULL, 0));
    t0 = test_seconds();
    CHECK_RESULT(sfv_cm_get_request(l, 3000, &q), SFV_ERR_BROKEN);
    CHECK(q == NULL);
    CHECK_EQ(sfv_last_error()->errnum, ENODEV);
    CHECK_MSG("the listener's device was removed");
    CHECK_RESULT(sfv_cm_get_request(l, 3000, &q), SFV_ERR_BROKEN);
    CHECK(test_seconds() - t0 < 1.5); /* not the deadlines */
    CHECK_OK(sfv_cm_destroy_listener(l));
    CHECK_EQ(fkcm_unacked(), 0);
    CHECK_EQ(fkcm_live_ids(), 0);
}

static const harness_test TESTS[] = {
    TEST(t_cm_device_removal_while_connecting, 20),
    TEST(t_cm_gone_without_flush_posts_say_why, 20),
    TEST(t_cm_listener_device_removed, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
