/* RDMA-CM (>>rdmacm) on rxe: rxe0 owns 192.0.2.1, rxe1 192.0.2.2 (tests/vm/run.sh). The
   listening side runs on the test's thread, the connecting side on a second thread. */
#define SAFEVERBS_RDMACM
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "harness.h"
#include <dirent.h>
#include <pthread.h>
#include <poll.h>

#define SRV_ADDR "192.0.2.1"
#define CLI_ADDR "192.0.2.2"

typedef struct side {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    char buf[4096];
} side;

static void side_open(side *s, int which) {
    memset(s, 0, sizeof *s);
    CHECK_OK(sfv_open_device(test_device(which), &s->ctx));
    CHECK_OK(sfv_alloc_pd(s->ctx, &s->pd));
    CHECK_OK(sfv_reg_mr_local(s->pd, s->buf, sizeof s->buf, &s->mr));
}
static void side_close(side *s) {
    CHECK_OK(sfv_dereg_mr(s->mr));
    CHECK_OK(sfv_dealloc_pd(s->pd));
    CHECK_OK(sfv_close_device(s->ctx));
}

static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    CHECK(d != NULL);
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

/* The connecting side: what it should do and what it got. */
typedef struct client {
    uint16_t port;
    const char *addr;
    const char *src;      /* NULL: CLI_ADDR */
    int timeout_ms;
    int mode;             /* 0: echo one message back; 1: post a receive and wait for the peer to go; 2: connect and close;
                             3: post a receive and wait on it alone (up to 20 s): the peer's disconnect must end it */
    sfv_wait_mode wait_mode;
    double done_at;       /* mode 3: when the wait returned (test_seconds) */
    sfv_work_completion wc;
    char wait_message[256];
    const char *priv;
    sfv_result result;
    sfv_error err;
    char peer_priv[64];
    size_t peer_len;
    char reason[64];
    size_t reason_len;
    double seconds;       /* mode 1: how long the receive waited after the disconnect was seen */
    sfv_result wait_result;
    sfv_result events_result;
    int cycles;
} client;

static void *client_run(void *arg) {
    client *c = (client *)arg;
    side s;
    int i;
    side_open(&s, 1);
    for (i = 0; i < (c->cycles ? c->cycles : 1); i++) {
        sfv_cm_conn *conn = NULL;
        const double t0 = test_seconds();
        sfv_channel_desc desc = SFV_ZERO_INIT;
        desc.wait_mode = c->wait_mode;
        c->result = sfv_cm_connect(s.pd, c->src ? c->src : CLI_ADDR, c->addr ? c->addr : SRV_ADDR, c->port, &desc, c->priv, c->priv ? strlen(c->priv) : 0,
                                   c->timeout_ms, &conn);
        c->seconds = test_seconds() - t0;
        c->err = *sfv_last_error();
        if (c->result != SFV_OK) {
            const uint8_t *r = sfv_cm_reject_reason(&c->reason_len);
            CHECK(conn == NULL);
            if (c->reason_len > sizeof c->reason) c->reason_len = sizeof c->reason;
            memcpy(c->reason, r, c->reason_len);
            break;
        }
        {
            const uint8_t *p = sfv_cm_peer_private(conn, &c->peer_len);
            if (c->peer_len > sizeof c->peer_priv) c->peer_len = sizeof c->peer_priv;
            memcpy(c->peer_priv, p, c->peer_len);
        }
        if (c->mode == 0) {
            sfv_scatter_element in = sfv_mr_scatter_element(s.mr, s.buf, 64);
            sfv_gather_element out = sfv_mr_gather_element(s.mr, s.buf, 64);
            CHECK_OK(sfv_channel_receive(sfv_cm_channel(conn), &in, 1, NULL));
            CHECK_OK(sfv_channel_send(sfv_cm_channel(conn), &out, 1, NULL));
        } else if (c->mode == 1) {
            sfv_scatter_element in = sfv_mr_scatter_element(s.mr, s.buf, 64);
            sfv_pending rx;
            struct pollfd p;
            double t1;
            CHECK_OK(sfv_channel_post_receive(sfv_cm_channel(conn), &in, 1, &rx));
            p.fd = sfv_cm_fd(conn);
            p.events = POLLIN;
            CHECK(poll(&p, 1, 20000) == 1); /* the peer's disconnect makes the CM fd readable */
            c->events_result = sfv_cm_events(conn);
            t1 = test_seconds();
            c->wait_result = sfv_pending_wait(&rx, -1, NULL);
            c->seconds = test_seconds() - t1;
        } else if (c->mode == 3) {
            sfv_scatter_element in = sfv_mr_scatter_element(s.mr, s.buf, 64);
            sfv_gather_element out = sfv_mr_gather_element(s.mr, s.buf, 8);
            sfv_pending rx;
            CHECK_OK(sfv_channel_post_receive(sfv_cm_channel(conn), &in, 1, &rx));
            c->wait_result = sfv_pending_wait(&rx, 20000, &c->wc);
            c->done_at = test_seconds();
            snprintf(c->wait_message, sizeof c->wait_message, "%s", sfv_last_error()->message);
            c->events_result = sfv_channel_send(sfv_cm_channel(conn), &out, 1, NULL); /* broken now */
        }
        CHECK_OK(sfv_cm_close(conn, c->mode == 2 ? 5000 : 0));
    }
    side_close(&s);
    return NULL;
}

