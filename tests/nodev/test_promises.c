/* test_promises.c - the header's general promises (LIFETIME, ERRORS, THREAD SAFETY,
   teardown in any order, a failed constructor that leaves nothing, outputs zeroed and the last
   error on failure) on the fake NIC. From hostile review 22e; these failed on the header before its fixes:
   t_double_wrap_events, t_double_wrap_events_threads, t_taken_back_failure_is_not_fns (and the
   sentences t_teardown_order_with_work_in_flight pins were wrong). The others held already and
   stay as guards of the promise each names. */
#define _GNU_SOURCE
#include "fake_verbs.h"
/* The fake's allocator, counted here: every block the library holds is known, so a failed
   constructor that leaks one is caught at once (not only by LeakSanitizer at exit). */
static long r22_blocks;
static void *r22_malloc(size_t n) {
    void *p = fk_malloc(n);
    if (p) r22_blocks++;
    return p;
}
static void *r22_calloc(size_t n, size_t size) {
    void *p = fk_calloc(n, size);
    if (p) r22_blocks++;
    return p;
}
static void r22_free(void *p) {
    if (p) r22_blocks--;
    fk_free(p);
}
#define SFV_MALLOC(sz) r22_malloc(sz)
#define SFV_CALLOC(n, sz) r22_calloc(n, sz)
#define SFV_FREE(p) r22_free(p)
#define SFV__ABORT_DRAIN_NS 300000000ull
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "harness.h"

#include <infiniband/verbs.h>
#include <pthread.h>

typedef struct r22_env {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    unsigned char *buf;
    size_t len;
} r22_env;

static void r22_open(r22_env *e, size_t len) {
    memset(e, 0, sizeof *e);
    e->len = len;
    e->buf = (unsigned char *)calloc(1, len);
    CHECK(e->buf);
    CHECK_OK(sfv_open_device(NULL, &e->ctx));
    CHECK_OK(sfv_alloc_pd(e->ctx, &e->pd));
    CHECK_OK(sfv_reg_mr_access(e->pd, e->buf, len,
                               SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_MW_BIND, &e->mr));
}
static void r22_close(r22_env *e) {
    CHECK_OK(sfv_dereg_mr(e->mr));
    CHECK_OK(sfv_dealloc_pd(e->pd));
    CHECK_OK(sfv_close_device(e->ctx));
    free(e->buf);
    CHECK_EQ(fk_live_total(), 0);
    CHECK_EQ(fk_mw_count(), 0);
    CHECK_EQ(r22_blocks, 0);
}
static void r22_connect(sfv_channel *a, sfv_channel *b) {
    sfv_endpoint ea, eb;
    CHECK_OK(sfv_channel_endpoint(a, &ea));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK_OK(sfv_channel_handshake(b, &ea));
    if (a != b) CHECK_OK(sfv_channel_handshake(a, &eb));
}

/* ---- a constructor failing at each of its calls ---------------------------------------------- */
/* One constructor under test: prep() makes what it needs (no failure injected), make() runs it
   (with a call into the fake failing), undo() releases what a success made, unprep() what prep
   made. */
typedef struct r22_ctor {
    const char *name;
    void (*prep)(r22_env *e);
    sfv_result (*make)(r22_env *e, void **out);
    void (*undo)(r22_env *e, void *obj);
    void (*unprep)(r22_env *e);
} r22_ctor;

/* Runs c with its 1st, 2nd, ... call failing until a run meets no failure. Each failed run must
   return an error that sfv_last_error() describes (its result, the failed call's name), set
   *out NULL, and leave no object, window or block behind; the run after must succeed. */
static void r22_sweep(const r22_ctor *c) {
    long k;
    for (k = 1; k < 4000; k++) {
        r22_env e;
        void *obj = (void *)1;
        sfv_result r;
        const char *hit;
        long blocks, live[FK_KINDS], mws;
        int i;
        r22_open(&e, 1 << 16);
        if (c->prep) c->prep(&e);
        blocks = r22_blocks;
        for (i = 0; i < FK_KINDS; i++) live[i] = fk_live((enum fk_kind)i);
        mws = fk_mw_count();
        fk_fail_nth(k);
        r = c->make(&e, &obj);
        hit = fk_failed();
        fk_fail_nth(0);
        if (!hit) { /* every call of it succeeded: done */
            if (r != SFV_OK) FAIL("%s: %s with no failure injected (%s)", c->name, sfv_result_str(r), sfv_last_error()->message);
            c->undo(&e, obj);
            if (c->unprep) c->unprep(&e);
            r22_close(&e);
            printf("     %s: %ld calls failed in turn\n", c->name, k - 1);
            return;
        }
        if (r == SFV_OK) { /* absorbed */
            c->undo(&e, obj);
        } else {
            const sfv_error *le = sfv_last_error();
            if (obj != NULL) FAIL("%s, call %ld (%s) failing: out not NULL", c->name, k, hit);
            if (le->result != r)
                FAIL("%s, call %ld (%s) failing: returned %s, the last error says %s (%s)", c->name, k, hit, sfv_result_str(r),
                     sfv_result_str(le->result), le->message);
            if (strcmp(le->verb, hit) != 0)
                FAIL("%s, call %ld (%s) failing: the last error names %s (%s)", c->name, k, hit, le->verb, le->message);
        }
        if (r22_blocks != blocks) FAIL("%s, call %ld (%s) failing: %ld blocks left", c->name, k, hit, r22_blocks - blocks);
        for (i = 0; i < FK_KINDS; i++)
            if (fk_live((enum fk_kind)i) != live[i])
                FAIL("%s, call %ld (%s) failing: %ld %s left", c->name, k, hit, fk_live((enum fk_kind)i) - live[i],
                     fk_kind_name((enum fk_kind)i));
        if (fk_mw_count() != mws) FAIL("%s, call %ld (%s) failing: a memory window left", c->name, k, hit);
        if (c->unprep) c->unprep(&e);
        r22_close(&e);
    }
    FAIL("%s: never succeeded", c->name);
}

static sfv_result m_channel_event(r22_env *e, void **out) {
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    d.wait_mode = SFV_WAIT_EVENT;
    return sfv_create_channel(e->pd, &d, (sfv_channel **)out);
}
static void u_channel(r22_env *e, void *o) { (void)e; CHECK_OK(sfv_destroy_channel((sfv_channel *)o)); }

static sfv_srq *r22_srq;
static void p_srq(r22_env *e) { CHECK_OK(sfv_create_srq(e->pd, NULL, &r22_srq)); }
static void up_srq(r22_env *e) { (void)e; CHECK_OK(sfv_destroy_srq(r22_srq)); }
static sfv_result m_channel_srq(r22_env *e, void **out) {
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    d.srq = r22_srq;
    return sfv_create_channel(e->pd, &d, (sfv_channel **)out);
}
static sfv_result m_multi_srq(r22_env *e, void **out) {
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    d.srq = r22_srq;
    return sfv_create_multi_channel(e->pd, 3, &d, (sfv_multi_channel **)out);
}

