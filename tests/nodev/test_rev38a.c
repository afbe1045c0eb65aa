/* test_rev38a.c - the set of live handles (session 28): every kind of handle the library hands
   out (device list, context, PD, CQ, MR, channel, SRQ, lease, multi-channel, node, CM listener,
   request and connection) destroyed, released, revoked, closed or answered twice, never made, or
   given dead as the parent of a call that makes a child: the second call read and freed freed
   memory (ASan: heap-use-after-free; a crash or a heap corruption in the plain build); now the
   set catches it before the handle is read (SFV_ASSERT, counted here and returning, then
   SFV_ERR_INVALID naming the call and the kind; nothing done, nothing lost). The set itself under
   stress, on threads, and in the unsigned-integer-overflow tier (its hash wraps on purpose:
   SFV__WRAPS), and hostile review 38a's finds. Also sfv_cm_accept of a request whose peer gave
   up. The fake librdmacm is compiled into this file (dead_handles.h), as test_rev34b does, so
   the uio and TSan tiers build it as any test_rev*. */
#include "dead_handles.h"

#include <pthread.h>

#define PORT 7638

static uint32_t r38_seed = 12345;
/* (an LCG: modulo 2^32 on purpose) */
SFV__WRAPS static uint32_t r38_rand(void) { return r38_seed = r38_seed * 1103515245u + 12345u; }

/* The set of live handles (>>impl handles: an open-addressing hash set whose removal moves
   entries back): every handle made is found until its destroy, then never, in any order of
   thousands made and destroyed; each destroy succeeds exactly once; the set's memory goes with
   its last handle. Its hash multiplies an address by a 64-bit constant, which wraps on purpose:
   the unsigned-integer-overflow tier stopped at the first handle made (every uio test failed). */
static void t_handle_set_stress(void) {
    enum { N = 3000 };
    static void *h[N];
    static bool is_cq[N];
    tf_env e;
    size_t live = N, i, k;
    fk_reset();
    tf_open(&e, 4096);
    for (i = 0; i < N; i++) {
        is_cq[i] = (r38_rand() >> 16) & 1;
        if (is_cq[i]) CHECK_OK(sfv_create_cq(e.ctx, 4, (sfv_cq **)&h[i]));
        else CHECK_OK(sfv_reg_mr_shared(e.pd, e.buf + (i % 64) * 64, 64, (sfv_mr **)&h[i]));
    }
    while (live > 0) {
        const size_t at = (r38_rand() >> 8) % live;
        void *const p = h[at];
        const bool cq = is_cq[at];
        CHECK(sfv__handle_live(p, cq ? SFV__H_CQ : SFV__H_MR));
        CHECK(!sfv__handle_live(p, cq ? SFV__H_MR : SFV__H_CQ)); /* (a kind for another: not it) */
        if (cq) CHECK_OK(sfv_destroy_cq((sfv_cq *)p));
        else CHECK_OK(sfv_dereg_mr((sfv_mr *)p));
        h[at] = h[live - 1];
        is_cq[at] = is_cq[live - 1];
        live--;
        if (live % 97 == 0) /* every one left still found (a backward shift that lost one would show) */
            for (k = 0; k < live; k++) CHECK(sfv__handle_live(h[k], is_cq[k] ? SFV__H_CQ : SFV__H_MR));
    }
    tf_close(&e); /* nothing left: the set's table went with its last handle */
    CHECK(sfv__hs == NULL && sfv__hs_n == 0);
}

/* The same from many threads at once on one PD and context (a handle made on one thread and
   destroyed on another as well): every make and destroy succeeds, none is lost or refused, and
   nothing is left. Run under ThreadSanitizer too (built by hand: see the report). */
