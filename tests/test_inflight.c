/* test_inflight.c - SFV_TRACK_INFLIGHT on rxe: the buffers the NIC owns. Overlapping posts and
   sfv_dereg_mr in flight are broken contracts (death tests that read the message); what the
   rules allow (gather over gather, reuse after the completion is consumed, after an unsignaled
   batch completes, after destroy) passes. In the ASan build, memory a receive will write is
   poisoned until its completion is consumed; a valgrind run (tests/inflight_valgrind.test.sh)
   checks that received bytes in fresh malloc memory are defined. */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "../safeverbs.h"
#include "harness.h"

#include <stdint.h>

#include "pair.h"

/* A side on fresh malloc memory (never written before a receive), as the ASan and valgrind
   checks of received bytes want. */
static side side_fresh(const char *dev) {
    sfv_channel_desc d = desc_default();
    d.max_inline_data = SFV_INLINE_NONE; /* an inline send's gather memory is free at its post: nothing to track */
    return side_open_on(dev, &d, SHARED, (char *)malloc(BUF));
}
static void pair_fresh(side *a, side *b) {
    *a = side_fresh(test_device(0));
    *b = side_fresh(test_device(1));
    connect_pair(a, b);
}

/* Runs `stmt` in a child whose stderr is kept; it must die (SIGABRT from SFV_ASSERT, or the exit
   of an ASan report) and have said `want`, and `want2` if not NULL. */
