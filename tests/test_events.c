/* test_events.c - the device's asynchronous events on rxe (>>events): a link taken down under a
   receive that waits with nothing in flight wakes it within about 100 ms (busy and event wait
   modes), through PORT_ERR; the port's return (PORT_ACTIVE) is seen; the event fd is readable
   while events wait and quiet after they are taken; a channel broken so refuses posts and says
   why; destroy does not hang on events; sfv_channel_reset recovers a broken channel and
   reconnects to a peer that restarted; rxe0 deleted under a wait: the wait ends at its deadline
   and everything closes (rxe sends no event). The link tests take the guest's sva link (rxe0) down and
   bring it back (as test_channel.c's last test does); they run only in the test guest. */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "../safeverbs.h"
#include "harness.h"

#include <poll.h>
#include <pthread.h>
#include <stdint.h>

#include "pair.h"

/* The link back up, both ports ACTIVE with their IPv4 GIDs, and the guest's policy routes
   (tests/vm/run.sh) back in place should the kernel have dropped them with the link. */
static void routes_restore(void) {
    CHECK(system("ip route replace 192.0.2.2 dev sva src 192.0.2.1 table 101 2>/dev/null; "
                 "ip route replace 192.0.2.1 dev svb src 192.0.2.2 table 102 2>/dev/null; true") == 0);
}
static void link_restore(void) {
    CHECK(system("ip link set sva up") == 0);
    CHECK(port_state_is(test_device(0), "ACTIVE", 20) && port_state_is(test_device(1), "ACTIVE", 20));
    CHECK(gid1_present(test_device(0), 20) && gid1_present(test_device(1), 20));
    routes_restore();
}

/* A command run on a thread after a pause (the link taken down, a device deleted), noting when it
   began and when it returned, and its status. */
typedef struct later {
    const char *cmd;
    unsigned delay_ms;
    double began, ended;
    int rc;
} later;
static void *run_later(void *arg) {
    later *d = (later *)arg;
    usleep(d->delay_ms * 1000u);
    d->began = test_seconds();
    d->rc = system(d->cmd);
    d->ended = test_seconds();
    return NULL;
}
static void start_later(pthread_t *t, later *d, const char *cmd) {
    memset(d, 0, sizeof *d);
    d->cmd = cmd;
    d->delay_ms = 300;
    CHECK(pthread_create(t, NULL, run_later, d) == 0);
}

/* Takes up to `seconds` to see an event of `type` on port 1 among ctx's events; counts what it drained. */
static int saw_event(sfv_context *ctx, sfv_event_type type, double seconds, sfv_event *found) {
    double end = test_seconds() + seconds;
    do {
        sfv_event ev[8];
        size_t n = 0, i;
        CHECK_OK(sfv_context_events(ctx, ev, 8, &n));
        for (i = 0; i < n; i++) {
            printf("    event %s port %u, %u channel(s) broken\n", sfv_event_type_str(ev[i].type), (unsigned)ev[i].port,
                   (unsigned)ev[i].channels_broken);
            if (ev[i].type == type) {
                if (found) *found = ev[i];
                return 1;
            }
        }
        if (!n) usleep(20000);
    } while (test_seconds() < end);
    return 0;
}

/* A channel an event broke says which, and refuses a post with a message that names it. */
static void refuses_naming(side *s, sfv_event_type type) {
    sfv_event_type by = SFV_EVENT_OTHER;
    sfv_gather_element g = sfv_mr_gather_element(s->mr, s->buf, 8);
    sfv_work_completion wc;
    CHECK(sfv_channel_broken(s->ch, &by));
    CHECK_EQ(by, type);
    CHECK_RESULT(sfv_channel_send(s->ch, &g, 1, &wc), SFV_ERR_BROKEN);
    if (!strstr(sfv_last_error()->message, sfv_event_type_str(type))) FAIL("post refused with: %s", sfv_last_error()->message);
}

