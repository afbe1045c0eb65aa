/* test_inflight_fake.c - SFV_TRACK_INFLIGHT (>>impl inflight) on the fake NIC, in a debug build
   whatever the Makefile's CFLAGS say: memory the NIC may still touch stays tracked. Here, work a
   scope's or a many-peer call's deadline could not stop (moving the queue pair to ERR and
   destroying it both refused): the call says SFV_ERR_DRIVER, "its buffers are still the NIC's",
   so they must stay in flight (a post over them is a broken contract) until the channel is
   destroyed, as after a blocking call that could not stop its work. SFV_ASSERT reports and
   returns here (the header lets a program define it so), so the test counts broken contracts.
   And an SRQ's failure, whose receives are said done only once no queue pair on it can take one:
   a channel whose move to ERR is refused is not stopped until its queue pair is destroyed.
   And a post the verb refuses, whole or in part: the memory it did not hand over is as it was,
   valgrind's definedness included (tests/nodev/run.sh runs that test under valgrind too). And
   sfv_dereg_mr of an MR whose lkey equals that of another PD's MR over the same bytes, in use
   there (two devices count their keys each on its own): no broken contract. And (from a review
   of those fixes) an MR in use through a second sfv_pd that wraps the same verbs PD, a DMA-BUF MR
   registered while a channel is being made or used through such a wrapped PD. */
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
/* ibv_modify_qp, as safeverbs.h calls it here, goes through tr_modify_qp (below): a test can run
   something of another thread's at that point of a channel's creation. */
#define ibv_modify_qp tr_modify_qp
#include "fake_env.h"

static sfv_scatter_element ti_s;

/* The scope's receive (nobody sends), then the verbs that could stop it refuse. */
static sfv_result ti_post_stuck(sfv_channel *ch, void *user) {
    (void)user;
    CHECK_OK(sfv_channel_post_receive(ch, &ti_s, 1, NULL));
    fk_fail_name("ibv_modify_qp", 1);
    fk_fail_name("ibv_destroy_qp", 1);
    return SFV_OK;
}

/* After the stuck work: it still holds its place, and its bytes are still in flight. */
static void ti_still_in_flight(tf_env *e, sfv_channel *stuck, sfv_channel *other) {
    sfv_pending p;
    int before = asserts;
    CHECK_RESULT(sfv_channel_post_receive(other, &ti_s, 1, &p), SFV_ERR_INVALID); /* the NIC may still write them */
    CHECK(asserts > before);
    CHECK_EQ(sfv_channel_outstanding(stuck), 1); /* still posted */
    before = asserts;
    CHECK_RESULT(sfv_dereg_mr(e->mr), SFV_ERR_INVALID); /* ... through this MR */
    CHECK(asserts > before);
    CHECK_OK(sfv_destroy_channel(stuck)); /* the verbs work again: the destroy stops it */
    CHECK_EQ(sfv_channel_outstanding(other), 0);
    CHECK_OK(sfv_channel_post_receive(other, &ti_s, 1, &p)); /* the program's again */
}

