/* fuzz_remote_mr_decode.c - sfv_remote_mr_decode on any bytes, as a peer may send them, then
   the region arithmetic a program does on what a peer sent.
   Properties: it accepts exactly the encodings fz_remote_mr_valid describes; on success
   addr + length does not wrap past 2^64, re-encoding gives back the 24 bytes it read (the format
   is canonical), bytes after them change nothing, a shorter input is refused, and the last error
   is left as it was; on failure the output is zeroed and sfv_last_error() holds the returned
   result. On the decoded region, with offsets and lengths from the bytes after the 24:
   sfv_remote_mr_slice, _sub and _array_field succeed exactly when the part lies inside the
   region, and then give that part (same rkey); on failure a zeroed output and a recorded
   error; the _unchecked forms never wrap.
   Build and run: make fuzz (or make check-fuzz). */
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "fz.h"

/* [off, off + len) lies inside r and starts at an address (a region that ends at 2^64 has no
   address for an empty part at its end). */
static int fz_inside(sfv_remote_mr r, uint64_t off, uint64_t len) {
    return off <= r.length && len <= r.length - off && off <= UINT64_MAX - r.addr;
}
/* part lies inside r and is [r.addr + off, + len) with r's key. */
static void fz_check_part(sfv_remote_mr r, uint64_t off, uint64_t len, sfv_remote_mr part) {
    FZ_CHECK(fz_inside(r, off, len));
    FZ_CHECK(part.addr == r.addr + off && part.length == len && part.rkey == r.rkey);
    FZ_CHECK(part.addr >= r.addr && fz_no_wrap(part.addr, part.length));
}
static void fz_check_refused(sfv_result res, sfv_remote_mr part) {
    FZ_CHECK(res == SFV_ERR_SLICE_NOT_WITHIN_BOUNDS || res == SFV_ERR_INVALID);
    fz_check_failure(res);
    FZ_CHECK(fz_remote_mr_is_zero(part));
}

/* length, cut to what fits below 2^64 from addr. */
static uint64_t fz_cut(uint64_t addr, uint64_t length) {
    uint64_t room = addr ? UINT64_MAX - addr + 1 : UINT64_MAX;
    return length < room ? length : room;
}

static void fz_regions(sfv_remote_mr r, fz_bytes *b) {
    const uint64_t off = fz_take(b, 8), len = fz_take(b, 8), elem = fz_take(b, 2), index = fz_take(b, 8);
    const uint64_t foff = fz_take(b, 2), fsize = fz_take(b, 2);
    sfv_remote_mr part;
    sfv_result res;

    memset(&part, 0xA5, sizeof part);
    res = sfv_remote_mr_slice(r, off, len, &part);
    if (fz_inside(r, off, len)) {
        FZ_CHECK(res == SFV_OK);
        fz_check_part(r, off, len, part);
    } else {
        FZ_CHECK(res == SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
        fz_check_refused(res, part);
    }

    memset(&part, 0xA5, sizeof part);
    res = sfv_remote_mr_sub(r, off, &part);
    if (fz_inside(r, off, off <= r.length ? r.length - off : 0)) {
        FZ_CHECK(res == SFV_OK);
        fz_check_part(r, off, r.length - off, part);
    } else {
        fz_check_refused(res, part);
    }

    /* Element `index` of an array of elem-byte items, field [foff, +fsize) of it. */
    memset(&part, 0xA5, sizeof part);
    res = sfv_remote_mr_array_field(r, elem, index, foff, fsize, &part);
    if (elem == 0 || foff > elem || fsize > elem - foff) {
        FZ_CHECK(res == SFV_ERR_INVALID);
        fz_check_failure(res);
    } else if (foff <= r.length && index <= (r.length - foff) / elem && fz_inside(r, index * elem + foff, fsize)) {
        /* The library takes an offset of exactly 2^64-1 for an overflow (its saturation mark), so
           it refuses the one part that starts there: empty, at the end of a 2^64-1-byte region. */
        if (index * elem + foff == UINT64_MAX) {
            FZ_CHECK(res == SFV_OK || res == SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
        } else {
            FZ_CHECK(res == SFV_OK);
        }
        if (res == SFV_OK) fz_check_part(r, index * elem + foff, fsize, part);
        else fz_check_refused(res, part);
    } else {
        fz_check_refused(res, part);
    }

    /* No check against the length, but never a wrap: the address saturates at 2^64-1 and the
       length is cut to what fits below 2^64. */
    part = sfv_remote_mr_sub_unchecked(r, off);
    FZ_CHECK(part.addr >= r.addr && part.length <= r.length && part.rkey == r.rkey);
    FZ_CHECK(fz_no_wrap(part.addr, part.length));
    part = sfv_remote_mr_slice_unchecked(r, off, len);
    FZ_CHECK(part.addr >= r.addr && part.length == fz_cut(part.addr, len) && fz_no_wrap(part.addr, part.length));
    part = sfv_remote_mr_array_field_unchecked(r, elem, index, foff, fsize);
    FZ_CHECK(part.addr >= r.addr && part.length == fz_cut(part.addr, fsize) && fz_no_wrap(part.addr, part.length));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sfv_remote_mr r, again;
    uint8_t bytes[SFV_REMOTE_MR_ENCODED_SIZE];
    fz_error before;
    fz_bytes rest;
    sfv_result res;

    fz_prime_error();
    before = fz_error_now();
    memset(&r, 0xA5, sizeof r);
    res = sfv_remote_mr_decode(data, size, &r);
    FZ_CHECK(res == SFV_OK || res == SFV_ERR_INVALID);
    FZ_CHECK((res == SFV_OK) == fz_remote_mr_valid(data, size));
    if (res != SFV_OK) {
        fz_check_failure(res);
        FZ_CHECK(fz_remote_mr_is_zero(r));
        return 0;
    }
    fz_check_error_kept(&before);
    FZ_CHECK(fz_no_wrap(r.addr, r.length));
    FZ_CHECK(r.addr == fz_be(data + 4, 8) && r.length == fz_be(data + 12, 8) && r.rkey == fz_be(data + 20, 4));

    sfv_remote_mr_encode(r, bytes);
    FZ_CHECK(memcmp(bytes, data, sizeof bytes) == 0);

    memset(&again, 0xA5, sizeof again);
    FZ_CHECK(sfv_remote_mr_decode(data, SFV_REMOTE_MR_ENCODED_SIZE, &again) == SFV_OK);
    FZ_CHECK(fz_remote_mr_eq(again, r));
    memset(&again, 0xA5, sizeof again);
    res = sfv_remote_mr_decode(data, SFV_REMOTE_MR_ENCODED_SIZE - 1, &again);
    FZ_CHECK(res == SFV_ERR_INVALID);
    fz_check_failure(res);
    FZ_CHECK(fz_remote_mr_is_zero(again));

    rest.p = data + SFV_REMOTE_MR_ENCODED_SIZE;
    rest.n = size - SFV_REMOTE_MR_ENCODED_SIZE;
    fz_regions(r, &rest);
    return 0;
}
