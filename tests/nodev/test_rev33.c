/* test_rev33.c - session 26's own fixes. Each test failed on the header before its fix. */
#include "fake_env.h"

#include <stdint.h>


typedef struct {
    sfv_gather_element g;
} t33_fn_arg;
/* fn: a send to peer 0 (whose peer posts no receive: it never completes), then a failure. */
static sfv_result t33_send_then_fail(sfv_multi_channel *mc, void *user) {
    t33_fn_arg *a = user;
    sfv_result r = sfv_channel_post_send(sfv_multi_channel_peer(mc, 0), &a->g, 1, NULL);
    CHECK_OK(r);
    return SFV_ERR_INVALID;
}

/* Promise (>>multi-channel: sfv_destroy_channel refuses a multi-channel's channels; the stuck
   message names what to destroy, as sfv__stuck does since review 32b). A multi-channel scope whose
   fn failed after posting work its channel then could not stop (the NIC flushes nothing, the QP's
   destroy is refused) said "destroy the channel": a call that is refused. Both verdicts, the
   scope's (SFV_ERR_SCOPE_FN) and the manual scope's (SFV_ERR_DRIVER), now name the multi-channel. */
static void t_mc_scope_fn_failed_stuck_names_mc(void) {
    int manual;
    for (manual = 0; manual < 2; manual++) {
        tf_env e;
        sfv_multi_channel *m1, *m2;
        t33_fn_arg a;
        sfv_result r;
        tf_open(&e, 4096);
        tf_mc_pair(&e, 50, &m1, &m2);
        a.g = sfv_mr_gather_element(e.mr, e.buf, 8);
        fk_set_no_flush(true);
        fk_fail_name("ibv_destroy_qp", 1000);
        r = manual ? sfv_multi_channel_manual_scope(m1, t33_send_then_fail, &a)
                   : sfv_multi_channel_scope(m1, t33_send_then_fail, &a, NULL);
        CHECK_RESULT(r, manual ? SFV_ERR_DRIVER : SFV_ERR_SCOPE_FN);
        CHECK_MSG("still the NIC's");
        CHECK_MSG("destroy the multi-channel");
        fk_reset();
        CHECK_OK(sfv_destroy_multi_channel(m1)); /* the verbs work again: the destroy stops it */
        CHECK_OK(sfv_destroy_multi_channel(m2));
        tf_close(&e);
    }
}

/* Promise (>>channel, sfv_channel_reset: "the port's address is read again ... so the new
   endpoint says where the channel is now"). The LID and GID came from the channel's creation
   only: after the port's address changed (an InfiniBand LID the subnet manager assigned anew; a
   RoCE GID its IP address rewrote), a reset channel advertised the old address, which no peer
   reaches. A query that fails keeps the old address, and neither fails the reset nor leaves an
   error behind. */
static void t_reset_reads_the_address_again(void) {
    int ib;
    for (ib = 0; ib < 2; ib++) {
        tf_env e;
        sfv_channel *ch;
        sfv_endpoint before, after, kept;
        char msg[256];
        fk_reset();
        if (ib) fk_set_link_layer(IBV_LINK_LAYER_INFINIBAND);
        tf_open(&e, 4096);
        CHECK_OK(sfv_create_channel(e.pd, NULL, &ch));
        CHECK_OK(sfv_channel_endpoint(ch, &before));
        fk_set_addr_gen(7); /* the port's address changes */
        CHECK_OK(sfv_channel_reset(ch));
        CHECK_OK(sfv_channel_endpoint(ch, &after));
        if (ib) CHECK_EQ(after.lid, before.lid + 7);
        CHECK(after.has_gid == before.has_gid);
        if (after.has_gid) {
            CHECK_EQ(after.gid.raw[14], 7);
            CHECK(memcmp(after.gid.raw, before.gid.raw, 14) == 0);
        }
        /* the queries fail: the address is kept, the reset succeeds, no error is left */
        fk_set_addr_gen(9);
        fk_fail_name("ibv_query_port", 1);
        if (after.has_gid) fk_fail_name("ibv_query_gid_ex", 1);
        CHECK_RESULT(sfv_channel_endpoint(NULL, &kept), SFV_ERR_INVALID); /* the last error before */
        snprintf(msg, sizeof msg, "%s", sfv_last_error()->message);
        CHECK_OK(sfv_channel_reset(ch));
        CHECK_RESULT(sfv_last_error()->result, SFV_ERR_INVALID);
        CHECK(strcmp(sfv_last_error()->message, msg) == 0); /* (not the failed queries') */
        CHECK_OK(sfv_channel_endpoint(ch, &kept));
        CHECK_EQ(kept.lid, after.lid);
        CHECK(memcmp(kept.gid.raw, after.gid.raw, 16) == 0);
        /* a port not ACTIVE (one down may say LID 0): its address is not taken either */
        fk_set_addr_gen(11);
        fk_set_port_state(IBV_PORT_DOWN);
        CHECK_OK(sfv_channel_reset(ch)); /* (a new QP is made on a port that is down: it waits in INIT) */
        {
            CHECK_OK(sfv_channel_endpoint(ch, &kept));
            CHECK_EQ(kept.lid, after.lid);
            CHECK(memcmp(kept.gid.raw, after.gid.raw, 16) == 0);
        }
        fk_set_port_state(IBV_PORT_ACTIVE);
        fk_reset();
        CHECK_OK(sfv_destroy_channel(ch));
        tf_close(&e);
    }
}

static const harness_test TESTS[] = {
    TEST(t_reset_reads_the_address_again, 20),
    TEST(t_mc_scope_fn_failed_stuck_names_mc, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
