/* test_rev38c.c - hostile review 38c on the fake NIC: thread safety, as the header's THREAD
   SAFETY section, >>events, >>srq and the log's docs allow it. Built plain, with ASan and by hand
   with TSan (as the Makefile's tsan rule: -O1 -g -fsanitize=thread, run with
   TSAN_OPTIONS=halt_on_error=1): a data race, a deadlock, a lost wakeup (a wait that runs to its
   deadline though its work completed) or a wrong result is a failure. The fake's control verbs
   run under one lock (fk_set_threaded), as libibverbs' are thread-safe. Every test here passed
   on the header at tag base (plain, ASan and TSan): kept as coverage of the uses the docs allow. */
#include "fake_env.h"

#include <pthread.h>
#include <poll.h>
#include <sched.h>
#include <dirent.h>

static volatile int q8_stop;
static void q8_go(int on) { __atomic_store_n(&q8_stop, on ? 0 : 1, __ATOMIC_RELEASE); }
static int q8_running(void) { return !__atomic_load_n(&q8_stop, __ATOMIC_ACQUIRE); }

/* A spin barrier for n threads, so racing calls start together. */
typedef struct q8_barrier { int n, in, gen; } q8_barrier;
static void q8_barrier_wait(q8_barrier *b) {
    const int gen = __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&b->in, 1, __ATOMIC_ACQ_REL) == b->n) {
        __atomic_store_n(&b->in, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->gen, gen + 1, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == gen) sched_yield();
}

static int q8_open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int n = 0;
    CHECK(d);
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* ---- 1. two channel pairs on one context, each on its own thread ---------------------------- */
typedef struct q8_pair_arg {
    sfv_pd *pd;
    sfv_mr *mr;
    unsigned char *base; /* this thread's 4 KiB of the shared MR */
    sfv_wait_mode mode;
    unsigned rounds;
    double worst;
} q8_pair_arg;
static void *q8_pair_run(void *arg) {
    q8_pair_arg *a = (q8_pair_arg *)arg;
    sfv_channel_desc d;
    sfv_channel *x, *y;
    sfv_gather_element g = sfv_mr_gather_element(a->mr, a->base, 64);
    sfv_scatter_element s = sfv_mr_scatter_element(a->mr, a->base + 1024, 64);
    memset(&d, 0, sizeof d);
    d.wait_mode = a->mode;
    CHECK_OK(sfv_create_channel(a->pd, &d, &x));
    CHECK_OK(sfv_create_channel(a->pd, &d, &y));
    tf_connect(x, y);
    while (q8_running()) {
        sfv_pending rx, tx;
        sfv_work_completion wc;
        double t0;
        a->base[0] = (unsigned char)a->rounds;
        CHECK_OK(sfv_channel_post_receive(y, &s, 1, &rx));
        CHECK_OK(sfv_channel_post_send(x, &g, 1, &tx));
        t0 = test_seconds();
        CHECK_OK(sfv_pending_wait(&rx, 5000, &wc));
        CHECK_OK(sfv_pending_wait(&tx, 5000, NULL));
        if (test_seconds() - t0 > a->worst) a->worst = test_seconds() - t0;
        CHECK_EQ(wc.byte_len, 64);
        CHECK_EQ(a->base[1024], (unsigned char)a->rounds);
        a->rounds++;
    }
    CHECK_OK(sfv_destroy_channel(x));
    CHECK_OK(sfv_destroy_channel(y));
    return NULL;
}
static void q8_two_pairs(sfv_wait_mode m0, sfv_wait_mode m1) {
    tf_env e;
    q8_pair_arg a[2];
    pthread_t t[2];
    int k;
    fk_reset();
    fk_set_threaded(true);
    tf_open(&e, 8192);
    for (k = 0; k < 2; k++) {
        memset(&a[k], 0, sizeof a[k]);
        a[k].pd = e.pd;
        a[k].mr = e.mr;
        a[k].base = e.buf + 4096 * k;
        a[k].mode = k ? m1 : m0;
    }
    q8_go(1);
    for (k = 0; k < 2; k++) CHECK(pthread_create(&t[k], NULL, q8_pair_run, &a[k]) == 0);
    usleep(800 * 1000);
    q8_go(0);
    for (k = 0; k < 2; k++) CHECK(pthread_join(t[k], NULL) == 0);
    printf("    rounds %u %u, worst %.3f %.3f s\n", a[0].rounds, a[1].rounds, a[0].worst, a[1].worst);
    for (k = 0; k < 2; k++) {
        CHECK(a[k].rounds > 0);
        if (a[k].worst > 1.0) FAIL("a ping-pong wait took %.3f s beside another thread's channels: a lost wakeup", a[k].worst);
    }
    tf_close(&e);
}
/* Promise: contexts, PDs and MRs may be shared between threads, and a channel is one thread's:
   two pairs of channels on one context, PD and MR, each on its own thread, in event mode, busy
   mode, and one of each, ping-pong at once. Every message arrives, no wait runs long. */
