/* test_rev33a.c - hostile review 33a on the fake NIC: round 32's changes and the PD's orphans
   (what a failed create could not take apart, left to sfv_dealloc_pd). Each test failed on the
   header at tag base. */
#include "fake_env.h"

/* Promise (sfv_dealloc_pd: what a call that failed part-way could not take apart goes once its
   destroy is taken, "no leak"; sfv_dereg_mr: a registration refused its deregistration "stays
   registered ... do not free its memory"). A registration whose sfv_mr allocation failed after
   the verb (ibv_reg_mr, ibv_reg_dmabuf_mr) was deregistered ignoring the verb's result: a
   refused ibv_dereg_mr lost the MR, still registered on the caller's memory (which the caller,
   told the call failed, frees), holding the PD for good (sfv_dealloc_pd then SFV_ERR_DRIVER,
   EBUSY, for ever, and the device with it); sfv_create_node's barrier MR the same. Now the
   sfv_mr is allocated before the verb: nothing can fail after the registration. */
static void t_reg_mr_alloc_failed_dereg_refused(void) {
    int dmabuf, failed_alloc = 0;
    for (dmabuf = 0; dmabuf < 2; dmabuf++) {
        long n;
        for (n = 1; n <= 4; n++) {
            static unsigned char buf[4096];
            sfv_context *ctx;
            sfv_pd *pd;
            sfv_mr *mr = NULL;
            sfv_result r;
            long calls;
            const char *failed;
            fk_reset();
            fk_set_dmabuf(dmabuf != 0);
            CHECK_OK(sfv_open_device(NULL, &ctx));
            CHECK_OK(sfv_alloc_pd(ctx, &pd));
            fk_fail_nth(n);
            fk_fail_name("ibv_dereg_mr", 1);
            r = dmabuf ? sfv_reg_dmabuf_mr_local(pd, 3, 0, sizeof buf, 0, &mr) : sfv_reg_mr_local(pd, buf, sizeof buf, &mr);
            calls = fk_calls();
            failed = n <= calls && fk_call_name(n) ? fk_call_name(n) : "none";
            if (r != SFV_OK) {
                CHECK(mr == NULL);
                CHECK_RESULT(sfv_last_error()->result, r);
                if (strcmp(failed, "calloc") == 0) failed_alloc++;
            }
            fk_reset();
            fk_fail_nth(0);
            CHECK_OK(sfv_dereg_mr(mr));
            CHECK_OK(sfv_close_device(ctx)); /* (the PD holds it) */
            if (sfv_dealloc_pd(pd) != SFV_OK) /* an MR nobody has holds it */
                FAIL("%s, call %ld failed (%s): sfv_dealloc_pd: %s", dmabuf ? "DMA-BUF" : "MR", n, failed,
                     sfv_last_error()->message);
            if (fk_live_total() != 0) FAIL("%s, call %ld failed: %ld fake objects left", dmabuf ? "DMA-BUF" : "MR", n, fk_live_total());
            if (n > calls) break;
        }
    }
    CHECK_EQ(failed_alloc, 2); /* (the sfv_mr's allocation was among the calls failed, for both) */
}


/* Promise (>>multi-channel, the many-peer calls: "A wait that fails (a CQ error) returns that
   error the same way, after flushing its channel. Work a channel could not stop ... makes it
   SFV_ERR_DRIVER, before any other failure: its buffers are still the NIC's"; every failure has
   a matching sfv_last_error). Request 0's wait fails (ibv_poll_cq), its channel flushes it;
   request 1 (peer 1, whose peer posts no receive) expires and its channel cannot stop it (the
   NIC flushes nothing, the QP's destroy is refused). The call said the first failed wait's
   error, "ibv_poll_cq failed" (a wait that fails flushes its channel: the caller takes back
   every buffer), not that request 1's buffer is still the NIC's: round 32 told stuck work by
   its result, SFV_ERR_DRIVER, which a failed poll has too. Now the stuck work is said. */
static void t_many_wait_failed_then_stuck(void) {
    tf_env e;
    sfv_multi_channel *m1, *m2;
    sfv_gather_element g;
    sfv_scatter_element sc;
    sfv_peer_send ps[2];
    sfv_work_completion wcs[2];
    sfv_pending rx;
    sfv_result r;
    tf_open(&e, 4096);
    tf_mc_pair(&e, 50, &m1, &m2);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    sc = sfv_mr_scatter_element(e.mr, e.buf + 64, 8);
    CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(m2, 0), &sc, 1, &rx)); /* request 0 has its receive */
    memset(ps, 0, sizeof ps);
    ps[0].peer = 0; ps[0].sges = &g; ps[0].n = 1;
    ps[1].peer = 1; ps[1].sges = &g; ps[1].n = 1;
    fk_set_no_flush(true);
    fk_fail_nth(0); /* (counts the calls from here) */
    fk_fail_name("ibv_poll_cq", 1); /* the call's first poll: request 0's wait */
    fk_fail_name("ibv_destroy_qp", 1000);
    r = sfv_multi_channel_scatter_send(m1, ps, 2, wcs);
    CHECK(fk_call_name(3) && strcmp(fk_call_name(3), "ibv_poll_cq") == 0); /* (after the two posts) */
    CHECK_RESULT(wcs[1].result, SFV_ERR_DRIVER); /* its buffer is the NIC's */
    CHECK_RESULT(r, SFV_ERR_DRIVER);
    CHECK_RESULT(sfv_last_error()->result, SFV_ERR_DRIVER);
    CHECK_MSG("still the NIC's"); /* was "ibv_poll_cq failed (the provider returned -2)" */
    fk_reset();
    CHECK_OK(sfv_destroy_multi_channel(m1)); /* the verbs work again: the destroy stops it */
    CHECK_OK(sfv_destroy_multi_channel(m2));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_reg_mr_alloc_failed_dereg_refused, 10),
    TEST(t_many_wait_failed_then_stuck, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
