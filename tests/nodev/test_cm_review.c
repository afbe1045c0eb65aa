/* test_cm_review.c - hostile review 28g on the fake NIC and the fake librdmacm (fake_rdmacm.c): the
   RDMA-CM part (SAFEVERBS_RDMACM) and leases. Each test failed on the header before its fix.
   Built as test_cm_fake is (the Makefile links fake_rdmacm.c for every test_cm_*). */
#define SAFEVERBS_RDMACM
#include "fake_env.h"
#include "fake_rdmacm.h"

#define PORT 7471

/* A device (fake0, whose address is FKCM_ADDR0, with memory windows), a PD and a buffer. */
typedef struct tr_env {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    unsigned char buf[4096];
} tr_env;
static void tr_open(tr_env *e) {
    memset(e, 0, sizeof *e);
    fk_reset();
    fkcm_reset();
    fk_set_mw(true);
    CHECK_OK(sfv_open_device("fake0", &e->ctx));
    CHECK_OK(sfv_alloc_pd(e->ctx, &e->pd));
    CHECK_OK(sfv_reg_mr_access(e->pd, e->buf, sizeof e->buf, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_MW_BIND, &e->mr));
}
/* Tears down; nothing of the fakes is left. */
static void tr_close(tr_env *e) {
    CHECK_OK(sfv_dereg_mr(e->mr));
    CHECK_OK(sfv_dealloc_pd(e->pd));
    CHECK_OK(sfv_close_device(e->ctx));
    CHECK_EQ(fkcm_unacked(), 0);
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fk_mw_count(), 0);
    CHECK_EQ(fk_live_total(), 0);
}

static fkcm_event tr_ev(int type) {
    fkcm_event e;
    memset(&e, 0, sizeof e);
    e.type = type;
    return e;
}

/* The last error is the one the call returned, and says `sub`. */
static void tr_last_is(sfv_result r, const char *sub) {
    CHECK_EQ(sfv_last_error()->result, r);
    CHECK_MSG(sub);
}

/* "Every failure is an sfv_result with a matching sfv_last_error()": a connect or an accept that
   fails after it made its channel destroys that channel; when a verb refuses that destroy
   (ibv_destroy_qp), the call still returns its own failure, and the last error said the
   destroy's (SFV_ERR_DRIVER, ibv_destroy_qp) instead. (The channel is left to its PD then, whose
   sfv_dealloc_pd destroys it: test_cm_rev30's t_cm_refused_destroy_left_to_the_pd.) */
static void t_cm_failed_step_keeps_its_error(void) {
    tr_env e;
    sfv_cm_listener *l = NULL;
    sfv_cm_request *q;
    sfv_cm_conn *c = (sfv_cm_conn *)1;
    fkcm_event ev = tr_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
    tr_open(&e);
    /* accept: the peer gives up after the answer */
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    ev.qpn = 0x99;
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    ev = tr_ev(RDMA_CM_EVENT_REJECTED);
    fkcm_on(FKCM_ACCEPT, &ev, 1);
    fk_fail_name("ibv_destroy_qp", 1);
    CHECK_RESULT(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, &c), SFV_ERR_UNREACHABLE);
    CHECK(c == NULL);
    tr_last_is(SFV_ERR_UNREACHABLE, "did not complete the connection");
    CHECK_OK(sfv_cm_destroy_listener(l));
    /* connect: the listener rejects us */
    ev = tr_ev(RDMA_CM_EVENT_REJECTED);
    ev.status = 28;
    fkcm_on(FKCM_CONNECT, &ev, 1);
    fk_fail_name("ibv_destroy_qp", 1);
    CHECK_RESULT(sfv_cm_connect(e.pd, NULL, FKCM_ADDR0, PORT, NULL, NULL, 0, 1000, &c), SFV_ERR_REJECTED);
    tr_last_is(SFV_ERR_REJECTED, "rejected the connection");
    fk_fail_name("ibv_destroy_qp", 0);
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_OK(sfv_dereg_mr(e.mr)); /* (the PD destroys the channels it was left) */
    CHECK_OK(sfv_dealloc_pd(e.pd));
    CHECK_OK(sfv_close_device(e.ctx));
}

