/* test_cm_fake.c - the device-free tier: the RDMA-CM part (SAFEVERBS_RDMACM) on the fake librdmacm
   of fake_rdmacm.c and the fake NIC of fake_verbs.c. What a peer or the CM can hand the library:
   every event in every place, private data of every length (and NULL with a length), events
   after the deadline, rdma_* calls failing with assorted errno. Each test checks the exact
   result and that nothing is left: the fakes' ids, channels, unacked events and objects, and
   the library's own allocations (counted here; LeakSanitizer checks them again in the ASan
   build). */
#define _GNU_SOURCE
#include "fake_verbs.h"
#include "fake_rdmacm.h"
#include <stdlib.h>
/* The library's allocations, counted: a test ends with none live. */
static long tc_allocs;
static void *tc_malloc(size_t n) {
    void *p = fk_malloc(n);
    if (p) tc_allocs++;
    return p;
}
static void *tc_calloc(size_t n, size_t s) {
    void *p = fk_calloc(n, s);
    if (p) tc_allocs++;
    return p;
}
static void tc_free(void *p) {
    if (p) tc_allocs--;
    fk_free(p);
}
#define SFV_MALLOC(sz) tc_malloc(sz)
#define SFV_CALLOC(n, sz) tc_calloc(n, sz)
#define SFV_FREE(p) tc_free(p)
/* The library's clock (its clock_gettime, renamed while it is included), with a jump the test
   can plan: once the fake CM has handed out tc_jump_after events, the library's tc_jump_at-th
   clock read from then on, and every read after it, are tc_jump_ns later (a thread preempted
   between two reads of the clock). tc_jump_after < 0: the plain clock. */
#include <time.h>
static long tc_jump_after = -1, tc_jump_reads;
static int tc_jump_at;
static long long tc_jump_ns;
static int tc_clock_gettime(clockid_t id, struct timespec *ts) {
    const int rc = clock_gettime(id, ts);
    if (rc == 0 && tc_jump_after >= 0 && fkcm_calls(FKCM_GET_CM_EVENT) >= tc_jump_after && ++tc_jump_reads >= tc_jump_at) {
        const long long ns = (long long)ts->tv_nsec + tc_jump_ns;
        ts->tv_sec += (time_t)(ns / 1000000000);
        ts->tv_nsec = (long)(ns % 1000000000);
        tc_jump_reads = tc_jump_at; /* (no overflow) */
    }
    return rc;
}
#define clock_gettime tc_clock_gettime
#define SAFEVERBS_RDMACM
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#undef clock_gettime
#include "harness.h"

#include <limits.h>
#include <poll.h>

#define PORT 7471

/* ---- helpers ------------------------------------------------------------------------------- */
typedef struct tc_env {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    unsigned char buf[4096];
} tc_env;

static void tc_open(tc_env *e) {
    memset(e, 0, sizeof *e);
    fk_reset();
    fkcm_reset();
    CHECK_OK(sfv_open_device("fake0", &e->ctx));
    CHECK_OK(sfv_alloc_pd(e->ctx, &e->pd));
    CHECK_OK(sfv_reg_mr_local(e->pd, e->buf, sizeof e->buf, &e->mr));
}

/* Nothing of the fakes nor of the library is left. */
static void tc_check_clean(void) {
    CHECK_EQ(fkcm_unacked(), 0);
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fk_async_unacked(), 0);
    CHECK_EQ(fk_live_total(), 0);
    CHECK_EQ(tc_allocs, 0);
}
static void tc_close(tc_env *e) {
    CHECK_OK(sfv_dereg_mr(e->mr));
    CHECK_OK(sfv_dealloc_pd(e->pd));
    CHECK_OK(sfv_close_device(e->ctx));
    tc_check_clean();
}

static fkcm_event tc_ev(int type) {
    fkcm_event e;
    memset(&e, 0, sizeof e);
    e.type = type;
    return e;
}
/* A CONNECT_RESPONSE from a peer with QP qpn and these bytes (header included, if any). */
static fkcm_event tc_response(uint32_t qpn, const void *priv, size_t len) {
    fkcm_event e = tc_ev(RDMA_CM_EVENT_CONNECT_RESPONSE);
    e.qpn = qpn;
    e.priv = priv;
    e.priv_len = len;
    e.initiator_depth = e.responder_resources = 4;
    return e;
}
static void tc_on1(enum fkcm_fn fn, fkcm_event e) { fkcm_on(fn, &e, 1); }

static sfv_result tc_connect(tc_env *e, const void *priv, size_t len, int timeout_ms, sfv_cm_conn **c) {
    return sfv_cm_connect(e->pd, NULL, FKCM_ADDR0, PORT, NULL, priv, len, timeout_ms, c);
}

/* A listener with one request pushed and taken: its bytes (header included, if any). */
static void tc_request(sfv_cm_listener **l, const void *priv, size_t len, sfv_cm_request **req) {
    fkcm_event ev = tc_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
    ev.qpn = 0x99;
    ev.priv = priv;
    ev.priv_len = len;
    ev.initiator_depth = ev.responder_resources = 4;
    if (!*l) CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, l));
    fkcm_push(sfv_cm_listener_fd(*l), &ev);
    CHECK_OK(sfv_cm_get_request(*l, 1000, req));
}

static bool tc_readable(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* The call ran no longer than its deadline allows (plus a scheduling margin). */
#define CHECK_WITHIN(t0, ms) CHECK(test_seconds() - (t0) < (ms) / 1000.0 + 0.25)

/* ---- connecting ---------------------------------------------------------------------------- */
static void t_connect_ok(void) {
    tc_env e;
    sfv_cm_conn *c;
    const uint8_t *sent, *peer;
    size_t n;
    static const char hello[] = "hello";
    tc_open(&e);
    CHECK_OK(tc_connect(&e, hello, 5, 1000, &c));
    CHECK(sfv_cm_channel(c) != NULL);
    sent = fkcm_sent(FKCM_CONNECT, &n);
    CHECK_EQ(n, 4 + 5);
    CHECK(sent[0] == 'S' && sent[1] == 'C' && sent[2] == 1 && memcmp(sent + 4, hello, 5) == 0);
    peer = sfv_cm_peer_private(c, &n);
    CHECK(peer != NULL);
    CHECK_EQ(n, 0); /* the default answer is a header alone */
    CHECK(!tc_readable(sfv_cm_fd(c)) || sfv_cm_events(c) == SFV_OK); /* ESTABLISHED: still connected */
    CHECK_OK(sfv_cm_events(c));
    CHECK_OK(sfv_cm_close(c, 200));
    CHECK_EQ(fkcm_calls(FKCM_DISCONNECT), 1);
    CHECK_OK(sfv_cm_close(NULL, 0));
    tc_close(&e);
}

/* Private data of every length this side may send, and a byte more. */
static void t_connect_private_lengths(void) {
    tc_env e;
    sfv_cm_conn *c;
    uint8_t b[SFV_CM_CONNECT_PRIVATE_MAX + 1];
    size_t len, n;
    tc_open(&e);
    for (len = 0; len < sizeof b; len++) b[len] = (uint8_t)(len * 7 + 1);
    for (len = 0; len <= SFV_CM_CONNECT_PRIVATE_MAX; len++) {
        CHECK_OK(tc_connect(&e, b, len, 1000, &c));
        CHECK(memcmp(fkcm_sent(FKCM_CONNECT, &n) + 4, b, len) == 0);
        CHECK_EQ(n, len + 4);
        CHECK_OK(sfv_cm_close(c, 0));
    }
    CHECK_RESULT(tc_connect(&e, b, SFV_CM_CONNECT_PRIVATE_MAX + 1, 1000, &c), SFV_ERR_INVALID);
    CHECK(c == NULL);
    CHECK_RESULT(tc_connect(&e, NULL, 1, 1000, &c), SFV_ERR_INVALID);
    CHECK_RESULT(tc_connect(&e, NULL, SIZE_MAX, 1000, &c), SFV_ERR_INVALID);
    CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
    CHECK_OK(sfv_cm_close(c, 0));
    CHECK_EQ(fkcm_calls(FKCM_CONNECT), SFV_CM_CONNECT_PRIVATE_MAX + 2);
    tc_close(&e);
}

/* The answer's private data: 0..255 bytes, with and without our header, NULL with a length. */
static void t_connect_peer_private(void) {
    tc_env e;
    sfv_cm_conn *c;
    uint8_t b[255];
    const uint8_t *p;
    size_t len, n;
    tc_open(&e);
    for (len = 0; len < sizeof b; len++) b[len] = (uint8_t)(0xA0 ^ len);
    for (len = 0; len <= 255; len++) {
        tc_on1(FKCM_CONNECT, tc_response(0x77, len ? b : NULL, len)); /* no header: all the caller's */
        CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
        p = sfv_cm_peer_private(c, &n);
        CHECK_EQ(n, len);
        CHECK(memcmp(p, b, n) == 0);
        CHECK_OK(sfv_cm_close(c, 0));
    }
    /* "SC", version 1, a read depth of 255: the header comes off, the depth is capped by ours */
    b[0] = 'S'; b[1] = 'C'; b[2] = 1; b[3] = 255;
    for (len = 0; len <= 255; len += 17) {
        tc_on1(FKCM_CONNECT, tc_response(0x77, b, len));
        CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
        p = sfv_cm_peer_private(c, &n);
        CHECK_EQ(n, len >= 4 ? len - 4 : len);
        CHECK(memcmp(p, len >= 4 ? b + 4 : b, n) == 0);
        CHECK_OK(sfv_cm_close(c, 0));
    }
    /* a NULL pointer with a length: nothing */
    for (len = 1; len <= 255; len += 127) {
        tc_on1(FKCM_CONNECT, tc_response(0x77, NULL, len));
        CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
        (void)sfv_cm_peer_private(c, &n);
        CHECK_EQ(n, 0);
        CHECK_OK(sfv_cm_close(c, 0));
    }
    tc_close(&e);
}

/* REJECTED: the listener's reason bytes of any length (or NULL), and IB reason 8 (no listener). */
static void t_connect_rejected(void) {
    tc_env e;
    sfv_cm_conn *c;
    uint8_t b[255];
    const uint8_t *p;
    size_t len, n;
    fkcm_event ev;
    tc_open(&e);
    for (len = 0; len < sizeof b; len++) b[len] = (uint8_t)(len + 3);
    for (len = 0; len <= 255; len++) {
        ev = tc_ev(RDMA_CM_EVENT_REJECTED);
        ev.status = 28;
        ev.priv = b;
        ev.priv_len = len;
        tc_on1(FKCM_CONNECT, ev);
        CHECK_RESULT(tc_connect(&e, NULL, 0, 1000, &c), SFV_ERR_REJECTED);
        CHECK(c == NULL);
        CHECK_EQ(sfv_last_error()->errnum, ECONNREFUSED);
        p = sfv_cm_reject_reason(&n);
        CHECK_EQ(n, len);
        CHECK(memcmp(p, b, n) == 0);
    }
    ev = tc_ev(RDMA_CM_EVENT_REJECTED);
    ev.status = 28;
    ev.priv_len = 40; /* NULL with a length */
    tc_on1(FKCM_CONNECT, ev);
    CHECK_RESULT(tc_connect(&e, NULL, 0, 1000, &c), SFV_ERR_REJECTED);
    (void)sfv_cm_reject_reason(&n);
    CHECK_EQ(n, 0);
    ev = tc_ev(RDMA_CM_EVENT_REJECTED);
    ev.status = 8;
    tc_on1(FKCM_CONNECT, ev);
    CHECK_RESULT(tc_connect(&e, NULL, 0, 1000, &c), SFV_ERR_REFUSED);
    /* other statuses, odd ones too: still a reject */
    {
        static const int st[] = {0, 1, -1, 27, 29, 65535, INT_MAX, INT_MIN};
        size_t i;
        for (i = 0; i < COUNT_OF(st); i++) {
            ev = tc_ev(RDMA_CM_EVENT_REJECTED);
            ev.status = st[i];
            tc_on1(FKCM_CONNECT, ev);
            CHECK_RESULT(tc_connect(&e, NULL, 0, 1000, &c), SFV_ERR_REJECTED);
        }
    }
    /* a reject as the answer to address or route resolution */
    ev = tc_ev(RDMA_CM_EVENT_REJECTED);
    ev.status = 28;
    tc_on1(FKCM_RESOLVE_ROUTE, ev);
    CHECK_RESULT(tc_connect(&e, NULL, 0, 1000, &c), SFV_ERR_REJECTED);
    tc_close(&e);
}

/* Every other event where address resolution, route resolution or the answer is due. */
static void t_connect_odd_events(void) {
    static const struct { int type, status; sfv_result want; } cases[] = {
        {RDMA_CM_EVENT_ADDR_ERROR, -ETIMEDOUT, SFV_ERR_TIMEOUT},
        {RDMA_CM_EVENT_ADDR_ERROR, -ENODEV, SFV_ERR_NOT_FOUND},
        {RDMA_CM_EVENT_ADDR_ERROR, -EADDRNOTAVAIL, SFV_ERR_NOT_FOUND},
        {RDMA_CM_EVENT_ADDR_ERROR, -ENETUNREACH, SFV_ERR_UNREACHABLE},
        {RDMA_CM_EVENT_ADDR_ERROR, -EINVAL, SFV_ERR_UNREACHABLE},
        {RDMA_CM_EVENT_ADDR_ERROR, -EADDRINUSE, SFV_ERR_UNREACHABLE},
        {RDMA_CM_EVENT_ADDR_ERROR, 0, SFV_ERR_UNREACHABLE},
        {RDMA_CM_EVENT_ADDR_ERROR, 5, SFV_ERR_UNREACHABLE},
        {RDMA_CM_EVENT_ROUTE_ERROR, -ETIMEDOUT, SFV_ERR_TIMEOUT},
        {RDMA_CM_EVENT_ROUTE_ERROR, -EHOSTUNREACH, SFV_ERR_UNREACHABLE},
        {RDMA_CM_EVENT_ROUTE_ERROR, -EIO, SFV_ERR_UNREACHABLE},
        {RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, SFV_ERR_UNREACHABLE},
        {RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET, SFV_ERR_UNREACHABLE},
        {RDMA_CM_EVENT_DISCONNECTED, 0, SFV_ERR_BROKEN},
        {RDMA_CM_EVENT_DEVICE_REMOVAL, 0, SFV_ERR_BROKEN},
        {RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, SFV_ERR_DRIVER},
        {RDMA_CM_EVENT_ESTABLISHED, 0, SFV_ERR_DRIVER},
        {RDMA_CM_EVENT_CONNECT_REQUEST, 0, SFV_ERR_DRIVER},
        {RDMA_CM_EVENT_ADDR_CHANGE, 0, SFV_ERR_DRIVER},
        {RDMA_CM_EVENT_MULTICAST_JOIN, 0, SFV_ERR_DRIVER},
        {RDMA_CM_EVENT_TIMEWAIT_EXIT + 1, 0, SFV_ERR_DRIVER}, /* a type this librdmacm does not know */
        {-5, 0, SFV_ERR_DRIVER},
    };
    static const enum fkcm_fn steps[] = {FKCM_RESOLVE_ADDR, FKCM_RESOLVE_ROUTE, FKCM_CONNECT};
    tc_env e;
    sfv_cm_conn *c;
    size_t i, s;
    tc_open(&e);
    for (s = 0; s < COUNT_OF(steps); s++)
        for (i = 0; i < COUNT_OF(cases); i++) {
            fkcm_event ev = tc_ev(cases[i].type);
            double t0 = test_seconds();
            ev.status = cases[i].status;
            tc_on1(steps[s], ev);
            c = (sfv_cm_conn *)&c;
            CHECK_RESULT(tc_connect(&e, NULL, 0, 1000, &c), cases[i].want);
            CHECK(c == NULL);
            CHECK(strlen(sfv_last_error()->message) > 0);
            CHECK_WITHIN(t0, 0);
        }
    tc_close(&e);
}

/* An ADDR_ERROR whose status is INT_MIN: the library negates it (-INT_MIN overflows). */
static void t_connect_addr_error_int_min(void) {
    tc_env e;
    sfv_cm_conn *c;
    fkcm_event ev = tc_ev(RDMA_CM_EVENT_ADDR_ERROR);
    tc_open(&e);
    ev.status = INT_MIN;
    tc_on1(FKCM_RESOLVE_ADDR, ev);
    /* (-INT_MIN is no errno: no overflow, the step's failure) */
    CHECK_RESULT(tc_connect(&e, NULL, 0, 1000, &c), SFV_ERR_UNREACHABLE);
    tc_close(&e);
}

/* An event for another id, extra events before the one due, events after the answer. */
static void t_connect_strange_ids(void) {
    tc_env e;
    sfv_cm_conn *c;
    fkcm_event ev[3];
    tc_open(&e);
    /* the answer names another id (the CM never does that on a connection's own channel): taken
       as the answer, and the CM's attributes for an id that got none are refused, cleanly */
    ev[0] = tc_response(0x77, NULL, 0);
    ev[0].other_id = 1;
    fkcm_on(FKCM_CONNECT, ev, 1);
    CHECK_RESULT(tc_connect(&e, NULL, 0, 1000, &c), SFV_ERR_INVALID);
    CHECK_EQ(fkcm_calls(FKCM_REJECT), 1);
    /* two answers, then a disconnect: the first counts, the rest waits for sfv_cm_events */
    ev[0] = tc_response(0x77, NULL, 0);
    ev[1] = tc_response(0x78, NULL, 0);
    ev[2] = tc_ev(RDMA_CM_EVENT_DISCONNECTED);
    fkcm_on(FKCM_CONNECT, ev, 3);
    CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
    CHECK(tc_readable(sfv_cm_fd(c)));
    CHECK_RESULT(sfv_cm_events(c), SFV_ERR_BROKEN);
    CHECK(!tc_readable(sfv_cm_fd(c))); /* every event read and acked */
    CHECK_RESULT(sfv_cm_events(c), SFV_ERR_BROKEN); /* stays broken */
    CHECK_OK(sfv_cm_close(c, 100));
    CHECK_EQ(fkcm_calls(FKCM_DISCONNECT), 1); /* answered the peer's, sent none of its own on close */
    tc_close(&e);
}

/* A peer that never answers, and an answer that comes after the deadline. */
static void t_connect_deadlines(void) {
    static const enum fkcm_fn steps[] = {FKCM_RESOLVE_ADDR, FKCM_RESOLVE_ROUTE, FKCM_CONNECT};
    tc_env e;
    sfv_cm_conn *c;
    size_t s;
    tc_open(&e);
    for (s = 0; s < COUNT_OF(steps); s++) {
        double t0 = test_seconds();
        fkcm_event late;
        fkcm_on(steps[s], NULL, 0);
        CHECK_RESULT(tc_connect(&e, NULL, 0, 150, &c), SFV_ERR_TIMEOUT);
        CHECK(test_seconds() - t0 >= 0.14);
        CHECK_WITHIN(t0, 150);
        late = steps[s] == FKCM_CONNECT ? tc_response(0x77, NULL, 0)
               : tc_ev(steps[s] == FKCM_RESOLVE_ADDR ? RDMA_CM_EVENT_ADDR_RESOLVED : RDMA_CM_EVENT_ROUTE_RESOLVED);
        late.delay_ms = 400;
        tc_on1(steps[s], late);
        t0 = test_seconds();
        CHECK_RESULT(tc_connect(&e, NULL, 0, 150, &c), SFV_ERR_TIMEOUT);
        CHECK_WITHIN(t0, 150);
        CHECK_EQ(fkcm_queued(), 0); /* the late event went with its id */
    }
    /* timeout_ms 0 and < 0: the desc's, else 10 s; an answer 100 ms late is in time then */
    {
        fkcm_event late = tc_response(0x77, NULL, 0);
        late.delay_ms = 100;
        tc_on1(FKCM_CONNECT, late);
        CHECK_OK(tc_connect(&e, NULL, 0, 0, &c));
        CHECK_OK(sfv_cm_close(c, 0));
        tc_on1(FKCM_CONNECT, late);
        CHECK_OK(tc_connect(&e, NULL, 0, -1, &c));
        CHECK_OK(sfv_cm_close(c, 0));
    }
    tc_close(&e);
}

/* Each rdma_* call of a connect failing, with the errno people act on and some they do not. */
static void t_connect_call_failures(void) {
    static const struct { enum fkcm_fn fn; int err; sfv_result want; } cases[] = {
        {FKCM_CREATE_EVENT_CHANNEL, ENOMEM, SFV_ERR_RESOURCE},
        {FKCM_CREATE_EVENT_CHANNEL, EMFILE, SFV_ERR_RESOURCE},
        {FKCM_CREATE_EVENT_CHANNEL, 0, SFV_ERR_RESOURCE},
        {FKCM_CREATE_ID, ENOMEM, SFV_ERR_RESOURCE},
        {FKCM_CREATE_ID, ENODEV, SFV_ERR_NOT_FOUND},
        {FKCM_RESOLVE_ADDR, EADDRNOTAVAIL, SFV_ERR_NOT_FOUND},
        {FKCM_RESOLVE_ADDR, ENETUNREACH, SFV_ERR_UNREACHABLE},
        {FKCM_RESOLVE_ADDR, ETIMEDOUT, SFV_ERR_TIMEOUT},
        {FKCM_RESOLVE_ADDR, EADDRINUSE, SFV_ERR_ADDR_IN_USE},
        {FKCM_RESOLVE_ADDR, EINVAL, SFV_ERR_INVALID},
        {FKCM_RESOLVE_ROUTE, EHOSTUNREACH, SFV_ERR_UNREACHABLE},
        {FKCM_RESOLVE_ROUTE, EIO, SFV_ERR_DRIVER},
        {FKCM_CONNECT, ECONNREFUSED, SFV_ERR_DRIVER},
        {FKCM_CONNECT, ENOMEM, SFV_ERR_RESOURCE},
        {FKCM_INIT_QP_ATTR, EINVAL, SFV_ERR_INVALID},
        {FKCM_INIT_QP_ATTR, 0, SFV_ERR_DRIVER}, /* failed without an errno: EIO */
        {FKCM_ESTABLISH, EIO, SFV_ERR_DRIVER},
        {FKCM_GET_CM_EVENT, EIO, SFV_ERR_DRIVER},
        {FKCM_GET_CM_EVENT, EBADF, SFV_ERR_DRIVER},
        {FKCM_GET_CM_EVENT, 0, SFV_ERR_DRIVER},
    };
    tc_env e;
    sfv_cm_conn *c;
    size_t i;
    tc_open(&e);
    for (i = 0; i < COUNT_OF(cases); i++) {
        fkcm_fail(cases[i].fn, 1, cases[i].err, 0);
        c = (sfv_cm_conn *)&c;
        CHECK_RESULT(tc_connect(&e, NULL, 0, 1000, &c), cases[i].want);
        CHECK(c == NULL);
        if (cases[i].err && cases[i].fn != FKCM_CREATE_EVENT_CHANNEL) CHECK_EQ(sfv_last_error()->errnum, cases[i].err);
        fkcm_reset();
        CHECK_EQ(fkcm_live_ids(), 0);
        CHECK_EQ(fkcm_live_channels(), 0);
        CHECK_EQ(fkcm_unacked(), 0);
    }
    /* EINTR and EAGAIN from rdma_get_cm_event are "try again", every time they come */
    fkcm_fail(FKCM_GET_CM_EVENT, 1, EINTR, 0);
    CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
    CHECK_OK(sfv_cm_close(c, 0));
    fkcm_fail(FKCM_GET_CM_EVENT, 2, EAGAIN, 0);
    CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
    CHECK_OK(sfv_cm_close(c, 0));
    /* a failing rdma_disconnect on close: still freed */
    CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
    fkcm_fail(FKCM_DISCONNECT, 1, EINVAL, 0);
    CHECK_OK(sfv_cm_close(c, 500));
    /* the library's own allocations failing, one by one */
    {
        long n;
        sfv_result r = SFV_OK;
        for (n = 1; n < 200; n++) {
            fk_fail_nth(n);
            r = tc_connect(&e, NULL, 0, 1000, &c);
            if (!fk_failed()) break;
            CHECK(r != SFV_OK);
            CHECK(c == NULL);
            CHECK_EQ(fkcm_live_ids(), 0);
            CHECK_EQ(fkcm_live_channels(), 0);
        }
        fk_fail_nth(0);
        CHECK_OK(r);
        CHECK_OK(sfv_cm_close(c, 0));
    }
    tc_close(&e);
}

/* An rdma_* call that fails without setting errno (errno 0): still a failure, with no object
   (errno 0 once mapped to SFV_OK, with *out NULL). */
static void t_errno_zero(void) {
    static const enum fkcm_fn conn_fns[] = {FKCM_CREATE_ID, FKCM_RESOLVE_ADDR, FKCM_RESOLVE_ROUTE, FKCM_CONNECT, FKCM_ESTABLISH};
    static const enum fkcm_fn listen_fns[] = {FKCM_CREATE_ID, FKCM_BIND_ADDR, FKCM_LISTEN};
    tc_env e;
    sfv_cm_conn *c;
    sfv_cm_listener *l = NULL;
    sfv_cm_request *q;
    sfv_context *ctx;
    sfv_result r;
    size_t i;
    tc_open(&e);
    for (i = 0; i < COUNT_OF(conn_fns); i++) {
        fkcm_fail(conn_fns[i], 1, 0, 0);
        r = tc_connect(&e, NULL, 0, 1000, &c);
        CHECK(c == NULL);
        CHECK(r == SFV_ERR_DRIVER);
        fkcm_reset();
    }
    for (i = 0; i < COUNT_OF(listen_fns); i++) {
        fkcm_fail(listen_fns[i], 1, 0, 0);
        r = sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l);
        CHECK(l == NULL);
        CHECK(r == SFV_ERR_DRIVER);
        fkcm_reset();
    }
    fkcm_fail(FKCM_BIND_ADDR, 1, 0, 0);
    r = sfv_cm_open_device(FKCM_ADDR0, &ctx);
    CHECK(r == SFV_ERR_DRIVER);
    CHECK(ctx == NULL);
    fkcm_reset();
    tc_request(&l, NULL, 0, &q);
    fkcm_fail(FKCM_ACCEPT, 1, 0, 0);
    r = sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, &c);
    CHECK(c == NULL);
    CHECK(r == SFV_ERR_DRIVER);
    CHECK_OK(sfv_cm_destroy_listener(l));
    tc_close(&e);
}