static void t_scope_cannot_stop(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scope_report rep;
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.timeout_ms = 100;
    tf_pair(&e, &d, &a, &b);
    ti_s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_RESULT(sfv_channel_scope(a, ti_post_stuck, NULL, &rep), SFV_ERR_SCOPE_AUTOPOLL);
    CHECK_EQ(rep.failed, 1);
    CHECK_EQ(rep.first_error.result, SFV_ERR_DRIVER);
    ti_still_in_flight(&e, a, b);
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static void t_many_peer_cannot_stop(void) {
    tf_env e;
    sfv_multi_channel *m;
    sfv_channel *b;
    sfv_channel_desc d;
    sfv_endpoint em, eb;
    sfv_peer_receive req;
    sfv_work_completion wc;
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.timeout_ms = 100;
    CHECK_OK(sfv_create_multi_channel(e.pd, 1, &d, &m));
    CHECK_OK(sfv_create_channel(e.pd, &d, &b));
    CHECK_OK(sfv_multi_channel_endpoints(m, &em, 1));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK_OK(sfv_channel_handshake(b, &em));
    CHECK_OK(sfv_multi_channel_handshake(m, &eb, 1));
    ti_s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    req.peer = 0;
    req.sges = &ti_s;
    req.n = 1;
    fk_fail_name("ibv_modify_qp", 1);
    fk_fail_name("ibv_destroy_qp", 1);
    CHECK_RESULT(sfv_multi_channel_gather_receive(m, &req, 1, &wc), SFV_ERR_DRIVER); /* nobody sends */
    CHECK_EQ(wc.result, SFV_ERR_DRIVER);
    {
        sfv_pending p;
        int before = asserts;
        CHECK_RESULT(sfv_channel_post_receive(b, &ti_s, 1, &p), SFV_ERR_INVALID); /* the NIC may still write them */
        CHECK(asserts > before);
    }
    CHECK_EQ(sfv_channel_outstanding(sfv_multi_channel_peer(m, 0)), 1); /* still posted */
    CHECK_OK(sfv_destroy_multi_channel(m));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* An SRQ whose CQ failed, with a channel on it (its receives from the SRQ) and its peer. */
typedef struct ti_srq { tf_env e; sfv_srq *srq; sfv_channel *a, *b; sfv_pending rx; } ti_srq;
static void ti_srq_fail(ti_srq *t, bool destroy_refused) {
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
    ti_s = sfv_mr_scatter_element(t->e.mr, t->e.buf, 64);
    CHECK_OK(sfv_srq_post_receive(t->srq, &ti_s, 1, &t->rx));
    fk_fail_name("ibv_modify_qp", 1); /* the channel's move to ERR */
    if (destroy_refused) fk_fail_name("ibv_destroy_qp", 1);
    fk_inject_async_event(sfv_context_raw(t->e.ctx), IBV_EVENT_CQ_ERR, sfv_channel_raw_qp(t->a)->recv_cq, 0);
}
static void ti_srq_close(ti_srq *t) {
    CHECK_OK(sfv_destroy_channel(t->a));
    CHECK_OK(sfv_destroy_channel(t->b));
    CHECK_OK(sfv_destroy_srq(t->srq));
    tf_close(&t->e);
}

/* The move to ERR refused: the queue pair is destroyed before the receive is said flushed, so
   no message lands in the buffer the program has back. */
static void t_srq_failure_stops_unmoved_qp(void) {
    ti_srq t;
    sfv_gather_element g;
    sfv_work_completion wc;
    sfv_pending tx;
    ti_srq_fail(&t, false);
    CHECK_RESULT(sfv_pending_wait(&t.rx, -1, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    CHECK(sfv_channel_raw_qp(t.a) == NULL); /* stopped */
    memset(t.e.buf, 0, 64); /* the program's again */
    memset(t.e.buf + 1024, 0x77, 16);
    g = sfv_mr_gather_element(t.e.mr, t.e.buf + 1024, 16);
    CHECK_OK(sfv_channel_post_send(t.b, &g, 1, &tx));
    CHECK(sfv_pending_wait(&tx, 300, NULL) != SFV_OK); /* no receiver: never delivered */
    CHECK_EQ(t.e.buf[0], 0);
    ti_srq_close(&t);
}

/* Destroying it refused too: the receive stays the NIC's (in flight) until the SRQ goes. */
static void t_srq_failure_cannot_stop(void) {
    ti_srq t;
    sfv_pending p;
    int before;
    ti_srq_fail(&t, true);
    CHECK(sfv_pending_wait(&t.rx, 50, NULL) != SFV_ERR_WORK); /* never "flushed, buffers free" */
    before = asserts;
    CHECK_RESULT(sfv_channel_post_receive(t.b, &ti_s, 1, &p), SFV_ERR_INVALID); /* the NIC may still write them */
    CHECK(asserts > before);
    CHECK_OK(sfv_destroy_channel(t.a)); /* the verbs work again */
    CHECK_OK(sfv_destroy_srq(t.srq));
    CHECK_OK(sfv_channel_post_receive(t.b, &ti_s, 1, &p)); /* the program's again */
    CHECK_OK(sfv_destroy_channel(t.b));
    tf_close(&t.e);
}

/* Valgrind's count of errors so far (0 outside valgrind). */
static unsigned ti_errors(void) {
#if SFV__VALGRIND
    return (unsigned)VALGRIND_COUNT_ERRORS;
#else
    return 0;
#endif
}
/* Branches on every byte of [p, p + len): valgrind reports it if any is undefined. */
static size_t ti_nonzero(const unsigned char *p, size_t len) {
    size_t i, n = 0;
    for (i = 0; i < len; i++)
        if (p[i]) n++;
    return n;
}
/* The receive's bytes were defined (the program wrote them) and stay so after the verb refused
   the post, whole (one receive) or in part (a batch: the receives it took are the NIC's, in
   flight, the others the program's as before). Under valgrind, a branch on them reports
   nothing; before, they came back from the refused post as undefined. */
static void t_refused_post_keeps_memory(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scatter_element s[4];
    sfv_pending p[4];
    unsigned before;
    int i;
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.timeout_ms = 100;
    tf_pair(&e, &d, &a, &b);
    memset(e.buf, 0x5a, 4096);
    for (i = 0; i < 4; i++) s[i] = sfv_mr_scatter_element(e.mr, e.buf + i * 256, 256);
    fk_fail_name("ibv_post_recv", 1);
    CHECK(sfv_channel_post_receive(a, &s[0], 1, &p[0]) != SFV_OK);
    before = ti_errors();
    CHECK_EQ(ti_nonzero(e.buf, 256), 256);
    CHECK_EQ(ti_errors(), before);
    fk_set_partial_post(2); /* the verb refuses the list after taking two of the four */
    fk_fail_name("ibv_post_recv", 1);
    CHECK(sfv_channel_post_receive_batch(a, s, 1, 4, p) != SFV_OK);
    fk_set_partial_post(0);
    CHECK_EQ(sfv_channel_outstanding(a), 2);
    before = ti_errors();
    CHECK_EQ(ti_nonzero(e.buf + 512, 512), 512); /* the two it did not take */
    CHECK_EQ(ti_errors(), before);
    CHECK_OK(sfv_destroy_channel(a)); /* the two it took flushed and given back */
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* One buffer registered in two PDs (as on two devices) under the same lkey; a receive in flight
   through the second MR. The first MR is not in use: its deregistration is no broken contract,
   and succeeds; the second's is refused while the receive is in flight. */
static void t_dereg_same_lkey_other_pd(void) {
    tf_env e;
    sfv_pd *pd2;
    sfv_mr *mr2;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scatter_element s;
    sfv_pending p;
    int before;
    tf_open(&e, 4096);
    CHECK_OK(sfv_alloc_pd(e.ctx, &pd2));
    fk_set_next_key(sfv_mr_lkey(e.mr));
    CHECK_OK(sfv_reg_mr_shared(pd2, e.buf, 4096, &mr2));
    CHECK_EQ(sfv_mr_lkey(mr2), sfv_mr_lkey(e.mr));
    memset(&d, 0, sizeof d);
    d.timeout_ms = 100;
    CHECK_OK(sfv_create_channel(pd2, &d, &a));
    CHECK_OK(sfv_create_channel(pd2, &d, &b));
    tf_connect(a, b);
    s = sfv_mr_scatter_element(mr2, e.buf, 64);
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &p));
    before = asserts;
    CHECK_RESULT(sfv_dereg_mr(mr2), SFV_ERR_INVALID); /* in use */
    CHECK(asserts > before);
    before = asserts;
    CHECK_OK(sfv_dereg_mr(e.mr)); /* not in use: the same lkey, another PD */
    CHECK_EQ(asserts, before);
    e.mr = NULL;
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dereg_mr(mr2));
    CHECK_OK(sfv_dealloc_pd(pd2));
    tf_close(&e);
}

#undef ibv_modify_qp
int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask); /* the fake's */
static void (*tr_at_init)(void); /* run once, at the next move to INIT */
int tr_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask) {
    if (tr_at_init && (attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_INIT) {
        void (*const fn)(void) = tr_at_init;
        tr_at_init = NULL;
        fn();
    }
    return ibv_modify_qp(qp, attr, attr_mask);
}

/* sfv_dereg_mr of an MR whose bytes a receive in flight will write, the receive posted on a
   channel of a second sfv_pd that wraps the same ibv_pd (sfv_pd_wrap of sfv_pd_raw): the NIC
   takes the element (one PD, one lkey), so the MR is in use. Session 21 narrowed the in-flight
   check to channels whose sfv_pd is the MR's own (for equal lkeys of two devices), and the dereg
   went through, no broken contract reported, while the NIC may still write the buffer. */
static void t_dereg_in_use_through_wrapped_pd(void) {
    tf_env e;
    sfv_pd *alias;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scatter_element s;
    sfv_pending p;
    int before;
    tf_open(&e, 4096);
    CHECK_OK(sfv_pd_wrap(e.ctx, sfv_pd_raw(e.pd), false, &alias));
    memset(&d, 0, sizeof d);
    d.timeout_ms = 100;
    CHECK_OK(sfv_create_channel(alias, &d, &a));
    CHECK_OK(sfv_create_channel(alias, &d, &b));
    tf_connect(a, b);
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &p));
    before = asserts;
    CHECK_RESULT(sfv_dereg_mr(e.mr), SFV_ERR_INVALID); /* in use: the NIC may write it */
    CHECK(asserts > before);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dealloc_pd(alias));
    tf_close(&e);
}

