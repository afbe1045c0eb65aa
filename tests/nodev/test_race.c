/* test_race.c (device-free tier, plain, ASan and ThreadSanitizer builds): a channel's own
   thread and another that reads the device's events (and breaks the channel by one) at the same
   time. The header promises that any thread may read a context's events and that the one that
   reads an event marks the channels it breaks while their own threads use them: under TSan a
   data race in that is a failure (halt_on_error), and on every build an event's break is never
   undone or missed by a connect, a reset or a creation that ran beside it.
   Two kinds of test: by chance (t_break_while_posting, t_break_beside_connect: the other thread
   runs freely beside traffic, connects and resets), and at the exact moment: linked with
   -Wl,--wrap=ibv_modify_qp,--wrap=ibv_destroy_qp (the Makefile's RACE_WRAP), the wraps are hooks
   that run "another thread reads an event now" at a chosen point inside a channel's own call, so
   an interleaving that is one in a million on a real NIC happens every time. The other thread is
   a real thread (created and joined in the hook), so TSan sees the same happens-before as in a
   program. */
#define _GNU_SOURCE
#include "fake_verbs.h"
#define SFV_MALLOC(sz) fk_malloc(sz)
#define SFV_CALLOC(n, sz) fk_calloc(n, sz)
#define SFV_FREE(p) fk_free(p)
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "harness.h"

#include <pthread.h>
#include <sched.h>

typedef struct rr_env {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    unsigned char buf[8192];
} rr_env;

static bool rr_want_mw; /* the fake device has memory windows (leases) */
static void rr_open(rr_env *e) {
    memset(e, 0, sizeof *e);
    fk_reset();
    fk_set_mw(rr_want_mw);
    CHECK_OK(sfv_open_device(NULL, &e->ctx));
    CHECK_OK(sfv_alloc_pd(e->ctx, &e->pd));
    CHECK_OK(sfv_reg_mr_access(e->pd, e->buf, sizeof e->buf,
                               SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_MW_BIND, &e->mr));
}
static void rr_close(rr_env *e) {
    CHECK_OK(sfv_dereg_mr(e->mr));
    CHECK_OK(sfv_dealloc_pd(e->pd));
    CHECK_OK(sfv_close_device(e->ctx));
    CHECK_EQ(fk_live_total(), 0);
}
static void rr_connect(sfv_channel *a, sfv_channel *b) {
    sfv_endpoint ea, eb;
    CHECK_OK(sfv_channel_endpoint(a, &ea));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK_OK(sfv_channel_handshake(b, &ea));
    CHECK_OK(sfv_channel_handshake(a, &eb));
}

/* ---- "another thread reads this event now" ----------------------------------------------- */
typedef struct rr_other {
    sfv_context *ctx;
    int type, port;
    void *object;
    sfv_event ev;
    size_t n;
} rr_other;
static void *rr_other_run(void *arg) {
    rr_other *o = (rr_other *)arg;
    sfv__ev_enter(o->ctx); /* (the fake's event queue is the library's to read under this lock) */
    fk_inject_async_event(sfv_context_raw(o->ctx), o->type, o->object, o->port);
    sfv__ev_leave(o->ctx);
    o->n = 0;
    while (o->n == 0) CHECK_OK(sfv_context_events(o->ctx, &o->ev, 1, &o->n));
    return NULL;
}
static rr_other rr_last;
static void rr_event_on_other_thread(sfv_context *ctx, int type, void *object, int port) {
    pthread_t t;
    memset(&rr_last, 0, sizeof rr_last);
    rr_last.ctx = ctx;
    rr_last.type = type;
    rr_last.object = object;
    rr_last.port = port;
    CHECK(pthread_create(&t, NULL, rr_other_run, &rr_last) == 0);
    CHECK(pthread_join(t, NULL) == 0);
}

/* ---- the hooks --------------------------------------------------------------------------- */
int __real_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask);
int __real_ibv_destroy_qp(struct ibv_qp *qp);
static void (*rr_on_init)(struct ibv_qp *qp);     /* once: after a QP reached INIT (sfv__qp_make) */
static void (*rr_on_destroyed)(struct ibv_qp *qp); /* once: after a QP was destroyed */
int __wrap_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask) {
    const int rc = __real_ibv_modify_qp(qp, a, mask);
    if (rc == 0 && rr_on_init && (mask & IBV_QP_STATE) && a->qp_state == IBV_QPS_INIT) {
        void (*f)(struct ibv_qp *) = rr_on_init;
        rr_on_init = NULL;
        f(qp);
    }
    return rc;
}
int __wrap_ibv_destroy_qp(struct ibv_qp *qp) {
    const int rc = __real_ibv_destroy_qp(qp);
    if (rc == 0 && rr_on_destroyed) {
        void (*f)(struct ibv_qp *) = rr_on_destroyed;
        rr_on_destroyed = NULL;
        f(qp);
    }
    return rc;
}

static sfv_context *rr_ctx;
static sfv_channel *rr_ch;
static sfv_srq *rr_srq;