#define R38_THREADS 4
#define R38_EACH 400
static tf_env r38_env;
static void *r38_shared[R38_THREADS][R38_EACH];
static void *r38_worker(void *arg) {
    const size_t me = (size_t)arg;
    size_t i;
    for (i = 0; i < R38_EACH; i++) {
        sfv_mr *m = NULL;
        sfv_cq *cq = NULL;
        if (sfv_reg_mr_shared(r38_env.pd, r38_env.buf, 64, &m) != SFV_OK) return (void *)1;
        if (sfv_create_cq(r38_env.ctx, 4, &cq) != SFV_OK) return (void *)1;
        if (sfv_destroy_cq(cq) != SFV_OK) return (void *)1;
        r38_shared[me][i] = m; /* the next thread's to destroy */
    }
    return NULL;
}
static void t_handle_set_threads(void) {
    pthread_t t[R38_THREADS];
    size_t i, j;
    void *rv;
    fk_reset();
    fk_set_threaded(true);
    tf_open(&r38_env, 4096);
    for (i = 0; i < R38_THREADS; i++) CHECK(pthread_create(&t[i], NULL, r38_worker, (void *)i) == 0);
    for (i = 0; i < R38_THREADS; i++) {
        CHECK(pthread_join(t[i], &rv) == 0);
        CHECK(rv == NULL);
    }
    for (i = 0; i < R38_THREADS; i++)
        for (j = 0; j < R38_EACH; j++) CHECK_OK(sfv_dereg_mr((sfv_mr *)r38_shared[(i + 1) % R38_THREADS][j]));
    CHECK_EQ(asserts, 0);
    tf_close(&r38_env);
}

/* "a parent no longer live given to a call that makes a child from it ... is a broken contract
   ... checked before reading the handle": a channel's parent is its SRQ as well as its PD
   (sfv_channel_desc.srq; LIFETIME: channel on an SRQ -> SRQ). A destroyed SRQ in the desc of
   sfv_create_channel, sfv_create_multi_channel or sfv_create_node was read (its PD, its context)
   after its free: ASan's heap-use-after-free, and in a plain build whatever the freed memory
   held. Now refused before anything reads it, nothing made. */
static void t_dead_srq_in_desc(void) {
    tf_env e;
    sfv_srq *srq;
    sfv_channel_desc d;
    sfv_channel *ch = NULL;
    sfv_multi_channel *mc = NULL;
    sfv_node *node = NULL;
    sfv_node_desc nd;
    fk_reset();
    tf_open(&e, 4096);
    CHECK_OK(sfv_create_srq(e.pd, NULL, &srq));
    CHECK_OK(sfv_destroy_srq(srq)); /* (no channel holds it: freed) */
    memset(&d, 0, sizeof d);
    d.srq = srq;
    DEAD_REFUSED(sfv_create_channel(e.pd, &d, &ch), "SRQ");
    CHECK(ch == NULL);
    DEAD_REFUSED(sfv_create_multi_channel(e.pd, 2, &d, &mc), "SRQ");
    CHECK(mc == NULL);
    memset(&nd, 0, sizeof nd);
    nd.world_size = 2;
    nd.channel = d;
    DEAD_REFUSED(sfv_create_node(e.pd, &nd, &node), "SRQ");
    CHECK(node == NULL);
    tf_close(&e);
}

static fkcm_event r38_ev(int type) {
    fkcm_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    return ev;
}

/* The same promise for a CM connection made from a caller's channel (sfv_cm_connect_channel,
   sfv_cm_accept_channel): a destroyed channel was read (ASan: heap-use-after-free). Now refused
   before anything reads it; the request given to sfv_cm_accept_channel is answered (rejected)
   and freed, as for every other refusal of that call. */
