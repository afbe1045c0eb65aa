/* test_rev30c.c - hostile review 30c: multi-channels and nodes under a caller's misuse (garbage
   counts and sizes, a destroy from a callback). Each test failed on the header before its fix. */
#include "fake_env.h"

#include <stdint.h>

/* sfv_node_endpoint: "size must be SFV_NODE_ENDPOINT_SIZE(world size)", and a failure sets the
   out-parameters to zero (ERRORS). A garbage size (SIZE_MAX, SFV_NODE_ENDPOINT_SIZE(-1), which
   wraps to SIZE_MAX - 39) was refused and then zeroed with memset(out, 0, size): the call that
   refuses crashed (SIGSEGV), as sfv_multi_channel_endpoints did before review 25c. Now no byte is
   touched where size passes PTRDIFF_MAX; a plain wrong size still has its bytes zeroed. */
static void t_node_endpoint_garbage_size(void) {
    tf_env e;
    sfv_node_desc d;
    sfv_node *node;
    struct { uint8_t blob[SFV_NODE_ENDPOINT_SIZE(2)]; uint8_t guard[64]; } out;
    uint8_t ones[64];
    const size_t garbage[] = {SIZE_MAX, SFV_NODE_ENDPOINT_SIZE(-1), (size_t)PTRDIFF_MAX + 1};
    size_t i;
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.world_size = 2;
    CHECK_OK(sfv_create_node(e.pd, &d, &node));
    memset(ones, 0xA5, sizeof ones);
    memset(&out, 0xA5, sizeof out);
    for (i = 0; i < COUNT_OF(garbage); i++) {
        CHECK_RESULT(sfv_node_endpoint(node, out.blob, garbage[i]), SFV_ERR_INVALID); /* crashed */
        CHECK_MSG("not SFV_NODE_ENDPOINT_SIZE(2)");
        CHECK_RESULT(sfv_node_endpoint(NULL, out.blob, garbage[i]), SFV_ERR_INVALID); /* crashed too */
        CHECK(memcmp(out.blob, ones, sizeof ones) == 0 && memcmp(out.guard, ones, sizeof ones) == 0);
    }
    CHECK_RESULT(sfv_node_endpoint(node, out.blob, sizeof out.blob - 1), SFV_ERR_INVALID); /* a real mismatch: its bytes zeroed */
    for (i = 0; i < sizeof out.blob - 1; i++) CHECK_EQ(out.blob[i], 0);
    CHECK(memcmp(out.guard, ones, sizeof ones) == 0);
    CHECK_OK(sfv_node_endpoint(node, out.blob, sizeof out.blob));
    CHECK(out.blob[0] == 'S' && out.blob[1] == 'N');
    CHECK_OK(sfv_destroy_node(node));
    tf_close(&e);
}

/* The many-peer calls: "a refusal posts nothing, and every wc carries its result". With a NULL
   request array (or a NULL multi-channel) and a garbage count, the refusal wrote count wcs: the
   call wrote past the caller's wcs until it crashed (SIGSEGV). With a real request array and a
   count no array holds, it read requests past the array (ASan: stack-buffer-overflow) before
   it refused. Now such a count is SFV_ERR_INVALID before any request is read or wc written. */
