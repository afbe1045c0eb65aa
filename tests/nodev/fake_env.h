/* fake_env.h - what the tests on the fake NIC share: safeverbs.h built with the fake's counted
   allocator (fk_malloc: told when to fail, and what is left is counted) and the harness, and the
   set-up of a device, a PD and one registered buffer (tf_open, tf_close: nothing may be left),
   channels connected through the endpoint's wire format (tf_connect, tf_pair). Included once, by
   the test file, before anything else. */
#ifndef FAKE_ENV_H
#define FAKE_ENV_H
#ifndef _GNU_SOURCE /* (C++ compilers define it) */
#define _GNU_SOURCE
#endif
#include "fake_verbs.h" /* the allocator safeverbs.h is given: counted, and told when to fail */
#define SFV_MALLOC(sz) fk_malloc(sz)
#define SFV_CALLOC(n, sz) fk_calloc(n, sz)
#define SFV_FREE(p) fk_free(p)
#define SFV__ABORT_DRAIN_NS 300000000ull /* 0.3 s: the tests of a NIC that never flushes (fk_set_no_flush) wait that long */
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "harness.h"

typedef struct tf_env {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    unsigned char *buf;
    size_t len;
} tf_env;

static inline void tf_open(tf_env *e, size_t len) {
    memset(e, 0, sizeof *e);
    e->len = len;
    e->buf = (unsigned char *)calloc(1, len);
    CHECK(e->buf);
    CHECK_OK(sfv_open_device(NULL, &e->ctx));
    CHECK_OK(sfv_alloc_pd(e->ctx, &e->pd));
    CHECK_OK(sfv_reg_mr_shared(e->pd, e->buf, len, &e->mr));
}

/* Tears down and checks that the fake holds nothing any more. */
static inline void tf_close(tf_env *e) {
    sfv_dereg_mr(e->mr);
    sfv_dealloc_pd(e->pd);
    sfv_close_device(e->ctx);
    free(e->buf);
    CHECK_EQ(fk_live_total(), 0);
}

static inline void tf_connect(sfv_channel *a, sfv_channel *b) {
    sfv_endpoint ea, eb;
    uint8_t blob[SFV_ENDPOINT_ENCODED_SIZE];
    CHECK_OK(sfv_channel_endpoint(a, &ea));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    sfv_endpoint_encode(&ea, blob); /* through the wire format, as a program does */
    CHECK_OK(sfv_endpoint_decode(blob, sizeof blob, &ea));
    CHECK_OK(sfv_channel_handshake(b, &ea));
    if (a != b) CHECK_OK(sfv_channel_handshake(a, &eb));
}

static inline void tf_pair(tf_env *e, const sfv_channel_desc *d, sfv_channel **a, sfv_channel **b) {
    CHECK_OK(sfv_create_channel(e->pd, d, a));
    CHECK_OK(sfv_create_channel(e->pd, d, b));
    tf_connect(*a, *b);
}

/* Two multi-channels of 2 connected to each other (m1's peer i to m2's peer i), deadline
   timeout_ms (0: the desc's default). */
static inline void tf_mc_pair(tf_env *e, uint32_t timeout_ms, sfv_multi_channel **m1, sfv_multi_channel **m2) {
    sfv_channel_desc d;
    sfv_endpoint e1[2], e2[2];
    memset(&d, 0, sizeof d);
    d.timeout_ms = timeout_ms;
    CHECK_OK(sfv_create_multi_channel(e->pd, 2, &d, m1));
    CHECK_OK(sfv_create_multi_channel(e->pd, 2, &d, m2));
    CHECK_OK(sfv_multi_channel_endpoints(*m1, e1, 2));
    CHECK_OK(sfv_multi_channel_endpoints(*m2, e2, 2));
    CHECK_OK(sfv_multi_channel_handshake(*m1, e2, 2));
    CHECK_OK(sfv_multi_channel_handshake(*m2, e1, 2));
}

/* A port on 127.0.0.1 free a moment ago (the kernel's pick; closed again). */
static inline uint16_t tf_free_port(void) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* The last error's message holds `sub`. */
#define CHECK_MSG(sub)                                                                             \
    do {                                                                                           \
        if (!strstr(sfv_last_error()->message, (sub))) FAIL("last error \"%s\" lacks \"%s\"", sfv_last_error()->message, (sub)); \
    } while (0)

/* 64 bytes of e's MR at `off`, as a peer's remote region. */
static inline sfv_remote_mr tf_at(const tf_env *e, size_t off) { return sfv_remote_mr_make(sfv_mr_addr(e->mr) + off, 64, sfv_mr_rkey(e->mr)); }

/* Two ranks of a node (desc d, world_size 2) on e's PD, made and handshaken with each other. */
static inline void tf_node_pair(tf_env *e, sfv_node_desc *d, sfv_node *nodes[2]) {
    uint8_t all[2 * SFV_NODE_ENDPOINT_SIZE(2)];
    const size_t each = SFV_NODE_ENDPOINT_SIZE(2);
    size_t r;
    d->world_size = 2;
    for (r = 0; r < 2; r++) {
        d->rank = r;
        CHECK_OK(sfv_create_node(e->pd, d, &nodes[r]));
        CHECK_OK(sfv_node_endpoint(nodes[r], all + r * each, each));
    }
    for (r = 0; r < 2; r++) CHECK_OK(sfv_node_handshake(nodes[r], all, sizeof all));
}

#endif