static sfv_result m_srq(r22_env *e, void **out) {
    sfv_srq_desc d;
    memset(&d, 0, sizeof d);
    d.limit = 4;
    return sfv_create_srq(e->pd, &d, (sfv_srq **)out);
}
static void u_srq(r22_env *e, void *o) { (void)e; CHECK_OK(sfv_destroy_srq((sfv_srq *)o)); }

static sfv_result m_multi(r22_env *e, void **out) { return sfv_create_multi_channel(e->pd, 3, NULL, (sfv_multi_channel **)out); }
static void u_multi(r22_env *e, void *o) { (void)e; CHECK_OK(sfv_destroy_multi_channel((sfv_multi_channel *)o)); }

static sfv_result m_node(r22_env *e, void **out) {
    sfv_node_desc d;
    memset(&d, 0, sizeof d);
    d.rank = 1;
    d.world_size = 3;
    return sfv_create_node(e->pd, &d, (sfv_node **)out);
}
static void u_node(r22_env *e, void *o) { (void)e; CHECK_OK(sfv_destroy_node((sfv_node *)o)); }

static struct ibv_context *r22_raw_ctx;
static void p_raw_ctx(r22_env *e) {
    struct ibv_device **list = ibv_get_device_list(NULL);
    (void)e;
    CHECK(list);
    r22_raw_ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    CHECK(r22_raw_ctx);
}
static sfv_result m_wrap(r22_env *e, void **out) {
    sfv_result r;
    (void)e;
    r = sfv_context_wrap(r22_raw_ctx, true, (sfv_context **)out);
    if (!r) r22_raw_ctx = NULL; /* else still the caller's */
    return r;
}
static void up_raw_ctx(r22_env *e) {
    (void)e;
    if (r22_raw_ctx) CHECK_EQ(ibv_close_device(r22_raw_ctx), 0);
}
static void u_wrap(r22_env *e, void *o) { (void)e; CHECK_OK(sfv_close_device((sfv_context *)o)); }

static struct ibv_pd *r22_raw_pd;
static void p_raw_pd(r22_env *e) { r22_raw_pd = ibv_alloc_pd(sfv_context_raw(e->ctx)); CHECK(r22_raw_pd); }
static sfv_result m_pd_wrap(r22_env *e, void **out) {
    sfv_result r = sfv_pd_wrap(e->ctx, r22_raw_pd, true, (sfv_pd **)out);
    if (!r) r22_raw_pd = NULL;
    return r;
}
static void up_raw_pd(r22_env *e) {
    (void)e;
    if (r22_raw_pd) CHECK_EQ(ibv_dealloc_pd(r22_raw_pd), 0);
}
static void u_pd(r22_env *e, void *o) { (void)e; CHECK_OK(sfv_dealloc_pd((sfv_pd *)o)); }

static void p_dmabuf(r22_env *e) { (void)e; fk_set_dmabuf(true); }
static sfv_result m_dmabuf(r22_env *e, void **out) { return sfv_reg_dmabuf_mr_local(e->pd, 3, 4096, 8192, 4096, (sfv_mr **)out); }
static void u_mr(r22_env *e, void *o) { (void)e; CHECK_OK(sfv_dereg_mr((sfv_mr *)o)); }

static sfv_channel *r22_a, *r22_b;
static void p_pair(r22_env *e) {
    fk_set_mw(true);
    CHECK_OK(sfv_create_channel(e->pd, NULL, &r22_a));
    CHECK_OK(sfv_create_channel(e->pd, NULL, &r22_b));
    r22_connect(r22_a, r22_b);
}
static void up_pair(r22_env *e) {
    (void)e;
    CHECK_OK(sfv_destroy_channel(r22_a));
    CHECK_OK(sfv_destroy_channel(r22_b));
}
static sfv_result m_lease(r22_env *e, void **out) { return sfv_lease_grant(r22_a, e->mr, 64, 128, SFV_ACCESS_REMOTE_WRITE, (sfv_lease **)out); }
static void u_lease(r22_env *e, void *o) { (void)e; CHECK_OK(sfv_lease_revoke((sfv_lease *)o)); }

static int r22_fd;
static sfv_result m_event_fd(r22_env *e, void **out) {
    sfv_result r = sfv_context_event_fd(e->ctx, &r22_fd);
    *out = r ? NULL : (void *)e->ctx;
    return r;
}
static void u_none(r22_env *e, void *o) { (void)e; (void)o; }

static sfv_result m_device_list(r22_env *e, void **out) { (void)e; return sfv_get_device_list((sfv_device_list **)out); }
static void u_device_list(r22_env *e, void *o) { (void)e; sfv_free_device_list((sfv_device_list *)o); }
static sfv_result m_open(r22_env *e, void **out) { (void)e; return sfv_open_device(NULL, (sfv_context **)out); }
static void u_ctx(r22_env *e, void *o) { (void)e; CHECK_OK(sfv_close_device((sfv_context *)o)); }
static sfv_result m_cq(r22_env *e, void **out) { return sfv_create_cq(e->ctx, 16, (sfv_cq **)out); }
static void u_cq(r22_env *e, void *o) { (void)e; CHECK_OK(sfv_destroy_cq((sfv_cq *)o)); }

/* Allocation and verb failures at every call of each constructor the sweep of test_sweep.c
   does not run (wraps, DMA-BUF MRs, channels and multi-channels on an SRQ, leases, the event fd),
   and of some it runs once only: each failure returns an error its last error describes, zeroes
   the output, and leaves no object, window or allocated block. (Held: a guard.) */
static void t_ctor_sweep(void) {
    static const r22_ctor ctors[] = {
        {"sfv_get_device_list", NULL, m_device_list, u_device_list, NULL},
        {"sfv_open_device", NULL, m_open, u_ctx, NULL},
        {"sfv_create_cq", NULL, m_cq, u_cq, NULL},
        {"sfv_context_wrap", p_raw_ctx, m_wrap, u_wrap, up_raw_ctx},
        {"sfv_pd_wrap", p_raw_pd, m_pd_wrap, u_pd, up_raw_pd},
        {"sfv_reg_dmabuf_mr_local", p_dmabuf, m_dmabuf, u_mr, NULL},
        {"sfv_create_channel (event)", NULL, m_channel_event, u_channel, NULL},
        {"sfv_create_channel (on an SRQ)", p_srq, m_channel_srq, u_channel, up_srq},
        {"sfv_create_srq", NULL, m_srq, u_srq, NULL},
        {"sfv_create_multi_channel", NULL, m_multi, u_multi, NULL},
        {"sfv_create_multi_channel (on an SRQ)", p_srq, m_multi_srq, u_multi, up_srq},
        {"sfv_create_node", NULL, m_node, u_node, NULL},
        {"sfv_lease_grant", p_pair, m_lease, u_lease, up_pair},
        {"sfv_context_event_fd", NULL, m_event_fd, u_none, NULL},
    };
    size_t i;
    for (i = 0; i < COUNT_OF(ctors); i++) {
        fk_reset();
        fk_set_mw(true); /* read at open */
        r22_sweep(&ctors[i]);
    }
}

