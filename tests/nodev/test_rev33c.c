/* test_rev33c.c - hostile review 33c on the fake NIC: thread safety as the header promises it.
   Device lists, contexts, PDs, MRs and CQs may be shared between threads (atomic reference
   counts); a channel is one thread's at a time; a context's events may be read from any thread.
   The fake's control verbs run under one lock here (fk_set_threaded), as libibverbs' are
   thread-safe (under TSan that lock orders nothing of the library's: see fake_verbs.c). Built
   plain, with ASan and with TSan (make build/nodev/tsan/test_rev33c; run with
   TSAN_OPTIONS=halt_on_error=1): a data race TSan reports on a shared object is a failure.
   Tests 1 to 4 passed on the header as it was (no race found); test 5 failed before its fix (a
   wait's deadline overrun behind the events' test-and-set locks). */
#include "fake_env.h"

#include <pthread.h>
#include <sched.h>

/* ---- helpers --------------------------------------------------------------------------------- */
static volatile int r3_stop;
static void r3_go(int on) { __atomic_store_n(&r3_stop, on ? 0 : 1, __ATOMIC_RELEASE); }
static int r3_running(void) { return !__atomic_load_n(&r3_stop, __ATOMIC_ACQUIRE); }

/* A spin barrier for n threads (each call with the same n), so racing calls start together. */
typedef struct r3_barrier { int n, in, gen; } r3_barrier;
static void r3_barrier_wait(r3_barrier *b) {
    const int gen = __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&b->in, 1, __ATOMIC_ACQ_REL) == b->n) {
        __atomic_store_n(&b->in, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->gen, gen + 1, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == gen) sched_yield();
}

static void r3_connect(sfv_channel *a, sfv_channel *b) {
    sfv_endpoint ea, eb;
    CHECK_OK(sfv_channel_endpoint(a, &ea));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK_OK(sfv_channel_handshake(b, &ea));
    CHECK_OK(sfv_channel_handshake(a, &eb));
}

/* Connects a and b; false where an event broke one of them first (then nothing more is done). */
static bool r3_pair_ok(sfv_channel *a, sfv_channel *b) {
    sfv_endpoint ea, eb;
    sfv_result r;
    CHECK_OK(sfv_channel_endpoint(a, &ea));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    r = sfv_channel_handshake(b, &ea);
    if (r == SFV_OK) r = sfv_channel_handshake(a, &eb);
    if (r != SFV_OK) CHECK(r == SFV_ERR_BROKEN);
    return r == SFV_OK;
}

/* ---- 1. shared PD: MRs made and unmade on two threads, channels on three, events on two ------ */
typedef struct r3_shared {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;            /* shared by the channel threads (their slices never overlap) */
    unsigned char *buf;    /* 64 KiB: [0, 32K) the MR threads', [32K, 64K) the shared MR */
    unsigned long rounds[8];
} r3_shared;

typedef struct r3_arg { r3_shared *s; int id; } r3_arg;

static void *r3_mr_churn(void *arg) {
    r3_arg *a = (r3_arg *)arg;
    unsigned char *mine = a->s->buf + 8192 * a->id;
    while (r3_running()) {
        sfv_mr *m[4];
        int k;
        for (k = 0; k < 4; k++) CHECK_OK(sfv_reg_mr_local(a->s->pd, mine + 1024 * k, 1024, &m[k]));
        CHECK(sfv_mr_pd(m[0]) == a->s->pd);
        for (k = 3; k >= 0; k--) CHECK_OK(sfv_dereg_mr(m[k]));
        a->s->rounds[a->id]++;
    }
    return NULL;
}

/* Channels made, connected, used over the shared MR and destroyed, as fast as it goes; an SRQ
   and a CQ now and then. id picks the slice of the shared MR. */