static void t_dead_channel_to_cm(void) {
    tf_env e;
    sfv_channel *ch;
    sfv_cm_conn *c = NULL;
    sfv_cm_listener *l;
    sfv_cm_request *q;
    fkcm_event ev = r38_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
    fk_reset();
    fkcm_reset();
    tf_open(&e, 4096);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &ch));
    CHECK_OK(sfv_destroy_channel(ch));
    DEAD_REFUSED(sfv_cm_connect_channel(ch, NULL, FKCM_ADDR0, PORT, NULL, 0, 1000, &c), "channel");
    CHECK(c == NULL);
    CHECK_EQ(fkcm_calls(FKCM_CREATE_ID), 0);
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    ev.qpn = 0x99;
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    DEAD_REFUSED(sfv_cm_accept_channel(q, ch, NULL, 0, 1000, &c), "channel");
    CHECK(c == NULL);
    CHECK_EQ(fkcm_calls(FKCM_REJECT), 1); /* (answered: freed, the listener free to go) */
    {
        sfv_context *ctx = (sfv_context *)1; /* (a context from the answered request's device: refused too) */
        DEAD_REFUSED(sfv_cm_request_open_device(q, &ctx), "CM request");
        CHECK(ctx == NULL);
    }
    CHECK_OK(sfv_cm_destroy_listener(l));
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fkcm_unacked(), 0);
    tf_close(&e);
}

/* The same for the calls that make a CM request from a listener (sfv_cm_get_request) and a
   context from a device list (sfv_open_device_at) or from a request (sfv_cm_request_open_device,
   above): a destroyed listener, a freed list or an answered request was read (ASan:
   heap-use-after-free; a listener's freed event channel polled). Now refused, nothing made (the
   LIFETIME sentence names these children too). */
static void t_dead_listener_and_list(void) {
    sfv_cm_listener *l;
    sfv_cm_request *q = (sfv_cm_request *)1;
    sfv_device_list *list;
    sfv_context *ctx = (sfv_context *)1;
    fk_reset();
    fkcm_reset();
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    CHECK_OK(sfv_cm_destroy_listener(l));
    DEAD_REFUSED(sfv_cm_get_request(l, 10, &q), "CM listener");
    CHECK(q == NULL);
    CHECK_OK(sfv_get_device_list(&list));
    CHECK(sfv_device_list_len(list) > 0);
    sfv_free_device_list(list);
    DEAD_REFUSED(sfv_open_device_at(list, 0, &ctx), "device list");
    CHECK(ctx == NULL);
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fk_live_total(), 0);
}

