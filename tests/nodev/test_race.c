/* test_race.c (device-free tier, also built with ThreadSanitizer: build/nodev/tsan/test_race):
   a channel's thread and another thread that reads the device's events (and breaks the channel
   by one) at the same time. The header promises that any thread may read a context's events and
   that the one that reads an event marks the channels it breaks while their own threads use
   them: under TSan a data race in that is a failure (halt_on_error), and on every build an
   event's break is never undone by a connect or a reset that ran beside it. */
#define _GNU_SOURCE
#include "fake_verbs.h"
#define SFV_MALLOC(sz) fk_malloc(sz)
#define SFV_CALLOC(n, sz) fk_calloc(n, sz)
#define SFV_FREE(p) fk_free(p)
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "harness.h"

#include <pthread.h>
#include <sched.h>

typedef struct rc_env {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    unsigned char buf[4096];
} rc_env;

static void rc_open(rc_env *e) {
    memset(e, 0, sizeof *e);
    CHECK_OK(sfv_open_device(NULL, &e->ctx));
    CHECK_OK(sfv_alloc_pd(e->ctx, &e->pd));
    CHECK_OK(sfv_reg_mr_shared(e->pd, e->buf, sizeof e->buf, &e->mr));
}
static void rc_close(rc_env *e) {
    sfv_dereg_mr(e->mr);
    sfv_dealloc_pd(e->pd);
    sfv_close_device(e->ctx);
    CHECK_EQ(fk_live_total(), 0);
}
static void rc_connect(sfv_channel *a, sfv_channel *b) {
    sfv_endpoint ea, eb;
    CHECK_OK(sfv_channel_endpoint(a, &ea));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK_OK(sfv_channel_handshake(b, &ea));
    CHECK_OK(sfv_channel_handshake(a, &eb));
}

/* The other thread: after `spin` yields, one PORT_ERR (port 1, every channel's) injected and read
   through sfv_context_events; it only reads the events it injected (the fake's event queue is
   one thread's). */
typedef struct rc_breaker {
    sfv_context *ctx;
    int spin;
    int go;                       /* (atomic) the thread may begin */
    uint32_t broken;              /* channels the event broke, as it said */
} rc_breaker;
static void *rc_break_run(void *arg) {
    rc_breaker *b = (rc_breaker *)arg;
    sfv_event ev[4];
    size_t n = 0;
    int i;
    while (!__atomic_load_n(&b->go, __ATOMIC_ACQUIRE)) sched_yield();
    for (i = 0; i < b->spin; i++) sched_yield();
    fk_inject_async_event(sfv_context_raw(b->ctx), IBV_EVENT_PORT_ERR, NULL, 1);
    while (n == 0) {
        if (sfv_context_events(b->ctx, ev, 4, &n) != SFV_OK) return NULL;
        if (n == 0) sched_yield();
    }
    b->broken = ev[0].channels_broken;
    return NULL;
}
static void rc_break_start(rc_breaker *b, pthread_t *t, sfv_context *ctx, int spin) {
    memset(b, 0, sizeof *b);
    b->ctx = ctx;
    b->spin = spin;
    CHECK(pthread_create(t, NULL, rc_break_run, b) == 0);
    __atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
}

/* After the event: the channel says so, refuses posts (SFV_ERR_BROKEN, naming the event), and a
   wait flushes what it had in flight. */
static void rc_check_broken(rc_env *e, sfv_channel *ch) {
    sfv_event_type by = SFV_EVENT_OTHER;
    sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf, 8);
    sfv_scatter_element s = sfv_mr_scatter_element(e->mr, e->buf + 64, 8);
    sfv_pending p;
    CHECK(sfv_channel_broken(ch, &by));
    CHECK_EQ(by, SFV_EVENT_PORT_ERR);
    CHECK_RESULT(sfv_channel_post_send(ch, &g, 1, &p), SFV_ERR_BROKEN);
    if (!strstr(sfv_last_error()->message, "PORT_ERR")) FAIL("post refused with: %s", sfv_last_error()->message);
    CHECK_RESULT(sfv_channel_post_receive(ch, &s, 1, &p), SFV_ERR_BROKEN);
    CHECK_RESULT(sfv_channel_inject(ch, e->buf, 8), SFV_ERR_BROKEN);
}

