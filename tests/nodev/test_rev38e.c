/* test_rev38e.c - a node's barrier that waits for a rank whose channel a device event broke (the
   port down, the queue pair failed): it waited to its deadline and said SFV_ERR_TIMEOUT ("rank 1
   did not reach the barrier in time"), as if the rank were slow, though no write of that rank
   could come any more (review 38c's suspicion). Now the wait reads the device's events as a busy
   wait does, every 10 ms, and ends with SFV_ERR_BROKEN naming the rank and why. On the fake NIC. */
#include "fake_env.h"

static void t_barrier_sees_port_down(void) {
    tf_env e;
    sfv_node_desc d;
    sfv_node *nodes[2];
    double t0;
    fk_reset();
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    tf_node_pair(&e, &d, nodes);
    /* the port goes down (its event unread) before rank 0's barrier, and rank 1 never comes */
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_PORT_ERR, NULL, 1);
    t0 = test_seconds();
    CHECK_RESULT(sfv_node_barrier(nodes[0], NULL, 0, 3000), SFV_ERR_BROKEN); /* (was: SFV_ERR_TIMEOUT after 3 s) */
    CHECK(test_seconds() - t0 < 1.0);
    CHECK_MSG("rank 1");
    CHECK_RESULT(sfv_node_barrier(nodes[0], NULL, 0, 100), SFV_ERR_BROKEN); /* half done: poisoned */
    CHECK_OK(sfv_destroy_node(nodes[0]));
    CHECK_OK(sfv_destroy_node(nodes[1]));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_barrier_sees_port_down, 20),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
