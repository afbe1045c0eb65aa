/* test_rev36c.c - hostile review 36c on the fake NIC: shared receive queues, multi-channels and
   the many-peer calls. No bug was confirmed in this area (the session's suspicions are in its
   report); these tests passed at tag base and stay as a guard: a seeded random mix of SRQ
   receives, many-peer sends, writes, multicasts and receives (peer lists empty, repeated,
   unsorted, out of range; bad rkeys; peers without receives, so deadlines expire), channel
   resets, SRQ and QP events, the caller's SRQ reference dropped at any time and teardown in
   either order, with and without planned faults. */
#include "fake_env.h"

static int g_faults; /* plan faults in the mix */
static uint64_t rs_state;
static unsigned rs(unsigned n) { /* xorshift64: the same run every time */
    rs_state ^= rs_state << 13;
    rs_state ^= rs_state >> 7;
    rs_state ^= rs_state << 17;
    return (unsigned)(rs_state % n);
}

#define NP 3
static sfv_result ign_;
#define IGN(x) (ign_ = (x))
/* Work requests a channel holds (in flight, or done and not consumed), in both queues: places
   held only because older work is not consumed yet, and injects, do not count. */
static size_t held_q(const sfv__ring *q) {
    size_t n = 0;
    uint64_t seq;
    for (seq = q->tail; seq < q->head; seq++) {
        const sfv__slot *t = &q->slots[seq & q->mask];
        if (t->seq == seq && (t->state == SFV__SLOT_INFLIGHT || t->state == SFV__SLOT_DONE)) n++;
    }
    return n;
}
static size_t held(const sfv_channel *c) { return held_q(&c->sq) + held_q(&c->rq); }
/* Connects a (reset) pair again; a refusal leaves it unconnected, which the calls then refuse. */
static void connect_pair(sfv_channel *a, sfv_channel *b) {
    sfv_endpoint ea, eb;
    if (sfv_channel_endpoint(a, &ea) || sfv_channel_endpoint(b, &eb)) return;
    if (sfv_channel_handshake(a, &eb)) return;
    if (sfv_channel_handshake(b, &ea)) return;
}
static void rv_stress(int iters) {
    int iter;
    for (iter = 0; iter < iters; iter++) {
        tf_env e;
        sfv_srq *srq = NULL;
        sfv_channel_desc d;
        sfv_multi_channel *A, *B;
        sfv_endpoint ea[NP], eb[NP];
        sfv_pending rx[64];
        int nrx = 0, op, i;
        bool srq_ref = false;
        tf_open(&e, 65536);
        memset(&d, 0, sizeof d);
        d.timeout_ms = 30;
        d.max_send_wr = 4;
        if (rs(2)) { sfv_srq_desc sd; memset(&sd, 0, sizeof sd); sd.max_wr = 8; sd.timeout_ms = 30; sd.limit = rs(3); CHECK_OK(sfv_create_srq(e.pd, &sd, &srq)); srq_ref = true; d.srq = srq; }
        CHECK_OK(sfv_create_multi_channel(e.pd, NP, &d, &A));
        d.srq = NULL;
        CHECK_OK(sfv_create_multi_channel(e.pd, NP, &d, &B));
        CHECK_OK(sfv_multi_channel_endpoints(A, ea, NP));
        CHECK_OK(sfv_multi_channel_endpoints(B, eb, NP));
        CHECK_OK(sfv_multi_channel_handshake(A, eb, NP));
        CHECK_OK(sfv_multi_channel_handshake(B, ea, NP));
        for (op = 0; op < 40; op++) {
            const unsigned k = rs(10);
            sfv_multi_channel *m = rs(2) ? A : B, *o = m == A ? B : A;
            size_t before[NP], after, j;
            for (j = 0; j < NP; j++) before[j] = held(sfv_multi_channel_peer(m, j));
            if (g_faults && rs(4) == 0) fk_fail_nth(1 + rs(6));
            if (k == 0 && srq && srq_ref && nrx < 64) {
                sfv_scatter_element sc = sfv_mr_scatter_element(e.mr, e.buf + 1024 * (size_t)(nrx % 16), 1 + rs(64));
                IGN(sfv_srq_post_receive(srq, &sc, 1, &rx[nrx]));
                nrx++;
            } else if (k == 1 || k == 2) { /* many-peer send/write/multicast from m */
                sfv_peer_send ss[5]; sfv_peer_write w[5]; size_t pe[5];
                sfv_gather_element g = sfv_mr_gather_element(e.mr, e.buf + 32768 + 64 * rs(8), rs(40));
                sfv_work_completion wcs[5];
                size_t c = rs(6);
                sfv_result r;
                for (j = 0; j < c; j++) {
                    ss[j].peer = rs(NP + (rs(8) == 0)); ss[j].sges = &g; ss[j].n = 1; ss[j].has_imm = rs(2); ss[j].imm = 7;
                    w[j].peer = ss[j].peer; w[j].sges = &g; w[j].n = 1; w[j].remote = tf_at(&e, 40000 + 64 * rs(4)); if (rs(6) == 0) w[j].remote.rkey ^= 1; w[j].has_imm = rs(3) == 0; w[j].imm = 9;
                    pe[j] = ss[j].peer;
                }
                r = k == 1 ? sfv_multi_channel_scatter_send(m, ss, c, wcs) : rs(2) ? sfv_multi_channel_scatter_write(m, w, c, wcs) : sfv_multi_channel_multicast_send(m, pe, c, &g, 1, wcs);
                if (r == SFV_ERR_DRIVER && strcmp(sfv_last_error()->verb, "ibv_poll_cq") != 0) FAIL("driver %s: %s", sfv_last_error()->verb, sfv_last_error()->message);
                for (j = 0; j < NP; j++) { after = held(sfv_multi_channel_peer(m, j)); if (after != before[j]) FAIL("iter %d op %d k %u: peer %zu holds %zu work requests, %zu before the call (%s)", iter, op, k, j, after, before[j], sfv_result_str(r)); }
            } else if (k == 3) { /* gather_receive on m, sends posted on o first */
                sfv_peer_receive rr[4]; sfv_pending tx[4]; sfv_work_completion wcs[4];
                sfv_scatter_element sc[4]; sfv_gather_element g = sfv_mr_gather_element(e.mr, e.buf + 36000, rs(40));
                size_t c = rs(5), nt = 0; sfv_result r;
                for (j = 0; j < c; j++) { sc[j] = sfv_mr_scatter_element(e.mr, e.buf + 20000 + 256 * j, 1 + rs(64)); rr[j].peer = rs(NP); rr[j].sges = &sc[j]; rr[j].n = 1; }
                for (j = 0; j < c && rs(2); j++) if (sfv_channel_post_send(sfv_multi_channel_peer(o, rr[j].peer), &g, 1, &tx[nt]) == SFV_OK) nt++;
                r = sfv_multi_channel_gather_receive(m, rr, c, wcs);
                (void)r;
                for (j = 0; j < nt; j++) IGN(sfv_pending_wait(&tx[j], 30, NULL));
                for (j = 0; j < NP; j++) { after = held(sfv_multi_channel_peer(m, j)); if (after != before[j]) FAIL("iter %d op %d k %u: peer %zu holds %zu work requests, %zu before the call (%s)", iter, op, k, j, after, before[j], sfv_result_str(r)); }
            } else if (k == 4 && nrx) {
                IGN(sfv_pending_wait(&rx[rs(nrx)], rs(2) ? 0 : 5, NULL));
            } else if (k == 5 && rs(4) == 0) { /* reset a pair */
                j = rs(NP);
                if (sfv_channel_reset(sfv_multi_channel_peer(A, j)) == SFV_OK && sfv_channel_reset(sfv_multi_channel_peer(B, j)) == SFV_OK)
                    connect_pair(sfv_multi_channel_peer(A, j), sfv_multi_channel_peer(B, j));
            } else if (k == 6 && rs(6) == 0) {
                static const int evs[] = {IBV_EVENT_SRQ_LIMIT_REACHED, IBV_EVENT_QP_FATAL, IBV_EVENT_SRQ_ERR};
                int t = evs[rs(3)];
                void *obj = t == IBV_EVENT_QP_FATAL ? (void *)sfv_channel_raw_qp(sfv_multi_channel_peer(m, rs(NP))) : srq ? (void *)sfv_srq_raw(srq) : NULL;
                if (obj) { sfv_event ev[8]; size_t n = 0; fk_inject_async_event(sfv_context_raw(e.ctx), t, obj, 0); IGN(sfv_context_events(e.ctx, ev, 8, &n)); }
            } else if (k == 7 && srq_ref && rs(8) == 0) {
                CHECK_OK(sfv_destroy_srq(srq)); srq_ref = false;
            } else if (k == 8) {
                sfv_event ev[8]; size_t n = 0;
                IGN(sfv_context_events(e.ctx, ev, 8, &n));
            }
            fk_fail_nth(0);
        }
        fk_fail_nth(0);
        if (rs(2)) { CHECK_OK(sfv_destroy_multi_channel(A)); CHECK_OK(sfv_destroy_multi_channel(B)); }
        else { CHECK_OK(sfv_destroy_multi_channel(B)); if (srq_ref && rs(2)) { CHECK_OK(sfv_destroy_srq(srq)); srq_ref = false; } CHECK_OK(sfv_destroy_multi_channel(A)); }
        if (srq_ref && nrx && rs(2)) { for (i = 0; i < nrx; i++) IGN(sfv_pending_wait(&rx[i], 0, NULL)); }
        if (srq_ref) {
            for (i = 0; i < nrx; i++) IGN(sfv_pending_wait(&rx[i], 0, NULL));
            CHECK_OK(sfv_destroy_srq(srq));
        }
        tf_close(&e);
    }
}

/* Promises: a many-peer call returns with none of its own work in flight or held ("when the call
   returns, no buffer of any request is in flight"): each channel holds as much work after it as
   before, whatever the call returned, including refusals, failed completions, expired deadlines
   and events; no call crashes or reports work it could not stop (SFV_ERR_DRIVER other than a
   failed poll); and teardown in any order (SRQ before or after its channels) leaves the fake
   holding nothing (tf_close). */
static void t_many_srq_mix(void) {
    g_faults = 0;
    rs_state = 88172645463325252ull;
    rv_stress(40);
}
/* The same with a verb or allocation failing now and then (fk_fail_nth) in the calls of the mix. */
static void t_many_srq_mix_faults(void) {
    g_faults = 1;
    rs_state = 1234567;
    rv_stress(40);
}

static const harness_test TESTS[] = {
    TEST(t_many_srq_mix, 120),
    TEST(t_many_srq_mix_faults, 120),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
