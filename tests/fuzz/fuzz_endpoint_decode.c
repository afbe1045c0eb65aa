/* fuzz_endpoint_decode.c - sfv_endpoint_decode on any bytes, as a peer may send them.
   Properties: it accepts exactly the encodings fz_endpoint_valid describes; on success every
   field is in range (qpn 1 .. 2^24-1, psn 24 bits, mtu 256 .. 4096, no GID bytes without the
   flag, with it no GID that no port has), re-encoding gives back the 32 bytes it read (the
   format is canonical), bytes after them change nothing, a shorter input is refused, and the
   last error is left as it was; on failure the output is zeroed and sfv_last_error() holds the
   returned result.
   Build and run: make fuzz (or make check-fuzz). */
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "fz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sfv_endpoint ep, again;
    uint8_t bytes[SFV_ENDPOINT_ENCODED_SIZE];
    fz_error before;
    sfv_result r;

    fz_prime_error();
    before = fz_error_now();
    memset(&ep, 0xA5, sizeof ep);
    r = sfv_endpoint_decode(data, size, &ep);
    FZ_CHECK(r == SFV_OK || r == SFV_ERR_INVALID);
    FZ_CHECK((r == SFV_OK) == fz_endpoint_valid(data, size));
    if (r != SFV_OK) {
        fz_check_failure(r);
        FZ_CHECK(fz_endpoint_is_zero(&ep));
        return 0;
    }
    fz_check_error_kept(&before);
    fz_check_endpoint_fields(&ep);
    FZ_CHECK(ep.lid == fz_be(data + 8, 2));
    FZ_CHECK(ep.has_gid == (data[3] & 1));
    FZ_CHECK(ep.rd_atomic == (data[2] == 2 ? data[12] : 0));

    sfv_endpoint_encode(&ep, bytes);
    FZ_CHECK(memcmp(bytes, data, sizeof bytes) == 0);

    /* Only the first 32 bytes count; one fewer is too short. */
    memset(&again, 0xA5, sizeof again);
    FZ_CHECK(sfv_endpoint_decode(data, SFV_ENDPOINT_ENCODED_SIZE, &again) == SFV_OK);
    FZ_CHECK(fz_endpoint_eq(&again, &ep));
    memset(&again, 0xA5, sizeof again);
    r = sfv_endpoint_decode(data, SFV_ENDPOINT_ENCODED_SIZE - 1, &again);
    FZ_CHECK(r == SFV_ERR_INVALID);
    fz_check_failure(r);
    FZ_CHECK(fz_endpoint_is_zero(&again));
    return 0;
}