static void *r3_channel_churn(void *arg) {
    r3_arg *a = (r3_arg *)arg;
    r3_shared *s = a->s;
    unsigned char *base = s->buf + 32768 + 8192 * (a->id - 2);
    while (r3_running()) {
        sfv_channel_desc d;
        sfv_channel *x, *y;
        sfv_gather_element g = sfv_mr_gather_element(s->mr, base, 64);
        sfv_scatter_element sc = sfv_mr_scatter_element(s->mr, base + 1024, 64);
        sfv_remote_mr rm = sfv_remote_mr_make((uint64_t)(uintptr_t)(base + 2048), 64, sfv_mr_rkey(s->mr));
        sfv_pending rx;
        sfv_work_completion wc;
        sfv_cq *cq;
        int i;
        memset(&d, 0, sizeof d);
        d.wait_mode = (s->rounds[a->id] & 1) ? SFV_WAIT_EVENT : SFV_WAIT_BUSY;
        CHECK_OK(sfv_create_channel(s->pd, &d, &x));
        CHECK_OK(sfv_create_channel(s->pd, &d, &y));
        r3_connect(x, y);
        for (i = 0; i < 8; i++) {
            CHECK_OK(sfv_channel_post_receive(y, &sc, 1, &rx));
            CHECK_OK(sfv_channel_send(x, &g, 1, &wc));
            CHECK_OK(sfv_pending_wait(&rx, 1000, &wc));
            CHECK_OK(sfv_channel_write(x, &g, 1, rm, NULL));
            CHECK_OK(sfv_channel_read(y, &sc, 1, rm, NULL));
        }
        CHECK_OK(sfv_channel_post_receive(y, &sc, 1, &rx)); /* in flight when y goes */
        CHECK_OK(sfv_destroy_channel(x));
        CHECK_OK(sfv_destroy_channel(y));
        CHECK_OK(sfv_create_cq(s->ctx, 16, &cq));
        CHECK_OK(sfv_destroy_cq(cq));
        if (s->rounds[a->id] % 4 == 0) {
            sfv_srq *srq;
            sfv_channel *z;
            memset(&d, 0, sizeof d);
            CHECK_OK(sfv_create_srq(s->pd, NULL, &srq));
            d.srq = srq;
            CHECK_OK(sfv_create_channel(s->pd, &d, &z));
            CHECK_OK(sfv_destroy_srq(srq)); /* the channel keeps it */
            CHECK_OK(sfv_destroy_channel(z));
        }
        s->rounds[a->id]++;
    }
    return NULL;
}

static char r3_foreign[64];
static void *r3_event_reader(void *arg) {
    r3_arg *a = (r3_arg *)arg;
    static const int types[] = {IBV_EVENT_QP_FATAL, IBV_EVENT_CQ_ERR, IBV_EVENT_SRQ_ERR, IBV_EVENT_PORT_ACTIVE, IBV_EVENT_LID_CHANGE};
    unsigned i = 0;
    while (r3_running()) {
        sfv_event ev[8];
        size_t n;
        if (a->id == 6) { /* one of the two readers also makes events (naming nothing of ours) */
            sfv__ev_enter(a->s->ctx); /* (the fake's queue is the library's to read under it) */
            fk_inject_async_event(sfv_context_raw(a->s->ctx), types[i++ % COUNT_OF(types)], r3_foreign, 2);
            sfv__ev_leave(a->s->ctx);
        }
        do CHECK_OK(sfv_context_events(a->s->ctx, ev, 8, &n)); while (n);
        a->s->rounds[a->id]++;
        usleep(100); /* (events are rare: a reader that never lets go of the lock starves the channels' makers) */
    }
    return NULL;
}

/* Promise: PDs, MRs, contexts and CQs may be shared between threads; a context's events may be
   read from any thread. Two threads register and deregister MRs on one PD while two others make,
   use (over one shared MR, in-flight tracking included) and destroy channels, SRQs and CQs on it,
   and two read the device's events. Nothing may race (TSan), fail or be left behind. */
