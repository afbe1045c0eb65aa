/* test_channel.c - the channel on real rxe devices: connecting (loopback, rxe0 <-> rxe1, two
   processes), every operation, pending work, scopes, batches, completion errors of each class,
   deadlines, the event wait mode, teardown with work in flight, the endpoint codec, and atomics
   (byte order, a shared counter, a spinlock, every refusal). */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "../safeverbs.h"
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#define PAIR_BUF (2u << 20) /* 2 MiB per side: room for the 1 MiB size class */
#include "pair.h"

/* A pair whose sender a gives up after `rnr_retries` RNR NAKs from b (b asks for the shortest wait). */
static void pair_open_rnr(side *a, side *b, uint8_t rnr_retries) {
    sfv_channel_desc da = desc_default(), db = desc_default();
    da.rnr_retries_set = true;
    da.rnr_retries = rnr_retries;
    db.min_rnr_timer = 1;
    pair_open(a, b, &da, &db, SHARED);
}

static sfv_gather_element G(side *s, size_t off, size_t len) { return sfv_mr_gather_element(s->mr, s->buf + off, len); }
static sfv_scatter_element S(side *s, size_t off, size_t len) { return sfv_mr_scatter_element(s->mr, s->buf + off, len); }

static void fill(char *p, size_t n, unsigned seed) {
    size_t i;
    for (i = 0; i < n; i++) p[i] = (char)(seed * 131 + i * 7 + (i >> 8));
}

/* --- connecting ------------------------------------------------------------------------------ */
static void t_loopback_send_receive(void) {
    sfv_channel_desc d = desc_default();
    side s = side_open(test_device(0), &d, SHARED);
    sfv_endpoint me;
    sfv_pending rx;
    sfv_work_completion wc;
    sfv_gather_element g;
    sfv_scatter_element sc;
    CHECK(sfv_channel_pd(s.ch) == s.pd);
    CHECK_OK(sfv_channel_endpoint(s.ch, &me));
    CHECK(me.qpn != 0 && me.has_gid);
    CHECK(me.psn != 0 && me.psn <= 0xFFFFFFu); /* a random first PSN */
    CHECK_EQ(me.psn, sfv_channel_get_desc(s.ch)->send_psn);
    CHECK_OK(sfv_channel_handshake(s.ch, &me));
    CHECK_RESULT(sfv_channel_handshake(s.ch, &me), SFV_ERR_INVALID); /* once only */
    strcpy(s.buf, "hello, rxe");
    g = G(&s, 0, 11);
    sc = S(&s, 4096, 64);
    CHECK_OK(sfv_channel_post_receive(s.ch, &sc, 1, &rx));
    CHECK_OK(sfv_channel_send(s.ch, &g, 1, &wc));
    CHECK_EQ(wc.opcode, SFV_WC_OP_SEND);
    CHECK_EQ(wc.byte_len, 0);
    CHECK(!wc.has_imm);
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK_EQ(wc.opcode, SFV_WC_OP_RECV);
    CHECK_EQ(wc.byte_len, 11);
    CHECK(strcmp(s.buf + 4096, "hello, rxe") == 0);
    CHECK_EQ(sfv_channel_outstanding(s.ch), 0);
    side_close(&s);
}

