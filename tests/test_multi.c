/* test_multi.c - many peers on real rxe devices: the multi-channel (its many-peer calls, partial
   failures, scopes, deadlines), the TCP exchange of endpoints by rank (and every refusal), and
   nodes of three ranks in three processes with each barrier algorithm, sub-groups, bad groups,
   and a rank that never comes. */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "../safeverbs.h"
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>

#define BUF (1u << 16)
#define PEERS 3

/* One side: a device, a shared buffer and a multi-channel of PEERS channels. */
typedef struct side {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_multi_channel *mc;
    char *buf;
} side;

static const unsigned SHARED = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_WRITE;

static void side_buffer(side *s, const char *dev) {
    s->buf = (char *)aligned_alloc(4096, BUF);
    CHECK(s->buf != NULL);
    memset(s->buf, 0, BUF);
    CHECK_OK(sfv_open_device(dev, &s->ctx));
    CHECK_OK(sfv_alloc_pd(s->ctx, &s->pd));
    CHECK_OK(sfv_reg_mr_access(s->pd, s->buf, BUF, SHARED, &s->mr));
}
static side side_open(const char *dev, const sfv_channel_desc *d) {
    side s;
    memset(&s, 0, sizeof s);
    side_buffer(&s, dev);
    CHECK_OK(sfv_create_multi_channel(s.pd, PEERS, d, &s.mc));
    return s;
}
static void side_close(side *s) {
    CHECK_OK(sfv_destroy_multi_channel(s->mc));
    sfv_dereg_mr(s->mr);
    sfv_dealloc_pd(s->pd);
    sfv_close_device(s->ctx);
    free(s->buf);
}
/* a's channel i <-> b's channel i, rxe0 <-> rxe1. */
static void pair_open(side *a, side *b, const sfv_channel_desc *d) {
    sfv_endpoint ea[PEERS], eb[PEERS];
    *a = side_open(test_device(0), d);
    *b = side_open(test_device(1), d);
    CHECK_OK(sfv_multi_channel_endpoints(a->mc, ea, PEERS));
    CHECK_OK(sfv_multi_channel_endpoints(b->mc, eb, PEERS));
    CHECK_OK(sfv_multi_channel_handshake(a->mc, eb, PEERS));
    CHECK_OK(sfv_multi_channel_handshake(b->mc, ea, PEERS));
}
static size_t outstanding(const side *s) {
    size_t i, n = 0;
    for (i = 0; i < PEERS; i++) n += sfv_channel_outstanding(sfv_multi_channel_peer(s->mc, i));
    return n;
}
static sfv_gather_element G(side *s, size_t off, size_t len) { return sfv_mr_gather_element(s->mr, s->buf + off, len); }
static sfv_scatter_element S(side *s, size_t off, size_t len) { return sfv_mr_scatter_element(s->mr, s->buf + off, len); }
/* Posts a receive of len bytes at off on b's channel `peer`. */
static void post_rx(side *b, size_t peer, size_t off, size_t len, sfv_pending *p) {
    sfv_scatter_element e = S(b, off, len);
    CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(b->mc, peer), &e, len ? 1 : 0, p));
}

static void t_multi_channel_create_and_connect(void) {
    side s;
    sfv_multi_channel *mc = (sfv_multi_channel *)1;
    sfv_endpoint ep[PEERS + 1];
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    memset(&s, 0, sizeof s);
    side_buffer(&s, test_device(0));
    CHECK_RESULT(sfv_create_multi_channel(s.pd, 0, &d, &mc), SFV_ERR_INVALID);
    CHECK(mc == NULL);
    CHECK_RESULT(sfv_create_multi_channel(NULL, 2, &d, &mc), SFV_ERR_INVALID);
    d.max_send_sge = 1u << 30; /* a bad desc fails the first channel; nothing is left behind */
    CHECK_RESULT(sfv_create_multi_channel(s.pd, 2, &d, &mc), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "max_send_sge") != NULL);
    memset(&d, 0, sizeof d);
    CHECK_OK(sfv_create_multi_channel(s.pd, PEERS, &d, &s.mc));
    CHECK_EQ(sfv_multi_channel_len(s.mc), PEERS);
    CHECK(sfv_multi_channel_peer(s.mc, PEERS - 1) != NULL);
    CHECK(sfv_multi_channel_peer(s.mc, PEERS) == NULL);
    CHECK(sfv_multi_channel_peer(NULL, 0) == NULL);
    CHECK_RESULT(sfv_multi_channel_endpoints(s.mc, ep, PEERS - 1), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_endpoints(s.mc, ep, PEERS + 1), SFV_ERR_INVALID);
    CHECK_OK(sfv_multi_channel_endpoints(s.mc, ep, PEERS));
    CHECK(ep[0].qpn != ep[1].qpn && ep[1].qpn != ep[2].qpn);
    CHECK_RESULT(sfv_multi_channel_handshake(s.mc, ep, PEERS + 1), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_handshake(s.mc, NULL, PEERS), SFV_ERR_INVALID);
    {   /* a bad last endpoint: refused before channel 0 connects, so the call can be repeated */
        sfv_endpoint bad[PEERS];
        memcpy(bad, ep, sizeof bad);
        bad[PEERS - 1].qpn = 0;
        CHECK_RESULT(sfv_multi_channel_handshake(s.mc, bad, PEERS), SFV_ERR_INVALID);
        CHECK(strstr(sfv_last_error()->message, "QPN") != NULL);
    }
    CHECK_OK(sfv_multi_channel_handshake(s.mc, ep, PEERS)); /* each channel to itself */
    {
        sfv_gather_element g = G(&s, 0, 8);
        sfv_pending rx;
        memcpy(s.buf, "loopback", 8);
        post_rx(&s, 2, 4096, 8, &rx);
        CHECK_OK(sfv_channel_send(sfv_multi_channel_peer(s.mc, 2), &g, 1, NULL));
        CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
        CHECK(memcmp(s.buf + 4096, "loopback", 8) == 0);
    }
    CHECK_OK(sfv_destroy_multi_channel(NULL));
    side_close(&s);
}

