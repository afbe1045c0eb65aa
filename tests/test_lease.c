/* test_lease.c - leases (type 2 memory windows) on rxe: the peer writes through a lease, the lease
   is revoked, the next write fails with a remote access error and the memory is unchanged; a
   lease on channel A used through channel B fails; slices at the region's bounds; every refusal
   before a verb; a lease outliving its channel; sfv_dereg_mr refused while leases live. */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "../safeverbs.h"
#include "harness.h"

#include <errno.h>

#define BUF (1u << 16)
static const unsigned LEASABLE = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_WRITE |
                                 SFV_ACCESS_REMOTE_ATOMIC | SFV_ACCESS_MW_BIND;

typedef struct side {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_channel *ch[2];
    char *buf;
} side;

static void side_open(side *s, const char *dev, unsigned access) {
    sfv_channel_desc d;
    int i;
    memset(&d, 0, sizeof d);
    d.access = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_ATOMIC;
    s->buf = (char *)aligned_alloc(4096, BUF);
    CHECK(s->buf != NULL);
    memset(s->buf, '.', BUF);
    CHECK_OK(sfv_open_device(dev, &s->ctx));
    CHECK_OK(sfv_alloc_pd(s->ctx, &s->pd));
    CHECK_OK(sfv_reg_mr_access(s->pd, s->buf, BUF, access, &s->mr));
    for (i = 0; i < 2; i++) CHECK_OK(sfv_create_channel(s->pd, &d, &s->ch[i]));
}
static void side_close(side *s) {
    int i;
    for (i = 0; i < 2; i++) CHECK_OK(sfv_destroy_channel(s->ch[i]));
    CHECK_OK(sfv_dereg_mr(s->mr));
    CHECK_OK(sfv_dealloc_pd(s->pd));
    CHECK_OK(sfv_close_device(s->ctx));
    free(s->buf);
}
/* a on rxe0, b on rxe1; a.ch[i] connected to b.ch[i]. */
static void pairs_open(side *a, side *b) {
    int i;
    side_open(a, test_device(0), LEASABLE);
    side_open(b, test_device(1), LEASABLE);
    for (i = 0; i < 2; i++) {
        sfv_endpoint ea, eb;
        CHECK_OK(sfv_channel_endpoint(a->ch[i], &ea));
        CHECK_OK(sfv_channel_endpoint(b->ch[i], &eb));
        CHECK_OK(sfv_channel_handshake(a->ch[i], &eb));
        CHECK_OK(sfv_channel_handshake(b->ch[i], &ea));
    }
}
static void need_mw(const side *a) {
    sfv_device_attr at;
    CHECK_OK(sfv_query_device(a->ctx, &at));
    CHECK(at.max_mw > 0); /* rxe has memory windows on both kernels: this test must run */
}

/* b writes `len` bytes of `c` from its buffer to `remote` over its channel i. */
static sfv_result put(side *b, int i, sfv_remote_mr remote, size_t len, char c, sfv_work_completion *wc) {
    sfv_gather_element g;
    memset(b->buf, c, len);
    g = sfv_mr_gather_element(b->mr, b->buf, len);
    return sfv_channel_write(b->ch[i], &g, 1, remote, wc);
}

