/* test_rev33e.c - hostile review 33e on the fake NIC: channel set-up (the desc, endpoints and
   their wire format, the handshake, sfv_channel_reset). Each test failed on the header at tag
   base. */
#include "fake_env.h"

/* Promise (sfv_endpoint_decode: an endpoint no handshake takes is refused; sfv_channel_handshake
   refuses a PSN over 24 bits; "no arithmetic wraps"). sfv_endpoint_encode cut a PSN over 24 bits
   to its low 24 (0x1000005 went out as 5), so the blob decoded as another, valid endpoint, where a
   QPN over 24 bits or an MTU that does not fit its field encodes as one decode refuses. */
static void t_encode_wide_psn(void) {
    static const uint8_t depths[] = {4, 0}; /* version 2 and version 1 */
    sfv_endpoint e, d;
    uint8_t b[SFV_ENDPOINT_ENCODED_SIZE];
    size_t i;
    for (i = 0; i < COUNT_OF(depths); i++) {
        memset(&e, 0, sizeof e);
        e.qpn = 0x12;
        e.mtu = 1024;
        e.psn = 0x1000005u;
        e.rd_atomic = depths[i];
        sfv_endpoint_encode(&e, b);
        d.psn = 7;
        CHECK_RESULT(sfv_endpoint_decode(b, sizeof b, &d), SFV_ERR_INVALID);
        CHECK_MSG("PSN over 24 bits");
        CHECK_EQ(d.psn, 0); /* *out zeroed */
        e.psn = 0xFFFFFFu; /* the largest PSN still goes out as it is */
        sfv_endpoint_encode(&e, b);
        CHECK_OK(sfv_endpoint_decode(b, sizeof b, &d));
        CHECK(d.psn == 0xFFFFFFu && d.rd_atomic == depths[i]);
    }
}

/* Promise (sfv_channel_reset: "a new one is made in its place ..., with a new random first PSN.
   So the channel has a NEW QP number and PSN ... the new PSNs start elsewhere"; the desc's
   send_psn 0: "a random one, chosen at creation, so that a late packet of an earlier connection
   on a reused QP number is not taken for this one's"). The PSN was drawn from the coarse clock
   (one tick: 1 to 4 ms), the process and an address: a new QP at the freed one's address (the
   allocator hands it out again) in the same tick drew the very PSN of the old connection, reset
   after reset, and a channel made again at a destroyed one's address took the old one's PSN. */
static void t_reset_new_psn(void) {
    tf_env e;
    sfv_channel *a;
    sfv_endpoint ep;
    uint32_t prev;
    int i;
    tf_open(&e, 4096);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    CHECK_OK(sfv_channel_endpoint(a, &ep));
    prev = ep.psn;
    for (i = 0; i < 64; i++) {
        CHECK_OK(sfv_channel_reset(a));
        CHECK_OK(sfv_channel_endpoint(a, &ep));
        if (ep.psn == prev) FAIL("reset %d: the new QP %u took the old PSN %u again", i + 1, (unsigned)ep.qpn, (unsigned)ep.psn);
        CHECK(ep.psn != 0 && ep.psn <= 0xFFFFFFu && ep.psn == sfv_channel_get_desc(a)->send_psn);
        prev = ep.psn;
    }
    CHECK_OK(sfv_destroy_channel(a));
    /* channels made one after another, each at the last one's address, each its own PSN */
    prev = 0;
    for (i = 0; i < 64; i++) {
        CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
        CHECK_OK(sfv_channel_endpoint(a, &ep));
        if (ep.psn == prev) FAIL("channel %d took the PSN %u of the one before", i + 1, (unsigned)ep.psn);
        prev = ep.psn;
        CHECK_OK(sfv_destroy_channel(a));
    }
    tf_close(&e);
}

/* Promise (sfv_channel_desc: "Values out of range are refused ... with SFV_ERR_INVALID naming the
   field"; max_rd_atomic is "the device's limit ..., as initiator and as responder"; a failure's
   sfv_last_error() says why). The limit is the lesser of max_qp_rd_atom and max_qp_init_rd_atom,
   but the refusal said "1 .. the device's max_qp_rd_atom": on a device that answers 16 reads and
   issues 4, an ask of 8 was refused with a range that holds it. */
static void t_rd_atomic_range_message(void) {
    tf_env e;
    sfv_channel_desc d, o;
    sfv_channel *ch = (sfv_channel *)1;
    sfv_endpoint ep;
    fk_set_rd_atom(16, 4);
    tf_open(&e, 4096);
    CHECK_OK(sfv_channel_desc_resolve(e.pd, NULL, &o));
    CHECK_EQ(o.max_rd_atomic, 4); /* the default: the lesser */
    memset(&d, 0, sizeof d);
    d.max_rd_atomic = 8;
    CHECK_RESULT(sfv_create_channel(e.pd, &d, &ch), SFV_ERR_INVALID);
    CHECK(ch == NULL);
    CHECK_MSG("max_rd_atomic = 8");
    CHECK_MSG("1 .. 4");
    CHECK_MSG("max_qp_init_rd_atom");
    d.max_rd_atomic = 4;
    CHECK_OK(sfv_create_channel(e.pd, &d, &ch));
    CHECK_OK(sfv_channel_endpoint(ch, &ep));
    CHECK_EQ(ep.rd_atomic, 4);
    CHECK_OK(sfv_destroy_channel(ch));
    tf_close(&e);
    fk_reset();
}

static const harness_test TESTS[] = {
    TEST(t_rd_atomic_range_message, 10),
    TEST(t_encode_wide_psn, 10),
    TEST(t_reset_new_psn, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