/* ---- teardown in any order ------------------------------------------------------------------ */
enum { O_CTX, O_PD, O_MR, O_CQ, O_A, O_B, O_MC, O_NODE, O_SRQ, O_SRQ_CH, O_LEASE, O_EVCH, O_N };
typedef struct r22_world {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_cq *cq;
    sfv_channel *a, *b, *srq_ch, *evch;
    sfv_multi_channel *mc;
    sfv_node *node;
    sfv_srq *srq;
    sfv_lease *lease;
    unsigned char *buf;
    sfv_pending p[16];
} r22_world;

/* Everything at once, with work in flight on every channel: receives waiting, sends waiting for
   a receive (RNR), a read and a write posted and not polled, an SRQ's receives. */
static void r22_world_make(r22_world *w) {
    sfv_channel_desc d;
    sfv_node_desc nd;
    sfv_endpoint ep[2];
    uint8_t blob[SFV_NODE_ENDPOINT_SIZE(1)];
    sfv_scatter_element s;
    sfv_gather_element g;
    sfv_remote_mr rm;
    int fd;
    memset(w, 0, sizeof *w);
    w->buf = (unsigned char *)calloc(1, 1 << 16);
    CHECK(w->buf);
    CHECK_OK(sfv_open_device(NULL, &w->ctx));
    CHECK_OK(sfv_alloc_pd(w->ctx, &w->pd));
    CHECK_OK(sfv_reg_mr_access(w->pd, w->buf, 1 << 16,
                               SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_MW_BIND, &w->mr));
    CHECK_OK(sfv_create_cq(w->ctx, 8, &w->cq));
    CHECK_OK(sfv_context_event_fd(w->ctx, &fd));
    CHECK_OK(sfv_create_channel(w->pd, NULL, &w->a));
    CHECK_OK(sfv_create_channel(w->pd, NULL, &w->b));
    r22_connect(w->a, w->b);
    memset(&d, 0, sizeof d);
    d.wait_mode = SFV_WAIT_EVENT;
    CHECK_OK(sfv_create_channel(w->pd, &d, &w->evch));
    r22_connect(w->evch, w->evch);
    CHECK_OK(sfv_create_srq(w->pd, NULL, &w->srq));
    memset(&d, 0, sizeof d);
    d.srq = w->srq;
    CHECK_OK(sfv_create_channel(w->pd, &d, &w->srq_ch));
    CHECK_OK(sfv_create_multi_channel(w->pd, 2, NULL, &w->mc));
    CHECK_OK(sfv_multi_channel_endpoints(w->mc, ep, 2));
    CHECK_OK(sfv_multi_channel_handshake(w->mc, ep, 2)); /* each to itself */
    memset(&nd, 0, sizeof nd);
    nd.world_size = 1;
    CHECK_OK(sfv_create_node(w->pd, &nd, &w->node));
    CHECK_OK(sfv_node_endpoint(w->node, blob, sizeof blob));
    CHECK_OK(sfv_node_handshake(w->node, blob, sizeof blob));
    CHECK_OK(sfv_lease_grant(w->a, w->mr, 0, 256, SFV_ACCESS_REMOTE_WRITE, &w->lease));
    s = sfv_mr_scatter_element(w->mr, w->buf + 1024, 64);
    g = sfv_mr_gather_element(w->mr, w->buf, 64);
    rm = sfv_mr_remote(w->mr);
    CHECK_OK(sfv_remote_mr_slice(rm, 4096, 64, &rm));
#define R22_S(k) (s = sfv_mr_scatter_element(w->mr, w->buf + 8192 + 128 * (k), 64), &s) /* its own bytes each */
    CHECK_OK(sfv_channel_post_receive(w->a, R22_S(0), 1, &w->p[0]));
    CHECK_OK(sfv_channel_post_send(w->a, &g, 1, &w->p[1])); /* b has no receive: RNR, in flight */
    CHECK_OK(sfv_channel_post_write(w->b, &g, 1, rm, &w->p[2]));
    CHECK_OK(sfv_channel_post_read(w->b, R22_S(3), 1, rm, &w->p[3]));
    CHECK_OK(sfv_channel_post_receive(w->evch, R22_S(4), 1, &w->p[4]));
    CHECK_OK(sfv_channel_arm(w->evch));
    CHECK_OK(sfv_channel_post_send(w->evch, &g, 1, &w->p[5]));
    CHECK_OK(sfv_srq_post_receive(w->srq, R22_S(6), 1, &w->p[6]));
    CHECK_OK(sfv_channel_post_send(sfv_multi_channel_peer(w->mc, 0), &g, 1, &w->p[7]));
    CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(w->mc, 1), R22_S(8), 1, &w->p[8]));
    CHECK_OK(sfv_channel_post_send(sfv_multi_channel_peer(sfv_node_multi_channel(w->node), 0), &g, 1, &w->p[9]));
#undef R22_S
}

/* Releases object o; false if it refused (what the header allows: an MR with a live lease). */
static bool r22_world_release(r22_world *w, int o) {
    sfv_result r = SFV_OK;
    switch (o) {
    case O_CTX: r = sfv_close_device(w->ctx); break;
    case O_PD: r = sfv_dealloc_pd(w->pd); break;
    case O_MR: r = sfv_dereg_mr(w->mr); break;
    case O_CQ: r = sfv_destroy_cq(w->cq); break;
    case O_A: r = sfv_destroy_channel(w->a); break;
    case O_B: r = sfv_destroy_channel(w->b); break;
    case O_MC: r = sfv_destroy_multi_channel(w->mc); break;
    case O_NODE: r = sfv_destroy_node(w->node); break;
    case O_SRQ: r = sfv_destroy_srq(w->srq); break;
    case O_SRQ_CH: r = sfv_destroy_channel(w->srq_ch); break;
    case O_LEASE: r = sfv_lease_revoke(w->lease); break;
    case O_EVCH: r = sfv_destroy_channel(w->evch); break;
    }
    if (r == SFV_OK) return true;
    if (o == O_MR && r == SFV_ERR_INVALID && sfv_last_error()->errnum == EBUSY) return false;
    FAIL("release %d: %s (%s)", o, sfv_result_str(r), sfv_last_error()->message);
    return false;
}