/* The server's side of a ping: text goes out on ch, the client echoes it into buf + 1024. */
static void ping_echoed(side *s, sfv_channel *ch, const char *text) {
    sfv_scatter_element in = sfv_mr_scatter_element(s->mr, s->buf + 1024, 64);
    sfv_gather_element out = sfv_mr_gather_element(s->mr, s->buf, 64);
    sfv_pending rx;
    snprintf(s->buf, 64, "%s", text);
    CHECK_OK(sfv_channel_post_receive(ch, &in, 1, &rx));
    CHECK_OK(sfv_channel_send(ch, &out, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    CHECK(strcmp(s->buf + 1024, text) == 0);
}

static sfv_cm_listener *listen_any_port(uint16_t *port) {
    sfv_cm_listener *l = NULL;
    CHECK_OK(sfv_cm_listen(SRV_ADDR, 0, 0, &l));
    *port = sfv_cm_listener_port(l);
    CHECK(*port != 0);
    CHECK(sfv_cm_listener_fd(l) >= 0);
    return l;
}

static void test_connect_accept_data(void) {
    side s;
    client c;
    pthread_t t;
    sfv_cm_listener *l;
    sfv_cm_request *req;
    sfv_cm_conn *conn;
    const uint8_t *p;
    size_t n;
    side_open(&s, 0);
    memset(&c, 0, sizeof c);
    l = listen_any_port(&c.port);
    c.priv = "hello from the client";
    CHECK(pthread_create(&t, NULL, client_run, &c) == 0);
    if (sfv_cm_get_request(l, 10000, &req) != SFV_OK) {
        pthread_join(t, NULL);
        FAIL("no request; the client got %s: %s", sfv_result_str(c.result), c.err.message);
    }
    p = sfv_cm_request_private(req, &n);
    CHECK(n >= strlen(c.priv) && memcmp(p, c.priv, strlen(c.priv)) == 0);
    CHECK_OK(sfv_cm_accept(req, s.pd, NULL, "world", 5, 10000, &conn));
    /* an ordinary channel: send, then get the echo */
    ping_echoed(&s, sfv_cm_channel(conn), "ping over rdma-cm");
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_OK(c.result);
    CHECK(c.peer_len >= 5 && memcmp(c.peer_priv, "world", 5) == 0);
    CHECK_OK(sfv_cm_close(conn, 0));
    CHECK_OK(sfv_cm_destroy_listener(l));
    side_close(&s);
}

static void test_no_device_has_address(void) {
    sfv_cm_listener *l = (sfv_cm_listener *)1;
    CHECK_RESULT(sfv_cm_listen("192.0.2.77", 0, 0, &l), SFV_ERR_NOT_FOUND);
    CHECK(l == NULL);
    CHECK(strstr(sfv_last_error()->message, "no RDMA device has the address") != NULL);
    CHECK_RESULT(sfv_cm_listen("not-an-address", 0, 0, &l), SFV_ERR_NOT_FOUND);
}

static void test_address_in_use(void) {
    uint16_t port;
    sfv_cm_listener *l = listen_any_port(&port), *l2 = (sfv_cm_listener *)1;
    CHECK_RESULT(sfv_cm_listen(SRV_ADDR, port, 0, &l2), SFV_ERR_ADDR_IN_USE);
    CHECK(l2 == NULL);
    CHECK(strstr(sfv_last_error()->message, "address in use") != NULL);
    CHECK_OK(sfv_cm_destroy_listener(l));
}

static void test_refused(void) {
    client c;
    uint16_t port;
    sfv_cm_listener *l = listen_any_port(&port);
    CHECK_OK(sfv_cm_destroy_listener(l)); /* a port nobody listens on now */
    memset(&c, 0, sizeof c);
    c.port = port;
    c.timeout_ms = 10000;
    client_run(&c);
    CHECK_EQ(c.result, SFV_ERR_REFUSED);
    CHECK(strstr(c.err.message, "nothing listens") != NULL);
    CHECK(c.seconds < 8.0); /* an answer, not the deadline */
}

static void test_rejected_with_reason(void) {
    client c;
    pthread_t t;
    sfv_cm_request *req;
    sfv_cm_listener *l;
    memset(&c, 0, sizeof c);
    l = listen_any_port(&c.port);
    CHECK(pthread_create(&t, NULL, client_run, &c) == 0);
    CHECK_OK(sfv_cm_get_request(l, 10000, &req));
    CHECK_OK(sfv_cm_reject(req, "go away: full", 13));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_EQ(c.result, SFV_ERR_REJECTED);
    CHECK(strstr(c.err.message, "rejected") != NULL);
    CHECK(c.reason_len >= 13 && memcmp(c.reason, "go away: full", 13) == 0);
    CHECK_OK(sfv_cm_destroy_listener(l));
}

static void test_timed_out(void) {
    client c;
    pthread_t t;
    sfv_cm_request *req;
    sfv_cm_listener *l;
    memset(&c, 0, sizeof c);
    l = listen_any_port(&c.port);
    c.timeout_ms = 700;
    CHECK(pthread_create(&t, NULL, client_run, &c) == 0);
    CHECK_OK(sfv_cm_get_request(l, 10000, &req)); /* taken, never answered in time */
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_EQ(c.result, SFV_ERR_TIMEOUT);
    CHECK(c.seconds >= 0.6 && c.seconds < 7.0);
    CHECK(strstr(c.err.message, "deadline") != NULL);
    CHECK_OK(sfv_cm_reject(req, NULL, 0));
    CHECK_OK(sfv_cm_destroy_listener(l));
    /* the listener's own wait has a deadline too */
    l = listen_any_port(&c.port);
    CHECK_RESULT(sfv_cm_get_request(l, 200, &req), SFV_ERR_TIMEOUT);
    CHECK(req == NULL);
    CHECK_RESULT(sfv_cm_get_request(l, -1, &req), SFV_ERR_TIMEOUT);
    CHECK_OK(sfv_cm_destroy_listener(l));
}

static void test_unreachable(void) {
    client c;
    memset(&c, 0, sizeof c);
    c.addr = "198.51.100.1"; /* TEST-NET-2: the guest has no route there */
    c.port = 7471;
    c.timeout_ms = 5000;
    client_run(&c);
    if (c.result != SFV_ERR_UNREACHABLE) printf("    got: %s\n", c.err.message);
    CHECK_EQ(c.result, SFV_ERR_UNREACHABLE);
    CHECK(strstr(c.err.message, "unreachable") != NULL);
}

static void test_private_data_limits_and_wrong_pd(void) {
    side s;
    sfv_cm_conn *conn = (sfv_cm_conn *)1;
    char big[SFV_CM_CONNECT_PRIVATE_MAX + 1];
    uint16_t port;
    sfv_cm_listener *l = listen_any_port(&port);
    memset(big, 'x', sizeof big);
    side_open(&s, 0);
    CHECK_RESULT(sfv_cm_connect(s.pd, CLI_ADDR, SRV_ADDR, port, NULL, big, sizeof big, 5000, &conn), SFV_ERR_INVALID);
    CHECK(conn == NULL);
    CHECK(strstr(sfv_last_error()->message, "at most 52") != NULL);
    /* the route to 192.0.2.1 leaves from 192.0.2.2, which rxe1 owns: a PD on rxe0 is refused */
    CHECK_RESULT(sfv_cm_connect(s.pd, CLI_ADDR, SRV_ADDR, port, NULL, NULL, 0, 5000, &conn), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "allocate the PD on that device") != NULL);
    CHECK_RESULT(sfv_cm_connect(NULL, CLI_ADDR, SRV_ADDR, port, NULL, NULL, 0, 5000, &conn), SFV_ERR_INVALID);
    CHECK_OK(sfv_cm_destroy_listener(l));
    side_close(&s);
}

/* Too many bytes to accept or reject with: refused, and the request is still answered (rejected). */
static void test_accept_and_reject_private_limits(void) {
    side s;
    client c;
    pthread_t t;
    sfv_cm_listener *l;
    sfv_cm_request *req;
    sfv_cm_conn *conn = (sfv_cm_conn *)1;
    static char big[SFV_CM_ACCEPT_PRIVATE_MAX + 1];
    int k;
    side_open(&s, 0);
    l = listen_any_port(&c.port);
    for (k = 0; k < 2; k++) {
        const uint16_t port = c.port;
        memset(&c, 0, sizeof c);
        c.port = port;
        CHECK(pthread_create(&t, NULL, client_run, &c) == 0);
        CHECK_OK(sfv_cm_get_request(l, 10000, &req));
        if (k == 0) {
            CHECK_RESULT(sfv_cm_accept(req, s.pd, NULL, big, sizeof big, 10000, &conn), SFV_ERR_INVALID);
            CHECK(conn == NULL);
            CHECK(strstr(sfv_last_error()->message, "at most 192") != NULL);
        } else {
            CHECK_RESULT(sfv_cm_reject(req, big, SFV_CM_REJECT_PRIVATE_MAX + 1), SFV_ERR_INVALID);
            CHECK(strstr(sfv_last_error()->message, "at most 148") != NULL);
        }
        CHECK(pthread_join(t, NULL) == 0);
        CHECK_EQ(c.result, SFV_ERR_REJECTED); /* answered all the same, not left to its deadline */
        CHECK(c.seconds < 8.0);
    }
    CHECK_OK(sfv_cm_destroy_listener(l));
    side_close(&s);
}

static void test_peer_disconnects_mid_stream(void) {
    side s;
    client c;
    pthread_t t;
    sfv_cm_listener *l;
    sfv_cm_request *req;
    sfv_cm_conn *conn;
    side_open(&s, 0);
    memset(&c, 0, sizeof c);
    c.mode = 1;
    c.timeout_ms = 10000;
    l = listen_any_port(&c.port);
    CHECK(pthread_create(&t, NULL, client_run, &c) == 0);
    CHECK_OK(sfv_cm_get_request(l, 10000, &req));
    CHECK_OK(sfv_cm_accept(req, s.pd, NULL, NULL, 0, 10000, &conn));
    usleep(200000); /* the client's receive is posted */
    CHECK_OK(sfv_cm_close(conn, 0));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_OK(c.result);
    CHECK_EQ(c.events_result, SFV_ERR_BROKEN);
    CHECK(c.wait_result != SFV_OK);     /* flushed, not left to its deadline (10 s) */
    CHECK(c.seconds < 2.0);
    CHECK_OK(sfv_cm_destroy_listener(l));
    side_close(&s);
}

/* No sfv_cm_events, no poll of the CM fd: the wait itself notices the disconnect, busy or asleep. */
static void wait_ends_on_disconnect(sfv_wait_mode mode) {
    side s;
    client c;
    pthread_t t;
    sfv_cm_listener *l;
    sfv_cm_request *req;
    sfv_cm_conn *conn;
    double closed_at;
    side_open(&s, 0);
    memset(&c, 0, sizeof c);
    c.mode = 3;
    c.wait_mode = mode;
    c.timeout_ms = 10000;
    l = listen_any_port(&c.port);
    CHECK(pthread_create(&t, NULL, client_run, &c) == 0);
    CHECK_OK(sfv_cm_get_request(l, 10000, &req));
    CHECK_OK(sfv_cm_accept(req, s.pd, NULL, NULL, 0, 10000, &conn));
    usleep(300000); /* the client waits on its receive */
    closed_at = test_seconds();
    CHECK_OK(sfv_cm_close(conn, 0));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_OK(c.result);
    CHECK_EQ(c.wait_result, SFV_ERR_WORK);
    CHECK_EQ(c.wc.status, SFV_WC_WR_FLUSH_ERR);
    CHECK_EQ(c.wc.error_class, SFV_WORK_ERROR_TRANSPORT);
    if (!strstr(c.wait_message, "peer disconnected")) FAIL("last error: %s", c.wait_message);
    if (c.done_at - closed_at > 3.0) FAIL("the wait ended %.2f s after the peer closed (its deadline was 20 s)", c.done_at - closed_at);
    CHECK_EQ(c.events_result, SFV_ERR_BROKEN);
    CHECK_OK(sfv_cm_destroy_listener(l));
    side_close(&s);
}
static void test_wait_ends_on_disconnect_busy(void) { wait_ends_on_disconnect(SFV_WAIT_BUSY); }
static void test_wait_ends_on_disconnect_event(void) { wait_ends_on_disconnect(SFV_WAIT_EVENT); }

/* Channels of a multi-channel connected through the CM: two clients, each accepted on its own
   peer channel; refusals for a channel that cannot; either order of teardown. */
static void test_multi_channel_over_cm(void) {
    side s;
    client c[2];
    pthread_t t[2];
    sfv_cm_listener *l;
    sfv_cm_request *req;
    sfv_cm_conn *conn[2] = {NULL, NULL}, *bad = (sfv_cm_conn *)1;
    sfv_multi_channel *mc;
    int i;
    side_open(&s, 0);
    CHECK_OK(sfv_create_multi_channel(s.pd, 2, NULL, &mc));
    l = listen_any_port(&c[0].port);
    for (i = 0; i < 2; i++) {
        uint16_t port = c[0].port;
        memset(&c[i], 0, sizeof c[i]);
        c[i].port = port;
        c[i].timeout_ms = 10000;
        CHECK(pthread_create(&t[i], NULL, client_run, &c[i]) == 0);
        CHECK_OK(sfv_cm_get_request(l, 10000, &req));
        CHECK_OK(sfv_cm_accept_channel(req, sfv_multi_channel_peer(mc, (size_t)i), NULL, 0, 10000, &conn[i]));
        CHECK(sfv_cm_channel(conn[i]) == sfv_multi_channel_peer(mc, (size_t)i));
        ping_echoed(&s, sfv_cm_channel(conn[i]), i ? "to peer 1" : "to peer 0"); /* an ordinary channel of the multi-channel */
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK_OK(c[i].result);
    }
    /* a channel already connected cannot take another: refused, and the request rejected */
    memset(&c[0], 0, sizeof c[0]);
    c[0].port = sfv_cm_listener_port(l);
    c[0].timeout_ms = 10000;
    CHECK(pthread_create(&t[0], NULL, client_run, &c[0]) == 0);
    CHECK_OK(sfv_cm_get_request(l, 10000, &req));
    CHECK_RESULT(sfv_cm_accept_channel(req, sfv_multi_channel_peer(mc, 0), NULL, 0, 10000, &bad), SFV_ERR_INVALID);
    CHECK(bad == NULL);
    CHECK(strstr(sfv_last_error()->message, "already connected") != NULL);
    CHECK(pthread_join(t[0], NULL) == 0);
    CHECK_EQ(c[0].result, SFV_ERR_REJECTED);
    bad = (sfv_cm_conn *)1;
    CHECK_RESULT(sfv_cm_connect_channel(sfv_multi_channel_peer(mc, 1), NULL, SRV_ADDR, 1, NULL, 0, 1000, &bad), SFV_ERR_INVALID);
    CHECK(bad == NULL);
    CHECK_RESULT(sfv_cm_connect_channel(NULL, NULL, SRV_ADDR, 1, NULL, 0, 1000, &bad), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_cm_accept_channel(NULL, sfv_multi_channel_peer(mc, 1), NULL, 0, 1000, &bad), SFV_ERR_INVALID);
    /* teardown in both orders: connection first, and channel (the multi-channel) first */
    CHECK_OK(sfv_cm_close(conn[0], 0));
    CHECK(sfv_channel_broken(sfv_multi_channel_peer(mc, 0), NULL));
    CHECK_OK(sfv_destroy_multi_channel(mc));
    CHECK_OK(sfv_cm_close(conn[1], 0));
    CHECK_OK(sfv_cm_destroy_listener(l));
    side_close(&s);
}

/* A channel of the caller's connected with sfv_cm_connect_channel: peer 1 of a multi-channel. */
typedef struct mc_client { uint16_t port; sfv_result result, wrong_port; char got[64]; } mc_client;
static void *mc_client_run(void *arg) {
    mc_client *m = (mc_client *)arg;
    side s;
    sfv_multi_channel *mc;
    sfv_cm_conn *conn = NULL;
    side_open(&s, 1);
    CHECK_OK(sfv_create_multi_channel(s.pd, 2, NULL, &mc));
    m->result = sfv_cm_connect_channel(sfv_multi_channel_peer(mc, 1), CLI_ADDR, SRV_ADDR, m->port, "mc", 2, 10000, &conn);
    if (m->result == SFV_OK) {
        sfv_scatter_element in = sfv_mr_scatter_element(s.mr, s.buf, 64);
        sfv_gather_element out = sfv_mr_gather_element(s.mr, s.buf, 64);
        CHECK(sfv_cm_channel(conn) == sfv_multi_channel_peer(mc, 1));
        CHECK_OK(sfv_channel_receive(sfv_cm_channel(conn), &in, 1, NULL));
        memcpy(m->got, s.buf, sizeof m->got);
        CHECK_OK(sfv_channel_send(sfv_cm_channel(conn), &out, 1, NULL));
        CHECK_OK(sfv_cm_close(conn, 0));
        CHECK(sfv_channel_broken(sfv_multi_channel_peer(mc, 1), NULL));
        CHECK(!sfv_channel_broken(sfv_multi_channel_peer(mc, 0), NULL));
    }
    CHECK_OK(sfv_destroy_multi_channel(mc));
    side_close(&s);
    return NULL;
}
static void test_connect_channel_of_multi_channel(void) {
    side s;
    mc_client m;
    pthread_t t;
    sfv_cm_listener *l;
    sfv_cm_request *req;
    sfv_cm_conn *conn;
    const uint8_t *p;
    size_t n;
    side_open(&s, 0);
    memset(&m, 0, sizeof m);
    l = listen_any_port(&m.port);
    CHECK(pthread_create(&t, NULL, mc_client_run, &m) == 0);
    CHECK_OK(sfv_cm_get_request(l, 10000, &req));
    p = sfv_cm_request_private(req, &n);
    CHECK(n >= 2 && memcmp(p, "mc", 2) == 0);
    CHECK_OK(sfv_cm_accept(req, s.pd, NULL, NULL, 0, 10000, &conn));
    ping_echoed(&s, sfv_cm_channel(conn), "to a multi-channel's peer 1");
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_OK(m.result);
    CHECK(strcmp(m.got, "to a multi-channel's peer 1") == 0);
    CHECK_OK(sfv_cm_close(conn, 0));
    CHECK_OK(sfv_cm_destroy_listener(l));
    side_close(&s);
}

/* Nodes over the CM: rank r on rxe(r % 2), at that device's address, CM port base + r. Each rank
   is a thread with its own device, PD and node. */
#define NCM_KEY "a job key only these ranks know"
typedef struct ncm_rank {
    size_t rank, world;
    const sfv_net_node *nodes;
    const char *key;
    int role;              /* 0: connect, barrier, a ring of messages; 1: then wait for rank 1 (which leaves) on a receive */
    sfv_result result, again, barrier, wait_result;
    double done_at, left_at;
    char msg[256];
    unsigned got;
} ncm_rank;
static uint16_t ncm_base(void) { return (uint16_t)(20000 + (getpid() * 7) % 20000); }
static void ncm_nodes(sfv_net_node *nodes, size_t world, uint16_t base) {
    size_t r;
    for (r = 0; r < world; r++) {
        memset(&nodes[r], 0, sizeof nodes[r]);
        nodes[r].host = r % 2 ? CLI_ADDR : SRV_ADDR;
        nodes[r].port = (uint16_t)(base + r);
        nodes[r].rank = (uint32_t)r;
    }
}
static void *ncm_run(void *arg) {
    ncm_rank *k = (ncm_rank *)arg;
    sfv_node_desc nd = SFV_ZERO_INIT;
    sfv_exchange_desc xd = SFV_ZERO_INIT;
    sfv_node *node;
    side s;
    side_open(&s, (int)(k->rank % 2));
    nd.rank = k->rank;
    nd.world_size = k->world;
    CHECK_OK(sfv_create_node(s.pd, &nd, &node));
    xd.key = k->key;
    xd.key_len = strlen(k->key);
    k->result = sfv_node_connect_cm(node, k->nodes, &xd, 30000);
    snprintf(k->msg, sizeof k->msg, "%s", k->result ? sfv_last_error()->message : "");
    if (k->result == SFV_OK) {
        sfv_multi_channel *mc = sfv_node_multi_channel(node);
        const size_t next = (k->rank + 1) % k->world, prev = (k->rank + k->world - 1) % k->world;
        sfv_scatter_element in = sfv_mr_scatter_element(s.mr, s.buf + 64, 8);
        sfv_gather_element out = sfv_mr_gather_element(s.mr, s.buf, 8);
        sfv_pending rx;
        k->again = sfv_node_connect_cm(node, k->nodes, &xd, 1000); /* connected already */
        memcpy(s.buf, &k->rank, sizeof k->rank);
        CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(mc, prev), &in, 1, &rx));
        k->barrier = sfv_node_barrier(node, NULL, 0, 10000); /* every rank's receive is posted */
        if (k->barrier == SFV_OK) {
            CHECK_OK(sfv_channel_send(sfv_multi_channel_peer(mc, next), &out, 1, NULL));
            CHECK_OK(sfv_pending_wait(&rx, 10000, NULL));
            memcpy(&k->got, s.buf + 64, sizeof k->got);
            CHECK_OK(sfv_node_barrier(node, NULL, 0, 10000)); /* everyone got theirs */
        } /* else: the receive dies with the node */
        if (k->role == 1 && k->rank == 0) { /* rank 1 leaves: the wait must end then, not in 20 s */
            CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(mc, 1), &in, 1, &rx));
            k->wait_result = sfv_pending_wait(&rx, 20000, NULL);
            k->done_at = test_seconds();
            snprintf(k->msg, sizeof k->msg, "%s", sfv_last_error()->message);
        } else if (k->role == 1) {
            usleep(300000);
            k->left_at = test_seconds();
        }
    }
    CHECK_OK(sfv_destroy_node(node));
    side_close(&s);
    return NULL;
}