/* ---- 1. reset: an event about what the channel has AFTER the reset, read during it -------- */
static struct ibv_qp *rr_fatal_qp;
static void rr_qp_fatal_now(struct ibv_qp *qp) {
    rr_fatal_qp = qp;
    rr_event_on_other_thread(rr_ctx, IBV_EVENT_QP_FATAL, qp, 0);
}
static void t_reset_keeps_new_qp_break(void) {
    rr_env e;
    sfv_channel *a;
    sfv_scatter_element s;
    sfv_pending p;
    rr_open(&e);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    rr_ctx = e.ctx;
    rr_on_init = rr_qp_fatal_now; /* the new QP's first transition: it is ch->qp already */
    CHECK_OK(sfv_channel_reset(a));
    CHECK(rr_on_init == NULL);
    /* the other thread read QP_FATAL of the QP the channel has now, and was told it broke it */
    CHECK(sfv_channel_raw_qp(a) == rr_fatal_qp);
    CHECK_EQ(rr_last.ev.type, SFV_EVENT_QP_FATAL);
    CHECK(rr_last.ev.channel == a);
    CHECK_EQ(rr_last.ev.channels_broken, 1);
    s = sfv_mr_scatter_element(e.mr, e.buf, 8);
    if (!sfv_channel_broken(a, NULL))
        FAIL("undone break: QP_FATAL of the channel's new QP (read by another thread inside sfv_channel_reset, "
             "which said channels_broken 1) was cleared by the reset: the channel is not broken, and a receive post says %s",
             sfv_result_str(sfv_channel_post_receive(a, &s, 1, &p)));
    CHECK_OK(sfv_destroy_channel(a));
    rr_close(&e);
}

static void rr_cq_err_now(struct ibv_qp *qp) {
    (void)qp;
    rr_event_on_other_thread(rr_ctx, IBV_EVENT_CQ_ERR, sfv_channel_raw_cq(rr_ch), 0);
}
static void t_reset_keeps_cq_err_break(void) {
    rr_env e;
    sfv_channel *a;
    struct ibv_cq *cq;
    rr_open(&e);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    cq = sfv_channel_raw_cq(a);
    rr_ctx = e.ctx;
    rr_ch = a;
    rr_on_init = rr_cq_err_now;
    CHECK_OK(sfv_channel_reset(a));
    CHECK(sfv_channel_raw_cq(a) == cq); /* the reset keeps the CQ that failed */
    CHECK_EQ(rr_last.ev.type, SFV_EVENT_CQ_ERR);
    CHECK_EQ(rr_last.ev.channels_broken, 1);
    if (!sfv_channel_broken(a, NULL))
        FAIL("undone break: CQ_ERR of the channel's CQ (kept by the reset), read by another thread inside sfv_channel_reset, was cleared by it");
    CHECK_OK(sfv_destroy_channel(a));
    rr_close(&e);
}

/* Not a race: the same CQ_ERR read before the reset. A reset keeps the CQ the device said
   failed, so it is refused (SFV_ERR_BROKEN) and the channel stays broken: it never takes work
   again on a dead CQ. */
static void t_reset_after_cq_err(void) {
    rr_env e;
    sfv_channel *a;
    size_t n = 0;
    sfv_event ev;
    rr_open(&e);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_CQ_ERR, sfv_channel_raw_cq(a), 0);
    CHECK_OK(sfv_context_events(e.ctx, &ev, 1, &n));
    CHECK(n == 1 && ev.channels_broken == 1 && sfv_channel_broken(a, NULL));
    {
        const sfv_result r = sfv_channel_reset(a);
        if (r == SFV_OK && !sfv_channel_broken(a, NULL))
            FAIL("sfv_channel_reset after CQ_ERR: SFV_OK and the channel is whole again, on the CQ the device said failed (the reset keeps its CQ)");
        CHECK_RESULT(r, SFV_ERR_BROKEN);
        CHECK(sfv_channel_broken(a, NULL));
    }
    CHECK_OK(sfv_destroy_channel(a));
    rr_close(&e);
}

/* ---- 2. an SRQ's failure read while a channel on it is being created --------------------- */
static void rr_srq_err_now(struct ibv_qp *qp) {
    (void)qp;
    rr_event_on_other_thread(rr_ctx, IBV_EVENT_SRQ_ERR, sfv_srq_raw(rr_srq), 0);
}
static void t_srq_attach_after_srq_err(void) {
    rr_env e;
    sfv_srq_desc sd;
    sfv_srq *srq;
    sfv_channel_desc d;
    sfv_channel *old, *fresh;
    sfv_result r;
    rr_open(&e);
    memset(&sd, 0, sizeof sd);
    CHECK_OK(sfv_create_srq(e.pd, &sd, &srq));
    memset(&d, 0, sizeof d);
    d.srq = srq;
    CHECK_OK(sfv_create_channel(e.pd, &d, &old));
    rr_ctx = e.ctx;
    rr_srq = srq;
    rr_on_init = rr_srq_err_now; /* after sfv__qp_make checked the SRQ, before sfv__srq_attach */
    r = sfv_create_channel(e.pd, &d, &fresh);
    CHECK(rr_on_init == NULL);
    CHECK_EQ(rr_last.ev.type, SFV_EVENT_SRQ_ERR);
    CHECK(sfv_channel_broken(old, NULL)); /* every channel that was on it */
    if (r == SFV_OK && !sfv_channel_broken(fresh, NULL))
        FAIL("missed break: SRQ_ERR read (by another thread) while a channel on that SRQ was being created: sfv_create_channel "
             "says SFV_OK and the new channel is on the failed SRQ, not broken (every other channel on it is)");
    if (r == SFV_OK) CHECK_OK(sfv_destroy_channel(fresh));
    CHECK_OK(sfv_destroy_channel(old));
    CHECK_OK(sfv_destroy_srq(srq));
    rr_close(&e);
}

