/* test_rev39a.c - hostile review 39a of the set of live handles (>>impl handles) and LIFETIME:
   each test failed on the header before its fix. SFV_ASSERT counts and returns, and the fake
   librdmacm is compiled in, as in test_rev38a (dead_handles.h). */
#include "dead_handles.h"

#define PORT 7639

/* LIFETIME: "one [a handle no longer live] given to a call that queries, configures or connects
   it ... checks it before reading the handle". sfv_channel_desc_resolve queries a PD's device
   (its port, its GIDs, its limits) and is neither the data path nor a getter, yet it read a
   deallocated PD (pd->ctx: ASan's heap-use-after-free; a crash or garbage in the plain build).
   Now refused as sfv_create_channel refuses the same PD, *out zeroed. */
static void t_desc_resolve_dead_pd(void) {
    tf_env e;
    sfv_pd *pd2;
    sfv_channel_desc d;
    fk_reset();
    tf_open(&e, 4096);
    CHECK_OK(sfv_alloc_pd(e.ctx, &pd2));
    CHECK_OK(sfv_channel_desc_resolve(pd2, NULL, &d)); /* (live: resolved) */
    CHECK(d.max_send_wr != 0);
    CHECK_OK(sfv_dealloc_pd(pd2));
    memset(&d, 0xAB, sizeof d);
    DEAD_REFUSED(sfv_channel_desc_resolve(pd2, NULL, &d), "PD");
    CHECK(strstr(sfv_last_error()->message, "sfv_channel_desc_resolve") != NULL);
    {
        static const sfv_channel_desc zero;
        CHECK(memcmp(&d, &zero, sizeof d) == 0); /* nothing half-resolved is left behind */
    }
    CHECK_EQ(asserts, 1);
    tf_close(&e);
}

/* sfv_cm_accept: "Answers the request (freed, whatever the result ...)", and every failure's
   sfv_last_error says what happened. Given a dead PD (sfv_cm_accept) or a dead channel
   (sfv_cm_accept_channel), the call rejects and frees the request, yet its message said
   "...: nothing done", which invites the caller to try the (freed) request again. Now the message
   says the request was rejected, as the call's other refusals do ("(the request was rejected)"). */
static void t_cm_accept_dead_says_rejected(void) {
    tf_env e;
    sfv_pd *pd2;
    sfv_channel *ch;
    sfv_cm_conn *c = NULL;
    sfv_cm_listener *l;
    sfv_cm_request *q;
    fkcm_event ev;
    fk_reset();
    fkcm_reset();
    tf_open(&e, 4096);
    CHECK_OK(sfv_alloc_pd(e.ctx, &pd2));
    CHECK_OK(sfv_dealloc_pd(pd2));
    CHECK_OK(sfv_create_channel(e.pd, NULL, &ch));
    CHECK_OK(sfv_destroy_channel(ch));
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    memset(&ev, 0, sizeof ev);
    ev.type = RDMA_CM_EVENT_CONNECT_REQUEST;
    ev.qpn = 0x91;
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    DEAD_REFUSED(sfv_cm_accept(q, pd2, NULL, NULL, 0, 1000, &c), "PD");
    CHECK(c == NULL);
    CHECK_EQ(fkcm_calls(FKCM_REJECT), 1); /* answered: rejected and freed */
    CHECK(strstr(sfv_last_error()->message, "nothing done") == NULL);
    CHECK(strstr(sfv_last_error()->message, "the request was rejected") != NULL);
    ev.qpn = 0x92;
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    DEAD_REFUSED(sfv_cm_accept_channel(q, ch, NULL, 0, 1000, &c), "channel");
    CHECK(c == NULL);
    CHECK_EQ(fkcm_calls(FKCM_REJECT), 2);
    CHECK(strstr(sfv_last_error()->message, "nothing done") == NULL);
    CHECK(strstr(sfv_last_error()->message, "the request was rejected") != NULL);
    CHECK_OK(sfv_cm_destroy_listener(l)); /* (nothing taken is left: both requests were freed) */
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_unacked(), 0);
    CHECK_EQ(asserts, 2);
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_desc_resolve_dead_pd, 20),
    TEST(t_cm_accept_dead_says_rejected, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
