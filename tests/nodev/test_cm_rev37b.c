/* test_cm_rev37b.c - hostile review 37b: the RDMA-CM part (SAFEVERBS_RDMACM) under a hostile peer,
   on the fake NIC and the fake librdmacm. Each test failed on the header before its fix. Built as
   test_cm_fake is (the Makefile links fake_rdmacm.c for every test_cm_*). */
#define SAFEVERBS_RDMACM
#include "fake_env.h"
#include "fake_rdmacm.h"

#define PORT 7537

static fkcm_event r7_ev(int type) {
    fkcm_event e;
    memset(&e, 0, sizeof e);
    e.type = type;
    return e;
}

/* Nothing of the fakes is left. */
static void r7_clean(void) {
    CHECK_EQ(fkcm_unacked(), 0);
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fk_live_total(), 0);
}

/* A node of 2 whose rank 1 (this one, at FKCM_ADDR0) connected to rank 0 (FKCM_ADDR1) through the
   CM; rank 0 is simulated: its answer scripted, its node made here on the same PD (its barrier
   region, and its channel to rank 1 connected back, so this rank's barrier writes land). */
#define R7_KEY "rev37b node key"
typedef struct r7_node {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_node *node, *peer0;
    sfv_net_node nodes[2];
    sfv_exchange_desc desc;
} r7_node;
static void r7_node_up(r7_node *w, uint32_t chan_ms) {
    sfv_node_desc d;
    sfv__ex_key key;
    sfv_endpoint ep, p0;
    uint8_t req[SFV__NCM_SIZE], ans[SFV__CM_HDR + SFV__NCM_SIZE];
    fkcm_event ev;
    fk_reset();
    fkcm_reset();
    memset(w, 0, sizeof *w);
    CHECK_OK(sfv_open_device("fake0", &w->ctx));
    CHECK_OK(sfv_alloc_pd(w->ctx, &w->pd));
    w->desc.key = R7_KEY;
    w->desc.key_len = strlen(R7_KEY);
    CHECK_OK(sfv__ex_key_pick(&w->desc, &key));
    memset(&d, 0, sizeof d);
    d.world_size = 2;
    d.channel.timeout_ms = chan_ms;
    d.rank = 0;
    CHECK_OK(sfv_create_node(w->pd, &d, &w->peer0));
    d.rank = 1;
    CHECK_OK(sfv_create_node(w->pd, &d, &w->node));
    w->nodes[0].host = FKCM_ADDR1;
    w->nodes[0].port = PORT;
    w->nodes[0].rank = 0;
    w->nodes[1].host = FKCM_ADDR0;
    w->nodes[1].port = PORT + 1;
    w->nodes[1].rank = 1;
    /* rank 0's answer to this rank's request */
    CHECK_OK(sfv_channel_endpoint(sfv_multi_channel_peer(sfv_node_multi_channel(w->node), 0), &ep));
    sfv__ncm_make(&key, 'C', w->node, 0, ep.qpn, NULL, req);
    ans[0] = 'S'; ans[1] = 'C'; ans[2] = 1; ans[3] = 4;
    CHECK_OK(sfv_channel_endpoint(sfv_multi_channel_peer(sfv_node_multi_channel(w->peer0), 1), &p0));
    fkcm_set_peer(p0.qpn, p0.psn);
    sfv__ncm_make(&key, 'A', w->peer0, 1, p0.qpn, req, ans + SFV__CM_HDR);
    ev = r7_ev(RDMA_CM_EVENT_CONNECT_RESPONSE);
    ev.qpn = p0.qpn;
    ev.priv = ans;
    ev.priv_len = sizeof ans;
    ev.initiator_depth = ev.responder_resources = 4;
    fkcm_on(FKCM_CONNECT, &ev, 1);
    CHECK_OK(sfv_node_connect_cm(w->node, w->nodes, &w->desc, 2000));
    /* rank 0's end of the channel, so that this rank's barrier writes land in its region (the
       CM set this side's PSN) */
    CHECK_OK(sfv_channel_endpoint(sfv_multi_channel_peer(sfv_node_multi_channel(w->node), 0), &ep));
    CHECK_OK(sfv_channel_handshake(sfv_multi_channel_peer(sfv_node_multi_channel(w->peer0), 1), &ep));
}
static sfv_cm_conn *r7_node_conn(const r7_node *w, size_t r) { return ((const sfv__ncm *)w->node->keep)->conns[r]; }
static void r7_node_down(r7_node *w) {
    fkcm_reset();
    CHECK_OK(sfv_destroy_node(w->node));
    CHECK_OK(sfv_destroy_node(w->peer0));
    CHECK_OK(sfv_dealloc_pd(w->pd));
    CHECK_OK(sfv_close_device(w->ctx));
    r7_clean();
}

