/* test_rev31d.c - hostile review 31d on the fake NIC: leases and atomics (second look). Each
   test failed on the header before its fix. */
#include "fake_env.h"

/* A grant whose bind fails "leaves nothing" (>>leases: every failure an sfv_result, no leak;
   the window is freed unless its bind is still in flight). A bind that completed with an error
   was taken for one still in flight whenever any other work of the channel was (receives posted
   ahead, whose flushes come after the bind's failure): the window was never deallocated, and the
   PD holding it could not be freed. Input: 20 receives posted, the bind fails (MW_BIND_ERR). */
static void t_failed_bind_frees_window(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_mr *m;
    sfv_lease *l = (sfv_lease *)1;
    sfv_pending rx[20];
    sfv_scatter_element s;
    size_t i;
    fk_set_mw(true);
    tf_open(&e, 8192);
    memset(&d, 0, sizeof d);
    d.max_recv_wr = 32;
    tf_pair(&e, &d, &a, &b);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf + 4096, 4096, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_MW_BIND, &m));
    for (i = 0; i < COUNT_OF(rx); i++) {
        s = sfv_mr_scatter_element(e.mr, e.buf + 64 * i, 64);
        CHECK_OK(sfv_channel_post_receive(a, &s, 1, &rx[i]));
    }
    fk_set_bind_fail(1);
    CHECK_RESULT(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_WORK);
    CHECK(l == NULL);
    CHECK(strstr(sfv_last_error()->message, "MW_BIND_ERR") != NULL);
    CHECK_EQ(fk_mw_count(), 0); /* the bind is over: its window went */
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dereg_mr(m));
    CHECK_EQ(fk_mw_count(), 0);
    tf_close(&e);
    fk_set_mw(false);
}

/* >>leases: "its writes, reads or atomics there work until sfv_lease_revoke". A lease of an
   access the channel's desc.access leaves out (REMOTE_ATOMIC, which the default leaves out) was
   granted, and every peer atomic through it failed with a remote error: the queue pair checks its
   own access enables whatever the key. Now refused before any verb (SFV_ERR_INVALID naming
   desc.access, no window allocated); with the access in desc.access the atomic works. */
static void t_lease_access_beyond_channel(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_mr *m;
    sfv_lease *l = (sfv_lease *)1;
    sfv_scatter_element old;
    uint64_t v = 41, got = 0;
    fk_set_mw(true);
    tf_open(&e, 8192);
    tf_pair(&e, NULL, &a, &b); /* the default access: no REMOTE_ATOMIC */
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf + 4096, 4096, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_MW_BIND, &m));
    CHECK_RESULT(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_ATOMIC, &l), SFV_ERR_INVALID);
    CHECK(l == NULL);
    CHECK_MSG("desc.access");
    CHECK_EQ(fk_mw_count(), 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    memset(&d, 0, sizeof d);
    d.access = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_ATOMIC;
    tf_pair(&e, &d, &a, &b);
    CHECK_RESULT(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_ATOMIC, &l), SFV_ERR_INVALID);
    CHECK_OK(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_ATOMIC, &l));
    memcpy(e.buf + 4096, &v, 8);
    old = sfv_mr_scatter_element(e.mr, e.buf, 8);
    CHECK_OK(sfv_channel_fetch_add(b, &old, sfv_lease_remote(l), 1, NULL));
    memcpy(&got, e.buf, 8);
    memcpy(&v, e.buf + 4096, 8);
    CHECK(got == 41 && v == 42);
    CHECK_OK(sfv_lease_revoke(l));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dereg_mr(m));
    tf_close(&e);
    fk_set_mw(false);
}

static const harness_test TESTS[] = {
    TEST(t_lease_access_beyond_channel, 10),
    TEST(t_failed_bind_frees_window, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