static void t_write_revoke_write(void) {
    side a, b;
    sfv_lease *l, *r;
    sfv_remote_mr rm;
    sfv_work_completion wc;
    sfv_scatter_element s;
    pairs_open(&a, &b);
    need_mw(&a);
    CHECK_OK(sfv_lease_grant(a.ch[0], a.mr, 4096, 256, SFV_ACCESS_REMOTE_WRITE, &l));
    rm = sfv_lease_remote(l);
    CHECK_EQ(rm.addr, (uint64_t)(uintptr_t)(a.buf + 4096));
    CHECK_EQ(rm.length, 256);
    CHECK(rm.rkey != sfv_mr_rkey(a.mr));
    CHECK_OK(put(&b, 0, rm, 256, 'w', &wc));
    CHECK(a.buf[4096] == 'w' && a.buf[4096 + 255] == 'w');
    CHECK(a.buf[4095] == '.' && a.buf[4096 + 256] == '.');
    /* a read lease on another slice: reads work, writes do not */
    CHECK_OK(sfv_lease_grant(a.ch[0], a.mr, 8192, 64, SFV_ACCESS_REMOTE_READ, &r));
    memset(a.buf + 8192, 'r', 64);
    s = sfv_mr_scatter_element(b.mr, b.buf + 1024, 64);
    CHECK_OK(sfv_channel_read(b.ch[0], &s, 1, sfv_lease_remote(r), NULL));
    CHECK(b.buf[1024] == 'r' && b.buf[1024 + 63] == 'r');
    CHECK_OK(sfv_lease_revoke(r));
    CHECK_OK(sfv_lease_revoke(l));
    CHECK_RESULT(put(&b, 0, rm, 256, 'X', &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_REM_ACCESS_ERR);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_REMOTE);
    CHECK(a.buf[4096] == 'w' && a.buf[4096 + 255] == 'w'); /* unchanged */
    CHECK_OK(sfv_lease_revoke(NULL));
    side_close(&a);
    side_close(&b);
}

/* The lease is bound to a.ch[0]'s queue pair: b's other channel (to a.ch[1], same PD and MR on
   a's side) is refused, and nothing is written. */
