/* test_rev37d.c - hostile review 37d on the fake NIC: recovery (>>events: the device's async
   events, a device deleted while open, sfv_context_events, sfv_channel_reset). Each test failed
   on the header before its fix. */
#include "fake_env.h"

/* A file standing in for fake0's uverbs node (ibv_device.dev_path), there at open. */
static void rv_node(char *path) {
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    fk_set_dev_path(path);
}
static size_t rv_count(const sfv_event *ev, size_t n, sfv_event_type t) {
    size_t i, k = 0;
    for (i = 0; i < n; i++) k += ev[i].type == t;
    return k;
}

/* Promise (>>events, a device deleted while open): its node gone "acts as on DEVICE_FATAL (the
   event is queued as one; none where the device sent its own)". Input: the order the kernel
   takes for a NIC with disassociate (ib_uverbs_remove_one: cdev_device_del removes the uverbs
   node first, then ib_uverbs_free_hw_resources sends each process DEVICE_FATAL, one process after
   another), with a read of the events between the two (a busy wait's 10 ms tick, a timer's
   sfv_context_events). The probe queued its DEVICE_FATAL, and the device's own one was queued
   too: two DEVICE_FATALs for one deletion, the second saying it broke nothing. (The other order,
   the event first, was one already: test_review's t_device_fatal_then_node_gone.) */
static void t_node_gone_then_device_fatal(void) {
    char path[] = "/tmp/sfv_r37d_uverbsXXXXXX";
    tf_env e;
    sfv_channel *a;
    sfv_event ev[8];
    size_t n = 0, fatal = 0;
    rv_node(path);
    tf_open(&e, 4096);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    CHECK(unlink(path) == 0); /* the node goes first */
    CHECK_OK(sfv_context_events(e.ctx, ev, 8, &n));
    fatal += rv_count(ev, n, SFV_EVENT_DEVICE_FATAL);
    CHECK_EQ(fatal, 1); /* the deletion, seen */
    CHECK(sfv_channel_broken(a, NULL));
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_DEVICE_FATAL, NULL, 0); /* then the device's own */
    CHECK_OK(sfv_context_events(e.ctx, ev, 8, &n));
    fatal += rv_count(ev, n, SFV_EVENT_DEVICE_FATAL);
    if (fatal != 1) FAIL("one deletion, %zu DEVICE_FATAL events queued", fatal);
    CHECK_EQ(fk_async_unacked(), 0); /* read and acked all the same */
    CHECK_OK(sfv_destroy_channel(a));
    tf_close(&e);
    fk_set_dev_path(NULL);
}
/* The same through a twin (a second sfv_context over the verbs context): each saw the deletion
   itself, and the device's DEVICE_FATAL, read through one and handed to the other, was queued
   on both a second time. */
static void t_node_gone_then_device_fatal_twin(void) {
    char path[] = "/tmp/sfv_r37d_uverbsXXXXXX";
    tf_env e;
    sfv_context *tw;
    sfv_event ev[8];
    size_t n = 0, fatal_e = 0, fatal_tw = 0;
    rv_node(path);
    tf_open(&e, 4096);
    CHECK_OK(sfv_context_wrap(sfv_context_raw(e.ctx), false, &tw));
    CHECK(unlink(path) == 0);
    CHECK_OK(sfv_context_events(e.ctx, ev, 8, &n));
    fatal_e += rv_count(ev, n, SFV_EVENT_DEVICE_FATAL);
    CHECK_OK(sfv_context_events(tw, ev, 8, &n));
    fatal_tw += rv_count(ev, n, SFV_EVENT_DEVICE_FATAL);
    CHECK(fatal_e == 1 && fatal_tw == 1); /* each saw it */
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_DEVICE_FATAL, NULL, 0);
    CHECK_OK(sfv_context_events(e.ctx, ev, 8, &n)); /* read here, handed to the twin */
    fatal_e += rv_count(ev, n, SFV_EVENT_DEVICE_FATAL);
    CHECK_OK(sfv_context_events(tw, ev, 8, &n));
    fatal_tw += rv_count(ev, n, SFV_EVENT_DEVICE_FATAL);
    if (fatal_e != 1 || fatal_tw != 1) FAIL("one deletion, %zu and %zu DEVICE_FATAL events queued on the two contexts", fatal_e, fatal_tw);
    CHECK_OK(sfv_close_device(tw));
    tf_close(&e);
    fk_set_dev_path(NULL);
}

static const harness_test TESTS[] = {
    TEST(t_node_gone_then_device_fatal, 20),
    TEST(t_node_gone_then_device_fatal_twin, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
