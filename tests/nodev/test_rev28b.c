/* test_rev28b.c - hostile review 28b on the fake NIC: injects and unsignaled posts. */
#include "fake_env.h"

/* >>inject: "A place an inject holds counts in sfv_channel_outstanding until a later completion
   (or flush) gives it back" was false while older work waited for its pending handle: a
   completion gives the inject's place back, but the send queue frees places from its oldest
   (work consumed ahead of older work stays counted, >>channel: sfv_channel_outstanding), so the
   place went on counting, and taking room (an inject then says SFV_ERR_RESOURCE at once), until
   that older work was consumed. The behaviour is the ring's and right; the sentence now says so.
   (A doc fix: this test holds on the header at `base` too; it pins the behaviour the sentence
   now describes.) */
static void t_inject_place_behind_unconsumed_work(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_pending p;
    sfv_gather_element g;
    int i;
    memset(&d, 0, sizeof d);
    d.max_send_wr = 8; /* every 4th inject signaled */
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    CHECK_OK(sfv_channel_post_write(a, &g, 1, tf_at(&e, 1024), &p)); /* done soon, not consumed */
    for (i = 0; i < 5; i++) CHECK_OK(sfv_channel_inject_write(a, "x", 1, tf_at(&e, 2048))); /* the 4th signaled */
    CHECK_OK(sfv_channel_write(a, &g, 1, tf_at(&e, 1024), NULL)); /* its wait polls the 4th inject's completion */
    /* the first four injects' places were given back, yet count, behind p: p, five injects, the write */
    CHECK_EQ(sfv_channel_outstanding(a), 7);
    CHECK_RESULT(sfv_channel_inject_write(a, "x", 1, tf_at(&e, 2048)), SFV_ERR_RESOURCE);
    CHECK_MSG("waits for its pending handle");
    CHECK_OK(sfv_pending_wait(&p, -1, NULL)); /* the older work consumed: every place is free */
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    CHECK_OK(sfv_channel_inject_write(a, "x", 1, tf_at(&e, 2048)));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_inject_place_behind_unconsumed_work, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