/* ---- 3. the pointer an event is compared with outlives its object ------------------------ */
/* b has no QP (its last reset failed). a is destroyed: between ibv_destroy_qp and a->qp = NULL,
   b (same owner thread here; any thread in a program) is reset and gets a QP at the address just
   freed, and another thread reads QP_FATAL of b's new QP. The handler finds a first (newer: the
   head of ctx->channels) and stops there: b is never broken. Built under TSan only: its
   allocator hands a freed QP's address to the next one (glibc's and ASan's do not). */
#if defined(__SANITIZE_THREAD__)
static struct ibv_qp *rr_reused;
static void rr_reuse_now(struct ibv_qp *qp) {
    CHECK_OK(sfv_channel_reset(rr_ch)); /* b */
    rr_reused = sfv_channel_raw_qp(rr_ch);
    if (rr_reused == qp) rr_event_on_other_thread(rr_ctx, IBV_EVENT_QP_FATAL, qp, 0);
}
static void t_destroy_window_reuse(void) {
    rr_env e;
    sfv_channel *a, *b;
    rr_open(&e);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &b));
    fk_fail_name("ibv_create_qp", 1);
    CHECK(sfv_channel_reset(b) != SFV_OK); /* b: broken, no QP */
    fk_reset();
    CHECK(sfv_channel_raw_qp(b) == NULL);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    rr_ctx = e.ctx;
    rr_ch = b;
    rr_on_destroyed = rr_reuse_now;
    CHECK_OK(sfv_destroy_channel(a));
    CHECK(rr_on_destroyed == NULL && rr_reused != NULL);
    if (rr_reused != rr_last.object) {
        CHECK_OK(sfv_destroy_channel(b));
        rr_close(&e);
        SKIP("the allocator did not hand the freed QP's address to the next QP");
    }
    if (rr_last.ev.channel != b || !sfv_channel_broken(b, NULL))
        FAIL("misattributed event: QP_FATAL of b's QP (at the address a's destroyed QP had) was read while a->qp still held "
             "that address: ev.channel is %s, b broken: %d",
             rr_last.ev.channel == b ? "b" : rr_last.ev.channel ? "a (being destroyed)" : "NULL", (int)sfv_channel_broken(b, NULL));
    CHECK_OK(sfv_destroy_channel(b));
    rr_close(&e);
}
#endif

/* ---- 4. TSan: events that break nothing, beside everything an owner does ----------------- */
/* The other thread injects (under ev_lock: the fake's queue) and reads, as fast as it can,
   events that name nothing of ours (a foreign QP, CQ and SRQ, port 2): each walks
   ctx->channels and ctx->srqs and compares every channel's qp, cq, desc.port and every SRQ's
   srq and core.cq, while the owner creates, connects, resets and destroys channels, SRQs,
   multi-channels and leases, and waits in both modes (an event-mode wait reads events too). */
