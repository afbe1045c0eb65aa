/* test_assert_returns.c - broken contracts where the program's SFV_ASSERT reports and returns
   (the header lets a program define it so): the call still keeps every promise it can. Here, a
   stale copy of a consumed pending handle, waited on after its place was reused by other work:
   never a success, never another work request taken for it, and the queue's count of places
   stays right. A post into a handle that still holds work, a channel destroyed twice, and a
   context, PD and SRQ released twice while children keep them. On the
   fake NIC (make check-nodev). */
#define _GNU_SOURCE
#include "fake_verbs.h"
static int asserts; /* contracts broken so far */
#define SFV_ASSERT(c)                                                                        \
    do {                                                                                     \
        if (!(c)) asserts++;                                                                 \
    } while (0)
#define SFV_MALLOC(sz) fk_malloc(sz)
#define SFV_CALLOC(n, sz) fk_calloc(n, sz)
#define SFV_FREE(p) fk_free(p)
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "harness.h"

typedef struct ta_env {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_channel *a, *b;
    unsigned char *buf;
} ta_env;

/* Two connected channels whose send queues hold 4, waits of 50 ms. */
static void ta_open(ta_env *e) {
    sfv_channel_desc d;
    sfv_endpoint ea, eb;
    memset(e, 0, sizeof *e);
    e->buf = (unsigned char *)calloc(1, 4096);
    CHECK(e->buf != NULL);
    CHECK_OK(sfv_open_device(NULL, &e->ctx));
    CHECK_OK(sfv_alloc_pd(e->ctx, &e->pd));
    CHECK_OK(sfv_reg_mr_shared(e->pd, e->buf, 4096, &e->mr));
    memset(&d, 0, sizeof d);
    d.max_send_wr = 4;
    d.timeout_ms = 50;
    CHECK_OK(sfv_create_channel(e->pd, &d, &e->a));
    CHECK_OK(sfv_create_channel(e->pd, &d, &e->b));
    CHECK_OK(sfv_channel_endpoint(e->a, &ea));
    CHECK_OK(sfv_channel_endpoint(e->b, &eb));
    CHECK_OK(sfv_channel_handshake(e->b, &ea));
    CHECK_OK(sfv_channel_handshake(e->a, &eb));
}
static void ta_close(ta_env *e) {
    CHECK_OK(sfv_destroy_channel(e->a));
    CHECK_OK(sfv_destroy_channel(e->b));
    CHECK_OK(sfv_dereg_mr(e->mr));
    CHECK_OK(sfv_dealloc_pd(e->pd));
    CHECK_OK(sfv_close_device(e->ctx));
    free(e->buf);
}

/* The stale copy's place now holds a send still in flight (no receive for it yet): the wait on
   the copy reports the broken contract and times out; the send stays tracked, and is its own
   handle's once a receive takes it. `batch`: the consumed handle was a batch's. */
