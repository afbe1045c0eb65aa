/* test_inject.c - inline by default and sfv_channel_inject (>>inject) on rxe: the granted inline
   limit and what an inject refuses (over it, none at all, NULL bytes); a long stream of injects
   of varying sizes received and checked byte by byte while the send queue's places come back;
   injects beside signaled sends and writes with pending handles, inject_write and
   inject_write_imm (the immediate seen by the receiver), in a scope; a queue full of work that
   waits for its handles (SFV_ERR_RESOURCE) or of injects nobody receives (SFV_ERR_TIMEOUT); the
   peer gone (destroyed, or reset) before an inject completes: a later call fails naming the
   inject; reset and destroy with injects left last do not wait for them. */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "../safeverbs.h"
#include "harness.h"

#include "pair.h"

#define CHECK_MSG(sub)                                                                             \
    do {                                                                                           \
        if (!strstr(sfv_last_error()->message, (sub))) FAIL("last error \"%s\" lacks \"%s\"", sfv_last_error()->message, (sub)); \
    } while (0)

/* Slot i of a side's buffer (SLOT bytes each), as a scatter element. */
enum { SLOT = 256 };
static sfv_scatter_element slot(side *s, size_t i) { return sfv_mr_scatter_element(s->mr, s->buf + SLOT * i, SLOT); }
/* 64 bytes of s's buffer at off, as its peer's remote region. */
static sfv_remote_mr region(const side *s, size_t off) { return sfv_remote_mr_make(sfv_mr_addr(s->mr) + off, 64, sfv_mr_rkey(s->mr)); }
/* The byte j of message i of a stream. */
static unsigned char stream_byte(size_t i, size_t j) { return (unsigned char)(i * 131 + j * 7 + 1); }