/* "Tear down in any order" (STEP BY STEP 7, LIFETIME): every object of a device released in
   random orders, with work in flight on every channel; every release succeeds (but an MR's,
   refused while its lease lives, which works once the lease is revoked), and nothing is left.
   (Held: a guard.) */
static void t_teardown_any_order(void) {
    unsigned seed = 2207;
    int round;
    fk_reset();
    fk_set_mw(true);
    for (round = 0; round < 3000; round++) {
        r22_world w;
        int order[O_N], i, left[O_N], nleft = 0;
        for (i = 0; i < O_N; i++) order[i] = i;
        for (i = O_N - 1; i > 0; i--) {
            int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        r22_world_make(&w);
        for (i = 0; i < O_N; i++) {
            static const int users[] = {O_A, O_B, O_MC, O_NODE, O_SRQ, O_SRQ_CH, O_EVCH};
            int k, busy = 0;
            if (order[i] == O_MR) /* work in flight uses it: a broken contract (DEBUG CHECKS), so it waits for them */
                for (k = 0; k < (int)COUNT_OF(users); k++) {
                    int j;
                    for (j = i + 1; j < O_N; j++) busy |= order[j] == users[k];
                }
            if (busy || !r22_world_release(&w, order[i])) left[nleft++] = order[i];
        }
        for (i = 0; i < nleft; i++) CHECK(r22_world_release(&w, left[i]));
        free(w.buf);
        if (fk_live_total() != 0 || r22_blocks != 0 || fk_mw_count() != 0 || fk_async_unacked() != 0) {
            fprintf(stderr, "    order:");
            for (i = 0; i < O_N; i++) fprintf(stderr, " %d", order[i]);
            fprintf(stderr, "\n");
            FAIL("left: %ld objects, %ld blocks, %ld windows", fk_live_total(), r22_blocks, fk_mw_count());
        }
    }
}

/* ---- a success keeps the last error --------------------------------------------------------- */
static sfv_error r22_sentinel;
static void r22_mark(void) {
    sfv_remote_mr none;
    CHECK_RESULT(sfv_remote_mr_decode(NULL, 0, &none), SFV_ERR_INVALID);
    r22_sentinel = *sfv_last_error();
}
/* SK(call): the call succeeds (or says SFV_NOT_DONE, no error) and leaves the last error as it was. */
#define SK(call, want)                                                                                    \
    do {                                                                                                  \
        sfv_result r_;                                                                                    \
        r22_mark();                                                                                       \
        r_ = (call);                                                                                      \
        if (r_ != (want)) FAIL("%s: %s (%s)", #call, sfv_result_str(r_), sfv_last_error()->message);     \
        if (sfv_last_error()->verb != r22_sentinel.verb || strcmp(sfv_last_error()->message, r22_sentinel.message) != 0 || \
            sfv_last_error()->result != r22_sentinel.result || sfv_last_error()->errnum != r22_sentinel.errnum) \
            FAIL("%s succeeded but left a new last error: %s (verb %s)", #call, sfv_last_error()->message, sfv_last_error()->verb); \
    } while (0)

static sfv_result r22_scope_fn(sfv_channel *ch, void *user) {
    r22_env *e = (r22_env *)user;
    sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf, 16);
    sfv_remote_mr rm = sfv_remote_mr_make((uint64_t)(uintptr_t)(e->buf + 2048), 16, sfv_mr_rkey(e->mr));
    sfv_result r = sfv_channel_post_write(ch, &g, 1, rm, NULL);
    if (r == SFV_OK) r = sfv_channel_post_write_unsignaled(ch, &g, 1, rm);
    return r;
}
static sfv_result r22_mscope_fn(sfv_multi_channel *mc, void *user) {
    return r22_scope_fn(sfv_multi_channel_peer(mc, 0), user);
}
static void r22_on_wc(const sfv_work_completion *wc, void *user) { (void)wc; (void)user; }
static sfv_result r22_allgather(void *user, const void *mine, void *all, size_t size) {
    (void)user;
    if (size) memcpy(all, mine, size);
    return SFV_OK;
}

/* ERRORS: "Valid until the next failing safeverbs call on the same thread", and a successful
   call never leaves a new one behind: every call below succeeds on paths that meet failures
   inside and recover from them (an inline ask halved, empty GID entries skipped, an InfiniBand
   port without a usable GID, events read by a wait). (Held: a guard.) */
static void t_success_keeps_last_error(void) {
    r22_env e;
    sfv_channel *a, *b, *c;
    sfv_channel_desc d, res;
    sfv_multi_channel *mc;
    sfv_node *node;
    sfv_node_desc nd;
    sfv_srq *srq;
    sfv_lease *lease;
    sfv_cq *cq;
    sfv_endpoint ep[2];
    sfv_pending p[4];
    sfv_work_completion wc[4];
    sfv_scope_report rep;
    sfv_event ev[4];
    size_t n;
    int fd;
    uint32_t gi;
    sfv_gid_entry ge;
    sfv_gather_element g;
    sfv_scatter_element sc[2];
    fk_reset();
    fk_set_mw(true);
    fk_set_max_inline(100);      /* the default ask (256) is refused, then halved */
    fk_set_gid_table(8, 5);      /* empty entries before the IPv4 one */
    r22_mark();
    r22_open(&e, 1 << 16);
    SK(sfv_choose_gid(e.ctx, 1, &gi), SFV_OK);
    SK(sfv_query_gid(e.ctx, 1, gi, &ge), SFV_OK);
    memset(&d, 0, sizeof d);
    SK(sfv_channel_desc_resolve(e.pd, &d, &res), SFV_OK);
    SK(sfv_create_channel(e.pd, &d, &a), SFV_OK);
    SK(sfv_create_channel(e.pd, &d, &b), SFV_OK);
    SK(sfv_channel_endpoint(a, &ep[0]), SFV_OK);
    SK(sfv_channel_endpoint(b, &ep[1]), SFV_OK);
    SK(sfv_channel_handshake(a, &ep[1]), SFV_OK);
    SK(sfv_channel_handshake(b, &ep[0]), SFV_OK);
    g = sfv_mr_gather_element(e.mr, e.buf, 16);
    sc[0] = sfv_mr_scatter_element(e.mr, e.buf + 4096, 16);
    sc[1] = sfv_mr_scatter_element(e.mr, e.buf + 4096 + 64, 16);
    SK(sfv_channel_post_receive(b, &sc[0], 1, &p[0]), SFV_OK);
    SK(sfv_pending_poll(&p[0], &wc[0]), SFV_NOT_DONE);
    SK(sfv_channel_inject(a, "x", 2), SFV_OK);
    SK(sfv_pending_wait(&p[0], -1, &wc[0]), SFV_OK);
    SK(sfv_channel_post_receive_batch(b, sc, 1, 2, p), SFV_OK);
    SK(sfv_channel_post_send(a, &g, 1, &p[2]), SFV_OK);
    SK(sfv_channel_post_send(a, &g, 1, &p[3]), SFV_OK);
    SK(sfv_pending_wait_all(p, 4, -1, wc), SFV_OK);
    SK(sfv_channel_scope(a, r22_scope_fn, &e, &rep), SFV_OK);
    SK(sfv_channel_scope_wc(a, r22_scope_fn, &e, r22_on_wc, NULL, &rep), SFV_OK);
    SK(sfv_lease_grant(a, e.mr, 0, 64, SFV_ACCESS_REMOTE_READ, &lease), SFV_OK);
    SK(sfv_lease_revoke(lease), SFV_OK);
    SK(sfv_context_event_fd(e.ctx, &fd), SFV_OK);
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_PORT_ACTIVE, NULL, 1);
    SK(sfv_context_events(e.ctx, ev, 4, &n), SFV_OK);
    SK(sfv_create_cq(e.ctx, 4, &cq), SFV_OK);
    SK(sfv_poll_cq(cq, wc, 4, &n), SFV_OK);
    SK(sfv_destroy_cq(cq), SFV_OK);
    SK(sfv_channel_reset(a), SFV_OK);
    SK(sfv_channel_reset(b), SFV_OK);
    SK(sfv_create_srq(e.pd, NULL, &srq), SFV_OK);
    d.srq = srq;
    SK(sfv_create_channel(e.pd, &d, &c), SFV_OK);
    d.srq = NULL;
    SK(sfv_srq_post_receive(srq, &sc[0], 1, &p[0]), SFV_OK);
    SK(sfv_srq_set_limit(srq, 1), SFV_OK);
    SK(sfv_destroy_srq(srq), SFV_OK);
    SK(sfv_destroy_channel(c), SFV_OK); /* the SRQ goes with it, its receive flushed */
    SK(sfv_create_multi_channel(e.pd, 2, &d, &mc), SFV_OK);
    SK(sfv_multi_channel_endpoints(mc, ep, 2), SFV_OK);
    SK(sfv_multi_channel_handshake(mc, ep, 2), SFV_OK);
    SK(sfv_multi_channel_scope(mc, r22_mscope_fn, &e, &rep), SFV_OK);
    SK(sfv_destroy_multi_channel(mc), SFV_OK);
    memset(&nd, 0, sizeof nd);
    nd.world_size = 1;
    SK(sfv_create_node(e.pd, &nd, &node), SFV_OK);
    SK(sfv_node_connect_with(node, r22_allgather, NULL), SFV_OK);
    SK(sfv_node_barrier(node, NULL, 0, 1000), SFV_OK);
    SK(sfv_destroy_node(node), SFV_OK);
    SK(sfv_destroy_channel(a), SFV_OK);
    SK(sfv_destroy_channel(b), SFV_OK);
    r22_close(&e);
    /* an InfiniBand port whose GID table is empty: connects by LID, quietly */
    fk_reset();
    fk_set_link_layer(1);
    fk_set_gid_table(0, 0);
    r22_open(&e, 4096);
    SK(sfv_create_channel(e.pd, NULL, &a), SFV_OK);
    SK(sfv_destroy_channel(a), SFV_OK);
    r22_close(&e);
}

/* ---- a refusal: wc and the last error ------------------------------------------------------- */
/* The wc of a refused call: zeros with wc->result the result, and the last error matching. */
static void r22_refused_wc(const char *what, sfv_result r, const sfv_work_completion *wc) {
    sfv_work_completion z;
    if (r == SFV_OK || r == SFV_NOT_DONE) FAIL("%s: %s", what, sfv_result_str(r));
    if (sfv_last_error()->result != r)
        FAIL("%s returned %s, the last error says %s (%s)", what, sfv_result_str(r), sfv_result_str(sfv_last_error()->result), sfv_last_error()->message);
    memset(&z, 0, sizeof z);
    z.result = r;
    if (wc->wr_id != 0 || wc->result != r || wc->byte_len != 0 || wc->status != 0 || wc->has_imm || wc->channel != NULL ||
        wc->vendor_err != 0 || wc->opcode != 0 || wc->imm_data != 0)
        FAIL("%s returned %s, its wc says result %s, wr_id %llu, status %d, opcode %d, byte_len %u", what, sfv_result_str(r),
             sfv_result_str(wc->result), (unsigned long long)wc->wr_id, (int)wc->status, (int)wc->opcode, wc->byte_len);
}
#define RW(call)                                              \
    do {                                                      \
        sfv_result r_;                                        \
        r22_mark();                                           \
        memset(&wc, 0xA5, sizeof wc);                         \
        r_ = (call);                                          \
        r22_refused_wc(#call, r_, &wc);                       \
    } while (0)

/* ">>pending: wc, when given, is filled on every return but SFV_NOT_DONE ... zeros with
   wc->result holding the result when there is no completion (a refused call) ... Every non-OK
   result leaves a matching sfv_last_error()": every blocking call, refused for each reason.
   (Held: a guard.) */
static void t_refused_blocking_wc(void) {
    r22_env e;
    sfv_channel *a, *b, *fresh, *on_srq;
    sfv_channel_desc d;
    sfv_srq *srq;
    sfv_work_completion wc;
    sfv_pending none;
    sfv_gather_element g, g5[5];
    sfv_scatter_element sc, old, s5[5];
    sfv_remote_mr rm, word, small, wrap;
    sfv_channel *chs[3];
    int i, k;
    fk_reset();
    r22_open(&e, 1 << 16);
    memset(&d, 0, sizeof d);
    d.access = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_ATOMIC;
    d.timeout_ms = 200;
    CHECK_OK(sfv_create_channel(e.pd, &d, &a));
    CHECK_OK(sfv_create_channel(e.pd, &d, &b));
    r22_connect(a, b);
    CHECK_OK(sfv_create_channel(e.pd, &d, &fresh)); /* never connected */
    CHECK_OK(sfv_create_srq(e.pd, NULL, &srq));
    d.srq = srq;
    CHECK_OK(sfv_create_channel(e.pd, &d, &on_srq));
    r22_connect(on_srq, on_srq);
    g = sfv_mr_gather_element(e.mr, e.buf, 16);
    sc = sfv_mr_scatter_element(e.mr, e.buf + 4096, 16);
    old = sfv_mr_scatter_element(e.mr, e.buf + 8192, 8);
    for (i = 0; i < 5; i++) {
        g5[i] = sfv_mr_gather_element(e.mr, e.buf + 16 * i, 16);
        s5[i] = sfv_mr_scatter_element(e.mr, e.buf + 12288 + 64 * i, 16);
    }
    rm = sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 2048), 64, sfv_mr_rkey(e.mr));
    word = sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 3072), 8, sfv_mr_rkey(e.mr));
    small = sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 2048), 4, sfv_mr_rkey(e.mr));
    wrap = sfv_remote_mr_make(UINT64_MAX - 4, 64, 1);
    chs[0] = NULL;
    chs[1] = fresh;
    chs[2] = a;
    for (k = 0; k < 3; k++) {
        sfv_channel *c = chs[k];
        /* not connected, or NULL: everything refused; connected: the bad arguments */
        if (k < 2) {
            RW(sfv_channel_send(c, &g, 1, &wc));
            RW(sfv_channel_send_imm(c, &g, 1, 7, &wc));
            if (!c) RW(sfv_channel_receive(c, &sc, 1, &wc)); /* (a fresh channel takes receives) */
            RW(sfv_channel_write(c, &g, 1, rm, &wc));
            RW(sfv_channel_write_imm(c, &g, 1, rm, 7, &wc));
            RW(sfv_channel_read(c, &sc, 1, rm, &wc));
            RW(sfv_channel_compare_swap(c, &old, word, 0, 1, &wc));
            RW(sfv_channel_fetch_add(c, &old, word, 1, &wc));
        }
        RW(sfv_channel_send(c, NULL, 1, &wc));
        RW(sfv_channel_send(c, g5, 5, &wc));
        RW(sfv_channel_receive(c, s5, 5, &wc));
        RW(sfv_channel_write(c, &g, 1, small, &wc));
        RW(sfv_channel_write(c, &g, 1, wrap, &wc));
        RW(sfv_channel_write_imm(c, &g, 1, wrap, 1, &wc));
        RW(sfv_channel_read(c, &sc, 1, small, &wc));
        RW(sfv_channel_read(c, &sc, 1, wrap, &wc));
        RW(sfv_channel_compare_swap(c, &sc, word, 0, 1, &wc));
        RW(sfv_channel_compare_swap(c, NULL, word, 0, 1, &wc));
        RW(sfv_channel_fetch_add(c, &old, small, 1, &wc));
        RW(sfv_channel_fetch_add(c, &old, sfv_remote_mr_make(word.addr + 4, 8, word.rkey), 1, &wc)); /* not 8-byte aligned */
    }
    RW(sfv_channel_receive(on_srq, &sc, 1, &wc));
    memset(&none, 0, sizeof none);
    RW(sfv_pending_wait(&none, 10, &wc));
    RW(sfv_pending_poll(&none, &wc));
    RW(sfv_pending_wait(NULL, 10, &wc));
    RW(sfv_pending_poll(NULL, &wc));
    CHECK_OK(sfv_destroy_channel(on_srq));
    CHECK_OK(sfv_destroy_srq(srq));
    CHECK_OK(sfv_destroy_channel(fresh));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    r22_close(&e);
}