static void test_node_over_cm_three_ranks(void) {
    sfv_net_node nodes[3];
    ncm_rank k[3];
    pthread_t t[3];
    size_t r;
    ncm_nodes(nodes, 3, ncm_base());
    for (r = 0; r < 3; r++) {
        memset(&k[r], 0, sizeof k[r]);
        k[r].rank = r;
        k[r].world = 3;
        k[r].nodes = nodes;
        k[r].key = NCM_KEY;
    }
    for (r = 3; r-- > 0;) CHECK(pthread_create(&t[r], NULL, ncm_run, &k[r]) == 0); /* the highest first: it retries until the others listen */
    for (r = 0; r < 3; r++) CHECK(pthread_join(t[r], NULL) == 0);
    for (r = 0; r < 3; r++) {
        if (k[r].result != SFV_OK) FAIL("rank %zu: %s: %s", r, sfv_result_str(k[r].result), k[r].msg);
        CHECK_EQ(k[r].again, SFV_ERR_INVALID);
        CHECK_OK(k[r].barrier);
        CHECK_EQ(k[r].got, (unsigned)((r + 2) % 3)); /* from the rank before it */
    }
}

/* A stranger's request, retried while the rank does not listen yet. */
static sfv_result stranger_connect(side *s, uint16_t port, const void *priv, size_t len, char *reason, size_t cap) {
    sfv_cm_conn *conn = NULL;
    sfv_result r;
    size_t n;
    const uint8_t *p;
    int i;
    for (i = 0; i < 200; i++) {
        r = sfv_cm_connect(s->pd, CLI_ADDR, SRV_ADDR, port, NULL, priv, len, 5000, &conn);
        if (r != SFV_ERR_REFUSED) break;
        usleep(20000);
    }
    if (r == SFV_OK) {
        CHECK_OK(sfv_cm_close(conn, 0));
        return r;
    }
    p = sfv_cm_reject_reason(&n);
    snprintf(reason, cap, "%.*s", (int)(n < cap ? n : cap - 1), (const char *)p);
    return r;
}