static void t_many_peer_garbage_count(void) {
    tf_env e;
    sfv_multi_channel *mc;
    struct { sfv_work_completion wcs[2]; unsigned char guard[64]; } out;
    unsigned char before[sizeof out];
    sfv_peer_send ps[2];
    sfv_gather_element g;
    size_t peers[2] = {0, 1};
    const size_t garbage[] = {SIZE_MAX, (size_t)PTRDIFF_MAX / sizeof(sfv_work_completion) + 1};
    size_t i;
    tf_open(&e, 4096);
    CHECK_OK(sfv_create_multi_channel(e.pd, 2, NULL, &mc));
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    memset(ps, 0, sizeof ps);
    ps[0].peer = 0; ps[0].sges = &g; ps[0].n = 1;
    ps[1].peer = 1; ps[1].sges = &g; ps[1].n = 1;
    memset(&out, 0xA5, sizeof out);
    memcpy(before, &out, sizeof out);
    for (i = 0; i < COUNT_OF(garbage); i++) {
        CHECK_RESULT(sfv_multi_channel_scatter_send(mc, NULL, garbage[i], out.wcs), SFV_ERR_INVALID); /* crashed */
        CHECK_RESULT(sfv_multi_channel_scatter_write(mc, NULL, garbage[i], out.wcs), SFV_ERR_INVALID);
        CHECK_RESULT(sfv_multi_channel_gather_receive(mc, NULL, garbage[i], out.wcs), SFV_ERR_INVALID);
        CHECK_RESULT(sfv_multi_channel_gather_read(mc, NULL, garbage[i], out.wcs), SFV_ERR_INVALID);
        CHECK_RESULT(sfv_multi_channel_multicast_send(mc, NULL, garbage[i], &g, 1, out.wcs), SFV_ERR_INVALID);
        CHECK_RESULT(sfv_multi_channel_scatter_send(NULL, ps, garbage[i], out.wcs), SFV_ERR_INVALID);
        CHECK_RESULT(sfv_multi_channel_scatter_send(mc, ps, garbage[i], out.wcs), SFV_ERR_INVALID); /* read past ps */
        CHECK_RESULT(sfv_multi_channel_multicast_send(mc, peers, garbage[i], &g, 1, out.wcs), SFV_ERR_INVALID);
        CHECK_MSG("more than any array holds");
        CHECK(memcmp(&out, before, sizeof out) == 0); /* no wc written */
    }
    CHECK_RESULT(sfv_multi_channel_scatter_send(mc, ps, (size_t)PTRDIFF_MAX / sizeof ps[0] + 1, NULL), SFV_ERR_INVALID); /* no wcs: the requests' own limit */
    /* a plain refusal still fills every wc with its result */
    CHECK_RESULT(sfv_multi_channel_scatter_send(mc, NULL, 2, out.wcs), SFV_ERR_INVALID);
    CHECK(out.wcs[0].result == SFV_ERR_INVALID && out.wcs[1].result == SFV_ERR_INVALID);
    CHECK(memcmp(out.guard, before + sizeof out.wcs, sizeof out.guard) == 0); /* (guard follows wcs: chars, no padding) */
    CHECK_OK(sfv_multi_channel_scatter_send(mc, NULL, 0, out.wcs));
    CHECK_OK(sfv_destroy_multi_channel(mc));
    tf_close(&e);
}

/* sfv_node_connect_with runs the caller's allgather, which may call safeverbs. A destroy of the
   node from it freed the node, and sfv_node_connect_with went on with freed memory when fn
   returned (ASan: heap-use-after-free in sfv_node_connect_with; plain: SIGSEGV), where every
   other callback that holds an object (a scope's fn, on_wc) has its destroy refused. Now
   sfv_destroy_node refuses (SFV_ERR_INVALID) while the allgather runs, in both of its calls, and
   the connect goes on. */
static sfv_node *tr_ag_node;
static int tr_ag_calls;
static sfv_result tr_ag_destroy_r[2];
static sfv_result tr_ag_destroying(void *user, const void *mine, void *all, size_t size) {
    (void)user;
    if (size) memcpy(all, mine, size); /* a world of one */
    tr_ag_destroy_r[tr_ag_calls++ & 1] = sfv_destroy_node(tr_ag_node);
    return SFV_OK;
}
static void t_node_destroy_in_allgather(void) {
    tf_env e;
    sfv_node_desc d;
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.world_size = 1;
    CHECK_OK(sfv_create_node(e.pd, &d, &tr_ag_node));
    tr_ag_calls = 0;
    CHECK_OK(sfv_node_connect_with(tr_ag_node, tr_ag_destroying, NULL)); /* used freed memory */
    CHECK_EQ(tr_ag_calls, 2);
    CHECK_RESULT(tr_ag_destroy_r[0], SFV_ERR_INVALID); /* the endpoints' allgather */
    CHECK_RESULT(tr_ag_destroy_r[1], SFV_ERR_INVALID); /* the sync's */
    CHECK_OK(sfv_node_barrier(tr_ag_node, NULL, 0, 100)); /* connected, and whole */
    CHECK_OK(sfv_destroy_node(tr_ag_node)); /* afterwards: as ever */
    tf_close(&e);
}

/* sfv_node_barrier's docs said "Each member's channel needs room for one write ..., must not be
   broken ... and must be connected", this rank a member; the barrier never writes to its own
   channel, so it rightly checks only the others' (a node whose own channel is reset passes its
   barrier). The sentence now says "each other member's". (Behaviour pinned here: this test passes
   on the old header too; the fix was to the docs.) */
static void t_barrier_own_channel_unchecked(void) {
    tf_env e;
    sfv_node_desc d;
    sfv_node *node;
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.world_size = 1;
    CHECK_OK(sfv_create_node(e.pd, &d, &node));
    tr_ag_node = NULL;
    CHECK_OK(sfv_node_connect_with(node, tr_ag_destroying, NULL));
    CHECK_OK(sfv_channel_reset(sfv_multi_channel_peer(sfv_node_multi_channel(node), 0))); /* not connected now */
    CHECK_OK(sfv_node_barrier(node, NULL, 0, 100));
    CHECK_OK(sfv_destroy_node(node));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_node_endpoint_garbage_size, 10),
    TEST(t_many_peer_garbage_count, 10),
    TEST(t_node_destroy_in_allgather, 10),
    TEST(t_barrier_own_channel_unchecked, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