static void t_shared_pd_churn(void) {
    r3_shared s;
    r3_arg args[7];
    pthread_t t[7];
    int k;
    memset(&s, 0, sizeof s);
    fk_reset();
    fk_set_threaded(true);
    s.buf = (unsigned char *)calloc(1, 65536);
    CHECK(s.buf);
    CHECK_OK(sfv_open_device(NULL, &s.ctx));
    CHECK_OK(sfv_alloc_pd(s.ctx, &s.pd));
    CHECK_OK(sfv_reg_mr_shared(s.pd, s.buf + 32768, 32768, &s.mr));
    r3_go(1);
    for (k = 0; k < 7; k++) {
        args[k].s = &s;
        args[k].id = k;
        CHECK(pthread_create(&t[k], NULL, k < 2 ? r3_mr_churn : k < 5 ? r3_channel_churn : r3_event_reader, &args[k]) == 0);
    }
    usleep(1500 * 1000);
    r3_go(0);
    for (k = 0; k < 7; k++) CHECK(pthread_join(t[k], NULL) == 0);
    printf("    rounds: mr %lu %lu, channels %lu %lu %lu, events %lu %lu\n", s.rounds[0], s.rounds[1], s.rounds[2], s.rounds[3],
           s.rounds[4], s.rounds[5], s.rounds[6]);
    for (k = 0; k < 7; k++) CHECK(s.rounds[k] > 0);
    CHECK_OK(sfv_dereg_mr(s.mr));
    CHECK_OK(sfv_dealloc_pd(s.pd));
    CHECK_OK(sfv_close_device(s.ctx));
    free(s.buf);
    CHECK_EQ(fk_live_total(), 0);
}

/* ---- 2. the last references dropped on several threads at once ------------------------------ */
typedef struct r3_drop {
    r3_barrier *bar;
    int which;
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_cq *cq;
    sfv_channel *ch;
    sfv_srq *srq;
} r3_drop;
static void *r3_drop_run(void *arg) {
    r3_drop *d = (r3_drop *)arg;
    r3_barrier_wait(d->bar);
    switch (d->which) {
    case 0: CHECK_OK(sfv_dealloc_pd(d->pd)); CHECK_OK(sfv_close_device(d->ctx)); break;
    case 1: CHECK_OK(sfv_dereg_mr(d->mr)); break;
    case 2: CHECK_OK(sfv_destroy_channel(d->ch)); break;
    case 3: CHECK_OK(sfv_destroy_cq(d->cq)); break;
    default: CHECK_OK(sfv_destroy_srq(d->srq)); break;
    }
    return NULL;
}
/* Promise: teardown in any order is safe (reference counts), and the counts are atomic: the
   caller's PD and context dropped on one thread while an MR, a channel, a CQ and an SRQ (each
   holding the PD or the context) go on others, all at once, many times. Everything is freed once,
   and exactly once (the fake counts every object). */
static void t_last_refs_at_once(void) {
    static unsigned char buf[4096];
    int round;
    fk_reset();
    fk_set_threaded(true);
    for (round = 0; round < 200; round++) {
        r3_barrier bar = {5, 0, 0};
        r3_drop d[5];
        pthread_t t[5];
        sfv_context *ctx;
        sfv_pd *pd;
        sfv_mr *mr;
        sfv_cq *cq;
        sfv_channel *ch;
        sfv_srq *srq;
        int k;
        CHECK_OK(sfv_open_device(NULL, &ctx));
        CHECK_OK(sfv_alloc_pd(ctx, &pd));
        CHECK_OK(sfv_reg_mr_local(pd, buf, sizeof buf, &mr));
        CHECK_OK(sfv_create_cq(ctx, 4, &cq));
        CHECK_OK(sfv_create_srq(pd, NULL, &srq));
        CHECK_OK(sfv_create_channel(pd, NULL, &ch));
        for (k = 0; k < 5; k++) {
            memset(&d[k], 0, sizeof d[k]);
            d[k].bar = &bar;
            d[k].which = k;
            d[k].ctx = ctx;
            d[k].pd = pd;
            d[k].mr = mr;
            d[k].cq = cq;
            d[k].ch = ch;
            d[k].srq = srq;
            CHECK(pthread_create(&t[k], NULL, r3_drop_run, &d[k]) == 0);
        }
        for (k = 0; k < 5; k++) CHECK(pthread_join(t[k], NULL) == 0);
        if (fk_live_total() != 0) FAIL("round %d: %ld fake objects left after every reference was dropped", round, fk_live_total());
    }
}

