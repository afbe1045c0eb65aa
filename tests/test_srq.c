/* test_srq.c - shared receive queues on rxe (>>srq): three peers send into one SRQ and every
   message is received once, with the channel it came in on; a channel on an SRQ refuses its own
   receives; the low-water limit's event reaches sfv_context_events; the SRQ outlives its
   creator's reference while channels use it, and goes with the last one; receives the SRQ holds
   stay for the other channels when one channel breaks; a multi-channel puts all of its channels
   on one SRQ by its desc. Server side on rxe0, clients on rxe1. */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "../safeverbs.h"
#include "harness.h"

#include <stdint.h>

#define BUF (1u << 16)
#define PEERS 3
#define MSG 16

typedef struct dev {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    char *buf;
} dev;

static dev dev_open(const char *name, unsigned access) {
    dev d;
    d.buf = (char *)aligned_alloc(4096, BUF);
    CHECK(d.buf != NULL);
    memset(d.buf, 0, BUF);
    CHECK_OK(sfv_open_device(name, &d.ctx));
    CHECK_OK(sfv_alloc_pd(d.ctx, &d.pd));
    CHECK_OK(sfv_reg_mr_access(d.pd, d.buf, BUF, access, &d.mr));
    return d;
}
static void dev_close(dev *d) {
    CHECK_OK(sfv_dereg_mr(d->mr));
    CHECK_OK(sfv_dealloc_pd(d->pd));
    CHECK_OK(sfv_close_device(d->ctx));
    free(d->buf);
}
static void connect_pair(sfv_channel *a, sfv_channel *b) {
    sfv_endpoint ea, eb;
    CHECK_OK(sfv_channel_endpoint(a, &ea));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK_OK(sfv_channel_handshake(a, &eb));
    CHECK_OK(sfv_channel_handshake(b, &ea));
}
/* Server channels on the SRQ (rxe0), each connected to a client channel of its own (rxe1). */
static void open_peers(dev *s, dev *c, sfv_srq *srq, sfv_channel **server, sfv_channel **client, size_t n) {
    size_t i;
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    for (i = 0; i < n; i++) {
        d.srq = srq;
        CHECK_OK(sfv_create_channel(s->pd, &d, &server[i]));
        CHECK(sfv_channel_get_desc(server[i])->srq == srq);
        d.srq = NULL;
        CHECK_OK(sfv_create_channel(c->pd, &d, &client[i]));
        connect_pair(server[i], client[i]);
    }
}
/* Client i sends message k: "peer i msg k". */
static void send_from(dev *c, sfv_channel *ch, size_t i, size_t k) {
    char *m = c->buf + 4096 + i * 256;
    sfv_gather_element g;
    snprintf(m, MSG, "peer %zu msg %02zu", i, k);
    g = sfv_mr_gather_element(c->mr, m, MSG);
    CHECK_OK(sfv_channel_send(ch, &g, 1, NULL));
}
static size_t index_of(sfv_channel *const *chs, size_t n, const sfv_channel *ch) {
    size_t i;
    for (i = 0; i < n; i++)
        if (chs[i] == ch) return i;
    return n;
}

/* Three peers, 20 messages each, into one SRQ of 60 receives (posted in batches): every message
   arrives once, on the channel of the peer that sent it. */