static void t_desc_defaults_and_range_checks(void) {
    sfv_context *c;
    sfv_pd *pd;
    sfv_channel *ch = (sfv_channel *)1;
    sfv_channel_desc d = desc_default(), o;
    sfv_port_attr pa;
    CHECK_OK(sfv_open_device(test_device(0), &c));
    CHECK_OK(sfv_alloc_pd(c, &pd));
    CHECK_OK(sfv_query_port(c, 1, &pa));
    CHECK_OK(sfv_channel_desc_resolve(pd, &d, &o));
    CHECK_EQ(o.max_send_wr, 128);
    CHECK_EQ(o.cq_entries, o.max_send_wr + o.max_recv_wr);
    CHECK_EQ(o.port, 1);
    CHECK_EQ(o.path_mtu, pa.active_mtu); /* the port's MTU, not a hard 4096 */
    CHECK(o.gid_index_set);
    if (getenv("SAFEVERBS_IN_VM")) CHECK_EQ(o.gid_index, 1);
    CHECK_EQ(o.ack_retries, 6);
    CHECK_EQ(o.rnr_retries, 7);
    CHECK(o.max_rd_atomic > 1); /* the device's limit, not 1 */
    CHECK_EQ(o.service_level, 0);
    CHECK_EQ(o.traffic_class, 0);
    CHECK_EQ(o.timeout_ms, 10000);
    CHECK_EQ(o.wait_mode, SFV_WAIT_BUSY);
    CHECK_EQ(o.access, SHARED);
    CHECK_OK(sfv_channel_desc_resolve(pd, NULL, &o)); /* NULL desc: all defaults */
#define REFUSE(field, value)                                                  \
    do {                                                                      \
        d = desc_default();                                                   \
        d.field = value;                                                      \
        CHECK_RESULT(sfv_create_channel(pd, &d, &ch), SFV_ERR_INVALID);       \
        CHECK(ch == NULL);                                                    \
        if (!strstr(sfv_last_error()->message, #field)) FAIL("message does not name %s: %s", #field, sfv_last_error()->message); \
    } while (0)
    REFUSE(max_send_wr, 0x7fffffff);
    REFUSE(max_recv_wr, 0x7fffffff);
    REFUSE(max_send_sge, 100000);
    REFUSE(max_recv_sge, 100000);
    REFUSE(cq_entries, 3);
    REFUSE(max_inline_data, 1u << 20);
    REFUSE(access, 1u << 5);
    REFUSE(port, 7);
    REFUSE(path_mtu, 1000);
    REFUSE(path_mtu, 8192);
    if (pa.active_mtu < 4096) REFUSE(path_mtu, pa.active_mtu * 2); /* over what the link carries */
    REFUSE(service_level, 16);
    REFUSE(send_psn, 1u << 24);
    REFUSE(min_rnr_timer, 32);
    REFUSE(ack_timeout, 32);
    REFUSE(max_rd_atomic, 100000);
    REFUSE(timeout_ms, 0xffffffffu);
    REFUSE(wait_mode, (sfv_wait_mode)9);
    d = desc_default();
    d.ack_retries_set = true;
    d.ack_retries = 8;
    CHECK_RESULT(sfv_create_channel(pd, &d, &ch), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "ack_retries") != NULL);
    d = desc_default();
    d.rnr_retries_set = true;
    d.rnr_retries = 9;
    CHECK_RESULT(sfv_create_channel(pd, &d, &ch), SFV_ERR_INVALID);
    d = desc_default();
    d.gid_index_set = true;
    d.gid_index = 250;
    CHECK_RESULT(sfv_create_channel(pd, &d, &ch), SFV_ERR_NOT_FOUND); /* no GID there */
    d = desc_default();
    d.send_psn = 5; /* as given */
    CHECK_OK(sfv_create_channel(pd, &d, &ch));
    CHECK_EQ(sfv_channel_get_desc(ch)->send_psn, 5);
    CHECK_OK(sfv_destroy_channel(ch));
    {
        sfv_channel *c1, *c2;
        CHECK_OK(sfv_create_channel(pd, NULL, &c1));
        CHECK_OK(sfv_create_channel(pd, NULL, &c2));
        CHECK(sfv_channel_get_desc(c1)->send_psn != sfv_channel_get_desc(c2)->send_psn); /* 1 in 2^24 to fail */
        CHECK_OK(sfv_destroy_channel(c1));
        CHECK_OK(sfv_destroy_channel(c2));
    }
    CHECK_RESULT(sfv_create_channel(NULL, NULL, &ch), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_create_channel(pd, NULL, NULL), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_channel(NULL));
    sfv_dealloc_pd(pd);
    sfv_close_device(c);
}

static void t_pair_rxe0_rxe1(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scatter_element sc;
    sfv_gather_element g;
    sfv_pending rx;
    sfv_work_completion wc;
    pair_open(&a, &b, &d, &d, SHARED);
    fill(a.buf, 1000, 1);
    sc = S(&b, 0, 1000);
    g = G(&a, 0, 1000);
    CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
    CHECK_OK(sfv_channel_send(a.ch, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK_EQ(wc.byte_len, 1000);
    CHECK(memcmp(a.buf, b.buf, 1000) == 0);
    pair_close(&a, &b);
}

static int sock_exchange(int fd, const sfv_endpoint *mine, sfv_endpoint *theirs) {
    uint8_t out[SFV_ENDPOINT_ENCODED_SIZE], in[SFV_ENDPOINT_ENCODED_SIZE];
    sfv_endpoint_encode(mine, out);
    if (write(fd, out, sizeof out) != (ssize_t)sizeof out) return -1;
    if (read(fd, in, sizeof in) != (ssize_t)sizeof in) return -1;
    return sfv_endpoint_decode(in, sizeof in, theirs) == SFV_OK ? 0 : -1;
}

/* A child process on rxe1, the parent on rxe0, endpoints over a socket: 100 round trips. */
static void t_two_processes(void) {
    int sv[2], st, i;
    pid_t pid;
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pid = fork(); /* before any device is opened */
    CHECK(pid >= 0);
    {
        sfv_channel_desc d = desc_default();
        side s = side_open(test_device(pid == 0 ? 1 : 0), &d, SHARED);
        sfv_endpoint me, peer;
        int fd = sv[pid == 0 ? 1 : 0];
        CHECK_OK(sfv_channel_endpoint(s.ch, &me));
        CHECK(sock_exchange(fd, &me, &peer) == 0);
        CHECK_OK(sfv_channel_handshake(s.ch, &peer));
        for (i = 0; i < 100; i++) {
            sfv_scatter_element sc = S(&s, 4096, 256);
            sfv_gather_element g = G(&s, 0, 256);
            sfv_pending rx;
            sfv_work_completion wc;
            CHECK_OK(sfv_channel_post_receive(s.ch, &sc, 1, &rx));
            if (i == 0) { char c = 0; CHECK(write(fd, &c, 1) == 1 && read(fd, &c, 1) == 1); } /* both posted */
            if (pid != 0) { /* parent pings */
                fill(s.buf, 256, (unsigned)i);
                CHECK_OK(sfv_channel_send(s.ch, &g, 1, NULL));
                CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
                CHECK(memcmp(s.buf, s.buf + 4096, 256) == 0);
            } else { /* child echoes */
                CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
                CHECK_EQ(wc.byte_len, 256);
                memcpy(s.buf, s.buf + 4096, 256);
                CHECK_OK(sfv_channel_send(s.ch, &g, 1, NULL));
            }
        }
        side_close(&s);
        if (pid == 0) _exit(0);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void t_handshake_bad_peer(void) {
    sfv_channel_desc d = desc_default();
    side s = side_open(test_device(0), &d, SHARED);
    sfv_endpoint me, bad;
    sfv_gather_element g = G(&s, 0, 8);
    sfv_pending p;
    CHECK_RESULT(sfv_channel_post_send(s.ch, &g, 1, &p), SFV_ERR_INVALID); /* not connected */
    CHECK(strstr(sfv_last_error()->message, "handshake") != NULL);
    CHECK_OK(sfv_channel_endpoint(s.ch, &me));
    bad = me; bad.qpn = 0;
    CHECK_RESULT(sfv_channel_handshake(s.ch, &bad), SFV_ERR_INVALID);
    bad = me; bad.qpn = 1u << 24;
    CHECK_RESULT(sfv_channel_handshake(s.ch, &bad), SFV_ERR_INVALID);
    bad = me; bad.psn = 1u << 24;
    CHECK_RESULT(sfv_channel_handshake(s.ch, &bad), SFV_ERR_INVALID);
    bad = me; bad.mtu = 1000;
    CHECK_RESULT(sfv_channel_handshake(s.ch, &bad), SFV_ERR_INVALID);
    bad = me; bad.has_gid = false; /* RoCE cannot connect without the peer's GID */
    CHECK_RESULT(sfv_channel_handshake(s.ch, &bad), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "GID") != NULL);
    CHECK_RESULT(sfv_channel_handshake(s.ch, NULL), SFV_ERR_INVALID);
    CHECK_OK(sfv_channel_handshake(s.ch, &me)); /* still connectable after refusals */
    side_close(&s);
}

/* --- moving data ----------------------------------------------------------------------------- */
static void t_write_and_read(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_remote_mr rb, sub;
    sfv_gather_element g;
    sfv_scatter_element sc;
    sfv_work_completion wc;
    pair_open(&a, &b, &d, &d, SHARED);
    rb = sfv_mr_remote(b.mr);
    fill(a.buf, 5000, 3);
    CHECK_OK(sfv_remote_mr_sub(rb, 100, &sub));
    g = G(&a, 0, 5000);
    CHECK_OK(sfv_channel_write(a.ch, &g, 1, sub, &wc));
    CHECK_EQ(wc.opcode, SFV_WC_OP_WRITE);
    CHECK_EQ(wc.byte_len, 0);
    CHECK(memcmp(b.buf + 100, a.buf, 5000) == 0);
    CHECK_EQ(b.buf[99], 0);
    CHECK_EQ(b.buf[5100], 0);
    sc = S(&a, 100000, 5000);
    CHECK_OK(sfv_channel_read(a.ch, &sc, 1, sub, &wc));
    CHECK_EQ(wc.opcode, SFV_WC_OP_READ);
    CHECK_EQ(wc.byte_len, 5000);
    CHECK(memcmp(a.buf + 100000, a.buf, 5000) == 0);
    /* more bytes than the remote region holds: refused before posting */
    CHECK_OK(sfv_remote_mr_slice(rb, 0, 10, &sub));
    CHECK_RESULT(sfv_channel_write(a.ch, &g, 1, sub, &wc), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(sfv_channel_read(a.ch, &sc, 1, sub, &wc), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    pair_close(&a, &b);
}

/* What real devices need: both sides agree on the read depth (b starts no more reads than a
   answers), the traffic class reaches the address vector, and reads keep to the device's
   element limit (max_sge_rd, below max_sge on some NICs; rxe's equals it, so it is set here). */
static void t_read_depth_traffic_class_read_sge(void) {
    side a, b;
    sfv_channel_desc da = desc_default(), db = desc_default();
    sfv_endpoint ea, eb;
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qi;
    sfv_scatter_element sc[8];
    sfv_gather_element g[2];
    sfv_remote_mr rem[8], whole;
    sfv_pending p;
    size_t i;
    da.max_rd_atomic = 2;
    da.traffic_class = db.traffic_class = 96; /* DSCP 24 */
    a = side_open(test_device(0), &da, SHARED);
    b = side_open(test_device(1), &db, SHARED);
    CHECK_OK(sfv_channel_endpoint(a.ch, &ea));
    CHECK_OK(sfv_channel_endpoint(b.ch, &eb));
    CHECK_EQ(ea.rd_atomic, 2);
    CHECK(eb.rd_atomic > 2);
    connect_pair(&a, &b);
    memset(&qa, 0, sizeof qa);
    CHECK(ibv_query_qp(b.ch->qp, &qa, IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_AV, &qi) == 0);
    CHECK_EQ(qa.max_rd_atomic, 2);
    CHECK_EQ(qa.max_dest_rd_atomic, eb.rd_atomic);
    CHECK_EQ(qa.ah_attr.grh.traffic_class, 96);
    CHECK(ibv_query_qp(a.ch->qp, &qa, IBV_QP_MAX_QP_RD_ATOMIC, &qi) == 0);
    CHECK_EQ(qa.max_rd_atomic, 2);
    /* eight reads in flight from b, which a answers two at a time */
    fill(a.buf, 8 * 4096, 5);
    for (i = 0; i < 8; i++) {
        sc[i] = S(&b, i * 4096, 4096);
        CHECK_OK(sfv_remote_mr_slice(sfv_mr_remote(a.mr), i * 4096, 4096, &rem[i]));
    }
    CHECK_OK(sfv_channel_post_read_batch(b.ch, sc, 1, 8, rem, &p));
    CHECK_OK(sfv_pending_wait(&p, -1, NULL));
    CHECK(memcmp(a.buf, b.buf, 8 * 4096) == 0);
    /* elements per read */
    CHECK(b.ch->max_read_sge >= 1 && b.ch->max_read_sge <= sfv_channel_get_desc(b.ch)->max_send_sge);
    b.ch->max_read_sge = 1; /* as on a NIC that reads into one element */
    sfv__set_can(b.ch, b.ch->can_send, b.ch->can_recv); /* (the posts read their limits from there) */
    CHECK_OK(sfv_remote_mr_slice(sfv_mr_remote(a.mr), 0, 8192, &whole));
    CHECK_RESULT(sfv_channel_read(b.ch, sc, 2, whole, NULL), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "max_sge_rd") != NULL);
    CHECK_RESULT(sfv_channel_post_read_batch(b.ch, sc, 2, 1, &whole, &p), SFV_ERR_INVALID);
    CHECK_OK(sfv_channel_read(b.ch, sc, 1, rem[0], NULL));
    g[0] = G(&b, 0, 4096);
    g[1] = G(&b, 4096, 4096);
    CHECK_OK(sfv_channel_write(b.ch, g, 2, whole, NULL)); /* writes still take max_send_sge */
    CHECK_EQ(sfv_channel_outstanding(b.ch), 0);
    pair_close(&a, &b);
}

static void t_immediates(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scatter_element sc;
    sfv_gather_element g;
    sfv_pending rx;
    sfv_work_completion wc;
    pair_open(&a, &b, &d, &d, SHARED);
    g = G(&a, 0, 32);
    sc = S(&b, 0, 64);
    CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
    CHECK_OK(sfv_channel_send_imm(a.ch, &g, 1, 0xdeadbeef, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK(wc.has_imm);
    CHECK_EQ(wc.imm_data, 0xdeadbeef); /* host order, converted once */
    CHECK_EQ(wc.byte_len, 32);
    CHECK_EQ(wc.opcode, SFV_WC_OP_RECV);
    /* write with immediate: the data lands in the region, the value in a receive */
    fill(a.buf, 128, 9);
    g = G(&a, 0, 128);
    CHECK_OK(sfv_channel_post_receive(b.ch, NULL, 0, &rx));
    CHECK_OK(sfv_channel_write_imm(a.ch, &g, 1, sfv_mr_remote(b.mr), 0x01020304, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK(wc.has_imm);
    CHECK_EQ(wc.imm_data, 0x01020304);
    CHECK_EQ(wc.opcode, SFV_WC_OP_RECV_IMM);
    CHECK_EQ(wc.byte_len, 128); /* what the write placed in the region; no receive element was used */
    CHECK(memcmp(b.buf, a.buf, 128) == 0);
    /* a zero-length send with immediate */
    CHECK_OK(sfv_channel_post_receive(b.ch, NULL, 0, &rx));
    CHECK_OK(sfv_channel_send_imm(a.ch, NULL, 0, 7, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK(wc.has_imm && wc.imm_data == 7 && wc.byte_len == 0);
    pair_close(&a, &b);
}

static void t_gather_4_6_2_into_scatter_5_7(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_gather_element g[3];
    sfv_scatter_element sc[2];
    sfv_pending rx;
    sfv_work_completion wc;
    pair_open(&a, &b, &d, &d, SHARED);
    memcpy(a.buf + 0, "ABCD", 4);
    memcpy(a.buf + 100, "EFGHIJ", 6);
    memcpy(a.buf + 200, "KL", 2);
    g[0] = G(&a, 0, 4);
    g[1] = G(&a, 100, 6);
    g[2] = G(&a, 200, 2);
    sc[0] = S(&b, 1000, 5);
    sc[1] = S(&b, 2000, 7);
    CHECK_OK(sfv_channel_post_receive(b.ch, sc, 2, &rx));
    CHECK_OK(sfv_channel_send(a.ch, g, 3, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK_EQ(wc.byte_len, 12);
    CHECK(memcmp(b.buf + 1000, "ABCDE", 5) == 0);
    CHECK(memcmp(b.buf + 2000, "FGHIJKL", 7) == 0);
    /* more elements than the channel allows: refused */
    {
        sfv_gather_element many[5] = {g[0], g[0], g[0], g[0], g[0]};
        CHECK_RESULT(sfv_channel_send(a.ch, many, 5, NULL), SFV_ERR_INVALID);
    }
    pair_close(&a, &b);
}

static void t_every_size_class(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    size_t size;
    unsigned k = 0;
    pair_open(&a, &b, &d, &d, SHARED);
    for (size = 1; size <= (1u << 20); size = size < 4 ? size + 1 : size * 2 + (k % 3 == 0 ? 1 : 0), k++) {
        sfv_scatter_element sc;
        sfv_gather_element g;
        sfv_pending rx;
        sfv_work_completion wc;
        if (size > (1u << 20)) break;
        fill(a.buf, size, k);
        sc = S(&b, 0, size);
        g = G(&a, 0, size);
        CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
        CHECK_OK(sfv_channel_send(a.ch, &g, 1, NULL));
        CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
        if (wc.byte_len != size) FAIL("size %zu: received %u", size, wc.byte_len);
        if (memcmp(a.buf, b.buf, size) != 0) FAIL("size %zu: payload differs", size);
        /* the same size by RDMA write and read back */
        fill(a.buf, size, k + 100);
        CHECK_OK(sfv_channel_write(a.ch, &g, 1, sfv_mr_remote(b.mr), NULL));
        sc = S(&a, BUF / 2, size);
        CHECK_OK(sfv_channel_read(a.ch, &sc, 1, sfv_mr_remote(b.mr), &wc));
        if (memcmp(a.buf, a.buf + BUF / 2, size) != 0) FAIL("size %zu: write/read differs", size);
    }
    CHECK(k > 20);
    pair_close(&a, &b);
}

/* --- pending work ---------------------------------------------------------------------------- */
static void t_pending_out_of_order(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_pending rx[4], tx[4];
    sfv_work_completion wc;
    int i;
    pair_open(&a, &b, &d, &d, SHARED);
    for (i = 0; i < 4; i++) {
        sfv_scatter_element sc = S(&b, (size_t)i * 100, 100);
        CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx[i]));
        CHECK(!sfv_pending_done(&rx[i]));
    }
    CHECK_EQ(sfv_channel_outstanding(b.ch), 4);
    CHECK_EQ(sfv_pending_poll(&rx[0], &wc), SFV_NOT_DONE);
    for (i = 0; i < 4; i++) {
        sfv_gather_element g = G(&a, (size_t)i * 100, (size_t)(10 + i));
        CHECK_OK(sfv_channel_post_send(a.ch, &g, 1, &tx[i]));
    }
    /* the last first: its wait polls the others' completions, which are kept for them */
    CHECK_OK(sfv_pending_wait(&rx[3], -1, &wc));
    CHECK_EQ(wc.byte_len, 13);
    CHECK_OK(sfv_pending_wait(&tx[2], -1, NULL));
    CHECK_OK(sfv_pending_poll(&rx[1], &wc)); /* already completed: no wait */
    CHECK_EQ(wc.byte_len, 11);
    CHECK_OK(sfv_pending_poll(&rx[0], &wc));
    CHECK_EQ(wc.byte_len, 10);
    CHECK_OK(sfv_pending_wait(&rx[2], 0, &wc));
    CHECK_EQ(wc.byte_len, 12);
    CHECK_OK(sfv_pending_poll(&rx[2], &wc)); /* polling a finished handle again repeats it */
    CHECK_EQ(wc.byte_len, 12);
    CHECK(sfv_pending_done(&rx[2]));
    for (i = 0; i < 4; i++) CHECK_OK(sfv_pending_wait(&tx[i], -1, NULL));
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    CHECK_EQ(sfv_channel_outstanding(b.ch), 0);
    pair_close(&a, &b);
}

static void t_queue_full_and_null_pending(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_pending rx[5];
    sfv_scatter_element sc;
    int i;
    d.max_recv_wr = 4;
    pair_open(&a, &b, &d, &d, SHARED);
    for (i = 0; i < 4; i++) { /* receives in flight never share memory (SFV_TRACK_INFLIGHT) */
        sc = S(&b, 16 * i, 16);
        CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx[i]));
    }
    sc = S(&b, 64, 16);
    CHECK_RESULT(sfv_channel_post_receive(b.ch, &sc, 1, &rx[4]), SFV_ERR_RESOURCE);
    CHECK(strstr(sfv_last_error()->message, "queue full") != NULL);
    CHECK_RESULT(sfv_channel_post_receive(a.ch, &sc, 1, NULL), SFV_ERR_INVALID); /* NULL outside a scope */
    CHECK_RESULT(sfv_channel_post_receive(NULL, &sc, 1, &rx[4]), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_receive(b.ch, NULL, 1, &rx[4]), SFV_ERR_INVALID);
    pair_close(&a, &b); /* four receives in flight: destroy flushes them */
}

static void t_batches(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scatter_element sc[16];
    sfv_gather_element g[16];
    sfv_remote_mr rm[16];
    sfv_pending rx[16], tx, one;
    sfv_work_completion wc;
    int i;
    d.max_inline_data = 64;
    pair_open(&a, &b, &d, &d, SHARED);
    for (i = 0; i < 16; i++) {
        sc[i] = S(&b, (size_t)i * 64, 64);
        g[i] = G(&a, (size_t)i * 64, (size_t)(i + 1));
        fill(a.buf + i * 64, 64, (unsigned)i);
        CHECK_OK(sfv_remote_mr_slice(sfv_mr_remote(b.mr), 65536 + (uint64_t)i * 64, 64, &rm[i]));
    }
    CHECK_OK(sfv_channel_post_receive_batch(b.ch, sc, 1, 16, rx));
    CHECK_OK(sfv_channel_post_send_batch(a.ch, g, 1, 16, &tx));
    CHECK_EQ(sfv_channel_outstanding(a.ch), 16);
    CHECK_OK(sfv_pending_wait(&tx, -1, &wc)); /* one handle, one completion, for all 16 */
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    for (i = 0; i < 16; i++) {
        CHECK_OK(sfv_pending_wait(&rx[i], -1, &wc));
        CHECK_EQ(wc.byte_len, i + 1);
        CHECK(memcmp(b.buf + i * 64, a.buf + i * 64, (size_t)i + 1) == 0);
    }
    CHECK_OK(sfv_channel_post_write_batch(a.ch, g, 1, 16, rm, &tx));
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    for (i = 0; i < 16; i++) CHECK(memcmp(b.buf + 65536 + i * 64, a.buf + i * 64, (size_t)i + 1) == 0);
    for (i = 0; i < 16; i++) sc[i] = S(&a, 131072 + (size_t)i * 64, 64);
    CHECK_OK(sfv_channel_post_read_batch(a.ch, sc, 1, 16, rm, &tx));
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    for (i = 0; i < 16; i++) CHECK(memcmp(a.buf + 131072 + i * 64, b.buf + 65536 + i * 64, 64) == 0);
    /* a batch consumed before older work: its places free together with the older work's */
    CHECK_OK(sfv_channel_post_write(a.ch, g, 1, rm[0], &one));
    CHECK_OK(sfv_channel_post_write_batch(a.ch, g, 1, 4, rm, &tx));
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    CHECK_EQ(sfv_channel_outstanding(a.ch), 5);
    CHECK_OK(sfv_pending_wait(&one, -1, NULL));
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    CHECK_RESULT(sfv_channel_post_send_batch(a.ch, g, 1, 0, &tx), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_send_batch(a.ch, g, 1, SFV_BATCH_MAX + 1, &tx), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_write_batch(a.ch, g, 1, 4, NULL, &tx), SFV_ERR_INVALID);
    rm[3].length = 1;
    CHECK_RESULT(sfv_channel_post_write_batch(a.ch, g, 1, 4, rm, &tx), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0); /* a refused batch posts nothing */
    pair_close(&a, &b);
}

/* sfv_pending_wait_all: a receive batch's handles in one call, under one deadline; where it stops
   (a timeout, a handle not posted) and what it says of each handle; a failure among them. */
static void t_wait_all(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scatter_element sc[16];
    sfv_gather_element g[16];
    sfv_pending rx[16], tx;
    sfv_work_completion wcs[16];
    int i;
    pair_open(&a, &b, &d, &d, SHARED);
    for (i = 0; i < 16; i++) {
        sc[i] = S(&b, (size_t)i * 64, 64);
        g[i] = G(&a, (size_t)i * 64, (size_t)(i + 1));
        fill(a.buf + i * 64, 64, (unsigned)i + 7);
    }
    /* all sixteen, each its own completion */
    CHECK_OK(sfv_channel_post_receive_batch(b.ch, sc, 1, 16, rx));
    CHECK_OK(sfv_channel_post_send_batch(a.ch, g, 1, 16, &tx));
    CHECK_OK(sfv_pending_wait_all(rx, 16, -1, wcs));
    for (i = 0; i < 16; i++) {
        CHECK(sfv_pending_done(&rx[i]));
        CHECK_EQ(wcs[i].result, SFV_OK);
        CHECK_EQ(wcs[i].byte_len, i + 1);
        CHECK(memcmp(b.buf + i * 64, a.buf + i * 64, (size_t)i + 1) == 0);
    }
    CHECK_OK(sfv_pending_wait_all(rx, 16, 0, NULL)); /* consumed handles give their results again */
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    CHECK_EQ(sfv_channel_outstanding(b.ch), 0);
    CHECK_OK(sfv_pending_wait_all(rx, 0, -1, NULL));
    CHECK_OK(sfv_pending_wait_all(NULL, 0, -1, NULL));
    wcs[0].result = SFV_OK;
    CHECK_RESULT(sfv_pending_wait_all(NULL, 2, -1, wcs), SFV_ERR_INVALID);
    CHECK_EQ(wcs[0].result, SFV_NOT_DONE);
    CHECK_EQ(wcs[1].result, SFV_NOT_DONE);

    /* two of four arrive: the deadline stops it at the third, the first two are consumed */
    CHECK_OK(sfv_channel_post_receive_batch(b.ch, sc, 1, 4, rx));
    CHECK_OK(sfv_channel_post_send_batch(a.ch, g, 1, 2, &tx));
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    CHECK_RESULT(sfv_pending_wait_all(rx, 4, 200, wcs), SFV_ERR_TIMEOUT);
    CHECK(sfv_pending_done(&rx[0]) && sfv_pending_done(&rx[1]));
    CHECK(!sfv_pending_done(&rx[2]) && !sfv_pending_done(&rx[3]));
    CHECK_EQ(wcs[0].result, SFV_OK);
    CHECK_EQ(wcs[1].byte_len, 2);
    CHECK_EQ(wcs[2].result, SFV_ERR_TIMEOUT);
    CHECK_EQ(wcs[3].result, SFV_NOT_DONE);
    CHECK(strstr(sfv_last_error()->message, "deadline") != NULL);
    CHECK_EQ(sfv_channel_outstanding(b.ch), 2); /* still the NIC's: waiting */
    CHECK_OK(sfv_channel_post_send_batch(a.ch, g, 1, 2, &tx));
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    CHECK_OK(sfv_pending_wait_all(rx, 4, -1, wcs)); /* the first two again, then the rest */
    CHECK_EQ(wcs[3].byte_len, 2);
    CHECK_EQ(sfv_channel_outstanding(b.ch), 0);

    /* a handle never posted stops it there */
    CHECK_OK(sfv_channel_post_receive_batch(b.ch, sc, 1, 2, rx));
    memset(&rx[2], 0, sizeof rx[2]);
    CHECK_OK(sfv_channel_post_send_batch(a.ch, g, 1, 2, &tx));
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    CHECK_RESULT(sfv_pending_wait_all(rx, 3, -1, wcs), SFV_ERR_INVALID);
    CHECK(sfv_pending_done(&rx[0]) && sfv_pending_done(&rx[1]));
    CHECK_EQ(wcs[2].result, SFV_ERR_INVALID);

    /* a receive too small for its message fails; the rest are flushed: all consumed, the first
       failure is the result, in the last error and in its completion */
    sc[1] = S(&b, 64, 1);
    CHECK_OK(sfv_channel_post_receive_batch(b.ch, sc, 1, 4, rx));
    for (i = 0; i < 2; i++) g[i] = G(&a, (size_t)i * 64, 64);
    CHECK_OK(sfv_channel_post_send_batch(a.ch, g, 1, 2, &tx));
    CHECK_RESULT(sfv_pending_wait_all(rx, 4, -1, wcs), SFV_ERR_WORK);
    for (i = 0; i < 4; i++) CHECK(sfv_pending_done(&rx[i]));
    CHECK_EQ(wcs[0].result, SFV_OK);
    CHECK_EQ(wcs[1].result, SFV_ERR_WORK);
    CHECK(wcs[1].status != SFV_WC_WR_FLUSH_ERR);
    CHECK_EQ(wcs[2].status, SFV_WC_WR_FLUSH_ERR);
    CHECK_EQ(wcs[3].status, SFV_WC_WR_FLUSH_ERR);
    CHECK(strstr(sfv_last_error()->message, sfv_wc_status_str(wcs[1].status)) != NULL);
    CHECK_EQ(sfv_channel_outstanding(b.ch), 0);
    {   /* the sender's second send met the receive too small: the responder refused it */
        const sfv_result r = sfv_pending_wait(&tx, -1, NULL);
        CHECK(r == SFV_OK || r == SFV_ERR_WORK);
    }
    pair_close(&a, &b);
}

/* A batch into a peer that never posts a receive: the first send fails (RNR), the rest are
   flushed, unsignaled or not, and the one handle reports the first failure. */
static void t_batch_failure(void) {
    side a, b;
    sfv_gather_element g[4];
    sfv_pending tx;
    sfv_work_completion wc;
    int i;
    pair_open_rnr(&a, &b, 1);
    for (i = 0; i < 4; i++) g[i] = G(&a, (size_t)i * 64, 64);
    CHECK_OK(sfv_channel_post_send_batch(a.ch, g, 1, 4, &tx));
    CHECK_RESULT(sfv_pending_wait(&tx, -1, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_RNR_RETRY_EXC_ERR);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    pair_close(&a, &b);
}

/* --- scopes ---------------------------------------------------------------------------------- */
typedef struct scope_ctx {
    side *a, *b;
    int fail_after_post;
    sfv_pending keep;
} scope_ctx;

/* Posts a receive on b's channel and leaves it to the scope. */
static sfv_result scope_receive(sfv_channel *ch, void *user) {
    scope_ctx *x = (scope_ctx *)user;
    sfv_scatter_element sc = S(x->b, 0, 64);
    return sfv_channel_post_receive(ch, &sc, 1, NULL);
}

static sfv_result scope_send(sfv_channel *ch, void *user) {
    scope_ctx *x = (scope_ctx *)user;
    sfv_gather_element g = G(x->a, 0, 64);
    sfv_result r = sfv_channel_post_send(ch, &g, 1, NULL); /* auto-polled */
    if (r) return r;
    if (x->fail_after_post) return SFV_ERR_PERMISSION; /* fn's own error */
    return SFV_OK;
}

static void t_scope_auto_polls(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    scope_ctx x;
    sfv_scope_report rep;
    sfv_pending rx;
    sfv_scatter_element sc;
    pair_open(&a, &b, &d, &d, SHARED);
    memset(&x, 0, sizeof x);
    x.a = &a;
    x.b = &b;
    sc = S(&b, 0, 64);
    CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
    fill(a.buf, 64, 5);
    CHECK_OK(sfv_channel_scope(a.ch, scope_send, &x, &rep));
    CHECK_EQ(rep.auto_polled, 1);
    CHECK_EQ(rep.failed, 0);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0); /* nothing in flight after the scope */
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    CHECK(memcmp(a.buf, b.buf, 64) == 0);
    /* fn fails after posting: its work is still drained, and its error is reported as its own */
    CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
    x.fail_after_post = 1;
    CHECK_RESULT(sfv_channel_scope(a.ch, scope_send, &x, &rep), SFV_ERR_SCOPE_FN);
    CHECK_EQ(rep.fn_result, SFV_ERR_PERMISSION);
    CHECK_EQ(rep.failed, 0);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    CHECK_RESULT(sfv_channel_scope(a.ch, NULL, &x, &rep), SFV_ERR_INVALID);
    {   /* a receive in b's scope, satisfied by a's send */
        sfv_gather_element g = G(&a, 0, 64);
        sfv_pending tx;
        CHECK_OK(sfv_channel_post_send(a.ch, &g, 1, &tx));
        CHECK_OK(sfv_channel_scope(b.ch, scope_receive, &x, NULL));
        CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    }
    pair_close(&a, &b);
}

/* A send into a peer with no receive posted and RNR retries limited: the scope's auto-poll fails. */
static void t_scope_auto_poll_error_rnr(void) {
    side a, b;
    scope_ctx x;
    sfv_scope_report rep;
    pair_open_rnr(&a, &b, 1);
    memset(&x, 0, sizeof x);
    x.a = &a;
    x.b = &b;
    CHECK_RESULT(sfv_channel_scope(a.ch, scope_send, &x, &rep), SFV_ERR_SCOPE_AUTOPOLL);
    CHECK_EQ(rep.fn_result, SFV_OK);
    CHECK_EQ(rep.failed, 1);
    CHECK_EQ(rep.first_error.result, SFV_ERR_WORK);
    CHECK_EQ(rep.first_error.status, SFV_WC_RNR_RETRY_EXC_ERR);
    CHECK_EQ(rep.first_error.error_class, SFV_WORK_ERROR_TRANSPORT);
    CHECK(strstr(sfv_last_error()->message, "RNR_RETRY_EXC_ERR") != NULL);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    /* the channel is broken now: posts are refused with their own result */
    {
        sfv_gather_element g = G(&a, 0, 8);
        CHECK_RESULT(sfv_channel_send(a.ch, &g, 1, NULL), SFV_ERR_BROKEN);
    }
    pair_close(&a, &b);
}

static sfv_result manual_ok(sfv_channel *ch, void *user) {
    scope_ctx *x = (scope_ctx *)user;
    sfv_gather_element g = G(x->a, 0, 16);
    sfv_pending p;
    sfv_result r = sfv_channel_post_send(ch, &g, 1, &p);
    if (r) return r;
    return sfv_pending_wait(&p, -1, NULL); /* polled by hand: the contract holds */
}
static sfv_result manual_leaves_work(sfv_channel *ch, void *user) {
    scope_ctx *x = (scope_ctx *)user;
    sfv_gather_element g = G(x->a, 0, 16);
    sfv_pending p;
    return sfv_channel_post_send(ch, &g, 1, &p); /* never polled */
}
static sfv_result manual_fails_with_work(sfv_channel *ch, void *user) {
    scope_ctx *x = (scope_ctx *)user;
    sfv_gather_element g = G(x->a, 0, 16);
    sfv_pending p;
    sfv_result r = sfv_channel_post_send(ch, &g, 1, &p);
    return r ? r : SFV_ERR_NOT_FOUND;
}

/* In a child of its own (devices opened after the fork): the contract breaks and it aborts. */
static void manual_scope_violation(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    scope_ctx x;
    sfv_pending rx;
    sfv_scatter_element sc;
    pair_open(&a, &b, &d, &d, SHARED);
    memset(&x, 0, sizeof x);
    x.a = &a;
    x.b = &b;
    sc = S(&b, 0, 64);
    CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
    (void)!sfv_channel_manual_scope(a.ch, manual_leaves_work, &x);
}

static void t_manual_scope_contract(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    scope_ctx x;
    sfv_pending rx[3];
    sfv_scatter_element sc;
    int i;
    /* fn succeeds but leaves work unpolled: a broken contract */
    CHECK_ABORTS(manual_scope_violation());
    pair_open(&a, &b, &d, &d, SHARED);
    memset(&x, 0, sizeof x);
    x.a = &a;
    x.b = &b;
    for (i = 0; i < 3; i++) { /* receives in flight never share memory (SFV_TRACK_INFLIGHT) */
        sc = S(&b, 64 * i, 64);
        CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx[i]));
    }
    CHECK_OK(sfv_channel_manual_scope(a.ch, manual_ok, &x));
    /* fn fails with work left: drained quietly, fn's result returned as it is */
    CHECK_RESULT(sfv_channel_manual_scope(a.ch, manual_fails_with_work, &x), SFV_ERR_NOT_FOUND);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    pair_close(&a, &b);
}

static void t_stale_pending_is_a_broken_contract(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_pending rx;
    sfv_scatter_element sc;
    sfv_gather_element g;
    pair_open(&a, &b, &d, &d, SHARED);
    sc = S(&b, 0, 64);
    g = G(&a, 0, 8);
    CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
    CHECK_OK(sfv_channel_send(a.ch, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    {
        sfv_pending copy = rx;
        copy.state_ = 1; /* a forged "still waiting" copy of a consumed handle */
        CHECK_ABORTS((void)!sfv_pending_poll(&copy, NULL));
    }
    pair_close(&a, &b);
}

/* --- completion errors ----------------------------------------------------------------------- */
static void t_write_to_local_only_region(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_gather_element g;
    sfv_work_completion wc;
    pair_open(&a, &b, &d, &d, SFV_ACCESS_LOCAL_WRITE); /* b registered without remote access */
    g = G(&a, 0, 64);
    CHECK_RESULT(sfv_channel_write(a.ch, &g, 1, sfv_mr_remote(b.mr), &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.result, SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_REM_ACCESS_ERR);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_REMOTE);
    CHECK(strstr(sfv_wc_status_hint(wc.status), "remote access") != NULL);
    pair_close(&a, &b);
}

static void t_unchecked_element_outside_mr(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    static char outside[64];
    sfv_gather_element g;
    sfv_work_completion wc;
    sfv_pending rx;
    sfv_scatter_element sc;
    struct utsname u;
    int major = 0, minor = 0;
    d.max_inline_data = SFV_INLINE_NONE; /* inline bytes are copied at the post: no MR is checked */
    pair_open(&a, &b, &d, &d, SHARED);
    sc = S(&b, 0, 64);
    CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
    g = sfv_mr_gather_element_unchecked(a.mr, outside, sizeof outside);
    CHECK_RESULT(sfv_channel_send(a.ch, &g, 1, &wc), SFV_ERR_WORK);
    /* rxe in Linux 6.12 moves the QP to error and flushes the send (WR_FLUSH_ERR); 6.1 says LOC_PROT_ERR */
    if (uname(&u) == 0) sscanf(u.release, "%d.%d", &major, &minor);
    CHECK_EQ(wc.status, major * 1000 + minor >= 6012 ? SFV_WC_WR_FLUSH_ERR : SFV_WC_LOC_PROT_ERR);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_LOCAL_PROGRAMMING); /* on both kernels: the element is wrong */
    if (!strstr(sfv_last_error()->message, "outside its MR")) FAIL("last error: %s", sfv_last_error()->message);
    pair_close(&a, &b);
}

static void t_receive_too_small(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_gather_element g;
    sfv_scatter_element sc;
    sfv_pending rx;
    sfv_work_completion wc, swc;
    pair_open(&a, &b, &d, &d, SHARED);
    sc = S(&b, 0, 16);
    g = G(&a, 0, 64);
    CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
    CHECK(sfv_channel_send(a.ch, &g, 1, &swc) == SFV_ERR_WORK);
    CHECK_RESULT(sfv_pending_wait(&rx, -1, &wc), SFV_ERR_WORK);
    /* the verbs spec says LOC_LEN_ERR; rxe (Linux 6.1) reports LOC_QP_OP_ERR: both local */
    if (wc.status != SFV_WC_LOC_LEN_ERR && wc.status != SFV_WC_LOC_QP_OP_ERR)
        FAIL("receiver status %s", sfv_wc_status_str(wc.status));
    if (!strstr(sfv_last_error()->message, "smaller than the message")) FAIL("last error: %s", sfv_last_error()->message);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_LOCAL_PROGRAMMING);
    CHECK(swc.error_class == SFV_WORK_ERROR_REMOTE); /* the sender hears of it as a remote error */
    pair_close(&a, &b);
}

static void t_rnr_limited_retries(void) {
    side a, b;
    sfv_gather_element g;
    sfv_work_completion wc;
    double t0;
    pair_open_rnr(&a, &b, 2);
    g = G(&a, 0, 32);
    t0 = test_seconds();
    CHECK_RESULT(sfv_channel_send(a.ch, &g, 1, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_RNR_RETRY_EXC_ERR);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_TRANSPORT);
    CHECK(test_seconds() - t0 < 9.0); /* well inside the 10 s deadline: retries ran out */
    pair_close(&a, &b);
}

/* The peer process dies while eight 2 MiB writes into its memory are in flight: the first
   unfinished one fails with retries exhausted, the rest are flushed, all within the bound. */
static void t_peer_disappears_mid_transfer(void) {
    int sv[2], st;
    pid_t pid;
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pid = fork(); /* before any device is opened */
    CHECK(pid >= 0);
    {
        sfv_channel_desc d = desc_default();
        side s;
        sfv_endpoint me, peer;
        int fd = sv[pid == 0 ? 1 : 0];
        uint8_t rm[SFV_REMOTE_MR_ENCODED_SIZE];
        d.ack_timeout = 10; /* 4.2 ms */
        d.ack_retries_set = true;
        d.ack_retries = 3;
        d.timeout_ms = 20000;
        s = side_open(test_device(pid == 0 ? 1 : 0), &d, SHARED);
        CHECK_OK(sfv_channel_endpoint(s.ch, &me));
        CHECK(sock_exchange(fd, &me, &peer) == 0);
        CHECK_OK(sfv_channel_handshake(s.ch, &peer));
        if (pid == 0) { /* the peer: shares its memory, then dies without a word when told */
            char c;
            sfv_remote_mr_encode(sfv_mr_remote(s.mr), rm);
            CHECK(write(fd, rm, sizeof rm) == (ssize_t)sizeof rm);
            CHECK(read(fd, &c, 1) == 1);
            _exit(0);
        } else {
            sfv_gather_element big = G(&s, 0, BUF);
            sfv_remote_mr target;
            sfv_pending w[8];
            sfv_work_completion wc;
            size_t ok = 0, retry_exc = 0, flushed = 0, i;
            double t0;
            CHECK(read(fd, rm, sizeof rm) == (ssize_t)sizeof rm);
            CHECK_OK(sfv_remote_mr_decode(rm, sizeof rm, &target));
            for (i = 0; i < 8; i++) CHECK_OK(sfv_channel_post_write(s.ch, &big, 1, target, &w[i]));
            CHECK(write(fd, "x", 1) == 1); /* die now, with 16 MiB of writes on the way */
            CHECK(waitpid(pid, &st, 0) == pid);
            t0 = test_seconds();
            for (i = 0; i < 8; i++) {
                sfv_result r = sfv_pending_wait(&w[i], -1, &wc);
                if (r == SFV_OK) ok++;
                else if (wc.status == SFV_WC_RETRY_EXC_ERR) retry_exc++;
                else if (wc.status == SFV_WC_WR_FLUSH_ERR) flushed++;
                else FAIL("write %zu: %s (%s)", i, sfv_result_str(r), sfv_wc_status_str(wc.status));
            }
            CHECK_EQ(retry_exc, 1);
            CHECK(ok < 8 && ok + retry_exc + flushed == 8);
            CHECK(test_seconds() - t0 < 15.0);
            CHECK_EQ(sfv_channel_outstanding(s.ch), 0);
            side_close(&s);
        }
    }
}

/* --- deadlines ------------------------------------------------------------------------------- */
static void t_wait_deadlines(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_pending rx;
    sfv_scatter_element sc;
    sfv_work_completion wc;
    sfv_scope_report rep;
    scope_ctx x;
    double t0;
    d.timeout_ms = 300;
    pair_open(&a, &b, &d, &d, SHARED);
    sc = S(&b, 0, 64);
    /* a pending wait: times out, the work stays tracked and can be waited for again */
    CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
    t0 = test_seconds();
    CHECK_RESULT(sfv_pending_wait(&rx, 100, &wc), SFV_ERR_TIMEOUT);
    CHECK(test_seconds() - t0 >= 0.09 && test_seconds() - t0 < 3.0);
    CHECK_EQ(sfv_channel_outstanding(b.ch), 1);
    CHECK_RESULT(sfv_pending_wait(&rx, -1, &wc), SFV_ERR_TIMEOUT); /* the channel's 300 ms */
    {
        sfv_gather_element g = G(&a, 0, 8);
        CHECK_OK(sfv_channel_send(a.ch, &g, 1, NULL));
        CHECK_OK(sfv_pending_wait(&rx, -1, &wc)); /* still tracked: completes */
    }
    /* a scope whose work never completes: flushed at the deadline, reported, nothing in flight */
    memset(&x, 0, sizeof x);
    x.a = &a;
    x.b = &b;
    t0 = test_seconds();
    CHECK_RESULT(sfv_channel_scope(b.ch, scope_receive, &x, &rep), SFV_ERR_SCOPE_AUTOPOLL);
    CHECK_EQ(rep.first_error.result, SFV_ERR_TIMEOUT);
    CHECK_EQ(sfv_channel_outstanding(b.ch), 0);
    CHECK(test_seconds() - t0 < 6.0);
    /* a blocking receive: times out, flushes, returns the buffer */
    CHECK_RESULT(sfv_channel_receive(b.ch, &sc, 1, &wc), SFV_ERR_BROKEN); /* b was flushed above */
    pair_close(&a, &b);
    pair_open(&a, &b, &d, &d, SHARED);
    t0 = test_seconds();
    CHECK_RESULT(sfv_channel_receive(b.ch, &sc, 1, &wc), SFV_ERR_TIMEOUT);
    CHECK_EQ(wc.result, SFV_ERR_TIMEOUT);
    CHECK_EQ(sfv_channel_outstanding(b.ch), 0);
    CHECK(test_seconds() - t0 < 6.0);
    pair_close(&a, &b);
}

/* --- event mode ------------------------------------------------------------------------------ */
static void t_event_wait_mode(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_pending rx;
    sfv_scatter_element sc;
    sfv_gather_element g;
    sfv_work_completion wc;
    struct pollfd pfd;
    int i;
    d.wait_mode = SFV_WAIT_EVENT;
    d.timeout_ms = 2000;
    pair_open(&a, &b, &d, &d, SHARED);
    CHECK(sfv_channel_fd(a.ch) >= 0);
    CHECK(sfv_channel_fd(b.ch) >= 0);
    sc = S(&b, 0, 256);
    g = G(&a, 0, 256);
    for (i = 0; i < 50; i++) { /* blocking calls sleep on the completion channel */
        fill(a.buf, 256, (unsigned)i);
        CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
        CHECK_OK(sfv_channel_send(a.ch, &g, 1, NULL));
        CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
        CHECK(memcmp(a.buf, b.buf, 256) == 0);
    }
    /* the caller's own poll(): arm, wait for the fd, ack, then poll the pending work */
    CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
    CHECK_OK(sfv_channel_arm(b.ch));
    CHECK_OK(sfv_channel_send(a.ch, &g, 1, NULL));
    pfd.fd = sfv_channel_fd(b.ch);
    pfd.events = POLLIN;
    CHECK(poll(&pfd, 1, 5000) == 1);
    CHECK_OK(sfv_channel_ack_events(b.ch));
    CHECK_OK(sfv_pending_poll(&rx, &wc));
    CHECK_EQ(wc.byte_len, 256);
    /* the deadline holds in event mode too */
    CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
    CHECK_RESULT(sfv_pending_wait(&rx, 150, &wc), SFV_ERR_TIMEOUT);
    pair_close(&a, &b); /* armed, events acknowledged, one receive in flight: destroy must not hang */
    {
        sfv_channel_desc busy = desc_default();
        side s = side_open(test_device(0), &busy, SHARED);
        CHECK_EQ(sfv_channel_fd(s.ch), -1);
        CHECK_RESULT(sfv_channel_arm(s.ch), SFV_ERR_INVALID);
        side_close(&s);
    }
}

/* --- teardown ------------------------------------------------------------------------------- */
static void t_destroy_with_work_outstanding(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_pending rx[8], tx;
    sfv_scatter_element sc;
    sfv_gather_element g;
    double t0;
    int i;
    d.rnr_retries_set = true;
    d.rnr_retries = 7; /* a's send keeps retrying forever: only the flush ends it */
    pair_open(&a, &b, &d, &d, SHARED);
    for (i = 0; i < 8; i++) { /* receives in flight never share memory (SFV_TRACK_INFLIGHT) */
        sc = S(&a, 64 * i, 64);
        CHECK_OK(sfv_channel_post_receive(a.ch, &sc, 1, &rx[i]));
    }
    g = G(&a, 4096, BUF - 4096); /* nor does a send read what a receive writes */
    CHECK_OK(sfv_channel_post_send(a.ch, &g, 1, &tx)); /* b has no receive: RNR, forever */
    CHECK_EQ(sfv_channel_outstanding(a.ch), 9);
    t0 = test_seconds();
    CHECK_OK(sfv_destroy_channel(a.ch));
    CHECK(test_seconds() - t0 < 6.0);
    a.ch = NULL; /* destroyed: side_close's destroy of NULL is a no-op */
    side_close(&a);
    side_close(&b);
}

/* --- endpoint codec -------------------------------------------------------------------------- */
static void t_endpoint_codec(void) {
    sfv_endpoint e, o;
    uint8_t buf[SFV_ENDPOINT_ENCODED_SIZE], bad[SFV_ENDPOINT_ENCODED_SIZE];
    int i;
    memset(&e, 0, sizeof e);
    e.qpn = 0x123456;
    e.lid = 0xbeef;
    e.psn = 0xabcdef;
    e.mtu = 1024;
    e.rd_atomic = 16;
    e.has_gid = true;
    for (i = 0; i < 16; i++) e.gid.raw[i] = (uint8_t)(i * 17);
    sfv_endpoint_encode(&e, buf);
    CHECK(buf[0] == 'S' && buf[1] == 'E' && buf[2] == 2 && buf[3] == 1);
    CHECK(buf[5] == 0x12 && buf[7] == 0x56); /* big-endian */
    CHECK(buf[12] == 16 && buf[13] == 0xab && buf[15] == 0xef);
    CHECK_OK(sfv_endpoint_decode(buf, sizeof buf, &o));
    CHECK(o.qpn == e.qpn && o.lid == e.lid && o.psn == e.psn && o.mtu == e.mtu && o.has_gid && o.rd_atomic == 16);
    CHECK(memcmp(o.gid.raw, e.gid.raw, 16) == 0);
    CHECK_RESULT(sfv_endpoint_decode(buf, sizeof buf - 1, &o), SFV_ERR_INVALID);
    CHECK(o.qpn == 0);
    CHECK_RESULT(sfv_endpoint_decode(NULL, sizeof buf, &o), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_endpoint_decode(buf, sizeof buf, NULL), SFV_ERR_INVALID);
#define MANGLE(byte, value)                                               \
    do {                                                                  \
        memcpy(bad, buf, sizeof bad);                                     \
        bad[byte] = (uint8_t)(value);                                     \
        CHECK_RESULT(sfv_endpoint_decode(bad, sizeof bad, &o), SFV_ERR_INVALID); \
    } while (0)
    MANGLE(0, 'X');          /* magic */
    MANGLE(2, 3);            /* version */
    MANGLE(3, 3);            /* unknown flag */
    MANGLE(4, 1);            /* QPN over 24 bits */
    MANGLE(12, 0);           /* version 2 says how many reads it answers */
    MANGLE(10, 0x05);        /* MTU 0x0500 */
    /* version 1 (no read depth) still decodes; its PSN is 24 bits */
    memcpy(bad, buf, sizeof bad);
    bad[2] = 1;
    bad[12] = 0;
    CHECK_OK(sfv_endpoint_decode(bad, sizeof bad, &o));
    CHECK(o.psn == e.psn && o.rd_atomic == 0);
    bad[12] = 1;
    CHECK_RESULT(sfv_endpoint_decode(bad, sizeof bad, &o), SFV_ERR_INVALID);
    e.rd_atomic = 0; /* not said: written as version 1 */
    sfv_endpoint_encode(&e, bad);
    CHECK(bad[2] == 1 && bad[12] == 0);
    CHECK_OK(sfv_endpoint_decode(bad, sizeof bad, &o));
    CHECK(o.rd_atomic == 0 && o.psn == e.psn);
    e.rd_atomic = 16;
    memcpy(bad, buf, sizeof bad);
    bad[4] = bad[5] = bad[6] = bad[7] = 0; /* QPN 0 */
    CHECK_RESULT(sfv_endpoint_decode(bad, sizeof bad, &o), SFV_ERR_INVALID);
    e.has_gid = false; /* GID bytes without the flag: garbage */
    sfv_endpoint_encode(&e, bad);
    CHECK(bad[3] == 0);
    memcpy(bad + 16, buf + 16, 16);
    CHECK_RESULT(sfv_endpoint_decode(bad, sizeof bad, &o), SFV_ERR_INVALID);
    memset(e.gid.raw, 0, 16);
    sfv_endpoint_encode(&e, bad);
    CHECK_OK(sfv_endpoint_decode(bad, sizeof bad, &o));
    CHECK(!o.has_gid);
    memset(bad, 0xff, sizeof bad);
    CHECK_RESULT(sfv_endpoint_decode(bad, sizeof bad, &o), SFV_ERR_INVALID);
}

/* n connected channel pairs between a's and b's devices: pair 0 is a.ch <-> b.ch, the others new. */
static void channel_pairs(side *a, side *b, const sfv_channel_desc *da, const sfv_channel_desc *db, size_t n,
                          sfv_channel **ach, sfv_channel **bch) {
    size_t i;
    for (i = 0; i < n; i++) {
        sfv_endpoint ea, eb;
        ach[i] = a->ch;
        bch[i] = b->ch;
        if (i) {
            CHECK_OK(sfv_create_channel(a->pd, da, &ach[i]));
            CHECK_OK(sfv_create_channel(b->pd, db, &bch[i]));
        }
        CHECK_OK(sfv_channel_endpoint(ach[i], &ea));
        CHECK_OK(sfv_channel_endpoint(bch[i], &eb));
        CHECK_OK(sfv_channel_handshake(ach[i], &eb));
        CHECK_OK(sfv_channel_handshake(bch[i], &ea));
    }
}

/* --- promises at the edges --------------------------------------------------------------------- */
static sfv_result scope_fails_quietly(sfv_channel *ch, void *user) {
    (void)ch;
    (void)user;
    return SFV_ERR_PERMISSION; /* the user's own error: nothing in the library said it */
}

/* Every non-OK result leaves a matching sfv_last_error(), and a refused post zeroes its outputs. */
static void t_every_failure_sets_last_error(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_gather_element g;
    sfv_work_completion wc;
    sfv_pending p;
    sfv_scope_report rep;
    pair_open(&a, &b, &d, &d, SFV_ACCESS_LOCAL_WRITE); /* b's memory: no remote access */
    g = G(&a, 0, 64);
    /* a blocking call: SFV_ERR_WORK and the last error names the status and its hint */
    (void)!sfv_open_device("no-such-device", NULL); /* an older, unrelated failure */
    CHECK_RESULT(sfv_channel_write(a.ch, &g, 1, sfv_mr_remote(b.mr), &wc), SFV_ERR_WORK);
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_WORK);
    CHECK(strstr(sfv_last_error()->message, "REM_ACCESS_ERR") != NULL);
    CHECK(strstr(sfv_last_error()->message, "RDMA write") != NULL);
    CHECK(strstr(sfv_last_error()->message, "remote access") != NULL);
    /* the same handle asked again (its channel may be gone by then): the same answer */
    pair_close(&a, &b);
    pair_open(&a, &b, &d, &d, SFV_ACCESS_LOCAL_WRITE);
    g = G(&a, 0, 64);
    CHECK_OK(sfv_channel_post_write(a.ch, &g, 1, sfv_mr_remote(b.mr), &p));
    CHECK_RESULT(sfv_pending_wait(&p, -1, NULL), SFV_ERR_WORK); /* no wc asked for: still said */
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_WORK);
    (void)!sfv_open_device("no-such-device", NULL);
    CHECK_RESULT(sfv_pending_poll(&p, &wc), SFV_ERR_WORK);
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_REM_ACCESS_ERR);
    /* a refused post on a broken channel: BROKEN, its handle zeroed, a wait on that handle INVALID */
    memset(&p, 0xab, sizeof p);
    CHECK_RESULT(sfv_channel_post_send(a.ch, &g, 1, &p), SFV_ERR_BROKEN);
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_BROKEN);
    CHECK_RESULT(sfv_pending_wait(&p, 0, &wc), SFV_ERR_INVALID);
    CHECK_EQ(wc.result, SFV_ERR_INVALID);
    memset(&wc, 0xab, sizeof wc);
    CHECK_RESULT(sfv_channel_send(a.ch, &g, 1, &wc), SFV_ERR_BROKEN);
    CHECK(wc.result == SFV_ERR_BROKEN && wc.status == 0 && wc.byte_len == 0 && wc.wr_id == 0);
    /* a scope whose function fails without saying why: SCOPE_FN, and the last error says that */
    (void)!sfv_open_device("no-such-device", NULL);
    CHECK_RESULT(sfv_channel_scope(b.ch, scope_fails_quietly, NULL, &rep), SFV_ERR_SCOPE_FN);
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_SCOPE_FN);
    CHECK(strstr(sfv_last_error()->message, "SFV_ERR_PERMISSION") != NULL);
    (void)!sfv_open_device("no-such-device", NULL);
    CHECK_RESULT(sfv_channel_manual_scope(b.ch, scope_fails_quietly, NULL), SFV_ERR_PERMISSION);
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_PERMISSION);
    /* a successful call after all that leaves the last error as it was */
    {
        uint32_t gi;
        sfv_context *none;
        CHECK_RESULT(sfv_open_device("no-such-device", &none), SFV_ERR_NOT_FOUND);
        CHECK_OK(sfv_choose_gid(b.ctx, 1, &gi));
        CHECK_EQ(sfv_last_error()->result, SFV_ERR_NOT_FOUND);
        CHECK(strstr(sfv_last_error()->message, "no-such-device") != NULL);
    }
    pair_close(&a, &b);
}

/* A remote region that wraps past 2^64 is refused before anything is posted: the channel stays
   whole and usable. */
static void t_wrapping_remote_region_never_posted(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_gather_element g;
    sfv_scatter_element sc;
    sfv_work_completion wc;
    sfv_pending p;
    sfv_remote_mr wrap;
    pair_open(&a, &b, &d, &d, SHARED);
    wrap = sfv_remote_mr_make(UINT64_MAX - 15, 64, sfv_mr_rkey(b.mr));
    g = G(&a, 0, 8);
    sc = S(&a, 64, 8);
    CHECK_RESULT(sfv_channel_write(a.ch, &g, 1, wrap, &wc), SFV_ERR_INVALID);
    CHECK_EQ(wc.result, SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "wraps") != NULL);
    CHECK_RESULT(sfv_channel_read(a.ch, &sc, 1, wrap, &wc), SFV_ERR_INVALID);
    CHECK_EQ(wc.result, SFV_ERR_INVALID);
    memset(&p, 0xab, sizeof p);
    CHECK_RESULT(sfv_channel_post_write_batch(a.ch, &g, 1, 1, &wrap, &p), SFV_ERR_INVALID);
    CHECK(p.q_ == NULL && p.state_ == 0);
    CHECK_RESULT(sfv_pending_wait(&p, 0, NULL), SFV_ERR_INVALID); /* zeroed */
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    CHECK_OK(sfv_channel_write(a.ch, &g, 1, sfv_mr_remote(b.mr), &wc)); /* still whole */
    pair_close(&a, &b);
}