static volatile int rr_stop;
static char rr_foreign[256];
typedef struct rr_pump { sfv_context *ctx; unsigned long events; } rr_pump;
static void *rr_pump_run(void *arg) {
    static const int types[] = {IBV_EVENT_QP_FATAL, IBV_EVENT_COMM_EST, IBV_EVENT_CQ_ERR, IBV_EVENT_SRQ_ERR,
                                IBV_EVENT_SRQ_LIMIT_REACHED, IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE, IBV_EVENT_LID_CHANGE};
    rr_pump *p = (rr_pump *)arg;
    unsigned i = 0;
    while (!__atomic_load_n(&rr_stop, __ATOMIC_ACQUIRE)) {
        sfv_event ev[8];
        size_t n;
        sfv__ev_enter(p->ctx);
        fk_inject_async_event(sfv_context_raw(p->ctx), types[i++ % COUNT_OF(types)], rr_foreign, 2);
        sfv__ev_leave(p->ctx);
        do CHECK_OK(sfv_context_events(p->ctx, ev, 8, &n)); while (n);
        p->events++;
    }
    return NULL;
}
static int rr_scope_fn(sfv_channel *ch, void *user) {
    rr_env *e = (rr_env *)user;
    sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf, 8);
    sfv_remote_mr rm = sfv_remote_mr_make((uint64_t)(uintptr_t)(e->buf + 512), 64, sfv_mr_rkey(e->mr));
    int k;
    for (k = 0; k < 4; k++)
        if (sfv_channel_post_write(ch, &g, 1, rm, NULL) != SFV_OK) return SFV_ERR_WORK;
    return SFV_OK;
}
static void rr_owner_round(rr_env *e, int round) {
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf, 64);
    sfv_scatter_element s = sfv_mr_scatter_element(e->mr, e->buf + 1024, 64);
    sfv_remote_mr rm = sfv_remote_mr_make((uint64_t)(uintptr_t)(e->buf + 2048), 64, sfv_mr_rkey(e->mr));
    sfv_pending rx;
    sfv_work_completion wc;
    sfv_scope_report rep;
    sfv_lease *l;
    int k;
    memset(&d, 0, sizeof d);
    d.wait_mode = round % 2 ? SFV_WAIT_EVENT : SFV_WAIT_BUSY;
    d.timeout_ms = 20;
    CHECK_OK(sfv_create_channel(e->pd, &d, &a));
    CHECK_OK(sfv_create_channel(e->pd, &d, &b));
    rr_connect(a, b);
    for (k = 0; k < 2; k++) {
        for (int i = 0; i < 20; i++) {
            CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
            CHECK_OK(sfv_channel_send(a, &g, 1, &wc));
            CHECK_OK(sfv_pending_wait(&rx, 1000, &wc));
            CHECK_OK(sfv_channel_write(a, &g, 1, rm, NULL));
            CHECK_OK(sfv_channel_read(b, &s, 1, rm, NULL));
            CHECK_OK(sfv_channel_inject_write(a, e->buf, 8, rm));
        }
        CHECK_OK(sfv_channel_scope(a, rr_scope_fn, e, &rep));
        CHECK_OK(sfv_lease_grant(a, e->mr, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l));
        CHECK_OK(sfv_channel_write(b, &g, 1, sfv_lease_remote(l), NULL));
        CHECK_OK(sfv_lease_revoke(l));
        /* a wait that has to wait: a busy one spins past its 10 ms and reads the events, an
           event-mode one sleeps on the device's event fd beside its completion channel */
        CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
        CHECK_RESULT(sfv_pending_wait(&rx, 15, &wc), SFV_ERR_TIMEOUT);
        CHECK_OK(sfv_channel_reset(a));
        CHECK_OK(sfv_channel_reset(b));
        { /* the timed-out receive, flushed by the reset: consumed (its buffer is ours again) */
            const sfv_result r = sfv_pending_wait(&rx, 1000, &wc);
            CHECK(r == SFV_ERR_WORK || r == SFV_OK);
        }
        rr_connect(a, b);
    }
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    { /* an SRQ with channels on it, made and unmade */
        sfv_srq_desc sd;
        sfv_srq *srq;
        sfv_channel *c;
        sfv_pending sp;
        memset(&sd, 0, sizeof sd);
        CHECK_OK(sfv_create_srq(e->pd, &sd, &srq));
        memset(&d, 0, sizeof d);
        d.srq = srq;
        CHECK_OK(sfv_create_channel(e->pd, &d, &c));
        sfv_scatter_element s2 = sfv_mr_scatter_element(e->mr, e->buf + 3072, 64);
        CHECK_OK(sfv_srq_post_receive(srq, &s2, 1, &sp));
        CHECK_OK(sfv_srq_set_limit(srq, 1));
        CHECK_OK(sfv_channel_reset(c));
        CHECK_OK(sfv_destroy_channel(c));
        CHECK_OK(sfv_destroy_srq(srq));
    }
    { /* multi-channels */
        sfv_multi_channel *m1, *m2;
        sfv_endpoint e1[2], e2[2];
        sfv_peer_send ps[2];
        sfv_pending mrx[2];
        CHECK_OK(sfv_create_multi_channel(e->pd, 2, NULL, &m1));
        CHECK_OK(sfv_create_multi_channel(e->pd, 2, NULL, &m2));
        CHECK_OK(sfv_multi_channel_endpoints(m1, e1, 2));
        CHECK_OK(sfv_multi_channel_endpoints(m2, e2, 2));
        CHECK_OK(sfv_multi_channel_handshake(m1, e2, 2));
        CHECK_OK(sfv_multi_channel_handshake(m2, e1, 2));
        for (k = 0; k < 2; k++) {
            sfv_scatter_element s3 = sfv_mr_scatter_element(e->mr, e->buf + 4096 + 128 * k, 64);
            CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(m2, (size_t)k), &s3, 1, &mrx[k]));
            memset(&ps[k], 0, sizeof ps[k]);
            ps[k].peer = (size_t)k;
            ps[k].sges = &g;
            ps[k].n = 1;
        }
        CHECK_OK(sfv_multi_channel_scatter_send(m1, ps, 2, NULL));
        for (k = 0; k < 2; k++) CHECK_OK(sfv_pending_wait(&mrx[k], 1000, NULL));
        CHECK_OK(sfv_destroy_multi_channel(m1));
        CHECK_OK(sfv_destroy_multi_channel(m2));
    }
}
static void t_stress_benign_events(void) {
    rr_env e;
    rr_pump p;
    pthread_t t;
    int round;
    rr_want_mw = true;
    rr_open(&e);
    memset(&p, 0, sizeof p);
    p.ctx = e.ctx;
    rr_stop = 0;
    CHECK(pthread_create(&t, NULL, rr_pump_run, &p) == 0);
    for (round = 0; round < 8; round++) rr_owner_round(&e, round);
    __atomic_store_n(&rr_stop, 1, __ATOMIC_RELEASE);
    CHECK(pthread_join(t, NULL) == 0);
    printf("    %lu events read beside the owner's work\n", p.events);
    CHECK(p.events > 0);
    rr_close(&e);
}


/* ---- 5. TSan: events that do break, beside traffic that recovers (reset, handshake) ------- */
/* The other thread breaks, at random moments, with PORT_ERR, CQ_ERR of a's CQ, SRQ_ERR of an SRQ
   that c is on, and DEVICE_FATAL (never a QP event: the fake reads the named QP's number, and the
   QP may be gone by then); the owner sends, receives, injects, waits (both modes), and on any
   failure consumes what it had in flight, resets and reconnects. No check of who wins: TSan
   (halt_on_error) and the deadline are the test. */