/* sfv_cm_channel's channel: "the whole channel API works on it", sfv_channel_reset included, and
   a destroy of it by the caller makes the connection forget it (as t_close_refused_then_
   channel_destroyed of test_cm_fake has it). After a reset the connection no longer watched the
   channel, so it did not learn of the destroy: sfv_cm_close broke and destroyed the freed
   channel (a use after free; a crash in the plain build). Now the connection forgets it, and
   the old connection still breaks nothing of the reset channel, nor wakes its waits. */
static void t_cm_owned_channel_reset_then_destroyed(void) {
    static const sfv_wait_mode modes[] = {SFV_WAIT_BUSY, SFV_WAIT_EVENT};
    tr_env e;
    size_t m;
    tr_open(&e);
    for (m = 0; m < COUNT_OF(modes); m++) {
        sfv_channel_desc d = SFV_ZERO_INIT;
        sfv_cm_conn *c;
        sfv_channel *ch, *b;
        sfv_endpoint ea, eb;
        sfv_pending rx;
        sfv_work_completion wc;
        sfv_scatter_element s = sfv_mr_scatter_element(e.mr, e.buf + 64, 8);
        sfv_gather_element g = sfv_mr_gather_element(e.mr, e.buf, 8);
        fkcm_event ev = tr_ev(RDMA_CM_EVENT_DISCONNECTED);
        d.wait_mode = modes[m];
        CHECK_OK(sfv_cm_connect(e.pd, NULL, FKCM_ADDR0, PORT, &d, NULL, 0, 1000, &c));
        ch = sfv_cm_channel(c);
        CHECK_OK(sfv_channel_reset(ch));
        CHECK(sfv_cm_channel(c) == ch); /* still the connection's */
        if (m == 0) { /* so connecting it anew by the CM is refused, saying whose it is (not "already connected") */
            sfv_cm_conn *c2 = NULL;
            CHECK_RESULT(sfv_cm_connect_channel(ch, NULL, FKCM_ADDR0, PORT, NULL, 0, 1000, &c2), SFV_ERR_INVALID);
            CHECK_MSG("a connection's");
            CHECK(c2 == NULL);
        }
        /* connected anew to a local channel; the old peer hangs up while a receive waits */
        CHECK_OK(sfv_create_channel(e.pd, NULL, &b));
        CHECK_OK(sfv_channel_endpoint(ch, &ea));
        CHECK_OK(sfv_channel_endpoint(b, &eb));
        CHECK_OK(sfv_channel_handshake(b, &ea));
        CHECK_OK(sfv_channel_handshake(ch, &eb));
        CHECK_OK(sfv_channel_post_receive(ch, &s, 1, &rx));
        fkcm_push(sfv_cm_fd(c), &ev);
        CHECK_RESULT(sfv_pending_wait(&rx, 50, &wc), SFV_ERR_TIMEOUT); /* not broken by the old peer */
        CHECK_OK(sfv_channel_send(b, &g, 1, NULL));
        CHECK_OK(sfv_pending_wait(&rx, 1000, &wc));
        CHECK_RESULT(sfv_cm_events(c), SFV_ERR_BROKEN); /* the old connection is over */
        /* the caller destroys it: the connection forgets it, and its close frees the rest */
        CHECK_OK(sfv_destroy_channel(ch));
        CHECK(sfv_cm_channel(c) == NULL);
        CHECK_OK(sfv_cm_close(c, 0));
        CHECK_OK(sfv_destroy_channel(b));
    }
    tr_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_cm_failed_step_keeps_its_error, 20),
    TEST(t_cm_owned_channel_reset_then_destroyed, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