static void ta_stale_over_inflight(bool batch) {
    ta_env e;
    sfv_pending h, copy, w[3], snd, rx;
    sfv_work_completion wc;
    sfv_gather_element g[2];
    sfv_scatter_element s;
    sfv_remote_mr rm;
    int i, before;
    ta_open(&e);
    g[0] = g[1] = sfv_mr_gather_element(e.mr, e.buf, 64);
    s = sfv_mr_scatter_element(e.mr, e.buf + 2048, 64);
    rm = sfv_remote_mr_make(sfv_mr_addr(e.mr) + 1024, 64, sfv_mr_rkey(e.mr));
    if (batch) CHECK_OK(sfv_channel_post_write_batch(e.a, g, 1, 2, (sfv_remote_mr[2]){rm, rm}, &h)); /* places p, p+1 */
    else CHECK_OK(sfv_channel_post_write(e.a, g, 1, rm, &h));                                      /* place p */
    copy = h;
    CHECK_OK(sfv_pending_wait(&h, -1, NULL));
    for (i = 0; i < 3; i++) CHECK_OK(sfv_channel_post_write(e.a, g, 1, rm, &w[i])); /* done, unconsumed */
    CHECK_OK(sfv_channel_post_send(e.a, g, 1, &snd)); /* the copy's last place again: in flight */
    for (i = 0; i < 3; i++) CHECK_OK(sfv_pending_wait(&w[i], -1, NULL));
    CHECK_EQ(sfv_channel_outstanding(e.a), 1);
    before = asserts;
    CHECK_RESULT(sfv_pending_wait(&copy, -1, &wc), SFV_ERR_TIMEOUT);
    CHECK(asserts > before);
    CHECK_EQ(wc.result, SFV_ERR_TIMEOUT);
    CHECK_EQ(sfv_channel_outstanding(e.a), 1); /* the send still holds its place */
    CHECK_RESULT(sfv_pending_poll(&snd, &wc), SFV_NOT_DONE);
    for (i = 0; i < 3; i++) CHECK_OK(sfv_channel_post_write(e.a, g, 1, rm, &w[i])); /* behind the send */
    CHECK_RESULT(sfv_channel_post_write(e.a, g, 1, rm, &h), SFV_ERR_RESOURCE); /* 4 places taken: full */
    CHECK_OK(sfv_channel_post_receive(e.b, &s, 1, &rx)); /* the send goes now, and the writes after it */
    CHECK_OK(sfv_pending_wait(&snd, 5000, &wc));
    CHECK_EQ(wc.opcode, SFV_WC_OP_SEND);
    for (i = 0; i < 3; i++) CHECK_OK(sfv_pending_wait(&w[i], 5000, NULL));
    CHECK_OK(sfv_pending_wait(&rx, 5000, &wc));
    CHECK_EQ(wc.byte_len, 64);
    CHECK_EQ(sfv_channel_outstanding(e.a), 0);
    ta_close(&e);
}
static void t_stale_over_inflight(void) { ta_stale_over_inflight(false); }
static void t_stale_batch_over_inflight(void) { ta_stale_over_inflight(true); }

/* The stale copy's place holds finished work another handle waits for: the copy never takes it. */
static void t_stale_over_done(void) {
    ta_env e;
    sfv_pending h, copy, w;
    sfv_work_completion wc;
    sfv_gather_element g;
    sfv_remote_mr rm;
    int i, before;
    ta_open(&e);
    g = sfv_mr_gather_element(e.mr, e.buf, 64);
    rm = sfv_remote_mr_make(sfv_mr_addr(e.mr) + 1024, 64, sfv_mr_rkey(e.mr));
    CHECK_OK(sfv_channel_post_write(e.a, &g, 1, rm, &h));
    copy = h;
    CHECK_OK(sfv_pending_wait(&h, -1, NULL));
    for (i = 0; i < 4; i++) { /* around the ring to the copy's place: the last one lands there, done */
        CHECK_OK(sfv_channel_post_write(e.a, &g, 1, rm, &w));
        if (i < 3) CHECK_OK(sfv_pending_wait(&w, -1, NULL));
    }
    before = asserts;
    CHECK_RESULT(sfv_pending_wait(&copy, -1, &wc), SFV_ERR_TIMEOUT);
    CHECK(asserts > before);
    CHECK_RESULT(sfv_pending_poll(&copy, &wc), SFV_NOT_DONE);
    CHECK_OK(sfv_pending_wait(&w, -1, &wc)); /* still its own handle's */
    CHECK_EQ(wc.opcode, SFV_WC_OP_WRITE);
    CHECK_EQ(sfv_channel_outstanding(e.a), 0);
    ta_close(&e);
}

/* A post into a handle that still holds earlier work (waiting, or done and unconsumed): the
   earlier work is left with no handle, as the header says: still counted, its place taken, its
   buffer the NIC's, until the channel is destroyed; no contract is reported. */