/* A peer's answer the NIC cannot connect to: QP number 0 or over 24 bits. */
static void t_connect_bad_peer_qp(void) {
    static const uint32_t qpns[] = {0, 0x1000000, 0xFFFFFFFF};
    tc_env e;
    sfv_cm_conn *c;
    size_t i;
    tc_open(&e);
    for (i = 0; i < COUNT_OF(qpns); i++) {
        long rejects = fkcm_calls(FKCM_REJECT);
        tc_on1(FKCM_CONNECT, tc_response(qpns[i], NULL, 0));
        CHECK_RESULT(tc_connect(&e, NULL, 0, 1000, &c), SFV_ERR_INVALID);
        CHECK(strcmp(sfv_last_error()->verb, "ibv_modify_qp") == 0);
        CHECK_EQ(fkcm_calls(FKCM_REJECT), rejects + 1); /* the peer is told, not left to its deadline */
    }
    tc_close(&e);
}

/* The address and the PD: wrong device, no device, no route, not numeric. */
static void t_connect_addresses(void) {
    tc_env e;
    sfv_cm_conn *c;
    tc_open(&e);
    CHECK_RESULT(sfv_cm_connect(e.pd, FKCM_ADDR1, FKCM_ADDR0, PORT, NULL, NULL, 0, 1000, &c), SFV_ERR_INVALID); /* src on fake1 */
    CHECK(strstr(sfv_last_error()->message, "fake1") != NULL);
    CHECK_RESULT(sfv_cm_connect(e.pd, NULL, "not-an-address", PORT, NULL, NULL, 0, 1000, &c), SFV_ERR_NOT_FOUND);
    CHECK_RESULT(sfv_cm_connect(e.pd, "nonsense", FKCM_ADDR0, PORT, NULL, NULL, 0, 1000, &c), SFV_ERR_NOT_FOUND);
    CHECK_RESULT(sfv_cm_connect(e.pd, NULL, NULL, PORT, NULL, NULL, 0, 1000, &c), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_cm_connect(NULL, NULL, FKCM_ADDR0, PORT, NULL, NULL, 0, 1000, &c), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_cm_connect(e.pd, NULL, FKCM_ADDR0, PORT, NULL, NULL, 0, 1000, NULL), SFV_ERR_INVALID);
    CHECK_EQ(fkcm_calls(FKCM_CREATE_ID), 1); /* only the first got that far */
    tc_close(&e);
}

/* ---- listening and accepting --------------------------------------------------------------- */
static void t_listen(void) {
    sfv_cm_listener *l, *m;
    sfv_context *ctx;
    fk_reset();
    fkcm_reset();
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    CHECK_EQ(sfv_cm_listener_port(l), PORT);
    CHECK(sfv_cm_listener_fd(l) >= 0);
    CHECK_RESULT(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &m), SFV_ERR_ADDR_IN_USE);
    CHECK(m == NULL);
    CHECK_OK(sfv_cm_destroy_listener(l));
    CHECK_OK(sfv_cm_listen(NULL, 0, -5, &l)); /* every address, a port the kernel picks */
    CHECK(sfv_cm_listener_port(l) != 0);
    CHECK_OK(sfv_cm_destroy_listener(l));
    CHECK_RESULT(sfv_cm_listen(FKCM_ADDR_NORDMA, PORT, 0, &l), SFV_ERR_NOT_FOUND);
    CHECK_RESULT(sfv_cm_listen("192.0.2.77", PORT, 0, &l), SFV_ERR_NOT_FOUND);
    CHECK_RESULT(sfv_cm_listen("::1x", PORT, 0, &l), SFV_ERR_NOT_FOUND);
    CHECK_RESULT(sfv_cm_listen(FKCM_ADDR0, PORT, 0, NULL), SFV_ERR_INVALID);
    fkcm_fail(FKCM_LISTEN, 1, EADDRINUSE, 0);
    CHECK_RESULT(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l), SFV_ERR_ADDR_IN_USE);
    fkcm_fail(FKCM_BIND_ADDR, 1, ENODEV, 0);
    CHECK_RESULT(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l), SFV_ERR_NOT_FOUND);
    fkcm_fail(FKCM_CREATE_EVENT_CHANNEL, 1, EMFILE, 0);
    CHECK_RESULT(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l), SFV_ERR_RESOURCE);
    CHECK_EQ(sfv_cm_listener_port(NULL), 0);
    CHECK_EQ(sfv_cm_listener_fd(NULL), -1);
    CHECK_OK(sfv_cm_destroy_listener(NULL));
    /* the device of an address */
    CHECK_OK(sfv_cm_open_device(FKCM_ADDR1, &ctx));
    CHECK(strcmp(sfv_context_name(ctx), "fake1") == 0);
    CHECK_OK(sfv_close_device(ctx));
    CHECK_RESULT(sfv_cm_open_device(FKCM_ADDR_NORDMA, &ctx), SFV_ERR_NOT_FOUND);
    CHECK_RESULT(sfv_cm_open_device("10.1.2.3", &ctx), SFV_ERR_NOT_FOUND);
    tc_check_clean();
}

/* What a listener meets besides requests, requests with odd bytes, and no request at all. (Its own
   DEVICE_REMOVAL is no event to skip: test_rev39b t_cm_listener_device_removed.) */
static void t_get_request(void) {
    static const int others[] = {RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_ESTABLISHED,
                                 RDMA_CM_EVENT_TIMEWAIT_EXIT, RDMA_CM_EVENT_ADDR_CHANGE, RDMA_CM_EVENT_REJECTED, 99};
    sfv_cm_listener *l = NULL;
    sfv_cm_request *q;
    uint8_t b[255];
    const uint8_t *p;
    size_t i, n;
    double t0;
    fk_reset();
    fkcm_reset();
    for (i = 0; i < sizeof b; i++) b[i] = (uint8_t)(i * 3);
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 4, &l));
    t0 = test_seconds();
    CHECK_RESULT(sfv_cm_get_request(l, -1, &q), SFV_ERR_TIMEOUT);
    CHECK(q == NULL);
    CHECK_RESULT(sfv_cm_get_request(l, 0, &q), SFV_ERR_TIMEOUT);
    CHECK_RESULT(sfv_cm_get_request(l, 100, &q), SFV_ERR_TIMEOUT);
    CHECK_WITHIN(t0, 100);
    for (i = 0; i < COUNT_OF(others); i++) {
        fkcm_event ev = tc_ev(others[i]);
        fkcm_push(sfv_cm_listener_fd(l), &ev);
    }
    CHECK_RESULT(sfv_cm_get_request(l, -1, &q), SFV_ERR_TIMEOUT); /* all skipped */
    CHECK(!tc_readable(sfv_cm_listener_fd(l)));
    /* request bytes: 0..255, with and without the header; NULL with a length */
    for (n = 0; n <= 255; n += 5) {
        tc_request(&l, n ? b : NULL, n, &q);
        p = sfv_cm_request_private(q, &i);
        CHECK_EQ(i, n);
        CHECK(memcmp(p, b, i) == 0);
        CHECK_OK(sfv_cm_reject(q, NULL, 0));
    }
    b[0] = 'S'; b[1] = 'C'; b[2] = 1; b[3] = 0;
    tc_request(&l, b, 4, &q);
    (void)sfv_cm_request_private(q, &i);
    CHECK_EQ(i, 0);
    CHECK_OK(sfv_cm_reject(q, NULL, 0));
    tc_request(&l, NULL, 200, &q);
    (void)sfv_cm_request_private(q, &i);
    CHECK_EQ(i, 0);
    CHECK_OK(sfv_cm_reject(q, NULL, 0));
    CHECK(sfv_cm_request_private(NULL, &i) == NULL);
    CHECK_EQ(i, 0);
    /* a request that comes while the call waits, and one after its deadline */
    {
        fkcm_event ev = tc_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
        ev.delay_ms = 50;
        fkcm_push(sfv_cm_listener_fd(l), &ev);
        t0 = test_seconds();
        CHECK_OK(sfv_cm_get_request(l, 2000, &q));
        CHECK(test_seconds() - t0 < 1.0);
        CHECK_OK(sfv_cm_reject(q, NULL, 0));
        ev.delay_ms = 300;
        fkcm_push(sfv_cm_listener_fd(l), &ev);
        t0 = test_seconds();
        CHECK_RESULT(sfv_cm_get_request(l, 100, &q), SFV_ERR_TIMEOUT);
        CHECK_WITHIN(t0, 100);
    }
    /* rdma_get_cm_event failing */
    {
        fkcm_event ev = tc_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
        fkcm_push(sfv_cm_listener_fd(l), &ev);
        fkcm_fail(FKCM_GET_CM_EVENT, 1, EIO, 0);
        CHECK_RESULT(sfv_cm_get_request(l, 100, &q), SFV_ERR_DRIVER);
        CHECK_OK(sfv_cm_get_request(l, 100, &q)); /* it is still there */
        CHECK_OK(sfv_cm_reject(q, NULL, 0));
        /* the library's calloc failing: the request is refused, nothing is left */
        fkcm_push(sfv_cm_listener_fd(l), &ev);
        fk_fail_nth(1);
        CHECK_RESULT(sfv_cm_get_request(l, 100, &q), SFV_ERR_RESOURCE);
        CHECK(fk_failed() != NULL);
        fk_fail_nth(0);
    }
    CHECK_OK(sfv_cm_destroy_listener(l)); /* the late request is still queued: refused */
    tc_check_clean();
}