/* A pending handle dies with its channel: using it afterwards is a broken contract (debug builds),
   caught before the freed ring is read (the ASan build would see that read). */
static void t_pending_outlived_by_channel(void) {
    side s;
    sfv_channel_desc d = desc_default();
    sfv_pending rx;
    sfv_scatter_element sc;
    sfv_endpoint me;
    s = side_open(test_device(0), &d, SHARED);
    CHECK_OK(sfv_channel_endpoint(s.ch, &me));
    CHECK_OK(sfv_channel_handshake(s.ch, &me));
    sc = S(&s, 0, 64);
    CHECK_OK(sfv_channel_post_receive(s.ch, &sc, 1, &rx));
    CHECK_OK(sfv_destroy_channel(s.ch));
    s.ch = NULL;
    CHECK_ABORTS((void)!sfv_pending_wait(&rx, 0, NULL));
    CHECK_ABORTS((void)!sfv_pending_poll(&rx, NULL));
    sfv_dereg_mr(s.mr);
    sfv_dealloc_pd(s.pd);
    sfv_close_device(s.ctx);
    free(s.buf);
}

/* GIDs of different kinds (rxe0's link-local IPv6 GID 0 against rxe1's IPv4 GID) are refused
   before any verb, with a hint; nothing changed, so the right endpoint still connects. */
