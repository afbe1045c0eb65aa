/* test_rev28f.c - hostile review 28f on the fake NIC: the debug build's in-flight tracking
   (>>impl inflight), the blocking calls and SRQs (>>srq). Each test failed on the header before
   its fix. SFV_ASSERT reports and returns here (the header lets a program define it so), so a
   test counts broken contracts. */
#define _GNU_SOURCE
#undef NDEBUG
#ifndef SFV_DEBUG
#define SFV_DEBUG 1
#endif
#include "fake_verbs.h"
static int asserts; /* contracts broken so far */
#define SFV_ASSERT(c)            \
    do {                         \
        if (!(c)) asserts++;     \
    } while (0)
/* ibv_modify_qp, as safeverbs.h calls it here, goes through tq_modify_qp (below): a test can
   have the peer act at that point of an abort, as another process would. */
#define ibv_modify_qp tq_modify_qp
#include "fake_env.h"

#undef ibv_modify_qp
int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask); /* the fake's */
static void (*tq_at_err)(void); /* run once, at the next move to ERR */
int tq_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask) {
    if (tq_at_err && (attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_ERR) {
        void (*const fn)(void) = tq_at_err;
        tq_at_err = NULL;
        fn();
    }
    return ibv_modify_qp(qp, attr, attr_mask);
}

/* An SRQ with one receive posted (over buf[0, 64)), a channel `a` on it and its peer `b`. */
typedef struct tq_srq { tf_env e; sfv_srq *srq; sfv_channel *a, *b; sfv_pending rx; sfv_scatter_element s; } tq_srq;
static void tq_srq_open(tq_srq *t) {
    sfv_channel_desc d;
    tf_open(&t->e, 4096);
    CHECK_OK(sfv_create_srq(t->e.pd, NULL, &t->srq));
    memset(&d, 0, sizeof d);
    d.timeout_ms = 100;
    d.srq = t->srq;
    CHECK_OK(sfv_create_channel(t->e.pd, &d, &t->a));
    d.srq = NULL;
    CHECK_OK(sfv_create_channel(t->e.pd, &d, &t->b));
    tf_connect(t->a, t->b);
    t->s = sfv_mr_scatter_element(t->e.mr, t->e.buf, 64);
    CHECK_OK(sfv_srq_post_receive(t->srq, &t->s, 1, &t->rx));
}
static void tq_srq_close(tq_srq *t) {
    CHECK_OK(sfv_destroy_channel(t->a));
    CHECK_OK(sfv_destroy_channel(t->b));
    CHECK_OK(sfv_destroy_srq(t->srq));
    tf_close(&t->e);
}

/* Promise (>>srq, >>impl inflight): an SRQ's failure says its receives flushed, their buffers
   the program's again, only once no queue pair on it can take one. Input: a channel on the SRQ
   whose blocking send could not be stopped earlier (its move to ERR and its QP's destroy both
   refused: SFV_ERR_DRIVER), so it is `aborted` with its QP still in RTS; then the SRQ's CQ
   fails. The SRQ's stop skipped every channel aborted before, so it called the receive flushed
   (and gave its buffer back) while that QP could still take it: a message then landed in the
   buffer the program had back. */
static void t_srq_failure_stops_earlier_stuck_qp(void) {
    tq_srq t;
    sfv_gather_element g;
    sfv_work_completion wc;
    sfv_pending tx;
    tq_srq_open(&t);
    g = sfv_mr_gather_element(t.e.mr, t.e.buf + 2048, 16);
    fk_fail_name("ibv_modify_qp", 1); /* the abort of the send below cannot stop it */
    fk_fail_name("ibv_destroy_qp", 1);
    CHECK_RESULT(sfv_channel_send(t.a, &g, 1, &wc), SFV_ERR_DRIVER); /* b posted no receive */
    fk_inject_async_event(sfv_context_raw(t.e.ctx), IBV_EVENT_CQ_ERR, sfv_channel_raw_qp(t.a)->recv_cq, 0);
    CHECK_RESULT(sfv_pending_wait(&t.rx, -1, &wc), SFV_ERR_WORK); /* said flushed: nothing may take it now */
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    CHECK(sfv_channel_raw_qp(t.a) == NULL); /* stopped (its destroy works again) */
    memset(t.e.buf, 0, 64); /* the program's again */
    memset(t.e.buf + 1024, 0x77, 16);
    g = sfv_mr_gather_element(t.e.mr, t.e.buf + 1024, 16);
    CHECK_OK(sfv_channel_post_send(t.b, &g, 1, &tx));
    CHECK(sfv_pending_wait(&tx, 300, NULL) != SFV_OK); /* no receiver: never delivered */
    CHECK_EQ(t.e.buf[0], 0);
    tq_srq_close(&t);
}

/* Promise (>>pending: wc is the completion; >>channel's blocking calls: work that completed
   as the flush began keeps its own result): a message that came into an SRQ receive just as
   the SRQ's failure stopped its channels is no flush. Input: the SRQ fails (SRQ_ERR) and, as
   its wait moves the channel on it to ERR, the peer's message lands in the receive (its
   completion in the SRQ's CQ). The stop marked every receive still in flight flushed without
   reading the SRQ's CQ: the wait said WR_FLUSH_ERR for a receive whose bytes were there, its
   completion dropped. */
static tq_srq *tq_t;
static sfv_pending tq_tx;
static void tq_peer_sends(void) {
    sfv_gather_element g;
    memset(tq_t->e.buf + 1024, 0x77, 16);
    g = sfv_mr_gather_element(tq_t->e.mr, tq_t->e.buf + 1024, 16);
    CHECK_OK(sfv_channel_post_send(tq_t->b, &g, 1, &tq_tx));
}
static void t_srq_failure_reads_late_receive(void) {
    tq_srq t;
    sfv_work_completion wc;
    tq_srq_open(&t);
    tq_t = &t;
    tq_at_err = tq_peer_sends;
    fk_inject_async_event(sfv_context_raw(t.e.ctx), IBV_EVENT_SRQ_ERR, sfv_srq_raw(t.srq), 0);
    CHECK_OK(sfv_pending_wait(&t.rx, -1, &wc));
    CHECK(tq_at_err == NULL); /* (the peer sent, as the channel stopped) */
    CHECK_EQ(t.e.buf[0], 0x77);
    CHECK_EQ(wc.byte_len, 16);
    CHECK_EQ(wc.status, SFV_WC_SUCCESS);
    CHECK(wc.channel == t.a);
    CHECK_OK(sfv_pending_wait(&tq_tx, -1, NULL));
    tq_srq_close(&t);
}

static const harness_test TESTS[] = {
    TEST(t_srq_failure_reads_late_receive, 10),
    TEST(t_srq_failure_stops_earlier_stuck_qp, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