#define CHECK_DIES(stmt, want, want2)                                                    \
    do {                                                                                 \
        int st_, fd_[2];                                                                 \
        char out_[16384];                                                                \
        size_t got_ = 0;                                                                 \
        ssize_t n_;                                                                      \
        pid_t pid_;                                                                      \
        CHECK(pipe(fd_) == 0);                                                           \
        pid_ = fork();                                                                   \
        CHECK(pid_ >= 0);                                                                \
        if (pid_ == 0) {                                                                 \
            dup2(fd_[1], 2);                                                             \
            close(fd_[0]);                                                               \
            stmt;                                                                        \
            _exit(0);                                                                    \
        }                                                                                \
        close(fd_[1]);                                                                   \
        while (got_ + 1 < sizeof out_ && (n_ = read(fd_[0], out_ + got_, sizeof out_ - 1 - got_)) > 0) got_ += (size_t)n_; \
        out_[got_] = 0;                                                                  \
        close(fd_[0]);                                                                   \
        CHECK(waitpid(pid_, &st_, 0) == pid_);                                           \
        if (!((WIFSIGNALED(st_) && WTERMSIG(st_) == SIGABRT) || (WIFEXITED(st_) && WEXITSTATUS(st_) != 0))) \
            FAIL("%s did not die (status 0x%x); it said: %s", #stmt, st_, out_);        \
        if (!strstr(out_, want) || ((want2) && !strstr(out_, (const char *)(want2))))    \
            FAIL("%s died without saying \"%s\": %s", #stmt, want, out_);                \
    } while (0)

static char *hex_range(char *out, const void *p, size_t len) {
    sprintf(out, "[0x%llx, 0x%llx]", (unsigned long long)(uintptr_t)p, (unsigned long long)(uintptr_t)p + len - 1); /* (its last byte) */
    return out;
}

/* A receive in flight: a second receive over any of its bytes is a race, named with both ranges. */
static void t_receive_over_receive_dies(void) {
    side a, b;
    sfv_scatter_element s1, s2;
    sfv_pending p1, p2;
    char r1[64], r2[64];
    pair_fresh(&a, &b);
    s1 = sfv_mr_scatter_element(a.mr, a.buf, 64);
    s2 = sfv_mr_scatter_element(a.mr, a.buf + 63, 64);
    CHECK_OK(sfv_channel_post_receive(a.ch, &s1, 1, &p1));
    CHECK_DIES((void)!sfv_channel_post_receive(a.ch, &s2, 1, &p2), hex_range(r1, a.buf, 64), hex_range(r2, a.buf + 63, 64));
    /* the same race through the other channel (the tracking spans the process) */
    CHECK_DIES((void)!sfv_channel_post_receive(b.ch, &s2, 1, &p2), "data race", "a receive's scatter element");
    /* next to it, not over it: fine */
    s2 = sfv_mr_scatter_element(a.mr, a.buf + 64, 64);
    CHECK_OK(sfv_channel_post_receive(a.ch, &s2, 1, &p2));
    pair_close(&a, &b); /* both receives flushed and forgotten */
}

/* A send in flight (the peer has no receive: RNR, retried) is gather memory: a receive over it is
   a race; another send from it is not. A send over a receive's memory is a race too. */
static void t_gather_and_scatter(void) {
    side a, b;
    sfv_gather_element g;
    sfv_scatter_element s;
    sfv_pending tx1, tx2, rx;
    char r1[64];
    pair_fresh(&a, &b);
    g = sfv_mr_gather_element(a.mr, a.buf, 256);
    CHECK_OK(sfv_channel_post_send(a.ch, &g, 1, &tx1));
    CHECK_OK(sfv_channel_post_send(a.ch, &g, 1, &tx2)); /* gather over gather: the NIC only reads */
    s = sfv_mr_scatter_element(a.mr, a.buf + 255, 8);
    CHECK_DIES((void)!sfv_channel_post_receive(a.ch, &s, 1, &rx), "overlaps the gather element", hex_range(r1, a.buf, 256));
    s = sfv_mr_scatter_element(b.mr, b.buf + 1024, 512);
    CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
    g = sfv_mr_gather_element(b.mr, b.buf + 1500, 8);
    CHECK_DIES((void)!sfv_channel_post_send(b.ch, &g, 1, &tx1), "a send's gather element", "overlaps the scatter element");
    pair_close(&a, &b);
}

/* What the checks allow: memory is the program's again once the completion is consumed. */
static void t_reuse_after_completion(void) {
    side a, b;
    sfv_gather_element g;
    sfv_scatter_element s;
    sfv_pending rx, tx;
    sfv_work_completion wc;
    int i;
    pair_fresh(&a, &b);
    for (i = 0; i < 20; i++) { /* the same 64 bytes, received into again and again */
        s = sfv_mr_scatter_element(b.mr, b.buf, 64);
        CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
        memset(a.buf, 'a' + i, 64);
        g = sfv_mr_gather_element(a.mr, a.buf, 64);
        CHECK_OK(sfv_channel_post_send(a.ch, &g, 1, &tx));
        CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
        CHECK_EQ(wc.byte_len, 64);
        CHECK_EQ(b.buf[0], 'a' + i);
        CHECK_EQ(b.buf[63], 'a' + i);
        CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
        /* now the received bytes go back out from the same memory */
        s = sfv_mr_scatter_element(a.mr, a.buf, 64);
        CHECK_OK(sfv_channel_post_receive(a.ch, &s, 1, &rx));
        g = sfv_mr_gather_element(b.mr, b.buf, 64);
        CHECK_OK(sfv_channel_send(b.ch, &g, 1, NULL));
        CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    }
    pair_close(&a, &b);
}

/* An unsignaled batch completes with its last work request: then all of its memory is free. */
static void t_batch_releases_all(void) {
    side a, b;
    sfv_gather_element g[4];
    sfv_scatter_element s[4];
    sfv_pending rx[4], tx;
    int i;
    pair_fresh(&a, &b);
    for (i = 0; i < 4; i++) {
        s[i] = sfv_mr_scatter_element(b.mr, b.buf + 128 * i, 128);
        g[i] = sfv_mr_gather_element(a.mr, a.buf + 128 * i, 128);
    }
    CHECK_OK(sfv_channel_post_receive_batch(b.ch, s, 1, 4, rx));
    CHECK_OK(sfv_channel_post_send_batch(a.ch, g, 1, 4, &tx));
    s[0] = sfv_mr_scatter_element(a.mr, a.buf + 100, 8); /* inside the first (unsignaled) send */
    CHECK_DIES((void)!sfv_channel_post_receive(a.ch, s, 1, rx), "overlaps the gather element", "send posted on channel");
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    for (i = 0; i < 4; i++) CHECK_OK(sfv_pending_wait(&rx[i], -1, NULL));
    /* every send of the batch is done: their memory takes receives */
    for (i = 0; i < 4; i++) {
        s[i] = sfv_mr_scatter_element(a.mr, a.buf + 128 * i, 128);
        g[i] = sfv_mr_gather_element(b.mr, b.buf + 128 * i, 128);
    }
    CHECK_OK(sfv_channel_post_receive_batch(a.ch, s, 1, 4, rx));
    CHECK_OK(sfv_channel_post_send_batch(b.ch, g, 1, 4, &tx));
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    for (i = 0; i < 4; i++) CHECK_OK(sfv_pending_wait(&rx[i], -1, NULL));
    pair_close(&a, &b);
}

/* sfv_dereg_mr while a receive into the MR is in flight: a broken contract that names the work;
   once the channel is destroyed (the receive flushed), the MR goes. */
static void t_dereg_in_flight_dies(void) {
    side a, b;
    sfv_scatter_element s;
    sfv_pending rx;
    char r[64];
    pair_fresh(&a, &b);
    s = sfv_mr_scatter_element(a.mr, a.buf + 4096, 100);
    CHECK_OK(sfv_channel_post_receive(a.ch, &s, 1, &rx));
    CHECK_DIES(sfv_dereg_mr(a.mr), "sfv_dereg_mr of the MR", hex_range(r, a.buf + 4096, 100));
    CHECK_OK(sfv_destroy_channel(a.ch));
    CHECK_OK(sfv_dereg_mr(a.mr));
    a.mr = NULL;
    CHECK_OK(sfv_reg_mr_local(a.pd, a.buf, BUF, &a.mr)); /* the same memory again: nothing left in flight */
    CHECK_OK(sfv_create_channel(a.pd, NULL, &a.ch));
    s = sfv_mr_scatter_element(a.mr, a.buf + 4096, 100);
    CHECK_OK(sfv_channel_post_receive(a.ch, &s, 1, &rx));
    pair_close(&a, &b);
}

/* A destroyed channel forgets its work even where nobody consumed the completion. */
static void t_destroy_forgets(void) {
    side a, b;
    sfv_scatter_element s;
    sfv_gather_element g;
    sfv_pending rx, tx;
    pair_fresh(&a, &b);
    s = sfv_mr_scatter_element(b.mr, b.buf, 64);
    CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
    g = sfv_mr_gather_element(a.mr, a.buf, 64);
    CHECK_OK(sfv_channel_post_send(a.ch, &g, 1, &tx));
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL)); /* b's receive is done, never consumed */
    s = sfv_mr_scatter_element(a.mr, a.buf, 64);
    CHECK_OK(sfv_channel_post_receive(a.ch, &s, 1, &rx)); /* in flight, never consumed */
    CHECK_OK(sfv_destroy_channel(a.ch));
    CHECK_OK(sfv_destroy_channel(b.ch));
    CHECK_OK(sfv_create_channel(a.pd, NULL, &a.ch));
    CHECK_OK(sfv_create_channel(b.pd, NULL, &b.ch));
    CHECK_OK(sfv_channel_post_receive(a.ch, &s, 1, &rx));
    s = sfv_mr_scatter_element(b.mr, b.buf, 64);
    CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
    pair_close(&a, &b);
}