typedef struct rr_breaker2 { sfv_context *ctx; sfv_channel *a; sfv_srq *srq; unsigned seed; unsigned long broke; } rr_breaker2;
static void *rr_breaker2_run(void *arg) {
    rr_breaker2 *b = (rr_breaker2 *)arg;
    while (!__atomic_load_n(&rr_stop, __ATOMIC_ACQUIRE)) {
        sfv_event ev[8];
        size_t n;
        unsigned k;
        b->seed = b->seed * 1103515245u + 12345u;
        k = (b->seed >> 8) % 4;
        for (n = (b->seed >> 12) % 300; n; n--) sched_yield();
        if (__atomic_load_n(&rr_stop, __ATOMIC_ACQUIRE)) break;
        sfv__ev_enter(b->ctx);
        if (k == 0) fk_inject_async_event(sfv_context_raw(b->ctx), IBV_EVENT_PORT_ERR, NULL, 1);
        else if (k == 1) fk_inject_async_event(sfv_context_raw(b->ctx), IBV_EVENT_CQ_ERR, __atomic_load_n(&b->a->cq, __ATOMIC_RELAXED) /* (b->a: under ev_lock) */, 0);
        else if (k == 2) fk_inject_async_event(sfv_context_raw(b->ctx), IBV_EVENT_SRQ_ERR, __atomic_load_n(&b->srq->srq, __ATOMIC_RELAXED), 0);
        else fk_inject_async_event(sfv_context_raw(b->ctx), IBV_EVENT_DEVICE_FATAL, NULL, 0);
        sfv__ev_leave(b->ctx);
        do {
            CHECK_OK(sfv_context_events(b->ctx, ev, 8, &n));
            for (size_t i = 0; i < n; i++) b->broke += ev[i].channels_broken;
        } while (n);
    }
    return NULL;
}
/* Reset and reconnect; where a reset is refused (the channel's CQ or the device failed: with the
   review's fix), a new pair. The breaker reads br->a under ev_lock, so a replaced channel is
   off its hands before it is destroyed. */
static bool rr_recover_pair(rr_env *e, rr_breaker2 *br, const sfv_channel_desc *d, sfv_channel **a, sfv_channel **b) {
    bool replaced = false; /* (then the old channels' pending handles died with them) */
    int tries;
    for (tries = 0; tries < 1000; tries++) {
        sfv_endpoint ea, eb;
        sfv_result ra = sfv_channel_reset(*a), rb = sfv_channel_reset(*b);
        if (ra == SFV_ERR_BROKEN || rb == SFV_ERR_BROKEN) {
            sfv_channel *na, *nb;
            CHECK_OK(sfv_create_channel(e->pd, d, &na));
            CHECK_OK(sfv_create_channel(e->pd, d, &nb));
            sfv__ev_enter(e->ctx);
            br->a = na;
            sfv__ev_leave(e->ctx);
            CHECK_OK(sfv_destroy_channel(*a));
            CHECK_OK(sfv_destroy_channel(*b));
            *a = na;
            *b = nb;
            ra = rb = SFV_OK;
            replaced = true;
        }
        if (ra != SFV_OK || rb != SFV_OK) continue;
        CHECK_OK(sfv_channel_endpoint(*a, &ea));
        CHECK_OK(sfv_channel_endpoint(*b, &eb));
        if (sfv_channel_handshake(*b, &ea) == SFV_OK && sfv_channel_handshake(*a, &eb) == SFV_OK) return replaced;
    }
    FAIL("could not reconnect in 1000 tries");
    return replaced;
}
static void t_stress_breaking_events(void) {
    rr_env e;
    rr_breaker2 br;
    pthread_t t;
    int round;
    unsigned long ok = 0, failed = 0, broke = 0;
    rr_want_mw = false;
    rr_open(&e);
    for (round = 0; round < 6; round++) {
        sfv_channel_desc d;
        sfv_channel *a, *b, *c;
        sfv_srq_desc sd;
        sfv_srq *srq;
        sfv_pending srx;
        bool srx_out = false;
        int i;
        sfv_channel_desc dd;
        memset(&dd, 0, sizeof dd);
        dd.wait_mode = round % 2 ? SFV_WAIT_EVENT : SFV_WAIT_BUSY;
        dd.timeout_ms = 50;
        CHECK_OK(sfv_create_channel(e.pd, &dd, &a));
        CHECK_OK(sfv_create_channel(e.pd, &dd, &b));
        memset(&sd, 0, sizeof sd);
        CHECK_OK(sfv_create_srq(e.pd, &sd, &srq));
        rr_connect(a, b);
        memset(&br, 0, sizeof br);
        br.ctx = e.ctx;
        br.a = a;
        br.srq = srq;
        br.seed = (unsigned)round * 7919u + 1;
        rr_stop = 0;
        CHECK(pthread_create(&t, NULL, rr_breaker2_run, &br) == 0);
        for (i = 0; i < 3000; i++) {
            sfv_gather_element g = sfv_mr_gather_element(e.mr, e.buf, 64);
            sfv_scatter_element s = sfv_mr_scatter_element(e.mr, e.buf + 1024, 64);
            sfv_pending rx;
            sfv_work_completion wc;
            bool replaced = false;
            sfv_result r = sfv_channel_post_receive(b, &s, 1, &rx), rw = SFV_OK;
            if (r == SFV_OK) {
                r = sfv_channel_send(a, &g, 1, &wc);
                if (r == SFV_OK) r = sfv_channel_inject(a, e.buf, 8);
                if (r == SFV_OK) {
                    sfv_scatter_element s2 = sfv_mr_scatter_element(e.mr, e.buf + 2048, 64);
                    sfv_pending rx2;
                    if (sfv_channel_post_receive(b, &s2, 1, &rx2) == SFV_OK) {
                        rw = sfv_pending_wait(&rx2, 30, &wc);
                        if (rw == SFV_ERR_TIMEOUT) { /* flushed by the reset below: consumed after it */
                            replaced = rr_recover_pair(&e, &br, &dd, &a, &b);
                            rw = replaced ? SFV_ERR_WORK : sfv_pending_wait(&rx2, 1000, &wc); /* (a new pair: the handle went with the old one) */
                            CHECK(rw == SFV_ERR_WORK || rw == SFV_OK);
                        }
                    }
                }
                if (rw == SFV_ERR_TIMEOUT) rw = SFV_OK;
                if (!replaced) {
                    sfv_result rr = sfv_pending_wait(&rx, 1000, &wc);
                    if (rr == SFV_ERR_TIMEOUT)
                        rr = rr_recover_pair(&e, &br, &dd, &a, &b) ? SFV_ERR_WORK : sfv_pending_wait(&rx, 1000, &wc);
                    CHECK(rr == SFV_OK || rr == SFV_ERR_WORK);
                    if (rr != SFV_OK) r = rr;
                }
            }
            if (r == SFV_OK && (i % 50) == 0) { /* a channel on the SRQ, made and unmade */
                memset(&d, 0, sizeof d);
                d.srq = srq;
                if (sfv_create_channel(e.pd, &d, &c) == SFV_OK) {
                    /* a wait on the SRQ (its receives never complete on the fake): an SRQ_ERR or
                       DEVICE_FATAL read meanwhile makes it stop every channel on the SRQ */
                    sfv_scatter_element s3 = sfv_mr_scatter_element(e.mr, e.buf + 4096, 64);
                    sfv_work_completion swc;
                    if (!srx_out && sfv_srq_post_receive(srq, &s3, 1, &srx) == SFV_OK) srx_out = true;
                    if (srx_out) {
                        const sfv_result sr = sfv_pending_wait(&srx, 2, &swc);
                        CHECK(sr == SFV_ERR_TIMEOUT || sr == SFV_ERR_WORK);
                        if (sr == SFV_ERR_WORK) srx_out = false;
                    }
                    CHECK_OK(sfv_destroy_channel(c));
                }
            }
            if (r == SFV_OK) ok++;
            else {
                failed++;
                rr_recover_pair(&e, &br, &dd, &a, &b);
            }
        }
        __atomic_store_n(&rr_stop, 1, __ATOMIC_RELEASE);
        CHECK(pthread_join(t, NULL) == 0);
        broke += br.broke;
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        CHECK_OK(sfv_destroy_srq(srq));
    }
    printf("    %lu rounds of traffic went through, %lu were broken and recovered; the events broke %lu channels\n", ok, failed, broke);
    rr_close(&e);
}

