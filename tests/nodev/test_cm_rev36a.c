/* test_cm_rev36a.c - session 36 on the fake NIC (and the fake librdmacm, for sfv_node_connect_cm):
   a node connected from inside the allgather of its own sfv_node_connect_with. Each test failed
   on the header before it. */
#define SAFEVERBS_RDMACM
#include "fake_env.h"
#include "fake_rdmacm.h"

/* Promise (sfv_node_connect_with: fn may not connect the node; every failure a result naming
   its cause). sfv_node_handshake, sfv_node_connect and sfv_node_connect_cm called from fn were
   not refused: the handshake connected the node, and the outer call's own handshake then failed
   with "the node is already connected", a result about neither call. Now each is refused while
   fn runs (SFV_ERR_INVALID, naming the allgather), and the outer connect goes on. */
static sfv_node *r6_node;
static sfv_result r6_inner[3];
static int r6_calls;
static sfv_result r6_ag_connecting(void *user, const void *mine, void *all, size_t size) {
    sfv_net_node me;
    (void)user;
    if (size) memcpy(all, mine, size); /* a world of one */
    if (r6_calls++ == 0) {
        memset(&me, 0, sizeof me);
        me.host = "127.0.0.1";
        me.port = 1; /* (never reached: refused before any exchange) */
        r6_inner[0] = sfv_node_handshake(r6_node, (const uint8_t *)all, size);
        CHECK_MSG("allgather");
        r6_inner[1] = sfv_node_connect(r6_node, &me, 100);
        CHECK_MSG("allgather");
        r6_inner[2] = sfv_node_connect_cm(r6_node, &me, NULL, 100);
        CHECK_MSG("allgather");
    }
    return SFV_OK;
}
static void t_connect_in_allgather(void) {
    tf_env e;
    sfv_node_desc d;
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.world_size = 1;
    CHECK_OK(sfv_create_node(e.pd, &d, &r6_node));
    r6_calls = 0;
    CHECK_OK(sfv_node_connect_with(r6_node, r6_ag_connecting, NULL)); /* (before: SFV_ERR_INVALID, "already connected") */
    CHECK_EQ(r6_calls, 2);
    CHECK_RESULT(r6_inner[0], SFV_ERR_INVALID);
    CHECK_RESULT(r6_inner[1], SFV_ERR_INVALID);
    CHECK_RESULT(r6_inner[2], SFV_ERR_INVALID);
    CHECK_OK(sfv_node_barrier(r6_node, NULL, 0, 100)); /* the outer connect connected it */
    CHECK_OK(sfv_destroy_node(r6_node));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_connect_in_allgather, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