/* ---- 3. twin contexts, DMA-BUF MRs, leases, queries and device lists, all at once ----------- */
typedef struct r3_twins {
    sfv_context *ctx[2];   /* [1] wraps [0]'s verbs context: one device, two contexts */
    sfv_pd *pd[2];         /* [1] wraps [0]'s verbs PD on ctx[1] */
    sfv_device_list *list; /* shared by the query thread's opens */
    sfv_mr *mr;            /* on pd[0], with MW_BIND: both channel threads post and lease it */
    unsigned char *buf;
    unsigned long rounds[8];
} r3_twins;
typedef struct r3_targ { r3_twins *w; int id; } r3_targ;

static void *r3_dmabuf_churn(void *arg) {
    r3_targ *a = (r3_targ *)arg;
    while (r3_running()) {
        sfv_mr *m;
        CHECK_OK(sfv_reg_dmabuf_mr_local(a->w->pd[1], 3, 0, 4096, 0x7000000000ull, &m));
        CHECK_OK(sfv_dereg_mr(m));
        a->w->rounds[a->id]++;
        usleep(200);
    }
    return NULL;
}
static void *r3_twin_channels(void *arg) {
    r3_targ *a = (r3_targ *)arg;
    r3_twins *w = a->w;
    sfv_pd *pd = w->pd[a->id - 1];
    unsigned char *base = w->buf + 8192 * (a->id - 1);
    while (r3_running()) {
        sfv_channel_desc d;
        sfv_channel *x, *y;
        sfv_gather_element g = sfv_mr_gather_element(w->mr, base, 32);
        sfv_scatter_element sc = sfv_mr_scatter_element(w->mr, base + 1024, 64);
        sfv_pending rx;
        sfv_work_completion wc;
        sfv_lease *l;
        int i;
        memset(&d, 0, sizeof d);
        d.wait_mode = (w->rounds[a->id] & 1) ? SFV_WAIT_EVENT : SFV_WAIT_BUSY;
        d.access = SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ;
        CHECK_OK(sfv_create_channel(pd, &d, &x));
        CHECK_OK(sfv_create_channel(pd, &d, &y));
        r3_connect(x, y);
        for (i = 0; i < 4; i++) {
            CHECK_OK(sfv_channel_post_receive(y, &sc, 1, &rx));
            CHECK_OK(sfv_channel_send(x, &g, 1, &wc)); /* inline, or not once a DMA-BUF MR was seen */
            CHECK_OK(sfv_pending_wait(&rx, 1000, &wc));
            CHECK_OK(sfv_lease_grant(y, w->mr, (size_t)(base - w->buf) + 2048, 64, SFV_ACCESS_REMOTE_WRITE, &l));
            CHECK_OK(sfv_channel_write(x, &g, 1, sfv_lease_remote(l), NULL));
            CHECK_OK(sfv_lease_revoke(l));
            CHECK_OK(sfv_channel_inject_write(x, base, 8, sfv_remote_mr_make((uint64_t)(uintptr_t)(base + 4096), 8, sfv_mr_rkey(w->mr))));
        }
        CHECK_OK(sfv_destroy_channel(x));
        CHECK_OK(sfv_destroy_channel(y));
        w->rounds[a->id]++;
    }
    return NULL;
}
static void *r3_twin_events(void *arg) {
    r3_targ *a = (r3_targ *)arg;
    unsigned i = 0;
    while (r3_running()) {
        sfv_context *c = a->w->ctx[i & 1];
        sfv_event ev[8];
        size_t n;
        int fd;
        sfv__contexts_enter(); /* (the fake's queue: twins read it under this lock) */
        fk_inject_async_event(sfv_context_raw(c), (i++ & 2) ? IBV_EVENT_LID_CHANGE : IBV_EVENT_QP_FATAL, r3_foreign, 2);
        sfv__contexts_leave();
        CHECK_OK(sfv_context_event_fd(c, &fd));
        do CHECK_OK(sfv_context_events(c, ev, 8, &n)); while (n);
        a->w->rounds[a->id]++;
        usleep(100);
    }
    return NULL;
}
static void *r3_queries(void *arg) {
    r3_targ *a = (r3_targ *)arg;
    r3_twins *w = a->w;
    while (r3_running()) {
        sfv_device_attr da;
        sfv_port_attr pa;
        sfv_device_list *l;
        uint32_t gi;
        uint64_t guid;
        CHECK_OK(sfv_query_device(w->ctx[1], &da));
        CHECK_OK(sfv_query_port(w->ctx[0], 1, &pa));
        CHECK_OK(sfv_choose_gid(w->ctx[1], 1, &gi));
        CHECK_OK(sfv_device_list_guid(w->list, 1, &guid));
        CHECK(sfv_device_list_name(w->list, 1) != NULL);
        CHECK_OK(sfv_get_device_list(&l));
        CHECK(sfv_device_list_len(l) == sfv_device_list_len(w->list));
        sfv_free_device_list(l);
        w->rounds[a->id]++;
        usleep(100);
    }
    return NULL;
}
/* Promise: device lists, contexts, PDs and MRs may be shared between threads, and a context's
   events read from any: two contexts over one device (a wrap of the other's verbs context) with a
   PD each over one verbs PD, channels on both (posting and leasing one shared MR), DMA-BUF MRs
   coming and going on one of them (every channel of the device stops sending inline), events read
   on both, and device lists and queries beside them. */