static void test_node_over_cm_strangers_and_leaving_peer(void) {
    sfv_net_node nodes[2], forged[2];
    ncm_rank k[2];
    pthread_t t[2];
    uint8_t junk[52];
    char reason[160];
    side s;
    size_t r;
    sfv_exchange_desc none = SFV_ZERO_INIT;
    sfv_node_desc nd = SFV_ZERO_INIT;
    sfv_node *node;
    ncm_nodes(nodes, 2, (uint16_t)(ncm_base() + 10));
    for (r = 0; r < 2; r++) {
        memset(&k[r], 0, sizeof k[r]);
        k[r].rank = r;
        k[r].world = 2;
        k[r].nodes = nodes;
        k[r].key = NCM_KEY;
        k[r].role = 1;
    }
    /* refused before anything: no key, no nodes; the node can still connect after */
    side_open(&s, 1);
    nd.rank = 1;
    nd.world_size = 2;
    CHECK_OK(sfv_create_node(s.pd, &nd, &node));
    unsetenv("SAFEVERBS_JOB_KEY");
    CHECK_RESULT(sfv_node_connect_cm(node, nodes, &none, 1000), SFV_ERR_PERMISSION);
    CHECK(strstr(sfv_last_error()->message, "no job key") != NULL);
    CHECK_RESULT(sfv_node_connect_cm(node, NULL, NULL, 1000), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_connect_cm(NULL, nodes, NULL, 1000), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_node(node));

    CHECK(pthread_create(&t[0], NULL, ncm_run, &k[0]) == 0);
    /* strangers at rank 0's port: nonsense, a forged proof, and a keyed rank 1 from another address */
    CHECK_EQ(stranger_connect(&s, nodes[0].port, NULL, 0, reason, sizeof reason), SFV_ERR_REJECTED);
    CHECK(strstr(reason, "not a safeverbs node") != NULL);
    memset(junk, 0, sizeof junk);
    junk[0] = 'S'; junk[1] = 'N'; junk[2] = 'C'; junk[3] = 1; junk[7] = 1; junk[11] = 2;
    CHECK_EQ(stranger_connect(&s, nodes[0].port, junk, sizeof junk, reason, sizeof reason), SFV_ERR_REJECTED);
    CHECK(strstr(reason, "did not prove the job key") != NULL);
    memcpy(forged, nodes, sizeof forged);
    forged[1].host = SRV_ADDR; /* says it is rank 1, proves the key, but comes from rank 0's address */
    {
        sfv_context *ctx; sfv_pd *pd; sfv_node *fn_node;
        sfv_exchange_desc xd = SFV_ZERO_INIT;
        sfv_node_desc fd = SFV_ZERO_INIT;
        CHECK_OK(sfv_open_device(test_device(0), &ctx));
        CHECK_OK(sfv_alloc_pd(ctx, &pd));
        fd.rank = 1;
        fd.world_size = 2;
        CHECK_OK(sfv_create_node(pd, &fd, &fn_node));
        xd.key = NCM_KEY;
        xd.key_len = strlen(NCM_KEY);
        CHECK_RESULT(sfv_node_connect_cm(fn_node, forged, &xd, 10000), SFV_ERR_REJECTED);
        CHECK(strstr(sfv_last_error()->message, "rejected") != NULL);
        CHECK_OK(sfv_destroy_node(fn_node));
        CHECK_OK(sfv_dealloc_pd(pd));
        CHECK_OK(sfv_close_device(ctx));
    }
    /* the real rank 1: connects, the ring runs, then it leaves while rank 0 waits on it */
    CHECK(pthread_create(&t[1], NULL, ncm_run, &k[1]) == 0);
    for (r = 0; r < 2; r++) CHECK(pthread_join(t[r], NULL) == 0);
    for (r = 0; r < 2; r++)
        if (k[r].result != SFV_OK) FAIL("rank %zu: %s: %s", r, sfv_result_str(k[r].result), k[r].msg);
    CHECK_OK(k[0].barrier);
    CHECK_EQ(k[0].got, 1u);
    CHECK_EQ(k[1].got, 0u);
    CHECK_EQ(k[0].wait_result, SFV_ERR_WORK);
    if (!strstr(k[0].msg, "peer disconnected")) FAIL("rank 0's wait: %s", k[0].msg);
    if (k[0].done_at - k[1].left_at > 4.0) FAIL("rank 0's wait ended %.2f s after rank 1 left (its deadline: 20 s)", k[0].done_at - k[1].left_at);
    side_close(&s);
}