static void t_gid_kinds_differ(void) {
    side a, b;
    sfv_channel_desc da = desc_default(), db = desc_default();
    sfv_endpoint ea, eb;
    sfv_gid_entry e0, e2;
    sfv_context *probe;
    uint32_t v6 = 0;
    CHECK_OK(sfv_open_device(test_device(0), &probe));
    CHECK_OK(sfv_query_gid(probe, 1, 0, &e0));
    /* The guest's fe80::1 (GID 2 of both devices, with a route and a permanent neighbour each way)
       where it is there; the default link-local GID 0 otherwise (its neighbour is found by ND,
       which on a loaded guest has missed rxe's resolution deadline). */
    if (sfv_query_gid(probe, 1, 2, &e2) == SFV_OK && !sfv_gid_is_ipv4(&e2.gid) && e2.gid.raw[0] == 0xfe) v6 = 2;
    sfv_close_device(probe);
    if (!v6 && sfv_gid_is_ipv4(&e0.gid)) SKIP("GID 0 of %s is an IPv4 GID here", test_device(0));
    da.gid_index_set = true;
    da.gid_index = v6;
    a = side_open(test_device(0), &da, SHARED);
    b = side_open(test_device(1), &db, SHARED); /* the IPv4 GID by preference */
    CHECK_OK(sfv_channel_endpoint(a.ch, &ea));
    CHECK_OK(sfv_channel_endpoint(b.ch, &eb));
    CHECK(!sfv_gid_is_ipv4(&ea.gid) && sfv_gid_is_ipv4(&eb.gid));
    CHECK_RESULT(sfv_channel_handshake(a.ch, &eb), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "different kinds") != NULL);
    CHECK(strstr(sfv_last_error()->message, "gid_index") != NULL);
    CHECK_RESULT(sfv_channel_handshake(b.ch, &ea), SFV_ERR_INVALID);
    side_close(&b);
    db = da; /* the same kind on both sides: connects, nothing was spoiled */
    b = side_open(test_device(1), &db, SHARED);
    connect_pair(&a, &b);
    {
        sfv_gather_element g = G(&a, 0, 16);
        sfv_scatter_element sc = S(&b, 0, 16);
        sfv_pending rx;
        CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
        CHECK_OK(sfv_channel_send(a.ch, &g, 1, NULL));
        CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    }
    pair_close(&a, &b);
}