static void t_reject(void) {
    sfv_cm_listener *l = NULL;
    sfv_cm_request *q;
    uint8_t b[SFV_CM_REJECT_PRIVATE_MAX + 1];
    const uint8_t *p;
    size_t n;
    fk_reset();
    fkcm_reset();
    for (n = 0; n < sizeof b; n++) b[n] = (uint8_t)~n;
    for (n = 0; n <= SFV_CM_REJECT_PRIVATE_MAX; n++) {
        tc_request(&l, NULL, 0, &q);
        CHECK_OK(sfv_cm_reject(q, b, n));
        p = fkcm_sent(FKCM_REJECT, &n);
        CHECK(p != NULL && memcmp(p, b, n) == 0);
    }
    tc_request(&l, NULL, 0, &q);
    CHECK_RESULT(sfv_cm_reject(q, b, SFV_CM_REJECT_PRIVATE_MAX + 1), SFV_ERR_INVALID); /* still rejected, and freed */
    (void)fkcm_sent(FKCM_REJECT, &n);
    CHECK_EQ(n, 0);
    tc_request(&l, NULL, 0, &q);
    CHECK_RESULT(sfv_cm_reject(q, NULL, 3), SFV_ERR_INVALID);
    tc_request(&l, NULL, 0, &q);
    fkcm_fail(FKCM_REJECT, 1, EINVAL, 0); /* the peer gave up: nothing left to refuse */
    CHECK_OK(sfv_cm_reject(q, NULL, 0));
    tc_request(&l, NULL, 0, &q);
    fkcm_fail(FKCM_REJECT, 1, EIO, 0);
    CHECK_RESULT(sfv_cm_reject(q, NULL, 0), SFV_ERR_DRIVER);
    CHECK_RESULT(sfv_cm_reject(NULL, NULL, 0), SFV_ERR_INVALID);
    CHECK_OK(sfv_cm_destroy_listener(l));
    tc_check_clean();
}

/* Accept, and everything that can follow it. */
static void t_accept_events(void) {
    static const struct { int type; sfv_result want; } cases[] = {
        {RDMA_CM_EVENT_ESTABLISHED, SFV_OK},
        {RDMA_CM_EVENT_DISCONNECTED, SFV_OK}, /* connected and gone at once: OK, the channel broken */
        {RDMA_CM_EVENT_REJECTED, SFV_ERR_UNREACHABLE},
        {RDMA_CM_EVENT_UNREACHABLE, SFV_ERR_UNREACHABLE},
        {RDMA_CM_EVENT_CONNECT_ERROR, SFV_ERR_UNREACHABLE},
        {RDMA_CM_EVENT_DEVICE_REMOVAL, SFV_ERR_DRIVER},
        {RDMA_CM_EVENT_TIMEWAIT_EXIT, SFV_ERR_DRIVER},
        {RDMA_CM_EVENT_CONNECT_RESPONSE, SFV_ERR_DRIVER},
        {RDMA_CM_EVENT_ADDR_ERROR, SFV_ERR_DRIVER},
        {123, SFV_ERR_DRIVER},
    };
    tc_env e;
    sfv_cm_listener *l = NULL;
    sfv_cm_request *q;
    sfv_cm_conn *c;
    size_t i;
    tc_open(&e);
    for (i = 0; i < COUNT_OF(cases); i++) {
        fkcm_event ev = tc_ev(cases[i].type);
        ev.priv_len = 9; /* NULL with a length, where any event may carry bytes */
        tc_request(&l, NULL, 0, &q);
        tc_on1(FKCM_ACCEPT, ev);
        CHECK_RESULT(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, &c), cases[i].want);
        if (cases[i].want) {
            CHECK(c == NULL);
            continue;
        }
        if (cases[i].type == RDMA_CM_EVENT_DISCONNECTED) {
            sfv_gather_element g = sfv_mr_gather_element(e.mr, e.buf, 8);
            CHECK_RESULT(sfv_cm_events(c), SFV_ERR_BROKEN);
            CHECK_RESULT(sfv_channel_send(sfv_cm_channel(c), &g, 1, NULL), SFV_ERR_BROKEN);
        } else {
            CHECK_OK(sfv_cm_events(c));
        }
        CHECK_OK(sfv_cm_close(c, 100));
    }
    /* silence, and an ESTABLISHED that comes too late */
    {
        fkcm_event late = tc_ev(RDMA_CM_EVENT_ESTABLISHED);
        double t0 = test_seconds();
        tc_request(&l, NULL, 0, &q);
        fkcm_on(FKCM_ACCEPT, NULL, 0);
        CHECK_RESULT(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 120, &c), SFV_ERR_TIMEOUT);
        CHECK_WITHIN(t0, 120);
        late.delay_ms = 300;
        tc_request(&l, NULL, 0, &q);
        tc_on1(FKCM_ACCEPT, late);
        t0 = test_seconds();
        CHECK_RESULT(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 120, &c), SFV_ERR_TIMEOUT);
        CHECK_WITHIN(t0, 120);
    }
    CHECK_OK(sfv_cm_destroy_listener(l));
    tc_close(&e);
}

/* Accept's arguments and failing calls: the request is answered and freed whatever happens. */
static void t_accept_failures(void) {
    static const struct { enum fkcm_fn fn; int err; sfv_result want; } cases[] = {
        {FKCM_CREATE_EVENT_CHANNEL, ENOMEM, SFV_ERR_RESOURCE},
        {FKCM_MIGRATE_ID, EINVAL, SFV_ERR_INVALID},
        {FKCM_INIT_QP_ATTR, EINVAL, SFV_ERR_INVALID},
        {FKCM_ACCEPT, ECONNRESET, SFV_ERR_DRIVER},
        {FKCM_ACCEPT, ETIMEDOUT, SFV_ERR_TIMEOUT},
        {FKCM_GET_CM_EVENT, EIO, SFV_ERR_DRIVER},
    };
    tc_env e;
    sfv_cm_listener *l = NULL;
    sfv_cm_request *q;
    sfv_cm_conn *c;
    sfv_channel *ch;
    uint8_t b[SFV_CM_ACCEPT_PRIVATE_MAX + 1];
    size_t i, n;
    sfv_channel_desc d = SFV_ZERO_INIT;
    tc_open(&e);
    memset(b, 0x5A, sizeof b);
    for (i = 0; i < COUNT_OF(cases); i++) {
        tc_request(&l, NULL, 0, &q);
        fkcm_fail(cases[i].fn, 1, cases[i].err, 0);
        CHECK_RESULT(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, &c), cases[i].want);
        CHECK(c == NULL);
        fkcm_reset();
    }
    /* private data: every length that fits, one more, NULL with a length */
    for (n = 0; n <= SFV_CM_ACCEPT_PRIVATE_MAX; n += 16) {
        const uint8_t *p;
        size_t m;
        tc_request(&l, NULL, 0, &q);
        CHECK_OK(sfv_cm_accept(q, e.pd, NULL, b, n, 1000, &c));
        p = fkcm_sent(FKCM_ACCEPT, &m);
        CHECK_EQ(m, n + 4);
        CHECK(memcmp(p + 4, b, n) == 0);
        CHECK_OK(sfv_cm_close(c, 0));
    }
    tc_request(&l, NULL, 0, &q);
    CHECK_RESULT(sfv_cm_accept(q, e.pd, NULL, b, SFV_CM_ACCEPT_PRIVATE_MAX + 1, 1000, &c), SFV_ERR_INVALID);
    tc_request(&l, NULL, 0, &q);
    CHECK_RESULT(sfv_cm_accept(q, e.pd, NULL, NULL, 1, 1000, &c), SFV_ERR_INVALID);
    tc_request(&l, NULL, 0, &q);
    CHECK_RESULT(sfv_cm_accept(q, NULL, NULL, NULL, 0, 1000, &c), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_cm_accept(NULL, e.pd, NULL, NULL, 0, 1000, &c), SFV_ERR_INVALID);
    /* a request whose peer's QP the NIC cannot connect to */
    {
        fkcm_event ev = tc_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
        ev.qpn = 0;
        fkcm_push(sfv_cm_listener_fd(l), &ev);
        CHECK_OK(sfv_cm_get_request(l, 100, &q));
        CHECK_RESULT(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, &c), SFV_ERR_INVALID);
    }
    /* a caller's channel: already connected, on another port */
    CHECK_OK(sfv_create_channel(e.pd, NULL, &ch));
    {
        sfv_endpoint me;
        CHECK_OK(sfv_channel_endpoint(ch, &me));
        CHECK_OK(sfv_channel_handshake(ch, &me));
    }
    tc_request(&l, NULL, 0, &q);
    CHECK_RESULT(sfv_cm_accept_channel(q, ch, NULL, 0, 1000, &c), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_channel(ch));
    tc_request(&l, NULL, 0, &q);
    CHECK_RESULT(sfv_cm_accept_channel(q, NULL, NULL, 0, 1000, &c), SFV_ERR_INVALID);
    /* the library's own allocations failing, one by one */
    {
        long k;
        sfv_result r = SFV_OK;
        for (k = 1; k < 200; k++) {
            tc_request(&l, NULL, 0, &q);
            fk_fail_nth(k);
            r = sfv_cm_accept(q, e.pd, &d, NULL, 0, 1000, &c);
            if (!fk_failed()) break;
            CHECK(r != SFV_OK && c == NULL);
        }
        fk_fail_nth(0);
        CHECK_OK(r);
        CHECK_OK(sfv_cm_close(c, 0));
    }
    CHECK_OK(sfv_cm_destroy_listener(l));
    tc_close(&e);
}

/* A listener destroyed with requests queued and not taken: each is refused and freed. */
static void t_destroy_listener_pending(void) {
    sfv_cm_listener *l;
    int i;
    fk_reset();
    fkcm_reset();
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    for (i = 0; i < 5; i++) {
        fkcm_event ev = tc_ev(i % 2 ? RDMA_CM_EVENT_CONNECT_REQUEST : RDMA_CM_EVENT_DISCONNECTED);
        fkcm_push(sfv_cm_listener_fd(l), &ev);
    }
    CHECK_OK(sfv_cm_destroy_listener(l));
    CHECK_EQ(fkcm_calls(FKCM_REJECT), 2);
    tc_check_clean();
}

/* ---- a connection's life ------------------------------------------------------------------- */
/* A channel of the test's own, connected to the CM's channel of c, so work moves. */
static void tc_peer_up(sfv_channel *peer, sfv_cm_conn *c) {
    sfv_endpoint ep;
    CHECK_OK(sfv_channel_endpoint(sfv_cm_channel(c), &ep));
    CHECK_OK(sfv_channel_handshake(peer, &ep));
}
static sfv_cm_conn *tc_connect_to(tc_env *e, sfv_channel *peer, sfv_wait_mode mode) {
    sfv_channel_desc d = SFV_ZERO_INIT;
    sfv_endpoint ep;
    sfv_cm_conn *c;
    d.wait_mode = mode;
    CHECK_OK(sfv_channel_endpoint(peer, &ep));
    fkcm_set_peer(ep.qpn, ep.psn);
    CHECK_OK(sfv_cm_connect(e->pd, NULL, FKCM_ADDR0, PORT, &d, NULL, 0, 1000, &c));
    tc_peer_up(peer, c);
    return c;
}

/* Work moves; then the peer disconnects while a receive waits: the wait ends at once. */
#define TC_MSG(sub) CHECK(strstr(sfv_last_error()->message, (sub)) != NULL)
static void t_disconnect_ends_wait(void) {
    static const sfv_wait_mode modes[] = {SFV_WAIT_BUSY, SFV_WAIT_EVENT};
    static const int how[] = {RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_DEVICE_REMOVAL, RDMA_CM_EVENT_TIMEWAIT_EXIT};
    tc_env e;
    size_t m, h;
    tc_open(&e);
    for (m = 0; m < COUNT_OF(modes); m++)
        for (h = 0; h < COUNT_OF(how); h++) {
            sfv_channel *peer;
            sfv_cm_conn *c;
            sfv_pending rx;
            sfv_work_completion wc;
            sfv_scatter_element in = sfv_mr_scatter_element(e.mr, e.buf + 64, 64);
            sfv_gather_element out = sfv_mr_gather_element(e.mr, e.buf, 6);
            fkcm_event ev = tc_ev(how[h]);
            double t0;
            memcpy(e.buf, "hello", 6);
            CHECK_OK(sfv_create_channel(e.pd, NULL, &peer));
            c = tc_connect_to(&e, peer, modes[m]);
            CHECK_OK(sfv_channel_post_receive(sfv_cm_channel(c), &in, 1, &rx));
            CHECK_OK(sfv_channel_send(peer, &out, 1, NULL));
            CHECK_OK(sfv_pending_wait(&rx, 1000, &wc));
            CHECK(strcmp((char *)e.buf + 64, "hello") == 0);
            CHECK_OK(sfv_channel_post_receive(sfv_cm_channel(c), &in, 1, &rx));
            ev.delay_ms = 100;
            fkcm_push(sfv_cm_fd(c), &ev);
            t0 = test_seconds();
            CHECK_RESULT(sfv_pending_wait(&rx, 5000, &wc), SFV_ERR_WORK);
            CHECK(test_seconds() - t0 < 1.5);
            /* the device gone is no peer leaving: class FATAL, and said so (it said "disconnected") */
            if (how[h] == RDMA_CM_EVENT_DEVICE_REMOVAL) {
                CHECK_EQ(wc.error_class, SFV_WORK_ERROR_FATAL);
                TC_MSG("the device was removed");
                CHECK_RESULT(sfv_channel_post_receive(sfv_cm_channel(c), &in, 1, &rx), SFV_ERR_BROKEN);
                TC_MSG("its device was removed");
                CHECK_RESULT(sfv_cm_events(c), SFV_ERR_BROKEN);
                TC_MSG("the device was removed (DEVICE_REMOVAL)");
            } else {
                CHECK_EQ(wc.error_class, SFV_WORK_ERROR_TRANSPORT);
                CHECK(strstr(sfv_last_error()->message, "disconnect") != NULL);
                CHECK_RESULT(sfv_channel_post_receive(sfv_cm_channel(c), &in, 1, &rx), SFV_ERR_BROKEN);
                CHECK_RESULT(sfv_cm_events(c), SFV_ERR_BROKEN);
                TC_MSG("the peer disconnected");
            }
            CHECK_OK(sfv_cm_close(c, 100));
            CHECK_OK(sfv_destroy_channel(peer));
        }
    tc_close(&e);
}

/* sfv_cm_events with whatever the CM hands a connected id, and a failing read. */
static void t_events(void) {
    static const struct { int type; sfv_result want; } cases[] = {
        {RDMA_CM_EVENT_ESTABLISHED, SFV_OK},
        {RDMA_CM_EVENT_CONNECT_RESPONSE, SFV_OK},
        {RDMA_CM_EVENT_ADDR_CHANGE, SFV_OK},
        {RDMA_CM_EVENT_REJECTED, SFV_OK},
        {77, SFV_OK},
        {RDMA_CM_EVENT_DISCONNECTED, SFV_ERR_BROKEN},
        {RDMA_CM_EVENT_DEVICE_REMOVAL, SFV_ERR_BROKEN},
        {RDMA_CM_EVENT_TIMEWAIT_EXIT, SFV_ERR_BROKEN},
    };
    tc_env e;
    sfv_cm_conn *c;
    size_t i;
    tc_open(&e);
    for (i = 0; i < COUNT_OF(cases); i++) {
        fkcm_event ev = tc_ev(cases[i].type);
        CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
        ev.priv_len = 200;
        fkcm_push(sfv_cm_fd(c), &ev);
        CHECK_RESULT(sfv_cm_events(c), cases[i].want);
        CHECK_RESULT(sfv_cm_events(c), cases[i].want);
        CHECK(!tc_readable(sfv_cm_fd(c)));
        CHECK_OK(sfv_cm_close(c, 50));
    }
    /* rdma_get_cm_event failing: the disconnect is read next time */
    {
        fkcm_event ev = tc_ev(RDMA_CM_EVENT_DISCONNECTED);
        CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
        sfv_result r;
        fkcm_push(sfv_cm_fd(c), &ev);
        fkcm_fail(FKCM_GET_CM_EVENT, 1, EIO, 0);
        /* (a failed read is the caller's to know, not "still connected") */
        r = sfv_cm_events(c);
        CHECK(r == SFV_ERR_DRIVER);
        CHECK(tc_readable(sfv_cm_fd(c))); /* the disconnect is still there */
        CHECK_RESULT(sfv_cm_events(c), SFV_ERR_BROKEN);
        CHECK_OK(sfv_cm_close(c, 0));
    }
    CHECK_RESULT(sfv_cm_events(NULL), SFV_ERR_INVALID);
    CHECK_EQ(sfv_cm_fd(NULL), -1);
    CHECK(sfv_cm_channel(NULL) == NULL);
    tc_close(&e);
}