static void t_two_pairs_event(void) { q8_two_pairs(SFV_WAIT_EVENT, SFV_WAIT_EVENT); }
static void t_two_pairs_busy(void) { q8_two_pairs(SFV_WAIT_BUSY, SFV_WAIT_BUSY); }
static void t_two_pairs_mixed(void) { q8_two_pairs(SFV_WAIT_EVENT, SFV_WAIT_BUSY); }

/* ---- 2. an event loop on one thread, waits on another ---------------------------------------- */
static void *q8_event_loop(void *arg) {
    tf_env *e = (tf_env *)arg;
    static const int types[] = {IBV_EVENT_PORT_ACTIVE, IBV_EVENT_LID_CHANGE, IBV_EVENT_GID_CHANGE, IBV_EVENT_SM_CHANGE};
    unsigned i = 0;
    int fd;
    unsigned long got = 0;
    CHECK_OK(sfv_context_event_fd(e->ctx, &fd));
    while (q8_running()) {
        struct pollfd p;
        sfv_event ev[4];
        size_t n;
        sfv__ev_enter(e->ctx); /* (the fake's queue is the library's to read under it) */
        fk_inject_async_event(sfv_context_raw(e->ctx), types[i++ % COUNT_OF(types)], NULL, 1);
        sfv__ev_leave(e->ctx);
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        CHECK(poll(&p, 1, 1000) >= 0);
        do {
            CHECK_OK(sfv_context_events(e->ctx, ev, 4, &n));
            got += n;
        } while (n);
        usleep(200);
    }
    return (void *)(uintptr_t)got;
}
/* Promise (>>events): a context's events may be read from any thread, and sfv_context_event_fd is
   readable while events wait. One thread runs an event loop (its fd, sfv_context_events) on
   events naming nothing of ours, while another ping-pongs in event mode. */
static void t_event_loop_beside_waits(void) {
    tf_env e;
    q8_pair_arg a;
    pthread_t t, w;
    void *got;
    fk_reset();
    fk_set_threaded(true);
    tf_open(&e, 8192);
    memset(&a, 0, sizeof a);
    a.pd = e.pd;
    a.mr = e.mr;
    a.base = e.buf;
    a.mode = SFV_WAIT_EVENT;
    q8_go(1);
    CHECK(pthread_create(&t, NULL, q8_event_loop, &e) == 0);
    CHECK(pthread_create(&w, NULL, q8_pair_run, &a) == 0);
    usleep(800 * 1000);
    q8_go(0);
    CHECK(pthread_join(w, NULL) == 0);
    CHECK(pthread_join(t, &got) == 0);
    printf("    rounds %u, worst %.3f s, events %lu\n", a.rounds, a.worst, (unsigned long)(uintptr_t)got);
    CHECK(a.rounds > 0 && (uintptr_t)got > 0);
    if (a.worst > 1.0) FAIL("a ping-pong wait took %.3f s beside an event loop: a lost wakeup", a.worst);
    tf_close(&e);
}

/* ---- 3. sfv_context_event_fd's first call on two threads at once ------------------------------ */
typedef struct q8_fd_arg { q8_barrier *bar; sfv_context *ctx; int fd; } q8_fd_arg;
static void *q8_fd_run(void *arg) {
    q8_fd_arg *a = (q8_fd_arg *)arg;
    q8_barrier_wait(a->bar);
    CHECK_OK(sfv_context_event_fd(a->ctx, &a->fd));
    return NULL;
}
/* Promise (sfv_context_event_fd: "made on the first call, kept until the context closes ...
   Thread safety: any thread"): two threads' first calls at once give the same fd, and closing
   the context leaves no fd behind. */
static void t_event_fd_first_calls_at_once(void) {
    int round, before;
    fk_reset();
    fk_set_threaded(true);
    before = q8_open_fds();
    for (round = 0; round < 200; round++) {
        sfv_context *ctx;
        q8_barrier bar = {2, 0, 0};
        q8_fd_arg a[2];
        pthread_t t[2];
        int k;
        CHECK_OK(sfv_open_device(NULL, &ctx));
        for (k = 0; k < 2; k++) {
            a[k].bar = &bar;
            a[k].ctx = ctx;
            a[k].fd = -1;
            CHECK(pthread_create(&t[k], NULL, q8_fd_run, &a[k]) == 0);
        }
        for (k = 0; k < 2; k++) CHECK(pthread_join(t[k], NULL) == 0);
        CHECK(a[0].fd >= 0 && a[0].fd == a[1].fd);
        CHECK_OK(sfv_close_device(ctx));
    }
    CHECK_EQ(q8_open_fds(), before);
    CHECK_EQ(fk_live_total(), 0);
}