static void t_three_peers_one_srq(void) {
    enum { EACH = 20, ALL = PEERS * EACH };
    dev s = dev_open(test_device(0), SFV_ACCESS_LOCAL_WRITE), c = dev_open(test_device(1), SFV_ACCESS_LOCAL_WRITE);
    sfv_srq *srq;
    sfv_srq_desc sd;
    sfv_channel *server[PEERS], *client[PEERS];
    sfv_scatter_element e[ALL];
    sfv_pending rx[ALL];
    sfv_work_completion wc;
    int seen[PEERS][EACH];
    size_t i, k;
    memset(&sd, 0, sizeof sd);
    sd.max_wr = 64;
    CHECK_OK(sfv_create_srq(s.pd, &sd, &srq));
    open_peers(&s, &c, srq, server, client, PEERS);
    for (i = 0; i < ALL; i++) e[i] = sfv_mr_scatter_element(s.mr, s.buf + i * MSG, MSG);
    CHECK_OK(sfv_srq_post_receive_batch(srq, e, 1, 32, rx));
    CHECK_OK(sfv_srq_post_receive_batch(srq, e + 32, 1, ALL - 32 - 1, rx + 32));
    CHECK_OK(sfv_srq_post_receive(srq, &e[ALL - 1], 1, &rx[ALL - 1]));
    CHECK_EQ(sfv_srq_outstanding(srq), ALL);
    /* a channel on the SRQ takes no receive of its own */
    {
        sfv_pending own;
        CHECK_RESULT(sfv_channel_post_receive(server[0], &e[0], 1, &own), SFV_ERR_INVALID);
        CHECK(strstr(sfv_last_error()->message, "SRQ") != NULL);
        CHECK_RESULT(sfv_channel_receive(server[1], &e[0], 1, &wc), SFV_ERR_INVALID);
    }
    for (k = 0; k < EACH; k++)
        for (i = 0; i < PEERS; i++) send_from(&c, client[(i + k) % PEERS], (i + k) % PEERS, k);
    memset(seen, 0, sizeof seen);
    for (i = 0; i < ALL; i++) {
        size_t peer, msg, from;
        CHECK_OK(sfv_pending_wait(&rx[i], -1, &wc));
        CHECK_EQ(wc.byte_len, MSG);
        CHECK_EQ(wc.opcode, SFV_WC_OP_RECV);
        from = index_of(server, PEERS, wc.channel);
        CHECK(from < PEERS);
        CHECK(sscanf(s.buf + i * MSG, "peer %zu msg %zu", &peer, &msg) == 2);
        CHECK_EQ(peer, from); /* it came in on that peer's channel */
        CHECK(msg < EACH);
        CHECK_EQ(seen[peer][msg], 0);
        seen[peer][msg] = 1;
    }
    for (i = 0; i < PEERS; i++)
        for (k = 0; k < EACH; k++) CHECK_EQ(seen[i][k], 1);
    CHECK_EQ(sfv_srq_outstanding(srq), 0);
    printf("    %d messages from %d peers, each once, on its own channel\n", ALL, PEERS);
    CHECK_OK(sfv_destroy_srq(srq)); /* the channels keep it */
    for (i = 0; i < PEERS; i++) {
        CHECK_OK(sfv_destroy_channel(server[i]));
        CHECK_OK(sfv_destroy_channel(client[i]));
    }
    dev_close(&s);
    dev_close(&c);
}