#if SFV__ASAN
#include <sanitizer/asan_interface.h>
/* ASan: a receive's memory is poisoned from post until its completion is consumed; touching it
   before is a report (use-after-poison), after is not; a flushed receive gives it back too. */
static void t_asan_receive_poisoned(void) {
    side a, b;
    sfv_scatter_element s;
    sfv_gather_element g;
    sfv_pending rx;
    volatile char *vb;
    pair_fresh(&a, &b);
    vb = b.buf;
    s = sfv_mr_scatter_element(b.mr, b.buf + 64, 64);
    CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
    CHECK(__asan_address_is_poisoned(b.buf + 64));
    CHECK(__asan_address_is_poisoned(b.buf + 127));
    CHECK(!__asan_address_is_poisoned(b.buf + 63));
    CHECK(!__asan_address_is_poisoned(b.buf + 128));
    CHECK_DIES((void)vb[100], "use-after-poison", "READ of size 1");
    CHECK_DIES(vb[64] = 1, "use-after-poison", "WRITE of size 1");
    memset(a.buf, 'x', 64);
    g = sfv_mr_gather_element(a.mr, a.buf, 64);
    CHECK_OK(sfv_channel_send(a.ch, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    CHECK(!__asan_address_is_poisoned(b.buf + 64));
    CHECK_EQ(vb[100], 'x'); /* after: no report */
    /* a receive flushed by destroy: unpoisoned */
    CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
    CHECK(__asan_address_is_poisoned(b.buf + 64));
    CHECK_OK(sfv_destroy_channel(b.ch));
    CHECK(!__asan_address_is_poisoned(b.buf + 64));
    vb[64] = 2;
    CHECK_OK(sfv_create_channel(b.pd, NULL, &b.ch));
    pair_close(&a, &b);
}
/* An unaligned element: ASan poisons the 8-byte granules it covers whole (documented); memory
   outside the element is never poisoned. */
static void t_asan_unaligned(void) {
    side a, b;
    sfv_scatter_element s;
    sfv_pending rx;
    pair_fresh(&a, &b);
    s = sfv_mr_scatter_element(b.mr, b.buf + 3, 30); /* [3, 33): whole granules [8, 32) */
    CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
    CHECK(!__asan_address_is_poisoned(b.buf + 2));
    CHECK(__asan_address_is_poisoned(b.buf + 8));
    CHECK(__asan_address_is_poisoned(b.buf + 31));
    CHECK(!__asan_address_is_poisoned(b.buf + 33));
    CHECK_OK(sfv_destroy_channel(b.ch));
    CHECK(!__asan_address_is_poisoned(b.buf + 8));
    CHECK_OK(sfv_create_channel(b.pd, NULL, &b.ch));
    pair_close(&a, &b);
}
#endif

/* For the valgrind run: bytes received into fresh malloc memory are defined (a branch on each
   of them is clean under memcheck), the bytes past byte_len are not touched. */
static void t_receive_into_malloc(void) {
    side a, b;
    sfv_scatter_element s;
    sfv_gather_element g;
    sfv_pending rx;
    sfv_work_completion wc;
    unsigned i, sum = 0;
    pair_fresh(&a, &b);
    for (i = 0; i < 100; i++) a.buf[i] = (char)i;
    s = sfv_mr_scatter_element(b.mr, b.buf, 200);
    CHECK_OK(sfv_channel_post_receive(b.ch, &s, 1, &rx));
    g = sfv_mr_gather_element(a.mr, a.buf, 100);
    CHECK_OK(sfv_channel_send(a.ch, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK_EQ(wc.byte_len, 100);
    for (i = 0; i < wc.byte_len; i++)
        if (b.buf[i] == (char)i) sum++; /* a branch on every received byte */
    CHECK_EQ(sum, 100);
    pair_close(&a, &b);
}

static const harness_test TESTS[] = {
    TEST(t_receive_over_receive_dies, 60),
    TEST(t_gather_and_scatter, 60),
    TEST(t_reuse_after_completion, 60),
    TEST(t_batch_releases_all, 60),
    TEST(t_dereg_in_flight_dies, 60),
    TEST(t_destroy_forgets, 60),
#if SFV__ASAN
    TEST(t_asan_receive_poisoned, 60),
    TEST(t_asan_unaligned, 60),
#endif
    TEST(t_receive_into_malloc, 60),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