static void t_post_into_busy_handle(void) {
    ta_env e;
    sfv_pending p;
    sfv_work_completion wc;
    sfv_scatter_element s1, s2;
    sfv_gather_element g;
    int before = asserts;
    ta_open(&e);
    s1 = sfv_mr_scatter_element(e.mr, e.buf, 64);
    s2 = sfv_mr_scatter_element(e.mr, e.buf + 128, 64);
    g = sfv_mr_gather_element(e.mr, e.buf + 1024, 64);
    memcpy(e.buf + 1024, "first", 6);
    CHECK_OK(sfv_channel_post_receive(e.b, &s1, 1, &p));
    CHECK_OK(sfv_channel_post_receive(e.b, &s2, 1, &p)); /* the first receive has no handle now */
    CHECK_EQ(sfv_channel_outstanding(e.b), 2);
    CHECK_OK(sfv_channel_send(e.a, &g, 1, &wc)); /* lands in s1 */
    CHECK_RESULT(sfv_pending_wait(&p, 20, &wc), SFV_ERR_TIMEOUT); /* p waits for s2's (s1's bytes stay the NIC's) */
    memcpy(e.buf + 1024, "second", 7);
    CHECK_OK(sfv_channel_send(e.a, &g, 1, &wc));
    CHECK_OK(sfv_pending_wait(&p, -1, &wc));
    CHECK(memcmp(e.buf + 128, "second", 7) == 0);
    CHECK_EQ(sfv_channel_outstanding(e.b), 2); /* s1's, and s2's place behind it, until the destroy */
    CHECK_OK(sfv_destroy_channel(e.b));
    e.b = NULL;
    CHECK(memcmp(e.buf, "first", 6) == 0); /* the program's again */
    CHECK_EQ(asserts, before);
    ta_close(&e);
}

/* An inline send and an inject copy their bytes at the post: from memory in flight as scatter
   (a receive's), the CPU would copy bytes the NIC is writing. Reported and refused, as a send
   that is not inline (SFV_ERR_INVALID, nothing posted). */
static void t_inline_over_inflight_scatter(void) {
    ta_env e;
    sfv_pending rx, tx;
    sfv_scatter_element s;
    sfv_gather_element g;
    int before = asserts;
    ta_open(&e);
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    g = sfv_mr_gather_element(e.mr, e.buf + 8, 16);
    CHECK_OK(sfv_channel_post_receive(e.a, &s, 1, &rx)); /* the NIC will write buf[0, 64) */
    CHECK_RESULT(sfv_channel_post_send(e.a, &g, 1, &tx), SFV_ERR_INVALID); /* 16 bytes: inline */
    CHECK_EQ(asserts, before + 1);
    CHECK_RESULT(sfv_channel_inject(e.a, e.buf + 8, 16), SFV_ERR_INVALID);
    CHECK_EQ(asserts, before + 2);
    CHECK_EQ(sfv_channel_outstanding(e.a), 1); /* the receive only */
    CHECK_OK(sfv_channel_inject(e.a, e.buf + 64, 16)); /* beside it: fine */
    ta_close(&e);
}

/* A reset flushes work whose handle was lost (a second post into its handle): its buffers are the
   program's again (its MR deregisters, the tracking of in-flight memory forgets it), while its
   place stays taken until the destroy, as the header says. */
