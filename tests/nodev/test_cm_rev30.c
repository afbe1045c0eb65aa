/* test_cm_rev30.c - session 25's fixes of the RDMA-CM part (SAFEVERBS_RDMACM), on the fake NIC and
   the fake librdmacm. Each test failed on the header before its fix. Built as test_cm_fake is. */
#define SAFEVERBS_RDMACM
#include "fake_env.h"
#include "fake_rdmacm.h"

#define PORT 7471

/* Promise (>>rdmacm, sfv_cm_connect and sfv_cm_accept): the channel they make is on the port the
   CM chose; a desc.port of another port is SFV_ERR_INVALID naming both, as for a caller's
   channel (sfv_cm_connect_channel). It was taken as given: on a device with two ports, a
   channel made on port 2 for a connection routed through port 1, which a real NIC brings up with
   the CM's path on the wrong port (the fake refuses its INIT as a driver would: EINVAL, with
   nothing said of ports). desc.port 0 still takes the CM's. */
static void t_cm_own_channel_on_the_cms_port(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_cm_listener *l = NULL;
    sfv_cm_request *q;
    sfv_cm_conn *c = (sfv_cm_conn *)1;
    sfv_channel_desc d = SFV_ZERO_INIT;
    fkcm_event ev;
    fk_reset();
    fkcm_reset();
    fk_set_ports(2);
    CHECK_OK(sfv_open_device("fake0", &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    d.port = 2; /* the fake's CM puts every id on port 1 */
    CHECK_RESULT(sfv_cm_connect(pd, NULL, FKCM_ADDR0, PORT, &d, NULL, 0, 1000, &c), SFV_ERR_INVALID);
    CHECK(c == NULL);
    CHECK_MSG("the channel is on port 2");
    CHECK_MSG("desc.port 1");
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    memset(&ev, 0, sizeof ev);
    ev.type = RDMA_CM_EVENT_CONNECT_REQUEST;
    ev.qpn = 0x99;
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    c = (sfv_cm_conn *)1;
    CHECK_RESULT(sfv_cm_accept(q, pd, &d, NULL, 0, 1000, &c), SFV_ERR_INVALID);
    CHECK(c == NULL);
    CHECK_MSG("the channel is on port 2");
    /* port 0: the CM's */
    d.port = 0;
    CHECK_OK(sfv_cm_connect(pd, NULL, FKCM_ADDR0, PORT, &d, NULL, 0, 1000, &c));
    CHECK_EQ(sfv_channel_get_desc(sfv_cm_channel(c))->port, 1);
    CHECK_OK(sfv_cm_close(c, 0));
    CHECK_OK(sfv_cm_destroy_listener(l));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fk_live_total(), 0);
    fk_set_ports(1);
}

/* Promise ("nothing is lost or leaked", >>rdmacm's cleanup of a failed step): a connect or an
   accept that fails after it made its channel destroys that channel; when a verb refused that
   destroy (ibv_destroy_qp), the channel was lost: nobody held it, and it held its PD and device
   for good. Now the PD keeps it, and sfv_dealloc_pd destroys it again: the fakes hold nothing
   after the PD and the device are closed. */
static void t_cm_refused_destroy_left_to_the_pd(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_cm_listener *l = NULL;
    sfv_cm_request *q;
    sfv_cm_conn *c = (sfv_cm_conn *)1;
    fkcm_event ev;
    fk_reset();
    fkcm_reset();
    CHECK_OK(sfv_open_device("fake0", &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    /* accept: the peer gives up after the answer, and the channel's destroy is refused */
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    memset(&ev, 0, sizeof ev);
    ev.type = RDMA_CM_EVENT_CONNECT_REQUEST;
    ev.qpn = 0x99;
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    memset(&ev, 0, sizeof ev);
    ev.type = RDMA_CM_EVENT_REJECTED;
    fkcm_on(FKCM_ACCEPT, &ev, 1);
    fk_fail_name("ibv_destroy_qp", 1);
    CHECK_RESULT(sfv_cm_accept(q, pd, NULL, NULL, 0, 1000, &c), SFV_ERR_UNREACHABLE);
    CHECK(c == NULL);
    CHECK_OK(sfv_cm_destroy_listener(l));
    /* connect: rejected, the destroy refused twice (the first dealloc's try is refused too) */
    memset(&ev, 0, sizeof ev);
    ev.type = RDMA_CM_EVENT_REJECTED;
    fkcm_on(FKCM_CONNECT, &ev, 1);
    fk_fail_name("ibv_destroy_qp", 1);
    CHECK_RESULT(sfv_cm_connect(pd, NULL, FKCM_ADDR0, PORT, NULL, NULL, 0, 1000, &c), SFV_ERR_REJECTED);
    CHECK(c == NULL);
    fk_fail_name("ibv_destroy_qp", 0);
    CHECK(fk_live_total() > 0);
    CHECK_OK(sfv_close_device(ctx)); /* (the PD holds it) */
    CHECK_OK(sfv_dealloc_pd(pd)); /* destroys both channels, then the PD, then the device */
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fk_live_total(), 0);
}

static const harness_test TESTS[] = {
    TEST(t_cm_own_channel_on_the_cms_port, 30),
    TEST(t_cm_refused_destroy_left_to_the_pd, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