/* The low-water limit: below it, SRQ_LIMIT_REACHED comes through sfv_context_events naming the SRQ. */
static void t_srq_limit_event(void) {
    dev s = dev_open(test_device(0), SFV_ACCESS_LOCAL_WRITE), c = dev_open(test_device(1), SFV_ACCESS_LOCAL_WRITE);
    sfv_srq *srq;
    sfv_srq_desc sd;
    sfv_channel *server[1], *client[1];
    sfv_scatter_element e[10];
    sfv_pending rx[10];
    sfv_event ev[8];
    size_t i, n;
    int got = 0;
    double end;
    memset(&sd, 0, sizeof sd);
    sd.max_wr = 16;
    CHECK_OK(sfv_create_srq(s.pd, &sd, &srq));
    CHECK_RESULT(sfv_srq_set_limit(srq, 16), SFV_ERR_INVALID);
    open_peers(&s, &c, srq, server, client, 1);
    for (i = 0; i < 10; i++) {
        e[i] = sfv_mr_scatter_element(s.mr, s.buf + i * MSG, MSG);
        CHECK_OK(sfv_srq_post_receive(srq, &e[i], 1, &rx[i]));
    }
    CHECK_OK(sfv_srq_set_limit(srq, 4));
    CHECK_OK(sfv_context_events(s.ctx, ev, 8, &n)); /* nothing yet: 10 posted, limit 4 */
    for (i = 0; i < n; i++) CHECK(ev[i].type != SFV_EVENT_SRQ_LIMIT_REACHED);
    for (i = 0; i < 7; i++) { /* 3 left: below the limit */
        send_from(&c, client[0], 0, i);
        CHECK_OK(sfv_pending_wait(&rx[i], -1, NULL));
    }
    end = test_seconds() + 5;
    while (!got && test_seconds() < end) {
        CHECK_OK(sfv_context_events(s.ctx, ev, 8, &n));
        for (i = 0; i < n; i++)
            if (ev[i].type == SFV_EVENT_SRQ_LIMIT_REACHED) {
                CHECK(ev[i].srq == srq);
                got = 1;
            }
        if (!got) usleep(10000);
    }
    CHECK(got);
    printf("    SRQ_LIMIT_REACHED with 3 receives left (limit 4)\n");
    for (i = 7; i < 10; i++) send_from(&c, client[0], 0, i);
    for (i = 7; i < 10; i++) CHECK_OK(sfv_pending_wait(&rx[i], -1, NULL));
    CHECK_OK(sfv_destroy_channel(server[0]));
    CHECK_OK(sfv_destroy_channel(client[0]));
    CHECK_OK(sfv_destroy_srq(srq)); /* after its channels: this is the last reference */
    dev_close(&s);
    dev_close(&c);
}

/* Reference counts: the creator's reference dropped first, the SRQ still serves its channels
   (receives posted before complete); and the other order, channels first, then the SRQ with
   receives still posted (nothing leaks: the sanitizer build checks). */
static void t_srq_lifetime(void) {
    dev s = dev_open(test_device(0), SFV_ACCESS_LOCAL_WRITE), c = dev_open(test_device(1), SFV_ACCESS_LOCAL_WRITE);
    sfv_srq *srq;
    sfv_channel *server[2], *client[2];
    sfv_scatter_element e[4];
    sfv_pending rx[4];
    sfv_work_completion wc;
    size_t i;
    CHECK_OK(sfv_create_srq(s.pd, NULL, &srq));
    open_peers(&s, &c, srq, server, client, 2);
    for (i = 0; i < 4; i++) e[i] = sfv_mr_scatter_element(s.mr, s.buf + i * MSG, MSG);
    CHECK_OK(sfv_srq_post_receive_batch(srq, e, 1, 4, rx));
    CHECK_OK(sfv_destroy_srq(srq)); /* the creator's reference; the channels hold theirs */
    send_from(&c, client[1], 1, 0);
    send_from(&c, client[0], 0, 1);
    CHECK_OK(sfv_pending_wait(&rx[0], -1, &wc));
    CHECK(wc.channel == server[1]);
    CHECK_OK(sfv_pending_wait(&rx[1], -1, &wc));
    CHECK(wc.channel == server[0]);
    CHECK_OK(sfv_destroy_channel(server[0]));
    send_from(&c, client[1], 1, 2);
    CHECK_OK(sfv_pending_wait(&rx[2], -1, &wc));
    CHECK(wc.channel == server[1]);
    CHECK_OK(sfv_destroy_channel(server[1])); /* the last reference: the SRQ goes, rx[3] with it */
    CHECK_OK(sfv_destroy_channel(client[0]));
    CHECK_OK(sfv_destroy_channel(client[1]));
    /* channels first, then the SRQ, with receives still posted */
    CHECK_OK(sfv_create_srq(s.pd, NULL, &srq));
    open_peers(&s, &c, srq, server, client, 1);
    CHECK_OK(sfv_srq_post_receive_batch(srq, e, 1, 4, rx));
    CHECK_OK(sfv_destroy_channel(server[0]));
    CHECK_OK(sfv_destroy_channel(client[0]));
    CHECK_EQ(sfv_srq_outstanding(srq), 4);
    CHECK_OK(sfv_destroy_srq(srq));
    CHECK_OK(sfv_destroy_srq(NULL));
    dev_close(&s);
    dev_close(&c);
}