static void t_inline_default_and_refusals(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_pending rx;
    sfv_work_completion wc;
    sfv_scatter_element s;
    char big[1024], want[160];
    uint32_t lim;
    memset(big, 'x', sizeof big);
    pair_open(&a, &b, &d, &d, SHARED);
    lim = sfv_channel_get_desc(a.ch)->max_inline_data;
    printf("    granted inline limit: %u bytes\n", (unsigned)lim);
    CHECK(lim > 0 && lim <= SFV_INLINE_DEFAULT); /* rxe grants up to 512: capped */
    CHECK_RESULT(sfv_channel_inject(a.ch, big, (size_t)lim + 1), SFV_ERR_INVALID);
    snprintf(want, sizeof want, "%u bytes over the channel's inline limit of %u bytes", (unsigned)lim + 1, (unsigned)lim);
    CHECK_MSG(want);
    CHECK_RESULT(sfv_channel_inject(a.ch, NULL, 1), SFV_ERR_INVALID);
    CHECK_MSG("buf NULL with 1 bytes");
    CHECK_RESULT(sfv_channel_inject(NULL, big, 1), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_inject_write(a.ch, big, 65, region(&b, 0)), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(sfv_channel_inject_write(a.ch, big, 8, sfv_remote_mr_make(UINT64_MAX - 8, 64, sfv_mr_rkey(b.mr))), SFV_ERR_INVALID);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    /* a zero-length inject from NULL: a message of no bytes; the largest one fits */
    s = slot(&b, 0);
    CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
    CHECK_OK(sfv_channel_inject(a.ch, NULL, 0));
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK_EQ(wc.byte_len, 0);
    CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
    CHECK_OK(sfv_channel_inject(a.ch, big, lim));
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK_EQ(wc.byte_len, lim);
    CHECK(memcmp(b.buf, big, lim) == 0);
    pair_close(&a, &b);
    /* no inline data: sends read their MR, and every inject is refused */
    d.max_inline_data = SFV_INLINE_NONE;
    pair_open(&a, &b, &d, &d, SHARED);
    CHECK_EQ(sfv_channel_get_desc(a.ch)->max_inline_data, SFV_INLINE_NONE);
    CHECK_RESULT(sfv_channel_inject(a.ch, big, 8), SFV_ERR_INVALID);
    CHECK_MSG("8 bytes over the channel's inline limit of 0 bytes");
    pair_close(&a, &b);
}

/* 10000 injects of 1 .. 256 bytes from one reused buffer, received 64 at a time and checked byte
   by byte; the send queue (128) is taken back by the signaled ones: outstanding stays below it. */
static void t_inject_stream(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scatter_element s[64];
    sfv_pending rx[64];
    sfv_work_completion wc;
    unsigned char msg[SLOT];
    size_t i, k, j, max_out = 0;
    const size_t total = 10000;
    pair_open(&a, &b, &d, &d, SHARED);
    for (k = 0; k < 64; k++) s[k] = slot(&b, k);
    for (i = 0; i < total; i += 64) {
        const size_t n = total - i < 64 ? total - i : 64;
        CHECK_OK(sfv_channel_post_receive_batch(b.ch, s, 1, n, rx));
        for (k = 0; k < n; k++) {
            const size_t len = (i + k) % SLOT + 1;
            for (j = 0; j < len; j++) msg[j] = stream_byte(i + k, j);
            CHECK_OK(sfv_channel_inject(a.ch, msg, len));
            memset(msg, 0, sizeof msg); /* the caller's again on return */
            if (sfv_channel_outstanding(a.ch) > max_out) max_out = sfv_channel_outstanding(a.ch);
        }
        for (k = 0; k < n; k++) {
            const size_t len = (i + k) % SLOT + 1;
            CHECK_OK(sfv_pending_wait(&rx[k], -1, &wc));
            CHECK_EQ(wc.byte_len, len);
            for (j = 0; j < len; j++)
                if ((unsigned char)b.buf[SLOT * k + j] != stream_byte(i + k, j)) FAIL("inject %zu: byte %zu differs", i + k, j);
        }
    }
    printf("    %zu injects, at most %zu places taken of 128\n", total, max_out);
    CHECK(max_out < 128);
    pair_close(&a, &b);
}

/* A send queue of 4 (a signal every 2 injects): 3000 injects, the places always coming back. */
static void t_inject_reclaim_small_queue(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scatter_element s[50];
    sfv_pending rx[50];
    size_t i, k, max_out = 0;
    d.max_send_wr = 4;
    pair_open(&a, &b, &d, &d, SHARED);
    for (k = 0; k < 50; k++) s[k] = slot(&b, k);
    for (i = 0; i < 3000; i += 50) {
        uint32_t v;
        CHECK_OK(sfv_channel_post_receive_batch(b.ch, s, 1, 50, rx));
        for (k = 0; k < 50; k++) {
            v = (uint32_t)(i + k);
            CHECK_OK(sfv_channel_inject(a.ch, &v, sizeof v));
            if (sfv_channel_outstanding(a.ch) > max_out) max_out = sfv_channel_outstanding(a.ch);
        }
        for (k = 0; k < 50; k++) {
            CHECK_OK(sfv_pending_wait(&rx[k], -1, NULL));
            memcpy(&v, b.buf + SLOT * k, sizeof v);
            CHECK_EQ(v, i + k);
        }
    }
    CHECK(max_out <= 3); /* one place always free */
    pair_close(&a, &b);
}

static sfv_result scope_injects(sfv_channel *ch, void *user) {
    side *b = (side *)user;
    sfv_result r = sfv_channel_inject_write(ch, "scoped one", 11, region(b, 4096));
    if (r == SFV_OK) r = sfv_channel_inject_write(ch, "scoped two", 11, region(b, 4096 + 64)); /* last, unsignaled: fenced */
    return r;
}

/* Injects between signaled sends and writes whose handles wait, consumed out of order; writes with
   and without an immediate; a scope that ends on an inject. */
static void t_inject_mixed(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scatter_element s;
    sfv_gather_element g;
    sfv_pending rx[4], tx, wx;
    sfv_work_completion wc;
    sfv_scope_report rep;
    int k;
    pair_open(&a, &b, &d, &d, SHARED);
    for (k = 0; k < 4; k++) {
        s = slot(&b, k);
        CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx[k]));
    }
    memcpy(a.buf + 8192, "from the MR", 12);
    g = sfv_mr_gather_element(a.mr, a.buf + 8192, 12);
    CHECK_OK(sfv_channel_inject(a.ch, "inject one", 11));
    CHECK_OK(sfv_channel_post_send(a.ch, &g, 1, &tx));
    CHECK_OK(sfv_channel_inject_write(a.ch, "written", 8, region(&b, 2048)));
    CHECK_OK(sfv_channel_post_write(a.ch, &g, 1, region(&b, 2048 + 64), &wx));
    CHECK_OK(sfv_channel_inject_write_imm(a.ch, "with imm", 9, region(&b, 2048 + 128), 0xC0FFEE));
    CHECK_OK(sfv_channel_inject(a.ch, "inject two", 11));
    CHECK_OK(sfv_pending_wait(&wx, -1, NULL)); /* the write's handle first: the send's waits */
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    CHECK_OK(sfv_pending_wait(&rx[0], -1, &wc));
    CHECK(wc.byte_len == 11 && strcmp(b.buf, "inject one") == 0);
    CHECK_OK(sfv_pending_wait(&rx[1], -1, &wc));
    CHECK(wc.byte_len == 12 && strcmp(b.buf + SLOT, "from the MR") == 0);
    CHECK_OK(sfv_pending_wait(&rx[2], -1, &wc));
    CHECK(wc.opcode == SFV_WC_OP_RECV_IMM && wc.has_imm && wc.imm_data == 0xC0FFEE && wc.byte_len == 9);
    CHECK_OK(sfv_pending_wait(&rx[3], -1, &wc));
    CHECK(wc.byte_len == 11 && strcmp(b.buf + 3 * SLOT, "inject two") == 0);
    CHECK(strcmp(b.buf + 2048, "written") == 0 && strcmp(b.buf + 2048 + 64, "from the MR") == 0 &&
          strcmp(b.buf + 2048 + 128, "with imm") == 0);
    CHECK_OK(sfv_channel_scope(a.ch, scope_injects, &b, &rep));
    CHECK_EQ(rep.auto_polled, 0);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0); /* the fence gave back the injects' places */
    CHECK(strcmp(b.buf + 4096, "scoped one") == 0 && strcmp(b.buf + 4096 + 64, "scoped two") == 0);
    pair_close(&a, &b);
}