/* Close: a peer that never confirms (close returns at its deadline), one that confirms late,
   one already gone, events queued and unread at close. */
static void t_close(void) {
    tc_env e;
    sfv_cm_conn *c;
    double t0;
    tc_open(&e);
    CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
    fkcm_on(FKCM_DISCONNECT, NULL, 0);
    t0 = test_seconds();
    CHECK_OK(sfv_cm_close(c, 150));
    CHECK(test_seconds() - t0 >= 0.14);
    CHECK_WITHIN(t0, 150);
    CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
    {
        fkcm_event ev[2];
        ev[0] = tc_ev(RDMA_CM_EVENT_TIMEWAIT_EXIT);
        ev[1] = tc_ev(RDMA_CM_EVENT_DISCONNECTED);
        ev[1].delay_ms = 500;
        fkcm_on(FKCM_DISCONNECT, ev, 2);
    }
    t0 = test_seconds();
    CHECK_OK(sfv_cm_close(c, 100)); /* returns at its deadline, the late confirmation dropped */
    CHECK_WITHIN(t0, 100);
    CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
    {
        fkcm_event ev = tc_ev(RDMA_CM_EVENT_ESTABLISHED);
        int k;
        for (k = 0; k < 10; k++) fkcm_push(sfv_cm_fd(c), &ev);
    }
    CHECK_OK(sfv_cm_close(c, 0));
    /* failing reads while close waits */
    CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
    fkcm_fail(FKCM_GET_CM_EVENT, 1, EIO, 1);
    t0 = test_seconds();
    CHECK_OK(sfv_cm_close(c, 2000));
    CHECK(test_seconds() - t0 < 1.0);
    fkcm_reset();
    tc_close(&e);
}

/* A caller's channel: the connection and the channel in either order. */
static void t_caller_channel(void) {
    tc_env e;
    sfv_channel *ch;
    sfv_cm_conn *c, *c2;
    sfv_cm_listener *l = NULL;
    sfv_cm_request *q;
    sfv_gather_element g;
    tc_open(&e);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &ch));
    CHECK_OK(sfv_cm_connect_channel(ch, NULL, FKCM_ADDR0, PORT, NULL, 0, 1000, &c));
    CHECK(sfv_cm_channel(c) == ch);
    CHECK_RESULT(sfv_cm_connect_channel(ch, NULL, FKCM_ADDR0, PORT, NULL, 0, 1000, &c2), SFV_ERR_INVALID); /* not fresh */
    CHECK(c2 == NULL);
    CHECK_OK(sfv_destroy_channel(ch)); /* first the channel ... */
    CHECK_EQ(fkcm_live_ids(), 1);
    CHECK_OK(sfv_cm_close(c, 0));    /* ... then its connection */
    CHECK_OK(sfv_create_channel(e.pd, NULL, &ch));
    CHECK_OK(sfv_cm_connect_channel(ch, NULL, FKCM_ADDR0, PORT, NULL, 0, 1000, &c));
    CHECK_OK(sfv_cm_close(c, 0)); /* the other way: the channel is broken, then destroyed */
    CHECK_RESULT(sfv_channel_send(ch, &g, 1, NULL), SFV_ERR_BROKEN);
    CHECK_OK(sfv_channel_reset(ch)); /* and reset, it may connect again */
    CHECK_OK(sfv_cm_connect_channel(ch, NULL, FKCM_ADDR0, PORT, NULL, 0, 1000, &c));
    CHECK_OK(sfv_channel_reset(ch)); /* a reset ends the connection's hold */
    CHECK_OK(sfv_cm_close(c, 0));
    /* failures after the channel came up leave it broken */
    fkcm_fail(FKCM_ESTABLISH, 1, EIO, 0);
    CHECK_RESULT(sfv_cm_connect_channel(ch, NULL, FKCM_ADDR0, PORT, NULL, 0, 1000, &c), SFV_ERR_DRIVER);
    CHECK_RESULT(sfv_channel_send(ch, &g, 1, NULL), SFV_ERR_BROKEN);
    CHECK_RESULT(sfv_cm_connect_channel(ch, NULL, FKCM_ADDR0, PORT, NULL, 0, 1000, &c2), SFV_ERR_INVALID);
    CHECK_OK(sfv_channel_reset(ch));
    /* failures before leave it fresh */
    tc_on1(FKCM_CONNECT, tc_ev(RDMA_CM_EVENT_UNREACHABLE));
    CHECK_RESULT(sfv_cm_connect_channel(ch, NULL, FKCM_ADDR0, PORT, NULL, 0, 1000, &c), SFV_ERR_UNREACHABLE);
    CHECK_OK(sfv_cm_connect_channel(ch, NULL, FKCM_ADDR0, PORT, NULL, 0, 1000, &c));
    CHECK_OK(sfv_cm_close(c, 0));
    CHECK_OK(sfv_channel_reset(ch));
    /* accepted on the caller's channel; a failing accept after bring-up breaks it */
    tc_request(&l, NULL, 0, &q);
    CHECK_OK(sfv_cm_accept_channel(q, ch, NULL, 0, 1000, &c));
    CHECK(sfv_cm_channel(c) == ch);
    CHECK_OK(sfv_cm_close(c, 0));
    CHECK_OK(sfv_channel_reset(ch));
    tc_request(&l, NULL, 0, &q);
    tc_on1(FKCM_ACCEPT, tc_ev(RDMA_CM_EVENT_CONNECT_ERROR));
    CHECK_RESULT(sfv_cm_accept_channel(q, ch, NULL, 0, 1000, &c), SFV_ERR_UNREACHABLE);
    CHECK_RESULT(sfv_channel_send(ch, &g, 1, NULL), SFV_ERR_BROKEN);
    CHECK_OK(sfv_destroy_channel(ch));
    CHECK_OK(sfv_cm_destroy_listener(l));
    tc_close(&e);
}

/* The channel a connection owns, reset through the channel API (which "works on it"): the
   connection must still free it. */
static void t_reset_owned_channel(void) {
    tc_env e;
    sfv_cm_conn *c;
    sfv_channel *ch;
    tc_open(&e);
    CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
    ch = sfv_cm_channel(c);
    CHECK_OK(sfv_channel_reset(ch));
    { /* connected anew to a local channel: the old connection's disconnect breaks nothing of it */
        sfv_channel *b;
        sfv_endpoint ea, eb;
        sfv_gather_element g = sfv_mr_gather_element(e.mr, e.buf, 8);
        sfv_scatter_element s = sfv_mr_scatter_element(e.mr, e.buf + 64, 8);
        sfv_pending rx;
        sfv_work_completion wc;
        fkcm_event ev = tc_ev(RDMA_CM_EVENT_DISCONNECTED);
        CHECK_OK(sfv_create_channel(e.pd, NULL, &b));
        CHECK_OK(sfv_channel_endpoint(ch, &ea));
        CHECK_OK(sfv_channel_endpoint(b, &eb));
        CHECK_OK(sfv_channel_handshake(b, &ea));
        CHECK_OK(sfv_channel_handshake(ch, &eb));
        fkcm_push(sfv_cm_fd(c), &ev); /* the old peer hangs up */
        CHECK_RESULT(sfv_cm_events(c), SFV_ERR_BROKEN); /* the old connection is over */
        CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
        CHECK_OK(sfv_channel_send(ch, &g, 1, &wc)); /* the new one is not */
        CHECK_OK(sfv_pending_wait(&rx, 1000, &wc));
        CHECK_OK(sfv_destroy_channel(b));
    }
    CHECK_OK(sfv_cm_close(c, 0));
    CHECK(fk_live(FK_QP) == 0); /* the connection freed the channel it owns, reset or not */
    tc_close(&e);
}

/* ---- seeded random sequences --------------------------------------------------------------- */
SFV__WRAPS static unsigned tc_rand(unsigned *s) { /* (a generator: wraps on purpose) */
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xFFFFFF;
}
static bool tc_valid(sfv_result r) {
    return r == SFV_OK || (r <= SFV_ERR_INVALID && r >= SFV_ERR_ADDR_IN_USE);
}
static const int tc_types[] = {
    RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_ADDR_ERROR, RDMA_CM_EVENT_ROUTE_RESOLVED, RDMA_CM_EVENT_ROUTE_ERROR,
    RDMA_CM_EVENT_CONNECT_REQUEST, RDMA_CM_EVENT_CONNECT_RESPONSE, RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_UNREACHABLE,
    RDMA_CM_EVENT_REJECTED, RDMA_CM_EVENT_ESTABLISHED, RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_DEVICE_REMOVAL,
    RDMA_CM_EVENT_ADDR_CHANGE, RDMA_CM_EVENT_TIMEWAIT_EXIT, 200};
/* A random event: type, status, private data (or NULL with a length), a QP, sometimes late or
   for another id. */
static fkcm_event tc_rand_event(unsigned *s, uint8_t *priv, int want) {
    fkcm_event e;
    size_t k;
    static const int st[] = {0, 8, 28, -ETIMEDOUT, -ENODEV, -EHOSTUNREACH, -EINVAL, 1, -1};
    memset(&e, 0, sizeof e);
    e.type = want >= 0 && tc_rand(s) % 4 ? want : tc_types[tc_rand(s) % COUNT_OF(tc_types)];
    e.status = st[tc_rand(s) % COUNT_OF(st)];
    e.priv_len = tc_rand(s) % 4 == 0 ? 0 : tc_rand(s) % 256;
    for (k = 0; k < e.priv_len; k++) priv[k] = (uint8_t)tc_rand(s);
    if (e.priv_len >= 4 && tc_rand(s) % 2) { priv[0] = 'S'; priv[1] = 'C'; priv[2] = 1; }
    e.priv = tc_rand(s) % 16 ? priv : NULL;
    e.qpn = tc_rand(s) % 8 ? 0x77 : (uint32_t)((uint64_t)tc_rand(s) * 0x101u); /* (any 32 bits, no wrap) */
    e.initiator_depth = (uint8_t)tc_rand(s);
    e.responder_resources = (uint8_t)tc_rand(s);
    e.other_id = tc_rand(s) % 16 == 0;
    e.delay_ms = tc_rand(s) % 12 == 0 ? (int)(tc_rand(s) % 60) : 0;
    return e;
}
/* Scripts fn's next reply: 0..3 random events, mostly the one due. */
static void tc_rand_script(unsigned *s, enum fkcm_fn fn, int want) {
    uint8_t priv[3][256];
    fkcm_event ev[3];
    int n = tc_rand(s) % 8 == 0 ? 0 : 1 + (int)(tc_rand(s) % 3), k;
    for (k = 0; k < n; k++) ev[k] = tc_rand_event(s, priv[k], want);
    fkcm_on(fn, ev, n);
}

#define TC_TIMED(call, ms)                                                                    \
    do {                                                                                      \
        const double t0_ = test_seconds();                                                    \
        const sfv_result r_ = (call);                                                         \
        if (!tc_valid(r_)) FAIL("seed %u step %d: %s returned %d", seed, step, #call, (int)r_); \
        if (r_ && !sfv_last_error()->message[0]) FAIL("seed %u step %d: %s failed without a message", seed, step, #call); \
        if (test_seconds() - t0_ > (ms) / 1000.0 + 0.3) FAIL("seed %u step %d: %s took %.3f s, deadline %d ms", seed, step, #call, test_seconds() - t0_, (int)(ms)); \
        last = r_;                                                                            \
        if (tc_trace) fprintf(stderr, "step %d: %s -> %s\n", step, #call, sfv_result_str(r_));  \
    } while (0)
static int tc_trace; /* TC_TRACE set: each step of a random run on stderr */

/* Chaos includes calls that fail with errno 0 (still failures). */
#define TC_ERRNO0 true
static void tc_random_run(unsigned seed) {
    enum { NCONN = 4, NREQ = 3 };
    tc_env e;
    sfv_cm_listener *l = NULL;
    sfv_cm_conn *conns[NCONN] = {0};
    sfv_cm_request *reqs[NREQ] = {0};
    sfv_channel *mine = NULL;
    unsigned s = seed;
    int step;
    sfv_result last = SFV_OK;
    uint8_t priv[256];
    tc_trace = getenv("TC_TRACE") != NULL;
    tc_open(&e);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &mine));
    if (seed % 3 == 0) fkcm_chaos(seed, 30, TC_ERRNO0);
    for (step = 0; step < 40; step++) {
        const int tmo = 20 + (int)(tc_rand(&s) % 60);
        const unsigned act = tc_rand(&s) % 10;
        size_t i = tc_rand(&s) % NCONN, j = tc_rand(&s) % NREQ;
        size_t len = tc_rand(&s) % 4 == 0 ? tc_rand(&s) % 260 : tc_rand(&s) % 40;
        size_t k;
        for (k = 0; k < len && k < sizeof priv; k++) priv[k] = (uint8_t)tc_rand(&s);
        switch (act) {
        case 0: case 1: /* connect, each step's answer scripted at random */
            if (conns[i]) break;
            if (tc_rand(&s) % 2) tc_rand_script(&s, FKCM_RESOLVE_ADDR, RDMA_CM_EVENT_ADDR_RESOLVED);
            if (tc_rand(&s) % 2) tc_rand_script(&s, FKCM_RESOLVE_ROUTE, RDMA_CM_EVENT_ROUTE_RESOLVED);
            if (tc_rand(&s) % 2) tc_rand_script(&s, FKCM_CONNECT, RDMA_CM_EVENT_CONNECT_RESPONSE);
            if (tc_rand(&s) % 4 == 0 && mine && sfv__channel_fresh(mine)) {
                TC_TIMED(sfv_cm_connect_channel(mine, NULL, FKCM_ADDR0, PORT, priv, len % 60, tmo, &conns[i]), tmo);
            } else {
                TC_TIMED(sfv_cm_connect(e.pd, NULL, FKCM_ADDR0, PORT, NULL, tc_rand(&s) % 8 ? priv : NULL, len % 60, tmo, &conns[i]), tmo);
            }
            CHECK(last ? conns[i] == NULL : conns[i] != NULL);
            fkcm_reset(); /* scripts the call did not use */
            if (seed % 3 == 0) fkcm_chaos(seed + (unsigned)step, 30, TC_ERRNO0);
            break;
        case 2: /* listen */
            if (l) break;
            TC_TIMED(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l), 0);
            CHECK(last ? l == NULL : l != NULL);
            break;
        case 3: /* a peer asks */
            if (l) {
                fkcm_event ev = tc_rand_event(&s, priv, RDMA_CM_EVENT_CONNECT_REQUEST);
                fkcm_push(sfv_cm_listener_fd(l), &ev);
            }
            break;
        case 4: /* take a request */
            if (!l || reqs[j]) break;
            TC_TIMED(sfv_cm_get_request(l, tc_rand(&s) % 3 ? tmo : -1, &reqs[j]), tmo);
            CHECK(last ? reqs[j] == NULL : reqs[j] != NULL);
            break;
        case 5: /* answer it */
            if (!reqs[j]) break;
            if (tc_rand(&s) % 3 == 0) {
                TC_TIMED(sfv_cm_reject(reqs[j], tc_rand(&s) % 8 ? priv : NULL, len), 0);
            } else if (conns[i] == NULL) {
                if (tc_rand(&s) % 2) tc_rand_script(&s, FKCM_ACCEPT, RDMA_CM_EVENT_ESTABLISHED);
                if (tc_rand(&s) % 4 == 0 && mine && sfv__channel_fresh(mine)) {
                    TC_TIMED(sfv_cm_accept_channel(reqs[j], mine, priv, len, tmo, &conns[i]), tmo);
                } else {
                    TC_TIMED(sfv_cm_accept(reqs[j], e.pd, NULL, tc_rand(&s) % 8 ? priv : NULL, len, tmo, &conns[i]), tmo);
                }
                CHECK(last ? conns[i] == NULL : conns[i] != NULL);
                fkcm_reset();
                if (seed % 3 == 0) fkcm_chaos(seed + (unsigned)step, 30, TC_ERRNO0);
            } else {
                break;
            }
            reqs[j] = NULL; /* answered and freed, whatever the result */
            break;
        case 6: /* the CM says something to a connection */
            if (conns[i]) {
                fkcm_event ev = tc_rand_event(&s, priv, RDMA_CM_EVENT_DISCONNECTED);
                fkcm_push(sfv_cm_fd(conns[i]), &ev);
            }
            break;
        case 7: /* read it */
            if (!conns[i]) break;
            TC_TIMED(sfv_cm_events(conns[i]), 0);
            if (seed % 3) CHECK(last == SFV_OK || last == SFV_ERR_BROKEN); /* (with chaos, a failed read too) */
            break;
        case 8: /* close */
            if (!conns[i]) break;
            TC_TIMED(sfv_cm_close(conns[i], tc_rand(&s) % 2 ? tmo : 0), tmo);
            CHECK_OK(last);
            conns[i] = NULL;
            break;
        case 9: /* the caller's channel: reset or replaced */
            if (tc_rand(&s) % 2 && mine) {
                TC_TIMED(sfv_channel_reset(mine), 0);
            } else if (mine) {
                TC_TIMED(sfv_destroy_channel(mine), 0);
                CHECK_OK(last);
                mine = NULL;
                TC_TIMED(sfv_create_channel(e.pd, NULL, &mine), 0);
                if (last) mine = NULL;
            }
            break;
        }
    }
    fkcm_chaos(0, 0, 0);
    fkcm_reset();
    for (step = 0; step < NREQ; step++)
        if (reqs[step]) CHECK_OK(sfv_cm_reject(reqs[step], NULL, 0));
    for (step = 0; step < NCONN; step++) CHECK_OK(sfv_cm_close(conns[step], 0));
    if (mine) CHECK_OK(sfv_destroy_channel(mine));
    CHECK_OK(sfv_cm_destroy_listener(l));
    tc_close(&e);
}

/* Seeds 1..TC_SEEDS (default 200), each in a child of its own; TC_SEED=n runs seed n alone, in
   this process (TC_TRACE=1 prints its steps). */
static void t_random_sequences(void) {
    const char *one = getenv("TC_SEED"), *env = getenv("TC_SEEDS");
    unsigned n = env ? (unsigned)atoi(env) : 200, seed;
    if (one) {
        tc_random_run((unsigned)atoi(one));
        return;
    }
    for (seed = 1; seed <= n; seed++) {
        pid_t pid = fork(); /* each seed alone: a crash names it */
        int st = 0;
        CHECK(pid >= 0);
        if (pid == 0) {
            tc_random_run(seed);
            exit(0);
        }
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) FAIL("seed %u failed (status 0x%x): TC_SEED=%u to run it alone", seed, st, seed);
    }
}

