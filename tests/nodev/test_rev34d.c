/* test_rev34d.c - hostile review 34d on the fake NIC: nodes and the exchange when the ranks of one
   job disagree (arguments, order, a rank gone). Each test failed on the header at tag base. */
#include "fake_env.h"

#include <pthread.h>

/* A rank on a thread: one barrier. */
typedef struct r4_rank {
    sfv_node *node;
    int timeout_ms;
    sfv_result r;
} r4_rank;
static void *r4_barrier_run(void *arg) {
    r4_rank *k = (r4_rank *)arg;
    k->r = sfv_node_barrier(k->node, NULL, 0, k->timeout_ms);
    return NULL;
}

/* Promise (sfv_node_barrier: "Returns once every rank ... has entered the same barrier"; the
   review's: ranks that disagree get a result naming it, never a wrong result as success). The
   ranks of a job could pass different sfv_node_desc.barrier kinds, and nothing saw it: the
   endpoints carried no kind. With 3 ranks, rank 0 DISSEMINATION (tells rank 1, waits for rank
   2) and ranks 1, 2 BINARY_TREE (rank 1 tells rank 0, waits for rank 0): rank 1 left the
   barrier with SFV_OK while rank 2 never entered it. Now the endpoint carries the node's kind
   and the handshake refuses a blob of another kind (SFV_ERR_INVALID, naming it, nothing
   connected); nodes of one kind connect as before. */
static void t_barrier_kinds_disagree(void) {
    enum { W = 3 };
    const size_t each = SFV_NODE_ENDPOINT_SIZE(W);
    static uint8_t all[W * SFV_NODE_ENDPOINT_SIZE(W)];
    tf_env e;
    sfv_node_desc d;
    sfv_node *nodes[W];
    sfv_result hs[W];
    size_t r;
    tf_open(&e, 64);
    memset(&d, 0, sizeof d);
    d.world_size = W;
    for (r = 0; r < W; r++) {
        d.rank = r;
        d.barrier = r == 0 ? SFV_BARRIER_DISSEMINATION : SFV_BARRIER_DEFAULT;
        CHECK_OK(sfv_create_node(e.pd, &d, &nodes[r]));
        CHECK_OK(sfv_node_endpoint(nodes[r], all + r * each, each));
    }
    for (r = 0; r < W; r++) {
        hs[r] = sfv_node_handshake(nodes[r], all, sizeof all);
        if (hs[r] != SFV_OK) {
            CHECK_RESULT(hs[r], SFV_ERR_INVALID);
            CHECK_MSG("barrier");
            CHECK_EQ(sfv_channel_outstanding(sfv_multi_channel_peer(sfv_node_multi_channel(nodes[r]), 0)), 0);
        }
    }
    if (hs[0] == SFV_OK && hs[1] == SFV_OK && hs[2] == SFV_OK) { /* (the header at base) */
        r4_rank k[2];
        pthread_t t;
        k[0].node = nodes[0]; k[0].timeout_ms = 300; k[0].r = SFV_OK;
        k[1].node = nodes[1]; k[1].timeout_ms = 300; k[1].r = SFV_OK;
        CHECK(pthread_create(&t, NULL, r4_barrier_run, &k[1]) == 0);
        r4_barrier_run(&k[0]); /* rank 2 never enters */
        CHECK(pthread_join(t, NULL) == 0);
        FAIL("barrier kinds that disagree were taken; rank 1's barrier without rank 2: %s (rank 0's: %s)",
             sfv_result_str(k[1].r), sfv_result_str(k[0].r));
    }
    CHECK_RESULT(hs[0], SFV_ERR_INVALID);
    CHECK_RESULT(hs[1], SFV_ERR_INVALID);
    CHECK_RESULT(hs[2], SFV_ERR_INVALID);
    for (r = 0; r < W; r++) CHECK_OK(sfv_destroy_node(nodes[r]));
    /* the same kinds (DEFAULT and BINARY_TREE are one) connect and pass */
    for (r = 0; r < W; r++) {
        d.rank = r;
        d.barrier = r == 0 ? SFV_BARRIER_BINARY_TREE : SFV_BARRIER_DEFAULT;
        CHECK_OK(sfv_create_node(e.pd, &d, &nodes[r]));
        CHECK_OK(sfv_node_endpoint(nodes[r], all + r * each, each));
    }
    for (r = 0; r < W; r++) CHECK_OK(sfv_node_handshake(nodes[r], all, sizeof all));
    {
        r4_rank k[W];
        pthread_t t[W];
        for (r = 0; r < W; r++) {
            k[r].node = nodes[r]; k[r].timeout_ms = 5000; k[r].r = SFV_ERR_DRIVER;
            CHECK(pthread_create(&t[r], NULL, r4_barrier_run, &k[r]) == 0);
        }
        for (r = 0; r < W; r++) CHECK(pthread_join(t[r], NULL) == 0);
        for (r = 0; r < W; r++) CHECK_OK(k[r].r);
    }
    for (r = 0; r < W; r++) CHECK_OK(sfv_destroy_node(nodes[r]));
    tf_close(&e);
}

/* Promise (sfv_node_connect_with: "fn may not destroy the node: sfv_destroy_node refuses it
   meanwhile (SFV_ERR_INVALID)"). The guard was one flag that each sfv_node_connect_with set
   around its own fn and cleared after: an allgather that ran sfv_node_connect_with on the same
   node (a nested connect, over a loopback allgather) cleared it when the inner call returned, so
   the outer fn's sfv_destroy_node then freed the node, and the outer call went on with freed
   memory (ASan: heap-use-after-free in sfv_node_connect_with). Now a connect_with while the
   node's allgather runs is refused (SFV_ERR_INVALID, naming it), and the destroy after it too. */
static sfv_node *r4_ag_node;
static sfv_result r4_ag_inner, r4_ag_destroy;
static int r4_ag_calls;
static sfv_result r4_ag_loop(void *user, const void *mine, void *all, size_t size) {
    (void)user;
    if (size) memcpy(all, mine, size); /* a world of one */
    return SFV_OK;
}
static sfv_result r4_ag_nesting(void *user, const void *mine, void *all, size_t size) {
    (void)user;
    if (size) memcpy(all, mine, size);
    if (r4_ag_calls++ == 0) {
        r4_ag_inner = sfv_node_connect_with(r4_ag_node, r4_ag_loop, NULL);
        CHECK_RESULT(r4_ag_inner, SFV_ERR_INVALID); /* (at base: SFV_OK, and the destroy below freed the node) */
        CHECK_MSG("allgather");
        r4_ag_destroy = sfv_destroy_node(r4_ag_node);
    }
    return SFV_OK;
}
static void t_connect_with_nested(void) {
    tf_env e;
    sfv_node_desc d;
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.world_size = 1;
    CHECK_OK(sfv_create_node(e.pd, &d, &r4_ag_node));
    r4_ag_calls = 0;
    r4_ag_destroy = SFV_OK;
    CHECK_OK(sfv_node_connect_with(r4_ag_node, r4_ag_nesting, NULL));
    CHECK_EQ(r4_ag_calls, 2);
    CHECK_RESULT(r4_ag_destroy, SFV_ERR_INVALID);
    CHECK_OK(sfv_node_barrier(r4_ag_node, NULL, 0, 100)); /* the outer connect connected it */
    CHECK_OK(sfv_destroy_node(r4_ag_node));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_barrier_kinds_disagree, 20),
    TEST(t_connect_with_nested, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
