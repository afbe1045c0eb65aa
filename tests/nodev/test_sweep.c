/* test_sweep.c - failure injection on the fake NIC (librpma's RPMA_FAULT_INJECTION is the idea).
   A scenario (open a device, PD, MR, CQ, channels, handshake, every kind of work, batches, a
   scope, a multi-channel, nodes, teardown with work in flight) runs once to count its calls into
   the fake: every fallible verb and every allocation of the library. Then it runs again once per
   call, with that call failing, each run in its own process, and checks:
   - the public call that met the failure returns an error (never SFV_OK, never a crash) and
     sfv_last_error() names the failed verb or allocation ("ibv_create_qp", "calloc");
   - a call that returns SFV_OK leaves the last error as it was;
   - a blocking call returns with none of its work in flight;
   - a destroy that a verb refused works when called again;
   - after the teardown the fake holds no object and no file descriptor is left open (and the
     sanitizer build's LeakSanitizer finds no leak).
   A failure the library absorbs on purpose (moving a QP to ERR, or draining it, on the way out:
   it then destroys the QP) is allowed, and counted. The main scenario runs on RoCE and on
   InfiniBand, and once more with failed posts of lists taking their first work request (a
   partial post); a second scenario sleeps on a completion channel; a third covers atomics,
   request lists, unsignaled work with the scope's fence, sfv_channel_reset, an SRQ's own calls
   and asynchronous events. */
#define _GNU_SOURCE
#include "fake_verbs.h"
#define SFV_MALLOC(sz) fk_malloc(sz)
#define SFV_CALLOC(n, sz) fk_calloc(n, sz)
#define SFV_FREE(p) fk_free(p)
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "harness.h"

#include <dirent.h>
#include <stdarg.h>

/* ---- the checks ---------------------------------------------------------------------------- */
static long sw_site;              /* the call failing in this run, 0: none */
static bool sw_stopped;           /* a step failed as it should: the scenario tears down */
static const char *sw_absorbed;   /* a step that met the failure and still returned what it wanted */
static bool sw_absorbed_ok;       /* ... and that was SFV_OK */
static bool sw_void_hit;          /* the failure met a release that returns nothing (it cannot tell) */
static sfv_error sw_sentinel;