/* Promise (>>rdmacm: "a peer's disconnect ends the channel's waits ...; later posts say
   SFV_ERR_BROKEN"; every failure has a matching sfv_last_error()). After the peer disconnected
   with no work in flight, a post said "the channel is in the error state (an earlier work request
   failed)": no work request had failed, and nothing said the peer left. Now it says so. */
static void t_post_after_disconnect_names_it(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    static unsigned char buf[256];
    sfv_cm_conn *c;
    sfv_gather_element g;
    sfv_scatter_element sc;
    sfv_pending rx;
    fkcm_event ev = r7_ev(RDMA_CM_EVENT_DISCONNECTED);
    fk_reset();
    fkcm_reset();
    CHECK_OK(sfv_open_device("fake0", &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    CHECK_OK(sfv_reg_mr_local(pd, buf, sizeof buf, &mr));
    CHECK_OK(sfv_cm_connect(pd, NULL, FKCM_ADDR0, PORT, NULL, NULL, 0, 1000, &c));
    fkcm_push(sfv_cm_fd(c), &ev);
    CHECK_RESULT(sfv_cm_events(c), SFV_ERR_BROKEN);
    g = sfv_mr_gather_element(mr, buf, 8);
    sc = sfv_mr_scatter_element(mr, buf + 64, 8);
    CHECK_RESULT(sfv_channel_send(sfv_cm_channel(c), &g, 1, NULL), SFV_ERR_BROKEN);
    CHECK_MSG("the peer disconnected"); /* (was: "an earlier work request failed") */
    CHECK_RESULT(sfv_channel_post_receive(sfv_cm_channel(c), &sc, 1, &rx), SFV_ERR_BROKEN);
    CHECK_MSG("the peer disconnected");
    CHECK_OK(sfv_cm_close(c, 0));
    CHECK_OK(sfv_dereg_mr(mr));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    r7_clean();
}

/* Promise (sfv_node_connect_cm: "a peer's disconnect ends waits on its channel at once"; the
   barrier: a member's channel "must not be broken (else SFV_ERR_BROKEN, naming why)"). A node
   connected through the CM whose rank 0 disconnected: the barrier never read the CM's events, so
   it waited for rank 0 to its deadline (2 s here), said SFV_ERR_TIMEOUT "rank 0 did not reach
   the barrier in time" and poisoned the node. Now a disconnect delivered before the barrier
   refuses it at once (SFV_ERR_BROKEN naming the disconnect, nothing sent, the node not
   poisoned), and one that comes while it waits ends the wait at once (SFV_ERR_BROKEN). */
static void t_barrier_peer_disconnected(void) {
    r7_node w;
    fkcm_event ev = r7_ev(RDMA_CM_EVENT_DISCONNECTED);
    double t0;
    /* the disconnect is there before the barrier */
    r7_node_up(&w, 0);
    fkcm_push(sfv_cm_fd(r7_node_conn(&w, 0)), &ev);
    t0 = test_seconds();
    CHECK_RESULT(sfv_node_barrier(w.node, NULL, 0, 2000), SFV_ERR_BROKEN); /* (was: SFV_ERR_TIMEOUT after 2 s) */
    CHECK(test_seconds() - t0 < 0.5);
    CHECK_MSG("rank 0");
    CHECK_MSG("the peer disconnected");
    CHECK(!w.node->poisoned); /* refused before anything was sent */
    r7_node_down(&w);
    /* it comes while the barrier waits for rank 0 (whose write never comes) */
    r7_node_up(&w, 0);
    ev.delay_ms = 100;
    fkcm_push(sfv_cm_fd(r7_node_conn(&w, 0)), &ev);
    t0 = test_seconds();
    CHECK_RESULT(sfv_node_barrier(w.node, NULL, 0, 3000), SFV_ERR_BROKEN); /* (was: SFV_ERR_TIMEOUT after 3 s) */
    CHECK(test_seconds() - t0 < 1.0);
    CHECK_MSG("rank 0");
    CHECK_MSG("the peer disconnected");
    CHECK_RESULT(sfv_node_barrier(w.node, NULL, 0, 100), SFV_ERR_BROKEN); /* half done: poisoned, as after a timeout */
    r7_node_down(&w);
}

static const harness_test TESTS[] = {
    TEST(t_post_after_disconnect_names_it, 20),
    TEST(t_barrier_peer_disconnected, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