/* One server channel breaks (its peer writes through a key that is not the server's: the
   server's QP goes to the error state); the receives the SRQ holds stay for the other channel. */
static void t_srq_survives_a_broken_channel(void) {
    dev s = dev_open(test_device(0), SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE), c = dev_open(test_device(1), SFV_ACCESS_LOCAL_WRITE);
    sfv_srq *srq;
    sfv_channel *server[2], *client[2];
    sfv_scatter_element e[4];
    sfv_pending rx[4];
    sfv_work_completion wc;
    sfv_gather_element g;
    sfv_remote_mr bogus;
    size_t i;
    CHECK_OK(sfv_create_srq(s.pd, NULL, &srq));
    open_peers(&s, &c, srq, server, client, 2);
    for (i = 0; i < 4; i++) e[i] = sfv_mr_scatter_element(s.mr, s.buf + i * MSG, MSG);
    CHECK_OK(sfv_srq_post_receive_batch(srq, e, 1, 4, rx));
    bogus = sfv_mr_remote(s.mr);
    bogus.rkey ^= 0x5a5a00;
    g = sfv_mr_gather_element(c.mr, c.buf, 8);
    CHECK_RESULT(sfv_channel_write(client[0], &g, 1, bogus, &wc), SFV_ERR_WORK);
    printf("    the write through a wrong key: %s\n", sfv_wc_status_str(wc.status));
    for (i = 0; i < 4; i++) send_from(&c, client[1], 1, i);
    for (i = 0; i < 4; i++) {
        CHECK_OK(sfv_pending_wait(&rx[i], -1, &wc));
        CHECK(wc.channel == server[1]);
    }
    CHECK_EQ(sfv_srq_outstanding(srq), 0);
    for (i = 0; i < 2; i++) {
        CHECK_OK(sfv_destroy_channel(server[i]));
        CHECK_OK(sfv_destroy_channel(client[i]));
    }
    CHECK_OK(sfv_destroy_srq(srq));
    dev_close(&s);
    dev_close(&c);
}

/* A multi-channel on one SRQ by its desc: every channel of it takes its receives from the SRQ. */
static void t_multi_channel_on_srq(void) {
    dev s = dev_open(test_device(0), SFV_ACCESS_LOCAL_WRITE), c = dev_open(test_device(1), SFV_ACCESS_LOCAL_WRITE);
    sfv_srq *srq;
    sfv_multi_channel *mc;
    sfv_channel_desc d;
    sfv_channel *client[PEERS], *server[PEERS];
    sfv_scatter_element e[PEERS];
    sfv_pending rx[PEERS];
    sfv_work_completion wc;
    size_t i, hit[PEERS] = {0};
    CHECK_OK(sfv_create_srq(s.pd, NULL, &srq));
    memset(&d, 0, sizeof d);
    d.srq = srq;
    CHECK_OK(sfv_create_multi_channel(s.pd, PEERS, &d, &mc));
    CHECK_OK(sfv_destroy_srq(srq)); /* the multi-channel's channels keep it */
    for (i = 0; i < PEERS; i++) {
        server[i] = sfv_multi_channel_peer(mc, i);
        CHECK_OK(sfv_create_channel(c.pd, NULL, &client[i]));
        connect_pair(server[i], client[i]);
    }
    for (i = 0; i < PEERS; i++) {
        e[i] = sfv_mr_scatter_element(s.mr, s.buf + i * MSG, MSG);
        CHECK_OK(sfv_srq_post_receive(srq, &e[i], 1, &rx[i]));
    }
    for (i = 0; i < PEERS; i++) send_from(&c, client[i], i, 0);
    for (i = 0; i < PEERS; i++) {
        size_t at;
        CHECK_OK(sfv_pending_wait(&rx[i], -1, &wc));
        at = index_of(server, PEERS, wc.channel);
        CHECK(at < PEERS);
        hit[at]++;
    }
    for (i = 0; i < PEERS; i++) CHECK_EQ(hit[i], 1);
    CHECK_OK(sfv_destroy_multi_channel(mc));
    for (i = 0; i < PEERS; i++) CHECK_OK(sfv_destroy_channel(client[i]));
    dev_close(&s);
    dev_close(&c);
}