/* Sends, a multicast, writes (one with immediate) and reads to three peers at once. */
static void t_multi_channel_many_peer_calls(void) {
    side a, b;
    sfv_channel_desc d;
    sfv_pending rx[PEERS];
    sfv_work_completion wc[PEERS], one;
    sfv_gather_element g[PEERS];
    sfv_scatter_element e[PEERS];
    sfv_peer_send sends[PEERS];
    sfv_peer_write writes[PEERS];
    sfv_peer_read reads[PEERS];
    size_t i, to[2] = {0, 2};
    memset(&d, 0, sizeof d);
    pair_open(&a, &b, &d);
    /* scatter_send: message i to peer i, the last with an immediate */
    for (i = 0; i < PEERS; i++) {
        snprintf(a.buf + 64 * i, 64, "to peer %zu", i);
        g[i] = G(&a, 64 * i, 64);
        post_rx(&b, i, 1024 + 64 * i, 64, &rx[i]);
        memset(&sends[i], 0, sizeof sends[i]);
        sends[i].peer = i;
        sends[i].sges = &g[i];
        sends[i].n = 1;
    }
    sends[2].has_imm = true;
    sends[2].imm = 0xC0FFEE;
    CHECK_OK(sfv_multi_channel_scatter_send(a.mc, sends, PEERS, wc));
    for (i = 0; i < PEERS; i++) {
        char want[64];
        CHECK_EQ(wc[i].result, SFV_OK);
        CHECK_EQ(wc[i].opcode, SFV_WC_OP_SEND);
        CHECK_OK(sfv_pending_wait(&rx[i], -1, &one));
        CHECK_EQ(one.byte_len, 64);
        CHECK_EQ(one.has_imm, i == 2);
        snprintf(want, sizeof want, "to peer %zu", i);
        CHECK(strcmp(b.buf + 1024 + 64 * i, want) == 0);
    }
    CHECK_EQ(one.imm_data, 0xC0FFEE);
    /* multicast_send: one message to peers 0 and 2 */
    memcpy(a.buf, "everyone", 9);
    g[0] = G(&a, 0, 9);
    post_rx(&b, 0, 2048, 9, &rx[0]);
    post_rx(&b, 2, 2048 + 64, 9, &rx[2]);
    CHECK_OK(sfv_multi_channel_multicast_send(a.mc, to, 2, g, 1, wc));
    CHECK_OK(sfv_pending_wait(&rx[0], -1, NULL));
    CHECK_OK(sfv_pending_wait(&rx[2], -1, NULL));
    CHECK(strcmp(b.buf + 2048, "everyone") == 0 && strcmp(b.buf + 2048 + 64, "everyone") == 0);
    CHECK_EQ(wc[1].result, SFV_OK);
    /* scatter_write into b's buffer at 8 KiB + 128 i (peer 1's with an immediate: it takes a receive) */
    post_rx(&b, 1, 0, 0, &rx[1]);
    for (i = 0; i < PEERS; i++) {
        memset(a.buf + 128 * i, 'A' + (int)i, 128);
        g[i] = G(&a, 128 * i, 128);
        memset(&writes[i], 0, sizeof writes[i]);
        writes[i].peer = i;
        writes[i].sges = &g[i];
        writes[i].n = 1;
        CHECK_OK(sfv_remote_mr_slice(sfv_mr_remote(b.mr), 8192 + 128 * i, 128, &writes[i].remote));
    }
    writes[1].has_imm = true;
    writes[1].imm = 7;
    CHECK_OK(sfv_multi_channel_scatter_write(a.mc, writes, PEERS, NULL));
    CHECK_OK(sfv_pending_wait(&rx[1], -1, &one));
    CHECK(one.has_imm && one.imm_data == 7 && one.opcode == SFV_WC_OP_RECV_IMM);
    for (i = 0; i < PEERS; i++) CHECK(b.buf[8192 + 128 * i] == 'A' + (int)i && b.buf[8192 + 128 * i + 127] == 'A' + (int)i);
    /* gather_read: read them back, crosswise (request i reads peer 2 - i's region) */
    for (i = 0; i < PEERS; i++) {
        e[i] = S(&a, 16384 + 128 * i, 128);
        memset(&reads[i], 0, sizeof reads[i]);
        reads[i].peer = PEERS - 1 - i;
        reads[i].sges = &e[i];
        reads[i].n = 1;
        reads[i].remote = writes[i].remote;
    }
    CHECK_OK(sfv_multi_channel_gather_read(a.mc, reads, PEERS, wc));
    for (i = 0; i < PEERS; i++) {
        CHECK_EQ(wc[i].byte_len, 128);
        CHECK(memcmp(a.buf + 16384 + 128 * i, a.buf + 128 * i, 128) == 0);
    }
    /* gather_receive: a's sends go first and meet no receive (the NIC retries them on RNR);
       b's blocking gather_receive posts the receives and returns when all three arrived */
    {
        sfv_pending tx[PEERS];
        sfv_peer_receive recvs[PEERS];
        for (i = 0; i < PEERS; i++) {
            snprintf(a.buf + 64 * i, 64, "late %zu", i);
            g[i] = G(&a, 64 * i, 64);
            CHECK_OK(sfv_channel_post_send(sfv_multi_channel_peer(a.mc, i), &g[i], 1, &tx[i]));
            e[i] = S(&b, 12288 + 64 * i, 64);
            memset(&recvs[i], 0, sizeof recvs[i]);
            recvs[i].peer = i;
            recvs[i].sges = &e[i];
            recvs[i].n = 1;
        }
        usleep(20000);
        CHECK_OK(sfv_multi_channel_gather_receive(b.mc, recvs, PEERS, wc));
        for (i = 0; i < PEERS; i++) {
            char want[64];
            CHECK_OK(sfv_pending_wait(&tx[i], -1, NULL));
            CHECK_EQ(wc[i].byte_len, 64);
            snprintf(want, sizeof want, "late %zu", i);
            CHECK(strcmp(b.buf + 12288 + 64 * i, want) == 0);
        }
    }
    CHECK_EQ(outstanding(&a) + outstanding(&b), 0);
    side_close(&a);
    side_close(&b);
}

/* A peer out of range posts nothing; a failed completion spoils only its own request; a post
   its channel would refuse is refused before anything is posted. */