static int fd_readable(int fd) {
    struct pollfd p;
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* A receive waits with nothing in flight on the other side; the link goes down under it. The
   wait returns within about 100 ms of the event (not at its 10 s deadline), with the flush of a
   port that went down; the channel says which event broke it and refuses posts. */
static void port_down_wakes_receive(sfv_wait_mode mode) {
    side a, b;
    sfv_channel_desc d;
    sfv_scatter_element e;
    sfv_work_completion wc;
    sfv_event ev;
    sfv_result r;
    pthread_t t;
    later dn;
    double t0, t1;
    int efd = -1;
    char msg[sizeof sfv_last_error()->message];
    if (!getenv("SAFEVERBS_IN_VM")) SKIP("takes the guest's sva link down; runs only in the test guest");
    memset(&d, 0, sizeof d);
    d.wait_mode = mode;
    d.timeout_ms = 10000;
    pair_open(&a, &b, &d, &d, SFV_ACCESS_LOCAL_WRITE);
    CHECK_OK(sfv_context_event_fd(a.ctx, &efd));
    CHECK(efd >= 0);
    CHECK(!fd_readable(efd));
    start_later(&t, &dn, "ip link set sva down");
    e = sfv_mr_scatter_element(a.mr, a.buf, 64);
    t0 = test_seconds();
    r = sfv_channel_receive(a.ch, &e, 1, &wc);
    t1 = test_seconds();
    snprintf(msg, sizeof msg, "%s", sfv_last_error()->message);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_EQ(dn.rc, 0);
    printf("    %s wait: returned %.0f ms after `ip link set sva down` began (%.0f ms after it returned), %.2f s into the wait "
           "(deadline 10 s): %s, %s, class %s\n", mode == SFV_WAIT_EVENT ? "event" : "busy", (t1 - dn.began) * 1e3,
           (t1 - dn.ended) * 1e3, t1 - t0, sfv_result_str(r), sfv_wc_status_str(wc.status), sfv_work_error_class_str(wc.error_class));
    CHECK_RESULT(r, SFV_ERR_WORK);
    CHECK(t1 - dn.began < 2.0); /* about 0.1 s expected; generous for the emulation */
    CHECK(t1 - t0 < 5.0);       /* well before the 10 s deadline */
    CHECK(wc.status == SFV_WC_WR_FLUSH_ERR || wc.status == SFV_WC_LOC_QP_OP_ERR);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_LOCAL_RESOURCE);
    if (!strstr(msg, "went down")) FAIL("last error: %s", msg);
    refuses_naming(&a, SFV_EVENT_PORT_ERR); /* the channel refuses new work and names the event */
    /* the wait read the event; it waits in the context's queue, and the event fd says so */
    CHECK(fd_readable(efd));
    CHECK(saw_event(a.ctx, SFV_EVENT_PORT_ERR, 1, &ev));
    CHECK_EQ(ev.port, 1);
    CHECK_EQ(ev.channels_broken, 1);
    link_restore();
    CHECK(saw_event(a.ctx, SFV_EVENT_PORT_ACTIVE, 10, &ev));
    CHECK_EQ(ev.port, 1);
    {   /* everything taken: the fd is quiet again */
        sfv_event rest[8];
        size_t n = 0;
        CHECK_OK(sfv_context_events(a.ctx, rest, 8, &n));
        CHECK(!fd_readable(efd));
    }
    /* destroy with the events read and acked: no hang (the harness's alarm would say so) */
    side_close(&a);
    side_close(&b);
}
static void t_port_down_wakes_busy_receive(void) { port_down_wakes_receive(SFV_WAIT_BUSY); }
static void t_port_down_wakes_event_receive(void) { port_down_wakes_receive(SFV_WAIT_EVENT); }

/* Events nobody took do not hold a destroy up: the link flaps with channels open on both
   devices and nothing waiting; everything is destroyed without reading a single event. A new
   channel after the link is back works. */