/* The send queue full of signaled work waiting for its handles: SFV_ERR_RESOURCE at once. Full
   of injects nobody receives (no receive posted: RNR for ever): SFV_ERR_TIMEOUT after the
   channel's timeout. A destroy with them in flight does not hang. */
static void t_inject_queue_full(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_gather_element g;
    sfv_pending tx[3];
    sfv_result r = SFV_OK;
    double t0;
    int k;
    d.max_send_wr = 4;
    d.timeout_ms = 300;
    pair_open(&a, &b, &d, &d, SHARED);
    g = sfv_mr_gather_element(a.mr, a.buf, 8);
    for (k = 0; k < 3; k++) CHECK_OK(sfv_channel_post_send(a.ch, &g, 1, &tx[k])); /* no receive: they wait */
    CHECK_RESULT(sfv_channel_inject(a.ch, "x", 1), SFV_ERR_RESOURCE);
    CHECK_MSG("send queue full: 3 of 4 places");
    side_close(&a); /* the sends flushed */
    a = side_open(test_device(0), &d, SHARED);
    side_close(&b);
    b = side_open(test_device(1), &d, SHARED);
    connect_pair(&a, &b);
    t0 = test_seconds();
    for (k = 0; k < 10 && r == SFV_OK; k++) r = sfv_channel_inject(a.ch, "y", 1);
    CHECK_RESULT(r, SFV_ERR_TIMEOUT);
    CHECK_EQ(k, 4); /* three places taken, one kept free */
    CHECK(test_seconds() - t0 >= 0.29);
    CHECK_MSG("send queue full for desc.timeout_ms (300 ms)");
    t0 = test_seconds();
    CHECK_OK(sfv_destroy_channel(a.ch)); /* three injects in flight: flushed */
    a.ch = NULL;
    printf("    destroy with 3 injects in flight: %.3f s\n", test_seconds() - t0);
    CHECK(test_seconds() - t0 < 2.0);
    pair_close(&a, &b);
}

/* The peer's QP goes away (destroyed, or reset: a new QP number) after inject #5 was delivered;
   inject #6 then never completes (retries exhausted). The channel's next polling calls fail
   naming #6; a blocking call and a flushed receive name it too; a reset recovers. */
