/* test_rev30b.c - hostile review 30b on the fake NIC: single posts, pending handles and blocking
   calls. Each test failed on the header at tag base. */
#include "fake_env.h"

/* >>remote regions: "No region may pass 2^64: one that does ("wraps") is refused with
   SFV_ERR_INVALID by every call that narrows it (_sub, _slice, _array_field) or posts to it
   (write, read), before anything reaches the NIC", and >>inject: "a region that wraps,
   SFV_ERR_INVALID". A write, write with immediate, read or inject_write to a region that wraps
   and is shorter than the bytes posted said SFV_ERR_SLICE_NOT_WITHIN_BOUNDS (the length was
   tested first), where the narrowing calls and the atomics say SFV_ERR_INVALID for the same
   region. Now the wrap is tested first: SFV_ERR_INVALID, "wraps", the handle zeroed. */
static void t_post_to_wrapping_region_is_invalid(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_pending p;
    sfv_work_completion wc;
    sfv_remote_mr narrowed;
    const sfv_remote_mr wraps = sfv_remote_mr_make(UINT64_MAX - 15, 32, 1); /* 32 bytes from 2^64 - 16 */
    sfv_gather_element g;
    sfv_scatter_element s;
    int k;
    memset(&d, 0, sizeof d);
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    g = sfv_mr_gather_element(e.mr, e.buf, 64); /* 64 bytes: more than the region's 32 */
    s = sfv_mr_scatter_element(e.mr, e.buf + 1024, 64);
    CHECK_RESULT(sfv_remote_mr_sub(wraps, 0, &narrowed), SFV_ERR_INVALID); /* what the narrowing calls say */
    for (k = 0; k < 5; k++) {
        sfv_result r;
        memset(&p, 0xA5, sizeof p);
        p.state_ = 0; /* (holds no work) */
        switch (k) {
        case 0: r = sfv_channel_post_write(a, &g, 1, wraps, &p); break;
        case 1: r = sfv_channel_post_write_imm(a, &g, 1, wraps, 7, &p); break;
        case 2: r = sfv_channel_post_read(a, &s, 1, wraps, &p); break;
        case 3: r = sfv_channel_write(a, &g, 1, wraps, &wc); break;
        default: r = sfv_channel_inject_write(a, e.buf, 64, wraps); break;
        }
        if (r != SFV_ERR_INVALID) FAIL("case %d: %s, want SFV_ERR_INVALID (last error: %s)", k, sfv_result_str(r), sfv_last_error()->message);
        CHECK_EQ(sfv_last_error()->result, SFV_ERR_INVALID);
        CHECK_MSG("wraps");
        if (k < 3) CHECK_EQ(p.state_, 0);
        if (k < 3) CHECK(p.q_ == NULL);
        if (k == 3) CHECK_EQ(wc.result, SFV_ERR_INVALID);
    }
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    CHECK(!sfv_channel_broken(a, NULL)); /* refused before posting: the channel goes on */
    /* a region that does not wrap and is too short is still SLICE_NOT_WITHIN_BOUNDS */
    CHECK_RESULT(sfv_channel_post_write(a, &g, 1, tf_at(&e, 0), &p), SFV_OK);
    CHECK_OK(sfv_pending_wait(&p, -1, NULL));
    CHECK_RESULT(sfv_channel_post_write(a, &g, 1, sfv_remote_mr_make(sfv_mr_addr(e.mr), 32, sfv_mr_rkey(e.mr)), &p),
                 SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_post_to_wrapping_region_is_invalid, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