/* A rank that never comes: SFV_ERR_TIMEOUT naming it, the node as it was; then it comes, and the
   same node connects (and that success leaves the earlier failure as the last error). */
static void test_node_over_cm_absent_rank_then_retry(void) {
    sfv_net_node nodes[2];
    ncm_rank k1;
    pthread_t t;
    sfv_node_desc nd = SFV_ZERO_INIT;
    sfv_exchange_desc xd = SFV_ZERO_INIT;
    sfv_node *node;
    side s;
    sfv_scatter_element in;
    sfv_gather_element out;
    sfv_pending rx;
    unsigned zero = 0, got = 7;
    ncm_nodes(nodes, 2, (uint16_t)(ncm_base() + 20));
    side_open(&s, 0);
    nd.world_size = 2;
    CHECK_OK(sfv_create_node(s.pd, &nd, &node));
    xd.key = NCM_KEY;
    xd.key_len = strlen(NCM_KEY);
    CHECK_RESULT(sfv_node_connect_cm(node, nodes, &xd, 1500), SFV_ERR_TIMEOUT);
    CHECK(strstr(sfv_last_error()->message, "rank 1") != NULL);
    memset(&k1, 0, sizeof k1);
    k1.rank = 1;
    k1.world = 2;
    k1.nodes = nodes;
    k1.key = NCM_KEY;
    CHECK(pthread_create(&t, NULL, ncm_run, &k1) == 0);
    CHECK_OK(sfv_node_connect_cm(node, nodes, &xd, 30000));
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_TIMEOUT); /* a success leaves no error of its own */
    memcpy(s.buf, &zero, sizeof zero);
    in = sfv_mr_scatter_element(s.mr, s.buf + 64, 8);
    out = sfv_mr_gather_element(s.mr, s.buf, 8);
    CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(sfv_node_multi_channel(node), 1), &in, 1, &rx));
    CHECK_OK(sfv_node_barrier(node, NULL, 0, 10000));
    CHECK_OK(sfv_channel_send(sfv_multi_channel_peer(sfv_node_multi_channel(node), 1), &out, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, 10000, NULL));
    memcpy(&got, s.buf + 64, sizeof got);
    CHECK_EQ(got, 1u);
    CHECK_OK(sfv_node_barrier(node, NULL, 0, 10000));
    CHECK(pthread_join(t, NULL) == 0);
    if (k1.result != SFV_OK) FAIL("rank 1: %s", k1.msg);
    CHECK_EQ(k1.got, 0u);
    CHECK_OK(sfv_destroy_node(node));
    side_close(&s);
}