/* The channel's thread sends and receives, as fast as it can, while the other reads the event
   that breaks it: the traffic stops with the event (SFV_ERR_BROKEN from a post, or a work failure
   flushed by it), and nothing of the channel races. */
static void t_break_while_posting(void) {
    int round;
    for (round = 0; round < 40; round++) {
        rc_env e;
        sfv_channel *a, *b;
        sfv_channel_desc d;
        rc_breaker br;
        pthread_t t;
        sfv_result r = SFV_OK;
        const double end = test_seconds() + 20;
        int sent = 0;
        rc_open(&e);
        memset(&d, 0, sizeof d);
        d.timeout_ms = 2000;
        CHECK_OK(sfv_create_channel(e.pd, &d, &a));
        CHECK_OK(sfv_create_channel(e.pd, &d, &b));
        rc_connect(a, b);
        rc_break_start(&br, &t, e.ctx, round * 7);
        while (r == SFV_OK && test_seconds() < end) { /* until the event stops it (the thread may start late) */
            sfv_gather_element g = sfv_mr_gather_element(e.mr, e.buf, 64);
            sfv_scatter_element s = sfv_mr_scatter_element(e.mr, e.buf + 1024, 64);
            sfv_pending rx;
            sfv_work_completion wc;
            r = sfv_channel_post_receive(b, &s, 1, &rx);
            if (r != SFV_OK) break;
            r = sfv_channel_send(a, &g, 1, &wc);
            if (r == SFV_OK) {
                r = sfv_pending_wait(&rx, 2000, &wc);
            } else { /* flushed: the receive completes too */
                const sfv_result rr = sfv_pending_wait(&rx, 2000, &wc);
                CHECK(rr == SFV_ERR_WORK || rr == SFV_OK);
            }
            sent++;
        }
        CHECK(pthread_join(t, NULL) == 0);
        CHECK_EQ(br.broken, 2);
        if (r != SFV_ERR_BROKEN && r != SFV_ERR_WORK) /* never a hang, nor a channel that goes on */
            FAIL("round %d: %d exchanges, then %s: %s", round, sent, sfv_result_str(r), sfv_last_error()->message);
        rc_check_broken(&e, a);
        rc_check_broken(&e, b);
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        rc_close(&e);
    }
}

/* Connects (and resets) beside the event: whatever the order, a channel the event broke stays
   broken (a connect that finished after it must not open the send queue again). */
static void t_break_beside_connect(void) {
    int round, late = 0;
    for (round = 0; round < 200; round++) {
        rc_env e;
        sfv_channel *a, *b;
        rc_breaker br;
        pthread_t t;
        sfv_endpoint ea, eb;
        sfv_result ra, rb;
        rc_open(&e);
        CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
        CHECK_OK(sfv_create_channel(e.pd, NULL, &b));
        CHECK_OK(sfv_channel_endpoint(a, &ea));
        CHECK_OK(sfv_channel_endpoint(b, &eb));
        rc_break_start(&br, &t, e.ctx, round % 20);
        if (round % 2) { /* a reset beside the event: the new QP is whole, broken or not */
            CHECK_OK(sfv_channel_reset(a));
            CHECK_OK(sfv_channel_endpoint(a, &ea));
        }
        rb = sfv_channel_handshake(b, &ea);
        ra = sfv_channel_handshake(a, &eb);
        CHECK(pthread_join(t, NULL) == 0);
        CHECK(ra == SFV_OK || ra == SFV_ERR_BROKEN);
        if (!(rb == SFV_OK || rb == SFV_ERR_BROKEN)) FAIL("handshake: %s: %s", sfv_result_str(rb), sfv_last_error()->message);
        if (ra == SFV_OK && rb == SFV_OK) late++;
        /* the event was read (the thread is joined): it broke both, connected or not (a reset
           after the event made a a new QP, which it did not break) */
        CHECK_EQ(br.broken, 2);
        if (!(round % 2) || sfv_channel_broken(a, NULL)) rc_check_broken(&e, a);
        rc_check_broken(&e, b);
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        rc_close(&e);
    }
    printf("    %d of 200 rounds connected before the event broke them\n", late);
}

static const harness_test TESTS[] = {
    TEST(t_break_while_posting, 60),
    TEST(t_break_beside_connect, 60),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
