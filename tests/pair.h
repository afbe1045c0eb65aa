/* pair.h - two sides of a channel for the device tests (include after harness.h). A side is a
   device, a PD, a buffer registered with the access asked for, and a channel on them; a pair is
   side a on test_device(0) and side b on test_device(1), connected over their chosen GIDs.
   PAIR_BUF (bytes per side) may be defined before including it; default 64 KiB. */
#ifndef SAFEVERBS_TESTS_PAIR_H
#define SAFEVERBS_TESTS_PAIR_H

#include <stdlib.h>
#include <string.h>

#ifndef PAIR_BUF
#define PAIR_BUF (1u << 16)
#endif
#define BUF PAIR_BUF

typedef struct side {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_channel *ch;
    sfv_mr *mr;
    char *buf;
} side;

/* What a peer may do to a side's buffer: read it, write it. */
static const unsigned SHARED = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_WRITE;

static inline sfv_channel_desc desc_default(void) {
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    return d;
}

/* A side on `buf` (PAIR_BUF bytes, the side's to free), registered with `access`. */
static inline side side_open_on(const char *dev, const sfv_channel_desc *d, unsigned access, char *buf) {
    side s;
    s.buf = buf;
    CHECK(s.buf != NULL);
    CHECK_OK(sfv_open_device(dev, &s.ctx));
    CHECK_OK(sfv_alloc_pd(s.ctx, &s.pd));
    CHECK_OK(sfv_reg_mr_access(s.pd, s.buf, PAIR_BUF, access, &s.mr));
    CHECK_OK(sfv_create_channel(s.pd, d, &s.ch));
    return s;
}
/* A side on a zeroed, page-aligned buffer. */
static inline side side_open(const char *dev, const sfv_channel_desc *d, unsigned access) {
    char *buf = (char *)aligned_alloc(4096, PAIR_BUF);
    if (buf) memset(buf, 0, PAIR_BUF);
    return side_open_on(dev, d, access, buf);
}
static inline void side_close(side *s) {
    CHECK_OK(sfv_destroy_channel(s->ch));
    CHECK_OK(sfv_dereg_mr(s->mr));
    CHECK_OK(sfv_dealloc_pd(s->pd));
    CHECK_OK(sfv_close_device(s->ctx));
    free(s->buf);
}
static inline void connect_pair(side *a, side *b) {
    sfv_endpoint ea, eb;
    CHECK_OK(sfv_channel_endpoint(a->ch, &ea));
    CHECK_OK(sfv_channel_endpoint(b->ch, &eb));
    CHECK_OK(sfv_channel_handshake(a->ch, &eb));
    CHECK_OK(sfv_channel_handshake(b->ch, &ea));
}
/* a on rxe0 (SHARED), b on rxe1 (access_b), connected. */
static inline void pair_open(side *a, side *b, const sfv_channel_desc *da, const sfv_channel_desc *db, unsigned access_b) {
    *a = side_open(test_device(0), da, SHARED);
    *b = side_open(test_device(1), db, access_b);
    connect_pair(a, b);
}
static inline void pair_close(side *a, side *b) {
    side_close(a);
    side_close(b);
}

#endif