static void t_multi_channel_failures(void) {
    side a, b;
    sfv_channel_desc d;
    sfv_pending rx[PEERS];
    sfv_work_completion wc[PEERS];
    sfv_gather_element g = {0, 0, 0};
    sfv_peer_send sends[2];
    sfv_peer_write writes[2];
    size_t bad_peer = PEERS;
    memset(&d, 0, sizeof d);
    pair_open(&a, &b, &d);
    g = G(&a, 0, 32);
    memset(sends, 0, sizeof sends);
    sends[0].peer = 1;
    sends[0].sges = &g;
    sends[0].n = 1;
    sends[1] = sends[0];
    sends[1].peer = PEERS;
    CHECK_RESULT(sfv_multi_channel_scatter_send(a.mc, sends, 2, wc), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "peer 3") != NULL);
    CHECK_RESULT(sfv_multi_channel_multicast_send(a.mc, &bad_peer, 1, &g, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_scatter_send(a.mc, NULL, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_scatter_write(a.mc, NULL, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_gather_receive(a.mc, NULL, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_gather_read(a.mc, NULL, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_multicast_send(a.mc, NULL, 1, &g, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_scatter_send(NULL, sends, 1, NULL), SFV_ERR_INVALID);
    CHECK_EQ(outstanding(&a), 0); /* nothing was posted */
    CHECK_OK(sfv_multi_channel_scatter_send(a.mc, sends, 0, NULL));
    /* a request its channel would refuse (no elements behind n = 1): every request is checked
       before any is posted, so nothing is; then the same call, fixed, delivers */
    post_rx(&b, 1, 0, 32, &rx[1]);
    sends[1].peer = 2;
    sends[1].sges = NULL;
    CHECK_RESULT(sfv_multi_channel_scatter_send(a.mc, sends, 2, wc), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "nothing posted") != NULL);
    CHECK_EQ(wc[0].result, SFV_ERR_INVALID);
    CHECK_EQ(wc[1].result, SFV_ERR_INVALID);
    CHECK_EQ(outstanding(&a), 0);
    CHECK_RESULT(sfv_pending_wait(&rx[1], 200, NULL), SFV_ERR_TIMEOUT); /* nothing came */
    {   /* a write into a region that wraps past 2^64, after a good one: nothing posted either */
        sfv_peer_write w2[2];
        memset(w2, 0, sizeof w2);
        w2[0].peer = 1;
        w2[0].sges = &g;
        w2[0].n = 1;
        w2[0].remote = sfv_mr_remote(b.mr);
        w2[1] = w2[0];
        w2[1].remote = sfv_remote_mr_make(UINT64_MAX - 7, 64, sfv_mr_rkey(b.mr));
        CHECK_RESULT(sfv_multi_channel_scatter_write(a.mc, w2, 2, wc), SFV_ERR_INVALID);
        CHECK_EQ(outstanding(&a), 0);
    }
    sends[1].sges = &g;
    sends[1].peer = 2;
    CHECK_OK(sfv_multi_channel_scatter_send(a.mc, sends, 1, wc)); /* peer 1 only */
    CHECK_OK(sfv_pending_wait(&rx[1], -1, NULL));
    /* a write with a wrong rkey to peer 0 fails there (remote access); peer 1's succeeds */
    memset(writes, 0, sizeof writes);
    writes[0].peer = 0;
    writes[0].sges = &g;
    writes[0].n = 1;
    writes[0].remote = sfv_remote_mr_make(sfv_mr_addr(b.mr), 64, sfv_mr_rkey(b.mr) + 1);
    writes[1] = writes[0];
    writes[1].peer = 1;
    writes[1].remote = sfv_remote_mr_make(sfv_mr_addr(b.mr), 64, sfv_mr_rkey(b.mr));
    CHECK_RESULT(sfv_multi_channel_scatter_write(a.mc, writes, 2, wc), SFV_ERR_WORK);
    CHECK(strstr(sfv_last_error()->message, "peer 0") != NULL);
    CHECK_EQ(wc[0].result, SFV_ERR_WORK);
    CHECK_EQ(wc[0].error_class, SFV_WORK_ERROR_REMOTE);
    CHECK_EQ(wc[1].result, SFV_OK);
    /* channel 0 is broken now: a call with a request for it posts nothing at all */
    post_rx(&b, 1, 0, 32, &rx[1]);
    sends[1].peer = 0;
    CHECK_RESULT(sfv_multi_channel_scatter_send(a.mc, sends, 2, wc), SFV_ERR_BROKEN);
    CHECK_EQ(wc[0].result, SFV_ERR_BROKEN);
    CHECK_EQ(wc[1].result, SFV_ERR_BROKEN);
    CHECK_EQ(outstanding(&a), 0);
    CHECK_OK(sfv_multi_channel_scatter_send(a.mc, sends, 1, wc)); /* peer 1 alone still works */
    CHECK_OK(sfv_pending_wait(&rx[1], -1, NULL));
    CHECK_EQ(outstanding(&a), 0);
    side_close(&a);
    side_close(&b);
}

/* Receives nobody sends: the deadline flushes them, and the call says which timed out. */
static void t_multi_channel_deadline(void) {
    side a, b;
    sfv_channel_desc d;
    sfv_scatter_element e[3];
    sfv_peer_receive recvs[3];
    sfv_work_completion wc[3];
    double t0;
    memset(&d, 0, sizeof d);
    d.timeout_ms = 300;
    pair_open(&a, &b, &d);
    e[0] = S(&a, 0, 64);
    e[1] = S(&a, 64, 64);
    memset(recvs, 0, sizeof recvs);
    recvs[0].peer = 0;
    recvs[0].sges = &e[0];
    recvs[0].n = 1;
    recvs[1] = recvs[0];
    recvs[1].peer = 2;
    recvs[1].sges = &e[1];
    e[2] = S(&a, 128, 64);
    recvs[2] = recvs[0]; /* a second one on peer 0: flushed by the same expiry */
    recvs[2].sges = &e[2];
    t0 = test_seconds();
    CHECK_RESULT(sfv_multi_channel_gather_receive(a.mc, recvs, 3, wc), SFV_ERR_WORK);
    CHECK(test_seconds() - t0 < 3.0);
    CHECK(strstr(sfv_last_error()->message, "timed out") != NULL);
    CHECK_EQ(wc[0].result, SFV_ERR_TIMEOUT);
    CHECK_EQ(wc[1].result, SFV_ERR_TIMEOUT);
    CHECK_EQ(wc[2].result, SFV_ERR_TIMEOUT);
    CHECK_EQ(outstanding(&a), 0);
    side_close(&a);
    side_close(&b);
}

typedef struct scope_ctx {
    side *a;
    int fail;
} scope_ctx;
/* Sends 16 bytes to every peer, pending handles NULL: the scope waits for them. */
static sfv_result send_to_all(sfv_multi_channel *mc, void *user) {
    scope_ctx *x = (scope_ctx *)user;
    size_t i;
    for (i = 0; i < sfv_multi_channel_len(mc); i++) {
        sfv_gather_element g = G(x->a, 16 * i, 16);
        sfv_result r = sfv_channel_post_send(sfv_multi_channel_peer(mc, i), &g, 1, NULL);
        if (r) return r;
    }
    return x->fail ? SFV_ERR_NOT_FOUND : SFV_OK;
}
static sfv_result leaves_work(sfv_multi_channel *mc, void *user) {
    scope_ctx *x = (scope_ctx *)user;
    sfv_gather_element g = G(x->a, 0, 16);
    sfv_pending p;
    return sfv_channel_post_send(sfv_multi_channel_peer(mc, 1), &g, 1, &p); /* never polled */
}
/* A write with a wrong rkey, left to the scope: an auto-poll failure. */
static sfv_result bad_write(sfv_multi_channel *mc, void *user) {
    scope_ctx *x = (scope_ctx *)user;
    sfv_gather_element g = G(x->a, 0, 16);
    return sfv_channel_post_write(sfv_multi_channel_peer(mc, 0), &g, 1, sfv_remote_mr_make(sfv_mr_addr(x->a->mr), 16, 0x1234), NULL);
}

/* Inside a scope: a second scope of the same multi-channel (manual or not) is refused; a blocking many-peer call
   works and consumes its own work; then one send per peer is left to the scope. */
static sfv_result nested(sfv_multi_channel *mc, void *user) {
    scope_ctx *x = (scope_ctx *)user;
    sfv_peer_send s;
    sfv_gather_element g = G(x->a, 0, 16);
    sfv_result r = sfv_multi_channel_scope(mc, send_to_all, x, NULL);
    if (r != SFV_ERR_INVALID) return SFV_ERR_DRIVER;
    if (sfv_multi_channel_manual_scope(mc, send_to_all, x) != SFV_ERR_INVALID) return SFV_ERR_DRIVER; /* nor a manual one */
    memset(&s, 0, sizeof s);
    s.peer = 1;
    s.sges = &g;
    s.n = 1;
    r = sfv_multi_channel_scatter_send(mc, &s, 1, NULL);
    return r ? r : send_to_all(mc, user);
}

/* In a child of its own (devices opened after the fork): the contract breaks and it aborts. */
static void manual_scope_violation(void) {
    side a, b;
    sfv_channel_desc d;
    sfv_pending rx;
    scope_ctx x = {NULL, 0};
    memset(&d, 0, sizeof d);
    pair_open(&a, &b, &d);
    x.a = &a;
    post_rx(&b, 1, 0, 64, &rx);
    (void)!sfv_multi_channel_manual_scope(a.mc, leaves_work, &x);
}

static void t_multi_channel_scopes(void) {
    side a, b;
    sfv_channel_desc d;
    sfv_pending rx[PEERS];
    sfv_scope_report rep;
    scope_ctx x = {NULL, 0};
    size_t i;
    int round;
    CHECK_ABORTS(manual_scope_violation());
    memset(&d, 0, sizeof d);
    pair_open(&a, &b, &d);
    x.a = &a;
    for (round = 0; round < 3; round++) {
        for (i = 0; i < PEERS; i++) {
            memset(a.buf + 16 * i, 'a' + round, 16);
            post_rx(&b, i, 4096 + 16 * i, 16, &rx[i]);
        }
        x.fail = round == 1;
        if (round == 0) {
            CHECK_OK(sfv_multi_channel_scope(a.mc, send_to_all, &x, &rep));
            CHECK_EQ(rep.auto_polled, PEERS);
            CHECK_EQ(rep.failed, 0);
        } else if (round == 1) { /* fn fails after posting: still all drained */
            CHECK_RESULT(sfv_multi_channel_scope(a.mc, send_to_all, &x, &rep), SFV_ERR_SCOPE_FN);
            CHECK_EQ(rep.fn_result, SFV_ERR_NOT_FOUND);
            CHECK_EQ(rep.auto_polled, PEERS);
        } else { /* a manual scope whose fn fails drains quietly and returns fn's result */
            x.fail = 1;
            CHECK_RESULT(sfv_multi_channel_manual_scope(a.mc, send_to_all, &x), SFV_ERR_NOT_FOUND);
        }
        CHECK_EQ(outstanding(&a), 0);
        for (i = 0; i < PEERS; i++) {
            CHECK_OK(sfv_pending_wait(&rx[i], -1, NULL));
            CHECK(b.buf[4096 + 16 * i] == 'a' + round);
        }
    }
    /* nested: b's channel 1 takes two messages (the blocking call's, then the scope's) */
    x.fail = 0;
    post_rx(&b, 1, 4096, 16, &rx[1]);
    post_rx(&b, 1, 4096 + 16, 16, &rx[0]);
    post_rx(&b, 0, 4096 + 48, 16, &rx[2]); /* receives in flight never share memory */
    {
        sfv_pending rx2;
        post_rx(&b, 2, 4096 + 32, 16, &rx2);
        CHECK_OK(sfv_multi_channel_scope(a.mc, nested, &x, &rep));
        CHECK_EQ(rep.auto_polled, PEERS);
        CHECK_OK(sfv_pending_wait(&rx2, -1, NULL));
    }
    for (i = 0; i < PEERS; i++) CHECK_OK(sfv_pending_wait(&rx[i], -1, NULL));
    CHECK_EQ(outstanding(&a) + outstanding(&b), 0);
    CHECK_RESULT(sfv_multi_channel_scope(a.mc, bad_write, &x, &rep), SFV_ERR_SCOPE_AUTOPOLL);
    CHECK_EQ(rep.failed, 1);
    CHECK_EQ(rep.first_error.error_class, SFV_WORK_ERROR_REMOTE);
    CHECK_EQ(outstanding(&a), 0);
    CHECK_RESULT(sfv_multi_channel_scope(a.mc, NULL, &x, &rep), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_scope(NULL, send_to_all, &x, &rep), SFV_ERR_INVALID);
    side_close(&a);
    side_close(&b);
}

/* ---- exchange ------------------------------------------------------------------------------ */
#define LOCALHOST "127.0.0.1"

static void net(sfv_net_node *nodes, size_t n, uint16_t port0) {
    size_t i;
    for (i = 0; i < n; i++) {
        nodes[i].host = LOCALHOST;
        nodes[i].port = (uint16_t)(port0 + i);
        nodes[i].rank = (uint32_t)i;
        nodes[i].device = test_device((int)(i % 2));
    }
}

/* Runs fn(rank, arg) in n-1 children and as rank 0 here; every child must exit 0. */
static void run_ranks(size_t n, void (*fn)(size_t rank, void *arg), void *arg) {
    pid_t pids[8];
    size_t r;
    int st;
    CHECK(n <= 8);
    for (r = 1; r < n; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] == 0) {
            fn(r, arg);
            exit(0);
        }
    }
    fn(0, arg);
    for (r = 1; r < n; r++) {
        CHECK(waitpid(pids[r], &st, 0) == pids[r]);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) FAIL("rank %zu failed (status 0x%x)", r, st);
    }
}

/* 25 exchanges in a row on the same ports (a rank done with one goes straight to the next,
   while slower ranks still finish theirs), then a barrier of 0 bytes without buffers. */
static void exchange_rank(size_t rank, void *arg) {
    sfv_net_node nodes[4];
    char mine[24], all[4 * 24];
    size_t r;
    int round;
    (void)arg;
    net(nodes, 4, 24100);
    for (round = 0; round < 25; round++) {
        snprintf(mine, sizeof mine, "rank %u says hi %u", (unsigned)rank % 10, (unsigned)round % 100);
        memset(all, 0, sizeof all);
        CHECK_OK(sfv_exchange_all(nodes, 4, rank, mine, sizeof mine, all, round ? 20000 : -1)); /* -1: the default deadline */
        for (r = 0; r < 4; r++) {
            char want[24];
            snprintf(want, sizeof want, "rank %u says hi %u", (unsigned)r % 10, (unsigned)round % 100);
            CHECK(strcmp(all + 24 * r, want) == 0);
        }
    }
    CHECK_OK(sfv_exchange_all(nodes, 4, rank, NULL, 0, NULL, 20000));
}
static void t_exchange_four_ranks(void) { run_ranks(4, exchange_rank, NULL); }

static void size_mismatch_rank(size_t rank, void *arg) {
    sfv_net_node nodes[3];
    char mine[32] = {0}, all[96];
    const bool world = arg != NULL; /* rank 1 thinks the world has 3 ranks, else 32-byte messages */
    net(nodes, 3, 24200);
    CHECK_RESULT(sfv_exchange_all(nodes, world && rank ? 3 : 2, rank, mine, !world && rank ? 32 : 16, all, 5000), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "world size or message size") != NULL);
}