/* ---- a node connected through the CM (sfv_node_connect_cm) --------------------------------- */
/* The rank under test is w->me of a world of 2 or 3, on fake0 at FKCM_ADDR0; the other ranks are
   simulated by the scripts: a higher rank's request comes to the listener the call makes
   (fkcm_on(FKCM_LISTEN)), a lower rank answers this rank's connect (fkcm_on(FKCM_CONNECT)).
   Their messages are made with the library's own sfv__ncm_make from nodes of their rank (made
   here on the same PD, for their barrier regions), then corrupted. A genuine rank r has QP
   number 0x100 + r; strangers use others, so a connection shows whose request it took. */
enum { TN_MAX = 3 };
#define TN_KEY "node cm test key"
#define TN_QP_STRANGER 0x5A5Au
typedef struct tn_world {
    tc_env e;
    size_t me, world;
    int ms;                          /* the deadline given to sfv_node_connect_cm */
    uint32_t chan_ms;                /* its channels' desc.timeout_ms (0: the default) */
    sfv_node *node;                  /* the rank under test */
    sfv_node *peer[TN_MAX];          /* the simulated ranks (peer[me] NULL) */
    uint32_t qpn[TN_MAX];            /* rank r's QP number for its channel to this rank */
    sfv_net_node nodes[TN_MAX];
    sfv_exchange_desc desc;
    sfv__ex_key key;
    uint8_t req[TN_MAX][SFV__NCM_SIZE]; /* this rank's request to lower rank j, as it will send it */
} tn_world;

/* Up to 8 events of one script, each with its own private data. */
typedef struct tn_script {
    int n;
    fkcm_event ev[8];
    uint8_t buf[8][256];
} tn_script;

static const char *tn_host(size_t me, size_t r) {
    static const char *const hosts[] = {FKCM_ADDR0, FKCM_ADDR1, "127.0.0.3", "127.0.0.4"};
    return hosts[r == me ? 0 : r < me ? r + 1 : r];
}

/* This rank's node (again): a fresh one, and the requests it will send. */
static void tn_new_node(tn_world *w) {
    sfv_node_desc d;
    size_t j;
    if (w->node) CHECK_OK(sfv_destroy_node(w->node));
    fkcm_reset(); /* (after the destroy: its disconnects are not counted) */
    memset(&d, 0, sizeof d);
    d.world_size = w->world;
    d.rank = w->me;
    d.channel.timeout_ms = w->chan_ms;
    CHECK_OK(sfv_create_node(w->e.pd, &d, &w->node));
    for (j = 0; j < w->me; j++) {
        sfv_endpoint ep;
        CHECK_OK(sfv_channel_endpoint(sfv_multi_channel_peer(sfv_node_multi_channel(w->node), j), &ep));
        sfv__ncm_make(&w->key, 'C', w->node, j, ep.qpn, NULL, w->req[j]);
    }
}

static void tn_open(tn_world *w, size_t world, size_t me, int ms) {
    sfv_node_desc d;
    size_t r;
    tc_open(&w->e);
    w->me = me;
    w->world = world;
    w->ms = ms;
    w->chan_ms = 0;
    w->node = NULL;
    memset(w->peer, 0, sizeof w->peer);
    memset(&w->desc, 0, sizeof w->desc);
    w->desc.key = TN_KEY;
    w->desc.key_len = strlen(TN_KEY);
    CHECK_OK(sfv__ex_key_pick(&w->desc, &w->key));
    memset(&d, 0, sizeof d);
    d.world_size = world;
    for (r = 0; r < world; r++) {
        w->nodes[r].host = tn_host(me, r);
        w->nodes[r].port = (uint16_t)(PORT + r);
        w->nodes[r].rank = (uint32_t)r;
        w->nodes[r].device = NULL;
        w->qpn[r] = 0x100 + (uint32_t)r;
        d.rank = r;
        if (r != me) CHECK_OK(sfv_create_node(w->e.pd, &d, &w->peer[r]));
    }
    tn_new_node(w);
}

static void tn_close(tn_world *w) {
    size_t r;
    fkcm_chaos(0, 0, 0);
    fkcm_reset();
    CHECK_OK(sfv_destroy_node(w->node));
    for (r = 0; r < w->world; r++) CHECK_OK(sfv_destroy_node(w->peer[r]));
    tc_close(&w->e);
}

/* An event of s: type, the peer's QP, msg (len bytes; NULL with a length: the event says so)
   after an "SC" header unless hdr is false. Returned for the caller to add to (src, delay, status). */
static fkcm_event *tn_add(tn_script *s, int type, uint32_t qpn, const uint8_t *msg, size_t len, bool hdr) {
    fkcm_event *e = &s->ev[s->n];
    uint8_t *b = s->buf[s->n];
    size_t h = hdr ? SFV__CM_HDR : 0;
    CHECK(s->n < 8 && h + len <= 255);
    *e = tc_ev(type);
    e->qpn = qpn;
    e->initiator_depth = e->responder_resources = 4;
    b[0] = 'S'; b[1] = 'C'; b[2] = 1; b[3] = 4;
    if (msg) memcpy(b + h, msg, len);
    e->priv = msg || !len ? b : NULL;
    e->priv_len = h + len;
    s->n++;
    return e;
}
/* Rank r's request to this rank, as msg says, from r's address. */
static fkcm_event *tn_add_request(tn_script *s, const tn_world *w, size_t r, uint32_t qpn, const uint8_t *msg, size_t len) {
    fkcm_event *e = tn_add(s, RDMA_CM_EVENT_CONNECT_REQUEST, qpn, msg, len, true);
    e->src = w->nodes[r < w->world ? r : 0].host;
    return e;
}
static void tn_good_request(const tn_world *w, size_t r, uint8_t out[SFV__NCM_SIZE]) {
    sfv__ncm_make(&w->key, 'C', w->peer[r], w->me, w->qpn[r], NULL, out);
}
static void tn_good_answer(const tn_world *w, size_t j, uint8_t out[SFV__NCM_SIZE]) {
    sfv__ncm_make(&w->key, 'A', w->peer[j], w->me, w->qpn[j], w->req[j], out);
}
/* m's MAC made anew with key k, for receiver `to`, QP qpn (and request req): a signed message
   whose fields were changed by someone who has the key. */
static void tn_resign(const sfv__ex_key *k, uint8_t m[SFV__NCM_SIZE], size_t to, uint32_t qpn, const uint8_t *req) {
    sfv__ncm_mac(k, m, to, qpn, req, m + SFV__NCM_BODY);
}
/* The next connect's answer: a CONNECT_RESPONSE from QP qpn with msg as its private data. */
static void tn_answer(uint32_t qpn, const uint8_t *msg, size_t len, bool hdr) {
    tn_script s;
    s.n = 0;
    tn_add(&s, RDMA_CM_EVENT_CONNECT_RESPONSE, qpn, msg, len, hdr);
    fkcm_on(FKCM_CONNECT, s.ev, 1);
}
/* Every rank does its part, in order: the higher ranks' requests (queued at the listen), the
   lower ranks' answers; with a stranger's request first if `stranger`. */
static void tn_script_all(const tn_world *w, bool stranger) {
    tn_script s;
    uint8_t m[SFV__NCM_SIZE];
    size_t r;
    s.n = 0;
    if (stranger && w->me + 1 < w->world) tn_add_request(&s, w, w->me + 1, TN_QP_STRANGER, NULL, 0);
    for (r = w->me + 1; r < w->world; r++) {
        tn_good_request(w, r, m);
        tn_add_request(&s, w, r, w->qpn[r], m, sizeof m);
    }
    if (s.n) fkcm_on(FKCM_LISTEN, s.ev, s.n);
    for (r = 0; r < w->me; r++) {
        tn_good_answer(w, r, m);
        tn_answer(w->qpn[r], m, sizeof m, true);
    }
}
static void tn_script_good(const tn_world *w) { tn_script_all(w, false); }

/* The call, with the promises checked: a valid result, a message on failure, within its
   deadline; nothing of a failed call is left in the CM. */
