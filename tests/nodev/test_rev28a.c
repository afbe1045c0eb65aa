/* test_rev28a.c - from hostile review 28a (atomics, remote regions, elements, memory regions) on
   the fake NIC: each test failed on the header before its fix. */
#include "fake_env.h"

#include <stdint.h>

/* >>memory regions: "once a device context has had a DMA-BUF MR, no send or write on its channels
   goes inline (the CPU would copy from the iova)". A second sfv_context over the same verbs
   context (sfv_context_wrap twice) is the same device context: a PD there may wrap the very verbs
   PD the DMA-BUF MR is on, so its channels may post that MR's elements, which the NIC takes. Its
   channels still went inline: a small send of a DMA-BUF element had the CPU copy from the iova at
   the post (a crash; a host address there would have been sent as data). */
static void t_dmabuf_twin_never_inline(void) {
    sfv_context *ctx, *twin;
    sfv_pd *pd, *twin_pd;
    sfv_mr *dm, *mr;
    sfv_channel *a, *b;
    sfv_gather_element g;
    sfv_pending p;
    sfv_work_completion wc;
    unsigned char *buf = (unsigned char *)calloc(1, 4096);
    const uint64_t iova = 0xffff900000000000ull; /* no host address: a CPU read of it faults */
    CHECK(buf);
    fk_set_dmabuf(true);
    CHECK_OK(sfv_open_device(NULL, &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    CHECK_OK(sfv_context_wrap(sfv_context_raw(ctx), false, &twin));
    CHECK_OK(sfv_pd_wrap(twin, sfv_pd_raw(pd), false, &twin_pd));
    CHECK_OK(sfv_reg_mr_shared(twin_pd, buf, 4096, &mr));
    CHECK_OK(sfv_create_channel(twin_pd, NULL, &a)); /* made before the DMA-BUF MR */
    CHECK_OK(sfv_create_channel(twin_pd, NULL, &b));
    tf_connect(a, b);
    CHECK(sfv_channel_get_desc(a)->max_inline_data >= 64); /* the fake grants inline data */
    CHECK_OK(sfv_reg_dmabuf_mr_local(pd, 3, 0, 4096, iova, &dm));
    CHECK_OK(sfv_mr_gather_element_checked(dm, (const void *)(uintptr_t)(iova + 64), 16, &g));
    CHECK_OK(sfv_channel_post_send(a, &g, 1, &p)); /* to the NIC, which reads no DMA-BUF in the fake */
    CHECK_RESULT(sfv_pending_wait(&p, 1000, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_LOC_PROT_ERR);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    { /* a twin made after the DMA-BUF MR: the same */
        sfv_context *late;
        sfv_pd *late_pd;
        CHECK_OK(sfv_context_wrap(sfv_context_raw(ctx), false, &late));
        CHECK_OK(sfv_pd_wrap(late, sfv_pd_raw(pd), false, &late_pd));
        CHECK_OK(sfv_create_channel(late_pd, NULL, &a));
        CHECK_OK(sfv_create_channel(late_pd, NULL, &b));
        tf_connect(a, b);
        CHECK_OK(sfv_channel_post_send(a, &g, 1, &p));
        CHECK_RESULT(sfv_pending_wait(&p, 1000, &wc), SFV_ERR_WORK);
        CHECK_EQ(wc.status, SFV_WC_LOC_PROT_ERR);
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        CHECK_OK(sfv_dealloc_pd(late_pd));
        CHECK_OK(sfv_close_device(late));
    }
    CHECK_OK(sfv_dereg_mr(dm));
    CHECK_OK(sfv_dereg_mr(mr));
    CHECK_OK(sfv_dealloc_pd(twin_pd));
    CHECK_OK(sfv_close_device(twin));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    CHECK_EQ(fk_live_total(), 0);
    free(buf);
    fk_reset();
}

/* >>leases: "the MR must be registered ... on the channel's PD". A PD is its verbs PD: an sfv_pd
   that wraps the verbs PD of another (sfv_pd_wrap without ownership) is the same PD to the NIC,
   as the channel's SRQ check says ("a PD that wraps the same verbs PD is the same"). The grant
   compared the sfv_pd handles, so an MR registered through one and a channel made through the
   other were refused with SFV_ERR_INVALID, "the MR and the channel belong to different PDs",
   though the window binds there (an MR of a really different PD is still refused). */
static void t_lease_mr_of_wrapping_pd(void) {
    tf_env e;
    sfv_pd *wrap, *other;
    sfv_channel *a, *b;
    sfv_mr *m, *m2;
    sfv_lease *l;
    sfv_gather_element g;
    fk_set_mw(true);
    tf_open(&e, 8192);
    CHECK_OK(sfv_pd_wrap(e.ctx, sfv_pd_raw(e.pd), false, &wrap));
    CHECK_OK(sfv_create_channel(wrap, NULL, &a));
    CHECK_OK(sfv_create_channel(e.pd, NULL, &b));
    tf_connect(a, b);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf, 4096, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_MW_BIND, &m));
    CHECK_OK(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l));
    memcpy(e.buf + 5000, "leased", 6);
    g = sfv_mr_gather_element(e.mr, e.buf + 5000, 6);
    CHECK_OK(sfv_channel_write(b, &g, 1, sfv_lease_remote(l), NULL));
    CHECK(memcmp(e.buf, "leased", 6) == 0);
    CHECK_OK(sfv_lease_revoke(l));
    /* an MR of another verbs PD: still refused */
    CHECK_OK(sfv_alloc_pd(e.ctx, &other));
    CHECK_OK(sfv_reg_mr_access(other, e.buf + 4096, 1024, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_MW_BIND, &m2));
    CHECK_RESULT(sfv_lease_grant(a, m2, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_INVALID);
    CHECK_MSG("different PDs");
    CHECK_OK(sfv_dereg_mr(m2));
    CHECK_OK(sfv_dealloc_pd(other));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dereg_mr(m));
    CHECK_OK(sfv_dealloc_pd(wrap));
    tf_close(&e);
    fk_reset();
}

static const harness_test TESTS[] = {
    TEST(t_dmabuf_twin_never_inline, 10),
    TEST(t_lease_mr_of_wrapping_pd, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
