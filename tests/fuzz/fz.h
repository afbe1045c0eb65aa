/* fz.h - what the fuzz targets in tests/fuzz/ share. Include it after safeverbs.h (with its
   implementation).

   FZ_CHECK(c) stops the run when a property does not hold: abort() is a finding for libFuzzer,
   which saves the input. The fz_*_valid functions say whether bytes are a well-formed encoding,
   written from the formats as safeverbs.h documents them and without its decoders, so that a
   target can hold the decoder's verdict against an independent one. */
#ifndef FZ_H
#define FZ_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_CHECK(c)                                                                          \
    do {                                                                                     \
        if (!(c)) {                                                                          \
            fprintf(stderr, "%s:%d: property does not hold: %s\n", __FILE__, __LINE__, #c);  \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads fuzz bytes as values; past the end it gives zeros. */
typedef struct fz_bytes { const uint8_t *p; size_t n; } fz_bytes;
static inline uint64_t fz_take(fz_bytes *b, int bytes) {
    uint64_t v = 0;
    int i;
    for (i = 0; i < bytes; i++) {
        v = (v << 8) | (b->n ? *b->p : 0);
        if (b->n) b->p++, b->n--;
    }
    return v;
}

static inline uint64_t fz_be(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    int i;
    for (i = 0; i < bytes; i++) v = (v << 8) | p[i];
    return v;
}
static inline int fz_zero(const uint8_t *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}
static inline int fz_mtu_ok(uint64_t mtu) {
    return mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096;
}
/* [addr, addr + length) stays below 2^64 (it may end exactly there). */
static inline int fz_no_wrap(uint64_t addr, uint64_t length) {
    return length == 0 || addr <= UINT64_MAX - (length - 1);
}

/* A GID no port has: all zero, multicast (ff00::/8, IPv4-mapped 224.0.0.0/4), IPv4-mapped 0.0.0.0. */
static inline int fz_gid_no_port_has(const uint8_t *g) {
    static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return fz_zero(g, 16) || g[0] == 0xff || (memcmp(g, v4, 12) == 0 && ((g[12] >= 224 && g[12] <= 239) || fz_zero(g + 12, 4)));
}

/* The endpoint as documented: "SE", version 1 or 2, flags (bit 0: has a GID), qpn (4 bytes,
   1 .. 2^24-1), lid (2), mtu (2: 256 .. 4096), read depth (1: 0 in version 1, not 0 in version
   2), psn (3), gid (16: all zero without the flag; with it, not one no port has). */
static inline int fz_endpoint_valid(const uint8_t *b, size_t size) {
    uint64_t qpn;
    if (size < SFV_ENDPOINT_ENCODED_SIZE) return 0;
    if (b[0] != 'S' || b[1] != 'E' || (b[2] != 1 && b[2] != 2) || (b[3] & 0xFE)) return 0;
    qpn = fz_be(b + 4, 4);
    if (qpn == 0 || qpn > 0xFFFFFF) return 0;
    if (!fz_mtu_ok(fz_be(b + 10, 2))) return 0;
    if ((b[2] == 1) != (b[12] == 0)) return 0;
    if (!(b[3] & 1) && !fz_zero(b + 16, 16)) return 0;
    if ((b[3] & 1) && fz_gid_no_port_has(b + 16)) return 0;
    return 1;
}

/* The remote region as documented: "SR", version 1, 0, addr (8), length (8), rkey (4), and
   addr + length does not wrap. */
static inline int fz_remote_mr_valid(const uint8_t *b, size_t size) {
    if (size < SFV_REMOTE_MR_ENCODED_SIZE) return 0;
    if (b[0] != 'S' || b[1] != 'R' || b[2] != 1 || b[3] != 0) return 0;
    return fz_no_wrap(fz_be(b + 4, 8), fz_be(b + 12, 8));
}

static inline int fz_gid_eq(const sfv_gid *a, const sfv_gid *b) { return memcmp(a->raw, b->raw, 16) == 0; }
static inline int fz_endpoint_eq(const sfv_endpoint *a, const sfv_endpoint *b) {
    return a->qpn == b->qpn && a->lid == b->lid && a->psn == b->psn && a->mtu == b->mtu &&
           a->rd_atomic == b->rd_atomic && a->has_gid == b->has_gid && fz_gid_eq(&a->gid, &b->gid);
}
static inline int fz_remote_mr_eq(sfv_remote_mr a, sfv_remote_mr b) {
    return a.addr == b.addr && a.length == b.length && a.rkey == b.rkey;
}
static inline int fz_endpoint_is_zero(const sfv_endpoint *e) {
    sfv_endpoint z;
    memset(&z, 0, sizeof z);
    return fz_endpoint_eq(e, &z);
}
static inline int fz_remote_mr_is_zero(sfv_remote_mr r) { return r.addr == 0 && r.length == 0 && r.rkey == 0; }

/* A decoded endpoint's fields are in range. */
static inline void fz_check_endpoint_fields(const sfv_endpoint *e) {
    static const sfv_gid zero = {{0}};
    FZ_CHECK(e->qpn >= 1 && e->qpn <= 0xFFFFFF);
    FZ_CHECK(e->psn <= 0xFFFFFF);
    FZ_CHECK(fz_mtu_ok(e->mtu));
    FZ_CHECK(e->has_gid || fz_gid_eq(&e->gid, &zero));
    FZ_CHECK(!e->has_gid || !fz_gid_no_port_has(e->gid.raw));
}

/* Leaves a failure on this thread, so that a call that succeeds can be seen not to touch it. */
static inline void fz_prime_error(void) {
    sfv_remote_mr r;
    FZ_CHECK(sfv_remote_mr_decode(NULL, 0, &r) == SFV_ERR_INVALID);
}
typedef struct fz_error { sfv_result result; int errnum; const char *verb; char message[sizeof sfv_last_error()->message]; } fz_error;
static inline fz_error fz_error_now(void) {
    fz_error e;
    const sfv_error *l = sfv_last_error();
    e.result = l->result;
    e.errnum = l->errnum;
    e.verb = l->verb;
    memcpy(e.message, l->message, sizeof e.message);
    return e;
}
/* A success left the last failure as it was. */
static inline void fz_check_error_kept(const fz_error *before) {
    const sfv_error *l = sfv_last_error();
    FZ_CHECK(l->result == before->result && l->errnum == before->errnum && l->verb == before->verb);
    FZ_CHECK(memcmp(l->message, before->message, sizeof before->message) == 0);
}
/* A failure is recorded: the result the call returned, a verb and a message. */
static inline void fz_check_failure(sfv_result r) {
    const sfv_error *l = sfv_last_error();
    FZ_CHECK(r < 0);
    FZ_CHECK(l->result == r);
    FZ_CHECK(l->verb != NULL && l->verb[0] != '\0');
    FZ_CHECK(l->message[0] != '\0' && memchr(l->message, '\0', sizeof l->message) != NULL);
}

#endif /* FZ_H */