/* A caller's channel reset after a connection, then connected again: the first connection lets
   go of it (no use after free in any teardown order, under ASan); while a connection holds it,
   a second connect is refused. */
typedef struct reset_client { uint16_t port; sfv_result first, held, second; } reset_client;
static void *reset_client_run(void *arg) {
    reset_client *m = (reset_client *)arg;
    side s;
    sfv_multi_channel *mc;
    sfv_cm_conn *c1 = NULL, *c2 = NULL, *c3 = (sfv_cm_conn *)1;
    sfv_channel *ch;
    side_open(&s, 1);
    CHECK_OK(sfv_create_multi_channel(s.pd, 1, NULL, &mc));
    ch = sfv_multi_channel_peer(mc, 0);
    m->first = sfv_cm_connect_channel(ch, CLI_ADDR, SRV_ADDR, m->port, NULL, 0, 10000, &c1);
    CHECK_OK(sfv_channel_reset(ch));
    m->second = sfv_cm_connect_channel(ch, CLI_ADDR, SRV_ADDR, m->port, NULL, 0, 10000, &c2);
    m->held = sfv_cm_connect_channel(ch, CLI_ADDR, SRV_ADDR, m->port, NULL, 0, 1000, &c3);
    CHECK(c3 == NULL);
    CHECK(c1 != NULL && c2 != NULL);
    CHECK_OK(sfv_cm_close(c2, 0));          /* c2 first, */
    CHECK_OK(sfv_destroy_multi_channel(mc)); /* then the channel, */
    CHECK_OK(sfv_cm_close(c1, 0));          /* then c1, which let go of it at the reset */
    side_close(&s);
    return NULL;
}
static void test_reset_channel_connected_again(void) {
    side s;
    reset_client m;
    pthread_t t;
    sfv_cm_listener *l;
    sfv_cm_request *req;
    sfv_cm_conn *conn[2];
    int i;
    side_open(&s, 0);
    memset(&m, 0, sizeof m);
    l = listen_any_port(&m.port);
    CHECK(pthread_create(&t, NULL, reset_client_run, &m) == 0);
    for (i = 0; i < 2; i++) {
        CHECK_OK(sfv_cm_get_request(l, 10000, &req));
        CHECK_OK(sfv_cm_accept(req, s.pd, NULL, NULL, 0, 10000, &conn[i]));
    }
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_OK(m.first);
    CHECK_OK(m.second);
    CHECK_EQ(m.held, SFV_ERR_INVALID);
    for (i = 0; i < 2; i++) CHECK_OK(sfv_cm_close(conn[i], 0));
    CHECK_OK(sfv_cm_destroy_listener(l));
    side_close(&s);
}