static void sw_die(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "    site %ld (%s %s): ", sw_site, sw_site ? fk_call_name(sw_site) : "none",
            sw_site ? fk_call_detail(sw_site) : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

/* Leaves a known last error behind, so a step that returns SFV_OK can be seen to keep it. */
static void sw_before(bool *hit_before) {
    sfv_remote_mr none;
    (void)!sfv_remote_mr_decode(NULL, 0, &none);
    sw_sentinel = *sfv_last_error();
    *hit_before = fk_failed() != NULL;
}

static bool sw_after(const char *call, int line, sfv_result r, sfv_result want, bool hit_before) {
    const sfv_error *e = sfv_last_error();
    const bool hit = !hit_before && fk_failed() != NULL;
    if (r == want) {
        if (want == SFV_OK && (e->verb != sw_sentinel.verb || strcmp(e->message, sw_sentinel.message) != 0))
            sw_die("line %d: %s returned SFV_OK but left a new last error: %s (verb %s)", line, call, e->message, e->verb);
        if (hit) {
            sw_absorbed = call;
            sw_absorbed_ok = want == SFV_OK;
        }
        return true;
    }
    if (!hit)
        sw_die("line %d: %s returned %s without a failure injected in it (last error: %s)", line, call, sfv_result_str(r), e->message);
    if (r == SFV_OK || r == SFV_NOT_DONE) sw_die("line %d: %s returned %s after %s failed", line, call, sfv_result_str(r), fk_failed());
    if (r == SFV_ERR_SCOPE_FN) { /* the scope keeps fn's own error detail */
        if (e->result == SFV_OK) sw_die("line %d: %s returned SFV_ERR_SCOPE_FN, but fn's last error is SFV_OK", line, call);
    } else if (r == SFV_ERR_SCOPE_AUTOPOLL) { /* the report has it; the message must say it */
        if (strcmp(fk_failed(), "ibv_poll_cq") != 0 && strcmp(fk_failed(), "ibv_req_notify_cq") != 0 &&
            strcmp(fk_failed(), "ibv_post_send") != 0) /* the scope's own post: its fence after unsignaled work */
            sw_die("line %d: %s returned SFV_ERR_SCOPE_AUTOPOLL for a failed %s", line, call, fk_failed());
        if (strcmp(e->verb, "scope") != 0 || !strstr(e->message, strcmp(fk_failed(), "ibv_post_send") == 0 ? "ibv_post_send failed" : "SFV_ERR_"))
            sw_die("line %d: %s: the auto-poll's failure is not told: %s (verb %s)", line, call, e->message, e->verb);
        sw_stopped = true;
        return false;
    } else if (e->result != r) sw_die("line %d: %s returned %s, its last error says %s", line, call, sfv_result_str(r), sfv_result_str(e->result));
    if (strcmp(e->verb, fk_failed()) != 0)
        sw_die("line %d: %s returned %s naming %s, but %s failed (%s)", line, call, sfv_result_str(r), e->verb, fk_failed(), e->message);
    if (!strcmp(fk_failed(), "malloc") || !strcmp(fk_failed(), "calloc")) {
        if (r != SFV_ERR_RESOURCE) sw_die("line %d: %s returned %s for a failed allocation", line, call, sfv_result_str(r));
    }
    sw_stopped = true;
    return false;
}

/* SW(call): the step succeeds, or fails as the injected failure says (then: false). */
#define SW_WANT(call, want) (sw_before(&sw_hb), sw_after(#call, __LINE__, (call), (want), sw_hb))
#define SW(call) SW_WANT(call, SFV_OK)
/* A blocking call: as SW, and nothing of it is left in flight, whatever it returned. */
#define SW_BLOCKING_WANT(ch, call, want) \
    (sw_out = sfv_channel_outstanding(ch), sw_blocking((ch), sw_out, SW_WANT(call, want), #call, __LINE__))
#define SW_BLOCKING(ch, call) SW_BLOCKING_WANT(ch, call, SFV_OK)
static bool sw_hb;
static size_t sw_out;

static bool sw_blocking(sfv_channel *ch, size_t before, bool ok, const char *call, int line) {
    if (sfv_channel_outstanding(ch) != before)
        sw_die("line %d: %s returned with %zu work requests still tracked (%zu before)", line, call,
               sfv_channel_outstanding(ch), before);
    return ok;
}

/* A destroy: a refusal must leave the object whole, and the next try must work. */
#define SW_DESTROY(call)                                                         \
    do {                                                                         \
        if (!SW(call) && !SW(call)) sw_die("line %d: %s failed twice", __LINE__, #call); \
    } while (0)


static int sw_open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int n = 0;
    if (!d) return -1;
    while ((de = readdir(d)) != NULL) n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* ---- the scenarios --------------------------------------------------------------------------- */
enum { SW_BUF = 8192 };

typedef struct sw_state {
    sfv_device_list *list;
    sfv_context *ctx, *ctx2;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_cq *cq;
    sfv_channel *a, *b;
    sfv_multi_channel *m1, *m2;
    sfv_node *n0, *n1, *solo;
    sfv_srq *srq;
    unsigned char *buf;
} sw_state;

static sfv_result sw_scope_fn(sfv_channel *ch, void *user) {
    sw_state *st = (sw_state *)user;
    sfv_gather_element g = sfv_mr_gather_element(st->mr, st->buf, 16);
    sfv_scatter_element s = sfv_mr_scatter_element(st->mr, st->buf + 4096, 16);
    sfv_remote_mr rm = sfv_remote_mr_make((uint64_t)(uintptr_t)(st->buf + 2048), 16, sfv_mr_rkey(st->mr));
    sfv_result r = sfv_channel_post_write(ch, &g, 1, rm, NULL);
    if (r == SFV_OK) r = sfv_channel_post_read(ch, &s, 1, rm, NULL);
    if (r == SFV_OK) r = sfv_channel_inject_write(ch, "last", 5, rm); /* unsignaled, last: the scope fences it */
    return r;
}

static void sw_channel_work(sw_state *st) {
    sfv_gather_element g[2];
    sfv_scatter_element s[2];
    sfv_remote_mr rm[2];
    sfv_pending rx[2], p;
    sfv_work_completion wc;
    sfv_scope_report rep;
    sfv_endpoint ea, eb;
    uint8_t blob[SFV_ENDPOINT_ENCODED_SIZE];
    int i;
    if (!SW(sfv_channel_endpoint(st->a, &ea)) || !SW(sfv_channel_endpoint(st->b, &eb))) return;
    sfv_endpoint_encode(&ea, blob);
    if (!SW(sfv_endpoint_decode(blob, sizeof blob, &ea))) return;
    if (!SW(sfv_channel_handshake(st->b, &ea)) || !SW(sfv_channel_handshake(st->a, &eb))) return;
    for (i = 0; i < 2; i++) {
        g[i] = sfv_mr_gather_element(st->mr, st->buf + 64 * i, 64);
        s[i] = sfv_mr_scatter_element(st->mr, st->buf + 1024 + 64 * i, 64);
        rm[i] = sfv_remote_mr_make((uint64_t)(uintptr_t)(st->buf + 2048 + 64 * i), 64, sfv_mr_rkey(st->mr));
    }
    /* send and receive, with and without immediate */
    if (!SW(sfv_channel_post_receive(st->b, s, 1, &rx[0]))) return;
    if (!SW_BLOCKING(st->a, sfv_channel_send(st->a, g, 1, &wc))) return;
    if (!SW(sfv_pending_wait(&rx[0], -1, &wc))) return;
    if (!SW(sfv_channel_post_receive(st->a, s, 2, &rx[0]))) return;
    if (!SW_BLOCKING(st->b, sfv_channel_send_imm(st->b, g, 2, 9, &wc))) return;
    if (!SW(sfv_pending_poll(&rx[0], &wc))) return;
    if (!wc.has_imm || wc.imm_data != 9 || wc.byte_len != 128) sw_die("send with immediate: wrong completion");
    /* one-sided */
    if (!SW_BLOCKING(st->a, sfv_channel_write(st->a, g, 1, rm[0], &wc))) return;
    if (!SW_BLOCKING(st->b, sfv_channel_read(st->b, s, 1, rm[0], &wc))) return;
    if (!SW(sfv_channel_post_receive(st->b, NULL, 0, &rx[0]))) return;
    if (!SW_BLOCKING(st->a, sfv_channel_write_imm(st->a, g, 1, rm[1], 5, &wc))) return;
    if (!SW(sfv_pending_wait(&rx[0], -1, &wc))) return;
    if (memcmp(st->buf + 2048, st->buf, 128) != 0 || memcmp(st->buf + 1024, st->buf, 64) != 0) sw_die("wrong bytes");
    /* batches */
    if (!SW(sfv_channel_post_receive_batch(st->b, s, 1, 2, rx))) return;
    if (!SW(sfv_channel_post_send_batch(st->a, g, 1, 2, &p))) return;
    if (!SW(sfv_pending_wait(&p, -1, NULL)) || !SW(sfv_pending_wait(&rx[0], -1, NULL)) || !SW(sfv_pending_wait(&rx[1], -1, NULL))) return;
    if (!SW(sfv_channel_post_write_batch(st->a, g, 1, 2, rm, &p)) || !SW(sfv_pending_wait(&p, -1, NULL))) return;
    if (!SW(sfv_channel_post_read_batch(st->b, s, 1, 2, rm, &p)) || !SW(sfv_pending_wait(&p, -1, NULL))) return;
    /* injects: plain memory, inline, a completion only every 4th (max_send_wr 8) */
    if (!SW(sfv_channel_post_receive_batch(st->b, s, 1, 2, rx))) return;
    for (i = 0; i < 2; i++)
        if (!SW(sfv_channel_inject(st->a, "inject", 7))) return;
    if (!SW(sfv_pending_wait(&rx[0], -1, NULL)) || !SW(sfv_pending_wait(&rx[1], -1, NULL))) return;
    if (!SW(sfv_channel_post_receive(st->b, NULL, 0, &rx[0]))) return;
    if (!SW(sfv_channel_inject_write(st->a, "w", 2, rm[0])) || !SW(sfv_channel_inject_write_imm(st->a, "wi", 3, rm[1], 3))) return;
    if (!SW(sfv_pending_wait(&rx[0], -1, &wc))) return;
    if (!wc.has_imm || wc.imm_data != 3 || memcmp(st->buf + 2048 + 64, "wi", 3) != 0) sw_die("inject_write_imm: wrong completion or bytes");
    /* a scope: its work polled for it */
    if (!SW(sfv_channel_scope(st->a, sw_scope_fn, st, &rep))) return;
    if (rep.auto_polled != 2) sw_die("scope: %zu auto-polled", rep.auto_polled);
    /* work left in flight for the destroy: a receive, and a send waiting for one (RNR) */
    if (!SW(sfv_channel_post_receive(st->a, s, 1, &rx[0]))) return;
    if (!SW(sfv_channel_post_send(st->b, g, 1, &p)) || !SW(sfv_channel_post_send(st->b, g, 1, &p))) return;
}

static void sw_multi_work(sw_state *st) {
    sfv_endpoint e1[2], e2[2];
    sfv_gather_element g = sfv_mr_gather_element(st->mr, st->buf, 32);
    sfv_scatter_element s[2];
    sfv_pending rx[2];
    sfv_peer_send ps[2];
    size_t i;
    if (!SW(sfv_create_multi_channel(st->pd, 2, NULL, &st->m1)) || !SW(sfv_create_multi_channel(st->pd, 2, NULL, &st->m2))) return;
    if (!SW(sfv_multi_channel_endpoints(st->m1, e1, 2)) || !SW(sfv_multi_channel_endpoints(st->m2, e2, 2))) return;
    if (!SW(sfv_multi_channel_handshake(st->m1, e2, 2)) || !SW(sfv_multi_channel_handshake(st->m2, e1, 2))) return;
    for (i = 0; i < 2; i++) {
        s[i] = sfv_mr_scatter_element(st->mr, st->buf + 5000 + 64 * i, 64);
        if (!SW(sfv_channel_post_receive(sfv_multi_channel_peer(st->m2, i), &s[i], 1, &rx[i]))) return;
        ps[i].peer = i;
        ps[i].sges = &g;
        ps[i].n = 1;
        ps[i].has_imm = false;
        ps[i].imm = 0;
    }
    if (!SW(sfv_multi_channel_scatter_send(st->m1, ps, 2, NULL))) return;
    for (i = 0; i < 2; i++)
        if (!SW(sfv_pending_wait(&rx[i], -1, NULL))) return;
}

static void sw_node_work(sw_state *st) {
    sfv_node_desc d;
    size_t each = SFV_NODE_ENDPOINT_SIZE(2), me = 0;
    uint8_t all[2 * SFV_NODE_ENDPOINT_SIZE(2)];
    memset(&d, 0, sizeof d);
    d.world_size = 2;
    d.rank = 0;
    if (!SW(sfv_create_node(st->pd, &d, &st->n0))) return;
    d.rank = 1;
    if (!SW(sfv_create_node(st->pd, &d, &st->n1))) return;
    if (!SW(sfv_node_endpoint(st->n0, all, each)) || !SW(sfv_node_endpoint(st->n1, all + each, each))) return;
    if (!SW(sfv_node_handshake(st->n0, all, sizeof all)) || !SW(sfv_node_handshake(st->n1, all, sizeof all))) return;
    if (!SW(sfv_node_barrier(st->n0, &me, 1, 100))) return;
    /* a world of one, connected in one call (its exchanges need no socket) */
    {
        const sfv_net_node net[1] = {{"127.0.0.1", 1, 0, NULL}};
        d.rank = 0;
        d.world_size = 1;
        if (!SW(sfv_create_node(st->pd, &d, &st->solo))) return;
        if (!SW(sfv_node_connect(st->solo, net, 1000))) return;
        if (!SW(sfv_node_barrier(st->solo, NULL, 0, 100))) return;
    }
}

static void sw_teardown(sw_state *st) {
    SW_DESTROY(sfv_destroy_srq(st->srq));
    SW_DESTROY(sfv_destroy_node(st->n0));
    SW_DESTROY(sfv_destroy_node(st->n1));
    SW_DESTROY(sfv_destroy_node(st->solo));
    SW_DESTROY(sfv_destroy_multi_channel(st->m1));
    SW_DESTROY(sfv_destroy_multi_channel(st->m2));
    SW_DESTROY(sfv_destroy_channel(st->a));
    SW_DESTROY(sfv_destroy_channel(st->b));
    SW_DESTROY(sfv_destroy_cq(st->cq)); /* a refused release keeps its object: the next try works */
    SW_DESTROY(sfv_dereg_mr(st->mr));
    SW_DESTROY(sfv_dealloc_pd(st->pd));
    SW_DESTROY(sfv_close_device(st->ctx));
    SW_DESTROY(sfv_close_device(st->ctx2));
    sfv_free_device_list(st->list);
    free(st->buf);
}

/* Busy-polled channels, multi-channels and nodes. */
static void sw_scenario_main(void) {
    sw_state st;
    sfv_channel_desc d;
    sfv_port_attr pa;
    sfv_work_completion wc;
    size_t count;
    uint32_t gi;
    memset(&st, 0, sizeof st);
    st.buf = (unsigned char *)calloc(1, SW_BUF);
    memset(&d, 0, sizeof d);
    d.max_send_wr = d.max_recv_wr = 8;
    if (!SW(sfv_get_device_list(&st.list))) goto teardown;
    if (!SW(sfv_open_device_at(st.list, 1, &st.ctx2))) goto teardown;
    if (!SW(sfv_open_device(NULL, &st.ctx))) goto teardown;
    if (!SW(sfv_query_port(st.ctx, 1, &pa)) || !SW(sfv_choose_gid(st.ctx, 1, &gi))) goto teardown;
    if (!SW(sfv_alloc_pd(st.ctx, &st.pd))) goto teardown;
    if (!SW(sfv_reg_mr_shared(st.pd, st.buf, SW_BUF, &st.mr))) goto teardown;
    if (!SW(sfv_create_cq(st.ctx, 4, &st.cq)) || !SW(sfv_poll_cq(st.cq, &wc, 1, &count))) goto teardown;
    if (!SW(sfv_create_channel(st.pd, &d, &st.a)) || !SW(sfv_create_channel(st.pd, &d, &st.b))) goto teardown;
    sw_channel_work(&st);
    if (sw_stopped) goto teardown;
    sw_multi_work(&st);
    if (sw_stopped) goto teardown;
    sw_node_work(&st);
teardown:
    sw_teardown(&st);
}

/* What the main scenario leaves out: atomics, request lists, unsignaled work and the scope's fence,
   sfv_channel_reset and a new handshake, an SRQ (single and batch receives, its limit), and
   asynchronous events (read through sfv_context_events, and a QP_FATAL that breaks a
   channel with a receive waiting). */
static sfv_result sw_unsignaled_fn(sfv_channel *ch, void *user) {
    sw_state *st = (sw_state *)user;
    sfv_gather_element g = sfv_mr_gather_element(st->mr, st->buf, 16);
    sfv_scatter_element s = sfv_mr_scatter_element(st->mr, st->buf + 4096, 16);
    sfv_remote_mr rm = sfv_remote_mr_make((uint64_t)(uintptr_t)(st->buf + 2048), 16, sfv_mr_rkey(st->mr));
    sfv_result r = sfv_channel_post_send_unsignaled(ch, &g, 1);
    if (r == SFV_OK) r = sfv_channel_post_write_unsignaled(ch, &g, 1, rm);
    if (r == SFV_OK) r = sfv_channel_post_read_unsignaled(ch, &s, 1, rm); /* the last: a fence follows */
    return r;
}

static bool sw_connect(sfv_channel *a, sfv_channel *b) {
    sfv_endpoint ea, eb;
    return SW(sfv_channel_endpoint(a, &ea)) && SW(sfv_channel_endpoint(b, &eb)) && SW(sfv_channel_handshake(b, &ea)) &&
           SW(sfv_channel_handshake(a, &eb));
}

static void sw_more_work(sw_state *st) {
    const unsigned all = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_ATOMIC;
    sfv_channel_desc d;
    sfv_srq_desc sd;
    sfv_gather_element g = sfv_mr_gather_element(st->mr, st->buf, 32);
    sfv_scatter_element s[2], old = sfv_mr_scatter_element(st->mr, st->buf + 3000, 8);
    sfv_remote_mr word = sfv_remote_mr_make((uint64_t)(uintptr_t)(st->buf + 3008), 8, sfv_mr_rkey(st->mr));
    sfv_remote_mr rm = sfv_remote_mr_make((uint64_t)(uintptr_t)(st->buf + 2048), 64, sfv_mr_rkey(st->mr));
    sfv_send_request sr[2];
    sfv_write_request wr[2];
    sfv_read_request rr[2];
    sfv_pending rx[2], sp[2], p;
    sfv_scatter_element q[2];
    sfv_work_completion wc;
    sfv_scope_report rep;
    sfv_event ev[8];
    size_t i, n;
    int fd;
    memset(&d, 0, sizeof d);
    d.max_send_wr = d.max_recv_wr = 8;
    d.access = all;
    if (!SW(sfv_create_channel(st->pd, &d, &st->a)) || !SW(sfv_create_channel(st->pd, &d, &st->b))) return;
    if (!sw_connect(st->a, st->b)) return;
    for (i = 0; i < 2; i++) {
        s[i] = sfv_mr_scatter_element(st->mr, st->buf + 1024 + 64 * i, 64);
        sr[i].sges = &g; sr[i].n = 1; sr[i].has_imm = i == 1; sr[i].imm = 3;
        wr[i].sges = &g; wr[i].n = 1; wr[i].remote = rm; wr[i].has_imm = false; wr[i].imm = 0;
        rr[i].sges = &s[i]; rr[i].n = 1; rr[i].remote = rm;
    }
    /* atomics */
    if (!SW_BLOCKING(st->a, sfv_channel_compare_swap(st->a, &old, word, 0, 5, &wc))) return;
    if (!SW_BLOCKING(st->a, sfv_channel_fetch_add(st->a, &old, word, 2, &wc))) return;
    if (!SW(sfv_channel_post_compare_swap(st->b, &old, word, 7, 1, &p)) || !SW(sfv_pending_wait(&p, -1, &wc))) return;
    if (!SW(sfv_channel_post_fetch_add(st->b, &old, word, 1, &p)) || !SW(sfv_pending_wait(&p, -1, &wc))) return;
    /* request lists */
    if (!SW(sfv_channel_post_receive_batch(st->b, s, 1, 2, rx))) return;
    if (!SW(sfv_channel_post_sends(st->a, sr, 2, &p)) || !SW(sfv_pending_wait(&p, -1, NULL))) return;
    if (!SW(sfv_pending_wait(&rx[0], -1, NULL)) || !SW(sfv_pending_wait(&rx[1], -1, NULL))) return;
    if (!SW(sfv_channel_post_writes(st->a, wr, 2, &p)) || !SW(sfv_pending_wait(&p, -1, NULL))) return;
    if (!SW(sfv_channel_post_reads(st->a, rr, 2, &p)) || !SW(sfv_pending_wait(&p, -1, NULL))) return;
    /* unsignaled work in a scope, ending in the scope's fence */
    if (!SW(sfv_channel_post_receive(st->b, s, 1, &rx[0]))) return;
    if (!SW(sfv_channel_scope(st->a, sw_unsignaled_fn, st, &rep)) || !SW(sfv_pending_wait(&rx[0], -1, NULL))) return;
    /* reset both ends with a receive in flight, connect again, and use it */
    if (!SW(sfv_channel_post_receive(st->a, s, 1, &rx[0]))) return;
    if (!SW(sfv_channel_reset(st->a))) return;
    if (!SW_WANT(sfv_pending_wait(&rx[0], -1, &wc), SFV_ERR_WORK)) return; /* flushed by the reset */
    if (!SW(sfv_channel_reset(st->b)) || !sw_connect(st->a, st->b)) return;
    if (!SW(sfv_channel_post_receive(st->b, s, 1, &rx[0]))) return;
    if (!SW_BLOCKING(st->a, sfv_channel_send(st->a, &g, 1, &wc)) || !SW(sfv_pending_wait(&rx[0], -1, NULL))) return;
    /* an SRQ: single and batch receives, the limit. (The fake's QPs take no receives from an SRQ,
       so no channel sits on it here: tests/test_srq.c does that on rxe. Its receives stay posted
       and go with it at the teardown.) */
    memset(&sd, 0, sizeof sd);
    sd.max_wr = 8;
    if (!SW(sfv_create_srq(st->pd, &sd, &st->srq))) return;
    for (i = 0; i < 2; i++) q[i] = sfv_mr_scatter_element(st->mr, st->buf + 6000 + 64 * i, 64); /* the NIC's till the end */
    if (!SW(sfv_srq_post_receive(st->srq, q, 1, &sp[0]))) return;
    if (!SW(sfv_srq_post_receive_batch(st->srq, q + 1, 1, 1, sp + 1))) return;
    if (!SW(sfv_srq_set_limit(st->srq, 2))) return;
    /* asynchronous events (the fake raises none by itself: they are injected): the SRQ's limit,
       and a QP_FATAL on b with a receive waiting; reading them breaks b, and the wait flushes it */
    if (!SW(sfv_channel_post_receive(st->b, s, 1, &rx[0]))) return;
    fk_inject_async_event(sfv_context_raw(st->ctx), IBV_EVENT_SRQ_LIMIT_REACHED, sfv_srq_raw(st->srq), 0);
    fk_inject_async_event(sfv_context_raw(st->ctx), IBV_EVENT_QP_FATAL, sfv_channel_raw_qp(st->b), 0);
    if (!SW(sfv_context_event_fd(st->ctx, &fd)) || !SW(sfv_context_events(st->ctx, ev, 8, &n))) return;
    if (!SW_WANT(sfv_pending_wait(&rx[0], 1000, &wc), SFV_ERR_WORK)) return;
}

static void sw_scenario_more(void) {
    sw_state st;
    memset(&st, 0, sizeof st);
    st.buf = (unsigned char *)calloc(1, SW_BUF);
    if (!SW(sfv_open_device(NULL, &st.ctx)) || !SW(sfv_alloc_pd(st.ctx, &st.pd))) goto teardown;
    if (!SW(sfv_reg_mr_access(st.pd, st.buf, SW_BUF, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ |
                                                        SFV_ACCESS_REMOTE_ATOMIC, &st.mr)))
        goto teardown;
    sw_more_work(&st);
teardown:
    sw_teardown(&st);
}

/* A channel that sleeps on its completion channel, connected to itself. */
static void sw_scenario_event(void) {
    sw_state st;
    sfv_channel_desc d;
    sfv_endpoint ep;
    sfv_gather_element g;
    sfv_scatter_element s;
    sfv_pending rx;
    sfv_work_completion wc;
    memset(&st, 0, sizeof st);
    st.buf = (unsigned char *)calloc(1, SW_BUF);
    memset(&d, 0, sizeof d);
    d.max_send_wr = d.max_recv_wr = 4;
    d.wait_mode = SFV_WAIT_EVENT;
    d.timeout_ms = 20;
    if (!SW(sfv_open_device(NULL, &st.ctx)) || !SW(sfv_alloc_pd(st.ctx, &st.pd))) goto teardown;
    if (!SW(sfv_reg_mr_shared(st.pd, st.buf, SW_BUF, &st.mr))) goto teardown;
    if (!SW(sfv_create_channel(st.pd, &d, &st.a))) goto teardown;
    if (!SW(sfv_channel_endpoint(st.a, &ep)) || !SW(sfv_channel_handshake(st.a, &ep))) goto teardown;
    g = sfv_mr_gather_element(st.mr, st.buf, 8);
    s = sfv_mr_scatter_element(st.mr, st.buf + 64, 8);
    if (!SW(sfv_channel_post_receive(st.a, &s, 1, &rx)) || !SW(sfv_channel_arm(st.a))) goto teardown;
    if (!SW_BLOCKING(st.a, sfv_channel_send(st.a, &g, 1, &wc))) goto teardown;
    if (!SW(sfv_channel_ack_events(st.a)) || !SW(sfv_pending_wait(&rx, -1, &wc))) goto teardown;
    /* nothing comes: the wait sleeps, expires and flushes */
    if (!SW_BLOCKING_WANT(st.a, sfv_channel_receive(st.a, &s, 1, &wc), SFV_ERR_TIMEOUT)) goto teardown;
teardown:
    sw_teardown(&st);
}

/* ---- the sweep ------------------------------------------------------------------------------- */
/* One call of the counting run: what it was and where the library made it. */
typedef struct sw_call { char name[40]; unsigned long site; } sw_call;

typedef struct sw_tally { long sites, verbs, allocs, absorbed, untold, unreached; } sw_tally;

/* Runs the scenario in a child with call `site` failing (0: none). 0: passed; 1: a check
   failed; 2: it passed, but a failure was absorbed; 3: the failure hit a release that returns
   nothing (sfv_destroy_cq), which cannot tell it; 4: the run ended before that call (a timed
   wait that woke once less than in the counting run). */
static int sw_run(void (*scenario)(void), int link_layer, int partial, long site, long *calls, sw_call *names) {
    pid_t pid;
    int st, fds;
    int pipefd[2];
    CHECK(pipe(pipefd) == 0);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        long i, n;
        close(pipefd[0]);
        fk_reset();
        fk_set_link_layer(link_layer);
        fk_set_partial_post(partial);
        fds = sw_open_fds();
        sw_site = site;
        fk_fail_nth(site);
        scenario();
        if (sw_void_hit) { /* its objects stay behind by necessity: no leak report for them */
            fflush(NULL);
            _exit(3);
        }
        if (fk_live_total() != 0) {
            int k;
            for (k = 0; k < FK_KINDS; k++)
                if (fk_live((enum fk_kind)k)) fprintf(stderr, "    %ld %s left\n", fk_live((enum fk_kind)k), fk_kind_name((enum fk_kind)k));
            sw_die("objects left after the teardown");
        }
        if (sw_open_fds() != fds) sw_die("%d file descriptors left open", sw_open_fds() - fds);
        if (site && !fk_failed()) {
            if (fk_calls() >= site) sw_die("the run never reached this call");
            exit(4); /* this run made fewer calls: a wait that woke once less */
        }
        if (site && !sw_stopped) {
            if (!sw_absorbed) sw_die("the failure was absorbed by no call");
            /* Allowed: the abort on the way out (a destroy, a reset, or a wait that failed anyway)
               moves the QP to ERR and drains it (first posting one marker after injects left last,
               to flush them); if any of that fails, it destroys the QP instead. And a reset reads
               the port's address again, keeping the old one where that read fails. */
            const bool reset_address = strncmp(sw_absorbed, "sfv_channel_reset", 17) == 0 &&
                                       (strcmp(fk_call_name(site), "ibv_query_port") == 0 ||
                                        strcmp(fk_call_name(site), "ibv_query_gid_ex") == 0);
            if (!reset_address && (!(strcmp(fk_call_name(site), "ibv_poll_cq") == 0 ||
                  (strcmp(fk_call_name(site), "ibv_post_send") == 0 &&
                   (strncmp(sw_absorbed, "sfv_destroy_", 12) == 0 || strncmp(sw_absorbed, "sfv_channel_reset", 17) == 0)) ||
                  (strcmp(fk_call_name(site), "ibv_modify_qp") == 0 && strcmp(fk_call_detail(site), "to ERR") == 0)) ||
                (sw_absorbed_ok && strncmp(sw_absorbed, "sfv_destroy_", 12) != 0 && strncmp(sw_absorbed, "sfv_channel_reset", 17) != 0)))
                sw_die("%s absorbed the failure and returned %s", sw_absorbed, sw_absorbed_ok ? "SFV_OK" : "what it would have anyway");
        }
        n = fk_calls();
        if (site == 0) { /* the counting run: hand the call names to the parent */
            if (write(pipefd[1], &n, sizeof n) != (ssize_t)sizeof n) exit(1);
            for (i = 1; i <= n; i++) {
                sw_call c;
                memset(&c, 0, sizeof c);
                snprintf(c.name, sizeof c.name, "%s", fk_call_name(i));
                c.site = fk_call_site(i);
                if (write(pipefd[1], &c, sizeof c) != (ssize_t)sizeof c) exit(1);
            }
        }
        close(pipefd[1]);
        exit(site && !sw_stopped ? 2 : 0);
    }
    close(pipefd[1]);
    if (site == 0) {
        long i;
        CHECK(read(pipefd[0], calls, sizeof *calls) == (ssize_t)sizeof *calls);
        CHECK(*calls > 0 && *calls <= 4096);
        for (i = 0; i < *calls; i++) CHECK(read(pipefd[0], &names[i], sizeof names[i]) == (ssize_t)sizeof names[i]);
    }
    close(pipefd[0]);
    CHECK(waitpid(pid, &st, 0) == pid);
    if (WIFEXITED(st) && WEXITSTATUS(st) <= 4) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) fprintf(stderr, "    site %ld (%s): killed by signal %d\n", site, site ? names[site - 1].name : "none", WTERMSIG(st));
    return 1;
}

static void sw_sweep(const char *label, void (*scenario)(void), int link_layer, int partial) {
    static sw_call names[4096];
    long calls = 0, site;
    int bad = 0;
    sw_tally t = {0, 0, 0, 0, 0, 0};
    CHECK_EQ(sw_run(scenario, link_layer, partial, 0, &calls, names), 0);
    for (site = 1; site <= calls; site++) {
        double t0 = test_seconds();
        int r = sw_run(scenario, link_layer, partial, site, &calls, names);
        if (test_seconds() - t0 > 0.5) printf("     slow site %ld (%s): %.1fs\n", site, names[site - 1].name, test_seconds() - t0);
        t.sites++;
        if (!strcmp(names[site - 1].name, "malloc") || !strcmp(names[site - 1].name, "calloc")) t.allocs++;
        else t.verbs++;
        if (r == 2) t.absorbed++;
        if (r == 3) t.untold++;
        if (r == 4) t.unreached++;
        if (r == 1) bad++;
    }
    {
        long i, j, kinds = 0, sites = 0;
        const char *list = getenv("SWEEP_SITES"); /* set: print every call site, for addr2line */
        for (i = 0; i < calls; i++) {
            for (j = 0; j < i && strcmp(names[i].name, names[j].name) != 0; j++) {}
            kinds += j == i;
            for (j = 0; j < i && names[i].site != names[j].site; j++) {}
            sites += j == i;
            if (j == i && list) fprintf(stderr, "site 0x%lx %s\n", names[i].site, names[i].name);
        }
        printf("     %s: %ld calls failed in turn (%ld verb calls, %ld allocations; %ld call sites in the program, "
               "%ld different verbs and allocators); %ld absorbed by design, %ld in a release that cannot report, "
               "%ld not reached, %d wrong\n", label, t.sites, t.verbs, t.allocs, sites, kinds, t.absorbed, t.untold,
               t.unreached, bad);
    }
    CHECK_EQ(bad, 0);
}

static void t_sweep_roce(void) { sw_sweep("RoCE, busy polling", sw_scenario_main, 2, 0); }
static void t_sweep_ib(void) { sw_sweep("InfiniBand, busy polling", sw_scenario_main, 1, 0); }
static void t_sweep_event(void) { sw_sweep("RoCE, event wait", sw_scenario_event, 2, 0); }
static void t_sweep_more(void) { sw_sweep("RoCE, atomics, request lists, unsignaled, reset, SRQ, events", sw_scenario_more, 2, 0); }
/* A failed post of a list takes its first work request: the partial post of a batch. */
static void t_sweep_partial(void) { sw_sweep("RoCE, failed posts partial", sw_scenario_main, 2, 1); }

static const harness_test TESTS[] = {
    TEST(t_sweep_roce, 120),
    TEST(t_sweep_ib, 120),
    TEST(t_sweep_event, 120),
    TEST(t_sweep_partial, 120),
    TEST(t_sweep_more, 120),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
