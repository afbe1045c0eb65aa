/* test_rev29c.c - from a hostile review of batches and request lists (session 29c) on the fake
   NIC: each test failed on the header before its fix. */
#include "fake_env.h"

/* >>batches: "posted with a handle, the part taken ends (flushed, or done where it had already
   run) before the call returns and its places are free"; and, as for every call that stops work
   (the blocking calls, scopes, many-peer calls), "only if the channel could not stop it ... is
   the result SFV_ERR_DRIVER instead, saying the buffers are still the NIC's". A read batch the
   verb took only in part, whose channel then could not stop the part taken (its move to ERR and
   its QP's destroy both refused), said SFV_ERR_BROKEN with no word of that: the program took its
   buffers back while the NIC could still write them. The same for a request list. */
static void b_partial_cannot_stop(int kind) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_scatter_element s[3];
    sfv_remote_mr r[3];
    sfv_read_request rq[3];
    sfv_pending p;
    int i;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    for (i = 0; i < 3; i++) {
        s[i] = sfv_mr_scatter_element(e.mr, e.buf + 8 * i, 8);
        r[i] = tf_at(&e, 1024 + 8 * (size_t)i);
        rq[i].sges = &s[i];
        rq[i].n = 1;
        rq[i].remote = r[i];
    }
    fk_set_partial_post(2);
    fk_fail_name("ibv_post_send", 1);
    fk_fail_name("ibv_modify_qp", 1); /* the abort's move to ERR */
    fk_fail_name("ibv_destroy_qp", 1); /* and then the QP's destroy */
    CHECK_RESULT(kind == 0 ? sfv_channel_post_read_batch(a, s, 1, 3, r, &p) : sfv_channel_post_reads(a, rq, 3, &p), SFV_ERR_DRIVER);
    CHECK_MSG("still the NIC's");
    fk_reset();
    CHECK_EQ(sfv_channel_outstanding(a), 2); /* still posted */
    CHECK_RESULT(sfv_pending_wait(&p, 0, NULL), SFV_ERR_INVALID); /* the part taken has no handle */
    CHECK_OK(sfv_destroy_channel(a)); /* the verbs work again: the destroy stops it */
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}
static void t_partial_batch_cannot_stop(void) { b_partial_cannot_stop(0); }
static void t_partial_requests_cannot_stop(void) { b_partial_cannot_stop(1); }

/* Every failure has a matching sfv_last_error(): an SRQ's receive (batch) with more elements
   than the SRQ takes (its desc.max_sge) said "over the channel's 4", naming a channel's limit
   where none is involved (a channel on the SRQ may take more of its own: 8 here), as its partial
   batch once named a channel (test_review.c t_srq_partial_batch_names_srq). */
static void t_srq_batch_elements_name_srq(void) {
    tf_env e;
    sfv_srq *srq;
    sfv_srq_desc sd;
    sfv_channel_desc d;
    sfv_channel *a;
    sfv_pending ps[2];
    sfv_scatter_element s[10];
    int i;
    tf_open(&e, 4096);
    memset(&sd, 0, sizeof sd);
    sd.max_sge = 4;
    CHECK_OK(sfv_create_srq(e.pd, &sd, &srq));
    memset(&d, 0, sizeof d);
    d.srq = srq;
    d.max_recv_sge = 8;
    CHECK_OK(sfv_create_channel(e.pd, &d, &a));
    for (i = 0; i < 10; i++) s[i] = sfv_mr_scatter_element(e.mr, e.buf + 16 * i, 16);
    CHECK_RESULT(sfv_srq_post_receive_batch(srq, s, 5, 2, ps), SFV_ERR_INVALID);
    CHECK_MSG("5 elements, over the SRQ's 4");
    CHECK_RESULT(sfv_srq_post_receive(srq, s, 5, ps), SFV_ERR_INVALID);
    CHECK_MSG("5 elements, over the SRQ's 4");
    CHECK_OK(sfv_srq_post_receive_batch(srq, s, 4, 2, ps)); /* what it takes */
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_srq(srq));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_partial_batch_cannot_stop, 10),
    TEST(t_partial_requests_cannot_stop, 10),
    TEST(t_srq_batch_elements_name_srq, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
