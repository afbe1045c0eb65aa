/* test_review20c.c - review of b4c4328 on the fake NIC: a device deleted while open (its uverbs
   node gone, sfv__device_probe) and a channel kept by a destroy that its SRQ's last reference
   refused. Each test failed on the header before its fix. */
#define _GNU_SOURCE
#include "fake_verbs.h"
#define SFV_MALLOC(sz) fk_malloc(sz)
#define SFV_CALLOC(n, sz) fk_calloc(n, sz)
#define SFV_FREE(p) fk_free(p)
#define SFV__ABORT_DRAIN_NS 300000000ull
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "harness.h"

#include <fcntl.h>
#include <sys/stat.h>

typedef struct tr_env {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    unsigned char *buf;
    size_t len;
} tr_env;

static void tr_open(tr_env *e, size_t len) {
    memset(e, 0, sizeof *e);
    e->len = len;
    e->buf = (unsigned char *)calloc(1, len);
    CHECK(e->buf);
    CHECK_OK(sfv_open_device(NULL, &e->ctx));
    CHECK_OK(sfv_alloc_pd(e->ctx, &e->pd));
    CHECK_OK(sfv_reg_mr_shared(e->pd, e->buf, len, &e->mr));
}
static void tr_close(tr_env *e) {
    sfv_dereg_mr(e->mr);
    sfv_dealloc_pd(e->pd);
    sfv_close_device(e->ctx);
    free(e->buf);
    CHECK_EQ(fk_live_total(), 0);
}
static void tr_connect(sfv_channel *a, sfv_channel *b) {
    sfv_endpoint ea, eb;
    CHECK_OK(sfv_channel_endpoint(a, &ea));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK_OK(sfv_channel_handshake(b, &ea));
    if (a != b) CHECK_OK(sfv_channel_handshake(a, &eb));
}
/* A file standing in for fake0's uverbs node, there at open. */
static void tr_node(char *path) {
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    fk_set_dev_path(path);
}
static size_t tr_count(const sfv_event *ev, size_t n, sfv_event_type t) {
    size_t i, k = 0;
    for (i = 0; i < n; i++) k += ev[i].type == t;
    return k;
}

/* A destroy that the SRQ's last reference refused keeps the channel "valid" (>>channel), its QP,
   CQ and completion channel gone. A reset of it, documented to recover a broken channel, drained
   its CQ: ibv_poll_cq(NULL), a crash. It is refused now (destroy it again), and the destroy's
   retry still frees everything. */
static void t_reset_after_srq_refused_destroy(void) {
    tr_env e;
    sfv_srq *srq;
    sfv_channel *a;
    sfv_channel_desc d;
    sfv_pending rx;
    sfv_scatter_element s;
    tr_open(&e, 4096);
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_create_srq(e.pd, NULL, &srq));
    memset(&d, 0, sizeof d);
    d.srq = srq;
    CHECK_OK(sfv_create_channel(e.pd, &d, &a));
    CHECK_OK(sfv_srq_post_receive(srq, &s, 1, &rx));
    CHECK_OK(sfv_destroy_srq(srq)); /* the channel holds the last reference */
    fk_fail_name("ibv_destroy_srq", 1);
    CHECK_RESULT(sfv_destroy_channel(a), SFV_ERR_DRIVER);
    fk_fail_name("ibv_destroy_srq", 0);
    CHECK(sfv_channel_broken(a, NULL));
    CHECK_RESULT(sfv_channel_reset(a), SFV_ERR_BROKEN);
    CHECK(sfv_channel_broken(a, NULL));
    CHECK_OK(sfv_destroy_channel(a));
    tr_close(&e);
}

/* The same for a destroy refused by ibv_destroy_comp_channel (event mode): its CQ is gone, and
   sfv_channel_arm (the channel still has a completion channel) armed ibv_req_notify_cq(NULL). */
static void t_arm_after_cc_refused_destroy(void) {
    tr_env e;
    sfv_channel *a;
    sfv_channel_desc d;
    tr_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.wait_mode = SFV_WAIT_EVENT;
    CHECK_OK(sfv_create_channel(e.pd, &d, &a));
    fk_fail_name("ibv_destroy_comp_channel", 1);
    CHECK_RESULT(sfv_destroy_channel(a), SFV_ERR_DRIVER);
    fk_fail_name("ibv_destroy_comp_channel", 0);
    CHECK_RESULT(sfv_channel_arm(a), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_reset(a), SFV_ERR_BROKEN);
    CHECK_OK(sfv_destroy_channel(a));
    tr_close(&e);
}

/* A channel made after the deletion was noticed (on rxe its verbs still work: the kernel keeps
   the device until the process closes it) was never broken: the probe had fired, once, and a
   receive on it waited to its deadline (the TIMEOUT this change was to end). Now it is broken at
   once, as a channel on the context when a DEVICE_FATAL is read. */
