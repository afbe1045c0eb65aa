/* test_rev33b.c - hostile review 33b on the fake NIC: the numeric edges of the public API (every
   size, count, index and timeout at 0, 1, its limit and past it). Each test failed on the header
   at tag base. */
#include "fake_env.h"

#include <limits.h>
#include <stdint.h>

/* >>srq: "SFV_ERR_INVALID for a desc field out of range (naming it)", and sfv_srq_desc.max_wr
   "1 .. max_srq_wr". The SRQ's receives complete to a CQ of max_wr entries, which no device makes
   above its max_cqe: on rxe (Linux 6.x: max_srq_wr 2^20, max_cqe 32767) a max_wr of 32768 ..
   2^20, inside the documented range, reached ibv_create_cq and failed there (EINVAL, the verb
   named, not the field). Refused now before any verb, naming max_wr and the device's max_cqe; a
   max_wr of exactly max_cqe still works. */
static void t_srq_max_wr_over_max_cqe(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_srq *srq = (sfv_srq *)1;
    sfv_srq_desc sd;
    sfv_device_attr a;
    long calls;
    fk_set_max_cqe(1024); /* below the fake's max_srq_wr (4096) */
    CHECK_OK(sfv_open_device(NULL, &ctx));
    CHECK_OK(sfv_query_device(ctx, &a));
    CHECK(a.max_srq_wr > a.max_cqe);
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    memset(&sd, 0, sizeof sd);
    sd.max_wr = a.max_cqe + 1; /* within 1 .. max_srq_wr */
    fk_fail_nth(0); /* (counts the calls from here) */
    CHECK_RESULT(sfv_create_srq(pd, &sd, &srq), SFV_ERR_INVALID);
    calls = fk_calls();
    CHECK(srq == NULL);
    CHECK(strcmp(sfv_last_error()->verb, "sfv_create_srq") == 0); /* was "ibv_create_cq" */
    CHECK_MSG("max_wr");
    CHECK_MSG("max_cqe");
    CHECK_EQ(calls, 0); /* refused before any verb or allocation */
    CHECK_EQ(fk_live(FK_CQ), 0);
    sd.max_wr = a.max_cqe; /* the largest that fits */
    CHECK_OK(sfv_create_srq(pd, &sd, &srq));
    CHECK_OK(sfv_destroy_srq(srq));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
    fk_reset();
    CHECK_EQ(fk_live_total(), 0);
}

/* DEBUG CHECKS: "address and size arithmetic that could wrap" is checked, and no size or offset
   sum may wrap, even where it is then tested (the rule the fuzzers enforce with clang's
   -fsanitize=unsigned-integer-overflow). sfv_reg_mr_access tested addr + length - 1 >= addr, and
   sfv_reg_dmabuf_mr_access offset + length - 1 >= offset and iova + length - 1 >= iova: sums that
   wrap for exactly the inputs they refuse (and for a range ending at 2^64, which they accept),
   so under that sanitizer a registration at the top of the address space aborted the process
   instead of returning SFV_ERR_INVALID. This test fails at tag base when built as the fuzzers are
   (clang -fsanitize=unsigned-integer-overflow -fno-sanitize-recover=all); in the gcc builds it
   checks the edges: a range ending at 2^64 passes the check, one byte more is refused. */
static void t_reg_mr_length_check_no_wrap(void) {
    tf_env e;
    sfv_mr *mr = (sfv_mr *)1;
    void *const top = (void *)(uintptr_t)(UINTPTR_MAX - 0xFFF); /* the last page */
    tf_open(&e, 4096);
    CHECK_OK(sfv_reg_mr_local(e.pd, top, 0x1000, &mr)); /* [top, 2^64): the fake registers it */
    CHECK_OK(sfv_dereg_mr(mr));
    mr = (sfv_mr *)1;
    CHECK_RESULT(sfv_reg_mr_local(e.pd, top, 0x1001, &mr), SFV_ERR_INVALID);
    CHECK(mr == NULL);
    CHECK_MSG("addr + length wraps");
    CHECK_RESULT(sfv_reg_mr_local(e.pd, (void *)(uintptr_t)2, SIZE_MAX, &mr), SFV_ERR_INVALID);
    CHECK_MSG("addr + length wraps");
    fk_set_dmabuf(true);
    CHECK_RESULT(sfv_reg_dmabuf_mr_local(e.pd, 3, UINT64_MAX - 10, 100, 0x1000 + ((UINT64_MAX - 10) & 0xFFF), &mr), SFV_ERR_INVALID);
    CHECK_MSG("offset + length wraps");
    CHECK_RESULT(sfv_reg_dmabuf_mr_local(e.pd, 3, 0, 0x1001, UINT64_MAX - 0xFFF, &mr), SFV_ERR_INVALID);
    CHECK_MSG("iova + length wraps");
    CHECK_OK(sfv_reg_dmabuf_mr_local(e.pd, 3, 0, 0x1000, UINT64_MAX - 0xFFF, &mr)); /* ends at 2^64: no wrap */
    CHECK_OK(sfv_dereg_mr(mr));
    fk_reset();
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_srq_max_wr_over_max_cqe, 10),
    TEST(t_reg_mr_length_check_no_wrap, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