/* The refusals: desc fields, NULLs, a pending handle left NULL, a full SRQ, an SRQ of another device. */
static void t_srq_refusals(void) {
    dev s = dev_open(test_device(0), SFV_ACCESS_LOCAL_WRITE), c = dev_open(test_device(1), SFV_ACCESS_LOCAL_WRITE);
    sfv_srq *srq = (sfv_srq *)&s;
    sfv_srq_desc sd;
    sfv_channel_desc d;
    sfv_channel *ch = (sfv_channel *)&s;
    sfv_scatter_element e = sfv_mr_scatter_element(s.mr, s.buf, MSG), e2;
    sfv_pending rx[3];
    sfv_device_attr da;
    CHECK_OK(sfv_query_device(s.ctx, &da));
    memset(&sd, 0, sizeof sd);
    sd.max_wr = da.max_srq_wr + 1;
    CHECK_RESULT(sfv_create_srq(s.pd, &sd, &srq), SFV_ERR_INVALID);
    CHECK(srq == NULL);
    CHECK(strstr(sfv_last_error()->message, "max_wr") != NULL);
    sd.max_wr = 2;
    sd.limit = 2;
    CHECK_RESULT(sfv_create_srq(s.pd, &sd, &srq), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_create_srq(NULL, &sd, &srq), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_create_srq(s.pd, &sd, NULL), SFV_ERR_INVALID);
    sd.limit = 0;
    CHECK_OK(sfv_create_srq(s.pd, &sd, &srq));
    CHECK_RESULT(sfv_srq_post_receive(srq, &e, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_srq_post_receive(NULL, &e, 1, &rx[0]), SFV_ERR_INVALID);
    CHECK_OK(sfv_srq_post_receive(srq, &e, 1, &rx[0]));
    e2 = sfv_mr_scatter_element(s.mr, s.buf + MSG, MSG); /* each receive its own memory: one buffer twice races */
    CHECK_OK(sfv_srq_post_receive(srq, &e2, 1, &rx[1]));
    e2 = sfv_mr_scatter_element(s.mr, s.buf + 2 * MSG, MSG);
    CHECK_RESULT(sfv_srq_post_receive(srq, &e2, 1, &rx[2]), SFV_ERR_RESOURCE); /* max_wr 2 */
    CHECK_RESULT(sfv_pending_wait(&rx[0], 50, NULL), SFV_ERR_TIMEOUT);       /* nobody sends */
    memset(&d, 0, sizeof d);
    d.srq = srq;
    CHECK_RESULT(sfv_create_channel(c.pd, &d, &ch), SFV_ERR_INVALID);         /* rxe1's PD, rxe0's SRQ */
    CHECK(ch == NULL);
    CHECK(strstr(sfv_last_error()->message, "srq") != NULL);
    CHECK_RESULT(sfv_srq_set_limit(NULL, 1), SFV_ERR_INVALID);
    CHECK_EQ(sfv_srq_outstanding(NULL), 0);
    CHECK_OK(sfv_destroy_srq(srq));
    dev_close(&s);
    dev_close(&c);
}

static const harness_test TESTS[] = {
    TEST(t_three_peers_one_srq, 60),
    TEST(t_srq_limit_event, 60),
    TEST(t_srq_lifetime, 60),
    TEST(t_srq_survives_a_broken_channel, 60),
    TEST(t_multi_channel_on_srq, 60),
    TEST(t_srq_refusals, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