/* Another thread registers a DMA-BUF MR on the PD while this one makes a channel on it, the
   registration landing after the channel's inline limit was set (under ev_lock, from
   the context's dmabuf flag, still false) and before the channel's pd field was (after its QP's move to INIT):
   sfv__pd_no_inline walked the context's channels comparing ch->pd, NULL on the channel being
   made, and missed it. The channel then sent a DMA-BUF element inline: the CPU copied from the
   iova (here the fake's copy faults). The registration is run from the channel's move to INIT
   (tr_modify_qp), the point in that window where the other thread's call would land. */
static tf_env *tr_env;
static sfv_mr *tr_dm;
static const uint64_t tr_iova = 0xffff900000000000ull; /* no host address: a CPU read of it faults */
static void tr_reg_dmabuf(void) { CHECK_OK(sfv_reg_dmabuf_mr_local(tr_env->pd, 3, 0, 4096, tr_iova, &tr_dm)); }
static void t_dmabuf_during_channel_creation(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_pending p;
    sfv_work_completion wc;
    sfv_gather_element g;
    fk_set_dmabuf(true);
    tf_open(&e, 4096);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &b));
    tr_env = &e;
    tr_dm = NULL;
    tr_at_init = tr_reg_dmabuf;
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    CHECK(tr_at_init == NULL && tr_dm != NULL);
    tf_connect(a, b);
    CHECK_EQ(a->inline_max, 0); /* no inline once the context has a DMA-BUF MR */
    if (a->inline_max == 0) { /* (else the post below would fault in the fake's copy) */
        CHECK_OK(sfv_mr_gather_element_checked(tr_dm, (const void *)(uintptr_t)(tr_iova + 64), 16, &g));
        CHECK_OK(sfv_channel_post_send(a, &g, 1, &p));
        CHECK_RESULT(sfv_pending_wait(&p, 1000, &wc), SFV_ERR_WORK);
        CHECK_EQ(wc.status, SFV_WC_LOC_PROT_ERR); /* the NIC's read of the iova: the fake refuses it */
    }
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dereg_mr(tr_dm));
    fk_set_dmabuf(false);
    tf_close(&e);
}

