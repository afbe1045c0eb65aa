/* sfv_bench.c - safeverbs against the same work written directly on libibverbs.

   One program, both sides, both implementations: the harness (timing, statistics, the TCP
   exchange, the order of runs) is shared, and only the data path differs. `--impl sfv` posts and
   waits through safeverbs' channel; `--impl raw` does the same work with ibv_post_send,
   ibv_post_recv and ibv_poll_cq, the way a careful user writes it: a queue pair with the same
   capabilities, MTU, GID, retry and RNR settings as the channel, the work request and its
   elements built once per run and reused, one signaled work request per post (unless batched),
   completions polled 16 at a time. `--impl both` runs the two alternately, A-B-B-A for every
   message size, so slow drift of the machine hits both alike.

   Tests (the client decides everything and tells the server over the TCP connection):
     --test lat   ping-pong latency. send: send, the peer echoes a send. write: RDMA write into
                  the peer's buffer, the peer spins on the last byte and writes back (as
                  ib_write_lat). write_imm: RDMA write with immediate, the peer's receive
                  completion is the signal. read: RDMA read from the peer (the peer stays idle).
                  Prints median, p99 and mean per message size: half the round trip for send
                  and write (as perftest), the whole round trip for read.
     --test bw    the client keeps --depth work requests in flight (write, read or send; the
                  server keeps --rx-depth receives posted); MiB/s and thousands of messages/s.
                  --batch N posts N work requests per call (safeverbs' batches: one doorbell,
                  the last one signaled; raw: a linked list, the last one signaled).
     --test cost  one process, a channel (or QP) connected to itself on one device: posts a
                  receive and a send, lets the completions arrive, then polls them. The post
                  and poll steps are the functions cost_<impl>_*, for valgrind's callgrind
                  (--toggle-collect='cost_*'). Prints heap allocations per operation.
                  --impl hand (this test only): raw verbs with the least tracking that gives
                  safeverbs' guarantees (per-request records, a channel state, a capacity
                  check, a sequence number per request; see "hand-tracked raw verbs").
                  --impl inject (this test only): sfv_channel_inject from plain memory (inline,
                  no send completion to wait for) and the receive, as fi_inject is used.
   Every timed loop counts heap allocations (malloc, calloc, realloc, posix_memalign are counted
   through an interposed wrapper); the count is printed per operation.

       build/sfv_bench -d rxe0 [-p PORT]                                          server
       build/sfv_bench -d rxe1 [-p PORT] --test lat --op send --sizes 8,64 127.0.0.1   client
       build/sfv_bench -d rxe0 --test cost --impl sfv -n 1000                     loopback cost

   Options (client): --test, --op send|write|write_imm|read, --impl sfv|raw|both (cost: also hand, inject),
   --sizes LIST (bytes; k and m suffixes), -n/--iters N (per implementation and size; 0: by
   time), --time SEC (time per implementation and size when -n is 0), --min-iters, --max-iters,
   --warmup N, --wait busy|event, --inline BYTES (max_inline_data; sends that fit go inline),
   --depth N (send queue), --rx-depth N, --batch N, --variant NAME (a label for the output),
   --rounds R (A-B-B-A repeated R times per size: slow drift of the machine hits both alike),
   --block-ms MS (instead of --rounds: as many A-B-B-A rounds as make runs of about MS ms each),
   --dump FILE (every latency sample: impl,size,run,us), --echo-delay-us N (the server pauses
   before each echo, so that every wait of the client blocks: for counting system calls).
   Both sides: -d DEVICE, -p PORT (18600), -x GID index (1), --settle-us N (cost test).
   Results are lines on stdout: result,TEST,OP,VARIANT,SIZE,IMPL,METRIC,VALUE (bench/run.sh
   collects them into bench/results.csv). */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "../examples/tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <valgrind/callgrind.h> /* CALLGRIND_ZERO_STATS, for the cost test (valgrind: tools/deps.sh) */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
#define NOINLINE __attribute__((noinline, noclone))
#else
#define NOINLINE __attribute__((noinline))
#endif
#define MAX_SIZES 32
#define MAX_BATCH SFV_BATCH_MAX
#define POLL_BATCH 16 /* completions per ibv_poll_cq, as safeverbs' channel polls */

/* ---- heap allocation counter ----------------------------------------------------------------
   Interposes the allocation functions of this process (libibverbs and its provider included)
   and counts the calls; glibc's own entry points do the work. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static unsigned long g_allocs;
static void count_alloc(void) { __atomic_fetch_add(&g_allocs, 1, __ATOMIC_RELAXED); }
static unsigned long allocs_now(void) { return __atomic_load_n(&g_allocs, __ATOMIC_RELAXED); }
void *malloc(size_t n) { count_alloc(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { count_alloc(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { count_alloc(); return __libc_realloc(p, n); }
int posix_memalign(void **out, size_t align, size_t n) {
    void *p;
    count_alloc();
    if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
    p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

/* ---- errors ---------------------------------------------------------------------------------- */
static const char *g_role = "sfv_bench";

static void die(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: ", g_role);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

/* A safeverbs call that must succeed. */
static void xmust(sfv_result r, const char *what) {
    if (r != SFV_OK) die("%s: %s (%s)", what, sfv_result_str(r), sfv_last_error()->message);
}

/* ---- time ------------------------------------------------------------------------------------
   Per-iteration samples use the time-stamp counter: in the QEMU guest the clocksource is the
   HPET, so clock_gettime is a system call that costs more than a verb. Each run converts ticks
   with the rate it measured against CLOCK_MONOTONIC over the same run. */
static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static inline uint64_t ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#else
    return mono_ns();
#endif
}
static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

/* One timed run: wall time, ticks, CPU time and allocations between start and stop. */
typedef struct span {
    uint64_t ns0, ns1, t0, t1;
    double cpu0, cpu1;
    unsigned long a0, a1;
} span;
static void span_start(span *s) {
    s->cpu0 = cpu_seconds();
    s->ns0 = mono_ns();
    s->t0 = ticks();
    s->a0 = allocs_now();
}
static void span_stop(span *s) {
    s->a1 = allocs_now();
    s->t1 = ticks();
    s->ns1 = mono_ns();
    s->cpu1 = cpu_seconds();
}
static double span_us_per_tick(const span *s) {
    return s->t1 > s->t0 ? (double)(s->ns1 - s->ns0) / 1000.0 / (double)(s->t1 - s->t0) : 0.0;
}

/* ---- TCP: the endpoint exchange and the start/stop handshake of every run ------------------- */
/* examples/tcp.h's helpers, with Nagle off (the handshakes are single bytes) and a dial that
   retries while the server is still starting. */
static int tcp_listen_accept(int port) {
    int one = 1, conn = tcp_accept(port);
    if (conn >= 0) setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return conn;
}

static int tcp_dial(const char *host, int port) {
    int fd = -1, one = 1, tries;
    for (tries = 0; tries < 300 && fd < 0; tries++) /* the server may still be starting */
        if ((fd = tcp_connect(host, port)) < 0) usleep(100000);
    if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}
static void send_byte(int fd, char c) {
    if (!write_all(fd, &c, 1)) die("control connection: write failed");
}
static void expect_byte(int fd, char want) {
    char c = 0;
    if (!read_all(fd, &c, 1)) die("control connection closed (waiting for '%c')", want);
    if (c != want) die("control connection: got '%c', expected '%c'", c, want);
}
static void put_be(uint8_t *p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
static uint64_t get_be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

/* ---- configuration ----------------------------------------------------------------------- */
enum test { TEST_LAT = 1, TEST_BW, TEST_COST };
enum op { OP_SEND = 1, OP_WRITE, OP_WRITE_IMM, OP_READ };
enum impl { IMPL_SFV = 0, IMPL_RAW = 1, IMPL_HAND = 2, IMPL_INJECT = 3, IMPL_HAND_INJECT = 4, IMPL_HAND_BUILT = 5 /* hand, inject, handinject, handbuilt: the cost test only */ };
static const char *const TEST_NAMES[] = {"", "lat", "bw", "cost"};
static const char *const OP_NAMES[] = {"", "send", "write", "write_imm", "read"};
static const char *const IMPL_NAMES[] = {"sfv", "raw", "hand", "inject", "handinject", "handbuilt"};

/* What both sides must agree on: sent by the client as one text line. */
typedef struct session {
    int test, op;
    unsigned impls;        /* bit 1 << IMPL_* */
    bool event;            /* SFV_WAIT_EVENT / completion channel */
    unsigned inline_size;  /* max_inline_data */
    unsigned depth;        /* send queue: max_send_wr, work requests in flight */
    unsigned rx_depth;     /* receive queue: max_recv_wr, receives kept posted */
    size_t max_size;
    unsigned echo_delay_us; /* the server sleeps this long before each echo (lat send, write_imm) */
} session;

typedef struct options {
    session s;
    const char *device, *host, *variant;
    FILE *dump;              /* --dump FILE: every latency sample (impl,size,run,us) */
    int port, gid, iters, warmup, min_iters, max_iters, settle_us, batch, rounds, block_ms;
    double time_s;
    size_t sizes[MAX_SIZES];
    int nsizes;
} options;

static int name_index(const char *const *names, int n, const char *s) {
    for (int i = 1; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return 0;
}

static size_t parse_size(const char *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K') v <<= 10, end++;
    else if (*end == 'm' || *end == 'M') v <<= 20, end++;
    if (*end || v == 0 || v > (1u << 30)) die("bad size '%s'", s);
    return (size_t)v;
}

static void session_format(const session *s, char *out, size_t n) {
    snprintf(out, n, "test=%d op=%d impls=%u event=%d inline=%u depth=%u rx_depth=%u max_size=%zu delay=%u\n", s->test,
             s->op, s->impls, s->event ? 1 : 0, s->inline_size, s->depth, s->rx_depth, s->max_size, s->echo_delay_us);
}
static bool session_parse(const char *line, session *s) {
    int ev = 0;
    memset(s, 0, sizeof *s);
    if (sscanf(line, "test=%d op=%d impls=%u event=%d inline=%u depth=%u rx_depth=%u max_size=%zu delay=%u", &s->test,
               &s->op, &s->impls, &ev, &s->inline_size, &s->depth, &s->rx_depth, &s->max_size, &s->echo_delay_us) != 9)
        return false;
    s->event = ev != 0;
    return s->test >= TEST_LAT && s->test <= TEST_BW && s->op >= OP_SEND && s->op <= OP_READ && s->impls &&
           s->impls <= 3 && s->depth >= 1 && s->rx_depth >= 1 && s->max_size >= 1;
}

/* One run the client asks for: 6 big-endian 32-bit words. */
typedef struct point {
    uint32_t impl, size, iters, batch, record, end;
} point;
static void point_send(int fd, const point *p) {
    uint8_t b[24];
    put_be(b, p->impl, 4), put_be(b + 4, p->size, 4), put_be(b + 8, p->iters, 4);
    put_be(b + 12, p->batch, 4), put_be(b + 16, p->record, 4), put_be(b + 20, p->end, 4);
    if (!write_all(fd, b, sizeof b)) die("control connection: write failed");
}
static bool point_recv(int fd, point *p) {
    uint8_t b[24];
    if (!read_all(fd, b, sizeof b)) return false;
    p->impl = (uint32_t)get_be(b, 4), p->size = (uint32_t)get_be(b + 4, 4), p->iters = (uint32_t)get_be(b + 8, 4);
    p->batch = (uint32_t)get_be(b + 12, 4), p->record = (uint32_t)get_be(b + 16, 4), p->end = (uint32_t)get_be(b + 20, 4);
    return true;
}

/* ---- buffers ---------------------------------------------------------------------------------
   Each implementation has its own buffer: [0, half) is what this side sends or writes from,
   [half, 2 * half) is where the peer's sends, writes and this side's reads land. */
static uint8_t *buffer_alloc(size_t half) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, 2 * half) != 0) die("out of memory (%zu bytes)", 2 * half);
    memset(p, 0, 2 * half);
    return p;
}
static size_t half_of(size_t max_size) { return (max_size + 4095) & ~(size_t)4095; }