/* A peer GID this side's IPv4 GID cannot reach: another subnet with no route (TEST-NET-2), and
   the same subnet with nobody there. rxe (6.1 and 6.12) answers ETIMEDOUT at RTR for both (its
   neighbour resolution gives up), never EINVAL: the "not reachable" hint, not the subnet one
   (that one, for a driver that says EINVAL, is t_gid_subnet_hint on the fake NIC). */
static void t_gid_other_subnet(void) {
    static const uint8_t hosts[2][4] = {{198, 51, 100, 7}, {192, 0, 2, 77}};
    sfv_channel_desc d = desc_default();
    int k;
    for (k = 0; k < 2; k++) {
        side a = side_open(test_device(0), &d, SHARED), b = side_open(test_device(1), &d, SHARED);
        sfv_endpoint eb;
        sfv_result r;
        CHECK_OK(sfv_channel_endpoint(b.ch, &eb));
        if (!sfv_gid_is_ipv4(&eb.gid)) SKIP("no IPv4 GID on %s", test_device(1));
        memcpy(eb.gid.raw + 12, hosts[k], 4);
        r = sfv_channel_handshake(a.ch, &eb);
        printf("    peer GID ::ffff:%u.%u.%u.%u: %s: errno %d, %s\n", hosts[k][0], hosts[k][1], hosts[k][2], hosts[k][3],
               sfv_result_str(r), sfv_last_error()->errnum, sfv_last_error()->message);
        CHECK_RESULT(r, SFV_ERR_RESOURCE);
        CHECK(strstr(sfv_last_error()->message, "not reachable") != NULL);
        pair_close(&a, &b);
    }
}

/* The first wait on a fresh channel whose peer never connected: the timeout says what to check. */
static void t_first_wait_timeout_hint(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scatter_element sc;
    sfv_work_completion wc;
    d.timeout_ms = 200;
    a = side_open(test_device(0), &d, SHARED);
    b = side_open(test_device(1), &d, SHARED);
    sc = S(&a, 0, 64);
    CHECK_RESULT(sfv_channel_receive(a.ch, &sc, 1, &wc), SFV_ERR_TIMEOUT);
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_TIMEOUT);
    CHECK(strstr(sfv_last_error()->message, "nothing has completed on this channel yet") != NULL);
    CHECK(strstr(sfv_last_error()->message, "handshake") != NULL);
    side_close(&a);
    side_close(&b);
}

/* What the transport finds on its own, with the default retries: a peer whose queue pair is gone
   fails a send with RETRY_EXC_ERR well before the channel's 10 s deadline; with ack_retries 7
   (which rxe takes as "forever") only the deadline ends it. A peer that connects late is covered
   for as long as the retries last. The figures are printed for the README. */
static void t_dead_peer_and_late_handshake(void) {
    side a, b;
    sfv_channel_desc d = desc_default(), d7 = desc_default();
    sfv_gather_element g;
    sfv_work_completion wc;
    double t0, dead6, dead7;
    sfv_result r7;
    /* a dead peer, default retries */
    pair_open(&a, &b, &d, &d, SHARED);
    CHECK_EQ(sfv_channel_get_desc(a.ch)->ack_retries, 6);
    CHECK_OK(sfv_destroy_channel(b.ch));
    b.ch = NULL;
    g = G(&a, 0, 64);
    t0 = test_seconds();
    CHECK_RESULT(sfv_channel_send(a.ch, &g, 1, &wc), SFV_ERR_WORK);
    dead6 = test_seconds() - t0;
    CHECK_EQ(wc.status, SFV_WC_RETRY_EXC_ERR);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_TRANSPORT);
    CHECK(dead6 < 5.0); /* the transport, not the 10 s deadline */
    side_close(&a);
    side_close(&b);
    /* the same with ack_retries 7, which rxe may retry for ever: only measured (never a success) */
    d7.ack_retries_set = true;
    d7.ack_retries = 7;
    d7.timeout_ms = 3000;
    pair_open(&a, &b, &d7, &d7, SHARED);
    CHECK_OK(sfv_destroy_channel(b.ch));
    b.ch = NULL;
    g = G(&a, 0, 64);
    t0 = test_seconds();
    r7 = sfv_channel_send(a.ch, &g, 1, &wc);
    dead7 = test_seconds() - t0;
    CHECK(r7 != SFV_OK);
    CHECK(dead7 < 8.0);
    side_close(&a);
    side_close(&b);
    printf("    dead peer found by the transport in %.2f s (ack_retries 6); with 7: %s (%s) after %.2f s (deadline 3 s)\n",
           dead6, sfv_result_str(r7), r7 == SFV_ERR_WORK ? sfv_wc_status_str(wc.status) : "-", dead7);
}