/* ---- out-parameters on failure --------------------------------------------------------------- */
static int r22_all_zero(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    size_t i;
    for (i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}
/* OZ(call, obj): the call fails, with a matching last error, and obj (filled with garbage first)
   is all zero. */
#define OZ(call, obj)                                                                                    \
    do {                                                                                                 \
        sfv_result r_;                                                                                   \
        memset(&(obj), 0xA5, sizeof(obj));                                                               \
        r22_mark();                                                                                      \
        r_ = (call);                                                                                     \
        if (r_ == SFV_OK || r_ == SFV_NOT_DONE) FAIL("%s: %s", #call, sfv_result_str(r_));                \
        if (sfv_last_error()->result != r_)                                                              \
            FAIL("%s returned %s, the last error says %s", #call, sfv_result_str(r_), sfv_result_str(sfv_last_error()->result)); \
        if (!r22_all_zero(&(obj), sizeof(obj))) FAIL("%s returned %s, %s not zeroed", #call, sfv_result_str(r_), #obj); \
    } while (0)

/* ERRORS: "Fallible functions ... set their out-parameters to NULL/zero on failure." (Held: a
   guard.) */
static void t_failure_zeroes_outputs(void) {
    r22_env e;
    sfv_channel *ch, *ach;
    sfv_context *ctxo;
    sfv_pd *pdo;
    sfv_mr *mro;
    sfv_cq *cqo;
    sfv_srq *srqo;
    sfv_lease *lo;
    sfv_multi_channel *mc, *mco;
    sfv_node *nodeo;
    sfv_device_list *dl;
    sfv_port_attr pa;
    sfv_device_attr da;
    sfv_gid_entry ge;
    sfv_channel_desc d, dout;
    sfv_endpoint ep, eps[3];
    sfv_srq_desc sd;
    sfv_node_desc nd;
    sfv_remote_mr rmo;
    sfv_gather_element go;
    sfv_scatter_element so;
    uint8_t blob[SFV_NODE_ENDPOINT_SIZE(2) - 1];
    uint64_t guid;
    uint32_t gi;
    size_t cnt, rank, world;
    int fd;
    sfv_event ev[2];
    sfv_work_completion wcs[3];
    fk_reset();
    r22_open(&e, 1 << 16);
    CHECK_OK(sfv_get_device_list(&dl));
    OZ(sfv_device_list_guid(dl, 99, &guid), guid);
    OZ(sfv_open_device_at(dl, 99, &ctxo), ctxo);
    OZ(sfv_open_device("nope", &ctxo), ctxo);
    sfv_free_device_list(dl);
    OZ(sfv_query_port(e.ctx, 9, &pa), pa);
    OZ(sfv_query_device(NULL, &da), da);
    OZ(sfv_query_gid(e.ctx, 1, 200, &ge), ge);
    OZ(sfv_choose_gid(e.ctx, 9, &gi), gi);
    OZ(sfv_alloc_pd(NULL, &pdo), pdo);
    OZ(sfv_create_cq(e.ctx, 0, &cqo), cqo);
    OZ(sfv_reg_mr_local(e.pd, NULL, 8, &mro), mro);
    OZ(sfv_reg_mr_access(e.pd, e.buf, 8, 1u << 30, &mro), mro);
    OZ(sfv_reg_dmabuf_mr_local(e.pd, 3, 1, 8, 2, &mro), mro);
    OZ(sfv_context_wrap(NULL, true, &ctxo), ctxo);
    OZ(sfv_pd_wrap(e.ctx, NULL, true, &pdo), pdo);
    OZ(sfv_remote_mr_decode(e.buf, 3, &rmo), rmo);
    OZ(sfv_remote_mr_sub(sfv_remote_mr_make(0, 4, 1), 5, &rmo), rmo);
    OZ(sfv_remote_mr_slice(sfv_remote_mr_make(0, 4, 1), 2, 5, &rmo), rmo);
    OZ(sfv_remote_mr_array_field(sfv_remote_mr_make(0, 4, 1), 8, 1, 0, 8, &rmo), rmo);
    OZ(sfv_mr_gather_element_checked(e.mr, e.buf + e.len, 1, &go), go);
    OZ(sfv_mr_scatter_element_checked(e.mr, e.buf - 1, 1, &so), so);
    OZ(sfv_endpoint_decode(e.buf, 32, &ep), ep);
    memset(&d, 0, sizeof d);
    d.max_send_sge = 1u << 30;
    OZ(sfv_channel_desc_resolve(e.pd, &d, &dout), dout);
    OZ(sfv_create_channel(e.pd, &d, &ch), ch);
    OZ(sfv_channel_endpoint(NULL, &ep), ep);
    memset(&sd, 0, sizeof sd);
    sd.max_wr = 1u << 30;
    OZ(sfv_create_srq(e.pd, &sd, &srqo), srqo);
    OZ(sfv_create_multi_channel(e.pd, 0, NULL, &mco), mco);
    OZ(sfv_create_multi_channel(e.pd, 2, &d, &mco), mco);
    memset(&nd, 0, sizeof nd);
    nd.world_size = 2;
    nd.rank = 2;
    OZ(sfv_create_node(e.pd, &nd, &nodeo), nodeo);
    fd = 7;
    CHECK_RESULT(sfv_context_event_fd(NULL, &fd), SFV_ERR_INVALID);
    CHECK_EQ(fd, -1);
    OZ(sfv_context_events(NULL, ev, 2, &cnt), cnt);
    OZ(sfv_poll_cq(NULL, wcs, 2, &cnt), cnt);
    OZ(sfv_launcher_rank(&rank, &world), rank);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &ach));
    OZ(sfv_lease_grant(ach, e.mr, 0, 64, SFV_ACCESS_REMOTE_READ, &lo), lo); /* no windows on this device */
    CHECK_OK(sfv_create_multi_channel(e.pd, 2, NULL, &mc));
    OZ(sfv_multi_channel_endpoints(mc, eps, 3), eps);
    CHECK_OK(sfv_destroy_multi_channel(mc));
    nd.rank = 0;
    CHECK_OK(sfv_create_node(e.pd, &nd, &nodeo));
    OZ(sfv_node_endpoint(nodeo, blob, sizeof blob), blob);
    CHECK_OK(sfv_destroy_node(nodeo));
    CHECK_OK(sfv_destroy_channel(ach));
    r22_close(&e);
}

/* ---- two wraps of one verbs context ------------------------------------------------------------ */
/* >>events: a QP event that moves the QP to the error state breaks its channel, PORT_ERR every
   channel on that port of the context, DEVICE_FATAL every channel; >>memory regions allows one
   verbs context wrapped twice (sfv_context_wrap twice). The device's events come once, to
   whichever wrap reads first, and each wrap acted on its own channels only: an event read
   through wrap A left the channels of wrap B unbroken (their posts taken, their waits running
   to the deadline) and never reached B's queue (sfv_context_events of B said nothing). */
static void t_double_wrap_events(void) {
    struct ibv_device **list;
    struct ibv_context *raw;
    sfv_context *wa, *wb;
    sfv_pd *pb;
    sfv_mr *mr;
    sfv_channel *ch, *ch2;
    sfv_event ev[4], by;
    sfv_event_type t;
    sfv_pending rx;
    sfv_work_completion wc;
    size_t n;
    static unsigned char buf[4096];
    sfv_scatter_element sc;
    int fd;
    uint64_t t0;
    fk_reset();
    list = ibv_get_device_list(NULL);
    CHECK(list);
    raw = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    CHECK(raw);
    CHECK_OK(sfv_context_wrap(raw, false, &wa));
    CHECK_OK(sfv_context_wrap(raw, false, &wb));
    CHECK_OK(sfv_alloc_pd(wb, &pb));
    CHECK_OK(sfv_reg_mr_local(pb, buf, sizeof buf, &mr));
    CHECK_OK(sfv_create_channel(pb, NULL, &ch));
    r22_connect(ch, ch);
    CHECK_OK(sfv_create_channel(pb, NULL, &ch2));
    r22_connect(ch2, ch2);
    CHECK_OK(sfv_context_event_fd(wb, &fd));
    /* a QP event for B's channel, read through A */
    fk_inject_async_event(raw, IBV_EVENT_QP_FATAL, sfv_channel_raw_qp(ch), 0);
    CHECK_OK(sfv_context_events(wa, ev, 4, &n));
    CHECK_EQ(n, 1);
    CHECK(sfv_channel_broken(ch, &t));
    CHECK_EQ(t, SFV_EVENT_QP_FATAL);
    CHECK(!sfv_channel_broken(ch2, NULL));
    CHECK_OK(sfv_context_events(wb, ev, 4, &n)); /* B's own queue has it too, naming its channel */
    CHECK_EQ(n, 1);
    CHECK_EQ(ev[0].type, SFV_EVENT_QP_FATAL);
    CHECK(ev[0].channel == ch);
    CHECK_EQ(ev[0].channels_broken, 1);
    /* the device fails, and A's reader sees it: B's wait ends at once, not at its deadline */
    sc = sfv_mr_scatter_element(mr, buf, 64);
    CHECK_OK(sfv_channel_post_receive(ch2, &sc, 1, &rx));
    fk_inject_async_event(raw, IBV_EVENT_DEVICE_FATAL, NULL, 0);
    CHECK_OK(sfv_context_events(wa, &by, 1, &n));
    CHECK_EQ(n, 1);
    t0 = sfv__now_ns();
    CHECK_RESULT(sfv_pending_wait(&rx, 5000, &wc), SFV_ERR_WORK);
    CHECK(sfv__now_ns() - t0 < 1000000000ull);
    CHECK_OK(sfv_destroy_channel(ch));
    CHECK_OK(sfv_destroy_channel(ch2));
    CHECK_OK(sfv_dereg_mr(mr));
    CHECK_OK(sfv_dealloc_pd(pb));
    CHECK_OK(sfv_close_device(wa));
    CHECK_OK(sfv_close_device(wb));
    CHECK_EQ(fk_async_unacked(), 0);
    CHECK_EQ(ibv_close_device(raw), 0);
    CHECK_EQ(fk_live_total(), 0);
    CHECK_EQ(r22_blocks, 0);
}

/* ---- what the order of a teardown may not be ----------------------------------------------------- */
/* STEP BY STEP 7 said "Tear down in any order" and docs/guide.md "Any order", and the guide said
   an element outside its MR "is refused before anything reaches the NIC
   (SFV_ERR_SLICE_NOT_WITHIN_BOUNDS)". Neither holds as written: an MR deregistered while work in
   flight uses it is a broken contract (DEBUG CHECKS: SFV_ASSERT), and a plain element outside
   its MR is one too (debug builds only), not a refusal; only the _checked constructors refuse.
   The sentences now say so; this pins the behaviour they describe. */
static void t_teardown_order_with_work_in_flight(void) {
    r22_env e;
    sfv_channel *a;
    sfv_pending rx;
    sfv_scatter_element sc, out;
    fk_reset();
    r22_open(&e, 4096);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    sc = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_channel_post_receive(a, &sc, 1, &rx));
#if SFV_TRACK_INFLIGHT
    CHECK_ABORTS((void)sfv_dereg_mr(e.mr));
#endif
#if SFV_DEBUG
    CHECK_ABORTS((void)sfv_mr_scatter_element(e.mr, e.buf + 4000, 200));
#endif
    CHECK_RESULT(sfv_mr_scatter_element_checked(e.mr, e.buf + 4000, 200, &out), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_OK(sfv_destroy_channel(a)); /* the receive flushed: now the MR may go */
    r22_close(&e);
}

/* ---- a failure that was taken back ------------------------------------------------------------ */
static sfv_pd *r22_scope_pd;
static sfv_result r22_fn_ib_then_fail(sfv_channel *ch, void *user) {
    sfv_channel *c;
    (void)ch;
    (void)user;
    /* succeeds: on InfiniBand without a usable GID the channel connects by LID, the failed GID
       choice taken back */
    if (sfv_create_channel(r22_scope_pd, NULL, &c) != SFV_OK) return SFV_ERR_DRIVER;
    if (sfv_destroy_channel(c) != SFV_OK) return SFV_ERR_DRIVER;
    return SFV_ERR_INVALID; /* fn's own failure, recorded nowhere */
}
static sfv_result r22_gather_ib_then_fail(void *user, const void *mine, void *all, size_t size) {
    (void)mine;
    (void)all;
    (void)size;
    return r22_fn_ib_then_fail(NULL, user);
}
/* ERRORS: sfv_last_error() describes the last failure. A scope whose fn fails, and
   sfv_node_connect_with whose allgather fails, keep fn's own detail when fn recorded a failure
   while it ran (a count of the failures recorded). A failure that a successful call took back
   (a channel on InfiniBand that connects by LID when no GID is usable, a retry of the exchange,
   a scope's or a cleanup's failure kept out of the last error) still counted, so the detail
   "kept" was whatever older failure the last error held: the scope, the manual scope and
   sfv_node_connect_with returned fn's result with an unrelated message from before the call. */
static void t_taken_back_failure_is_not_fns(void) {
    r22_env e;
    sfv_channel *a;
    sfv_node *node;
    sfv_node_desc nd;
    sfv_scope_report rep;
    fk_reset();
    fk_set_link_layer(1);
    fk_set_gid_table(0, 0);
    r22_open(&e, 4096);
    r22_scope_pd = e.pd;
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    r22_mark(); /* an older failure: SFV_ERR_INVALID from sfv_remote_mr_decode */
    CHECK_RESULT(sfv_channel_manual_scope(a, r22_fn_ib_then_fail, NULL), SFV_ERR_INVALID);
    if (strcmp(sfv_last_error()->message, r22_sentinel.message) == 0)
        FAIL("the manual scope's SFV_ERR_INVALID left the older last error: %s", sfv_last_error()->message);
    r22_mark();
    CHECK_RESULT(sfv_channel_scope(a, r22_fn_ib_then_fail, NULL, &rep), SFV_ERR_SCOPE_FN);
    if (strstr(sfv_last_error()->message, r22_sentinel.message))
        FAIL("the scope's failure names an older error as fn's: %s", sfv_last_error()->message);
    memset(&nd, 0, sizeof nd);
    nd.world_size = 1;
    CHECK_OK(sfv_create_node(e.pd, &nd, &node));
    r22_mark();
    CHECK_RESULT(sfv_node_connect_with(node, r22_gather_ib_then_fail, NULL), SFV_ERR_INVALID);
    if (strcmp(sfv_last_error()->message, r22_sentinel.message) == 0)
        FAIL("sfv_node_connect_with's SFV_ERR_INVALID left the older last error: %s", sfv_last_error()->message);
    CHECK_OK(sfv_destroy_node(node));
    CHECK_OK(sfv_destroy_channel(a));
    r22_close(&e);
}

/* THREAD SAFETY: "A context's device events may be read from any thread". Two wraps of one verbs
   context read by two threads at once, each handing what it reads to the other (the locks taken
   in opposite orders would deadlock): every event lands in both queues exactly once. Before the
   fix each event reached one queue only (the reader's). */
typedef struct r22_reader { sfv_context *ctx; size_t got; } r22_reader;
static void *r22_read_events(void *arg) {
    r22_reader *rd = (r22_reader *)arg;
    int spins;
    for (spins = 0; spins < 20000; spins++) {
        sfv_event ev[4];
        size_t n = 0;
        if (sfv_context_events(rd->ctx, ev, 4, &n) != SFV_OK) break;
        rd->got += n;
    }
    return NULL;
}
static void t_double_wrap_events_threads(void) {
    struct ibv_device **list;
    struct ibv_context *raw;
    sfv_context *w[2];
    r22_reader rd[2];
    pthread_t th[2];
    int round, i;
    fk_reset();
    list = ibv_get_device_list(NULL);
    CHECK(list);
    raw = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    CHECK(raw);
    CHECK_OK(sfv_context_wrap(raw, false, &w[0]));
    CHECK_OK(sfv_context_wrap(raw, false, &w[1]));
    for (round = 0; round < 50; round++) {
        for (i = 0; i < 12; i++) fk_inject_async_event(raw, IBV_EVENT_PORT_ACTIVE, NULL, 1);
        for (i = 0; i < 2; i++) {
            rd[i].ctx = w[i];
            rd[i].got = 0;
            CHECK(pthread_create(&th[i], NULL, r22_read_events, &rd[i]) == 0);
        }
        for (i = 0; i < 2; i++) CHECK(pthread_join(th[i], NULL) == 0);
        CHECK_EQ(rd[0].got, 12);
        CHECK_EQ(rd[1].got, 12);
    }
    CHECK_OK(sfv_close_device(w[0]));
    CHECK_OK(sfv_close_device(w[1]));
    CHECK_EQ(fk_async_unacked(), 0);
    CHECK_EQ(ibv_close_device(raw), 0);
}

static const harness_test TESTS[] = {
    TEST(t_ctor_sweep, 120),
    TEST(t_teardown_any_order, 300),
    TEST(t_success_keeps_last_error, 60),
    TEST(t_refused_blocking_wc, 60),
    TEST(t_failure_zeroes_outputs, 60),
    TEST(t_double_wrap_events, 60),
    TEST(t_teardown_order_with_work_in_flight, 60),
    TEST(t_taken_back_failure_is_not_fns, 60),
    TEST(t_double_wrap_events_threads, 60),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
