/* test_cm_rev33.c - session 26's additions to the RDMA-CM part (SAFEVERBS_RDMACM), on the fake NIC
   and the fake librdmacm. Built as test_cm_fake is. */
#define SAFEVERBS_RDMACM
#include "fake_env.h"
#include "fake_rdmacm.h"

#define PORT 7472

/* sfv_cm_request_open_device: a listener on every address takes requests on any device; the
   device the request came to is opened (the fake CM puts a wildcard listener's requests on
   fake0), a PD on it answers the request, and the request stays unanswered until then. NULL
   arguments are SFV_ERR_INVALID (out set to NULL). */
static void t_cm_request_open_device(void) {
    sfv_context *ctx = (sfv_context *)1;
    sfv_pd *pd;
    sfv_cm_listener *l = NULL;
    sfv_cm_request *q;
    sfv_cm_conn *c = NULL;
    fkcm_event ev;
    fk_reset();
    fkcm_reset();
    CHECK_RESULT(sfv_cm_request_open_device(NULL, &ctx), SFV_ERR_INVALID);
    CHECK(ctx == NULL);
    CHECK_MSG("request");
    CHECK_OK(sfv_cm_listen(NULL, PORT, 0, &l));
    memset(&ev, 0, sizeof ev);
    ev.type = RDMA_CM_EVENT_CONNECT_REQUEST;
    ev.qpn = 0x99;
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    CHECK_RESULT(sfv_cm_request_open_device(q, NULL), SFV_ERR_INVALID);
    CHECK_OK(sfv_cm_request_open_device(q, &ctx));
    CHECK(strcmp(sfv_context_name(ctx), "fake0") == 0);
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    CHECK_OK(sfv_cm_accept(q, pd, NULL, NULL, 0, 1000, &c));
    CHECK(c != NULL);
    CHECK_OK(sfv_cm_close(c, 0));
    CHECK_OK(sfv_cm_destroy_listener(l));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fk_live_total(), 0);
}

/* With no RDMA-CM device (rdma_create_event_channel fails ENODEV: no RDMA device, or rdma_ucm
   not loaded) the message said "no RDMA device has the address event channel"; now it says
   what is missing, SFV_ERR_NOT_FOUND as before. */
static void t_cm_no_event_channel_message(void) {
    sfv_cm_listener *l = NULL;
    fk_reset();
    fkcm_reset();
    fkcm_fail(FKCM_CREATE_EVENT_CHANNEL, 1, ENODEV, 0);
    CHECK_RESULT(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l), SFV_ERR_NOT_FOUND);
    CHECK(l == NULL);
    CHECK_MSG("no RDMA-CM device");
    CHECK_MSG("rdma_ucm");
    CHECK_EQ(fkcm_live_ids(), 0);
}

static const harness_test TESTS[] = {
    TEST(t_cm_no_event_channel_message, 20),
    TEST(t_cm_request_open_device, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