static void t_verbs_handles_twice(void) {
    tf_env e;
    sfv_device_list *list;
    sfv_context *ctx2;
    sfv_pd *pd2;
    sfv_cq *cq;
    sfv_mr *mr2;
    sfv_channel *a, *b, *c;
    sfv_srq *srq;
    sfv_srq_desc sd;
    sfv_lease *l;
    sfv_multi_channel *mc;
    sfv_node *node;
    sfv_node_desc nd;
    int before;
    fk_reset();
    fk_set_mw(true);
    tf_open(&e, 8192);
    CHECK_OK(sfv_get_device_list(&list));
    sfv_free_device_list(list);
    before = asserts;
    sfv_free_device_list(list); /* (void: the assert and the last error say it) */
    CHECK_EQ(asserts, before + 1);
    CHECK(strstr(sfv_last_error()->message, "not a live device list") != NULL);
    /* a context, a PD with no children: freed by their release, then released again */
    CHECK_OK(sfv_open_device(NULL, &ctx2));
    CHECK_OK(sfv_alloc_pd(ctx2, &pd2));
    CHECK_OK(sfv_dealloc_pd(pd2));
    DEAD_REFUSED(sfv_dealloc_pd(pd2), "PD");
    CHECK_OK(sfv_close_device(ctx2));
    DEAD_REFUSED(sfv_close_device(ctx2), "context");
    CHECK_OK(sfv_create_cq(e.ctx, 16, &cq));
    CHECK_OK(sfv_destroy_cq(cq));
    DEAD_REFUSED(sfv_destroy_cq(cq), "CQ");
    CHECK_OK(sfv_reg_mr_shared(e.pd, e.buf + 4096, 1024, &mr2));
    CHECK_OK(sfv_dereg_mr(mr2));
    DEAD_REFUSED(sfv_dereg_mr(mr2), "MR");
    /* a kind for another: a PD is no MR (nothing read of it as one) */
    DEAD_REFUSED(sfv_dereg_mr((sfv_mr *)(void *)e.pd), "MR");
    CHECK_OK(sfv_create_channel(e.pd, NULL, &c));
    CHECK_OK(sfv_destroy_channel(c));
    DEAD_REFUSED(sfv_destroy_channel(c), "channel");
    memset(&sd, 0, sizeof sd);
    sd.max_wr = 8;
    CHECK_OK(sfv_create_srq(e.pd, &sd, &srq));
    CHECK_OK(sfv_destroy_srq(srq));
    DEAD_REFUSED(sfv_destroy_srq(srq), "SRQ");
    /* a lease: revoked, then revoked again */
    tf_pair(&e, NULL, &a, &b);
    {
        sfv_mr *m;
        CHECK_OK(sfv_reg_mr_access(e.pd, e.buf + 6144, 1024, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_MW_BIND, &m));
        CHECK_OK(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l));
        CHECK_OK(sfv_lease_revoke(l));
        DEAD_REFUSED(sfv_lease_revoke(l), "lease");
        CHECK_OK(sfv_dereg_mr(m)); /* (its lease gone: nothing holds it) */
    }
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_create_multi_channel(e.pd, 2, NULL, &mc));
    CHECK_OK(sfv_destroy_multi_channel(mc));
    DEAD_REFUSED(sfv_destroy_multi_channel(mc), "multi-channel");
    memset(&nd, 0, sizeof nd);
    nd.world_size = 1;
    CHECK_OK(sfv_create_node(e.pd, &nd, &node));
    CHECK_OK(sfv_destroy_node(node));
    DEAD_REFUSED(sfv_destroy_node(node), "node");
    /* never made: an address the library never gave */
    {
        static char not_a_handle[512];
        DEAD_REFUSED(sfv_destroy_channel((sfv_channel *)(void *)not_a_handle), "channel");
        DEAD_REFUSED(sfv_close_device((sfv_context *)(void *)not_a_handle), "context");
    }
    tf_close(&e); /* nothing left: the set's own memory went with its last handle */
    CHECK_EQ(fk_live_total(), 0);
}

/* A request answered (rejected, accepted), then answered again; a connection closed twice; a
   listener destroyed twice. */
static void t_cm_handles_twice(void) {
    tf_env e;
    sfv_cm_listener *l;
    sfv_cm_request *q;
    sfv_cm_conn *c = NULL, *c2 = NULL;
    fkcm_event ev = r38_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
    fk_reset();
    fkcm_reset();
    tf_open(&e, 4096);
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    ev.qpn = 0x77;
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    CHECK_OK(sfv_cm_reject(q, NULL, 0));
    DEAD_REFUSED(sfv_cm_reject(q, NULL, 0), "CM request");
    DEAD_REFUSED(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, &c2), "CM request");
    CHECK(c2 == NULL);
    DEAD_REFUSED(sfv_cm_accept_channel(q, NULL, NULL, 0, 1000, &c2), "CM request");
    DEAD_REFUSED(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, NULL), "CM request"); /* (its out NULL too: nothing rejected twice) */
    /* accepted: the connection closed, then closed again */
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    CHECK_OK(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, &c));
    DEAD_REFUSED(sfv_cm_reject(q, NULL, 0), "CM request");
    CHECK_OK(sfv_cm_close(c, 0));
    DEAD_REFUSED(sfv_cm_close(c, 0), "CM connection");
    DEAD_REFUSED(sfv_cm_events(c), "CM connection"); /* (t_calls_on_dead_handles: the same for the others) */
    CHECK_OK(sfv_cm_destroy_listener(l));
    DEAD_REFUSED(sfv_cm_destroy_listener(l), "CM listener");
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fkcm_unacked(), 0);
    tf_close(&e);
    CHECK_EQ(fk_live_total(), 0);
}