static void t_twins_and_dmabuf(void) {
    r3_twins w;
    r3_targ args[5];
    pthread_t t[5];
    void *(*fns[5])(void *) = {r3_dmabuf_churn, r3_twin_channels, r3_twin_channels, r3_twin_events, r3_queries};
    int k;
    memset(&w, 0, sizeof w);
    fk_reset();
    fk_set_threaded(true);
    fk_set_mw(true);
    fk_set_dmabuf(true);
    w.buf = (unsigned char *)calloc(1, 16384);
    CHECK(w.buf);
    CHECK_OK(sfv_get_device_list(&w.list));
    CHECK_OK(sfv_open_device_at(w.list, 0, &w.ctx[0]));
    CHECK_OK(sfv_context_wrap(sfv_context_raw(w.ctx[0]), false, &w.ctx[1]));
    CHECK_OK(sfv_alloc_pd(w.ctx[0], &w.pd[0]));
    CHECK_OK(sfv_pd_wrap(w.ctx[1], sfv_pd_raw(w.pd[0]), false, &w.pd[1]));
    CHECK_OK(sfv_reg_mr_access(w.pd[0], w.buf, 16384,
                               SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_MW_BIND, &w.mr));
    r3_go(1);
    for (k = 0; k < 5; k++) {
        args[k].w = &w;
        args[k].id = k;
        CHECK(pthread_create(&t[k], NULL, fns[k], &args[k]) == 0);
    }
    usleep(1500 * 1000);
    r3_go(0);
    for (k = 0; k < 5; k++) CHECK(pthread_join(t[k], NULL) == 0);
    printf("    rounds: dmabuf %lu, channels %lu %lu, events %lu, queries %lu\n", w.rounds[0], w.rounds[1], w.rounds[2], w.rounds[3],
           w.rounds[4]);
    for (k = 0; k < 5; k++) CHECK(w.rounds[k] > 0);
    CHECK_OK(sfv_dereg_mr(w.mr));
    CHECK_OK(sfv_dealloc_pd(w.pd[1]));
    CHECK_OK(sfv_dealloc_pd(w.pd[0]));
    CHECK_OK(sfv_close_device(w.ctx[1]));
    CHECK_OK(sfv_close_device(w.ctx[0]));
    sfv_free_device_list(w.list);
    free(w.buf);
    CHECK_EQ(fk_live_total(), 0);
}