/* A process that makes `conns` connections, one after the other, to rank `rank` of the n in
   `nodes`, and on each writes `len` bytes and hangs up; the rank's exchange (8-byte messages,
   no real peer) must fail with `want`, saying `why`. (More strangers: tests/test_exchange.c.) */
static void fake_peer_at(const sfv_net_node *nodes, size_t n, size_t rank, const char *bytes, size_t len, int conns,
                         sfv_result want, const char *why) {
    char mine[8] = "mine", all[8 * 8];
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct sockaddr_in sa;
        int fd, tries, done = 0;
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_port = htons(nodes[rank].port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        for (tries = 0; tries < 200 && done < conns; tries++) {
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
                char sink[64];
                if (write(fd, bytes, len) != (ssize_t)len) _exit(1);
                shutdown(fd, SHUT_WR);
                while (read(fd, sink, sizeof sink) > 0) {}
                done++;
            } else {
                usleep(20000);
            }
            close(fd);
        }
        _exit(done == conns ? 0 : 1);
    }
    CHECK_RESULT(sfv_exchange_all(nodes, n, rank, mine, 8, all, 1500), want);
    if (!strstr(sfv_last_error()->message, why)) FAIL("message \"%s\" does not say \"%s\"", sfv_last_error()->message, why);
    CHECK(waitpid(pid, NULL, 0) == pid);
}
static void fake_peer(const sfv_net_node *nodes, const char *bytes, size_t len, sfv_result want, const char *why) {
    fake_peer_at(nodes, 2, 1, bytes, len, 1, want, why);
}

