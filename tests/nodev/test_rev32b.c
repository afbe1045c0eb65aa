/* test_rev32b.c - hostile review 32b: the many-peer calls of a multi-channel and its scopes. Each
   test failed on the header before its fix. */
#include "fake_env.h"

#include <stdint.h>


/* Promise (>>multi-channel, the many-peer calls: "when the call returns, no buffer of any request
   is in flight"; >>channel, blocking calls: only where the channel could not stop the work is the
   result SFV_ERR_DRIVER, "saying the buffers are still the NIC's"; "A scope's and a many-peer
   call's deadline end the same way"). Request 0 (peer 0, whose peer posts no receive) is posted,
   request 1's post fails; request 0's deadline passes and its channel cannot stop it (the NIC
   flushes nothing, the QP's destroy is refused): its buffer is still the NIC's. The call returned
   the failed post's error, and its message, as if the call had only stopped part-way, so the
   caller takes back a buffer the NIC may still read. Now it is SFV_ERR_DRIVER, saying so (the
   wcs still tell each request's own result: the post's failure for request 1). */
static void t_many_post_failed_and_stuck(void) {
    tf_env e;
    sfv_multi_channel *m1, *m2;
    sfv_gather_element g;
    sfv_peer_send ps[2];
    sfv_work_completion wcs[2];
    sfv_result r;
    tf_open(&e, 4096);
    tf_mc_pair(&e, 50, &m1, &m2);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    memset(ps, 0, sizeof ps);
    ps[0].peer = 0; ps[0].sges = &g; ps[0].n = 1;
    ps[1].peer = 1; ps[1].sges = &g; ps[1].n = 1;
    fk_set_no_flush(true);
    fk_fail_name("ibv_destroy_qp", 1000);
    fk_fail_nth(2); /* the second verb of the call: request 1's ibv_post_send */
    r = sfv_multi_channel_scatter_send(m1, ps, 2, wcs);
    CHECK(fk_call_name(2) && strcmp(fk_call_name(2), "ibv_post_send") == 0); /* (the call's second verb failed) */
    CHECK_RESULT(wcs[0].result, SFV_ERR_DRIVER); /* its buffer is the NIC's */
    CHECK(wcs[1].result != SFV_OK && wcs[1].result != SFV_ERR_DRIVER); /* never posted: the post's failure */
    CHECK_RESULT(r, SFV_ERR_DRIVER); /* was the post's error */
    CHECK_RESULT(sfv_last_error()->result, SFV_ERR_DRIVER);
    CHECK_MSG("still the NIC's");
    CHECK_MSG("destroy the multi-channel"); /* (sfv_destroy_channel refuses its channels) */
    fk_reset();
    CHECK_OK(sfv_destroy_multi_channel(m1)); /* the verbs work again: the destroy stops it */
    CHECK_OK(sfv_destroy_multi_channel(m2));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_many_post_failed_and_stuck, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