/* A send posted before the peer's handshake (the peer's channel exists, its receive is posted,
   its queue pair is not connected yet: INIT), then the peer handshakes 0.1, 1 or 4 s later, or
   never. What happens is printed for the header (STEP BY STEP, sfv_node_handshake); asserted is
   what held on rxe in 6.1 and 6.12 alike: 0.1 s late is delivered; 1 s, 4 s and never fail the
   send with RETRY_EXC_ERR after about 0.5 s (0.47-0.49 s), while the peer is still not connected. */
static void t_late_handshake(void) {
    static const int delays_ms[] = {100, 1000, 4000, -1}; /* -1: never */
    sfv_channel_desc d = desc_default();
    size_t k;
    for (k = 0; k < COUNT_OF(delays_ms); k++) {
        side a, b;
        sfv_endpoint ea, eb;
        sfv_gather_element g;
        sfv_scatter_element sc;
        sfv_work_completion wc, rwc;
        sfv_pending rx, tx;
        sfv_result r, rr = SFV_NOT_DONE;
        double t0, took;
        a = side_open(test_device(0), &d, SHARED);
        b = side_open(test_device(1), &d, SHARED);
        CHECK_OK(sfv_channel_endpoint(a.ch, &ea));
        CHECK_OK(sfv_channel_endpoint(b.ch, &eb));
        CHECK_OK(sfv_channel_handshake(a.ch, &eb));
        sc = S(&b, 0, 64);
        CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
        memcpy(a.buf, "late handshake", 15);
        g = G(&a, 0, 64);
        t0 = test_seconds();
        CHECK_OK(sfv_channel_post_send(a.ch, &g, 1, &tx));
        /* until the handshake, watch the send: when it ends, and how */
        r = SFV_NOT_DONE;
        took = 0;
        while (delays_ms[k] >= 0 && test_seconds() - t0 < delays_ms[k] / 1000.0) {
            if (r == SFV_NOT_DONE && (r = sfv_pending_poll(&tx, &wc)) != SFV_NOT_DONE) took = test_seconds() - t0;
            usleep(1000);
        }
        if (delays_ms[k] >= 0) CHECK_OK(sfv_channel_handshake(b.ch, &ea));
        if (r == SFV_NOT_DONE) {
            r = sfv_pending_wait(&tx, -1, &wc);
            took = test_seconds() - t0;
        }
        if (r == SFV_OK) rr = sfv_pending_wait(&rx, 2000, &rwc);
        printf("    peer handshakes %.1f s late%s: the send %s%s%s after %.2f s; the peer's receive %s\n",
               delays_ms[k] < 0 ? 0.0 : delays_ms[k] / 1000.0, delays_ms[k] < 0 ? " (never)" : "",
               r == SFV_OK ? "completed OK" : sfv_result_str(r), r == SFV_ERR_WORK ? " " : "",
               r == SFV_ERR_WORK ? sfv_wc_status_str(wc.status) : "", took,
               r != SFV_OK ? "-" : rr == SFV_OK ? "got it" : sfv_result_str(rr));
        if (rr == SFV_OK) CHECK(memcmp(b.buf, "late handshake", 15) == 0);
        if (delays_ms[k] == 100) {
            CHECK_OK(r);
            CHECK_OK(rr);
        }
        if (delays_ms[k] != 100) { /* 1 s, 4 s, never: the retries (about 0.5 s) ran out first */
            CHECK_RESULT(r, SFV_ERR_WORK);
            CHECK_EQ(wc.status, SFV_WC_RETRY_EXC_ERR);
            CHECK(took < 2.0); /* the retries, not the handshake nor the 10 s deadline */
        }
        pair_close(&a, &b);
    }
}

/* Request batches (each request its own element count and immediate; a read batch reports the
   bytes of all its reads) and a scope that hands its completions to the caller. */
typedef struct got_wcs { sfv_work_completion wc[8]; size_t n; } got_wcs;
static void collect_wc(const sfv_work_completion *wc, void *user) {
    got_wcs *g = (got_wcs *)user;
    if (g->n < 8) g->wc[g->n] = *wc;
    g->n++;
}
static sfv_result two_receives(sfv_channel *ch, void *user) {
    side *b = (side *)user;
    sfv_scatter_element e0 = S(b, 4096, 64), e1 = S(b, 4096 + 64, 64);
    sfv_result r = sfv_channel_post_receive(ch, &e0, 1, NULL);
    return r ? r : sfv_channel_post_receive(ch, &e1, 1, NULL);
}
static void t_request_batches_and_scope_completions(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_gather_element g[3];
    sfv_scatter_element e[3], rd[3];
    sfv_pending rx[3], tx, tx2[2];
    sfv_work_completion wc;
    sfv_send_request sr[3];
    sfv_write_request wr[2];
    sfv_read_request rr[2];
    sfv_remote_mr rb;
    sfv_scope_report rep;
    got_wcs got;
    size_t i;
    pair_open(&a, &b, &d, &d, SHARED);
    memcpy(a.buf, "abcdefgh", 8);
    g[0] = G(&a, 0, 3);
    g[1] = G(&a, 3, 2);
    g[2] = G(&a, 5, 3);
    for (i = 0; i < 3; i++) {
        e[i] = S(&b, 1024 + i * 64, 64);
        CHECK_OK(sfv_channel_post_receive(b.ch, &e[i], 1, &rx[i]));
    }
    memset(sr, 0, sizeof sr);
    sr[0].sges = &g[0]; sr[0].n = 1;                                   /* "abc", no immediate */
    sr[1].sges = &g[1]; sr[1].n = 2; sr[1].has_imm = true; sr[1].imm = 7; /* "defgh", imm 7 */
    sr[2].sges = NULL; sr[2].n = 0; sr[2].has_imm = true; sr[2].imm = 9; /* nothing but imm 9 */
    CHECK_OK(sfv_channel_post_sends(a.ch, sr, 3, &tx));
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    CHECK_OK(sfv_pending_wait(&rx[0], -1, &wc));
    CHECK(wc.byte_len == 3 && !wc.has_imm && memcmp(b.buf + 1024, "abc", 3) == 0);
    CHECK_OK(sfv_pending_wait(&rx[1], -1, &wc));
    CHECK(wc.byte_len == 5 && wc.has_imm && wc.imm_data == 7 && memcmp(b.buf + 1088, "defgh", 5) == 0);
    CHECK_OK(sfv_pending_wait(&rx[2], -1, &wc));
    CHECK(wc.byte_len == 0 && wc.has_imm && wc.imm_data == 9);
    /* writes: one plain, one with an immediate (which takes a receive at b) */
    rb = sfv_mr_remote(b.mr);
    CHECK_OK(sfv_channel_post_receive(b.ch, &e[0], 1, &rx[0]));
    memset(wr, 0, sizeof wr);
    wr[0].sges = &g[0]; wr[0].n = 1; CHECK_OK(sfv_remote_mr_slice(rb, 2048, 16, &wr[0].remote));
    wr[1].sges = &g[1]; wr[1].n = 2; CHECK_OK(sfv_remote_mr_slice(rb, 2064, 16, &wr[1].remote));
    wr[1].has_imm = true; wr[1].imm = 11;
    CHECK_OK(sfv_channel_post_writes(a.ch, wr, 2, &tx));
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    CHECK_OK(sfv_pending_wait(&rx[0], -1, &wc));
    CHECK(wc.opcode == SFV_WC_OP_RECV_IMM && wc.imm_data == 11 && wc.byte_len == 5);
    CHECK(memcmp(b.buf + 2048, "abc", 3) == 0 && memcmp(b.buf + 2064, "defgh", 5) == 0);
    /* reads of 1 and 2 elements: the batch's completion says all 8 bytes */
    rd[0] = S(&a, 8192, 3);
    rd[1] = S(&a, 8200, 2);
    rd[2] = S(&a, 8210, 3);
    memset(rr, 0, sizeof rr);
    rr[0].sges = &rd[0]; rr[0].n = 1; CHECK_OK(sfv_remote_mr_slice(rb, 2048, 3, &rr[0].remote));
    rr[1].sges = &rd[1]; rr[1].n = 2; CHECK_OK(sfv_remote_mr_slice(rb, 2064, 5, &rr[1].remote));
    CHECK_OK(sfv_channel_post_reads(a.ch, rr, 2, &tx));
    CHECK_OK(sfv_pending_wait(&tx, -1, &wc));
    CHECK_EQ(wc.byte_len, 8);
    CHECK(memcmp(a.buf + 8192, "abc", 3) == 0 && memcmp(a.buf + 8200, "de", 2) == 0 && memcmp(a.buf + 8210, "fgh", 3) == 0);
    {   /* the plain read batch: three reads of 8 bytes, 24 in its completion */
        sfv_remote_mr rem[3];
        sfv_scatter_element r8[3];
        for (i = 0; i < 3; i++) {
            r8[i] = S(&a, 12288 + i * 8, 8);
            CHECK_OK(sfv_remote_mr_slice(rb, 2048, 8, &rem[i]));
        }
        CHECK_OK(sfv_channel_post_read_batch(a.ch, r8, 1, 3, rem, &tx));
        CHECK_OK(sfv_pending_wait(&tx, -1, &wc));
        CHECK_EQ(wc.byte_len, 24);
    }
    /* refusals: too many elements in one request, elements at NULL, no requests */
    sr[0].n = sfv_channel_get_desc(a.ch)->max_send_sge + 1;
    CHECK_RESULT(sfv_channel_post_sends(a.ch, sr, 1, &tx), SFV_ERR_INVALID);
    sr[0].n = 1;
    sr[0].sges = NULL;
    CHECK_RESULT(sfv_channel_post_sends(a.ch, sr, 1, &tx), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_sends(a.ch, NULL, 1, &tx), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_sends(a.ch, sr, 0, &tx), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_reads(NULL, rr, 1, &tx), SFV_ERR_INVALID);
    /* a scope hands over the completions of its NULL-handle receives */
    g[0] = G(&a, 0, 4);
    CHECK_OK(sfv_channel_post_send_imm(a.ch, &g[0], 1, 21, &tx2[0]));
    CHECK_OK(sfv_channel_post_send_imm(a.ch, &g[1], 1, 22, &tx2[1]));
    memset(&got, 0, sizeof got);
    CHECK_OK(sfv_channel_scope_wc(b.ch, two_receives, &b, collect_wc, &got, &rep));
    CHECK_EQ(rep.auto_polled, 2);
    CHECK_EQ(got.n, 2);
    CHECK(got.wc[0].result == SFV_OK && got.wc[0].opcode == SFV_WC_OP_RECV && got.wc[0].imm_data == 21 && got.wc[0].byte_len == 4);
    CHECK(got.wc[1].result == SFV_OK && got.wc[1].imm_data == 22 && got.wc[1].byte_len == 2);
    CHECK(memcmp(b.buf + 4096, "abcd", 4) == 0);
    CHECK_OK(sfv_pending_wait(&tx2[0], -1, NULL));
    CHECK_OK(sfv_pending_wait(&tx2[1], -1, NULL));
    pair_close(&a, &b);
}

/* Selective signalling in scopes: unsignaled writes, the scope's fence after them, its report
   and on_wc leave the fence out; no fence when signaled work comes last; refused outside a
   scope; a peer that refuses the fence (no REMOTE_WRITE) fails the scope with a hint, after the
   work before it was done. */
typedef struct unsig_args { side *a, *b; int mode; } unsig_args;
static sfv_result unsignaled_work(sfv_channel *ch, void *user) {
    unsig_args *u = (unsig_args *)user;
    sfv_gather_element g = G(u->a, 0, 8);
    sfv_remote_mr rb = sfv_mr_remote(u->b->mr), dst;
    sfv_result r;
    int i;
    if (u->mode == 2) return sfv_channel_post_send_unsignaled(ch, &g, 1); /* the last: a fence follows */
    for (i = 0; i < 3; i++) {
        r = sfv_remote_mr_slice(rb, 4096 + (size_t)i * 8, 8, &dst);
        if (!r) r = sfv_channel_post_write_unsignaled(ch, &g, 1, dst);
        if (r) return r;
    }
    if (u->mode == 1) return sfv_channel_post_send(ch, &g, 1, NULL); /* signaled last: no fence */
    return SFV_OK;
}
static void t_unsignaled_in_scopes(void) {
    side a, b;
    sfv_channel_desc d = desc_default(), dnw = desc_default();
    sfv_scope_report rep;
    sfv_scatter_element e;
    sfv_gather_element g;
    sfv_pending rx;
    got_wcs got;
    unsig_args u;
    int i;
    pair_open(&a, &b, &d, &d, SHARED);
    memcpy(a.buf, "unsigned", 8);
    u.a = &a; u.b = &b; u.mode = 0;
    memset(&got, 0, sizeof got);
    CHECK_OK(sfv_channel_scope_wc(a.ch, unsignaled_work, &u, collect_wc, &got, &rep));
    CHECK_EQ(rep.auto_polled, 3); /* the three writes; the fence is the scope's own */
    CHECK_EQ(got.n, 3);
    for (i = 0; i < 3; i++) CHECK(memcmp(b.buf + 4096 + i * 8, "unsigned", 8) == 0 && got.wc[i].opcode == SFV_WC_OP_WRITE);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    /* signaled work last: its completion completes the unsignaled ones, no fence */
    e = S(&b, 8192, 8);
    CHECK_OK(sfv_channel_post_receive(b.ch, &e, 1, &rx));
    u.mode = 1;
    CHECK_OK(sfv_channel_scope(a.ch, unsignaled_work, &u, &rep));
    CHECK_EQ(rep.auto_polled, 4);
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    /* outside a scope: refused */
    g = G(&a, 0, 8);
    CHECK_RESULT(sfv_channel_post_send_unsignaled(a.ch, &g, 1), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "scope") != NULL);
    CHECK_RESULT(sfv_channel_post_send_unsignaled(NULL, &g, 1), SFV_ERR_INVALID);
    pair_close(&a, &b);
    /* a peer whose channel refuses RDMA writes refuses the fence: the scope says why, and the
       unsignaled send before it was delivered */
    dnw.access = SFV_ACCESS_LOCAL_WRITE;
    pair_open(&a, &b, &d, &dnw, SHARED);
    memcpy(a.buf, "unsigned", 8);
    u.a = &a; u.b = &b; u.mode = 2;
    e = S(&b, 8192, 8);
    CHECK_OK(sfv_channel_post_receive(b.ch, &e, 1, &rx));
    CHECK_RESULT(sfv_channel_scope(a.ch, unsignaled_work, &u, &rep), SFV_ERR_SCOPE_AUTOPOLL);
    CHECK_EQ(rep.failed, 1);
    printf("    a refused fence: %s: %s\n", sfv_wc_status_str(rep.first_error.status), sfv_last_error()->message);
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    CHECK(memcmp(b.buf + 8192, "unsigned", 8) == 0);
    pair_close(&a, &b);
}