static void t_exchange_refusals(void) {
    sfv_net_node nodes[3];
    char mine[8] = "mine", all[24];
    double t0;
    net(nodes, 3, 24300);
    CHECK_OK(sfv_net_config_check(nodes, 3));
    CHECK_RESULT(sfv_net_config_check(nodes, 0), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "empty") != NULL);
    nodes[0].rank = 1;
    CHECK_RESULT(sfv_net_config_check(nodes, 3), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "first rank") != NULL);
    nodes[0].rank = 0;
    nodes[2].rank = 1;
    CHECK_RESULT(sfv_net_config_check(nodes, 3), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "twice") != NULL);
    nodes[2].rank = 3;
    CHECK_RESULT(sfv_net_config_check(nodes, 3), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "gaps") != NULL);
    nodes[2].rank = 2;
    nodes[1].host = NULL;
    CHECK_RESULT(sfv_net_config_check(nodes, 3), SFV_ERR_INVALID);
    nodes[1].host = LOCALHOST;
    nodes[1].port = 0;
    CHECK_RESULT(sfv_exchange_all(nodes, 3, 0, mine, 8, all, 100), SFV_ERR_INVALID); /* checked first */
    nodes[1].port = 24301;
    CHECK_RESULT(sfv_exchange_all(nodes, 3, 3, mine, 8, all, 100), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_exchange_all(nodes, 3, 0, NULL, 8, all, 100), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_exchange_all(nodes, 3, 0, mine, (size_t)65 << 20, all, 100), SFV_ERR_INVALID);
    /* one rank alone: its own bytes */
    memset(all, 0, sizeof all);
    CHECK_OK(sfv_exchange_all(nodes, 1, 0, mine, 8, all, 100));
    CHECK(strcmp(all, "mine") == 0);
    /* a host that does not resolve, to connect to and to listen on */
    t0 = test_seconds();
    nodes[1].host = "no-such-host.invalid";
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 0, mine, 8, all, 5000), SFV_ERR_NOT_FOUND);
    CHECK(strstr(sfv_last_error()->message, "no-such-host.invalid") != NULL);
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 1, mine, 8, all, 5000), SFV_ERR_NOT_FOUND);
    nodes[1].host = LOCALHOST;
    CHECK(test_seconds() - t0 < 10.0);
    /* a higher rank that never listens, a lower rank that never comes: timeouts, in time */
    t0 = test_seconds();
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 0, mine, 8, all, 400), SFV_ERR_TIMEOUT);
    CHECK(strstr(sfv_last_error()->message, "rank 1") != NULL);
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 1, mine, 8, all, 400), SFV_ERR_TIMEOUT);
    CHECK(strstr(sfv_last_error()->message, "rank 0") != NULL);
    CHECK(test_seconds() - t0 < 3.0);
    /* two ranks that disagree on the size */
    run_ranks(2, size_mismatch_rank, NULL);
    run_ranks(2, size_mismatch_rank, (void *)1);
    /* rank 1's port is taken: bind fails, with its errno */
    {
        struct sockaddr_in sa;
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        /* reusable past an earlier run's TIME_WAIT; a second listener is still refused */
        CHECK(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_port = htons(nodes[1].port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 1) == 0);
        CHECK_RESULT(sfv_exchange_all(nodes, 2, 1, mine, 8, all, 1000), SFV_ERR_DRIVER);
        CHECK_EQ(sfv_last_error()->errnum, EADDRINUSE);
        close(fd);
    }
    /* strangers at rank 1's door: one talks nonsense, one claims a rank that is not due, one
       speaks the old unauthenticated frame; none proves the job key, so none takes rank 0's
       place: the exchange waits for rank 0 and its timeout names rank 0 and the stranger */
    fake_peer(nodes, "GET / HTTP/1.0\r\n\r\n", 18, SFV_ERR_TIMEOUT, "did not prove the job key: it hung up");
    CHECK(strstr(sfv_last_error()->message, "rank 0 ") != NULL && strstr(sfv_last_error()->message, "127.0.0.1:") != NULL);
    {
        uint8_t h[48] = {'S', 'X', 2, 1, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0, 8};
        fake_peer(nodes, (const char *)h, 48, SFV_ERR_TIMEOUT, "it sent a rank outside its world");
        h[7] = 0;
        h[2] = 1;
        fake_peer(nodes, (const char *)h, 48, SFV_ERR_TIMEOUT, "it sent another version of the exchange");
        h[2] = 2;
        fake_peer(nodes, (const char *)h, 48, SFV_ERR_TIMEOUT, "did not prove the job key: it hung up");
    }
    /* rank 2 of 3 hears from "rank 0" twice */
    {
        uint8_t twice[2 * 48] = {'S', 'X', 2, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 8};
        sfv_net_node three[3];
        net(three, 3, 24300);
        memcpy(twice + 48, twice, 48);
        fake_peer_at(three, 3, 2, (const char *)twice, 96, 2, SFV_ERR_TIMEOUT, "it sent a frame that is not a proof (2 in all)");
    }
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- nodes ----------------------------------------------------------------------------------- */
#define RANKS 3

typedef struct node_side {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_node *node;
    char *buf;
} node_side;

/* Opens rank `rank` of RANKS on its device and connects it to the others: by hand (endpoint,
   exchange, handshake, an empty exchange as the sync), or with sfv_node_connect (and its keyed
   form, for the dissemination barrier). */
static node_side node_open(size_t rank, sfv_barrier_kind kind, uint16_t port0, bool one_call) {
    node_side s;
    sfv_node_desc nd;
    sfv_net_node nodes[RANKS];
    uint8_t mine[SFV_NODE_ENDPOINT_SIZE(RANKS)], all[RANKS * SFV_NODE_ENDPOINT_SIZE(RANKS)];
    memset(&s, 0, sizeof s);
    net(nodes, RANKS, port0);
    s.buf = (char *)aligned_alloc(4096, BUF);
    CHECK(s.buf != NULL);
    memset(s.buf, 0, BUF);
    CHECK_OK(sfv_open_device(nodes[rank].device, &s.ctx));
    CHECK_OK(sfv_alloc_pd(s.ctx, &s.pd));
    CHECK_OK(sfv_reg_mr_local(s.pd, s.buf, BUF, &s.mr));
    memset(&nd, 0, sizeof nd);
    nd.rank = rank;
    nd.world_size = RANKS;
    nd.barrier = kind;
    CHECK_OK(sfv_create_node(s.pd, &nd, &s.node));
    CHECK_EQ(sfv_node_rank(s.node), rank);
    CHECK_EQ(sfv_node_world_size(s.node), RANKS);
    if (one_call && kind == SFV_BARRIER_DISSEMINATION) { /* with a job key of the caller's */
        sfv_exchange_desc ex;
        memset(&ex, 0, sizeof ex);
        ex.key = "the job key of t_node_three_ranks";
        ex.key_len = strlen((const char *)ex.key);
        CHECK_OK(sfv_node_connect_keyed(s.node, nodes, &ex, 30000));
        return s;
    }
    if (one_call) {
        CHECK_OK(sfv_node_connect(s.node, nodes, 30000));
        return s;
    }
    CHECK_OK(sfv_node_endpoint(s.node, mine, sizeof mine));
    CHECK_OK(sfv_exchange_all(nodes, RANKS, rank, mine, sizeof mine, all, 30000));
    CHECK_OK(sfv_node_handshake(s.node, all, sizeof all));
    CHECK_OK(sfv_exchange_all(nodes, RANKS, rank, NULL, 0, NULL, 30000)); /* every rank is connected */
    return s;
}
static void node_close(node_side *s) {
    CHECK_OK(sfv_destroy_node(s->node));
    sfv_dereg_mr(s->mr);
    sfv_dealloc_pd(s->pd);
    sfv_close_device(s->ctx);
    free(s->buf);
}