static void t_destroy_with_events_untaken(void) {
    side a, b;
    sfv_channel_desc d;
    sfv_scatter_element e;
    sfv_gather_element g;
    sfv_pending rx;
    if (!getenv("SAFEVERBS_IN_VM")) SKIP("takes the guest's sva link down; runs only in the test guest");
    memset(&d, 0, sizeof d);
    pair_open(&a, &b, &d, &d, SFV_ACCESS_LOCAL_WRITE);
    CHECK(system("ip link set sva down") == 0);
    CHECK(port_state_is(test_device(0), "DOWN", 10));
    link_restore();
    side_close(&a);
    side_close(&b);
    /* and the devices carry traffic again */
    pair_open(&a, &b, &d, &d, SFV_ACCESS_LOCAL_WRITE);
    e = sfv_mr_scatter_element(b.mr, b.buf, 8);
    g = sfv_mr_gather_element(a.mr, a.buf, 8);
    memcpy(a.buf, "events!", 8);
    CHECK_OK(sfv_channel_post_receive(b.ch, &e, 1, &rx));
    CHECK_OK(sfv_channel_send(a.ch, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    CHECK(memcmp(b.buf, "events!", 8) == 0);
    side_close(&a);
    side_close(&b);
}

static void exchange(sfv_channel *a, sfv_channel *b, uint32_t *qpn_a) {
    sfv_endpoint ea, eb;
    CHECK_OK(sfv_channel_endpoint(a, &ea));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK_OK(sfv_channel_handshake(a, &eb));
    CHECK_OK(sfv_channel_handshake(b, &ea));
    if (qpn_a) *qpn_a = ea.qpn;
}
static void traffic(side *from, side *to, const char *msg) {
    sfv_scatter_element e = sfv_mr_scatter_element(to->mr, to->buf + 256, 16);
    sfv_gather_element g = sfv_mr_gather_element(from->mr, from->buf + 512, 16);
    sfv_pending rx;
    snprintf(from->buf + 512, 16, "%s", msg);
    CHECK_OK(sfv_channel_post_receive(to->ch, &e, 1, &rx));
    CHECK_OK(sfv_channel_send(from->ch, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    CHECK(strcmp(to->buf + 256, msg) == 0);
}

/* sfv_channel_reset: a channel broken by a remote access error (its receive in flight reports
   the flush) is reset on both sides and connected again, with new QP numbers; then the peer
   "restarts" (a new channel) and the surviving side resets and connects to it. */
static void t_reset_recovers(void) {
    side a, b;
    sfv_channel_desc d;
    sfv_scatter_element e;
    sfv_gather_element g;
    sfv_work_completion wc;
    sfv_remote_mr bogus;
    sfv_pending rx;
    uint32_t qpn0, qpn1, qpn2;
    memset(&d, 0, sizeof d);
    a = side_open(test_device(0), &d, SFV_ACCESS_LOCAL_WRITE);
    b = side_open(test_device(1), &d, SFV_ACCESS_LOCAL_WRITE);
    exchange(a.ch, b.ch, &qpn0);
    traffic(&a, &b, "before");
    e = sfv_mr_scatter_element(a.mr, a.buf + 1024, 16);
    CHECK_OK(sfv_channel_post_receive(a.ch, &e, 1, &rx));
    bogus = sfv_mr_remote(b.mr);
    bogus.rkey ^= 0x5a5a00;
    g = sfv_mr_gather_element(a.mr, a.buf, 8);
    CHECK_RESULT(sfv_channel_write(a.ch, &g, 1, bogus, &wc), SFV_ERR_WORK);
    CHECK(sfv_channel_broken(a.ch, NULL));
    CHECK_OK(sfv_channel_reset(a.ch));
    CHECK(!sfv_channel_broken(a.ch, NULL));
    CHECK_RESULT(sfv_pending_wait(&rx, -1, &wc), SFV_ERR_WORK); /* the receive in flight: flushed */
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    CHECK_RESULT(sfv_channel_send(a.ch, &g, 1, NULL), SFV_ERR_INVALID); /* not connected yet */
    CHECK_OK(sfv_channel_reset(b.ch)); /* the responder's QP went to the error state too */
    exchange(a.ch, b.ch, &qpn1);
    CHECK(qpn1 != qpn0);
    traffic(&a, &b, "after reset");
    traffic(&b, &a, "and back");
    /* the peer restarts: a new channel on b's side; a resets and connects to it */
    CHECK_OK(sfv_destroy_channel(b.ch));
    CHECK_OK(sfv_create_channel(b.pd, &d, &b.ch));
    CHECK_OK(sfv_channel_reset(a.ch));
    exchange(a.ch, b.ch, &qpn2);
    CHECK(qpn2 != qpn1);
    traffic(&a, &b, "new peer");
    CHECK_RESULT(sfv_channel_reset(NULL), SFV_ERR_INVALID);
    printf("    QP numbers 0x%x -> 0x%x -> 0x%x\n", (unsigned)qpn0, (unsigned)qpn1, (unsigned)qpn2);
    side_close(&a);
    side_close(&b);
}

/* rxe's device deleted (`rdma link delete`) under a receive that waits (deadline 10 s). rxe cannot
   let go of a process's queues (no disassociate): the kernel sends no event and holds the delete
   until the process closes the device. safeverbs sees the device's uverbs node leave sysfs and
   acts as on DEVICE_FATAL (>>events): the wait ends within about a second of the delete (not at
   its deadline), with the flush (class FATAL, "deleted" in the hint); the channel says
   DEVICE_FATAL broke it and refuses posts; the event is queued. Everything is then destroyed and
   closed without error (which lets the delete finish), and rxe0 and rxe1 come back in their
   order for the tests after this one. Measured on 6.1 and 6.12: the same. */
static void devices_restore(void) {
    /* rxe1 goes too, so that both come back in their order (a device list lists rxe0 first) */
    CHECK(system("rdma link delete rxe1") == 0);
    CHECK(system("rdma link add rxe0 type rxe netdev sva && rdma link add rxe1 type rxe netdev svb") == 0);
    CHECK(port_state_is("rxe0", "ACTIVE", 20) && port_state_is("rxe1", "ACTIVE", 20));
    CHECK(gid1_present("rxe0", 20) && gid1_present("rxe1", 20));
    routes_restore();
}
static void device_deleted_under_wait(sfv_wait_mode mode) {
    side a, b;
    sfv_channel_desc d;
    sfv_scatter_element e;
    sfv_work_completion wc;
    sfv_device_list *list;
    sfv_event ev;
    sfv_result r;
    pthread_t t;
    later dl;
    char msg[sizeof sfv_last_error()->message];
    double t0, t1;
    if (!getenv("SAFEVERBS_IN_VM")) SKIP("deletes the guest's rxe0; runs only in the test guest");
    if (strcmp(test_device(0), "rxe0") || strcmp(test_device(1), "rxe1")) SKIP("the guest's rxe0 and rxe1 only");
    memset(&d, 0, sizeof d);
    d.wait_mode = mode;
    d.timeout_ms = 10000;
    pair_open(&a, &b, &d, &d, SFV_ACCESS_LOCAL_WRITE);
    start_later(&t, &dl, "rdma link delete rxe0");
    e = sfv_mr_scatter_element(a.mr, a.buf, 64);
    t0 = test_seconds();
    r = sfv_channel_receive(a.ch, &e, 1, &wc);
    t1 = test_seconds();
    snprintf(msg, sizeof msg, "%s", sfv_last_error()->message);
    printf("    %s wait: %s %.2f s after the delete began (deadline 10 s): %s\n", mode == SFV_WAIT_EVENT ? "Event" : "Busy",
           sfv_result_str(r), t1 - dl.began, msg);
    CHECK_RESULT(r, SFV_ERR_WORK);
    CHECK(t1 - t0 < 5.0); /* well before its deadline, and before the delete's end (which waits for the close below) */
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_FATAL);
    if (!strstr(msg, "deleted")) FAIL("last error: %s", msg);
    refuses_naming(&a, SFV_EVENT_DEVICE_FATAL); /* the channel is stopped and says why */
    CHECK(saw_event(a.ctx, SFV_EVENT_DEVICE_FATAL, 1, &ev));
    CHECK_EQ(ev.channels_broken, 1);
    side_close(&a); /* every destroy and the close succeed (side_close checks), and the delete can end */
    CHECK(pthread_join(t, NULL) == 0);
    printf("    rdma link delete rxe0: exit %d, %.2f s (done %.2f s after the wait ended)\n", dl.rc, dl.ended - dl.began, dl.ended - t1);
    CHECK_EQ(dl.rc, 0);
    side_close(&b);
    /* a device list made now does not name rxe0 */
    CHECK_OK(sfv_get_device_list(&list));
    for (size_t i = 0; i < sfv_device_list_len(list); i++) CHECK(strcmp(sfv_device_list_name(list, i), "rxe0") != 0);
    sfv_free_device_list(list);
    devices_restore();
    /* and the devices carry traffic again */
    memset(&d, 0, sizeof d);
    pair_open(&a, &b, &d, &d, SFV_ACCESS_LOCAL_WRITE);
    traffic(&a, &b, "rxe0 is back");
    side_close(&a);
    side_close(&b);
}
static void t_device_deleted_under_busy_wait(void) { device_deleted_under_wait(SFV_WAIT_BUSY); }
static void t_device_deleted_under_event_wait(void) { device_deleted_under_wait(SFV_WAIT_EVENT); }

/* The calls' refusals: NULL arguments. */
static void t_event_calls_refuse_null(void) {
    sfv_context *ctx;
    sfv_event ev;
    size_t n = 5;
    int fd = 7;
    CHECK_RESULT(sfv_context_events(NULL, &ev, 1, &n), SFV_ERR_INVALID);
    CHECK_EQ(n, 0);
    CHECK_RESULT(sfv_context_event_fd(NULL, &fd), SFV_ERR_INVALID);
    CHECK_EQ(fd, -1);
    CHECK_OK(sfv_open_device(test_device(0), &ctx));
    CHECK_RESULT(sfv_context_events(ctx, NULL, 1, &n), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_context_events(ctx, &ev, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_context_event_fd(ctx, NULL), SFV_ERR_INVALID);
    CHECK_OK(sfv_context_events(ctx, NULL, 0, &n));
    CHECK_EQ(n, 0);
    CHECK(sfv_channel_broken(NULL, NULL));
    CHECK(strcmp(sfv_event_type_str(SFV_EVENT_PORT_ERR), "PORT_ERR") == 0);
    CHECK(strcmp(sfv_event_type_str((sfv_event_type)999), "UNKNOWN") == 0);
    CHECK_OK(sfv_close_device(ctx));
}

static const harness_test TESTS[] = {
    TEST(t_event_calls_refuse_null, 20),
    TEST(t_reset_recovers, 60),
    TEST(t_port_down_wakes_busy_receive, 90),
    TEST(t_port_down_wakes_event_receive, 90),
    TEST(t_destroy_with_events_untaken, 90),
    TEST(t_device_deleted_under_busy_wait, 90),
    TEST(t_device_deleted_under_event_wait, 90),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