/* A DMA-BUF MR registered on one sfv_pd, its element posted on a channel of a second sfv_pd that
   wraps the same verbs PD (the NIC takes it): no inline there either (the rule is the context's),
   or the CPU copies from the iova (here the fake's copy faults). */
static void t_dmabuf_through_wrapped_pd(void) {
    tf_env e;
    sfv_pd *alias;
    sfv_channel *a, *b;
    sfv_mr *dm;
    sfv_pending p;
    sfv_work_completion wc;
    sfv_gather_element g;
    fk_set_dmabuf(true);
    tf_open(&e, 4096);
    CHECK_OK(sfv_pd_wrap(e.ctx, sfv_pd_raw(e.pd), false, &alias));
    CHECK_OK(sfv_create_channel(alias, NULL, &a));
    CHECK_OK(sfv_create_channel(e.pd, NULL, &b));
    tf_connect(a, b);
    CHECK_OK(sfv_reg_dmabuf_mr_local(e.pd, 3, 0, 4096, tr_iova, &dm));
    CHECK_EQ(a->inline_max, 0);
    if (a->inline_max == 0) { /* (else the post below would fault in the fake's copy) */
        CHECK_OK(sfv_mr_gather_element_checked(dm, (const void *)(uintptr_t)(tr_iova + 64), 16, &g));
        CHECK_OK(sfv_channel_post_send(a, &g, 1, &p));
        CHECK_RESULT(sfv_pending_wait(&p, 1000, &wc), SFV_ERR_WORK);
        CHECK_EQ(wc.status, SFV_WC_LOC_PROT_ERR);
    }
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dereg_mr(dm));
    CHECK_OK(sfv_dealloc_pd(alias));
    fk_set_dmabuf(false);
    tf_close(&e);
}

