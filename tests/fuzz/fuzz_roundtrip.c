/* fuzz_roundtrip.c - structs built from fuzz bytes, encoded, decoded again.
   Properties: an endpoint within the documented ranges (qpn 1 .. 2^24-1, psn 24 bits, mtu
   256 .. 4096, GID bytes only with has_gid, and then a GID some port may have: not all zero,
   multicast or the IPv4 0.0.0.0) comes back equal, field by field; outside them the encoder
   keeps the low 24 bits of the psn and the low 16 of the mtu (the widths on the wire),
   and the decoder returns exactly that or refuses it, with a zeroed output and the error
   recorded. A remote region comes back equal when addr + length does not wrap past 2^64 and
   is refused when it does. Both encoders write their fixed size and nothing past it.
   Build and run: make fuzz (or make check-fuzz). */
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "fz.h"

static const uint32_t fz_mtus[] = {256, 512, 1024, 2048, 4096};

/* Mostly in range; a selector byte of 224 or more lets the raw value through. */
static uint32_t fz_pick(fz_bytes *b, uint32_t in_range) {
    const unsigned sel = (unsigned)fz_take(b, 1);
    const uint32_t raw = (uint32_t)fz_take(b, 4);
    return sel < 224 ? in_range : raw;
}

static void fz_endpoint_roundtrip(fz_bytes *b) {
    sfv_endpoint ep, want, got;
    uint8_t *bytes = (uint8_t *)malloc(SFV_ENDPOINT_ENCODED_SIZE); /* exact: ASan sees a write past it */
    uint32_t v;
    int in_range, keep_gid_bytes;
    sfv_result r;

    memset(&ep, 0, sizeof ep);
    v = (uint32_t)fz_take(b, 4);
    ep.qpn = fz_pick(b, v % 0xFFFFFFu + 1);
    ep.lid = (uint16_t)fz_take(b, 2);
    v = (uint32_t)fz_take(b, 4);
    ep.psn = fz_pick(b, v & 0xFFFFFFu);
    v = (uint32_t)fz_take(b, 1);
    ep.mtu = fz_pick(b, fz_mtus[v % 5]);
    ep.rd_atomic = (uint8_t)fz_take(b, 1);
    v = (uint32_t)fz_take(b, 1);
    ep.has_gid = v & 1;
    keep_gid_bytes = ep.has_gid || v >= 224;
    if (keep_gid_bytes) {
        int i;
        for (i = 0; i < 16; i++) ep.gid.raw[i] = (uint8_t)fz_take(b, 1);
    }

    sfv_endpoint_encode(&ep, bytes);
    want = ep; /* what the wire keeps: 24 PSN bits (a wider PSN encodes as no endpoint), an MTU that fits 16 bits
                  (else 0), GID bytes with the flag only */
    want.psn &= 0xFFFFFFu;
    if (want.mtu > 0xFFFFu) want.mtu = 0;
    if (!want.has_gid) memset(want.gid.raw, 0, 16);
    in_range = ep.qpn >= 1 && ep.qpn <= 0xFFFFFFu && ep.psn <= 0xFFFFFFu && fz_mtu_ok(ep.mtu) &&
               (ep.has_gid ? !fz_gid_no_port_has(ep.gid.raw) : fz_zero(ep.gid.raw, 16));
    FZ_CHECK(fz_endpoint_valid(bytes, SFV_ENDPOINT_ENCODED_SIZE) ==
             (want.qpn >= 1 && want.qpn <= 0xFFFFFFu && ep.psn <= 0xFFFFFFu && fz_mtu_ok(want.mtu) &&
              (want.has_gid ? !fz_gid_no_port_has(want.gid.raw) : fz_zero(want.gid.raw, 16))));

    memset(&got, 0xA5, sizeof got);
    r = sfv_endpoint_decode(bytes, SFV_ENDPOINT_ENCODED_SIZE, &got);
    if (in_range) FZ_CHECK(r == SFV_OK && fz_endpoint_eq(&got, &ep));
    if (r == SFV_OK) {
        FZ_CHECK(fz_endpoint_eq(&got, &want));
        fz_check_endpoint_fields(&got);
    } else {
        FZ_CHECK(!fz_endpoint_valid(bytes, SFV_ENDPOINT_ENCODED_SIZE));
        fz_check_failure(r);
        FZ_CHECK(fz_endpoint_is_zero(&got));
    }
    free(bytes);
}

static void fz_remote_mr_roundtrip(fz_bytes *b) {
    uint8_t *bytes = (uint8_t *)malloc(SFV_REMOTE_MR_ENCODED_SIZE);
    const uint64_t addr = fz_take(b, 8);
    const uint64_t length = fz_take(b, 8);
    const uint32_t rkey = (uint32_t)fz_take(b, 4);
    const sfv_remote_mr r = sfv_remote_mr_make(addr, length, rkey);
    sfv_remote_mr got;
    sfv_result res;

    FZ_CHECK(sfv_remote_mr_addr(r) == addr && sfv_remote_mr_length(r) == length && sfv_remote_mr_rkey(r) == rkey);
    sfv_remote_mr_encode(r, bytes);
    memset(&got, 0xA5, sizeof got);
    res = sfv_remote_mr_decode(bytes, SFV_REMOTE_MR_ENCODED_SIZE, &got);
    if (fz_no_wrap(addr, length)) {
        FZ_CHECK(res == SFV_OK && fz_remote_mr_eq(got, r));
    } else {
        FZ_CHECK(res == SFV_ERR_INVALID);
        fz_check_failure(res);
        FZ_CHECK(fz_remote_mr_is_zero(got));
    }
    free(bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_bytes b;
    b.p = data;
    b.n = size;
    fz_endpoint_roundtrip(&b);
    fz_remote_mr_roundtrip(&b);
    return 0;
}