/* a CQ_ERR of the kept CQ read after the reset's first check and before it clears the old
   QP's break (here: right after the old QP's destroy): the reset clears it with the old QP's, and
   makes a channel whole on a CQ the device said failed. */
static void rr_cq_err_after_destroy(struct ibv_qp *qp) {
    (void)qp;
    rr_event_on_other_thread(rr_ctx, IBV_EVENT_CQ_ERR, sfv_channel_raw_cq(rr_ch), 0);
}
static void t_reset_window_cq_err(void) {
    rr_env e;
    sfv_channel *a;
    sfv_result r;
    rr_open(&e);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    rr_ctx = e.ctx;
    rr_ch = a;
    rr_on_destroyed = rr_cq_err_after_destroy;
    r = sfv_channel_reset(a);
    CHECK(rr_on_destroyed == NULL);
    CHECK_EQ(rr_last.ev.type, SFV_EVENT_CQ_ERR);
    CHECK_EQ(rr_last.ev.channels_broken, 1);
    if (r == SFV_OK && !sfv_channel_broken(a, NULL))
        FAIL("lost break: CQ_ERR of the kept CQ, read by another thread while sfv_channel_reset destroyed the old QP "
             "(ev.channels_broken 1), was cleared with the old QP's break: SFV_OK and the channel is whole on a failed CQ");
    CHECK_OK(sfv_destroy_channel(a));
    rr_close(&e);
}

/* (no race) CQ_ERR read after another event already broke the channel (QP_FATAL): the
   first break wins (sfv__event_break), so async_event stays QP_FATAL and the reset's refusal of
   "a channel whose CQ failed" does not see it. */
static void t_reset_cq_err_after_qp_fatal(void) {
    rr_env e;
    sfv_channel *a;
    sfv_event ev[2];
    size_t n = 0;
    sfv_result r;
    rr_open(&e);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_QP_FATAL, sfv_channel_raw_qp(a), 0);
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_CQ_ERR, sfv_channel_raw_cq(a), 0);
    CHECK_OK(sfv_context_events(e.ctx, ev, 2, &n));
    CHECK_EQ(n, 2);
    CHECK_EQ(ev[1].type, SFV_EVENT_CQ_ERR);
    CHECK(ev[1].channel == a);
    r = sfv_channel_reset(a);
    if (r == SFV_OK && !sfv_channel_broken(a, NULL))
        FAIL("sfv_channel_reset after QP_FATAL then CQ_ERR of the channel's CQ: SFV_OK and whole on the CQ the device said "
             "failed (the header: refused for a channel whose CQ failed, SFV_ERR_BROKEN)");
    CHECK_OK(sfv_destroy_channel(a));
    rr_close(&e);
}