/* ---- the safeverbs side ------------------------------------------------------------------- */
typedef struct lib_side {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_channel *ch;
    uint8_t *buf;
    size_t half;
    sfv_remote_mr peer;     /* the peer's whole buffer */
    sfv_pending *ring;      /* pending handles: rx_depth (receives) + depth (sends) */
    sfv_pending *rx_ring, *tx_ring;
} lib_side;

#define WIRE_SIZE (SFV_ENDPOINT_ENCODED_SIZE + SFV_REMOTE_MR_ENCODED_SIZE)

static void lib_side_open(lib_side *s, const char *dev, int gid, const session *ss) {
    sfv_channel_desc d;
    memset(s, 0, sizeof *s);
    s->half = half_of(ss->max_size);
    s->buf = buffer_alloc(s->half);
    xmust(sfv_open_device(dev, &s->ctx), "sfv_open_device");
    xmust(sfv_alloc_pd(s->ctx, &s->pd), "sfv_alloc_pd");
    xmust(sfv_reg_mr_shared(s->pd, s->buf, 2 * s->half, &s->mr), "sfv_reg_mr_shared");
    memset(&d, 0, sizeof d);
    d.max_send_wr = ss->depth;
    d.max_recv_wr = ss->rx_depth;
    d.max_send_sge = 1;
    d.max_recv_sge = 1;
    d.max_inline_data = ss->inline_size ? ss->inline_size : SFV_INLINE_NONE; /* 0: none, as the raw side */
    d.gid_index_set = true;
    d.gid_index = (uint8_t)gid;
    d.timeout_ms = 60000;
    d.wait_mode = ss->event ? SFV_WAIT_EVENT : SFV_WAIT_BUSY;
    xmust(sfv_create_channel(s->pd, &d, &s->ch), "sfv_create_channel");
    s->ring = calloc((size_t)ss->rx_depth + ss->depth, sizeof *s->ring);
    if (!s->ring) die("out of memory");
    s->rx_ring = s->ring;
    s->tx_ring = s->ring + ss->rx_depth;
}

static void lib_side_wire(const lib_side *s, uint8_t *out) {
    sfv_endpoint me;
    xmust(sfv_channel_endpoint(s->ch, &me), "sfv_channel_endpoint");
    sfv_endpoint_encode(&me, out);
    sfv_remote_mr_encode(sfv_mr_remote(s->mr), out + SFV_ENDPOINT_ENCODED_SIZE);
}

static void lib_side_connect(lib_side *s, const uint8_t *peer) {
    sfv_endpoint ep;
    xmust(sfv_endpoint_decode(peer, SFV_ENDPOINT_ENCODED_SIZE, &ep), "sfv_endpoint_decode");
    xmust(sfv_remote_mr_decode(peer + SFV_ENDPOINT_ENCODED_SIZE, SFV_REMOTE_MR_ENCODED_SIZE, &s->peer),
             "sfv_remote_mr_decode");
    xmust(sfv_channel_handshake(s->ch, &ep), "sfv_channel_handshake");
}

static void lib_side_close(lib_side *s) {
    xmust(sfv_destroy_channel(s->ch), "sfv_destroy_channel");
    sfv_dereg_mr(s->mr);
    sfv_dealloc_pd(s->pd);
    sfv_close_device(s->ctx);
    free(s->ring);
    free(s->buf);
}

/* Waits for work whose result is all the caller needs (as raw_wait checks only the status of a
   send completion); the detail of a failure is still there for the message. */
static void lib_wait(sfv_pending *p) {
    sfv_result r = sfv_pending_wait(p, -1, NULL);
    if (r == SFV_ERR_WORK) {
        sfv_work_completion wc;
        (void)!sfv_pending_poll(p, &wc); /* its result is in wc */
        die("work failed: %s (%s)", sfv_wc_status_str(wc.status), sfv_wc_status_hint(wc.status));
    }
    xmust(r, "sfv_pending_wait");
}
static void lib_wait_len(sfv_pending *p, uint32_t len) {
    sfv_work_completion wc;
    sfv_result r = sfv_pending_wait(p, -1, &wc);
    if (r == SFV_ERR_WORK) die("work failed: %s (%s)", sfv_wc_status_str(wc.status), sfv_wc_status_hint(wc.status));
    xmust(r, "sfv_pending_wait");
    if (wc.byte_len != len) die("received %u bytes, expected %u", (unsigned)wc.byte_len, (unsigned)len);
}

/* The peer's receive half, sliced to `size` bytes (write target), or its send half (read source). */
static sfv_remote_mr lib_peer_dst(const lib_side *s, size_t size) {
    sfv_remote_mr r;
    xmust(sfv_remote_mr_slice(s->peer, s->half, size, &r), "sfv_remote_mr_slice");
    return r;
}
static sfv_remote_mr lib_peer_src(const lib_side *s, size_t size) {
    sfv_remote_mr r;
    xmust(sfv_remote_mr_slice(s->peer, 0, size, &r), "sfv_remote_mr_slice");
    return r;
}

/* ---- the raw verbs side ------------------------------------------------------------------- */
typedef struct raw_side {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_mr *mr;
    struct ibv_comp_channel *cc;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    uint8_t *buf;
    size_t half;
    int gid_index, timeout_ms;
    uint8_t port;
    union ibv_gid gid;
    uint16_t lid;
    enum ibv_mtu mtu;
    uint8_t rd_atomic;
    uint64_t peer_addr;
    uint32_t peer_rkey;
    bool armed;
    /* completions seen, in work requests: wr_id = covered << 1 | is_receive */
    uint64_t sends_done, recvs_done;
    uint32_t expect_len;  /* what every receive must have brought (as lib_wait_len checks) */
} raw_side;

#define RAW_WIRE_SIZE 48