/* ---- 4. sfv_last_error on two threads failing differently at once ---------------------------- */
typedef struct q8_err_arg { q8_barrier *bar; tf_env *e; int which; unsigned long wrong; } q8_err_arg;
static void *q8_err_run(void *arg) {
    q8_err_arg *a = (q8_err_arg *)arg;
    int i;
    q8_barrier_wait(a->bar);
    for (i = 0; i < 20000; i++) {
        const sfv_error *le;
        if (a->which == 0) {
            sfv_cq *cq;
            CHECK_RESULT(sfv_create_cq(a->e->ctx, 0, &cq), SFV_ERR_INVALID);
            le = sfv_last_error();
            if (le->result != SFV_ERR_INVALID || !strstr(le->message, "min_entries")) a->wrong++;
        } else {
            sfv_gather_element g;
            CHECK_RESULT(sfv_mr_gather_element_checked(a->e->mr, a->e->buf + a->e->len, 1, &g), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
            le = sfv_last_error();
            if (le->result != SFV_ERR_SLICE_NOT_WITHIN_BOUNDS || !strstr(le->message, "not within the MR")) a->wrong++;
        }
    }
    return NULL;
}
/* Promise (ERRORS: "it is per thread, like errno, so threads never see each other's errors"):
   two threads fail differently at once, many times; each sees its own failure's detail. */
static void t_last_error_per_thread(void) {
    tf_env e;
    q8_barrier bar = {2, 0, 0};
    q8_err_arg a[2];
    pthread_t t[2];
    int k;
    fk_reset();
    fk_set_threaded(true);
    tf_open(&e, 4096);
    for (k = 0; k < 2; k++) {
        a[k].bar = &bar;
        a[k].e = &e;
        a[k].which = k;
        a[k].wrong = 0;
        CHECK(pthread_create(&t[k], NULL, q8_err_run, &a[k]) == 0);
    }
    for (k = 0; k < 2; k++) CHECK(pthread_join(t[k], NULL) == 0);
    if (a[0].wrong || a[1].wrong) FAIL("sfv_last_error showed another thread's failure: %lu and %lu times", a[0].wrong, a[1].wrong);
    tf_close(&e);
}

/* ---- 5. PDs, MRs and channels made and unmade on several threads on one context -------------- */
typedef struct q8_churn_arg { tf_env *e; int id; unsigned long rounds; } q8_churn_arg;
static void *q8_churn_run(void *arg) {
    q8_churn_arg *a = (q8_churn_arg *)arg;
    unsigned char *mine = a->e->buf + 4096 * a->id;
    while (q8_running()) {
        sfv_pd *pd;
        sfv_mr *mr;
        sfv_channel *x, *y;
        sfv_gather_element g;
        sfv_scatter_element s;
        sfv_pending rx;
        CHECK_OK(sfv_alloc_pd(a->e->ctx, &pd));
        CHECK_OK(sfv_reg_mr_local(pd, mine, 4096, &mr));
        CHECK_OK(sfv_create_channel(pd, NULL, &x));
        CHECK_OK(sfv_create_channel(a->id & 1 ? a->e->pd : pd, NULL, &y)); /* odd ones: one channel on the shared PD */
        tf_connect(x, y);
        g = sfv_mr_gather_element(mr, mine, 32);
        s = sfv_mr_scatter_element(a->id & 1 ? a->e->mr : mr, a->id & 1 ? a->e->buf + 4096 * 4 + 512 * a->id : mine + 1024, 32);
        CHECK_OK(sfv_channel_post_receive(y, &s, 1, &rx));
        CHECK_OK(sfv_channel_send(x, &g, 1, NULL));
        CHECK_OK(sfv_pending_wait(&rx, 5000, NULL));
        /* teardown in an order the reference counts allow: the PD and MR first */
        CHECK_OK(sfv_dealloc_pd(pd));
        CHECK_OK(sfv_destroy_channel(x));
        CHECK_OK(sfv_dereg_mr(mr));
        CHECK_OK(sfv_destroy_channel(y));
        a->rounds++;
    }
    return NULL;
}
/* Promise (THREAD SAFETY: contexts, PDs and MRs may be shared between threads; teardown in any
   order is safe): four threads allocate PDs on one context, register MRs on them, make channels
   on their own PD and on a shared one, move a message, and take it all down (the PD first) at
   once. Nothing may race, fail or be left. */
static void t_pd_churn_shared_context(void) {
    tf_env e;
    q8_churn_arg a[4];
    pthread_t t[4];
    int k;
    fk_reset();
    fk_set_threaded(true);
    tf_open(&e, 4096 * 5);
    q8_go(1);
    for (k = 0; k < 4; k++) {
        a[k].e = &e;
        a[k].id = k;
        a[k].rounds = 0;
        CHECK(pthread_create(&t[k], NULL, q8_churn_run, &a[k]) == 0);
    }
    usleep(800 * 1000);
    q8_go(0);
    for (k = 0; k < 4; k++) CHECK(pthread_join(t[k], NULL) == 0);
    printf("    rounds %lu %lu %lu %lu\n", a[0].rounds, a[1].rounds, a[2].rounds, a[3].rounds);
    for (k = 0; k < 4; k++) CHECK(a[k].rounds > 0);
    tf_close(&e);
}

/* ---- 6. twins made and closed while another thread reads the events -------------------------- */
typedef struct q8_twin_arg { tf_env *e; unsigned long rounds, got; } q8_twin_arg;
static void *q8_twin_reader(void *arg) {
    q8_twin_arg *a = (q8_twin_arg *)arg;
    while (q8_running()) {
        sfv_event ev[8];
        size_t n;
        sfv__ev_enter(a->e->ctx);
        fk_inject_async_event(sfv_context_raw(a->e->ctx), IBV_EVENT_PORT_ACTIVE, NULL, 1);
        sfv__ev_leave(a->e->ctx);
        do {
            CHECK_OK(sfv_context_events(a->e->ctx, ev, 8, &n));
            a->got += n;
        } while (n);
        a->rounds++;
        usleep(50);
    }
    return NULL;
}
static void *q8_twin_churn(void *arg) {
    q8_twin_arg *a = (q8_twin_arg *)arg;
    while (q8_running()) {
        sfv_context *b;
        sfv_pd *pd;
        sfv_channel *ch;
        sfv_channel_desc d;
        sfv_event ev[8];
        size_t n;
        int fd;
        CHECK_OK(sfv_context_wrap(sfv_context_raw(a->e->ctx), false, &b));
        if (a->rounds & 1) CHECK_OK(sfv_context_event_fd(b, &fd));
        CHECK_OK(sfv_pd_wrap(b, sfv_pd_raw(a->e->pd), false, &pd));
        memset(&d, 0, sizeof d);
        d.wait_mode = (a->rounds & 2) ? SFV_WAIT_EVENT : SFV_WAIT_BUSY;
        CHECK_OK(sfv_create_channel(pd, &d, &ch));
        do {
            CHECK_OK(sfv_context_events(b, ev, 8, &n));
            a->got += n;
        } while (n);
        CHECK(!sfv_channel_broken(ch, NULL)); /* (the events read are PORT_ACTIVE: nothing breaks) */
        CHECK_OK(sfv_destroy_channel(ch));
        CHECK_OK(sfv_dealloc_pd(pd));
        CHECK_OK(sfv_close_device(b));
        a->rounds++;
    }
    return NULL;
}
/* Promise (>>events: a verbs context under two safeverbs contexts gives each event once, to
   whichever reads first, which acts on it for both; contexts may be shared between threads):
   one thread reads a context's events in a loop while another wraps its verbs context again,
   makes a channel on the twin, reads the twin's events and closes it, over and over. */
static void t_twins_made_and_closed_beside_reader(void) {
    tf_env e;
    q8_twin_arg a[2];
    pthread_t t[2];
    int k;
    fk_reset();
    fk_set_threaded(true);
    tf_open(&e, 4096);
    memset(a, 0, sizeof a);
    q8_go(1);
    for (k = 0; k < 2; k++) {
        a[k].e = &e;
        CHECK(pthread_create(&t[k], NULL, k ? q8_twin_churn : q8_twin_reader, &a[k]) == 0);
    }
    usleep(800 * 1000);
    q8_go(0);
    for (k = 0; k < 2; k++) CHECK(pthread_join(t[k], NULL) == 0);
    printf("    reader %lu rounds %lu events, churn %lu rounds %lu events\n", a[0].rounds, a[0].got, a[1].rounds, a[1].got);
    CHECK(a[0].rounds > 0 && a[1].rounds > 0);
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_two_pairs_event, 30),
    TEST(t_two_pairs_busy, 30),
    TEST(t_two_pairs_mixed, 30),
    TEST(t_event_loop_beside_waits, 30),
    TEST(t_event_fd_first_calls_at_once, 60),
    TEST(t_last_error_per_thread, 60),
    TEST(t_pd_churn_shared_context, 30),
    TEST(t_twins_made_and_closed_beside_reader, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