/* A request whose side gave up before our answer: rdma_accept says EINVAL (the kernel's CM no
   longer waits for an answer). It said SFV_ERR_INVALID, the result of a caller's mistake; now
   SFV_ERR_UNREACHABLE, as the same peer giving up after the answer says. */
static void t_cm_accept_after_peer_gave_up(void) {
    tf_env e;
    sfv_cm_listener *l;
    sfv_cm_request *q;
    sfv_cm_conn *c = (sfv_cm_conn *)1;
    fkcm_event ev = r38_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
    fk_reset();
    fkcm_reset();
    tf_open(&e, 4096);
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    ev.qpn = 0x78;
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    fkcm_fail(FKCM_ACCEPT, 1, EINVAL, 0);
    CHECK_RESULT(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, &c), SFV_ERR_UNREACHABLE);
    CHECK(c == NULL);
    CHECK(strstr(sfv_last_error()->message, "gave up") != NULL);
    CHECK_EQ(sfv_last_error()->errnum, EINVAL);
    CHECK_OK(sfv_cm_destroy_listener(l)); /* (the request was freed: nothing taken is left) */
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fkcm_unacked(), 0);
    tf_close(&e);
    CHECK_EQ(fk_live_total(), 0);
}

/* A parent handle no longer live, given to a call that makes a child from it: refused before
   anything reads it (the call read the freed parent: ASan's heap-use-after-free), nothing made. */
static void t_child_of_dead_parent(void) {
    tf_env e;
    sfv_context *ctx2;
    sfv_pd *pd2, *pd3 = NULL;
    sfv_mr *m = NULL;
    sfv_cq *cq = NULL;
    sfv_channel *ch = NULL, *a, *b;
    sfv_srq *srq = NULL;
    sfv_multi_channel *mc = NULL;
    sfv_node *node = NULL;
    sfv_node_desc nd;
    sfv_lease *l = NULL;
    sfv_cm_conn *c = NULL;
    fk_reset();
    fkcm_reset();
    fk_set_mw(true);
    tf_open(&e, 8192);
    CHECK_OK(sfv_open_device(NULL, &ctx2));
    CHECK_OK(sfv_alloc_pd(ctx2, &pd2));
    CHECK_OK(sfv_dealloc_pd(pd2));
    CHECK_OK(sfv_close_device(ctx2));
    DEAD_REFUSED(sfv_alloc_pd(ctx2, &pd3), "context");
    CHECK(pd3 == NULL);
    DEAD_REFUSED(sfv_create_cq(ctx2, 16, &cq), "context");
    CHECK(cq == NULL);
    DEAD_REFUSED(sfv_reg_mr_shared(pd2, e.buf, 64, &m), "PD");
    CHECK(m == NULL);
    DEAD_REFUSED(sfv_create_channel(pd2, NULL, &ch), "PD");
    CHECK(ch == NULL);
    DEAD_REFUSED(sfv_create_srq(pd2, NULL, &srq), "PD");
    CHECK(srq == NULL);
    DEAD_REFUSED(sfv_create_multi_channel(pd2, 2, NULL, &mc), "PD");
    CHECK(mc == NULL);
    memset(&nd, 0, sizeof nd);
    nd.world_size = 1;
    DEAD_REFUSED(sfv_create_node(pd2, &nd, &node), "PD");
    CHECK(node == NULL);
    DEAD_REFUSED(sfv_cm_connect(pd2, NULL, FKCM_ADDR0, PORT, NULL, NULL, 0, 1000, &c), "PD");
    CHECK(c == NULL);
    /* a lease on a destroyed channel, or of a deregistered MR */
    tf_pair(&e, NULL, &a, &b);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf + 6144, 1024, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_MW_BIND, &m));
    CHECK_OK(sfv_dereg_mr(m));
    DEAD_REFUSED(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), "MR");
    CHECK(l == NULL);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf + 6144, 1024, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_MW_BIND, &m));
    CHECK_OK(sfv_destroy_channel(b));
    DEAD_REFUSED(sfv_lease_grant(b, m, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), "channel");
    CHECK(l == NULL);
    CHECK_OK(sfv_dereg_mr(m));
    CHECK_OK(sfv_destroy_channel(a));
    /* a request accepted onto a dead PD: rejected (answered, freed), the PD not read */
    {
        sfv_cm_listener *ls;
        sfv_cm_request *q;
        fkcm_event ev = r38_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
        CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &ls));
        ev.qpn = 0x79;
        fkcm_push(sfv_cm_listener_fd(ls), &ev);
        CHECK_OK(sfv_cm_get_request(ls, 1000, &q));
        DEAD_REFUSED(sfv_cm_accept(q, pd2, NULL, NULL, 0, 1000, &c), "PD");
        CHECK(c == NULL);
        CHECK_EQ(fkcm_calls(FKCM_REJECT), 1);
        DEAD_REFUSED(sfv_cm_reject(q, NULL, 0), "CM request"); /* (answered: freed) */
        CHECK_OK(sfv_cm_destroy_listener(ls));
    }
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_unacked(), 0);
    tf_close(&e);
    CHECK_EQ(fk_live_total(), 0);
}

