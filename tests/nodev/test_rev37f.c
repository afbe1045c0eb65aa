/* test_rev37f.c - session 27 on the fake NIC: a lease's window when a deadline destroys its
   channel's queue pair. Fails on the header before its fix. */
#include "fake_env.h"

/* Promise (>>leases: "a lease outlives its channel's queue pair: ... end the windows of its
   leases"; every wait has a deadline). The windows were ended on a destroy and a reset only: a
   deadline whose flush never finished (a NIC slow to flush) destroyed the queue pair with the
   window still bound to it, which rxe holds the destroy for (~50 s in ibv_destroy_qp on Linux
   6.1, review 37c). Now every destroy of the queue pair ends its leases' windows first: after
   the expired wait, no window is left, the lease is dead, and its revoke frees it. */
static void t_abort_ends_lease_windows(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_mr *m;
    sfv_lease *l = NULL;
    sfv_work_completion wc;
    sfv_scatter_element s;
    fk_set_mw(true);
    tf_open(&e, 8192);
    memset(&d, 0, sizeof d);
    d.timeout_ms = 50;
    tf_pair(&e, &d, &a, &b);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf, 4096, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_MW_BIND, &m));
    CHECK_OK(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l));
    CHECK_EQ(fk_mw_count(), 1);
    s = sfv_mr_scatter_element(e.mr, e.buf + 5000, 8);
    fk_set_no_flush(true); /* the deadline's flush never finishes: the QP is destroyed to stop the work */
    CHECK_RESULT(sfv_channel_receive(a, &s, 1, &wc), SFV_ERR_TIMEOUT); /* nothing is sent */
    CHECK(sfv_channel_raw_qp(a) == NULL); /* destroyed */
    CHECK_EQ(fk_mw_count(), 0); /* (before: 1, the window bound to the QP the destroy freed) */
    fk_set_no_flush(false);
    CHECK_OK(sfv_lease_revoke(l));
    CHECK_OK(sfv_dereg_mr(m));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_abort_ends_lease_windows, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