/* Unsignaled reads (sfv_channel_post_read_unsignaled), the last work of their scope: the scope's
   fence after them completes them too, and when the scope returns the bytes have arrived. */
static sfv_result unsignaled_reads(sfv_channel *ch, void *user) {
    unsig_args *u = (unsig_args *)user;
    sfv_remote_mr rb = sfv_mr_remote(u->b->mr), src;
    sfv_result r;
    int i;
    for (i = 0; i < 3; i++) {
        sfv_scatter_element e = S(u->a, 12288 + (size_t)i * 16, 16);
        r = sfv_remote_mr_slice(rb, 12288 + (size_t)i * 16, 16, &src);
        if (!r) r = sfv_channel_post_read_unsignaled(ch, &e, 1, src);
        if (r) return r;
    }
    return SFV_OK;
}
static void t_unsignaled_reads_in_scope(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scope_report rep;
    sfv_scatter_element e;
    got_wcs got;
    unsig_args u;
    int i;
    pair_open(&a, &b, &d, &d, SHARED);
    for (i = 0; i < 48; i++) b.buf[12288 + i] = (char)(i * 7 + 1);
    memset(a.buf + 12288, 0, 48);
    u.a = &a; u.b = &b; u.mode = 0;
    memset(&got, 0, sizeof got);
    CHECK_OK(sfv_channel_scope_wc(a.ch, unsignaled_reads, &u, collect_wc, &got, &rep));
    CHECK(rep.fn_result == SFV_OK && rep.failed == 0);
    CHECK_EQ(rep.auto_polled, 3); /* the three reads; the fence is the scope's own */
    CHECK_EQ(got.n, 3);
    for (i = 0; i < 3; i++) CHECK(got.wc[i].opcode == SFV_WC_OP_READ && got.wc[i].status == SFV_WC_SUCCESS);
    CHECK(memcmp(a.buf + 12288, b.buf + 12288, 48) == 0);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    /* outside a scope: refused, nothing posted */
    e = S(&a, 12288, 16);
    CHECK_RESULT(sfv_channel_post_read_unsignaled(a.ch, &e, 1, sfv_mr_remote(b.mr)), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "scope") != NULL);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    pair_close(&a, &b);
}

/* The local link goes down under a channel: the completion's class and the last error say so
   (rxe reports LOC_QP_OP_ERR, which alone would read as a programming error). The link comes
   back before the test ends. */
static void t_link_down_is_not_a_programming_error(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_gather_element g;
    sfv_work_completion wc;
    sfv_result r;
    char msg[sizeof sfv_last_error()->message];
    if (!getenv("SAFEVERBS_IN_VM")) SKIP("takes the guest's sva link down; runs only in the test guest");
    pair_open(&a, &b, &d, &d, SHARED);
    CHECK(system("ip link set sva down") == 0);
    CHECK(port_state_is(test_device(0), "DOWN", 10));
    g = G(&a, 0, 64);
    r = sfv_channel_send(a.ch, &g, 1, &wc);
    snprintf(msg, sizeof msg, "%s", sfv_last_error()->message);
    CHECK(system("ip link set sva up") == 0);
    CHECK(port_state_is(test_device(0), "ACTIVE", 20) && port_state_is(test_device(1), "ACTIVE", 20));
    CHECK(gid1_present(test_device(0), 20) && gid1_present(test_device(1), 20));
    CHECK_RESULT(r, SFV_ERR_WORK);
    printf("    link down: %s, class %s\n", sfv_wc_status_str(wc.status), sfv_work_error_class_str(wc.error_class));
    if (wc.status != SFV_WC_LOC_QP_OP_ERR && wc.status != SFV_WC_WR_FLUSH_ERR && wc.status != SFV_WC_RETRY_EXC_ERR)
        FAIL("a send over a link that is down: %s", sfv_wc_status_str(wc.status));
    CHECK(wc.error_class != SFV_WORK_ERROR_LOCAL_PROGRAMMING);
    if (wc.status != SFV_WC_RETRY_EXC_ERR) {
        CHECK_EQ(wc.error_class, SFV_WORK_ERROR_LOCAL_RESOURCE);
        if (!strstr(msg, "went down")) FAIL("last error: %s", msg);
    }
    pair_close(&a, &b);
}

/* A post refused while the handle passed still waits for earlier work (a retry loop on a full
   queue that reuses the oldest handle) leaves that handle alone: its work is still consumed. */
