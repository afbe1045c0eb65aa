/* test_rev28c.c - from a hostile review of channel creation, connection and reset (session 28c)
   on the fake NIC: each test failed on the header before its fix. */
#include "fake_env.h"

/* One send from a to b that arrives: the connection works. */
static void tr_send_arrives(tf_env *e, sfv_channel *a, sfv_channel *b) {
    sfv_scatter_element s = sfv_mr_scatter_element(e->mr, e->buf, 8);
    sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf + 8, 8);
    sfv_pending rx;
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_OK(sfv_channel_send(a, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
}

/* sfv_channel_reset: "a verb that fails leaves the channel broken ..., and the call can be
   repeated"; and a channel can always be destroyed (a destroy a verb refused works when called
   again). A reset whose new QP's move to INIT was refused, and then that QP's destroy too,
   forgot the QP, which went on holding the CQ: the reset could be repeated, but every
   sfv_destroy_channel of the channel failed (ibv_destroy_cq: EBUSY) for good, with the QP, CQ,
   PD and context left behind. sfv_create_channel under the same two faults left its QP and CQ
   behind. */
static void t_reset_init_and_destroy_refused(void) {
    tf_env e;
    sfv_channel *a, *b;
    int round;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    for (round = 0; round < 2; round++) {
        fk_fail_name("ibv_create_qp", 1); /* a channel without a QP: the two faults below meet only the new one */
        CHECK_RESULT(sfv_channel_reset(a), SFV_ERR_RESOURCE);
        fk_reset();
        fk_fail_name("ibv_modify_qp", 1); /* to INIT */
        fk_fail_name("ibv_destroy_qp", 1);
        CHECK_RESULT(sfv_channel_reset(a), SFV_ERR_DRIVER);
        CHECK_MSG("INIT");
        fk_reset();
        CHECK(sfv_channel_broken(a, NULL));
        { /* the QP kept for the destroy is none to use: no endpoint, no post, "no queue pair" said */
            sfv_endpoint ep;
            sfv_gather_element g = sfv_mr_gather_element(e.mr, e.buf, 8);
            sfv_pending p;
            CHECK_RESULT(sfv_channel_endpoint(a, &ep), SFV_ERR_BROKEN);
            CHECK_RESULT(sfv_channel_post_send(a, &g, 1, &p), SFV_ERR_BROKEN);
            CHECK_MSG("queue pair");
        }
        if (round == 0) { /* repeated: works, and connects again */
            CHECK_OK(sfv_channel_reset(a));
            CHECK_OK(sfv_channel_reset(b));
            tf_connect(a, b);
            tr_send_arrives(&e, a, b);
            CHECK_EQ(fk_live(FK_QP), 2);
        }
    }
    CHECK_OK(sfv_destroy_channel(a)); /* (round 1: destroyed as it is) */
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_EQ(fk_live(FK_QP), 0);
    CHECK_EQ(fk_live(FK_CQ), 0);
    fk_fail_name("ibv_modify_qp", 1);
    fk_fail_name("ibv_destroy_qp", 1);
    CHECK_RESULT(sfv_create_channel(e.pd, NULL, &a), SFV_ERR_DRIVER);
    CHECK(a == NULL);
    CHECK_MSG("INIT");
    fk_reset();
    tf_close(&e); /* nothing left */
}

static const harness_test TESTS[] = {
    TEST(t_reset_init_and_destroy_refused, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