static void t_reset_frees_lost_work(void) {
    ta_env e;
    sfv_mr *own;
    sfv_pending p;
    sfv_scatter_element s1, s2;
    int before = asserts;
    ta_open(&e);
    CHECK_OK(sfv_reg_mr_local(e.pd, e.buf + 2048, 64, &own));
    s1 = sfv_mr_scatter_element(own, e.buf + 2048, 64);
    s2 = sfv_mr_scatter_element(e.mr, e.buf + 128, 64);
    CHECK_OK(sfv_channel_post_receive(e.b, &s1, 1, &p));
    CHECK_OK(sfv_channel_post_receive(e.b, &s2, 1, &p)); /* s1's receive has no handle now */
    CHECK_OK(sfv_channel_reset(e.b));
    CHECK_OK(sfv_dereg_mr(own)); /* nothing in flight uses it */
    CHECK_RESULT(sfv_pending_wait(&p, 100, NULL), SFV_ERR_WORK); /* s2's: flushed */
    CHECK_EQ(sfv_channel_outstanding(e.b), 2); /* s1's place, and s2's behind it, until the destroy */
    memset(e.buf + 2048, 0x5a, 64); /* the program's again (ASan: no poisoned byte) */
    CHECK_EQ(asserts, before);
    ta_close(&e);
}

/* A second sfv_destroy_channel: reported and refused, nothing read of the freed channel. */
static void t_destroy_twice(void) {
    ta_env e;
    int before;
    ta_open(&e);
    CHECK_OK(sfv_destroy_channel(e.a));
    before = asserts;
    CHECK_RESULT(sfv_destroy_channel(e.a), SFV_ERR_INVALID);
    CHECK(asserts > before);
    e.a = NULL;
    ta_close(&e);
}

/* A context, PD or SRQ released twice while children keep it alive (session 36: review 36c's
   suspicion, confirmed): the second release took a child's reference, the object was freed under
   it, and the child's own destroy read freed memory (ASan: heap-use-after-free in
   sfv__srq_detach). Now the second release is reported (SFV_ASSERT) and refused with
   SFV_ERR_INVALID, taking nothing; the children's destroys then free everything, in order. */
static void t_release_twice(void) {
    ta_env e;
    sfv_srq *srq;
    sfv_srq_desc sd;
    sfv_channel *on_srq;
    sfv_channel_desc d;
    int before;
    ta_open(&e);
    memset(&sd, 0, sizeof sd);
    sd.max_wr = 8;
    CHECK_OK(sfv_create_srq(e.pd, &sd, &srq));
    memset(&d, 0, sizeof d);
    d.srq = srq;
    CHECK_OK(sfv_create_channel(e.pd, &d, &on_srq));
    before = asserts;
    CHECK_OK(sfv_destroy_srq(srq)); /* the caller's: the channel keeps it */
    CHECK_RESULT(sfv_destroy_srq(srq), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "released already") != NULL);
    CHECK_EQ(asserts, before + 1);
    CHECK_OK(sfv_dealloc_pd(e.pd)); /* the caller's: the MR and channels keep it */
    CHECK_RESULT(sfv_dealloc_pd(e.pd), SFV_ERR_INVALID);
    CHECK_EQ(asserts, before + 2);
    CHECK_OK(sfv_close_device(e.ctx)); /* the PD keeps it */
    CHECK_RESULT(sfv_close_device(e.ctx), SFV_ERR_INVALID);
    CHECK_EQ(asserts, before + 3);
    CHECK_OK(sfv_destroy_channel(on_srq)); /* the SRQ goes with it (before: freed already) */
    CHECK_OK(sfv_destroy_channel(e.a));
    CHECK_OK(sfv_destroy_channel(e.b));
    CHECK_OK(sfv_dereg_mr(e.mr)); /* the PD, then the context, go with it */
    CHECK_EQ(fk_live_total(), 0);
    CHECK_EQ(asserts, before + 3);
    free(e.buf);
}

static const harness_test TESTS[] = {
    TEST(t_post_into_busy_handle, 10),
    TEST(t_destroy_twice, 10),
    TEST(t_release_twice, 10),
    TEST(t_inline_over_inflight_scatter, 10),
    TEST(t_reset_frees_lost_work, 10),
    TEST(t_stale_over_inflight, 10),
    TEST(t_stale_batch_over_inflight, 10),
    TEST(t_stale_over_done, 10),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