static void t_channel_made_after_deletion(void) {
    char path[] = "/tmp/sfv_r20c_uverbsXXXXXX";
    tr_env e;
    sfv_channel *a, *b;
    sfv_pending rx;
    sfv_work_completion wc;
    sfv_scatter_element in;
    sfv_event ev[8];
    sfv_event_type by = SFV_EVENT_OTHER;
    size_t n = 0;
    sfv_result r;
    double t0;
    tr_node(path);
    tr_open(&e, 4096);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    CHECK(unlink(path) == 0);
    CHECK_OK(sfv_context_events(e.ctx, ev, 8, &n)); /* noticed here: a is broken */
    CHECK_EQ(tr_count(ev, n, SFV_EVENT_DEVICE_FATAL), 1);
    CHECK(sfv_channel_broken(a, NULL));
    r = sfv_create_channel(e.pd, NULL, &b); /* refused, or made broken */
    if (r == SFV_OK) {
        sfv_endpoint eb;
        CHECK_OK(sfv_channel_endpoint(b, &eb));
        if (sfv_channel_handshake(b, &eb) == SFV_OK) { /* nothing broke it: a receive waits */
            in = sfv_mr_scatter_element(e.mr, e.buf, 32);
            t0 = test_seconds();
            CHECK_OK(sfv_channel_post_receive(b, &in, 1, &rx));
            r = sfv_pending_wait(&rx, 1500, &wc);
            if (r == SFV_ERR_TIMEOUT) FAIL("a receive on a channel made after the deletion waited %.2f s to its deadline", test_seconds() - t0);
            CHECK_EQ(r, SFV_ERR_WORK);
            CHECK_EQ(wc.error_class, SFV_WORK_ERROR_FATAL);
        }
        CHECK(sfv_channel_broken(b, &by));
        CHECK_EQ(by, SFV_EVENT_DEVICE_FATAL);
        CHECK_OK(sfv_destroy_channel(b));
    }
    CHECK_OK(sfv_destroy_channel(a));
    tr_close(&e);
    fk_set_dev_path(NULL);
}

/* A NIC with disassociate sends DEVICE_FATAL and then its uverbs node goes: one deletion, one
   DEVICE_FATAL (>>events: "the event is queued as one"), not the device's and a second one made
   up by the probe (with its log line saying the device was deleted, 0 channels broken). */
static void t_device_fatal_then_node_gone(void) {
    char path[] = "/tmp/sfv_r20c_uverbsXXXXXX";
    tr_env e;
    sfv_channel *a;
    sfv_event ev[8];
    size_t n = 0, fatal = 0;
    tr_node(path);
    tr_open(&e, 4096);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_DEVICE_FATAL, NULL, 0);
    CHECK_OK(sfv_context_events(e.ctx, ev, 8, &n));
    fatal += tr_count(ev, n, SFV_EVENT_DEVICE_FATAL);
    CHECK(unlink(path) == 0); /* the kernel removes the node after the event */
    CHECK_OK(sfv_context_events(e.ctx, ev, 8, &n));
    fatal += tr_count(ev, n, SFV_EVENT_DEVICE_FATAL);
    CHECK_EQ(fatal, 1);
    CHECK_OK(sfv_destroy_channel(a));
    tr_close(&e);
    fk_set_dev_path(NULL);
}

/* The kernel frees a deleted device's uverbs number at once (ib_uverbs_remove_one: ida_free
   before it waits for the process), so a device registered meanwhile (rxe added again, another
   NIC) takes the same node, /sys/class/infiniband_verbs/uverbsN. Where the probe had not looked in
   between, the path was there again and the deletion was never seen: a receive waited to its
   deadline. The node is another one (another inode): that is the deletion too. */
static void t_node_taken_by_another_device(void) {
    char path[] = "/tmp/sfv_r20c_uverbsXXXXXX", other[] = "/tmp/sfv_r20c_otherXXXXXX";
    tr_env e;
    sfv_channel *a;
    sfv_pending rx;
    sfv_work_completion wc;
    sfv_scatter_element in;
    sfv_result r;
    int fd;
    double t0;
    tr_node(path);
    tr_open(&e, 4096);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    tr_connect(a, a);
    in = sfv_mr_scatter_element(e.mr, e.buf, 32);
    CHECK_OK(sfv_channel_post_receive(a, &in, 1, &rx));
    fd = mkstemp(other); /* made while the first is there: another inode */
    CHECK(fd >= 0);
    close(fd);
    CHECK(rename(other, path) == 0); /* the node deleted and another device's in its place */
    t0 = test_seconds();
    r = sfv_pending_wait(&rx, 1500, &wc);
    if (r == SFV_ERR_TIMEOUT) FAIL("the deletion was not seen: the receive waited %.2f s to its deadline", test_seconds() - t0);
    CHECK_EQ(r, SFV_ERR_WORK);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_FATAL);
    CHECK_OK(sfv_destroy_channel(a));
    tr_close(&e);
    unlink(path);
    fk_set_dev_path(NULL);
}

static const harness_test TESTS[] = {
    TEST(t_reset_after_srq_refused_destroy, 10),
    TEST(t_arm_after_cc_refused_destroy, 10),
    TEST(t_channel_made_after_deletion, 10),
    TEST(t_device_fatal_then_node_gone, 10),
    TEST(t_node_taken_by_another_device, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