/* Every rank sends "r->d" to every rank d (itself included, over its loopback channel). The
   receives are posted before a barrier, the sends after it, so none meets an empty queue. */
static void node_all_to_all(node_side *s, size_t rank) {
    sfv_multi_channel *mc = sfv_node_multi_channel(s->node);
    sfv_scatter_element e[RANKS];
    sfv_gather_element g[RANKS];
    sfv_peer_send sends[RANKS];
    sfv_pending rx[RANKS];
    size_t d;
    for (d = 0; d < RANKS; d++) {
        e[d] = sfv_mr_scatter_element(s->mr, s->buf + 4096 + 32 * d, 32);
        CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(mc, d), &e[d], 1, &rx[d]));
        snprintf(s->buf + 32 * d, 32, "%zu->%zu", rank, d);
        g[d] = sfv_mr_gather_element(s->mr, s->buf + 32 * d, 32);
        memset(&sends[d], 0, sizeof sends[d]);
        sends[d].peer = d;
        sends[d].sges = &g[d];
        sends[d].n = 1;
    }
    CHECK_OK(sfv_node_barrier(s->node, NULL, 0, -1));
    CHECK_OK(sfv_multi_channel_scatter_send(mc, sends, RANKS, NULL));
    for (d = 0; d < RANKS; d++) {
        char want[32];
        CHECK_OK(sfv_pending_wait(&rx[d], -1, NULL));
        snprintf(want, sizeof want, "%zu->%zu", d, rank);
        CHECK(strcmp(s->buf + 4096 + 32 * d, want) == 0);
    }
}

typedef struct node_arg {
    volatile uint64_t *entered; /* shared by the ranks: when each entered the barrier (ns) */
    sfv_barrier_kind kind;
    uint16_t port0;
} node_arg;

static void node_rank(size_t rank, void *argp) {
    const node_arg *arg = (const node_arg *)argp;
    node_side s = node_open(rank, arg->kind, arg->port0, arg->kind != SFV_BARRIER_BINARY_TREE);
    const size_t pair[2] = {0, 2}, unordered[2] = {1, 0}, twice[3] = {0, 0, 1}, others[2] = {1, 2}, far[2] = {0, 7};
    uint64_t last = 0;
    size_t r;
    int i;
    node_all_to_all(&s, rank);
    /* nobody leaves the barrier before the last one entered it (rank r comes 80 r ms late) */
    CHECK_OK(sfv_node_barrier(s.node, NULL, 0, -1));
    usleep((useconds_t)(80000 * rank));
    __atomic_store_n(&arg->entered[rank], now_ns(), __ATOMIC_SEQ_CST);
    CHECK_OK(sfv_node_barrier(s.node, NULL, 0, -1));
    for (r = 0; r < RANKS; r++) {
        uint64_t t = __atomic_load_n(&arg->entered[r], __ATOMIC_SEQ_CST);
        CHECK(t != 0);
        if (t > last) last = t;
    }
    CHECK(now_ns() >= last);
    for (i = 0; i < 20; i++) CHECK_OK(sfv_node_barrier(s.node, NULL, 0, 20000));
    /* a sub-group: ranks 0 and 2 meet five times while rank 1 is away, then all meet */
    if (rank != 1)
        for (i = 0; i < 5; i++) CHECK_OK(sfv_node_barrier(s.node, pair, 2, 20000));
    CHECK_OK(sfv_node_barrier(s.node, NULL, 0, 20000));
    /* groups the barrier refuses (it stays usable) */
    CHECK_RESULT(sfv_node_barrier(s.node, unordered, 2, 100), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_barrier(s.node, twice, 3, 100), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_barrier(s.node, far, 2, 100), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_barrier_unchecked(s.node, far, 2, 100), SFV_ERR_INVALID); /* range guards memory */
    CHECK_RESULT(sfv_node_barrier(s.node, pair, 0, 100), SFV_ERR_INVALID);
    if (rank == 0) CHECK_RESULT(sfv_node_barrier(s.node, others, 2, 100), SFV_ERR_INVALID);
    CHECK_OK(sfv_node_barrier_unchecked(s.node, NULL, 0, 20000));
    { /* unchecked: an unsorted group works when every member passes the same one */
        const size_t shuffled[3] = {2, 0, 1};
        CHECK_OK(sfv_node_barrier_unchecked(s.node, shuffled, 3, 20000));
    }
    /* rank 2 stays away from the last barrier: the others time out, then the barrier is
       poisoned. Rank 2 stays up until they are done (a rank gone fails writes, not waits). */
    if (rank != 2) {
        double t = test_seconds();
        CHECK_RESULT(sfv_node_barrier(s.node, NULL, 0, 500), SFV_ERR_TIMEOUT);
        CHECK(test_seconds() - t < 5.0);
        CHECK_RESULT(sfv_node_barrier(s.node, NULL, 0, 500), SFV_ERR_BROKEN);
        __atomic_add_fetch(&arg->entered[RANKS], 1, __ATOMIC_SEQ_CST);
    } else {
        for (i = 0; i < 1000 && __atomic_load_n(&arg->entered[RANKS], __ATOMIC_SEQ_CST) < RANKS - 1; i++) usleep(10000);
    }
    node_close(&s);
}

static void t_node_three_ranks(void) {
    node_arg arg;
    const sfv_barrier_kind kinds[3] = {SFV_BARRIER_CENTRALIZED, SFV_BARRIER_BINARY_TREE, SFV_BARRIER_DISSEMINATION};
    void *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int k;
    CHECK(shared != MAP_FAILED);
    for (k = 0; k < 3; k++) {
        memset(&arg, 0, sizeof arg);
        memset(shared, 0, 4096);
        arg.entered = (volatile uint64_t *)shared;
        arg.kind = kinds[k];
        arg.port0 = (uint16_t)(24400 + 10 * k);
        run_ranks(RANKS, node_rank, &arg);
    }
    munmap(shared, 4096);
}

/* One process: the node's refusals, and a world of one. */
/* Barrier epochs are written by the peers' NICs: an epoch one barrier ahead is what a faster rank
   writes and passes; any further ahead is no rank of this node's (a foreign peer, or ranks with
   different groups), and breaks the barrier instead of letting it pass early. Rank 1's writes
   here are its own channel's RDMA writes into rank 0's epochs, as a hostile peer would make. */