static sfv_result tn_run(tn_world *w) {
    const double t0 = test_seconds();
    const sfv_result r = sfv_node_connect_cm(w->node, w->nodes, &w->desc, w->ms);
    const double took = test_seconds() - t0;
    if (!tc_valid(r)) FAIL("sfv_node_connect_cm returned %d", (int)r);
    if (r && !sfv_last_error()->message[0]) FAIL("sfv_node_connect_cm failed (%s) without a message", sfv_result_str(r));
    if (took > w->ms / 1000.0 + 0.25) FAIL("sfv_node_connect_cm took %.3f s, deadline %d ms (%s: %s)", took, w->ms, sfv_result_str(r),
                                           r ? sfv_last_error()->message : "");
    if (r) {
        CHECK(!w->node->connected && w->node->keep == NULL);
        CHECK_EQ(fkcm_live_ids(), 0);
        CHECK_EQ(fkcm_live_channels(), 0);
        CHECK_EQ(fkcm_unacked(), 0);
    }
    return r;
}
/* Connected, each rank to the genuine one: its QP number, its barrier region. */
static void tn_check_genuine(const tn_world *w) {
    const sfv__ncm *st = (const sfv__ncm *)w->node->keep;
    size_t r;
    CHECK(w->node->connected && !w->node->poisoned && st && st->n == w->world);
    for (r = 0; r < w->world; r++) {
        uint8_t a[SFV_REMOTE_MR_ENCODED_SIZE], b[SFV_REMOTE_MR_ENCODED_SIZE];
        if (r == w->me) {
            CHECK(st->conns[r] == NULL);
            continue;
        }
        CHECK(st->conns[r] != NULL);
        if (st->conns[r]->peer_qpn != w->qpn[r]) FAIL("rank %zu is connected to QP 0x%x, not the genuine 0x%x", r, st->conns[r]->peer_qpn, w->qpn[r]);
        sfv_remote_mr_encode(w->node->peer_in[r], a);
        sfv_remote_mr_encode(sfv__node_barrier(w->peer[r]), b);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
}
/* After a failure: a node that brought nothing up connects on a second try; one that did is
   broken for good. Leaves a fresh node either way. */
static void tn_after_failure(tn_world *w) {
    fkcm_chaos(0, 0, 0);
    fkcm_reset();
    fk_fail_nth(0);
    if (w->node->poisoned) {
        CHECK_RESULT(sfv_node_connect_cm(w->node, w->nodes, &w->desc, w->ms), SFV_ERR_BROKEN);
    } else {
        tn_script_good(w);
        CHECK_OK(tn_run(w));
        tn_check_genuine(w);
    }
    fkcm_reset();
    tn_new_node(w);
}

/* Good messages: every rank of worlds of 1, 2 and 3, the bytes sent as the peers expect them. */
static void t_node_cm_ok(void) {
    static const size_t shapes[][2] = {{1, 0}, {2, 0}, {2, 1}, {3, 0}, {3, 1}, {3, 2}};
    size_t i;
    for (i = 0; i < COUNT_OF(shapes); i++) {
        tn_world w;
        uint8_t m[SFV__NCM_SIZE], body[SFV__NCM_SIZE];
        const uint8_t *sent;
        size_t n;
        tn_open(&w, shapes[i][0], shapes[i][1], 1000);
        tn_script_good(&w);
        CHECK_OK(tn_run(&w));
        tn_check_genuine(&w);
        if (w.me > 0) { /* the last request sent: to rank me - 1, "SC" header and the message */
            sent = fkcm_sent(FKCM_CONNECT, &n);
            CHECK_EQ(n, SFV__CM_HDR + SFV__NCM_SIZE);
            CHECK(memcmp(sent + SFV__CM_HDR, w.req[w.me - 1], SFV__NCM_SIZE) == 0);
        }
        if (w.me + 1 < w.world) { /* the last answer: to rank world - 1, over its request */
            sfv_endpoint ep;
            CHECK_OK(sfv_channel_endpoint(sfv_multi_channel_peer(sfv_node_multi_channel(w.node), w.world - 1), &ep));
            tn_good_request(&w, w.world - 1, body);
            sfv__ncm_make(&w.key, 'A', w.node, w.world - 1, ep.qpn, body, m);
            sent = fkcm_sent(FKCM_ACCEPT, &n);
            CHECK_EQ(n, SFV__CM_HDR + SFV__NCM_SIZE);
            CHECK(memcmp(sent + SFV__CM_HDR, m, SFV__NCM_SIZE) == 0);
        }
        CHECK_EQ(fkcm_calls(FKCM_REJECT), 0);
        CHECK_RESULT(sfv_node_connect_cm(w.node, w.nodes, &w.desc, 1000), SFV_ERR_INVALID); /* already connected */
        tn_close(&w);
    }
}

/* Rank 0 of 2 gets `bad` first, then rank 1's good request: bad is rejected with a reason (why,
   if not NULL, in it), takes no place, and the good one is accepted. */
static void tn_reject_then_good(tn_world *w, const fkcm_event *bad, const char *why) {
    tn_script s;
    uint8_t m[SFV__NCM_SIZE];
    const uint8_t *reason;
    size_t n;
    s.n = 0;
    s.ev[s.n++] = *bad;
    tn_good_request(w, 1, m);
    tn_add_request(&s, w, 1, w->qpn[1], m, sizeof m);
    fkcm_on(FKCM_LISTEN, s.ev, s.n);
    CHECK_OK(tn_run(w));
    tn_check_genuine(w);
    CHECK_EQ(fkcm_calls(FKCM_REJECT), 1);
    reason = fkcm_sent(FKCM_REJECT, &n);
    CHECK(reason && n > 0);
    if (why && (n < strlen(why) || memcmp(reason, why, strlen(why)) != 0)) FAIL("rejected for \"%.*s\", not \"%s\"", (int)n, (const char *)reason, why);
    fkcm_reset();
    tn_new_node(w);
}

/* Requests that must be rejected: missing, short, long with bytes after, unsigned or badly
   signed (every bit of the message flipped), signed by the key but wrong (kind, version, rank
   out of the world or this rank, world size, barrier region, another QP, another receiver),
   from another address; and requests that are fine (zero padding, no "SC" header). */
static void t_node_cm_bad_requests(void) {
    tn_world w;
    tn_script s;
    uint8_t good[SFV__NCM_SIZE], m[256];
    sfv__ex_key other;
    size_t len, bit;
    const uint32_t q = TN_QP_STRANGER;
    tn_open(&w, 2, 0, 1000);
    tn_good_request(&w, 1, good);
    /* missing: nothing, the header alone, NULL with a length */
    s.n = 0;
    tn_reject_then_good(&w, tn_add_request(&s, &w, 1, q, NULL, 0), "not a safeverbs node");
    s.n = 0;
    tn_reject_then_good(&w, tn_add(&s, RDMA_CM_EVENT_CONNECT_REQUEST, q, NULL, 0, false), "not a safeverbs node");
    s.n = 0;
    tn_reject_then_good(&w, tn_add_request(&s, &w, 1, q, NULL, SFV__NCM_SIZE), "not a safeverbs node");
    /* short: the good message cut anywhere, with and without the header */
    for (len = 1; len < SFV__NCM_SIZE; len++) {
        s.n = 0;
        tn_reject_then_good(&w, tn_add_request(&s, &w, 1, w.qpn[1], good, len), "not a safeverbs node");
        s.n = 0;
        tn_reject_then_good(&w, tn_add(&s, RDMA_CM_EVENT_CONNECT_REQUEST, w.qpn[1], good, len, false), "not a safeverbs node");
    }
    /* long: zero padding is the CM's (accepted), any other byte after the message is not */
    memset(m, 0, sizeof m);
    memcpy(m, good, sizeof good);
    for (len = SFV__NCM_SIZE + 1; len <= 255 - SFV__CM_HDR; len += 13) {
        s.n = 0;
        tn_add_request(&s, &w, 1, w.qpn[1], m, len);
        fkcm_on(FKCM_LISTEN, s.ev, s.n);
        CHECK_OK(tn_run(&w));
        tn_check_genuine(&w);
        tn_new_node(&w);
        m[len - 1] = 1;
        s.n = 0;
        tn_reject_then_good(&w, tn_add_request(&s, &w, 1, w.qpn[1], m, len), "bytes after the message");
        m[len - 1] = 0;
    }
    /* no "SC" header: the message alone is as good */
    s.n = 0;
    tn_add(&s, RDMA_CM_EVENT_CONNECT_REQUEST, w.qpn[1], good, sizeof good, false)->src = FKCM_ADDR1;
    fkcm_on(FKCM_LISTEN, s.ev, s.n);
    CHECK_OK(tn_run(&w));
    tn_check_genuine(&w);
    tn_new_node(&w);
    /* every bit flipped, one at a time (the genuine QP number: only the bytes are wrong) */
    for (bit = 0; bit < SFV__NCM_SIZE * 8; bit++) {
        memcpy(m, good, sizeof good);
        m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        s.n = 0;
        tn_reject_then_good(&w, tn_add_request(&s, &w, 1, w.qpn[1], m, SFV__NCM_SIZE), NULL);
    }
    /* no MAC, another key's, a MAC for another QP, another receiver (itself) */
    memcpy(m, good, sizeof good);
    memset(m + SFV__NCM_BODY, 0, 16);
    s.n = 0;
    tn_reject_then_good(&w, tn_add_request(&s, &w, 1, w.qpn[1], m, SFV__NCM_SIZE), "it did not prove the job key");
    other = w.key;
    other.bytes = (const uint8_t *)"another job's key";
    other.len = strlen((const char *)other.bytes);
    memcpy(m, good, sizeof good);
    tn_resign(&other, m, 0, w.qpn[1], NULL);
    s.n = 0;
    tn_reject_then_good(&w, tn_add_request(&s, &w, 1, w.qpn[1], m, SFV__NCM_SIZE), "it did not prove the job key");
    s.n = 0; /* the genuine request, replayed with a stranger's QP number */
    tn_reject_then_good(&w, tn_add_request(&s, &w, 1, q, good, SFV__NCM_SIZE), "it did not prove the job key");
    memcpy(m, good, sizeof good);
    tn_resign(&w.key, m, 1, w.qpn[1], NULL);
    s.n = 0;
    tn_reject_then_good(&w, tn_add_request(&s, &w, 1, w.qpn[1], m, SFV__NCM_SIZE), "it did not prove the job key");
    /* signed with the key, and still wrong */
    {
        static const struct { size_t at; int bytes; uint32_t v; const char *why; } f[] = {
            {2, 1, 'A', "not a safeverbs node"},          /* an answer where a request is due */
            {3, 1, 2, "not a safeverbs node"},            /* version 2 */
            {4, 4, 0, "a rank out of this world"},        /* this rank itself */
            {4, 4, 2, "a rank out of this world"},
            {4, 4, 3, "a rank out of this world"},
            {4, 4, 0xFFFFFFFFu, "a rank out of this world"},
            {8, 4, 0, "another world size"},
            {8, 4, 1, "another world size"},
            {8, 4, 3, "another world size"},
            {8, 4, 0xFFFFFFFFu, "another world size"},
            {12, 1, 'X', "a barrier region"},             /* not a region */
            {15, 1, 1, "a barrier region"},               /* its reserved byte */
            {24, 8, 8, "a barrier region"},               /* a length below world * 8 */
            {24, 8, 0, "a barrier region"},
            {16, 8, 0xFFFFFFFFu, "a barrier region"},     /* addr + length wraps (the addr's low half: with length 16 below) */
        };
        size_t i;
        for (i = 0; i < COUNT_OF(f); i++) {
            memcpy(m, good, sizeof good);
            if (f[i].at == 16) { sfv__put_be(m + 16, UINT64_MAX - 4, 8); sfv__put_be(m + 24, 16, 8); }
            else sfv__put_be(m + f[i].at, f[i].v, f[i].bytes);
            tn_resign(&w.key, m, 0, w.qpn[1], NULL);
            s.n = 0;
            tn_reject_then_good(&w, tn_add_request(&s, &w, 1, w.qpn[1], m, SFV__NCM_SIZE), f[i].why);
        }
    }
    /* the genuine request from another address (another rank's, one with no device, the wildcard) */
    {
        static const char *const src[] = {FKCM_ADDR0, FKCM_ADDR_NORDMA, "0.0.0.0", "127.0.0.3"};
        size_t i;
        for (i = 0; i < COUNT_OF(src); i++) {
            s.n = 0;
            tn_add_request(&s, &w, 1, w.qpn[1], good, SFV__NCM_SIZE)->src = src[i];
            tn_reject_then_good(&w, &s.ev[0], "not from that rank's address");
        }
    }
    tn_close(&w);
    /* a lower rank's request (rank 1 of 3: rank 0 is connected to, not accepted), signed */
    tn_open(&w, 3, 1, 1000);
    tn_good_request(&w, 0, m);
    s.n = 0;
    tn_add_request(&s, &w, 0, w.qpn[0], m, SFV__NCM_SIZE);
    tn_good_request(&w, 2, m);
    tn_add_request(&s, &w, 2, w.qpn[2], m, SFV__NCM_SIZE);
    fkcm_on(FKCM_LISTEN, s.ev, s.n);
    tn_good_answer(&w, 0, m);
    tn_answer(w.qpn[0], m, SFV__NCM_SIZE, true);
    CHECK_OK(tn_run(&w));
    tn_check_genuine(&w);
    CHECK_EQ(fkcm_calls(FKCM_REJECT), 1);
    tn_close(&w);
}

/* Two requests claiming one rank, a stranger between genuine ranks, strangers only. */
static void t_node_cm_duplicates_strangers(void) {
    tn_world w;
    tn_script s;
    uint8_t g1[SFV__NCM_SIZE], g2[SFV__NCM_SIZE], m[SFV__NCM_SIZE];
    const uint8_t *reason;
    size_t n;
    tn_open(&w, 3, 0, 1000);
    tn_good_request(&w, 1, g1);
    tn_good_request(&w, 2, g2);
    /* the same request twice (a replay): the first is rank 1, the second takes no place */
    s.n = 0;
    tn_add_request(&s, &w, 1, w.qpn[1], g1, sizeof g1);
    tn_add_request(&s, &w, 1, w.qpn[1], g1, sizeof g1);
    tn_add_request(&s, &w, 2, w.qpn[2], g2, sizeof g2);
    fkcm_on(FKCM_LISTEN, s.ev, s.n);
    CHECK_OK(tn_run(&w));
    tn_check_genuine(&w);
    CHECK_EQ(fkcm_calls(FKCM_REJECT), 1);
    reason = fkcm_sent(FKCM_REJECT, &n);
    CHECK(n == strlen("a rank already connected") && memcmp(reason, "a rank already connected", n) == 0);
    fkcm_reset();
    tn_new_node(&w);
    /* a second request for rank 1 signed with the key (another QP, rank 2's address): refused */
    memcpy(m, g1, sizeof m);
    tn_resign(&w.key, m, 0, TN_QP_STRANGER, NULL);
    s.n = 0;
    tn_add_request(&s, &w, 1, w.qpn[1], g1, sizeof g1);
    tn_add_request(&s, &w, 2, TN_QP_STRANGER, m, sizeof m);
    tn_add_request(&s, &w, 2, w.qpn[2], g2, sizeof g2);
    fkcm_on(FKCM_LISTEN, s.ev, s.n);
    CHECK_OK(tn_run(&w));
    tn_check_genuine(&w);
    CHECK_EQ(fkcm_calls(FKCM_REJECT), 1);
    fkcm_reset();
    tn_new_node(&w);
    /* rank 2 before rank 1, strangers in the middle, each a little later */
    s.n = 0;
    tn_add_request(&s, &w, 2, w.qpn[2], g2, sizeof g2);
    tn_add_request(&s, &w, 1, TN_QP_STRANGER, g1, 20)->delay_ms = 10;
    tn_add_request(&s, &w, 1, TN_QP_STRANGER, NULL, 0)->delay_ms = 20;
    tn_add(&s, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0, false)->delay_ms = 25; /* (a listener ignores it) */
    tn_add_request(&s, &w, 1, w.qpn[1], g1, sizeof g1)->delay_ms = 30;
    tn_add_request(&s, &w, 1, w.qpn[1], g1, sizeof g1)->delay_ms = 30; /* left to the listener's destroy */
    fkcm_on(FKCM_LISTEN, s.ev, s.n);
    CHECK_OK(tn_run(&w));
    tn_check_genuine(&w);
    CHECK_EQ(fkcm_calls(FKCM_REJECT), 3);
    fkcm_reset();
    tn_new_node(&w);
    /* strangers only: a timeout naming rank 1, at the deadline; nothing was brought up */
    w.ms = 200;
    s.n = 0;
    for (n = 0; n < 8; n++) tn_add_request(&s, &w, 1, TN_QP_STRANGER + (uint32_t)n, g1, n * 7)->delay_ms = (int)n * 10;
    fkcm_on(FKCM_LISTEN, s.ev, s.n);
    {
        const double t0 = test_seconds();
        CHECK_RESULT(tn_run(&w), SFV_ERR_TIMEOUT);
        CHECK(test_seconds() - t0 >= 0.19);
    }
    CHECK(strstr(sfv_last_error()->message, "rank 1 did not connect") != NULL);
    CHECK_EQ(fkcm_calls(FKCM_REJECT), 8);
    CHECK(!w.node->poisoned);
    tn_after_failure(&w);
    /* rank 1 came, rank 2 never did (strangers in its place): a timeout naming rank 2, and the
       node is broken (rank 1's channel was brought up) */
    s.n = 0;
    tn_add_request(&s, &w, 1, w.qpn[1], g1, sizeof g1);
    tn_add_request(&s, &w, 2, TN_QP_STRANGER, g2, sizeof g2);
    tn_add_request(&s, &w, 2, w.qpn[2], g1, sizeof g1);
    fkcm_on(FKCM_LISTEN, s.ev, s.n);
    CHECK_RESULT(tn_run(&w), SFV_ERR_TIMEOUT);
    CHECK(strstr(sfv_last_error()->message, "rank 2 did not connect") != NULL);
    CHECK(strstr(sfv_last_error()->message, "broken") != NULL);
    CHECK(w.node->poisoned);
    tn_after_failure(&w);
    tn_close(&w);
}

/* This rank's connect to a lower rank, answered with m (len bytes, hdr: after an "SC" header)
   from QP qpn: refused (SFV_ERR_PERMISSION, why in the message), and the node is broken. */
static void tn_bad_answer(tn_world *w, uint32_t qpn, const uint8_t *m, size_t len, bool hdr, const char *why) {
    tn_answer(qpn, m, len, hdr);
    CHECK_RESULT(tn_run(w), SFV_ERR_PERMISSION);
    if (why && !strstr(sfv_last_error()->message, why)) FAIL("refused for \"%s\", not \"%s\"", sfv_last_error()->message, why);
    CHECK(strstr(sfv_last_error()->message, "rank 0's answer is refused") != NULL);
    CHECK(w->node->poisoned);
    if (fkcm_calls(FKCM_DISCONNECT) != 1) FAIL("%ld disconnects (%s)", fkcm_calls(FKCM_DISCONNECT), sfv_last_error()->message); /* the connection it made is closed */
    tn_after_failure(w);
}

/* Answers: bad private data in the CONNECT_RESPONSE, a REJECTED with bytes or without, other
   events; and on the accepting side, what comes after the accept. */
static void t_node_cm_bad_answers(void) {
    tn_world w;
    uint8_t good[SFV__NCM_SIZE], m[256], req[SFV__NCM_SIZE];
    size_t len, bit;
    tn_open(&w, 2, 1, 1000);
    tn_good_answer(&w, 0, good);
    tn_bad_answer(&w, w.qpn[0], NULL, 0, false, "not a safeverbs node");
    tn_bad_answer(&w, w.qpn[0], NULL, 0, true, "not a safeverbs node");
    tn_bad_answer(&w, w.qpn[0], NULL, 40, true, "not a safeverbs node");
    for (len = 1; len < SFV__NCM_SIZE; len += 3) {
        tn_good_answer(&w, 0, good);
        tn_bad_answer(&w, w.qpn[0], good, len, true, "not a safeverbs node");
    }
    memset(m, 0, sizeof m);
    tn_good_answer(&w, 0, good);
    memcpy(m, good, sizeof good);
    for (len = SFV__NCM_SIZE + 1; len <= 255 - SFV__CM_HDR; len += 29) { /* zeroes after it: fine */
        tn_good_answer(&w, 0, m);
        tn_answer(w.qpn[0], m, len, true);
        CHECK_OK(tn_run(&w));
        tn_check_genuine(&w);
        fkcm_reset();
        tn_new_node(&w);
        tn_good_answer(&w, 0, m);
        m[len - 1] = 0x80;
        tn_bad_answer(&w, w.qpn[0], m, len, true, "bytes after the message");
        m[len - 1] = 0;
    }
    for (bit = 0; bit < SFV__NCM_SIZE * 8; bit += 5) {
        tn_good_answer(&w, 0, m);
        m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        tn_bad_answer(&w, w.qpn[0], m, SFV__NCM_SIZE, true, NULL);
    }
    /* the genuine answer from another QP; signed over another request; our own request reflected */
    tn_good_answer(&w, 0, m);
    tn_bad_answer(&w, TN_QP_STRANGER, m, SFV__NCM_SIZE, true, "it did not prove the job key");
    memcpy(req, w.req[0], sizeof req);
    req[40] ^= 1;
    sfv__ncm_make(&w.key, 'A', w.peer[0], 1, w.qpn[0], req, m);
    tn_bad_answer(&w, w.qpn[0], m, SFV__NCM_SIZE, true, "it did not prove the job key");
    memcpy(m, w.req[0], SFV__NCM_SIZE);
    tn_bad_answer(&w, w.qpn[0], m, SFV__NCM_SIZE, true, "not a safeverbs node");
    /* signed with the key, and wrong: this rank, a rank out of the world, another world size */
    {
        static const struct { size_t at; uint32_t v; const char *why; } f[] = {
            {4, 1, "a rank out of this world"}, {4, 2, "a rank out of this world"}, {8, 3, "another world size"}, {8, 1, "another world size"},
        };
        size_t i;
        for (i = 0; i < COUNT_OF(f); i++) {
            tn_good_answer(&w, 0, m);
            sfv__put_be(m + f[i].at, f[i].v, 4);
            tn_resign(&w.key, m, 1, w.qpn[0], w.req[0]);
            tn_bad_answer(&w, w.qpn[0], m, SFV__NCM_SIZE, true, f[i].why);
        }
    }
    /* REJECTED with bytes (a node's reason, nonsense, a good message): the rank's answer, nothing
       was brought up */
    {
        static const char why[] = "it did not prove the job key";
        const void *const rs[] = {why, good, m};
        const size_t ns[] = {sizeof why - 1, sizeof good, 148};
        size_t i;
        memset(m, 0xEE, sizeof m);
        tn_good_answer(&w, 0, good);
        for (i = 0; i < COUNT_OF(rs); i++) {
            fkcm_event ev = tc_ev(RDMA_CM_EVENT_REJECTED);
            ev.status = 28;
            ev.priv = rs[i];
            ev.priv_len = ns[i];
            tc_on1(FKCM_CONNECT, ev);
            CHECK_RESULT(tn_run(&w), SFV_ERR_REJECTED);
            CHECK(!w.node->poisoned);
            tn_after_failure(&w);
        }
    }
    /* not listening yet (reason 8), a full backlog (no bytes), then the answer: connected */
    {
        fkcm_event ev = tc_ev(RDMA_CM_EVENT_REJECTED);
        ev.status = 8;
        tc_on1(FKCM_CONNECT, ev);
        ev.status = 28;
        tc_on1(FKCM_CONNECT, ev);
        ev.priv_len = 20; /* NULL with a length: no bytes */
        tc_on1(FKCM_CONNECT, ev);
        tn_good_answer(&w, 0, good);
        tn_answer(w.qpn[0], good, sizeof good, true);
        CHECK_OK(tn_run(&w));
        tn_check_genuine(&w);
        CHECK_EQ(fkcm_calls(FKCM_CONNECT), 4);
        fkcm_reset();
        tn_new_node(&w);
    }
    /* other events where the answer is due, a good message in them: nothing brought up */
    {
        static const int types[] = {RDMA_CM_EVENT_ESTABLISHED, RDMA_CM_EVENT_CONNECT_REQUEST, RDMA_CM_EVENT_DISCONNECTED,
                                    RDMA_CM_EVENT_UNREACHABLE, RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_ADDR_CHANGE};
        size_t i;
        for (i = 0; i < COUNT_OF(types); i++) {
            tn_script s;
            s.n = 0;
            tn_good_answer(&w, 0, good);
            tn_add(&s, types[i], w.qpn[0], good, sizeof good, true);
            fkcm_on(FKCM_CONNECT, s.ev, 1);
            CHECK(tn_run(&w) != SFV_OK);
            CHECK(!w.node->poisoned);
            tn_after_failure(&w);
        }
    }
    tn_close(&w);
    /* an answer that proves the key and says another rank (rank 2 of 3 connects to rank 0; rank 1 answers) */
    tn_open(&w, 3, 2, 1000);
    sfv__ncm_make(&w.key, 'A', w.peer[1], 2, w.qpn[0], w.req[0], m);
    tn_bad_answer(&w, w.qpn[0], m, SFV__NCM_SIZE, true, "it says another rank");
    tn_close(&w);
    /* the accepting side: after the accept, ESTABLISHED with bytes is fine; REJECTED, a
       disconnect, nothing at all: the accepted channel was brought up, the node is broken */
    tn_open(&w, 2, 0, 300);
    {
        static const int types[] = {RDMA_CM_EVENT_ESTABLISHED, RDMA_CM_EVENT_REJECTED, RDMA_CM_EVENT_CONNECT_ERROR,
                                    RDMA_CM_EVENT_TIMEWAIT_EXIT, RDMA_CM_EVENT_CONNECT_REQUEST, -1};
        size_t i;
        for (i = 0; i < COUNT_OF(types); i++) {
            tn_script s;
            sfv_result r;
            s.n = 0;
            memset(m, 0x33, sizeof m);
            if (types[i] >= 0) tn_add(&s, types[i], TN_QP_STRANGER, m, 100, false);
            fkcm_on(FKCM_ACCEPT, s.ev, s.n);
            tn_script_good(&w);
            r = tn_run(&w);
            if (types[i] == RDMA_CM_EVENT_ESTABLISHED) {
                CHECK_OK(r);
                tn_check_genuine(&w);
                fkcm_reset();
                tn_new_node(&w);
                continue;
            }
            CHECK_RESULT(r, types[i] < 0 ? SFV_ERR_TIMEOUT : types[i] == RDMA_CM_EVENT_TIMEWAIT_EXIT || types[i] == RDMA_CM_EVENT_CONNECT_REQUEST ? SFV_ERR_DRIVER : SFV_ERR_UNREACHABLE);
            CHECK(w.node->poisoned);
            tn_after_failure(&w);
        }
    }
    tn_close(&w);
}

/* Peers that never answer, at every step, and answers after the deadline: the call returns at
   its deadline, not later. */
static void t_node_cm_deadlines(void) {
    static const enum fkcm_fn steps[] = {FKCM_RESOLVE_ADDR, FKCM_RESOLVE_ROUTE, FKCM_CONNECT, FKCM_ACCEPT, FKCM_LISTEN};
    tn_world w;
    size_t i;
    tn_open(&w, 3, 1, 150);
    for (i = 0; i < COUNT_OF(steps); i++) {
        const double t0 = test_seconds();
        fkcm_on(steps[i], NULL, 0); /* silent */
        tn_script_good(&w);
        CHECK_RESULT(tn_run(&w), SFV_ERR_TIMEOUT);
        CHECK(test_seconds() - t0 >= 0.14);
        CHECK(w.node->poisoned == (steps[i] == FKCM_ACCEPT || steps[i] == FKCM_LISTEN)); /* rank 0's channel came up before */
        tn_after_failure(&w);
    }
    /* the answer and the request, late */
    {
        uint8_t m[SFV__NCM_SIZE];
        tn_script s;
        s.n = 0;
        tn_good_answer(&w, 0, m);
        tn_add(&s, RDMA_CM_EVENT_CONNECT_RESPONSE, w.qpn[0], m, sizeof m, true)->delay_ms = 400;
        fkcm_on(FKCM_CONNECT, s.ev, 1);
        CHECK_RESULT(tn_run(&w), SFV_ERR_TIMEOUT);
        CHECK(!w.node->poisoned);
        tn_after_failure(&w);
        s.n = 0;
        tn_good_request(&w, 2, m);
        tn_add_request(&s, &w, 2, w.qpn[2], m, sizeof m)->delay_ms = 400;
        fkcm_on(FKCM_LISTEN, s.ev, 1);
        tn_good_answer(&w, 0, m);
        tn_answer(w.qpn[0], m, sizeof m, true);
        CHECK_RESULT(tn_run(&w), SFV_ERR_TIMEOUT);
        CHECK(strstr(sfv_last_error()->message, "rank 2 did not connect") != NULL);
        tn_after_failure(&w);
        /* the request in time, its ESTABLISHED not: the accept has what is left */
        s.n = 0;
        tn_good_request(&w, 2, m);
        tn_add_request(&s, &w, 2, w.qpn[2], m, sizeof m)->delay_ms = 100;
        fkcm_on(FKCM_LISTEN, s.ev, 1);
        s.n = 0;
        tn_add(&s, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0, false)->delay_ms = 300;
        fkcm_on(FKCM_ACCEPT, s.ev, 1);
        tn_good_answer(&w, 0, m);
        tn_answer(w.qpn[0], m, sizeof m, true);
        CHECK_RESULT(tn_run(&w), SFV_ERR_TIMEOUT);
        tn_after_failure(&w);
    }
    /* a lower rank that keeps rejecting without a reason (a full backlog): retried to the deadline */
    {
        fkcm_event ev = tc_ev(RDMA_CM_EVENT_REJECTED);
        const double t0 = test_seconds();
        int k;
        ev.status = 28;
        for (k = 0; k < 60; k++) tc_on1(FKCM_CONNECT, ev);
        CHECK_RESULT(tn_run(&w), SFV_ERR_TIMEOUT);
        CHECK(test_seconds() - t0 >= 0.14);
        CHECK(strstr(sfv_last_error()->message, "rank 0") != NULL);
        CHECK(fkcm_calls(FKCM_CONNECT) > 3);
        CHECK(!w.node->poisoned);
        tn_after_failure(&w);
    }
    tn_close(&w);
}

/* Each rdma_* call failing, at each of its calls in a connect of rank 1 of 3 (a listen, a
   connect, an accept), with assorted errno (0 too); then each of the fake NIC's verbs and the
   library's allocations. A failure before a channel came up leaves the node as it was (it
   connects on a second try), after one it is broken. */
static void t_node_cm_call_failures(void) {
    static const int errs[] = {EIO, 0, EINTR, EAGAIN, ENOMEM, ETIMEDOUT, EADDRINUSE};
    tn_world w;
    int fn;
    size_t e;
    long nth;
    tn_open(&w, 3, 1, 500);
    for (fn = 0; fn < FKCM_FNS; fn++)
        for (e = 0; e < COUNT_OF(errs); e++)
            for (nth = 1; nth < 100; nth++) {
                sfv_result r;
                tn_script_all(&w, true); /* (a stranger first: a reject too) */
                fkcm_fail((enum fkcm_fn)fn, (int)nth, errs[e], 0);
                r = tn_run(&w);
                if (!fkcm_failures()) { /* past its last call */
                    CHECK_OK(r);
                    tn_check_genuine(&w);
                    fkcm_reset();
                    tn_new_node(&w);
                    break;
                }
                if (getenv("TC_TRACE")) fprintf(stderr, "fn %d errno %d call %ld: %s %s\n", fn, errs[e], nth, sfv_result_str(r), r ? sfv_last_error()->message : "");
                if (r == SFV_OK) {
                    tn_check_genuine(&w); /* a failure it may live with: EINTR or EAGAIN of a read, a reject's */
                    fkcm_reset();
                    tn_new_node(&w);
                } else {
                    tn_after_failure(&w);
                }
            }
    for (nth = 1; nth < 2000; nth++) {
        sfv_result r;
        tn_script_all(&w, true);
        fk_fail_nth(nth);
        r = tn_run(&w);
        if (!fk_failed()) {
            fk_fail_nth(0);
            CHECK_OK(r);
            tn_check_genuine(&w);
            fkcm_reset();
            tn_new_node(&w);
            break;
        }
        fk_fail_nth(0);
        if (r == SFV_OK) {
            tn_check_genuine(&w);
            fkcm_reset();
            tn_new_node(&w);
        } else {
            tn_after_failure(&w);
        }
    }
    CHECK(nth < 2000);
    tn_close(&w);
}

/* A reject without a reason, as the kernel's CM delivers it. The IB CM (rxe
   and RoCE too) reports every REJECTED with IB_CM_REJ_PRIVATE_DATA_SIZE (148) bytes of private
   data, zeroes where the rejecting side gave none (drivers/infiniband/core/cma.c,
   cma_ib_handler). So a full backlog (the kernel's reject) or a listener's rdma_reject(id, NULL,
   0) arrives as 148 zero bytes, never as 0 bytes: sfv__ncm_connect must try again, as it does
   for 0 bytes (it gave up at the first full backlog with SFV_ERR_REJECTED). */
static void t_node_cm_reject_padded(void) {
    static const uint8_t zeroes[148];
    tn_world w;
    uint8_t m[SFV__NCM_SIZE];
    fkcm_event ev = tc_ev(RDMA_CM_EVENT_REJECTED);
    sfv_result r;
    tn_open(&w, 2, 1, 1000);
    ev.status = 28; /* IB_CM_REJ_CONSUMER_DEFINED */
    ev.priv = zeroes;
    ev.priv_len = sizeof zeroes;
    tc_on1(FKCM_CONNECT, ev);
    tn_good_answer(&w, 0, m);
    tn_answer(w.qpn[0], m, sizeof m, true);
    r = tn_run(&w);
    CHECK_OK(r);
    tn_check_genuine(&w);
    CHECK_EQ(fkcm_calls(FKCM_CONNECT), 2);
    tn_close(&w);
}

/* The accept's timeout was the deadline read twice
   (sfv__ms_until(deadline) ? sfv__ms_until(deadline) : 1): when the deadline passes between the
   two reads (the thread preempted there, or a clock tick), the accept gets 0, which
   sfv__cm_timeout takes as "the channel's timeout_ms" (10 s by default), and a silent peer
   holds the call that long past its deadline. Here the clock jumps 300 ms between the reads
   (deadline 300 ms, the request at 100 ms, channels' timeout 1 s): the call took 1.1 s. The
   same pattern fed rdma_resolve_addr and rdma_resolve_route a timeout of 0. Now read once. */
static void t_node_cm_deadline_read_twice(void) {
    tn_world w;
    tn_script s;
    uint8_t m[SFV__NCM_SIZE];
    double t0, took;
    tn_open(&w, 2, 0, 300);
    w.chan_ms = 1000;
    tn_new_node(&w);
    s.n = 0;
    tn_good_request(&w, 1, m);
    tn_add_request(&s, &w, 1, w.qpn[1], m, sizeof m)->delay_ms = 100;
    fkcm_on(FKCM_LISTEN, s.ev, s.n);
    fkcm_on(FKCM_ACCEPT, NULL, 0); /* the peer never confirms */
    tc_jump_after = 1; /* the request read: the next read of the clock is the first of the two */
    tc_jump_reads = 0;
    tc_jump_at = 2;
    tc_jump_ns = 300000000;
    t0 = test_seconds();
    CHECK_RESULT(sfv_node_connect_cm(w.node, w.nodes, &w.desc, w.ms), SFV_ERR_TIMEOUT);
    took = test_seconds() - t0;
    tc_jump_after = -1;
    CHECK(tc_jump_reads == 2); /* the jump came where planned */
    if (took > 0.1 + 0.25) FAIL("sfv_node_connect_cm took %.3f s (deadline 300 ms, at most 0.1 s of it real)", took);
    tn_close(&w);
}

/* ---- seeded random CM traffic for a node --------------------------------------------------- */
/* A message of rank r to this rank, good or spoiled at random: bytes cut, added or flipped, a
   field changed and signed anew, a MAC of another key, nonsense. *genuine: untouched. */
static size_t tn_rand_msg(unsigned *s, const tn_world *w, char kind, size_t r, uint8_t *out, bool *genuine) {
    uint8_t good[SFV__NCM_SIZE];
    size_t len = SFV__NCM_SIZE, k;
    if (kind == 'C') tn_good_request(w, r, good); else tn_good_answer(w, r, good);
    memcpy(out, good, sizeof good);
    *genuine = false;
    switch (tc_rand(s) % 10) {
    case 0: len = tc_rand(s) % SFV__NCM_SIZE; break;
    case 1: len = SFV__NCM_SIZE + 1 + tc_rand(s) % 100; memset(out + SFV__NCM_SIZE, 0, len - SFV__NCM_SIZE); out[len - 1 - tc_rand(s) % (len - SFV__NCM_SIZE)] = (uint8_t)(1 + tc_rand(s) % 255); break;
    case 2: k = tc_rand(s) % (SFV__NCM_SIZE * 8); out[k / 8] ^= (uint8_t)(1u << (k % 8)); break;
    case 3: { /* a field made wrong by someone with the key (one who makes it right is a rank) */
        const uint32_t ranks[] = {(uint32_t)w->me, (uint32_t)w->world, 0xFFFFFFFFu, w->me && kind == 'C' ? 0 : (uint32_t)w->me};
        const uint32_t worlds[] = {(uint32_t)w->world + 1, (uint32_t)w->world - 1, 0, 0xFFFFFFFFu};
        k = tc_rand(s) % 3;
        if (k == 0) sfv__put_be(out + 4, ranks[tc_rand(s) % 4], 4);
        else if (k == 1) sfv__put_be(out + 8, worlds[tc_rand(s) % 4], 4);
        else sfv__put_be(out + 24, tc_rand(s) % 2 * 8, 8); /* the barrier region's length: below world * 8 */
        tn_resign(&w->key, out, w->me, w->qpn[r], kind == 'C' ? NULL : w->req[r]);
        break;
    }
    case 4: len = tc_rand(s) % 120; for (k = 0; k < len; k++) out[k] = (uint8_t)tc_rand(s); break;
    case 5: out[2] = kind == 'C' ? 'A' : 'C'; break;
    default:
        *genuine = true;
        if (tc_rand(s) % 4 == 0) { len = SFV__NCM_SIZE + tc_rand(s) % 100; memset(out + SFV__NCM_SIZE, 0, len - SFV__NCM_SIZE); }
    }
    if (len >= SFV__NCM_SIZE && memcmp(out, good, sizeof good) == 0) { /* (a change that changed nothing) */
        for (k = SFV__NCM_SIZE; k < len && !out[k]; k++) {}
        *genuine = k == len;
    }
    return len;
}

static void tn_random_run(unsigned seed) {
    tn_world w;
    unsigned s = seed;
    const size_t world = 2 + seed % 2, me = tc_rand(&s) % world;
    bool sent_genuine[TN_MAX] = {false};
    size_t r, k;
    sfv_result res;
    tn_open(&w, world, me, 40 + (int)(tc_rand(&s) % 120));
    /* the higher ranks' requests, strangers and copies among them, in any order, some late */
    if (me + 1 < world) {
        tn_script sc;
        const int n = 1 + (int)(tc_rand(&s) % 8);
        sc.n = 0;
        while (sc.n < n) {
            uint8_t m[256];
            bool genuine;
            size_t len;
            fkcm_event *e;
            r = me + 1 + tc_rand(&s) % (world - me - 1);
            len = tn_rand_msg(&s, &w, 'C', r, m, &genuine);
            e = tn_add(&sc, RDMA_CM_EVENT_CONNECT_REQUEST, tc_rand(&s) % 4 ? w.qpn[r] : TN_QP_STRANGER, tc_rand(&s) % 16 ? m : NULL, len,
                       tc_rand(&s) % 4 != 0 && len <= 251);
            if (e->priv_len > 255) e->priv_len = 255;
            e->src = tc_rand(&s) % 8 ? w.nodes[r].host : w.nodes[tc_rand(&s) % world].host;
            e->delay_ms = tc_rand(&s) % 3 ? 0 : (int)(tc_rand(&s) % 200);
            if (tc_rand(&s) % 10 == 0) e->type = tc_types[tc_rand(&s) % COUNT_OF(tc_types)];
            sent_genuine[r] = sent_genuine[r] || genuine;
        }
        fkcm_on(FKCM_LISTEN, sc.ev, sc.n);
    }
    /* the lower ranks' answers: 1 to 3 attempts each, good or not */
    for (r = 0; r < me; r++) {
        const int attempts = 1 + (int)(tc_rand(&s) % 3);
        int a;
        for (a = 0; a < attempts; a++) {
            tn_script sc;
            uint8_t m[256];
            bool genuine;
            size_t len = tn_rand_msg(&s, &w, 'A', r, m, &genuine);
            const unsigned what = tc_rand(&s) % 8;
            fkcm_event *e;
            sc.n = 0;
            if (what == 0) { fkcm_on(FKCM_CONNECT, NULL, 0); continue; } /* silent */
            e = tn_add(&sc, what == 1 ? RDMA_CM_EVENT_REJECTED : what == 2 ? tc_types[tc_rand(&s) % COUNT_OF(tc_types)] : RDMA_CM_EVENT_CONNECT_RESPONSE,
                       tc_rand(&s) % 4 ? w.qpn[r] : TN_QP_STRANGER, tc_rand(&s) % 16 ? m : NULL, len < 200 ? len : 200, tc_rand(&s) % 4 != 0);
            e->status = tc_rand(&s) % 3 ? 28 : 8;
            if (tc_rand(&s) % 2) e->priv_len = 0;
            e->delay_ms = tc_rand(&s) % 6 ? 0 : (int)(tc_rand(&s) % 200);
        }
    }
    /* the CM's other steps, now and then */
    for (k = 0; k < 3; k++)
        if (tc_rand(&s) % 6 == 0) tc_rand_script(&s, (enum fkcm_fn[]){FKCM_RESOLVE_ADDR, FKCM_RESOLVE_ROUTE, FKCM_ACCEPT}[k],
                                                 (int[]){RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_ROUTE_RESOLVED, RDMA_CM_EVENT_ESTABLISHED}[k]);
    if (seed % 4 == 0) fkcm_chaos(seed, 20, TC_ERRNO0);
    if (tc_trace) fprintf(stderr, "seed %u: rank %zu of %zu, %d ms\n", seed, me, world, w.ms);
    res = tn_run(&w);
    if (tc_trace) fprintf(stderr, "  -> %s: %s\n", sfv_result_str(res), res ? sfv_last_error()->message : "");
    fkcm_chaos(0, 0, 0);
    if (res == SFV_OK) {
        tn_check_genuine(&w); /* whatever came, each rank is the genuine one */
        for (r = me + 1; r < world; r++) CHECK(sent_genuine[r]);
        fkcm_reset();
        tn_new_node(&w);
    } else {
        tn_after_failure(&w);
    }
    tn_close(&w);
}

/* Seeds 1..TN_SEEDS (default 120), each in a child of its own; TN_SEED=n runs seed n alone here
   (TC_TRACE=1 says what it did). */
static void t_node_cm_random(void) {
    const char *one = getenv("TN_SEED"), *env = getenv("TN_SEEDS");
    unsigned n = env ? (unsigned)atoi(env) : 120, seed;
    tc_trace = getenv("TC_TRACE") != NULL;
    if (one) {
        tn_random_run((unsigned)atoi(one));
        return;
    }
    for (seed = 1; seed <= n; seed++) {
        pid_t pid = fork();
        int st = 0;
        CHECK(pid >= 0);
        if (pid == 0) {
            tn_random_run(seed);
            exit(0);
        }
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) FAIL("seed %u failed (status 0x%x): TN_SEED=%u to run it alone", seed, st, seed);
    }
}