static void peer_gone(bool by_reset) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scatter_element s;
    sfv_gather_element g;
    sfv_pending rx, arx;
    sfv_work_completion wc;
    sfv_endpoint ea, eb;
    sfv_result r = SFV_OK;
    double t0;
    int k;
    d.max_send_wr = 8; /* a signal every 4 injects */
    pair_open(&a, &b, &d, &d, SHARED);
    for (k = 0; k < 5; k++) {
        s = slot(&b, (size_t)k);
        CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
        CHECK_OK(sfv_channel_inject(a.ch, "delivered", 10));
        CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    }
    s = slot(&a, 0);
    CHECK_OK(sfv_channel_post_receive(a.ch, &s, 1, &arx));
    if (by_reset) {
        CHECK_OK(sfv_channel_reset(b.ch));
    } else {
        CHECK_OK(sfv_destroy_channel(b.ch));
        b.ch = NULL;
    }
    CHECK_OK(sfv_channel_inject(a.ch, "lost...", 8)); /* #6: posted, never acknowledged */
    t0 = test_seconds();
    while (r == SFV_OK && test_seconds() - t0 < 10) { /* until an inject polls after the failure came */
        usleep(20000);
        r = sfv_channel_inject(a.ch, "more", 5);
    }
    printf("    %s: %s after %.2f s: %s\n", by_reset ? "peer reset" : "peer destroyed", sfv_result_str(r), test_seconds() - t0,
           sfv_last_error()->message);
    CHECK_RESULT(r, SFV_ERR_BROKEN);
    CHECK_MSG("inject #6 (send, 8 B) failed: RETRY_EXC_ERR");
    g = sfv_mr_gather_element(a.mr, a.buf + 4096, 8);
    CHECK_RESULT(sfv_channel_send(a.ch, &g, 1, NULL), SFV_ERR_BROKEN);
    CHECK_MSG("inject #6 (send, 8 B) failed");
    CHECK_RESULT(sfv_pending_wait(&arx, -1, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    CHECK_MSG("flushed after inject #6 (send, 8 B) failed");
    /* both sides start over: reset, new endpoints; the injects work again */
    CHECK_OK(sfv_channel_reset(a.ch));
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    if (!by_reset) CHECK_OK(sfv_create_channel(b.pd, &d, &b.ch));
    else CHECK_OK(sfv_channel_reset(b.ch));
    CHECK_OK(sfv_channel_endpoint(a.ch, &ea));
    CHECK_OK(sfv_channel_endpoint(b.ch, &eb));
    CHECK_OK(sfv_channel_handshake(a.ch, &eb));
    CHECK_OK(sfv_channel_handshake(b.ch, &ea));
    s = slot(&b, 0);
    CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
    CHECK_OK(sfv_channel_inject(a.ch, "again", 6));
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK(wc.byte_len == 6 && strcmp(b.buf, "again") == 0);
    pair_close(&a, &b);
}
static void t_inject_peer_destroyed(void) { peer_gone(false); }
static void t_inject_peer_reset(void) { peer_gone(true); }

/* An inject delivered and left last, unsignaled, has no completion to say so: reset and destroy
   flush it (one marker posted to the QP in ERR) instead of waiting for it. */
static void t_inject_left_last(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scatter_element s;
    sfv_pending rx;
    double t0;
    pair_open(&a, &b, &d, &d, SHARED);
    s = slot(&b, 0);
    CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
    CHECK_OK(sfv_channel_inject(a.ch, "last", 5));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    CHECK_EQ(sfv_channel_outstanding(a.ch), 1);
    t0 = test_seconds();
    CHECK_OK(sfv_channel_reset(a.ch));
    printf("    reset: %.3f s\n", test_seconds() - t0);
    CHECK(test_seconds() - t0 < 1.0);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    CHECK_OK(sfv_channel_reset(b.ch));
    connect_pair(&a, &b);
    CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
    CHECK_OK(sfv_channel_inject(a.ch, "last", 5));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    t0 = test_seconds();
    CHECK_OK(sfv_destroy_channel(a.ch));
    a.ch = NULL;
    CHECK(test_seconds() - t0 < 1.0);
    pair_close(&a, &b);
}

static const harness_test TESTS[] = {
    TEST(t_inline_default_and_refusals, 30),
    TEST(t_inject_stream, 120),
    TEST(t_inject_reclaim_small_queue, 60),
    TEST(t_inject_mixed, 30),
    TEST(t_inject_queue_full, 30),
    TEST(t_inject_peer_destroyed, 40),
    TEST(t_inject_peer_reset, 40),
    TEST(t_inject_left_last, 30),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