static void t_other_channel_refused(void) {
    side a, b;
    sfv_lease *l;
    sfv_work_completion wc;
    pairs_open(&a, &b);
    need_mw(&a);
    CHECK_OK(sfv_lease_grant(a.ch[0], a.mr, 0, 512, SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ, &l));
    CHECK_RESULT(put(&b, 1, sfv_lease_remote(l), 64, 'B', &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_REM_ACCESS_ERR);
    CHECK(a.buf[0] == '.' && a.buf[63] == '.');
    CHECK_OK(put(&b, 0, sfv_lease_remote(l), 64, 'A', &wc)); /* its own channel still works */
    CHECK(a.buf[0] == 'A' && a.buf[63] == 'A');
    CHECK_OK(sfv_lease_revoke(l));
    side_close(&a);
    side_close(&b);
}

/* Slices at both ends of the MR work to their last byte and no further; every refusal comes
   before a verb and says why. */
static void t_bounds_and_refusals(void) {
    side a, b;
    sfv_lease *l = (sfv_lease *)1, *first, *last;
    sfv_mr *plain;
    sfv_remote_mr rm;
    sfv_work_completion wc;
    pairs_open(&a, &b);
    need_mw(&a);
    CHECK_RESULT(sfv_lease_grant(a.ch[0], a.mr, BUF - 63, 64, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK(l == NULL);
    CHECK_RESULT(sfv_lease_grant(a.ch[0], a.mr, BUF + 1, 0, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_lease_grant(a.ch[0], a.mr, (size_t)-1, 2, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(sfv_lease_grant(a.ch[0], a.mr, 0, 64, 0, &l), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_lease_grant(a.ch[0], a.mr, 0, 64, SFV_ACCESS_LOCAL_WRITE, &l), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_lease_grant(NULL, a.mr, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_lease_grant(a.ch[0], NULL, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_lease_grant(a.ch[0], a.mr, 0, 64, SFV_ACCESS_REMOTE_WRITE, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_lease_grant(a.ch[0], b.mr, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_INVALID); /* other PD */
    CHECK_OK(sfv_reg_mr_shared(a.pd, a.buf, 4096, &plain));
    CHECK_RESULT(sfv_lease_grant(a.ch[0], plain, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "MW_BIND") != NULL);
    CHECK_OK(sfv_dereg_mr(plain));
    CHECK_OK(sfv_lease_grant(a.ch[0], a.mr, 0, 64, SFV_ACCESS_REMOTE_WRITE, &first));
    CHECK_OK(sfv_lease_grant(a.ch[0], a.mr, BUF - 64, 64, SFV_ACCESS_REMOTE_WRITE, &last));
    CHECK_OK(put(&b, 0, sfv_lease_remote(first), 64, 'f', &wc));
    CHECK_OK(put(&b, 0, sfv_lease_remote(last), 64, 'l', &wc));
    CHECK(a.buf[0] == 'f' && a.buf[63] == 'f' && a.buf[64] == '.');
    CHECK(a.buf[BUF - 64] == 'l' && a.buf[BUF - 1] == 'l' && a.buf[BUF - 65] == '.');
    /* one byte past the slice: safeverbs on the peer refuses it before the NIC */
    CHECK_RESULT(put(&b, 0, sfv_lease_remote(first), 65, 'x', &wc), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    /* a forged region one byte longer, still inside the MR: a NIC that enforces the window's
       bounds refuses it; rxe (Linux 6.1 and 6.12) checks only the MR's range and writes it
       (documented in >>leases): pin down which of the two this device does */
    rm = sfv_remote_mr_make(sfv_lease_remote(first).addr, 65, sfv_lease_remote(first).rkey);
    if (put(&b, 0, rm, 65, 'x', &wc) == SFV_ERR_WORK) {
        CHECK_EQ(wc.status, SFV_WC_REM_ACCESS_ERR);
        CHECK(a.buf[0] == 'f' && a.buf[64] == '.');
    } else {
        CHECK(strncmp(test_device(0), "rxe", 3) == 0);
        CHECK(a.buf[0] == 'x' && a.buf[64] == 'x' && a.buf[65] == '.');
        /* beyond the MR it is refused all the same */
        rm = sfv_remote_mr_make(sfv_lease_remote(last).addr, 65, sfv_lease_remote(last).rkey);
        CHECK_RESULT(put(&b, 0, rm, 65, 'y', &wc), SFV_ERR_WORK);
        CHECK_EQ(wc.status, SFV_WC_REM_ACCESS_ERR);
        CHECK(a.buf[BUF - 64] == 'l');
    }
    /* a broken channel grants nothing */
    CHECK_RESULT(sfv_lease_grant(b.ch[0], b.mr, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_BROKEN);
    CHECK_OK(sfv_lease_revoke(first));
    CHECK_OK(sfv_lease_revoke(last));
    side_close(&a);
    side_close(&b);
}

/* A lease outlives its channel (its rkey is then dead); the MR cannot be deregistered while a
   lease on it lives, and can after the revoke. */
static void t_outlives_channel(void) {
    side a, b;
    sfv_lease *l;
    sfv_remote_mr rm;
    sfv_work_completion wc;
    pairs_open(&a, &b);
    need_mw(&a);
    CHECK_OK(sfv_lease_grant(a.ch[0], a.mr, 100, 100, SFV_ACCESS_REMOTE_WRITE, &l));
    rm = sfv_lease_remote(l);
    CHECK_OK(put(&b, 0, rm, 100, 'o', &wc));
    CHECK_OK(sfv_destroy_channel(a.ch[0]));
    a.ch[0] = NULL;
    CHECK_RESULT(sfv_dereg_mr(a.mr), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "lease") != NULL);
    CHECK_EQ(sfv_last_error()->errnum, EBUSY);
    /* b's other channel reaches a.ch[1] (same PD and MR): the window is not bound to it */
    CHECK_RESULT(put(&b, 1, rm, 100, 'X', &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_REM_ACCESS_ERR);
    CHECK(a.buf[100] == 'o' && a.buf[199] == 'o');
    CHECK_OK(sfv_lease_revoke(l));
    side_close(&a); /* the dereg works now */
    side_close(&b);
}

static const harness_test TESTS[] = {
    TEST(t_write_revoke_write, 60),
    TEST(t_other_channel_refused, 60),
    TEST(t_bounds_and_refusals, 60),
    TEST(t_outlives_channel, 60),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