/* ---- 4. channels on two threads, broken by events read on two others ------------------------ */
typedef struct r3_owner {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    unsigned char *base;
    sfv_channel *target;   /* the breakers' CQ_ERR target: set and read under ev_lock */
    unsigned long ok, failed, rounds;
} r3_owner;
typedef struct r3_breaker { r3_owner *owners; unsigned seed; unsigned long broke; } r3_breaker;
static void *r3_breaker_run(void *arg) {
    r3_breaker *b = (r3_breaker *)arg;
    sfv_context *ctx = b->owners[0].ctx;
    while (r3_running()) {
        sfv_event ev[8];
        size_t n;
        unsigned k;
        b->seed = b->seed * 1103515245u + 12345u;
        k = (b->seed >> 8) % 3;
        usleep(200 + (b->seed >> 12) % 2000);
        sfv__ev_enter(ctx);
        if (k == 0) {
            fk_inject_async_event(sfv_context_raw(ctx), IBV_EVENT_PORT_ERR, NULL, 1);
        } else {
            sfv_channel *t = b->owners[k - 1].target;
            if (t) fk_inject_async_event(sfv_context_raw(ctx), IBV_EVENT_CQ_ERR, __atomic_load_n(&t->cq, __ATOMIC_RELAXED), 0);
        }
        sfv__ev_leave(ctx);
        do {
            CHECK_OK(sfv_context_events(ctx, ev, 8, &n));
            for (size_t i = 0; i < n; i++) b->broke += ev[i].channels_broken;
        } while (n);
    }
    return NULL;
}
static void r3_owner_target(r3_owner *o, sfv_channel *t) {
    sfv__ev_enter(o->ctx);
    o->target = t;
    sfv__ev_leave(o->ctx);
}
static void *r3_owner_run(void *arg) {
    r3_owner *o = (r3_owner *)arg;
    while (r3_running()) {
        sfv_channel_desc d;
        sfv_channel *x, *y;
        sfv_gather_element g = sfv_mr_gather_element(o->mr, o->base, 64);
        sfv_scatter_element sc = sfv_mr_scatter_element(o->mr, o->base + 1024, 64);
        sfv_remote_mr rm = sfv_remote_mr_make((uint64_t)(uintptr_t)(o->base + 2048), 64, sfv_mr_rkey(o->mr));
        int i;
        memset(&d, 0, sizeof d);
        d.wait_mode = (o->rounds & 1) ? SFV_WAIT_EVENT : SFV_WAIT_BUSY;
        d.timeout_ms = 2000;
        CHECK_OK(sfv_create_channel(o->pd, &d, &x));
        CHECK_OK(sfv_create_channel(o->pd, &d, &y));
        r3_owner_target(o, x);
        if (r3_pair_ok(x, y)) {
            for (i = 0; i < 50; i++) {
                sfv_pending rx;
                sfv_work_completion wc;
                sfv_result r = sfv_channel_post_receive(y, &sc, 1, &rx);
                if (r == SFV_OK) {
                    const double t0 = test_seconds();
                    sfv_result rs = sfv_channel_send(x, &g, 1, &wc);
                    /* a send refused (x broken by a CQ_ERR read on another thread before it was
                       posted) sent nothing: y's receive, on a channel that is not broken, rightly
                       waits to its deadline, so it is left posted (y's destroy below flushes it) */
                    sfv_result rr = rs == SFV_ERR_BROKEN ? SFV_OK : sfv_pending_wait(&rx, 2000, &wc);
                    /* a broken channel's work ends by its flush, soon: never at the deadline */
                    if (test_seconds() - t0 > 1.0) FAIL("a send and its receive took %.2fs (send %s, receive %s)", test_seconds() - t0,
                                                        sfv_result_str(rs), sfv_result_str(rr));
                    if (rs == SFV_OK && rr == SFV_OK) r = sfv_channel_write(x, &g, 1, rm, NULL);
                    else r = rs ? rs : rr;
                }
                if (r == SFV_OK) o->ok++;
                else {
                    CHECK(r == SFV_ERR_BROKEN || r == SFV_ERR_WORK);
                    o->failed++;
                    break;
                }
            }
        }
        r3_owner_target(o, NULL);
        CHECK_OK(sfv_destroy_channel(x));
        CHECK_OK(sfv_destroy_channel(y));
        o->rounds++;
    }
    return NULL;
}
/* Promise: a context's events may be read from any thread; the thread that reads one marks the
   channels it breaks, and each channel's own thread flushes its channel. Two threads own channels
   (busy and event mode) on one PD and move traffic over one shared MR; two others make PORT_ERR
   and CQ_ERR of a live channel's CQ and read them. Every operation ends with its result (never at
   the deadline: the break is seen), nothing races (TSan), nothing is left. */