/* sfv_cm_accept says "Answers the request (freed, whatever the result)": with out NULL too. */
static void t_accept_out_null(void) {
    tc_env e;
    sfv_cm_listener *l = NULL;
    sfv_cm_request *q;
    long before;
    tc_open(&e);
    before = tc_allocs;
    tc_request(&l, NULL, 0, &q);
    CHECK_RESULT(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, NULL), SFV_ERR_INVALID);
    fprintf(stderr, "    after accept(out NULL): library allocations live %ld, CM ids live %ld\n", tc_allocs, fkcm_live_ids());
    CHECK_EQ(fkcm_live_ids(), 1);     /* the listener's only: the request's id was answered and destroyed */
    CHECK_EQ(tc_allocs, before + 1);  /* the listener only: the request was freed */
    CHECK_OK(sfv_cm_destroy_listener(l));
    tc_close(&e);
}
static void t_accept_channel_out_null(void) {
    tc_env e;
    sfv_cm_listener *l = NULL;
    sfv_cm_request *q;
    sfv_channel *ch;
    long before;
    tc_open(&e);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &ch));
    before = tc_allocs;
    tc_request(&l, NULL, 0, &q);
    CHECK_RESULT(sfv_cm_accept_channel(q, ch, NULL, 0, 1000, NULL), SFV_ERR_INVALID);
    fprintf(stderr, "    after accept_channel(out NULL): library allocations live %ld (before the listener %ld), CM ids live %ld\n",
            tc_allocs, before, fkcm_live_ids());
    CHECK_EQ(fkcm_live_ids(), 1);
    CHECK_EQ(tc_allocs, before + 1);
    CHECK_OK(sfv_cm_destroy_listener(l));
    CHECK_OK(sfv_destroy_channel(ch));
    tc_close(&e);
}