/* the SRQ_ERR window fixed for sfv__srq_attach is open for every other event that breaks
   "every channel" (DEVICE_FATAL, PORT_ERR): sfv__channel_new puts the channel on ctx->channels
   only after sfv__qp_make, so an event read on another thread meanwhile misses it. */
static void rr_device_fatal_now(struct ibv_qp *qp) {
    (void)qp;
    rr_event_on_other_thread(rr_ctx, IBV_EVENT_DEVICE_FATAL, NULL, 0);
}
static void t_create_during_device_fatal(void) {
    rr_env e;
    sfv_channel *old, *fresh;
    sfv_result r;
    rr_open(&e);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &old));
    rr_ctx = e.ctx;
    rr_on_init = rr_device_fatal_now;
    r = sfv_create_channel(e.pd, NULL, &fresh);
    CHECK(rr_on_init == NULL);
    CHECK_EQ(rr_last.ev.type, SFV_EVENT_DEVICE_FATAL);
    CHECK(sfv_channel_broken(old, NULL));
    if (r == SFV_OK && !sfv_channel_broken(fresh, NULL))
        FAIL("missed break: DEVICE_FATAL read (by another thread) while a channel was being created: SFV_OK and the new "
             "channel is whole (every other channel of the context is broken)");
    if (r == SFV_OK) CHECK_OK(sfv_destroy_channel(fresh));
    CHECK_OK(sfv_destroy_channel(old));
    rr_close(&e);
}

/* The reset's second check (a CQ_ERR read after the first check) refuses after the old
   QP was destroyed: the channel is no longer connected, so a handshake says SFV_ERR_BROKEN, as
   after the other failed reset (t_handshake_after_failed_reset). */
static void t_reset_second_check_unconnects(void) {
    rr_env e;
    sfv_channel *a, *b;
    sfv_endpoint eb;
    sfv_result r;
    rr_open(&e);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    CHECK_OK(sfv_create_channel(e.pd, NULL, &b));
    rr_connect(a, b);
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    rr_ctx = e.ctx;
    rr_ch = a;
    rr_on_destroyed = rr_cq_err_after_destroy;
    CHECK_RESULT(sfv_channel_reset(a), SFV_ERR_BROKEN);
    CHECK(rr_on_destroyed == NULL);
    CHECK(sfv_channel_broken(a, NULL));
    r = sfv_channel_handshake(a, &eb);
    if (r != SFV_ERR_BROKEN)
        FAIL("handshake after a reset refused by its second check (CQ_ERR read mid-reset; old QP destroyed): %s (%s), want SFV_ERR_BROKEN",
             sfv_result_str(r), sfv_last_error()->message);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    rr_close(&e);
}

/* ---- by chance: the other thread runs freely ------------------------------------------- */
/* The other thread: after `spin` yields, one PORT_ERR (port 1, every channel's) injected and read
   through sfv_context_events; it only reads the events it injected (the fake's event queue is
   one thread's). */
typedef struct rc_breaker {
    sfv_context *ctx;
    int spin;
    int go;                       /* (atomic) the thread may begin */
    uint32_t broken;              /* channels the event broke, as it said */
} rc_breaker;
static void *rc_break_run(void *arg) {
    rc_breaker *b = (rc_breaker *)arg;
    sfv_event ev[4];
    size_t n = 0;
    int i;
    while (!__atomic_load_n(&b->go, __ATOMIC_ACQUIRE)) sched_yield();
    for (i = 0; i < b->spin; i++) sched_yield();
    fk_inject_async_event(sfv_context_raw(b->ctx), IBV_EVENT_PORT_ERR, NULL, 1);
    while (n == 0) {
        if (sfv_context_events(b->ctx, ev, 4, &n) != SFV_OK) return NULL;
        if (n == 0) sched_yield();
    }
    b->broken = ev[0].channels_broken;
    return NULL;
}
static void rc_break_start(rc_breaker *b, pthread_t *t, sfv_context *ctx, int spin) {
    memset(b, 0, sizeof *b);
    b->ctx = ctx;
    b->spin = spin;
    CHECK(pthread_create(t, NULL, rc_break_run, b) == 0);
    __atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
}

/* After the event: the channel says so, refuses posts (SFV_ERR_BROKEN, naming the event), and a
   wait flushes what it had in flight. */
static void rc_check_broken(rr_env *e, sfv_channel *ch) {
    sfv_event_type by = SFV_EVENT_OTHER;
    sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf, 8);
    sfv_scatter_element s = sfv_mr_scatter_element(e->mr, e->buf + 64, 8);
    sfv_pending p;
    CHECK(sfv_channel_broken(ch, &by));
    CHECK_EQ(by, SFV_EVENT_PORT_ERR);
    CHECK_RESULT(sfv_channel_post_send(ch, &g, 1, &p), SFV_ERR_BROKEN);
    if (!strstr(sfv_last_error()->message, "PORT_ERR")) FAIL("post refused with: %s", sfv_last_error()->message);
    CHECK_RESULT(sfv_channel_post_receive(ch, &s, 1, &p), SFV_ERR_BROKEN);
    CHECK_RESULT(sfv_channel_inject(ch, e->buf, 8), SFV_ERR_BROKEN);
}

