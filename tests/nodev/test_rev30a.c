/* test_rev30a.c - hostile review 30a on the fake NIC: memory regions, elements, remote regions
   and the raw verbs. t_dmabuf_dereg_beside_post failed on the header at tag base before its
   fix; the other two check doc sentences that were false (the behaviour was right) as they read
   now. */
#define _GNU_SOURCE
#include "fake_verbs.h"
/* ibv_dereg_mr, as safeverbs.h calls it here, goes through tv_dereg_mr (below): a test can run
   code right after the verb returns, as another thread of the program would at that moment. */
#define ibv_dereg_mr tv_dereg_mr
#include "fake_env.h"

#undef ibv_dereg_mr
int ibv_dereg_mr(struct ibv_mr *mr); /* the fake's */
static void (*tv_after_dereg)(struct ibv_mr *gone); /* run once, after the next ibv_dereg_mr that succeeds */
int tv_dereg_mr(struct ibv_mr *mr) {
    const int rc = ibv_dereg_mr(mr);
    if (rc == 0 && tv_after_dereg) {
        void (*const fn)(struct ibv_mr *) = tv_after_dereg;
        tv_after_dereg = NULL;
        fn(mr); /* (mr is freed: compared, never read) */
    }
    return rc;
}

/* ---- a DMA-BUF MR deregistered while another thread posts ---- */
/* Promise (THREAD SAFETY: "MRs ... may be shared between threads"; no undefined behaviour for any
   order of calls): a debug build (SFV_TRACK_INFLIGHT) looks up every posted element's lkey in the
   process's list of DMA-BUF MRs, reading each listed MR's struct ibv_mr (sfv__iv_node).
   sfv_dereg_mr of a DMA-BUF MR freed that ibv_mr (ibv_dereg_mr) first and took the MR off the
   list only after: a post on another thread in between, of any memory, read freed memory
   (ASan: heap-use-after-free). Here the post runs right after the verb, as that thread would. */
static tf_env *tv_env;
static sfv_channel *tv_a, *tv_b;
static void tv_post_after_dmabuf_dereg(struct ibv_mr *gone) {
    const sfv_mr *m;
    sfv_scatter_element s = sfv_mr_scatter_element(tv_env->mr, tv_env->buf, 64);
    sfv_gather_element g = sfv_mr_gather_element(tv_env->mr, tv_env->buf + 1024, 64);
    sfv_pending rx, tx;
    for (m = sfv__iv_dmabufs; m; m = m->iv_next)
        if (m->mr == gone) FAIL("a DMA-BUF MR whose ibv_mr is freed is still listed: every post reads it");
    CHECK_OK(sfv_channel_post_receive(tv_b, &s, 1, &rx));
    CHECK_OK(sfv_channel_post_send(tv_a, &g, 1, &tx));
    CHECK_OK(sfv_pending_wait(&tx, 1000, NULL));
    CHECK_OK(sfv_pending_wait(&rx, 1000, NULL));
}
static void t_dmabuf_dereg_beside_post(void) {
    tf_env e;
    sfv_mr *dm;
    fk_set_dmabuf(true);
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &tv_a, &tv_b);
    tv_env = &e;
    CHECK_OK(sfv_reg_dmabuf_mr_local(e.pd, 3, 0, 4096, 0x200000000ull, &dm));
    /* a refused deregistration keeps it listed: its elements are still iovas */
    fk_fail_name("ibv_dereg_mr", 1);
    CHECK_RESULT(sfv_dereg_mr(dm), SFV_ERR_DRIVER);
    fk_fail_name("ibv_dereg_mr", 0);
    CHECK(sfv__iv_dmabufs == dm);
    tv_after_dereg = tv_post_after_dmabuf_dereg;
    CHECK_OK(sfv_dereg_mr(dm));
    CHECK(tv_after_dereg == NULL);
    CHECK(sfv__iv_dmabufs == NULL);
    CHECK_OK(sfv_destroy_channel(tv_a));
    CHECK_OK(sfv_destroy_channel(tv_b));
    tf_close(&e);
    fk_reset();
}