static void foreign_epoch(sfv_node *from, sfv_mr *mr, uint64_t *word, uint64_t epoch) {
    sfv_gather_element g = sfv_mr_gather_element(mr, word, sizeof *word);
    *word = sfv__le64(epoch);
    CHECK_OK(sfv_channel_write(sfv_multi_channel_peer(from->mc, 0), &g, 1,
                               sfv_remote_mr_slice_unchecked(from->peer_in[0], 1 * sizeof(uint64_t), sizeof(uint64_t)), NULL));
}
static void t_node_foreign_epochs(void) {
    const sfv_barrier_kind kinds[3] = {SFV_BARRIER_CENTRALIZED, SFV_BARRIER_BINARY_TREE, SFV_BARRIER_DISSEMINATION};
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    static uint64_t word;
    size_t k, r;
    CHECK_OK(sfv_open_device(test_device(0), &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    CHECK_OK(sfv_reg_mr_local(pd, &word, sizeof word, &mr));
    for (k = 0; k < 3; k++) {
        sfv_node *pair[2];
        uint8_t blobs[2 * SFV_NODE_ENDPOINT_SIZE(2)];
        sfv_node_desc nd;
        memset(&nd, 0, sizeof nd);
        nd.world_size = 2;
        nd.barrier = kinds[k];
        for (r = 0; r < 2; r++) {
            nd.rank = r;
            CHECK_OK(sfv_create_node(pd, &nd, &pair[r]));
            CHECK_OK(sfv_node_endpoint(pair[r], blobs + r * SFV_NODE_ENDPOINT_SIZE(2), SFV_NODE_ENDPOINT_SIZE(2)));
        }
        for (r = 0; r < 2; r++) CHECK_OK(sfv_node_handshake(pair[r], blobs, sizeof blobs));
        /* (with two ranks, rank 0 awaits rank 1 once per barrier in every algorithm) */
        foreign_epoch(pair[1], mr, &word, 1);
        CHECK_OK(sfv_node_barrier(pair[0], NULL, 0, 5000)); /* barrier 1 */
        foreign_epoch(pair[1], mr, &word, 3);               /* rank 1 a barrier ahead of rank 0's 2 */
        CHECK_OK(sfv_node_barrier(pair[0], NULL, 0, 5000)); /* barrier 2 passes on it */
        CHECK_OK(sfv_node_barrier(pair[0], NULL, 0, 5000)); /* so does 3 */
        /* two ahead of 4: no rank writes that (nor a huge one: no sum wraps to let it pass) */
        foreign_epoch(pair[1], mr, &word, k == 0 ? UINT64_MAX : 6);
        CHECK_RESULT(sfv_node_barrier(pair[0], NULL, 0, 5000), SFV_ERR_BROKEN);
        CHECK(strstr(sfv_last_error()->message, k == 0 ? "announced barrier 18446744073709551615" : "announced barrier 6") != NULL);
        CHECK(strstr(sfv_last_error()->message, "awaits its barrier 4") != NULL);
        CHECK_RESULT(sfv_node_barrier(pair[0], NULL, 0, 100), SFV_ERR_BROKEN); /* poisoned */
        CHECK(strstr(sfv_last_error()->message, "poisoned") != NULL);
        for (r = 0; r < 2; r++) CHECK_OK(sfv_destroy_node(pair[r]));
    }
    CHECK_OK(sfv_dereg_mr(mr));
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
}

static void t_node_refusals(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_node *node = (sfv_node *)1, *solo;
    sfv_node_desc nd;
    uint8_t blob[SFV_NODE_ENDPOINT_SIZE(2)], all[2 * SFV_NODE_ENDPOINT_SIZE(2)], one[SFV_NODE_ENDPOINT_SIZE(1)];
    CHECK_OK(sfv_open_device(test_device(0), &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    memset(&nd, 0, sizeof nd);
    CHECK_RESULT(sfv_create_node(pd, &nd, &node), SFV_ERR_INVALID); /* world of 0 */
    CHECK(node == NULL);
    nd.world_size = 2;
    nd.rank = 2;
    CHECK_RESULT(sfv_create_node(pd, &nd, &node), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "rank") != NULL);
    nd.world_size = 4097;
    nd.rank = 0;
    CHECK_RESULT(sfv_create_node(pd, &nd, &node), SFV_ERR_INVALID);
    nd.world_size = 2;
    nd.channel.access = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ; /* the barrier must write */
    CHECK_RESULT(sfv_create_node(pd, &nd, &node), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "REMOTE_WRITE") != NULL);
    nd.channel.access = 0;
    nd.barrier = (sfv_barrier_kind)9;
    CHECK_RESULT(sfv_create_node(pd, &nd, &node), SFV_ERR_INVALID);
    nd.barrier = SFV_BARRIER_DEFAULT;
    nd.channel.max_recv_sge = 1u << 30;
    CHECK_RESULT(sfv_create_node(pd, &nd, &node), SFV_ERR_INVALID);
    nd.channel.max_recv_sge = 0;
    CHECK_RESULT(sfv_create_node(pd, NULL, &node), SFV_ERR_INVALID);
    CHECK_OK(sfv_create_node(pd, &nd, &node));
    CHECK_RESULT(sfv_node_barrier(node, NULL, 0, 100), SFV_ERR_INVALID); /* not connected */
    CHECK(strstr(sfv_last_error()->message, "handshake") != NULL);
    CHECK_RESULT(sfv_node_endpoint(node, blob, sizeof blob - 1), SFV_ERR_INVALID);
    CHECK_OK(sfv_node_endpoint(node, blob, sizeof blob));
    memcpy(all, blob, sizeof blob);
    memcpy(all + sizeof blob, blob, sizeof blob); /* place 1 holds a blob that says rank 0 */
    CHECK_RESULT(sfv_node_handshake(node, all, sizeof all - 1), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_handshake(node, all, sizeof all), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "place 1") != NULL);
    all[sizeof blob + 7] = 1; /* now it says rank 1, but of a world of 3 */
    all[sizeof blob + 11] = 3;
    CHECK_RESULT(sfv_node_handshake(node, all, sizeof all), SFV_ERR_INVALID);
    all[sizeof blob + 11] = 2; /* now its magic goes */
    all[sizeof blob] = 'X';
    CHECK_RESULT(sfv_node_handshake(node, all, sizeof all), SFV_ERR_INVALID);
    all[sizeof blob] = 'S';
    all[sizeof blob + 16 + 1] ^= 0xFF; /* rank 1's entry for rank 0: its endpoint magic */
    CHECK_RESULT(sfv_node_handshake(node, all, sizeof all), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "malformed") != NULL);
    all[sizeof blob + 16 + 1] ^= 0xFF;
    memset(all + sizeof blob + 16 + SFV_ENDPOINT_ENCODED_SIZE + 12, 0, 8); /* its barrier region: 8 bytes */
    all[sizeof blob + 16 + SFV_ENDPOINT_ENCODED_SIZE + 19] = 8;
    CHECK_RESULT(sfv_node_handshake(node, all, sizeof all), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "too small") != NULL);
    CHECK_EQ(sfv_channel_outstanding(sfv_multi_channel_peer(sfv_node_multi_channel(node), 0)), 0);
    memcpy(all + sizeof blob, blob, sizeof blob); /* a good blob for place 1 again */
    all[sizeof blob + 7] = 1;
    all[sizeof blob + 12] = 1; /* a reserved byte of the header */
    CHECK_RESULT(sfv_node_handshake(node, all, sizeof all), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "reserved") != NULL);
    all[sizeof blob + 12] = 0;
    {   /* rank 1's GID for rank 0 of another kind (link-local IPv6 against this side's IPv4): refused
           before any channel connects (channel 0, checked first, would connect fine) */
        uint8_t *gid = all + sizeof blob + 16 + 16, keep[16];
        sfv_node *again;
        sfv_net_node here[2] = {{"127.0.0.1", 47391, 0, NULL}, {"127.0.0.1", 47392, 1, NULL}};
        double t0;
        memcpy(keep, gid, 16);
        memset(gid, 0, 16);
        gid[0] = 0xfe;
        gid[1] = 0x80;
        gid[15] = 1;
        if (getenv("SAFEVERBS_IN_VM")) CHECK(sfv_gid_is_ipv4((const sfv_gid *)keep)); /* the guest's channels pick IPv4 */
        if (sfv_gid_is_ipv4((const sfv_gid *)keep)) {
            CHECK_RESULT(sfv_node_handshake(node, all, sizeof all), SFV_ERR_INVALID);
            CHECK(strstr(sfv_last_error()->message, "different kinds") != NULL);
        }
        memcpy(gid, keep, 16);
        CHECK_OK(sfv_node_handshake(node, all, sizeof all)); /* nothing was connected: this works */
        CHECK_RESULT(sfv_node_handshake(node, all, sizeof all), SFV_ERR_INVALID);
        CHECK(strstr(sfv_last_error()->message, "already connected") != NULL);
        t0 = test_seconds();
        CHECK_RESULT(sfv_node_connect(node, here, 5000), SFV_ERR_INVALID); /* at once, no exchange */
        CHECK(test_seconds() - t0 < 1.0);
        CHECK(strstr(sfv_last_error()->message, "already connected") != NULL);
        CHECK_OK(sfv_create_node(pd, &nd, &again)); /* a refused blob leaves the output zeroed */
        memset(blob, 0xab, sizeof blob);
        CHECK_RESULT(sfv_node_endpoint(again, blob, sizeof blob - 1), SFV_ERR_INVALID);
        CHECK(blob[0] == 0 && blob[sizeof blob - 2] == 0);
        CHECK_OK(sfv_destroy_node(again));
    }
    CHECK_OK(sfv_destroy_node(node));
    CHECK_OK(sfv_destroy_node(NULL));
    /* a world of one: connected to itself, barriers return at once */
    nd.world_size = 1;
    CHECK_OK(sfv_create_node(pd, &nd, &solo));
    CHECK_OK(sfv_node_endpoint(solo, one, sizeof one));
    CHECK_OK(sfv_node_handshake(solo, one, sizeof one));
    CHECK_OK(sfv_node_barrier(solo, NULL, 0, 100));
    CHECK_RESULT(sfv_node_handshake(solo, one, sizeof one), SFV_ERR_INVALID); /* once only */
    CHECK(strstr(sfv_last_error()->message, "already") != NULL);
    {
        sfv_net_node me[1];
        net(me, 1, 24490);
        CHECK_RESULT(sfv_node_connect(solo, me, 100), SFV_ERR_INVALID); /* and not again in one call */
        CHECK(strstr(sfv_last_error()->message, "already") != NULL);
        CHECK_RESULT(sfv_node_connect(NULL, me, 100), SFV_ERR_INVALID);
        CHECK_RESULT(sfv_node_connect(solo, NULL, 100), SFV_ERR_INVALID);
    }
    CHECK_OK(sfv_destroy_node(solo));
    /* two ranks in this process, connected by hand: rank 0's channel to rank 1 is full (two
       sends wait for receives that are not there), so the barrier refuses before it starts and
       is not poisoned: the next call times out (rank 1 never comes), and only then is it */
    {
        sfv_node *pair[2];
        uint8_t blobs[2 * SFV_NODE_ENDPOINT_SIZE(2)];
        static char buf[64];
        sfv_mr *mr;
        sfv_gather_element g;
        sfv_pending tx[2];
        sfv_channel *to1;
        size_t r;
        nd.world_size = 2;
        nd.channel.max_send_wr = 2;
        for (r = 0; r < 2; r++) {
            nd.rank = r;
            CHECK_OK(sfv_create_node(pd, &nd, &pair[r]));
            CHECK_OK(sfv_node_endpoint(pair[r], blobs + r * SFV_NODE_ENDPOINT_SIZE(2), SFV_NODE_ENDPOINT_SIZE(2)));
        }
        for (r = 0; r < 2; r++) CHECK_OK(sfv_node_handshake(pair[r], blobs, sizeof blobs));
        CHECK_OK(sfv_reg_mr_local(pd, buf, sizeof buf, &mr));
        g = sfv_mr_gather_element(mr, buf, 8);
        to1 = sfv_multi_channel_peer(sfv_node_multi_channel(pair[0]), 1);
        CHECK_OK(sfv_channel_post_send(to1, &g, 1, &tx[0]));
        CHECK_OK(sfv_channel_post_send(to1, &g, 1, &tx[1]));
        CHECK_RESULT(sfv_node_barrier(pair[0], NULL, 0, 100), SFV_ERR_RESOURCE);
        CHECK(strstr(sfv_last_error()->message, "rank 1") != NULL);
        {
            sfv_scatter_element e = sfv_mr_scatter_element(mr, buf + 32, 8);
            sfv_channel *from0 = sfv_multi_channel_peer(sfv_node_multi_channel(pair[1]), 0);
            sfv_pending rx[2];
            CHECK_OK(sfv_channel_post_receive(from0, &e, 1, &rx[0]));
            e = sfv_mr_scatter_element(mr, buf + 40, 8); /* receives in flight never share memory */
            CHECK_OK(sfv_channel_post_receive(from0, &e, 1, &rx[1]));
            for (r = 0; r < 2; r++) {
                CHECK_OK(sfv_pending_wait(&tx[r], -1, NULL));
                CHECK_OK(sfv_pending_wait(&rx[r], -1, NULL));
            }
        }
        CHECK_RESULT(sfv_node_barrier(pair[0], NULL, 0, 100), SFV_ERR_TIMEOUT);
        CHECK_RESULT(sfv_node_barrier(pair[0], NULL, 0, 100), SFV_ERR_BROKEN);
        for (r = 0; r < 2; r++) CHECK_OK(sfv_destroy_node(pair[r]));
        sfv_dereg_mr(mr);
    }
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
}

static const harness_test TESTS[] = {
    TEST(t_multi_channel_create_and_connect, 60),
    TEST(t_multi_channel_many_peer_calls, 60),
    TEST(t_multi_channel_failures, 60),
    TEST(t_multi_channel_deadline, 60),
    TEST(t_multi_channel_scopes, 60),
    TEST(t_exchange_four_ranks, 60),
    TEST(t_exchange_refusals, 60),
    TEST(t_node_three_ranks, 240),
    TEST(t_node_refusals, 60),
    TEST(t_node_foreign_epochs, 60),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