/* The channel's thread sends and receives, as fast as it can, while the other reads the event
   that breaks it: the traffic stops with the event (SFV_ERR_BROKEN from a post, or a work failure
   flushed by it), and nothing of the channel races. */
static void t_break_while_posting(void) {
    int round;
    for (round = 0; round < 40; round++) {
        rr_env e;
        sfv_channel *a, *b;
        sfv_channel_desc d;
        rc_breaker br;
        pthread_t t;
        sfv_result r = SFV_OK;
        const double end = test_seconds() + 20;
        int sent = 0;
        rr_open(&e);
        memset(&d, 0, sizeof d);
        d.timeout_ms = 2000;
        CHECK_OK(sfv_create_channel(e.pd, &d, &a));
        CHECK_OK(sfv_create_channel(e.pd, &d, &b));
        rr_connect(a, b);
        rc_break_start(&br, &t, e.ctx, round * 7);
        while (r == SFV_OK && test_seconds() < end) { /* until the event stops it (the thread may start late) */
            sfv_gather_element g = sfv_mr_gather_element(e.mr, e.buf, 64);
            sfv_scatter_element s = sfv_mr_scatter_element(e.mr, e.buf + 1024, 64);
            sfv_pending rx;
            sfv_work_completion wc;
            r = sfv_channel_post_receive(b, &s, 1, &rx);
            if (r != SFV_OK) break;
            r = sfv_channel_send(a, &g, 1, &wc);
            if (r == SFV_OK) {
                r = sfv_pending_wait(&rx, 2000, &wc);
            } else { /* flushed: the receive completes too */
                const sfv_result rr = sfv_pending_wait(&rx, 2000, &wc);
                CHECK(rr == SFV_ERR_WORK || rr == SFV_OK);
            }
            sent++;
        }
        CHECK(pthread_join(t, NULL) == 0);
        CHECK_EQ(br.broken, 2);
        if (r != SFV_ERR_BROKEN && r != SFV_ERR_WORK) /* never a hang, nor a channel that goes on */
            FAIL("round %d: %d exchanges, then %s: %s", round, sent, sfv_result_str(r), sfv_last_error()->message);
        rc_check_broken(&e, a);
        rc_check_broken(&e, b);
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        rr_close(&e);
    }
}

/* Connects (and resets) beside the event: whatever the order, a channel the event broke stays
   broken (a connect that finished after it must not open the send queue again). */
static void t_break_beside_connect(void) {
    int round, late = 0;
    for (round = 0; round < 200; round++) {
        rr_env e;
        sfv_channel *a, *b;
        rc_breaker br;
        pthread_t t;
        sfv_endpoint ea, eb;
        sfv_result ra, rb;
        rr_open(&e);
        CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
        CHECK_OK(sfv_create_channel(e.pd, NULL, &b));
        CHECK_OK(sfv_channel_endpoint(a, &ea));
        CHECK_OK(sfv_channel_endpoint(b, &eb));
        rc_break_start(&br, &t, e.ctx, round % 20);
        if (round % 2) { /* a reset beside the event: the new QP is whole, broken or not */
            CHECK_OK(sfv_channel_reset(a));
            CHECK_OK(sfv_channel_endpoint(a, &ea));
        }
        rb = sfv_channel_handshake(b, &ea);
        ra = sfv_channel_handshake(a, &eb);
        CHECK(pthread_join(t, NULL) == 0);
        CHECK(ra == SFV_OK || ra == SFV_ERR_BROKEN);
        if (!(rb == SFV_OK || rb == SFV_ERR_BROKEN)) FAIL("handshake: %s: %s", sfv_result_str(rb), sfv_last_error()->message);
        if (ra == SFV_OK && rb == SFV_OK) late++;
        /* the event was read (the thread is joined): it broke both, connected or not (a reset
           after the event made a a new QP, which it did not break) */
        CHECK_EQ(br.broken, 2);
        if (!(round % 2) || sfv_channel_broken(a, NULL)) rc_check_broken(&e, a);
        rc_check_broken(&e, b);
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        rr_close(&e);
    }
    printf("    %d of 200 rounds connected before the event broke them\n", late);
}

static const harness_test TESTS[] = {
    TEST(t_break_while_posting, 60),
    TEST(t_break_beside_connect, 60),
    TEST(t_reset_second_check_unconnects, 30),
    TEST(t_create_during_device_fatal, 30),
    TEST(t_reset_window_cq_err, 30),
    TEST(t_reset_cq_err_after_qp_fatal, 30),
    TEST(t_reset_keeps_new_qp_break, 30),
    TEST(t_reset_keeps_cq_err_break, 30),
    TEST(t_reset_after_cq_err, 30),
    TEST(t_srq_attach_after_srq_err, 30),
#if defined(__SANITIZE_THREAD__) /* (its allocator hands a freed QP's address to the next one; glibc's and ASan's do not) */
    TEST(t_destroy_window_reuse, 30),
#endif
    TEST(t_stress_benign_events, 120),
    TEST(t_stress_breaking_events, 300),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