/* ---- hostile review 23a: DMA-BUF MRs and the tracker's intervals ---- */
#if defined(__SANITIZE_ADDRESS__)
#define TR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TR_ASAN 1
#endif
#endif
#if TR_ASAN
#  include <sanitizer/asan_interface.h>
#endif


/* A DMA-BUF MR whose iova range ends at 2^64 (iova + length == 2^64, which registration rightly
   accepts: no byte of it wraps). The tracking of SFV_TRACK_INFLIGHT kept [lo, hi) with hi =
   addr + length, which is 0 there: an element ending at 2^64 was taken for a wrapping one and
   never tracked, and sfv_dereg_mr's check looked for [iova, 0), which nothing overlaps. So the
   MR was deregistered under a receive in flight (the doc: refused, after SFV_ASSERT), and two
   receives over the same bytes of it were no data race. */
static void t_dmabuf_top_of_iova_tracked(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_mr *dm;
    sfv_scatter_element s;
    sfv_pending p, q;
    sfv_result r;
    int before;
    const uint64_t iova = UINT64_MAX - 4095; /* [2^64 - 4096, 2^64) */
    fk_set_dmabuf(true);
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    CHECK_OK(sfv_reg_dmabuf_mr_local(e.pd, 3, 0, 4096, iova, &dm));
    CHECK_OK(sfv_mr_scatter_element_checked(dm, (void *)(uintptr_t)(iova + (4096 - 64)), 64, &s)); /* its last 64 bytes */
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &p));
    before = asserts;
    CHECK_RESULT(sfv_channel_post_receive(b, &s, 1, &q), SFV_ERR_INVALID); /* the NIC may write them twice */
    CHECK(asserts > before);
    before = asserts;
    r = sfv_dereg_mr(dm);
    CHECK_EQ(r, SFV_ERR_INVALID); /* in use: the NIC may write it */
    CHECK(asserts > before);
    CHECK_OK(sfv_destroy_channel(a)); /* the receive flushed with it */
    CHECK_OK(sfv_destroy_channel(b));
    if (r != SFV_OK) CHECK_OK(sfv_dereg_mr(dm));
    fk_set_dmabuf(false);
    tf_close(&e);
}

/* Two DMA-BUF MRs (two buffers) registered at the same iova: each MR is addressed in its own
   iova space, so a receive into each is no overlap. The tracking keyed every element by its
   address alone, as if it were host memory: the second post was refused as a "data race" after
   SFV_ASSERT (abort by default), in a program that broke no rule. */
static void t_dmabuf_same_iova_no_race(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_mr *dm1, *dm2;
    sfv_scatter_element s1, s2;
    sfv_pending p1, p2;
    int before = asserts;
    fk_set_dmabuf(true);
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    CHECK_OK(sfv_reg_dmabuf_mr_local(e.pd, 3, 0, 4096, 0x10000, &dm1));
    CHECK_OK(sfv_reg_dmabuf_mr_local(e.pd, 4, 0, 4096, 0x10000, &dm2));
    CHECK_OK(sfv_mr_scatter_element_checked(dm1, (void *)(uintptr_t)0x10000, 64, &s1));
    CHECK_OK(sfv_mr_scatter_element_checked(dm2, (void *)(uintptr_t)0x10000, 64, &s2));
    CHECK_OK(sfv_channel_post_receive(a, &s1, 1, &p1));
    CHECK_OK(sfv_channel_post_receive(b, &s2, 1, &p2));
    CHECK_EQ(asserts, before);
    /* the same bytes of one MR twice still are a race */
    CHECK_RESULT(sfv_channel_post_receive(b, &s1, 1, &p2), SFV_ERR_INVALID);
    CHECK(asserts > before);
    before = asserts;
    CHECK_RESULT(sfv_dereg_mr(dm2), SFV_ERR_INVALID); /* its receive is in flight */
    CHECK(asserts > before);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dereg_mr(dm1));
    CHECK_OK(sfv_dereg_mr(dm2));
    fk_set_dmabuf(false);
    tf_close(&e);
}