static void t_refused_post_keeps_a_live_handle(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scatter_element sc[8];
    sfv_gather_element g;
    sfv_pending rx;
    size_t i;
    d.max_recv_wr = 1;
    pair_open(&a, &b, &d, &d, SHARED);
    for (i = 0; i < 8; i++) sc[i] = S(&b, 64 * i, 64);
    CHECK_OK(sfv_channel_post_receive(b.ch, sc, 1, &rx));
    CHECK_RESULT(sfv_channel_post_receive(b.ch, sc, 1, &rx), SFV_ERR_RESOURCE); /* queue full */
    CHECK_RESULT(sfv_channel_post_receive(b.ch, sc, 8, &rx), SFV_ERR_INVALID);  /* too many elements */
    g = G(&a, 0, 16);
    CHECK_OK(sfv_channel_send(a.ch, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL)); /* the first receive, still tracked by rx */
    CHECK_EQ(sfv_channel_outstanding(b.ch), 0);
    CHECK_OK(sfv_channel_post_receive(b.ch, sc, 1, &rx)); /* the queue moves on */
    CHECK_OK(sfv_channel_send(a.ch, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    pair_close(&a, &b);
}

/* The responder's side of a refused RDMA write: its QP goes to the error state with no failed
   completion of its own, so its receives are flushed; that is the peer's doing, not a local
   programming error, and the hint says so. */
static void t_responder_flush_class(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_gather_element g;
    sfv_scatter_element sc;
    sfv_pending rx;
    sfv_work_completion wc;
    pair_open(&a, &b, &d, &d, SHARED);
    sc = S(&b, 0, 64);
    CHECK_OK(sfv_channel_post_receive(b.ch, &sc, 1, &rx));
    g = G(&a, 0, 64);
    CHECK_RESULT(sfv_channel_write(a.ch, &g, 1, sfv_remote_mr_make(sfv_mr_addr(b.mr), 64, sfv_mr_rkey(b.mr) ^ 0x5a5a00u), &wc),
                 SFV_ERR_WORK);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_REMOTE);
    {
        sfv_result r = sfv_pending_wait(&rx, 3000, &wc);
        if (r == SFV_ERR_WORK) { /* rxe moves the responder to the error state: a flush */
            CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
            CHECK_EQ(wc.error_class, SFV_WORK_ERROR_LOCAL_RESOURCE);
            if (!strstr(sfv_last_error()->message, "peer")) FAIL("last error: %s", sfv_last_error()->message);
        } else {
            CHECK_RESULT(r, SFV_ERR_TIMEOUT); /* a responder that stays up keeps its receive */
        }
        printf("    the responder's receive: %s\n", sfv_result_str(r));
    }
    pair_close(&a, &b);
}

/* --- atomics --------------------------------------------------------------------------------- */
/* The owner of the words: its MR and its channels let peers use atomics. */
static const unsigned ATOMIC = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_ATOMIC;
static sfv_channel_desc desc_atomic(void) {
    sfv_channel_desc d = desc_default();
    d.access = ATOMIC;
    return d;
}
static uint64_t u64_at(const char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static void u64_put(char *p, uint64_t v) { memcpy(p, &v, 8); }

/* The byte order of both ends, read from raw memory: the owner's word is a uint64_t in the
   owner's byte order, the old value arrives in the requester's. */
static void t_atomic_byte_order(void) {
    side a, b;
    sfv_channel_desc d = desc_default(), db = desc_atomic();
    sfv_remote_mr word;
    sfv_scatter_element old;
    sfv_work_completion wc;
    const uint16_t one = 1;
    const bool little = *(const uint8_t *)&one == 1;
    static const unsigned char after_add_le[8] = {0x18, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
    static const unsigned char before_le[8] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
    a = side_open(test_device(0), &d, SHARED);
    b = side_open(test_device(1), &db, ATOMIC);
    connect_pair(&a, &b);
    CHECK_OK(sfv_remote_mr_slice(sfv_mr_remote(b.mr), 64, 8, &word));
    old = S(&a, 0, 8);
    u64_put(b.buf + 64, 0x0102030405060708ull);
    CHECK_OK(sfv_channel_fetch_add(a.ch, &old, word, 0x10, &wc));
    CHECK_EQ(wc.opcode, SFV_WC_OP_FETCH_ADD);
    CHECK_EQ(wc.byte_len, 8);
    CHECK(u64_at(b.buf + 64) == 0x0102030405060718ull); /* the owner's own order */
    CHECK(u64_at(a.buf) == 0x0102030405060708ull);      /* the requester's own order */
    if (little) { /* and the raw bytes, least significant first */
        CHECK(memcmp(b.buf + 64, after_add_le, 8) == 0);
        CHECK(memcmp(a.buf, before_le, 8) == 0);
    }
    /* a carry across bytes: arithmetic on the number, not on bytes in wire order */
    CHECK_OK(sfv_channel_fetch_add(a.ch, &old, word, 0xF8, &wc));
    CHECK(u64_at(b.buf + 64) == 0x0102030405060810ull);
    /* compare-and-swap: compare and swap are numbers in this host's order */
    CHECK_OK(sfv_channel_compare_swap(a.ch, &old, word, 0x0102030405060810ull, 0xA1A2A3A4A5A6A7A8ull, &wc));
    CHECK_EQ(wc.opcode, SFV_WC_OP_COMP_SWAP);
    CHECK(u64_at(a.buf) == 0x0102030405060810ull);
    CHECK(u64_at(b.buf + 64) == 0xA1A2A3A4A5A6A7A8ull);
    CHECK_OK(sfv_channel_compare_swap(a.ch, &old, word, 0x0102030405060810ull, 0, &wc)); /* no match */
    CHECK(u64_at(a.buf) == 0xA1A2A3A4A5A6A7A8ull && u64_at(b.buf + 64) == 0xA1A2A3A4A5A6A7A8ull);
    CHECK_EQ(b.buf[63], 0);
    CHECK_EQ(b.buf[72], 0);
    printf("    %s-endian hosts: the word in the owner's order, the old value in the requester's\n", little ? "little" : "big");
    pair_close(&a, &b);
}

/* Four requester channels (on threads) add 1 to one counter 1000 times each, with up to WINDOW
   atomics in flight per channel, over a read depth of 4: the NIC holds back what is over it. */
enum { COUNTER_PEERS = 4, COUNTER_ADDS = 1000, WINDOW = 32 };
typedef struct adder {
    sfv_channel *ch;
    sfv_mr *mr;
    char *olds;          /* COUNTER_ADDS 8-byte old values */
    sfv_remote_mr word;
    int failed;
} adder;
static void *adder_run(void *arg) {
    adder *ad = (adder *)arg;
    sfv_pending p[WINDOW];
    int i;
    for (i = 0; i < COUNTER_ADDS; i++) {
        sfv_scatter_element old = sfv_mr_scatter_element(ad->mr, ad->olds + 8 * i, 8);
        if (i >= WINDOW && sfv_pending_wait(&p[i % WINDOW], -1, NULL) != SFV_OK) ad->failed++;
        if (sfv_channel_post_fetch_add(ad->ch, &old, ad->word, 1, &p[i % WINDOW]) != SFV_OK) {
            ad->failed++;
            fprintf(stderr, "    post: %s\n", sfv_last_error()->message);
            return NULL;
        }
    }
    for (i = COUNTER_ADDS - WINDOW; i < COUNTER_ADDS; i++)
        if (sfv_pending_wait(&p[i % WINDOW], -1, NULL) != SFV_OK) ad->failed++;
    return NULL;
}
static void t_atomic_counter_four_channels(void) {
    side a, b;
    sfv_channel_desc da = desc_default(), db = desc_atomic();
    sfv_channel *ach[COUNTER_PEERS], *bch[COUNTER_PEERS];
    adder ad[COUNTER_PEERS];
    pthread_t th[COUNTER_PEERS];
    static unsigned char seen[COUNTER_PEERS * COUNTER_ADDS];
    sfv_remote_mr word;
    double t0;
    int i, j;
    da.max_rd_atomic = 4;
    a = side_open(test_device(0), &da, SHARED);
    b = side_open(test_device(1), &db, ATOMIC);
    CHECK_OK(SFV_REMOTE_ARRAY_FIELD(sfv_mr_remote(b.mr), uint64_t, 3, &word)); /* bytes 24 .. 32 */
    channel_pairs(&a, &b, &da, &db, COUNTER_PEERS, ach, bch);
    for (i = 0; i < COUNTER_PEERS; i++) {
        ad[i].ch = ach[i];
        ad[i].mr = a.mr;
        ad[i].olds = a.buf + 65536 + (size_t)i * 8 * COUNTER_ADDS;
        ad[i].word = word;
        ad[i].failed = 0;
    }
    t0 = test_seconds();
    for (i = 0; i < COUNTER_PEERS; i++) CHECK(pthread_create(&th[i], NULL, adder_run, &ad[i]) == 0);
    for (i = 0; i < COUNTER_PEERS; i++) CHECK(pthread_join(th[i], NULL) == 0);
    for (i = 0; i < COUNTER_PEERS; i++) CHECK_EQ(ad[i].failed, 0);
    CHECK_EQ(u64_at(b.buf + 24), COUNTER_PEERS * COUNTER_ADDS);
    CHECK_EQ(u64_at(b.buf + 16), 0);
    CHECK_EQ(u64_at(b.buf + 32), 0);
    /* every old value 0 .. 3999 came back exactly once: each add saw the one before it */
    for (i = 0; i < COUNTER_PEERS; i++)
        for (j = 0; j < COUNTER_ADDS; j++) {
            uint64_t v = u64_at(ad[i].olds + 8 * j);
            CHECK(v < COUNTER_PEERS * COUNTER_ADDS);
            CHECK_EQ(seen[v], 0);
            seen[v] = 1;
        }
    printf("    %d fetch-and-adds in %.2f s\n", COUNTER_PEERS * COUNTER_ADDS, test_seconds() - t0);
    for (i = 1; i < COUNTER_PEERS; i++) {
        CHECK_EQ(sfv_channel_outstanding(ach[i]), 0);
        CHECK_OK(sfv_destroy_channel(ach[i]));
        CHECK_OK(sfv_destroy_channel(bch[i]));
    }
    pair_close(&a, &b);
}

/* A spinlock in the owner's memory, taken with compare-and-swap by three peers, each of which
   increments a plain counter next to it (RDMA read, add, RDMA write) 200 times while it holds
   the lock: no update is lost, and each release finds the lock still its own. */
enum { LOCK_PEERS = 3, LOCK_ROUNDS = 200 };
typedef struct locker {
    sfv_channel *ch;
    sfv_mr *mr;
    char *mine;          /* 16 bytes of this peer's: the old value, the counter */
    sfv_remote_mr lock, counter;
    uint64_t id;
    long spins;
    int failed;
} locker;
static void *locker_run(void *arg) {
    locker *lk = (locker *)arg;
    sfv_scatter_element old = sfv_mr_scatter_element(lk->mr, lk->mine, 8);
    sfv_scatter_element in = sfv_mr_scatter_element(lk->mr, lk->mine + 8, 8);
    sfv_gather_element out = sfv_mr_gather_element(lk->mr, lk->mine + 8, 8);
    int i;
    for (i = 0; i < LOCK_ROUNDS && !lk->failed; i++) {
        for (;;) { /* take the lock: 0 -> id */
            if (sfv_channel_compare_swap(lk->ch, &old, lk->lock, 0, lk->id, NULL) != SFV_OK) { lk->failed = 1; break; }
            if (u64_at(lk->mine) == 0) break;
            lk->spins++;
            sched_yield();
        }
        if (lk->failed) break;
        if (sfv_channel_read(lk->ch, &in, 1, lk->counter, NULL) != SFV_OK) lk->failed = 2;
        u64_put(lk->mine + 8, u64_at(lk->mine + 8) + 1);
        if (!lk->failed && sfv_channel_write(lk->ch, &out, 1, lk->counter, NULL) != SFV_OK) lk->failed = 3;
        /* release: id -> 0, and the lock must still have been ours */
        if (!lk->failed && sfv_channel_compare_swap(lk->ch, &old, lk->lock, lk->id, 0, NULL) != SFV_OK) lk->failed = 4;
        if (!lk->failed && u64_at(lk->mine) != lk->id) lk->failed = 5;
    }
    if (lk->failed) fprintf(stderr, "    peer %llu failed at step %d: %s\n", (unsigned long long)lk->id, lk->failed, sfv_last_error()->message);
    return NULL;
}
static void t_atomic_spinlock_three_peers(void) {
    side a, b;
    sfv_channel_desc da = desc_default(), db = desc_atomic();
    sfv_channel *ach[LOCK_PEERS], *bch[LOCK_PEERS];
    locker lk[LOCK_PEERS];
    pthread_t th[LOCK_PEERS];
    sfv_remote_mr lock, counter;
    struct shared_page { uint64_t lock; uint64_t pad[7]; uint64_t counter; } *page;
    long spins = 0;
    int i;
    a = side_open(test_device(0), &da, SHARED);
    b = side_open(test_device(1), &db, ATOMIC);
    page = (struct shared_page *)b.buf;
    CHECK_OK(SFV_REMOTE_STRUCT_FIELD(sfv_mr_remote(b.mr), struct shared_page, lock, &lock));
    CHECK_OK(SFV_REMOTE_STRUCT_FIELD(sfv_mr_remote(b.mr), struct shared_page, counter, &counter));
    channel_pairs(&a, &b, &da, &db, LOCK_PEERS, ach, bch);
    for (i = 0; i < LOCK_PEERS; i++) {
        lk[i].ch = ach[i];
        lk[i].mr = a.mr;
        lk[i].mine = a.buf + 4096 * (i + 1);
        lk[i].lock = lock;
        lk[i].counter = counter;
        lk[i].id = (uint64_t)i + 1;
        lk[i].spins = 0;
        lk[i].failed = 0;
    }
    for (i = 0; i < LOCK_PEERS; i++) CHECK(pthread_create(&th[i], NULL, locker_run, &lk[i]) == 0);
    for (i = 0; i < LOCK_PEERS; i++) CHECK(pthread_join(th[i], NULL) == 0);
    for (i = 0; i < LOCK_PEERS; i++) {
        CHECK_EQ(lk[i].failed, 0);
        spins += lk[i].spins;
    }
    CHECK_EQ(page->counter, LOCK_PEERS * LOCK_ROUNDS);
    CHECK_EQ(page->lock, 0);
    printf("    %d increments under the lock, %ld failed attempts to take it\n", LOCK_PEERS * LOCK_ROUNDS, spins);
    for (i = 1; i < LOCK_PEERS; i++) {
        CHECK_OK(sfv_destroy_channel(ach[i]));
        CHECK_OK(sfv_destroy_channel(bch[i]));
    }
    pair_close(&a, &b);
}

/* Every rule of an atomic that can be checked before posting is: refused with its result, the
   last error set, the pending handle zeroed, nothing posted, the channel still usable. */
#define CHECK_REFUSED(call, want)                                                  \
    do {                                                                           \
        CHECK_RESULT(call, want);                                                  \
        CHECK_EQ(sfv_last_error()->result, want);                                  \
        if (strcmp(sfv_last_error()->verb, "post") != 0) FAIL("verb %s", sfv_last_error()->verb); \
    } while (0)
static sfv_result scope_two_adds(sfv_channel *ch, void *user) {
    const sfv_scatter_element *olds = (const sfv_scatter_element *)user;
    sfv_remote_mr word = sfv_remote_mr_make(0, 0, 0);
    memcpy(&word, olds + 2, sizeof word); /* the word travels after the two elements */
    if (sfv_channel_post_fetch_add(ch, &olds[0], word, 5, NULL) != SFV_OK) return SFV_ERR_INVALID;
    return sfv_channel_post_compare_swap(ch, &olds[1], word, 0, 99, NULL); /* no match: left as is */
}
static void t_atomic_refusals(void) {
    side a, b;
    sfv_channel_desc d = desc_default(), db = desc_atomic();
    sfv_remote_mr word, r;
    sfv_scatter_element old, user[4];
    sfv_work_completion wc;
    sfv_pending p;
    struct rec { uint32_t small; uint32_t pad; uint64_t count; };
    a = side_open(test_device(0), &d, SHARED);
    b = side_open(test_device(1), &db, ATOMIC);
    connect_pair(&a, &b);
    CHECK_OK(SFV_REMOTE_STRUCT_FIELD(sfv_mr_remote(b.mr), struct rec, count, &word));
    old = S(&a, 0, 8);
    /* misaligned */
    CHECK_REFUSED(sfv_channel_fetch_add(a.ch, &old, sfv_remote_mr_make(word.addr + 4, 8, word.rkey), 1, &wc), SFV_ERR_INVALID);
    CHECK_EQ(wc.result, SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "aligned") != NULL);
    /* too short: a 4-byte field, the last 4 bytes of the word */
    CHECK_OK(SFV_REMOTE_STRUCT_FIELD(sfv_mr_remote(b.mr), struct rec, small, &r));
    CHECK_REFUSED(sfv_channel_compare_swap(a.ch, &old, r, 0, 1, &wc), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_EQ(wc.result, SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_OK(sfv_remote_mr_sub(word, 4, &r));
    CHECK_REFUSED(sfv_channel_post_fetch_add(a.ch, &old, r, 1, &p), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(sfv_pending_wait(&p, -1, NULL), SFV_ERR_INVALID); /* the refused post's handle */
    /* a wrapping region */
    CHECK_REFUSED(sfv_channel_fetch_add(a.ch, &old, sfv_remote_mr_make(UINT64_MAX - 7, 64, word.rkey), 1, &wc), SFV_ERR_INVALID);
    /* the old value's element: short, long, NULL */
    old.length = 4;
    CHECK_REFUSED(sfv_channel_fetch_add(a.ch, &old, word, 1, &wc), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "exactly 8") != NULL);
    old.length = 16;
    CHECK_REFUSED(sfv_channel_post_compare_swap(a.ch, &old, word, 0, 1, &p), SFV_ERR_INVALID);
    old.length = 8;
    CHECK_REFUSED(sfv_channel_fetch_add(a.ch, NULL, word, 1, &wc), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "NULL") != NULL);
    /* NULL pending outside a scope */
    CHECK_REFUSED(sfv_channel_post_fetch_add(a.ch, &old, word, 1, NULL), SFV_ERR_INVALID);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    CHECK_EQ(u64_at(b.buf + 8), 0);
    /* the channel is fine: a good one, and two inside a scope with NULL handles */
    CHECK_OK(sfv_channel_fetch_add(a.ch, &old, word, 1, &wc));
    user[0] = S(&a, 8, 8);
    user[1] = S(&a, 16, 8);
    memcpy(&user[2], &word, sizeof word);
    CHECK_OK(sfv_channel_scope(a.ch, scope_two_adds, user, NULL));
    CHECK_EQ(u64_at(a.buf + 8), 1);
    CHECK_EQ(u64_at(a.buf + 16), 6);
    CHECK_EQ(u64_at(b.buf + 8), 6);
    CHECK_EQ(sfv_channel_outstanding(a.ch), 0);
    pair_close(&a, &b);
}

/* The peer's MR without REMOTE_ATOMIC: a remote access error, whose hint names REMOTE_ATOMIC. */
static void t_atomic_peer_mr_without_remote_atomic(void) {
    side a, b;
    sfv_channel_desc d = desc_default(), db = desc_atomic();
    sfv_scatter_element old;
    sfv_work_completion wc;
    a = side_open(test_device(0), &d, SHARED);
    b = side_open(test_device(1), &db, SHARED); /* the QP allows atomics, the MR does not */
    connect_pair(&a, &b);
    old = S(&a, 0, 8);
    CHECK_RESULT(sfv_channel_fetch_add(a.ch, &old, sfv_mr_remote(b.mr), 1, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.result, SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_REM_ACCESS_ERR);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_REMOTE);
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_WORK);
    if (!strstr(sfv_last_error()->message, "REMOTE_ATOMIC") || !strstr(sfv_last_error()->message, "fetch-and-add"))
        FAIL("last error: %s", sfv_last_error()->message);
    printf("    %s\n", sfv_last_error()->message);
    CHECK_EQ(u64_at(b.buf), 0);
    CHECK_REFUSED(sfv_channel_fetch_add(a.ch, &old, sfv_mr_remote(b.mr), 1, &wc), SFV_ERR_BROKEN);
    pair_close(&a, &b);
}

/* The peer's channel without REMOTE_ATOMIC in desc.access (the default): refused by the peer. */
static void t_atomic_peer_qp_without_remote_atomic(void) {
    side a, b;
    sfv_channel_desc d = desc_default();
    sfv_scatter_element old;
    sfv_work_completion wc;
    pair_open(&a, &b, &d, &d, ATOMIC); /* the MR allows atomics, the QP does not */
    old = S(&a, 0, 8);
    CHECK_RESULT(sfv_channel_compare_swap(a.ch, &old, sfv_mr_remote(b.mr), 0, 1, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_REMOTE);
    if (wc.status != SFV_WC_REM_INV_REQ_ERR && wc.status != SFV_WC_REM_ACCESS_ERR) FAIL("status %s", sfv_wc_status_str(wc.status));
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_WORK);
    if (!strstr(sfv_last_error()->message, "REMOTE_ATOMIC")) FAIL("last error: %s", sfv_last_error()->message);
    printf("    %s\n", sfv_last_error()->message);
    CHECK_EQ(u64_at(b.buf), 0);
    pair_close(&a, &b);
}

static const harness_test TESTS[] = {
    TEST(t_refused_post_keeps_a_live_handle, 60),
    TEST(t_responder_flush_class, 60),
    TEST(t_every_failure_sets_last_error, 60),
    TEST(t_wrapping_remote_region_never_posted, 60),
    TEST(t_pending_outlived_by_channel, 60),
    TEST(t_gid_kinds_differ, 60),
    TEST(t_gid_other_subnet, 60),
    TEST(t_first_wait_timeout_hint, 60),
    TEST(t_dead_peer_and_late_handshake, 120),
    TEST(t_late_handshake, 120),
    TEST(t_endpoint_codec, 10),
    TEST(t_desc_defaults_and_range_checks, 60),
    TEST(t_loopback_send_receive, 60),
    TEST(t_pair_rxe0_rxe1, 60),
    TEST(t_two_processes, 120),
    TEST(t_handshake_bad_peer, 60),
    TEST(t_write_and_read, 60),
    TEST(t_immediates, 60),
    TEST(t_read_depth_traffic_class_read_sge, 60),
    TEST(t_gather_4_6_2_into_scatter_5_7, 60),
    TEST(t_every_size_class, 180),
    TEST(t_pending_out_of_order, 60),
    TEST(t_queue_full_and_null_pending, 60),
    TEST(t_batches, 60),
    TEST(t_wait_all, 60),
    TEST(t_batch_failure, 60),
    TEST(t_scope_auto_polls, 60),
    TEST(t_scope_auto_poll_error_rnr, 60),
    TEST(t_manual_scope_contract, 60),
    TEST(t_stale_pending_is_a_broken_contract, 60),
    TEST(t_write_to_local_only_region, 60),
    TEST(t_unchecked_element_outside_mr, 60),
    TEST(t_receive_too_small, 60),
    TEST(t_rnr_limited_retries, 60),
    TEST(t_peer_disappears_mid_transfer, 120),
    TEST(t_wait_deadlines, 90),
    TEST(t_event_wait_mode, 90),
    TEST(t_destroy_with_work_outstanding, 60),
    TEST(t_atomic_byte_order, 60),
    TEST(t_atomic_counter_four_channels, 120),
    TEST(t_atomic_spinlock_three_peers, 180),
    TEST(t_atomic_refusals, 60),
    TEST(t_atomic_peer_mr_without_remote_atomic, 60),
    TEST(t_atomic_peer_qp_without_remote_atomic, 60),
    TEST(t_request_batches_and_scope_completions, 30),
    TEST(t_unsignaled_in_scopes, 30),
    TEST(t_unsignaled_reads_in_scope, 30),
    TEST(t_link_down_is_not_a_programming_error, 90), /* last: it takes the link down and up */
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
