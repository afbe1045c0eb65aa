/* test_rev29d.c - from hostile review 29d (the header as a library: results, the last error,
   output parameters) on the fake NIC: each test failed on the header before its fix. */
#include "fake_env.h"

#include <stdlib.h>

/* >>node, sfv_launcher_rank: "Outputs 0 on failure", and ERRORS: fallible functions "set their
   out-parameters to NULL/zero on failure". A NULL rank was refused (SFV_ERR_INVALID) before
   world_size was zeroed: the caller's world size was left as it was, garbage included. */
static void t_launcher_rank_null_rank_zeroes_world(void) {
    size_t world = 77, rank = 77;
    unsetenv("OMPI_COMM_WORLD_RANK"); unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_RANK"); unsetenv("PMI_SIZE"); unsetenv("SLURM_PROCID"); unsetenv("SLURM_NTASKS");
    setenv("PMI_RANK", "1", 1); /* a launcher's pair that would succeed: only the NULL refuses */
    setenv("PMI_SIZE", "4", 1);
    CHECK_RESULT(sfv_launcher_rank(NULL, &world), SFV_ERR_INVALID);
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_INVALID);
    CHECK_EQ(world, 0);
    CHECK_RESULT(sfv_launcher_rank(&rank, NULL), SFV_ERR_INVALID); /* (the other way round: it held) */
    CHECK_EQ(rank, 0);
    rank = world = 77;
    CHECK_OK(sfv_launcher_rank(&rank, &world));
    CHECK_EQ(rank, 1);
    CHECK_EQ(world, 4);
}

/* A failed completion is never reported as a success (ERRORS): a provider's status past 255 (no
   ibv_wc_status is; a provider bug) was kept in one byte, and 256 read as IBV_WC_SUCCESS, so a
   send that failed said SFV_OK. The poll below plays such a provider: each send's completion
   comes back with status 256. Now it is a failure (IBV_WC_GENERAL_ERR). */
static int (*tr_real_poll)(struct ibv_cq *, int, struct ibv_wc *);
static unsigned tr_bad_status = 256;
static int tr_poll_status_256(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
    const int got = tr_real_poll(cq, n, wc);
    int i;
    for (i = 0; i < got; i++)
        if (wc[i].opcode == IBV_WC_SEND && wc[i].status == IBV_WC_SUCCESS) wc[i].status = (enum ibv_wc_status)tr_bad_status;
    return got;
}
/* (session 29) The same for a status in a byte but past the last one verbs defines (77): it was
   handed out as is, no value of sfv_wc_status, which C++ may not hold (undefined behaviour past
   the enum's range); now IBV_WC_GENERAL_ERR as well. */
static void tr_status_is_a_failure(unsigned status) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_pending rx;
    sfv_work_completion wc;
    struct ibv_context *raw;
    sfv_scatter_element s;
    sfv_gather_element g;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    s = sfv_mr_scatter_element(e.mr, e.buf, 8);
    g = sfv_mr_gather_element(e.mr, e.buf + 8, 8);
    raw = sfv_context_raw(e.ctx);
    tr_bad_status = status;
    tr_real_poll = raw->ops.poll_cq;
    raw->ops.poll_cq = tr_poll_status_256;
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_RESULT(sfv_channel_send(a, &g, 1, &wc), SFV_ERR_WORK);
    CHECK_EQ((int)wc.status, (int)SFV_WC_GENERAL_ERR);
    raw->ops.poll_cq = tr_real_poll;
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL)); /* (the receive was the peer's: it arrived) */
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}
static void t_status_past_255_is_a_failure(void) {
    tr_status_is_a_failure(256);
    tr_status_is_a_failure(77);
}

static const harness_test TESTS[] = {
    TEST(t_status_past_255_is_a_failure, 10),
    TEST(t_launcher_rank_null_rank_zeroes_world, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