static void t_breaks_on_two_threads(void) {
    r3_owner o[2];
    r3_breaker b[2];
    pthread_t t[4];
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    unsigned char *buf;
    int k;
    fk_reset();
    fk_set_threaded(true);
    buf = (unsigned char *)calloc(1, 16384);
    CHECK(buf);
    CHECK_OK(sfv_open_device(NULL, &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    CHECK_OK(sfv_reg_mr_shared(pd, buf, 16384, &mr));
    memset(o, 0, sizeof o);
    memset(b, 0, sizeof b);
    r3_go(1);
    for (k = 0; k < 2; k++) {
        o[k].ctx = ctx;
        o[k].pd = pd;
        o[k].mr = mr;
        o[k].base = buf + 8192 * k;
        b[k].owners = o;
        b[k].seed = 7919u * (unsigned)k + 1;
        CHECK(pthread_create(&t[k], NULL, r3_owner_run, &o[k]) == 0);
        CHECK(pthread_create(&t[2 + k], NULL, r3_breaker_run, &b[k]) == 0);
    }
    usleep(2000 * 1000);
    r3_go(0);
    for (k = 0; k < 4; k++) CHECK(pthread_join(t[k], NULL) == 0);
    printf("    owners: ok %lu %lu, failed %lu %lu, rounds %lu %lu; breakers broke %lu %lu\n", o[0].ok, o[1].ok, o[0].failed, o[1].failed,
           o[0].rounds, o[1].rounds, b[0].broke, b[1].broke);
    CHECK(o[0].ok > 0 && o[1].ok > 0 && b[0].broke + b[1].broke > 0);
    CHECK_OK(sfv_dereg_mr(mr));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    free(buf);
    CHECK_EQ(fk_live_total(), 0);
}

/* ---- 5. a wait's deadline beside another thread that reads the events ----------------------- */
static sfv_context *r3_spin_ctx;
static unsigned long r3_spin_reads[2];
static void *r3_spin_events(void *arg) {
    unsigned long *reads = (unsigned long *)arg;
    while (r3_running()) {
        sfv_event ev[4];
        size_t n;
        CHECK_OK(sfv_context_events(r3_spin_ctx, ev, 4, &n));
        (*reads)++;
    }
    return NULL;
}
/* Promise: sfv_pending_wait waits up to timeout_ms, and any thread may read a context's events
   (sfv_context_events: a loop of its own, as an event thread's may be). A busy wait reads the
   events too (every 10 ms, under the context's lock; a context with a twin, another over the same
   verbs context, under the lock of all contexts as well): it must take its turn at those locks,
   not spin behind readers that let go and take them again at once. On one CPU (an
   oversubscribed machine), with two threads reading the events in a loop, a wait of 50 ms took
   0.5 to 2 s on the header before the fix (test-and-set locks: whoever lets go takes the lock
   again before a waiter that is not running even tries). twin: the channels are on a wrap of the
   context the readers read, so both take every event (>>impl events). */
static void r3_wait_beside_readers(bool twin) {
    tf_env e;
    sfv_context *ctx2 = NULL;
    sfv_pd *pd2 = NULL, *pd;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_scatter_element sc;
    sfv_pending rx;
    sfv_work_completion wc;
    pthread_t t[2];
    cpu_set_t one;
    double worst = 0;
    int k;
    CHECK(sched_getaffinity(0, sizeof one, &one) == 0);
    for (k = 0; k < CPU_SETSIZE && !CPU_ISSET(k, &one); k++) {}
    CPU_ZERO(&one);
    CPU_SET(k, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0); /* this test's process only (the harness forks it) */
    fk_reset();
    fk_set_threaded(true);
    tf_open(&e, 4096);
    pd = e.pd;
    if (twin) {
        CHECK_OK(sfv_context_wrap(sfv_context_raw(e.ctx), false, &ctx2));
        CHECK_OK(sfv_pd_wrap(ctx2, sfv_pd_raw(e.pd), false, &pd2));
        pd = pd2;
    }
    memset(&d, 0, sizeof d);
    d.wait_mode = SFV_WAIT_BUSY;
    CHECK_OK(sfv_create_channel(pd, &d, &a));
    CHECK_OK(sfv_create_channel(pd, &d, &b));
    tf_connect(a, b);
    sc = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_channel_post_receive(b, &sc, 1, &rx)); /* nothing will come: each wait times out */
    r3_spin_ctx = e.ctx;
    r3_go(1);
    for (k = 0; k < 2; k++) CHECK(pthread_create(&t[k], NULL, r3_spin_events, &r3_spin_reads[k]) == 0);
    for (k = 0; k < 10; k++) {
        const double t0 = test_seconds();
        sfv_result r = sfv_pending_wait(&rx, 50, &wc);
        const double took = test_seconds() - t0;
        CHECK_RESULT(r, SFV_ERR_TIMEOUT);
        if (took > worst) worst = took;
    }
    r3_go(0);
    for (k = 0; k < 2; k++) CHECK(pthread_join(t[k], NULL) == 0);
    printf("    worst 50 ms wait: %.3f s (%lu + %lu event reads beside)\n", worst, r3_spin_reads[0], r3_spin_reads[1]);
    if (worst > 0.15) /* (three times the deadline: 0.06 s at most here with fair locks) */
        FAIL("sfv_pending_wait(50 ms) took %.3f s while two other threads read the context's events: its deadline is not kept", worst);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dealloc_pd(pd2));
    CHECK_OK(sfv_close_device(ctx2));
    tf_close(&e);
}
static void t_wait_deadline_beside_event_readers(void) { r3_wait_beside_readers(false); }
static void t_wait_deadline_beside_twin_readers(void) { r3_wait_beside_readers(true); }

static const harness_test TESTS[] = {
    TEST(t_shared_pd_churn, 60),
    TEST(t_last_refs_at_once, 60),
    TEST(t_twins_and_dmabuf, 60),
    TEST(t_breaks_on_two_threads, 60),
    TEST(t_wait_deadline_beside_event_readers, 30),
    TEST(t_wait_deadline_beside_twin_readers, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