/* A DMA-BUF MR whose iova happens to equal the address of host memory (the program's own buffer,
   in flight through a host MR, or just in use): the iova is no host memory, so posting into it
   neither races with the host buffer's work nor hands the host bytes to the NIC. The tracking
   took the iova for a host address: a false "data race" (SFV_ASSERT), and under ASan the host
   buffer was poisoned (under valgrind made NOACCESS) while the DMA-BUF receive was in flight. */
static void t_dmabuf_iova_is_no_host_memory(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_mr *dm;
    sfv_scatter_element host, dev;
    sfv_pending p1, p2;
    int before = asserts;
    uint64_t iova;
    fk_set_dmabuf(true);
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    iova = (uint64_t)(uintptr_t)e.buf; /* offset = its offset within a page, as the rule wants */
    CHECK_OK(sfv_reg_dmabuf_mr_local(e.pd, 3, iova & 4095, 256, iova, &dm));
    CHECK_OK(sfv_mr_scatter_element_checked(dm, e.buf, 64, &dev));
    CHECK_OK(sfv_channel_post_receive(b, &dev, 1, &p2)); /* into the device buffer */
    CHECK_EQ(asserts, before);
#if TR_ASAN
    CHECK(!__asan_region_is_poisoned(e.buf, 64)); /* the host bytes are still the program's */
#endif
    e.buf[0] = 1; /* (no report under ASan) */
    host = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_channel_post_receive(a, &host, 1, &p1)); /* into the host buffer: no overlap */
    CHECK_EQ(asserts, before);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dereg_mr(dm));
    fk_set_dmabuf(false);
    tf_close(&e);
}

/* An element index whose offset passes 2^64: refused (right), but the message named an offset of
   +18446744073709551615 that nobody asked for ("[+18446744073709551615, +8 bytes) is not within
   its 100 bytes"); it now names the element and the field. */
static void t_array_field_overflow_message(void) {
    sfv_remote_mr r = sfv_remote_mr_make(0x1000, 100, 7), f;
    CHECK_RESULT(sfv_remote_mr_array_field(r, 16, UINT64_MAX / 8, 0, 8, &f), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK(f.addr == 0 && f.length == 0 && f.rkey == 0);
    CHECK(!strstr(sfv_last_error()->message, "18446744073709551615"));
    CHECK_MSG("element 2305843009213693951");
    CHECK_RESULT(sfv_remote_mr_array_field(r, UINT64_MAX, 2, 0, 8, &f), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_MSG("past 2^64");
}

/* Decoding NULL input of a plausible size: refused (right), with "input too short", which sent
   the reader looking at the size; it says the input is NULL. */
static void t_decode_null_message(void) {
    sfv_remote_mr r;
    CHECK_RESULT(sfv_remote_mr_decode(NULL, SFV_REMOTE_MR_ENCODED_SIZE, &r), SFV_ERR_INVALID);
    CHECK_MSG("NULL");
}

static const harness_test TESTS[] = {
    TEST(t_scope_cannot_stop, 10),
    TEST(t_many_peer_cannot_stop, 10),
    TEST(t_srq_failure_stops_unmoved_qp, 10),
    TEST(t_srq_failure_cannot_stop, 10),
    TEST(t_refused_post_keeps_memory, 10),
    TEST(t_dereg_same_lkey_other_pd, 10),
    TEST(t_dmabuf_during_channel_creation, 10),
    TEST(t_dereg_in_use_through_wrapped_pd, 10),
    TEST(t_dmabuf_through_wrapped_pd, 10),
    TEST(t_dmabuf_top_of_iova_tracked, 10),
    TEST(t_dmabuf_same_iova_no_race, 10),
    TEST(t_dmabuf_iova_is_no_host_memory, 10),
    TEST(t_array_field_overflow_message, 10),
    TEST(t_decode_null_message, 10),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