/* Every call that acts on a handle, other than the data path's (posts, waits, polls, scopes,
   many-peer calls, element and remote-region builders) and the getters, given one destroyed:
   each read freed memory (a query, a reset, a handshake, an event fd of a closed context, a node
   connect); now refused before the handle is read, as a destroy is (SFV_ASSERT, then
   SFV_ERR_INVALID, "not a live ..."), its out-parameters zeroed as on any refusal. */
static sfv_result r38_allgather_never(void *user, const void *mine, void *all, size_t size) {
    (void)mine, (void)all, (void)size, (void)user;
    FAIL("an allgather called for a dead node");
    return SFV_ERR_INVALID;
}
static void t_calls_on_dead_handles(void) {
    tf_env e;
    sfv_device_list *list;
    sfv_context *ctx2;
    sfv_channel *c, *ec;
    sfv_channel_desc d;
    sfv_srq *srq;
    sfv_srq_desc sd;
    sfv_multi_channel *mc;
    sfv_node *node;
    sfv_node_desc nd;
    sfv_port_attr pa;
    sfv_device_attr da;
    sfv_gid_entry ge;
    sfv_endpoint ep, eps[2];
    sfv_event evs[4];
    uint8_t nep[SFV_NODE_ENDPOINT_SIZE(1)], zero[SFV_NODE_ENDPOINT_SIZE(1)];
    uint64_t guid = 1;
    uint32_t gi = 1;
    size_t count = 1, rank = 0;
    int fd = 7;
    sfv_net_node one = {"127.0.0.1", 29050, 0, NULL};
    fk_reset();
    tf_open(&e, 4096);
    CHECK_OK(sfv_get_device_list(&list));
    sfv_free_device_list(list);
    DEAD_REFUSED(sfv_device_list_guid(list, 0, &guid), "device list");
    CHECK_EQ(guid, 0);
    CHECK_OK(sfv_open_device(NULL, &ctx2));
    CHECK_OK(sfv_close_device(ctx2));
    DEAD_REFUSED(sfv_query_port(ctx2, 1, &pa), "context");
    DEAD_REFUSED(sfv_query_device(ctx2, &da), "context");
    DEAD_REFUSED(sfv_query_gid(ctx2, 1, 0, &ge), "context");
    DEAD_REFUSED(sfv_choose_gid(ctx2, 1, &gi), "context");
    CHECK_EQ(gi, 0);
    DEAD_REFUSED(sfv_context_bind_thread_to_numa(ctx2, true), "context");
    DEAD_REFUSED(sfv_context_event_fd(ctx2, &fd), "context");
    CHECK_EQ(fd, -1);
    DEAD_REFUSED(sfv_context_events(ctx2, evs, 4, &count), "context");
    CHECK_EQ(count, 0);
    /* a channel (one in event mode for arm and ack) */
    CHECK_OK(sfv_create_channel(e.pd, NULL, &c));
    memset(&d, 0, sizeof d);
    d.wait_mode = SFV_WAIT_EVENT;
    CHECK_OK(sfv_create_channel(e.pd, &d, &ec));
    CHECK_OK(sfv_channel_endpoint(c, &ep));
    CHECK_OK(sfv_destroy_channel(c));
    CHECK_OK(sfv_destroy_channel(ec));
    DEAD_REFUSED(sfv_channel_endpoint(c, &ep), "channel");
    CHECK_EQ(ep.qpn, 0);
    DEAD_REFUSED(sfv_channel_handshake(c, &ep), "channel");
    DEAD_REFUSED(sfv_channel_reset(c), "channel");
    DEAD_REFUSED(sfv_channel_arm(ec), "channel");
    DEAD_REFUSED(sfv_channel_ack_events(ec), "channel");
    memset(&sd, 0, sizeof sd);
    sd.max_wr = 8;
    CHECK_OK(sfv_create_srq(e.pd, &sd, &srq));
    CHECK_OK(sfv_destroy_srq(srq));
    DEAD_REFUSED(sfv_srq_set_limit(srq, 1), "SRQ");
    CHECK_OK(sfv_create_multi_channel(e.pd, 2, NULL, &mc));
    CHECK_OK(sfv_destroy_multi_channel(mc));
    DEAD_REFUSED(sfv_multi_channel_endpoints(mc, eps, 2), "multi-channel");
    DEAD_REFUSED(sfv_multi_channel_handshake(mc, eps, 2), "multi-channel");
    memset(&nd, 0, sizeof nd);
    nd.world_size = 1;
    CHECK_OK(sfv_create_node(e.pd, &nd, &node));
    CHECK_OK(sfv_destroy_node(node));
    memset(nep, 0xAB, sizeof nep);
    memset(zero, 0, sizeof zero);
    DEAD_REFUSED(sfv_node_endpoint(node, nep, sizeof nep), "node");
    CHECK(memcmp(nep, zero, sizeof nep) == 0);
    DEAD_REFUSED(sfv_node_handshake(node, nep, sizeof nep), "node");
    DEAD_REFUSED(sfv_node_connect(node, &one, 100), "node");
    DEAD_REFUSED(sfv_node_connect_keyed(node, &one, NULL, 100), "node");
    DEAD_REFUSED(sfv_node_connect_with(node, r38_allgather_never, NULL), "node");
    DEAD_REFUSED(sfv_node_connect_cm(node, &one, NULL, 100), "node");
    DEAD_REFUSED(sfv_node_barrier(node, &rank, 1, 100), "node");
    DEAD_REFUSED(sfv_node_barrier_unchecked(node, NULL, 0, 100), "node");
    /* NULL is still refused as an invalid argument, not as a dead handle */
    {
        const int before = asserts;
        CHECK_RESULT(sfv_channel_reset(NULL), SFV_ERR_INVALID);
        CHECK_RESULT(sfv_query_device(NULL, &da), SFV_ERR_INVALID);
        CHECK_RESULT(sfv_node_endpoint(NULL, nep, sizeof nep), SFV_ERR_INVALID);
        CHECK_EQ(asserts, before);
    }
    tf_close(&e);
    CHECK_EQ(fk_live_total(), 0);
}

static const harness_test TESTS[] = {
    TEST(t_handle_set_stress, 60),
    TEST(t_handle_set_threads, 60),
    TEST(t_dead_srq_in_desc, 10),
    TEST(t_dead_channel_to_cm, 10),
    TEST(t_dead_listener_and_list, 10),
    TEST(t_verbs_handles_twice, 10),
    TEST(t_cm_handles_twice, 10),
    TEST(t_cm_accept_after_peer_gave_up, 10),
    TEST(t_child_of_dead_parent, 10),
    TEST(t_calls_on_dead_handles, 10),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
