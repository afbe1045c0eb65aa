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
    int mode;             /* 0: echo one message back; 1: post a receive and wait for the peer to go; 2: connect and close */
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
        c->result = sfv_cm_connect(s.pd, c->src ? c->src : CLI_ADDR, c->addr ? c->addr : SRV_ADDR, c->port, NULL, c->priv, c->priv ? strlen(c->priv) : 0,
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
        }
        CHECK_OK(sfv_cm_close(conn, c->mode == 2 ? 5000 : 0));
    }
    side_close(&s);
    return NULL;
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
    sfv_scatter_element in;
    sfv_gather_element out;
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
    memcpy(s.buf, "ping over rdma-cm", 18);
    in = sfv_mr_scatter_element(s.mr, s.buf + 1024, 64);
    out = sfv_mr_gather_element(s.mr, s.buf, 64);
    {
        sfv_pending rx;
        CHECK_OK(sfv_channel_post_receive(sfv_cm_channel(conn), &in, 1, &rx));
        CHECK_OK(sfv_channel_send(sfv_cm_channel(conn), &out, 1, NULL));
        CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    }
    CHECK(strcmp(s.buf + 1024, "ping over rdma-cm") == 0);
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
    sfv_scatter_element in;
    sfv_gather_element out;
    sfv_pending rx;
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
    memcpy(s.buf, "over IPv6", 10);
    in = sfv_mr_scatter_element(s.mr, s.buf + 1024, 64);
    out = sfv_mr_gather_element(s.mr, s.buf, 64);
    CHECK_OK(sfv_channel_post_receive(sfv_cm_channel(conn), &in, 1, &rx));
    CHECK_OK(sfv_channel_send(sfv_cm_channel(conn), &out, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    CHECK(strcmp(s.buf + 1024, "over IPv6") == 0);
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
    TEST(test_listener_destroyed_with_requests_pending, 60),
    TEST(test_200_cycles_no_fd_growth, 600),
    TEST(test_cm_and_handshaken_channel_on_one_pd, 60),
};

int main(int argc, char **argv) { return harness_main(argc, argv, tests, COUNT_OF(tests)); }