static void raw_side_open(raw_side *r, const char *dev, int gid, const session *ss) {
    struct ibv_device **list;
    struct ibv_device_attr da;
    struct ibv_port_attr pa;
    struct ibv_qp_init_attr qi;
    struct ibv_qp_attr qa;
    int n, i, rd;
    memset(r, 0, sizeof *r);
    r->half = half_of(ss->max_size);
    r->buf = buffer_alloc(r->half);
    r->port = 1;
    r->gid_index = gid;
    r->timeout_ms = 60000;
    list = ibv_get_device_list(&n);
    if (!list) die("ibv_get_device_list: %s", strerror(errno));
    for (i = 0; i < n && !r->ctx; i++)
        if (!dev || strcmp(ibv_get_device_name(list[i]), dev) == 0) r->ctx = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    if (!r->ctx) die("ibv_open_device %s failed", dev ? dev : "(first)");
    if (ibv_query_device(r->ctx, &da) || ibv_query_port(r->ctx, r->port, &pa)) die("ibv_query_device/port failed");
    if (ibv_query_gid(r->ctx, r->port, gid, &r->gid)) die("ibv_query_gid %d failed", gid);
    r->lid = pa.lid;
    r->mtu = pa.active_mtu;
    rd = da.max_qp_rd_atom < da.max_qp_init_rd_atom ? da.max_qp_rd_atom : da.max_qp_init_rd_atom;
    r->rd_atomic = (uint8_t)(rd > 255 ? 255 : rd < 1 ? 1 : rd);
    if (!(r->pd = ibv_alloc_pd(r->ctx))) die("ibv_alloc_pd failed");
    r->mr = ibv_reg_mr(r->pd, r->buf, 2 * r->half, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!r->mr) die("ibv_reg_mr: %s", strerror(errno));
    if (ss->event && !(r->cc = ibv_create_comp_channel(r->ctx))) die("ibv_create_comp_channel failed");
    r->cq = ibv_create_cq(r->ctx, (int)(ss->depth + ss->rx_depth), NULL, r->cc, 0);
    if (!r->cq) die("ibv_create_cq: %s", strerror(errno));
    memset(&qi, 0, sizeof qi);
    qi.send_cq = qi.recv_cq = r->cq;
    qi.qp_type = IBV_QPT_RC;
    qi.cap.max_send_wr = ss->depth;
    qi.cap.max_recv_wr = ss->rx_depth;
    qi.cap.max_send_sge = 1;
    qi.cap.max_recv_sge = 1;
    qi.cap.max_inline_data = ss->inline_size;
    if (!(r->qp = ibv_create_qp(r->pd, &qi))) die("ibv_create_qp: %s", strerror(errno));
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_INIT;
    qa.port_num = r->port;
    qa.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (ibv_modify_qp(r->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die("ibv_modify_qp INIT failed");
}

static void raw_side_wire(const raw_side *r, uint8_t *out) {
    put_be(out, r->qp->qp_num, 4);
    put_be(out + 4, 0, 4); /* first PSN, 0 like the channel's default */
    put_be(out + 8, r->lid, 2);
    put_be(out + 10, (uint64_t)r->mtu, 2);
    put_be(out + 12, r->mr->rkey, 4);
    put_be(out + 16, (uint64_t)(uintptr_t)r->buf, 8);
    put_be(out + 24, 2 * r->half, 8);
    memcpy(out + 32, r->gid.raw, 16);
}

static void raw_side_connect(raw_side *r, const uint8_t *peer) {
    struct ibv_qp_attr qa;
    enum ibv_mtu peer_mtu = (enum ibv_mtu)get_be(peer + 10, 2);
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTR;
    qa.path_mtu = peer_mtu < r->mtu ? peer_mtu : r->mtu;
    qa.dest_qp_num = (uint32_t)get_be(peer, 4);
    qa.rq_psn = (uint32_t)get_be(peer + 4, 4);
    qa.max_dest_rd_atomic = r->rd_atomic;
    qa.min_rnr_timer = 12;
    qa.ah_attr.dlid = (uint16_t)get_be(peer + 8, 2);
    qa.ah_attr.port_num = r->port;
    qa.ah_attr.is_global = 1;
    memcpy(qa.ah_attr.grh.dgid.raw, peer + 32, 16);
    qa.ah_attr.grh.sgid_index = (uint8_t)r->gid_index;
    qa.ah_attr.grh.hop_limit = 64;
    if (ibv_modify_qp(r->qp, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die("ibv_modify_qp RTR failed");
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTS;
    qa.timeout = 14;
    qa.retry_cnt = 7;
    qa.rnr_retry = 7;
    qa.sq_psn = 0;
    qa.max_rd_atomic = r->rd_atomic;
    if (ibv_modify_qp(r->qp, &qa, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                      IBV_QP_MAX_QP_RD_ATOMIC))
        die("ibv_modify_qp RTS failed");
    r->peer_rkey = (uint32_t)get_be(peer + 12, 4);
    r->peer_addr = get_be(peer + 16, 8);
}

static void raw_side_close(raw_side *r) {
    if (ibv_destroy_qp(r->qp) || ibv_destroy_cq(r->cq)) die("ibv_destroy_qp/cq failed");
    if (r->cc && ibv_destroy_comp_channel(r->cc)) die("ibv_destroy_comp_channel failed");
    if (ibv_dereg_mr(r->mr) || ibv_dealloc_pd(r->pd) || ibv_close_device(r->ctx)) die("raw teardown failed");
    free(r->buf);
}

/* Sleeps on the completion channel until the CQ has something: arm, look once more (a
   completion may have come before the arm), then poll(2) the fd with a deadline, take the
   event and acknowledge it. The same deadline-bounded wait safeverbs' event mode gives. */
static void raw_block(raw_side *r) {
    struct ibv_cq *cq;
    void *ctx;
    struct pollfd pfd;
    if (!r->armed) {
        if (ibv_req_notify_cq(r->cq, 0)) die("ibv_req_notify_cq failed");
        r->armed = true;
        return; /* the caller polls the CQ again before sleeping */
    }
    pfd.fd = r->cc->fd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    if (poll(&pfd, 1, r->timeout_ms) <= 0) die("no completion within %d ms", r->timeout_ms);
    if (ibv_get_cq_event(r->cc, &cq, &ctx)) die("ibv_get_cq_event failed");
    ibv_ack_cq_events(cq, 1);
    r->armed = false;
}

/* Polls (16 at a time) until `sends` send-queue and `recvs` receive work requests completed. */
static void raw_wait(raw_side *r, uint64_t sends, uint64_t recvs) {
    struct ibv_wc wc[POLL_BATCH];
    while (r->sends_done < sends || r->recvs_done < recvs) {
        int n = ibv_poll_cq(r->cq, POLL_BATCH, wc), i;
        if (n < 0) die("ibv_poll_cq failed");
        for (i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS)
                die("work failed: %s (wr_id %llu)", ibv_wc_status_str(wc[i].status), (unsigned long long)wc[i].wr_id);
            if (wc[i].wr_id & 1) {
                if (wc[i].byte_len != r->expect_len)
                    die("received %u bytes, expected %u", (unsigned)wc[i].byte_len, (unsigned)r->expect_len);
                r->recvs_done += wc[i].wr_id >> 1;
            } else {
                r->sends_done += wc[i].wr_id >> 1;
            }
        }
        if (n == 0 && r->cc) raw_block(r);
    }
}

/* One send-queue work request (or a linked list of `count`, the last one signaled). */
typedef struct raw_send {
    struct ibv_send_wr wr[MAX_BATCH];
    struct ibv_sge sge;
} raw_send;
static void raw_send_init(raw_send *w, raw_side *r, enum ibv_wr_opcode opcode, size_t size, unsigned count,
                          unsigned inline_size) {
    unsigned i;
    memset(w, 0, sizeof *w);
    w->sge.addr = (uintptr_t)(opcode == IBV_WR_RDMA_READ ? r->buf + r->half : r->buf);
    w->sge.length = (uint32_t)size;
    w->sge.lkey = r->mr->lkey;
    for (i = 0; i < count; i++) {
        struct ibv_send_wr *x = &w->wr[i];
        x->wr_id = (uint64_t)count << 1;
        x->next = i + 1 < count ? &w->wr[i + 1] : NULL;
        x->sg_list = &w->sge;
        x->num_sge = 1;
        x->opcode = opcode;
        x->send_flags = i + 1 == count ? IBV_SEND_SIGNALED : 0;
        if (size <= inline_size && opcode != IBV_WR_RDMA_READ) x->send_flags |= IBV_SEND_INLINE;
        if (opcode == IBV_WR_RDMA_READ) {
            x->wr.rdma.remote_addr = r->peer_addr;
            x->wr.rdma.rkey = r->peer_rkey;
        } else if (opcode != IBV_WR_SEND) {
            x->wr.rdma.remote_addr = r->peer_addr + r->half;
            x->wr.rdma.rkey = r->peer_rkey;
        }
    }
}
static void raw_post_send(raw_side *r, raw_send *w) {
    struct ibv_send_wr *bad;
    int rc = ibv_post_send(r->qp, w->wr, &bad);
    if (rc) die("ibv_post_send: %s", strerror(rc));
}

/* A linked list of `count` receives; posting n of them posts its last n. */
typedef struct raw_recv {
    struct ibv_recv_wr wr[MAX_BATCH];
    struct ibv_sge sge;
    unsigned count;
} raw_recv;
static void raw_recv_init(raw_recv *w, raw_side *r, size_t size, unsigned count) {
    unsigned i;
    memset(w, 0, sizeof *w);
    w->count = count;
    w->sge.addr = (uintptr_t)(r->buf + r->half);
    w->sge.length = (uint32_t)size;
    w->sge.lkey = r->mr->lkey;
    r->expect_len = (uint32_t)size;
    for (i = 0; i < count; i++) {
        w->wr[i].wr_id = 1u << 1 | 1;
        w->wr[i].next = i + 1 < count ? &w->wr[i + 1] : NULL;
        w->wr[i].sg_list = size ? &w->sge : NULL;
        w->wr[i].num_sge = size ? 1 : 0;
    }
}
static void raw_post_recv(raw_side *r, raw_recv *w, unsigned n) {
    struct ibv_recv_wr *bad;
    int rc = ibv_post_recv(r->qp, &w->wr[w->count - n], &bad);
    if (rc) die("ibv_post_recv: %s", strerror(rc));
}

/* ---- latency ---------------------------------------------------------------------------------
   Client side: samples[i] = ticks of iteration i (post to everything complete). The server side
   answers each iteration. Both prepare (post the first receive), then say ready. */
static void ready_server(int fd) { send_byte(fd, 'R'); }
/* The server's pause before each echo (session.echo_delay_us): makes every wait of the client
   block, so that a count of system calls in SFV_WAIT_EVENT mode does not depend on timing. */
static unsigned g_echo_delay_us;
static void echo_delay(void) {
    if (g_echo_delay_us) usleep(g_echo_delay_us);
}
/* The client's clock starts when the server is ready. */
static void ready_client(int fd, span *sp) {
    expect_byte(fd, 'R');
    span_start(sp);
}

static void lib_lat(lib_side *s, int op, size_t size, uint32_t iters, bool client, int fd, uint64_t *samples, span *sp) {
    sfv_gather_element g = sfv_mr_gather_element(s->mr, s->buf, size);
    sfv_scatter_element e = sfv_mr_scatter_element(s->mr, s->buf + s->half, size);
    volatile uint8_t *flag = s->buf + s->half + size - 1;
    sfv_pending tx, rx;
    uint32_t i;
    if (op == OP_READ) {
        sfv_remote_mr src = lib_peer_src(s, size);
        if (!client) {
            ready_server(fd);
            return;
        }
        ready_client(fd, sp);
        for (i = 0; i < iters; i++) {
            uint64_t t0 = ticks();
            xmust(sfv_channel_post_read(s->ch, &e, 1, src, &tx), "sfv_channel_post_read");
            lib_wait(&tx);
            samples[i] = ticks() - t0;
        }
    } else if (op == OP_WRITE) {
        sfv_remote_mr dst = lib_peer_dst(s, size);
        *flag = 0;
        if (client) ready_client(fd, sp);
        else ready_server(fd);
        for (i = 0; i < iters; i++) {
            uint8_t v = (uint8_t)(i % 255 + 1);
            uint64_t t0 = ticks();
            if (client) {
                s->buf[size - 1] = v;
                xmust(sfv_channel_post_write(s->ch, &g, 1, dst, &tx), "sfv_channel_post_write");
                while (*flag != v) {}
                lib_wait(&tx);
                samples[i] = ticks() - t0;
            } else {
                while (*flag != v) {}
                s->buf[size - 1] = v;
                xmust(sfv_channel_post_write(s->ch, &g, 1, dst, &tx), "sfv_channel_post_write");
                lib_wait(&tx);
            }
        }
    } else { /* send or write_imm: the peer's receive completion is the signal */
        bool imm = op == OP_WRITE_IMM;
        sfv_remote_mr dst = lib_peer_dst(s, size);
        const uint32_t rx_len = (uint32_t)size; /* a write with immediate reports the bytes it wrote */
        if (imm) xmust(sfv_channel_post_receive(s->ch, NULL, 0, &rx), "sfv_channel_post_receive");
        else xmust(sfv_channel_post_receive(s->ch, &e, 1, &rx), "sfv_channel_post_receive");
        if (client) ready_client(fd, sp);
        else ready_server(fd);
        for (i = 0; i < iters; i++) {
            uint64_t t0 = ticks();
            if (client) {
                if (imm) xmust(sfv_channel_post_write_imm(s->ch, &g, 1, dst, i, &tx), "sfv_channel_post_write_imm");
                else xmust(sfv_channel_post_send(s->ch, &g, 1, &tx), "sfv_channel_post_send");
                lib_wait_len(&rx, rx_len);
                lib_wait(&tx);
                if (i + 1 < iters) {
                    if (imm) xmust(sfv_channel_post_receive(s->ch, NULL, 0, &rx), "sfv_channel_post_receive");
                    else xmust(sfv_channel_post_receive(s->ch, &e, 1, &rx), "sfv_channel_post_receive");
                }
                samples[i] = ticks() - t0;
            } else {
                lib_wait_len(&rx, rx_len);
                if (i + 1 < iters) {
                    if (imm) xmust(sfv_channel_post_receive(s->ch, NULL, 0, &rx), "sfv_channel_post_receive");
                    else xmust(sfv_channel_post_receive(s->ch, &e, 1, &rx), "sfv_channel_post_receive");
                }
                echo_delay();
                if (imm) xmust(sfv_channel_post_write_imm(s->ch, &g, 1, dst, i, &tx), "sfv_channel_post_write_imm");
                else xmust(sfv_channel_post_send(s->ch, &g, 1, &tx), "sfv_channel_post_send");
                lib_wait(&tx);
            }
        }
    }
}

static void raw_lat(raw_side *r, int op, size_t size, uint32_t iters, bool client, int fd, uint64_t *samples,
                    unsigned inline_size, span *sp) {
    raw_send w;
    raw_recv rv;
    volatile uint8_t *flag = r->buf + r->half + size - 1;
    uint64_t sends = r->sends_done, recvs = r->recvs_done;
    uint32_t i;
    if (op == OP_READ) {
        raw_send_init(&w, r, IBV_WR_RDMA_READ, size, 1, 0);
        if (!client) {
            ready_server(fd);
            return;
        }
        ready_client(fd, sp);
        for (i = 0; i < iters; i++) {
            uint64_t t0 = ticks();
            raw_post_send(r, &w);
            raw_wait(r, ++sends, recvs);
            samples[i] = ticks() - t0;
        }
    } else if (op == OP_WRITE) {
        raw_send_init(&w, r, IBV_WR_RDMA_WRITE, size, 1, inline_size);
        *flag = 0;
        if (client) ready_client(fd, sp);
        else ready_server(fd);
        for (i = 0; i < iters; i++) {
            uint8_t v = (uint8_t)(i % 255 + 1);
            uint64_t t0 = ticks();
            if (client) {
                r->buf[size - 1] = v;
                raw_post_send(r, &w);
                while (*flag != v) {}
                raw_wait(r, ++sends, recvs);
                samples[i] = ticks() - t0;
            } else {
                while (*flag != v) {}
                r->buf[size - 1] = v;
                raw_post_send(r, &w);
                raw_wait(r, ++sends, recvs);
            }
        }
    } else {
        bool imm = op == OP_WRITE_IMM;
        raw_send_init(&w, r, imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_SEND, size, 1, inline_size);
        raw_recv_init(&rv, r, imm ? 0 : size, 1);
        r->expect_len = (uint32_t)size; /* a write with immediate reports the bytes it wrote */
        raw_post_recv(r, &rv, 1);
        if (client) ready_client(fd, sp);
        else ready_server(fd);
        for (i = 0; i < iters; i++) {
            uint64_t t0 = ticks();
            if (client) {
                w.wr[0].imm_data = htonl(i);
                raw_post_send(r, &w);
                raw_wait(r, ++sends, ++recvs);
                if (i + 1 < iters) raw_post_recv(r, &rv, 1);
                samples[i] = ticks() - t0;
            } else {
                raw_wait(r, sends, ++recvs);
                if (i + 1 < iters) raw_post_recv(r, &rv, 1);
                echo_delay();
                w.wr[0].imm_data = htonl(i);
                raw_post_send(r, &w);
                raw_wait(r, ++sends, recvs);
            }
        }
    }
}

/* ---- throughput and message rate --------------------------------------------------------------
   The client keeps `depth` work requests in flight, posted `batch` per call; a send's peer keeps
   up to rx_depth receives posted and re-posts them `batch` at a time. iters is a multiple of
   batch. */
static void lib_post_one(lib_side *s, int op, const sfv_gather_element *g, const sfv_scatter_element *e,
                         const sfv_remote_mr *rem, unsigned batch, sfv_pending *p) {
    sfv_result r;
    if (batch == 1) {
        if (op == OP_SEND) r = sfv_channel_post_send(s->ch, g, 1, p);
        else if (op == OP_READ) r = sfv_channel_post_read(s->ch, e, 1, rem[0], p);
        else r = sfv_channel_post_write(s->ch, g, 1, rem[0], p);
    } else {
        if (op == OP_SEND) r = sfv_channel_post_send_batch(s->ch, g, 1, batch, p);
        else if (op == OP_READ) r = sfv_channel_post_read_batch(s->ch, e, 1, batch, rem, p);
        else r = sfv_channel_post_write_batch(s->ch, g, 1, batch, rem, p);
    }
    xmust(r, "sfv_channel_post_*");
}

static void lib_bw(lib_side *s, const session *ss, size_t size, uint32_t iters, unsigned batch, bool client, int fd, span *sp) {
    sfv_gather_element g[MAX_BATCH];
    sfv_scatter_element e[MAX_BATCH];
    sfv_remote_mr rem[MAX_BATCH];
    unsigned i, slots;
    uint32_t k, posts = iters / batch;
    for (i = 0; i < batch; i++) {
        g[i] = sfv_mr_gather_element(s->mr, s->buf, size);
        e[i] = sfv_mr_scatter_element(s->mr, s->buf + s->half, size);
        rem[i] = ss->op == OP_READ ? lib_peer_src(s, size) : lib_peer_dst(s, size);
    }
    if (!client) {
        uint32_t posted = 0, done = 0, ring = ss->rx_depth / batch * batch;
        if (ss->op != OP_SEND) {
            ready_server(fd);
            return;
        }
        while (posted < iters && posted + batch <= ring) { /* ring positions stay contiguous */
            unsigned n = iters - posted < batch ? iters - posted : batch;
            if (n == 1) xmust(sfv_channel_post_receive(s->ch, e, 1, &s->rx_ring[posted % ring]), "post_receive");
            else xmust(sfv_channel_post_receive_batch(s->ch, e, 1, n, &s->rx_ring[posted % ring]), "post_receive_batch");
            posted += n;
        }
        ready_server(fd);
        while (done < iters) {
            lib_wait_len(&s->rx_ring[done % ring], (uint32_t)size);
            done++;
            if (done % batch == 0 && posted < iters) {
                unsigned n = iters - posted < batch ? iters - posted : batch;
                if (n == 1) xmust(sfv_channel_post_receive(s->ch, e, 1, &s->rx_ring[posted % ring]), "post_receive");
                else xmust(sfv_channel_post_receive_batch(s->ch, e, 1, n, &s->rx_ring[posted % ring]), "post_receive_batch");
                posted += n;
            }
        }
        return;
    }
    slots = ss->depth / batch;
    ready_client(fd, sp);
    for (k = 0; k < posts; k++) {
        sfv_pending *p = &s->tx_ring[k % slots];
        if (k >= slots) lib_wait(p);
        lib_post_one(s, ss->op, g, e, rem, batch, p);
    }
    for (k = posts > slots ? posts - slots : 0; k < posts; k++) lib_wait(&s->tx_ring[k % slots]);
}

static void raw_bw(raw_side *r, const session *ss, size_t size, uint32_t iters, unsigned batch, bool client, int fd, span *sp) {
    static raw_send w;
    static raw_recv rv;
    uint64_t sends0 = r->sends_done, recvs0 = r->recvs_done, posted = 0;
    if (!client) {
        if (ss->op != OP_SEND) {
            ready_server(fd);
            return;
        }
        raw_recv_init(&rv, r, size, batch);
        while (posted < iters && posted + batch <= ss->rx_depth) {
            unsigned n = iters - posted < batch ? (unsigned)(iters - posted) : batch;
            raw_post_recv(r, &rv, n);
            posted += n;
        }
        ready_server(fd);
        while (r->recvs_done - recvs0 < iters) {
            raw_wait(r, r->sends_done, r->recvs_done + 1);
            while (posted < iters && posted - (r->recvs_done - recvs0) + batch <= ss->rx_depth) {
                unsigned n = iters - posted < batch ? (unsigned)(iters - posted) : batch;
                raw_post_recv(r, &rv, n);
                posted += n;
            }
        }
        return;
    }
    raw_send_init(&w, r, ss->op == OP_SEND ? IBV_WR_SEND : ss->op == OP_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
                  size, batch, ss->inline_size);
    ready_client(fd, sp);
    while (r->sends_done - sends0 < iters) {
        while (posted < iters && posted - (r->sends_done - sends0) + batch <= ss->depth) {
            raw_post_send(r, &w);
            posted += batch;
        }
        raw_wait(r, r->sends_done + 1, r->recvs_done);
    }
}

/* ---- hand-tracked raw verbs (the cost test's third loop) ----------------------------------
   The least a careful C programmer adds to the raw loop above to get the guarantees safeverbs
   gives, and no more: a record per request (wr_id points at it; the completion's status and
   byte_len are stored there, and the waiter checks its own), a channel state (the first failed
   completion or refused verb breaks the channel: nothing more is posted), a capacity check per
   post (the queue's places, freed as completions arrive, and the record: never reused while
   its request is not consumed) and a sequence number per request (the user's ticket: a stale
   or doubly-used ticket is refused, not misread). Each queue is a ring of records; a batch of
   sends is one record covering its work requests, signalled on the last. Waiting has a
   deadline, read from the clock only when a poll found nothing. */
struct hand_queue;
typedef struct hand_req {
    uint64_t seq;           /* the request this record holds; HAND_FREE once consumed */
    struct hand_queue *q;   /* its queue */
    uint32_t byte_len;      /* from its completion */
    uint16_t covers;        /* work requests the record ends (a batch's unsignalled sends too) */
    uint8_t status;         /* enum ibv_wc_status */
    uint8_t done;           /* its completion arrived */
} hand_req;
#define HAND_FREE UINT64_MAX
typedef struct hand_queue {
    hand_req *req;  /* mask + 1 records */
    uint64_t head;  /* the next sequence number */
    uint32_t mask;
    uint32_t used;  /* work requests posted whose completion has not arrived */
    uint32_t cap;   /* the QP's max_send_wr / max_recv_wr */
} hand_queue;
typedef struct hand_chan {
    raw_side *r;
    bool broken;
    int timeout_ms;
    hand_queue sq, rq;
} hand_chan;

static void hand_queue_init(hand_queue *q, unsigned cap) {
    unsigned n = 1, i;
    while (n < cap) n <<= 1;
    memset(q, 0, sizeof *q);
    q->req = calloc(n, sizeof *q->req);
    if (!q->req) die("out of memory");
    for (i = 0; i < n; i++) q->req[i].seq = HAND_FREE, q->req[i].q = q;
    q->mask = n - 1;
    q->cap = cap;
}
static void hand_init(hand_chan *h, raw_side *r, unsigned depth, unsigned rx_depth) {
    memset(h, 0, sizeof *h);
    h->r = r;
    h->timeout_ms = r->timeout_ms;
    hand_queue_init(&h->sq, depth);
    hand_queue_init(&h->rq, rx_depth);
}
static void hand_free(hand_chan *h) {
    free(h->sq.req);
    free(h->rq.req);
}
/* n places and one record covering them: the record, its ticket into *ticket; NULL if the
   channel is broken or the queue full. */
static inline hand_req *hand_take(hand_chan *h, hand_queue *q, unsigned n, uint64_t *ticket) {
    hand_req *x = &q->req[q->head & q->mask];
    if (__builtin_expect(h->broken || q->used + n > q->cap || x->seq != HAND_FREE, 0)) return NULL;
    x->seq = *ticket = q->head++;
    x->covers = (uint16_t)n;
    x->done = 0;
    q->used += n;
    return x;
}
/* n receives of the linked list w (its last n), one record and ticket each. */
static inline int hand_post_recv(hand_chan *h, raw_recv *w, unsigned n, uint64_t *tickets) {
    struct ibv_recv_wr *first = &w->wr[w->count - n], *bad;
    unsigned i;
    int rc;
    for (i = 0; i < n; i++) {
        hand_req *x = hand_take(h, &h->rq, 1, &tickets[i]);
        if (__builtin_expect(!x, 0)) return h->broken ? EPIPE : ENOSPC; /* (a real loop would undo the others) */
        first[i].wr_id = (uintptr_t)x;
    }
    if (__builtin_expect((rc = ibv_post_recv(h->r->qp, first, &bad)) != 0, 0)) h->broken = true;
    return rc;
}
/* The send list w (one work request, or a batch signalled on its last): one record, one ticket. */
static inline int hand_post_send(hand_chan *h, raw_send *w, unsigned n, uint64_t *ticket) {
    struct ibv_send_wr *bad;
    hand_req *x = hand_take(h, &h->sq, n, ticket);
    int rc;
    if (__builtin_expect(!x, 0)) return h->broken ? EPIPE : ENOSPC;
    w->wr[n - 1].wr_id = (uintptr_t)x;
    if (__builtin_expect((rc = ibv_post_send(h->r->qp, w->wr, &bad)) != 0, 0)) h->broken = true;
    return rc;
}
/* The same posts with their work requests built at each call from the caller's elements (one per
   work request), as a call that takes elements must (safeverbs' or any): the work requests on the
   stack, filled and linked, then posted (--impl handbuilt; the rest as the loop above). */
#define HAND_INLINE static inline __attribute__((always_inline))
HAND_INLINE int hand_post_recv_built(hand_chan *h, const struct ibv_sge *sg, unsigned n, uint64_t *tickets) {
    struct ibv_recv_wr wr[MAX_BATCH], *bad;
    unsigned i;
    int rc;
    for (i = 0; i < n; i++) {
        hand_req *x = hand_take(h, &h->rq, 1, &tickets[i]);
        if (__builtin_expect(!x, 0)) return h->broken ? EPIPE : ENOSPC; /* (a real loop would undo the others) */
        wr[i].wr_id = (uintptr_t)x;
        wr[i].next = &wr[i + 1];
        wr[i].sg_list = (struct ibv_sge *)(uintptr_t)&sg[i];
        wr[i].num_sge = 1;
    }
    wr[n - 1].next = NULL;
    if (__builtin_expect((rc = ibv_post_recv(h->r->qp, wr, &bad)) != 0, 0)) h->broken = true;
    return rc;
}
HAND_INLINE int hand_post_send_built(hand_chan *h, const struct ibv_sge *sg, unsigned n, uint64_t *ticket) {
    struct ibv_send_wr wr[MAX_BATCH], *bad;
    hand_req *x = hand_take(h, &h->sq, n, ticket);
    unsigned i;
    int rc;
    if (__builtin_expect(!x, 0)) return h->broken ? EPIPE : ENOSPC;
    for (i = 0; i < n; i++) {
        wr[i].wr_id = 0; /* (unsignaled: no record, hand_drain) */
        wr[i].next = &wr[i + 1];
        wr[i].sg_list = (struct ibv_sge *)(uintptr_t)&sg[i];
        wr[i].num_sge = 1;
        wr[i].opcode = IBV_WR_SEND;
        wr[i].send_flags = 0;
        wr[i].imm_data = 0;
    }
    wr[n - 1].wr_id = (uintptr_t)x;
    wr[n - 1].next = NULL;
    wr[n - 1].send_flags = IBV_SEND_SIGNALED;
    if (__builtin_expect((rc = ibv_post_send(h->r->qp, wr, &bad)) != 0, 0)) h->broken = true;
    return rc;
}
/* One work request (a single post): one on the stack, not an array. */
HAND_INLINE int hand_post_recv_built1(hand_chan *h, const struct ibv_sge *sg, uint64_t *ticket) {
    struct ibv_recv_wr wr, *bad;
    hand_req *x = hand_take(h, &h->rq, 1, ticket);
    int rc;
    if (__builtin_expect(!x, 0)) return h->broken ? EPIPE : ENOSPC;
    wr.wr_id = (uintptr_t)x;
    wr.next = NULL;
    wr.sg_list = (struct ibv_sge *)(uintptr_t)sg;
    wr.num_sge = 1;
    if (__builtin_expect((rc = ibv_post_recv(h->r->qp, &wr, &bad)) != 0, 0)) h->broken = true;
    return rc;
}
HAND_INLINE int hand_post_send_built1(hand_chan *h, const struct ibv_sge *sg, uint64_t *ticket) {
    struct ibv_send_wr wr, *bad;
    hand_req *x = hand_take(h, &h->sq, 1, ticket);
    int rc;
    if (__builtin_expect(!x, 0)) return h->broken ? EPIPE : ENOSPC;
    wr.wr_id = (uintptr_t)x;
    wr.next = NULL;
    wr.sg_list = (struct ibv_sge *)(uintptr_t)sg;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = 0;
    if (__builtin_expect((rc = ibv_post_send(h->r->qp, &wr, &bad)) != 0, 0)) h->broken = true;
    return rc;
}

/* One poll of the CQ: each completion into its record, its places freed. A failure flushes every
   work request, the unsignaled ones too, each with its own wr_id: those of no record (0) only
   break the channel (a loop that skipped this test would follow a NULL record). */
static inline int hand_drain(hand_chan *h) {
    struct ibv_wc wc[POLL_BATCH];
    int n = ibv_poll_cq(h->r->cq, POLL_BATCH, wc), i;
    if (__builtin_expect(n < 0, 0)) h->broken = true;
    for (i = 0; i < n; i++) {
        hand_req *x = (hand_req *)(uintptr_t)wc[i].wr_id;
        if (__builtin_expect(!x, 0)) { /* a batch's unsignaled send, flushed (no record: its batch's last has it) */
            h->broken = true;
            continue;
        }
        x->status = (uint8_t)wc[i].status;
        x->byte_len = wc[i].byte_len;
        x->done = 1;
        x->q->used -= x->covers;
        if (__builtin_expect(wc[i].status != IBV_WC_SUCCESS, 0)) h->broken = true;
    }
    return n;
}
/* Waits for the request of `ticket` on queue q and consumes it: 0 and its byte_len, EIO for a
   failed completion, EINVAL for a ticket that is not waiting, EPIPE for a broken channel that
   will not complete it, ETIMEDOUT past the deadline. */
static inline int hand_wait(hand_chan *h, hand_queue *q, uint64_t ticket, uint32_t *byte_len) {
    hand_req *x = &q->req[ticket & q->mask];
    uint64_t deadline = 0;
    if (__builtin_expect(x->seq != ticket, 0)) return EINVAL;
    while (!x->done) {
        if (hand_drain(h) > 0) continue;
        if (h->broken) return EPIPE;
        if (!deadline) deadline = mono_ns() + (uint64_t)h->timeout_ms * 1000000u;
        else if (mono_ns() > deadline) return ETIMEDOUT;
    }
    x->seq = HAND_FREE;
    *byte_len = x->byte_len;
    return x->status == IBV_WC_SUCCESS ? 0 : EIO;
}

/* The hand-tracked loop's inject: what a careful C programmer writes for sfv_channel_inject's
   promise, and no more. Bytes from plain memory in one prebuilt inline work request (the bytes
   are copied at the post); no record per inject, only a count of the send queue's places; every
   `every`-th is signaled, with one record (of a small ring of its own, which no one consumes)
   covering the places of the injects since the last, given back by its completion in hand_drain;
   so is one that would leave no room, after polling until there is room. A failed completion
   breaks the channel (hand_drain). */
#define HAND_INJECT_RECS 8 /* signaled injects in flight, at most: the queue holds about 2 */
typedef struct hand_inject {
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    unsigned every, left, since; /* signal every `every`; until the next; injects since the last */
    unsigned next;               /* the next record of rec */
    hand_req rec[HAND_INJECT_RECS];
} hand_inject;
static void hand_inject_init(hand_inject *j, hand_chan *h, const void *buf, size_t len) {
    memset(j, 0, sizeof *j);
    j->sge.addr = (uintptr_t)buf;
    j->sge.length = (uint32_t)len;
    j->wr.sg_list = &j->sge;
    j->wr.num_sge = 1;
    j->wr.opcode = IBV_WR_SEND;
    j->every = j->left = h->sq.cap / 2 ? h->sq.cap / 2 : 1;
    for (unsigned i = 0; i < HAND_INJECT_RECS; i++) j->rec[i].q = &h->sq, j->rec[i].done = 1;
}
static inline int hand_inject_post(hand_chan *h, hand_inject *j) {
    hand_queue *q = &h->sq;
    struct ibv_send_wr *bad;
    int rc;
    if (__builtin_expect(h->broken, 0)) return EPIPE;
    j->since++;
    if (__builtin_expect(--j->left == 0 || q->used + 2 > q->cap, 0)) { /* signaled: a record for the places since the last */
        hand_req *x = &j->rec[j->next++ % HAND_INJECT_RECS];
        while (q->used + 1 > q->cap || !x->done)
            if (hand_drain(h) < 0 || h->broken) return EPIPE;
        x->covers = (uint16_t)j->since;
        x->done = 0;
        j->wr.wr_id = (uintptr_t)x;
        j->wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
        j->left = j->every;
        j->since = 0;
    } else {
        j->wr.wr_id = 0; /* no record: flushed, it only breaks the channel (hand_drain) */
        j->wr.send_flags = IBV_SEND_INLINE;
    }
    q->used++;
    if (__builtin_expect((rc = ibv_post_send(h->r->qp, &j->wr, &bad)) != 0, 0)) h->broken = true;
    return rc;
}

/* ---- cost: one process, loopback ------------------------------------------------------------
   The step functions are kept out of line so callgrind can count each (--toggle-collect). Each
   does what a user's loop needs and no more: the call, and a look at its result (a failure goes
   to an out-of-line function). */
typedef struct cost_sfv {
    lib_side *s;
    sfv_gather_element g[MAX_BATCH];
    sfv_scatter_element e[MAX_BATCH];
    sfv_pending tx, rx[MAX_BATCH];
    unsigned batch;
} cost_sfv;
typedef struct cost_hand {
    hand_chan h;
    raw_send w;
    hand_inject j;
    raw_recv rv;
    uint64_t tx, rx[MAX_BATCH]; /* tickets */
    uint32_t expect_len;
    struct ibv_sge sg[MAX_BATCH], rsg[MAX_BATCH]; /* handbuilt: the caller's elements, one per work request */
} cost_hand;

NOINLINE void cost_sfv_post_recv(sfv_channel *ch, cost_sfv *c);
NOINLINE void cost_sfv_post_send(sfv_channel *ch, cost_sfv *c);
NOINLINE void cost_sfv_poll_send(cost_sfv *c);
NOINLINE void cost_sfv_poll_recv(cost_sfv *c);
NOINLINE void cost_sfvbatch_post_recv(sfv_channel *ch, cost_sfv *c);
NOINLINE void cost_sfvbatch_post_send(sfv_channel *ch, cost_sfv *c);
NOINLINE void cost_sfvbatch_poll_recv(cost_sfv *c);
NOINLINE void cost_raw_post_recv(raw_side *r, raw_recv *w, unsigned batch);
NOINLINE void cost_raw_post_send(raw_side *r, raw_send *w);
NOINLINE void cost_raw_poll_send(raw_side *r, uint64_t sends);
NOINLINE void cost_raw_poll_recv(raw_side *r, uint64_t recvs);
NOINLINE void cost_hand_post_recv(cost_hand *c, unsigned batch);
NOINLINE void cost_hand_post_send(cost_hand *c, unsigned batch);
NOINLINE void cost_hand_poll_send(cost_hand *c);
NOINLINE void cost_hand_poll_recv(cost_hand *c, unsigned batch);
NOINLINE void cost_inject_post_send(sfv_channel *ch, cost_sfv *c);
NOINLINE void cost_handinject_post_send(cost_hand *c, unsigned batch);
NOINLINE void cost_handbuilt_post_recv(cost_hand *c, unsigned batch);
NOINLINE void cost_handbuilt_post_send(cost_hand *c, unsigned batch);

/* the failures, out of line */
__attribute__((cold, noinline)) static void cost_sfv_failed(const char *what, sfv_result r, sfv_pending *p) {
    sfv_work_completion wc;
    if (r == SFV_ERR_WORK && p && sfv_pending_poll(p, &wc) == SFV_ERR_WORK)
        die("%s: work failed: %s (%s)", what, sfv_wc_status_str(wc.status), sfv_wc_status_hint(wc.status));
    die("%s: %s (%s)", what, sfv_result_str(r), sfv_last_error()->message);
}
__attribute__((cold, noinline)) static void cost_hand_failed(const char *what, int rc) {
    die("%s: %s", what, strerror(rc));
}

/* One work request per call (batch 1) and batches (cost_sfvbatch_*) are separate step functions,
   as a user's loop calls one API or the other (with SAFEVERBS_STATIC both would otherwise be
   inlined into one function, the single post paying for the batch's stack frame). */
NOINLINE void cost_sfv_post_recv(sfv_channel *ch, cost_sfv *c) {
    sfv_result r = sfv_channel_post_receive(ch, c->e, 1, c->rx);
    if (__builtin_expect(r != SFV_OK, 0)) cost_sfv_failed("post_receive", r, NULL);
}
NOINLINE void cost_sfvbatch_post_recv(sfv_channel *ch, cost_sfv *c) {
    sfv_result r = sfv_channel_post_receive_batch(ch, c->e, 1, c->batch, c->rx);
    if (__builtin_expect(r != SFV_OK, 0)) cost_sfv_failed("post_receive_batch", r, NULL);
}
NOINLINE void cost_sfv_post_send(sfv_channel *ch, cost_sfv *c) {
    sfv_result r = sfv_channel_post_send(ch, c->g, 1, &c->tx);
    if (__builtin_expect(r != SFV_OK, 0)) cost_sfv_failed("post_send", r, NULL);
}
NOINLINE void cost_sfvbatch_post_send(sfv_channel *ch, cost_sfv *c) {
    sfv_result r = sfv_channel_post_send_batch(ch, c->g, 1, c->batch, &c->tx);
    if (__builtin_expect(r != SFV_OK, 0)) cost_sfv_failed("post_send_batch", r, NULL);
}
NOINLINE void cost_sfv_poll_send(cost_sfv *c) {
    sfv_result r = sfv_pending_wait(&c->tx, -1, NULL);
    if (__builtin_expect(r != SFV_OK, 0)) cost_sfv_failed("wait send", r, &c->tx);
}
NOINLINE void cost_sfv_poll_recv(cost_sfv *c) { /* one receive: no loop, as a user writes it */
    sfv_result r = sfv_pending_wait(&c->rx[0], -1, NULL);
    if (__builtin_expect(r != SFV_OK, 0)) cost_sfv_failed("wait receive", r, &c->rx[0]);
}
NOINLINE void cost_sfvbatch_poll_recv(cost_sfv *c) { /* a receive batch: its handles in one call */
    sfv_result r = sfv_pending_wait_all(c->rx, c->batch, -1, NULL);
    if (__builtin_expect(r != SFV_OK, 0)) cost_sfv_failed("wait receives", r, NULL);
}
/* inject: the bytes from plain memory, no handle, no send completion to wait for */
NOINLINE void cost_inject_post_send(sfv_channel *ch, cost_sfv *c) {
    if (c->batch == 1) { /* one: no loop, as a user writes it */
        sfv_result r = sfv_channel_inject(ch, c->s->buf, c->g[0].length);
        if (__builtin_expect(r != SFV_OK, 0)) cost_sfv_failed("inject", r, NULL);
        return;
    }
    for (unsigned i = 0; i < c->batch; i++) {
        sfv_result r = sfv_channel_inject(ch, c->s->buf, c->g[0].length);
        if (__builtin_expect(r != SFV_OK, 0)) cost_sfv_failed("inject", r, NULL);
    }
}
NOINLINE void cost_raw_post_recv(raw_side *r, raw_recv *w, unsigned batch) { raw_post_recv(r, w, batch); }
NOINLINE void cost_raw_post_send(raw_side *r, raw_send *w) { raw_post_send(r, w); }
NOINLINE void cost_raw_poll_send(raw_side *r, uint64_t sends) { raw_wait(r, sends, r->recvs_done); }
NOINLINE void cost_raw_poll_recv(raw_side *r, uint64_t recvs) { raw_wait(r, r->sends_done, recvs); }
NOINLINE void cost_hand_post_recv(cost_hand *c, unsigned batch) {
    int rc = hand_post_recv(&c->h, &c->rv, batch, c->rx);
    if (__builtin_expect(rc != 0, 0)) cost_hand_failed("post receive", rc);
}
NOINLINE void cost_hand_post_send(cost_hand *c, unsigned batch) {
    int rc = hand_post_send(&c->h, &c->w, batch, &c->tx);
    if (__builtin_expect(rc != 0, 0)) cost_hand_failed("post send", rc);
}
NOINLINE void cost_handbuilt_post_recv(cost_hand *c, unsigned batch) {
    int rc = batch == 1 ? hand_post_recv_built1(&c->h, c->rsg, c->rx) : hand_post_recv_built(&c->h, c->rsg, batch, c->rx);
    if (__builtin_expect(rc != 0, 0)) cost_hand_failed("post receive", rc);
}
NOINLINE void cost_handbuilt_post_send(cost_hand *c, unsigned batch) {
    int rc = batch == 1 ? hand_post_send_built1(&c->h, c->sg, &c->tx) : hand_post_send_built(&c->h, c->sg, batch, &c->tx);
    if (__builtin_expect(rc != 0, 0)) cost_hand_failed("post send", rc);
}
NOINLINE void cost_handinject_post_send(cost_hand *c, unsigned batch) {
    if (batch == 1) { /* one: no loop, as a user writes it */
        int rc = hand_inject_post(&c->h, &c->j);
        if (__builtin_expect(rc != 0, 0)) cost_hand_failed("inject", rc);
        return;
    }
    for (unsigned i = 0; i < batch; i++) {
        int rc = hand_inject_post(&c->h, &c->j);
        if (__builtin_expect(rc != 0, 0)) cost_hand_failed("inject", rc);
    }
}
NOINLINE void cost_hand_poll_send(cost_hand *c) {
    uint32_t len;
    int rc = hand_wait(&c->h, &c->h.sq, c->tx, &len);
    if (__builtin_expect(rc != 0, 0)) cost_hand_failed("wait send", rc);
}
NOINLINE void cost_hand_poll_recv(cost_hand *c, unsigned batch) {
    if (batch == 1) { /* one receive: no loop, as a user writes it */
        uint32_t len;
        int rc = hand_wait(&c->h, &c->h.rq, c->rx[0], &len);
        if (__builtin_expect(rc != 0 || len != c->expect_len, 0)) cost_hand_failed("wait receive", rc ? rc : EMSGSIZE);
        return;
    }
    for (unsigned i = 0; i < batch; i++) {
        uint32_t len;
        int rc = hand_wait(&c->h, &c->h.rq, c->rx[i], &len);
        if (__builtin_expect(rc != 0 || len != c->expect_len, 0)) cost_hand_failed("wait receive", rc ? rc : EMSGSIZE);
    }
}

static void emit(const options *o, const char *variant, size_t size, const char *impl, const char *metric, double v) {
    printf("result,%s,%s,%s,%zu,%s,%s,%.6g\n", TEST_NAMES[o->s.test], OP_NAMES[o->s.op], variant, size, impl, metric, v);
    fflush(stdout);
}

static void settle(int us) {
    if (us > 0) usleep((useconds_t)us);
}

/* The counted part of a cost run begins: callgrind forgets what the warm-up cost (first touches,
   pools filled), so one run's count is N iterations' (a no-op outside valgrind). */
static void cost_start(span *sp) {
    span_start(sp);
    CALLGRIND_ZERO_STATS;
}

static int run_cost(options *o) {
    const size_t size = o->nsizes ? o->sizes[0] : 64;
    const unsigned batch = o->batch;
    const int impl = (o->s.impls & (1u << IMPL_HAND_BUILT)) ? IMPL_HAND_BUILT
                   : (o->s.impls & (1u << IMPL_HAND_INJECT)) ? IMPL_HAND_INJECT : (o->s.impls & (1u << IMPL_INJECT)) ? IMPL_INJECT
                   : (o->s.impls & (1u << IMPL_HAND)) ? IMPL_HAND : (o->s.impls & (1u << IMPL_RAW)) ? IMPL_RAW : IMPL_SFV;
    const uint32_t iters = o->iters ? (uint32_t)o->iters : 1000;
    char variant[64];
    span sp;
    uint32_t i;
    o->s.max_size = size;
    o->s.op = OP_SEND;
    if (o->s.depth < batch || o->s.rx_depth < batch) o->s.depth = o->s.rx_depth = batch;
    snprintf(variant, sizeof variant, "%s-batch%u", o->variant ? o->variant : "loopback", batch);
    if ((impl == IMPL_INJECT || impl == IMPL_HAND_INJECT) && o->s.inline_size < size) o->s.inline_size = (unsigned)size; /* an inject goes inline */
    if (impl == IMPL_SFV || impl == IMPL_INJECT) {
        static lib_side s;
        static cost_sfv c;
        uint8_t wire[WIRE_SIZE];
        lib_side_open(&s, o->device, o->gid, &o->s);
        lib_side_wire(&s, wire);
        lib_side_connect(&s, wire); /* connected to itself */
        c.s = &s;
        c.batch = batch;
        for (i = 0; i < batch; i++) {
            c.g[i] = sfv_mr_gather_element(s.mr, s.buf, size);
            c.e[i] = sfv_mr_scatter_element(s.mr, s.buf + s.half, size);
        }
        for (i = 0; i < iters + (uint32_t)o->warmup; i++) {
            if (i == (uint32_t)o->warmup) cost_start(&sp);
            if (batch == 1) cost_sfv_post_recv(s.ch, &c);
            else cost_sfvbatch_post_recv(s.ch, &c);
            if (impl == IMPL_INJECT) {
                cost_inject_post_send(s.ch, &c);
                settle(o->settle_us);
            } else {
                if (batch == 1) cost_sfv_post_send(s.ch, &c);
                else cost_sfvbatch_post_send(s.ch, &c);
                settle(o->settle_us);
                cost_sfv_poll_send(&c);
            }
            if (batch == 1) cost_sfv_poll_recv(&c);
            else cost_sfvbatch_poll_recv(&c);
        }
        span_stop(&sp);
        lib_side_close(&s);
    } else if (impl == IMPL_HAND || impl == IMPL_HAND_INJECT || impl == IMPL_HAND_BUILT) {
        static raw_side r;
        static cost_hand c;
        uint8_t wire[RAW_WIRE_SIZE];
        raw_side_open(&r, o->device, o->gid, &o->s);
        raw_side_wire(&r, wire);
        raw_side_connect(&r, wire);
        hand_init(&c.h, &r, o->s.depth, o->s.rx_depth);
        raw_send_init(&c.w, &r, IBV_WR_SEND, size, batch, o->s.inline_size);
        for (i = 0; i + 1 < batch; i++) c.w.wr[i].wr_id = 0; /* a batch's unsignaled sends: no record (hand_drain), not raw's count */
        raw_recv_init(&c.rv, &r, size, batch);
        hand_inject_init(&c.j, &c.h, r.buf, size);
        c.expect_len = (uint32_t)size;
        for (i = 0; i < batch; i++) {
            c.sg[i] = c.w.sge;
            c.rsg[i] = c.rv.sge;
        }
        for (i = 0; i < iters + (uint32_t)o->warmup; i++) {
            if (i == (uint32_t)o->warmup) cost_start(&sp);
            if (impl == IMPL_HAND_BUILT) cost_handbuilt_post_recv(&c, batch);
            else cost_hand_post_recv(&c, batch);
            if (impl == IMPL_HAND_INJECT) {
                cost_handinject_post_send(&c, batch);
                settle(o->settle_us);
            } else {
                if (impl == IMPL_HAND_BUILT) cost_handbuilt_post_send(&c, batch);
                else cost_hand_post_send(&c, batch);
                settle(o->settle_us);
                cost_hand_poll_send(&c);
            }
            cost_hand_poll_recv(&c, batch);
        }
        span_stop(&sp);
        hand_free(&c.h);
        raw_side_close(&r);
    } else if (impl == IMPL_RAW) {
        static raw_side r;
        static raw_send w;
        static raw_recv rv;
        uint8_t wire[RAW_WIRE_SIZE];
        raw_side_open(&r, o->device, o->gid, &o->s);
        raw_side_wire(&r, wire);
        raw_side_connect(&r, wire);
        raw_send_init(&w, &r, IBV_WR_SEND, size, batch, o->s.inline_size);
        raw_recv_init(&rv, &r, size, batch);
        for (i = 0; i < iters + (uint32_t)o->warmup; i++) {
            const uint64_t sends = r.sends_done + batch, recvs = r.recvs_done + batch;
            if (i == (uint32_t)o->warmup) cost_start(&sp);
            cost_raw_post_recv(&r, &rv, batch);
            cost_raw_post_send(&r, &w);
            settle(o->settle_us);
            cost_raw_poll_send(&r, sends);
            cost_raw_poll_recv(&r, recvs);
        }
        span_stop(&sp);
        raw_side_close(&r);
    }
    emit(o, variant, size, IMPL_NAMES[impl], "ops", (double)iters * batch);
    emit(o, variant, size, IMPL_NAMES[impl], "allocs_per_op", (double)(sp.a1 - sp.a0) / ((double)iters * batch));
    return 0;
}

/* ---- statistics ------------------------------------------------------------------------------ */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- the client: plans the runs, the server follows ------------------------------------------ */
#define MAX_RUNS 1024 /* per implementation and size: 2 per A-B-B-A round */
typedef struct impl_result {
    double *us;          /* latency samples */
    size_t n;
    double seconds, cpu; /* summed over its runs */
    uint64_t ops;
    unsigned long allocs;
    double run[MAX_RUNS]; /* each run's median latency (us), or its rate (ops/s) */
    int nruns;
} impl_result;

static double median_of(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The drift-free ratio of an A-B-B-A design over rounds [r0, r1): per round, (A1 + A2) / (B1 + B2)
   of the runs' figures (an implementation's runs 2k and 2k + 1 are round k's); the median. */
static double paired_ratio(const impl_result *a, const impl_result *b, int r0, int r1) {
    double r[MAX_RUNS / 2];
    int n = 0;
    for (int i = 2 * r0; i < 2 * r1 && i + 1 < a->nruns && i + 1 < b->nruns; i += 2)
        r[n++] = (a->run[i] + a->run[i + 1]) / (b->run[i] + b->run[i + 1]);
    return n ? median_of(r, (size_t)n) : NAN;
}

/* The median of an implementation's run figures over rounds [r0, r1) of `per` runs each. */
static double runs_median(const impl_result *a, int per, int r0, int r1) {
    double v[MAX_RUNS];
    int n = 0;
    for (int i = per * r0; i < per * r1 && i < a->nruns; i++) v[n++] = a->run[i];
    return n ? median_of(v, (size_t)n) : NAN;
}

/* Repeatability: the first and the second half of the rounds, taken as two runs. */
static void emit_halves(const options *o, const char *variant, size_t size, const impl_result *res, int impl, bool both,
                        int rounds) {
    const int h = rounds / 2, per = both ? 2 : 4; /* runs per round: A-B-B-A, or all four one's */
    if (h < 1) return;
    emit(o, variant, size, IMPL_NAMES[impl], "half1", runs_median(&res[impl], per, 0, h));
    emit(o, variant, size, IMPL_NAMES[impl], "half2", runs_median(&res[impl], per, h, 2 * h));
    if (impl == IMPL_SFV && both) {
        emit(o, variant, size, IMPL_NAMES[impl], "paired_half1", paired_ratio(&res[0], &res[1], 0, h));
        emit(o, variant, size, IMPL_NAMES[impl], "paired_half2", paired_ratio(&res[0], &res[1], h, 2 * h));
    }
}

typedef struct sides {
    lib_side sfv;
    raw_side raw;
    bool have[2];
} sides;

/* One run of one implementation: the client's part. Latency samples go to res->us. */
static void client_run(sides *sd, const options *o, int fd, int impl, size_t size, uint32_t iters, unsigned batch,
                       bool record, impl_result *res, uint64_t *scratch) {
    point p = {(uint32_t)impl, (uint32_t)size, iters, batch, record, 0};
    span sp;
    point_send(fd, &p);
    /* the clock starts when the server says it is ready (inside), and stops here */
    if (o->s.test == TEST_LAT) {
        if (impl == IMPL_SFV) lib_lat(&sd->sfv, o->s.op, size, iters, true, fd, scratch, &sp);
        else raw_lat(&sd->raw, o->s.op, size, iters, true, fd, scratch, o->s.inline_size, &sp);
    } else {
        if (impl == IMPL_SFV) lib_bw(&sd->sfv, &o->s, size, iters, batch, true, fd, &sp);
        else raw_bw(&sd->raw, &o->s, size, iters, batch, true, fd, &sp);
    }
    span_stop(&sp);
    send_byte(fd, 'E');
    expect_byte(fd, 'D');
    if (!record) return;
    if (o->s.test == TEST_LAT) {
        double k = span_us_per_tick(&sp);
        /* send and write ping-pongs report half the round trip, as perftest does */
        if (o->s.op != OP_READ) k /= 2;
        size_t first = res->n;
        for (uint32_t i = 0; i < iters; i++) res->us[res->n++] = (double)scratch[i] * k;
        if (res->nruns < MAX_RUNS) { /* the run's median, from a copy (outside the timed loop) */
            double *tmp = malloc(iters * sizeof *tmp);
            if (!tmp) die("out of memory");
            memcpy(tmp, res->us + first, iters * sizeof *tmp);
            res->run[res->nruns++] = median_of(tmp, iters);
            free(tmp);
        }
        if (o->dump) {
            static unsigned run;
            run++;
            for (uint32_t i = 0; i < iters; i++)
                fprintf(o->dump, "%s,%zu,%u,%.3f\n", IMPL_NAMES[impl], size, run, (double)scratch[i] * k);
        }
    }
    if (o->s.test != TEST_LAT && res->nruns < MAX_RUNS && sp.ns1 > sp.ns0)
        res->run[res->nruns++] = (double)iters / ((double)(sp.ns1 - sp.ns0) / 1e9);
    res->seconds += (double)(sp.ns1 - sp.ns0) / 1e9;
    res->cpu += sp.cpu1 - sp.cpu0;
    res->ops += iters;
    res->allocs += sp.a1 - sp.a0;
}

static void server_run(sides *sd, const session *ss, int fd, const point *p) {
    if (p->impl > IMPL_RAW || !sd->have[p->impl] || p->size > ss->max_size || p->batch < 1 || p->batch > MAX_BATCH)
        die("bad run request from the client");
    if (ss->test == TEST_LAT) {
        if (p->impl == IMPL_SFV) lib_lat(&sd->sfv, ss->op, p->size, p->iters, false, fd, NULL, NULL);
        else raw_lat(&sd->raw, ss->op, p->size, p->iters, false, fd, NULL, ss->inline_size, NULL);
    } else {
        if (p->impl == IMPL_SFV) lib_bw(&sd->sfv, ss, p->size, p->iters, p->batch, false, fd, NULL);
        else raw_bw(&sd->raw, ss, p->size, p->iters, p->batch, false, fd, NULL);
    }
    expect_byte(fd, 'E');
    send_byte(fd, 'D');
}

/* Opens what the session needs and connects it to the peer over fd. */
static void sides_connect(sides *sd, const session *ss, const options *o, int fd, bool client) {
    uint8_t mine[WIRE_SIZE + RAW_WIRE_SIZE], theirs[WIRE_SIZE + RAW_WIRE_SIZE];
    memset(sd, 0, sizeof *sd);
    memset(mine, 0, sizeof mine);
    sd->have[IMPL_SFV] = (ss->impls & 1u << IMPL_SFV) != 0;
    sd->have[IMPL_RAW] = (ss->impls & 1u << IMPL_RAW) != 0;
    if (sd->have[IMPL_SFV]) {
        lib_side_open(&sd->sfv, o->device, o->gid, ss);
        lib_side_wire(&sd->sfv, mine);
    }
    if (sd->have[IMPL_RAW]) {
        raw_side_open(&sd->raw, o->device, o->gid, ss);
        sd->raw.timeout_ms = 60000;
        raw_side_wire(&sd->raw, mine + WIRE_SIZE);
    }
    /* The server connects before it answers, so the client never sends to a QP not ready. */
    if (client && !write_all(fd, mine, sizeof mine)) die("endpoint exchange failed");
    if (!read_all(fd, theirs, sizeof theirs)) die("endpoint exchange failed");
    if (sd->have[IMPL_SFV]) lib_side_connect(&sd->sfv, theirs);
    if (sd->have[IMPL_RAW]) raw_side_connect(&sd->raw, theirs + WIRE_SIZE);
    if (!client && !write_all(fd, mine, sizeof mine)) die("endpoint exchange failed");
}

static void sides_close(sides *sd) {
    if (sd->have[IMPL_SFV]) lib_side_close(&sd->sfv);
    if (sd->have[IMPL_RAW]) raw_side_close(&sd->raw);
}

static int run_server(options *o) {
    char line[256];
    size_t n = 0;
    session ss;
    sides sd;
    point p;
    int fd = tcp_listen_accept(o->port);
    g_role = "sfv_bench server";
    if (fd < 0) die("listen/accept on port %d: %s", o->port, strerror(errno));
    while (n + 1 < sizeof line) { /* the session line */
        if (!read_all(fd, &line[n], 1)) die("control connection closed");
        if (line[n++] == '\n') break;
    }
    line[n] = 0;
    if (!session_parse(line, &ss)) die("bad session line: %s", line);
    g_echo_delay_us = ss.echo_delay_us;
    sides_connect(&sd, &ss, o, fd, false);
    while (point_recv(fd, &p) && !p.end) server_run(&sd, &ss, fd, &p);
    sides_close(&sd);
    close(fd);
    return 0;
}

/* Iterations for one size: fixed (-n), or what fills --time seconds per implementation at the
   speed the warm-up showed; a multiple of 4 * rounds * batch so the A-B-B-A rounds split it
   evenly. */
static uint32_t plan_iters(const options *o, double warm_seconds_per_op, unsigned batch) {
    double n = o->iters ? o->iters : (warm_seconds_per_op > 0 ? o->time_s / warm_seconds_per_op : o->max_iters);
    uint32_t q = 4 * (uint32_t)o->rounds * batch, it;
    if (!o->iters) {
        if (n < o->min_iters) n = o->min_iters;
        if (n > o->max_iters) n = o->max_iters;
    }
    it = (uint32_t)n / q * q;
    return it < q ? q : it;
}

static int run_client(options *o) {
    char line[256];
    const char *variant = o->variant ? o->variant : (o->s.event ? "event" : "busy");
    const int order[4] = {IMPL_SFV, IMPL_RAW, IMPL_RAW, IMPL_SFV}; /* A-B-B-A */
    const bool both = o->s.impls == 3;
    sides sd;
    uint64_t *scratch;
    int fd, si;
    g_role = "sfv_bench client";
    o->s.max_size = 0;
    for (si = 0; si < o->nsizes; si++)
        if (o->sizes[si] > o->s.max_size) o->s.max_size = o->sizes[si];
    fd = tcp_dial(o->host, o->port);
    if (fd < 0) die("cannot connect to %s:%d", o->host, o->port);
    session_format(&o->s, line, sizeof line);
    if (!write_all(fd, line, strlen(line))) die("control connection: write failed");
    sides_connect(&sd, &o->s, o, fd, true);
    scratch = calloc((size_t)o->max_iters + (size_t)o->iters + 64, sizeof *scratch);
    if (!scratch) die("out of memory");
    for (si = 0; si < o->nsizes; si++) {
        const size_t size = o->sizes[si];
        unsigned batch = o->s.test == TEST_BW ? (unsigned)o->batch : 1;
        impl_result res[2];
        double warm = 0;
        uint32_t iters, per_run, rounds;
        int impl, b;
        memset(res, 0, sizeof res);
        /* warm-up: each implementation once; its speed sizes the measured runs */
        for (impl = 0; impl < 2; impl++) {
            span sp;
            uint32_t wn = (uint32_t)o->warmup;
            if (o->s.test == TEST_BW && wn > (16u << 20) / size) wn = (uint32_t)((16u << 20) / size); /* 16 MiB at most */
            wn = wn / batch * batch;
            if (!sd.have[impl] || wn == 0) continue;
            span_start(&sp);
            client_run(&sd, o, fd, impl, size, wn, batch, false, NULL, scratch);
            span_stop(&sp);
            warm += (double)(sp.ns1 - sp.ns0) / 1e9 / wn / (both ? 2 : 1);
        }
        iters = plan_iters(o, warm, batch);
        rounds = (uint32_t)o->rounds;
        if (o->block_ms > 0 && warm > 0) { /* short runs: the machine's drift hits both alike */
            double r = (double)iters * warm * 1000.0 / (2.0 * o->block_ms);
            rounds = r < 1 ? 1 : r > 512 ? 512 : (uint32_t)r;
        }
        per_run = iters / ((both ? 2 : 4) * rounds) / batch * batch;
        if (per_run < batch) per_run = batch;
        if (per_run * (both ? 2 : 4) * rounds > iters) iters = per_run * (both ? 2 : 4) * rounds;
        for (impl = 0; impl < 2; impl++) {
            res[impl].us = calloc(iters, sizeof(double));
            if (!res[impl].us) die("out of memory");
        }
        if (per_run > (uint32_t)o->max_iters + (uint32_t)o->iters) die("too many iterations");
        for (b = 0; b < 4 * (int)rounds; b++) {
            impl = both ? order[b % 4] : (sd.have[IMPL_SFV] ? IMPL_SFV : IMPL_RAW);
            client_run(&sd, o, fd, impl, size, per_run, batch, true, &res[impl], scratch);
        }
        for (impl = 0; impl < 2; impl++) {
            impl_result *r = &res[impl];
            const char *name = IMPL_NAMES[impl];
            if (!sd.have[impl]) continue;
            if (o->s.test == TEST_LAT) {
                double sum = 0;
                size_t p99 = (size_t)((double)r->n * 0.99 + 0.999999);
                qsort(r->us, r->n, sizeof *r->us, cmp_double);
                for (size_t i = 0; i < r->n; i++) sum += r->us[i];
                emit(o, variant, size, name, "median_us",
                     r->n % 2 ? r->us[r->n / 2] : (r->us[r->n / 2 - 1] + r->us[r->n / 2]) / 2);
                if (impl == IMPL_SFV && both) emit(o, variant, size, name, "median_ratio_paired", paired_ratio(&res[0], &res[1], 0, (int)rounds));
                emit(o, variant, size, name, "p99_us", r->us[p99 > 0 ? p99 - 1 : 0]);
                emit(o, variant, size, name, "mean_us", sum / (double)r->n);
            } else {
                emit(o, variant, size, name, "mib_s", (double)r->ops * (double)size / 1048576.0 / r->seconds);
                emit(o, variant, size, name, "kmsg_s", (double)r->ops / 1000.0 / r->seconds);
                if (impl == IMPL_SFV && both) emit(o, variant, size, name, "rate_ratio_paired", paired_ratio(&res[0], &res[1], 0, (int)rounds));
            }
            if (o->s.test == TEST_BW) emit(o, variant, size, name, "depth", o->s.depth);
            emit(o, variant, size, name, "cpu_us_per_op", r->cpu * 1e6 / (double)r->ops);
            emit(o, variant, size, name, "allocs_per_op", (double)r->allocs / (double)r->ops);
            emit(o, variant, size, name, "iters", (double)r->ops);
            emit(o, variant, size, name, "runs", (double)(both ? 2 : 4) * rounds);
            emit_halves(o, variant, size, res, impl, both, (int)rounds);
        }
        free(res[IMPL_SFV].us);
        free(res[IMPL_RAW].us);
    }
    {
        point end = {0, 0, 0, 1, 0, 1};
        point_send(fd, &end);
    }
    sides_close(&sd);
    free(scratch);
    close(fd);
    return 0;
}

/* ---- main -------------------------------------------------------------------------------- */
static void usage(void) {
    fprintf(stderr, "usage: sfv_bench [-d DEV] [-p PORT] [-x GID] [--test lat|bw|cost] [--op send|write|write_imm|read]\n"
                    "                 [--impl sfv|raw|both|hand|inject] [--sizes LIST] [-n ITERS | --time SEC] [--warmup N]\n"
                    "                 [--wait busy|event] [--inline N] [--depth N] [--rx-depth N] [--batch N]\n"
                    "                 [--variant NAME] [--rounds R | --block-ms MS] [--dump FILE] [--settle-us N]\n"
                    "                 [HOST]   (no HOST: be the server)\n");
    exit(2);
}

int main(int argc, char **argv) {
    static const struct option longs[] = {
        {"test", 1, 0, 'T'}, {"op", 1, 0, 'o'}, {"impl", 1, 0, 'i'}, {"sizes", 1, 0, 's'},
        {"iters", 1, 0, 'n'}, {"time", 1, 0, 't'}, {"warmup", 1, 0, 'w'}, {"wait", 1, 0, 'W'},
        {"inline", 1, 0, 'I'}, {"depth", 1, 0, 'D'}, {"rx-depth", 1, 0, 'R'}, {"batch", 1, 0, 'b'},
        {"variant", 1, 0, 'v'}, {"min-iters", 1, 0, 'm'}, {"max-iters", 1, 0, 'M'}, {"settle-us", 1, 0, 'S'},
        {"rounds", 1, 0, 'r'}, {"dump", 1, 0, 'X'}, {"block-ms", 1, 0, 'B'}, {"echo-delay-us", 1, 0, 'E'},
        {0, 0, 0, 0}};
    options o;
    int c;
    memset(&o, 0, sizeof o);
    o.port = 18600;
    o.gid = 1;
    o.s.test = TEST_LAT;
    o.s.op = OP_SEND;
    o.s.impls = 3;
    o.s.depth = 128;
    o.s.rx_depth = 512;
    o.batch = 1;
    o.warmup = 100;
    o.time_s = 1.0;
    o.min_iters = 200;
    o.max_iters = 20000;
    o.settle_us = 1000;
    o.rounds = 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while ((c = getopt_long(argc, argv, "d:p:x:n:h", longs, NULL)) != -1) {
        switch (c) {
        case 'd': o.device = optarg; break;
        case 'p': o.port = atoi(optarg); break;
        case 'x': o.gid = atoi(optarg); break;
        case 'T':
            if (!(o.s.test = name_index(TEST_NAMES, 4, optarg))) usage();
            break;
        case 'o':
            if (!(o.s.op = name_index(OP_NAMES, 5, optarg))) usage();
            break;
        case 'i':
            o.s.impls = strcmp(optarg, "sfv") == 0 ? 1 : strcmp(optarg, "raw") == 0 ? 2 : strcmp(optarg, "both") == 0 ? 3
                      : strcmp(optarg, "hand") == 0 ? 4 : strcmp(optarg, "inject") == 0 ? 8 : strcmp(optarg, "handinject") == 0 ? 16 : strcmp(optarg, "handbuilt") == 0 ? 32 : 0;
            if (!o.s.impls) usage();
            break;
        case 's': {
            char *tok, *save = NULL;
            for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (o.nsizes == MAX_SIZES) die("too many sizes");
                o.sizes[o.nsizes++] = parse_size(tok);
            }
            break;
        }
        case 'n': o.iters = atoi(optarg); break;
        case 't': o.time_s = atof(optarg); break;
        case 'w': o.warmup = atoi(optarg); break;
        case 'W':
            if (strcmp(optarg, "event") == 0) o.s.event = true;
            else if (strcmp(optarg, "busy") != 0) usage();
            break;
        case 'I': o.s.inline_size = (unsigned)atoi(optarg); break;
        case 'D': o.s.depth = (unsigned)atoi(optarg); break;
        case 'R': o.s.rx_depth = (unsigned)atoi(optarg); break;
        case 'b': o.batch = atoi(optarg); break;
        case 'v': o.variant = optarg; break;
        case 'm': o.min_iters = atoi(optarg); break;
        case 'M': o.max_iters = atoi(optarg); break;
        case 'S': o.settle_us = atoi(optarg); break;
        case 'r': o.rounds = atoi(optarg); break;
        case 'B': o.block_ms = atoi(optarg); break;
        case 'E': o.s.echo_delay_us = (unsigned)atoi(optarg); break;
        case 'X':
            if (!(o.dump = fopen(optarg, "w"))) die("cannot write %s", optarg);
            break;
        default: usage();
        }
    }
    if (optind + 1 < argc) usage();
    if (optind < argc) o.host = argv[optind];
    if (o.batch < 1 || o.batch > MAX_BATCH || o.iters < 0 || o.warmup < 0 || o.min_iters < 1 || o.max_iters < o.min_iters ||
        o.rounds < 1 || o.rounds > 64 || o.block_ms < 0)
        usage();
    if (o.s.test == TEST_COST) return run_cost(&o);
    if (o.s.impls & (1u << IMPL_HAND | 1u << IMPL_INJECT | 1u << IMPL_HAND_INJECT | 1u << IMPL_HAND_BUILT)) die("--impl hand, inject, handinject and handbuilt: the cost test only");
    if (!o.host) return run_server(&o);
    if (!o.nsizes) o.sizes[o.nsizes++] = 8;
    if (o.s.test == TEST_BW && (o.s.depth % (unsigned)o.batch || o.s.rx_depth % (unsigned)o.batch))
        die("--depth and --rx-depth must be multiples of --batch");
    return run_client(&o);
}