static void test_listener_destroyed_with_requests_pending(void) {
    client c;
    pthread_t t;
    sfv_cm_listener *l;
    struct pollfd p;
    memset(&c, 0, sizeof c);
    c.timeout_ms = 8000;
    l = listen_any_port(&c.port);
    CHECK(pthread_create(&t, NULL, client_run, &c) == 0);
    p.fd = sfv_cm_listener_fd(l);
    p.events = POLLIN;
    CHECK(poll(&p, 1, 10000) == 1); /* a request waits */
    CHECK_OK(sfv_cm_destroy_listener(l));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(c.result == SFV_ERR_REJECTED || c.result == SFV_ERR_REFUSED);
    CHECK(c.seconds < 7.0);
}

static void test_200_cycles_no_fd_growth(void) {
    side s;
    client c;
    pthread_t t;
    sfv_cm_listener *l;
    int i, fds0 = 0;
    side_open(&s, 0);
    memset(&c, 0, sizeof c);
    l = listen_any_port(&c.port);
    /* one warm-up cycle: librdmacm opens its devices once, on first use */
    for (i = 0; i < 2; i++) {
        int k, cycles = i == 0 ? 1 : 200;
        if (i == 1) fds0 = open_fds();
        memset(&c.result, 0, sizeof c - offsetof(client, result));
        c.mode = 2;
        c.cycles = cycles;
        c.priv = NULL;
        c.addr = NULL;
        c.timeout_ms = 10000;
        CHECK(pthread_create(&t, NULL, client_run, &c) == 0);
        for (k = 0; k < cycles; k++) {
            sfv_cm_request *req;
            sfv_cm_conn *conn;
            struct pollfd p;
            CHECK_OK(sfv_cm_get_request(l, 10000, &req));
            sfv_result r;
            CHECK_OK(sfv_cm_accept(req, s.pd, NULL, NULL, 0, 10000, &conn));
            r = sfv_cm_events(conn); /* BROKEN already if the peer left before accept returned */
            if (r == SFV_OK) {
                p.fd = sfv_cm_fd(conn);
                p.events = POLLIN;
                CHECK(poll(&p, 1, 10000) == 1);
                r = sfv_cm_events(conn);
            }
            CHECK_EQ(r, SFV_ERR_BROKEN);
            CHECK_OK(sfv_cm_close(conn, 0));
        }
        CHECK(pthread_join(t, NULL) == 0);
        CHECK_OK(c.result);
    }
    CHECK_EQ(open_fds(), fds0);
    CHECK_OK(sfv_cm_destroy_listener(l));
    side_close(&s);
}