/* The doc of sfv_node_connect_cm: "SFV_ERR_TIMEOUT naming the rank that did not listen or connect
   in time". Rank 1 of 3: lower rank 0's CM never answers the connect, or higher rank 2's RTU never comes. */
static void t_node_cm_timeout_names_rank(void) {
    tn_world w;
    tn_open(&w, 3, 1, 150);
    fkcm_on(FKCM_CONNECT, NULL, 0); /* rank 0: silent */
    tn_script_good(&w);
    CHECK_RESULT(tn_run(&w), SFV_ERR_TIMEOUT);
    fprintf(stderr, "    silent rank 0: \"%s\"\n", sfv_last_error()->message);
    {
        const bool named = strstr(sfv_last_error()->message, "rank 0") != NULL;
        tn_after_failure(&w);
        fkcm_on(FKCM_ACCEPT, NULL, 0); /* rank 2's connection never established */
        tn_script_good(&w);
        CHECK_RESULT(tn_run(&w), SFV_ERR_TIMEOUT);
        fprintf(stderr, "    rank 2 never establishes: \"%s\"\n", sfv_last_error()->message);
        CHECK(named);
        CHECK(strstr(sfv_last_error()->message, "rank 2") != NULL);
    }
    tn_close(&w);
}

/* ---- from a hostile review (session 21): each failed on the header before ---------------- */
/* sfv_cm_destroy_listener says requests taken and not answered must be answered first, and
   says nothing of what happens otherwise: the request's id lives on the listener's event
   channel, which the destroy freed (librdmacm: the answer then writes through freed memory;
   the fake aborts). The destroy refuses instead (SFV_ERR_INVALID, the listener kept) until
   every request taken from it is answered, by a reject, an accept or a failed accept. */
static void t_destroy_listener_with_taken_request(void) {
    tc_env e;
    sfv_cm_listener *l = NULL;
    sfv_cm_request *a, *b;
    sfv_cm_conn *c;
    tc_open(&e);
    tc_request(&l, NULL, 0, &a);
    tc_request(&l, NULL, 0, &b);
    CHECK_RESULT(sfv_cm_destroy_listener(l), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "2 request") != NULL);
    CHECK_OK(sfv_cm_reject(a, NULL, 0));
    CHECK_RESULT(sfv_cm_destroy_listener(l), SFV_ERR_INVALID);
    CHECK_OK(sfv_cm_accept(b, e.pd, NULL, NULL, 0, 1000, &c));
    CHECK_OK(sfv_cm_destroy_listener(l)); /* the accepted id moved to the connection's channel */
    CHECK_OK(sfv_cm_close(c, 0));
    l = NULL;
    tc_request(&l, NULL, 0, &a); /* a failed accept answers it too */
    CHECK_RESULT(sfv_cm_accept(a, e.pd, NULL, NULL, SFV_CM_ACCEPT_PRIVATE_MAX + 1, 1000, &c), SFV_ERR_INVALID);
    CHECK_OK(sfv_cm_destroy_listener(l));
    tc_close(&e);
}

/* sfv_cm_close "frees everything" and always said SFV_OK: when the destroy of the channel the
   connection owns was refused (its QP's or its CQ's), the channel (QP, CQ, a reference on the
   PD and so on the device) was left behind with no handle to free it, and the close said it
   succeeded. The refusal is returned now, the connection kept, and a second close frees all. */
static void t_close_destroy_refused(void) {
    static const char *const verbs[] = {"ibv_destroy_qp", "ibv_destroy_cq"};
    size_t i;
    for (i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
        tc_env e;
        sfv_cm_conn *c;
        tc_open(&e);
        CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
        fk_fail_name(verbs[i], 1);
        CHECK_RESULT(sfv_cm_close(c, 0), SFV_ERR_DRIVER);
        CHECK(strcmp(sfv_last_error()->verb, verbs[i]) == 0);
        CHECK_OK(sfv_cm_close(c, 0));
        CHECK_EQ(fkcm_calls(FKCM_DISCONNECT), 1);
        tc_close(&e);
    }
}

/* ---- from a hostile review (session 21, review e) ------------------------------------------ */
/* A caller's channel whose connection this side closed: its work is flushed by the close, no
   work request failed, and nothing expired. The flush's hint (session 21) named only "a
   deadline expired, a poll failed or a batch was taken only in part" (the refusal of a post
   names the close); it names the close too now. */
static void t_close_flush_hint(void) {
    tc_env e;
    sfv_channel *ch;
    sfv_cm_conn *c;
    sfv_pending p;
    sfv_work_completion wc;
    sfv_scatter_element s;
    tc_open(&e);
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &ch));
    CHECK_OK(sfv_cm_connect_channel(ch, NULL, FKCM_ADDR0, PORT, NULL, 0, 1000, &c));
    CHECK_OK(sfv_channel_post_receive(ch, &s, 1, &p));
    CHECK_OK(sfv_cm_close(c, 0));
    CHECK_RESULT(sfv_pending_wait(&p, 1000, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    CHECK(strstr(sfv_last_error()->message, "connection was closed") != NULL);
    CHECK_OK(sfv_destroy_channel(ch));
    tc_close(&e);
}

/* A close whose destroy of the connection's channel was refused past its QP (ibv_destroy_cq)
   keeps the connection and the channel, as documented; the channel, sfv_cm_channel's, is the
   caller's to destroy again too (the destroy says to), as before any close: the connection then
   forgets it. After the refusal the destroy had already detached the channel from the
   connection, and the close put it back only in c->ch: the destroy freed the channel, the
   connection still named it, and the next close used it (freed memory, a second destroy). */
static void t_close_refused_then_channel_destroyed(void) {
    tc_env e;
    sfv_cm_conn *c;
    sfv_channel *ch;
    tc_open(&e);
    CHECK_OK(tc_connect(&e, NULL, 0, 1000, &c));
    fk_fail_name("ibv_destroy_cq", 1);
    CHECK_RESULT(sfv_cm_close(c, 0), SFV_ERR_DRIVER);
    ch = sfv_cm_channel(c);
    CHECK(ch != NULL);
    CHECK_OK(sfv_destroy_channel(ch)); /* the CQ's destroy works now */
    CHECK(sfv_cm_channel(c) == NULL);
    if (sfv_cm_channel(c) == NULL) CHECK_OK(sfv_cm_close(c, 0)); /* (else it would use the freed channel) */
    tc_close(&e);
}

/* ---- review 22b: numbers at their extremes (the CM's desc timeout; two sentences pinned) ---- */
/* sfv_cm_connect with a desc whose timeout_ms is out of range (UINT32_MAX; anything above
   86400000): sfv_create_channel refuses that desc, but sfv_cm_connect makes its channel only
   after the address and route resolution, and timed those steps by the same timeout_ms (cast to
   int: -1, then back to 49 days). An address whose resolution never answers held the call for
   days instead of "nothing blocks past [the deadline]" and the desc's SFV_ERR_INVALID. Now the
   field is refused first, naming it, before any rdma_* call. */
static void t_cm_connect_bad_desc_timeout_refused_first(void) {
    tc_env e;
    sfv_cm_conn *c = (sfv_cm_conn *)&e;
    sfv_channel_desc d;
    double t0;
    tc_open(&e);
    memset(&d, 0, sizeof d);
    d.timeout_ms = UINT32_MAX;
    fkcm_on(FKCM_RESOLVE_ADDR, NULL, 0); /* a silent address resolution: only the deadline ends it */
    t0 = test_seconds();
    CHECK_RESULT(sfv_cm_connect(e.pd, NULL, FKCM_ADDR0, 7471, &d, NULL, 0, 0, &c), SFV_ERR_INVALID);
    CHECK(test_seconds() - t0 < 1.0);
    CHECK(c == NULL);
    if (!strstr(sfv_last_error()->message, "timeout_ms")) FAIL("the refusal does not name the field: %s", sfv_last_error()->message);
    CHECK_EQ(fkcm_calls(FKCM_RESOLVE_ADDR), 0);
    d.timeout_ms = 86400001u; /* one above the limit, and a timeout given: the desc is still refused */
    CHECK_RESULT(sfv_cm_connect(e.pd, NULL, FKCM_ADDR0, 7471, &d, NULL, 0, 1000, &c), SFV_ERR_INVALID);
    tc_close(&e);
}

/* sfv_bind_thread_to_numa_node said "SFV_ERR_NOT_FOUND for a node this machine does not have";
   a negative node (sfv_context_numa_node's -1 passed on as it is) is SFV_ERR_INVALID, which is the
   right class for an argument no machine has, so the sentence now says it. */
static void t_numa_negative_node(void) {
    CHECK_RESULT(sfv_bind_thread_to_numa_node(-1), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_bind_thread_to_numa_node(INT_MIN), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_bind_thread_to_numa_node(INT_MAX), SFV_ERR_NOT_FOUND);
}

/* sfv_exchange_desc.key said "NULL or key_len 0: $SAFEVERBS_JOB_KEY", but a NULL key with a
   length is refused (SFV_ERR_INVALID), rightly: a key the caller meant to give and lost must not
   quietly become the environment's (or none at all). The sentence now says so. */
static void t_exchange_null_key_with_length(void) {
    static const sfv_net_node nn[2] = {{"127.0.0.1", 1, 0, NULL}, {"127.0.0.1", 2, 1, NULL}};
    sfv_exchange_desc x;
    memset(&x, 0, sizeof x);
    x.key_len = 16;
    setenv("SAFEVERBS_JOB_KEY", "0123456789abcdef", 1);
    CHECK_RESULT(sfv_exchange_all_keyed(nn, 2, 0, NULL, 0, NULL, &x, 100), SFV_ERR_INVALID);
    if (!strstr(sfv_last_error()->message, "key")) FAIL("%s", sfv_last_error()->message);
    unsetenv("SAFEVERBS_JOB_KEY");
}

/* ---- hostile review 23d ---- */
/* sfv_cm_listen takes "a numeric IPv4 or IPv6 address, NULL: every address", but the numeric
   wildcard addresses themselves ("0.0.0.0", "::", what rping -a 0.0.0.0 binds) were refused with
   SFV_ERR_NOT_FOUND, "no RDMA device has the address": a bind to a wildcard has no device by
   nature (id->verbs NULL), and only a specific address without one is an error. */
static void t_listen_numeric_wildcard(void) {
    static const char *const any[] = {"0.0.0.0", "::"};
    sfv_cm_listener *l;
    size_t i;
    fk_reset();
    fkcm_reset();
    for (i = 0; i < COUNT_OF(any); i++) {
        CHECK_OK(sfv_cm_listen(any[i], PORT, 0, &l));
        CHECK_EQ(sfv_cm_listener_port(l), PORT);
        CHECK_OK(sfv_cm_destroy_listener(l));
    }
    CHECK_RESULT(sfv_cm_listen(FKCM_ADDR_NORDMA, PORT, 0, &l), SFV_ERR_NOT_FOUND); /* a real address without a device: still refused */
    tc_check_clean();
}

static const harness_test TESTS[] = {
    TEST(t_accept_out_null, 10),
    TEST(t_accept_channel_out_null, 10),
    TEST(t_node_cm_timeout_names_rank, 10),
    TEST(t_connect_ok, 10),
    TEST(t_connect_private_lengths, 10),
    TEST(t_connect_peer_private, 20),
    TEST(t_connect_rejected, 20),
    TEST(t_connect_odd_events, 20),
    TEST(t_connect_addr_error_int_min, 10),
    TEST(t_connect_strange_ids, 10),
    TEST(t_connect_deadlines, 20),
    TEST(t_connect_call_failures, 20),
    TEST(t_errno_zero, 10),
    TEST(t_connect_bad_peer_qp, 10),
    TEST(t_connect_addresses, 10),
    TEST(t_listen, 10),
    TEST(t_get_request, 20),
    TEST(t_reject, 10),
    TEST(t_accept_events, 20),
    TEST(t_accept_failures, 20),
    TEST(t_destroy_listener_pending, 10),
    TEST(t_disconnect_ends_wait, 30),
    TEST(t_events, 10),
    TEST(t_close, 20),
    TEST(t_caller_channel, 20),
    TEST(t_reset_owned_channel, 10),
    TEST(t_random_sequences, 240),
    TEST(t_node_cm_ok, 10),
    TEST(t_node_cm_bad_requests, 60),
    TEST(t_node_cm_duplicates_strangers, 20),
    TEST(t_node_cm_bad_answers, 60),
    TEST(t_node_cm_deadlines, 30),
    TEST(t_node_cm_call_failures, 120),
    TEST(t_node_cm_reject_padded, 10),
    TEST(t_node_cm_deadline_read_twice, 20),
    TEST(t_node_cm_random, 120),
    TEST(t_destroy_listener_with_taken_request, 10),
    TEST(t_close_destroy_refused, 10),
    TEST(t_close_flush_hint, 10),
    TEST(t_close_refused_then_channel_destroyed, 10),
    TEST(t_cm_connect_bad_desc_timeout_refused_first, 5),
    TEST(t_numa_negative_node, 5),
    TEST(t_exchange_null_key_with_length, 5),
    TEST(t_listen_numeric_wildcard, 10),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