/* ---- a channel's raw QP ---- */
/* Promise (RAW VERBS, >>raw verbs): the raw objects are "valid as long as [their] handle is". A
   channel's QP is not: sfv_channel_reset destroys it and makes another (a new qp_num), and a
   channel whose blocking call's deadline passed on a NIC that never flushes destroys its QP and
   lives on without one, so a QP kept from sfv_channel_raw_qp (to ibv_query_qp, as the rules
   allow) was freed memory while the channel lived. The behaviour is right (the channel must
   replace the QP); the sentence was false and now says so. This checks what it says now. */
static void t_raw_qp_replaced(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_gather_element g;
    uint32_t qpn;
    const long qps = fk_live(FK_QP);
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.timeout_ms = 50;
    tf_pair(&e, &d, &a, &b);
    CHECK(sfv_channel_raw_qp(a) != NULL);
    qpn = sfv_channel_raw_qp(a)->qp_num;
    CHECK_OK(sfv_channel_reset(a)); /* the old QP destroyed, another made */
    CHECK_EQ(fk_live(FK_QP), qps + 2);
    CHECK(sfv_channel_raw_qp(a) != NULL && sfv_channel_raw_qp(a)->qp_num != qpn);
    CHECK_OK(sfv_channel_reset(b));
    tf_connect(a, b);
    fk_set_no_flush(true);
    g = sfv_mr_gather_element(e.mr, e.buf, 16);
    CHECK_RESULT(sfv_channel_send(a, &g, 1, NULL), SFV_ERR_TIMEOUT); /* no receive at b; no flush: the QP goes */
    CHECK(sfv_channel_raw_qp(a) == NULL);
    CHECK_EQ(fk_live(FK_QP), qps + 1);
    fk_set_no_flush(false);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
    fk_reset();
}

/* ---- a PD wrapped without ownership, and an SRQ on it ---- */
/* Promise (sfv_pd_wrap: without take_ownership, "dealloc it yourself after sfv_dealloc_pd and
   after every MR, channel, multi-channel and node made on it is destroyed"). The list left out
   SRQs: an SRQ holds a reference on its PD and its verbs SRQ lives on the verbs PD, so a program
   that followed the sentence with an SRQ still alive deallocated a PD in use (refused by the
   kernel; then closing the device under the SRQ, whose destroy later reads it). The behaviour is
   right; the sentence now names SRQs. This checks what it says now. */
static void t_pd_wrap_srq_holds_it(void) {
    sfv_context *ctx;
    sfv_pd *wrap;
    sfv_srq *srq;
    struct ibv_pd *raw;
    CHECK_OK(sfv_open_device(NULL, &ctx));
    raw = ibv_alloc_pd(sfv_context_raw(ctx));
    CHECK(raw != NULL);
    CHECK_OK(sfv_pd_wrap(ctx, raw, false, &wrap));
    CHECK_OK(sfv_create_srq(wrap, NULL, &srq));
    CHECK_OK(sfv_dealloc_pd(wrap)); /* the caller's reference: the SRQ keeps the PD */
    CHECK(sfv_srq_raw(srq) != NULL && sfv_srq_raw(srq)->pd == raw); /* still on the verbs PD */
    CHECK_OK(sfv_destroy_srq(srq)); /* now the wrap is gone, and the verbs PD is free */
    CHECK_EQ(ibv_dealloc_pd(raw), 0);
    CHECK_OK(sfv_close_device(ctx));
    CHECK_EQ(fk_live_total(), 0);
}

static const harness_test TESTS[] = {
    TEST(t_dmabuf_dereg_beside_post, 10),
    TEST(t_raw_qp_replaced, 10),
    TEST(t_pd_wrap_srq_holds_it, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