static void test_cm_and_handshaken_channel_on_one_pd(void) {
    side s;
    client c;
    pthread_t t;
    sfv_cm_listener *l;
    sfv_cm_request *req;
    sfv_cm_conn *conn;
    sfv_channel *hs;
    sfv_endpoint me;
    sfv_channel_desc d;
    sfv_scatter_element in;
    sfv_gather_element out;
    side_open(&s, 0);
    memset(&d, 0, sizeof d);
    CHECK_OK(sfv_create_channel(s.pd, &d, &hs));
    CHECK_OK(sfv_channel_endpoint(hs, &me));
    CHECK_OK(sfv_channel_handshake(hs, &me)); /* loopback */
    memset(&c, 0, sizeof c);
    l = listen_any_port(&c.port);
    CHECK(pthread_create(&t, NULL, client_run, &c) == 0);
    CHECK_OK(sfv_cm_get_request(l, 10000, &req));
    CHECK_OK(sfv_cm_accept(req, s.pd, NULL, NULL, 0, 10000, &conn));
    CHECK(sfv_channel_pd(sfv_cm_channel(conn)) == sfv_channel_pd(hs));
    memcpy(s.buf, "both", 5);
    in = sfv_mr_scatter_element(s.mr, s.buf + 1024, 64);
    out = sfv_mr_gather_element(s.mr, s.buf, 64);
    {
        sfv_pending rx, rx2;
        CHECK_OK(sfv_channel_post_receive(sfv_cm_channel(conn), &in, 1, &rx));
        CHECK_OK(sfv_channel_send(sfv_cm_channel(conn), &out, 1, NULL));
        CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
        CHECK(strcmp(s.buf + 1024, "both") == 0);
        memset(s.buf + 1024, 0, 64);
        in = sfv_mr_scatter_element(s.mr, s.buf + 2048, 64);
        CHECK_OK(sfv_channel_post_receive(hs, &in, 1, &rx2));
        CHECK_OK(sfv_channel_send(hs, &out, 1, NULL));
        CHECK_OK(sfv_pending_wait(&rx2, -1, NULL));
        CHECK(strcmp(s.buf + 2048, "both") == 0);
    }
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_OK(c.result);
    CHECK_OK(sfv_cm_close(conn, 0));
    CHECK_OK(sfv_destroy_channel(hs));
    CHECK_OK(sfv_cm_destroy_listener(l));
    side_close(&s);
}

/* IPv6 link-local, with scopes: fe80::1 on sva (rxe0), fe80::2 on svb (rxe1) (tests/vm/run.sh). */
static void test_ipv6_link_local(void) {
    side s;
    client c;
    pthread_t t;
    sfv_cm_listener *l;
    sfv_cm_request *req;
    sfv_cm_conn *conn;
    sfv_context *owner;
    if (getenv("SAFEVERBS_IN_VM")) {
        /* Another test takes sva down and up, which drops IPv6 addresses and the routes through
           sva: put back what tests/vm/run.sh set up (idempotent), then wait for rxe's GIDs. */
        int i;
        CHECK(system("ip -6 -batch - >/dev/null 2>&1 <<'EOF'\n"
                     "addr replace fe80::1/64 dev sva nodad\n"
                     "addr replace fe80::2/64 dev svb nodad\n"
                     "route replace fe80::2 dev sva src fe80::1 table 101\n"
                     "route replace fe80::1 dev svb src fe80::2 table 102\n"
                     "neigh replace fe80::2 lladdr 02:00:c0:00:02:02 dev sva nud permanent\n"
                     "neigh replace fe80::1 lladdr 02:00:c0:00:02:01 dev svb nud permanent\n"
                     "EOF") == 0);
        for (i = 0; i < 50 && sfv_cm_open_device("fe80::2%svb", &owner) != SFV_OK; i++) usleep(100000);
        if (owner) CHECK_OK(sfv_close_device(owner));
    }
    CHECK_OK(sfv_cm_open_device("fe80::1%sva", &owner));
    CHECK(strcmp(sfv_context_name(owner), test_device(0)) == 0);
    CHECK_OK(sfv_close_device(owner));
    side_open(&s, 0);
    memset(&c, 0, sizeof c);
    CHECK_OK(sfv_cm_listen("fe80::1%sva", 0, 0, &l));
    c.port = sfv_cm_listener_port(l);
    c.addr = "fe80::1%svb";
    c.src = "fe80::2%svb";
    c.priv = "v6";
    CHECK(pthread_create(&t, NULL, client_run, &c) == 0);
    if (sfv_cm_get_request(l, 10000, &req) != SFV_OK) {
        pthread_join(t, NULL);
        FAIL("no request; the client got %s: %s", sfv_result_str(c.result), c.err.message);
    }
    CHECK_OK(sfv_cm_accept(req, s.pd, NULL, NULL, 0, 10000, &conn));
    ping_echoed(&s, sfv_cm_channel(conn), "over IPv6");
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_OK(c.result);
    CHECK_OK(sfv_cm_close(conn, 0));
    CHECK_OK(sfv_cm_destroy_listener(l));
    side_close(&s);
}

static const harness_test tests[] = {
    TEST(test_ipv6_link_local, 60),
    TEST(test_connect_accept_data, 60),
    TEST(test_no_device_has_address, 30),
    TEST(test_address_in_use, 30),
    TEST(test_refused, 60),
    TEST(test_rejected_with_reason, 60),
    TEST(test_timed_out, 60),
    TEST(test_unreachable, 60),
    TEST(test_private_data_limits_and_wrong_pd, 60),
    TEST(test_accept_and_reject_private_limits, 60),
    TEST(test_peer_disconnects_mid_stream, 60),
    TEST(test_wait_ends_on_disconnect_busy, 60),
    TEST(test_wait_ends_on_disconnect_event, 60),
    TEST(test_multi_channel_over_cm, 90),
    TEST(test_connect_channel_of_multi_channel, 60),
    TEST(test_node_over_cm_three_ranks, 90),
    TEST(test_node_over_cm_strangers_and_leaving_peer, 90),
    TEST(test_node_over_cm_absent_rank_then_retry, 90),
    TEST(test_reset_channel_connected_again, 60),
    TEST(test_listener_destroyed_with_requests_pending, 60),
    TEST(test_200_cycles_no_fd_growth, 600),
    TEST(test_cm_and_handshaken_channel_on_one_pd, 60),
};

int main(int argc, char **argv) { return harness_main(argc, argv, tests, COUNT_OF(tests)); }
